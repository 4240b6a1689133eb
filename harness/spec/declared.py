"""What a repro.py declares, read statically (``ast``, no import, no torch).

A reproducer maps each variant's name to its function in a module-level dict literal
``VARIANTS`` ({"baseline": baseline, ...}; a function defined at module level in the same
file, taking (device, precision)), or to None while the variant is not written (see
docs/reference/entry-yaml.md). The host checks it against entry.yaml when an entry loads, so that a
typo is an error with file:line, never a result; export follows a variant's function from it.

It also collects the postcondition names the reproducer can report, as far as a static
read can tell: every string literal in the file, and the templates of names it builds (an
f-string, or a string literal followed by ``+``). entry.yaml's ``fails_as`` must name
postconditions among them.
"""

from __future__ import annotations

import ast
import functools
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.errors import HarnessError

__all__ = ["Declared", "DeclaredError", "parse_source", "read_declared"]


class DeclaredError(HarnessError):
    """What a repro.py declares (VARIANTS) cannot be read."""


@dataclass(frozen=True)
class Declared:
    path: Path
    variants: dict[str, int]  # name -> line of its key in VARIANTS
    not_written: dict[str, int]  # name -> line, for those VARIANTS maps to None
    variants_line: int
    # every string literal of the file, and the names it builds from a template (an
    # f-string, a literal followed by `+`), each as a regular expression: what run() can
    # name a postcondition
    literals: frozenset[str] = field(default=frozenset(), repr=False)
    templates: tuple[str, ...] = field(default=(), repr=False)

    def can_report(self, name: str) -> bool:
        """Whether run() can return a postcondition called ``name``: it is written in the
        file as a string literal, or fits a template the file builds names from."""
        return name in self.literals or any(re.fullmatch(t, name) for t in self.templates)

    # the reproducer imports lightning (or calls reprokit's lightning helpers) somewhere; one
    # that does not measures the same thing with every lightning of a torch release
    uses_lightning: bool = True
    functions: dict[str, str] = field(default_factory=dict)  # variant -> its function's name


def _assigned(tree: ast.Module, name: str) -> tuple[ast.expr, int] | None:
    found = None
    for node in tree.body:
        if isinstance(node, ast.Assign):
            targets = node.targets
            value = node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            found = (value, node.lineno)
    return found


def _variants(
    node: ast.expr, tree: ast.Module, path: Path
) -> tuple[dict[str, int], dict[str, str], dict[str, int]]:
    """VARIANTS = {"name": function_or_None, ...} -> (name -> line, name -> function name,
    name -> line of those not written)."""
    if not isinstance(node, ast.Dict):
        raise DeclaredError(
            path, node.lineno, 'VARIANTS must be a dict literal {"name": function, ...}'
        )
    defined = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    lines: dict[str, int] = {}
    functions: dict[str, str] = {}
    not_written: dict[str, int] = {}
    # no zip(strict=): the harness runs on Python 3.9 too (tox); a Dict node pairs them
    for key, value in zip(node.keys, node.values):  # noqa: B905
        if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
            line = key.lineno if key is not None else node.lineno
            raise DeclaredError(path, line, "VARIANTS: every name must be a string literal")
        name = key.value
        if name in lines:
            raise DeclaredError(
                path, key.lineno, f"VARIANTS: {name!r} twice (first at line {lines[name]})"
            )
        lines[name] = key.lineno
        if isinstance(value, ast.Constant) and value.value is None:
            not_written[name] = key.lineno
            continue
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            raise DeclaredError(
                path,
                value.lineno,
                f"VARIANTS[{name!r}] is a string: a variant's description lives in entry.yaml; "
                "map the name to the variant's function (None while it is not written)",
            )
        function = defined.get(value.id) if isinstance(value, ast.Name) else None
        if function is None:
            raise DeclaredError(
                path,
                value.lineno,
                f"VARIANTS[{name!r}] must name a function defined at module level in "
                f"{path.name} (or be None while it is not written), not {ast.unparse(value)!r}",
            )
        params = function.args
        if params.posonlyargs or len(params.args) != 2 or params.vararg or params.kwonlyargs:
            raise DeclaredError(
                path,
                function.lineno,
                f"variant function {function.name}() must take (device, precision)",
            )
        functions[name] = function.name
    return lines, functions, not_written


