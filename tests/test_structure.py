"""The shape of harness/ that a reader relies on: no function longer than a screen, and no
circle among its modules' imports (a lower floor never imports an upper one)."""

from __future__ import annotations

import ast
from pathlib import Path

HARNESS = Path(__file__).resolve().parents[1] / "harness"
MOST_LINES = 80


def function_lengths(root: Path = HARNESS) -> list[tuple[int, str]]:
    """(lines, "path:line name") of every function under ``root``, decorators counted,
    longest first."""
    rows = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                assert node.end_lineno is not None
                where = f"{path.relative_to(root.parent)}:{node.lineno} {node.name}"
                rows.append((node.end_lineno - start + 1, where))
    return sorted(rows, reverse=True)


def _modules(root: Path) -> dict[str, Path]:
    out = {}
    for path in root.rglob("*.py"):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def import_graph(root: Path = HARNESS) -> dict[str, set[str]]:
    """Module -> the harness modules it imports (at the top or inside a function; a
    package's own parents aside: importing harness.a.b runs harness/a/__init__.py)."""
    modules = _modules(root)

    def resolve(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found: set[str | None] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found |= {resolve(a.name) for a in node.names if a.name.startswith("harness")}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*up, base] if base else up)
                if base.startswith("harness"):
                    found |= {resolve(f"{base}.{a.name}") for a in node.names}
        graph[name] = {m for m in found if m and m != name and not name.startswith(m + ".")}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_function_over_a_screen() -> None:
    long = [f"{n} lines: {where}" for n, where in function_lengths() if n > MOST_LINES]
    assert not long, "split into named steps:\n" + "\n".join(long)


def test_no_import_circle_among_harness_modules() -> None:
    found = circles(import_graph())
    assert not found, "import circles: " + "; ".join(" <-> ".join(c) for c in found)


def test_the_measures_see_what_they_measure(tmp_path: Path) -> None:
    # a circle and a long function planted in a tiny package are found
    pkg = tmp_path / "harness"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from harness.sub import b\n")
    (pkg / "sub" / "b.py").write_text("def f():\n    from harness import a\n" + "    x = 1\n" * 90)
    assert circles(import_graph(pkg)) == [["harness.a", "harness.sub.b"]]
    assert function_lengths(pkg)[0][0] == 92
