"""matrix.yaml -> validated axes, rules and profiles -> cells.

Loading validates everything and names the offending line; expanding is a pure function
over the loaded data (no I/O), so the whole module is tested without any environment.

The YAML is read as a node tree (``yaml.compose`` with the safe loader): nothing is
constructed from tags, and every value keeps the line it came from.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import itertools
import os
import re
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

import yaml
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import Specifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from harness.domain import DEVICES, PRECISIONS, cell_id, env_id
from harness.errors import HarnessError
from harness.spec.yaml_values import YamlReader, compose_file, line_of

__all__ = [
    "AXES",
    "FORMAT_VERSION",
    "VERSION_AXES",
    "Cell",
    "Environment",
    "EnvironmentRow",
    "Excluded",
    "Expansion",
    "Matrix",
    "MatrixError",
    "Profile",
    "Rule",
    "describe",
    "load_matrix",
    "package_of",
    "version_key",
]

FORMAT_VERSION = 1
AXES = ("python", "torch", "lightning", "device", "precision")
VERSION_AXES = ("python", "torch", "lightning")

_DEFAULT_TRIALS = 1
_DEFAULT_TIMEOUT_S = 300.0
_DEFAULT_MEMORY_LIMIT_MB = 8192
_SPECIFIER_START = "<>=!~"


class MatrixError(HarnessError):
    """An invalid matrix file: ``str()`` is ``path:line: what is wrong (and what to do)``."""


# --- ordering ---------------------------------------------------------------------------
# Versions sort as versions ("1.9" < "1.10"), not as strings; devices and precisions in
# the order of DEVICES and PRECISIONS. An unparseable value (only possible when a record
# is built by hand, never from a loaded matrix) sorts after every version, by its text.


def version_key(text: str) -> tuple[int, Version | str]:
    try:
        return (0, Version(text))
    except ValueError:  # InvalidVersion, or more digits than int() converts
        return (1, text)


def _choice_key(text: str, order: tuple[str, ...]) -> tuple[int, str]:
    return (order.index(text), "") if text in order else (len(order), text)


_OPERATORS = (
    ("===", "aeq"),
    ("~=", "compat"),
    ("==", "eq"),
    ("!=", "ne"),
    ("<=", "le"),
    (">=", "ge"),
    ("<", "lt"),
    (">", "gt"),
)
_MAX_ID = 160  # an environment id, so that a cell id stays within a record's identifier limit


def _requirement_slug(text: str) -> str:
    """ "numpy<2" -> "numpy-lt2", "transformers==4.40.*" -> "transformers-eq4.40.x": a
    requirement as a part of a file name (a marker becomes a short digest of itself)."""
    requirement = Requirement(text)
    slug = canonicalize_name(requirement.name)
    if requirement.extras:
        slug += "-" + "-".join(sorted(requirement.extras))
    for spec in sorted(requirement.specifier, key=str):
        op = next(word for sign, word in _OPERATORS if spec.operator == sign)
        slug += f"-{op}{spec.version.replace('*', 'x')}"
    if requirement.marker is not None:
        slug += "-if" + hashlib.sha256(str(requirement.marker).encode()).hexdigest()[:6]
    return re.sub(r"[^A-Za-z0-9_.+-]", "_", slug)


def package_of(requirement: str) -> str:
    """The distribution a requirement names, canonical: what of the row's (its torch, its
    lightning, a pin) it replaces. ``pytorch-lightning`` is not the row's ``lightning``: it
    provides ``pytorch_lightning``, lightning ``lightning.pytorch``, and pip installs it
    beside the row's lightning (``pip install lightning==2.6.6 "pytorch-lightning<2.0"``
    leaves both), which code that imports ``lightning`` still runs."""
    return canonicalize_name(Requirement(requirement).name)


def _exact(pin: str) -> tuple[str, str] | None:
    """ "numpy==1.26.4" -> ("numpy", "1.26.4"): a pin of one release; None for a range."""
    try:
        requirement = Requirement(pin)
    except InvalidRequirement:
        return None
    specs = list(requirement.specifier)
    if requirement.marker is not None or len(specs) != 1 or specs[0].operator not in ("==", "==="):
        return None
    if specs[0].version.endswith(".*"):
        return None
    return canonicalize_name(requirement.name), specs[0].version


def _admits(requirement: Requirement, version: str) -> bool:
    try:
        return requirement.specifier.contains(Version(version), prereleases=True)
    except ValueError:  # InvalidVersion
        return False


# for a requirement's bound (operator, Y): the pin's bounds (operator, X) that admit only
# versions it admits too, each with the test X must pass against Y
_IMPLIES = {
    "<": {"<": Version.__le__, "<=": Version.__lt__, "==": Version.__lt__},
    "<=": {"<": Version.__le__, "<=": Version.__le__, "==": Version.__le__},
    ">": {">": Version.__ge__, ">=": Version.__gt__, "==": Version.__gt__},
    ">=": {">": Version.__ge__, ">=": Version.__ge__, "==": Version.__ge__},
}


# what an old release needs to import that a newer row's pins leave open: pytorch_lightning
# and lightning 1.x import pkg_resources, which setuptools removed after 80 (the rows of
# torch 2.5 and newer pin setuptools without a bound). (distribution, a release of the old
# line, the pin it needs, the first release that pin excludes)
IMPORT_NEEDS: tuple[tuple[str, str, str, str], ...] = (
    ("pytorch-lightning", "1.9.5", "setuptools<81", "81"),
    ("lightning", "1.9.5", "setuptools<81", "81"),
)


def import_needs(requires: Iterable[str], pins: tuple[str, ...]) -> tuple[str, ...]:
    """``pins`` with what the releases ``requires`` admits need to import (IMPORT_NEEDS):
    a requirement that admits an old line bounds the row's pin of what it needs
    (``setuptools`` -> ``setuptools<81``; ``setuptools<70`` already is), or adds it where
    the row has none. A requirement that names the needed package itself wins."""
    out = list(pins)
    named = {package_of(r) for r in requires}
    for requirement in requires:
        req = Requirement(requirement)
        for dist, old, need, excluded in IMPORT_NEEDS:
            if canonicalize_name(req.name) != dist or not req.specifier.contains(old):
                continue
            needed = Requirement(need)
            name = canonicalize_name(needed.name)
            if name in named:
                continue
            at = [i for i, p in enumerate(out) if package_of(p) == name]
            if not at:
                out.append(need)
            elif Requirement(out[at[0]]).specifier.contains(excluded):
                held = Requirement(out[at[0]])
                out[at[0]] = f"{held.name}{held.specifier & needed.specifier}"
    return tuple(out)


def _narrower(pinned: SpecifierSet, wanted: SpecifierSet) -> bool:
    """Whether every version ``pinned`` admits, ``wanted`` admits too, as far as bounds show
    (``setuptools<70`` within ``setuptools<81``, ``numpy<2`` within ``numpy<=2``): each of
    ``wanted``'s bounds is implied by one of ``pinned``'s. Another operator (``~=``, ``!=``,
    a wildcard) is never judged implied: the requirement is then applied, as before."""

    def bound(spec: Specifier) -> tuple[str, Version] | None:
        try:
            return spec.operator, Version(spec.version)
        except InvalidVersion:  # a wildcard (==1.16.*)
            return None

    have = [b for b in map(bound, pinned) if b is not None]
    for spec in wanted:
        want = bound(spec)
        if want is None or want[0] not in _IMPLIES:
            return False
        tests = _IMPLIES[want[0]]
        if not any(op in tests and tests[op](x, want[1]) for op, x in have):
            return False
    return len(wanted) > 0


@functools.total_ordering
@dataclass(frozen=True)
class Environment:
    """One virtualenv: an interpreter, a torch, a lightning and the pins old releases need.

    A *derived* environment (``requires`` not empty) is a cell's own with a variant's
    version advice applied ("numpy<2", "lightning<2.0"), as pip would follow it: a
    requirement the row already satisfies (``satisfied_by``) keeps the row's release and
    is not part of it; each other one replaces the row's pin of its package. What it
    installs is all it is: ``torch`` and ``lightning`` are the row's where it keeps them
    and "" where a requirement replaced them, so every cell whose requests resolve to the
    same set shares one derived environment. ``base`` is the cell it was first derived
    from; what it really installed is recorded with each run."""

    python: str  # "3.10" (major.minor)
    torch: str  # "1.12.1", an exact release ("" in a derived environment that replaced it)
    # "2.1.4", an exact release ("" where a derived environment replaced it, or replaced the
    # torch and installs no lightning)
    lightning: str
    pins: tuple[str, ...] = ()  # extra requirement strings, e.g. ("numpy<2",)
    find_links: tuple[str, ...] = ()  # local wheel folders, used where they exist
    # an interpreter that already has this torch and lightning (nothing is installed);
    # "" for an environment the harness builds
    interpreter: str = ""
    requires: tuple[str, ...] = ()  # a variant's requirements the row does not satisfy
    # False: a derived environment for a reproducer that imports no lightning installs none
    installs_lightning: bool = True
    # the cell's own environment a derived one was made from (not part of what it is:
    # cells whose requests resolve alike share one derived environment)
    row: Environment | None = field(default=None, compare=False, repr=False)

    @property
    def id(self) -> str:
        if not self.requires:
            return env_id(self.python, self.torch, self.lightning)
        head = f"py{self.python}"
        head += f"-torch{self.torch}" if self.torch else ""
        head += f"-lightning{self.lightning}" if self.lightning else ""
        tail = "" if self.installs_lightning else "-no-lightning"
        parts = [_requirement_slug(r) for r in self.requires]
        # the row's pins and wheel folders are named by its torch and lightning together: where
        # either was replaced, rows of one torch with other pins (lightning 1.9's pydantic<2
        # beside 2.0's none) would name two environments alike, and one's build would remove
        # the other's folder under its running jobs
        if not (self.torch and self.lightning):
            parts += [f"and-{_requirement_slug(p)}" for p in self.pins]
            if self.find_links:
                links = hashlib.sha256("\n".join(self.find_links).encode()).hexdigest()[:6]
                parts.append(f"links-{links}")
        derived = f"{head}-with-" + "-".join(parts)
        if len(derived + tail) <= _MAX_ID:
            return derived + tail
        whole = "\n".join((*self.requirements(), *self.find_links))
        digest = hashlib.sha256(whole.encode()).hexdigest()[:12]
        cut = derived[: _MAX_ID - len(digest) - len(tail) - 1].rstrip("-")
        return f"{cut}-{digest}{tail}"

    @property
    def base(self) -> Environment:
        """The cell's own environment (itself, where nothing is derived)."""
        if not self.requires:
            return self
        if self.row is not None:
            return self.row
        return dataclasses.replace(self, requires=(), installs_lightning=True)

    def satisfied_by(self, requirement: str, installed: Mapping[str, str] | None = None) -> str:
        """What of this row already satisfies ``requirement``, as pip would see it ("torch
        1.12.1", "numpy<2"); "" where nothing does. The row's exact releases (its torch, its
        lightning, a pin ``name==V``) are judged by the requirement's specifier; a pin of a
        range where it is the requirement's own (``numpy<2`` for ``numpy<2``) or narrower by
        its bounds (``setuptools<70`` for ``setuptools<81``); any other
        package by ``installed`` (name -> version, what the row's environment recorded). A
        requirement with extras or a marker is never judged satisfied here (what it adds is
        not in the row's pins). ``pytorch-lightning`` is its own distribution: the row's
        ``lightning`` does not satisfy it."""
        req = Requirement(requirement)
        if req.extras or req.marker is not None or req.url:
            return ""
        name = canonicalize_name(req.name)
        exact = {"torch": self.torch}
        if self.installs_lightning and self.lightning:
            exact["lightning"] = self.lightning
        exact.update(found for found in map(_exact, self.pins) if found is not None)
        if name in exact:
            return f"{name} {exact[name]}" if exact[name] and _admits(req, exact[name]) else ""
        for pin in self.pins:
            try:
                pinned = Requirement(pin)
            except InvalidRequirement:
                continue
            if canonicalize_name(pinned.name) == name and (
                pinned.specifier == req.specifier or _narrower(pinned.specifier, req.specifier)
            ):
                return pin if pinned.marker is None and not pinned.extras else ""
        have = {canonicalize_name(k): v for k, v in (installed or {}).items()}.get(name)
        return f"{name} {have}" if have and _admits(req, have) else ""

    def with_requires(
        self,
        requires: Iterable[str],
        lightning: bool = True,
        installed: Mapping[str, str] | None = None,
    ) -> Environment:
        """This environment with ``requires`` applied, as pip would: itself where every
        requirement is already satisfied (``satisfied_by``; ``installed``: what the row's
        environment recorded), else a derived one of the others, each replacing the row's
        pin of its distribution (``lightning<2.0`` the row's lightning; ``pytorch-lightning<2.0``
        none: it is installed beside it, as pip does, and the resolver refuses the pair where
        the row's lightning excludes it). ``lightning=False``: for a reproducer that imports
        no lightning, which then plays no part in what it measures (plan.one_per_torch) and
        is not installed."""
        unmet = tuple(r for r in requires if not self.satisfied_by(r, installed))
        if not unmet:
            return self
        replaced = {package_of(r) for r in unmet}
        # a lightning not installed still names the row while its torch does (one per torch)
        dropped = "lightning" in replaced or (not lightning and "torch" in replaced)
        kept = tuple(p for p in self.pins if package_of(p) not in replaced)
        return Environment(
            python=self.python,
            torch="" if "torch" in replaced else self.torch,
            lightning="" if dropped else self.lightning,
            pins=import_needs(unmet, kept),
            find_links=self.find_links,
            interpreter=self.interpreter,
            requires=unmet,
            installs_lightning=lightning,
            row=self,
        )

    def requirements(self) -> tuple[str, ...]:
        torch = (f"torch=={self.torch}",) if self.torch else ()
        has_lightning = self.installs_lightning and self.lightning
        lightning = (f"lightning=={self.lightning}",) if has_lightning else ()
        row = (*torch, *lightning, *self.pins)
        replaced = {package_of(r) for r in self.requires}
        return (*(r for r in row if package_of(r) not in replaced), *self.requires)

    def _key(self) -> tuple[object, ...]:
        return (
            version_key(self.torch),
            version_key(self.python),
            version_key(self.lightning),
            self.pins,
            self.find_links,
            self.interpreter,
            self.requires,
            self.installs_lightning,
        )

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, Environment):
            return NotImplemented
        return self._key() < other._key()


