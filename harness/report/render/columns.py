"""The page's heatmap columns: an entry's environments grouped by torch release, one column
per lightning release beneath; for an entry whose reproducer imports no lightning, one
column per torch release (its runs in every environment of that release together).

Why: 57 environments as 57 labelled columns overflowed a 1280 px screen, and a torch-only
entry measured beside several lightnings looked like a sparse torch x lightning grid.
Grouped, a column's head is a short version ("2.5" under "2.5.1"), the full environment
ids are in its title, and a cell that holds several environments joins their trials
(``join_cells``), never hides one behind another.

Pure functions over the entry's environments (``EnvInfo``, in version order).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from packaging.version import InvalidVersion, Version

from harness.aggregate import CellValue, EnvInfo, cell_value_of

__all__ = ["Column", "Group", "env_columns", "join_cells", "public_version", "version_key"]


def public_version(text: str) -> str:
    """The release a user looks up: '2.4.1+cu121' -> '2.4.1'."""
    return text.split("+", 1)[0]


def version_key(text: str) -> tuple[int, Version | str]:
    """Sorts releases as versions; a text that is none after them."""
    try:
        return (0, Version(text))
    except InvalidVersion:
        return (1, text)


def _minor(text: str) -> str:
    try:
        release = Version(text).release
    except InvalidVersion:
        return text
    return ".".join(str(x) for x in release[:2])


@dataclass(frozen=True)
class Column:
    torch: str  # the public torch release
    lightning: str  # the public lightning release; "" in a torch-only entry's column
    label: str  # what its head shows
    envs: tuple[int, ...]  # indices into the entry's environments, in their order
    title: str  # its head's title: the releases and every environment it holds

    def env_text(self) -> str:
        """Its environments' indices as its head's data-envs writes them: '3 4'."""
        return " ".join(str(i) for i in self.envs)


@dataclass(frozen=True)
class Group:
    torch: str
    columns: tuple[Column, ...]


def _in_order(envs: Sequence[EnvInfo], key: str) -> dict[str, list[int]]:
    """Environment indices by public release of ``key`` (torch or lightning), in the
    environments' order (already version order)."""
    out: dict[str, list[int]] = {}
    for i, e in enumerate(envs):
        out.setdefault(public_version(getattr(e, key)), []).append(i)
    return out


def _ids(envs: Sequence[EnvInfo], indices: Iterable[int]) -> str:
    return ", ".join(envs[i].id for i in indices)


def env_columns(envs: Sequence[EnvInfo], torch_only: bool) -> tuple[Group, ...]:
    """The heatmap's column groups: per torch release, a column per lightning release
    (labelled by its minor, or by its release where two of one minor share a torch); a
    torch-only entry (``torch_only``) gets one column per torch release."""
    groups = []
    for torch, indices in _in_order(envs, "torch").items():
        if torch_only:
            lightnings = ", ".join(
                dict.fromkeys(
                    public_version(envs[i].lightning) for i in indices if envs[i].lightning
                )
            )
            beside = f", measured beside lightning {lightnings}" if lightnings else ""
            title = (
                f"torch {torch}{beside} (the reproducer imports no lightning: any lightning "
                f"gives this answer): {_ids(envs, indices)}"
            )
            groups.append(Group(torch, (Column(torch, "", torch, tuple(indices), title),)))
            continue
        by_lightning = _in_order([envs[i] for i in indices], "lightning")
        minors = [_minor(lit) for lit in by_lightning]
        columns = []
        for lightning, local in by_lightning.items():
            minor = _minor(lightning)
            label = minor if minors.count(minor) == 1 else lightning
            chosen = tuple(indices[j] for j in local)
            title = f"torch {torch} + lightning {lightning}: {_ids(envs, chosen)}"
            columns.append(Column(torch, lightning, label, chosen, title))
        groups.append(Group(torch, tuple(columns)))
    return tuple(groups)


def join_cells(values: Sequence[CellValue]) -> CellValue:
    """One cell of several environments' cells: their trials together (a status of its
    own where they disagree: flaky, the environments' each named in the cell's title)."""
    if len(values) == 1:
        return values[0]
    counts: dict[str, int] = {}
    for v in values:
        for outcome, n in v.counts:
            counts[outcome] = counts.get(outcome, 0) + n
    return cell_value_of(counts)
