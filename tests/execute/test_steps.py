"""The run step (harness.execute.steps.run_matrix) wiring the scheduler, the preparer, the
runner, the store and the progress, in this process: a backend that hands out this
interpreter (or fails), the tiny reproducer in real children. What a free slot does next
is the scheduler's, tested in test_scheduler.py; the CLI's runs are in tests/e2e."""

from __future__ import annotations

import dataclasses
import io
import json
import os
import re
import signal
import sys
import time
from pathlib import Path

import pytest
from rich.console import Console

from harness.config import Config
from harness.envs.backends import BuiltEnv, CannotServe, EnvFailed, Prober
from harness.execute import steps
from harness.execute.plan import Job
from harness.execute.steps import RunState, run_matrix
from harness.spec.entries import Entry
from harness.spec.matrix import Cell, Environment
from harness.store.jsonl import Store

PY = f"{sys.version_info[0]}.{sys.version_info[1]}"
GOOD = Environment(PY, "1.0.0", "0")
BAD = Environment(PY, "99.0.0", "0")
MISSING = Environment(PY, "2.0.0", "0")  # "built" with an interpreter that is not there


class Backend:
    """This interpreter for GOOD, an interpreter that does not exist for MISSING, and the
    installer's failure for BAD; ``interrupt`` names an environment whose build is where
    Ctrl-C lands."""

    def __init__(self, interrupt: Environment | None = None) -> None:
        self.asked: list[str] = []
        self.interrupt = interrupt

    def ensure(self, env: Environment, prober: Prober | None = None) -> BuiltEnv:
        self.asked.append(env.id)
        if env == self.interrupt:
            raise KeyboardInterrupt
        if "six>=99" in env.requires:
            raise CannotServe(
                "uv pip install six>=99 failed:\nNo solution found when resolving dependencies:"
                "\n  Because there is no version of six>=99 ..."
            )
        if "six==1.0.0.post7" in env.requires:
            raise EnvFailed("uv pip install six==1.0.0.post7 failed:\nFailed to fetch: ...")
        if env.requires:  # built: what uv really installed for the variant's requirements
            return BuiltEnv(
                env,
                Path(sys.prefix),
                Path(sys.executable),
                installed={"six": "1.16.0"},
                imports=(("json",),),
            )
        if env == BAD:
            raise EnvFailed("uv pip install six==99.0.0 failed:\nno such version")
        python = Path(sys.executable) if env == GOOD else Path("/nonexistent/python")
        return BuiltEnv(env, Path(sys.prefix), python, imports=(("json",),))


def state_for(
    tmp_path: Path, entry: Entry, envs: list[Environment], isolation: str, **cfg: object
) -> tuple[RunState, io.StringIO]:
    todo = [
        Job(entry, entry.variant(name), Cell(env, device, "fp32"), 0)
        for env in envs
        for device, names in (("cpu", ("documented", "ok")), ("cuda", ("documented",)))
        for name in names
    ]
    out = io.StringIO()
    config = Config(repo=tmp_path, jobs=1, isolation=isolation, timeout_s=60, memory_limit_mb=0)
    for key, value in cfg.items():
        setattr(config, key, value)
    state = RunState(
        config=config,
        console=Console(file=out, width=300, highlight=False, soft_wrap=True),
        todo=todo,
    )
    state.store = Store(tmp_path / "records", "m")
    return state, out


def stored(tmp_path: Path) -> dict[str, str]:
    lines = (tmp_path / "records" / "m.jsonl").read_text().splitlines()
    return {
        f"{r['variant']}@{r['env']}-{r['device']}": r["outcome"] for r in map(json.loads, lines)
    }


