"""What the last report put its whole files together from, kept so that the next report
puts only the entries that changed into them.

The whole files (index.html, answers.js, compat.json, and the files of 16 or 64 entries:
sections/, cells/, answers/, aggregates/) are made of every entry's share. A report that
rendered every entry again, or read each one's share back from the render cache
(harness/report/cache.py), would put 2,500 entries' shares together to change ten of them. Instead, each report that
vouches for its outputs (harness/report/uptodate.py: the state file, with each output's
size, times and inode as it wrote them) keeps here, per entry in id order, its key and the
small part of its share that the files of every entry need (its row of index.html and what
the header counts of it, its verdicts, its pages and documents; the length of its text in
answers.js and the highest environment and message numbers it names, its text being read
back from answers.js, as the state vouches for it). The next report, for the
entries whose key is the same and whose page, PNG and document the state still vouches
for, takes that part from here; for the others it takes the whole share (render cache,
else rendered). Then:

- index.html and compat.json (the index of the aggregates' parts) are put together again
  from every entry's part (a few MB);
- answers.js keeps every other entry's text as it is where the changed entries leave the
  numbers of its environments and messages as they were (render/answers.py:
  ``answers_spliced``), else every entry is numbered again;
- a file of 16 or 64 entries none of which changed or moved, and which the state vouches
  for, is left as it is; any other is put together from its entries' lines (a line an
  entry), or, for answers/NNNN.js, their variants: a kept entry's as the file it was in
  last time holds them (an entry added or removed before it moves it to another file),
  a changed or new entry's from its share.

An entry's texts do not depend on where it stands (its row and section name no file: the
page finds them from the row's place), so a new entry is the one entry rendered; answers.js
is numbered again where the entries are not those of the last report.

A file the state does not vouch for (edited, removed, written by another report), or one
that is not what this record says it holds, is put together from its entries' whole shares
as before. The bytes are those a full report writes (tests/report/test_assembly.py).

results/.cache/report-assembly.json is only a cache, bound to the state by a token both
hold: deleting it is always safe.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.atomic import write_atomically
from harness.paths import OutsideProject, safe_folder
from harness.report.render.answers import AnswersText, answers_pieces, answers_tables
from harness.report.render.html import HtmlPart

__all__ = [
    "Assembly",
    "Kept",
    "load_assembly",
    "save_assembly",
    "splice_lines",
    "split_lines",
]

ASSEMBLY_FILE = Path(".cache") / "report-assembly.json"  # under results/
_FORMAT = 3  # 3: each entry's text in answers.js by its length and highest numbers


@dataclass(frozen=True)
class Kept:
    """What the whole files hold of one entry, beside its key."""

    html: HtmlPart  # its row of index.html and its counts (sections: "", in its section file)
    answers: AnswersText  # its text in answers.js (render/answers.py)
    verdicts: tuple[str, ...]
    pages: tuple[tuple[str, str], ...]  # (path under results/, SHA-256): its page and PNG
    documents: tuple[str, ...]  # the documents its blocks are written into


@dataclass(frozen=True)
class Assembly:
    token: str  # the report state's (uptodate.ReportState.token) it was kept with
    code: str  # the render cache's code fingerprint
    ids: tuple[str, ...]  # every entry, in id order
    keys: tuple[str, ...]  # each entry's render key (harness/report/cache.py)
    kept: tuple[Kept, ...]
    n_records: int  # the records counted (compat.json's "records")
    # answers.js's tables (its text before the entries: render/answers.py), and parsed
    answers_tables: bytes = b""
    tables: tuple[list[list[str]], list[list[str]]] = ([], [])


def _strings(value: Any) -> list[str]:
    if not (isinstance(value, list) and all(isinstance(s, str) for s in value)):
        raise ValueError("not a list of strings")
    return value


def _count(value: Any) -> int:
    if type(value) is not int or value < 0:
        raise ValueError("not a count")
    return value


def _kept(value: Any, text: bytes) -> Kept:
    html = value["html"]
    length, envs_max, messages_max = value["answers"]
    if len(text) != _count(length) or type(envs_max) is not int or type(messages_max) is not int:
        raise ValueError("answers")
    verdicts = tuple(_count(n) for n in html["verdicts"])
    pages = value["pages"]
    if not (
        isinstance(pages, list)
        and all(
            isinstance(p, list) and len(p) == 2 and all(isinstance(x, str) for x in p)
            for p in pages
        )
    ):
        raise ValueError("pages")
    for name, _ in pages:
        if name.startswith("/") or ".." in name.split("/"):
            raise ValueError("a page outside results/")
    contents = html["contents"]
    if not isinstance(contents, str):
        raise ValueError("contents")
    return Kept(
        html=HtmlPart(
            entries=_count(html["entries"]),
            runs=_count(html["runs"]),
            verdicts=verdicts,
            slices=frozenset(_strings(html["slices"])),
            contents=contents,
            sections="",
            torches=frozenset(_strings(html["torches"])),
            lightnings=frozenset(_strings(html["lightnings"])),
        ),
        answers=AnswersText(text, envs_max, messages_max),
        verdicts=tuple(_strings(value["verdicts"])),
        pages=tuple((a, b) for a, b in pages),
        documents=tuple(_strings(value["documents"])),
    )


def load_assembly(
    results: Path, code: str, token: str, vouched: Collection[str]
) -> Assembly | None:
    """The record kept with the state of token ``token`` by this code, else None (absent,
    unreadable, malformed, another report's, kept through a link). Each entry's text in
    answers.js is cut from answers.js itself, where the state vouches for it (``vouched``:
    absolute paths) as the report that kept the record wrote it."""
    answers_js = results / "answers.js"
    if os.path.abspath(answers_js) not in vouched:
        return None
    try:
        folder = safe_folder(results, results / ASSEMBLY_FILE.parent)
        doc = json.loads((folder / ASSEMBLY_FILE.name).read_bytes())
        text = answers_js.read_bytes()
    except (OSError, ValueError, OutsideProject, RecursionError):
        return None
    if not (
        isinstance(doc, dict)
        and doc.get("format") == _FORMAT
        and doc.get("code") == code
        and doc.get("token") == token
        and token
    ):
        return None
    try:
        ids, keys = _strings(doc["ids"]), _strings(doc["keys"])
        if not isinstance(doc["kept"], list) or len(doc["kept"]) != len(ids):
            return None
        pieces = answers_pieces(text, [_count(k["answers"][0]) for k in doc["kept"]])
        if pieces is None:
            return None
        tables = answers_tables(pieces[0])
        if tables is None:
            return None
        kept = [_kept(k, t) for k, t in zip(doc["kept"], pieces[1], strict=True)]
        n_records = _count(doc["records"])
    except (KeyError, TypeError, ValueError):
        return None
    if len(keys) != len(ids) or ids != sorted(set(ids)):
        return None
    return Assembly(token, code, tuple(ids), tuple(keys), tuple(kept), n_records, pieces[0], tables)


def save_assembly(results: Path, assembly: Assembly) -> None:
    """Keep ``assembly`` (a cache that cannot be written is only slower next time)."""
    doc = {
        "format": _FORMAT,
        "token": assembly.token,
        "code": assembly.code,
        "ids": list(assembly.ids),
        "keys": list(assembly.keys),
        "records": assembly.n_records,
        "kept": [
            {
                "html": {
                    "entries": k.html.entries,
                    "runs": k.html.runs,
                    "verdicts": list(k.html.verdicts),
                    "slices": sorted(k.html.slices),
                    "torches": sorted(k.html.torches),
                    "lightnings": sorted(k.html.lightnings),
                    "contents": k.html.contents,
                },
                "answers": [len(k.answers.text), k.answers.envs_max, k.answers.messages_max],
                "verdicts": list(k.verdicts),
                "pages": [list(p) for p in k.pages],
                "documents": list(k.documents),
            }
            for k in assembly.kept
        ],
    }
    with contextlib.suppress(OSError, OutsideProject, ValueError):
        target = safe_folder(results, results / ASSEMBLY_FILE.parent) / ASSEMBLY_FILE.name
        target.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(
            target, json.dumps(doc, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        )


def forget_assembly(results: Path) -> None:
    with contextlib.suppress(OSError, OutsideProject):
        (safe_folder(results, results / ASSEMBLY_FILE.parent) / ASSEMBLY_FILE.name).unlink()


def split_lines(data: bytes, count: int) -> list[bytes] | None:
    """The ``count`` lines of a file of a line an entry (each with its newline), or None
    where it does not hold exactly that many."""
    parts = data.split(b"\n")
    if len(parts) != count + 1 or parts[-1]:
        return None
    return [p + b"\n" for p in parts[:-1]]


def splice_lines(old: bytes, count: int, new: Mapping[int, bytes]) -> bytes | None:
    """``old`` (``count`` lines, one an entry) with line k replaced by ``new[k]`` (a line,
    newline included); None where ``old`` does not hold that many lines."""
    lines = split_lines(old, count)
    if lines is None:
        return None
    for k, line in new.items():
        lines[k] = line
    return b"".join(lines)


_PART_START, _PART_END = b"harnessVariants(", b");\n"


def part_variants(old: bytes, ids: Sequence[str]) -> list[tuple[str, list[Any]]] | None:
    """The (id, variants) of the entries ``ids`` from their answers/NNNN.js as
    render/answers.py's answers_part writes it (the reasons named again by text), or None
    where it is not that."""
    if not (old.startswith(_PART_START) and old.endswith(_PART_END)):
        return None
    try:
        data = json.loads(old[len(_PART_START) : -len(_PART_END)])
        reasons = _strings(data["reasons"])
        entries = data["entries"]
        if not (
            isinstance(entries, list)
            and [e[0] if isinstance(e, list) and len(e) == 2 else None for e in entries]
            == list(ids)
        ):
            return None
        out = []
        for eid, variants in entries:
            if not isinstance(variants, list):
                return None
            for v in variants:
                for nc in v["not_counted"]:
                    k = nc[1]
                    if type(k) is not int or not 0 <= k < len(reasons):
                        return None
                    nc[1] = reasons[k]
            out.append((eid, variants))
    except (ValueError, TypeError, KeyError, IndexError, RecursionError):
        return None
    return out
