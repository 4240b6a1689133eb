"""Version advice read from records: what a variant's requirements changed in the cells it
answers for, what a cell already satisfied (as pip would, it keeps its release there), and
the runs that measured another release than pip would have left (the cell's where it
already satisfied every requirement, its torch or lightning where no requirement names
them): not that cell's answer. Pure functions over versions (name -> version, as records
keep them).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

__all__ = [
    "ANOTHER_RELEASE",
    "Change",
    "change_texts",
    "changes",
    "measured_another_release",
    "satisfied_in",
]

# package, the package the environment had in its place, its version there (None: unknown),
# the version it ran with (None: not installed), whether the cell's own release satisfied it
Change = tuple[str, str, str | None, str | None, bool]

ANOTHER_RELEASE = "measured another release"


def _canonical(versions: Mapping[str, str]) -> dict[str, str]:
    # versions are keyed by module ("pytorch_lightning") or by distribution ("pytorch-lightning")
    return {k.lower().replace("_", "-").replace(".", "-"): v for k, v in versions.items()}


def _release(version: str) -> str:
    """ "1.13.1+cu117" -> "1.13.1": the release a reader looks up."""
    return version.split("+", 1)[0]


def satisfied_in(row: Mapping[str, str], requirement: str) -> str | None:
    """The release of ``row`` (a cell's own versions) that already satisfies
    ``requirement``, as pip would see it; None where it does not, or cannot be told (the
    package unknown there, extras or a marker, which add what versions do not say).
    ``pytorch-lightning`` is its own distribution: a cell's ``lightning`` is not it."""
    req = Requirement(requirement)
    if req.extras or req.marker is not None or req.url:
        return None
    have = _canonical(row).get(canonicalize_name(req.name))
    if have is None:
        return None
    try:
        admitted = req.specifier.contains(Version(have), prereleases=True)
    except InvalidVersion:
        return None
    return _release(have) if admitted else None


# the cell's axes a derived environment keeps where no requirement names them
_AXES = ("torch", "lightning")


def _unnamed_axes_moved(
    row: Mapping[str, str], ran: Mapping[str, str], requires: Mapping[str, str]
) -> list[str]:
    """The cell's torch or lightning that no requirement names, which pip keeps, but that
    the run had at another release, or not at all where it had pytorch-lightning in its place
    (a derived environment made before ``pytorch-lightning`` was installed beside the cell's
    lightning; such a run imported ``lightning`` as a version-less "?" or not at all). A
    lightning simply absent is a reproducer that imports none: its derived environment
    installs none."""
    named = {canonicalize_name(Requirement(r).name) for r in requires.values()}
    was, now = _canonical(row), _canonical(ran)
    moved = []
    for axis in _AXES:
        have, after = was.get(axis), now.get(axis)
        if axis in named or not _is_release(have):
            continue
        if _is_release(after):
            if _release(after) != _release(have):
                moved.append(f"{axis} {_release(after)} where the cell's {_release(have)} stays")
        elif axis == "lightning" and "pytorch-lightning" in now:
            moved.append(
                f"pytorch-lightning {_release(now['pytorch-lightning'])} in place of the "
                f"cell's lightning {_release(have)}"
            )
    return moved


def _is_release(version: str | None) -> bool:
    try:
        return version is not None and bool(Version(version).release)
    except InvalidVersion:
        return False


def measured_another_release(
    row: Mapping[str, str], ran: Mapping[str, str], requires: Mapping[str, str]
) -> str:
    """Why a run of version advice is not its cell's answer, "" where it is: pip keeps
    every release of the cell (its own versions ``row``) that the requirements do not move,
    but the run (``ran``) measured another one. Either the cell already satisfied every
    requirement (a derived environment made before that rule replaced the cell's pin), or
    the cell's torch or lightning, which no requirement names, was not the run's (a
    ``pytorch-lightning`` requirement once replaced the cell's ``lightning``)."""
    if not requires:
        return ""
    unnamed = _unnamed_axes_moved(row, ran, requires)
    if unnamed:
        return (
            f"{ANOTHER_RELEASE}: "
            + "; ".join(unnamed)
            + " (pip keeps what no requirement names: the run that kept it is the cell's "
            "answer)"
        )
    moved: list[str] = []
    now = _canonical(ran)
    for requirement in requires.values():
        have = satisfied_in(row, requirement)
        if have is None:
            return ""
        name = canonicalize_name(Requirement(requirement).name)
        after = now.get(name)
        if after is not None and _release(after) != have:
            moved.append(
                f"{name} {_release(after)} where the cell's {have} already satisfies {requirement}"
            )
    if not moved:
        return ""
    return f"{ANOTHER_RELEASE}: " + "; ".join(moved) + " (the cell's own release is its answer)"


def changes(
    base: Mapping[str, str], ran: Mapping[str, str], requires: Mapping[str, str]
) -> list[Change]:
    """Per package a variant's requirements name: (package, the package the environment had
    in its place, its version there or None where unknown, the version it ran with or None
    where it was not installed, whether the environment's own release satisfied it).
    Each package is its own: pytorch-lightning is installed beside the cell's lightning."""
    was, now = _canonical(base), _canonical(ran)
    out: list[Change] = []
    for requirement in requires.values():  # (its package: the key may name its axis)
        name = canonicalize_name(Requirement(requirement).name)
        before, before_name = was.get(name), name
        after = now.get(name)
        out.append(
            (
                name,
                before_name,
                None if before is None else _release(before),
                None if after is None else _release(after),
                before_name == name and satisfied_in(base, requirement) is not None,
            )
        )
    return out


def _span(values: Sequence[str]) -> str:
    return ", ".join(values) if len(values) <= 3 else f"{values[0]} … {values[-1]} ({len(values)})"


def change_texts(found: Sequence[tuple[str, Change]], order: Mapping[str, int]) -> tuple[str, ...]:
    """What the requirements changed, one text per package over the environments (in
    ``order``): "torch 2.1.2 … 2.13.0 (14) → 2.0.1", "pytorch-lightning 1.9.5" or "onnx
    1.17.0" (its version where the environment had none known), "numpy 1.26.4
    (unchanged)"; and, where a cell's own release already satisfied the requirement (it
    keeps it, as pip would), "already satisfied here: torch 1.10.2, 1.11.0, 1.12.1"."""
    by_package: dict[tuple[str, str], list[tuple[int, str | None, str | None]]] = {}
    kept: dict[str, list[tuple[int, str]]] = {}
    for env, (name, before_name, before, after, satisfied) in found:
        if satisfied and before is not None:
            kept.setdefault(name, []).append((order.get(env, len(order)), before))
            continue
        by_package.setdefault((name, before_name), []).append(
            (order.get(env, len(order)), before, after)
        )
    texts = []
    for (name, before_name), rows in by_package.items():
        rows.sort(key=lambda r: r[0])
        moved = [r for r in rows if r[1] is not None and r[1] != r[2]]
        afters = list(dict.fromkeys(r[2] or "not installed" for r in (moved or rows)))
        if moved:
            befores = list(dict.fromkeys(r[1] for r in moved if r[1] is not None))
            into = f"{name} " if before_name != name else ""
            texts.append(f"{before_name} {_span(befores)} → {into}{_span(afters)}")
        elif any(r[1] is not None for r in rows):
            texts.append(f"{name} {_span(afters)} (unchanged)")
        else:
            texts.append(f"{name} {_span(afters)}")
    for name, rows in kept.items():
        releases = list(dict.fromkeys(v for _, v in sorted(rows)))
        texts.append(f"already satisfied here: {name} {_span(releases)}")
    return tuple(texts)
