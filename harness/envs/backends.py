"""Target environments: one virtualenv per environment id, built with uv from one cache.

An environment is named by its id and fingerprinted by what was asked of it (interpreter,
requirements, local wheel folders, this module's format). It is reused while the
fingerprint is unchanged and its health check passes; a failed or interrupted build is
deleted, never used. What was really installed is recorded beside it.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn, Protocol

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion

from harness.atomic import write_atomically
from harness.domain import parse_version
from harness.envs.bounded import Bounded, run_bounded
from harness.envs.installed import Met, judge
from harness.envs.installed import report as installed_report
from harness.spec.matrix import Environment, package_of

__all__ = [
    "PROBE_FACTS",
    "STANDIN_VAR",
    "Bounded",
    "BuiltEnv",
    "CannotServe",
    "EnvBackend",
    "EnvFailed",
    "EnvSpec",
    "ExistingBackend",
    "Found",
    "MatrixBackend",
    "NotAPython",
    "ProbeResult",
    "Prober",
    "UvBackend",
    "base_interpreter",
    "find_interpreter",
    "fingerprint",
    "identify_python",
    "run_bounded",
    "run_probe",
    "Pruned",
    "prune_environments",
]

FORMAT = 1  # bump when the layout of an environment folder changes
MARKER = "harness-env.json"
CHILD = Path(__file__).parents[1] / "inenv" / "child.py"
INSTALL_TIMEOUT_S = 1800
# Testing the harness itself: install a small stand-in package instead of torch and
# lightning, e.g. HARNESS_STANDIN="six=={torch}" builds six at each row's torch version
# (a version that does not exist makes an environment that cannot be built). The health
# check imports the stand-in instead; the environment id, the cells and the records are
# unchanged. In an existing interpreter, the stand-in's version names the axis of its
# placeholder (six 1.16.0 for "six=={torch}": torch1.16.0); an axis without a stand-in
# is named "0". Never set in a real run.
STANDIN_VAR = "HARNESS_STANDIN"


@dataclass(frozen=True)
class BuiltEnv:
    env: Environment
    path: Path
    python: Path  # the venv's interpreter
    installed: dict[str, str] = field(default_factory=dict)  # name -> version (freeze)
    probe: dict[str, str] = field(default_factory=dict)  # versions seen by importing them
    reused: bool = False
    seconds: float = 0.0
    # runs get `python -I`; an existing interpreter keeps its PYTHONPATH and user site,
    # which may be where its torch comes from
    isolated: bool = True
    # what the health check imports (lists of alternatives): what a warm worker preloads
    imports: tuple[tuple[str, ...], ...] = (("torch",), ("lightning", "pytorch_lightning"))
    # a derived environment (a variant's requires:): every distribution it holds that its
    # row's environment does not hold at that version, read from the environment itself
    # (importlib.metadata); None where nothing is derived or the backend cannot tell
    beyond_row: dict[str, str] | None = None

    def versions(self) -> dict[str, str]:
        """The probe's versions, without its facts (those go to provenance and prechecks)."""
        return {k: v for k, v in self.probe.items() if k not in PROBE_FACTS}


class EnvFailed(Exception):
    """The environment could not be built or does not import; str() is the reason."""


class CannotServe(EnvFailed):
    """The package index cannot serve these requirements: the resolver found no set of
    releases that satisfies them together, or one names a build that only another index
    has (a CUDA-specific torch). For a variant's version advice this is a measurement
    (``unsupported``: the advice cannot be followed in that cell), not a failed build."""


# uv's words when resolution, not the download or the build, is what failed
_UNRESOLVABLE = ("no solution found when resolving", "requirements are unsatisfiable")
# ... and when it could not ask the index at all (offline, unreachable): its "no solution"
# then says nothing of the index (uv's words, lower-cased; the cause said first)
_UNREACHABLE = (
    ("network was disabled", "the package index was not reachable: uv ran offline"),
    ("not found in the cache", "the package index was not reachable: uv ran offline"),
    ("failed to fetch", "the package index was not reachable"),
    ("error sending request", "the package index was not reachable"),
    ("dns error", "the package index was not reachable (DNS)"),
    ("connection refused", "the package index was not reachable (connection refused)"),
    ("timed out", "the package index did not answer in time"),
    ("no space left on device", "the disk is full"),
)


