"""The page's answers file (results/answers.js): what its "paste your error" and "look up my
versions" box needs to answer as ``python -m harness explain`` does, without the records.

Per entry: its documented signature and its variants' related signatures (as JavaScript
patterns), the messages its runs raised (each shape once: harness/catalogue/explain.py's
``message_shape``, the most frequent wording kept, cut at ``MESSAGE_CHARS``), whether its
reproducer imports lightning, and per variant and environment the counts of its metric
(``VariantAggregate.by_env``: the rate of a set of environments is the sum of theirs) and
its cells. The environments are numbered once for the whole file (``answers_file``).

The variants are most of it (the counts and cells of every environment): answers.js holds
the rest, what a pasted error is matched against, and the variants are in parts
(answers/NNNN.js) that the box loads for the entries it answers with (all of them for "look
up every entry"). An entry's text in answers.js names no part: the box finds it from the
entry's place and ``part_entries``, so an entry added before it leaves the text as it was
(and the report splices the new entry in: ``answers_spliced``).

The box then matches a pasted error (documented, related, seen; else the closest entries by
message, said to be guesses), chooses the environments for the versions typed, adds up their
counts and reads them by the report's advice rule, all in static/answer.js.

Safety: the file is JSON in one function call, written by ``script_json`` (``<``, ``>``, ``&``
as ``\\u003c``-style escapes); the page puts its texts on the page with ``textContent``.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harness.aggregate import EntryAggregate
from harness.aggregate.bottomline import devices_measured, where_it_occurs
from harness.aggregate.model import CellKey
from harness.catalogue.explain import message_shape, strip_terminal
from harness.domain import pattern_text
from harness.report.render import STATUSES, entry_slug
from harness.report.render.columns import public_version
from harness.report.render.html import ANSWERS_FILE, script_json
from harness.report.render.jsonout import compact_json
from harness.spec.backtracking import backtracking_problem
from harness.spec.entries import Entry

__all__ = [
    "ANSWERS_FILE",
    "ANSWERS_PART_ENTRIES",
    "MESSAGE_CHARS",
    "AnswersText",
    "answers_bytes",
    "answers_layout",
    "answers_pieces",
    "answers_spliced",
    "answers_tables",
    "answers_file",
    "answers_head",
    "answers_heads",
    "answers_index",
    "answers_part",
    "answers_part_name",
    "answers_text",
    "entry_answers",
    "js_pattern",
    "named_heads",
]

ANSWERS_PART_ENTRIES = 16  # entries a part of the answers file holds the variants of
MESSAGE_CHARS = 400  # explain compares the first 400 characters of two messages
_MESSAGES = 24  # per entry, the most frequent shapes
_STATUS_INDEX = {s: i for i, s in enumerate(STATUSES)}
_NAMED_GROUP = re.compile(r"\(\?P<")
_NAMED_BACKREF = re.compile(r"\(\?P=(\w+)\)")


def js_pattern(pattern: str) -> str:
    """A signature's Python pattern as JavaScript's RegExp reads it (with the "s" flag, as
    explain searches with re.DOTALL): named groups and anchors written its way. A pattern
    JavaScript still cannot read is skipped by the page (its runs' messages still match)."""
    out = _NAMED_GROUP.sub("(?<", pattern)
    out = _NAMED_BACKREF.sub(r"\\k<\1>", out)
    return out.replace("\\A", "^").replace("\\Z", "$")


def _signature(type_: str, pattern: str) -> list[str]:
    """[type, the pattern for the page ("" where it may backtrack catastrophically: one the
    loader never checked, from records alone; the page then matches by messages), words]."""
    safe = backtracking_problem(pattern) is None
    return [type_, js_pattern(pattern) if safe else "", f"{type_}: {pattern_text(pattern)}"]


def _messages(a: EntryAggregate, env_index: dict[str, int]) -> list[list[Any]]:
    """[variant index, type, message, runs, env indices]: per variant, each shape of message
    its runs raised once (its most frequent wording), the most frequent first."""
    shapes: dict[tuple[int, str, str], list[Any]] = {}
    for vi, v in enumerate(a.variants):
        for m in v.messages:
            message = strip_terminal(m.message)
            key = (vi, m.type, message_shape(message[:MESSAGE_CHARS]))
            seen = shapes.get(key)
            if seen is None:
                shapes[key] = [vi, m.type, message[:MESSAGE_CHARS], m.count, set(m.envs)]
            else:
                seen[3] += m.count
                seen[4] |= set(m.envs)
    ranked = sorted(shapes.values(), key=lambda s: (-s[3], s[0], s[1], s[2]))[:_MESSAGES]
    return [[vi, t, msg, n, sorted(env_index[e] for e in envs)] for vi, t, msg, n, envs in ranked]


_DIGITS = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _coded(rows: Sequence[Sequence[tuple[int, ...] | None]]) -> dict[str, Any]:
    """Rows of values, one per environment (None: nothing there), as a table of the distinct
    values and per row a string: for each environment the value's index in base 62 ("." for
    none), one character each, or two where there are more than 62 values. Most cells of an
    entry hold one of a few values (3 trials ok, 3 trials unsupported): this keeps the file a
    few characters per cell."""
    table: dict[tuple[int, ...], int] = {}
    for row in rows:
        for value in row:
            if value is not None and value not in table:
                table[value] = len(table)
    width = 1 if len(table) <= len(_DIGITS) else 2

    def code(value: tuple[int, ...] | None) -> str:
        if value is None:
            return "." * width
        i = table[value]
        return _DIGITS[i] if width == 1 else _DIGITS[i // len(_DIGITS)] + _DIGITS[i % len(_DIGITS)]

    return {"values": [list(v) for v in table], "rows": ["".join(map(code, row)) for row in rows]}


@functools.lru_cache(maxsize=4096)  # a few counts recur in every cell of every entry
def _counted(counts: tuple[tuple[str, int], ...]) -> tuple[int, ...]:
    """A cell's counts as (outcome, trials, outcome, ...)."""
    return tuple(x for o, n in counts for x in (_STATUS_INDEX[o], n))


def _cells(
    a: EntryAggregate, name: str, counted: Mapping[CellKey, tuple[int, ...]]
) -> dict[str, Any]:
    """Per slice, per environment: the variant's cell as (outcome, trials, outcome, ...)
    (``counted``: ``_counted_cells(a)``, made once per entry)."""
    get = counted.get
    env_ids = [e.id for e in a.envs]
    rows = [[get((name, env, d, p)) for env in env_ids] for d, p in a.slices]
    return _coded(rows)


def _counted_cells(a: EntryAggregate) -> dict[CellKey, tuple[int, ...]]:
    """Every cell of the entry as ``_counted`` gives it, once per entry (not once a variant)."""
    return {key: _counted(value.counts) for key, value in a.cells.items()}


def _rates(
    a: EntryAggregate, by_env: Sequence[tuple[str, int, int, int, int, int]]
) -> dict[str, Any]:
    """Per environment: the variant's (k, n, k anywhere, n anywhere, ok of n)."""
    counts = {env: tuple(rest) for env, *rest in by_env}
    return _coded([[counts.get(e.id) for e in a.envs]])


def entry_answers(a: EntryAggregate, entry: Entry | None) -> str:
    """The entry's part of the answers file (JSON): see the module's docstring. Its
    environments are [id, torch, lightning, python] here; ``answers_file`` numbers them."""
    env_index = {e.id: i for i, e in enumerate(a.envs)}
    claims: dict[str, Any] = {}
    for verdict in a.verdicts:
        claims.setdefault(verdict.subject, verdict)  # the first, as explain reads it
    message = next((v for v in a.verdicts if v.claim == "documented message"), None)
    variants = []
    counted = _counted_cells(a)
    for v in a.variants:
        claim = claims.get(v.name)
        variants.append(
            {
                "name": v.name,
                "kind": v.kind,
                "ref": v.claim_ref or "",
                "description": " ".join(v.description.split()),
                "all": [v.overall.k, v.overall.n],
                "rates": _rates(a, v.by_env),
                "cells": _cells(a, v.name, counted),
                "claim": [claim.claimed, claim.label]
                if claim and v.claimed_rate is not None
                else None,
                # why runs were not counted: [outcome, reason, runs, env indices], most first
                "not_counted": [
                    [
                        nc.outcome,
                        strip_terminal(nc.reason),
                        nc.count,
                        [env_index[e] for e in nc.envs],
                    ]
                    for nc in v.not_counted
                ],
            }
        )
    related = []
    if entry is not None:
        related = [
            [v.name, *_signature(v.signature.type, v.signature.message)]
            for v in entry.variants
            if v.signature is not None
        ]
    data = {
        "id": a.id,
        "slug": entry_slug(a.id),
        "title": a.title,
        "lightning": entry.uses_lightning if entry is not None else True,
        "signature": _signature(a.signature_type, a.signature_message),
        "message": [message.label, message.measured] if message is not None else None,
        # the plain words the box shows as explain does (harness/aggregate/bottomline.py)
        "bottom": list(a.bottom_line),
        "occurs": where_it_occurs(a),
        "devices": [list(d) for d in devices_measured(a)],
        "baselines": [v.name for v in a.variants if v.kind == "baseline"],
        "related": related,
        "seen": _messages(a, env_index),
        "slices": [f"{d}-{p}" for d, p in a.slices],
        "envs": [
            [e.id, public_version(e.torch), public_version(e.lightning), e.python] for e in a.envs
        ],
        "variants": variants,
    }
    return compact_json(data)


def _intern_reasons(entries: Sequence[tuple[str, list[dict[str, Any]]]]) -> list[str]:
    """The reasons runs were not counted, each once (many variants share one): their
    not_counted rows name them by index."""
    reasons: list[str] = []
    index: dict[str, int] = {}
    for _, variants in entries:
        for v in variants:
            for nc in v["not_counted"]:
                i = index.get(nc[1])
                if i is None:
                    i = index[nc[1]] = len(reasons)
                    reasons.append(nc[1])
                nc[1] = i
    return reasons


def answers_part_name(index: int) -> str:
    """The file with the variants of the entry at ``index`` (in id order), relative to
    index.html."""
    return f"answers/{index // ANSWERS_PART_ENTRIES:04d}.js"


def answers_head(part: str) -> tuple[dict[str, Any], tuple[str, list[dict[str, Any]]]]:
    """An entry's part (``entry_answers``) cut in two: what answers.js holds of it (all but
    its variants, their names instead), and (its id, its variants) for its answers/NNNN.js."""
    e = json.loads(part)
    variants = e.pop("variants")
    e["names"] = [v["name"] for v in variants]
    return e, (e["id"], variants)


def answers_index(heads: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """What results/answers.js holds (``answers_text``) from every entry's head
    (``answers_head``, in entry order; not changed): each environment once, in ``envs``, and
    each message seen once, in ``messages`` ([type, message]: the same message is raised by
    many variants and entries), the entries naming them by index.

    The numbers go by first appearance: entry by entry, what an entry names that no entry
    before it named takes the next numbers, in sorted order (not in the order the entry
    lists them, which follows its counts: so a report whose runs changed an entry's counts
    but not what it names leaves every number as it was, and ``answers_spliced`` keeps the
    other entries' texts)."""
    envs: list[list[str]] = []
    index: dict[tuple[str, ...], int] = {}
    messages: list[list[str]] = []
    message_index: dict[tuple[str, str], int] = {}
    entries = []
    for head in heads:
        for key in sorted({(s[1], s[2]) for s in head["seen"]} - message_index.keys()):
            message_index[key] = len(messages)
            messages.append(list(key))
        # an environment: an id with the versions its records say were installed
        for key in sorted({tuple(env) for env in head["envs"]} - index.keys()):
            index[key] = len(envs)
            envs.append(list(key))
        # [variant, type, message, runs, envs] -> [variant, k, runs, envs]
        seen = [[s[0], message_index[(s[1], s[2])], *s[3:]] for s in head["seen"]]
        numbers = [index[tuple(env)] for env in head["envs"]]
        entries.append({**head, "seen": seen, "envs": numbers})
    # an entry's variants are in answers/NNNN.js, NNNN its place over part_entries (the
    # box names the file: an entry's text names none, so an entry added before it leaves
    # its text as it was)
    return {
        "schema": 3,
        "statuses": list(STATUSES),
        "envs": envs,
        "messages": messages,
        "part_entries": ANSWERS_PART_ENTRIES,
        "entries": entries,
    }


def answers_text(index: Mapping[str, Any]) -> str:
    """The text of results/answers.js (``answers_index``'s data)."""
    return f"harnessAnswers({script_json(index)});\n"


# answers.js in pieces: START, the tables (everything before the entries, up to and with
# '"entries":['), each entry's JSON joined by commas, END. script_json's escapes are each
# of one character, and compact JSON is its parts' JSON put together, so the pieces joined
# are answers_text's bytes (tests/report/test_answers.py).
_START, _END = b"harnessAnswers(", b"]});\n"
_TABLES_END = b'"entries":['


@dataclass(frozen=True)
class AnswersText:
    """One entry's JSON in answers.js (script_json's, UTF-8), and the highest environment
    and message numbers it names (-1: none)."""

    text: bytes
    envs_max: int
    messages_max: int


def _numbered_text(entry: Mapping[str, Any]) -> AnswersText:
    return AnswersText(
        script_json(entry).encode("utf-8"),
        max(entry["envs"], default=-1),
        max((s[1] for s in entry["seen"]), default=-1),
    )


def answers_layout(index: Mapping[str, Any]) -> tuple[bytes, list[AnswersText]]:
    """answers.js of ``answers_index``'s data in pieces: its tables, its entries."""
    if list(index)[-1] != "entries":
        raise ValueError("answers.js's entries come last")
    tables = script_json({**index, "entries": []}).encode("utf-8")[: -len(b"]}")]
    return tables, [_numbered_text(e) for e in index["entries"]]


def answers_bytes(tables: bytes, entries: Sequence[AnswersText]) -> bytes:
    """answers.js from its pieces (``answers_layout``)."""
    return _START + tables + b",".join(e.text for e in entries) + _END


def answers_pieces(data: bytes, lengths: Sequence[int]) -> tuple[bytes, list[bytes]] | None:
    """answers.js cut into its tables and its entries' texts, given each entry's length in
    bytes (the last report's layout), or None where it does not fall apart that way."""
    if not (data.startswith(_START) and data.endswith(_END)):
        return None
    at = data.find(_TABLES_END)
    if at < 0:
        return None
    tables = data[len(_START) : at + len(_TABLES_END)]
    at += len(_TABLES_END)
    texts = []
    for k, n in enumerate(lengths):
        if k and data[at : at + 1] != b",":
            return None
        at += 1 if k else 0
        texts.append(data[at : at + n])
        at += n
    if at != len(data) - len(_END):
        return None
    return tables, texts


def answers_tables(tables: bytes) -> tuple[list[list[str]], list[list[str]]] | None:
    """The environments and messages answers.js numbers (its tables), or None."""
    try:
        index = json.loads(tables + b"]}")
        answers_heads(index)  # its environments and messages are lists of texts
        return index["envs"], index["messages"]
    except (ValueError, RecursionError, TypeError):
        return None


def _from(numbers: Sequence[int], start: int) -> set[int]:
    """The numbers from ``start`` up: those an entry gives."""
    return {n for n in numbers if n >= start}


def answers_spliced(
    tables: tuple[list[list[str]], list[list[str]]],
    old: Sequence[AnswersText | None],
    new: Mapping[int, Mapping[str, Any]],
) -> list[AnswersText] | None:
    """The entries of answers.js where entries ``new`` (by position: their heads,
    ``answers_head``) take the place of their old texts in ``old`` (None: an entry the last
    answers.js did not hold, put among the others), every other entry's text staying as it
    is; None where that would number any environment or message otherwise than
    ``answers_index`` numbers them (then every entry is numbered again).

    The numbers go by first appearance, in entry order (``answers_index``): the entries before
    entry i name exactly the numbers below c_i (one more than the highest any of them
    names), and entry i gives the next numbers, in sorted order, to what it names that they
    do not. So the numbering stands when each changed entry names only what the tables hold,
    and, of the numbers from its c_i up, the ones its old text named; an added entry, none
    from its c_i up (it names only what the entries before it name)."""
    envs, messages = tables
    env_at = {tuple(e): k for k, e in enumerate(envs)}
    message_at = {(m[0], m[1]): k for k, m in enumerate(messages)}
    out: list[AnswersText] = []
    env_next = message_next = 0  # c_i of each table
    for i, was in enumerate(old):
        head = new.get(i)
        if head is None:
            if was is None:
                raise ValueError(f"entry {i}: neither an old text nor a new one")
            out.append(was)
        else:
            try:
                env_numbers = [env_at[tuple(e)] for e in head["envs"]]
                message_numbers = [message_at[(s[1], s[2])] for s in head["seen"]]
                if was is None:
                    old_envs, old_messages = [], []
                else:
                    before = json.loads(was.text)
                    old_envs, old_messages = before["envs"], [s[1] for s in before["seen"]]
            except (KeyError, ValueError, TypeError, IndexError, RecursionError):
                return None  # a new environment or message: later numbers move
            if _from(env_numbers, env_next) != _from(old_envs, env_next) or _from(
                message_numbers, message_next
            ) != _from(old_messages, message_next):
                return None
            numbered = {
                **head,
                "seen": [
                    [s[0], k, *s[3:]] for s, k in zip(head["seen"], message_numbers, strict=True)
                ],
                "envs": env_numbers,
            }
            out.append(_numbered_text(numbered))
        env_next = max(env_next, out[-1].envs_max + 1)
        message_next = max(message_next, out[-1].messages_max + 1)
    return out


def named_heads(
    tables: tuple[list[list[str]], list[list[str]]], texts: Sequence[bytes]
) -> list[dict[str, Any]]:
    """The heads of answers.js's entries ``texts`` named again by text (``answers_heads``);
    ValueError where they are not that."""
    try:
        entries = [json.loads(t) for t in texts]
    except RecursionError:
        raise ValueError("not answers.js's entries") from None
    return answers_heads({"envs": tables[0], "messages": tables[1], "entries": entries})


def answers_heads(index: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The heads ``answers_index`` numbered (its data, as answers.js holds it), named again
    by text; ValueError where ``index`` is not that."""
    try:
        envs, messages = index["envs"], index["messages"]
        if not (
            isinstance(envs, list)
            and all(isinstance(e, list) and all(isinstance(x, str) for x in e) for e in envs)
            and isinstance(messages, list)
            and all(
                isinstance(m, list) and len(m) == 2 and all(isinstance(x, str) for x in m)
                for m in messages
            )
        ):
            raise ValueError("its environments or messages")
        heads = []
        for e in index["entries"]:
            if not (isinstance(e, dict) and isinstance(e.get("id"), str)):
                raise ValueError("an entry")
            seen = []
            for s in e["seen"]:  # [variant, k, runs, envs] -> [variant, type, message, ...]
                k = s[1]
                if type(k) is not int or k < 0:
                    raise ValueError("a message's number")
                seen.append([s[0], *messages[k], *s[2:]])
            numbers = e["envs"]
            if not all(type(n) is int and n >= 0 for n in numbers):
                raise ValueError("an environment's number")
            heads.append({**e, "seen": seen, "envs": [envs[n] for n in numbers]})
    except (KeyError, TypeError, IndexError) as exc:
        raise ValueError(f"not answers.js's data: {exc!r}") from None
    return heads


def answers_part(entries: Sequence[tuple[str, list[dict[str, Any]]]]) -> str:
    """The text of one answers/NNNN.js from its entries' (id, variants) (``answers_head``;
    their reasons are numbered in place), each reason a run was not counted once, in
    ``reasons``."""
    data = {"reasons": _intern_reasons(entries), "entries": [[i, v] for i, v in entries]}
    return f"harnessVariants({script_json(data)});\n"


def answers_file(parts: Sequence[str]) -> list[tuple[str, str]]:
    """(name, text) of results/answers.js and its parts from every entry's part (in entry
    order). answers.js holds what the box matches a pasted error against (each entry but its
    variants: their names only, and the name of the part that holds them:
    ``answers_index``); each part (answers/NNNN.js, ``ANSWERS_PART_ENTRIES`` entries) the
    variants of its entries, which the box loads for the entries it answers with
    (``answers_part``)."""
    cut = [answers_head(part) for part in parts]
    variants = [v for _, v in cut]
    files = [(ANSWERS_FILE, answers_text(answers_index([head for head, _ in cut])))]
    for first in range(0, len(variants), ANSWERS_PART_ENTRIES):
        files.append(
            (answers_part_name(first), answers_part(variants[first : first + ANSWERS_PART_ENTRIES]))
        )
    return files
