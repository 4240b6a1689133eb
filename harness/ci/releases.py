"""New releases: which torch and lightning releases the package index has that matrix.yaml
does not, and the rows the matrix's rules give them.

``python -m harness plan --new-releases`` shows the rows, each choice with its why, and
changes nothing; ``--write`` adds them to matrix.yaml (the nightly does, then runs them
first). The index is asked through uv (``uv pip compile --no-deps``: the newest release
that satisfies a specifier, for one Python on x86-64 Linux), as the environments are built.

The rules, as the existing rows follow them:
- one row per new torch minor line, its newest patch (a newer patch of a line the matrix
  already follows is reported, not added: its records would be another release's);
- the Pythons of the newest row, each kept only where the index has that torch for it;
- the lightning lines whose range in Lightning's compatibility table contains the torch
  (``LIGHTNING_LINES``); a torch newer than every line's last tested one gets the newest
  line; each kept only where uv resolves torch and lightning together;
- the newest row's pins (``find_links`` are local folders of one release's wheels: not carried).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from packaging.version import InvalidVersion, Version

from harness.atomic import write_atomically
from harness.errors import HarnessError
from harness.spec.matrix import EnvironmentRow, Matrix, load_matrix

__all__ = [
    "LIGHTNING_LINES",
    "Choice",
    "Index",
    "LightningLine",
    "NewReleases",
    "NewRow",
    "UvIndex",
    "add_rows",
    "describe_new_releases",
    "find_new_releases",
    "row_yaml",
]

_ASK_TIMEOUT_S = 120
_PLATFORM = "x86_64-manylinux_2_28"  # the runners' platform: wheels the CI jobs can install


@dataclass(frozen=True)
class LightningLine:
    line: str  # "2.6"
    min_torch: str  # the oldest torch minor line it supports
    last_tested: str  # the newest torch minor line its CI tested


# Lightning's compatibility table (docs/source-pytorch/versioning.rst), as matrix.yaml's
# comment quotes it. A new lightning line is added here by hand, from that table.
LIGHTNING_LINES: tuple[LightningLine, ...] = (
    LightningLine("1.8", "1.10", "1.13"),
    LightningLine("1.9", "1.10", "1.13"),
    LightningLine("2.0", "1.11", "2.0"),
    LightningLine("2.1", "1.12", "2.1"),
    LightningLine("2.2", "1.13", "2.2"),
    LightningLine("2.3", "2.0", "2.3"),
    LightningLine("2.4", "2.1", "2.6"),
    LightningLine("2.5", "2.1", "2.8"),
    LightningLine("2.6", "2.1", "2.10"),
)


class Index(Protocol):
    def newest(self, requirements: Sequence[str], python: str) -> dict[str, str] | None:
        """The versions uv picks for these requirements on this Python, or None (no solution)."""


class UvIndex:
    """The package index as uv sees it (its configuration, its cache)."""

    def __init__(self, uv: str | None = None) -> None:
        self.uv = uv or str(Path(sys.executable).with_name("uv"))
        self.asked: list[str] = []

    def newest(self, requirements: Sequence[str], python: str) -> dict[str, str] | None:
        # --no-deps for a single package (its version list and metadata only); torch and
        # lightning together are resolved whole, to know they install together
        deps = [] if len(requirements) > 1 else ["--no-deps"]
        cmd = [
            self.uv, "pip", "compile", "-", "--quiet", "--no-header", "--no-annotate",
            "--python-version", python, "--python-platform", _PLATFORM, *deps,
        ]  # fmt: skip
        self.asked.append(f"{' '.join(requirements)} (Python {python})")
        env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
        try:
            done = subprocess.run(
                cmd,
                input="\n".join(requirements) + "\n",
                capture_output=True,
                text=True,
                timeout=_ASK_TIMEOUT_S,
                check=False,
                env=env,
            )
        except FileNotFoundError as exc:
            raise HarnessError(
                None, None, f"uv not found ({self.uv}): it is a dependency of the harness"
            ) from exc
        except subprocess.TimeoutExpired as exc:
            raise HarnessError(
                None, None, f"uv did not answer in {_ASK_TIMEOUT_S} s asking the index"
            ) from exc
        if done.returncode != 0:
            if "no solution found" in done.stderr.lower():
                return None
            said = done.stderr.strip().splitlines()[-1:] or ["(no output)"]
            raise HarnessError(None, None, f"uv could not ask the package index: {said[0]}")
        return _pinned(done.stdout)


def _pinned(text: str) -> dict[str, str]:
    found: dict[str, str] = {}
    for line in text.splitlines():
        m = re.match(r"^([A-Za-z0-9._-]+)==(\S+)", line.strip())
        if m:
            found[m.group(1).lower()] = m.group(2)
    return found


@dataclass(frozen=True)
class Choice:
    axis: str  # python, lightning, pins
    value: str  # "" for an empty choice (no pins)
    why: str
    kept: bool = True


@dataclass(frozen=True)
class NewRow:
    torch: str
    choices: tuple[Choice, ...]

    def values(self, axis: str) -> tuple[str, ...]:
        return tuple(c.value for c in self.choices if c.axis == axis and c.kept and c.value)

    @property
    def why(self) -> str:
        kept = [c for c in self.choices if c.kept and c.axis != "pins"]
        said = "; ".join(f"{c.axis} {c.value}: {c.why}" for c in kept)
        return f"new on the package index (plan --new-releases); {said}"

    @property
    def runnable(self) -> bool:
        return bool(self.values("python") and self.values("lightning"))


@dataclass(frozen=True)
class NewReleases:
    newest_torch: str  # on the index
    newest_lightning: str
    matrix_torch: str  # the newest the matrix has
    matrix_lightning: str
    rows: tuple[NewRow, ...]  # new torch lines, oldest first
    notes: tuple[str, ...]  # releases found and not added, and why


MAX_NEW_LINES = 8  # torch lines a plan asks the index about past the matrix's newest


def release_problem(version: str) -> str | None:
    """Why ``version`` is no release a matrix row may take (None: it is one): a local
    version (``+cpu``), a pre-, post- or dev release, or an absurd one (all three
    were added to matrix.yaml; 10,000 of them were queried one by one)."""
    if len(version) > 32:
        return "longer than 32 characters"
    try:
        v = Version(version)
    except (InvalidVersion, ValueError):
        return "not a version"
    if v.local is not None:
        return f"a local version (+{v.local})"
    if v.is_prerelease or v.is_devrelease or v.is_postrelease:
        return "a pre-, post- or development release"
    if v.epoch or len(v.release) > 3 or v.major > 99 or any(p > 999 for p in v.release):
        return "not a release number a matrix row takes (major.minor.patch, each at most 999)"
    return None


def _line(version: str) -> str:
    v = Version(version)
    return f"{v.major}.{v.minor}"


def _line_key(line: str) -> tuple[int, int]:
    major, minor = line.split(".")
    return int(major), int(minor)


def _newest(index: Index, requirement: str, python: str) -> str | None:
    found = index.newest([requirement], python)
    if not found:
        return None
    name = requirement.split(">")[0].split("<")[0].split("=")[0].strip().lower()
    return found.get(name)


def _lightning_choices(
    index: Index, torch: str, python: str, newest_lightning: str
) -> list[Choice]:
    t = _line_key(_line(torch))
    admitting = [
        line
        for line in LIGHTNING_LINES
        if _line_key(line.min_torch) <= t <= _line_key(line.last_tested)
    ]
    if admitting:
        wanted = [
            (line.line, f"its range is torch {line.min_torch}..{line.last_tested}")
            for line in admitting
        ]
    else:
        newest_tested = max(LIGHTNING_LINES, key=lambda x: _line_key(x.last_tested))
        if t < _line_key(newest_tested.last_tested):
            return [Choice("lightning", "", "no lightning line's range contains it", kept=False)]
        line = _line(newest_lightning)
        wanted = [
            (
                line,
                f"newer than every line's last tested torch ({newest_tested.last_tested}): "
                "the newest line",
            )
        ]
    choices = []
    for line, why in wanted:
        patch = _newest(index, f"lightning=={line}.*", python)
        if patch is None:
            choices.append(Choice("lightning", line, "not on the index", kept=False))
            continue
        problem = release_problem(patch)
        if problem is not None:
            choices.append(Choice("lightning", patch[:40], f"not taken: {problem}", kept=False))
            continue
        together = index.newest([f"torch=={torch}", f"lightning=={patch}"], python)
        if together is None:
            choices.append(
                Choice(
                    "lightning", patch, f"{why}; uv finds no install with torch {torch}", kept=False
                )
            )
        else:
            choices.append(Choice("lightning", patch, f"{why} (newest patch; installs with it)"))
    return choices


def _row_for(index: Index, torch: str, newest_row: EnvironmentRow, newest_lightning: str) -> NewRow:
    choices: list[Choice] = []
    for python in newest_row.python:
        if _newest(index, f"torch=={torch}", python) == torch:
            choices.append(
                Choice(
                    "python",
                    python,
                    f"as the newest row (torch {newest_row.torch}); the index has it",
                )
            )
        else:
            choices.append(
                Choice("python", python, f"the index has no torch {torch} for it", kept=False)
            )
    pythons = [c.value for c in choices if c.kept]
    if pythons:
        choices += _lightning_choices(index, torch, pythons[0], newest_lightning)
    if newest_row.pins:
        for pin in newest_row.pins:
            choices.append(Choice("pins", pin, f"as the newest row (torch {newest_row.torch})"))
    else:
        choices.append(Choice("pins", "", f"none, as the newest row (torch {newest_row.torch})"))
    return NewRow(torch=torch, choices=tuple(choices))


def find_new_releases(matrix: Matrix, index: Index) -> NewReleases:
    """What the index has that the matrix does not, and the rows the rules give it."""
    built = [row for row in matrix.rows if not row.interpreter]
    newest_row = max(built, key=lambda r: Version(r.torch))
    matrix_torch = newest_row.torch
    matrix_lightning = str(max(Version(lit) for row in built for lit in row.lightning))
    python = newest_row.python[-1]
    followed = {_line(row.torch) for row in built}
    notes: list[str] = []

    newest_lightning = _newest(index, "lightning", python) or matrix_lightning
    problem = release_problem(newest_lightning)
    if problem is not None:
        notes.append(f"lightning {newest_lightning[:40]} from the index is not taken: {problem}")
        newest_lightning = matrix_lightning
    if Version(newest_lightning) > Version(matrix_lightning):
        notes.append(
            f"lightning {newest_lightning} is newer than the matrix's newest ({matrix_lightning}): "
            "new torch rows take it; older rows are changed by hand (a new line needs its "
            "range in LIGHTNING_LINES, from Lightning's compatibility table)"
        )

    newest_torch = _newest(index, "torch", python) or matrix_torch
    rows: list[NewRow] = []
    bound: str | None = newest_torch
    asked = 0
    while bound is not None:
        problem = release_problem(bound)
        if problem is not None:
            notes.append(f"torch {bound[:40]} from the index is not added: {problem}")
            break
        if Version(bound) <= Version(matrix_torch):
            break
        asked += 1
        if asked > MAX_NEW_LINES:
            notes.append(
                f"more than {MAX_NEW_LINES} new torch lines: the index was not asked past "
                f"torch {bound}; add the older ones by hand"
            )
            break
        line = _line(bound)
        if line in followed:
            notes.append(
                f"torch {bound} is a newer patch of line {line}, which the matrix follows with "
                "another release: replace that row's torch by hand (its records are of that release)"
            )
        else:
            rows.append(_row_for(index, bound, newest_row, newest_lightning))
        bound = _newest(index, f"torch>{matrix_torch},<{line}", python)
    rows.sort(key=lambda r: Version(r.torch))
    return NewReleases(
        newest_torch=newest_torch,
        newest_lightning=newest_lightning,
        matrix_torch=matrix_torch,
        matrix_lightning=matrix_lightning,
        rows=tuple(rows),
        notes=tuple(notes),
    )


def describe_new_releases(found: NewReleases) -> list[str]:
    lines = [
        f"package index: torch {found.newest_torch}, lightning {found.newest_lightning}; "
        f"matrix.yaml: torch {found.matrix_torch}, lightning {found.matrix_lightning}"
    ]
    if not found.rows:
        lines.append("no new torch release: no row to add")
    for row in found.rows:
        state = "would add" if row.runnable else "cannot add (nothing installs)"
        lines.append(f"{state}: torch {row.torch}")
        for c in row.choices:
            mark = "+" if c.kept else "-"
            lines.append(f"  {mark} {c.axis} {c.value or '(none)'}: {c.why}")
    lines.extend(f"note: {n}" for n in found.notes)
    return lines


def _quoted(values: Sequence[str]) -> str:
    return "[" + ", ".join(f'"{v}"' for v in values) + "]"


def row_yaml(row: NewRow) -> str:
    """The row as matrix.yaml writes its rows (two-space list indent, quoted versions)."""
    text = (
        f'  - torch: "{row.torch}"\n'
        f"    python: {_quoted(row.values('python'))}\n"
        f"    lightning: {_quoted(row.values('lightning'))}\n"
    )
    if row.values("pins"):
        text += f"    pins: {_quoted(row.values('pins'))}\n"
    why = row.why.replace("\\", "\\\\").replace('"', '\\"')
    return text + f'    why: "{why}"\n'


def add_rows(path: Path, matrix: Matrix, rows: Sequence[NewRow]) -> list[str]:
    """Write the runnable rows after the last environments row; the file is validated
    whole (loaded) before it replaces matrix.yaml. Returns the torch releases added."""
    runnable = [r for r in rows if r.runnable]
    if not runnable:
        return []
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines(keepends=True)
    last = max(row.line or 0 for row in matrix.rows)  # 1-based line of the last row's "- "
    end = last  # the row goes on while lines are indented deeper than "  - "
    while end < len(lines) and lines[end].startswith("    ") and lines[end].strip():
        end += 1
    new_text = "".join(lines[:end]) + "".join(row_yaml(r) for r in runnable) + "".join(lines[end:])
    with tempfile.TemporaryDirectory() as tmp:
        trial = Path(tmp) / path.name
        trial.write_text(new_text, encoding="utf-8")
        load_matrix(trial)  # a row the rules make must load; a MatrixError says why
    write_atomically(path, new_text.encode("utf-8"), keep_mode=True)
    return [r.torch for r in runnable]