@functools.total_ordering
@dataclass(frozen=True)
class Cell:
    """One environment on one device at one precision."""

    env: Environment
    device: str  # "cpu" | "cuda"
    precision: str  # "fp32" | "fp16" | "bf16"

    @property
    def id(self) -> str:
        return cell_id(self.env.id, self.device, self.precision)

    def value(self, axis: str) -> str:
        """This cell's value on one of AXES."""
        if axis == "device":
            return self.device
        if axis == "precision":
            return self.precision
        if axis in VERSION_AXES:
            return str(getattr(self.env, axis))
        raise KeyError(f"unknown axis {axis!r}; axes are {', '.join(AXES)}")

    def _key(self) -> tuple[object, ...]:
        return (
            self.env._key(),
            _choice_key(self.device, DEVICES),
            _choice_key(self.precision, PRECISIONS),
        )

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, Cell):
            return NotImplemented
        return self._key() < other._key()


@dataclass(frozen=True)
class Excluded:
    cell: Cell
    reason: str  # the rule's reason text
    where: str  # "matrix.yaml:42", the rule that excluded the cell


@dataclass(frozen=True)
class Expansion:
    profile: str
    cells: tuple[Cell, ...]  # sorted
    excluded: tuple[Excluded, ...]  # sorted by cell
    trials: int
    timeout_s: float | None = None  # the profile's limit per run; None: the matrix default
    derived: bool = True  # the profile's ``derived``: whether it builds derived environments

    @property
    def environments(self) -> tuple[Environment, ...]:
        return tuple(sorted({cell.env for cell in self.cells}))


