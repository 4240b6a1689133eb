"""`explain`: an error a user pasted (a traceback or a message) and the versions installed ->
the entries it is, and what the runs measured of each workaround and dead end there.

Pure functions over the entries and the record table the report reads
(harness/store/columnar.py), aggregated by the report's own rules (harness/aggregate/): the
answer for some versions is the aggregate of the records of the environments that answer
for them, so every counting rule (reproducing cells, related errors, silent failures) is
the report's. How an error is recognised, best first:

  documented  the entry's documented signature (type and message pattern) matches
  related     a variant's own expected error (its signature in entry.yaml) matches
  seen        a message the runs really raised (what the pages list as "seen instead"),
              with numbers, addresses and paths let vary
  guess       none of these for any entry: the entries whose messages are closest
"""

from __future__ import annotations

import dataclasses
import difflib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from packaging.version import InvalidVersion

from harness.aggregate import (
    CONFIRMED,
    CONTRADICTED,
    DEPENDS,
    HOLDS,
    INCONCLUSIVE,
    NOT_AS_DOCUMENTED,
    NOT_MEASURABLE,
    WRONG,
    EntryAggregate,
    EnvInfo,
    Rate,
    VariantAggregate,
    Verdict,
    aggregate_table,
    read_rate,
)
from harness.aggregate.bottomline import devices_measured, plain, where_it_occurs
from harness.domain import parse_version, pattern_text

# a signature is searched in at most the first MATCH_CHARS of a message (the paste's own
# bound, harness/cli/explain.py), for at most MATCH_SECONDS: harness/matching.py, the one
# bounded runner every pattern from a document, an entry or a record goes through
from harness.matching import MATCH_CHARS, MATCH_SECONDS, bounded_search, find
from harness.spec.entries import Entry, Signature
from harness.store.columnar import RecordTable

__all__ = [
    "DOCUMENTED",
    "NEAR",
    "PASTE_KINDS",
    "SITUATION",
    "GUESS",
    "MATCH_CHARS",
    "MATCH_SECONDS",
    "RELATED",
    "SEEN",
    "CellSeen",
    "EntryAnswer",
    "Explanation",
    "Match",
    "Raised",
    "VariantAnswer",
    "Versions",
    "Where",
    "advise",
    "bounded_search",
    "choose_envs",
    "explain",
    "match_entries",
    "message_shape",
    "parse_error",
    "strip_terminal",
]

DOCUMENTED = "documented"
RELATED = "related"
SEEN = "seen"
GUESS = "guess"
SITUATION = "situation"
NEAR = "near"
_HOW_RANK = {DOCUMENTED: 0, RELATED: 1, SEEN: 2, GUESS: 3}
# what a paste is for an entry: its documented error; the error one of its baselines raises
# (the situation the entry is about, in torch's words, whatever the document wrote); the
# error a workaround or dead end runs into (RELATED); or none of these (GUESS)
# or NEAR: the same words as one of these, but the parts that vary (the names a pattern
# leaves open, the sizes and dimensions of a shape) differ from every run's: a near miss
PASTE_KINDS = (DOCUMENTED, SITUATION, RELATED, NEAR, GUESS)

# -- what the user pasted ------------------------------------------------------------------

# terminal escapes (CSI, OSC, two-character), and what is left of an SGR escape whose ESC a
# store replaced by U+FFFD (records stored before the store stripped them)
_TERMINAL = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]|\ufffd\[[0-9;]*m"
)


def strip_terminal(text: str) -> str:
    """``text`` without terminal escape sequences (colours, bold, cursor moves)."""
    return _TERMINAL.sub("", text) if ("\x1b" in text or "\ufffd[" in text) else text


@dataclass(frozen=True)
class Raised:
    """One exception the pasted text names: its type ("" when the text names none) and
    message."""

    type: str
    message: str

    def text(self) -> str:
        return f"{self.type}: {self.message}" if self.type else self.message

    def to_dict(self) -> dict[str, str]:
        return {"type": self.type, "message": self.message}


_NAME = r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*"
# outside a traceback only a name that reads as an exception's starts one ("HINT: ..." does not)
_EXC_WORD = r"(?:Error|Exception|Warning|Exit|Interrupt|Fault|Failure|Failed|Iteration)"
_LOOSE = re.compile(
    rf"^\s*(?:\S.*?:\d+: )?(?P<type>(?:[A-Za-z_]\w*\.)*\w*{_EXC_WORD})(?::[ \t]?(?P<msg>.*))?$"
)
# a line that starts with an exception is read so first (a warning later on the same line,
# "...Good luck!/usr/lib/x.py:175: UserWarning: ...", does not take its place)
_AT_START = re.compile(rf"^\s*(?P<type>(?:[A-Za-z_]\w*\.)*\w*{_EXC_WORD})(?::[ \t]?(?P<msg>.*))?$")
_IN_TRACEBACK = re.compile(rf"^(?P<type>{_NAME})(?::[ \t]?(?P<msg>.*))?$")
_TRACEBACK = "Traceback (most recent call last):"
_RANK_PREFIX = re.compile(r"^\[(?:rank|default)\d+\]:[ \t]?", re.MULTILINE)
_CHAIN = ("During handling of the above exception", "The above exception was the direct cause")


def _message_lines(lines: Sequence[str], start: int, first: str) -> str:
    """The message that starts on line ``start`` (its text there: ``first``) and runs on
    until a chained traceback begins."""
    out = [first]
    for line in lines[start + 1 :]:
        if line.startswith(_TRACEBACK) or line.startswith(_CHAIN):
            break
        out.append(line)
    return "\n".join(out).strip()


