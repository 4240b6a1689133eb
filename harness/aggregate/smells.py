"""Smells: what the records say about a reproducer that its verdicts do not. Each is a
question for the entry's author (can this postcondition fail? does this variant do anything
the control does not?), answered by fixing the reproducer or by a one-line reason in
entry.yaml (``smells:``, docs/reference/entry-yaml.md). Pure: an entry and its records in,
smells out; `harness check --smells` and each entry's page show them.

The kinds (``SMELL_KINDS``):
  never-fails          a postcondition that holds in every record that reports it
  same-as-control      a variant whose every outcome equals a control's, cell by cell
  same-as-variant      ... or another variant's (not two that each equal a control: they
                       agree by construction, and each is asked about against it)
  no-declared-failure  a dead end documented to raise, with neither a signature nor fails_as
  judged-elsewhere     a workaround or dead end counted in cells where one baseline
                       reproduced and another ran there and did not (say which it answers)
  environment-error    a run counted as applicable that failed for the environment's sake
                       (a module it lacks, a Python torch does not support)
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from harness.aggregate.advice import measured_another_release
from harness.aggregate.apart import refused_in_the_harness_fork
from harness.aggregate.model import env_info
from harness.domain import SMELLS, SMELLS_OF_ENTRY
from harness.outcomes import NOT_COUNTED, SHOWS, Outcome
from harness.spec.entries import failure_kind
from harness.store.records import ExceptionInfo, Record

if TYPE_CHECKING:
    from harness.spec.entries import Entry, Variant

__all__ = [
    "ENTRY_SMELLS",
    "SMELL_KINDS",
    "Smell",
    "environment_cause",
    "find_smells",
    "stale_explanations",
]

SMELL_KINDS = SMELLS
ENTRY_SMELLS = SMELLS_OF_ENTRY  # about the entry: explained at its top level, by subject

# the packages a reproducer is about: an error raised in one of them is the behaviour
# under test; one raised in any other installed package is the environment's
_OURS = frozenset({"torch", "lightning", "pytorch_lightning", "lightning_fabric", "reprokit"})
_MISSING_MODULE = re.compile(r"No module named '([\w.]+)'")
_UNSUPPORTED_PYTHON = re.compile(
    r"Python 3\.\d+\+? (?:is )?not (?:yet )?supported[^\n]*|not supported on Python[^\n]*"
)
_SITE_PACKAGE = re.compile(r"[/\\](?:site|dist)-packages[/\\]([\w.-]+)")
_DIGITS = re.compile(r"\d+")
_EXAMPLES = 2  # cells named in a smell's detail


@dataclass(frozen=True)
class Smell:
    kind: str  # one of SMELL_KINDS
    variant: str | None  # None: the entry's (a postcondition)
    subject: str  # the postcondition, the other variant(s), the baselines, the cause
    detail: str  # what the records show, in words
    explained: str | None = None  # entry.yaml's one-line reason, where one is given

    @property
    def where(self) -> str:
        return self.variant if self.variant is not None else f"postcondition {self.subject}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "variant": self.variant,
            "subject": self.subject,
            "detail": self.detail,
            "explained": self.explained,
        }


def environment_cause(exc: ExceptionInfo | None) -> str | None:
    """Why an exception is the environment's rather than the reproducer's or torch's, or
    None: a module that is not installed (and is none of torch's, lightning's or the
    reproducer's), a Python version torch says it does not support, or a frame raised in
    another installed package."""
    if exc is None:
        return None
    text = f"{exc.message}\n{exc.traceback}"
    missing = _MISSING_MODULE.search(text)
    if missing and missing.group(1).split(".")[0] not in _OURS:
        return f"the environment lacks the module {missing.group(1)!r}"
    python = _UNSUPPORTED_PYTHON.search(exc.message)
    if python:
        return f"torch refuses this Python: {python.group(0).strip()}"
    package = _SITE_PACKAGE.search(exc.frame)
    if package:
        name = package.group(1).split("-")[0].split(".")[0]
        if name not in _OURS and not name.endswith(".py"):
            return f"raised in the installed package {name!r} ({exc.frame})"
    return None


def _failed(checks: Mapping[str, Any]) -> list[str]:
    return sorted(n for n, c in checks.items() if isinstance(c, Mapping) and c.get("ok") is False)


def _postconditions(checks: Mapping[str, Any]) -> Iterable[tuple[str, bool]]:
    for name, check in checks.items():
        if isinstance(check, Mapping) and isinstance(check.get("ok"), bool):
            yield name, check["ok"]


def _seen(r: Record) -> tuple[str, ...]:
    """What one run showed: its outcome and exception, or its postconditions with their
    details (two different cases that work both pass; only the same case, or one computing
    the same numbers, passes with the same details)."""
    if r.exception is not None:
        return (r.outcome.value, r.exception.type, r.exception.message.split("\n", 1)[0][:300])
    checks = sorted(
        f"{name}={ok}:{r.checks[name].get('detail', '')}" for name, ok in _postconditions(r.checks)
    )
    return (r.outcome.value, r.reason if not checks else "", *checks)


Cell = tuple[str, str, str]  # env, device, precision


def _cell(r: Record) -> Cell:
    return (r.env, r.device, r.precision)


def _cells(cells: Iterable[Cell], n: int = _EXAMPLES) -> str:
    shown = sorted(cells)
    text = ", ".join(f"{e}-{d}-{p}" for e, d, p in shown[:n])
    return text + (f" and {len(shown) - n} more" if len(shown) > n else "")


def _another_release(records: Sequence[Record], mine: Sequence[Record]) -> set[int]:
    """The ids (``id()``) of ``mine`` set apart as cells.py sets them apart: runs of version
    advice that measured another release than pip would have left in their cell
    (advice.measured_another_release)."""
    own: dict[str, dict[str, str]] = {}
    for r in records:
        if not r.ran_in and "torch" in r.versions:
            own.setdefault(r.env, dict(r.versions))
    apart: set[int] = set()
    for r in mine:
        if not r.ran_in or "torch_requested" in r.versions:
            continue
        named = env_info(r.env)
        row = {"python": named.python, "torch": named.torch, "lightning": named.lightning}
        row.update(own.get(r.env, {}))
        if measured_another_release(row, r.versions, r.requires):
            apart.add(id(r))
    return apart


def find_smells(entry: Entry, records: Iterable[Record]) -> list[Smell]:
    """Every smell of ``entry`` in ``records`` (the store's newest; other entries' records
    are ignored), explained where entry.yaml gives a reason: in entry order, then kind."""
    since = {v.name: v.rewritten for v in entry.variants if v.rewritten}
    # as the aggregate reads them: a rewritten variant's records made since (cells._runs)
    records = list(records)
    mine = [
        r
        for r in records
        if r.entry == entry.id
        and r.variant not in entry.retired
        and not (r.variant in since and r.started_at < since[r.variant])
    ]
    # nor version advice that measured another release where the cell satisfied it, nor a
    # run torch refused CUDA in for the harness's own fork (apart.py)
    apart = _another_release(records, mine)
    mine = [
        r
        for r in mine
        if id(r) not in apart
        and not (
            r.exception is not None
            and refused_in_the_harness_fork(entry, r.isolation, r.exception.message)
        )
    ]
    by_variant: dict[str, list[Record]] = defaultdict(list)
    for r in mine:
        by_variant[r.variant].append(r)
    found = [
        *_never_fails(entry, mine),
        *_same_outcomes(entry, by_variant),
        *_no_declared_failure(entry),
        *_judged_elsewhere(entry, by_variant),
        *_environment_errors(entry, by_variant),
    ]
    order = {v.name: i for i, v in enumerate(entry.variants)}
    found.sort(
        key=lambda s: (
            -1 if s.variant is None else order.get(s.variant, len(order)),
            SMELL_KINDS.index(s.kind),
            s.subject,
        )
    )
    return [_explained(entry, s) for s in found]


def _explained(entry: Entry, smell: Smell) -> Smell:
    if smell.variant is None:
        reason = entry.smells.get(smell.kind, {}).get(smell.subject)
    else:
        reason = _declared(entry, smell.variant).get(smell.kind)
    return smell if reason is None else Smell(**{**smell.__dict__, "explained": reason})


def _declared(entry: Entry, name: str) -> Mapping[str, str]:
    for v in entry.variants:
        if v.name == name:
            return v.smells
    return {}


def stale_explanations(entry: Entry, smells: Sequence[Smell]) -> list[str]:
    """The reasons entry.yaml gives for smells the records no longer show (to remove)."""
    seen = {(s.variant, s.kind, s.subject if s.variant is None else "") for s in smells}
    out = [
        f"{kind} {subject}"
        for kind, subjects in entry.smells.items()
        for subject in subjects
        if (None, kind, subject) not in seen
    ]
    out += [
        f"{v.name}: {kind}"
        for v in entry.variants
        for kind in v.smells
        if (v.name, kind, "") not in seen
    ]
    return out


# -- the kinds, one function each -------------------------------------------------------


def _never_fails(entry: Entry, records: Sequence[Record]) -> Iterable[Smell]:
    held: dict[str, int] = defaultdict(int)
    failed: set[str] = set()
    reported_by: dict[str, set[str]] = defaultdict(set)
    for r in records:
        for name, ok in _postconditions(r.checks):
            reported_by[name].add(r.variant)
            if ok:
                held[name] += 1
            else:
                failed.add(name)
    order = {v.name: i for i, v in enumerate(entry.variants)}
    for name in sorted(set(held) - failed):
        variants = sorted(reported_by[name], key=lambda n: (order.get(n, len(order)), n))
        yield Smell(
            "never-fails",
            None,
            name,
            f"holds in all {held[name]} runs that report it ({', '.join(variants)}): can it fail?",
        )


def _outcomes(runs: Sequence[Record]) -> dict[Cell, frozenset[tuple[str, ...]]]:
    per_cell: dict[Cell, set[tuple[str, ...]]] = defaultdict(set)
    for r in runs:
        per_cell[_cell(r)].add(_seen(r))
    return {c: frozenset(s) for c, s in per_cell.items()}


def _applicable(seen: frozenset[tuple[str, ...]]) -> bool:
    return any(Outcome(s[0]) not in NOT_COUNTED for s in seen)


def _equal(a: Mapping[Cell, frozenset[Any]], b: Mapping[Cell, frozenset[Any]]) -> int:
    """How many cells both ran, applicable in at least one, where every outcome agrees;
    0 where any shared cell differs."""
    shared = set(a) & set(b)
    if any(a[c] != b[c] for c in shared):
        return 0
    return sum(1 for c in shared if _applicable(a[c]))


def _same_outcomes(entry: Entry, by_variant: Mapping[str, Sequence[Record]]) -> Iterable[Smell]:
    outcomes = {v.name: _outcomes(by_variant.get(v.name, ())) for v in entry.variants}
    controls = [v.name for v in entry.variants if v.kind == "control"]
    earlier: list[Variant] = []
    for v in entry.variants:
        if v.kind == "control":
            continue
        mine = outcomes[v.name]
        same = [(c, _equal(mine, outcomes[c])) for c in controls]
        same = [(c, n) for c, n in same if n]
        if same:
            yield Smell(
                "same-as-control",
                v.name,
                ", ".join(c for c, _ in same),
                f"every outcome equals {', '.join(c for c, _ in same)}'s, in all "
                f"{max(n for _, n in same)} cells both ran: what does it do the control does not?",
            )
        # two baselines that both reproduce are two ways to the error, not a duplicate; two
        # variants that each equal a control agree by construction (each is already said
        # against the control): their pair is no smell of its own
        like_control = {
            w.name for w in earlier if any(_equal(outcomes[w.name], outcomes[c]) for c in controls)
        }
        others = [
            (w.name, _equal(mine, outcomes[w.name]))
            for w in earlier
            if not (w.kind == v.kind == "baseline") and not (same and w.name in like_control)
        ]
        others = [(w, n) for w, n in others if n]
        if others:
            yield Smell(
                "same-as-variant",
                v.name,
                ", ".join(w for w, _ in others),
                f"every outcome equals {', '.join(w for w, _ in others)}'s, in all "
                f"{max(n for _, n in others)} cells both ran: is it another case?",
            )
        earlier.append(v)


def _no_declared_failure(entry: Entry) -> Iterable[Smell]:
    for v in entry.variants:
        # (a variant still to be written is check's to-do, not a smell); a dead end whose
        # documented failure is no error (claim.kind slower, precision, ...) wants no
        # signature: fails_as of its kind or claim.unmeasured, which check asks for
        if (
            v.kind == "dead_end"
            and v.written
            and v.signature is None
            and v.fails_as is None
            and failure_kind(v) == "raises"
        ):
            yield Smell(
                "no-declared-failure",
                v.name,
                "",
                "declares neither a signature nor fails_as: only the documented error "
                "counts as its failure",
            )


def _shows(entry: Entry, r: Record) -> bool:
    exc = r.exception
    found = entry.grade(r.outcome.value, exc.type if exc else "", exc.message if exc else "")
    return found in SHOWS


def _judged_elsewhere(entry: Entry, by_variant: Mapping[str, Sequence[Record]]) -> Iterable[Smell]:
    baselines = [v.name for v in entry.variants if v.kind == "baseline"]
    if len(baselines) < 2:
        return
    # per baseline and cell: whether it showed the documented error, among applicable runs
    showed: dict[str, dict[Cell, bool]] = {}
    for b in baselines:
        per: dict[Cell, bool] = {}
        for r in by_variant.get(b, ()):
            if r.outcome in NOT_COUNTED:
                continue
            per[_cell(r)] = per.get(_cell(r), False) or _shows(entry, r)
        showed[b] = per
    precisions = {p for v in entry.variants if v.kind == "baseline" for p in v.precisions}
    for v in entry.variants:
        if v.kind not in ("workaround", "dead_end") or v.baselines:
            continue
        across = not set(v.precisions) & precisions  # counted per (env, device), any precision
        mixed: dict[str, set[Cell]] = defaultdict(set)  # baseline that did not -> cells
        for cell in {_cell(r) for r in by_variant.get(v.name, ()) if r.outcome not in NOT_COUNTED}:
            near = [
                (b, c)
                for b in baselines
                for c in showed[b]
                if (c[:2] == cell[:2] if across else c == cell)
            ]
            yes = {b for b, c in near if showed[b][c]}
            if not yes:
                continue  # not a reproducing cell: not counted
            for b in {b for b, _ in near} - yes:
                mixed[b].add(cell)
        for b, cells in sorted(mixed.items()):
            yield Smell(
                "judged-elsewhere",
                v.name,
                b,
                f"counted in {len(cells)} cells where {b} ran and did not reproduce "
                f"(another baseline did), e.g. {_cells(cells)}: which baseline does it "
                "answer? (entry.yaml baselines:)",
            )


def _environment_errors(
    entry: Entry, by_variant: Mapping[str, Sequence[Record]]
) -> Iterable[Smell]:
    for v in entry.variants:
        causes: dict[str, set[Cell]] = defaultdict(set)
        for r in by_variant.get(v.name, ()):
            if r.outcome is not Outcome.OTHER_ERROR:
                continue
            cause = environment_cause(r.exception)
            if cause is not None:
                causes[cause].add(_cell(r))
        for cause, cells in sorted(causes.items()):
            yield Smell(
                "environment-error",
                v.name,
                cause,
                f"{cause}, counted as applicable in {len(cells)} cells, e.g. {_cells(cells)}: "
                "decide it before the run (harness/envs/capabilities.py)",
            )
