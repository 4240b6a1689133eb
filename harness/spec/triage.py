"""repros/<kb>/<domain>/triage.yaml -> which knowledge-base entries a script can reproduce.

A knowledge base's domain is imported whole: every entry is listed here, including those no
minimal script can trigger (they stay "not reproducible by a script", with the reason, and
are never counted as contradicted). The file's format is described at its top.
"""

from __future__ import annotations

import functools
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from harness.errors import HarnessError
from harness.spec.yaml_nodes import YamlProblem, compose_plain, read_yaml_text

__all__ = [
    "SCRIPTABLE",
    "TriageEntry",
    "TriageError",
    "Triage",
    "UnmeasuredClaim",
    "find_triages",
    "load_triage",
    "triage_row",
]

# cpu: a script triggers it in any cell; cuda: it needs a CUDA device; no: no script can
SCRIPTABLE = ("cpu", "cuda", "no")
TRIAGE_FILE = "triage.yaml"


class TriageError(HarnessError):
    """An invalid triage file."""


@dataclass(frozen=True)
class UnmeasuredClaim:
    ref: str  # "dead end 3", "workaround 2"
    why: str


@dataclass(frozen=True)
class TriageEntry:
    kb_id: str
    url: str
    message: str  # the documented message, as the knowledge base writes it
    owner: str
    scriptable: str  # one of SCRIPTABLE
    entry: str | None  # the repros/ entry id, None when scriptable is "no"
    why: str
    unmeasured: tuple[UnmeasuredClaim, ...] = ()
    line: int = 0

    @property
    def reproducible(self) -> bool:
        return self.scriptable != "no"


@dataclass(frozen=True)
class Triage:
    path: Path
    repository: str
    source_path: str
    id_prefix: str  # our entry id for a row = id_prefix + kb_id
    entries: tuple[TriageEntry, ...]
    # the knowledge base's commit its records are kept at (unscripted/ and each entry's
    # kb-record.json; scripts/kb_keep_records.py), None where none are kept
    commit: str | None = None

    def entry_id(self, row: TriageEntry) -> str:
        """The id this row is known by here, with or without a reproducer."""
        return row.entry or self.id_prefix + row.kb_id

    def by_entry(self) -> dict[str, TriageEntry]:
        return {t.entry: t for t in self.entries if t.entry}


def _mapping(node: yaml.Node, path: Path, what: str) -> dict[str, tuple[yaml.Node, int]]:
    if not isinstance(node, yaml.MappingNode):
        raise TriageError(path, node.start_mark.line + 1, f"{what} must be a mapping")
    out: dict[str, tuple[yaml.Node, int]] = {}
    for key, value in node.value:
        name = key.value if isinstance(key, yaml.ScalarNode) else None
        if not isinstance(name, str):
            raise TriageError(path, key.start_mark.line + 1, f"keys of {what} must be strings")
        if name in out:
            raise TriageError(path, key.start_mark.line + 1, f"duplicate key {name!r} in {what}")
        out[name] = (value, key.start_mark.line + 1)
    return out


def _keys(
    data: dict[str, tuple[yaml.Node, int]],
    allowed: set[str],
    required: set[str],
    path: Path,
    line: int,
    what: str,
) -> None:
    for key, (_, kline) in data.items():
        if key not in allowed:
            raise TriageError(
                path, kline, f"unknown key {key!r} in {what}; allowed: {sorted(allowed)}"
            )
    missing = sorted(required - set(data))
    if missing:
        raise TriageError(path, line, f"{what} is missing required key(s) {missing}")


def _text(
    data: dict[str, tuple[yaml.Node, int]], key: str, path: Path, optional: bool = False
) -> Any:
    if key not in data:
        return None
    node, line = data[key]
    if not isinstance(node, yaml.ScalarNode):
        raise TriageError(path, line, f"{key} must be text")
    if node.tag == "tag:yaml.org,2002:null" or (
        node.value in ("", "null", "~") and node.style is None
    ):
        if optional:
            return None
        raise TriageError(path, line, f"{key} must not be empty")
    return " ".join(str(node.value).split())


