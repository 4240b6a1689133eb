"""One knowledge-base domain at a glance: what its claims came to, worst first.

Input: the domain's triage (harness/spec/triage.py), the aggregated verdicts of its entries
(the dicts compat.json holds) and the message-existence answers (results/msgsearch.json).
Output: a Markdown page (results/domains/<name>.md) and an HTML section for the front page
of index.html. Pure functions; report.py decides where the text goes. Every figure comes
from a verdict the aggregation made from runs that happened: an entry with no records shows
as "not measured yet", never as a pass.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from harness.aggregate.model import (
    ADVICE,
    FIGURES,
    OVERSTATED,
    VERDICTS,
    WRONG,
)
from harness.aggregate.model import GRADE_ANSWERS as GRADES
from harness.aggregate.unmeasured import is_unmeasured
from harness.report.render import entry_slug
from harness.report.render.templating import environment
from harness.spec.triage import SCRIPTABLE, Triage

__all__ = [
    "ADVICE",
    "CLAIM_KINDS",
    "MEASURED",
    "NOT_MEASURED",
    "NOT_SCRIPTABLE",
    "NO_APPLICABLE",
    "SPREADS",
    "STATES",
    "WAITING",
    "FIGURES",
    "GRADES",
    "RATE_KINDS",
    "VERDICTS",
    "ClaimRow",
    "DomainSummary",
    "EntryRow",
    "claim_kind",
    "counted_list",
    "domain_name",
    "plural",
    "render_domain_html",
    "render_domain_markdown",
    "search_text",
    "states_text",
    "summarize_domain",
    "triage_text",
]

CLAIM_KINDS = ("documented message", "version table", "fix rate", "workaround", "dead end")
RATE_KINDS = ("fix rate", "workaround", "dead end")  # the claims with an advice and a figure
_PCT = re.compile(r"(\d+(?:\.\d+)?)%")
_CI = re.compile(r"CI (\d+(?:\.\d+)?)[–-](\d+(?:\.\d+)?)%")


def claim_kind(claim: str) -> str:
    """The kind of a verdict's claim, from the words the aggregation writes."""
    text = claim.lower()
    for kind in CLAIM_KINDS:
        if text.startswith(kind):
            return kind
    if text.startswith("solution") or text.startswith("example fix"):
        return "workaround"
    return "other"


def _verdict_name(v: str) -> str:
    return "inconclusive" if v.startswith("inconclusive") else v


def _gap(claimed: str, measured: str) -> float:
    """How far the claimed rate lies outside the measured 95% interval, in points (0..100);
    100 for a documented message or version row that never reproduced."""
    c = _PCT.search(claimed)
    ci = _CI.search(measured)
    if c and ci:
        rate, lo, hi = float(c.group(1)), float(ci.group(1)), float(ci.group(2))
        return max(lo - rate, rate - hi, 0.0)
    return 100.0


@dataclass(frozen=True)
class ClaimRow:
    entry: str  # our entry id
    kb_id: str
    kind: str  # one of CLAIM_KINDS (or "other")
    claim: str
    subject: str
    claimed: str
    measured: str
    verdict: str  # one of VERDICTS
    why: str
    seen_instead: str
    n: int
    gap: float  # points between the claim and the measured interval (contradicted claims)
    advice: str = ""  # rate claims: one of ADVICE
    figure: str = ""  # rate claims: one of FIGURES
    grade: str = ""  # the documented message (and the version rows read at it): one of GRADES
    label: str = ""  # the verdict in words, as the entry's page says it

    @property
    def said(self) -> str:
        """The verdict as the entry's page words it, with the message's grade."""
        if self.kind == "documented message" and self.grade and self.grade not in self.label:
            return f"{self.label}; grade {self.grade}"
        return self.label or self.verdict

    @property
    def wrongness(self) -> int | None:
        """Where the claim stands among the most wrong, first first: wrong advice (a user
        following it fails), an invented message (the documented message never shows), an
        overstated figure, then any other contradicted claim; None: not wrong. A claim that
        depends on the release is never here: it holds on one side of a change."""
        if self.kind in RATE_KINDS and self.advice == WRONG:
            return 0
        if self.kind == "documented message" and self.verdict == "contradicted":
            return 1
        if self.kind in RATE_KINDS and self.figure == OVERSTATED:
            return 2
        return 3 if self.verdict == "contradicted" else None


