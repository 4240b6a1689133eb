"""A report with nothing to do: when no file the report reads has changed since the last
report, and every file it wrote is as it left it, the outputs are what a report would write
again, byte for byte, and the report says so without reading the store.

What a report reads: the record files (results/records/), everything under repros/ (the
entries' definitions and documents, the reproducers, the triage files and the kept
knowledge-base records), matrix.yaml, README.md, results/msgsearch.json and the nightly
snapshots (results/nightly/); and the code that reads and renders (every file of the
harness package, the versions of Python and of the libraries that compute, draw or escape).
What it writes: the files its summary names (pages, PNGs, data files, index.html,
compat.json, the domains' pages), the entry documents and the README.

After a report that wrote without a warning, results/.cache/report-state.json keeps each of
those files' identity as the operating system reports it (size, modification and change
times in nanoseconds, inode), the code's digest and the report's summary line. The next
report compares them first: one file created, removed, appended to, edited or replaced
(even to the same bytes: its change time moves, and no program can set that back) and the
report runs in full, as it does with ``--no-cache``, ``--check`` or ``--since``. This is the
test `make` and git's index make, with the change time and the inode beside the size and
modification time. Deleting the state file (or results/.cache) is always safe.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.atomic import write_atomically
from harness.envs.provenance import versions_text
from harness.paths import OutsideProject, safe_folder

__all__ = [
    "Basis",
    "ReportState",
    "code_digest",
    "files_read",
    "forget",
    "load_basis",
    "load_state",
    "save_basis",
    "save_state",
    "signature",
    "unchanged",
]

STATE_FILE = Path(".cache") / "report-state.json"  # under results/
BASIS_FILE = Path(".cache") / "report-basis.json"
_FORMAT = 1
_LIBRARIES = ("duckdb", "numpy", "pillow", "jinja2", "markupsafe", "rich", "pyyaml")
_SKIPPED_DIRS = frozenset({"__pycache__", ".pytest_cache", ".mypy_cache"})

Signature = tuple[int, int, int, int]  # size, mtime_ns, ctime_ns, inode


def signature(path: str | os.PathLike[str]) -> Signature | None:
    """The file's identity (None: absent, or neither a regular file nor a folder). A
    folder's moves when a file in it is added, removed or renamed."""
    try:
        st = os.stat(path, follow_symlinks=False)
    except OSError:
        return None
    if not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
        return None
    return (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)


def code_digest() -> str:
    """Every file of the harness package (name and bytes, caches aside), Python's version and
    the libraries' versions."""
    package = Path(__file__).resolve().parents[1]
    h = hashlib.sha256(f"format {_FORMAT}\0{versions_text(_LIBRARIES)}".encode())
    for path in sorted(_files_under(package)):
        h.update(path.relative_to(package).as_posix().encode() + b"\0")
        h.update(hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()


def _files_under(folder: Path) -> Iterable[Path]:
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if d not in _SKIPPED_DIRS)
        for name in files:
            if not name.endswith((".pyc", ".pyo")):
                yield Path(root) / name


def files_read(repo: Path, repros: Path, results: Path) -> list[Path]:
    """Every file the report reads: those under its folders that exist now, and its fixed
    files whether or not they exist."""
    records = results / "records"
    found = [p for p in _files_under(repros)]
    with contextlib.suppress(OSError):
        found += [records / e.name for e in os.scandir(records) if not e.is_dir()]
    with contextlib.suppress(OSError):
        found += [results / "nightly" / e.name for e in os.scandir(results / "nightly")]
    found += [repo / "matrix.yaml", repo / "README.md", results / "msgsearch.json"]
    return sorted(set(found))


def _rel(path: Path, repo: Path) -> str:
    # most paths lie under the project as it was named: their names after it (relpath is
    # slow enough to count over thousands of outputs)
    text, root = os.fspath(path), os.fspath(repo).rstrip("/")
    if text.startswith(root + "/") and "/." not in text[len(root) :]:
        return text[len(root) + 1 :]
    return os.path.relpath(path, repo)


@dataclass(frozen=True)
class ReportState:
    code: str
    inputs: Mapping[str, Signature | None]  # path relative to the project: its signature
    outputs: Mapping[str, Signature | None]
    said: str  # the summary line the report printed
    token: str = ""  # names the assembly kept with it (harness/report/assembly.py)

    def vouched(self, repo: Path) -> frozenset[str]:
        """The files read or written (absolute paths) that are as the last report left them."""
        root = os.path.abspath(repo)
        return frozenset(
            os.path.normpath(f"{root}/{rel}")
            for files in (self.inputs, self.outputs)
            for rel, sig in files.items()
            if sig is not None and signature(f"{root}/{rel}") == sig
        )


def _signatures(value: Any) -> dict[str, Signature | None] | None:
    if not isinstance(value, dict):
        return None
    out: dict[str, Signature | None] = {}
    for k, v in value.items():
        if v is None:
            out[k] = None
        elif (
            isinstance(k, str)
            and isinstance(v, list)
            and len(v) == 4
            and all(type(x) is int for x in v)
        ):
            out[k] = (v[0], v[1], v[2], v[3])
        else:
            return None
    return out


