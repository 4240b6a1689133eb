"""A knowledge-base record corrected by what the runs measured (``python -m harness
corrections``), by one model of what the runs can show (harness/catalogue/kbevidence.py: the
scenario is the unit of evidence, only runs inside the record's scope count, a CPU twin never
speaks for a CUDA claim).

A scripted reproducer is one constructed cause of an error, run across releases: it can show
*where* a piece of advice fails, never how often it helps the people who meet the error. So:

rates        never written. A KB rate is a population figure; a script repeated is one
             scenario. Where advice fails in measured in-scope releases, its ``condition``
             says so (below); the figure stays for the maintainer to weigh.
condition    a plain sentence appended to a workaround's or dead end's ``condition`` where a
             reading of its text (the sensible one, or the literal one beside it) did not
             work (a dead end: did work) in some measured in-scope releases: which releases,
             on which device, and where the change lies between two measured releases. No
             exception text, path or count.
regex        grows only: each wording of the documented error the runs raised in scope (at a
             grade that reads as it: verbatim, variable-parts, declared rewording) that the
             record's regex misses is added as an alternative of its fixed parts. A proposal
             must still match the record's signature, every run text the old regex matched,
             every wording seen, and no control's message; searched as the knowledge base's
             ``lookup`` does (case-insensitive). ``error.signature`` is never replaced.
dates        ``error.last_confirmed`` moves only for a verbatim (or declared-reworded)
             reproduction inside the record's scope, on its device, in the newest measured
             torch line; the change names that run. ``metadata.last_verification`` and
             ``verdict.last_updated`` are the maintainers' and never touched.
untouched    fix rate, resolvable, confidence, summary, version_range (never narrowed to what
             was measured), leads_to, evidence_count, review_status.

A record with no change is not written. Each change belongs to one pull request by kind
(``PR_SIGNATURES``, ``PR_CONDITIONS``); the outcome lines and the list of documented messages
no measured release raises are the other two (harness/catalogue/kbcorrections.py).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from packaging.version import Version

from harness.aggregate import EntryAggregate, VariantAggregate
from harness.aggregate.unmeasured import is_unmeasured
from harness.catalogue.kbevidence import (
    RecordScope,
    Scenario,
    Trial,
    claim_device,
    public_version,
    record_scope,
    scenarios,
    span,
    trials,
)
from harness.catalogue.kbrecord import dumps_like, loads, problems
from harness.catalogue.msgsearch import message_regex
from harness.matching import find
from harness.outcomes import SHOWS, Grade
from harness.spec.backtracking import backtracking_problem
from harness.spec.entries import Entry

__all__ = [
    "PR_CONDITIONS",
    "PR_SIGNATURES",
    "Change",
    "Correction",
    "Left",
    "RegexProposal",
    "Unraised",
    "correct",
    "duplicate_lines",
    "rule_breaks",
    "markdown_suggestions",
    "outcome_lines",
    "plain_sentence_problem",
    "regex_problems",
]

TOOL = "torch-error-harness"
PR_SIGNATURES = "signatures"
PR_CONDITIONS = "conditions"
# what a machine without a CUDA device says when asked for one: the machine's lack, never a
# wording of the record's error, whatever an entry's loose signature reads it as
_NO_DEVICE = re.compile(
    r"NVIDIA driver|CUDA driver version is insufficient|no CUDA GPUs|accelerator device when "
    r"none|not compiled with CUDA",
    re.I,
)


@dataclass(frozen=True)
class Change:
    field: str  # where in the record: "workarounds[0].condition"
    kind: str  # condition, regex, date, source
    old: Any
    new: Any
    evidence: str  # scenarios, releases, the run that decided it
    rule: str  # the rule that decided it
    pr: str  # PR_SIGNATURES or PR_CONDITIONS


@dataclass(frozen=True)
class Left:
    field: str
    why: str


@dataclass(frozen=True)
class RegexProposal:
    old: str
    new: str
    wordings: tuple[str, ...]  # every wording of the documented error the runs raised in scope
    missed: tuple[str, ...]  # those the old regex missed (each one added)
    old_matched: int  # run texts the old regex matched (the new one matches them all)


@dataclass(frozen=True)
class Unraised:
    """A documented message no measured in-scope release raised (on the record's device)."""

    message: str
    releases: str  # the torch releases measured, "2.0.1–2.15.0"
    devices: str
    scenarios: int  # baseline scenarios measured
    instead: tuple[tuple[str, int], ...]  # what the baselines raised instead, by scenarios


@dataclass
class Correction:
    entry_id: str
    kb_id: str
    kb_path: str
    commit: str
    original: bytes
    record: dict[str, Any]
    scope: RecordScope
    changes: list[Change] = field(default_factory=list)
    left: list[Left] = field(default_factory=list)
    page: str = ""  # the compatibility page (URL, or its path under results/)
    seen: tuple[str, ...] = ()  # every message the baselines raised in scope (for lookup)
    regex: RegexProposal | None = None
    unraised: Unraised | None = None
    holds: list[str] = field(default_factory=list)  # claims whose every reading held: why
    # the counted trials inside the record's scope (its outcome lines read them too)
    found: tuple[Trial, ...] = ()

    def text(self, pr: str | None = None) -> bytes:
        """The record with every change (or one pull request's) applied, written as the
        original is; the original's bytes where nothing changed."""
        chosen = [ch for ch in self.changes if pr is None or ch.pr == pr]
        if not chosen:
            return self.original
        data = loads(self.original)
        for ch in chosen:
            parent, key = _walk(data, ch.field)
            parent[key] = ch.new
        return dumps_like(self.original, data)

    def prs(self) -> list[str]:
        return sorted({ch.pr for ch in self.changes})

    def set(self, path: str, new: Any, kind: str, evidence: str, rule: str, pr: str) -> None:
        """Set the field at ``path`` (dots and [i]) to ``new`` and note it, where it differs."""
        parent, key = _walk(self.record, path)
        old = parent.get(key) if isinstance(parent, dict) else parent[key]
        if old == new:
            return
        parent[key] = new
        self.changes.append(Change(path, kind, old, new, evidence, rule, pr))


def _walk(data: Any, path: str) -> tuple[Any, Any]:
    parts = [p for p in re.split(r"\.|\[(\d+)\]", path) if p]
    for part in parts[:-1]:
        data = data[int(part)] if part.isdigit() else data.setdefault(part, {})
    last = parts[-1]
    return data, int(last) if last.isdigit() else last


# -- words a record can carry -------------------------------------------------------------------

_PATH = re.compile(r"(?:[\w.~-]*/[\w.-]+){2,}|\\[\w.-]+\\|\b[\w-]+\.py\b")
_COUNT = re.compile(r"\b\d+\s*/\s*\d+\b|\b\d+ (?:runs|trials)\b")
_DUMP = re.compile(r"Traceback|\bFile \"|\b[A-Z]\w*(?:Error|Exception): ")


def plain_sentence_problem(text: str) -> str | None:
    """Why ``text`` is not a sentence a record's condition may carry, or None: one line, no
    path, no exception text, no run count."""
    if "\n" in text or "\r" in text:
        return "more than one line"
    if _PATH.search(text):
        return "a path"
    if _DUMP.search(text):
        return "an exception text"
    if _COUNT.search(text):
        return "a count of runs"
    return None


def _plain_description(v: VariantAggregate) -> str:
    """A variant's description where it reads as plain words; else ""."""
    text = re.sub(r"^the (sensible|literal) reading[^:]*:\s*", "", v.description or "", flags=re.I)
    text = text.split(": must")[0].strip().rstrip(".")
    return text if text and plain_sentence_problem(text) is None and len(text) <= 160 else ""


def _devices_words(found: Iterable[Scenario]) -> str:
    devices = sorted({s.device for s in found})
    return "/".join(d.upper() for d in devices) or "no device"


def _runs_of(subset: Sequence[Version], measured: Sequence[Version]) -> str:
    """``subset`` as spans of consecutive measured releases: "2.0.1, 2.3.1–2.5.1"."""
    chosen = set(subset)
    parts: list[list[Version]] = []
    previous_in = False
    for version in measured:
        if version in chosen:
            if previous_in:
                parts[-1].append(version)
            else:
                parts.append([version])
        previous_in = version in chosen
    return ", ".join(span(p) for p in parts)


def _by_release(found: Sequence[Scenario]) -> dict[Version, str]:
    """Each release's status over its scenarios (devices, precisions): works, fails, mixed."""
    per: dict[Version, set[str]] = {}
    for s in found:
        per.setdefault(s.release, set()).add(s.status)
    return {
        r: (next(iter(st)) if len(st) == 1 and "flaky" not in st else "mixed")
        for r, st in sorted(per.items())
    }


def _where(by: dict[Version, str], good: str, bad: str, said: dict[str, str]) -> str | None:
    """Where the ``bad`` status holds, in words (``said``: how to say each status); None
    where it holds nowhere."""
    measured = list(by)
    bads = [r for r in measured if by[r] == bad]
    mixed = [r for r in measured if by[r] == "mixed"]
    goods = [r for r in measured if by[r] == good]
    if not bads and not mixed:
        return None
    if not goods and not mixed:
        return f"{said[bad]} on any measured torch release ({span(measured)})"
    parts = []
    if bads and not mixed and bads == measured[: len(bads)]:
        parts.append(
            f"{said[bad]} on torch {span(bads)} and {said[good]} on torch {span(goods)}: the "
            f"change lies between {bads[-1]} and {goods[0]}"
        )
    elif bads and not mixed and bads == measured[len(goods) :]:
        parts.append(
            f"{said[good]} on torch {span(goods)} and {said[bad]} on torch {span(bads)}: the "
            f"change lies between {goods[-1]} and {bads[0]}"
        )
    else:
        if bads:
            parts.append(f"{said[bad]} on torch {_runs_of(bads, measured)}")
        if goods:
            parts.append(f"{said[good]} on torch {_runs_of(goods, measured)}")
    if mixed:
        parts.append(
            f"on torch {_runs_of(mixed, measured)} it went either way (by precision, or "
            "between trials)"
        )
    return "; ".join(parts)


# -- conditions (pull request: conditions) -------------------------------------------------------


def _not_measured(agg: EntryAggregate, ref: str) -> str:
    """Why no variant runs a claim: its verdict row's "not measured: why"."""
    return next(
        (
            v.why
            for v in agg.verdicts
            if is_unmeasured(v.subject, v.why) and v.claim.startswith(f"{ref}:")
        ),
        "no variant runs it",
    )


def _conditions(c: Correction, agg: EntryAggregate, found: Sequence[Trial]) -> None:
    by_variant: dict[str, list[Scenario]] = {}
    for s in scenarios(found):
        by_variant.setdefault(s.variant.name, []).append(s)
    for key, ref_word, kind in (
        ("workarounds", "workaround", "workaround"),
        ("dead_ends", "dead end", "dead_end"),
    ):
        for i, item in enumerate(c.record.get(key) or []):
            ref = f"{ref_word} {i + 1}"
            where = f"{key}[{i}].condition"
            readings = [v for v in agg.variants if v.claim_ref == ref and v.kind == kind]
            if not readings:
                c.left.append(Left(where, _not_measured(agg, ref)))
                continue
            device = claim_device(
                c.scope,
                str(item.get("action") or ""),
                str(item.get("why_fails") or item.get("how") or ""),
            )
            inside = [v for v in readings if not (v.condition and not v.within)]
            if not inside:
                c.left.append(Left(where, "every variant of it lies outside its condition"))
                continue
            if kind == "dead_end":
                inside = [v for v in inside if v.measured_kind]
                if not inside:
                    c.left.append(
                        Left(where, "its documented failure is of a kind the runs do not measure")
                    )
                    continue
            measured = {
                v.name: [
                    s for s in by_variant.get(v.name, []) if device != "cuda" or s.device == "cuda"
                ]
                for v in inside
            }
            if not any(measured.values()):
                if device == "cuda":
                    why = "a CUDA claim, and no CUDA run measured it"
                elif not any(v.overall.n for v in inside):
                    why = "no baseline reproduced the error where it ran, so no scenario judges it"
                else:
                    why = f"no counted scenario inside the record's scope ({c.scope.words()})"
                c.left.append(Left(where, why))
                continue
            sentence = _claim_sentence(kind, inside, measured)
            n = sum(len(x) for x in measured.values())
            if sentence is None:
                c.holds.append(f"{ref}: as documented in all {n} scenarios in scope")
                continue
            problem = plain_sentence_problem(sentence)
            if problem is not None:  # a description carried something a record must not
                c.left.append(Left(where, f"its sentence would hold {problem}"))
                continue
            old = str(item.get("condition") or "").strip()
            new = f"{old} {sentence}" if old else sentence
            evidence = "; ".join(
                f"{v.name}: {_scenario_counts(measured[v.name])}"
                for v in inside
                if measured[v.name]
            )
            c.set(
                where,
                new,
                "condition",
                evidence,
                "a reading of the advice went against it in some measured in-scope releases: "
                "the releases, appended to the condition",
                PR_CONDITIONS,
            )


def _scenario_counts(found: Sequence[Scenario]) -> str:
    works = sum(s.status == "works" for s in found)
    fails = sum(s.status == "fails" for s in found)
    flaky = len(found) - works - fails
    text = f"works in {works}/{len(found)} scenarios, fails in {fails}"
    return text + (f", flaky in {flaky}" if flaky else "")


def _claim_sentence(
    kind: str, readings: Sequence[VariantAggregate], measured: dict[str, list[Scenario]]
) -> str | None:
    """The condition's sentence, or None where every reading went as documented."""
    if kind == "workaround":
        good, bad, said = "works", "fails", {"works": "worked", "fails": "did not work"}
    else:  # a dead end documented to fail: its advice is wrong where it works
        good, bad, said = "fails", "works", {"fails": "failed", "works": "did not fail"}
    words: list[tuple[VariantAggregate, str]] = []
    clean: list[VariantAggregate] = []
    for v in readings:
        found = measured[v.name]
        if not found:
            continue
        where = _where(_by_release(found), good, bad, said)
        if where is None:
            clean.append(v)
        else:
            words.append((v, where))
    if not words:
        return None
    every = [s for v in readings for s in measured[v.name]]
    lead = f"In a scripted reproduction by {TOOL} ({_devices_words(every)})"
    sentences = []
    for v, where in words:
        if v.reading == "literal" or (len(readings) > 1 and v.reading != "sensible"):
            described = _plain_description(v)
            if v.reading == "literal":
                as_ = f"done as written ({described})" if described else "done as written"
            else:
                as_ = f"done this way ({described})" if described else "in one reading of it"
            sentences.append(f"{as_}, it {where}")
        else:
            sentences.append(f"it {where}")
    text = f"{lead}, " + "; ".join(sentences) + "."
    if kind == "workaround":
        for v in clean:
            described = _plain_description(v)
            if described and v.reading != "literal":
                text += f" Done this way ({described}), it worked on every measured release."
                break
    return text


# -- the regex and the date (pull request: signatures) ------------------------------------------


def _one_line(message: str, limit: int = 300) -> str:
    """A message as a pasted text reads: one line, source excerpts cut, at most ``limit``."""
    lines = []
    for line in message.splitlines():
        line = line.strip()
        if line.startswith(("File ", "Traceback")) or "repros/" in line:
            break
        if line:
            lines.append(line)
    text = " ".join(lines)
    return text[:limit].rsplit(" ", 1)[0] if len(text) > limit else text


def _first_sentence(message: str, limit: int = 120) -> str:
    """A wording's first sentence (a regex alternative need not carry torch's advice after it),
    cut at a word within ``limit`` characters."""
    head = re.split(r"(?<=[.!?])\s", message, maxsplit=1)[0]
    return head[:limit].rsplit(" ", 1)[0] if len(head) > limit else head


def _search(pattern: str, text: str) -> bool:
    """As the knowledge base's lookup searches (case-insensitive), through the one bounded
    runner (harness/matching.py): a search past its time bound finds nothing."""
    re.compile(pattern, re.IGNORECASE)  # a pattern that is no regex raises, as before
    return find(pattern, text, re.IGNORECASE) is not None


def regex_problems(
    old: str,
    new: str,
    signature: str,
    wordings: Sequence[str],
    old_matched: Sequence[str],
    controls: Sequence[str],
) -> list[str]:
    """Why ``new`` may not replace ``old``: the growth rules, searched as the knowledge base's
    lookup searches (case-insensitive)."""
    try:
        re.compile(new, re.IGNORECASE)
    except re.error as exc:
        return [f"does not compile: {exc}"]
    found = []
    # the knowledge base's own rule (exponential backtracking); polynomial shapes are its data
    problem = backtracking_problem(new, polynomial_most=None)
    if problem:
        return [f"may backtrack: {problem}"]
    if signature and not _search(new, signature):
        found.append("no longer matches the record's own signature")
    found += [
        f"misses a text the old regex matched: {t[:120]}"
        for t in old_matched
        if not _search(new, t)
    ]
    found += [
        f"misses a wording the runs raised: {w[:120]}" for w in wordings if not _search(new, w)
    ]
    found += [
        f"matches a control's message the old one did not: {t[:120]}"
        for t in controls
        if _search(new, t) and not _safe_search(old, t)
    ]
    return found


def _safe_search(pattern: str, text: str) -> bool:
    try:
        return _search(pattern, text)
    except re.error:
        return False


def _regex(c: Correction, agg: EntryAggregate, found: Sequence[Trial]) -> None:
    baselines = [t for t in found if t.variant.kind == "baseline"]
    c.seen = tuple(sorted({_one_line(t.message) for t in baselines if t.message}))
    shows = sorted(
        {
            _one_line(t.message)
            for t in baselines
            if t.grade in SHOWS
            and t.message
            and not (t.device != "cuda" and _NO_DEVICE.search(t.message))
        }
    )
    old = str(c.record["error"].get("regex") or "")
    signature = str(c.record["error"].get("signature") or "")
    if not baselines:
        c.left.append(
            Left("error.regex", f"no baseline run inside the record's scope ({c.scope.words()})")
        )
        return
    if not shows:
        c.left.append(Left("error.regex", "no run raised the documented error in scope"))
        return
    old_matched = [t for t in c.seen if _safe_search(old, t)]
    missed = [w for w in shows if not _safe_search(old, w)]
    controls = sorted(
        {
            _one_line(f"{m.type}: {m.message}")
            for v in agg.variants
            if v.kind == "control"
            for m in v.messages
        }
    )
    if not missed:
        c.regex = RegexProposal(old, old, tuple(shows), (), len(old_matched))
        c.left.append(
            Left("error.regex", f"it matches every wording the runs raised in scope ({len(shows)})")
        )
        return
    added: list[str] = []
    for w in missed:
        _, sep, message = w.partition(": ")
        alternative = message_regex(_first_sentence(message if sep else w))
        if alternative and alternative not in added and not any(_safe_search(a, w) for a in added):
            added.append(alternative)
    new = "|".join([old, *added]) if old else "|".join(added)
    problems_ = regex_problems(old, new, signature, shows, old_matched, controls)
    if problems_:
        c.left.append(
            Left("error.regex", "a grown regex would break a rule: " + "; ".join(problems_))
        )
        return
    c.regex = RegexProposal(old, new, tuple(shows), tuple(missed), len(old_matched))
    c.set(
        "error.regex",
        new,
        "regex",
        f"{len(missed)} of {len(shows)} wordings raised in scope were missed; each added as its "
        f"fixed parts; still matches the signature and the {len(old_matched)} run texts the old "
        "one matched, and no control's",
        "a regex only grows: an observed wording of the documented error is added as an "
        "alternative",
        PR_SIGNATURES,
    )


def _last_confirmed(c: Correction, agg: EntryAggregate, found: Sequence[Trial]) -> None:
    """``found``: the trials in scope on the record's device; the newest line is the newest
    torch release the entry measured at all, in scope or not (a record of an old range has
    no current release to confirm it in)."""
    signature = str(c.record["error"].get("signature") or "")
    documented = signature.split(": ", 1)[1] if ": " in signature else signature
    confirming = [
        t
        for t in found
        if t.variant.kind == "baseline"
        and (
            t.grade is Grade.REWORDED
            # verbatim: the record's own words in the run's message, not only an entry's
            # looser pattern
            or (t.grade is Grade.VERBATIM and documented.lower() in t.message.lower())
        )
    ]
    releases = sorted({v for e in agg.envs if (v := public_version(e.torch)) is not None})
    if not confirming or not releases:
        c.left.append(
            Left("error.last_confirmed", "no verbatim reproduction in scope on the record's device")
        )
        return
    line = releases[-1].release[:2]
    current = [t for t in confirming if t.release.release[:2] == line]
    if not current:
        c.left.append(
            Left(
                "error.last_confirmed",
                f"reproduced verbatim only on torch {span(sorted({t.release for t in confirming}))}, "
                f"not in the newest line measured ({'.'.join(map(str, line))})",
            )
        )
        return
    run = max(current, key=lambda t: t.started)
    date = run.started[:10]
    old = str(c.record["error"].get("last_confirmed") or "")
    if date <= old:
        c.left.append(
            Left("error.last_confirmed", f"the newest verbatim run ({date}) is not newer")
        )
        return
    c.set(
        "error.last_confirmed",
        date,
        "date",
        f"{run.variant.name} on torch {run.release} ({run.device}, {run.precision}), {run.started}",
        "the documented message reproduced verbatim inside the record's scope, on its device, "
        "in the newest torch line measured",
        PR_SIGNATURES,
    )


def _unraised(c: Correction, found: Sequence[Trial]) -> None:
    baselines = [t for t in found if t.variant.kind == "baseline"]
    if not baselines or any(t.grade in SHOWS for t in baselines):
        return
    found_scenarios = scenarios(baselines)
    instead: dict[str, set[tuple[str, Version, str, str]]] = {}
    for t in baselines:
        what = t.message.split(": ", 1)[0] if t.message else "nothing raised"
        instead.setdefault(what, set()).add((t.variant.name, t.release, t.device, t.precision))
    c.unraised = Unraised(
        str(c.record["error"].get("signature") or ""),
        span(sorted({t.release for t in baselines})),
        _devices_words(found_scenarios),
        len(found_scenarios),
        tuple(sorted(((k, len(v)) for k, v in instead.items()), key=lambda kv: (-kv[1], kv[0]))),
    )


def _on_device(c: Correction) -> list[Trial]:
    """The trials in scope on the record's device (a record on CUDA: CUDA runs only)."""
    return [t for t in c.found if c.scope.device != "cuda" or t.device == "cuda"]


def correct(
    entry: Entry,
    agg: EntryAggregate,
    original: bytes,
    *,
    page: str = "",
    page_url: str | None = None,
) -> Correction:
    """The record ``original`` as the runs of ``agg`` say it should read."""
    record = loads(original)
    scope = record_scope(record, entry)
    c = Correction(
        entry_id=entry.id,
        kb_id=str(entry.origin.get("id", "")),
        kb_path=str(entry.origin.get("path", "")),
        commit=str(entry.origin.get("commit", "")),
        original=original,
        record=copy.deepcopy(record),
        scope=scope,
        page=page_url or page,
    )
    c.found = tuple(trials(agg, entry, scope))
    on_device = _on_device(c)
    _conditions(c, agg, c.found)
    _regex(c, agg, on_device)
    _last_confirmed(c, agg, on_device)
    _unraised(c, on_device)
    if page_url:
        for key in ("workarounds", "dead_ends"):
            for i, item in enumerate(c.record.get(key) or []):
                changed = any(ch.field == f"{key}[{i}].condition" for ch in c.changes)
                if changed and page_url not in (item.get("sources") or []):
                    c.set(
                        f"{key}[{i}].sources",
                        [*(item.get("sources") or []), page_url],
                        "source",
                        page_url,
                        "the measured compatibility page, for the changed condition",
                        PR_CONDITIONS,
                    )
    found = problems(c.record) + rule_breaks(
        record,
        c.record,
        cuda_record=scope.device == "cuda",
        cuda_measured=any(t.device == "cuda" for t in on_device),
        confirmed_run=any(ch.field == "error.last_confirmed" for ch in c.changes),
    )
    if found:
        raise ValueError(
            f"{entry.id}: the corrected record breaks the knowledge base's rules: {found}"
        )
    return c


# -- the rules, checked on what a correction wrote --------------------------------------------

_RATE_FIELDS = (("workarounds", "success_rate"), ("dead_ends", "fail_rate"))
_NEVER = (
    ("verdict", "fix_success_rate"),
    ("verdict", "resolvable"),
    ("verdict", "confidence"),
    ("verdict", "summary"),
    ("verdict", "last_updated"),
    ("metadata", "last_verification"),
    ("metadata", "review_status"),
    ("metadata", "evidence_count"),
    ("error", "signature"),
)


def rule_breaks(
    before: dict[str, Any],
    after: dict[str, Any],
    *,
    cuda_record: bool = False,
    cuda_measured: bool = False,
    confirmed_run: bool = False,
) -> list[str]:
    """Every rule a corrected record ``after`` breaks against its original ``before``:
    ``cuda_record`` where the record speaks of a CUDA device, ``cuda_measured`` where a CUDA
    run measured it, ``confirmed_run`` where a verbatim in-scope run on its device in the
    newest torch line supports a moved ``last_confirmed``. Run on every correction before it
    is written; the tests make each one fail on a constructed record."""
    found = []
    if cuda_record and not cuda_measured and after != before:
        found.append("a CUDA record changed by runs that are not CUDA runs")
    for key, rate in _RATE_FIELDS:
        for i, (old, new) in enumerate(
            zip(before.get(key) or [], after.get(key) or [], strict=False)
        ):
            if old.get(rate) != new.get(rate):
                found.append(
                    f"{key}[{i}].{rate} written ({old.get(rate)} -> {new.get(rate)}): a script's scenarios are not a population figure"
                )
            o, n = str(old.get("condition") or ""), str(new.get("condition") or "")
            if o != n:
                if not n.startswith(o):
                    found.append(f"{key}[{i}].condition: the old text is not kept before the new")
                problem = plain_sentence_problem(n[len(o) :].strip())
                if problem:
                    found.append(f"{key}[{i}].condition holds {problem}")
    for group, name in _NEVER:
        if (before.get(group) or {}).get(name) != (after.get(group) or {}).get(name):
            found.append(f"{group}.{name} changed: never a correction's")
    old_range = ((before.get("environment") or {}).get("runtime") or {}).get("version_range")
    new_range = ((after.get("environment") or {}).get("runtime") or {}).get("version_range")
    if old_range != new_range:
        found.append(
            f"environment.runtime.version_range changed ({old_range!r} -> {new_range!r}): a range is never narrowed to what was measured"
        )
    if (before.get("transition_graph") or {}) != (after.get("transition_graph") or {}):
        found.append(
            "transition_graph changed: a probability from one script is not a population's"
        )
    old_error, new_error = before.get("error") or {}, after.get("error") or {}
    if old_error.get("last_confirmed") != new_error.get("last_confirmed"):
        if not confirmed_run:
            found.append(
                "error.last_confirmed moved without a verbatim in-scope run on the record's device"
            )
        elif str(new_error.get("last_confirmed")) < str(old_error.get("last_confirmed") or ""):
            found.append("error.last_confirmed moved back")
    old_rx, new_rx = str(old_error.get("regex") or ""), str(new_error.get("regex") or "")
    if old_rx != new_rx:
        if old_rx and not new_rx.startswith(old_rx + "|"):
            found.append(
                "error.regex replaced, not grown (the old pattern is not kept as its first alternative)"
            )
        signature = str(old_error.get("signature") or "")
        if signature and not _safe_search(new_rx, signature):
            found.append("error.regex no longer matches the record's own signature")
    return found


def duplicate_lines(lines: Sequence[Mapping[str, Any]]) -> list[str]:
    """Outcome lines that repeat a record x workaround x release x device."""
    seen: set[tuple[str, ...]] = set()
    found = []
    for x in lines:
        env = x.get("environment") or {}
        key = (
            str(x.get("error_id")),
            str(x.get("workaround_action")),
            str(env.get("torch")),
            str(env.get("device")),
        )
        if key in seen:
            found.append(f"a second line for {' / '.join(key)}")
        seen.add(key)
    return found


# -- outcome lines: the knowledge base's report_outcome feed -----------------------------------


def outcome_lines(c: Correction) -> list[dict[str, Any]]:
    """One line per workaround x torch release x device, from the scenarios inside the
    record's scope and the claim's condition (every reading: a failed literal reading is a
    failure of the advice as written): success where every scenario of every reading worked.
    ``notes`` says it is a scripted reproduction and which readings and precisions went how."""
    actions = {
        f"workaround {i + 1}": (str(w.get("action") or ""), str(w.get("how") or ""))
        for i, w in enumerate(loads(c.original).get("workarounds") or [])
    }
    groups: dict[tuple[str, Version, str], list[Trial]] = {}
    for t in c.found:
        v = t.variant
        if v.kind != "workaround" or v.claim_ref not in actions:
            continue
        action, how = actions[str(v.claim_ref)]
        if claim_device(c.scope, action, how) == "cuda" and t.device != "cuda":
            continue
        groups.setdefault((str(v.claim_ref), t.release, t.device), []).append(t)
    lines = []
    for (ref, release, device), group in groups.items():
        found = scenarios(group)
        worked = all(s.status == "works" for s in found)
        readings = []
        for name in dict.fromkeys(s.variant.name for s in found):
            mine = [s for s in found if s.variant.name == name]
            reading = mine[0].variant.reading or "the only reading"
            went = ", ".join(f"{s.precision} {s.status}" for s in mine)
            readings.append(f"{name} ({reading}): {went}")
        pythons = sorted({str(t.versions.get("python") or "") for t in group} - {""})
        lines.append(
            {
                "timestamp": max(t.started for t in group),
                "error_id": c.kb_id,
                "workaround_action": actions[ref][0],
                "success": worked,
                "canon_exists": True,
                "environment": {
                    "torch": str(release),
                    "python": ", ".join(pythons),
                    "device": device,
                    "precisions": sorted({s.precision for s in found}),
                },
                "notes": (
                    f"{TOOL}: a scripted reproduction of one cause of this error, not a user's "
                    f"report; one line per workaround, torch release and device (entry "
                    f"{c.entry_id}); " + "; ".join(readings)
                ),
            }
        )
    lines.sort(key=lambda x: (x["timestamp"], x["workaround_action"], x["notes"]))
    return lines


# -- the Markdown entry (the seeds' format): the same rules, as a suggested block ------------------


def _as_record(entry: Entry) -> dict[str, Any]:
    """The facts of a Markdown entry in a record's shape, for the same rules to read."""
    numbers: dict[str, int] = {}
    for v in entry.variants:
        if v.claim_ref:
            word, _, n = v.claim_ref.rpartition(" ")
            if n.isdigit():
                numbers[word] = max(numbers.get(word, 0), int(n))

    def items(word: str) -> list[dict[str, Any]]:
        return [
            {"action": f"{word} {i}", "condition": ""} for i in range(1, numbers.get(word, 0) + 1)
        ]

    message = str(entry.origin.get("message") or entry.title)
    return {
        "error": {"signature": message, "regex": re.escape(message.split(": ", 1)[-1])},
        # the Markdown document's version table is judged on the page; its scope here is every
        # release the matrix measured
        "environment": {"runtime": {"name": "pytorch", "version_range": ""}},
        "verdict": {
            "resolvable": "partial",
            "fix_success_rate": 0.5,
            "confidence": 0.3,
            "summary": "",
        },
        "workarounds": items("workaround"),
        "dead_ends": items("dead end"),
        "metadata": {"evidence_count": 0},
    }


def _shown(value: Any) -> str:
    text = "–" if value in (None, "") else str(value)
    return text.replace("|", "\\|").replace("\n", " ")


def markdown_suggestions(entry: Entry, agg: EntryAggregate) -> str:
    """What the runs would add to a Markdown entry (the seeds' format), by the rules
    `corrections` applies to a JSON record: conditions where a reading of the advice went
    against it in measured releases, the wordings of the error torch raised, and whether any
    release raised the documented message. The entry document's ``suggested-corrections``
    block; nothing is applied to source.md."""
    record = _as_record(entry)
    scope = record_scope(record, entry)
    c = Correction(entry.id, "", "", "", b"", copy.deepcopy(record), scope)
    c.found = tuple(trials(agg, entry, scope))
    on_device = _on_device(c)
    _conditions(c, agg, c.found)
    _regex(c, agg, on_device)
    _unraised(c, on_device)
    lines = [
        "### Suggested corrections",
        "",
        "What the runs would add to the source document, by the rules `python -m harness "
        "corrections` applies to a knowledge-base record (docs/how-to/knowledge-base.md): a "
        "scripted reproducer shows where advice fails, never how often it helps, so no figure "
        "is proposed. Suggested only, never applied to source.md.",
        "",
    ]
    rows = []
    for ch in c.changes:
        m = re.fullmatch(r"(workarounds|dead_ends)\[(\d+)\]\.condition", ch.field)
        if m:
            what = "Workaround" if m.group(1) == "workarounds" else "Dead end"
            rows.append(
                f"| {what} {int(m.group(2)) + 1}: when it holds | {_shown(ch.new)} | {_shown(ch.evidence)} |"
            )
    if c.regex is not None and c.regex.missed:
        for w in c.regex.missed:
            rows.append(
                f"| The error's wording | torch also raises it as: {_shown(w[:200])} | a wording the runs raised |"
            )
    if c.unraised is not None:
        u = c.unraised
        rows.append(
            f"| The error | no measured release raised the documented message (torch {u.releases}, "
            f"{u.devices}, {u.scenarios} baseline scenarios) | raised instead: "
            f"{_shown(', '.join(f'{k} ({n})' for k, n in u.instead[:3]))} |"
        )
    if rows:
        lines += ["| the document's | the runs add | evidence |", "|---|---|---|", *rows]
    else:
        lines.append(
            "Nothing: every measured reading went as the document says, and no new wording was seen."
        )
    left = [
        f"- {item.field}: {_shown(item.why[:300])}" for item in c.left if "condition" in item.field
    ]
    if left:
        lines += ["", "Left as the document says:", "", *left]
    return "\n".join(lines) + "\n"
