"""Paths the harness writes or removes, checked before it acts: resolved (every link
followed) they must lie inside the project; a link in the way is refused with its path,
never followed for deletion (else a `report` unlinks files through a linked cache folder,
and `export -o` overwrites the committed records).

Checks, not locks: a process that swaps a folder for a link between the check and the
write is out of scope; deletion alone is race-free (``remove_files`` works relative to a
folder opened without following a link).
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable
from pathlib import Path

from harness.errors import HarnessError

__all__ = [
    "OutsideProject",
    "PART",
    "check_output",
    "check_output_folder",
    "inside",
    "part_problem",
    "relative_problem",
    "remove_files",
    "safe_folder",
    "under",
]

# one part of a path the harness builds from data (an id, a domain, a record's path in its
# knowledge base): letters, digits, "_", ".", "+", "-", never starting with "." (so never
# "." or ".."), no separator, no control character
PART = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]*")


class OutsideProject(HarnessError):
    """A path the harness will not write or remove: ``str()`` is "path: why" (the CLI
    prints it as an error, exit 2)."""

    def __init__(self, path: str | os.PathLike[str], why: str) -> None:
        super().__init__(path, None, why)
        self.why = why


def inside(root: str | os.PathLike[str], path: str | os.PathLike[str]) -> bool:
    """True when ``path``, with every link resolved (the parts that exist), lies in
    ``root`` (resolved too) or is ``root``."""
    top = os.path.realpath(root)
    return os.path.commonpath([top, os.path.realpath(path)]) == top


def part_problem(part: str) -> str | None:
    """Why ``part`` is not one plain part of a path (None: it is)."""
    if not isinstance(part, str) or not PART.fullmatch(part):
        return (
            f"{part!r} is not a plain name (letters, digits, '_', '.', '+', '-', not starting "
            "with '.')"
        )
    return None


def relative_problem(rel: str) -> str | None:
    """Why ``rel`` is not a relative path of plain parts joined by '/' (None: it is): never
    absolute, never '..' or '.', no empty part, no backslash (an entry's
    ``origin.path`` of ``../x`` made ``corrections -o`` write outside its folder)."""
    if not isinstance(rel, str) or not rel:
        return f"{rel!r} is not a relative path"
    if rel.startswith("/"):
        return f"{rel!r} is absolute; a path relative to its folder is allowed"
    for part in rel.split("/"):
        problem = part_problem(part)
        if problem is not None:
            return f"{rel!r}: {problem}"
    return None


def under(folder: str | os.PathLike[str], rel: str) -> Path:
    """``folder/rel`` after checking that ``rel`` is built of plain parts and that the result,
    every link resolved, stays under ``folder`` with no link on the way: the one check every
    path the harness builds from data passes before it is written. Raises OutsideProject."""
    problem = relative_problem(rel)
    if problem is not None:
        raise OutsideProject(Path(folder), f"will not write {problem}")
    target = Path(folder) / rel
    safe_folder(folder, target.parent)
    if os.path.islink(target):
        raise OutsideProject(
            target, f"{_link_text(target)}; the harness writes and deletes nothing through a link"
        )
    if not inside(folder, target):
        raise OutsideProject(target, f"lies outside {folder}")
    return target


def _not_a_link(target: Path, what: str) -> os.stat_result | None:
    """``target``'s own status (None where it does not exist); a link, or a status that
    cannot be read, raises OutsideProject naming it."""
    try:
        info = os.lstat(target)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise OutsideProject(target, f"cannot be read: {exc.strerror or exc}") from None
    if stat.S_ISLNK(info.st_mode):
        raise OutsideProject(target, f"{_link_text(target)}; name the {what} itself")
    return info


def check_output_folder(
    folder: str | os.PathLike[str],
    project: str | os.PathLike[str],
    *,
    allowed: tuple[str, ...] = (),
    protected: tuple[str, ...] = ("results", "repros"),
) -> Path:
    """Where a command may write a folder of files the user named (``corrections -o``): not
    a link, not a file, its parent a folder, nowhere inside the project's ``protected``
    folders except the ``allowed`` ones (relative to the project); a folder there must be
    writable. Raises OutsideProject saying what to do instead."""
    target = Path(folder)
    info = _not_a_link(target, "folder")
    if info is not None and not stat.S_ISDIR(info.st_mode):
        raise OutsideProject(target, "is not a folder; name a folder (it is made if missing)")
    at = target.parent
    while not at.exists() and at != at.parent:
        at = at.parent
    if not at.is_dir():
        raise OutsideProject(target, f"{at} is not a folder")
    if not any(inside(Path(project) / a, target) for a in allowed):
        for name in protected:
            if inside(Path(project) / name, target):
                raise OutsideProject(
                    target,
                    f"lies inside the project's {name}/ (its records, reports and entries are "
                    "the harness's own data); write the files elsewhere",
                )
    probe = target if info is not None else at
    if not os.access(probe, os.W_OK | os.X_OK):
        raise OutsideProject(probe, "is not writable; name a folder you may write")
    return target


def _link_text(path: Path) -> str:
    try:
        return f"is a link (to {os.readlink(path)})"
    except OSError:
        return "is a link"


def safe_folder(root: str | os.PathLike[str], folder: str | os.PathLike[str]) -> Path:
    """``folder`` if each of its parts below ``root`` is a real folder or not there yet
    (mkdir makes them real) and it lies inside ``root``; else OutsideProject naming the
    first part that is a link or not a folder."""
    top, target = Path(root), Path(folder)
    try:
        parts = target.relative_to(top).parts
    except ValueError:
        raise OutsideProject(target, f"lies outside {top}") from None
    at = top
    for part in parts:
        at = at / part
        try:
            info = os.lstat(at)
        except FileNotFoundError:
            break
        if stat.S_ISLNK(info.st_mode):
            raise OutsideProject(
                at, f"{_link_text(at)}; the harness writes and deletes nothing through a link"
            )
        if not stat.S_ISDIR(info.st_mode):
            raise OutsideProject(at, "is not a folder")
    if not inside(top, target):
        raise OutsideProject(target, f"lies outside {top}")
    return target


def remove_files(folder: str | os.PathLike[str], drop: Callable[[os.DirEntry[str]], bool]) -> int:
    """Unlink each entry of ``folder`` that ``drop`` picks; returns how many. The folder is
    opened without following a link (a linked folder raises OSError, ELOOP or ENOTDIR),
    each entry is removed relative to it (a link goes, not what it points to) and
    folders are left alone."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    removed = 0
    try:
        with os.scandir(fd) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False) or not drop(entry):
                    continue
                try:
                    os.unlink(entry.name, dir_fd=fd)
                except FileNotFoundError:
                    continue  # a concurrent clean took it
                removed += 1
    finally:
        os.close(fd)
    return removed


