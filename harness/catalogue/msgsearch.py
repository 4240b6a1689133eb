"""Does a documented message exist at all? Search installed torch and lightning for it.

For each documented message, split it at its variable parts (numbers, quoted names, device
and dtype names, signal names: what torch formats in at run time) into fixed parts, and look
for every fixed part in the Python sources and the compiled libraries (.so files, read as
bytes in overlapping chunks) of the torch and lightning packages installed in an
environment. A message none of whose fixed parts occurs in any release is strong evidence
that it was never raised by that software; it works where no reproducer can be written.

Results live in results/msgsearch.json, keyed by entry id and environment id:
    {"schema": 1, "entries": {ENTRY: {"message": ..., "parts": [...],
                                      "envs": {ENV: {"found": "all"|"some"|"none",
                                                     "versions": {...},
                                                     "parts": [{"text", "file"|null}]}}}}}
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "PACKAGES",
    "SCHEMA",
    "Message",
    "EnvSearch",
    "TextStore",
    "documented_messages",
    "file_text",
    "fixed_parts",
    "load_results",
    "message_regex",
    "merge_results",
    "search_env",
    "site_packages",
    "variable_parts",
    "verdict",
    "write_results",
]

SCHEMA = 1
PACKAGES = ("torch", "lightning", "pytorch_lightning", "lightning_fabric")
CHUNK = 8 << 20  # bytes read at a time from one file
# a fixed part shorter than two words or MIN_ALNUM letters and digits ("element", "Expected")
# occurs in any library and says nothing about the message: it is dropped
MIN_ALNUM = 8

# "RuntimeError: ..." / "torch.cuda.OutOfMemoryError: ...": the type is not part of the text
_TYPE_PREFIX = re.compile(r"^\s*(?:[A-Za-z_][\w]*\.)*[A-Z]\w*(?:Error|Exception|Warning):\s*")
# what torch formats into a message at run time
_VARIABLE = re.compile(
    r"""
      '[^']*' | "[^"]*" | `[^`]*`                                  # quoted names
    | (?<![\w.])(?:cuda(?::\d+)?|cpu|mps|meta|xla)(?![\w.])       # device names
    | \b(?:Float|Half|BFloat16|Double|Long|Int|Bool|Byte|Char|Short|ComplexFloat|ComplexDouble)\b
    | \b(?:Killed|Terminated|Aborted|Segmentation\ fault|Bus\ error)\b  # strsignal() names
    | \d+(?:\.\d+)?                                               # numbers, pids, sizes
    | \b[NX]\b                                                   # a document's placeholder
    """,
    re.VERBOSE,
)
_EDGE = " \t\n:;,.()[]{}"


def variable_parts(message: str, mark: str) -> str:
    """``message`` with each part torch formats in (``_VARIABLE``) replaced by ``mark``."""
    return _VARIABLE.sub(mark, message)


def fixed_parts(message: str) -> tuple[str, ...]:
    """The fixed parts of a documented message, in order, each searched for as it stands."""
    text = _TYPE_PREFIX.sub("", message, count=1)
    parts = []
    for piece in _VARIABLE.split(text):
        piece = piece.strip(_EDGE)
        if len(piece.split()) >= 2 and sum(c.isalnum() for c in piece) >= MIN_ALNUM:
            parts.append(piece)
    return tuple(parts)


_SPECIAL = re.compile(r"([\\.^$*+?{}\[\]|()])")


def message_regex(message: str) -> str:
    """The documented signature's message pattern: the fixed parts, in order, anything
    between them. One rule for every imported entry: the message is what the document
    states, its variable parts are what torch formats in."""
    return ".*?".join(_SPECIAL.sub(r"\\\1", p) for p in fixed_parts(message))


def verdict(found: Sequence[bool]) -> str:
    """all / some / none of the fixed parts were found ("none" when there are no parts)."""
    if found and all(found):
        return "all"
    return "some" if any(found) else "none"


@dataclass(frozen=True)
class Message:
    entry: str  # the entry id the result is stored under
    text: str  # the documented message, as the document writes it

    @property
    def parts(self) -> tuple[str, ...]:
        return fixed_parts(self.text)


@dataclass(frozen=True)
class EnvSearch:
    env: str
    versions: dict[str, str]  # package -> installed version
    hits: dict[str, str | None]  # fixed part -> first file (relative to site-packages) or None
    files: int
    bytes: int
    read: int = 0  # files read from disk by this search (the others: cached or a hardlink)
    read_bytes: int = 0


def site_packages(env_dir: str | os.PathLike[str]) -> Path | None:
    """The site-packages folder of a virtual environment, or None."""
    found = sorted(Path(env_dir).glob("lib/python*/site-packages"))
    return found[0] if found else None


def _versions(site: Path) -> dict[str, str]:
    out = {}
    for dist in sorted(site.glob("*.dist-info")):
        name, _, rest = dist.name[: -len(".dist-info")].partition("-")
        if name.lower().replace("-", "_") in PACKAGES:
            out[name.lower().replace("-", "_")] = rest
    return out


def _files(site: Path) -> Iterator[Path]:
    for package in PACKAGES:
        root = site / package
        if not root.is_dir():
            continue
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames.sort()
            for name in sorted(filenames):
                if name.endswith(".py") or name.endswith(".so") or ".so." in name:
                    yield Path(dirpath) / name


# A fixed part has two words and MIN_ALNUM letters and digits: it lies inside one run of
# text bytes at least this long that holds a space. A file is reduced to those runs once
# (its "text": sorted, unique, one per line), and any set of parts is looked for in that.
MIN_RUN = MIN_ALNUM + 1
_CONTROL = bytes([*range(0x00, 0x09), *range(0x0A, 0x20), 0x7F])  # tab is text
_RUN = re.compile(b"[^" + re.escape(_CONTROL) + b"]{%d,}" % MIN_RUN)
_CONTROL_BYTE = re.compile(b"[" + re.escape(_CONTROL) + b"]")


def file_text(path: str | os.PathLike[str]) -> bytes:
    """The runs of text bytes of a file that could hold a fixed part, newline-separated.

    A part without control bytes occurs in the file exactly when it occurs in one of these
    runs; a file is read in chunks, a run cut by a chunk's end is carried to the next."""
    runs: set[bytes] = set()
    tail = b""
    with open(path, "rb") as f:
        while True:
            block = f.read(CHUNK)
            data = tail + block
            if not block:
                cut = len(data)
            else:
                last = max(data.rfind(bytes([c])) for c in _CONTROL)
                cut = last + 1 if last >= 0 else 0
            runs.update(r for r in _RUN.findall(data, 0, cut) if b" " in r or b"\t" in r)
            tail = data[cut:]
            if not block:
                break
    return b"\n".join(sorted(runs))


