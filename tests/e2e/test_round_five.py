"""Issue 58, reliability round five: each test replays one attack of the round on a copy of
the small test project (tests/resources/reliability, six standing in for torch, plus a
deadends.dev record kept beside an entry made by `new`) through the real CLI, and asserts the
refusal (a named error, exit 2, nothing changed) or the bound. docs/reliability.md lists them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.test_read_only_results import read_only
from tests.e2e.test_reliability import SCENARIOS, Project

RECORD = SCENARIOS / "deadends" / "kb-record.json"
KEPT = "deadends/python/attributeerror-tensor-no-grad/torch2.0-linux"


def cli(
    project: Project, *args: str, stdin: str | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "harness", "--repo", str(project.root), *args],
        cwd=project.root,
        env=project.env(),
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def tree(root: Path) -> dict[str, bytes | str]:
    """Every path under ``root`` with its bytes (a link: its target): what "nothing changed"
    compares."""
    found: dict[str, bytes | str] = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if "__pycache__" in rel or rel.startswith(("tmp/", "envs/")):
            continue
        if path.is_symlink():
            found[rel] = "-> " + os.readlink(path)
        elif path.is_file():
            found[rel] = path.read_bytes()
        else:
            found[rel] = "folder"
    return found


def refused(done: subprocess.CompletedProcess[str], *words: str) -> str:
    """The named error of a refusal: exit 2, no traceback, each of ``words`` in it."""
    out = done.stdout + done.stderr
    assert done.returncode == 2, out
    assert "Traceback" not in out, out
    for w in words:
        assert w in out, out
    return out


def record(**change: object) -> dict:
    data = json.loads(RECORD.read_text(encoding="utf-8"))
    for dotted, value in change.items():
        at = data
        *parts, last = dotted.split("__")
        for p in parts:
            at = at[p]
        at[last] = value
    return data


@pytest.fixture
def project(tmp_path: Path) -> Project:
    return Project(tmp_path / "proj")


@pytest.fixture
def kept(project: Project) -> Project:
    """The project with a deadends.dev record kept beside an entry, as `new` makes it."""
    kb_path = "data/canons/python/attributeerror-tensor-no-grad/torch2.0-linux.json"
    done = cli(project, "new", "--kb-path", kb_path, "--kb-commit", "0" * 40, str(RECORD))
    assert done.returncode == 0, done.stdout + done.stderr
    return project


# -- 1. nothing written outside its place -----------------------------------------------


@pytest.mark.parametrize(
    "domain", ["../../../../../X", "/abs", "a/b", "..", ".hidden", "x\x1b[31m"]
)
def test_new_refuses_a_record_whose_domain_is_not_a_plain_name(
    project: Project, tmp_path: Path, domain: str
) -> None:
    evil = tmp_path / "evil.json"
    evil.write_text(json.dumps(record(error__domain=domain)))
    before = tree(project.root)
    refused(cli(project, "new", str(evil)), "'error.domain'", "is not a plain name")
    assert tree(project.root) == before
    assert not list(tmp_path.rglob("X*"))


@pytest.mark.parametrize("kb_path", ["../../../evil.json", "/tmp/evil.json", "data/../x.json"])
def test_new_refuses_a_kb_path_outside_the_knowledge_base(project: Project, kb_path: str) -> None:
    before = tree(project.root)
    done = cli(project, "new", "--kb-path", kb_path, "--kb-commit", "0" * 40, str(RECORD))
    refused(done, "origin.path")
    assert tree(project.root) == before


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("path", "../../../../../../evil.json"),
        ("path", "/tmp/evil.json"),
        ("domain", "../../X"),
        ("id", "../../x"),
    ],
)
def test_the_loader_refuses_an_origin_part_that_leaves_its_folder(
    kept: Project, tmp_path: Path, key: str, value: str
) -> None:
    entry = kept.root / "repros" / KEPT / "entry.yaml"
    lines = entry.read_text().splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if line.startswith(f"  {key}:"))
    lines[at] = f"  {key}: {json.dumps(value)}\n"
    entry.write_text("".join(lines))
    before = tree(kept.root)
    out_dir = tmp_path / "out"
    for argv in (("corrections",), ("corrections", "-o", str(out_dir)), ("check",), ("list",)):
        refused(cli(kept, *argv), f"entry.yaml:{at + 1}: origin.{key}")
    assert tree(kept.root) == before
    assert not out_dir.exists()
    assert not (tmp_path / "evil.json").exists()


def test_corrections_writes_every_file_through_one_containment_check(tmp_path: Path) -> None:
    """The class, not the example: whatever a plan holds, the writer builds each path from
    plain parts under its folder (harness/paths.under)."""
    from harness.paths import OutsideProject, under

    top = tmp_path / "out"
    top.mkdir()
    (tmp_path / "elsewhere").mkdir()
    (top / "linked").symlink_to(tmp_path / "elsewhere")
    for rel in ("../x.md", "/etc/x", "a/../../x", "a//b", "linked/x.md", "a\\..\\x", ""):
        with pytest.raises(OutsideProject):
            under(top, rel)
    assert under(top, "signatures/data/canons/a.json") == top / "signatures/data/canons/a.json"


@pytest.mark.parametrize("where", ["a-file", "a-link", "results-records", "repros"])
def test_corrections_output_is_refused_where_export_refuses(
    kept: Project, tmp_path: Path, where: str
) -> None:
    target = {
        "a-file": tmp_path / "afile",
        "a-link": tmp_path / "link",
        "results-records": kept.root / "results" / "records",
        "repros": kept.root / "repros" / "out",
    }[where]
    (tmp_path / "afile").write_text("mine\n")
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    (kept.root / "results" / "records").mkdir(parents=True)
    before = tree(kept.root), tree(tmp_path / "real"), (tmp_path / "afile").read_bytes()
    out = refused(cli(kept, "corrections", "-o", str(target)), str(target))
    assert after_is(before, kept, tmp_path), out


def after_is(before: tuple, kept: Project, tmp_path: Path) -> bool:
    return before == (tree(kept.root), tree(tmp_path / "real"), (tmp_path / "afile").read_bytes())


def test_corrections_into_a_read_only_folder_is_a_named_error(
    kept: Project, tmp_path: Path
) -> None:
    out_dir = tmp_path / "ro"
    out_dir.mkdir()
    argv = [sys.executable, "-m", "harness", "--repo", str(kept.root), "corrections"]
    done = read_only(kept, out_dir, *argv, "-o", str(out_dir))
    refused(done, str(out_dir))
    assert not list(out_dir.iterdir())
