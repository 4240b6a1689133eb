"""`harness export ENTRY --variant V`: one standalone script for a bug report.

The reproducer's ``# reprokit:begin`` ... ``# reprokit:end`` block (the lines that find and
import repros/reprokit.py) is replaced by the helpers themselves, without their module
docstring, ``__future__`` import, ``__all__`` and ``__main__`` guard; the script's command
line then runs variant V by default. The result needs torch (and lightning where the
variant uses it) and nothing else.
"""

from __future__ import annotations

import ast
from pathlib import Path

from harness.errors import InputError
from harness.spec.declared import parse_source
from harness.spec.entries import Entry

__all__ = ["ExportError", "export_script"]

BEGIN = "# reprokit:begin"
END = "# reprokit:end"


class ExportError(InputError):
    """The variant cannot be exported (unknown, not written, its run() not found)."""


def _kit_body(kit: Path) -> str:
    """reprokit.py without what only makes sense in a module of its own."""
    text = kit.read_text(encoding="utf-8")
    tree = parse_source(text, str(kit))
    drop: list[tuple[int, int]] = []
    for i, node in enumerate(tree.body):
        end = node.end_lineno or node.lineno
        docstring = i == 0 and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
        future = isinstance(node, ast.ImportFrom) and node.module == "__future__"
        dunder_all = isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        )
        guard = isinstance(node, ast.If) and "__name__" in ast.unparse(node.test)
        if docstring or future or dunder_all or guard:
            drop.append((node.lineno, end))
    lines = text.splitlines()
    kept = [
        line for number, line in enumerate(lines, 1) if not any(a <= number <= b for a, b in drop)
    ]
    return "\n".join(kept).strip("\n")


def _with_defaults(tail: str, repro: Path, variant: str, precision: str) -> str:
    """The reproducer's ``main(run, VARIANTS, __doc__, ...)`` call with the export's
    defaults as its last keywords, in place of any it set itself (a keyword given twice, or
    one placed before a positional argument such as ``sys.argv[1:]``, is a SyntaxError)."""
    tree = parse_source(tail, str(repro))
    call = next(
        (
            n
            for n in ast.walk(tree)
            if isinstance(n, ast.Call)
            and isinstance(n.func, ast.Name)
            and n.func.id == "main"
            and [ast.unparse(a) for a in n.args[:3]] == ["run", "VARIANTS", "__doc__"]
        ),
        None,
    )
    if call is None or call.end_lineno is None or call.end_col_offset is None:
        raise ExportError(
            f"{repro}: its __main__ block must call main(run, VARIANTS, __doc__, ...)"
        )
    keywords = [k for k in call.keywords if k.arg not in ("default_variant", "default_precision")]
    keywords += [
        ast.keyword("default_variant", ast.Constant(variant)),
        ast.keyword("default_precision", ast.Constant(precision)),
    ]
    text = ast.unparse(ast.Call(func=call.func, args=call.args, keywords=keywords))
    # ast positions are UTF-8 byte offsets within their line
    data = tail.encode("utf-8")
    starts = [0]
    for line in data.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    begin = starts[call.lineno - 1] + call.col_offset
    end = starts[call.end_lineno - 1] + call.end_col_offset
    return (data[:begin] + text.encode("utf-8") + data[end:]).decode("utf-8")


def export_script(entry: Entry, variant: str, kit: Path) -> str:
    try:
        v = entry.variant(variant)
    except KeyError as exc:
        names = ", ".join(x.name for x in entry.variants)
        raise ExportError(f"{entry.id} has no variant {variant!r}; its variants: {names}") from exc
    if not v.written:
        raise ExportError(f"{entry.id}::{variant} is not written yet (NOT_WRITTEN in repro.py)")
    text = entry.repro.read_text(encoding="utf-8")
    lines = text.splitlines()
    begin = next((i for i, ln in enumerate(lines) if ln.startswith(BEGIN)), None)
    end = next((i for i, ln in enumerate(lines) if ln.startswith(END)), None)
    if begin is None or end is None or end < begin:
        raise ExportError(
            f"{entry.repro}: no '{BEGIN}' ... '{END}' block around the reprokit import "
            "(docs/reference/entry-yaml.md, the reproducer convention)"
        )
    tail = "\n".join(lines[end + 1 :])
    precision = "fp16" if "fp16" in v.precisions else v.precisions[0]
    tail = _with_defaults(tail, entry.repro, variant, precision)
    header = (
        f"# Exported by `python -m harness export {entry.id} --variant {variant}`: the\n"
        "# reproducer with its shared helpers inlined; needs only torch (and lightning where\n"
        f"# it uses it). Run: python this.py  (variant {variant}, cpu, {precision}; --help)\n"
    )
    body = (
        "# -- shared helpers, inlined from repros/reprokit.py "
        + "-" * 36
        + "\n\n"
        + _kit_body(kit)
        + "\n\n# -- end of the shared helpers "
        + "-" * 58
        + "\n"
    )
    return header + "\n".join(lines[:begin]) + "\n" + body + tail + "\n"