def install_failure(requirements: Iterable[str], stderr: str) -> EnvFailed:
    """What a failed ``uv pip install`` of ``requirements`` means: CannotServe where the
    resolver says they cannot be satisfied (naming a requirement's local build, e.g.
    ``torch==2.4.1+cu118``: PyPI serves no local versions, PyTorch's own index does),
    EnvFailed otherwise. The installer's own words are kept in both."""
    reqs = tuple(requirements)
    reason = f"uv pip install {' '.join(reqs)} failed:\n{_installer_reason(stderr)}"
    unreachable = next((why for words, why in _UNREACHABLE if words in stderr.lower()), None)
    if unreachable is not None:
        # the resolver saw no release because it could not look: the environment's trouble,
        # never a measurement that the advice cannot be followed (retried by --resume)
        return EnvFailed(f"{unreachable}; {reason}")
    if not any(text in stderr.lower() for text in _UNRESOLVABLE):
        return EnvFailed(reason)
    local = [r for r in reqs if any(s.version and "+" in s.version for s in _specifiers(r))]
    if local:
        return CannotServe(
            f"{', '.join(local)}: a local build ('+...', e.g. a CUDA-specific torch), which "
            "the package index this harness installs from does not serve (PyPI never has "
            "local versions: such builds come from another index, e.g. "
            f"https://download.pytorch.org/whl/); {reason}"
        )
    return CannotServe(reason)


def _specifiers(requirement: str) -> list[Any]:
    try:
        return list(Requirement(requirement).specifier)
    except ValueError:
        return []


# Another way to run the health check: (interpreter, imports) -> what it found. The warm
# worker is one: its imports are the check, so an environment is imported once, not twice.
Prober = Callable[[Path, tuple[tuple[str, ...], ...]], "ProbeResult"]


class EnvBackend(Protocol):
    def ensure(self, env: Environment, prober: Prober | None = None) -> BuiltEnv: ...


IDENTIFY_TIMEOUT_S = 10.0  # "are you a Python?": an interpreter answers in well under 1 s
SHOWN_CHARS = 200  # of what a program that is not a Python printed


class NotAPython(Exception):
    """A program given as an interpreter that does not answer as a Python does; str() says
    what it did instead."""


# one start answers both: the version, and the installation a venv's python or a shim runs.
# It also answers a challenge (the SHA-256 of a fresh nonce, given as its argument): a
# program that only prints the expected lines (a script faking the probe) cannot, so its
# made-up version never names an environment
IDENTIFY = (
    "import hashlib, os, sys; sys.stdout.write('HARNESS-PYTHON %d.%d.%d %s\\n' % "
    "(sys.version_info[:3] + (hashlib.sha256(sys.argv[1].encode()).hexdigest()[:16],))); "
    "sys.stdout.write('HARNESS-BASE %s\\n' % "
    "os.path.realpath(getattr(sys, '_base_executable', None) or sys.executable))"
)
_VERSION = re.compile(r"[23]\.\d{1,3}\.\d{1,3}")


def identify_python(exe: str | Path, timeout: float = IDENTIFY_TIMEOUT_S) -> str:
    """The version ("3.11.7") of the Python ``exe`` is, asked with a timeout and bounded
    output; NotAPython with what it did instead (the first SHOWN_CHARS it printed)."""
    return _identify(exe, timeout)[0]


def base_interpreter(exe: str | Path, timeout: float = IDENTIFY_TIMEOUT_S) -> Path:
    """The interpreter ``exe`` really runs: a venv's ``bin/python`` or a pyenv shim names
    its base installation. Environments are fingerprinted by it, so one found through
    another venv on PATH (a worktree's, deleted later) is the same interpreter."""
    try:
        return _identify(exe, timeout)[1]
    except NotAPython:
        return Path(exe)


