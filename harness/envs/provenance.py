"""Where a record was measured: the machine, its GPU/driver, the harness and its revision.

The machine's identity (``machine_id``) is what tells apart two machines that share a host
name, as the machines of one fleet do (ours are all called ``vm``). It is a hash of two
things, so that it survives either of them being copied:

- ``/etc/machine-id`` (systemd's per-installation id), which tells apart two machines that
  share a results folder (a network mount, or a folder copied with rsync);
- a random id generated once per results folder and kept beside the records
  (``results/records/.machine-id``, ignored by git), which tells apart machines cloned from
  one image: their ``/etc/machine-id`` is often the same, and so is their host name.

Neither is published as is (systemd asks that the machine id stays private: it is hashed
with this application's name). A fresh clone of the repository is a new machine id; that
is deliberate: a mistaken "same machine" hides records (newest wins), a mistaken "other
machine" only shows one more column.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import platform
import socket
import subprocess
import uuid
from pathlib import Path

import harness

__all__ = [
    "MACHINE_ID_FILE",
    "cuda_provenance",
    "default_machine_name",
    "machine_id",
    "machine_provenance",
    "source_digest",
]

MACHINE_ID_FILE = ".machine-id"  # in the records folder, beside the record files


@functools.cache
def source_digest() -> str:
    """A digest of the harness's own source: every harness/**/*.py, by name and bytes
    (what the report's caches are keyed on, beside their own formats)."""
    h = hashlib.sha256()
    package = Path(harness.__file__).parent
    for path in sorted(package.rglob("*.py")):
        h.update(path.relative_to(package).as_posix().encode() + b"\0")
        h.update(hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()


def versions_text(libraries: tuple[str, ...]) -> str:
    """Python's version and each library's installed version ("absent" where it is not), as
    the text the report's caches put in their keys."""
    from importlib import metadata

    parts = [f"python {platform.python_version()}"]
    for name in libraries:
        try:
            version = metadata.version(name)
        except metadata.PackageNotFoundError:
            version = "absent"
        parts.append(f"{name} {version}")
    return "\0".join(parts) + "\0"


def _local_id(folder: Path) -> str:
    """The random id of this results folder, made on first use (once, even when racing)."""
    path = folder / MACHINE_ID_FILE
    with contextlib.suppress(FileNotFoundError):
        text = path.read_text().strip()
        if text:
            return text
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f"{MACHINE_ID_FILE}.{os.getpid()}.tmp"
    tmp.write_text(uuid.uuid4().hex + "\n")
    try:
        os.link(tmp, path)  # fails if another process made it first: then theirs is the id
    except FileExistsError:
        pass
    finally:
        tmp.unlink()
    return path.read_text().strip()


def machine_id(records_dir: Path, system_id_file: Path = Path("/etc/machine-id")) -> str:
    """12 hex digits naming this machine (see the module's docstring)."""
    try:
        system = system_id_file.read_text().strip()
    except OSError:
        system = ""
    digest = hashlib.sha256(
        f"torch-error-harness machine\0{system}\0{_local_id(records_dir)}".encode()
    )
    return digest.hexdigest()[:12]


def default_machine_name(records_dir: Path) -> str:
    """The name a machine's records go under when ``--machine`` names none: the host name
    and the start of its machine id ('vm-0090f397'). A host name alone collides: a fresh
    clone on a host named like the committer's would append to the committed file of that
    name. The id is already in every record; the name is unique per checkout and machine,
    and stays the same for one results folder."""
    return f"{socket.gethostname()}-{machine_id(records_dir)[:8]}"


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _run(argv: list[str], cwd: Path | None = None) -> str:
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=20, cwd=cwd, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return out.stdout.strip() if out.returncode == 0 else ""


# the whole checkout, less what the harness writes, is what the "-dirty" test looks at
# (git pathspecs from the top, wherever ``repo`` is in it)
_NOT_CODE = (":(top,exclude)results", ":(top,exclude)README.md")


def machine_provenance(repo: Path) -> dict[str, str]:
    gpu = _run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"])
    names = sorted({line.split(",")[0].strip() for line in gpu.splitlines() if line.strip()})
    drivers = sorted({line.split(",")[1].strip() for line in gpu.splitlines() if "," in line})
    rev = _run(["git", "rev-parse", "--short=12", "HEAD"], cwd=repo)
    # "-dirty": the code that runs differs from the commit. What the harness itself writes
    # (the records it appends, the report's outputs, the README's findings) is not code: a
    # second run before a commit still runs the commit's code
    dirty = _run(
        ["git", "status", "--porcelain", "--untracked-files=no", "--", ":(top)", *_NOT_CODE],
        cwd=repo,
    )
    return {
        "host": socket.gethostname(),
        "os": f"{platform.system()} {platform.release()}",
        "cpu": _cpu_model(),
        "gpu": "; ".join(names) or "none",
        "driver": "; ".join(drivers) or "none",
        "harness_version": harness.__version__,
        "git_rev": (rev + ("-dirty" if dirty else "")) if rev else "unknown",
    }


def cuda_provenance(machine: dict[str, str], probe: dict[str, str]) -> dict[str, str]:
    """The machine's provenance with the CUDA that an environment's torch uses on it.

    ``cuda`` is the CUDA build of the torch that ran ("none" where no GPU was usable), and
    ``compute_capability`` the GPU's; the GPU name comes from nvidia-smi, else from torch.
    Read from the environment's probe, which ran in a process of its own.
    """
    out = dict(machine)
    usable = probe.get("cuda_available") == "True"
    out["cuda"] = (probe.get("torch_cuda") or "none") if usable else "none"
    out["compute_capability"] = probe.get("compute_capability", "none") if usable else "none"
    if usable and out.get("gpu", "none") == "none" and probe.get("gpu"):
        out["gpu"] = probe["gpu"]
    if usable and probe.get("cuda_driver_api"):
        out["cuda_driver_api"] = probe["cuda_driver_api"]
    return out
