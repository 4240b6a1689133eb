"""What the runs can show about one knowledge-base record: its scenarios, inside its scope.

The unit of evidence is the *scenario*: a variant reading x release x device x precision (one
cell of the matrix). Trials of a scenario only settle whether it is flaky: a scenario whose
counted trials all went one way went that way, one whose trials disagree is ``flaky``.

A record's *scope* is what it speaks of, and only runs inside it count:
- its runtime's ``version_range`` over the version the run really had (``pytorch``: torch,
  ``transformers``: transformers, ``cpython``/``python``: Python, ``cuda``: the CUDA toolkit
  the torch build ships, ``torch.version.cuda``); a runtime the runs do not record is out of
  reach, so nothing is in scope;
- its device: a record on CUDA (its message only a CUDA run can raise, entry.yaml
  ``signature.device: cuda``; its runtime the CUDA toolkit; its hardware a GPU), or a claim
  that names a CUDA, cuDNN, cuSOLVER, NCCL or
  flash-attention behaviour, is spoken for by CUDA runs only; a CPU twin never is;
- a claim's condition: a variant outside it (``claim.condition`` without ``within``) is left
  out.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from harness.aggregate import OUTCOME_ORDER, EntryAggregate, VariantAggregate
from harness.outcomes import NOT_COUNTED, Grade, Outcome, grade
from harness.spec.entries import Entry

__all__ = [
    "CUDA_WORDS",
    "RecordScope",
    "Scenario",
    "Trial",
    "claim_device",
    "record_on_cuda",
    "record_scope",
    "scenarios",
    "public_version",
    "span",
    "trials",
]

# a claim that names one of these speaks of a CUDA device's behaviour
CUDA_WORDS = re.compile(
    r"\b(cuda|cudnn|cusolver|cublas|nccl|flash[-_ ]?attn|flash[-_ ]?attention|gpu)", re.I
)
_NOT_COUNTED = frozenset(OUTCOME_ORDER.index(o) for o in NOT_COUNTED)
_OK = OUTCOME_ORDER.index(Outcome.OK)
# the version a record's runtime speaks of, as the runs record it
_RUNTIME_KEY = {
    "pytorch": "torch",
    "torch": "torch",
    "transformers": "transformers",
    "cpython": "python",
    "python": "python",
    "cuda": "torch_cuda",
}


def public_version(text: str) -> Version | None:
    """A version's public part ("2.1.2" of "2.1.2+cu121"), or None where it is no version."""
    try:
        return Version(Version(str(text)).public)
    except InvalidVersion:
        return None


def span(versions: Sequence[Version]) -> str:
    """ "2.0.1", "2.0.1–2.15.0"; versions in order."""
    if not versions:
        return ""
    return str(versions[0]) if len(versions) == 1 else f"{versions[0]}–{versions[-1]}"


@dataclass(frozen=True)
class RecordScope:
    runtime: str  # the record's runtime.name
    version_range: str  # as the record states it
    key: str | None  # which recorded version it is read against; None: the runs have none
    specifier: SpecifierSet | None
    device: str  # "cuda": only CUDA runs speak for the record's message; "" any device
    why_out: str = ""  # why nothing can be in scope ("" where runs can be)

    def admits(self, versions: Mapping[str, str]) -> bool:
        if self.key is None or self.specifier is None:
            return False
        version = public_version(versions.get(self.key) or "")
        return version is not None and self.specifier.contains(version, prereleases=True)

    def words(self) -> str:
        if self.key is None:
            return f"{self.runtime} {self.version_range}: {self.why_out}"
        return f"{self.runtime} {self.version_range or '(any)'}"


def record_scope(record: Mapping[str, Any], entry: Entry) -> RecordScope:
    runtime = (record.get("environment") or {}).get("runtime") or {}
    name = str(runtime.get("name") or "")
    text = str(runtime.get("version_range") or "")
    device = "cuda" if record_on_cuda(record, entry) else ""
    key = _RUNTIME_KEY.get(name.lower())
    if key is None:
        return RecordScope(name, text, None, None, device, "the runs do not record this runtime")
    try:
        spec = SpecifierSet(text)
    except InvalidSpecifier:
        return RecordScope(name, text, None, None, device, "not a version specifier")
    return RecordScope(name, text, key, spec, device)


