"""Every kept knowledge-base record corrected, as the knowledge base takes changes: separate
pull requests by kind, each with a one-page summary on top (``python -m harness corrections``).

Under the output folder (default results/corrections/):

    README.md                         the summary across domains: counts, the limits (devices,
                                      what n counts, scope) stated once, records left alone,
                                      claims no variant measures (not measured: why)
    signatures/PULL_REQUEST.md        (a) regexes grown by the wordings the runs raised, and
    signatures/data/canons/...            last_confirmed moved by a fresh verbatim reproduction
    conditions/PULL_REQUEST.md        (b) conditions naming the releases where advice went
    conditions/data/canons/...            against the record (no figure is written)
    unraised-messages/ISSUE.md        (c) documented messages no measured release raised
    outcomes/PULL_REQUEST.md          (d) outcome lines, one per record x workaround x release
    outcomes/data/outcomes/...jsonl       x device
    check.json                        what the knowledge base's own code must confirm
                                      (scripts/kb_check.py, ``nox -s kb``)

Each record file of a pull request holds only that pull request's changes, laid out as the
knowledge base's repository is, so that it can be copied over a checkout. The files depend
only on the records and the entries: writing twice changes nothing and ``--check`` says which
are stale (CI runs it).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.aggregate import EntryAggregate, aggregate_table
from harness.aggregate.unmeasured import is_unmeasured
from harness.catalogue.corrections import (
    PR_CONDITIONS,
    PR_SIGNATURES,
    TOOL,
    Correction,
    correct,
    duplicate_lines,
    outcome_lines,
)
from harness.catalogue.kbrecord import loads, problems
from harness.errors import HarnessError, InputError
from harness.jsonin import MAX_RECORD_BYTES
from harness.paths import relative_problem
from harness.report.render import entry_slug
from harness.spec.backtracking import backtracking_problem
from harness.spec.entries import Entry
from harness.spec.triage import Triage
from harness.spec.yaml_nodes import read_regular

__all__ = ["Planned", "plan_corrections", "stale"]

OUTCOMES = "outcomes"
UNRAISED = "unraised-messages"
LIMITS = (
    "- **What the runs are.** One scripted reproducer per record: a constructed cause of the "
    "error, run across torch releases. It shows *where* advice fails, never how often it helps "
    "the people who meet the error, so no rate, fix rate, resolvable, confidence or summary is "
    "changed.\n"
    "- **What n counts.** Scenarios: a reading of the advice x torch release x device x "
    "precision. Repeated trials of one scenario only decide whether it is flaky.\n"
    "- **Scope.** Only runs inside the record's own `version_range` count (torch for `pytorch`, "
    "transformers for `transformers`, Python for `cpython`, the CUDA toolkit of the torch build "
    "for `cuda`), and only variants inside a claim's condition. A range is never narrowed.\n"
    "- **Devices.** These runs are CPU runs unless a line says CUDA. A record whose message "
    "only CUDA can raise, or a claim about a CUDA, cuDNN, cuSOLVER, NCCL or flash-attention "
    "behaviour, is left alone until a CUDA run measured it; a CPU twin is named here, never "
    "written into a record.\n"
    "- **Dates.** `metadata.last_verification` and `verdict.last_updated` are never touched; "
    "`error.last_confirmed` moves only for a verbatim reproduction in scope, on the record's "
    "device, in the newest torch line measured, and the change names that run.\n"
)


@dataclass(frozen=True)
class Alone:
    kb_id: str
    entry_id: str | None
    why: str


@dataclass(frozen=True)
class NotMeasured:
    """A claim of a kept record no variant measures: its verdict row's claim and why."""

    kb_id: str
    entry_id: str
    claim: str  # "dead end 2: failure rate"
    why: str  # "not measured: ..."


@dataclass
class Domain:
    name: str  # the knowledge base's domain: pytorch, cuda, ...
    triage: Triage | None
    corrected: list[Correction] = field(default_factory=list)
    alone: list[Alone] = field(default_factory=list)
    not_measured: list[NotMeasured] = field(default_factory=list)


