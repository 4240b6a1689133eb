"""The nightly's dated answer: cell states across nights and ``results/nightly/<night>.json``.

A *night* is the UTC date a record started (``started_at``): the records of one nightly
run share it. Per cell of a variant (entry, variant, cell) and night, each run either holds
what the variant stands for or fails it (``as_documented``): a baseline reproduces the
documented error, a workaround or a control ends ``ok``, a dead end does not end ``ok``.
``unsupported``, ``skipped`` and ``env_failed`` are neither.

A cell's *state* over the nights up to one (``cell_state``):
- ``flaky``: the night's runs disagree, or over the last ``WINDOW_NIGHTS`` nights at least
  ``FLAKY_MIN_RUNS`` runs failed between 5% and 95% of the time and the cell changed
  more than once (a single step is ``broken`` or a fix, not flakiness);
- ``broken``: every run of the night failed, after a night where every run held;
- ``failing``: every run failed, every night it ran (consistently failing);
- ``holds``: every run of the night held.
Each with ``since``: the night the state began.

The snapshot (``SNAPSHOT_SCHEMA``) of a night: the records it counted, every cell whose
outcomes changed since the cell's previous night (new failures first, then fixes, then
flaky, then other changes), the torch and lightning releases first measured that night,
the claims whose verdict changed since the previous snapshot (compat.json's verdicts), and
the count of cells per state. A cell whose variant was rewritten between the two nights
(entry.yaml ``rewritten``: its code changed what it measures) is compared unlike with
unlike: it is listed apart as ``reproducer_changed``, never as a regression or a fix.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harness.outcomes import holds_as_documented
from harness.store.jsonl import latest
from harness.store.records import Record

__all__ = [
    "CHANGE_ORDER",
    "FLAKY_HIGH",
    "FLAKY_LOW",
    "FLAKY_MIN_RUNS",
    "SNAPSHOT_SCHEMA",
    "STATES",
    "WINDOW_NIGHTS",
    "CellHistory",
    "CellState",
    "NightRuns",
    "as_documented",
    "cell_state",
    "claim_verdicts",
    "dumps",
    "histories",
    "make_snapshot",
    "night_of",
    "regressions",
    "states_script",
    "summary_markdown",
]

SNAPSHOT_SCHEMA = 2  # 2: changes["reproducer_changed"], a change's "readings"
FLAKY_LOW, FLAKY_HIGH = 0.05, 0.95
FLAKY_MIN_RUNS = 6  # two nights of three trials
WINDOW_NIGHTS = 14
STATES = ("holds", "broken", "flaky", "failing")
# the order of a snapshot's changes: what a maintainer reads first
CHANGE_ORDER = ("new_failures", "fixes", "flaky", "other", "reproducer_changed")

CellId = tuple[str, str, str]  # entry, variant, cell
# (entry, variant) -> when its code was last rewritten (entry.yaml ``rewritten``)
Rewritten = Mapping[tuple[str, str], str]


def night_of(record: Record) -> str:
    return record.started_at[:10]


def as_documented(record: Record) -> bool | None:
    """Whether the run holds what its variant stands for; None: it measured nothing."""
    return holds_as_documented(record.kind, record.outcome)


@dataclass(frozen=True)
class NightRuns:
    night: str
    held: int
    failed: int
    outcomes: tuple[str, ...]  # the outcome kinds of the night, sorted
    # the harness revisions that ran them: a change across another revision may be the
    # reproducer's, not the release's
    revisions: tuple[str, ...] = ()
    # which of the variant's codes ran them: "" before its declared rewrite (or none is
    # declared), else the rewrite's time; two nights with other readings are not comparable
    readings: tuple[str, ...] = ()

    @property
    def runs(self) -> int:
        return self.held + self.failed

    @property
    def verdict(self) -> str:  # "held", "failed", "mixed", or "" (nothing measured)
        if not self.runs:
            return ""
        if not self.failed:
            return "held"
        return "failed" if not self.held else "mixed"


@dataclass(frozen=True)
class CellHistory:
    entry: str
    variant: str
    kind: str
    cell: str
    nights: tuple[NightRuns, ...]  # oldest first

    @property
    def id(self) -> CellId:
        return (self.entry, self.variant, self.cell)

    def upto(self, night: str) -> CellHistory:
        kept = tuple(n for n in self.nights if n.night <= night)
        return CellHistory(self.entry, self.variant, self.kind, self.cell, kept)


@dataclass(frozen=True)
class CellState:
    state: str  # one of STATES
    since: str  # the night it began
    runs: int  # measured runs in the window
    failures: int

    def as_dict(self) -> dict[str, Any]:
        return {
            "state": self.state,
            "since": self.since,
            "runs": self.runs,
            "failures": self.failures,
        }


def _reading(r: Record, rewritten: Rewritten) -> str:
    since = rewritten.get((r.entry, r.variant), "")
    return since if since and r.started_at >= since else ""


def histories(
    records: Iterable[Record], rewritten: Rewritten | None = None
) -> dict[CellId, CellHistory]:
    """Each cell's runs per night: per machine and key, the last record of each night."""
    rewritten = rewritten or {}
    by_night: dict[str, list[Record]] = {}
    for r in records:
        by_night.setdefault(night_of(r), []).append(r)
    runs: dict[CellId, dict[str, list[Record]]] = {}
    kinds: dict[CellId, str] = {}
    for night, rs in by_night.items():
        for r in latest(rs):
            cid = (r.entry, r.variant, r.cell)
            runs.setdefault(cid, {}).setdefault(night, []).append(r)
            kinds[cid] = r.kind
    out: dict[CellId, CellHistory] = {}
    for cid, nights in runs.items():
        made = []
        for night in sorted(nights):
            judged = [as_documented(r) for r in nights[night]]
            made.append(
                NightRuns(
                    night,
                    held=judged.count(True),
                    failed=judged.count(False),
                    outcomes=tuple(sorted({r.outcome.value for r in nights[night]})),
                    revisions=tuple(
                        sorted({r.provenance.get("git_rev", "") for r in nights[night]} - {""})
                    ),
                    readings=tuple(sorted({_reading(r, rewritten) for r in nights[night]})),
                )
            )
        out[cid] = CellHistory(*cid[:2], kinds[cid], cid[2], tuple(made))
    return out


