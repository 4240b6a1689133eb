"""What opens the page: the latest night's regressions, first on the page and in the README,
read from the newest snapshot under results/nightly/ (written by ``python -m harness
nightly``); with ``report --since REV``, the cells changed since REV (harness/aggregate/diff.py)."""

from __future__ import annotations

import html
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness.aggregate.diff import CATEGORIES, Diff

__all__ = ["html_changes", "html_lead", "latest_snapshot", "markdown_lead", "migrated"]

_NAME = re.compile(r"\d{4}-\d{2}-\d{2}\.json")
_LISTED = 20  # regressions named on the page; the snapshot has them all
_IN_README = 3
_READINGS = 2  # the snapshot schema whose changes say which code ran (harness/ci/nightly.py)


def latest_snapshot(
    results: Path, rewritten: Mapping[tuple[str, str], str] | None = None
) -> dict[str, Any] | None:
    """The newest snapshot, in the current schema (``rewritten``: when each variant's code
    was last rewritten, harness.ci.nightly.rewritten_since, for an older snapshot's changes)."""
    found = sorted(p for p in (results / "nightly").glob("*.json") if _NAME.fullmatch(p.name))
    if not found:
        return None
    return migrated(json.loads(found[-1].read_text(encoding="utf-8")), rewritten or {})


def migrated(
    snapshot: Mapping[str, Any], rewritten: Mapping[tuple[str, str], str]
) -> dict[str, Any]:
    """``snapshot`` with the changes across a rewrite of their variant apart. A snapshot
    written before it kept readings (schema 1, harness/ci/nightly.py) listed them with the
    others: a change of a variant whose declared rewrite is dated after the previous night
    and no later than the snapshot's night moves to ``reproducer_changed`` (by night, what
    schema 1 kept)."""
    if snapshot.get("schema", 1) >= _READINGS:
        return dict(snapshot)
    changes: dict[str, list[Any]] = {key: [] for key in snapshot["changes"]}
    changes["reproducer_changed"] = []
    for key, found in snapshot["changes"].items():
        for c in found:
            since = rewritten.get((c["entry"], c["variant"]), "")[:10]
            across = bool(since) and c["before"]["night"] < since <= snapshot["night"]
            changes["reproducer_changed" if across else key].append(c)
    return {**snapshot, "changes": changes}


def _counts(s: Mapping[str, Any]) -> str:
    c = s["changes"]
    new = s["new_releases"]
    releases = [f"torch {v}" for v in new["torch"]] + [f"lightning {v}" for v in new["lightning"]]
    # cells whose variant was rewritten between the nights: the reproducer changed, not torch
    rewritten = len(c.get("reproducer_changed", ()))
    changed = f", {rewritten} where the reproducer changed" if rewritten else ""
    return (
        f"{len(c['fixes'])} fixed, {len(c['flaky'])} flaky, {len(c['other'])} other changes"
        f"{changed}; new releases measured: {', '.join(releases) or 'none'}; "
        f"{len(s['claims_changed'])} claims changed verdict; "
        f"{s['records']['counted']:,} records"
    )


def _regressions(s: Mapping[str, Any]) -> str:
    found = s["changes"]["new_failures"]
    crossed = sum(1 for c in found if not c.get("same_revision", True))
    said = f"{len(found)} regression(s)"
    if crossed:
        # another harness revision ran the night before: the reproducer may have changed
        said += f" ({crossed} across another harness revision)"
    return said


def _line(c: Mapping[str, Any]) -> str:
    was = ", ".join(c["before"]["outcomes"])
    return f"{c['entry']} :: {c['variant']} @ {c['cell']}: {was} ({c['before']['night']}) -> {', '.join(c['now'])}"


def markdown_lead(s: Mapping[str, Any] | None, link: str) -> str:
    """The README's first lines of findings: ``link`` is the snapshot's path from the README."""
    if s is None:
        return ""
    regressions = s["changes"]["new_failures"]
    # one paragraph: the README stays a short front door; the page and the snapshot list all
    named = "; ".join(f"`{_line(c)}`" for c in regressions[:_IN_README])
    more = len(regressions) - _IN_README
    if more > 0:
        named += f"; and {more} more"
    return (
        f"**Latest night, {s['night']}** ([snapshot]({link})): {_regressions(s)}"
        + (f": {named}" if named else "")
        + f". {_counts(s)[0].upper()}{_counts(s)[1:]}.\n\n"
    )


def html_lead(s: Mapping[str, Any] | None) -> str:
    """A self-contained <section> put first on the page."""
    if s is None:
        return ""
    e = html.escape
    regressions = s["changes"]["new_failures"]
    out = [
        f'<section id="nightly"><h2>Latest night, {e(s["night"])}: {e(_regressions(s))}</h2>',
        f'<p>{e(_counts(s))} (<a href="nightly/{e(s["night"])}.json">snapshot</a>).</p>',
    ]
    if regressions:
        out.append("<ul>")
        out += [f"<li><code>{e(_line(c))}</code></li>" for c in regressions[:_LISTED]]
        out.append("</ul>")
    out.append("</section>")
    return "".join(out)


def html_changes(d: Diff, since: str) -> str:
    """A self-contained <section> for the top of index.html: "changed since <rev>"."""
    e = html.escape
    out = [
        '<section id="changed-since"><h2>Changed since ' + e(since) + "</h2>",
        f"<p>{len(d.changes)} cells changed, {d.unchanged} unchanged, {len(d.only_new)} new.</p>",
    ]
    for key, title in CATEGORIES:
        changes = d.by_category(key)
        if not changes:
            continue
        out.append(f"<h3>{e(title)} ({len(changes)})</h3><ul>")
        out += [f"<li><code>{e(c.line())}</code></li>" for c in changes]
        out.append("</ul>")
    out.append("</section>")
    return "".join(out)
