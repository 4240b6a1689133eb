"""`harness bisect ENTRY --variant V --device D --precision P --torch A..B | --lightning A..B`.

Finds the release where one cell's outcome changes. The released versions come from the
package index (PyPI's JSON API, cached under the environments folder for a day), only
those with a wheel for the interpreter. Each version's environment is the matrix's pairing
for it, with the pins of the row the release belongs to (a torch: the row of its series, or
of the greatest torch below it; a lightning: the rows listing its line; see environment_for;
``--python``/``--with-lightning``/``--with-torch`` override), so that a version the matrix
already measured reuses its stored records and built environment.

The search is a binary search that prefers, inside the interval still open, a version
whose outcome is already stored, then one whose environment is already built, then the
middle one: it builds as few environments as it can; an end that cannot be built stops it
before the other end is built. Each run is a normal record: in the store where a profile
names its environment, else in results/bisect/ (beside results/records/), which the report
does not read, so that a bisect's environments stay out of the report's tables. A version
whose outcome is neither end's, or stored outcomes that contradict the boundary found, are
reported as a non-monotonic history.

A range's end written short stands for its series (``..2.6`` includes 2.6.1 to 2.6.6). A
lightning bisect holds torch at the newest release the matrix crosses with every lightning
line of the range (the lightning sweep's 2.4.1), unless ``--with-torch`` says another.
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import os
import re
import time
import urllib.request
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from packaging.version import InvalidVersion, Version
from rich.console import Console

from harness.config import Config
from harness.domain import parse_version
from harness.errors import InputError
from harness.spec.entries import Entry, Variant
from harness.spec.matrix import Cell, Environment, EnvironmentRow, Matrix
from harness.store.jsonl import Store

__all__ = [
    "BisectError",
    "BisectRequest",
    "BisectResult",
    "Step",
    "bisect",
    "environment_for",
    "held_torch",
    "list_releases",
    "parse_range",
    "records_dir_for",
    "run_bisect",
    "run_cap",
    "build_plan",
    "index_listing",
    "may_build",
    "in_uv_cache",
    "wheel_bytes",
]

PYPI_JSON = "https://pypi.org/pypi/{name}/json"
CACHE_S = 24 * 3600


class BisectError(InputError):
    """The bisection cannot start or go on (a bad range, no releases, no boundary)."""


def parse_range(text: str) -> tuple[Version, Version]:
    lo, sep, hi = text.partition("..")
    try:
        if not sep:
            raise InvalidVersion(text)
        a, b = parse_version(lo), parse_version(hi)
    except InvalidVersion as exc:
        raise BisectError(
            f"a range is A..B with two versions, e.g. 2.0..2.13; got {text[:80]!r}: {exc}"
        ) from exc
    if a > b:
        raise BisectError(f"range {text!r}: {a} is above {b}")
    return a, b


def _within(v: Version, lo: Version, hi: Version) -> bool:
    """lo <= v <= hi, where an end written short stands for its whole series: ..2.6 holds
    2.6.1 to 2.6.6 (and 2.6.0.post1), 1.8.. starts at 1.8.0."""
    return v >= lo and tuple(v.release[: len(hi.release)]) <= hi.release


def _fetch(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=60) as response:  # noqa: S310 (fixed https URL)
        return json.load(response)


def _wheel_fits(filename: str, python: str) -> bool:
    if not filename.endswith(".whl"):
        return False
    tags = filename[:-4].split("-")[-3:]
    if len(tags) != 3:
        return False
    py, _abi, plat = tags
    cp = "cp" + python.replace(".", "")
    return (cp in py.split(".") or "py3" in py.split(".")) and ("linux" in plat or plat == "any")


def list_releases(
    package: str,
    lo: Version,
    hi: Version,
    python_of: Callable[[str], str],
    cache_dir: Path,
    fetch: Callable[[str], dict] = _fetch,
    now: float | None = None,
) -> tuple[list[str], str]:
    """Final releases of ``package`` in [lo, hi] with a Linux wheel for the interpreter
    ``python_of(version)`` will use, sorted, and where the listing came from (the index, or
    the cache and its age)."""
    cache = cache_dir / f"pypi-{package}.json"
    now = time.time() if now is None else now
    files: dict[str, list[str]] | None = None
    source = ""
    if cache.is_file():
        try:
            cached = json.loads(cache.read_text())
            if now - float(cached["fetched"]) < CACHE_S:
                files = cached["files"]
                source = f"cached listing ({(now - cached['fetched']) / 3600:.1f} h old, {cache})"
        except (ValueError, KeyError, TypeError):
            files = None
    if files is None:
        url = PYPI_JSON.format(name=package)
        try:
            data = fetch(url)
        except OSError as exc:
            raise BisectError(f"cannot list {package} releases from {url}: {exc}") from exc
        releases = (data.get("releases") or {}).items()
        files = {
            v: [f.get("filename", "") for f in entries if not f.get("yanked")]
            for v, entries in releases
        }
        sizes = {
            f.get("filename", ""): f["size"]
            for _, entries in releases
            for f in entries
            if isinstance(f.get("size"), int)
        }
        cache_dir.mkdir(parents=True, exist_ok=True)
        tmp = cache.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"fetched": now, "files": files, "sizes": sizes}))
        os.replace(tmp, cache)
        source = f"{url} (cached in {cache})"
    out = []
    for text, names in files.items():
        try:
            v = parse_version(text)
        except InvalidVersion:
            continue
        if v.is_prerelease or v.is_devrelease or not _within(v, lo, hi):
            continue
        if any(_wheel_fits(n, python_of(str(v))) for n in names):
            out.append(v)
    return [str(v) for v in sorted(out)], source


def wheel_bytes(package: str, version: str, python: str, cache_dir: Path) -> int | None:
    """The size of the Linux wheel of ``package`` ``version`` for ``python``, from the listing
    ``list_releases`` cached (None where it holds no size: not listed yet, or no such wheel)."""
    try:
        cached = json.loads((cache_dir / f"pypi-{package}.json").read_text())
        names, sizes = cached["files"].get(version, []), cached.get("sizes", {})
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    fits = [sizes[n] for n in names if _wheel_fits(n, python) and isinstance(sizes.get(n), int)]
    return max(fits) if fits else None


def uv_cache_dir() -> Path:
    """uv's cache: UV_CACHE_DIR, else $XDG_CACHE_HOME/uv (~/.cache/uv)."""
    if os.environ.get("UV_CACHE_DIR"):
        return Path(os.environ["UV_CACHE_DIR"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "uv"


def in_uv_cache(package: str, version: str, cache: Path | None = None) -> bool:
    """Whether uv's cache already holds the unpacked wheel of ``package`` ``version`` (a
    local build such as 2.13.0+cpu counts): installing it downloads nothing."""
    root = (cache or uv_cache_dir()) / "archive-v0"
    name = package.replace("-", "_")
    return any(root.glob(f"*/{name}-{version}.dist-info")) or any(
        root.glob(f"*/{name}-{version}+*.dist-info")
    )


@dataclass(frozen=True)
class Build:
    """An environment a bisect may build, and what building it downloads."""

    env: Environment
    bytes: int | None  # the wheels not in uv's cache; None: a size the listing lacks
    said: str  # "torch 2.5.0 wheel 906 MB; lightning 2.6.6 in the uv cache"


def may_build(env: Environment, cache_dir: Path, uv_cache: Path | None = None) -> Build:
    """What building ``env`` downloads: its torch and lightning wheels where uv's cache does
    not hold them (a CUDA torch also brings its nvidia-* libraries where they are not
    cached: not counted, the listing does not size them)."""
    total: int | None = 0
    said = []
    for package, version in (("torch", env.torch), ("lightning", env.lightning)):
        if not version:
            continue
        if in_uv_cache(package, version, uv_cache):
            said.append(f"{package} {version} in the uv cache")
            continue
        size = wheel_bytes(package, version, env.python, cache_dir)
        if size is None:
            said.append(f"{package} {version} wheel (size not listed)")
            total = None
        else:
            said.append(f"{package} {version} wheel {size / 1e6:,.0f} MB")
            total = None if total is None else total + size
    return Build(env, total, "; ".join(said))


def build_plan(builds: Sequence[Build], cap: int, max_builds: int | None) -> list[str]:
    """The lines printed before anything is built: each environment that may be built and
    its download, and the most that can be downloaded (the largest of as many as may be
    built: ``cap``, or fewer under ``max_builds``)."""
    if not builds:
        return ["environments it may build: none (every version is stored or built)"]
    most = min(cap, len(builds))
    capped = max_builds is not None and max_builds < most
    most = min(most, max_builds) if max_builds is not None else most
    lines = [
        f"environments it may build: {len(builds)}, at most {most} of them"
        + (f" (--max-builds {max_builds})" if capped else "")
        + "; each with what it downloads:"
    ]
    lines += [f"  {b.env.id}: {b.said}" for b in builds]
    sized = sorted((b.bytes for b in builds if b.bytes is not None), reverse=True)
    worst = sum(sized[:most])
    lines.append(
        f"at most {worst / 1e9:.1f} GB of wheels to download"
        + (" (some sizes not listed)" if len(sized) < len(builds) else "")
        + "; a CUDA torch adds its nvidia-* libraries where uv's cache lacks them"
    )
    return lines


def index_listing(package: str, cache_dir: Path) -> None:
    """Fill (or keep) the cached listing of ``package`` that sizes its wheels; where the
    index cannot be reached the sizes are said to be unlisted."""
    with contextlib.suppress(BisectError):
        list_releases(package, Version("0"), Version("0"), lambda v: "3.11", cache_dir)


def _series(version: str) -> tuple[int, ...]:
    """A release's line: "1.8.0.post1" -> (1, 8)."""
    return Version(version).release[:2]


def _buildable(matrix: Matrix) -> list[EnvironmentRow]:
    rows = sorted((r for r in matrix.rows if not r.interpreter), key=lambda r: Version(r.torch))
    if not rows:
        raise BisectError(f"{matrix.path} lists no environments the harness builds")
    return rows


def _lists_line(row: EnvironmentRow, version: str) -> bool:
    return any(_series(lit) == _series(version) for lit in row.lightning)


def held_torch(matrix: Matrix, lightnings: Sequence[str]) -> str | None:
    """The torch a lightning bisect holds: the newest release the matrix crosses with every
    lightning line of ``lightnings`` (so that only lightning changes between steps); None
    where no torch has them all."""
    rows = _buildable(matrix)
    lines = {_series(v) for v in lightnings}
    torches = {r.torch for r in rows}
    fits = [
        t
        for t in torches
        if all(any(_lists_line(r, f"{a}.{b}") for r in rows if r.torch == t) for a, b in lines)
    ]
    return max(fits, key=Version) if fits else None


def environment_for(
    matrix: Matrix,
    axis: str,
    version: str,
    *,
    python: str | None = None,
    with_lightning: str | None = None,
    with_torch: str | None = None,
) -> Environment:
    """The environment that measures ``version`` on ``axis`` (torch or lightning), with the
    pins of the matrix row the release belongs to (what its release needs to import).

    torch: the row of the same release series (2.4.0 -> the 2.4.1 row), or of the greatest
    torch below it; its newest lightning and python that no rule excludes (``with_lightning``:
    that lightning, with the pins of the row of that torch listing its line).
    lightning: the rows listing the release's line (1.8.0 -> the rows of 1.8.6); the newest
    torch among them, or ``with_torch`` (the pins of that line's row at that torch, else at
    the greatest torch below it)."""
    rows = _buildable(matrix)

    def allowed(env: Environment) -> bool:
        return matrix.excluding_rule(Cell(env, "cpu", "fp32")) is None

    if axis == "lightning":
        return _lightning_environment(rows, version, python, with_torch, allowed)
    torch = version
    wanted = Version(torch)
    series = [r for r in rows if Version(r.torch).release[:2] == wanted.release[:2]]
    below = [r for r in rows if Version(r.torch) <= wanted] or rows[:1]
    # a torch release may span several rows (lightning lines that need different pins):
    # of all of them, the environment with the newest lightning, then the newest python
    same = series or [r for r in below if r.torch == below[-1].torch]
    if with_lightning is not None:  # the row whose lightning line that is, where one has it
        same = [r for r in same if _lists_line(r, with_lightning)] or same
    pairs = [(r, e) for r in same for e in r.environments() if allowed(e)] or [
        (r, e) for r in same for e in r.environments()
    ]
    row, base = max(pairs, key=lambda p: (Version(p[1].lightning), Version(p[1].python)))
    return Environment(
        python=python or base.python,
        torch=torch,
        lightning=with_lightning or base.lightning,
        pins=row.pins,
        find_links=row.find_links,
    )


def _lightning_environment(
    rows: list[EnvironmentRow],
    version: str,
    python: str | None,
    with_torch: str | None,
    allowed: Callable[[Environment], bool],
) -> Environment:
    own = [r for r in rows if _lists_line(r, version)]
    if not own:  # a line no row lists: the rows of the greatest line below it (or the first)
        lines = sorted({_series(lit) for r in rows for lit in r.lightning})
        near = [ln for ln in lines if ln <= _series(version)] or lines[:1]
        own = [r for r in rows if _lists_line(r, ".".join(map(str, near[-1])))]
    torch = with_torch or max((r.torch for r in own), key=Version)
    at = [r for r in own if r.torch == torch]
    if not at:
        below = [r for r in own if Version(r.torch) <= Version(torch)] or own[:1]
        at = [r for r in below if r.torch == below[-1].torch]
    row = at[-1]
    candidates = [Environment(py, torch, version, row.pins, row.find_links) for py in row.python]
    fits = [e for e in candidates if allowed(e)] or candidates
    chosen = max(fits, key=lambda e: Version(e.python))
    return Environment(
        python=python or chosen.python,
        torch=torch,
        lightning=version,
        pins=row.pins,
        find_links=row.find_links,
    )


def records_dir_for(env: Environment, matrix: Matrix, records_dir: Path) -> Path:
    """Where a bisect keeps the records of ``env``: with the matrix's (``records_dir``)
    where a profile names the environment, else in a bisect folder beside it, which the
    report does not read (its tables show the matrix's environments)."""
    if env.id in _profile_environments(matrix):
        return records_dir
    return records_dir.parent / "bisect"


def _profile_environments(matrix: Matrix) -> frozenset[str]:
    return frozenset(e.id for name in matrix.profiles for e in matrix.expand(name).environments)


@dataclass(frozen=True)
class Step:
    version: str
    env: Environment
    outcome: str  # what two steps must share to be one outcome (see bisect's docstring)
    how: str  # "stored record", "run (environment reused)", "run (environment built)"
    detail: str = ""


@dataclass
class BisectResult:
    axis: str
    versions: list[str]
    steps: list[Step] = field(default_factory=list)
    known: dict[str, str] = field(default_factory=dict)  # version -> outcome
    boundary: tuple[str, str] | None = None  # last version with the low outcome, first other
    notes: list[str] = field(default_factory=list)
    built: list[str] = field(default_factory=list)  # environment ids built by this bisect
    # why the search stopped before a boundary: a third outcome midway, an end that does not
    # hold when re-run, the run cap ("" where it found one)
    stopped: str = ""
    # versions inside the boundary left unmeasured (not built under --max-builds, or their
    # environment failed): the change lies somewhere among them
    unmeasured: list[str] = field(default_factory=list)
    runs: int = 0
    builds: int = 0

    @property
    def monotonic(self) -> bool:
        return not any(n.startswith("non-monotonic") for n in self.notes)


Measure = Callable[[str, Environment], Step]


def run_cap(n: int) -> int:
    """The most runs one boundary may take among ``n`` versions: the two ends and a binary
    search's ceil(log2 n) steps."""
    return math.ceil(math.log2(max(n, 2))) + 2


class _Stop(Exception):
    """The search cannot go on; its message says why (BisectResult.stopped)."""


def bisect(
    axis: str,
    versions: Sequence[str],
    env_of: Callable[[str], Environment],
    stored: dict[str, str],
    is_built: Callable[[Environment], bool],
    measure: Measure,
    report: Callable[[Step], None] = lambda step: None,
    *,
    max_builds: int | None = None,
    fresh: Collection[str] = (),
) -> BisectResult:
    """Binary search over ``versions`` (sorted) for the first change of outcome, checking
    itself as it goes.

    ``stored`` maps a version to the outcome its stored runs give (no run needed);
    ``measure`` runs the cell (building the environment if it must) and returns a Step.
    An outcome is a string compared whole: the caller puts in it what must agree (an entry's
    outcome with the raised type and its grade; a script's exception type and masked
    message), so that a step's error is the same error as an end's, not merely an error.

    The rules: both ends are measured first (or read from stored runs, and then run again
    where their environment is built, unless this call has just run it, ``fresh``: an end that
    does not hold stops it); every other step
    must give one end's outcome, else the search stops and says which version gave what; an
    environment that fails, or would be one build more than ``max_builds``, is left
    unmeasured and the search goes on around it (the boundary then spans what is
    unmeasured); at most ``run_cap(len(versions))`` runs; stored outcomes that contradict
    the boundary found are reported as a non-monotonic history.
    """
    if len(versions) < 2:
        raise BisectError(f"{len(versions)} release(s) in the range: nothing to bisect")
    search = _Search(
        BisectResult(axis, list(versions)),
        env_of,
        stored,
        is_built,
        measure,
        report,
        max_builds,
        run_cap(len(versions)),
        frozenset(fresh),
    )
    return search.run()


@dataclass
class _Search:
    """One bisection's state: the outcomes known so far (stored or measured), the versions
    left unmeasured, and the range [lo, hi] that holds the change."""

    result: BisectResult
    env_of: Callable[[str], Environment]
    stored: dict[str, str]
    is_built: Callable[[Environment], bool]
    measure: Measure
    report: Callable[[Step], None]
    max_builds: int | None
    cap: int
    fresh: frozenset[str] = frozenset()
    unusable: set[int] = field(default_factory=set)

    @property
    def versions(self) -> list[str]:
        return self.result.versions

    def price(self, v: str) -> int:
        """A stored outcome costs nothing, a built environment one run, else a build too."""
        if v in self.stored or v in self.result.known:
            return 0
        return 1 if self.is_built(self.env_of(v)) else 2

    def can_build(self) -> bool:
        return self.max_builds is None or self.result.builds < self.max_builds

    def run_one(self, v: str) -> Step:
        """A fresh run of ``v`` (building its environment where it must), within the cap."""
        if self.result.runs >= self.cap:
            raise _Stop(
                f"the run cap is reached ({self.cap} runs: ceil(log2 {len(self.versions)}) + 2)"
            )
        env = self.env_of(v)
        builds = not self.is_built(env)
        step = self.measure(v, env)
        self.result.runs += 1
        self.result.builds += builds
        return step

    def outcome(self, i: int) -> str | None:
        """``versions[i]``'s outcome: known, stored, or measured; None where measuring it
        would be a build more than --max-builds allows."""
        v = self.versions[i]
        known = self.result.known
        if v not in known:
            if v in self.stored:
                step = Step(v, self.env_of(v), self.stored[v], "stored record")
            elif self.price(v) == 2 and not self.can_build():
                return None
            else:
                step = self.run_one(v)
            known[v] = step.outcome
            self.result.steps.append(step)
            self.report(step)
        return known[v]

    def end(self, i: int) -> str:
        v = self.versions[i]
        seen = self.outcome(i)
        if seen is None:
            raise BisectError(
                f"{v}: its environment is not built and --max-builds {self.max_builds} allows "
                "no further build; choose ends that are stored or built, or allow more builds"
            )
        if seen == "env_failed":  # stop here: the other end is not built for nothing
            raise BisectError(
                f"{v}: its environment could not be built (stored as env_failed); choose a "
                "range whose ends build"
            )
        first = self.result.steps[-1] if self.result.steps else None
        stored_now = first is not None and first.version == v and first.how == "stored record"
        if stored_now and v not in self.fresh:
            if self.is_built(self.env_of(v)):  # re-checked by a run: no build needed
                again = self.run_one(v)
                self.result.steps.append(again)
                self.report(again)
                if again.outcome != seen:
                    raise _Stop(
                        f"the end {v} does not hold: its stored runs give {seen}, a run now "
                        f"gives {again.outcome}; nothing bisected"
                    )
            else:
                self.result.notes.append(
                    f"{v}: read from stored runs, not re-run (its environment is not built here)"
                )
        return seen

    def choose(self, inside: list[int], lo: int, hi: int) -> int:
        """The next version to measure: the cheapest (stored, then built), nearest the middle,
        among those that keep the search within the run cap whatever they give (a cheap
        version near an end would leave too wide an interval for the runs left)."""
        left = self.cap - self.result.runs

        def need(width: int) -> int:  # the runs a binary search over ``width`` may take
            return math.ceil(math.log2(width + 1)) if width > 0 else 0

        def fits(i: int) -> bool:
            if self.price(self.versions[i]) == 0:
                return True  # no run
            worst = max(len([j for j in inside if j < i]), len([j for j in inside if j > i]))
            return 1 + need(worst) <= left

        middle = (lo + hi) / 2
        allowed = [i for i in inside if fits(i)] or inside
        return min(allowed, key=lambda i: (self.price(self.versions[i]), abs(i - middle)))

    def run(self) -> BisectResult:
        try:
            return self._run()
        except _Stop as stop:
            self.result.stopped = str(stop)
            return self.result

    def _run(self) -> BisectResult:
        versions, notes = self.versions, self.result.notes
        lo, hi = 0, len(versions) - 1
        low = self.end(lo)
        high = self.end(hi)
        if low == high:
            notes.append(
                f"the outcome is {low} at both ends ({versions[lo]}, {versions[hi]}): no "
                "change to bisect (a change that changes back in between would not be seen)"
            )
            return self.result
        while True:
            inside = [i for i in range(lo + 1, hi) if i not in self.unusable]
            if not inside:
                break
            mid = self.choose(inside, lo, hi)
            try:
                seen = self.outcome(mid)
            except _Stop as stop:
                self.result.boundary = (versions[lo], versions[hi])
                self.result.unmeasured = versions[lo + 1 : hi]
                raise _Stop(
                    f"{stop}; the change lies between {versions[lo]} and {versions[hi]}"
                ) from None
            if seen is None:
                self.unusable.add(mid)
                notes.append(f"{versions[mid]}: not built (--max-builds {self.max_builds})")
                continue
            if seen == "env_failed":
                self.unusable.add(mid)
                notes.append(f"{versions[mid]}: environment could not be built, skipped")
                continue
            if seen == low:
                lo = mid
            elif seen == high:
                hi = mid
            else:
                raise _Stop(
                    f"{versions[mid]} gives {seen}, neither {low} ({versions[lo]}) nor {high} "
                    f"({versions[hi]}): not the same outcome as either end; stopped there (a "
                    f"bisect between {versions[lo]} and {versions[mid]}, or {versions[mid]} "
                    f"and {versions[hi]}, asks about one change)"
                )
        self.result.boundary = (versions[lo], versions[hi])
        self.result.unmeasured = versions[lo + 1 : hi]
        self.check_one_change(lo, hi, low, high)
        return self.result

    def check_one_change(self, lo: int, hi: int, low: str, high: str) -> None:
        """Every outcome known in the range must fit one change at the boundary."""
        versions = self.versions
        known = {**self.stored, **self.result.known}
        for v, seen in sorted(known.items(), key=lambda kv: Version(kv[0])):
            if v not in versions or seen == "env_failed":
                continue
            i = versions.index(v)
            if i <= lo and seen != low:
                self.result.notes.append(
                    f"non-monotonic: {v} gives {seen}, before the change from {low}"
                )
            elif i >= hi and seen != high:
                self.result.notes.append(
                    f"non-monotonic: {v} gives {seen}, after the change to {high}"
                )


# -- the harness side: stored records, environments and runs ------------------------------


def summarise(outcomes: Sequence[str]) -> str:
    """One outcome for a cell: the trials' outcome, or flaky(a/b) when they disagree."""
    kinds = sorted(set(outcomes))
    return kinds[0] if len(kinds) == 1 else "flaky(" + "/".join(kinds) + ")"


def outcome_key(entry: Entry, outcome: str, exc_type: str = "", message: str = "") -> str:
    """What two steps of an entry's bisect must share: the outcome and, for a run that
    raised, the exception's type and how its message reads against the entry's signature
    (its grade: verbatim, variable-parts, reworded, other-error): "reproduced
    (RuntimeError, verbatim)". A step that raised another type, or the same type worded
    otherwise, is another error than the end's."""
    if not exc_type:
        return outcome
    graded = entry.grade(outcome, exc_type, message)
    return f"{outcome} ({exc_type}, {graded})" if graded is not None else f"{outcome} ({exc_type})"


_ENV_ID = re.compile(r"^py(?P<python>[\d.]+)-torch(?P<torch>[^-]+)-lightning(?P<lightning>[^-]+)$")


def same_run(uses_lightning: bool) -> Callable[[str], tuple[str, ...] | None]:
    """An environment id -> what makes two runs of a variant measure the same thing: the
    whole id, or for a reproducer that imports no lightning its python and torch (the run's
    rule, ``one_per_torch``: the lightning beside it plays no part). None for an id that
    is no row's (a derived environment's)."""

    def key(env_id: str) -> tuple[str, ...] | None:
        found = _ENV_ID.match(env_id)
        if found is None:
            return None
        if uses_lightning:
            return (env_id,)
        return (found["python"], found["torch"])

    return key


def stored_outcomes(
    records: Sequence,
    entry: Entry,
    variant: Variant,
    device: str,
    precision: str,
    version_of: dict[tuple[str, ...], str],
) -> dict[str, str]:
    """version -> the outcome key (``outcome_key``) of the stored records of the variant on
    ``device``/``precision`` in an environment equivalent to the version's (``same_run``:
    ``version_of`` maps its key to the version)."""
    key = same_run(entry.uses_lightning)
    by_version: dict[str, list[str]] = {}
    for r in records:
        if (r.entry, r.variant, r.device, r.precision) != (
            entry.id,
            variant.name,
            device,
            precision,
        ):
            continue
        version = version_of.get(key(r.env) or ("",))
        if version is None:
            continue
        exc = r.exception
        by_version.setdefault(version, []).append(
            outcome_key(entry, r.outcome.value, exc.type if exc else "", exc.message if exc else "")
        )
    return {v: summarise(o) for v, o in by_version.items()}


@dataclass(frozen=True)
class BisectRequest:
    entry: str
    variant: str
    device: str
    precision: str
    axis: str  # torch | lightning
    range: str  # "A..B"
    python: str | None = None
    with_lightning: str | None = None
    with_torch: str | None = None
    max_builds: int | None = None


def run_bisect(request: BisectRequest, cfg: Config, console: Console) -> int:
    """The command: load, list releases, search, print every step and the result. Bad input
    is raised (BisectError, MatrixError, EntryError): the command line says it and exits 2."""
    from harness.spec.matrix import load_matrix

    matrix = load_matrix(cfg.matrix_path)
    entry, variant = _entry_and_variant(request, cfg)
    run = _Bisection(request, cfg, console, matrix, entry, variant)
    versions = run.releases()
    stored = run.stored(versions)
    for package in ("torch", "lightning"):  # the wheels' sizes, for the build plan
        index_listing(package, cfg.envs_dir / ".index-cache")
    builds = [
        may_build(run.env_of(v), cfg.envs_dir / ".index-cache")
        for v in versions
        if v not in stored and not run.is_built(run.env_of(v))
    ]
    for line in build_plan(builds, run_cap(len(versions)), request.max_builds):
        run.say(line)
    result = bisect(
        request.axis,
        versions,
        run.env_of,
        stored,
        run.is_built,
        run.measure,
        run.report,
        max_builds=request.max_builds,
    )
    run.conclude(result)
    return 0


def _entry_and_variant(request: BisectRequest, cfg: Config) -> tuple[Entry, Variant]:
    from harness.spec.entries import load_entry

    folder = cfg.repros_dir / request.entry
    if not (folder / "entry.yaml").is_file():
        raise BisectError(f"no entry {request.entry!r} ({folder}/entry.yaml)")
    entry = load_entry(folder, cfg.repros_dir)
    parse_range(request.range)  # a bad range is said before anything is loaded or listed
    try:
        variant = entry.variant(request.variant)
    except KeyError:
        raise BisectError(f"{entry.id} has no variant {request.variant!r}") from None
    if not variant.written:
        raise BisectError(f"{entry.id}::{variant.name} is not written yet (None in VARIANTS)")
    if request.device not in variant.devices or request.precision not in variant.precisions:
        raise BisectError(
            f"{variant.name} runs on {', '.join(variant.devices)} at "
            f"{', '.join(variant.precisions)} only"
        )
    return entry, variant


class _Bisection:
    """One bisect's harness side: its environments, record stores, runs and printed steps."""

    def __init__(
        self,
        request: BisectRequest,
        cfg: Config,
        console: Console,
        matrix: Matrix,
        entry: Entry,
        variant: Variant,
    ) -> None:
        from harness.envs.backends import STANDIN_VAR, UvBackend
        from harness.envs.provenance import machine_provenance

        self.request, self.cfg, self.console = request, cfg, console
        self.matrix, self.entry, self.variant = matrix, entry, variant
        self.held = request.with_torch
        self.backend = UvBackend(cfg.envs_dir, standin=os.environ.get(STANDIN_VAR))
        self.machine = machine_provenance(cfg.repo)
        self.built_ids: list[str] = []
        self.timeout_s = cfg.timeout_s or matrix.timeout_s
        self.memory_mb = cfg.memory_limit_mb or matrix.memory_limit_mb
        # the records of environments no profile names go to a bisect folder the report
        # does not read; both are read for what is already stored
        self.stores: dict[Path, Store] = {cfg.records_dir: Store(cfg.records_dir, cfg.machine)}
        self.cell_of: dict[str, Cell] = {}
        self.count = 0

    def say(self, text: str) -> None:
        self.console.print(text, markup=False)

    def env_of(self, version: str) -> Environment:
        """The matrix's pairing for ``version``; for a reproducer that imports no lightning,
        an environment of the same python and torch already built here, whatever its
        lightning (the run's rule: it measures the same thing), before one to build."""
        r = self.request
        env = environment_for(
            self.matrix,
            r.axis,
            version,
            python=r.python,
            with_lightning=r.with_lightning,
            with_torch=self.held,
        )
        if self.entry.uses_lightning or self.is_built(env):
            return env
        for other in self.row_envs:
            if (other.python, other.torch) == (env.python, env.torch) and self.is_built(other):
                return other
        return env

    @functools.cached_property
    def row_envs(self) -> list[Environment]:
        return sorted(
            {e for row in self.matrix.rows if not row.interpreter for e in row.environments()},
            key=lambda e: (Version(e.lightning), e.python),
            reverse=True,
        )

    def releases(self) -> list[str]:
        r = self.request
        lo, hi = parse_range(r.range)
        versions, source = list_releases(
            r.axis, lo, hi, lambda v: self.env_of(v).python, self.cfg.envs_dir / ".index-cache"
        )
        self.say(
            f"{r.axis} releases in {r.range} with a wheel for the interpreter: "
            f"{len(versions)} ({', '.join(versions)}) from {source}"
        )
        if r.axis == "lightning" and self.held is None:
            self.held = held_torch(self.matrix, versions)
            self.say(
                f"torch held at {self.held}: the newest torch the matrix crosses with every "
                "lightning line of the range (--with-torch holds another)"
                if self.held
                else "no torch is crossed with every lightning line of the range: each "
                "lightning with the newest torch of its own rows"
            )
        self.cell_of = {v: Cell(self.env_of(v), r.device, r.precision) for v in versions}
        return versions

    def store_of(self, env: Environment) -> Store:
        root = records_dir_for(env, self.matrix, self.cfg.records_dir)
        if root not in self.stores:
            self.stores[root] = Store(root, self.cfg.machine)
        return self.stores[root]

    def stored(self, versions: Sequence[str]) -> dict[str, str]:
        from harness.store.jsonl import latest

        for cell in self.cell_of.values():
            self.store_of(cell.env)
        records = [r for each in self.stores.values() for r in each.load().records]
        key = same_run(self.entry.uses_lightning)
        version_of = {key(self.cell_of[v].env.id) or (v,): v for v in versions}
        r = self.request
        return stored_outcomes(
            latest(records), self.entry, self.variant, r.device, r.precision, version_of
        )

    def is_built(self, env: Environment) -> bool:
        from harness.envs.backends import MARKER

        return (self.cfg.envs_dir / env.id / MARKER).is_file()

    def measure(self, version: str, env: Environment) -> Step:
        from harness.envs.backends import EnvFailed
        from harness.envs.capabilities import before_run
        from harness.envs.provenance import cuda_provenance
        from harness.execute.plan import Job
        from harness.execute.runner import decided_record, env_failed_record, run_job

        job = Job(self.entry, self.variant, self.cell_of[version], 0)
        try:
            built = self.backend.ensure(env)
        except EnvFailed as exc:
            self.store_of(env).append(env_failed_record(job, str(exc), self.machine))
            return Step(version, env, "env_failed", "environment failed", _words(str(exc), 200))
        how = "run, environment " + ("reused" if built.reused else "built")
        if not built.reused:
            self.built_ids.append(env.id)
            how += f" in {built.seconds:.0f} s"
        provenance = cuda_provenance(self.machine, built.probe)
        cell = job.cell
        decided = before_run(cell.device, cell.precision, job.variant.needs, built.probe)
        if decided is not None:
            record = decided_record(job, decided[0], decided[1], built, provenance)
        else:
            record = run_job(
                job,
                built,
                timeout_s=self.timeout_s,
                memory_limit_mb=self.memory_mb,
                provenance=provenance,
            )
        self.store_of(env).append(record)
        exc = record.exception
        detail = record.reason or (f"{exc.type}: {exc.message}" if exc else "")
        key = outcome_key(
            self.entry, record.outcome.value, exc.type if exc else "", exc.message if exc else ""
        )
        return Step(version, env, key, how, _words(detail, 160))

    def report(self, step: Step) -> None:
        r = self.request
        self.count += 1
        self.say(
            f"step {self.count}: {r.axis} {step.version} ({step.env.id}, "
            f"{r.device}-{r.precision}) -> {step.outcome} [{step.how}]"
            + (f" {step.detail}" if step.detail else "")
        )

    def conclude(self, result: BisectResult) -> None:
        r = self.request
        cell = f"{self.entry.id}::{self.variant.name} on {r.device}-{r.precision}"
        for line in conclusion(result, cell):
            self.say(line)
        runs = sum(1 for s in result.steps if s.how != "stored record")
        self.say(
            f"{len(result.steps)} steps: {len(result.steps) - runs} from stored records, {runs} "
            f"runs; environments built: {', '.join(self.built_ids) or 'none'}; records in "
            + ", ".join(str(each.path) for each in self.stores.values())
        )


def conclusion(result: BisectResult, what: str) -> list[str]:
    """The lines that say what a bisect found: the boundary (exact, or spanning the versions
    left unmeasured), why it stopped, and its notes."""
    lines = []
    if result.stopped:
        lines.append(f"stopped: {result.stopped}")
    if result.boundary and not result.stopped:
        a, b = result.boundary
        if result.unmeasured:
            lines.append(
                f"the outcome of {what} changes after {result.axis} {a} ({result.known[a]}) "
                f"and by {b} ({result.known[b]}); {len(result.unmeasured)} release(s) between "
                f"them unmeasured: {', '.join(result.unmeasured)}"
            )
        else:
            lines.append(
                f"the outcome of {what} changes between {result.axis} {a} "
                f"({result.known[a]}) and {b} ({result.known[b]})"
            )
    lines += [f"note: {note}" for note in result.notes]
    return lines


def _words(text: str, limit: int) -> str:
    """The first line of ``text``, at most ``limit`` characters, cut at a word's end."""
    from harness.domain import clip

    return clip(text.strip().splitlines()[0] if text.strip() else "", limit)
