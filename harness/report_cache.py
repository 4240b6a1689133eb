"""What each block of entries rendered to, kept so that a report renders only the blocks
whose inputs changed.

A block is CELL_FILE_ENTRIES consecutive entries (in id order): the unit of the page's data
files, so its outputs are its entries' pages and PNGs, one data file, its part of
index.html and its entries' part of compat.json. What a block renders to depends only on:

- each of its entries' records as the report reads them (the store's newest per key and
  machine): a digest of every column of every record, computed by the engine;
- each of its entries' definitions (the parsed entry.yaml, its paths and the variants
  read from repro.py): a digest of the Entry's repr;
- its place among all entries (the data file's name, the page's anchors);
- the code that renders: every harness/**/*.py, and the versions of the libraries that
  compute or draw (DuckDB, NumPy, Pillow) and of Python.

The key of a block is a digest of all of these. results/.cache/render/<key>.json holds its
outputs' names and SHA-256, the blocks written back into its entries' documents, and its
parts of the whole files (index.html, compat.json; in <key>.bin). A block is taken from
the cache only when every one of its output files still holds exactly the bytes it was
rendered to; anything else (a file edited or removed, a cache file missing, unreadable or
malformed) renders the block again. Deleting results/.cache is always safe: the next report
renders everything. ``report --check`` reads the cache and writes nothing.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import platform
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from harness.atomic import write_atomically
from harness.columnar import RecordTable
from harness.entries import Entry
from harness.render.html import HtmlPart

__all__ = [
    "CACHE_DIR",
    "CachedBlock",
    "RenderCache",
    "block_key",
    "code_fingerprint",
    "entry_definition",
    "record_digests",
]

CACHE_DIR = Path(".cache") / "render"  # under results/
_FORMAT = 1
_HARNESS = Path(__file__).resolve().parent
_LIBRARIES = ("duckdb", "numpy", "pillow")


@functools.lru_cache(maxsize=1)
def code_fingerprint() -> str:
    """A digest of the code that aggregates and renders: every harness/**/*.py (name and
    bytes), the libraries' versions and Python's."""
    h = hashlib.sha256(f"format {_FORMAT}\0python {platform.python_version()}\0".encode())
    for name in _LIBRARIES:
        try:
            version = metadata.version(name)
        except metadata.PackageNotFoundError:
            version = "absent"
        h.update(f"{name} {version}\0".encode())
    for path in sorted(_HARNESS.rglob("*.py")):
        h.update(str(path.relative_to(_HARNESS)).encode() + b"\0")
        h.update(path.read_bytes())
        h.update(b"\0")
    return h.hexdigest()


def entry_definition(entry: Entry | None) -> str:
    """A digest of everything the report reads from an entry's definition (none: '')."""
    return "" if entry is None else hashlib.sha256(repr(entry).encode("utf-8")).hexdigest()


def record_digests(table: RecordTable) -> dict[str, str]:
    """Per entry, a digest of its records: every column of each (as JSON, so that no two
    different records write the same text), in the table's order. ``rid`` itself is left
    out: it numbers the records of all entries, so it changes when another entry gains one."""
    con = table.con
    columns = [row[0] for row in con.execute("DESCRIBE records").fetchall() if row[0] != "rid"]
    return dict(
        con.execute(
            "SELECT entry, md5(string_agg(h, '' ORDER BY rid)) FROM (SELECT entry, rid, "
            f"md5(to_json(row({', '.join(chr(34) + c + chr(34) for c in columns)}))) AS h FROM records) GROUP BY entry"
        ).fetchall()
    )


def block_key(first: int, items: Sequence[tuple[str, str, str]]) -> str:
    """The key of the block whose first entry is entry ``first`` of all: ``items`` are its
    entries' (id, records digest, definition digest)."""
    text = json.dumps([code_fingerprint(), first, [list(i) for i in items]])
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class CachedBlock:
    """What one block rendered to."""

    html: HtmlPart
    json: bytes  # its entries' JSON in compat.json, comma-separated
    verdicts: dict[str, int]
    pages: tuple[tuple[str, str], ...]  # (path under results/, SHA-256): pages and PNGs
    data: tuple[tuple[str, str], ...]  # the same, for its data file
    documents: tuple[tuple[str, Mapping[str, str]], ...]  # (document, its blocks' texts)


def _pairs(value: Any) -> tuple[tuple[str, str], ...]:
    if not isinstance(value, list) or not all(
        isinstance(p, list) and len(p) == 2 and all(isinstance(x, str) for x in p) for p in value
    ):
        raise ValueError("not a list of pairs of strings")
    return tuple((a, b) for a, b in value)


