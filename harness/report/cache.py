"""What each entry rendered to, kept so that a report renders only the entries whose
inputs changed.

What an entry renders to (its page and PNG, its line in its data file, its row of
index.html and its line in its section file, its line of the aggregates' parts
(compat.json's), its part of the answers files, the blocks written back into its
document) depends only on:

- its records as the report reads them (the store's newest per key and machine): a digest
  of every column of every record, computed by the engine;
- its definition (the parsed entry.yaml, its paths, the variants read from repro.py): a
  digest of the Entry's repr;
- the code that renders: every harness/**/*.py, the templates and static files of the page
  (harness/report/render/templates/, static/), and the versions of the libraries that
  compute, draw or escape (DuckDB, NumPy, Pillow, Jinja2, MarkupSafe) and of Python.

Not on its place among the entries: its row and section name no file of several entries
(the page finds the section and data files from the row's place), so an entry added or
removed before it leaves its key as it was. The key of an entry is a digest of all of these. results/.cache/render/<key>.json holds its
page's and PNG's names and SHA-256, its counts and the blocks written back into its
document; <key>.bin its texts (index.html's row, the section file's line, its line of the
aggregates' parts, the data file's line, its part of the answers files). An entry is taken
from the cache only when its page and PNG still hold exactly the bytes it rendered;
anything else (a file edited or removed, a cache file missing, unreadable or malformed)
renders it again. The files of several entries (data, section, answers and aggregates'
files, index.html, compat.json) are put together from every entry's texts, or, where the
last report's assembly allows, only the changed entries' texts are spliced into them
(harness/report/assembly.py); each is written where its bytes differ.
Deleting results/.cache is always safe: the next report renders everything.
``report --check`` reads the cache and writes nothing; ``report --no-cache`` neither reads
nor writes it.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.atomic import write_atomically
from harness.envs.provenance import source_digest, versions_text
from harness.paths import OutsideProject, remove_files, safe_folder
from harness.report.render.html import HtmlPart
from harness.report.render.templating import template_digest
from harness.spec.entries import Entry
from harness.store.columnar import RecordTable

__all__ = [
    "CACHE_DIR",
    "CachedEntry",
    "RenderCache",
    "entry_key",
    "code_fingerprint",
    "entry_definition",
    "record_digests",
]

CACHE_DIR = Path(".cache") / "render"  # under results/
_FORMAT = 4
_LIBRARIES = ("duckdb", "numpy", "pillow", "jinja2", "markupsafe")


@functools.lru_cache(maxsize=1)
def code_fingerprint() -> str:
    """A digest of the code that aggregates and renders: every harness/**/*.py (name and
    bytes), the page's templates and static files (name and bytes), the libraries' versions
    and Python's."""
    h = hashlib.sha256(f"format {_FORMAT}\0{versions_text(_LIBRARIES)}".encode())
    h.update(source_digest().encode())
    h.update(template_digest().encode())
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


def entry_key(eid: str, records: str, definition: str) -> str:
    """The key of an entry: its id, the digests of its records and of its definition (not
    its place among the entries: nothing it renders names it)."""
    text = json.dumps([code_fingerprint(), eid, records, definition])
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class CachedEntry:
    """What one entry rendered to."""

    html: HtmlPart  # its row of index.html and its line in its section file
    json: bytes  # its line of the aggregates' parts (render/jsonout.py), no newline
    cell_data: str  # its line in its data file
    answers: str  # its part of the answers file (render/answers.py)
    verdicts: tuple[str, ...]  # its verdicts, one word each
    pages: tuple[tuple[str, str], ...]  # (path under results/, SHA-256): its page and PNG
    documents: tuple[tuple[str, Mapping[str, str]], ...]  # (document, its blocks' texts)


def _pairs(value: Any) -> tuple[tuple[str, str], ...]:
    if not isinstance(value, list) or not all(
        isinstance(p, list) and len(p) == 2 and all(isinstance(x, str) for x in p) for p in value
    ):
        raise ValueError("not a list of pairs of strings")
    return tuple((a, b) for a, b in value)


def _strings(value: Any) -> list[str]:
    if not (isinstance(value, list) and all(isinstance(s, str) for s in value)):
        raise ValueError("not a list of strings")
    return value


_PARTS = 5  # the .bin's texts: row, section file's line, JSON, data line, answers


