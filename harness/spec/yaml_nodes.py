"""YAML read as data only: a node tree with line numbers, every tag refused but plain ones.

matrix.yaml and entry.yaml are both read through here, so that what "safe" means (nothing
constructed, no `!!python/...` tag passing as data, errors at a line) is decided once.

Every read is bounded, each limit failing with the line at fault: the file's size
(``MAX_BYTES``) and encoding (UTF-8 only), the number of aliases (``MAX_ALIASES``), the
nesting depth (``MAX_DEPTH``: PyYAML composes recursively, so 5,000 nested lists were a
RecursionError) and the number of values the tree holds once its aliases are followed
(``MAX_NODES``: an alias bomb, or an anchor that contains itself, is refused before any
reader walks it).

libyaml (PyYAML's C parser, where PyYAML was built with it) composes a file about six
times faster than PyYAML's own Python parser; PyYAML's parser stays the reference. The C
parser composes a text only where it holds no character PyYAML's reader refuses, its events
stay within the limits above with one to spare, and it composes without an error; anything
else, and every problem's wording and line, is PyYAML's own. Both give the same node tree
(libyaml writes a plain scalar's style as "", PyYAML as None: made None):
tests/spec/test_yaml_nodes.py compares them on every YAML file of the project and on
generated hostile texts.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from typing import Any

import yaml

from harness.errors import HarnessError

__all__ = [
    "MAX_ALIASES",
    "MAX_BYTES",
    "MAX_DEPTH",
    "MAX_NODES",
    "PLAIN_TAGS",
    "YamlProblem",
    "compose_plain",
    "compose_python",
    "read_yaml_text",
]

MAX_BYTES = 1 << 20  # matrix.yaml and entry.yaml are a few KB
MAX_ALIASES = 100
MAX_DEPTH = 64
MAX_NODES = 100_000

PLAIN_TAGS = frozenset(
    "tag:yaml.org,2002:" + t for t in ("str", "int", "float", "bool", "null", "seq", "map")
)


class YamlProblem(HarnessError):
    """Text that is not plain YAML; the reader of a file adds its path (EntryError, ...)."""

    def __init__(self, line: int | None, message: str) -> None:
        super().__init__(None, line, message)  # line: 1-based, None when the parser gave none


def read_regular(path: str | os.PathLike[str], most: int) -> bytes:
    """At most ``most + 1`` bytes of the file at ``path``, read only if it is a regular file:
    opened without blocking (a FIFO blocked `list` and `report` forever), checked
    by its descriptor. Raises OSError naming what it is instead."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = (
                "a FIFO"
                if stat.S_ISFIFO(mode)
                else "a folder"
                if stat.S_ISDIR(mode)
                else "a device"
                if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
                else "a socket"
                if stat.S_ISSOCK(mode)
                else "not a file"
            )
            raise OSError(errno.EINVAL, f"not a regular file ({kind}); name a file")
        os.set_blocking(fd, True)
        with os.fdopen(fd, "rb", closefd=False) as f:
            return f.read(most + 1)
    finally:
        os.close(fd)


def read_yaml_text(path: str | os.PathLike[str]) -> str:
    """The file's text: at most MAX_BYTES, UTF-8 (a BOM allowed). Raises OSError when it
    cannot be read, YamlProblem (with the line of the first bad byte) when it is too big
    or not UTF-8."""
    raw = read_regular(path, MAX_BYTES)
    if len(raw) > MAX_BYTES:
        raise YamlProblem(None, f"the file is larger than {MAX_BYTES} bytes; keep it under that")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        column = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        raise YamlProblem(
            line,
            f"not UTF-8: byte 0x{raw[exc.start]:02x} at column {column}; save the file as UTF-8",
        ) from None


class _BoundedLoader(yaml.SafeLoader):
    """SafeLoader's composer, counting aliases and depth as it goes."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.depth = 0
        self.aliases = 0

    def compose_node(self, parent: yaml.Node | None, index: object) -> yaml.Node:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent):
            self.aliases += 1
            if self.aliases > MAX_ALIASES:
                raise YamlProblem(
                    event.start_mark.line + 1,
                    f"more than {MAX_ALIASES} aliases (*{event.anchor}); write the values out",
                )
            return super().compose_node(parent, index)  # type: ignore[no-any-return]
        self.depth += 1
        try:
            if self.depth > MAX_DEPTH:
                raise YamlProblem(
                    event.start_mark.line + 1,
                    f"nested more than {MAX_DEPTH} levels deep; flatten it",
                )
            return super().compose_node(parent, index)  # type: ignore[no-any-return]
        finally:
            self.depth -= 1


# what no value may hold, escaped or not: a lone surrogate ("\ud800") cannot be
# written as UTF-8 (report died on it), control characters (ESC, BEL, C1) reach the terminal
# and the Markdown pages raw
_NOT_TEXT = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff]")


def _not_text(char: str) -> str:
    what = "a lone surrogate" if "\ud800" <= char <= "\udfff" else "a control character"
    return f"character U+{ord(char):04X} ({what}) is not allowed in a value; remove it"


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    return []


def _refuse_tags(root: yaml.Node) -> None:
    """Every node has a plain tag, and no value holds more than MAX_NODES values or
    MAX_DEPTH levels once its aliases are followed (an alias bomb; an anchor that contains
    itself). Each distinct node is visited once, without recursion, and the error names
    the line of the first value that is too big."""
    size: dict[int, tuple[int, int]] = {}  # id(node) -> (values, levels) once expanded
    open_nodes: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if key in size:
            continue
        line = node.start_mark.line + 1
        if not children_done:
            if key in open_nodes:
                raise YamlProblem(line, "an anchor contains itself (through an alias)")
            if node.tag not in PLAIN_TAGS:
                raise YamlProblem(line, f"YAML tag {node.tag!r} is not allowed; write plain values")
            if isinstance(node, yaml.ScalarNode):
                bad = _NOT_TEXT.search(node.value)
                if bad is not None:
                    raise YamlProblem(line, _not_text(bad.group()))
            open_nodes.add(key)
            stack.append((node, True))
            stack.extend((c, False) for c in reversed(_children(node)) if id(c) not in size)
            continue
        open_nodes.discard(key)
        inner = [size[id(c)] for c in _children(node)]
        values = 1 + sum(v for v, _ in inner)
        levels = 1 + max((d for _, d in inner), default=0)
        if values > MAX_NODES or levels > MAX_DEPTH:
            raise YamlProblem(
                line,
                f"this value expands through aliases to {values} values in {levels} levels "
                f"(at most {MAX_NODES} values, {MAX_DEPTH} levels); write the values out",
            )
        size[key] = (values, levels)


def compose_plain(text: str) -> yaml.Node | None:
    """The document's node tree (None when empty). Raises YamlProblem with the line."""
    if len(text) > MAX_BYTES:
        raise YamlProblem(None, f"the text is longer than {MAX_BYTES} characters")
    root = _compose_c(text)
    if root is _UNDECIDED:
        root = compose_python(text)
    elif root is not None:
        _refuse_tags(root)
    return root


