"""The nightly's snapshot and cell states: two consecutive simulated nights (a cell that
breaks, one that is fixed, one that flips), the snapshot they produce, the states' rules."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from harness.ci.nightly import (
    SNAPSHOT_SCHEMA,
    as_documented,
    cell_state,
    dumps,
    histories,
    make_snapshot,
    regressions,
    states_script,
    summary_markdown,
)
from harness.ci.regression_issues import report_regressions
from harness.outcomes import Outcome
from harness.report.render.jsonout import compat_index, part_name
from harness.store.records import Record
from tests.paths import REPO, RESOURCES

CELL = "py3.11-torch2.14.1-lightning2.6.6-cpu-fp32"


def rec(
    variant: str,
    kind: str,
    outcome: Outcome,
    night: str,
    trial: int = 0,
    torch: str = "2.14.1",
    cell: str = CELL,
) -> Record:
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
        versions={"torch": torch, "lightning": "2.6.6"},
        started_at=f"{night}T02:1{trial}:00Z",
        machine="ci-cpu-1",
        machine_id="aaaaaaaaaaaa",
    )


def three(variant: str, kind: str, night: str, *outcomes: Outcome, **kw: str) -> list[Record]:
    return [rec(variant, kind, o, night, trial=i, **kw) for i, o in enumerate(outcomes)]


OK, REP, ERR = Outcome.OK, Outcome.REPRODUCED, Outcome.OTHER_ERROR
NIGHT1, NIGHT2 = "2026-12-01", "2026-12-02"

# night 1: every cell as documented but the workaround that is still broken
NIGHT_1 = [
    *three("control", "control", NIGHT1, OK, OK, OK),  # breaks on night 2
    *three("workaround1", "workaround", NIGHT1, ERR, ERR, ERR),  # fixed on night 2
    *three("baseline", "baseline", NIGHT1, REP, REP, REP),  # flips on night 2
    *three("workaround2", "workaround", NIGHT1, OK, OK, OK),  # unchanged
]
NIGHT_2 = [
    *three("control", "control", NIGHT2, ERR, ERR, ERR),
    *three("workaround1", "workaround", NIGHT2, OK, OK, OK),
    *three("baseline", "baseline", NIGHT2, REP, OK, REP),
    *three("workaround2", "workaround", NIGHT2, OK, OK, OK),
    # a release first measured on night 2
    *three("control", "control", NIGHT2, OK, OK, OK, torch="2.15.0",
           cell="py3.11-torch2.15.0-lightning2.6.6-cpu-fp32"),
]  # fmt: skip

CLAIMS_1 = {"e/x": {"fix rate": "inconclusive (n=3)", "documented message": "confirmed"}}
CLAIMS_2 = {"e/x": {"fix rate": "holds; figure confirmed", "documented message": "confirmed"}}


def test_two_nights_make_a_snapshot_with_regressions_first(tmp_path: Path) -> None:
    first = make_snapshot(NIGHT_1, NIGHT1, CLAIMS_1)
    assert first["previous_night"] is None and first["records"]["counted"] == 12
    assert all(not v for v in first["changes"].values())
    assert first["new_releases"] == {"torch": ["2.14.1"], "lightning": ["2.6.6"]}

    settle = {
        "machine": "ci-cpu-1",
        "extra_runs": 3,
        "claims_settled": [
            {"entry": "e/x", "claim": "fix rate", "subject": "workaround1",
             "before": "inconclusive (n=3)", "after": "holds", "extra_runs": 3}
        ],
    }  # fmt: skip
    second = make_snapshot([*NIGHT_1, *NIGHT_2], NIGHT2, CLAIMS_2, first, [settle])
    assert second["schema"] == SNAPSHOT_SCHEMA
    assert second["settled_by_extra_trials"] == [
        {**settle["claims_settled"][0], "machine": "ci-cpu-1"}
    ]
    assert second["extra_trials"] == 3
    assert (second["night"], second["previous_night"]) == (NIGHT2, NIGHT1)
    assert second["records"] == {"counted": 15, "machines": ["ci-cpu-1"], "cells": 5}
    changes = second["changes"]
    assert list(changes) == ["new_failures", "fixes", "flaky", "other", "reproducer_changed"]
    assert [c["variant"] for c in changes["new_failures"]] == ["control"]
    broke = changes["new_failures"][0]
    assert broke["before"] == {"night": NIGHT1, "outcomes": ["ok"], "revisions": []}
    assert broke["now"] == ["other_error"]
    assert broke["state"] == {"state": "broken", "since": NIGHT2, "runs": 6, "failures": 3}
    assert [c["variant"] for c in changes["fixes"]] == ["workaround1"]
    assert changes["fixes"][0]["state"]["state"] == "holds"
    assert [c["variant"] for c in changes["flaky"]] == ["baseline"]
    assert changes["flaky"][0]["state"] == {
        "state": "flaky", "since": NIGHT2, "runs": 6, "failures": 1
    }  # fmt: skip
    assert changes["other"] == []  # workaround2 did not change; the 2.15 cell is new
    assert second["new_releases"] == {"torch": ["2.15.0"], "lightning": []}
    assert second["claims_changed"] == [
        {
            "entry": "e/x",
            "claim": "fix rate",
            "before": "inconclusive (n=3)",
            "now": "holds; figure confirmed",
        }
    ]
    assert second["states"] == {"holds": 3, "broken": 1, "flaky": 1, "failing": 0}
    assert list(regressions(second)) == ["e/x"]
    # it is JSON as written to results/nightly/<night>.json
    (tmp_path / f"{NIGHT2}.json").write_text(json.dumps(second))
    assert json.loads((tmp_path / f"{NIGHT2}.json").read_text()) == second

    summary = summary_markdown(second)
    assert summary.index("Regressions (new failures): 1") < summary.index("Fixes: 1")
    assert summary.index("Fixes: 1") < summary.index("Flaky: 1")
    assert "`e/x` :: `control` @ `py3.11-torch2.14.1-lightning2.6.6-cpu-fp32`" in summary
    assert "torch 2.15.0" in summary
    assert "Claims settled by extra trials: 1** (3 extra runs in all)" in summary


def _history(*nights: tuple[str, list[Outcome]], kind: str = "workaround"):
    records = [
        rec("v", kind, o, night, trial=i) for night, outs in nights for i, o in enumerate(outs)
    ]
    return histories(records)[("e/x", "v", CELL)]


def _nights(pattern: str) -> list[tuple[str, list[Outcome]]]:
    """One night per letter: h = three ok runs, f = three errors, m = two ok and one error."""
    runs = {"h": [OK, OK, OK], "f": [ERR, ERR, ERR], "m": [OK, ERR, OK]}
    return [(f"2026-11-{i + 1:02d}", runs[c]) for i, c in enumerate(pattern)]


def test_states_and_the_night_each_began() -> None:
    def state(pattern: str) -> tuple[str, str]:
        s = cell_state(_history(*_nights(pattern)))
        assert s is not None
        return s.state, s.since

    assert state("hhh") == ("holds", "2026-11-01")
    assert state("hhf") == ("broken", "2026-11-03")
    assert state("hffff") == ("broken", "2026-11-02")  # one step, then failing: still broken
    assert state("fff") == ("failing", "2026-11-01")
    assert state("ffh") == ("holds", "2026-11-03")  # fixed
    assert state("hhm") == ("flaky", "2026-11-03")  # the night's runs disagree
    assert state("hfhfh") == ("flaky", "2026-11-02")  # 6/15 failed, changing more than once
    assert state("hf") == ("broken", "2026-11-02")  # one change is not flakiness


def test_few_runs_are_not_called_flaky_by_rate_and_unmeasured_runs_are_not_counted() -> None:
    # 1 failure in 3 runs over two nights that changed twice: below the stated 6 runs
    one_each = [("2026-11-01", [OK]), ("2026-11-02", [ERR]), ("2026-11-03", [OK])]
    s = cell_state(_history(*one_each))
    assert s is not None and s.state == "holds"
    unsupported = [("2026-11-01", [Outcome.UNSUPPORTED, Outcome.SKIPPED, Outcome.ENV_FAILED])]
    assert cell_state(_history(*unsupported)) is None


def test_what_holds_per_kind() -> None:
    def held(kind: str, outcome: Outcome) -> bool | None:
        return as_documented(rec("v", kind, outcome, NIGHT1))

    assert held("baseline", REP) is True and held("baseline", OK) is False
    assert held("workaround", OK) is True and held("control", ERR) is False
    assert held("dead_end", Outcome.RELATED) is True and held("dead_end", OK) is False
    assert held("baseline", Outcome.UNSUPPORTED) is None


def test_a_rerun_in_the_same_night_replaces_its_trial() -> None:
    first = rec("v", "workaround", ERR, NIGHT1)
    rerun = dataclasses.replace(first, outcome=OK, started_at=f"{NIGHT1}T05:00:00Z")
    (night,) = histories([first, rerun])[("e/x", "v", CELL)].nights
    assert (night.held, night.failed) == (1, 0)


def _repo_with_two_nights(tmp_path: Path) -> Path:
    (tmp_path / "repros").mkdir(parents=True)
    store = tmp_path / "results" / "records"
    store.mkdir(parents=True)
    lines = [json.dumps(r.to_dict()) for r in [*NIGHT_1, *NIGHT_2]]
    (store / "ci-cpu-1.jsonl").write_text("\n".join(lines) + "\n")
    return tmp_path


def _harness(repo: Path, *args: str, path: str | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    if path:
        env["PATH"] = path + os.pathsep + env["PATH"]
    return subprocess.run(
        [sys.executable, "-m", "harness", "--repo", str(repo), "nightly", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=env,
        cwd=REPO,
    )


def test_the_command_writes_the_snapshot_and_summary_and_opens_one_issue(tmp_path: Path) -> None:
    repo = _repo_with_two_nights(tmp_path / "repo")
    summary = tmp_path / "summary.md"
    out = _harness(repo, "--night", NIGHT1)
    assert out.returncode == 0, out.stdout + out.stderr
    out = _harness(repo, "--summary", str(summary), "--issues", "dry-run")
    assert out.returncode == 0, out.stdout + out.stderr
    snap = json.loads((repo / "results" / "nightly" / f"{NIGHT2}.json").read_text())
    assert snap["previous_night"] == NIGHT1
    assert [c["variant"] for c in snap["changes"]["new_failures"]] == ["control"]
    assert "Regressions (new failures): 1" in summary.read_text()
    assert "dry run: gh issue list" in out.stdout and "nightly regression: e/x" in out.stdout

    # a real program on PATH stands in for gh: it logs its arguments, knows no open issue
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "gh.log"
    gh = bin_dir / "gh"
    gh.write_text(
        "#!/bin/sh\n"
        f'echo "$@" >> "{log}"\n'
        'if [ "$2" = list ]; then echo "[]"; else cat > /dev/null; fi\n'
    )
    gh.chmod(0o755)
    out = _harness(repo, "--issues", "gh", path=str(bin_dir))
    assert out.returncode == 0, out.stdout + out.stderr
    calls = log.read_text().splitlines()
    assert calls[0].startswith("issue list --state open")
    assert calls[1] == "issue create --title nightly regression: e/x --body-file -"
    assert len(calls) == 2  # one issue for the one regressed entry


def test_an_open_issue_of_the_entry_gets_a_comment() -> None:
    second = make_snapshot([*NIGHT_1, *NIGHT_2], NIGHT2, {})
    calls: list[tuple[list[str], str | None]] = []

    def gh(args: Sequence[str], stdin: str | None) -> str:
        calls.append((list(args), stdin))
        return json.dumps([{"number": 7, "title": "nightly regression: e/x"}])

    said: list[str] = []
    report_regressions(second, dry_run=False, say=said.append, gh=gh)
    assert calls[1][0] == ["issue", "comment", "7", "--body-file", "-"]
    assert "`control` (control) @ `py3.11-torch2.14.1-lightning2.6.6-cpu-fp32`" in str(calls[1][1])
    assert said == ["commented on issue #7: nightly regression: e/x"]
    report_regressions(second, dry_run=True, say=said.append, gh=gh)
    assert len(calls) == 2  # a dry run runs nothing


def test_the_states_file_gives_each_cell_its_state_for_the_page() -> None:
    text = states_script([*NIGHT_1, *NIGHT_2], NIGHT2)
    assert text.startswith("harnessStates(") and text.endswith(");\n")
    data = json.loads(text[len("harnessStates(") : -3])
    assert data[""] == NIGHT2
    assert data["e/x"]["control"][CELL] == ["broken", NIGHT2, 6, 3]
    assert data["e/x"]["workaround1"][CELL] == ["holds", NIGHT2, 6, 3]
    assert data["e/x"]["baseline"][CELL][0] == "flaky"
    # as of night 1, nothing had broken yet
    first = json.loads(states_script(NIGHT_1, NIGHT1)[len("harnessStates(") : -3])
    assert first["e/x"]["control"][CELL] == ["holds", NIGHT1, 3, 0]


def test_the_two_nights_snapshot_is_the_committed_one() -> None:
    # the snapshot the two simulated nights produce, as a reader sees it; after a deliberate
    # change to the format: regenerate it with harness.ci.nightly.dumps and bump the schema
    first = make_snapshot(NIGHT_1, NIGHT1, CLAIMS_1)
    second = make_snapshot([*NIGHT_1, *NIGHT_2], NIGHT2, CLAIMS_2, first)
    committed = RESOURCES / "nightly" / "two-nights-2026-12-02.json"
    assert dumps(second) == committed.read_text()


def test_a_change_across_another_harness_revision_is_said() -> None:
    def at(records: list[Record], rev: str) -> list[Record]:
        return [dataclasses.replace(r, provenance={"git_rev": rev}) for r in records]

    snap = make_snapshot([*at(NIGHT_1, "aaaaaaaaaaaa"), *at(NIGHT_2, "bbbbbbbbbbbb")], NIGHT2, {})
    broke = snap["changes"]["new_failures"][0]
    assert broke["before"]["revisions"] == ["aaaaaaaaaaaa"]
    assert broke["revisions"] == ["bbbbbbbbbbbb"] and broke["same_revision"] is False
    assert "Regressions (new failures): 1** (1 across another harness revision)" in (
        summary_markdown(snap)
    )


def test_the_command_reads_the_claims_from_compat_json_parts_and_names_a_damaged_one(
    tmp_path: Path,
) -> None:
    repo = _repo_with_two_nights(tmp_path / "repo")
    results = repo / "results"
    verdicts = [{"claim": "fix rate", "subject": "workaround1", "label": "holds"}]
    (results / "aggregates").mkdir()
    (results / "compat.json").write_bytes(compat_index(15, ["e/x"]))
    part = results / part_name(0)
    part.write_text(json.dumps({"id": "e/x", "verdicts": verdicts}) + "\n")
    out = _harness(repo)
    assert out.returncode == 0, out.stdout + out.stderr
    snap = json.loads((results / "nightly" / f"{NIGHT2}.json").read_text())
    assert snap["claims"] == {"e/x": {"fix rate [workaround1]": "holds"}}

    part.write_text(json.dumps({"id": "e/y", "verdicts": verdicts}) + "\n")
    out = _harness(repo)
    assert out.returncode == 2
    assert f"{part}:1: not the aggregate of e/x" in out.stdout + out.stderr


def test_a_change_across_a_rewrite_of_the_variant_is_the_reproducers_not_a_regression() -> None:
    # parameter-sharing workaround 1's case: ok the night before its code was rewritten,
    # wrong_result after; the rewrite (entry.yaml rewritten) falls between the two nights
    rewritten = {("e/x", "control"): f"{NIGHT2}T00:00:00Z"}
    snap = make_snapshot([*NIGHT_1, *NIGHT_2], NIGHT2, {}, rewritten=rewritten)
    assert snap["changes"]["new_failures"] == []
    (changed,) = snap["changes"]["reproducer_changed"]
    assert (changed["variant"], changed["before"]["outcomes"], changed["now"]) == (
        "control",
        ["ok"],
        ["other_error"],
    )
    assert changed["readings"] == {"before": [""], "now": [f"{NIGHT2}T00:00:00Z"]}
    assert regressions(snap) == {}
    summary = summary_markdown(snap)
    assert "**Regressions (new failures): 0**" in summary
    assert "**Changed with the reproducer (its variant rewritten between the nights): 1**" in (
        summary
    )
    # a rewrite before both nights: both ran the same code, and the break is a regression
    earlier = {("e/x", "control"): f"{NIGHT1}T00:00:00Z"}
    again = make_snapshot([*NIGHT_1, *NIGHT_2], NIGHT2, {}, rewritten=earlier)
    assert [c["variant"] for c in again["changes"]["new_failures"]] == ["control"]
    assert again["changes"]["reproducer_changed"] == []