def _row(node: yaml.Node, path: Path) -> TriageEntry:
    line = node.start_mark.line + 1
    data = _mapping(node, path, "a triage row")
    _keys(
        data,
        {"kb_id", "url", "message", "owner", "scriptable", "entry", "why", "unmeasured"},
        {"kb_id", "url", "message", "owner", "scriptable", "entry", "why"},
        path,
        line,
        "a triage row",
    )
    scriptable = _text(data, "scriptable", path)
    if scriptable not in SCRIPTABLE:
        raise TriageError(
            path,
            data["scriptable"][1],
            f"scriptable must be one of {list(SCRIPTABLE)}, got {scriptable!r}",
        )
    entry = _text(data, "entry", path, optional=True)
    if scriptable == "no" and entry is not None:
        raise TriageError(
            path, data["entry"][1], "an entry that no script can trigger has entry: null"
        )
    if scriptable != "no" and entry is None:
        raise TriageError(
            path, data["entry"][1], f"a {scriptable} entry names its repros/ entry id"
        )
    unmeasured: list[UnmeasuredClaim] = []
    if "unmeasured" in data:
        seq, uline = data["unmeasured"]
        if not isinstance(seq, yaml.SequenceNode):
            raise TriageError(path, uline, "unmeasured must be a list of {ref, why}")
        for item in seq.value:
            claim = _mapping(item, path, "an unmeasured claim")
            _keys(
                claim,
                {"ref", "why"},
                {"ref", "why"},
                path,
                item.start_mark.line + 1,
                "an unmeasured claim",
            )
            unmeasured.append(
                UnmeasuredClaim(ref=_text(claim, "ref", path), why=_text(claim, "why", path))
            )
    return TriageEntry(
        kb_id=_text(data, "kb_id", path),
        url=_text(data, "url", path),
        message=_text(data, "message", path),
        owner=_text(data, "owner", path),
        scriptable=scriptable,
        entry=entry,
        why=_text(data, "why", path),
        unmeasured=tuple(unmeasured),
        line=line,
    )


def load_triage(path: str | os.PathLike[str]) -> Triage:
    """Read and validate one triage file; every problem names the file and line."""
    path = Path(path)
    try:
        root = compose_plain(read_yaml_text(path))
    except OSError as exc:
        raise TriageError(path, None, f"cannot read: {exc.strerror}") from exc
    except YamlProblem as exc:
        raise TriageError(path, exc.line, f"not valid YAML: {exc.message}") from exc
    if root is None:
        raise TriageError(path, 1, "empty triage file")
    top = _mapping(root, path, "the triage file")
    _keys(top, {"source", "entries"}, {"source", "entries"}, path, 1, "the triage file")
    source = _mapping(top["source"][0], path, "source")
    _keys(
        source,
        {"repository", "path", "id_prefix", "commit"},
        {"repository", "path", "id_prefix"},
        path,
        top["source"][1],
        "source",
    )
    rows_node, rows_line = top["entries"]
    if not isinstance(rows_node, yaml.SequenceNode) or not rows_node.value:
        raise TriageError(path, rows_line, "entries must be a non-empty list of triage rows")
    rows = [_row(n, path) for n in rows_node.value]
    seen: dict[str, int] = {}
    prefix = _text(source, "id_prefix", path)
    for row in rows:
        if row.entry is not None and row.entry != prefix + row.kb_id:
            raise TriageError(
                path,
                row.line,
                f"entry {row.entry!r} must be id_prefix + kb_id: {prefix + row.kb_id!r}",
            )
        if row.kb_id in seen:
            raise TriageError(path, row.line, f"kb_id {row.kb_id!r} also at line {seen[row.kb_id]}")
        seen[row.kb_id] = row.line
    commit = _text(source, "commit", path) if "commit" in source else None
    if commit is not None and not re.fullmatch(r"[0-9a-f]{40}", commit):
        raise TriageError(path, source["commit"][1], f"source.commit {commit!r}: 40 hex digits")
    return Triage(
        path=path,
        repository=_text(source, "repository", path),
        source_path=_text(source, "path", path),
        id_prefix=_text(source, "id_prefix", path),
        entries=tuple(sorted(rows, key=lambda r: r.kb_id)),
        commit=commit,
    )


def find_triages(repros: str | os.PathLike[str]) -> tuple[Triage, ...]:
    """Every triage file under repros/, sorted by path."""
    return tuple(load_triage(p) for p in sorted(Path(repros).rglob(TRIAGE_FILE)))


@functools.lru_cache(maxsize=32)
def _load_cached(path: str, mtime_ns: int, size: int) -> Triage:
    # every entry of a domain asks for the same file: read it once while it is unchanged
    return load_triage(path)


def triage_row(
    entry_id: str, entry_dir: Path, root: str | os.PathLike[str] | None = None
) -> tuple[Triage, TriageEntry] | None:
    """The triage row of an entry: the nearest triage file above ``entry_dir`` (up to
    ``root``, repros/) that names ``entry_id``; None where none does."""
    stop = Path(root).resolve() if root is not None else None
    for folder in Path(entry_dir).resolve().parents:
        path = folder / TRIAGE_FILE
        if path.is_file():
            st = path.stat()
            triage = _load_cached(str(path), st.st_mtime_ns, st.st_size)
            row = triage.by_entry().get(entry_id)
            return (triage, row) if row is not None else None
        if folder == stop:
            break
    return None