@dataclass(frozen=True)
class EnvironmentRow:
    """One entry of ``environments:``: a torch release and the pythons/lightnings that fit it."""

    torch: str
    python: tuple[str, ...]
    lightning: tuple[str, ...]
    pins: tuple[str, ...] = ()
    find_links: tuple[str, ...] = ()
    why: str = ""
    interpreter: str = ""  # an existing interpreter (one python, one lightning): see Environment
    line: int | None = field(default=None, compare=False)

    def environments(self) -> tuple[Environment, ...]:
        return tuple(
            sorted(
                Environment(py, self.torch, lit, self.pins, self.find_links, self.interpreter)
                for py, lit in itertools.product(self.python, self.lightning)
            )
        )


@functools.lru_cache(maxsize=1024)
def _pattern_matches(axis: str, pattern: str, value: str) -> bool:
    if axis not in VERSION_AXES:
        return pattern == value
    try:
        Version(value)
    except InvalidVersion:
        return False  # a package that does not import ("none") has no version to match
    if pattern[0] in _SPECIFIER_START:
        return SpecifierSet(pattern).contains(Version(value), prereleases=True)
    return Version(pattern) == Version(value)


@dataclass(frozen=True)
class Rule:
    """An ``exclude:`` rule: a cell matching every named axis is excluded, for ``reason``.

    Per axis, a rule lists one or more patterns, any of which may match: a device or
    precision name, or for python/torch/lightning an exact version ("1.10.2") or a
    PEP 440 specifier ("<1.11", ">=3.10", "==1.10.*").
    """

    conditions: tuple[tuple[str, tuple[str, ...]], ...]
    reason: str
    line: int | None = field(default=None, compare=False)

    def matches(self, cell: Cell) -> bool:
        return all(
            any(_pattern_matches(axis, pattern, cell.value(axis)) for pattern in patterns)
            for axis, patterns in self.conditions
        )


