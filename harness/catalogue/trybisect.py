"""`harness try SCRIPT --bisect`: between neighbouring rows of the table whose outcomes differ,
the release where the outcome changes, by harness/catalogue/bisect.py's search.

The axis is torch (lightning where only ``--lightning`` is given). Along torch, the table's
rows are taken one per torch release (the newest lightning beside it); along lightning, per
torch, its lightnings. The releases between two neighbours come from the package index
(``list_releases``); each is measured in the environment a bisect of an entry would use
(``environment_for``), or read from the try store (a script without lightning: any stored run
of the same torch and python).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from packaging.version import Version

from harness.catalogue.bisect import (
    BisectError,
    BisectResult,
    Step,
    bisect,
    build_plan,
    conclusion,
    environment_for,
    index_listing,
    list_releases,
    may_build,
    run_cap,
)
from harness.catalogue.tryscript import Row, Trial
from harness.domain import clip
from harness.spec.matrix import Environment

__all__ = ["bisect_rows", "neighbours"]


def neighbours(rows: Sequence[Row], axis: str) -> list[tuple[Row, Row]]:
    """The pairs of neighbouring rows along ``axis`` whose outcomes differ, over the rows
    that could not be measured (env_failed, unmeasured: the bisect meets them again): along torch, one row per torch (the newest lightning); along lightning, the
    lightnings of each torch."""
    other = "lightning" if axis == "torch" else "torch"
    if axis == "torch":
        best: dict[str, Row] = {}
        for row in rows:
            held = best.get(row.env.torch)
            if held is None or Version(row.env.lightning) > Version(held.env.lightning):
                best[row.env.torch] = row
        lines = [sorted(best.values(), key=lambda r: Version(r.env.torch))]
    else:
        groups: dict[str, list[Row]] = {}
        for row in rows:
            groups.setdefault(getattr(row.env, other), []).append(row)
        lines = [sorted(g, key=lambda r: Version(r.env.lightning)) for g in groups.values()]
    pairs = []
    for line in lines:
        measured = [r for r in line if r.seen.outcome not in ("env_failed", "unmeasured")]
        for a, b in itertools.pairwise(measured):
            if a.seen.key != b.seen.key:
                pairs.append((a, b))
    return pairs


def bisect_rows(trial: Trial) -> list[BisectResult]:
    axis = "lightning" if trial.request.lightning and not trial.request.torch else "torch"
    pairs = neighbours(trial.rows, axis)
    if not pairs:
        trial.say(f"--bisect: no two neighbouring rows along {axis} differ; nothing to bisect")
        return []
    results = []
    for a, b in pairs:
        results.append(_one(trial, axis, a, b))
    return results


def _one(trial: Trial, axis: str, a: Row, b: Row) -> BisectResult:
    lo, hi = getattr(a.env, axis), getattr(b.env, axis)
    held_torch = a.env.torch if axis == "lightning" else None

    def env_of(version: str) -> Environment:
        if version == lo:
            return a.env
        if version == hi:
            return b.env
        return trial.derive(environment_for(trial.matrix, axis, version, with_torch=held_torch))

    versions, source = list_releases(
        axis,
        Version(lo),
        Version(hi),
        lambda v: env_of(v).python,
        trial.cfg.envs_dir / ".index-cache",
    )
    versions = sorted({*versions, lo, hi}, key=Version)
    trial.say(
        f"--bisect {axis} {lo} ({a.seen.key}) .. {hi} ({b.seen.key}): {len(versions)} releases "
        f"({', '.join(versions)}) from {source}"
    )
    stored_runs = trial.stored()
    stored = {lo: a.seen.key, hi: b.seen.key}
    for v in versions:
        held = stored_runs.get(trial.key_of(env_of(v)))
        if held is not None and v not in stored:
            from harness.catalogue.tryscript import seen_of

            stored[v] = seen_of(held, trial.request.expect).key

    def measure(version: str, env: Environment) -> Step:
        row = trial.measure(trial.built_env(env) or env)
        return Step(version, env, row.seen.key, row.how, clip(row.seen.text, 160))

    def report(step: Step) -> None:
        trial.say(f"  step: {axis} {step.version} ({step.env.id}) -> {step.outcome} [{step.how}]")

    index_listing("torch", trial.cfg.envs_dir / ".index-cache")
    builds = [
        may_build(env_of(v), trial.cfg.envs_dir / ".index-cache")
        for v in versions
        if v not in stored and not trial.is_built(env_of(v))
    ]
    left = trial.builds_left()
    for line in build_plan(builds, run_cap(len(versions)), left):
        trial.say(f"  {line}")
    try:
        result = bisect(
            axis,
            versions,
            env_of,
            stored,
            trial.is_built,
            measure,
            report,
            max_builds=left,
            fresh=[getattr(r.env, axis) for r in (a, b) if r.how != "stored run"],
        )
    except BisectError as exc:
        trial.say(f"--bisect {axis} {lo}..{hi}: {exc}")
        return BisectResult(axis, versions)
    for line in conclusion(result, trial.script.name):
        trial.say(line)
    return result
