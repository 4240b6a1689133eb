"""One GitHub issue per entry that regressed in a night, opened or updated through the
GitHub CLI (``gh``): an open issue titled for the entry gets a comment with the night's new
failures, else one is opened. ``dry_run`` says what it would run and runs nothing."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from harness.ci.nightly import regressions
from harness.errors import HarnessError

__all__ = ["issue_body", "issue_title", "report_regressions"]

_GH_TIMEOUT_S = 60


def issue_title(entry: str) -> str:
    return f"nightly regression: {entry}"


def issue_body(night: str, changes: Sequence[Mapping[str, Any]]) -> str:
    lines = [
        f"The nightly of {night} found {len(changes)} new failure(s) of `{changes[0]['entry']}`:",
        "",
    ]
    for c in changes:
        was = ", ".join(c["before"]["outcomes"])
        lines.append(
            f"- `{c['variant']}` ({c['kind']}) @ `{c['cell']}`: {was} on {c['before']['night']} "
            f"-> {', '.join(c['now'])}"
        )
    lines += ["", f"Snapshot: `results/nightly/{night}.json`."]
    return "\n".join(lines) + "\n"


def _run_gh(args: Sequence[str], stdin: str | None = None) -> str:
    try:
        done = subprocess.run(
            ["gh", *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=_GH_TIMEOUT_S,
            check=False,
        )
    except FileNotFoundError as exc:
        raise HarnessError(None, None, "gh (the GitHub CLI) is not on PATH") from exc
    except subprocess.TimeoutExpired as exc:
        raise HarnessError(None, None, f"gh {args[0]} ran past {_GH_TIMEOUT_S} s") from exc
    if done.returncode != 0:
        raise HarnessError(None, None, f"gh {' '.join(args[:2])} failed: {done.stderr.strip()}")
    return done.stdout


def report_regressions(
    snapshot: Mapping[str, Any],
    *,
    dry_run: bool,
    say: Callable[[str], None],
    gh: Callable[[Sequence[str], str | None], str] = _run_gh,
) -> list[str]:
    """Open or update one issue per regressed entry; returns what was done, one line each."""
    done: list[str] = []
    for entry, changes in sorted(regressions(snapshot).items()):
        title = issue_title(entry)
        body = issue_body(snapshot["night"], changes)
        find = ["issue", "list", "--state", "open", "--search", f'"{title}" in:title',
                "--json", "number,title"]  # fmt: skip
        if dry_run:
            line = (
                f"dry run: gh {' '.join(find)}; then gh issue comment <number> --body-file - "
                f"if an open issue is titled {title!r}, else gh issue create --title {title!r} "
                "--body-file -"
            )
            say(line)
            done.append(line)
            continue
        found = [i for i in json.loads(gh(find, None) or "[]") if i.get("title") == title]
        if found:
            number = str(found[0]["number"])
            gh(["issue", "comment", number, "--body-file", "-"], body)
            line = f"commented on issue #{number}: {title}"
        else:
            gh(["issue", "create", "--title", title, "--body-file", "-"], body)
            line = f"opened an issue: {title}"
        say(line)
        done.append(line)
    return done