def record_on_cuda(record: Mapping[str, Any], entry: Entry) -> bool:
    """Whether the record speaks of a CUDA device: its message only a CUDA run can raise
    (entry.yaml ``signature.device: cuda``), its runtime is the CUDA toolkit, or its hardware
    names a GPU (not "any")."""
    environment = record.get("environment") or {}
    runtime = str((environment.get("runtime") or {}).get("name") or "").lower()
    gpu = str((environment.get("hardware") or {}).get("gpu") or "").strip().lower()
    return (
        entry.signature.device == "cuda"
        or runtime == "cuda"
        or gpu not in ("", "any", "none", "cpu", "n/a")
    )


def claim_device(scope: RecordScope, *texts: str) -> str:
    """ "cuda" where the record or the claim's own words speak of a CUDA device's behaviour."""
    if scope.device == "cuda" or any(CUDA_WORDS.search(t or "") for t in texts):
        return "cuda"
    return ""


@dataclass(frozen=True)
class Trial:
    """One counted trial inside the record's scope."""

    variant: VariantAggregate
    env: str
    release: Version  # torch, public
    device: str
    precision: str
    ok: bool
    outcome: str
    grade: Grade | None  # baselines: how it reads against the documented message
    message: str  # "Type: message" where it raised, else ""
    started: str
    versions: Mapping[str, str]


def trials(agg: EntryAggregate, entry: Entry, scope: RecordScope) -> Iterator[Trial]:
    """The counted trials inside ``scope``, in the page's order. A workaround's or dead end's trial counts only in the cells where a baseline
    reproduced (the variant's ``scope``), and only inside its claim's condition."""
    t = agg.trials
    texts = t.texts.texts
    torch_of = {e.id: public_version(e.torch) for e in agg.envs}
    reworded = entry.reworded
    offset = 0
    for d, p in agg.slices:
        for v in agg.variants:
            outside = bool(v.condition) and not v.within
            for e in agg.envs:
                value = agg.cells.get((v.name, e.id, d, p))
                count = value.trials if value is not None else 0
                rows = range(offset, offset + count)
                offset += count
                if not count or outside:
                    continue
                if v.kind in ("workaround", "dead_end") and (e.id, d, p) not in v.scope:
                    continue
                release = torch_of.get(e.id)
                if release is None:
                    continue
                for i in rows:
                    o = int(t.outcome[i])
                    if o in _NOT_COUNTED:
                        continue
                    versions, _ = t.texts.objects[int(t.versions[i])]
                    if not scope.admits(versions):
                        continue
                    type_id, message_id, _ = t.texts.exceptions[int(t.exception[i])]
                    exc_type, exc_message = texts[type_id], texts[message_id]
                    outcome = OUTCOME_ORDER[o].value
                    g = None
                    if v.kind == "baseline":
                        g = grade(
                            outcome,
                            exc_type,
                            exc_message,
                            entry.signature.type,
                            entry.signature.message,
                            reworded.message if reworded else None,
                            (reworded.type or entry.signature.type) if reworded else "",
                        )
                    yield Trial(
                        v,
                        e.id,
                        release,
                        d,
                        p,
                        o == _OK,
                        outcome,
                        g,
                        f"{exc_type}: {exc_message}" if exc_type else "",
                        texts[int(t.started[i])],
                        versions,
                    )


@dataclass(frozen=True)
class Scenario:
    """One reading x release x device x precision, from its counted trials in scope."""

    variant: VariantAggregate
    release: Version
    device: str
    precision: str
    trials: int
    ok: int  # trials that were ok

    @property
    def status(self) -> str:
        """ "works" (every trial ok), "fails" (none ok), "flaky" (they disagree)."""
        if self.ok == self.trials:
            return "works"
        return "fails" if self.ok == 0 else "flaky"


def scenarios(found: Sequence[Trial]) -> list[Scenario]:
    """The trials grouped into scenarios (environments of one torch release are one release:
    another lightning beside the same torch is the same scenario for a torch record)."""
    groups: dict[tuple[str, Version, str, str], list[Trial]] = {}  # in the trials' order
    for tr in found:
        groups.setdefault((tr.variant.name, tr.release, tr.device, tr.precision), []).append(tr)
    out = []
    for key, group in groups.items():
        out.append(
            Scenario(
                group[0].variant,
                key[1],
                key[2],
                key[3],
                len(group),
                sum(tr.ok for tr in group),
            )
        )
    return out