# what became of an entry: its claims are counted only when "measured"
NOT_SCRIPTABLE = "not scriptable"
NOT_MEASURED = "not measured yet"  # no record of it
WAITING = "waiting for a GPU"  # records, every one skipped (no CUDA where it ran)
NO_APPLICABLE = "no applicable run"  # records, none counted (unsupported, env_failed)
MEASURED = "measured"
STATES = (MEASURED, WAITING, NO_APPLICABLE, NOT_MEASURED, NOT_SCRIPTABLE)
# where a documented message was found whole (all its fixed parts in one release): in every
# release searched, in some, in none though some of its parts occur, or nowhere at all
SPREADS = ("every release", "some releases", "parts only", "nowhere")
_RAISED = ("verbatim", "variable-parts")  # the documented message's grades that mean "it showed"


@dataclass(frozen=True)
class EntryRow:
    entry: str
    kb_id: str
    url: str
    message: str
    scriptable: str
    why: str
    measured: bool  # its verdicts are counted: it ran (MEASURED, or NO_APPLICABLE: not measurable)
    runs: int
    message_found: str  # e.g. "all in 3 of 12 environments (torch 1.10.2–1.12.1)" or "not searched"
    message_found_anywhere: bool | None  # None: not searched
    state: str = MEASURED  # one of STATES
    counted: int = 0  # runs neither skipped, unsupported nor env_failed
    waiting: tuple[str, ...] = ()  # variants every run of which was skipped
    spread: str | None = None  # one of SPREADS; None: not searched
    # found nowhere, yet raised in its runs as documented (grade verbatim or variable-parts):
    # torch assembles the message at run time (an f-string), which no text search can see
    search_missed: bool = False


@dataclass(frozen=True)
class DomainSummary:
    name: str
    repository: str
    source_path: str
    entries: tuple[EntryRow, ...]
    claims: tuple[ClaimRow, ...]
    # (entry, claim ref, why) the triage says no run measures: listed, and counted through
    # their verdict rows (harness/aggregate/unmeasured.py), never a second time here
    unmeasured: tuple[tuple[str, str, str], ...]
    search_envs: int = 0  # environments the message search answered for
    search_torch: str = ""  # their torch releases, "1.10.2–2.13.0"
    search_cpu_only: bool = False  # every torch searched is a CPU-only build ("+cpu")

    def triage(self) -> dict[str, int]:
        """scriptable (cpu / cuda / no) -> how many entries."""
        out = dict.fromkeys(SCRIPTABLE, 0)
        for e in self.entries:
            out[e.scriptable] = out.get(e.scriptable, 0) + 1
        return out

    def states(self) -> dict[str, int]:
        """STATES -> how many entries."""
        out = dict.fromkeys(STATES, 0)
        for e in self.entries:
            out[e.state] += 1
        return out

    def spreads(self) -> dict[str, int]:
        """SPREADS (and "not searched") -> how many documented messages."""
        out = dict.fromkeys((*SPREADS, "not searched"), 0)
        for e in self.entries:
            out[e.spread or "not searched"] += 1
        return out

    def verdicts(self) -> dict[str, int]:
        """verdict -> how many claims, every kind together."""
        counts = self.counts()
        return {v: sum(counts[k][v] for k in CLAIM_KINDS) for v in VERDICTS}

    def counts(self) -> dict[str, dict[str, int]]:
        """claim kind -> verdict -> how many claims."""
        out = {k: dict.fromkeys(VERDICTS, 0) for k in CLAIM_KINDS}
        for c in self.claims:
            if c.kind in out and c.verdict in out[c.kind]:
                out[c.kind][c.verdict] += 1
        return out

    def _tally(
        self, kinds: tuple[str, ...], answers: tuple[str, ...], of: str
    ) -> dict[str, dict[str, int]]:
        out = {k: dict.fromkeys(answers, 0) for k in kinds}
        for c in self.claims:
            answer = getattr(c, of)
            if c.kind in out and answer in out[c.kind]:
                out[c.kind][answer] += 1
        return out

    def by_advice(self) -> dict[str, dict[str, int]]:
        """rate claim kind -> advice -> how many claims."""
        return self._tally(RATE_KINDS, ADVICE, "advice")

    def by_figure(self) -> dict[str, dict[str, int]]:
        """rate claim kind -> figure -> how many claims."""
        return self._tally(RATE_KINDS, FIGURES, "figure")

    def by_grade(self) -> dict[str, int]:
        """documented messages' grade -> how many entries."""
        return self._tally(("documented message",), GRADES, "grade")["documented message"]

    def most_wrong(self) -> list[ClaimRow]:
        wrong = [c for c in self.claims if c.wrongness is not None]
        return sorted(wrong, key=lambda c: (c.wrongness, -c.gap, -c.n, c.entry, c.claim, c.subject))