def _decode(meta: Any, blob: bytes) -> CachedEntry:
    """The entry of a cache file's two parts; ValueError (or TypeError, KeyError) where
    they are not what this module writes."""
    if not isinstance(meta, dict) or meta.get("format") != _FORMAT:
        raise ValueError("not a render cache file of this format")
    html = meta["html"]
    sizes = meta["sizes"]
    if not (
        isinstance(sizes, list)
        and len(sizes) == _PARTS
        and all(type(n) is int and n >= 0 for n in sizes)
    ):
        raise ValueError("sizes")
    if sum(sizes) != len(blob):
        raise ValueError("the .bin file is not as long as its parts")
    ends = [sum(sizes[: i + 1]) for i in range(_PARTS)]
    parts = [blob[a:b] for a, b in zip([0, *ends[:-1]], ends, strict=True)]
    counts = (html["entries"], html["runs"], *html["verdicts"])
    if not all(type(n) is int and n >= 0 for n in counts):
        raise ValueError("counts")
    slices = html["slices"]
    verdicts = meta["verdicts"]
    if not (isinstance(slices, list) and all(isinstance(s, str) for s in slices)):
        raise ValueError("slices")
    if not (isinstance(verdicts, list) and all(isinstance(v, str) for v in verdicts)):
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
    return CachedEntry(
        html=HtmlPart(
            entries=html["entries"],
            runs=html["runs"],
            verdicts=tuple(html["verdicts"]),
            slices=frozenset(slices),
            contents=parts[0].decode("utf-8"),
            sections=parts[1].decode("utf-8"),
            torches=frozenset(_strings(html["torches"])),
            lightnings=frozenset(_strings(html["lightnings"])),
        ),
        json=parts[2],
        cell_data=parts[3].decode("utf-8"),
        answers=parts[4].decode("utf-8"),
        verdicts=tuple(verdicts),
        pages=_pairs(meta["pages"]),
        documents=tuple(documents),
    )


class RenderCache:
    """The cache of one results folder (results/.cache/render). Where that folder, or
    results/.cache, is a link (harness/paths.py), nothing is read, written or removed
    there: ``refused`` says why."""

    def __init__(self, results: Path) -> None:
        self.results = results
        self.dir = results / CACHE_DIR
        self.refused: str | None = None
        try:
            safe_folder(results, self.dir)
        except OutsideProject as exc:
            self.refused = str(exc)

    def _paths(self, key: str) -> tuple[Path, Path]:
        return self.dir / f"{key}.json", self.dir / f"{key}.bin"

    def get(self, key: str, pages: bool = True) -> CachedEntry | None:
        """The entry stored under ``key`` whose page and PNG still hold the bytes it was
        rendered to; else None. ``pages=False``: the caller knows they do (the report
        state vouches for them: harness/report/assembly.py)."""
        if self.refused is not None:
            return None
        meta_path, bin_path = self._paths(key)
        try:
            cached = _decode(json.loads(meta_path.read_bytes()), bin_path.read_bytes())
        except (OSError, ValueError, TypeError, KeyError, RecursionError):
            return None
        for name, digest in cached.pages:
            path = self.results / name
            if Path(name).is_absolute() or ".." in Path(name).parts:
                return None  # a cache file that names something outside results/
            if not pages:
                continue
            try:
                if sha256(path.read_bytes()) != digest:
                    return None
            except OSError:
                return None
        return cached

    def put(self, key: str, cached: CachedEntry) -> None:
        """Store ``cached`` (a cache that cannot be written is only slower next time)."""
        if self.refused is not None:
            return
        h = cached.html
        parts = (
            h.contents.encode("utf-8"),
            h.sections.encode("utf-8"),
            cached.json,
            cached.cell_data.encode("utf-8"),
            cached.answers.encode("utf-8"),
        )
        meta = {
            "format": _FORMAT,
            "html": {
                "entries": h.entries,
                "runs": h.runs,
                "verdicts": list(h.verdicts),
                "slices": sorted(h.slices),
                "torches": sorted(h.torches),
                "lightnings": sorted(h.lightnings),
            },
            "sizes": [len(p) for p in parts],
            "verdicts": list(cached.verdicts),
            "pages": [list(p) for p in cached.pages],
            "documents": [[path, dict(blocks)] for path, blocks in cached.documents],
        }
        meta_path, bin_path = self._paths(key)
        with contextlib.suppress(OSError):
            self.dir.mkdir(parents=True, exist_ok=True)
            # the .bin first: a .json whose .bin is missing or short is not taken
            write_atomically(bin_path, b"".join(parts))
            write_atomically(meta_path, json.dumps(meta).encode("utf-8"))

    def prune(self, keep: set[str]) -> None:
        """Remove every cached entry but those of ``keep`` (never through a link)."""
        if self.refused is not None:
            return

        def stale(entry: os.DirEntry[str]) -> bool:
            stem, dot, suffix = entry.name.rpartition(".")
            return bool(dot) and suffix in ("json", "bin") and stem not in keep

        with contextlib.suppress(OSError):
            remove_files(self.dir, stale)
