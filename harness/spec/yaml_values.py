"""YAML files read the one way: composed safely (harness/spec/yaml_nodes.py: plain tags only, size,
UTF-8, aliases and depth bounded), then read as typed values whose every failure names file:line. matrix.yaml
and entry.yaml are read through here, so that what a duplicate, unknown or missing key or
a wrong type says is decided once."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any, NoReturn

import yaml
from packaging.version import Version

from harness.config import out_of_range
from harness.spec.yaml_nodes import YamlProblem, compose_plain, read_yaml_text

__all__ = [
    "ErrorFactory",
    "Lines",
    "YamlReader",
    "check_keys",
    "compose_file",
    "line_of",
    "plain",
]

ErrorFactory = Callable[[str, "int | None", str], Exception]

_SPECIFIER_START = "<>=!~"
_PYTHON_RE = re.compile(r"^\d+\.\d+$")
_STR_TAG = "tag:yaml.org,2002:str"
_INT_TAG = "tag:yaml.org,2002:int"
_FLOAT_TAG = "tag:yaml.org,2002:float"


def line_of(node: yaml.Node) -> int:
    """The 1-based line a node starts on."""
    return node.start_mark.line + 1


_line = line_of


def _join(items: Iterable[str]) -> str:
    return ", ".join(items)


def compose_file(path: str, error: ErrorFactory, what: str) -> yaml.Node:
    """The node tree of the YAML file at ``path`` (``what``: how messages name the file)."""
    try:
        root = compose_plain(read_yaml_text(path))
    except OSError as exc:
        raise error(path, None, f"cannot read {what}: {exc.strerror}") from exc
    except YamlProblem as exc:
        message = (
            exc.message if exc.message.startswith("YAML tag") else f"not valid YAML: {exc.message}"
        )
        raise error(path, exc.line, message) from exc
    if root is None:
        raise error(path, None, f"{what} is empty")
    return root


class YamlReader:
    """Reads typed values out of YAML nodes; every failure names the node's line.

    ``error`` builds the exception a failure raises, from (path, line, message): each kind
    of file keeps its own exception type, and every kind of file gets this one wording."""

    def __init__(self, path: str, error: ErrorFactory) -> None:
        self.path = path
        self.error = error

    def fail(self, node: yaml.Node | int | None, message: str) -> NoReturn:
        line = _line(node) if isinstance(node, yaml.Node) else node
        raise self.error(self.path, line, message)

    def mapping(
        self,
        node: yaml.Node,
        what: str,
        allowed: tuple[str, ...],
        required: tuple[str, ...] = (),
    ) -> dict[str, yaml.Node]:
        if not isinstance(node, yaml.MappingNode):
            self.fail(node, f"{what} must be a mapping of keys to values")
        found: dict[str, yaml.Node] = {}
        for key_node, value_node in node.value:
            key = self.string(key_node, f"a key in {what}")
            if key in found:
                self.fail(key_node, f"key {key!r} appears twice in {what}; keep one")
            if key not in allowed:
                self.fail(
                    key_node,
                    f"unknown key {key!r} in {what}; allowed keys: {_join(allowed)}",
                )
            found[key] = value_node
        missing = [key for key in required if key not in found]
        if missing:
            self.fail(node, f"{what} lacks required key(s): {_join(missing)}")
        return found

    def string(self, node: yaml.Node, what: str) -> str:
        if not isinstance(node, yaml.ScalarNode):
            self.fail(node, f"{what} must be a single value, not a list or mapping")
        if node.tag != _STR_TAG:
            hint = ""
            if node.tag in (_FLOAT_TAG, _INT_TAG):
                hint = f'; quote it ("{node.value}"): unquoted, YAML reads it as a number'
            self.fail(node, f"{what} must be a string, got {node.value!r}{hint}")
        if not node.value.strip():
            self.fail(node, f"{what} is empty; give it a value")
        return str(node.value)

    def strings(self, node: yaml.Node, what: str) -> list[tuple[str, yaml.Node]]:
        """A list of strings (one string counts as a list of one); never empty."""
        items = node.value if isinstance(node, yaml.SequenceNode) else [node]
        if not items:
            self.fail(node, f"{what} is empty; list at least one value")
        values: list[tuple[str, yaml.Node]] = []
        seen: set[str] = set()
        for item in items:
            value = self.string(item, f"each value of {what}")
            if value in seen:
                self.fail(item, f"{value!r} is listed twice in {what}; keep one")
            seen.add(value)
            values.append((value, item))
        return values

    def sequence(self, node: yaml.Node, what: str) -> list[yaml.Node]:
        if not isinstance(node, yaml.SequenceNode):
            self.fail(node, f"{what} must be a list")
        return list(node.value)

    def integer(self, node: yaml.Node, what: str, minimum: int = 1) -> int:
        if not isinstance(node, yaml.ScalarNode) or node.tag != _INT_TAG:
            self.fail(node, f"{what} must be a whole number, got {_text(node)}")
        try:
            value = int(str(node.value).replace("_", ""), 0)
        except ValueError:  # e.g. more digits than Python converts
            self.fail(node, f"{what} must be a whole number, got {_text(node)[:40]}")
        if value < minimum:
            self.fail(node, f"{what} must be at least {minimum}, got {value}")
        return value

    def ranged(self, node: yaml.Node, what: str, name: str) -> int | float:
        """A number inside config.RANGES[name] (whole when the range's name is)."""
        value: int | float = (
            self.number(node, what) if name == "timeout_s" else self.integer(node, what)
        )
        problem = out_of_range(name, value)
        if problem:
            self.fail(node, f"{what} {problem}")
        return value

    def number(self, node: yaml.Node, what: str) -> float:
        if not isinstance(node, yaml.ScalarNode) or node.tag not in (_INT_TAG, _FLOAT_TAG):
            self.fail(node, f"{what} must be a number, got {_text(node)}")
        try:
            value = float(str(node.value).replace("_", ""))
        except ValueError:
            self.fail(node, f"{what} must be a finite number, got {node.value!r}")
        if not value > 0 or value == float("inf"):
            self.fail(node, f"{what} must be a positive, finite number, got {node.value!r}")
        return value

    def version(self, node: yaml.Node, what: str, example: str) -> str:
        text = self.string(node, what)
        if text[0] in _SPECIFIER_START:
            self.fail(node, f'{what} takes an exact release like "{example}", not {text!r}')
        try:
            Version(text)
        except ValueError:  # InvalidVersion, or more digits than int() converts
            self.fail(node, f'{what} {text[:40]!r} is not a version; write one like "{example}"')
        return text

    def python(self, node: yaml.Node, what: str) -> str:
        text = self.string(node, what)
        if not _PYTHON_RE.match(text):
            self.fail(node, f'{what} {text!r} must be major.minor, like "3.10"')
        return text


def _text(node: yaml.Node) -> str:
    return repr(node.value) if isinstance(node, yaml.ScalarNode) else "a list or mapping"


class Lines(dict):  # type: ignore[type-arg]
    """A mapping read from YAML that remembers its own line and each key's (1-based)."""

    line: int = 0
    key_lines: dict[str, int]


def plain(node: yaml.Node, read: YamlReader) -> Any:
    """The node as plain data: Lines for mappings (keys unique strings), lists, and
    scalars built by the safe resolvers (str, int, float, bool, None)."""
    if isinstance(node, yaml.MappingNode):
        out = Lines()
        out.line = _line(node)
        out.key_lines = {}
        for key_node, value_node in node.value:
            key = plain(key_node, read)
            if not isinstance(key, str):
                read.fail(key_node, "keys must be strings")
            if key in out:
                read.fail(key_node, f"key {key!r} appears twice; keep one")
            out[key] = plain(value_node, read)
            out.key_lines[key] = _line(key_node)
        return out
    if isinstance(node, yaml.SequenceNode):
        return [plain(n, read) for n in node.value]
    return yaml.constructor.SafeConstructor().construct_object(node, deep=True)


def check_keys(
    data: Lines, allowed: Iterable[str], required: Iterable[str], what: str, read: YamlReader
) -> None:
    """The same key rules as ``YamlReader.mapping``, on a mapping already read as Lines."""
    allowed = tuple(sorted(allowed))
    for key in data:
        if key not in allowed:
            read.fail(
                data.key_lines[key],
                f"unknown key {key!r} in {what}; allowed keys: {_join(allowed)}",
            )
    missing = sorted(set(required) - set(data))
    if missing:
        read.fail(data.line, f"{what} lacks required key(s): {_join(missing)}")