@dataclass
class Planned:
    """What ``corrections`` writes: path (relative to the output folder) -> bytes."""

    files: dict[str, bytes]
    domains: list[Domain]
    lines: int = 0

    def counts(self) -> tuple[Counter[str], Counter[str]]:
        """Fields changed by kind; records left alone by reason."""
        changed: Counter[str] = Counter()
        alone: Counter[str] = Counter()
        for d in self.domains:
            for c in d.corrected:
                changed.update(ch.kind for ch in c.changes)
            alone.update(_reason(a.why) for a in d.alone)
        return changed, alone


def _reason(why: str) -> str:
    return why.split(":", 1)[0]


def _page(entry_id: str) -> str:
    return f"results/compat/{entry_slug(entry_id)}.md"


def _domain_of(e: Entry) -> str:
    return str(e.origin.get("domain") or e.id.split("/")[1])


def plan_corrections(
    table: Any,
    entries: Sequence[Entry],
    triages: Sequence[Triage],
    *,
    domain: str | None = None,
    pages_url: str | None = None,
    msgsearch: Mapping[str, Any] | None = None,
) -> Planned:
    """The files of every kept record (``table``: the store's newest records; ``msgsearch``:
    results/msgsearch.json's entries, the evidence of the unraised messages' issue)."""
    kept = [e for e in entries if e.origin.get("record")]
    rows = {t.entry_id(row): (t, row) for t in triages for row in t.entries}
    wanted = [e for e in kept if domain is None or _domain_of(e) == domain]
    aggs = {a.id: a for a in aggregate_table(table, entries, ids=[e.id for e in wanted])}
    domains: dict[str, Domain] = {}
    for t in triages:
        name = t.path.parent.name
        if domain is None or name == domain:
            domains[name] = Domain(name, t)
    files: dict[str, bytes] = {}
    lines: list[dict[str, Any]] = []
    checks: list[dict[str, Any]] = []
    for e in wanted:
        d = domains.setdefault(_domain_of(e), Domain(_domain_of(e), None))
        triage_row = rows.get(e.id)
        original = read_kept(e)
        agg = aggs[e.id]
        url = f"{pages_url.rstrip('/')}/compat/{entry_slug(e.id)}.md" if pages_url else None
        c = correct(e, agg, original, page=_page(e.id), page_url=url)
        mine = outcome_lines(c)
        lines += mine
        checks.append(_check_row(c, mine))
        d.not_measured += [
            NotMeasured(c.kb_id, e.id, v.claim, v.why)
            for v in agg.verdicts
            if is_unmeasured(v.subject, v.why)
        ]
        why = _why_alone(agg, c, triage_row[1].scriptable if triage_row else "")
        if why:
            d.alone.append(Alone(c.kb_id, e.id, why))
        if c.changes or c.unraised is not None:
            d.corrected.append(c)
        rel = c.kb_path or f"data/canons/{c.kb_id}.json"
        problem = relative_problem(rel)
        if problem is not None:  # the loader refuses it in entry.yaml; a plan never has it
            raise InputError(f"{e.id}: the record's path in its knowledge base: {problem}")
        for pr in c.prs():
            files[f"{pr}/{rel}"] = c.text(pr)
    for d in domains.values():
        if d.triage is not None:
            for row in d.triage.entries:
                if row.scriptable == "no":
                    d.alone.append(
                        Alone(row.kb_id, None, f"not reproducible by a script: {row.why}")
                    )
        d.alone.sort(key=lambda a: a.kb_id)
        d.not_measured.sort(key=lambda u: u.kb_id)  # stable: the claims in their order
        d.corrected.sort(key=lambda c: c.kb_id)
    ordered = [domains[k] for k in sorted(domains)]
    every = [c for d in ordered for c in d.corrected]
    lines.sort(key=lambda x: (x["timestamp"], x["error_id"], x["workaround_action"], x["notes"]))
    twice = duplicate_lines(lines)
    if twice:
        raise ValueError(f"outcome lines repeat a scenario group: {twice[:3]}")
    if lines:
        newest = max(x["timestamp"] for x in lines)[:10]
        files[f"{OUTCOMES}/data/outcomes/{newest}-{TOOL}.jsonl"] = "".join(
            json.dumps(x, ensure_ascii=False) + "\n" for x in lines
        ).encode("utf-8")
    files[f"{PR_SIGNATURES}/PULL_REQUEST.md"] = _signatures_pr(every).encode("utf-8")
    files[f"{PR_CONDITIONS}/PULL_REQUEST.md"] = _conditions_pr(every).encode("utf-8")
    files[f"{UNRAISED}/ISSUE.md"] = _unraised_issue(every, msgsearch or {}).encode("utf-8")
    files[f"{OUTCOMES}/PULL_REQUEST.md"] = _outcomes_pr(lines, checks).encode("utf-8")
    files["README.md"] = _summary(ordered, lines).encode("utf-8")
    checks.sort(key=lambda x: x["kb_id"])
    files["check.json"] = (
        json.dumps({"schema": 1, "records": checks}, ensure_ascii=False, indent=1) + "\n"
    ).encode("utf-8")
    return Planned(dict(sorted(files.items())), ordered, len(lines))


