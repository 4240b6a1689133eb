"""New releases on the package index -> the rows matrix.yaml's rules give them: asked of a
table standing in for the index (uv's own answer is tested once, marked slow), written into
a copy of the committed matrix.yaml and loaded back."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from harness.ci.releases import UvIndex, add_rows, describe_new_releases, find_new_releases
from harness.spec.matrix import load_matrix
from tests.paths import REPO

# what the index had on the day torch 2.15.0 was the newest (2.14.0 and 2.14.1: one line)
TORCH = ["2.12.1", "2.13.0", "2.14.0", "2.14.1", "2.15.0"]
LIGHTNING = ["2.5.6", "2.6.0", "2.6.6"]


class TableIndex:
    """The index as a table: releases per package, the Pythons each torch has wheels for,
    and the (torch, lightning) pairs that do not install together."""

    def __init__(
        self,
        releases: Mapping[str, Sequence[str]],
        pythons: Mapping[str, Sequence[str]] | None = None,
        clashes: Sequence[tuple[str, str]] = (),
    ) -> None:
        self.releases = releases
        self.pythons = pythons or {}
        self.clashes = set(clashes)
        self.asked: list[str] = []

    def newest(self, requirements: Sequence[str], python: str) -> dict[str, str] | None:
        self.asked.append(" ".join(requirements))
        found: dict[str, str] = {}
        for text in requirements:
            req = Requirement(text)
            ok = [
                v
                for v in self.releases[req.name]
                if v in req.specifier and python in self.pythons.get(v, [python])
            ]
            if not ok:
                return None
            found[req.name] = max(ok, key=Version)
        if (found.get("torch"), found.get("lightning")) in self.clashes:
            return None
        return found


def _matrix_copy(tmp_path: Path) -> Path:
    path = tmp_path / "matrix.yaml"
    shutil.copy(REPO / "matrix.yaml", path)
    return path


def _up_to(releases: Sequence[str], newest: str) -> list[str]:
    return [v for v in releases if Version(v) <= Version(newest)]


def _before_2_14(tmp_path: Path) -> Path:
    """The committed matrix.yaml without the rows plan --new-releases added (torch > 2.13)."""
    path = _matrix_copy(tmp_path)
    matrix = load_matrix(path)
    lines = path.read_text().splitlines(keepends=True)
    rows = [r for r in matrix.rows if Version(r.torch) > Version("2.13.0")]
    if rows:
        first = min(r.line or 0 for r in rows) - 1
        last = max(r.line or 0 for r in rows)
        while last < len(lines) and lines[last].startswith("    "):
            last += 1
        del lines[first:last]
        path.write_text("".join(lines))
    return path


def test_the_index_two_lines_ahead_gives_one_row_per_new_line_with_its_reasons(
    tmp_path: Path,
) -> None:
    path = _before_2_14(tmp_path)
    index = TableIndex({"torch": TORCH, "lightning": LIGHTNING})
    found = find_new_releases(load_matrix(path), index)
    assert (found.matrix_torch, found.newest_torch) == ("2.13.0", "2.15.0")
    assert [r.torch for r in found.rows] == ["2.14.1", "2.15.0"]  # 2.14.0: not the newest patch
    for row in found.rows:
        assert row.values("python") == ("3.11",)
        assert row.values("lightning") == ("2.6.6",)
        assert row.values("pins") == ("setuptools",)
        assert "newer than every line's last tested torch (2.10)" in row.why
    text = "\n".join(describe_new_releases(found))
    assert "would add: torch 2.14.1" in text and "+ lightning 2.6.6" in text


def test_rows_written_load_keep_every_other_line_and_leave_nothing_new(tmp_path: Path) -> None:
    path = _before_2_14(tmp_path)
    before = path.read_text()
    index = TableIndex({"torch": TORCH, "lightning": LIGHTNING})
    matrix = load_matrix(path)
    added = add_rows(path, matrix, find_new_releases(matrix, index).rows)
    assert added == ["2.14.1", "2.15.0"]
    after = path.read_text()
    assert [line for line in after.splitlines() if line not in before.splitlines()][0] == (
        '  - torch: "2.14.1"'
    )
    assert set(before.splitlines()) <= set(after.splitlines())  # no comment or row lost
    again = load_matrix(path)
    assert {r.torch for r in again.rows} >= {"2.14.1", "2.15.0"}
    assert find_new_releases(again, index).rows == ()
    cells = again.expand("cpu").cells
    assert any(c.env.id == "py3.11-torch2.15.0-lightning2.6.6" for c in cells)


def test_the_committed_matrix_has_what_the_index_had(tmp_path: Path) -> None:
    index = TableIndex({"torch": TORCH, "lightning": LIGHTNING})
    found = find_new_releases(load_matrix(REPO / "matrix.yaml"), index)
    assert found.matrix_torch == "2.15.0" and found.rows == ()


def _small_matrix(tmp_path: Path, torch: str, python: str, lightning: str) -> Path:
    path = tmp_path / "matrix.yaml"
    path.write_text(
        "version: 1\n"
        "devices: [cpu]\n"
        "precisions: [fp32]\n"
        "environments:\n"
        f'  - torch: "{torch}"\n'
        f"    python: {python}\n"
        f"    lightning: {lightning}\n"
        "profiles:\n"
        '  all: {description: "every cell"}\n'
        "default_profile: all\n"
    )
    return path


def test_a_python_without_wheels_and_a_lightning_that_does_not_install_are_dropped_with_why(
    tmp_path: Path,
) -> None:
    path = _small_matrix(tmp_path, "2.13.0", '["3.10", "3.11"]', '["2.6.6"]')
    index = TableIndex(
        {"torch": _up_to(TORCH, "2.14.1"), "lightning": LIGHTNING},
        pythons={"2.14.1": ["3.11"]},
    )
    found = find_new_releases(load_matrix(path), index)
    (row,) = found.rows
    assert row.runnable and row.values("python") == ("3.11",)
    assert "- python 3.10: the index has no torch 2.14.1 for it" in describe_new_releases(found)[2]

    clash = TableIndex(
        {"torch": _up_to(TORCH, "2.14.1"), "lightning": LIGHTNING}, clashes=[("2.14.1", "2.6.6")]
    )
    (row,) = find_new_releases(load_matrix(path), clash).rows
    assert row.values("lightning") == () and not row.runnable
    assert any("uv finds no install" in c.why for c in row.choices if not c.kept)
    assert add_rows(path, load_matrix(path), [row]) == []  # nothing runnable: file unchanged


def test_a_line_whose_newest_patch_lacks_the_python_takes_the_newest_that_has_it(
    tmp_path: Path,
) -> None:
    path = _before_2_14(tmp_path)
    index = TableIndex(
        {"torch": _up_to(TORCH, "2.14.1"), "lightning": LIGHTNING},
        pythons={"2.14.1": ["3.12"]},
    )
    (row,) = find_new_releases(load_matrix(path), index).rows
    assert row.torch == "2.14.0" and row.values("python") == ("3.11",)


def test_a_torch_inside_lightning_ranges_gets_every_line_that_admits_it(tmp_path: Path) -> None:
    path = _small_matrix(tmp_path, "2.5.1", '["3.11"]', '["2.5.6"]')
    index = TableIndex({"torch": ["2.5.1", "2.6.0"], "lightning": ["2.4.0", "2.5.6", "2.6.6"]})
    (row,) = find_new_releases(load_matrix(path), index).rows
    assert row.torch == "2.6.0"
    assert row.values("lightning") == ("2.4.0", "2.5.6", "2.6.6")
    assert row.values("pins") == ()
    assert add_rows(path, load_matrix(path), [row]) == ["2.6.0"]
    assert load_matrix(path).rows[-1].lightning == ("2.4.0", "2.5.6", "2.6.6")


def test_a_newer_patch_of_a_followed_line_and_a_newer_lightning_are_said_not_added(
    tmp_path: Path,
) -> None:
    index = TableIndex(
        {"torch": [*TORCH, "2.15.1"], "lightning": [*LIGHTNING, "2.6.7"]},
    )
    found = find_new_releases(load_matrix(REPO / "matrix.yaml"), index)
    assert found.rows == ()
    notes = "\n".join(found.notes)
    assert "torch 2.15.1 is a newer patch of line 2.15" in notes
    assert "lightning 2.6.7 is newer than the matrix's newest (2.6.6)" in notes


@pytest.mark.slow
def test_uv_answers_from_the_real_index() -> None:
    index = UvIndex()
    found = index.newest(["torch==2.4.*"], "3.11")
    assert found == {"torch": "2.4.1"}
    assert index.newest(["torch>99"], "3.11") is None


def test_write_without_new_releases_is_refused() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "harness", "--repo", str(REPO), "plan", "--write"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 2 and "--write adds the rows --new-releases finds" in out.stdout