def _identify(exe: str | Path, timeout: float) -> tuple[str, Path]:
    nonce = secrets.token_hex(8)
    try:
        out = run_bounded([str(exe), "-c", IDENTIFY, nonce], timeout, limit=64 * 1024)
    except OSError as exc:
        raise NotAPython(f"it does not run: {exc.strerror or exc}") from None
    said = dict(
        line.split(" ", 1) for line in out.stdout.splitlines() if line.startswith("HARNESS-")
    )
    if "HARNESS-PYTHON" in said:
        version, _, check = said["HARNESS-PYTHON"].strip().partition(" ")
        if check != hashlib.sha256(nonce.encode()).hexdigest()[:16]:
            _refuse(
                "it answered without running the harness's code (the check value is wrong)", out
            )
        if not _VERSION.fullmatch(version):
            _refuse(f"it said it is Python {version[:40]!r}, which is no Python version", out)
        base = Path(said.get("HARNESS-BASE", "").strip())
        return version, base if base.is_absolute() and base.is_file() else Path(exe)
    if out.returncode is None:
        _refuse(f"it did not answer within {timeout:g} s", out)
    _refuse(f"it exited with status {out.returncode} without saying its version", out)


def _refuse(what: str, out: Bounded) -> NoReturn:
    shown = (out.stdout or out.stderr)[:SHOWN_CHARS]
    if shown:
        more = f", of {out.printed} bytes" if out.printed > len(shown) else ""
        what += f"; it printed {shown!r} (its first {len(shown)} characters{more})"
    raise NotAPython(what)


def _minor(version: str) -> str:
    return ".".join(version.split(".")[:2])


def interpreter_candidates(version: str) -> list[Path]:
    """Where an interpreter for ``version`` ("3.10") may live, best first. Never downloads."""
    found: list[Path] = []
    on_path = shutil.which(f"python{version}")
    if on_path:
        found.append(Path(on_path))
    pyenv_root = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv"))
    found += sorted(
        (pyenv_root / "versions").glob(f"{version}.*/bin/python{version}"), reverse=True
    )
    uv_root = Path(os.environ.get("UV_PYTHON_INSTALL_DIR", Path.home() / ".local/share/uv/python"))
    found += sorted(uv_root.glob(f"cpython-{version}.*/bin/python{version}"), reverse=True)
    for prefix in ("/usr/bin", "/usr/local/bin"):
        found.append(Path(prefix) / f"python{version}")
    return found


def find_interpreter(version: str, candidates: Iterable[Path] | None = None) -> Path:
    """The base installation of the first candidate that is Python ``version``."""
    looked = []
    for exe in candidates if candidates is not None else interpreter_candidates(version):
        looked.append(str(exe))
        if not exe.is_file():
            continue
        try:
            found, base = _identify(exe, IDENTIFY_TIMEOUT_S)
        except NotAPython:
            continue
        if _minor(found) == version:
            return base
    raise EnvFailed(
        f"no Python {version} interpreter found (looked in PATH, pyenv and uv-managed "
        f"pythons: {', '.join(looked) or 'nothing'}); install one, e.g. `pyenv install {version}`"
    )


@dataclass(frozen=True)
class EnvSpec:
    """What to build: the installer's view of an environment."""

    name: str  # folder name, e.g. the environment id
    python: str  # "3.10"
    requirements: tuple[str, ...]
    find_links: tuple[str, ...] = ()
    # modules the health check must import; each item lists alternatives (first that imports)
    imports: tuple[tuple[str, ...], ...] = (("torch",), ("lightning", "pytorch_lightning"))

    @classmethod
    def of(cls, env: Environment, standin: str | None = None) -> EnvSpec:
        if not standin:
            imports = cls.imports if env.installs_lightning else (("torch",),)
            return cls(env.id, env.python, env.requirements(), env.find_links, imports)
        reqs = tuple(
            r.replace("{torch}", env.base.torch).replace("{lightning}", env.base.lightning)
            for r in standin.split()
        )
        modules = tuple((Requirement(r).name.replace("-", "_"),) for r in reqs)
        replaced = {package_of(r) for r in env.requires}
        pins = tuple(p for p in env.pins if package_of(p) not in replaced)
        return cls(
            env.id, env.python, (*reqs, *pins, *env.requires), env.find_links, imports=modules
        )


