"""`harness export ENTRY --variant V`: one standalone script for a bug report.

The reproducer's ``# reprokit:begin`` ... ``# reprokit:end`` block (the lines that find and
import repros/reprokit.py) is replaced by the helpers themselves, without their module
docstring, ``__future__`` import, ``__all__`` and ``__main__`` guard; the script's command
line then runs variant V by default. The result needs torch (and lightning where the
variant uses it) and nothing else.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from harness.entries import Entry

__all__ = ["ExportError", "export_script"]

BEGIN = "# reprokit:begin"
END = "# reprokit:end"
_MAIN_CALL = re.compile(r"\bmain\(\s*run,\s*VARIANTS,\s*__doc__")


class ExportError(Exception):
    pass


def _kit_body(kit: Path) -> str:
    """reprokit.py without what only makes sense in a module of its own."""
    text = kit.read_text(encoding="utf-8")
    tree = ast.parse(text, str(kit))
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
            "(docs/entry-format.md, the reproducer convention)"
        )
    tail = "\n".join(lines[end + 1 :])
    if not _MAIN_CALL.search(tail):
        raise ExportError(
            f"{entry.repro}: its __main__ block must call main(run, VARIANTS, __doc__, ...)"
        )
    precision = "fp16" if "fp16" in v.precisions else v.precisions[0]
    tail = _MAIN_CALL.sub(
        f"main(run, VARIANTS, __doc__, default_variant={variant!r}, "
        f"default_precision={precision!r}",
        tail,
        count=1,
    )
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