@dataclass(frozen=True)
class Profile:
    """A named selection of axis values; an axis it does not name is selected whole."""

    name: str
    description: str
    selections: Mapping[str, tuple[str, ...]] = field(
        default_factory=lambda: MappingProxyType({}), hash=False
    )
    trials: int | None = None  # overrides the matrix default when set
    timeout_s: float | None = None  # the limit per run: overrides the matrix default when set
    # False: the profile builds only its rows; a variant whose ``requires:`` needs an
    # environment of its own (version advice, its packages) is left out of its plan
    derived: bool = True
    line: int | None = field(default=None, compare=False)

    def selects(self, cell: Cell) -> bool:
        return all(cell.value(axis) in values for axis, values in self.selections.items())


@dataclass(frozen=True)
class Matrix:
    path: str
    default_profile: str
    profiles: Mapping[str, Profile] = field(hash=False)
    timeout_s: float
    memory_limit_mb: int
    trials: int
    rows: tuple[EnvironmentRow, ...] = ()
    devices: tuple[str, ...] = DEVICES
    precisions: tuple[str, ...] = PRECISIONS
    rules: tuple[Rule, ...] = ()

    @property
    def axes(self) -> Mapping[str, tuple[str, ...]]:
        """Every axis and its values, in report order."""
        envs = [env for row in self.rows for env in row.environments()]
        values: dict[str, tuple[str, ...]] = {
            axis: tuple(sorted({str(getattr(env, axis)) for env in envs}, key=version_key))
            for axis in VERSION_AXES
        }
        values["device"] = self.devices
        values["precision"] = self.precisions
        return MappingProxyType(values)

    def candidates(self) -> tuple[Cell, ...]:
        """Every cell the rows, devices and precisions make, before any rule: sorted."""
        return tuple(
            sorted(
                Cell(env, device, precision)
                for row in self.rows
                for env in row.environments()
                for device in self.devices
                for precision in self.precisions
            )
        )

    def where(self, rule: Rule) -> str:
        """Where a rule is written, as reports show it: "matrix.yaml:42"."""
        name = os.path.basename(self.path)
        return name if rule.line is None else f"{name}:{rule.line}"

    def excluding_rule(self, cell: Cell) -> Rule | None:
        """The first rule that excludes ``cell``, if any."""
        return next((rule for rule in self.rules if rule.matches(cell)), None)

    def expand(self, profile: str | None = None) -> Expansion:
        name = self.default_profile if profile is None else profile
        chosen = self.profiles.get(name)
        if chosen is None:
            raise MatrixError(
                self.path,
                None,
                f"unknown profile {name!r}; profiles: {', '.join(sorted(self.profiles))}",
            )
        cells: list[Cell] = []
        excluded: list[Excluded] = []
        for cell in self.candidates():
            if not chosen.selects(cell):
                continue
            rule = self.excluding_rule(cell)
            if rule is None:
                cells.append(cell)
            else:
                excluded.append(Excluded(cell, rule.reason, self.where(rule)))
        trials = self.trials if chosen.trials is None else chosen.trials
        return Expansion(
            name, tuple(cells), tuple(excluded), trials, chosen.timeout_s, chosen.derived
        )

    def expand_for(self, env: Environment, profile: str | None = None) -> Expansion:
        """A profile's cells in one environment that is not a row (``run --python``).

        The interpreter is what was asked for, so the profile's python, torch and lightning
        selections do not apply; its devices and precisions do, and so do the exclude rules.
        """
        full = self.expand(profile)  # validates the profile name
        chosen = self.profiles[full.profile]
        only_cells = Profile(
            chosen.name,
            chosen.description,
            MappingProxyType({a: v for a, v in chosen.selections.items() if a not in VERSION_AXES}),
        )
        cells: list[Cell] = []
        excluded: list[Excluded] = []
        for device, precision in itertools.product(self.devices, self.precisions):
            cell = Cell(env, device, precision)
            if not only_cells.selects(cell):
                continue
            rule = self.excluding_rule(cell)
            if rule is None:
                cells.append(cell)
            else:
                excluded.append(Excluded(cell, rule.reason, self.where(rule)))
        return Expansion(
            full.profile,
            tuple(cells),
            tuple(excluded),
            full.trials,
            full.timeout_s,
            full.derived,
        )