def fingerprint(spec: EnvSpec, interpreter: Path) -> str:
    existing_links = [p for p in spec.find_links if Path(p).is_dir()]
    payload = {
        "format": FORMAT,
        "interpreter": str(interpreter),
        "requirements": list(spec.requirements),
        "find_links": existing_links,
        "imports": [list(i) for i in spec.imports],
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]


def _same_base(meta: dict, spec: EnvSpec, path: Path, interpreter: Path) -> bool:
    """A marker written before interpreters were resolved to their base: it differs only
    in the interpreter's path, and the venv (pyvenv.cfg, written by uv) was made from this
    very base installation and version. Such an environment is the one asked for."""
    recorded = meta.get("interpreter")
    if not isinstance(recorded, str) or meta.get("fingerprint") != fingerprint(
        spec, Path(recorded)
    ):
        return False
    try:
        cfg = dict(
            line.split("=", 1)
            for line in (path / "pyvenv.cfg").read_text().splitlines()
            if "=" in line
        )
        version = identify_python(interpreter)
    except (OSError, NotAPython):
        return False
    cfg = {k.strip(): v.strip() for k, v in cfg.items()}
    return cfg.get("home") == str(interpreter.parent) and cfg.get("version_info") == version


def _adopt(marker: Path, meta: dict, fp: str, interpreter: Path) -> dict:
    meta = {**meta, "fingerprint": fp, "interpreter": str(interpreter)}
    write_atomically(marker, json.dumps(meta, indent=1, sort_keys=True).encode())
    return meta


def _tail(text: str, limit: int = 3000) -> str:
    text = text.strip()
    return text if len(text) <= limit else "..." + text[-limit:]


def _installer_reason(stderr: str) -> str:
    """The installer's own words, without uv's progress noise."""
    lines = [
        ln
        for ln in stderr.splitlines()
        if ln.strip()
        and not re.match(
            r"^\s*(Resolved|Prepared|Installed|Uninstalled|Audited|Downloading|Downloaded|Built|Building) ",
            ln,
        )
    ]
    return _tail("\n".join(lines))


# Runs inside the environment (Python 3.7+, standard library and what it imports): which
# of the wanted modules import, their versions, and what torch sees of CUDA
# (child.probe_report, which a warm worker also answers). It runs in a process of its own,
# so initialising CUDA here never touches the harness's processes.
PROBE = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
import child
print("HARNESS-PROBE " + json.dumps(child.probe_report(json.loads(sys.argv[2]))))
"""

# Facts about the environment that the probe finds beside the versions: used to decide
# what can run (harness/envs/capabilities.py) and recorded as provenance, not as versions.
PROBE_FACTS = frozenset(
    {
        "cuda_available",
        "cuda_arch_list",
        "compute_capability",
        "bf16_supported",
        "device_count",
        "cuda_driver_api",
        "torch_hip",
        "setuptools",
        "triton",
        "cuda_runtime",
    }
)


@dataclass(frozen=True)
class ProbeResult:
    """What one interpreter has: versions and facts, and the wanted modules that failed."""

    seen: dict[str, str]
    missing: dict[str, str]  # "torch" or "lightning/pytorch_lightning" -> its import error


def run_probe(
    python: Path,
    imports: tuple[tuple[str, ...], ...],
    timeout: float = 300,
    isolated: bool = True,
) -> ProbeResult:
    """Import the wanted modules in ``python`` and report; EnvFailed if it cannot even run."""
    names = " and ".join("/".join(i) for i in imports)
    flags = ["-I"] if isolated else []
    try:
        out = run_bounded(
            [str(python), *flags, "-c", PROBE, str(CHILD.parent), json.dumps(imports)], timeout
        )
    except OSError as exc:
        raise EnvFailed(f"{python} does not run: {exc}") from exc
    if out.returncode is None:
        raise EnvFailed(f"health check timed out after {timeout:.0f} s importing {names}")
    for line in out.stdout.splitlines():
        if line.startswith("HARNESS-PROBE "):
            return _probe_answer(line[len("HARNESS-PROBE ") :])
    raise EnvFailed(f"health check failed: {names} do not import:\n{_tail(out.stderr)}")


def _probe_answer(text: str) -> ProbeResult:
    """The probe's answer, checked before use: {"versions": {name: scalar}, "missing":
    {name: text}}; anything else is the environment's failure, named with what it said."""
    shown = repr(text[:200]) + (
        f" (its first 200 characters, of {len(text)})" if len(text) > 200 else ""
    )
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise EnvFailed(f"health check answered no JSON ({exc}): {shown}") from None
    if not isinstance(data, dict) or not all(
        isinstance(data.get(k), dict) for k in ("versions", "missing")
    ):
        raise EnvFailed(f"health check answered no {{versions, missing}} object: {shown}")
    for part in ("versions", "missing"):
        for key, value in data[part].items():
            if (
                len(key) > 200
                or not isinstance(value, (str, int, float, bool))
                or (isinstance(value, str) and len(value) > 20_000)
            ):
                raise EnvFailed(
                    f"health check answered {part}.{key[:80]!r} = {value!r:.80}: {shown}"
                )
    seen = {str(k): str(v) for k, v in data["versions"].items()}
    return ProbeResult(seen, {str(k): str(v) for k, v in data["missing"].items()})


