"""`harness export ENTRY --variant V`: one variant as a standalone script for a bug report.

The script holds the variant's function and what it calls, followed statically (``ast`` for
the statements, ``symtable`` for the names a function body takes from its module; nothing
is imported): the definitions of repro.py it reaches, the helpers of repros/reprokit.py it
reaches (in place of ``from reprokit import ...``) and the imports they use, then a
``__main__`` block that runs the variant (``--device``, ``--precision``, defaulting to the
variant's own) and prints its postconditions. An exception propagates with its traceback,
which is what a bug report wants. The result needs torch (and lightning where the variant
uses it) and nothing else.
"""

from __future__ import annotations

import ast
import functools
import json
import re
import shlex
import symtable
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from harness.errors import InputError
from harness.spec.declared import parse_source, read_declared
from harness.spec.entries import Entry, Variant

__all__ = ["ExportError", "export_script", "reached"]

KIT = "reprokit"
# the names the script's __main__ block calls, besides the variant's function
MAIN_NAMES = frozenset({"argparse", "sys", "report"})
_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
_OWN_SCOPES = (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


class ExportError(InputError):
    """The variant cannot be exported (unknown, or not written)."""


@dataclass
class _Module:
    """One source file's top-level statements: what each binds and which globals it uses."""

    lines: list[str]
    body: list[ast.stmt]
    binds: dict[str, list[int]] = field(default_factory=dict)  # name -> statement indices
    uses: list[set[str]] = field(default_factory=list)  # per statement
    from_kit: set[str] = field(default_factory=set)  # what `from reprokit import` brings

    @classmethod
    def read(cls, path: Path) -> _Module:
        """The file's statements. The file is read each time, parsed once per text (a
        check or export of every variant reads repro.py and reprokit.py once a variant):
        the module is shared, and no caller changes it."""
        return cls._of(path, path.read_text(encoding="utf-8"))

    @classmethod
    @functools.lru_cache(maxsize=256)
    def _of(cls, path: Path, text: str) -> _Module:
        module = cls(text.splitlines(), list(parse_source(text, str(path)).body))
        tables = {
            (t.get_name(), t.get_lineno()): t
            for t in symtable.symtable(text, str(path), "exec").get_children()
        }
        for index, node in enumerate(module.body):
            if isinstance(node, ast.ImportFrom) and node.module == KIT and node.level == 0:
                module.from_kit.update(a.asname or a.name for a in node.names)
            else:
                for name in _bound(node):
                    module.binds.setdefault(name, []).append(index)
            module.uses.append(_uses(node, tables))
        return module

    def _start(self, index: int) -> int:
        """The statement's first line: its decorators and the comments right above it."""
        node = self.body[index]
        start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
        while start > 1 and self.lines[start - 2].lstrip().startswith("#"):
            start -= 1
        return start

    def source(self, index: int, plain: frozenset[str] | None = None) -> str:
        """The statement's text. ``plain`` (for reprokit's helpers): without docstrings, and
        without the imports of these modules inside a function (the script imports them)."""
        node = self.body[index]
        lines = dict(enumerate(self.lines[: node.end_lineno], 1))
        if plain is not None and isinstance(node, _DEFS):
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                for number in range(first.lineno, (first.end_lineno or first.lineno) + 1):
                    del lines[number]
                if len(node.body) == 1:
                    lines[first.lineno] = " " * first.col_offset + "pass"
            for statement in node.body:
                if isinstance(statement, ast.Import) and {a.name for a in statement.names} <= plain:
                    del lines[statement.lineno]
                    if not self.lines[statement.lineno].strip():  # the blank line after it
                        lines.pop(statement.lineno + 1, None)
        return "\n".join(lines[n] for n in sorted(lines) if n >= self._start(index))

    def between(self, before: int, after: int) -> str:
        """What separates two kept statements: the blank lines between them (at most two)
        where they are neighbours, two otherwise."""
        if after != before + 1:
            return "\n\n\n"
        end = self.body[before].end_lineno or self.body[before].lineno
        gap = self.lines[end : self._start(after) - 1]
        return "\n" * (1 + min(2, sum(1 for line in gap if not line.strip())))


def _module_scope(node: ast.AST) -> Iterator[ast.AST]:
    """The nodes of ``node`` evaluated in module scope: not inside a def, class, lambda or
    comprehension (scopes of their own), but a def's decorators and defaults, a class's bases."""
    yield node
    if isinstance(node, _DEFS):
        header = [*node.decorator_list, *getattr(node, "bases", [])]
        if not isinstance(node, ast.ClassDef):
            header += [*node.args.defaults, *node.args.kw_defaults]
        for part in header:
            if part is not None:
                yield from _module_scope(part)
        return
    for child in ast.iter_child_nodes(node):
        if not isinstance(child, _OWN_SCOPES):
            yield from _module_scope(child)


def _bound(node: ast.stmt) -> set[str]:
    """The module-level names a top-level statement binds."""
    names = set()
    for child in _module_scope(node):
        if isinstance(child, ast.Name) and isinstance(child.ctx, ast.Store):
            names.add(child.id)
        elif isinstance(child, _DEFS):
            names.add(child.name)
        elif isinstance(child, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in child.names}
    return names


def _uses(node: ast.stmt, tables: dict[tuple[str, int], symtable.SymbolTable]) -> set[str]:
    """The global names a top-level statement refers to: in module scope, and inside each
    def and class it holds (symtable: a name a function assigns is its own); every name of
    a lambda or comprehension at module level."""
    names = set()
    for child in _module_scope(node):
        if isinstance(child, ast.Name):
            names.add(child.id)
        table = tables.get((child.name, child.lineno)) if isinstance(child, _DEFS) else None
        if table is not None:
            names |= _globals(table)
        for scope in ast.iter_child_nodes(child):
            if isinstance(scope, _OWN_SCOPES) or (isinstance(scope, _DEFS) and table is None):
                names |= {n.id for n in ast.walk(scope) if isinstance(n, ast.Name)}
    return names


def _globals(table: symtable.SymbolTable) -> set[str]:
    names = {s.get_name() for s in table.get_symbols() if s.is_global() and s.is_referenced()}
    for child in table.get_children():
        names |= _globals(child)
    return names


def _is_main_guard(node: ast.stmt) -> bool:
    return isinstance(node, ast.If) and "__name__" in ast.unparse(node.test) and not node.orelse


def _body(module: _Module, index: int) -> str:
    """The statements inside a top-level block, dedented."""
    node = module.body[index]
    start, end = node.body[0].lineno, node.body[-1].end_lineno
    return textwrap.dedent("\n".join(module.lines[start - 1 : end]))


def _always(node: ast.stmt, index: int) -> bool:
    """A statement of repro.py the script keeps whatever the variant: one that binds no
    name (``torch.backends.cudnn.benchmark = False``), other than the docstring, the
    ``__future__`` and reprokit imports and a ``__main__`` block."""
    if _bound(node) or (isinstance(node, ast.ImportFrom) and node.module in ("__future__", KIT)):
        return False
    if index == 0 and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
        return False
    return not _is_main_guard(node)


def _closure(repro: _Module, kit: _Module, roots: set[str]) -> tuple[set[int], set[int]]:
    """The statements of repro.py and of reprokit.py that ``roots`` reach."""
    kept: tuple[set[int], set[int]] = (set(), set())
    work = [(repro, name) for name in roots]
    for index, node in enumerate(repro.body):
        if _always(node, index):
            kept[0].add(index)
            work += [(repro, used) for used in repro.uses[index]]
    while work:
        module, name = work.pop()
        if (
            module is repro
            and name not in repro.binds
            and (name in repro.from_kit or name in roots)
        ):
            module = kit  # `from reprokit import name`, or what the __main__ block calls
        into = kept[0] if module is repro else kept[1]
        for index in module.binds.get(name, []):
            if index not in into:
                into.add(index)
                work += [(module, used) for used in module.uses[index]]
    return kept


def _imports(module: _Module, kept: set[int], wanted: set[str]) -> list[str]:
    """The import statements among ``kept``, each with only the names ``wanted``."""
    out = []
    for index in sorted(kept):
        node = module.body[index]
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a for a in node.names if (a.asname or a.name).split(".")[0] in wanted]
            if isinstance(node, ast.Import):
                out.append(ast.unparse(ast.Import(names=names)))
            else:
                out.append(ast.unparse(ast.ImportFrom(node.module, names, node.level)))
    return out