def load_state(results: Path) -> ReportState | None:
    """The last report's state, or None (absent, unreadable, another format, kept through a
    link: a full report)."""
    try:
        folder = safe_folder(results, results / STATE_FILE.parent)
        doc = json.loads((folder / STATE_FILE.name).read_bytes())
    except (OSError, ValueError, OutsideProject):
        return None
    if not isinstance(doc, dict) or doc.get("format") != _FORMAT:
        return None
    inputs, outputs = _signatures(doc.get("inputs")), _signatures(doc.get("outputs"))
    code, said, token = doc.get("code"), doc.get("said"), doc.get("token", "")
    if (
        inputs is None
        or outputs is None
        or not isinstance(code, str)
        or not isinstance(said, str)
        or not isinstance(token, str)
    ):
        return None
    return ReportState(code, inputs, outputs, said, token)


def unchanged(state: ReportState, code: str, repo: Path, repros: Path, results: Path) -> bool:
    """Whether nothing the last report read or wrote has changed since and ``code`` (this
    harness's code_digest) is the same: then its outputs are what this report would write."""
    if state.code != code or _links_in_cache(results):
        return False
    now = {_rel(p, repo) for p in files_read(repo, repros, results)}
    if now != set(state.inputs):  # a file added or removed (of the fixed ones: None then)
        return False
    for files in (state.inputs, state.outputs):
        for rel, sig in files.items():
            if signature(repo / rel) != sig:
                return False
    return True


def _links_in_cache(results: Path) -> bool:
    """Whether a folder of results/.cache is a link (the full report names it and neither
    reads nor writes through it)."""
    try:
        return any(e.is_symlink() for e in os.scandir(results / STATE_FILE.parent))
    except OSError:
        return False


def save_state(
    results: Path,
    repo: Path,
    code: str,
    inputs: Mapping[Path, Signature | None],
    written: Iterable[Path],
    outputs: Iterable[Path],
    said: str,
    token: str = "",
) -> None:
    """Keep what this report read (``inputs``: the signatures taken before it read them;
    those it wrote itself, ``written``, taken again now) and wrote (``outputs``)."""
    rewritten = {os.path.abspath(p) for p in written}
    kept = {
        _rel(p, repo): (signature(p) if os.path.abspath(p) in rewritten else sig)
        for p, sig in inputs.items()
    }
    doc = {
        "format": _FORMAT,
        "code": code,
        "inputs": kept,
        "outputs": {_rel(p, repo): signature(p) for p in outputs},
        "said": said,
        "token": token,
    }
    with contextlib.suppress(OSError, OutsideProject):  # without it, the next report reads
        target = safe_folder(results, results / STATE_FILE.parent) / STATE_FILE.name
        target.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(target, json.dumps(doc, separators=(",", ":")).encode("utf-8"))


def forget(results: Path) -> None:
    """Remove the state (a report that cannot vouch for its outputs)."""
    with contextlib.suppress(OSError, OutsideProject):
        (safe_folder(results, results / STATE_FILE.parent) / STATE_FILE.name).unlink()


# A report of what was appended. Each report whose record files are all covered by their
# snapshots (harness/store/columnar.py: RecordTable.covered) keeps, beside them, each entry's
# record digest and count: the basis of the next report, which reads only the entries the
# lines appended since name, and takes every other entry's records to be as they were.


@dataclass(frozen=True)
class Basis:
    files: Mapping[str, tuple[int, str]]  # record file: (bytes, sha256) of its snapshot
    entries: Mapping[str, tuple[str, int]]  # entry: (digest of its records, how many)


def load_basis(results: Path, code: str) -> Basis | None:
    """The last report's basis, if kept by this code (else None: a full load)."""
    try:
        folder = safe_folder(results, results / BASIS_FILE.parent)
        doc = json.loads((folder / BASIS_FILE.name).read_bytes())
    except (OSError, ValueError, OutsideProject):
        return None
    if not isinstance(doc, dict) or doc.get("format") != _FORMAT or doc.get("code") != code:
        return None
    files, entries = doc.get("files"), doc.get("entries")
    if not isinstance(files, dict) or not isinstance(entries, dict):
        return None
    if not all(
        isinstance(v, list) and len(v) == 2 and type(v[0]) is int and isinstance(v[1], str)
        for v in files.values()
    ) or not all(
        isinstance(v, list) and len(v) == 2 and isinstance(v[0], str) and type(v[1]) is int
        for v in entries.values()
    ):
        return None
    return Basis(
        {k: (v[0], v[1]) for k, v in files.items()},
        {k: (v[0], v[1]) for k, v in entries.items()},
    )


def save_basis(
    results: Path,
    code: str,
    files: Mapping[str, tuple[int, str]],
    entries: Mapping[str, tuple[str, int]],
) -> None:
    """Keep the basis (``files`` empty: forget it, no later load can start from it)."""
    with contextlib.suppress(OSError, OutsideProject):
        target = safe_folder(results, results / BASIS_FILE.parent) / BASIS_FILE.name
        if not files or not all(digest for digest, _ in entries.values()):
            target.unlink(missing_ok=True)
            return
        target.parent.mkdir(parents=True, exist_ok=True)
        doc = {"format": _FORMAT, "code": code, "files": files, "entries": entries}
        write_atomically(target, json.dumps(doc, separators=(",", ":")).encode("utf-8"))
