"""The domain's closed sets and formats, in one place that every module imports.

Devices, precisions, variant kinds, outcome kinds (defined with their meaning in
``harness.outcomes``), the version-table vocabulary of entries, and the environment and
cell id formats: made and parsed here, nowhere else.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

from harness.outcomes import NOT_COUNTED, Outcome, pattern_text

__all__ = [
    "clip",
    "MAX_VERSION_CHARS",
    "parse_version",
    "version_option",
    "CLAIM_PACKAGES",
    "COMPILE_NEEDS",
    "DEVICES",
    "FIXED_STATUSES",
    "GPU_USES",
    "KINDS",
    "NEEDS",
    "NOT_COUNTED",
    "OUTCOMES",
    "Outcome",
    "PRECISIONS",
    "PRESENT_STATUSES",
    "SMELLS",
    "SMELLS_OF_ENTRY",
    "EnvId",
    "cell_id",
    "env_id",
    "parse_env_id",
    "parse_claim_spec",
    "pattern_text",
]

# closed sets, in the order reports show them
DEVICES = ("cpu", "cuda")
PRECISIONS = ("fp32", "fp16", "bf16")
KINDS = ("baseline", "workaround", "dead_end", "control")  # variant kinds
OUTCOMES: tuple[Outcome, ...] = tuple(Outcome)
# what the records may say about a reproducer (harness/aggregate/smells.py): each is fixed
# or explained in entry.yaml; SMELLS_OF_ENTRY are about the entry (a postcondition), the
# others about one variant
SMELLS = (
    "never-fails",
    "same-as-control",
    "same-as-variant",
    "no-declared-failure",
    "judged-elsewhere",
    "environment-error",
)
SMELLS_OF_ENTRY = ("never-fails",)
# what a variant may need beyond its cell (entry.yaml ``needs``), decided before it runs
# (harness/envs/capabilities.py): torch.compile with its default backend (inductor), and
# TorchDynamo's capture alone (backend="eager"), both refusing a Python torch does not
# support; on a cuda cell, two CUDA devices (two-gpus), Triton installed (triton), the CUDA
# runtime library torch loaded, for ctypes calls (cuda-runtime)
NEEDS = ("torch.compile", "dynamo", "two-gpus", "triton", "cuda-runtime")
COMPILE_NEEDS = ("torch.compile", "dynamo")
# what a variant takes of the GPU on a cuda cell (entry.yaml ``gpu``): ``shared`` (the
# default) runs beside the other CUDA jobs; ``exclusive`` runs alone on the device (it fills
# the card or sizes itself from free memory, times kernels, or measures memory), while jobs
# of CPU cells go on (harness/execute/scheduler.py)
GPU_USES = ("shared", "exclusive")

# version-table statuses of an entry: the error occurs / does not occur in that range
PRESENT_STATUSES = frozenset({"active", "affected", "present"})
FIXED_STATUSES = frozenset({"fixed", "resolved", "removed", "not_affected", "not affected"})
# the packages a version-table spec may name -> the environment field it compares with
CLAIM_PACKAGES = {
    "torch": "torch",
    "lightning": "lightning",
    "pytorch-lightning": "lightning",
    "pytorch_lightning": "lightning",
    "python": "python",
}

_CLAIM_SPEC = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_.-]*)\s*(.*)$")


def parse_claim_spec(spec: str) -> tuple[str, SpecifierSet]:
    """A version-table spec, 'torch>=1.10,<2' -> ('torch', SpecifierSet('>=1.10,<2')): the
    environment field it constrains (see CLAIM_PACKAGES) and the versions. ValueError
    saying what is wrong otherwise."""
    m = _CLAIM_SPEC.match(spec)
    if not m:
        raise ValueError(f"{spec!r} is not '<package><specifiers>', e.g. 'torch>=1.10'")
    package = m.group(1).lower()
    if package not in CLAIM_PACKAGES:
        raise ValueError(
            f"{spec!r} names {package!r}; a version-table spec names one of "
            f"{sorted(CLAIM_PACKAGES)}"
        )
    try:
        return CLAIM_PACKAGES[package], SpecifierSet(m.group(2).replace(" ", ""))
    except ValueError as exc:  # InvalidSpecifier, or more digits than int() converts
        raise ValueError(f"{spec[:80]!r}: {str(exc)[:200]}") from exc


MAX_VERSION_CHARS = 64


def parse_version(text: str) -> Version:
    """packaging's Version of ``text``, which is at most MAX_VERSION_CHARS long: one of
    5,000 digits is past int()'s conversion limit, a ValueError traceback (a bisect
    range, ``explain --torch``, a probe's answer). Raises InvalidVersion."""
    if len(text) > MAX_VERSION_CHARS:
        raise InvalidVersion(f"{text[:24]}…: longer than {MAX_VERSION_CHARS} characters")
    try:
        return Version(text)
    except InvalidVersion:
        raise
    except ValueError as exc:  # more digits than int() converts
        raise InvalidVersion(f"{text[:24]}…: {str(exc)[:120]}") from None


def version_option(text: str) -> str:
    """An argparse type for an option that names a release (or a series, ``2.5.x``): at most
    MAX_VERSION_CHARS characters, or "A..B" of two such."""
    parts = text.split("..")
    if len(parts) > 2 or any(len(p) > MAX_VERSION_CHARS for p in parts):
        import argparse

        raise argparse.ArgumentTypeError(
            f"{text[:24]!r}…: a version is at most {MAX_VERSION_CHARS} characters"
        )
    return text


@dataclass(frozen=True)
class EnvId:
    python: str
    torch: str
    lightning: str


def env_id(python: str, torch: str, lightning: str) -> str:
    """'py3.10-torch1.12.1-lightning2.1.4'"""
    return f"py{python}-torch{torch}-lightning{lightning}"


def cell_id(env: str, device: str, precision: str) -> str:
    """'py3.10-torch1.12.1-lightning2.1.4-cpu-fp16'"""
    return f"{env}-{device}-{precision}"


_ENV_ID = re.compile(r"^py(?P<python>[^-]+)-torch(?P<torch>[^-]+)-lightning(?P<lightning>[^-]+)$")
_ENV_PART = re.compile(r"(?:^|-)(py|torch|lightning)([0-9][^-]*)")


def parse_env_id(text: str) -> EnvId:
    """The versions an environment id names; a part the id lacks is "" (ids written by
    hand or by an older harness may leave one out)."""
    m = _ENV_ID.match(text)
    if m:
        return EnvId(m["python"], m["torch"], m["lightning"])
    named = {k: v for k, v in _ENV_PART.findall(text)}
    return EnvId(named.get("py", ""), named.get("torch", ""), named.get("lightning", ""))


def clip(text: str, limit: int) -> str:
    """``text`` in at most ``limit`` characters, cut at the end of a word (never inside a
    quoted name: "No module named '" is no message) with " ..." where it was cut."""
    if len(text) <= limit:
        return text
    cut = text[: max(limit - 4, 1)]
    at = cut.rfind(" ")
    return (cut[:at] if at > 0 else cut).rstrip(" :,;") + " ..."