def _definitions(module: _Module, kept: set[int], plain: frozenset[str] | None) -> str:
    chunks: list[str] = []
    previous = None
    for index in sorted(kept):
        if isinstance(module.body[index], (ast.Import, ast.ImportFrom)):
            continue
        if previous is not None:
            chunks.append(module.between(previous, index))
        chunks.append(module.source(index, plain))
        previous = index
    return "".join(chunks)


def _is_stdlib(line: str) -> bool:
    return line.split()[1].split(".")[0] in sys.stdlib_module_names


_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff\u2028\u2029]")


def _docstring(entry: Entry, v: Variant, precision: str) -> str:
    about = textwrap.wrap(f"{v.name} ({v.kind}): {v.description}", 88)
    run = (
        f"python this.py [--device {'|'.join(v.devices)}] [--precision {'|'.join(v.precisions)}]"
        f" (default {v.devices[0]}, {precision})"
    )
    lines = [
        entry.title,
        "",
        *about,
        "",
        f"`python -m harness export {entry.id} --variant {v.name}`: this variant and the",
        f"shared helpers it calls. Run: {run}",
    ]
    requires = entry.requirements_for(v)
    if requires:  # version advice: what the variant installs beside torch and lightning
        lines.append("Install first: pip install " + " ".join(shlex.quote(r) for r in requires))
    text = "\n".join(lines).replace("\\", "\\\\").replace('"""', '\\"\\"\\"')
    # a character a source file cannot hold raw (NUL: the script did not compile), or
    # a terminal should not get, is written as its escape
    text = _UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
    return f'"""{text}\n"""'