def probe(
    python: Path,
    imports: tuple[tuple[str, ...], ...],
    timeout: float = 300,
    prober: Prober | None = None,
) -> dict[str, str]:
    """Import the environment's packages in it and return the versions that really loaded."""
    result = prober(python, imports) if prober else run_probe(python, imports, timeout)
    if result.missing:
        names = " and ".join(result.missing)
        errors = "\n".join(f"{k}: {v}" for k, v in result.missing.items())
        raise EnvFailed(f"health check failed: {names} do not import:\n{errors}")
    return result.seen


@contextlib.contextmanager
def _exclusive(lock: Path) -> Iterator[None]:
    lock.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # released by close, also when this process dies
        yield
    finally:
        os.close(fd)


class UvBackend:
    """Builds environments with uv under ``root`` (one folder per environment id)."""

    def __init__(
        self,
        root: str | os.PathLike[str],
        uv: str | None = None,
        cache_dir: str | None = None,
        standin: str | None = None,
    ) -> None:
        self.root = Path(root)
        self.uv = uv or shutil.which("uv") or str(Path(sys.executable).with_name("uv"))
        self.cache_dir = cache_dir  # None: uv's shared default cache (hardlinks from it)
        self.standin = standin  # see STANDIN_VAR; None in real runs

    def _uv(self, *args: str) -> subprocess.CompletedProcess[str]:
        env = dict(os.environ)
        if self.cache_dir:
            env["UV_CACHE_DIR"] = self.cache_dir
        env.pop("VIRTUAL_ENV", None)
        try:
            return subprocess.run(
                [self.uv, *args],
                capture_output=True,
                text=True,
                env=env,
                timeout=INSTALL_TIMEOUT_S,
                check=False,
            )
        except FileNotFoundError as exc:
            raise EnvFailed(
                f"uv not found ({self.uv}); install the harness with its dependencies"
            ) from exc
        except subprocess.TimeoutExpired as exc:
            raise EnvFailed(f"uv {args[0]} ran past {INSTALL_TIMEOUT_S} s") from exc

    def ensure(self, env: Environment, prober: Prober | None = None) -> BuiltEnv:
        return self.ensure_spec(EnvSpec.of(env, self.standin), env, prober)

    def ensure_spec(
        self, spec: EnvSpec, env: Environment, prober: Prober | None = None
    ) -> BuiltEnv:
        # two runs on one machine share environments: one builds, the other waits and reuses
        with _exclusive(self.root / f"{spec.name}.lock"):
            return self._ensure_locked(spec, env, prober)

    def _ensure_locked(self, spec: EnvSpec, env: Environment, prober: Prober | None) -> BuiltEnv:
        started = time.monotonic()
        interpreter = find_interpreter(spec.python)
        fp = fingerprint(spec, interpreter)
        path = self.root / spec.name
        python = path / "bin" / "python"
        marker = path / MARKER
        if marker.is_file():
            try:
                meta = json.loads(marker.read_text())
            except ValueError:
                meta = {}
            if meta.get("fingerprint") != fp and _same_base(meta, spec, path, interpreter):
                meta = _adopt(marker, meta, fp, interpreter)
            if meta.get("fingerprint") == fp and python.exists():
                try:
                    seen = probe(python, spec.imports, prober=prober)
                except EnvFailed:
                    seen = None  # unhealthy: rebuilt below
                if seen is not None:
                    beyond = meta.get("beyond_row")
                    if env.requires and not isinstance(beyond, dict):  # a marker of before
                        beyond = self._beyond_row(env, python)
                    return BuiltEnv(
                        env,
                        path,
                        python,
                        meta.get("installed", {}),
                        seen,
                        True,
                        time.monotonic() - started,
                        imports=spec.imports,
                        beyond_row=beyond if env.requires else None,
                    )
        # no marker, another fingerprint, or unhealthy: never reuse, build afresh
        shutil.rmtree(path, ignore_errors=True)
        try:
            return self._build(spec, env, interpreter, fp, path, python, started, prober)
        except BaseException:
            shutil.rmtree(path, ignore_errors=True)  # a half-built env is never left to be reused
            raise

    def _build(
        self,
        spec: EnvSpec,
        env: Environment,
        interpreter: Path,
        fp: str,
        path: Path,
        python: Path,
        started: float,
        prober: Prober | None = None,
    ) -> BuiltEnv:
        path.parent.mkdir(parents=True, exist_ok=True)
        made = self._uv("venv", "--quiet", "--python", str(interpreter), str(path))
        if made.returncode != 0:
            raise EnvFailed(f"uv venv failed:\n{_installer_reason(made.stderr)}")
        args = ["pip", "install", "--python", str(python), "--link-mode", "hardlink"]
        for links in spec.find_links:
            if Path(links).is_dir():
                args += ["--find-links", links]
        installed = self._uv(*args, *spec.requirements)
        if installed.returncode != 0:
            raise install_failure(spec.requirements, installed.stderr)
        seen = probe(python, spec.imports, prober=prober)
        frozen = self._uv("pip", "freeze", "--python", str(python))
        versions = {}
        for line in frozen.stdout.splitlines():
            if "==" in line:
                name, _, version = line.partition("==")
                versions[name.strip().lower()] = version.strip()
        beyond = self._beyond_row(env, python) if env.requires else None
        meta = {
            "fingerprint": fp,
            "env": spec.name,
            "interpreter": str(interpreter),
            "requirements": list(spec.requirements),
            "installed": versions,
            "probe": seen,
        }
        if beyond is not None:
            meta["beyond_row"] = beyond
        # the marker is written last: its presence means the build completed
        write_atomically(path / MARKER, json.dumps(meta, indent=1, sort_keys=True).encode())
        return BuiltEnv(
            env,
            path,
            python,
            versions,
            seen,
            False,
            time.monotonic() - started,
            imports=spec.imports,
            beyond_row=beyond,
        )

    def _beyond_row(self, env: Environment, python: Path) -> dict[str, str]:
        """Every distribution the derived environment at ``python`` holds (importlib.metadata,
        whatever installed it: a dependency of a requirement, a wheel a name pointed at) that
        the row's environment lacks or holds at another version. The row's is reused, or
        built when this run has not built it; where it cannot be, all the derived one holds."""
        try:
            dists = installed_report(python)["dists"]
            held = {canonicalize_name(d["name"]): str(d["version"]) for d in dists.values()}
        except (ValueError, OSError, KeyError, TypeError) as exc:
            raise EnvFailed(f"{python} did not list its distributions: {exc}") from exc
        try:
            # the row's health check in a process of its own: the prober ``ensure`` was
            # given holds the derived environment's warm worker, and probing the row with
            # it would swap in the row's worker, which the derived jobs would then run in
            row = self.ensure(env.base).installed
        except EnvFailed:
            row = {}
        row = {canonicalize_name(k): v for k, v in row.items()}
        return {name: held[name] for name in sorted(held) if row.get(name) != held[name]}