def parse_error(text: str) -> tuple[Raised, ...]:
    """The exceptions ``text`` names, the one that propagated (the last) first. A traceback's
    exception is the first line after its frames; without a traceback, the first line that
    reads ``SomeError: message``; failing both, the whole text is the message."""
    cleaned = strip_terminal(text).replace("\r\n", "\n").replace("\r", "\n")
    cleaned = _RANK_PREFIX.sub("", cleaned)  # torchrun's "[rank0]: " before every line
    lines = cleaned.split("\n")
    found: list[Raised] = []
    i = 0
    while i < len(lines):
        if lines[i].strip() != _TRACEBACK:
            i += 1
            continue
        j = i + 1
        while j < len(lines) and (not lines[j].strip() or lines[j][:1] in " \t"):
            j += 1  # frames, their source lines and ^^^ markers are indented
        if j < len(lines):
            m = _IN_TRACEBACK.match(lines[j].strip()) or _LOOSE.match(lines[j])
            if m:
                found.append(Raised(m["type"], _message_lines(lines, j, m["msg"] or "")))
        i = j + 1
    if not found:
        # a log's warnings come before the error: a Warning is the error only where no
        # other line reads as one
        loose = [
            (j, m)
            for j, line in enumerate(lines)
            if (m := _first_exception(line)) and (m["msg"] or "").strip()
        ]
        errors = [(j, m) for j, m in loose if not m["type"].endswith("Warning")] or loose
        if errors:
            j, m = errors[-1] if len(errors) > 1 and _is_log(errors) else errors[0]
            found.append(Raised(m["type"], _message_lines(lines, j, m["msg"] or "")))
    if not found:
        message = " ".join(cleaned.split())
        return (Raised("", message),) if message else ()
    return tuple(reversed(found))


def _first_exception(line: str) -> re.Match[str] | None:
    """The exception a line names: the one it starts with, unless that is a warning; else
    the one after a ``file:line:`` prefix (a warning's own line)."""
    m = _AT_START.match(line)
    if m is not None and not m["type"].endswith("Warning"):
        return m
    return _LOOSE.match(line)


def _is_log(errors: Sequence[tuple[int, Any]]) -> bool:
    """Whether the error lines are a log's (one type, repeated), where
    the last one is what stopped the program."""
    return len({m["type"] for _, m in errors}) == 1


def _same_type(asked: str, known: str) -> bool:
    """Type names agree by their last part (a record keeps 'torch.OutOfMemoryError', a user
    pastes 'OutOfMemoryError'); a text that names no type agrees with any."""
    return not asked or not known or asked.rsplit(".", 1)[-1] == known.rsplit(".", 1)[-1]


_HEX = re.compile(r"0x[0-9a-fA-F]+")
_PATH = re.compile(r"(?:[A-Za-z]:)?(?:[/\\][\w.+~-]+){2,}[/\\]?")
_NUMBER = re.compile(r"\d+(?:\.\d+)*")


def message_shape(text: str) -> str:
    """A message with what varies from run to run (numbers, addresses, paths) let vary."""
    text = strip_terminal(text)
    text = _HEX.sub("0x#", text)
    text = _PATH.sub("/…", text)
    text = _NUMBER.sub("#", text)
    return " ".join(text.split())


def _similarity(a: str, b: str) -> float:
    a, b = a.lower()[:400], b.lower()[:400]
    if not a or not b:
        return 0.0
    return difflib.SequenceMatcher(None, a, b, autojunk=False).ratio()


def _signature_hits(sig: Signature, raised: Raised) -> bool:
    if not _same_type(raised.type, sig.type):
        return False
    return bool(bounded_search(sig.message, raised.message))


# -- which entries ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Match:
    entry: str
    how: str  # DOCUMENTED, RELATED, SEEN or GUESS
    what: str  # the signature or message it matched, as a reader writes it
    raised: Raised  # the pasted exception that matched
    variant: str = ""  # the variant whose signature or runs it is ("" for the documented one)
    score: float = 1.0  # 1 where a signature or a seen message matched; else the similarity
    runs: int = 0  # SEEN: how many runs raised it
    envs: tuple[str, ...] = ()  # SEEN: where
    # SEEN, RELATED: the torch releases of ``envs`` ("2.6.0–2.13.0"); the variants of the
    # same claim read otherwise, and what their runs show over every measured version:
    # (name, description, verdict label) (what the entry measured against that step)
    releases: str = ""
    readings: tuple[tuple[str, str, str], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "entry": self.entry,
            "how": self.how,
            "what": self.what,
            "raised": self.raised.to_dict(),
            "variant": self.variant,
            "score": round(self.score, 3),
            "runs": self.runs,
            "envs": list(self.envs),
            "releases": self.releases,
            "readings": [list(r) for r in self.readings],
        }


def _seen_hits(raised: Raised, type_: str, message: str) -> bool:
    if not _same_type(raised.type, type_):
        return False
    mine, theirs = message_shape(raised.message), message_shape(message)
    if not mine or not theirs:
        return False
    if mine == theirs:
        return True
    # a paste cut short, or a message the store kept the start of: one holds the other
    short, long = sorted((mine, theirs), key=len)
    return len(short) >= 24 and short in long


def _entry_match(
    entry: Entry | None, agg: EntryAggregate, raised: Sequence[Raised]
) -> Match | None:
    """The best way ``raised`` is this entry (documented, related, seen), or None."""
    for r in raised:
        if entry is not None and _signature_hits(entry.signature, r):
            what = f"{entry.signature.type}: {pattern_text(entry.signature.message)}"
            return Match(agg.id, DOCUMENTED, what, r)
    for r in raised:
        for v in entry.variants if entry is not None else ():
            if v.signature is not None and _signature_hits(v.signature, r):
                what = f"{v.signature.type}: {pattern_text(v.signature.message)}"
                return _where_raised(entry, agg, Match(agg.id, RELATED, what, r, variant=v.name))
    for r in raised:
        best: Match | None = None
        for v in agg.variants:
            for m in v.messages:
                if not _seen_hits(r, m.type, m.message):
                    continue
                if best is None or m.count > best.runs:
                    best = Match(
                        agg.id,
                        SEEN,
                        strip_terminal(f"{m.type}: {m.message}"),
                        r,
                        variant=v.name,
                        runs=m.count,
                        envs=m.envs,
                    )
        if best is not None:
            return dataclasses.replace(
                best, releases=_releases(agg, best.envs), readings=_other_readings(agg, best)
            )
    return None