def domain_name(triage: Triage) -> str:
    """e.g. 'deadends-pytorch' for repros/deadends/pytorch/triage.yaml."""
    return "-".join(triage.path.parent.parts[-2:])


def _versions(envs: Mapping[str, Any], answer: str) -> str:
    torch = sorted(
        {
            e.get("versions", {}).get("torch", "?").split("+")[0]
            for e in envs.values()
            if e.get("found") == answer
        },
        key=lambda v: tuple(int(x) if x.isdigit() else 0 for x in v.split(".")),
    )
    if not torch:
        return ""
    return torch[0] if len(torch) == 1 else f"{torch[0]}–{torch[-1]}"


def _spread(result: Mapping[str, Any] | None) -> str | None:
    envs = (result or {}).get("envs") or {}
    if not envs:
        return None
    found = [e.get("found") for e in envs.values()]
    if all(f == "all" for f in found):
        return SPREADS[0]
    if "all" in found:
        return SPREADS[1]
    return SPREADS[2] if "some" in found else SPREADS[3]


def _skipped_only(cells: Mapping[str, Any]) -> bool:
    """Every run of one variant's cells (slice -> statuses) was skipped."""
    statuses = [st for slot in cells.values() for st in slot.get("status", ()) if st is not None]
    return bool(statuses) and all(st == "skipped" for st in statuses)


def _state(row_scriptable: str, agg: Mapping[str, Any] | None) -> tuple[str, tuple[str, ...]]:
    if row_scriptable == "no":
        return NOT_SCRIPTABLE, ()
    if not agg or not int(agg.get("runs", 0)):
        return NOT_MEASURED, ()
    cells = agg.get("cells", {})
    waiting = tuple(v for v in sorted(cells) if _skipped_only(cells[v]))
    # an older compat.json has no "counted": its runs were all counted then
    if int(agg.get("counted", agg.get("runs", 0))) > 0:
        return MEASURED, waiting
    return (WAITING if waiting else NO_APPLICABLE), waiting


def _message_found(result: Mapping[str, Any] | None) -> tuple[str, bool | None]:
    if not result or not result.get("envs"):
        return "not searched", None
    envs = result["envs"]
    n = len(envs)
    parts = []
    for answer in ("all", "some", "none"):
        k = sum(1 for e in envs.values() if e.get("found") == answer)
        if k:
            text = f"{answer} in {k} of {n} environments"
            v = _versions(envs, answer)
            parts.append(f"{text} (torch {v})" if v else text)
    anywhere = any(e.get("found") in ("all", "some") for e in envs.values())
    return "; ".join(parts), anywhere