# --- existing interpreters: nothing installed, everything probed ----------------------------

_REAL_ROLES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("torch", ("torch",)),
    ("lightning", ("lightning", "pytorch_lightning")),
)
MISSING = "none"  # the version an axis is named by when its package does not import


@dataclass(frozen=True)
class Found:
    """An existing interpreter, named by what it has."""

    env: Environment  # versions as found; MISSING where torch or lightning does not import
    seen: dict[str, str]  # the probe: versions and CUDA facts
    problem: str  # "" when it can run cells; else why not (its cells are env_failed)
    seconds: float
    # not a Python at all (identify_python): the run is refused, nothing is stored
    refusal: str = ""


def _is_version(text: str) -> bool:
    try:
        parse_version(text)
    except InvalidVersion:
        return False
    return True


def _public(version: str) -> str:
    """ "2.4.1+cu121" -> "2.4.1": the id names the release; the record keeps the build."""
    try:
        return parse_version(version).public
    except InvalidVersion:
        return version


class ExistingBackend:
    """Runs cells in interpreters that are already set up (``run --python``, or a matrix row
    with ``interpreter:``): installs nothing, probes torch, lightning and CUDA, and names the
    environment by what it found."""

    def __init__(self, standin: str | None = None) -> None:
        self.standin = standin  # see STANDIN_VAR; None in real runs
        self._found: dict[str, Found] = {}
        self._listed: dict[str, dict] = {}  # interpreter -> its distributions (installed.py)

    def roles(self) -> tuple[tuple[str, tuple[str, ...]], ...]:
        """(axis, modules that may provide it): torch and lightning, or their stand-ins."""
        if not self.standin:
            return _REAL_ROLES
        roles = []
        for text in self.standin.split():
            module = Requirement(re.sub(r"\{\w+\}", "0", text)).name.replace("-", "_")
            for axis in ("torch", "lightning"):
                if "{" + axis + "}" in text:
                    roles.append((axis, (module,)))
        return tuple(roles)

    def requirements(self, python: str | os.PathLike[str], requires: tuple[str, ...]) -> Met:
        """What ``python`` already has of ``requires`` (harness/envs/installed.py): a
        variant's requirements are met there, or it cannot run there; one listing of its
        distributions per interpreter and run."""
        if not requires:
            return Met()
        key = os.path.abspath(python)
        if key not in self._listed:
            try:
                self._listed[key] = installed_report(Path(key))
            except (ValueError, OSError) as exc:  # it does not run, or does not say
                return Met((str(exc),))
        return judge(tuple(requires), self._listed[key])

    def inspect(self, python: str | os.PathLike[str]) -> Found:
        key = os.path.abspath(python)
        if key not in self._found:
            self._found[key] = self._inspect(Path(key))
        return self._found[key]

    def _inspect(self, python: Path) -> Found:
        started = time.monotonic()
        roles = self.roles()
        try:
            version = identify_python(python)  # checked: it ran the harness's code
        except NotAPython as exc:
            nothing = Environment(python="0", torch=MISSING, lightning=MISSING)
            return Found(nothing, {}, str(exc), time.monotonic() - started, refusal=str(exc))
        try:
            result = run_probe(python, tuple(m for _, m in roles), isolated=False)
        except EnvFailed as exc:
            seen: dict[str, str] = {}
            missing = {"python": str(exc)}
        else:
            seen, missing = result.seen, result.missing
        if seen.get("python", version) != version:  # the probe is not the interpreter asked
            missing["python"] = (
                f"its health check says Python {seen['python'][:40]!r}, not {version}"
            )
            seen = {}
        names = {"torch": "0", "lightning": "0"}  # axes without a stand-in (tests only)
        for axis, modules in roles:
            loaded = next((seen[m] for m in modules if m in seen), None)
            if loaded is not None and not _is_version(loaded):
                missing["/".join(modules)] = f"it says its version is {loaded[:80]!r}"
                loaded = None
            names[axis] = _public(loaded) if loaded else MISSING
        env = Environment(
            python=".".join(version.split(".")[:2]),
            torch=names["torch"],
            lightning=names["lightning"],
            interpreter=str(python),
        )
        parts = []
        for axis, modules in roles:
            key = "/".join(modules)
            if key in missing:
                label = f"{key} (standing in for {axis})" if self.standin else key
                parts.append(f"{label} does not import: {missing.pop(key)}")
        parts += missing.values()  # the interpreter itself did not run the probe
        problem = ""
        if parts:
            problem = (
                f"{python} (Python {version}): {'; '.join(parts)}; "
                "nothing is installed into an existing interpreter"
            )
        return Found(env, seen, problem, time.monotonic() - started)

    def ensure(self, env: Environment, prober: Prober | None = None) -> BuiltEnv:
        # an existing interpreter is probed once per run by inspect(), not by ``prober``
        if not env.interpreter:
            raise EnvFailed(f"{env.id} names no interpreter")
        python = Path(env.interpreter)
        found = self.inspect(python)
        if found.problem:
            raise EnvFailed(found.problem)
        if found.env.id != env.base.id:
            raise EnvFailed(
                f"{python} has {found.env.id} (torch {found.seen.get('torch')}), not "
                f"{env.base.id}: fix the interpreter's versions in matrix.yaml"
            )
        met = self.requirements(python, env.requires)
        if not met.ok:
            raise CannotServe(
                f"{'; '.join(met.unmet)} in the existing interpreter {python}: nothing is "
                "installed into it (install them there first; scripts/gpu-box.sh does from "
                "a wheel folder)"
            )
        return BuiltEnv(
            env,
            python.parent.parent,
            python,
            installed=dict(met.versions),
            probe=found.seen,
            reused=True,
            seconds=found.seconds,
            isolated=False,
            imports=tuple(modules for _, modules in self.roles()),
        )