def describe(expansion: Expansion, only: Collection[str] | None = None) -> list[str]:
    """Plain lines for ``--list``: each environment and its cells, then every excluded cell;
    ``only``: the environment ids to show (those a filtered plan selects), the rest counted."""
    envs = expansion.environments
    lines = [
        f"profile {expansion.profile}: {len(expansion.cells)} cells in {len(envs)} "
        f"environments, {expansion.trials} trial(s) each; "
        f"{len(expansion.excluded)} cells excluded by rule"
    ]
    if only is not None:
        shown = [e for e in envs if e.id in only]
        lines.append(
            f"the filters select {len(shown)} of them (the other {len(envs) - len(shown)} "
            "are not listed):"
        )
        envs = tuple(shown)
        expansion = dataclasses.replace(
            expansion, excluded=tuple(x for x in expansion.excluded if x.cell.env.id in only)
        )
    for env in envs:
        cells = [cell for cell in expansion.cells if cell.env == env]
        lines.append(env.id)
        lines.append(f"  requires: {' '.join(env.requirements())}")
        if env.find_links:
            lines.append(f"  find-links: {' '.join(env.find_links)}")
        lines.append(f"  cells: {' '.join(f'{c.device}-{c.precision}' for c in cells)}")
    if expansion.excluded:
        lines.append("excluded:")
        lines.extend(f"  {ex.cell.id}: {ex.reason} ({ex.where})" for ex in expansion.excluded)
    return lines