def _decode(meta: Any, blob: bytes) -> CachedBlock:
    """The block of a cache file's two parts; ValueError (or TypeError, KeyError) where
    they are not what this module writes."""
    if not isinstance(meta, dict) or meta.get("format") != _FORMAT:
        raise ValueError("not a render cache file of this format")
    html = meta["html"]
    sizes = meta["sizes"]
    if not (isinstance(sizes, list) and len(sizes) == 3 and all(type(n) is int for n in sizes)):
        raise ValueError("sizes")
    if sum(sizes) != len(blob) or min(sizes) < 0:
        raise ValueError("the .bin file is not as long as its parts")
    a, b = sizes[0], sizes[0] + sizes[1]
    counts = (html["entries"], html["runs"], *html["verdicts"])
    if not all(type(n) is int and n >= 0 for n in counts):
        raise ValueError("counts")
    slices = html["slices"]
    verdicts = meta["verdicts"]
    if not (isinstance(slices, list) and all(isinstance(s, str) for s in slices)):
        raise ValueError("slices")
    if not (
        isinstance(verdicts, dict)
        and all(isinstance(k, str) and type(v) is int for k, v in verdicts.items())
    ):
        raise ValueError("verdicts")
    documents = []
    for item in meta["documents"]:
        path, blocks = item
        if not (
            isinstance(path, str)
            and isinstance(blocks, dict)
            and all(isinstance(k, str) and isinstance(v, str) for k, v in blocks.items())
        ):
            raise ValueError("documents")
        documents.append((path, blocks))
    return CachedBlock(
        html=HtmlPart(
            entries=html["entries"],
            runs=html["runs"],
            verdicts=tuple(html["verdicts"]),
            slices=frozenset(slices),
            contents=blob[:a].decode("utf-8"),
            sections=blob[a:b].decode("utf-8"),
        ),
        json=blob[b:],
        verdicts=verdicts,
        pages=_pairs(meta["pages"]),
        data=_pairs(meta["data"]),
        documents=tuple(documents),
    )


class RenderCache:
    """The cache of one results folder (results/.cache/render)."""

    def __init__(self, results: Path) -> None:
        self.results = results
        self.dir = results / CACHE_DIR

    def _paths(self, key: str) -> tuple[Path, Path]:
        return self.dir / f"{key}.json", self.dir / f"{key}.bin"

    def get(self, key: str) -> CachedBlock | None:
        """The block stored under ``key`` whose output files all still hold the bytes it
        was rendered to; else None."""
        meta_path, bin_path = self._paths(key)
        try:
            block = _decode(json.loads(meta_path.read_bytes()), bin_path.read_bytes())
        except (OSError, ValueError, TypeError, KeyError, RecursionError):
            return None
        for name, digest in (*block.pages, *block.data):
            path = self.results / name
            if Path(name).is_absolute() or ".." in Path(name).parts:
                return None  # a cache file that names something outside results/
            try:
                if sha256(path.read_bytes()) != digest:
                    return None
            except OSError:
                return None
        return block

    def put(self, key: str, block: CachedBlock) -> None:
        """Store ``block`` (a cache that cannot be written is only slower next time)."""
        h = block.html
        parts = (h.contents.encode("utf-8"), h.sections.encode("utf-8"), block.json)
        meta = {
            "format": _FORMAT,
            "html": {
                "entries": h.entries,
                "runs": h.runs,
                "verdicts": list(h.verdicts),
                "slices": sorted(h.slices),
            },
            "sizes": [len(p) for p in parts],
            "verdicts": block.verdicts,
            "pages": [list(p) for p in block.pages],
            "data": [list(p) for p in block.data],
            "documents": [[path, dict(blocks)] for path, blocks in block.documents],
        }
        meta_path, bin_path = self._paths(key)
        with contextlib.suppress(OSError):
            self.dir.mkdir(parents=True, exist_ok=True)
            # the .bin first: a .json whose .bin is missing or short is not taken
            write_atomically(bin_path, b"".join(parts))
            write_atomically(meta_path, json.dumps(meta).encode("utf-8"))

    def prune(self, keep: set[str]) -> None:
        """Remove every cached block but those of ``keep``."""
        with contextlib.suppress(OSError):
            for path in self.dir.iterdir():
                if path.suffix in (".json", ".bin") and path.stem not in keep:
                    with contextlib.suppress(OSError):
                        path.unlink()
