"""docs/reference/cli.md, written from the argparse definitions (scripts/cli_docs.py writes or
checks it; tests/cli/test_docs.py fails when the committed file differs). Rendered from the
actions themselves, not argparse's help formatter, whose layout changes with the terminal
width and the Python version."""

from __future__ import annotations

import argparse
from collections.abc import Iterator

__all__ = ["REFERENCE", "reference"]

REFERENCE = "docs/reference/cli.md"

_HEADER = """\
# Command line reference

Generated from the argparse definitions in `harness/cli/` by `python scripts/cli_docs.py`
(`--check`: fail when this file is stale). Do not edit it by hand: `tests/cli/test_docs.py`
fails when it differs from what the parser generates. `python -m harness COMMAND --help`
says the same.

Usage: `python -m harness [--repo REPO] COMMAND ...` (or `harness ...` once installed).

Exit codes: 0 done; 1 the command ran and found something to fix (stale outputs, a failed
environment, a conflicting record, a job left without a record, a changed cell with
`diff --exit-code`); 2 bad input (an option argparse refuses, or `error: FILE:LINE: PROBLEM`
naming the file, option or filter at fault); 130 interrupted.
"""


def reference(parser: argparse.ArgumentParser | None = None) -> str:
    """The Markdown reference of ``parser`` (default: the harness's own)."""
    if parser is None:
        from harness.cli import build_parser

        parser = build_parser()
    out = [_HEADER, "## Options of every command", "", *_table(parser), ""]
    commands = list(_commands(parser, "harness"))
    out += ["## Commands", "", "| command | what it does |", "|---|---|"]
    out += [f"| [`{name}`](#{_anchor(name)}) | {_cell(text)} |" for name, text, _ in commands]
    for name, text, sub in commands:
        out += ["", f"## {name}", "", f"{_cell(text)}.", "", f"`{_usage(name, sub)}`"]
        if _documented(sub):
            out += ["", *_table(sub)]
    return "\n".join(out) + "\n"


def _commands(
    parser: argparse.ArgumentParser, prefix: str
) -> Iterator[tuple[str, str, argparse.ArgumentParser]]:
    """(name, help, parser) of every subcommand, depth first (envs, then envs build, ...)."""
    for action in parser._actions:  # argparse keeps its actions private; nothing else lists them
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            for name, sub in action.choices.items():
                yield f"{prefix} {name}", helps.get(name, ""), sub
                yield from _commands(sub, f"{prefix} {name}")


def _documented(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [
        a
        for a in parser._actions
        if not isinstance(a, (argparse._HelpAction, argparse._SubParsersAction))
    ]


def _required_groups(parser: argparse.ArgumentParser) -> dict[int, list[argparse.Action]]:
    """id(action) -> its required mutually exclusive group's actions."""
    return {
        id(a): list(g._group_actions)
        for g in parser._mutually_exclusive_groups
        if g.required
        for a in g._group_actions
    }


def _spelling(action: argparse.Action) -> str:
    """How the user writes it: ``--jobs JOBS``, ``-o/--output OUTPUT``, ``ENTRY ...``."""
    if action.choices is not None:
        metavar = "{" + ",".join(str(c) for c in action.choices) + "}"
    elif action.metavar:
        metavar = str(action.metavar)
    else:  # argparse's defaults: the upper-case dest of an option, a positional's own dest
        metavar = action.dest.upper() if action.option_strings else action.dest
    if action.nargs == 0:
        metavar = ""
    elif action.nargs == "*":
        metavar = f"[{metavar} ...]"
    elif action.nargs == "+":
        metavar = f"{metavar} ..."
    names = "/".join(action.option_strings)
    return " ".join(s for s in (names, metavar) if s)


def _usage(name: str, parser: argparse.ArgumentParser) -> str:
    groups = _required_groups(parser)
    words, seen, optional = [name], set(), False
    for action in _documented(parser):
        if id(action) in groups:
            group = groups[id(action)]
            if id(group[0]) not in seen:
                seen.add(id(group[0]))
                words.append("(" + " | ".join(_spelling(a) for a in group) + ")")
        elif not action.option_strings or _required(action):
            words.append(_spelling(action))
        else:
            optional = True
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            words.append("{" + ",".join(action.choices) + "} ...")
    return " ".join(words + (["[options]"] if optional else []))


def _table(parser: argparse.ArgumentParser) -> list[str]:
    groups = _required_groups(parser)
    rows = ["| argument | default | what it does |", "|---|---|---|"]
    for action in _documented(parser):
        notes = []
        if _required(action):
            notes.append("required")
        if id(action) in groups:
            names = [a.option_strings[-1] for a in groups[id(action)]]
            notes.append(f"exactly one of {', '.join(names)}")
        if isinstance(action, argparse._AppendAction):
            notes.append("repeatable")
        text = " ".join(filter(None, [action.help or "", *(f"({n})" for n in notes)]))
        rows.append(f"| `{_spelling(action)}` | {_default(action)} | {_cell(text)} |")
    return rows


def _required(action: argparse.Action) -> bool:
    # argparse's own flag for a positional differs between Python versions (nargs="*")
    if action.option_strings:
        return action.required
    return action.nargs not in ("*", "?")


def _default(action: argparse.Action) -> str:
    if action.default in (None, False, [], argparse.SUPPRESS) or _required(action):
        return ""
    return f"`{action.default}`"


def _cell(text: str) -> str:
    """Help text as Markdown: "<id>" would be read as an HTML tag, "|" as a column."""
    for raw, escaped in (("&", "&amp;"), ("<", "&lt;"), (">", "&gt;"), ("|", "\\|")):
        text = text.replace(raw, escaped)
    return text.replace("\n", " ")


def _anchor(heading: str) -> str:
    """GitHub's anchor of a heading made of lowercase words, '-' and spaces."""
    return heading.replace(" ", "-")