# --- loading ------------------------------------------------------------------------------


def _join(items: Iterable[str]) -> str:
    return ", ".join(items)


def _lines(rules: Iterable[Rule | None]) -> str:
    return _join(str(n) for n in sorted({r.line for r in rules if r and r.line is not None}))


_TOP_KEYS = (
    "version",
    "defaults",
    "devices",
    "precisions",
    "environments",
    "exclude",
    "profiles",
    "default_profile",
)
_TOP_REQUIRED = ("version", "devices", "precisions", "environments", "profiles", "default_profile")
_DEFAULTS_KEYS = ("trials", "timeout_s", "memory_limit_mb")
_ROW_KEYS = ("torch", "python", "lightning", "pins", "find_links", "why", "interpreter")
_ROW_REQUIRED = ("torch", "python", "lightning")
_RULE_KEYS = (*AXES, "reason")
_PROFILE_KEYS = ("description", *AXES, "trials", "timeout_s", "derived")


def load_matrix(path: str | os.PathLike[str]) -> Matrix:
    """Load and validate a matrix file; raises MatrixError naming the line at fault."""
    where = os.fspath(path)
    read = YamlReader(where, MatrixError)
    root = compose_file(where, MatrixError, "the matrix file")
    top = read.mapping(root, "the matrix file", _TOP_KEYS, _TOP_REQUIRED)

    version = read.integer(top["version"], "version")
    if version != FORMAT_VERSION:
        read.fail(
            top["version"],
            f"matrix format version {version} is not understood by this harness "
            f"(it reads version {FORMAT_VERSION})",
        )

    trials, timeout_s = _DEFAULT_TRIALS, _DEFAULT_TIMEOUT_S
    memory_limit_mb = _DEFAULT_MEMORY_LIMIT_MB
    if "defaults" in top:
        defaults = read.mapping(top["defaults"], "defaults", _DEFAULTS_KEYS)
        if "trials" in defaults:
            trials = int(read.ranged(defaults["trials"], "defaults.trials", "trials"))
        if "timeout_s" in defaults:
            timeout_s = float(read.ranged(defaults["timeout_s"], "defaults.timeout_s", "timeout_s"))
        if "memory_limit_mb" in defaults:
            memory_limit_mb = int(
                read.ranged(
                    defaults["memory_limit_mb"], "defaults.memory_limit_mb", "memory_limit_mb"
                )
            )

    devices = _choices(read, top["devices"], "devices", DEVICES)
    precisions = _choices(read, top["precisions"], "precisions", PRECISIONS)
    rows = _rows(read, top["environments"])
    matrix = Matrix(
        path=where,
        default_profile="",
        profiles=MappingProxyType({}),
        timeout_s=timeout_s,
        memory_limit_mb=memory_limit_mb,
        trials=trials,
        rows=rows,
        devices=devices,
        precisions=precisions,
    )
    rules = _rules(read, top.get("exclude"), matrix)
    profiles = _profiles(read, top["profiles"], matrix)
    default_node = top["default_profile"]
    default_profile = read.string(default_node, "default_profile")
    if default_profile not in profiles:
        read.fail(
            default_node,
            f"default_profile {default_profile!r} is not a profile; name one of: {_join(profiles)}",
        )
    matrix = Matrix(
        path=where,
        default_profile=default_profile,
        profiles=MappingProxyType(profiles),
        timeout_s=timeout_s,
        memory_limit_mb=memory_limit_mb,
        trials=trials,
        rows=rows,
        devices=devices,
        precisions=precisions,
        rules=rules,
    )
    for profile in profiles.values():
        _check_not_empty(read, matrix, profile)
    return matrix