def cell_state(history: CellHistory) -> CellState | None:
    """The cell's state on its last measured night; None when no night measured anything."""
    nights = [n for n in history.nights if n.runs][-WINDOW_NIGHTS:]
    if not nights:
        return None
    runs = sum(n.runs for n in nights)
    failures = sum(n.failed for n in nights)
    verdicts = [n.verdict for n in nights]
    last = nights[-1]
    flips = [i for i in range(1, len(verdicts)) if verdicts[i] != verdicts[i - 1]]
    rate = failures / runs
    rate_flaky = runs >= FLAKY_MIN_RUNS and FLAKY_LOW < rate < FLAKY_HIGH and len(flips) >= 2
    if last.verdict == "mixed" or rate_flaky:
        mixed = [i for i, v in enumerate(verdicts) if v == "mixed"]
        first = min([*mixed, *(flips[:1] if rate_flaky else [])], default=len(nights) - 1)
        return CellState("flaky", nights[first].night, runs, failures)
    streak = len(nights) - 1
    while streak > 0 and verdicts[streak - 1] == last.verdict:
        streak -= 1
    since = nights[streak].night
    if last.verdict == "held":
        return CellState("holds", since, runs, failures)
    if "held" in verdicts:
        return CellState("broken", since, runs, failures)
    return CellState("failing", since, runs, failures)


def _change_kind(before: NightRuns, now: NightRuns, state: CellState | None) -> str:
    if before.readings != now.readings:
        return "reproducer_changed"  # the variant's code changed, not the release's behaviour
    if now.verdict == "mixed" or (state is not None and state.state == "flaky"):
        return "flaky"
    if now.verdict == "failed" and before.verdict == "held":
        return "new_failures"
    if now.verdict == "held" and before.verdict in ("failed", "mixed"):
        return "fixes"
    return "other"


def _releases(records: Iterable[Record]) -> dict[str, set[str]]:
    seen: dict[str, set[str]] = {"torch": set(), "lightning": set()}
    for r in records:
        for name in seen:
            version = r.versions.get(name, "")
            if version:
                seen[name].add(version.split("+")[0])
    return seen


