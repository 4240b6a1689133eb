"""A report with nothing to do (harness/report/uptodate.py): when nothing the last report read
or wrote has changed, the report says so without reading the store; one file added,
removed, appended to, edited or even rewritten to the same bytes, or another harness, and
it reads and renders in full again."""

from __future__ import annotations

import io
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from rich.console import Console

from harness.config import Config
from harness.report import outputs, uptodate
from harness.report.pipeline import render_reports
from tests.paths import REPO, committed_records

SEED = "pytorch/grad-scale-unscale-error"
OTHER = "lightning/gradient-clipping-optimizer-handles-unscaling"
NOTHING_CHANGED = "nothing the report reads or writes has changed"


@pytest.fixture(scope="module")
def committed_lines() -> dict[str, list[str]]:
    """The committed records of the two seed entries (the committed tree, never results/),
    up to 300 each, in the order of the record files' names and their lines."""
    found: dict[str, list[str]] = {SEED: [], OTHER: []}
    for path in sorted(committed_records().glob("*.jsonl")):
        lines = path.read_text(encoding="utf-8").splitlines()
        for line in lines:
            eid = json.loads(line)["entry"]
            if eid in found and len(found[eid]) < 300:
                found[eid].append(line)
    assert all(len(v) > 100 for v in found.values())
    return found


@pytest.fixture
def seed_lines(committed_lines: dict[str, list[str]]) -> list[str]:
    return committed_lines[SEED]


@pytest.fixture
def project(tmp_path: Path, seed_lines: list[str]) -> Path:
    root = tmp_path / "proj"
    shutil.copytree(
        REPO / "repros" / SEED,
        root / "repros" / SEED,
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    shutil.copy(REPO / "repros" / "reprokit.py", root / "repros" / "reprokit.py")
    records = root / "results" / "records"
    records.mkdir(parents=True)
    (records / "vm.jsonl").write_text("\n".join(seed_lines[:-10]) + "\n", encoding="utf-8")
    (root / "spare.jsonl").write_text("\n".join(seed_lines[-10:]) + "\n", encoding="utf-8")
    return root


def two_entries(root: Path, committed_lines: dict[str, list[str]]) -> Path:
    """A project of both seed entries whose store holds all their records but SEED's last 20."""
    for eid in (SEED, OTHER):
        shutil.copytree(
            REPO / "repros" / eid,
            root / "repros" / eid,
            ignore=shutil.ignore_patterns("__pycache__"),
        )
    shutil.copy(REPO / "repros" / "reprokit.py", root / "repros" / "reprokit.py")
    (root / "results" / "records").mkdir(parents=True)
    lines = committed_lines[SEED][:-20] + committed_lines[OTHER]
    (root / "results" / "records" / "vm.jsonl").write_text(
        "\n".join(lines) + "\n", encoding="utf-8"
    )
    return root


def report(root: Path, **kwargs: object) -> tuple[int, str, bool]:
    """(exit status, what it printed, whether it rendered)."""
    out = io.StringIO()
    rendered = []
    real = outputs.render_all

    def spy(*args: object, **kw: object) -> object:
        rendered.append(True)
        return real(*args, **kw)

    outputs.render_all = spy  # render_reports imports it when it runs
    try:
        code = render_reports(Config(repo=root), Console(file=out, width=300), **kwargs)
    finally:
        outputs.render_all = real
    return code, out.getvalue(), bool(rendered)


def stamps(root: Path) -> dict[str, tuple[int, int]]:
    """Every output's (mtime_ns, inode): a write moves one of them."""
    return {
        p.relative_to(root).as_posix(): (p.stat().st_mtime_ns, p.stat().st_ino)
        for p in sorted((root / "results").rglob("*"))
        if p.is_file() and ".cache" not in p.parts and "records" not in p.parts
    }


def test_a_report_with_nothing_changed_renders_and_writes_nothing(project):
    code, said, rendered = report(project)
    assert (code, rendered) == (0, True) and NOTHING_CHANGED not in said
    first_line = said.strip().splitlines()[-1]
    before = stamps(project)
    assert len(before) >= 4  # the entry's page, PNG, index.html, compat.json, ...

    code, said, rendered = report(project)
    assert (code, rendered) == (0, False)
    assert NOTHING_CHANGED in said
    # the same summary a full report of unchanged outputs prints
    assert said.splitlines()[0] == first_line.replace(
        first_line[first_line.index("(") : first_line.index(")") + 1], "(0 rewritten)"
    ).replace(first_line.split(", ")[1].split(";")[0], "0 entry documents updated")
    assert stamps(project) == before


def _append_a_record(root: Path) -> None:
    spare = (root / "spare.jsonl").read_text(encoding="utf-8").splitlines()[0]
    with open(root / "results" / "records" / "vm.jsonl", "a", encoding="utf-8") as f:
        f.write(spare + "\n")


def _new_record_file(root: Path) -> None:
    shutil.copy(root / "spare.jsonl", root / "results" / "records" / "later.jsonl")


def _edit_the_entry(root: Path) -> None:
    path = root / "repros" / SEED / "entry.yaml"
    path.write_text(path.read_text(encoding="utf-8") + "\n# a comment\n", encoding="utf-8")


def _same_bytes_again(root: Path) -> None:
    path = root / "repros" / SEED / "entry.yaml"
    data = path.read_bytes()
    path.write_bytes(data)
    # even with the old modification time put back, the change time moved
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns - 10**9))