def _choices(
    read: YamlReader, node: yaml.Node, what: str, known: tuple[str, ...]
) -> tuple[str, ...]:
    if not isinstance(node, yaml.SequenceNode):
        read.fail(node, f"{what} must be a list, e.g. [{known[0]}]")
    values = read.strings(node, what)
    for value, item in values:
        if value not in known:
            read.fail(item, f"unknown {what[:-1]} {value!r} in {what}; known: {_join(known)}")
    return tuple(sorted((value for value, _ in values), key=known.index))


def _rows(read: YamlReader, node: yaml.Node) -> tuple[EnvironmentRow, ...]:
    items = read.sequence(node, "environments")
    if not items:
        read.fail(node, "environments is empty; list at least one torch release")
    rows: list[EnvironmentRow] = []
    seen: dict[tuple[Version, Version, Version], int] = {}
    for item in items:
        keys = read.mapping(item, "an environments row", _ROW_KEYS, _ROW_REQUIRED)
        torch = read.version(keys["torch"], "torch", "1.12.1")
        pythons = [(read.python(n, "python"), n) for _, n in read.strings(keys["python"], "python")]
        lightnings = [
            (read.version(n, "lightning", "2.1.4"), n)
            for _, n in read.strings(keys["lightning"], "lightning")
        ]
        pins: tuple[str, ...] = ()
        if "pins" in keys:
            pins = tuple(_pin(read, n) for _, n in read.strings(keys["pins"], "pins"))
        find_links: tuple[str, ...] = ()
        if "find_links" in keys:
            find_links = tuple(v for v, _ in read.strings(keys["find_links"], "find_links"))
        why = read.string(keys["why"], "why") if "why" in keys else ""
        interpreter = ""
        if "interpreter" in keys:
            interpreter = read.string(keys["interpreter"], "interpreter")
            if len(pythons) != 1 or len(lightnings) != 1:
                read.fail(
                    keys["interpreter"],
                    "a row with an interpreter is one environment: list one python and one "
                    "lightning (those the interpreter has)",
                )
            for key in ("pins", "find_links"):
                if key in keys:
                    read.fail(
                        keys[key],
                        f"{key} installs packages; nothing is installed into an existing "
                        "interpreter: remove it, or remove interpreter to have uv build it",
                    )
        for (python, _), (lightning, _) in itertools.product(pythons, lightnings):
            key = (Version(python), Version(torch), Version(lightning))
            if key in seen:
                env = Environment(python, torch, lightning)
                read.fail(
                    item,
                    f"duplicate environment {env.id}: the row at line {seen[key]} already "
                    "makes it; merge the two rows or remove one",
                )
            seen[key] = line_of(item)
        rows.append(
            EnvironmentRow(
                torch=torch,
                python=tuple(p for p, _ in pythons),
                lightning=tuple(lit for lit, _ in lightnings),
                pins=pins,
                find_links=find_links,
                why=why,
                interpreter=interpreter,
                line=line_of(item),
            )
        )
    return tuple(rows)


def _pin(read: YamlReader, node: yaml.Node) -> str:
    text = read.string(node, "each pin")
    try:
        requirement = Requirement(text)
    except InvalidRequirement as exc:
        read.fail(node, f'pin {text!r} is not a requirement string ({exc}); e.g. "numpy<2"')
    if canonicalize_name(requirement.name) in ("torch", "lightning"):
        read.fail(
            node,
            f"pin {text!r} pins {requirement.name}; set it with the row's "
            f"{requirement.name} key instead",
        )
    return text