def _where_raised(entry: Entry | None, agg: EntryAggregate, m: Match) -> Match:
    """A variant's declared error matched: where its runs raised the pasted error (its
    messages that read as it), and what worked there."""
    runs, envs = 0, set()
    declared = {v.name: v.signature for v in entry.variants} if entry is not None else {}
    signature = declared.get(m.variant)
    for v in agg.variants:
        if v.name != m.variant or signature is None:
            continue
        for seen in v.messages:
            if _signature_hits(signature, Raised(seen.type, seen.message)):
                runs += seen.count
                envs.update(seen.envs)
    if not runs:
        return m
    order = {e.id: i for i, e in enumerate(agg.envs)}
    where = tuple(sorted(envs, key=lambda e: order.get(e, len(order))))
    m = dataclasses.replace(m, runs=runs, envs=where, releases=_releases(agg, where))
    return dataclasses.replace(m, readings=_other_readings(agg, m))


def _releases(agg: EntryAggregate, envs: Sequence[str]) -> str:
    """The torch releases of ``envs``, as a span: "2.6.0–2.13.0" (or one release)."""
    torch_of = {e.id: e.torch.split("+")[0] for e in agg.envs}
    found = sorted({torch_of[e] for e in envs if e in torch_of}, key=_release_key)
    if not found:
        return ""
    return found[0] if len(found) == 1 else f"{found[0]}–{found[-1]}"


def _release_key(text: str) -> tuple[int, ...]:
    return _release(text) or (0,)


def _other_readings(agg: EntryAggregate, m: Match) -> tuple[tuple[str, str, str], ...]:
    """The variants of the same claim as the one that raised the pasted error (the step read
    otherwise), with their verdict over every measured version: what the entry measured
    against that step. Other workarounds are not offered: they answer the entry's error."""
    raised_by = next((v for v in agg.variants if v.name == m.variant), None)
    if raised_by is None or not raised_by.claim_ref:
        return ()
    labels = {v.subject: v.label for v in agg.verdicts if v.subject}
    return tuple(
        (v.name, v.description, labels.get(v.name, ""))
        for v in agg.variants
        if v.claim_ref == raised_by.claim_ref and v.name != m.variant
    )


def _guess(entry: Entry | None, agg: EntryAggregate, raised: Raised) -> Match:
    texts: list[tuple[str, str]] = [("", f"{agg.signature_type}: {agg.signature_text}")]
    if entry is not None:
        texts += [
            (v.name, f"{v.signature.type}: {pattern_text(v.signature.message)}")
            for v in entry.variants
            if v.signature is not None
        ]
    texts += [(v.name, f"{m.type}: {m.message}") for v in agg.variants for m in v.messages]
    mine = message_shape(raised.message)
    scored = [
        (_similarity(mine, message_shape(text.split(": ", 1)[-1])), variant, text)
        for variant, text in texts
    ]
    score, variant, text = max(scored, key=lambda s: s[0])
    return Match(agg.id, GUESS, strip_terminal(text), raised, variant=variant, score=score)


GUESSES = 3  # closest entries shown for an error no entry knows
GUESS_FLOOR = 0.3  # below this similarity an entry is not shown even as a guess


def match_entries(
    raised: Sequence[Raised], entries: Sequence[Entry], aggs: Sequence[EntryAggregate]
) -> tuple[Match, ...]:
    """The entries ``raised`` is, best first: every entry it matches (documented, related,
    seen); where none, the GUESSES entries whose messages are closest (GUESS)."""
    known = {e.id: e for e in entries}
    found = [m for a in aggs if (m := _entry_match(known.get(a.id), a, raised)) is not None]
    if found:
        return tuple(sorted(found, key=lambda m: (_HOW_RANK[m.how], -m.runs, m.entry)))
    if not raised:
        return ()
    guesses = [_guess(known.get(a.id), a, raised[0]) for a in aggs]
    guesses = [g for g in guesses if g.score >= GUESS_FLOOR]
    guesses.sort(key=lambda m: (-m.score, m.entry))
    return tuple(guesses[:GUESSES])


# -- which versions ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Versions:
    """The versions to answer for: releases ("2.5.1"), or series ("2.5", "2.5.x"); ""
    unknown. ``python``: the interpreter they were read from ("" when given by hand)."""

    torch: str = ""
    lightning: str = ""
    python: str = ""
    python_version: str = ""

    def text(self) -> str:
        parts = [f"torch {self.torch}" if self.torch else "torch unknown"]
        parts.append(f"lightning {self.lightning}" if self.lightning else "lightning unknown")
        return " + ".join(parts)

    def to_dict(self) -> dict[str, str]:
        return {
            "torch": self.torch,
            "lightning": self.lightning,
            "python": self.python,
            "python_version": self.python_version,
        }


def _release(text: str) -> tuple[int, ...] | None:
    try:
        return parse_version(text).release
    except InvalidVersion:
        return None


def _asked(text: str) -> tuple[tuple[int, ...], bool] | None:
    """A version as asked: its release and whether it names a series ('2.5', '2.5.x')."""
    text = text.strip().split("+", 1)[0]
    series = bool(re.search(r"\.[x*]$", text, re.I))
    text = re.sub(r"\.[x*]$", "", text, flags=re.I)
    release = _release(text)
    if release is None:
        return None
    return release, series or len(release) < 3