def claim_verdicts(compat: Mapping[str, Any]) -> dict[str, dict[str, str]]:
    """compat.json's verdicts: entry -> "claim [subject]" -> its label."""
    out: dict[str, dict[str, str]] = {}
    for entry in compat.get("entries", []):
        claims: dict[str, str] = {}
        for v in entry.get("verdicts", []):
            name = v["claim"] + (f" [{v['subject']}]" if v.get("subject") else "")
            claims[name] = v.get("label") or v.get("verdict") or ""
        out[entry["id"]] = claims
    return out


def _change(
    cid: tuple[str, str, str],
    kind: str,
    was: NightRuns,
    now: NightRuns,
    state: CellState | None,
) -> dict[str, Any]:
    """One cell whose outcomes changed between its last two measured nights."""
    return {
        "entry": cid[0],
        "variant": cid[1],
        "kind": kind,
        "cell": cid[2],
        "before": {
            "night": was.night,
            "outcomes": list(was.outcomes),
            "revisions": list(was.revisions),
        },
        "now": list(now.outcomes),
        "revisions": list(now.revisions),
        "same_revision": was.revisions == now.revisions,
        "readings": {"before": list(was.readings), "now": list(now.readings)},
        "state": state.as_dict() if state else None,
    }


def make_snapshot(
    records: Sequence[Record],
    night: str,
    claims: Mapping[str, Mapping[str, str]],
    previous: Mapping[str, Any] | None = None,
    settled: Sequence[Mapping[str, Any]] = (),
    rewritten: Rewritten | None = None,
) -> dict[str, Any]:
    """The snapshot of ``night`` from every stored record (all nights: the history), the
    claims' verdicts now, the previous snapshot (for the claims it held), and when each
    variant's code was last rewritten (``rewritten_since``)."""
    tonight = [r for r in records if night_of(r) == night]
    before = [r for r in records if night_of(r) < night]
    changes: dict[str, list[dict[str, Any]]] = {k: [] for k in CHANGE_ORDER}
    states: Counter[str] = Counter()
    for cid, history in sorted(histories([*before, *tonight], rewritten).items()):
        measured = [n for n in history.nights if n.runs]
        if not measured or measured[-1].night != night:
            continue
        state = cell_state(history)
        if state is not None:
            states[state.state] += 1
        if len(measured) < 2 or measured[-2].outcomes == measured[-1].outcomes:
            continue
        was, now = measured[-2], measured[-1]
        changes[_change_kind(was, now, state)].append(_change(cid, history.kind, was, now, state))
    old, new = _releases(before), _releases(tonight)
    old_claims: Mapping[str, Mapping[str, str]] = (previous or {}).get("claims", {})
    changed_claims = [
        {"entry": entry, "claim": name, "before": old_claims[entry][name], "now": label}
        for entry, by_name in sorted(claims.items())
        for name, label in sorted(by_name.items())
        if entry in old_claims and name in old_claims[entry] and old_claims[entry][name] != label
    ]
    nights_before = sorted({night_of(r) for r in before})
    return {
        "schema": SNAPSHOT_SCHEMA,
        "night": night,
        "previous_night": nights_before[-1] if nights_before else None,
        "records": {
            "counted": len(tonight),
            "machines": sorted({r.machine for r in tonight}),
            "cells": len({(r.entry, r.variant, r.cell) for r in tonight}),
        },
        "changes": changes,
        "new_releases": {
            name: sorted(new[name] - old[name], key=_version_key) for name in ("torch", "lightning")
        },
        "claims_changed": changed_claims,
        # run --settle's results of the night (results/settled/<night>-<machine>.json)
        "settled_by_extra_trials": [
            {**c, "machine": doc.get("machine", "")}
            for doc in settled
            for c in doc.get("claims_settled", [])
        ],
        "extra_trials": sum(int(doc.get("extra_runs", 0)) for doc in settled),
        "states": {s: states[s] for s in STATES},
        "rules": {
            "flaky": f"failures between {FLAKY_LOW:.0%} and {FLAKY_HIGH:.0%} over at least "
            f"{FLAKY_MIN_RUNS} runs in the last {WINDOW_NIGHTS} nights, changing more than "
            "once, or a night whose runs disagree",
            "held": "baseline: reproduced; workaround, control: ok; dead end: not ok",
        },
        "claims": {entry: dict(by_name) for entry, by_name in sorted(claims.items())},
    }


