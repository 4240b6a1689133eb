"""Real environments built with uv around a small real package (six) at two versions."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.envs.backends import (
    MARKER,
    CannotServe,
    EnvFailed,
    EnvSpec,
    NotAPython,
    UvBackend,
    base_interpreter,
    find_interpreter,
    fingerprint,
    identify_python,
    install_failure,
    prune_environments,
    run_bounded,
)
from harness.spec.matrix import Environment
from tests.paths import REPO

PY = f"{sys.version_info[0]}.{sys.version_info[1]}"
ENV = Environment(python=PY, torch="0", lightning="0")  # the label the records would carry


def spec(version: str, name: str = "six-env") -> EnvSpec:
    return EnvSpec(name, PY, (f"six=={version}",), imports=(("six",),))


@pytest.mark.slow
def test_two_versions_build_reuse_and_rebuild(tmp_path: Path) -> None:
    backend = UvBackend(tmp_path)
    first = backend.ensure_spec(spec("1.16.0"), ENV)
    assert not first.reused
    assert first.installed["six"] == "1.16.0"
    assert first.probe["six"] == "1.16.0"
    meta = json.loads((tmp_path / "six-env" / MARKER).read_text())
    assert meta["installed"]["six"] == "1.16.0"

    again = backend.ensure_spec(spec("1.16.0"), ENV)
    assert again.reused  # same fingerprint, healthy: reused as it is

    other = backend.ensure_spec(spec("1.15.0"), ENV)  # another pin: a new fingerprint
    assert not other.reused
    assert other.probe["six"] == "1.15.0"

    side = backend.ensure_spec(spec("1.16.0", name="six-new"), ENV)  # both versions side by side
    assert side.probe["six"] == "1.16.0" and other.probe["six"] == "1.15.0"


@pytest.mark.slow
def test_half_built_environment_is_rebuilt_never_used(tmp_path: Path) -> None:
    backend = UvBackend(tmp_path)
    built = backend.ensure_spec(spec("1.16.0"), ENV)
    # an install killed half way: the package is gone but the folder remains
    site = next((tmp_path / "six-env").glob("lib/python*/site-packages"))
    (site / "six.py").unlink()
    rebuilt = backend.ensure_spec(spec("1.16.0"), ENV)
    assert not rebuilt.reused
    assert rebuilt.probe["six"] == "1.16.0"
    # a folder without its completion marker (killed before the end) is never reused
    (tmp_path / "six-env" / MARKER).unlink()
    assert not backend.ensure_spec(spec("1.16.0"), ENV).reused
    assert built.path == rebuilt.path


@pytest.mark.slow
def test_uninstallable_version_fails_with_installer_reason_and_leaves_nothing(
    tmp_path: Path,
) -> None:
    backend = UvBackend(tmp_path)
    with pytest.raises(EnvFailed) as info:
        backend.ensure_spec(spec("99.99.99"), ENV)
    assert "six==99.99.99" in str(info.value)
    assert "no version" in str(info.value).lower() or "unsatisfiable" in str(info.value).lower()
    assert not (tmp_path / "six-env").exists()


def test_missing_interpreter_is_named() -> None:
    with pytest.raises(EnvFailed, match=r"no Python 3\.99 interpreter found"):
        find_interpreter("3.99")


def test_wrong_interpreter_is_not_taken(tmp_path: Path) -> None:
    fake = tmp_path / "python3.7"
    fake.symlink_to(sys.executable)  # answers with this interpreter's version, not 3.7
    with pytest.raises(EnvFailed):
        find_interpreter("3.7", [fake])
    # a link (a venv's bin/python, a shim) stands for the installation it runs
    assert find_interpreter(PY, [fake]) == BASE


BASE = Path(os.path.realpath(getattr(sys, "_base_executable", None) or sys.executable))


def test_a_venv_interpreter_is_its_base_installation(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([str(BASE), "-m", "venv", "--without-pip", str(venv)], check=True)
    assert base_interpreter(venv / "bin" / "python") == BASE
    assert find_interpreter(PY, [venv / "bin" / f"python{PY}"]) == BASE


@pytest.mark.slow
def test_an_environment_found_through_another_venv_is_adopted_not_rebuilt(
    tmp_path: Path,
) -> None:
    """Markers written when the interpreter was recorded as found (a worktree's venv on
    PATH, deleted since) name the same base: reused, and the marker says the base now."""
    backend = UvBackend(tmp_path / "envs")
    built = backend.ensure_spec(spec("1.16.0"), ENV)
    marker = built.path / MARKER
    meta = json.loads(marker.read_text())
    gone = str(tmp_path / "deleted-worktree" / ".venv" / "bin" / f"python{PY}")
    meta["interpreter"] = gone
    meta["fingerprint"] = fingerprint(spec("1.16.0"), Path(gone))
    marker.write_text(json.dumps(meta))
    again = backend.ensure_spec(spec("1.16.0"), ENV)
    assert again.reused
    assert json.loads(marker.read_text())["interpreter"] == str(BASE)
    # a marker whose requirements differ too is not adopted
    meta["requirements"] = ["six==1.15.0"]
    meta["fingerprint"] = fingerprint(spec("1.15.0"), Path(gone))
    marker.write_text(json.dumps(meta))
    assert not backend.ensure_spec(spec("1.16.0"), ENV).reused


def test_missing_uv_is_env_failed(tmp_path: Path) -> None:
    backend = UvBackend(tmp_path, uv=str(tmp_path / "no-uv"))
    with pytest.raises(EnvFailed, match="uv not found"):
        backend.ensure_spec(spec("1.16.0"), ENV)


@pytest.mark.slow
def test_health_check_names_the_module_that_does_not_import(tmp_path: Path) -> None:
    backend = UvBackend(tmp_path)
    broken = EnvSpec("broken", PY, ("six==1.16.0",), imports=(("six",), ("no_such_module_x",)))
    with pytest.raises(EnvFailed, match="no_such_module_x do not import"):
        backend.ensure_spec(broken, ENV)
    assert not (tmp_path / "broken").exists()


def test_uv_is_available() -> None:
    assert shutil.which("uv") or Path(sys.executable).with_name("uv").exists()


def test_prune_removes_only_harness_environments_not_kept(tmp_path: Path) -> None:
    def env_folder(name: str, marker: bool = True) -> Path:
        folder = tmp_path / name
        (folder / "bin").mkdir(parents=True)
        (folder / "bin" / "python").write_bytes(b"x" * 8192)
        if marker:
            (folder / MARKER).write_text("{}")
        return folder

    kept = env_folder("py3.11-torch2.13.0-lightning2.6.6")
    gone = env_folder("py3.11-torch2.2.2-lightning2.5.6")
    half = env_folder("py3.11-torch2.0.1-lightning2.3.3", marker=False)
    (tmp_path / f"{half.name}.lock").write_text("")  # a half-built folder beside its lock
    foreign = env_folder("my-own-venv", marker=False)  # not built by the harness: untouched
    shared = tmp_path / "cache-file"
    shared.write_bytes(b"y" * 65536)
    os.link(shared, gone / "bin" / "hardlinked")  # a file hardlinked from uv's cache

    planned = prune_environments(tmp_path, [kept.name], dry_run=True)
    assert sorted(p.name for p in planned) == sorted([gone.name, half.name])
    assert gone.is_dir() and half.is_dir()  # a dry run removes nothing
    # the hardlinked file belongs to the cache too: only the folder's own blocks count
    assert 8192 <= next(p for p in planned if p.name == gone.name).bytes < 65536

    removed = prune_environments(tmp_path, [kept.name])
    assert sorted(p.name for p in removed) == sorted([gone.name, half.name])
    assert not gone.exists() and not half.exists()
    assert not (tmp_path / f"{half.name}.lock").exists()
    assert kept.is_dir() and foreign.is_dir() and shared.read_bytes() == b"y" * 65536


@pytest.mark.slow
def test_the_warm_worker_is_the_health_check_and_the_same_report(tmp_path: Path) -> None:
    from harness.envs.backends import CHILD, run_probe
    from harness.execute.warm import WarmProber

    backend = UvBackend(tmp_path)
    plain = backend.ensure_spec(spec("1.16.0"), ENV)  # the health check in a process of its own
    prober = WarmProber(CHILD, None, "six-env")
    warm = backend.ensure_spec(spec("1.16.0"), ENV, prober)
    try:
        assert warm.reused and prober.worker is not None and prober.worker.alive
        assert warm.probe == plain.probe == run_probe(warm.python, (("six",),)).seen
        # a broken environment fails the worker's check as it fails the plain one: rebuilt,
        # and the rebuilt environment gets a new worker
        first = prober.worker
        site = next((tmp_path / "six-env").glob("lib/python*/site-packages"))
        (site / "six.py").unlink()
        rebuilt = backend.ensure_spec(spec("1.16.0"), ENV, prober)
        assert not rebuilt.reused and rebuilt.probe["six"] == "1.16.0"
        assert not first.alive and prober.worker is not None and prober.worker.alive
    finally:
        prober.discard()


def test_envs_prune_cli_keeps_what_the_matrix_names(tmp_path: Path) -> None:
    import subprocess

    repo = REPO
    shutil.copy(repo / "matrix.yaml", tmp_path / "matrix.yaml")
    envs = tmp_path / "envs"
    for name in ("py3.11-torch2.13.0-lightning2.6.6", "py3.11-torch2.4.0-lightning2.5.6"):
        (envs / name).mkdir(parents=True)
        (envs / name / MARKER).write_text("{}")

    def prune(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "harness", "--repo", str(tmp_path), "envs", "prune"]
            + ["--envs-dir", str(envs), *args],
            capture_output=True,
            text=True,
            cwd=repo,
            check=False,
        )

    dry = prune("--dry-run")
    assert dry.returncode == 0, dry.stdout + dry.stderr
    assert "would remove" in dry.stdout and "torch2.4.0" in dry.stdout
    assert "torch2.13.0" not in dry.stdout.split("environment(s)")[0]
    assert (envs / "py3.11-torch2.4.0-lightning2.5.6").is_dir()
    done = prune()
    assert done.returncode == 0 and "1 environment(s)" in done.stdout
    assert sorted(p.name for p in envs.iterdir()) == ["py3.11-torch2.13.0-lightning2.6.6"]


def test_envs_prune_keeps_the_derived_environments_an_entry_runs_in(tmp_path: Path) -> None:
    """A variant's requires: makes environments matrix.yaml does not name: the entries do,
    and prune keeps those a profile's plan uses (it removed them all before)."""
    import subprocess

    from harness.execute.plan import make_plan
    from harness.spec.entries import load_entries
    from harness.spec.matrix import load_matrix

    shutil.copy(REPO / "matrix.yaml", tmp_path / "matrix.yaml")
    entry = tmp_path / "repros" / "tiny" / "faults"
    shutil.copytree(REPO / "tests" / "resources" / "entries" / "tiny" / "faults", entry)
    text = (entry / "entry.yaml").read_text()
    (entry / "entry.yaml").write_text(text.replace("claims:", 'requires: ["six<2"]\nclaims:', 1))
    plan = make_plan(
        load_matrix(tmp_path / "matrix.yaml").expand("cpu"), load_entries(tmp_path / "repros")
    )
    derived = sorted({job.env.id for job in plan.jobs})[0]
    assert "-with-six-lt2" in derived
    envs = tmp_path / "envs"
    for name in (derived, derived.replace("six-lt2", "six-lt1")):
        (envs / name).mkdir(parents=True)
        (envs / name / MARKER).write_text("{}")
    done = subprocess.run(
        [sys.executable, "-m", "harness", "--repo", str(tmp_path), "envs", "prune"]
        + ["--envs-dir", str(envs)],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 environment(s)" in done.stdout
    assert sorted(p.name for p in envs.iterdir()) == [derived]


UNSAT = """Resolved 3 packages in 12ms
  x No solution found when resolving dependencies:
  `-> Because there is no version of six==1.16.0+cu118 and you require six==1.16.0+cu118, we
      can conclude that your requirements are unsatisfiable.
"""


def test_an_install_failure_says_whether_the_index_cannot_serve_it() -> None:
    unsat = install_failure(("six==1.16.0+cu118",), UNSAT)
    assert isinstance(unsat, CannotServe)
    assert str(unsat).startswith("six==1.16.0+cu118: a local build")
    assert "does not serve" in str(unsat) and "download.pytorch.org" in str(unsat)
    assert "we\n      can conclude that your requirements are unsatisfiable" in str(unsat)
    assert "Resolved 3 packages" not in str(unsat)  # uv's progress is not its reason
    plain = install_failure(("numpy<1", "torch==2.6.0"), UNSAT.replace("+cu118", ""))
    assert isinstance(plain, CannotServe) and str(plain).startswith("uv pip install numpy<1 ")
    # a download or a build that failed is not a measurement: the environment failed
    down = install_failure(("six==1.16.0",), "error: Failed to fetch: `https://pypi.org/simple`")
    assert type(down) is EnvFailed and "Failed to fetch" in str(down)


# uv 0.9's words with UV_OFFLINE=1 and a package its cache lacks (issue 36, item 4)
OFFLINE = """error: No solution found when resolving dependencies
  cause: Because onnx was not found in the cache and you require onnx==1.16.0, we can conclude that your requirements are unsatisfiable.

hint: Packages were unavailable because the network was disabled. When the network is disabled, registry packages may only be read from the cache.
"""


def test_an_index_that_could_not_be_asked_is_the_environments_failure() -> None:
    """Offline, uv says "no solution": that proves nothing of the index, so the record is
    env_failed (retried by --resume), never unsupported ("cannot be installed")."""
    offline = install_failure(("onnx==1.16.0",), OFFLINE)
    assert type(offline) is EnvFailed
    assert str(offline).startswith("the package index was not reachable: uv ran offline")
    full = install_failure(
        ("onnx",), "error: failed to write: No space left on device (os error 28)"
    )
    assert type(full) is EnvFailed and str(full).startswith("the disk is full")


@pytest.mark.slow
def test_uv_offline_without_the_package_is_env_failed(tmp_path: Path) -> None:
    """The same with a real uv, offline, over an empty cache."""
    import os

    backend = UvBackend(tmp_path)
    env = dict(os.environ, UV_OFFLINE="1", UV_CACHE_DIR=str(tmp_path / "cache"))
    old = {k: os.environ.get(k) for k in ("UV_OFFLINE", "UV_CACHE_DIR")}
    os.environ.update({k: env[k] for k in old})
    try:
        with pytest.raises(EnvFailed) as info:
            backend.ensure_spec(EnvSpec("x", PY, ("six==1.16.0",), imports=(("six",),)), ENV)
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    assert type(info.value) is EnvFailed and "not reachable" in str(info.value)


@pytest.mark.slow
def test_requirements_the_index_cannot_serve_are_said_so_by_the_resolver(tmp_path: Path) -> None:
    backend = UvBackend(tmp_path)
    with pytest.raises(CannotServe) as info:
        backend.ensure_spec(EnvSpec("x", PY, ("six==1.16.0+cu118",), imports=(("six",),)), ENV)
    assert "a local build" in str(info.value) and "unsatisfiable" in str(info.value)
    with pytest.raises(CannotServe) as info:
        backend.ensure_spec(EnvSpec("y", PY, ("six==1.16.0", "six<1.10"), imports=(("six",),)), ENV)
    assert "No solution found when resolving dependencies" in str(info.value)
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()


def test_health_check_names_why_each_alternative_does_not_import(tmp_path: Path) -> None:
    # pytorch-lightning<2.0 in place of lightning: "No module named 'lightning'" alone hid
    # why pytorch_lightning did not import either
    broken = EnvSpec(
        "broken", PY, ("six==1.16.0",), imports=(("six",), ("no_such_module_x", "six.moves.nope"))
    )
    with pytest.raises(EnvFailed) as info:
        UvBackend(tmp_path).ensure_spec(broken, ENV)
    text = str(info.value)
    assert "No module named 'no_such_module_x'" in text
    assert "(six.moves.nope: ModuleNotFoundError: No module named 'six.moves.nope')" in text


def _script(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "fake-python"
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return path


def test_a_probe_is_bounded_in_time_and_output(tmp_path: Path) -> None:
    """A shell script that sleeps held `run --python` for ever (its `sleep` kept the pipes
    open after a timeout killed the shell); one that printed 10 MB had it all kept and
    shown (issue 25, item 8)."""
    started = time.monotonic()
    out = run_bounded([str(_script(tmp_path, "sleep 3600 &\nsleep 3600\n"))], timeout=1)
    assert out.returncode is None and time.monotonic() - started < 10
    loud = run_bounded([str(_script(tmp_path, "head -c 50000000 /dev/zero\n"))], 60, limit=1000)
    assert (loud.returncode, len(loud.stdout), loud.printed) == (0, 1000, 50_000_000)
    assert identify_python(sys.executable) == ".".join(map(str, sys.version_info[:3]))
    with pytest.raises(NotAPython, match=r"status 0 .*'x{200}' \(its first 200 .*of 300 bytes"):
        identify_python(_script(tmp_path, "head -c 300 /dev/zero | tr '\\0' x\n"))
    with pytest.raises(NotAPython, match="did not answer within 0.5 s"):
        identify_python(_script(tmp_path, "sleep 3600\n"), timeout=0.5)


def _wheel(folder: Path, name: str, version: str, requires: tuple[str, ...] = ()) -> None:
    """A pure-Python wheel made here, with its Requires-Dist."""
    import base64
    import hashlib
    import zipfile

    module = name.replace("-", "_")
    dist = f"{module}-{version}"
    metadata = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
    metadata += "".join(f"Requires-Dist: {r}\n" for r in requires)
    files = {
        f"{module}.py": "VALUE = 1\n",
        f"{dist}.dist-info/METADATA": metadata,
        f"{dist}.dist-info/WHEEL": (
            "Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        ),
    }
    lines = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=")
        lines.append(f"{path},sha256={digest.decode()},{len(text.encode())}")
    lines.append(f"{dist}.dist-info/RECORD,,")
    folder.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(folder / f"{dist}-py3-none-any.whl", "w") as archive:
        for path, text in files.items():
            archive.writestr(path, text)
        archive.writestr(f"{dist}.dist-info/RECORD", "\n".join(lines) + "\n")


def test_a_derived_environment_lists_every_distribution_it_holds_beyond_its_rows(
    tmp_path: Path,
) -> None:
    """Issue 36: a variant's requires: builds a derived environment, and its records listed
    only the packages the requirements name, read from the request: a dependency the
    requirement pulled in (or a package a name installed under another name) went
    unlisted. The record now lists what the environment holds beyond its row's."""
    from harness.execute.runner import versions_of

    wheels = tmp_path / "wheels"
    _wheel(wheels, "harness-advice-top", "1.0", ("harness-advice-dep>=2",))
    _wheel(wheels, "harness-advice-dep", "2.0")
    backend = UvBackend(tmp_path / "envs", standin="six=={torch}")
    row = Environment(python=PY, torch="1.16.0", lightning="0", find_links=(str(wheels),))
    derived = row.with_requires(("harness-advice-top==1.0",), lightning=False)
    assert derived != row
    built = backend.ensure(derived)
    versions = versions_of(built)
    assert versions["six"] == "1.16.0"  # the row's, as the probe imported it
    assert versions["harness-advice-top"] == "1.0"  # what was asked
    assert versions["harness-advice-dep"] == "2.0"  # what it pulled in: not asked for
    row_built = backend.ensure(row)
    assert not set(row_built.installed) & {"harness-advice-top", "harness-advice-dep"}
    # reused: the same answer, from the environment's marker
    again = backend.ensure(derived)
    assert again.reused and versions_of(again) == versions


def test_a_derived_environment_keeps_its_own_warm_worker_while_its_row_is_checked(
    tmp_path: Path,
) -> None:
    """Building a derived environment checks its row's environment too (what it holds beyond
    the row's). That check once went through the derived environment's prober, which swapped
    the row's warm worker in for the derived one's: every job of the derived environment then
    ran in its row's interpreter (a ``requires: [transformers]`` variant found no
    transformers; a ``pytorch-lightning<2.0`` one ran under the row's lightning 2), while its
    records named the derived environment's versions. The worker stays the derived
    environment's, built afresh or reused."""
    from harness.envs.backends import CHILD
    from harness.execute.warm import WarmProber

    wheels = tmp_path / "wheels"
    _wheel(wheels, "harness-advice-top", "1.0")
    backend = UvBackend(tmp_path / "envs", standin="six=={torch}")
    row = Environment(python=PY, torch="1.16.0", lightning="0", find_links=(str(wheels),))
    derived = row.with_requires(("harness-advice-top==1.0",), lightning=False)
    for reuse in (False, True):
        if reuse:  # a marker without the list beyond the row: listed again on reuse
            marker = next((tmp_path / "envs").glob(f"*{derived.id}*/{MARKER}"))
            meta = json.loads(marker.read_text())
            del meta["beyond_row"]
            marker.write_text(json.dumps(meta))
        prober = WarmProber(CHILD, None, derived.id)
        try:
            built = backend.ensure(derived, prober)
            assert built.reused is reuse
            assert prober.worker is not None and prober.worker.alive
            assert prober.worker.python == built.python  # not the row's interpreter
            assert "harness-advice-top" in (built.beyond_row or {})
        finally:
            prober.discard()