def _agrees(asked: tuple[tuple[int, ...], bool], installed: str) -> bool:
    release = _release(installed)
    if release is None:
        return False
    want, series = asked
    if series:
        return release[: len(want)] == want
    return _trimmed(release) == _trimmed(want)  # 2.0 is 2.0.0


def _trimmed(release: tuple[int, ...]) -> tuple[int, ...]:
    while len(release) > 1 and release[-1] == 0:
        release = release[:-1]
    return release


def _below(asked: tuple[tuple[int, ...], bool], release: tuple[int, ...]) -> bool:
    want, series = asked
    return release[: len(want)] < want if series else release < want


@dataclass(frozen=True)
class Where:
    """The environments whose records answer for the versions asked."""

    exact: bool  # they are the versions asked (else the nearest measured)
    envs: tuple[str, ...]  # environment ids, in version order
    said: str  # how, in words

    def to_dict(self) -> dict[str, Any]:
        return {"exact": self.exact, "envs": list(self.envs), "said": self.said}


def _nearest(
    envs: Sequence[EnvInfo], asked: tuple[tuple[int, ...], bool], axis: str
) -> list[EnvInfo]:
    """The environments of the nearest measured release of ``axis`` below and above."""
    releases = sorted(
        {
            r
            for e in envs
            if (r := _release(getattr(e, axis))) is not None
            and not _agrees(asked, getattr(e, axis))
        }
    )
    below = [r for r in releases if _below(asked, r)]
    above = [r for r in releases if not _below(asked, r)]
    chosen = {r for r in (below[-1:] + above[:1])}
    return [e for e in envs if _release(getattr(e, axis)) in chosen]


def _names(envs: Iterable[EnvInfo], axis: str) -> str:
    seen: list[str] = []
    for e in envs:
        v = getattr(e, axis).split("+", 1)[0]
        if v not in seen:
            seen.append(v)
    return ", ".join(seen)


def choose_envs(envs: Sequence[EnvInfo], versions: Versions, uses_lightning: bool) -> Where:
    """The measured environments that answer for ``versions``: those of the torch (and, for
    an entry that imports lightning, the lightning) asked; else the nearest measured
    releases below and above, said so. An entry that does not import lightning answers for
    its torch release whatever lightning is installed."""
    torch = _asked(versions.torch) if versions.torch else None
    if torch is None:
        return Where(
            False,
            tuple(e.id for e in envs),
            "torch unknown: every measured environment"
            if not versions.torch
            else f"torch {versions.torch!r} is not a version: every measured environment",
        )
    lightning = _asked(versions.lightning) if versions.lightning and uses_lightning else None
    same_torch = [e for e in envs if _agrees(torch, e.torch)]
    torch_only = (
        ""
        if uses_lightning
        else " (the entry does not import lightning: any lightning gives this answer)"
    )
    if same_torch and lightning is None:
        said = f"measured at torch {_names(same_torch, 'torch')}"
        if not uses_lightning:
            said += f" beside lightning {_names(same_torch, 'lightning')}{torch_only}"
        elif not versions.lightning:
            said += f", lightning unknown: with lightning {_names(same_torch, 'lightning')}"
        return Where(True, tuple(e.id for e in same_torch), said)
    if same_torch and lightning is not None:
        both = [e for e in same_torch if _agrees(lightning, e.lightning)]
        if both:
            said = (
                f"measured at torch {_names(both, 'torch')} + lightning {_names(both, 'lightning')}"
            )
            return Where(True, tuple(e.id for e in both), said)
        near = _nearest(same_torch, lightning, "lightning")
        said = (
            f"lightning {versions.lightning} was not measured with torch {versions.torch}; the "
            f"nearest measured: lightning {_names(near, 'lightning')} (torch {_names(near, 'torch')})"
        )
        return Where(False, tuple(e.id for e in near), said)
    near_torch = _nearest(envs, torch, "torch")
    if not near_torch:
        return Where(False, (), "no environment was measured")
    chosen: list[EnvInfo] = []
    for release in sorted({_release(e.torch) for e in near_torch if _release(e.torch)}):
        group = [e for e in near_torch if _release(e.torch) == release]
        if lightning is not None:
            same = [e for e in group if _agrees(lightning, e.lightning)]
            group = same or _nearest(group, lightning, "lightning")[-1:] or group
        chosen += group
    said = (
        f"torch {versions.torch} was not measured; the nearest measured: "
        + "; ".join(
            f"torch {_names([e], 'torch')}"
            + (f" + lightning {_names([e], 'lightning')}" if uses_lightning else "")
            for e in chosen
        )
        + torch_only
    )
    return Where(False, tuple(e.id for e in chosen), said)


# -- the answer ------------------------------------------------------------------------------


@dataclass(frozen=True)
class CellSeen:
    env: str
    slice: str  # "cpu-fp16"
    status: str
    counts: tuple[tuple[str, int], ...]

    def text(self) -> str:
        counts = ", ".join(f"{o.replace('_', ' ')} {c}" for o, c in self.counts)
        return f"{self.slice} {counts}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "env": self.env,
            "slice": self.slice,
            "status": self.status,
            "counts": dict(self.counts),
        }


@dataclass(frozen=True)
class VariantAnswer:
    name: str
    kind: str
    claim_ref: str
    claimed_rate: float | None  # the rate the document states, where it states one
    description: str
    metric: str
    here: Rate  # the metric over the runs that answer for the versions (its counting rules)
    anywhere: Rate  # the same over every applicable run there, reproducing or not
    advice: str  # CONFIRMED ... NOT_MEASURABLE: does it work (fail as documented) here
    words: str  # the advice and its counts, in words
    seen_instead: str  # what its runs here did instead, most frequent first ("" if nothing)
    cells: tuple[CellSeen, ...]
    claim_here: Verdict | None  # the document's claim, judged on these versions' runs
    claim_all: Verdict | None  # the same over every measured version
    all_versions: Rate = field(default_factory=lambda: Rate.of(0, 0))

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind,
            "claim_ref": self.claim_ref,
            "claimed_rate": self.claimed_rate,
            "description": self.description,
            "metric": self.metric,
            "here": self.here.to_dict(),
            "anywhere": self.anywhere.to_dict(),
            "advice": self.advice,
            "words": self.words,
            "seen_instead": self.seen_instead,
            "cells": [c.to_dict() for c in self.cells],
            "claim_here": self.claim_here.to_dict() if self.claim_here else None,
            "claim_all": self.claim_all.to_dict() if self.claim_all else None,
            "all_versions": self.all_versions.to_dict(),
        }


