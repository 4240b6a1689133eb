"""harness/paths.py: where the harness may write and what it may remove (issue 25)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness.paths import OutsideProject, check_output, inside, remove_files, safe_folder


def test_inside_resolves_links(tmp_path: Path) -> None:
    (tmp_path / "project" / "results").mkdir(parents=True)
    (tmp_path / "outside").mkdir()
    (tmp_path / "project" / "out").symlink_to(tmp_path / "outside")
    assert inside(tmp_path / "project", tmp_path / "project" / "results" / "x.json")
    assert inside(tmp_path / "project", tmp_path / "project" / "new" / "deeper")
    assert not inside(tmp_path / "project", tmp_path / "project" / "out" / "x.json")
    assert not inside(tmp_path / "project", tmp_path / "project" / ".." / "outside")


def test_safe_folder_refuses_a_link_anywhere_below_the_root(tmp_path: Path) -> None:
    root = tmp_path / "results"
    (root / ".cache").mkdir(parents=True)
    assert safe_folder(root, root / ".cache" / "render") == root / ".cache" / "render"
    (root / ".cache" / "render").symlink_to(tmp_path)
    with pytest.raises(OutsideProject, match=r"render: is a link \(to "):
        safe_folder(root, root / ".cache" / "render")
    with pytest.raises(OutsideProject, match="lies outside"):
        safe_folder(root, tmp_path / "elsewhere")
    (root / "file").write_text("")
    with pytest.raises(OutsideProject, match="is not a folder"):
        safe_folder(root, root / "file" / "x")


def test_remove_files_never_follows_a_link(tmp_path: Path) -> None:
    target = tmp_path / "precious"
    target.write_text("keep me")
    folder = tmp_path / "cache"
    folder.mkdir()
    (folder / "a.json").write_text("")
    (folder / "link.json").symlink_to(target)
    (folder / "sub").mkdir()
    assert remove_files(folder, lambda entry: True) == 2
    assert [p.name for p in folder.iterdir()] == ["sub"] and target.read_text() == "keep me"
    (tmp_path / "linked").symlink_to(folder)
    with pytest.raises(OSError):
        remove_files(tmp_path / "linked", lambda entry: True)


def test_check_output_names_what_to_do_instead(tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / "results" / "records").mkdir(parents=True)
    (project / "repros").mkdir()
    (tmp_path / "existing.py").write_text("")
    (tmp_path / "link.py").symlink_to(tmp_path / "existing.py")
    (project / "into-results").symlink_to(project / "results")
    os.mkfifo(tmp_path / "fifo")
    cases = {
        project / "results" / "records" / "vm.jsonl": "inside the project's results/",
        project / "repros" / "x.py": "inside the project's repros/",
        project / "into-results" / "x.py": "inside the project's results/",
        tmp_path / "link.py": "is a link (to ",
        tmp_path: "is a folder; name a file in it",
        tmp_path / "missing" / "x.py": "no such folder",
        tmp_path / "existing.py" / "x.py": "is not a folder",
        tmp_path / "fifo": "is not a regular file",
        tmp_path / "existing.py": "exists; pass --force to replace it",
    }
    for path, expected in cases.items():
        with pytest.raises(OutsideProject) as caught:
            check_output(path, project)
        assert expected in str(caught.value), path
    assert check_output(tmp_path / "existing.py", project, force=True) == tmp_path / "existing.py"
    assert check_output(tmp_path / "new.py", project) == tmp_path / "new.py"