def _claim_row(eid: str, kb_id: str, v: Mapping[str, Any]) -> ClaimRow:
    """One claim of an entry's aggregate, as the domain's table shows it."""
    verdict = _verdict_name(str(v.get("verdict", "")))
    return ClaimRow(
        entry=eid,
        kb_id=kb_id,
        kind=claim_kind(str(v.get("claim", ""))),
        claim=str(v.get("claim", "")),
        subject=str(v.get("subject", "")),
        claimed=str(v.get("claimed", "")),
        measured=str(v.get("measured", "")),
        verdict=verdict,
        why=str(v.get("why", "")),
        seen_instead=str(v.get("seen_instead", "")),
        n=int(v.get("n") or 0),
        gap=_gap(str(v.get("claimed", "")), str(v.get("measured", "")))
        if verdict == "contradicted"
        else 0.0,
        advice=str(v.get("advice") or ""),
        figure=str(v.get("figure") or ""),
        grade=str(v.get("grade") or ""),
        label=str(v.get("label") or v.get("verdict", "")),
    )


def summarize_domain(
    triage: Triage,
    aggregates: Mapping[str, Mapping[str, Any]],
    msgsearch: Mapping[str, Any],
) -> DomainSummary:
    """``aggregates``: entry id -> that entry's dict in compat.json; ``msgsearch``: the
    results/msgsearch.json document (or {})."""
    found = msgsearch.get("entries", {}) if msgsearch else {}
    entries = []
    claims = []
    unmeasured = []
    for row in triage.entries:
        eid = triage.entry_id(row)
        agg = aggregates.get(eid) if row.entry else None
        runs = int(agg.get("runs", 0)) if agg else 0
        state, waiting = _state(row.scriptable, agg)
        text, anywhere = _message_found(found.get(eid))
        spread = _spread(found.get(eid))
        raised = state == MEASURED and any(
            v.get("claim") == "documented message" and v.get("grade") in _RAISED
            for v in agg.get("verdicts", ())
        )
        if spread == "nowhere" and raised:
            text += "; raised in runs all the same: assembled at run time"
        entries.append(
            EntryRow(
                entry=eid,
                kb_id=row.kb_id,
                url=row.url,
                message=row.message,
                scriptable=row.scriptable,
                why=row.why,
                measured=state in (MEASURED, NO_APPLICABLE),
                runs=runs,
                message_found=text,
                message_found_anywhere=anywhere,
                state=state,
                counted=int(agg.get("counted", runs)) if agg else 0,
                waiting=waiting,
                spread=spread,
                search_missed=spread == "nowhere" and raised,
            )
        )
        if state == NOT_SCRIPTABLE:
            continue  # its claims are never counted, not even as not measurable
        for u in row.unmeasured:
            unmeasured.append((eid, u.ref, u.why))
        for v in agg.get("verdicts", ()) if agg else ():
            if state in (NOT_MEASURED, WAITING) and not is_unmeasured(
                str(v.get("subject", "")), str(v.get("why", ""))
            ):
                # not measured (yet): never a pass nor a failure, nor "not measurable"; a
                # claim no variant measures is not measurable all the same
                continue
            claims.append(_claim_row(eid, row.kb_id, v))
    envs: dict[str, Any] = {}
    for row in triage.entries:
        envs.update((found.get(triage.entry_id(row)) or {}).get("envs") or {})
    return DomainSummary(
        name=domain_name(triage),
        repository=triage.repository,
        source_path=triage.source_path,
        entries=tuple(entries),
        claims=tuple(claims),
        unmeasured=tuple(unmeasured),
        search_envs=len(envs),
        search_torch=_versions({k: {**v, "found": "x"} for k, v in envs.items()}, "x"),
        search_cpu_only=bool(envs)
        and all(
            str(e.get("versions", {}).get("torch", "")).endswith("+cpu") for e in envs.values()
        ),
    )


# -- Markdown ------------------------------------------------------------------------------