class TextStore:
    """Files' text (file_text) kept between runs in one SQLite file, keyed by the file's
    identity (device, inode, size, modification time): a new message, a new environment
    hardlinking an already-seen torch, or a rerun reads no file again. A file changed in
    place gets a new modification time and is read anew."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        import sqlite3

        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(self.path)
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS text (dev INTEGER, ino INTEGER, size INTEGER, "
            "mtime_ns INTEGER, data BLOB, PRIMARY KEY (dev, ino, size, mtime_ns))"
        )

    @staticmethod
    def key(st: os.stat_result) -> tuple[int, int, int, int]:
        return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)

    def get(self, key: tuple[int, int, int, int]) -> bytes | None:
        import zlib

        row = self._db.execute(
            "SELECT data FROM text WHERE dev=? AND ino=? AND size=? AND mtime_ns=?", key
        ).fetchone()
        return None if row is None else zlib.decompress(row[0])

    def put(self, key: tuple[int, int, int, int], text: bytes) -> None:
        import zlib

        self._db.execute(
            "INSERT OR REPLACE INTO text VALUES (?, ?, ?, ?, ?)", (*key, zlib.compress(text, 6))
        )

    def commit(self) -> None:
        self._db.commit()

    def close(self) -> None:
        self._db.commit()
        self._db.close()


def _raw_scan(path: Path, pattern: re.Pattern[bytes], longest: int) -> set[bytes]:
    """Every needle of ``pattern`` in the file itself: for parts that no run of file_text
    can hold (a newline in it, or words parted by another space than a space or a tab)."""
    seen: set[bytes] = set()
    tail = b""
    with open(path, "rb") as f:
        while True:
            block = f.read(CHUNK)
            if not block:
                break
            data = tail + block
            seen.update(m.group(0) for m in pattern.finditer(data))
            tail = data[-(longest - 1) :] if longest > 1 else b""
    return seen


def _pattern(needles: Sequence[bytes]) -> re.Pattern[bytes]:
    return re.compile(b"|".join(re.escape(n) for n in needles))


def search_env(
    env_dir: str | os.PathLike[str],
    parts: Iterable[str],
    cache: dict[tuple[int, int], set[bytes]] | None = None,
    store: TextStore | None = None,
) -> EnvSearch:
    """Look for every fixed part in one environment's torch and lightning.

    ``cache`` maps a file's (device, inode) to the parts it contains, for one set of parts:
    environments built from one uv cache hardlink the same files, which are then looked at
    once. ``store`` keeps each file's text between runs (TextStore): with it, a file is read
    from disk once for all messages, those of later runs included."""
    env_dir = Path(env_dir)
    site = site_packages(env_dir)
    needles = sorted({p.encode("utf-8") for p in parts}, key=lambda b: (-len(b), b))
    hits: dict[str, str | None] = {p.decode("utf-8"): None for p in needles}
    if site is None or not needles:
        return EnvSearch(env_dir.name, {}, hits, 0, 0)
    binary = [n for n in needles if _CONTROL_BYTE.search(n) or not re.search(b"[ \t]", n)]
    textual = [n for n in needles if n not in binary]
    in_text = _pattern(textual) if textual else None
    in_file = _pattern(binary) if binary else None
    cache = {} if cache is None else cache
    files = size = read = read_bytes = 0
    for path in _files(site):
        st = path.stat()
        key = (st.st_dev, st.st_ino)
        if key not in cache:
            seen: set[bytes] = set()
            if in_text is not None:
                text = store.get(TextStore.key(st)) if store is not None else None
                if text is None:
                    text = file_text(path)
                    read += 1
                    read_bytes += st.st_size
                    if store is not None:
                        store.put(TextStore.key(st), text)
                seen.update(m.group(0) for m in in_text.finditer(text))
            if in_file is not None:
                seen |= _raw_scan(path, in_file, max(len(n) for n in binary))
            cache[key] = seen
        files += 1
        size += st.st_size
        for needle in cache[key]:
            text_ = needle.decode("utf-8")
            if hits.get(text_, "") is None:
                hits[text_] = path.relative_to(site).as_posix()
    if store is not None:
        store.commit()
    return EnvSearch(env_dir.name, _versions(site), hits, files, size, read, read_bytes)


def documented_messages(repros: str | os.PathLike[str]) -> tuple[Message, ...]:
    """Every documented message under repros/: the knowledge-base triage rows (including
    entries no script can reproduce) and every entry whose title or origin states one."""
    from harness.spec.entries import load_entries
    from harness.spec.triage import find_triages

    out: dict[str, Message] = {}
    for triage in find_triages(repros):
        for row in triage.entries:
            out[triage.entry_id(row)] = Message(triage.entry_id(row), row.message)
    for entry in load_entries(repros):
        if entry.id in out:
            continue
        text = (getattr(entry, "origin", None) or {}).get("message") or entry.title
        if fixed_parts(text):
            out[entry.id] = Message(entry.id, text)
    return tuple(out[k] for k in sorted(out))


def load_results(path: str | os.PathLike[str]) -> dict[str, Any]:
    path = Path(path)
    if not path.is_file():
        return {"schema": SCHEMA, "entries": {}}
    data = json.loads(path.read_text(encoding="utf-8"))
    if data.get("schema") != SCHEMA:
        raise ValueError(f"{path}: schema {data.get('schema')!r}, this harness reads {SCHEMA}")
    return data


def merge_results(
    results: Mapping[str, Any], messages: Sequence[Message], searches: Sequence[EnvSearch]
) -> dict[str, Any]:
    """``results`` with the given messages' answers in the given environments replaced."""
    entries = {k: dict(v) for k, v in results.get("entries", {}).items()}
    for m in messages:
        parts = m.parts
        old = entries.get(m.entry, {})
        envs = dict(old.get("envs", {})) if old.get("message") == m.text else {}
        for s in searches:
            found = [{"text": p, "file": s.hits.get(p)} for p in parts]
            envs[s.env] = {
                "found": verdict([f["file"] is not None for f in found]),
                "versions": s.versions,
                "parts": found,
            }
        entries[m.entry] = {
            "message": m.text,
            "parts": list(parts),
            "envs": {k: envs[k] for k in sorted(envs)},
        }
    return {"schema": SCHEMA, "entries": {k: entries[k] for k in sorted(entries)}}


def write_results(path: str | os.PathLike[str], results: Mapping[str, Any]) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(results, indent=1, sort_keys=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)
