"""harness diff: the categories on records, and the CLI on stores, machines and git revisions."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness.aggregate.diff import Side, diff_records
from harness.ci.diff import format_diff
from harness.outcomes import Outcome
from harness.store.records import Record
from tests.paths import REPO


def rec(variant: str, kind: str, outcome: Outcome, torch: str = "2.4.1", **kw) -> Record:
    return Record(
        entry="e/x",
        variant=variant,
        kind=kind,
        cell="py3.11-torch2.4.1-lightning2.5.6-cpu-fp16",
        env="py3.11-torch2.4.1-lightning2.5.6",
        device="cpu",
        precision="fp16",
        trial=0,
        outcome=outcome,
        versions={"torch": torch, "lightning": "2.5.6"},
        machine=kw.pop("machine", "vm"),
        machine_id=kw.pop("machine_id", "aaaaaaaaaaaa"),
        **kw,
    )


def test_each_kind_of_change_lands_in_its_category() -> None:
    old = [
        rec("baseline-a", "baseline", Outcome.OK),
        rec("baseline-b", "baseline", Outcome.REPRODUCED),
        rec("workaround-1", "workaround", Outcome.OTHER_ERROR),
        rec("dead_end-1", "dead_end", Outcome.OK),
        rec("control", "control", Outcome.OK),
        rec("workaround-2", "workaround", Outcome.OK),
        rec("gone", "control", Outcome.OK),
    ]
    new = [
        rec("baseline-a", "baseline", Outcome.REPRODUCED, torch="2.4.1+cpu"),
        rec("baseline-b", "baseline", Outcome.OK),
        rec("workaround-1", "workaround", Outcome.OK),
        rec("dead_end-1", "dead_end", Outcome.WRONG_RESULT),
        rec("control", "control", Outcome.CRASHED),
        # a second trial of the same outcome is no change
        rec("workaround-2", "workaround", Outcome.OK),
        dataclasses.replace(rec("workaround-2", "workaround", Outcome.OK), trial=1),
        rec("fresh", "control", Outcome.OK),
    ]
    d = diff_records(Side("old", tuple(old)), Side("new", tuple(new)))
    got = {c.variant: c.category for c in d.changes}
    assert got == {
        "baseline-a": "newly_reproduced",
        "baseline-b": "no_longer_reproduced",
        "workaround-1": "newly_working",
        "dead_end-1": "newly_failing",
        "control": "other",
    }
    assert (d.unchanged, d.only_old, [c.variant for c in d.only_new]) == (1, 1, ["fresh"])
    (line,) = [c.line() for c in d.changes if c.variant == "baseline-a"]
    assert line == (
        "e/x :: baseline-a @ py3.11-torch2.4.1-lightning2.5.6-cpu-fp16: ok -> reproduced "
        "(torch 2.4.1, lightning 2.5.6 -> torch 2.4.1+cpu, lightning 2.5.6)"
    )
    text = "\n".join(format_diff(d))
    assert "newly reproduced (1):" in text and "5 cells changed, 1 unchanged" in text


def test_a_workaround_that_becomes_unsupported_is_not_called_failing() -> None:
    old = [rec("workaround-1", "workaround", Outcome.OK)]
    new = [rec("workaround-1", "workaround", Outcome.UNSUPPORTED, reason="no API")]
    (change,) = diff_records(Side("o", tuple(old)), Side("n", tuple(new))).changes
    assert change.category == "other"


def test_a_cell_that_turns_flaky_on_a_second_machine_is_a_change() -> None:
    old = [rec("baseline-a", "baseline", Outcome.REPRODUCED)]
    new = [*old, rec("baseline-a", "baseline", Outcome.OK, machine="ci-cpu-1")]
    (change,) = diff_records(Side("o", tuple(old)), Side("n", tuple(new))).changes
    assert (change.category, change.old, change.new) == (
        "other",
        ("reproduced",),
        ("ok", "reproduced"),
    )


def harness(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "harness", "--repo", str(cwd), *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=REPO,
    )


def _committed_project(root: Path) -> Path:
    """A git repository of its own holding this checkout's entries, matrix and records,
    committed: what HEAD holds there is known, whatever this checkout's working tree holds
    (a newcomer's records, added by the README's "add an entry and run it")."""
    import shutil

    root.mkdir(parents=True)
    for name in ("matrix.yaml", "repros", "results/records"):
        src = REPO / name
        if src.is_dir():
            shutil.copytree(src, root / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(src, root / name)
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "records"], check=True)
    return root


def test_cli_diff_of_a_git_revision_and_a_store_with_machines(tmp_path: Path) -> None:
    """It diffed this checkout's HEAD against its working tree: "22 only in new" on a
    clone holding records HEAD does not (issue 25, item 9). It builds its revisions."""
    project = _committed_project(tmp_path / "project")
    committed = project / "results" / "records" / "vm.jsonl"
    # the committed records against themselves at HEAD: nothing changed
    same = harness(
        "diff", "HEAD:results/records/vm.jsonl", str(committed), "--exit-code", cwd=project
    )
    assert same.returncode == 0, same.stdout + same.stderr
    assert "0 cells changed" in same.stdout and "only in new (0)" in same.stdout
    # a rerun on another machine that now reproduces a baseline the committed run did not
    lines = committed.read_text().splitlines()
    d = next(
        json.loads(x)
        for x in lines
        if '"kind": "baseline"' in x and '"outcome": "reproduced"' not in x
    )
    d.update(outcome="reproduced", reason="", started_at="2027-01-01T00:00:00+00:00")
    d.update(machine="ci-cpu-1", machine_id="")  # another machine's record (its id unknown)
    store = tmp_path / "records"
    store.mkdir()
    (store / "ci-cpu-1.jsonl").write_text(json.dumps(d) + "\n")
    (store / "vm.jsonl").write_text("\n".join(lines) + "\n")
    out = harness(
        "diff", "HEAD", str(store), "--new-machine", "ci-cpu-1", "--exit-code", cwd=project
    )
    assert out.returncode == 1, out.stdout + out.stderr
    assert "newly reproduced (1):" in out.stdout
    assert f"{d['entry']} :: {d['variant']} @ {d['cell']}: " in out.stdout
    assert "machines ci-cpu-1 (id unknown)" in out.stdout
    # two machines within one store
    both = harness(
        "diff", str(store), str(store), "--old-machine", "vm", "--new-machine", "ci-cpu-1"
    )
    assert both.returncode == 0 and "1 cells changed" in both.stdout
    # records the working tree holds and HEAD does not are "only in new", never a failure
    extra = {**json.loads(lines[0]), "entry": "zz/not-committed", "started_at": d["started_at"]}
    with open(committed, "a") as f:
        f.write(json.dumps(extra) + "\n")
    grown = harness("diff", "HEAD:results/records/vm.jsonl", str(committed), cwd=project)
    assert grown.returncode == 0, grown.stdout + grown.stderr
    assert "only in new (1):" in grown.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("no-such-rev", "results/records"), "neither a record file or folder nor a git revision"),
        (("HEAD", "results/records", "--machine", "nobody"), "no records of machine 'nobody'"),
    ],
)
def test_cli_diff_names_what_it_cannot_read(args: tuple[str, ...], message: str) -> None:
    out = harness("diff", *args)
    assert out.returncode == 2 and message in out.stdout


def test_report_since_a_revision_opens_the_page_with_what_changed(tmp_path: Path) -> None:
    import shutil

    for name in ("matrix.yaml", "repros", "results"):
        src = REPO / name
        if src.is_dir():
            shutil.copytree(src, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(src, tmp_path / name)
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    subprocess.run(["git", "-C", str(tmp_path), "add", "results/records"], check=True)
    subprocess.run(
        [
            "git",
            "-C",
            str(tmp_path),
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-qm",
            "r",
        ],
        check=True,
    )
    records = tmp_path / "results" / "records"
    d = json.loads((records / "vm.jsonl").read_text().splitlines()[3])
    d.update(outcome="crashed", reason="measured elsewhere", started_at="2027-01-01T00:00:00+00:00")
    (records / "ci-cpu-1.jsonl").write_text(json.dumps(d) + "\n")
    out = harness("report", "--since", "HEAD", cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    page = (tmp_path / "results" / "index.html").read_text()
    main = page.split("<main>", 1)[1]
    # the paste box first, then the latest night's regressions (the committed
    # results/nightly), then what changed
    assert main.startswith('<section id="ask" ')
    main = main.split("</section>", 1)[1]
    assert main.startswith('<section id="nightly"><h2>Latest night, ')
    main = main.split("</section>", 1)[1]
    assert main.startswith('<section id="changed-since"><h2>Changed since HEAD</h2>')
    assert f"{d['entry']} :: {d['variant']} @ {d['cell']}" in main.split("</section>")[0]
    assert harness("report", "--since", "nope", cwd=tmp_path).returncode == 2


def test_records_are_compared_as_the_report_reads_them() -> None:
    # the committed run recorded dead end 2's own expected error as other_error (schema 2);
    # the harness now records it as related: the report reads both as related, so must diff
    from harness.aggregate.diff import as_reported
    from harness.spec.entries import load_entries
    from harness.store.jsonl import migrate
    from harness.store.records import Record as R

    # one line of that run (schema 2), kept as a fixture: the committed store is rerun since
    fixture = REPO / "tests" / "resources" / "records" / "schema2-deadend2-other-error.jsonl"
    line = fixture.read_text().splitlines()[0]
    old = R.from_dict(migrate(json.loads(line)))
    new = dataclasses.replace(old, outcome=Outcome.RELATED, machine="rerun")
    raw = diff_records(Side("o", (old,)), Side("n", (new,)))
    assert [c.category for c in raw.changes] == ["other"]
    entries = load_entries(REPO / "repros")
    read = diff_records(
        Side("o", tuple(as_reported([old], entries))), Side("n", tuple(as_reported([new], entries)))
    )
    assert (read.changes, read.unchanged) == ((), 1)