@dataclass(frozen=True)
class EntryAnswer:
    match: Match
    title: str
    signature: str  # the documented signature, as a reader writes it
    uses_lightning: bool
    message: Verdict | None  # the documented message, over every measured version
    where: Where
    baselines: tuple[VariantAnswer, ...]
    variants: tuple[VariantAnswer, ...]  # workarounds, then dead ends
    command: str
    # what the paste is for this entry, in words (PASTE_KINDS), and the plain sentences
    # around it: on which devices the answer was measured, where the error occurs, what
    # the runs measured of a remedy the paste's own message names, the entry's bottom line
    kind: str = ""
    said: str = ""
    devices: str = ""
    occurs: str = ""
    remedies: tuple[str, ...] = ()
    bottom_line: tuple[str, ...] = ()

    @property
    def foreign(self) -> bool:
        """The paste is not the entry's error: its advice answers another error."""
        return self.kind in (RELATED, NEAR)

    def to_dict(self) -> dict[str, Any]:
        return {
            "entry": self.match.entry,
            "kind": self.kind,
            "said": self.said,
            "devices": self.devices,
            "occurs": self.occurs,
            "remedies": list(self.remedies),
            "bottom_line": list(self.bottom_line),
            "match": self.match.to_dict(),
            "title": self.title,
            "signature": self.signature,
            "uses_lightning": self.uses_lightning,
            "documented_message": self.message.to_dict() if self.message else None,
            "where": self.where.to_dict(),
            "baselines": [b.to_dict() for b in self.baselines],
            "variants": [v.to_dict() for v in self.variants],
            "command": self.command,
        }


@dataclass(frozen=True)
class Explanation:
    raised: tuple[Raised, ...]
    versions: Versions
    answers: tuple[EntryAnswer, ...]
    headline: str = ""  # what the paste is, in one sentence
    remedy: str = ""  # the remedy the paste's own message names ("" if none)

    @property
    def guessed(self) -> bool:
        """No entry knows the paste: every answer is a guess or a near miss."""
        return bool(self.answers) and all(
            a.match.how == GUESS or a.kind == NEAR for a in self.answers
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": 1,
            "raised": [r.to_dict() for r in self.raised],
            "versions": self.versions.to_dict(),
            "guessed": self.guessed,
            "headline": self.headline,
            "remedy": self.remedy,
            "answers": [a.to_dict() for a in self.answers],
        }


_ADVICE = {
    "workaround": {
        CONFIRMED: "works",
        CONTRADICTED: "does not work",
        INCONCLUSIVE: "not settled",
        NOT_MEASURABLE: "not measured",
    },
    "dead_end": {
        CONFIRMED: "fails as documented: avoid it",
        CONTRADICTED: "does not fail as documented",
        NOT_AS_DOCUMENTED: "fails, not as documented: avoid it",
        INCONCLUSIVE: "not settled",
        NOT_MEASURABLE: "not measured",
    },
    "baseline": {
        CONFIRMED: "the documented error reproduces",
        CONTRADICTED: "the documented error does not reproduce",
        INCONCLUSIVE: "not settled",
        NOT_MEASURABLE: "not measured",
    },
}
_NOT_COUNTED = ("unsupported", "skipped", "env_failed")
_DID = {"workaround": "ok", "dead_end": "failed as documented", "baseline": "reproduced"}
_IMPLICIT = {"workaround": "works", "dead_end": "fails as documented", "baseline": "reproduces"}
# what a dead end's or workaround's run did that its metric does not count as a hit
_HIT_OUTCOMES = {
    "workaround": ("ok",),
    "dead_end": ("reproduced", "related"),
    "baseline": ("reproduced",),
}


def _seen_instead(v: VariantAggregate) -> str:
    """The most frequent way the counted runs ended other than the metric's hit."""
    hits = _HIT_OUTCOMES.get(v.kind, ("ok",))
    other = [
        f for f in v.failures if f.outcome not in hits and f.outcome != "ok" and not f.as_documented
    ]
    if v.kind == "dead_end" and v.ok.k:
        return f"ok (×{v.ok.k})"  # a dead end that worked: the most telling thing it did
    if not other:
        return ""
    top = max(other, key=lambda f: f.count)
    return strip_terminal(f"{top.text} (×{top.count})")


def _most(measured: Rate, what: str) -> str:
    """The report's advice rule ("in most applicable scenarios"), in explain's three words."""
    advice = read_rate(None, measured, what=what).advice
    return {HOLDS: CONFIRMED, WRONG: CONTRADICTED}.get(advice, advice)


