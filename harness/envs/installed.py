"""Whether an existing interpreter already satisfies a variant's requirements.

Nothing is installed into an interpreter the harness did not build (``run --python``, a
matrix row with ``interpreter:``). A variant with ``requires:`` runs there only when what is
installed already satisfies them: each requirement's distribution at a version its
specifier admits, and, for each extra it names (``transformers[torch]``), every requirement
that extra adds (one level: the extra's own packages, not theirs), markers evaluated for that
interpreter. The interpreter reports its distributions with the standard library alone
(``importlib.metadata``); the harness judges them with packaging."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion

from harness.domain import parse_version
from harness.envs.bounded import run_bounded

# run in the interpreter: its distributions (name -> version, Requires-Dist) and the marker
# environment (PEP 508) of that interpreter, on one line
REPORT = r"""
import json, os, platform, sys
from importlib import metadata
dists = {}
for d in metadata.distributions():
    name = d.metadata["Name"]
    if name and name.lower() not in dists:
        dists[name.lower()] = {"name": name, "version": d.version, "requires": list(d.requires or [])}
info = sys.implementation.version
version = "%d.%d.%d" % (info.major, info.minor, info.micro)
if info.releaselevel != "final":
    version += info.releaselevel[0] + str(info.serial)
env = {
    "implementation_name": sys.implementation.name,
    "implementation_version": version,
    "os_name": os.name,
    "platform_machine": platform.machine(),
    "platform_release": platform.release(),
    "platform_system": platform.system(),
    "platform_version": platform.version(),
    "python_full_version": platform.python_version(),
    "platform_python_implementation": platform.python_implementation(),
    "python_version": ".".join(platform.python_version_tuple()[:2]),
    "sys_platform": sys.platform,
}
print("HARNESS-INSTALLED " + json.dumps({"dists": dists, "environment": env}))
"""


@dataclass(frozen=True)
class Met:
    """What an interpreter has of a set of requirements."""

    unmet: tuple[str, ...] = ()  # one line per requirement not satisfied, in our words
    versions: dict[str, str] = field(default_factory=dict)  # canonical name -> installed

    @property
    def ok(self) -> bool:
        return not self.unmet


def report(python: Path, timeout: float = 60) -> dict:
    """The interpreter's distributions and marker environment (see REPORT); ValueError
    where it does not say."""
    out = run_bounded([str(python), "-c", REPORT], timeout)
    if out.returncode is None:
        raise ValueError(f"{python} did not list its distributions within {timeout:.0f} s")
    for line in out.stdout.splitlines():
        if line.startswith("HARNESS-INSTALLED "):
            return json.loads(line[len("HARNESS-INSTALLED ") :])
    raise ValueError(f"{python} did not list its distributions: {out.stderr.strip()[-400:]}")


def judge(requires: tuple[str, ...], found: dict) -> Met:
    """``requires`` against an interpreter's ``found`` report (see ``report``)."""
    dists = {canonicalize_name(k): v for k, v in found.get("dists", {}).items()}
    environment = {str(k): str(v) for k, v in found.get("environment", {}).items()}
    unmet: list[str] = []
    versions: dict[str, str] = {}

    def check(req: Requirement, because: str = "") -> dict | None:
        name = canonicalize_name(req.name)
        dist = dists.get(name)
        if dist is None:
            unmet.append(f"{req.name} is not installed{because}")
            return None
        have = str(dist.get("version", ""))
        try:
            admitted = not req.specifier or req.specifier.contains(
                parse_version(have), prereleases=True
            )
        except InvalidVersion:
            admitted = False
        if not admitted:
            unmet.append(f"{req.name} {have} is installed, not {req.specifier}{because}")
            return None
        versions[name] = have
        return dist

    for text in requires:
        req = Requirement(text)
        if req.marker is not None and not req.marker.evaluate(environment):
            continue
        dist = check(req)
        if dist is None:
            continue
        for extra in sorted(req.extras):
            for line in dist.get("requires", []):
                try:
                    dep = Requirement(line)
                except InvalidRequirement:
                    continue
                if dep.marker is None or "extra" not in str(dep.marker):
                    continue  # the distribution's own requirements, not the extra's
                if dep.marker.evaluate({**environment, "extra": extra}):
                    check(dep, f" (for {req.name}[{extra}])")
    return Met(tuple(unmet), versions)