def _md(text: str, limit: int = 0) -> str:
    text = " ".join(str(text).split())
    if limit and len(text) > limit:  # the entry's page has the whole text, one click away
        text = text[: limit - 1] + "…"
    return text.replace("|", "\\|")


def _md_link(entry: str, base: str) -> str:
    return f"[{entry}]({base}compat/{entry_slug(entry)}.md)"


def _wrong_table(s: DomainSummary, base: str) -> list[str]:
    wrong = s.most_wrong()
    if not wrong:
        return ["No claim is contradicted by the records so far."]
    out = [
        "| Entry | Claim | Claimed | Measured | Verdict | Seen instead |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for c in wrong:
        claim = c.claim + (f" ({c.subject})" if c.subject else "")
        out.append(
            f"| {_md_link(c.entry, base)} | {_md(claim)} | {_md(c.claimed)} | "
            f"{_md(c.measured)} | {_md(c.said)} | {_md(c.seen_instead, 160) or '–'} |"
        )
    return out


def plural(n: int, one: str, many: str | None = None) -> str:
    """'1 entry', '2 entries' (``many`` given) or '3 claims'."""
    return f"{n} {one if n == 1 else (many or one + 's')}"


def counted_list(counts: Mapping[str, int], empty: str = "none") -> str:
    """'cpu 3, cuda 1': the answers that have any, in their order; ``empty`` if none has."""
    shown = [f"{k} {n}" for k, n in counts.items() if n]
    return ", ".join(shown) if shown else empty


def triage_text(s: DomainSummary) -> str:
    """e.g. 'triage: 27 on CPU, 6 only on CUDA, 7 not by a script'."""
    t = s.triage()
    return f"triage: {t['cpu']} on CPU, {t['cuda']} only on CUDA, {t['no']} not by a script"


def states_text(s: DomainSummary) -> str:
    """e.g. '25 measured, 6 waiting for a GPU, 2 not measured yet' (the scriptable ones)."""
    st = s.states()
    shown = [f"{st[k]} {k}" for k in STATES if k != NOT_SCRIPTABLE and st[k]]
    return ", ".join(shown) if shown else "none has a reproducer"


def search_text(s: DomainSummary) -> str:
    """Where the documented messages were found, in words, or that none was searched."""
    sp = s.spreads()
    searched = len(s.entries) - sp["not searched"]
    if not searched:
        return "not run yet (python -m harness msgsearch)"
    where = plural(s.search_envs, "environment")
    if s.search_torch:
        where += f", torch {s.search_torch}"
    text = (
        f"{plural(searched, 'documented message')} searched for in the installed torch and "
        f"lightning ({where}): {sp['every release']} found whole in every release, "
        f"{sp['some releases']} in some releases, {sp['parts only']} only in parts, "
        f"{sp['nowhere']} nowhere"
    )
    missed = sum(e.search_missed for e in s.entries)
    if missed:
        text += (
            f" ({missed} of them raised in runs all the same: assembled at run time, or "
            "raised by a package the search does not read (transformers, safetensors), which "
            "a text search of torch and lightning cannot see)"
        )
    if sp["not searched"]:
        text += f"; {sp['not searched']} not searched yet"
    if s.search_cpu_only:
        text += (
            "; every torch searched is a CPU-only build: torch's CUDA code and NVIDIA's "
            "libraries (CUDA runtime, cuBLAS, cuDNN, NCCL), where CUDA errors are worded, are "
            "not among them, so nowhere here does not mean never raised on a GPU"
        )
    return text


def _found_cell(s: DomainSummary) -> str:
    sp = s.spreads()
    searched = len(s.entries) - sp["not searched"]
    if not searched:
        return "not searched"
    return f"{sp['every release'] + sp['some releases'] + sp['parts only']} of {searched} searched"


def _runs_cell(e: EntryRow) -> str:
    if e.state == MEASURED:
        return str(e.runs)
    if e.state == WAITING:
        return f"{WAITING} ({e.runs} skipped)"
    if e.state == NO_APPLICABLE:
        return f"{NO_APPLICABLE} ({e.runs} unsupported or not built)"
    return NOT_MEASURED if e.state == NOT_MEASURED else "–"


def _entries_table(s: DomainSummary, base: str) -> list[str]:
    out = [
        "| Entry | Scriptable | Runs | Message grade | Verdicts (confirmed / contradicted / inconclusive / not measurable) | Documented message found in the installed torch/lightning |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for e in s.entries:
        mine = [c for c in s.claims if c.entry == e.entry]
        tally = " / ".join(str(sum(c.verdict == v for c in mine)) for v in VERDICTS)
        grade = next((c.grade for c in mine if c.kind == "documented message"), "") or "–"
        link = _md_link(e.entry, base) if e.runs else f"[{e.entry}]({e.url})"
        out.append(
            f"| {link} | {e.scriptable} | {_runs_cell(e)} "
            f"| {grade if e.measured else '–'} | {tally if e.measured else '–'} "
            f"| {_md(e.message_found)} |"
        )
    return out


def render_domain_markdown(s: DomainSummary, base: str = "../") -> str:
    """``base``: the path from the page to results/ (the compat pages live there)."""
    t = s.triage()
    st = s.states()
    out = [
        f"# Domain {s.name}: what its claims came to",
        "",
        f"Source: {s.repository}, `{s.source_path}` ({plural(len(s.entries), 'entry', 'entries')}). "
        "Generated by `python -m harness report` from the committed records, the triage file "
        "and results/msgsearch.json; every figure links to the entry's compatibility page.",
        "",
        "| Entries | Scriptable on CPU | Only on CUDA | Not by a script | Measured | Waiting for a GPU | Not measured yet | Message found in some installed release |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
        f"| {len(s.entries)} | {t['cpu']} | {t['cuda']} | {t['no']} | {st[MEASURED]} "
        f"| {st[WAITING]} | {st[NOT_MEASURED] + st[NO_APPLICABLE]} "
        f"| {_found_cell(s)} |",
        "",
        f"Message search: {search_text(s)}."
        + (
            " A message found nowhere is not in torch's or lightning's text as one piece "
            "(sources and compiled libraries): invented, reworded, or assembled at run time "
            '(as every "CUDA error: " followed by the CUDA runtime\'s own text is); one found '
            "only in parts lost or changed some of its words."
            if s.search_envs
            else ""
        ),
        "",
    ]
    if not s.claims and not s.unmeasured:
        waiting = st[WAITING]
        out += [
            "## Claims",
            "",
            "No entry of this domain has a counted run yet"
            + (f" ({plural(waiting, 'entry', 'entries')} {WAITING})" if waiting else "")
            + ": no claim is counted, none confirmed and none contradicted.",
        ]
    else:
        out += _claims_sections(s, base)
    out += ["", "## Entries", ""]
    out += _entries_table(s, base)
    waiting_rows = [e for e in s.entries if e.waiting]
    if waiting_rows:
        out += [
            "",
            "## Waiting for a GPU",
            "",
            "Every run of these variants was skipped (no CUDA where they ran): counted as not "
            "measured, never as wrong.",
            "",
        ]
        for e in waiting_rows:
            which = (
                "every variant" if e.state == WAITING else ", ".join(f"`{v}`" for v in e.waiting)
            )
            out.append(f"- {_md_link(e.entry, base)}: {which}")
    out += ["", "## Not reproducible by a script", ""]
    nos = [e for e in s.entries if e.scriptable == "no"]
    if not nos:
        out.append("None: every entry has a reproducer.")
    else:
        out.append(
            f"{plural(len(nos), 'entry', 'entries')}, never counted (the message search above "
            "still answers for their messages):"
        )
        out.append("")
    for e in nos:
        out.append(f"- [{e.kb_id}]({e.url}): {_md(e.why)}")
    if s.unmeasured:
        out += ["", "## Claims no variant can measure", ""]
        for entry, ref, why in s.unmeasured:
            out.append(f"- {entry}, {ref}: {_md(why)}")
    return "\n".join(out) + "\n"


def _claims_sections(s: DomainSummary, base: str) -> list[str]:
    out = [
        "## Claims by verdict",
        "",
        "| Claim kind | " + " | ".join(VERDICTS) + " |",
        "| --- |" + " --- |" * len(VERDICTS),
    ]
    counts = s.counts()
    for kind in CLAIM_KINDS:
        out.append(f"| {kind} | " + " | ".join(str(counts[kind][v]) for v in VERDICTS) + " |")
    out.append(
        "| all | "
        + " | ".join(str(sum(counts[k][v] for k in CLAIM_KINDS)) for v in VERDICTS)
        + " |"
    )
    out += [
        "",
        "Claims of entries that no script can reproduce are not counted here (see the triage "
        "below), nor those of entries waiting for a GPU or not measured yet; claims that no variant can measure are counted as not measurable. A rate "
        "claim is contradicted when its advice is wrong or its figure overstated; the two "
        "tables below keep the answers apart.",
        "",
        "## Rate claims by advice",
        "",
        "Does the workaround work, does the dead end fail as documented, in most applicable "
        "scenarios (a reading x release x device x precision)?",
        "",
        *_answer_table(s.by_advice(), ADVICE),
        "",
        "## Rate claims by figure",
        "",
        "Is the stated rate too high? A stated rate is a population figure: scenarios can show "
        "it too high, never too low. Consistent: the scenarios' 95% interval reaches no lower "
        "than the claim less 10 points; overstated: it lies below that; depends on the "
        "release: the advice holds on one side of a change only.",
        "",
        *_answer_table(s.by_figure(), FIGURES),
        "",
        "## Documented messages by grade",
        "",
        "How close torch's message came to the document's: verbatim; variable-parts (the "
        "document dropped sizes, names, numbers); reworded (the same error in torch's words, "
        "declared with its reason in entry.yaml); other-error (something else was raised: the "
        "documented message is invented or another error); not-raised.",
        "",
        "| Entries | " + " | ".join(GRADES) + " |",
        "| --- |" + " --- |" * len(GRADES),
        "| documented message | " + " | ".join(str(n) for n in s.by_grade().values()) + " |",
        "",
        "## The most wrong claims first",
        "",
        "Wrong advice first, then invented messages, then overstated figures, then other "
        "contradicted claims.",
        "",
    ]
    return out + _wrong_table(s, base)


def _answer_table(counts: Mapping[str, Mapping[str, int]], answers: tuple[str, ...]) -> list[str]:
    out = [
        "| Claim kind | " + " | ".join(answers) + " |",
        "| --- |" + " --- |" * len(answers),
    ]
    for kind, row in counts.items():
        out.append(f"| {kind} | " + " | ".join(str(row[a]) for a in answers) + " |")
    out.append(
        "| all | " + " | ".join(str(sum(r[a] for r in counts.values())) for a in answers) + " |"
    )
    return out


# -- HTML (a section of index.html's front page) ---------------------------------------------


def render_domain_html(s: DomainSummary, page: str) -> str:
    """``page``: the Markdown page's path relative to index.html (templates/domain.html)."""
    return (
        environment()
        .get_template("templates/domain.html")
        .render(
            s=s,
            page=page,
            entries=plural(len(s.entries), "entry", "entries"),
            triage=triage_text(s),
            states=states_text(s),
            search=search_text(s),
            any_claim=bool(s.claims or s.unmeasured),
            counts=s.counts(),
            claim_kinds=CLAIM_KINDS,
            verdicts=VERDICTS,
            advice=counted_list({a: sum(row[a] for row in s.by_advice().values()) for a in ADVICE}),
            figure=counted_list(
                {f: sum(row[f] for row in s.by_figure().values()) for f in FIGURES}
            ),
            grades=counted_list(s.by_grade()),
            wrong=s.most_wrong()[:10],
        )
    )