def _new_file_in_repros(root: Path) -> None:
    (root / "repros" / SEED / "notes.txt").write_text("new", encoding="utf-8")


def _an_output_removed(root: Path) -> None:
    (root / "results" / "index.html").unlink()


def _an_output_edited(root: Path) -> None:
    path = root / "results" / "compat.json"
    path.write_bytes(path.read_bytes().replace(b"grad", b"GRAD"))


def _a_readme_created(root: Path) -> None:
    (root / "README.md").write_text("# A project\n", encoding="utf-8")


def _a_nightly_snapshot(root: Path) -> None:
    (root / "results" / "nightly").mkdir()
    (root / "results" / "nightly" / "notes.txt").write_text("x", encoding="utf-8")


def _the_state_damaged(root: Path) -> None:
    (root / "results" / uptodate.STATE_FILE).write_text("{", encoding="utf-8")


def _the_state_removed(root: Path) -> None:
    (root / "results" / uptodate.STATE_FILE).unlink()


CHANGES: list[Callable[[Path], None]] = [
    _append_a_record,
    _new_record_file,
    _edit_the_entry,
    _same_bytes_again,
    _new_file_in_repros,
    _an_output_removed,
    _an_output_edited,
    _a_readme_created,
    _a_nightly_snapshot,
    _the_state_damaged,
    _the_state_removed,
]


@pytest.mark.parametrize("change", CHANGES, ids=lambda f: f.__name__.strip("_"))
def test_any_change_reads_and_renders_in_full(project, change):
    assert report(project)[0] == 0
    change(project)
    code, said, rendered = report(project)
    assert rendered and NOTHING_CHANGED not in said, said
    assert (project / "results" / "index.html").is_file()  # put back where removed
    # and the state that report kept vouches for what it wrote
    code, said, rendered = report(project)
    assert (code, rendered) == (0, False), said


def test_another_harness_reads_and_renders_in_full(project, monkeypatch):
    assert report(project)[0] == 0
    monkeypatch.setattr(uptodate, "code_digest", lambda: "another harness")
    assert report(project)[2] is True


@pytest.mark.parametrize(
    "kwargs", [{"check": True}, {"cache": False}], ids=["--check", "--no-cache"]
)
def test_check_and_no_cache_always_read_everything(project, kwargs):
    assert report(project)[0] == 0
    code, said, rendered = report(project, **kwargs)
    assert code == 0 and rendered and NOTHING_CHANGED not in said


def test_a_state_kept_through_a_link_is_never_read_or_written(project, tmp_path):
    assert report(project)[0] == 0
    cache = project / "results" / ".cache"
    elsewhere = tmp_path / "elsewhere"
    shutil.move(cache, elsewhere)
    cache.symlink_to(elsewhere)
    state = (elsewhere / "report-state.json").read_bytes()
    code, said, rendered = report(project)
    assert rendered and NOTHING_CHANGED not in said
    assert (elsewhere / "report-state.json").read_bytes() == state


def test_a_report_after_an_append_reads_only_the_entries_appended_to(
    tmp_path, committed_lines, monkeypatch
):
    """The records appended since the last report name one entry: the report reads and
    renders that one (the other is taken from its basis and the cache), and writes what
    a report that reads and renders everything writes."""
    root = two_entries(tmp_path / "proj", committed_lines)
    store = root / "results" / "records" / "vm.jsonl"
    assert report(root)[0] == 0

    from harness.store import columnar

    loads = []
    real = columnar.load_latest

    def spy(*args, **kwargs):
        loads.append(real(*args, **kwargs))
        return loads[-1]

    monkeypatch.setattr(columnar, "load_latest", spy)
    with open(store, "a", encoding="utf-8") as f:
        f.write("\n".join(committed_lines[SEED][-20:]) + "\n")
    code, said, rendered = report(root)
    assert code == 0 and rendered
    assert [t.touched for t in loads] == [{SEED}]

    again = tmp_path / "again"
    shutil.copytree(root, again, ignore=shutil.ignore_patterns(".cache"))
    code, said_in_full, _ = report(again, cache=False)
    assert code == 0 and _outputs(again) == _outputs(root)
    assert said.split(" -> ")[0] == said_in_full.split(" -> ")[0]  # "report: N records"


def _outputs(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".cache" not in p.parts
    }