def _main_block(function: str, entry: Entry, v: Variant, precision: str, first: str) -> str:
    """The script's command line: the variant's own devices and precisions and default,
    after ``first`` (the body of repro.py's own __main__ block, e.g. a worker it starts)."""
    label = json.dumps(f"{entry.id}, variant {v.name}")
    return (
        'if __name__ == "__main__":\n'
        + first
        + f"    parser = argparse.ArgumentParser(description={label})\n"
        f'    parser.add_argument("--device", default={json.dumps(v.devices[0])}, '
        f"choices={json.dumps(list(v.devices))})\n"
        f'    parser.add_argument("--precision", default={json.dumps(precision)}, '
        f"choices={json.dumps(list(v.precisions))})\n"
        f"    sys.exit(report({function}, **vars(parser.parse_args())))"
    )


def reached(entry: Entry, variant: str, kit_path: Path) -> tuple[list[ast.stmt], list[ast.stmt]]:
    """The top-level statements of repro.py, and of reprokit.py, that ``variant``'s function
    reaches (what its exported script holds, its ``__main__`` block aside); repro.py's alone
    where there is no reprokit.py (a folder of entries without it)."""
    function = read_declared(entry.repro).functions[variant]
    repro = _Module.read(entry.repro)
    kit = _Module.read(kit_path) if kit_path.is_file() else _Module([], [])
    in_repro, in_kit = _closure(repro, kit, {function})
    return [repro.body[i] for i in sorted(in_repro)], [kit.body[i] for i in sorted(in_kit)]


def export_script(entry: Entry, variant: str, kit_path: Path) -> str:
    try:
        v = entry.variant(variant)
    except KeyError as exc:
        names = ", ".join(x.name for x in entry.variants)
        raise ExportError(f"{entry.id} has no variant {variant!r}; its variants: {names}") from exc
    if not v.written:
        raise ExportError(f"{entry.id}::{variant} is not written yet (None in repro.py's VARIANTS)")
    function = read_declared(entry.repro).functions[variant]
    repro, kit = _Module.read(entry.repro), _Module.read(kit_path)
    precision = "fp16" if "fp16" in v.precisions else v.precisions[0]
    roots = {function} | MAIN_NAMES
    # repro.py's own __main__ block (repro.py run as a script by something it starts) runs
    # first in the script's: what it calls goes in too
    guards = [i for i, node in enumerate(repro.body) if _is_main_guard(node)]
    first = "".join(textwrap.indent(_body(repro, i), "    ") + "\n" for i in guards)
    roots |= set().union(*(repro.uses[i] for i in guards))
    in_repro, in_kit = _closure(repro, kit, roots)
    wanted = roots.union(*(repro.uses[i] for i in in_repro), *(kit.uses[i] for i in in_kit))
    imports = dict.fromkeys(_imports(kit, in_kit, wanted) + _imports(repro, in_repro, wanted))
    stdlib = sorted(line for line in imports if _is_stdlib(line))
    others = [line for line in imports if not _is_stdlib(line)]
    parts = [_docstring(entry, v, precision)]
    if any(isinstance(n, ast.ImportFrom) and n.module == "__future__" for n in repro.body):
        parts.append("from __future__ import annotations")
    parts.append("\n".join(stdlib) + ("\n\n" + "\n".join(others) if others else ""))
    # reprokit's helpers without their docstrings (the harness's contract, not the bug's) and
    # their own `import torch` where the script imports it
    plain = frozenset(line.split()[1] for line in imports if line.startswith("import "))
    for module, kept, strip in ((kit, in_kit, plain), (repro, in_repro, None)):
        text = _definitions(module, kept, strip)
        if text:
            parts.append("\n" + text)
    parts.append("\n" + _main_block(function, entry, v, precision, first))
    return "\n\n".join(parts) + "\n"