def _patterns(read: YamlReader, node: yaml.Node, axis: str, matrix: Matrix) -> tuple[str, ...]:
    patterns: list[str] = []
    for value, item in read.strings(node, axis):
        if axis in VERSION_AXES:
            try:
                if value[0] in _SPECIFIER_START:
                    SpecifierSet(value)
                else:
                    Version(value)
            except ValueError:  # InvalidSpecifier, InvalidVersion, too many digits
                read.fail(
                    item,
                    f"{axis} {value!r} is neither a version nor a PEP 440 specifier; "
                    'write e.g. "1.10.2", "<1.11", ">=3.10" or "==1.10.*"',
                )
        else:
            known = matrix.devices if axis == "device" else matrix.precisions
            if value not in known:
                read.fail(item, f"unknown {axis} {value!r}; {axis}s in this matrix: {_join(known)}")
        patterns.append(value)
    return tuple(patterns)


def _rules(read: YamlReader, node: yaml.Node | None, matrix: Matrix) -> tuple[Rule, ...]:
    if node is None:
        return ()
    candidates = matrix.candidates()
    rules: list[Rule] = []
    for item in read.sequence(node, "exclude"):
        keys = read.mapping(item, "an exclude rule", _RULE_KEYS)
        if "reason" not in keys:
            read.fail(item, "exclude rule has no reason; say why these cells cannot exist")
        reason = read.string(keys["reason"], "reason")
        conditions = tuple(
            (axis, _patterns(read, keys[axis], axis, matrix)) for axis in AXES if axis in keys
        )
        if not conditions:
            read.fail(item, f"exclude rule names no axis; name at least one of: {_join(AXES)}")
        rule = Rule(conditions, reason, line_of(item))
        matched = [cell for cell in candidates if rule.matches(cell)]
        if not matched:
            read.fail(item, "exclude matches nothing: remove it or fix it")
        earlier = [next((r for r in rules if r.matches(cell)), None) for cell in matched]
        if all(earlier):
            lines = _lines(earlier)
            read.fail(
                item,
                f"exclude rule excludes nothing that the rule(s) on line(s) {lines} do not "
                "already exclude: remove it or fix it",
            )
        rules.append(rule)
    return tuple(rules)


def _profiles(read: YamlReader, node: yaml.Node, matrix: Matrix) -> dict[str, Profile]:
    if not isinstance(node, yaml.MappingNode) or not node.value:
        read.fail(node, "profiles must map at least one profile name to its selections")
    axes = matrix.axes
    profiles: dict[str, Profile] = {}
    for key_node, value_node in node.value:
        name = read.string(key_node, "a profile name")
        if name in profiles:
            read.fail(key_node, f"profile {name!r} is defined twice; keep one")
        what = f"profile {name!r}"
        keys = read.mapping(value_node, what, _PROFILE_KEYS, ("description",))
        description = read.string(keys["description"], f"{what} description")
        trials = (
            int(read.ranged(keys["trials"], f"{what} trials", "trials"))
            if "trials" in keys
            else None
        )
        timeout_s = (
            float(read.ranged(keys["timeout_s"], f"{what} timeout_s", "timeout_s"))
            if "timeout_s" in keys
            else None
        )
        derived = True
        if "derived" in keys:
            node_ = keys["derived"]
            if not isinstance(node_, yaml.ScalarNode) or node_.value not in ("true", "false"):
                read.fail(node_, f"{what} derived must be true or false")
            derived = node_.value == "true"
        selections: dict[str, tuple[str, ...]] = {}
        for axis in AXES:
            if axis not in keys:
                continue
            values = read.strings(keys[axis], f"{what} {axis}")
            for value, item in values:
                if value not in axes[axis]:
                    read.fail(
                        item,
                        f"{what} selects {axis} {value!r}, which is not on the {axis} axis; "
                        f"{axis} values: {_join(axes[axis])}",
                    )
            selections[axis] = tuple(value for value, _ in values)
        profiles[name] = Profile(
            name=name,
            description=description,
            selections=MappingProxyType(selections),
            trials=trials,
            timeout_s=timeout_s,
            derived=derived,
            line=line_of(key_node),
        )
    return profiles


def _check_not_empty(read: YamlReader, matrix: Matrix, profile: Profile) -> None:
    selected = [cell for cell in matrix.candidates() if profile.selects(cell)]
    if not selected:
        named = " and ".join(f"{axis} {'/'.join(v)}" for axis, v in profile.selections.items())
        read.fail(
            profile.line,
            f"profile {profile.name!r} selects no cell: no cell has {named}; change its selections",
        )
    blocking = [matrix.excluding_rule(cell) for cell in selected]
    if all(blocking):
        lines = _lines(blocking)
        read.fail(
            profile.line,
            f"profile {profile.name!r} selects no cell: the exclude rule(s) on line(s) {lines} "
            f"exclude all {len(selected)} cells it selects; widen the profile or narrow the rules",
        )
