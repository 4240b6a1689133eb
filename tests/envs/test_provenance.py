"""CUDA provenance per record, from the environment's probe over the machine's; the default
machine name, which no committed record file can share."""

from __future__ import annotations

import functools
import json
import re
import socket
import subprocess
from pathlib import Path

import pytest

from harness.envs.provenance import (
    MACHINE_ID_FILE,
    cuda_provenance,
    default_machine_name,
    machine_id,
    machine_provenance,
)
from harness.outcomes import Outcome
from harness.store.jsonl import Store, machine_name
from harness.store.records import Record
from tests.paths import committed_records

MACHINE = {"host": "box", "gpu": "none", "driver": "none"}
RECORD = Record(
    entry="demo/err",
    variant="baseline",
    kind="baseline",
    cell="py3.11-torch2.5.1-lightning2.5.6-cpu-fp32",
    env="py3.11-torch2.5.1-lightning2.5.6",
    device="cpu",
    precision="fp32",
    trial=0,
    outcome=Outcome.REPRODUCED,
)


def test_gpu_in_use_records_cuda_build_capability_and_name() -> None:
    probe = {
        "torch_cuda": "12.1",
        "cuda_available": "True",
        "gpu": "NVIDIA H200",
        "compute_capability": "9.0",
        "cuda_driver_api": "12.4",
    }
    machine = {"host": "box", "gpu": "NVIDIA H200", "driver": "550.54.15"}
    out = cuda_provenance(machine, probe)
    assert out == {
        **machine,
        "cuda": "12.1",
        "compute_capability": "9.0",
        "cuda_driver_api": "12.4",
    }
    # no nvidia-smi on the machine: the GPU's name comes from torch
    assert cuda_provenance(MACHINE, probe)["gpu"] == "NVIDIA H200"


def test_no_usable_gpu_records_none_not_the_wheels_cuda_build() -> None:
    out = cuda_provenance(MACHINE, {"torch_cuda": "12.1", "cuda_available": "False"})
    assert out["cuda"] == "none" and out["compute_capability"] == "none"
    assert out["gpu"] == "none"
    assert cuda_provenance(MACHINE, {})["cuda"] == "none"  # a stand-in: no torch at all


def test_default_machine_name_never_collides_with_a_committed_file(tmp_path: Path) -> None:
    """A fresh clone on a host named like the committer's ("vm") writes a file of its own:
    the default name is the host name and the start of this results folder's machine id;
    an explicit --machine name is kept as it is."""
    host = machine_name(socket.gethostname())
    clone, other = tmp_path / "clone" / "records", tmp_path / "other" / "records"
    name = default_machine_name(clone)
    assert re.fullmatch(re.escape(socket.gethostname()) + r"-[0-9a-f]{8}", name)
    assert name == default_machine_name(clone)  # stable for one results folder
    assert name != default_machine_name(other)  # another checkout: another name
    assert name.endswith(machine_id(clone)[:8])
    # the committed file of a host with the same name is left alone
    clone.mkdir(parents=True, exist_ok=True)
    committed = clone / f"{host}.jsonl"
    committed.write_text("")
    store = Store(clone)
    store.append(RECORD)
    assert committed.read_text() == ""
    assert store.path == clone / f"{machine_name(name)}.jsonl" and store.path.is_file()
    [stored] = Store(clone).load().records
    assert (stored.machine, stored.machine_id) == (machine_name(name), machine_id(clone))
    # explicit names stay as they are
    explicit = Store(clone, machine=host)
    assert explicit.path == committed


def test_a_store_that_only_reads_makes_no_machine_id(tmp_path: Path) -> None:
    records = tmp_path / "records"
    records.mkdir()
    assert Store(records).load().records == []
    assert not (records / MACHINE_ID_FILE).exists()


def _git(repo: Path, *args: str) -> str:
    """What ``git args`` prints in ``repo`` (stripped)."""
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=repo,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