class MatrixBackend:
    """Each environment where it comes from: an existing interpreter, or built by uv."""

    def __init__(self, uv: EnvBackend, existing: ExistingBackend) -> None:
        self.uv = uv
        self.existing = existing

    def ensure(self, env: Environment, prober: Prober | None = None) -> BuiltEnv:
        return (self.existing if env.interpreter else self.uv).ensure(env, prober)


@dataclass(frozen=True)
class Pruned:
    """An environment folder that `envs prune` removed (or would remove, with --dry-run)."""

    name: str
    path: Path
    bytes: int  # its own blocks: files hardlinked from uv's cache count once, in the cache


def _own_bytes(path: Path) -> int:
    """Disk blocks a folder holds alone (a file with other hard links is shared, not counted)."""
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                st = os.lstat(os.path.join(root, name))
            except OSError:
                continue
            if st.st_nlink == 1:
                total += st.st_blocks * 512
    return total


def prune_environments(
    root: str | os.PathLike[str], keep: Iterable[str], dry_run: bool = False
) -> list[Pruned]:
    """Remove the environment folders under ``root`` whose id is not in ``keep``.

    Only folders the harness built are touched (they hold the completion marker, or are a
    half-built folder beside its lock file); anything else under ``root`` is left alone. A
    folder is removed under its lock, so an environment being built or reused by a running
    harness is waited for, never pulled from under it.
    """
    base = Path(root)
    wanted = set(keep)
    removed: list[Pruned] = []
    if not base.is_dir():
        return removed
    for path in sorted(base.iterdir()):
        if not path.is_dir() or path.is_symlink() or path.name in wanted:
            continue
        lock = base / f"{path.name}.lock"
        if not ((path / MARKER).is_file() or lock.is_file()):
            continue
        with _exclusive(lock):
            size = _own_bytes(path)
            if not dry_run:
                shutil.rmtree(path)
        if not dry_run:
            lock.unlink(missing_ok=True)
        removed.append(Pruned(path.name, path, size))
    return removed
