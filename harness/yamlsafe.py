"""YAML read as data only: a node tree with line numbers, every tag refused but plain ones.

matrix.yaml and entry.yaml are both read through here, so that what "safe" means (nothing
constructed, no `!!python/...` tag passing as data, errors at a line) is decided once.
"""

from __future__ import annotations

import yaml

__all__ = ["PLAIN_TAGS", "YamlProblem", "compose_plain"]

PLAIN_TAGS = frozenset(
    "tag:yaml.org,2002:" + t for t in ("str", "int", "float", "bool", "null", "seq", "map")
)


class YamlProblem(Exception):
    def __init__(self, line: int | None, message: str) -> None:
        super().__init__(message)
        self.line = line  # 1-based, None when the parser gave no position
        self.message = message


def _refuse_tags(node: yaml.Node) -> None:
    if node.tag not in PLAIN_TAGS:
        raise YamlProblem(
            node.start_mark.line + 1, f"YAML tag {node.tag!r} is not allowed; write plain values"
        )
    if isinstance(node, yaml.SequenceNode):
        for item in node.value:
            _refuse_tags(item)
    elif isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            _refuse_tags(key)
            _refuse_tags(value)


def compose_plain(text: str) -> yaml.Node | None:
    """The document's node tree (None when empty). Raises YamlProblem with the line."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        context = exc.context or ""
        if context and exc.context_mark is not None and exc.context_mark is not mark:
            context += f" (started on line {exc.context_mark.line + 1})"
        problem = ", ".join(p for p in (context, exc.problem) if p)
        raise YamlProblem(None if mark is None else mark.line + 1, problem) from exc
    except yaml.YAMLError as exc:
        raise YamlProblem(None, str(exc)) from exc
    if root is not None:
        _refuse_tags(root)
    return root