def advise(
    v: VariantAggregate, whole: VariantAggregate, runs: int = 0, flaky: bool = False
) -> tuple[str, str]:
    """(advice, words): does the variant work (a dead end: fail as documented) for these
    versions, read as "in most applicable scenarios" (aggregate.read_rate's advice rule). Where the
    scenarios here are too few to call alone, the verdict over every measured version is given when
    these runs agree with it, said so."""
    kind = v.kind if v.kind in _ADVICE else "workaround"
    here, everywhere = v.overall, whole.overall
    overall = _most(everywhere, _IMPLICIT[kind]) if everywhere.n else NOT_MEASURABLE
    where = " where the documented error reproduces" if kind != "baseline" else ""
    also = f"; over every measured version {everywhere.k}/{everywhere.n}"
    if not here.n:
        if v.anywhere.n and kind != "baseline":
            text = (
                f"not judged here: the documented error did not reproduce in these cells; where "
                f"it ran it was {_DID[kind]} in {v.anywhere.k}/{v.anywhere.n} scenarios"
            )
        else:
            reasons = "; ".join(
                f"{nc.outcome.replace('_', ' ')}: {nc.reason}" for nc in v.not_counted[:2]
            )
            text = "no applicable run here" + (f" ({reasons})" if reasons else "")
        if everywhere.n:
            text += also + f" ({_ADVICE[kind][overall]})"
        return NOT_MEASURABLE, text
    if here.k in (0, here.n) and not flaky and runs:
        # every run at these versions agrees: what they did is the answer here, said with
        # how many setups and runs it rests on (one setup is weak evidence, said so)
        every = here.k == here.n
        advice = CONFIRMED if every else CONTRADICTED
        if kind == "dead_end" and not every and v.ok.k < here.n:
            advice = NOT_AS_DOCUMENTED
        setups = "the one setup" if here.n == 1 else f"all {here.n} setups"
        words = (
            f"{_ADVICE[kind][advice]}: {_DID[kind] if every else 'not ' + _DID[kind]} in every "
            f"run here ({runs} run{'s' if runs != 1 else ''} in {setups}{where}"
            f"){also}"
        )
        return advice, words
    advice = _most(here, _IMPLICIT[kind])
    counts = f"{_DID[kind]} in {here.k}/{here.n} scenarios here{where}"
    if kind == "dead_end" and advice != CONFIRMED:
        # it fails in most scenarios here, though not as documented (harder, another error):
        # avoid it all the same; its stated reason is not what happens
        failing = Rate.of(here.n - v.ok.k, here.n)
        if _most(failing, "fails") == CONFIRMED:
            return NOT_AS_DOCUMENTED, (
                f"fails, not as documented: avoid it: failed in {here.n - v.ok.k}/{here.n} "
                f"scenarios here{where}, as documented in {here.k}{also}"
            )
    if advice == INCONCLUSIVE:
        agrees = (overall == CONFIRMED and here.k * 2 > here.n) or (
            overall == CONTRADICTED and here.k * 2 < here.n
        )
        if agrees:
            return overall, (
                f"{_ADVICE[kind][overall]}: {counts}, too few to call alone, as over every "
                f"measured version ({everywhere.k}/{everywhere.n})"
            )
        return INCONCLUSIVE, f"not settled: {counts} (n={here.n}){also}"
    return advice, f"{_ADVICE[kind][advice]}: {counts}{also}"


def _cells(agg: EntryAggregate, variant: str) -> tuple[CellSeen, ...]:
    rank = {e.id: i for i, e in enumerate(agg.envs)}
    out = [
        CellSeen(env, f"{device}-{precision}", value.status, value.counts)
        for (name, env, device, precision), value in agg.cells.items()
        if name == variant
    ]
    out.sort(key=lambda c: (rank.get(c.env, len(rank)), c.slice))
    return tuple(out)


def _documented(agg: EntryAggregate) -> Verdict | None:
    return next((v for v in agg.verdicts if v.claim == "documented message"), None)


def _claim(agg: EntryAggregate, variant: str) -> Verdict | None:
    return next((v for v in agg.verdicts if v.subject == variant), None)


def _variant_answer(here: EntryAggregate | None, whole: EntryAggregate, name: str) -> VariantAnswer:
    all_v = whole.variant(name)
    v = None
    if here is not None:
        try:
            v = here.variant(name)
        except KeyError:  # an entry known only by its records: no run of it here
            v = None
    if v is None:  # no record of these versions
        v = VariantAggregate(
            name=all_v.name,
            kind=all_v.kind,
            description=all_v.description,
            claim_ref=all_v.claim_ref,
            claimed_rate=all_v.claimed_rate,
            reading=all_v.reading,
            metric=all_v.metric,
            overall=Rate.of(0, 0),
            by_slice=(),
            ranges=(),
            messages=(),
            not_counted=(),
            runs=0,
        )
    cells = _cells(here, name) if here is not None else ()
    # the applicable runs of its cells here (every one did the same where advise says so)
    runs = sum(c for cell in cells for outcome, c in cell.counts if outcome not in _NOT_COUNTED)
    advice, words = advise(v, all_v, runs, any(c.status == "flaky" for c in cells))
    return VariantAnswer(
        name=v.name,
        kind=v.kind,
        claim_ref=v.claim_ref or "",
        claimed_rate=all_v.claimed_rate,
        description=" ".join(v.description.split()),
        metric=v.metric,
        here=v.overall,
        anywhere=v.anywhere,
        advice=advice,
        words=words,
        seen_instead=_seen_instead(v) if v.overall.n else "",
        cells=cells,
        claim_here=_claim(here, name) if here is not None else None,
        claim_all=_claim(whole, name),
        all_versions=all_v.overall,
    )


# -- what the paste is, in words --------------------------------------------------------------

_KIND_WORDS = {"workaround": "a workaround", "dead_end": "a dead end", "control": "a control"}
_CUDA_PASTE = re.compile(
    r"\bcuda\b|cudnn|cublas|cusolver|nccl|device-side|\bnvidia\b|cuda:\d", re.IGNORECASE
)
# a remedy a message names: "`name=value`", "name=value" or "set `name` to value"
_REMEDY = re.compile(
    r"`?(?P<name>[A-Za-z_][\w.]*)`?\s*(?:=|set to|to)\s*`?(?P<value>True|False|None|[\w.'\"-]+)`?"
)
_REMEDY_CUES = re.compile(
    r"\b(?:please use|use |set |setting|re-running|rerun|try |consider|pass |instead|to fix|"
    r"you can|you should|did you mean)",
    re.IGNORECASE,
)


