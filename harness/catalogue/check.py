"""`harness check [ENTRY]`: validate entries without building or running anything.

Per entry: entry.yaml loads (schema, signatures compile, claims parse: entries.py), its
variants and repro.py's VARIANTS agree both ways, document.md has
every write-back block, the reproducer parses as Python 3.7 (the oldest target), the
signature is borne out by the document's own error text (``signature_problems``), and every
claim of the document has a variant or a reason no run measures it (``vanished_claim_problems``). Problems
are errors with file:line (exit 2); what is still to write (variants VARIANTS maps to None, TODO
lines) is listed as to-do and does not fail the check. So are the rewordings it sees in
the measured runs (results/compat.json): a baseline message of the documented type, at
the documented step, that shares words with the documented one and does not read as it,
for an expert to declare as ``signature.reworded`` or to leave
(docs/reference/outcomes-and-verdicts.md, "Documented messages, graded").

With ``--smells``, the smells the stored records show of each entry (harness/aggregate/smells.py):
each must be fixed or explained in entry.yaml (``smells:``); an unexplained one fails.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.aggregate.smells import Smell, find_smells, stale_explanations
from harness.catalogue.gpu_use import gpu_use_problems
from harness.catalogue.scaffold import (
    PLACEHOLDER,
    DocumentError,
    detect_format,
    parse_document,
    split_type,
)
from harness.domain import clip, pattern_text
from harness.matching import find
from harness.outcomes import SHOWS, Grade, type_named
from harness.report.render.jsonout import read_compat
from harness.spec.declared import parse_source
from harness.spec.entries import Entry, EntryError, failure_kind, load_entry, measures_kind
from harness.spec.triage import triage_row
from harness.store.records import Record

__all__ = [
    "EntryCheck",
    "check_entries",
    "check_entry",
    "claim_problems",
    "document_claims",
    "reworded_candidates",
    "signature_problems",
    "vanished_claim_problems",
    "SmellReport",
    "check_entries",
    "check_entry",
    "reworded_candidates",
    "smell_reports",
]

_TODO = re.compile(r"\bTODO\b")
_WORD = re.compile(r"[A-Za-z][A-Za-z_]{2,}")
# words too common in error messages to say that two messages speak of the same thing
_COMMON = frozenset(
    [
        "the",
        "and",
        "for",
        "not",
        "was",
        "were",
        "with",
        "has",
        "have",
        "had",
        "this",
        "that",
        "from",
        "are",
        "but",
        "got",
        "found",
        "expected",
        "error",
        "errors",
        "failed",
        "cannot",
        "could",
        "should",
        "must",
        "been",
        "when",
        "which",
        "while",
        "into",
        "only",
        "than",
        "then",
        "there",
        "their",
        "its",
        "use",
        "using",
        "called",
    ]
)


@dataclass
class EntryCheck:
    dir: Path
    entry: Entry | None = None
    errors: list[str] = field(default_factory=list)
    todos: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors


def _todo_lines(path: Path) -> list[str]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return []
    return [
        f"{path}:{n}: {clip(ln.strip(), 100)}" for n, ln in enumerate(lines, 1) if _TODO.search(ln)
    ]


def _words(text: str) -> set[str]:
    return {w.lower() for w in _WORD.findall(text)} - _COMMON


def reworded_candidates(entry: Entry, measured: Mapping[str, Any]) -> list[str]:
    """What the runs suggest about a rewording, as to-do lines: the baseline messages of the
    documented type that share words with the documented message and do not already read
    as it (``measured``: the entry's aggregate in compat.json), most runs first; or, where
    a rewording is declared, that it matches none of the baselines' messages."""
    sig, reworded = entry.signature, entry.reworded
    where = f"{entry.dir / 'entry.yaml'}"
    # a baseline that declares its error is what torch says instead (signature.instead)
    # has been judged: its messages are not a rewording to consider
    said = {v.name for v in entry.variants if v.signature is not None and v.signature.instead}
    messages = [
        (m, str(v.get("name", "")))
        for v in measured.get("variants", ())
        if v.get("kind") == "baseline" and str(v.get("name", "")) not in said
        for m in v.get("messages", ())
    ]
    if reworded is not None:
        matched = any(
            entry.grade("other_error", m["type"], m["message"]) in SHOWS for m, _ in messages
        )
        if messages and not matched:
            return [
                f"{where}: signature.reworded matches none of the baseline runs' messages in "
                "results/compat.json; check it against what torch raised"
            ]
        return []
    documented = _words(pattern_text(sig.message))
    found: dict[tuple[str, str], list[Any]] = {}
    for m, variant in messages:
        read = entry.grade("other_error", m["type"], m["message"])  # no rewording declared
        shared = sorted(documented & _words(m["message"]))
        if read is not Grade.OTHER_ERROR or not shared or not type_named(m["type"], sig.type):
            continue
        slot = found.setdefault((m["type"], m["message"]), [0, set(), shared])
        slot[0] += int(m.get("count", 0))
        slot[1].add(variant)
    ranked = sorted(found.items(), key=lambda kv: (-kv[1][0], kv[0]))
    return [
        f"{where}: reworded? {t}: {clip(' '.join(msg.split()), 160)} ({count} runs of "
        f"{', '.join(sorted(variants))}; shares {', '.join(map(repr, shared))}): if it is the "
        "documented error in torch's words, declare it as signature.reworded {message, why}"
        for (t, msg), (count, variants, shared) in ranked[:3]
    ]


_LINK = re.compile(r"https?://")


def _message_line(yaml_path: Path) -> str:
    """entry.yaml:N of the signature's message (the first ``  message:`` line)."""
    try:
        lines = yaml_path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return str(yaml_path)
    n = next((i for i, t in enumerate(lines, 1) if t.startswith("  message:")), None)
    return f"{yaml_path}:{n}" if n else str(yaml_path)


# a documented message that only a CUDA (or NCCL) run can raise, and the words of another
# device or backend in a rewording: a CPU, meta or gloo twin is a stand-in, not a rewording
_DEVICE_BOUND = re.compile(r"(?i)\b(?:cuda|cudnn|cublas|cusolver|cufft|nccl|nvrtc|nvml)|cudaError")
_OTHER_DEVICE = re.compile(r"(?i)\b(?:cpu|mps)\b")
_TWIN = re.compile(r"(?i)\b(?:meta|gloo)\b")  # never the user's device: always a stand-in


def claim_problems(entry: Entry, yaml_path: Path) -> list[str]:
    """Claims judged otherwise than their document means them (docs/reference/
    outcomes-and-verdicts.md, "What a claim means"): a dead end whose runs measure another
    kind of failure than the documented one, a diagnostic that does not say what shows its
    detection, a CUDA or NCCL message "reworded" by another device's words."""
    problems = []
    for v in entry.variants:
        if not v.written:
            continue  # a variant still to write is a to-do, its measurement is not known yet
        where = f"{yaml_path}:{v.meaning.line or v.line}"
        if v.kind == "dead_end" and v.claim_ref is not None and not v.meaning.unmeasured:
            documented = failure_kind(v)
            measured = measures_kind(v)
            if measured is None:
                runs = (
                    f"its fails_as measures {v.fails_as.measures}"
                    if v.fails_as is not None
                    else "its runs show errors"
                )
                problems.append(
                    f"{where}: variant {v.name!r}: the document's failure is {documented}, "
                    f"and {runs}: a substitute measurement confirms nothing; measure "
                    f"{documented} (fails_as: measures: {documented}), or declare why these "
                    "runs cannot (claim.unmeasured)"
                )
        if (
            v.kind == "workaround"
            and v.meaning.kind == "diagnostic"
            and not v.meaning.detects
            and not v.meaning.unmeasured
        ):
            problems.append(
                f"{where}: variant {v.name!r} is a diagnostic (a check): judged by "
                "detection, it names the postconditions that show it flags the faulty "
                "input and passes a good one (claim.detects), or why these runs cannot "
                "(claim.unmeasured)"
            )
    if entry.reworded is not None:
        twin = _TWIN.search(entry.reworded.message)
        if twin is None and _DEVICE_BOUND.search(pattern_text(entry.signature.message)):
            twin = _OTHER_DEVICE.search(entry.reworded.message)
        if twin is not None:
            problems.append(
                f"{_message_line(yaml_path)}: signature.reworded names a stand-in device or "
                f"backend ({twin.group(0)!r}): that twin's error is the baseline's own "
                "stand-in signature, and the documented message waits for its device"
            )
    return problems


def document_claims(entry: Entry) -> tuple[str, ...] | None:
    """The refs of the document's claims ("workaround 1", "dead end 2", "solution 3"), read
    as ``new`` reads them from its kept record (origin.record) or source.md; None where the
    document is in no format ``new`` reads (a hand-written entry). Raises DocumentError (and
    OSError) where a document of a known format cannot be read."""
    record = entry.origin.get("record")
    path = entry.dir / str(record) if record else entry.source
    text = path.read_text(encoding="utf-8")
    fmt = entry.origin.get("format")
    if not isinstance(fmt, str) and detect_format(text) is None:
        return None
    return tuple(
        c.ref for c in parse_document(text, path, fmt if isinstance(fmt, str) else None).claims
    )


def _line_of_key(yaml_path: Path, key: str) -> str:
    """entry.yaml:N of a top-level key (the file alone where it is not found)."""
    try:
        lines = yaml_path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return str(yaml_path)
    n = next((i for i, t in enumerate(lines, 1) if t.startswith(f"{key}:")), None)
    return f"{yaml_path}:{n}" if n else str(yaml_path)


def vanished_claim_problems(entry: Entry, yaml_path: Path, repros_dir: Path) -> list[str]:
    """Every claim of the document has a row: a variant that claims it, or the reason no run
    measures it (its triage row's ``unmeasured``, shown as "not measured: why"). A claim with
    neither would vanish from the page, the JSON and the corrections; a reason for a claim
    the document does not have names nothing."""
    try:
        refs = document_claims(entry)
    except (DocumentError, OSError, UnicodeDecodeError) as exc:
        return [
            f"{exc}: the document's claims cannot be read, so nothing says that each has a "
            "variant or a reason"
        ]
    if refs is None:
        return []
    found = triage_row(entry.id, entry.dir, repros_dir)
    where = f"{found[0].path}:{found[1].line}" if found else "its domain's triage.yaml"
    claimed = {v.claim_ref for v in entry.variants if v.claim_ref}
    reasons = [u.ref for u in entry.unmeasured]
    problems = [
        f"{_line_of_key(yaml_path, 'variants')}: the document's {ref} has no variant and no "
        f"reason, so it would vanish from every page: add a variant that claims it "
        f'(claim: {{ref: "{ref}"}}), or say why no run measures it at {where} '
        f'(unmeasured: - {{ref: "{ref}", why: ...}})'
        for ref in refs
        if ref not in claimed and ref not in reasons
    ]
    problems += [
        f"{where}: unmeasured names {ref!r}, which the document of {entry.id} does not have "
        f"(its claims: {', '.join(refs) or 'none'})"
        for ref in reasons
        if ref not in refs
    ]
    return problems


def signature_problems(entry: Entry, yaml_path: Path) -> list[str]:
    """What the document's own words say against the signature: it matches no part of the
    error text the document quotes (origin.message), or only the document's placeholder as
    written (``{type(model).__name__}``: a release prints a class name there), or it holds a
    link (links in messages change between releases: Lightning-AI/lightning became
    Lightning-AI/pytorch-lightning)."""
    sig = entry.signature.message
    where = _message_line(yaml_path)
    problems = []
    if _LINK.search(pattern_text(sig)):
        problems.append(
            f"{where}: signature.message holds a link; links in messages change between "
            "releases: match the message's first sentence"
        )
    quoted = entry.origin.get("message")
    if not isinstance(quoted, str) or not quoted.strip():
        return problems
    named, rest, is_type = split_type(
        quoted
    )  # "RuntimeError: msg"; "CUDA error: msg" is all message
    text = rest if is_type and type_named(named, entry.signature.type) else quoted
    sample = PLACEHOLDER.sub("Sample0", text)  # what a release prints where the document has one
    as_written, as_printed = find(sig, text, 0), find(sig, sample, 0)
    if as_written and not as_printed:
        held = ", ".join(sorted(set(PLACEHOLDER.findall(text))))
        problems.append(
            f"{where}: signature.message matches the document's placeholder {held} as written; "
            "a release prints a value there: make it a variable part (.+?)"
        )
    elif not as_written and not as_printed:
        problems.append(
            f"{where}: signature.message does not match the document's own error text "
            f"(origin.message: {clip(' '.join(text.split()), 160)})"
        )
    return problems


def check_entry(
    entry_dir: Path, repros_dir: Path, compat: Mapping[str, Any] | None = None
) -> EntryCheck:
    """``compat``: the entry's aggregate in results/compat.json, where it was measured."""
    from harness.report.writeback import BLOCKS, WritebackError, fill

    result = EntryCheck(entry_dir)
    try:
        entry = load_entry(entry_dir, repros_dir)
    except EntryError as exc:
        result.errors.append(str(exc))
        return result
    result.entry = entry
    yaml_path = entry_dir / "entry.yaml"
    result.errors += signature_problems(entry, yaml_path)
    result.errors += claim_problems(entry, yaml_path)
    result.errors += vanished_claim_problems(entry, yaml_path, repros_dir)
    result.errors += gpu_use_problems(entry, yaml_path, repros_dir / "reprokit.py")
    try:
        fill(entry.document.read_text(encoding="utf-8"), dict.fromkeys(BLOCKS, ""), entry.document)
    except WritebackError as exc:
        result.errors.append(str(exc))
    try:
        parse_source(
            entry.repro.read_text(encoding="utf-8"), str(entry.repro), feature_version=(3, 7)
        )
    except SyntaxError as exc:
        result.errors.append(
            f"{entry.repro}:{exc.lineno}: not valid Python 3.7 (the oldest target): {exc.msg}"
        )
    unwritten = [v.name for v in entry.variants if not v.written]
    if unwritten:
        result.todos.append(
            f"{entry.repro}: {len(unwritten)} of {len(entry.variants)} variants not written "
            f"(None in VARIANTS; never run): {', '.join(unwritten)}"
        )
    for path in (yaml_path, entry.repro, entry.document):
        result.todos += _todo_lines(path)
    if compat:
        result.todos += reworded_candidates(entry, compat)
    return result


def _measured(results: Path) -> dict[str, Mapping[str, Any]]:
    """The entries' aggregates in results/compat.json and its parts (none where they are
    missing or unread)."""
    try:
        document = read_compat(results)
    except (OSError, ValueError):
        return {}
    return {e["id"]: e for e in document.get("entries", ()) if isinstance(e, dict) and "id" in e}


def check_entries(
    repros_dir: Path, patterns: Sequence[str] = (), results: Path | None = None
) -> list[EntryCheck]:
    """Every entry folder under repros/ (matched by id glob), each checked on its own.
    ``results``: where compat.json is read from (default: results/ beside repros/)."""
    measured = _measured(results if results is not None else repros_dir.parent / "results")
    out = []
    for yaml_path in sorted(repros_dir.rglob("entry.yaml")):
        entry_id = yaml_path.parent.relative_to(repros_dir).as_posix()
        if patterns and not any(fnmatch.fnmatchcase(entry_id, p) for p in patterns):
            continue
        out.append(check_entry(yaml_path.parent, repros_dir, measured.get(entry_id)))
    return out


@dataclass(frozen=True)
class SmellReport:
    """One entry's smells in the records, and the reasons entry.yaml gives for none seen."""

    entry: Entry
    smells: tuple[Smell, ...]
    stale: tuple[str, ...]  # explanations of smells the records no longer show

    @property
    def unexplained(self) -> tuple[Smell, ...]:
        return tuple(s for s in self.smells if s.explained is None)


def smell_reports(entries: Sequence[Entry], records: Sequence[Record]) -> list[SmellReport]:
    """Per entry (in the order given), its smells in ``records`` (the store's newest)."""
    by_entry: dict[str, list[Record]] = {}
    for r in records:
        by_entry.setdefault(r.entry, []).append(r)
    out = []
    for entry in entries:
        smells = find_smells(entry, by_entry.get(entry.id, ()))
        out.append(SmellReport(entry, tuple(smells), tuple(stale_explanations(entry, smells))))
    return out