def check_output(
    path: str | os.PathLike[str],
    project: str | os.PathLike[str],
    *,
    force: bool = False,
    protected: tuple[str, ...] = ("results", "repros"),
) -> Path:
    """Where a command may write a file the user named (``export -o``): not a link, a
    folder or a file that is not a regular one; its folder there; nowhere inside the
    project's ``protected`` folders (its records, reports and entries); an existing file
    only with ``force``. Raises OutsideProject saying what to do instead."""
    target = Path(path)
    info = _not_a_link(target, "file")
    if info is not None and stat.S_ISDIR(info.st_mode):
        raise OutsideProject(target, "is a folder; name a file in it")
    parent = target.parent
    if not parent.exists():
        raise OutsideProject(target, f"no such folder {parent}")
    if not parent.is_dir():
        raise OutsideProject(target, f"{parent} is not a folder")
    for name in protected:
        if inside(Path(project) / name, target):
            raise OutsideProject(
                target,
                f"lies inside the project's {name}/ (its records, reports and entries are "
                "the harness's own data); write the script elsewhere",
            )
    if info is not None and not stat.S_ISREG(info.st_mode):
        raise OutsideProject(target, "is not a regular file")
    if info is not None and not force:
        raise OutsideProject(target, "exists; pass --force to replace it")
    return target