def paste_kind(m: Match, whole: EntryAggregate, pattern: str = "") -> str:
    """What the pasted error is for this entry (one of PASTE_KINDS); ``pattern``: the
    documented signature's, where it matched."""
    if m.how == GUESS:
        return GUESS
    if m.how == DOCUMENTED:
        return NEAR if _open_parts_differ(pattern, m.raised.message, whole) else DOCUMENTED
    try:
        kind = whole.variant(m.variant).kind
    except KeyError:
        kind = ""
    if m.how == SEEN and _shape_numbers_differ(m.raised.message, m.what):
        return NEAR
    return SITUATION if kind == "baseline" else RELATED


# a pattern's open parts: what a signature leaves to vary between its fixed words
_OPEN = re.compile(r"\.[*+]\??")


def _open_parts(pattern: str, message: str) -> tuple[str, ...] | None:
    """What ``pattern``'s open parts (``.*``, ``.+?``) matched in ``message``, each with its
    numbers let vary; None where it does not match (or is no safe pattern)."""
    grouped = _OPEN.sub(lambda g: f"({g.group(0)})", pattern)
    if grouped == pattern:
        return None
    hit = find(grouped, message, checked=True)
    if hit is None:
        return None
    return tuple(message_shape(g or "").lower() for g in hit.groups())


def _open_parts_differ(pattern: str, message: str, whole: EntryAggregate) -> bool:
    """Whether the paste fills the documented pattern's open parts otherwise than every
    message the entry's baselines raised that it matches ('expected scalar type Long but
    found Int' where every run said 'Half ... Float'): another cause, the same words."""
    mine = _open_parts(pattern, message) if pattern else None
    if not mine or not any(mine):
        return False
    theirs = {
        parts
        for v in whole.variants
        if v.kind == "baseline"
        for seen in v.messages
        if (parts := _open_parts(pattern, seen.message)) is not None
    }
    return bool(theirs) and mine not in theirs


_SHAPE_NUMBER = re.compile(r"(?<![\w.])\d+(?![\w.])")


def _shape_numbers_differ(pasted: str, seen: str) -> bool:
    """Whether a message matched only with its numbers let vary names other sizes or
    dimensions than the run's: small whole numbers (a tensor's sizes, a dimension; not a
    memory size or a count of bytes) that differ ('(4) ... (3) at non-singleton dimension 0'
    where the runs said '(4) ... (2) at ... dimension 1')."""
    seen_text = seen.split(": ", 1)[-1]
    mine = [int(n) for n in _SHAPE_NUMBER.findall(pasted)]
    theirs = [int(n) for n in _SHAPE_NUMBER.findall(seen_text)]
    small = all(n <= 64 for n in mine + theirs)
    return bool(mine) and small and len(mine) == len(theirs) and mine != theirs


def _said(kind: str, m: Match, whole: EntryAggregate, message: Verdict | None) -> str:
    title = whole.title
    if kind == DOCUMENTED:
        text = f"This is the error the entry “{title}” documents"
        if message is not None and message.verdict == CONTRADICTED:
            text += ", though no run raised its message word for word (see below)"
        return text + "."
    if kind == SITUATION:
        where = ""
        if m.runs:
            where = f" (in {m.runs} setup{'s' if m.runs != 1 else ''}"
            where += f", torch {m.releases})" if m.releases else ")"
        return (
            f"This is the error of the entry “{title}”: its reproducer of the documented "
            f"situation raises exactly this{where}, whatever words the document used."
        )
    if kind == RELATED:
        v = whole.variant(m.variant)
        ref = f" ({v.claim_ref})" if v.claim_ref else ""
        where = (
            f", raised in {m.runs} setup{'s' if m.runs != 1 else ''} on torch {m.releases}"
            if m.runs and m.releases
            else ""
        )
        return (
            f"This is not the error the entry “{title}” documents: it is what "
            f"{_KIND_WORDS.get(v.kind, 'a step')} of it{ref} runs into{where}: "
            f"{' '.join(v.description.split())[:200]}."
        )
    if kind == NEAR:
        return (
            f"Not this entry's error: it reads like “{title}”, but the parts of the message "
            f"that vary differ from every run's (the runs raised “{m.what[:200]}”): another "
            "cause, so the entry's fixes are not offered for it."
        )
    return f"Not this entry's error: it looks like “{title}”, but is not ({m.score:.0%} alike)."


def _devices_said(whole: EntryAggregate, text: str, occurs: str) -> str:
    """On which devices the answer was measured (where ``occurs`` has not said it), and that
    a CUDA paste answered from CPU runs is a CPU answer."""
    ran, missing = devices_measured(whole)
    said = ""
    if not occurs:
        said = f"Measured on {' and '.join(ran)}" if ran else "No device ran it"
        said += f", not on {' and '.join(missing)}." if missing else "."
    if _CUDA_PASTE.search(text) and "CUDA" not in ran:
        said += (" " if said else "") + (
            "Your error comes from a CUDA run: this answer comes from CPU runs, so it is a "
            "CPU answer."
        )
    return said


def _occurs(kind: str, m: Match, whole: EntryAggregate) -> str:
    if kind in (DOCUMENTED, SITUATION) and (said := where_it_occurs(whole)):
        return said
    if kind == SITUATION and m.releases:
        return f"The entry's runs raised it on torch {m.releases}."
    if kind == RELATED:
        verdict = _claim(whole, m.variant)
        if verdict is not None and verdict.advice == DEPENDS:
            return f"That step {verdict.words.split(': ', 1)[-1]}."
        if m.releases:
            return f"Its runs raised it on torch {m.releases}."
    return ""