_UNDECIDED = yaml.Node("", "", None, None)  # what _compose_c returns when PyYAML decides
_C_LOADER: type[Any] | None = getattr(yaml, "CSafeLoader", None)  # None: no libyaml
_NON_PRINTABLE = yaml.reader.Reader.NON_PRINTABLE  # what PyYAML's reader refuses
_OPEN = (yaml.MappingStartEvent, yaml.SequenceStartEvent)
_CLOSE = (yaml.MappingEndEvent, yaml.SequenceEndEvent)


def _compose_c(text: str) -> yaml.Node | None:
    """The node tree as libyaml composes it, or _UNDECIDED: no libyaml, a character PyYAML's
    reader refuses, events that come within one of a limit, or any error (PyYAML's parser
    then decides, and words the problem)."""
    # (a tab, which libyaml takes between tokens where PyYAML's scanner refuses it; a byte
    # order mark past the start, which libyaml skips)
    if _C_LOADER is None or _NON_PRINTABLE.search(text) or "\t" in text or "\ufeff" in text:
        return _UNDECIDED
    try:
        # the events first (libyaml's parser keeps its own stack: no recursion), so that
        # libyaml's composer, which recurses, never meets a deep tree
        depth = aliases = 0
        for event in yaml.parse(text, Loader=_C_LOADER):
            if isinstance(event, _OPEN):
                depth += 1
                if depth >= MAX_DEPTH:
                    return _UNDECIDED
            elif isinstance(event, _CLOSE):
                depth -= 1
            elif isinstance(event, yaml.AliasEvent):
                aliases += 1
                if aliases >= MAX_ALIASES:
                    return _UNDECIDED
            elif isinstance(event, yaml.ScalarEvent) and (
                depth + 1 >= MAX_DEPTH or (event.value == "" and not event.style)
            ):
                # (an empty plain scalar, a null: libyaml marks it where the next token
                # starts, PyYAML where the last one ended, and a reader names its line)
                return _UNDECIDED
        loader = _C_LOADER(text)
        try:
            root = loader.get_single_node()
        finally:
            loader.dispose()
    except Exception:  # noqa: BLE001 (any error at all: PyYAML's parser decides)
        return _UNDECIDED
    stack = [root] if root is not None else []
    seen: set[int] = set()
    while stack:  # a plain scalar's style as PyYAML writes it (each node once: aliases)
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, yaml.ScalarNode):
            if node.style == "":
                node.style = None
        else:
            stack.extend(_children(node))
    return root


def compose_python(text: str) -> yaml.Node | None:
    """compose_plain by PyYAML's own parser alone (the reference the C parser is held to)."""
    if len(text) > MAX_BYTES:
        raise YamlProblem(None, f"the text is longer than {MAX_BYTES} characters")
    loader = None
    try:
        loader = _BoundedLoader(text)  # the reader checks every character here
        root = loader.get_single_node()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        context = exc.context or ""
        if context and exc.context_mark is not None and exc.context_mark is not mark:
            context += f" (started on line {exc.context_mark.line + 1})"
        problem = ", ".join(p for p in (context, exc.problem) if p)
        raise YamlProblem(None if mark is None else mark.line + 1, problem) from exc
    except yaml.reader.ReaderError as exc:  # a character YAML does not allow
        line = text.count("\n", 0, exc.position) + 1
        raise YamlProblem(
            line, f"character {exc.character:#06x} is not allowed in YAML; remove it"
        ) from None
    except yaml.YAMLError as exc:
        raise YamlProblem(None, str(exc)) from exc
    except (ValueError, OverflowError) as exc:
        # PyYAML's chr() of an escape past U+10FFFF ("\U00110000"), which its composer lets by
        line = loader.get_mark().line + 1 if loader is not None else None
        raise YamlProblem(
            line, f"an escape that is no character ({exc}); characters go up to \\U0010FFFF"
        ) from None
    except RecursionError:  # a limit above should come first; never a traceback
        raise YamlProblem(None, f"nested more than {MAX_DEPTH} levels deep") from None
    finally:
        if loader is not None:
            loader.dispose()
    if root is not None:
        _refuse_tags(root)
    return root
