"""`python -m harness msgsearch [ENTRY...]`: search every built environment for every
documented message's fixed parts and store the answers in results/msgsearch.json."""

from __future__ import annotations

import fnmatch
import os
import time
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from harness.catalogue.msgsearch import (
    documented_messages,
    load_results,
    merge_results,
    search_env,
    site_packages,
    write_results,
)
from harness.spec.entries import EntryError
from harness.spec.triage import TriageError

__all__ = ["msgsearch"]


def msgsearch(
    repo: Path,
    entry_globs: Sequence[str],
    env_globs: Sequence[str],
    envs_dir: str | None,
    out: str,
    console: Console,
) -> int:
    try:
        messages = documented_messages(repo / "repros")
    except (EntryError, TriageError) as exc:
        console.print(f"[bold red]error:[/] {escape(str(exc))}")
        return 2
    if entry_globs:
        messages = tuple(
            m for m in messages if any(fnmatch.fnmatchcase(m.entry, g) for g in entry_globs)
        )
        if not messages:
            console.print(f"[bold red]error:[/] no documented message matches {list(entry_globs)}")
            return 2
    root = Path(envs_dir or os.environ.get("HARNESS_ENVS_DIR") or repo / ".envs")
    envs = sorted(
        p
        for p in (root.iterdir() if root.is_dir() else ())
        if p.is_dir()
        and site_packages(p) is not None
        and (not env_globs or any(fnmatch.fnmatchcase(p.name, g) for g in env_globs))
    )
    if not envs:
        console.print(
            f"[bold red]error:[/] no environment under {escape(str(root))}"
            + (f" matches {list(env_globs)}" if env_globs else "")
        )
        return 2
    parts = sorted({p for m in messages for p in m.parts})
    cache: dict[tuple[int, int], set[bytes]] = {}
    searches = []
    for env in envs:
        started = time.monotonic()
        s = search_env(env, parts, cache)
        searches.append(s)
        console.print(
            f"{env.name}: {s.files} files, {s.bytes / 1e9:.2f} GB, "
            f"{sum(v is not None for v in s.hits.values())}/{len(parts)} fixed parts found "
            f"({time.monotonic() - started:.1f} s)"
        )
    path = repo / out
    try:
        results = merge_results(load_results(path), messages, searches)
    except ValueError as exc:
        console.print(f"[bold red]error:[/] {escape(str(exc))}")
        return 2
    write_results(path, results)
    width = max(len(m.entry) for m in messages)
    for m in messages:
        answers = [results["entries"][m.entry]["envs"][s.env]["found"] for s in searches]
        summary = ", ".join(
            f"{a} in {answers.count(a)}" for a in ("all", "some", "none") if a in answers
        )
        console.print(f"{m.entry.ljust(width)}  {summary}", highlight=False)
    console.print(f"wrote {path}")
    return 0
