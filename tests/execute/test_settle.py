"""Extra trials that settle questions: which cells get one more trial (flaky cells first,
then the cells of open claims where the baseline reproduced), numbered after the machine's
last trial, and when a target counts as decided. Bookkeeping only: the jobs are stand-ins
(a real run of the rule is in docs/how-to/ci-and-merge.md, with its records)."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from types import SimpleNamespace

from harness.execute.settle import (
    MAX_RUNS,
    Question,
    flaky_cells,
    is_open,
    next_round,
    question_cells,
)
from harness.outcomes import Outcome
from harness.store.records import Record
from tests.paths import REPO

CELL_A = "py3.11-torch2.13.0-lightning2.6.6-cpu-fp32"
CELL_B = "py3.11-torch2.14.1-lightning2.6.6-cpu-fp32"
OK, REP, ERR = Outcome.OK, Outcome.REPRODUCED, Outcome.OTHER_ERROR


def rec(variant: str, kind: str, outcome: Outcome, trial: int, cell: str = CELL_A) -> Record:
    return Record(
        entry="e/x",
        variant=variant,
        kind=kind,
        cell=cell,
        env=cell.rsplit("-", 2)[0],
        device="cpu",
        precision="fp32",
        trial=trial,
        outcome=outcome,
        machine="nightly-cpu",
        machine_id="aaaaaaaaaaaa",
    )


def runs(variant: str, kind: str, *outcomes: Outcome, cell: str = CELL_A) -> list[Record]:
    return [rec(variant, kind, o, i, cell) for i, o in enumerate(outcomes)]


@dataclass(frozen=True)
class StandInJob:  # what next_round copies: a planned job, its trial replaced
    name: str
    trial: int = 0


def test_a_flaky_cell_stays_open_until_its_failure_rate_is_decided() -> None:
    planned = [("e/x", "control", CELL_A)]
    # 1 failure in 6: the interval 3%..56% reaches below 5%: open
    assert flaky_cells(runs("control", "control", ERR, OK, OK, OK, OK, OK), planned) == planned
    # 1 failure in 3: 6%..79%, within 5%..95%: flaky, decided
    assert flaky_cells(runs("control", "control", ERR, OK, OK), planned) == []
    # runs that agree are not flaky
    assert flaky_cells(runs("control", "control", OK, OK, OK), planned) == []
    # unsupported runs measure nothing
    assert flaky_cells(runs("control", "control", OK, Outcome.UNSUPPORTED), planned) == []
    # no more than MAX_RUNS
    many = runs("control", "control", ERR, *[OK] * (MAX_RUNS - 1))
    assert flaky_cells(many, planned) == []


def test_an_open_claim_gets_trials_only_where_the_baseline_reproduced() -> None:
    q = Question("e/x", "workaround 1: success rate", "workaround1", "inconclusive (n=3)")
    records = [
        *runs("baseline", "baseline", REP, REP, REP, cell=CELL_A),
        *runs("baseline", "baseline", OK, OK, OK, cell=CELL_B),  # does not reproduce here
        *runs("workaround1", "workaround", OK, OK, OK, cell=CELL_A),
        *runs("workaround1", "workaround", OK, OK, OK, cell=CELL_B),
    ]
    planned = [("e/x", "workaround1", CELL_A), ("e/x", "workaround1", CELL_B)]
    assert question_cells(records, q, planned) == [("e/x", "workaround1", CELL_A)]


def test_a_round_puts_flaky_cells_first_and_numbers_trials_after_the_machines_last() -> None:
    q = Question("e/x", "workaround 1: success rate", "workaround1", "inconclusive (n=3)")
    records = [
        *runs("baseline", "baseline", REP, REP, REP),
        *runs("workaround1", "workaround", OK, OK, OK),
        *runs("control", "control", OK, ERR, OK, OK, OK, OK),
    ]
    planned = {
        ("e/x", "workaround1", CELL_A): StandInJob("workaround1"),
        ("e/x", "control", CELL_A): StandInJob("control"),
        ("e/x", "baseline", CELL_A): StandInJob("baseline"),
    }
    jobs, why = next_round(planned, records, [q], lambda r: r.machine == "nightly-cpu")  # type: ignore[arg-type]
    assert jobs == [StandInJob("control", trial=6), StandInJob("workaround1", trial=3)]
    assert list(why.values()) == [
        "flaky cell",
        "claim 'workaround 1: success rate' (inconclusive (n=3))",
    ]
    # another machine's trials do not number this one's
    jobs, _ = next_round(planned, records, [q], lambda r: r.machine == "elsewhere")  # type: ignore[arg-type]
    assert [j.trial for j in jobs] == [0, 0]
    # nothing open: no round
    assert next_round(planned, runs("baseline", "baseline", REP), [], lambda r: True) == ([], {})  # type: ignore[arg-type]


def test_open_is_an_inconclusive_advice_or_verdict_about_a_variant() -> None:
    def v(advice: str, verdict: str, subject: str = "workaround1") -> SimpleNamespace:
        return SimpleNamespace(advice=advice, verdict=verdict, subject=subject)

    assert is_open(v("inconclusive", "inconclusive"))
    assert not is_open(v("holds", "inconclusive"))  # the advice is decided; the figure is not
    assert is_open(v("", "inconclusive"))
    assert not is_open(v("", "confirmed"))
    assert not is_open(v("inconclusive", "inconclusive", subject=""))  # no variant to run


def test_settle_only_without_seconds_is_refused() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "harness", "--repo", str(REPO), "run", "--settle-only"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 2 and "--settle-only needs --settle SECONDS" in out.stdout
