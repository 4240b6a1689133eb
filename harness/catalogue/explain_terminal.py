"""The terminal side of `python -m harness explain` (harness/cli/explain.py): which entries a pasted traceback or message is, and
for the versions installed (``--python``, else this interpreter or the one on PATH that has
torch; or ``--torch``/``--lightning``) what each workaround and dead end did in the runs.
Exit 0 when an entry knows the error, 1 when there are only guesses (or nothing), 2 on a
usage error (the CLI's one error path)."""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import json
import os
import shlex
import shutil
import sys
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from harness.aggregate import (
    CONFIRMED,
    CONTRADICTED,
    INCONCLUSIVE,
    NOT_AS_DOCUMENTED,
    NOT_MEASURABLE,
)
from harness.catalogue.explain import (
    DOCUMENTED,
    GUESS,
    RELATED,
    SEEN,
    EntryAnswer,
    Explanation,
    VariantAnswer,
    Versions,
)

__all__ = ["PROBE_TIMEOUT_S", "find_versions", "probe_versions", "render"]

PROBE_TIMEOUT_S = 20.0  # an interpreter that takes longer to list its packages is not used

# Runs in the user's interpreter (Python 3.7+): the installed distributions' versions, read
# from their metadata (nothing is imported: fast, and safe in a broken environment)
_PROBE = r"""
import json, sys
try:
    from importlib import metadata
except ImportError:
    import importlib_metadata as metadata
out = {"python": "%d.%d.%d" % sys.version_info[:3]}
for name in ("torch", "lightning", "pytorch-lightning"):
    try:
        out[name] = metadata.version(name)
    except Exception:
        pass
print("HARNESS-VERSIONS " + json.dumps(out))
"""


def _dist_versions() -> dict[str, str]:
    """This interpreter's installed torch and lightning, from their metadata."""
    out: dict[str, str] = {}
    for name in ("torch", "lightning", "pytorch-lightning"):
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            out[name] = importlib.metadata.version(name)
    return out


def probe_versions(python: str, timeout: float = PROBE_TIMEOUT_S) -> dict[str, str] | str:
    """The versions installed in ``python`` (python, torch, lightning, pytorch-lightning),
    or why they could not be read."""
    if os.path.realpath(python) == os.path.realpath(sys.executable):
        v = sys.version_info
        return {"python": f"{v[0]}.{v[1]}.{v[2]}", **_dist_versions()}
    from harness.envs.backends import run_bounded

    try:  # bounded: a script's `sleep` holding the pipes, or 10 MB printed
        out = run_bounded([python, "-c", _PROBE], timeout)
    except OSError as exc:
        return f"{python} does not run: {exc}"
    if out.returncode is None:
        return f"{python} did not answer within {timeout:.0f} s"
    for line in out.stdout.splitlines():
        if line.startswith("HARNESS-VERSIONS "):
            try:
                return {str(k): str(v) for k, v in json.loads(line[17:]).items()}
            except ValueError:
                break
    tail = (out.stderr.strip().splitlines() or ["no output"])[-1][-200:]
    return f"{python} could not list its packages: {tail}"


def _as_versions(python: str, found: dict[str, str]) -> Versions:
    return Versions(
        torch=found.get("torch", ""),
        lightning=found.get("lightning") or found.get("pytorch-lightning", ""),
        python=python,
        python_version=found.get("python", ""),
    )


def find_versions(args: argparse.Namespace) -> tuple[Versions, str]:
    """The versions to answer for and where they come from, in words; ValueError on a
    usage error."""
    if args.torch or args.lightning:
        if args.python:
            raise ValueError("give --python or --torch/--lightning, not both")
        return Versions(torch=args.torch or "", lightning=args.lightning or ""), "as given"
    if args.python:
        found = probe_versions(args.python)
        if isinstance(found, str):
            raise ValueError(found)
        return _as_versions(args.python, found), f"read from {args.python}"
    candidates = [sys.executable]
    for name in ("python3", "python"):
        path = shutil.which(name)
        if path and all(os.path.realpath(path) != os.path.realpath(c) for c in candidates):
            candidates.append(path)
    for python in candidates:
        found = probe_versions(python)
        if isinstance(found, dict) and "torch" in found:
            where = "this interpreter" if python == sys.executable else "the python on PATH"
            return _as_versions(python, found), f"read from {python}, {where}"
    return Versions(), "no interpreter with torch found (name one with --python, or --torch)"


def _harness_command(repo: Path) -> str:
    """How to run this harness from the user's shell, as written."""
    on_path = shutil.which("python")
    python = "python"
    if not on_path or os.path.realpath(on_path) != os.path.realpath(sys.executable):
        python = shlex.quote(sys.executable)
    command = f"{python} -m harness"
    if repo.resolve() != Path.cwd().resolve():
        command += f" --repo {shlex.quote(str(repo))}"
    return command


# -- the terminal --------------------------------------------------------------------------

_MARK = {
    ("workaround", CONFIRMED): "[bold green]✔[/]",
    ("workaround", CONTRADICTED): "[bold red]✖[/]",
    ("dead_end", CONFIRMED): "[bold red]✖[/]",
    ("dead_end", CONTRADICTED): "[bold yellow]![/]",
    ("dead_end", NOT_AS_DOCUMENTED): "[bold red]✖[/]",
    ("baseline", CONFIRMED): "[bold red]✖[/]",
    # the documented error does not reproduce here: a glyph of its own, never a fix's ✔
    ("baseline", CONTRADICTED): "[bold cyan]○[/]",
}
_HOW = {
    DOCUMENTED: "the documented signature",
    RELATED: "the related error of variant {variant}",
    SEEN: "a message the runs raised ({variant}, ×{runs})",
    GUESS: "a guess: the closest message ({score:.0%} alike)",
}