def named_remedy(raised: Sequence[Raised]) -> tuple[str, tuple[str, ...]]:
    """The remedy the pasted message names (its sentence), and the settings it names
    (``weights_only=False``), or ("", ())."""
    if not raised:
        return "", ()
    message = raised[0].message
    sentences = re.split(r"(?<=[.!?])\s+|\n", message)
    for sentence in sentences:
        if not _REMEDY_CUES.search(sentence):
            continue
        settings = tuple(
            dict.fromkeys(
                f"{m['name']}={m['value'].strip('`')}"
                for m in _REMEDY.finditer(sentence)
                if m["value"] in ("True", "False", "None") or "`" in sentence
            )
        )
        return " ".join(sentence.split())[:300], settings
    return "", ()


def _remedies(settings: Sequence[str], whole: EntryAggregate) -> tuple[str, ...]:
    """What the runs measured of each setting the paste's message names: every variant
    whose reading applies it, with what it is and what its runs did."""
    out = []
    labels = {v.subject: v for v in whole.verdicts if v.subject}
    for setting in settings:
        name, _, value = setting.partition("=")
        pattern = re.compile(rf"\b{re.escape(name)}\s*=\s*{re.escape(value)}\b")
        for v in whole.variants:
            if v.kind == "control" or not pattern.search(v.description):
                continue
            verdict = labels.get(v.name)
            did = _did_in_words(v)
            out.append(
                f"{setting}: {plain(v.description, 220)} — {did}"
                + (f" ({verdict.label})" if verdict is not None else "")
            )
    return tuple(out)


def _did_in_words(v: VariantAggregate) -> str:
    """What a variant's runs did, in words: its most frequent end."""
    ends = sorted(((f.count, f.outcome, f.text) for f in v.failures), reverse=True)
    if v.ok.k and (not ends or v.ok.k >= ends[0][0]):
        return f"it ran to its end in {v.ok.k}/{v.ok.n} setups"
    if not ends:
        return "no applicable run"
    count, outcome, text = ends[0]
    if outcome == "wrong_result":
        return f"it ran to its end, but {text} ({count} setups)"
    return f"it failed: {strip_terminal(text)[:160]} ({count} setups)"


def headline(x_answers: Sequence[EntryAnswer], remedy: str) -> str:
    """What the paste is, in one sentence: the first answer's, or no catalogued error."""
    if not x_answers:
        line = "No catalogued error matches this, and no entry is close."
    elif all(a.kind in (GUESS, NEAR) for a in x_answers):
        names = "; ".join(f"“{a.title}”" for a in x_answers)
        line = f"No catalogued error matches this. It looks like, but is not: {names}."
        near = next((a for a in x_answers if a.kind == NEAR), None)
        if near is not None:
            line += f" {near.said}"
    else:
        line = x_answers[0].said
    if remedy:
        line += f" Your message names its own remedy: “{remedy}”."
    return line


def _subset(table: RecordTable, envs: Sequence[str], entry: str) -> RecordTable:
    """The records of ``entry`` in ``envs``, as a table of their own: a second connection
    to the same database, where a view named ``records`` stands for them (the aggregation
    reads ``records``; its temporary tables stay on that connection)."""
    con = table.con.cursor()
    database = con.execute("SELECT current_database()").fetchone()[0]  # type: ignore[index]
    quoted = ", ".join("'" + e.replace("'", "''") + "'" for e in envs) or "NULL"
    con.execute(
        f'CREATE TEMP VIEW records AS SELECT * FROM "{database}".main.records '
        f"WHERE entry = '{entry.replace(chr(39), chr(39) * 2)}' AND env IN ({quoted})"
    )
    return RecordTable(con)


def command(python: str, entry: str, harness: str = "python -m harness") -> str:
    """The command that measures ``entry`` in the user's own interpreter now."""
    return f"{harness} run --python {python or '<your python>'} --entry {entry}"


def explain(
    text: str,
    versions: Versions,
    entries: Sequence[Entry],
    table: RecordTable,
    *,
    harness: str = "python -m harness",
    aggs: Sequence[EntryAggregate] | None = None,
) -> Explanation:
    """The entries ``text`` is, and for ``versions`` what each workaround and dead end did
    in the runs. ``aggs``: the aggregates of ``table`` where already made."""
    raised = parse_error(text)
    remedy, settings = named_remedy(raised)
    if aggs is None:
        aggs = aggregate_table(table, entries)
    by_id: Mapping[str, EntryAggregate] = {a.id: a for a in aggs}
    known = {e.id: e for e in entries}
    answers = []
    for m in match_entries(raised, entries, aggs):
        whole = by_id[m.entry]
        entry = known.get(m.entry)
        uses_lightning = entry.uses_lightning if entry is not None else True
        where = choose_envs(whole.envs, versions, uses_lightning)
        here = None
        if where.envs:
            [here] = aggregate_table(_subset(table, where.envs, m.entry), entries, ids=[m.entry])
        names = list(dict.fromkeys(v.name for v in whole.variants))
        answers.append(
            EntryAnswer(
                match=m,
                title=whole.title,
                signature=f"{whole.signature_type}: {whole.signature_text}",
                uses_lightning=uses_lightning,
                message=_documented(whole),
                where=where,
                baselines=tuple(
                    _variant_answer(here, whole, n)
                    for n in names
                    if whole.variant(n).kind == "baseline"
                ),
                variants=tuple(
                    _variant_answer(here, whole, n)
                    for kind in ("workaround", "dead_end")
                    for n in names
                    if whole.variant(n).kind == kind
                ),
                command=command(versions.python, m.entry, harness),
                kind=(kind := paste_kind(m, whole, entry.signature.message if entry else "")),
                said=_said(kind, m, whole, _documented(whole)),
                occurs=(occurs := _occurs(kind, m, whole)),
                devices=_devices_said(whole, text, occurs),
                remedies=_remedies(settings, whole) if kind not in (GUESS, NEAR) else (),
                bottom_line=whole.bottom_line,
            )
        )
    return Explanation(raised, versions, tuple(answers), headline(answers, remedy), remedy)