def read_kept(e: Entry) -> bytes:
    """The record kept beside ``e``, read as `new` reads one (a regular file, bounded, strict
    JSON) and refused before any pattern of it runs: a regex that may backtrack exponentially
    (``(.+)+Z`` hung ``corrections --check``) or a record the knowledge base's
    rules refuse. Raises HarnessError naming the file."""
    path = e.dir / str(e.origin["record"])
    try:
        raw = read_regular(path, MAX_RECORD_BYTES)
    except OSError as exc:
        raise HarnessError(path, None, f"cannot read: {exc.strerror or exc}") from None
    if len(raw) > MAX_RECORD_BYTES:
        raise HarnessError(
            path, None, f"larger than {MAX_RECORD_BYTES} bytes; a record is a few KB"
        )
    try:
        record = loads(raw)
    except (ValueError, RecursionError) as exc:
        raise HarnessError(path, None, f"not a knowledge-base record: {exc}") from None
    regex = (
        (record.get("error") or {}).get("regex") if isinstance(record.get("error"), dict) else None
    )
    if isinstance(regex, str):
        try:
            re.compile(regex)
            problem = backtracking_problem(regex, polynomial_most=None)
        except (re.error, RecursionError, OverflowError) as exc:
            problem = f"does not compile: {exc}"
        if problem is not None:
            raise HarnessError(
                path,
                None,
                f"error.regex {regex[:80]!r} may backtrack catastrophically: {problem}; "
                "corrections runs no such pattern",
            )
    found = problems(record)
    if found:
        raise HarnessError(
            path, None, f"the knowledge base's rules refuse the kept record: {'; '.join(found[:3])}"
        )
    return raw