def _names(nodes: Sequence[ast.AST]) -> tuple[frozenset[str], tuple[str, ...]]:
    """The string literals of a module (``nodes``: all of them, ``ast.walk``'s), and the
    templates of strings it builds: an f-string (its placeholders match anything) or
    ``"literal" + ...`` (anything may follow)."""
    literals: set[str] = set()
    templates: set[str] = set()
    in_fstring: set[int] = set()
    for node in nodes:
        if isinstance(node, ast.JoinedStr):
            parts = []
            for value in node.values:
                in_fstring.add(id(value))
                if isinstance(value, ast.Constant) and isinstance(value.value, str):
                    parts.append(re.escape(value.value))
                else:
                    parts.append(".+")
            templates.add("".join(parts))
        elif (
            isinstance(node, ast.BinOp)
            and isinstance(node.op, ast.Add)
            and isinstance(node.left, ast.Constant)
            and isinstance(node.left.value, str)
        ):
            templates.add(re.escape(node.left.value) + ".+")
    for node in nodes:
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in in_fstring
        ):
            literals.add(node.value)
    return frozenset(literals), tuple(sorted(templates))


def parse_source(text: str, filename: str, **options: Any) -> ast.Module:
    """``ast.parse``, once more where CPython 3.11 raises "AST constructor recursion depth
    mismatch": its AST converter keeps its depth count per interpreter, not per thread
    (python/cpython#106905, fixed in 3.12), so another thread building an AST at the same
    moment (3.11's traceback module parses each line it marks with carets) upsets the
    count. Parsing again is exact: the text is the same."""
    for attempt in range(3):
        try:
            return ast.parse(text, filename=filename, **options)
        except SystemError as exc:
            if "recursion depth mismatch" not in str(exc) or attempt == 2:
                raise
    raise AssertionError("unreachable")


def read_declared(path: str | os.PathLike[str]) -> Declared:
    """What the repro.py at ``path`` declares. The file is read each time; what its text
    declares is worked out once per text (``check`` and ``export`` ask for one file's
    once per variant): the Declared is shared, and no caller changes it."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise DeclaredError(path, None, f"cannot read: {exc}") from exc
    return _declared(path, text)


@functools.lru_cache(maxsize=256)
def _declared(path: Path, text: str) -> Declared:
    try:
        tree = parse_source(text, str(path))
    except SyntaxError as exc:
        raise DeclaredError(path, exc.lineno, f"not valid Python: {exc.msg}") from exc
    variants = _assigned(tree, "VARIANTS")
    if variants is None:
        raise DeclaredError(
            path,
            None,
            "no module-level VARIANTS literal: map every variant to its function, "
            'e.g. VARIANTS = {"baseline": baseline}',
        )
    declared, functions, not_written = _variants(variants[0], tree, path)
    nodes = list(ast.walk(tree))  # walked once (ast.walk is the cost), read twice
    literals, templates = _names(nodes)
    return Declared(
        path,
        declared,
        not_written,
        variants[1],
        literals,
        templates,
        _imports_lightning(nodes),
        functions,
    )


LIGHTNING_MODULES = frozenset(
    {"lightning", "pytorch_lightning", "lightning_fabric", "lightning_lite"}
)
# repros/reprokit.py's helpers that import lightning for the reproducer
LIGHTNING_HELPERS = frozenset({"import_lightning", "lightning_submodule"})


def uses_lightning(tree: ast.Module) -> bool:
    """Whether a reproducer's code imports lightning anywhere (module level or inside a
    function), by an import statement, ``importlib.import_module``/``__import__`` with a
    literal name, or reprokit's lightning helpers."""
    return _imports_lightning(ast.walk(tree))


def _imports_lightning(nodes: Iterable[ast.AST]) -> bool:
    for node in nodes:
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [node.module or ""] if node.level == 0 else []
            names += [a.name for a in node.names]  # from reprokit import import_lightning
        elif isinstance(node, ast.Name):
            names = [node.id]
        elif isinstance(node, ast.Attribute):
            names = [node.attr]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            names = [node.value]  # import_module("lightning.fabric"), __import__("lightning")
        else:
            continue
        for name in names:
            if name.split(".")[0] in LIGHTNING_MODULES or name in LIGHTNING_HELPERS:
                return True
    return False