def _mark(v: VariantAnswer) -> str:
    if v.advice == INCONCLUSIVE:
        return "[yellow]?[/]"
    return _MARK.get((v.kind, v.advice), "[dim]–[/]")


def _variant_lines(v: VariantAnswer, console: Console) -> None:
    ref = f" ({escape(v.claim_ref)})" if v.claim_ref else ""
    console.print(f"  {_mark(v)} [bold]{escape(v.name)}[/]{ref}: {escape(v.words)}")
    if v.seen_instead:
        console.print(f"      instead: {escape(v.seen_instead[:300])}")
    if v.cells:
        cells = "; ".join(f"{c.text()}" for c in v.cells[:6])
        more = f"; … {len(v.cells) - 6} more" if len(v.cells) > 6 else ""
        console.print(f"      cells here: {escape(cells + more)}", style="dim")
    if (
        v.claim_all is not None
        and v.claimed_rate is not None
        and v.claim_all.verdict != NOT_MEASURABLE
    ):
        here = f"here {v.claim_here.label}, " if v.claim_here is not None else ""
        console.print(
            f"      the document claims {escape(v.claim_all.claimed)}: {escape(here)}"
            f"over every measured version {escape(v.claim_all.label)}",
            style="dim",
        )
    if v.description:
        console.print(f"      {escape(v.description)}", style="italic")


def _answer(a: EntryAnswer, console: Console, first: bool) -> None:
    m = a.match
    console.rule(f"[bold]{escape(m.entry)}[/]", align="left")
    how = _HOW[m.how].format(variant=m.variant, runs=m.runs, score=m.score)
    foreign = a.foreign
    if not first:  # the first answer's is the headline
        console.print(f"[{'bold yellow' if foreign else 'bold'}]{escape(a.said)}[/]")
    for line in (a.occurs, a.devices):
        if line and line not in a.bottom_line:  # said once, in the bottom line below
            console.print(escape(line))
    for remedy in a.remedies:
        console.print(f"  [bold]the remedy your message names, as measured:[/] {escape(remedy)}")
    if a.bottom_line:
        console.print("[bold]In short, over every measured version:[/]")
        for sentence in a.bottom_line:
            console.print(f"  • {escape(sentence)}")
    if foreign:
        for name, description, label in m.readings:
            console.print(
                f"  the same step read otherwise, {escape(name)} ({escape(description[:160])}): "
                f"{escape(label) or 'not judged'} over every measured version",
                style="dim",
            )
    console.print(f"[bold]matched by[/] {how}: {escape(m.what[:300])}")
    if a.message is not None:
        what = "it" if m.how == DOCUMENTED else f"the documented message ({escape(a.signature)})"
        console.print(
            f"the runs on {what}: {escape(a.message.label)}, {escape(a.message.measured)}",
            style="dim",
        )
    style = "bold" if a.where.exact else "bold yellow"
    console.print(f"[{style}]for your versions:[/] {escape(a.where.said)}")
    measured = [b for b in a.baselines if b.here.n]
    for b in measured:
        console.print(f"  {_mark(b)} [bold]{escape(b.name)}[/] (the error): {escape(b.words)}")
    if not measured:
        console.print("  – the documented error was not measured here (no applicable baseline run)")
    for kind, title in (("workaround", "Workarounds"), ("dead_end", "Dead ends")):
        chosen = [v for v in a.variants if v.kind == kind]
        if chosen:
            if foreign:
                title += f" for the entry's error ({escape(a.signature[:120])}), not yours"
            console.print(f"[bold]{title}[/]")
            for v in chosen:
                _variant_lines(v, console)
    console.print(f"[bold]check it on your machine now:[/] {escape(a.command)}")


def _guesses(x: Explanation, console: Console) -> None:
    console.print(
        "[bold yellow]No entry knows this error.[/] The closest entries by message look "
        "like it but are not it [bold](guesses, not matches: their fixes are for their own "
        "errors)[/]:"
    )
    for a in x.answers:
        m = a.match
        if m.how != GUESS:  # a near miss: the same words, other parts where they vary
            console.print(f"  ≈ [bold]{escape(m.entry)}[/] (near miss): {escape(a.said)}")
            continue
        console.print(
            f"  ? [bold]{escape(m.entry)}[/] ({m.score:.0%} alike): {escape(m.what[:200])}"
        )
        title = "" if a.title in m.what else f"{a.title}; "
        console.print(f"      {escape(title)}check: {escape(a.command)}", style="dim")


def render(x: Explanation, how: str, console: Console) -> None:
    raised = x.raised[0].text() if x.raised else "(nothing)"
    console.print(f"[bold]{escape(x.headline)}[/]")
    console.print(f"[bold]your error:[/] {escape(raised[:500])}")
    console.print(f"[bold]your versions:[/] {escape(x.versions.text())} ({escape(how)})")
    if not x.answers:
        return
    if x.guessed:
        _guesses(x, console)
        return
    for i, a in enumerate(x.answers):
        _answer(a, console, first=i == 0)
