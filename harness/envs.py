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
import shutil
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from packaging.requirements import Requirement

from harness.matrix import Environment

__all__ = [
    "BuiltEnv",
    "EnvBackend",
    "EnvFailed",
    "EnvSpec",
    "STANDIN_VAR",
    "UvBackend",
    "find_interpreter",
    "fingerprint",
]

FORMAT = 1  # bump when the layout of an environment folder changes
MARKER = "harness-env.json"
CHILD = Path(__file__).with_name("child.py")
INSTALL_TIMEOUT_S = 1800
# Testing the harness itself: install a small stand-in package instead of torch and
# lightning, e.g. HARNESS_STANDIN="six=={torch}" builds six at each row's torch version
# (a version that does not exist makes an environment that cannot be built). The health
# check imports the stand-in instead; the environment id, the cells and the records are
# unchanged. Never set in a real run.
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


class EnvFailed(Exception):
    """The environment could not be built or does not import; str() is the reason."""


class EnvBackend(Protocol):
    def ensure(self, env: Environment) -> BuiltEnv: ...


def _python_version(exe: str | Path) -> str | None:
    try:
        out = subprocess.run(
            [str(exe), "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


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
    looked = []
    for exe in candidates if candidates is not None else interpreter_candidates(version):
        looked.append(str(exe))
        if exe.is_file() and _python_version(exe) == version:
            return exe
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
            return cls(env.id, env.python, env.requirements(), env.find_links)
        reqs = tuple(
            r.replace("{torch}", env.torch).replace("{lightning}", env.lightning)
            for r in standin.split()
        )
        modules = tuple((Requirement(r).name.replace("-", "_"),) for r in reqs)
        return cls(env.id, env.python, (*reqs, *env.pins), env.find_links, imports=modules)


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


PROBE = """
import importlib, json, sys
sys.path.insert(0, sys.argv[1])
import child
wanted = json.loads(sys.argv[2])
for alternatives in wanted:
    errors = []
    for name in alternatives:
        try:
            importlib.import_module(name)
            break
        except Exception as exc:
            errors.append(exc)
    else:
        raise errors[0]  # the first alternative's error is the one that explains
for optional in ("numpy",):
    try:
        importlib.import_module(optional)
    except ImportError:
        pass
v = child.versions()
for alternatives in wanted:
    for name in alternatives:
        if name in sys.modules:
            v[name] = str(getattr(sys.modules[name], "__version__", "?"))
if "torch" in sys.modules:
    v["cuda_available"] = str(sys.modules["torch"].cuda.is_available())
print("HARNESS-PROBE " + json.dumps(v))
"""


def probe(
    python: Path, imports: tuple[tuple[str, ...], ...], timeout: float = 300
) -> dict[str, str]:
    """Import the environment's packages in it and return the versions that really loaded."""
    names = " and ".join("/".join(i) for i in imports)
    try:
        out = subprocess.run(
            [str(python), "-I", "-c", PROBE, str(CHILD.parent), json.dumps(imports)],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise EnvFailed(f"health check timed out after {timeout:.0f} s importing {names}") from exc
    for line in out.stdout.splitlines():
        if line.startswith("HARNESS-PROBE "):
            return json.loads(line[len("HARNESS-PROBE ") :])
    raise EnvFailed(f"health check failed: {names} do not import:\n{_tail(out.stderr)}")


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

    def ensure(self, env: Environment) -> BuiltEnv:
        return self.ensure_spec(EnvSpec.of(env, self.standin), env)

    def ensure_spec(self, spec: EnvSpec, env: Environment) -> BuiltEnv:
        # two runs on one machine share environments: one builds, the other waits and reuses
        with _exclusive(self.root / f"{spec.name}.lock"):
            return self._ensure_locked(spec, env)

    def _ensure_locked(self, spec: EnvSpec, env: Environment) -> BuiltEnv:
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
            if meta.get("fingerprint") == fp and python.exists():
                try:
                    seen = probe(python, spec.imports)
                except EnvFailed:
                    seen = None  # unhealthy: rebuilt below
                if seen is not None:
                    return BuiltEnv(
                        env,
                        path,
                        python,
                        meta.get("installed", {}),
                        seen,
                        True,
                        time.monotonic() - started,
                    )
        # no marker, another fingerprint, or unhealthy: never reuse, build afresh
        shutil.rmtree(path, ignore_errors=True)
        try:
            return self._build(spec, env, interpreter, fp, path, python, started)
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
            raise EnvFailed(
                f"uv pip install {' '.join(spec.requirements)} failed:\n"
                f"{_installer_reason(installed.stderr)}"
            )
        seen = probe(python, spec.imports)
        frozen = self._uv("pip", "freeze", "--python", str(python))
        versions = {}
        for line in frozen.stdout.splitlines():
            if "==" in line:
                name, _, version = line.partition("==")
                versions[name.strip().lower()] = version.strip()
        meta = {
            "fingerprint": fp,
            "env": spec.name,
            "interpreter": str(interpreter),
            "requirements": list(spec.requirements),
            "installed": versions,
            "probe": seen,
        }
        # the marker is written last: its presence means the build completed
        tmp = path / (MARKER + ".tmp")
        tmp.write_text(json.dumps(meta, indent=1, sort_keys=True))
        os.replace(tmp, path / MARKER)
        return BuiltEnv(env, path, python, versions, seen, False, time.monotonic() - started)