def own_children(before: frozenset[int] = frozenset()) -> list[int]:
    """This process's children that still run (not zombies), but for ``before``: those that
    ran before the test (e.g. multiprocessing's resource tracker, which an earlier test in
    this process may have started and which stays for the life of the process)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            text = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        fields = text[text.rindex(")") + 2 :].split()
        if fields[1] == str(os.getpid()) and fields[0] not in ("Z", "X") and int(pid) not in before:
            found.append(int(pid))
    return found


@pytest.mark.parametrize("isolation", ["fork", "process"])
def test_every_job_gets_its_record_and_a_line_as_it_comes(
    tmp_path: Path, tiny_entry: Entry, isolation: str
) -> None:
    before = frozenset(own_children())
    state, out = state_for(tmp_path, tiny_entry, [GOOD, BAD], isolation)
    backend = state.backend = Backend()
    assert run_matrix(state) is state
    assert backend.asked == [GOOD.id, BAD.id]  # in the order of the jobs, each once
    assert stored(tmp_path) == {
        f"documented@{GOOD.id}-cuda": "skipped",  # decided by the probe: no CUDA here
        f"documented@{GOOD.id}-cpu": "reproduced",
        f"ok@{GOOD.id}-cpu": "ok",
        f"documented@{BAD.id}-cpu": "env_failed",
        f"ok@{BAD.id}-cpu": "env_failed",
        f"documented@{BAD.id}-cuda": "env_failed",
    }
    text = out.getvalue()
    assert f"environment {GOOD.id}: 3 jobs\n" in text
    assert f"env_failed {BAD.id}: uv pip install six==99.0.0 failed:\n" in text
    # one line per record, numbered, with the status the progress bar shows on a terminal
    assert (
        f"[5/6, 1 left, 3 failed | env_failed=3 reproduced=1 skipped=1] "
        f"tiny/faults::documented@{GOOD.id}-cpu-fp32#0 -> reproduced\n"
    ) in text
    assert "[6/6, 0 left, 3 failed | env_failed=3 ok=1 reproduced=1 skipped=1] " in text
    assert text.endswith(
        f"done: 6 records (env_failed=3 ok=1 reproduced=1 skipped=1) in {state.store.path}\n"
    )
    if isolation == "fork":
        assert "warm worker imported in" in text
    assert own_children(before) == []  # the warm worker stopped with its environment's jobs


def test_a_harness_error_on_a_job_leaves_it_unrecorded_and_the_run_ends_1(
    tmp_path: Path, tiny_entry: Entry
) -> None:
    state, out = state_for(tmp_path, tiny_entry, [MISSING, GOOD], "process")
    state.backend = Backend()
    assert run_matrix(state) == 1
    # the jobs that could not start have no record (--resume runs them); the rest ran
    assert set(stored(tmp_path)) == {
        f"documented@{MISSING.id}-cuda",  # decided before running: it needs no interpreter
        f"documented@{GOOD.id}-cpu",
        f"ok@{GOOD.id}-cpu",
        f"documented@{GOOD.id}-cuda",
    }
    text = out.getvalue()
    assert f"harness error on tiny/faults::ok@{MISSING.id}-cpu-fp32#0: FileNotFoundError" in text
    assert "done: 4 records" in text
    assert "2 job(s) left without a record by a harness error (above); rerun with --resume" in text


def test_ctrl_c_ends_the_run_with_130_and_counts_what_was_stored(
    tmp_path: Path, tiny_entry: Entry, monkeypatch: pytest.MonkeyPatch
) -> None:
    ended: list[bool] = []
    # the real one signals every child of this process: the test runner's too
    monkeypatch.setattr(steps, "end_own_children", lambda: ended.append(True))
    before = frozenset(own_children())
    state, out = state_for(tmp_path, tiny_entry, [GOOD, BAD], "fork")
    state.backend = Backend(interrupt=BAD)  # while GOOD's jobs wait for their slot
    assert run_matrix(state) == 130
    assert ended == [True]
    assert stored(tmp_path) == {f"documented@{GOOD.id}-cuda": "skipped"}
    assert "interrupted: 1 of 6 records stored; rerun with --resume to finish" in out.getvalue()
    assert state.groups.stopping  # a child started from here on is ended at once
    assert own_children(before) == []  # GOOD's warm worker too


def test_a_full_disk_after_a_job_stops_the_run_unless_keep_going(
    tmp_path: Path, tiny_entry: Entry, monkeypatch: pytest.MonkeyPatch
) -> None:
    def full(*args: object, **kwargs: object) -> object:
        raise OSError(28, "No space left on device", "/tmp/harness-run-x")

    monkeypatch.setattr(steps, "run_job", full)  # what run_isolated raises on a full disk
    state, out = state_for(tmp_path, tiny_entry, [GOOD], "process")
    state.backend = Backend()
    assert run_matrix(state) == 1
    assert stored(tmp_path) == {f"documented@{GOOD.id}-cuda": "skipped"}
    told = " ".join(out.getvalue().split())
    assert "no space left on the disk of /tmp/harness-run-x" in told
    assert "; 1 of 3 records stored" in told

    kept, out = state_for(tmp_path / "kept", tiny_entry, [GOOD], "process", keep_going=True)
    kept.backend = Backend()
    assert run_matrix(kept) is kept
    assert stored(tmp_path / "kept") == {
        f"documented@{GOOD.id}-cuda": "skipped",
        f"documented@{GOOD.id}-cpu": "env_failed",
        f"ok@{GOOD.id}-cpu": "env_failed",
    }
    assert "(kept going: --keep-going)" in (tmp_path / "kept" / "records" / "m.jsonl").read_text()


def test_sigterm_stops_a_run_as_ctrl_c_does_and_the_handler_is_put_back() -> None:
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(KeyboardInterrupt), steps._term_as_interrupt():
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)  # not reached: the handler raises
    assert signal.getsignal(signal.SIGTERM) is before


def test_a_slow_environment_build_is_told_while_it_takes(
    tmp_path: Path, tiny_entry: Entry, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nothing printed for the minutes a cold environment takes to build looked like a hang:
    the run says which environment it prepares, and (without a terminal) every
    PREPARING_EVERY_S how long it has taken."""
    from harness.execute import progress

    class SlowBackend(Backend):
        def ensure(self, env: Environment, prober: Prober | None = None) -> BuiltEnv:
            time.sleep(1.6)
            return super().ensure(env, prober)

    monkeypatch.setattr(progress, "PREPARING_EVERY_S", 0.5)
    state, out = state_for(tmp_path, tiny_entry, [BAD], "process")
    state.backend = SlowBackend()
    assert run_matrix(state) is state
    text = out.getvalue()
    assert f"preparing {BAD.id} (building it, or checking the one built before)\n" in text
    assert text.count(f"  still preparing {BAD.id}: ") >= 2, text
    assert re.search(rf"still preparing {re.escape(BAD.id)}: \d+ s\n", text), text
    assert f"env_failed {BAD.id}: uv pip install six==99.0.0 failed:" in text