def _check_row(c: Correction, lines: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """What scripts/kb_check.py asks of the knowledge base's own code for this record."""
    record = loads(c.original)
    conditions = []
    for ch in c.changes:
        if ch.kind == "condition" and ch.field.startswith("workarounds["):
            i = int(ch.field.split("[")[1].split("]")[0])
            action = str(record["workarounds"][i].get("action") or "")
            failed = sorted(
                {
                    x["environment"]["torch"]
                    for x in lines
                    if x["workaround_action"] == action and not x["success"]
                }
            )
            conditions.append({"workaround": i, "action": action, "failed_on": failed})
    return {
        "kb_id": c.kb_id,
        "kb_path": c.kb_path,
        "entry": c.entry_id,
        "prs": c.prs(),
        "messages": list(c.seen),
        "conditions": conditions,
    }


def _why_alone(agg: EntryAggregate, c: Correction, scriptable: str) -> str:
    if not agg.n_runs:
        return "not measured yet: no run of its reproducer is stored"
    if not agg.n_counted:
        if scriptable == "cuda":
            return "waiting for a GPU: every run was skipped without a CUDA device"
        return "no counted run: every run was skipped, unsupported or failed to build"
    if c.changes or c.unraised is not None:
        return ""
    if c.scope.device == "cuda" and not any(d == "cuda" for _, _, d, _ in agg.cells):
        return "waiting for a GPU: only a CUDA run can raise its message (the CPU twin's runs are named on its page)"
    if c.holds and not any(x.field.endswith("condition") and "scenario" in x.why for x in c.left):
        return "as documented where measured: " + "; ".join(c.holds[:3])
    whys = "; ".join(f"{left.field}: {left.why}" for left in c.left[:3])
    return f"nothing measured to change: {whys}"


# -- the pull requests' texts ---------------------------------------------------------------------


def _cell(value: Any, limit: int = 200) -> str:
    text = "–" if value in (None, "") else value if isinstance(value, str) else json.dumps(value)
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return text.replace("|", "\\|").replace("\n", " ")


def _code(text: str) -> str:
    """Inline code in a list item: one line, no backtick (a list item needs no pipe escaped)."""
    return text.replace("`", "'").replace("\n", " ")


def _summary(domains: Sequence[Domain], lines: Sequence[Mapping[str, Any]]) -> str:
    every = [c for d in domains for c in d.corrected]
    by_pr = Counter(pr for c in every for pr in c.prs())
    changed = Counter(ch.kind for c in every for ch in c.changes)
    unraised = [c for c in every if c.unraised is not None]
    out = [
        f"# Corrections from measured runs ({TOOL})",
        "",
        "Four separate proposals to the deadends.dev knowledge base, each reviewable on its own. "
        "Every record file passes the knowledge base's own validator, and every proposal is "
        "checked with its own `lookup` and `process_outcomes` (`nox -s kb`, scripts/kb_check.py).",
        "",
        "| proposal | what | records |",
        "|---|---|---:|",
        f"| [signatures/](signatures/PULL_REQUEST.md) | regexes grown by torch's wordings; `last_confirmed` from a fresh verbatim run | {by_pr[PR_SIGNATURES]} |",
        f"| [conditions/](conditions/PULL_REQUEST.md) | conditions naming the releases where advice went against the record | {by_pr[PR_CONDITIONS]} |",
        f"| [unraised-messages/](unraised-messages/ISSUE.md) | documented messages no measured release raised (an issue, not a change) | {len(unraised)} |",
        f"| [outcomes/](outcomes/PULL_REQUEST.md) | outcome lines, one per record x workaround x release x device | {len({x['error_id'] for x in lines})} ({len(lines)} lines) |",
        "",
        "Fields changed: "
        + (", ".join(f"{k} {n}" for k, n in sorted(changed.items())) or "none")
        + ".",
        "",
        "## Limits, stated once",
        "",
        LIMITS,
        "## Per domain",
        "",
        "| domain | records with a proposal | left alone |",
        "|---|---:|---:|",
    ]
    out += [f"| {d.name} | {len(d.corrected)} | {len(d.alone)} |" for d in domains]
    out += ["", "## Records with a proposal", "", "| record | proposals |", "|---|---|"]
    for c in every:
        kinds = [*c.prs(), *([UNRAISED] if c.unraised is not None else [])]
        out.append(f"| `{c.kb_id}` | {', '.join(kinds)} |")
    alone = Counter(_reason(a.why) for d in domains for a in d.alone)
    out += ["", "| left alone because | records |", "|---|---:|"]
    out += [f"| {k} | {n} |" for k, n in sorted(alone.items(), key=lambda kv: (-kv[1], kv[0]))]
    out += ["", "## Records left alone", ""]
    for d in domains:
        for a in d.alone:
            where = f" (entry `{a.entry_id}`)" if a.entry_id else ""
            out.append(f"- `{a.kb_id}`{where}: {_cell(a.why, 300)}")
    unmeasured = [u for d in domains for u in d.not_measured]
    if unmeasured:
        out += [
            "",
            "## Claims not measured",
            "",
            "Claims of the records no variant measures, each with why: never changed and "
            "never counted (each has its row on its entry's page).",
            "",
        ]
        out += [
            f"- `{u.kb_id}` (entry `{u.entry_id}`), {u.claim.split(':', 1)[0]}: {_cell(u.why, 300)}"
            for u in unmeasured
        ]
    return "\n".join(out) + "\n"


def _signatures_pr(every: Sequence[Correction]) -> str:
    mine = [c for c in every if PR_SIGNATURES in c.prs()]
    regexes = [c for c in mine if any(ch.kind == "regex" for ch in c.changes)]
    dates = [c for c in mine if any(ch.kind == "date" for ch in c.changes)]
    out = [
        "# Grow regexes by torch's own wordings; confirm messages reproduced verbatim",
        "",
        f"{len(mine)} records: {len(regexes)} regexes grown, {len(dates)} `last_confirmed` moved. "
        "Nothing else in these files changes: a regex only grows (every old alternative stays, "
        "each wording the runs raised that it missed is added as its fixed parts), and "
        "`error.signature` is never replaced. Each grown regex was tested as `lookup` searches "
        "(case-insensitive): it matches the record's signature, every run text the old one "
        "matched, every wording raised in scope, and no control's message. See README.md for "
        "the limits (devices, scope, what n counts).",
        "",
    ]
    for c in regexes:
        r = c.regex
        assert r is not None
        out += [
            f"## `{c.kb_id}`",
            "",
            f"- old: `{_code(r.old)}`",
            f"- new: `{_code(r.new)}`",
            f"- matches: the signature, the {r.old_matched} run texts the old one matched, and "
            f"all {len(r.wordings)} wordings raised in scope; misses none of them",
            "- added for:",
            *[f"  - `{_code(w)}`" for w in r.missed],
            "",
        ]
    if dates:
        out += ["## `last_confirmed`", "", "| record | old | new | the run |", "|---|---|---|---|"]
        for c in dates:
            ch = next(x for x in c.changes if x.kind == "date")
            out.append(f"| `{c.kb_id}` | {ch.old} | {ch.new} | {_cell(ch.evidence, 300)} |")
        out.append("")
    return "\n".join(out)


def _ranks(items: Sequence[Mapping[str, Any]]) -> list[str]:
    return [
        str(w.get("action"))
        for w in sorted(items, key=lambda w: -float(w.get("success_rate") or 0))
    ]


def _conditions_pr(every: Sequence[Correction]) -> str:
    mine = [c for c in every if PR_CONDITIONS in c.prs()]
    moved = [
        c
        for c in mine
        if _ranks(loads(c.original).get("workarounds") or [])
        != _ranks(loads(c.text(PR_CONDITIONS)).get("workarounds") or [])
    ]
    n = sum(ch.kind == "condition" for c in mine for ch in c.changes)
    out = [
        "# Conditions: the releases where a piece of advice went against the record",
        "",
        f"{n} conditions on {len(mine)} records. Each is one sentence appended to the claim's "
        "`condition` (the old text kept before it): which torch releases, on which device, and "
        "between which two measured releases the behaviour changes. No rate is written: a "
        "script's scenarios are not a population, so the figure stays for you to weigh. "
        + (
            "No workaround's rank, and so no page's answer, changes."
            if not moved
            else f"The rank of workarounds changes on {len(moved)} pages: see below."
        ),
        "See README.md for the limits.",
        "",
    ]
    for c in mine:
        out += [f"## `{c.kb_id}`", "", "| claim | appended | scenarios |", "|---|---|---|"]
        for ch in c.changes:
            if ch.kind == "condition":
                claim = ch.field.rsplit(".", 1)[0]
                appended = ch.new[len(str(ch.old or "")) :].strip()
                out.append(f"| `{claim}` | {_cell(appended, 600)} | {_cell(ch.evidence, 300)} |")
        out.append("")
    return "\n".join(out)


def _searched(found: Mapping[str, Any] | None) -> str:
    """The message search's answer for one entry: in how many installed releases the
    message's fixed parts were found."""
    if not found:
        return "not searched"
    envs = found.get("envs") or {}
    releases: dict[str, set[str]] = {}
    for env in envs.values():
        torch = str((env.get("versions") or {}).get("torch") or "")
        releases.setdefault(str(env.get("found")), set()).add(torch)
    every = set().union(*releases.values()) if releases else set()
    hit = releases.get("all", set()) | releases.get("some", set())
    if not hit:
        return f"in none of {len(every)} releases' sources"
    return f"all its parts in {len(releases.get('all', set()))}, some in {len(releases.get('some', set()) - releases.get('all', set()))}, of {len(every)} releases"


def _unraised_issue(every: Sequence[Correction], msgsearch: Mapping[str, Any]) -> str:
    mine = [c for c in every if c.unraised is not None]
    out = [
        "# Documented messages that no measured release raises",
        "",
        f"{len(mine)} records document a message that none of the measured torch releases "
        "raised inside the record's scope when the situation the record describes was "
        "reproduced. The records are not changed: the message may come from a release, a "
        "device or a library the runs did not cover. The message search (results/msgsearch.json, "
        "`python -m harness msgsearch`) looks for the message's fixed parts in each installed "
        "release's sources and libraries.",
        "",
        "| record | documented message | releases measured | scenarios | raised instead | message search |",
        "|---|---|---|---:|---|---|",
    ]
    for c in mine:
        u = c.unraised
        assert u is not None
        instead = ", ".join(f"{k} ({n})" for k, n in u.instead[:3])
        out.append(
            f"| `{c.kb_id}` | {_cell(u.message, 160)} | torch {u.releases} ({u.devices}) | "
            f"{u.scenarios} | {_cell(instead, 160)} | {_searched(msgsearch.get(c.entry_id))} |"
        )
    return "\n".join(out) + "\n"


def _outcomes_pr(lines: Sequence[Mapping[str, Any]], checks: Sequence[Mapping[str, Any]]) -> str:
    works = sum(bool(x["success"]) for x in lines)
    records = len({x["error_id"] for x in lines})
    return "\n".join(
        [
            "# Outcome lines from scripted reproductions",
            "",
            f"{len(lines)} lines for {records} records: one per record x workaround x torch "
            f"release x device, {works} successes and {len(lines) - works} failures. A line "
            "pools the scenarios (readings of the advice x precisions) of its release and "
            "device: it is a success only where every one worked, so an advice that fails when "
            "done as written is a failure. Out-of-scope releases and variants outside a claim's "
            "condition are left out. `notes` marks each line as a scripted reproduction, not a "
            "user's report, and says which reading went how: `process_outcomes` pools them as "
            "it pools users' reports, so read its implied rates as the share of releases where "
            "the advice worked, not as how often it helps.",
            "",
            "See README.md for the limits.",
            "",
        ]
    )


def stale(planned: Planned, out_dir: Path) -> tuple[list[str], list[str]]:
    """The planned files that differ from ``out_dir``'s; the files there no plan writes."""
    differ = []
    for rel, blob in planned.files.items():
        path = out_dir / rel
        if not path.is_file() or path.read_bytes() != blob:
            differ.append(rel)
    extra = []
    if out_dir.is_dir():
        for path in sorted(out_dir.rglob("*")):
            if path.is_file():
                rel = path.relative_to(out_dir).as_posix()
                if rel not in planned.files:
                    extra.append(rel)
    return differ, extra


def domain_names(planned: Planned) -> Mapping[str, int]:
    return {d.name: len(d.corrected) for d in planned.domains}