def test_the_revision_is_dirty_for_changed_code_not_for_what_the_harness_writes(
    tmp_path: Path,
) -> None:
    """A second run before a commit runs the commit's code: the records the first appended,
    the report's outputs and the README's findings leave the revision clean; a changed
    reproducer, harness module or matrix makes it ``-dirty``."""
    repo = tmp_path / "project"
    written = ("results/records/vm.jsonl", "results/index.html", "README.md")
    code = ("repros/e/repro.py", "harness/x.py", "matrix.yaml")
    for name in written + code:
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text("1\n")
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "x")
    rev = machine_provenance(repo)["git_rev"]
    assert len(rev) == 12 and not rev.endswith("-dirty")
    for name in written:
        (repo / name).write_text("2\n")
    assert machine_provenance(repo)["git_rev"] == rev
    # asked from a subfolder, the same paths are left out (they are the project's top's)
    assert machine_provenance(repo / "repros")["git_rev"] == rev
    for name in code:
        (repo / name).write_text("2\n")
        assert machine_provenance(repo)["git_rev"] == rev + "-dirty", name
        # from a subfolder too: the whole checkout's code counts, not the subfolder's
        assert machine_provenance(repo / "results")["git_rev"] == rev + "-dirty", name
        _git(repo, "checkout", "-q", "--", name)
        assert machine_provenance(repo)["git_rev"] == rev


@functools.cache
def _committed_revisions() -> dict[tuple[str, str], int]:
    """How many committed records each (record file, revision) has: every committed line
    read once for the tests below ("" for a record without a revision)."""
    counts: dict[tuple[str, str], int] = {}
    for path in sorted(committed_records().glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            key = (path.name, json.loads(line).get("provenance", {}).get("git_rev", ""))
            counts[key] = counts.get(key, 0) + 1
    return counts


def test_no_committed_record_was_measured_by_uncommitted_code() -> None:
    """The brief's standard: every committed cell comes from code that is committed, so no
    committed record names a ``-dirty`` revision (3,655 did until they were re-measured)."""
    counts = _committed_revisions()
    lines = sum(counts.values())
    dirty: dict[str, int] = {}
    for (name, revision), n in counts.items():
        if revision.endswith("-dirty"):
            dirty[name] = dirty.get(name, 0) + n
    assert lines > 10_000, (
        f"the committed store at {committed_records()} holds only {lines} records"
    )
    assert not dirty, f"records measured by a -dirty tree, per file: {dirty}"


def revisions_not_in(repo: Path, revisions: set[str]) -> set[str]:
    """Those of ``revisions`` (abbreviated or whole) that name no commit of ``repo``."""
    ordered = sorted(revisions)
    out = subprocess.run(
        ["git", "-C", str(repo), "cat-file", "--batch-check"],
        input="".join(f"{r}^{{commit}}\n" for r in ordered),
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    return {r for r, line in zip(ordered, out, strict=True) if line.split()[1:2] != ["commit"]}


def test_a_revision_outside_the_history_is_found(tmp_path: Path) -> None:
    _git(tmp_path, "init", "-q")
    (tmp_path / "f").write_text("x", encoding="utf-8")
    _git(tmp_path, "add", "f")
    _git(tmp_path, "commit", "-qm", "one")
    head = _git(tmp_path, "rev-parse", "--short=12", "HEAD")
    assert revisions_not_in(tmp_path, {head, "0123456789ab"}) == {"0123456789ab"}


def test_every_committed_record_was_measured_by_a_revision_in_the_history() -> None:
    """Every committed record names a commit of the history: the code that measured it can
    be checked out (the brief: every cell measured by code that is committed). Records of
    16 revisions lost to squashed worktree branches were re-measured at 8f381be
    (docs/evidence/provenance-remeasure.md)."""
    here = Path(__file__).parent
    try:
        shallow = _git(here, "rev-parse", "--is-shallow-repository") == "true"
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout: no history to find the records' revisions in")
    if shallow:
        pytest.skip("a shallow clone does not hold the history the records name")
    per_revision: dict[str, int] = {}
    for (_, revision), n in _committed_revisions().items():
        if revision:
            per_revision[revision] = per_revision.get(revision, 0) + n
    repo = Path(_git(here, "rev-parse", "--show-toplevel"))
    missing = revisions_not_in(repo, set(per_revision))
    assert not missing, "records of revisions not in the history: " + ", ".join(
        f"{r} ({per_revision[r]} records)" for r in sorted(missing)
    )