def _advised(entry: Entry, **requires: tuple[str, ...]) -> Entry:
    return dataclasses.replace(
        entry,
        variants=tuple(
            dataclasses.replace(v, requires=requires.get(v.name, ())) for v in entry.variants
        ),
    )


def records_of(tmp_path: Path) -> dict[str, dict[str, object]]:
    lines = (tmp_path / "records" / "m.jsonl").read_text().splitlines()
    return {f"{r['variant']}@{r['cell']}": r for r in map(json.loads, lines)}


def test_version_advice_runs_in_an_environment_derived_from_the_cell_it_answers_for(
    tmp_path: Path, tiny_entry: Entry
) -> None:
    entry = _advised(tiny_entry, ok=("six<2",))
    state, out = state_for(tmp_path, entry, [GOOD], "process")
    backend = state.backend = Backend()
    assert run_matrix(state) is state
    derived = GOOD.with_requires(("six<2",), lightning=False)
    assert backend.asked == [GOOD.id, derived.id]  # its own environment, built once
    records = records_of(tmp_path)
    ok = records[f"ok@{GOOD.id}-cpu-fp32"]
    # the cell it answers for, and the environment it ran in with what was really installed
    assert (ok["outcome"], ok["cell"], ok["env"]) == ("ok", f"{GOOD.id}-cpu-fp32", GOOD.id)
    assert ok["ran_in"] == derived.id and ok["requires"] == {"six": "six<2"}
    assert ok["versions"]["six"] == "1.16.0"
    documented = records[f"documented@{GOOD.id}-cpu-fp32"]
    assert (documented["ran_in"], documented["requires"]) == ("", {})
    assert f"environment {derived.id}: 1 jobs\n" in out.getvalue()


def test_advice_that_cannot_be_installed_is_unsupported_with_the_resolvers_words(
    tmp_path: Path, tiny_entry: Entry
) -> None:
    entry = _advised(tiny_entry, ok=("six>=99",), documented=("six==1.0.0.post7",))
    state, _ = state_for(tmp_path, entry, [GOOD], "process")
    state.backend = Backend()
    assert run_matrix(state) is state
    records = records_of(tmp_path)
    ok = records[f"ok@{GOOD.id}-cpu-fp32"]
    assert ok["outcome"] == "unsupported"
    assert "No solution found when resolving dependencies" in ok["reason"]
    assert ok["reason"].startswith("the variant's requirements six>=99 cannot be installed")
    assert ok["ran_in"] == GOOD.with_requires(("six>=99",), lightning=False).id
    # a build that failed for another reason (the network, a full disk) measured nothing
    for device in ("cpu", "cuda"):
        failed = records[f"documented@{GOOD.id}-{device}-fp32"]
        assert failed["outcome"] == "env_failed" and failed["requires"] == {
            "six": "six==1.0.0.post7"
        }


def test_a_run_says_what_committed_files_its_report_rewrote(tmp_path) -> None:
    """Issue 35: a newcomer's first run rewrote 108 committed files and said nothing. Its
    last lines now name the record file and the committed pages rewritten, and how to put
    them back."""
    import io
    import subprocess
    from types import SimpleNamespace

    from rich.console import Console

    from harness.execute.steps import _committed_changes, _say_what_changed

    def git(*args: str) -> None:
        subprocess.run(["git", "-C", str(tmp_path), *args], check=True, capture_output=True)

    git("init", "-q")
    page = tmp_path / "results" / "compat" / "x.md"
    page.parent.mkdir(parents=True)
    page.write_text("as committed\n")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x")
    out = io.StringIO()
    state = SimpleNamespace(
        console=Console(file=out, width=300),
        store=SimpleNamespace(path=tmp_path / "results" / "records" / "box.jsonl"),
        config=SimpleNamespace(repo=tmp_path),
    )
    before = _committed_changes(tmp_path)
    _say_what_changed(state, before)
    assert "none rewritten" in out.getvalue()
    page.write_text("re-rendered\n")  # what the run's report does
    out.truncate(0)
    _say_what_changed(state, before)
    said = out.getvalue()
    assert "records: " in said and "box.jsonl" in said
    assert "committed pages: 1 rewritten" in said and "git checkout -- results" in said