def states_script(records: Sequence[Record], night: str) -> str:
    """``results/nightly/states.js`` for the page's cell details: every cell's state as of
    ``night``, ``{entry: {variant: {cell: [state, since, runs, failures]}}}``, and under the
    key "" the night."""
    out: dict[str, Any] = {"": night}
    for (entry, variant, cell), history in sorted(histories(records).items()):
        state = cell_state(history.upto(night))
        if state is not None:
            out.setdefault(entry, {}).setdefault(variant, {})[cell] = [
                state.state,
                state.since,
                state.runs,
                state.failures,
            ]
    body = json.dumps(out, separators=(",", ":"), sort_keys=True).replace("</", "<\\/")
    return f"harnessStates({body});\n"


def _version_key(text: str) -> tuple[int, ...]:
    from packaging.version import Version

    return tuple(Version(text).release)


def regressions(snapshot: Mapping[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """The night's new failures, per entry."""
    out: dict[str, list[dict[str, Any]]] = {}
    for change in snapshot["changes"]["new_failures"]:
        out.setdefault(change["entry"], []).append(change)
    return out


def _change_line(c: Mapping[str, Any]) -> str:
    was = ", ".join(c["before"]["outcomes"]) or "-"
    return (
        f"`{c['entry']}` :: `{c['variant']}` @ `{c['cell']}`: {was} "
        f"({c['before']['night']}) -> {', '.join(c['now'])}"
    )


def summary_markdown(snapshot: Mapping[str, Any], limit: int = 50) -> str:
    """The job summary (and the README's nightly block): regressions first."""
    s = snapshot
    lines = [
        f"### Nightly {s['night']}",
        "",
        f"{s['records']['counted']} records, {s['records']['cells']} cells, machines "
        f"{', '.join(s['records']['machines']) or 'none'}; previous night "
        f"{s['previous_night'] or 'none'}.",
        "",
    ]
    titles = {
        "new_failures": "Regressions (new failures)",
        "fixes": "Fixes",
        "flaky": "Flaky",
        "other": "Other outcome changes",
        "reproducer_changed": "Changed with the reproducer (its variant rewritten between the nights)",
    }
    for key in CHANGE_ORDER:
        changes = s["changes"].get(key, [])  # a schema 1 snapshot has no reproducer_changed
        crossed = sum(1 for c in changes if not c.get("same_revision", True))
        across = f" ({crossed} across another harness revision)" if crossed else ""
        lines.append(f"**{titles[key]}: {len(changes)}**{across}")
        lines += [f"- {_change_line(c)}" for c in changes[:limit]]
        if len(changes) > limit:
            lines.append(
                f"- ... and {len(changes) - limit} more (results/nightly/{s['night']}.json)"
            )
        lines.append("")
    new = s["new_releases"]
    releases = [f"torch {v}" for v in new["torch"]] + [f"lightning {v}" for v in new["lightning"]]
    lines.append(f"**New releases measured: {', '.join(releases) or 'none'}**")
    lines.append("")
    lines.append(f"**Claims whose verdict changed: {len(s['claims_changed'])}**")
    lines += [
        f"- `{c['entry']}` {c['claim']}: {c['before']} -> {c['now']}"
        for c in s["claims_changed"][:limit]
    ]
    lines.append("")
    settled = s.get("settled_by_extra_trials", [])
    lines.append(
        f"**Claims settled by extra trials: {len(settled)}** "
        f"({s.get('extra_trials', 0)} extra runs in all)"
    )
    lines += [
        f"- `{c['entry']}` {c['claim']}: {c['before']} -> {c['after']} ({c['extra_runs']} extra runs)"
        for c in settled[:limit]
    ]
    lines.append("")
    states = ", ".join(f"{k} {v}" for k, v in s["states"].items())
    lines.append(f"Cells measured this night by state: {states}.")
    return "\n".join(lines) + "\n"


def dumps(snapshot: Mapping[str, Any]) -> str:
    return json.dumps(snapshot, indent=1, sort_keys=False) + "\n"
