"""repros/<id>/entry.yaml -> frozen Entry records: signature, claims and variants.

An entry directory holds:
  entry.yaml   what the harness needs, parsed once from the document (this module's input)
  source.md    the knowledge-base document, verbatim; never edited
  document.md  the entry's own document; write-back fills its marked blocks
  repro.py     the reproducer (torch, lightning and repros/reprokit.py only)

docs/reference/entry-yaml.md describes every key. The variants of entry.yaml and the ``VARIANTS``
literal of repro.py must name the same variants (read statically, see declared.py); a
variant that ``VARIANTS`` maps to None (not written yet) is loaded with ``written=False`` and
never planned. A variant's description and its devices and precisions are entry.yaml's only.
"""

from __future__ import annotations

import dataclasses
import datetime
import difflib
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from harness.domain import (
    COMPILE_NEEDS,
    DEVICES,
    FIXED_STATUSES,
    GPU_USES,
    KINDS,
    NEEDS,
    PRECISIONS,
    PRESENT_STATUSES,
    SMELLS,
    SMELLS_OF_ENTRY,
    parse_claim_spec,
)
from harness.errors import HarnessError
from harness.outcomes import Grade, Outcome, grade
from harness.paths import part_problem, relative_problem
from harness.spec.backtracking import backtracking_problem
from harness.spec.declared import DeclaredError, read_declared
from harness.spec.triage import TriageError, UnmeasuredClaim, triage_row
from harness.spec.yaml_values import Lines, YamlReader, check_keys, compose_file, plain

__all__ = [
    "ORIGIN_KEYS",
    "FAILURE_KINDS",
    "PROMISE_KINDS",
    "ClaimMeaning",
    "Claims",
    "Entry",
    "EntryError",
    "FailsAs",
    "Reworded",
    "Signature",
    "Variant",
    "VersionClaim",
    "failure_kind",
    "load_entries",
    "measures_kind",
    "load_entry",
    "rewritten_since",
]

ID_PATTERN = re.compile(r"^[a-z0-9][a-z0-9_.-]*(/[a-z0-9][a-z0-9_.-]*)*$")
NAME_PATTERN = re.compile(r"^[a-z0-9][a-z0-9_.-]*$")
# facts about the knowledge-base document an entry was made from (`harness new` writes them)
ORIGIN_KEYS = {
    "format": "markdown | scraped | deadends-json",
    "id": "the document's own id",
    "url": "where the document lives",
    "domain": "e.g. pytorch",
    "category": "e.g. runtime_error",
    "runtime": "the runtime the document names, e.g. pytorch",
    "version_range": "the document's runtime version range, e.g. '>=2.0'",
    "os": "the operating system the document names",
    "first_seen": "date",
    "last_confirmed": "date",
    "resolvable": "the document's resolvable verdict",
    "confidence": "the document's confidence, 0..1",
    "review_status": "e.g. auto_generated",
    "generated_by": "the generator the document names",
    "evidence_count": "how many sources the document counts",
    "thrown_at": "source location the document gives",
    "related": "other messages the document lists as related",
    "schema_version": "the document's schema version",
    "message": "the error message as the document writes it (signature.message is a regex)",
    "regex": "the document's own pattern for the message, kept as a fact (deadends.dev's "
    "error.regex); it is not what the harness matches",
    "record": "the knowledge base's record, kept byte for byte beside entry.yaml (e.g. "
    "kb-record.json): what `corrections` edits",
    "path": "the record's path in the knowledge base's repository",
    "commit": "the knowledge base's commit at which the kept record is the file at its path "
    "(40 hex digits)",
}


class EntryError(HarnessError):
    """An invalid entry (entry.yaml, or what its repro.py declares)."""


@dataclass(frozen=True)
class Signature:
    type: str  # exception class name, plain or dotted
    message: str  # regular expression, searched in str(exception)
    # a baseline's own signature only: why its error is what torch raises in the documented
    # situation, where the document's message is an umbrella torch never says ("" where the
    # error stands in for the situation instead, such as a CPU twin of a CUDA error)
    instead: str = ""
    # the documented signature only: the device that alone can raise the message ("cuda": a
    # CUDA runtime's or NCCL's words). Only runs on it count for or against the message; a
    # CPU twin's runs wait for it (docs/reference/outcomes-and-verdicts.md, stand-ins)
    device: str = ""

    def to_dict(self) -> dict[str, str]:
        return {"type": self.type, "message": self.message}


@dataclass(frozen=True)
class Reworded:
    """torch's own wording of the documented error, where the document put it in other words
    (entry.yaml ``signature.reworded``): an expert's judgement that a run raising this, under
    the documented type, raised the documented error. It changes no run's outcome; it is how
    the claim "this message occurs" reads the runs (docs/reference/outcomes-and-verdicts.md,
    "Documented messages, graded")."""

    message: str  # regular expression, searched in str(exception), as signature.message
    why: str  # one line: why this is the documented error in other words
    # the documented type's subclass torch raises it as ("UnsupportedOperatorError" for a
    # document's "OnnxExporterError"), where it is one: "" reads it under the documented type
    type: str = ""
    line: int | None = dataclasses.field(default=None, compare=False)


@dataclass(frozen=True)
class VersionClaim:
    spec: str  # e.g. "torch>=1.10"
    status: str  # e.g. "active"
    introduced: str | None = None
    deprecated: str | None = None


@dataclass(frozen=True)
class Claims:
    verification: str | None = None  # e.g. "ai_generated"
    fix_rate: float | None = None  # 0..1
    version_table: tuple[VersionClaim, ...] = ()
    conditions: tuple[str, ...] = ()  # conditions the document names, as text


@dataclass(frozen=True)
class FailsAs:
    """How a dead end fails as the document says when the failure is silent (no exception):
    the run ends ``wrong_result`` with at least one of these postconditions failed
    (entry.yaml ``fails_as``; the counting rule is in docs/reference/outcomes-and-verdicts.md).
    On a baseline, with ``instead``: the documented situation itself fails silently (torch
    raises nothing where the document names an error), and these postconditions failing is
    what the situation does instead of raising it."""

    outcome: str  # "wrong_result", the only outcome a silent failure has
    postconditions: tuple[str, ...]  # names run() returns; any one failing is the failure
    line: int | None = dataclasses.field(default=None, compare=False)
    # the kind of failure these postconditions measure (one of FAILURE_KINDS but "raises"):
    # a time ratio measures "slower", a peak memory "more-memory", a dtype "precision"...
    measures: str = "wrong-result"
    # a baseline's only: why this silent failure is the documented situation where torch
    # raises nothing (one line, as a baseline signature's ``instead``)
    instead: str = ""


# the outcomes a declared silent failure may have (a failure that raises is a `signature`)
FAILS_AS_OUTCOMES = (Outcome.WRONG_RESULT.value,)

# What a dead end's documented failure is (entry.yaml ``claim.kind``): only a measurement of
# the same kind counts for or against it (docs/reference/outcomes-and-verdicts.md, "What a
# claim means"). ``raises``: an error, the documented one or the dead end's own signature
FAILURE_KINDS = (
    "raises",
    "wrong-result",
    "slower",
    "more-memory",
    "security",
    "precision",
    "brittle",
)
# what a workaround promises: a fix (the error goes away and the work is done), or a
# diagnostic (a check: it flags the faulty input and passes a good one)
PROMISE_KINDS = ("fix", "diagnostic")


@dataclass(frozen=True)
class ClaimMeaning:
    """What a workaround's or dead end's claim means, as its document means it (entry.yaml
    ``claim``: ``kind``, ``unmeasured``, ``condition``, ``within``)."""

    # FAILURE_KINDS for a dead end, PROMISE_KINDS for a workaround; None: not declared
    kind: str | None = None
    # why these runs cannot measure the documented kind (brittleness, a GPU's speed on a
    # CPU): the claim is "not measurable", never judged by a substitute
    unmeasured: str | None = None
    condition: str | None = None  # the document's condition, quoted ("only when ...")
    within: str | None = None  # how the variant meets the condition; None: outside it
    # a diagnostic's postconditions that show the check at work: it flags the faulty input
    # and passes a good one (judged by detection, never by whether the error goes away)
    detects: tuple[str, ...] = ()
    line: int | None = dataclasses.field(default=None, compare=False)


@dataclass(frozen=True)
class Variant:
    name: str
    kind: str  # one of KINDS
    description: str
    devices: tuple[str, ...] = DEVICES
    precisions: tuple[str, ...] = PRECISIONS
    # the variant's own expected error, beside the documented one: an error the document
    # lists as related, or the failure a dead end is said to end in. A run that raises it
    # is recorded as "related", never as "reproduced" (DESIGN.md, "Documented vs related")
    signature: Signature | None = None
    # a dead end's documented failure when it is silent: which postconditions failing is the
    # failure the document describes (counted as failing as documented, like `signature`)
    fails_as: FailsAs | None = None
    claim_ref: str | None = None  # "workaround 1", "dead end 2", "solution 3"
    claimed_rate: float | None = None  # success rate (workaround) or failure rate (dead end)
    meaning: ClaimMeaning = ClaimMeaning()  # the claim's kind, condition, what is unmeasured
    reading: str | None = None  # "literal" or "sensible" where the document is ambiguous
    # "process": always a fresh interpreter (never forked from a warm worker); None: the run's
    isolation: str | None = None
    line: int | None = None
    written: bool = True  # False while repro.py's VARIANTS maps it to None: never planned
    # version advice ("pin lightning<2.0", "downgrade numpy"): PEP 508 requirements added to
    # the cell's own; the variant runs in an environment derived from the cell it answers
    # for (spec/matrix.py, Environment.with_requires) and is judged in that cell
    requires: tuple[str, ...] = ()
    # the baselines whose reproducing cells judge this workaround or dead end (entry.yaml
    # ``baselines``); () for every baseline of the entry
    baselines: tuple[str, ...] = ()
    # what it needs beyond its cell (entry.yaml ``needs``), decided before it runs
    needs: tuple[str, ...] = ()
    # what it takes of the GPU on a cuda cell (entry.yaml ``gpu``, its own or the entry's):
    # "shared" beside other CUDA jobs, or "exclusive": alone on the device
    gpu: str = "shared"
    # when its code last changed what it measures (ISO date or UTC time, entry.yaml
    # ``rewritten``): records started before are an older reproducer's and are not read
    rewritten: str | None = None
    # the smells the records show of it, explained: kind -> one line (harness/aggregate/smells.py)
    smells: Mapping[str, str] = dataclasses.field(default_factory=dict, hash=False)


@dataclass(frozen=True)
class Entry:
    id: str
    dir: Path
    title: str
    signature: Signature
    claims: Claims
    variants: tuple[Variant, ...]
    source: Path  # verbatim original
    document: Path  # write-back target
    repro: Path
    origin: Mapping[str, Any] = dataclasses.field(default_factory=dict, hash=False, compare=False)
    # whether repro.py imports lightning (read statically, harness/spec/declared.py). One that
    # does not runs once per torch release of a profile, not once per lightning: see
    # plan.make_plan
    uses_lightning: bool = True
    reworded: Reworded | None = None  # signature.reworded: torch's words for the same error
    # requirements every variant adds to the cell's (a package the matrix lacks: onnx,
    # torchvision, transformers); a variant's own requirement on the same package wins
    requires: tuple[str, ...] = ()
    # variants it no longer has, whose records are not read: name -> why (one line)
    retired: Mapping[str, str] = dataclasses.field(default_factory=dict, hash=False)
    # the entry's own smells, explained: kind -> subject (a postcondition) -> one line
    smells: Mapping[str, Mapping[str, str]] = dataclasses.field(default_factory=dict, hash=False)
    # the document's claims no run measures, with why (its triage row's ``unmeasured``,
    # repros/<kb>/<domain>/triage.yaml): each still gets a verdict row, "not measured: why"
    unmeasured: tuple[UnmeasuredClaim, ...] = ()

    def requirements_for(self, variant: Variant) -> tuple[str, ...]:
        """What ``variant`` adds to the cell's environment: the entry's requirements, then
        the variant's own (one on a package the entry names replaces the entry's)."""
        own = {_package(r) for r in variant.requires}
        return (*(r for r in self.requires if _package(r) not in own), *variant.requires)

    def grade(self, outcome: str, exc_type: str, exc_message: str, whole: str = "") -> Grade | None:
        """A run's grade against the documented signature and the declared rewording (the
        one rule: harness.outcomes.grade; ``whole`` as there)."""
        r = self.reworded
        return grade(
            outcome,
            exc_type,
            exc_message,
            self.signature.type,
            self.signature.message,
            r.message if r is not None else None,
            r.type if r is not None else "",
            whole,
        )

    def variant(self, name: str) -> Variant:
        for v in self.variants:
            if v.name == name:
                return v
        raise KeyError(f"{self.id} has no variant {name!r}")


# -- YAML with line numbers -------------------------------------------------------------


def _reader(path: Path) -> YamlReader:
    return YamlReader(str(path), EntryError)


def _load_yaml(path: Path) -> Lines:
    read = _reader(path)
    node = compose_file(str(path), EntryError, "entry.yaml")
    if not isinstance(node, yaml.MappingNode):
        read.fail(1, "entry.yaml must be a mapping of fields")
    return plain(node, read)


def _check_keys(data: Lines, allowed: set[str], required: set[str], path: Path, what: str) -> None:
    check_keys(data, allowed, required, what, _reader(path))


def _rate(value: Any, path: Path, line: int, what: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise EntryError(path, line, f"{what} must be a fraction between 0 and 1, got {value!r}")
    return float(value)


def _signature(data: Any, path: Path, line: int, what: str, documented: bool = False) -> Signature:
    if not isinstance(data, Mapping):
        raise EntryError(path, line, f"{what} must be a mapping with 'type' and 'message'")
    if "reworded" in data and not documented:
        raise EntryError(
            path,
            data.key_lines["reworded"],  # type: ignore[attr-defined]
            "reworded belongs to the documented signature (the entry's own): it says how "
            "torch words the documented error, not a variant's",
        )
    keys = (
        {"type", "message", "reworded", "device"} if documented else {"type", "message", "instead"}
    )
    _check_keys(data, keys, {"type", "message"}, path, what)  # type: ignore[arg-type]
    _pattern(data, path, what)
    instead = str(data.get("instead") or "").strip() if not documented else ""
    if "instead" in data and (not instead or "\n" in instead):
        raise EntryError(
            path,
            data.key_lines["instead"],  # type: ignore[attr-defined]
            f"{what}.instead must be one line saying why this is what torch raises where the "
            "document's message is",
        )
    device = str(data.get("device") or "") if documented else ""
    if "device" in data and device != "cuda":
        raise EntryError(
            path,
            data.key_lines["device"],  # type: ignore[attr-defined]
            f"{what}.device must be 'cuda' (the message only a CUDA run can raise), got {device!r}",
        )
    return Signature(
        type=str(data["type"]), message=str(data["message"]), instead=instead, device=device
    )


def _pattern(data: Any, path: Path, what: str) -> None:
    try:
        re.compile(str(data["message"]))
    except re.error as exc:
        raise EntryError(
            path,
            data.key_lines["message"],
            f"{what}.message is not a valid regular expression: {exc}",
        ) from exc
    problem = backtracking_problem(str(data["message"]))
    if problem is not None and "polynomial" in problem:
        raise EntryError(
            path,
            data.key_lines["message"],
            f"{what}.message may backtrack for long (in Python and in the page): {problem}",
        )
    if problem is not None:
        raise EntryError(
            path,
            data.key_lines["message"],
            f"{what}.message may backtrack catastrophically (time exponential in the text "
            f"matched, in Python and in the page): {problem}; make each repeated part match "
            "one way only, e.g. (a+)+ as a+, (a|ab)* as (ab?)*",
        )


def _reworded(data: Any, path: Path, signature: Signature) -> Reworded | None:
    """``signature.reworded: {message, why}``: torch's wording of the documented error."""
    if not isinstance(data, Mapping) or "reworded" not in data:
        return None
    raw = data["reworded"]
    line = data.key_lines["reworded"]  # type: ignore[attr-defined]
    what = "signature.reworded"
    if not isinstance(raw, Lines):
        raise EntryError(
            path,
            line,
            f"{what} must be a mapping {{message: torch's wording (a regular expression), "
            "why: one line}",
        )
    _check_keys(raw, {"message", "why", "type"}, {"message", "why"}, path, what)
    _pattern(raw, path, what)
    message, why = str(raw["message"]), str(raw["why"] or "").strip()
    kind = str(raw.get("type") or "").strip()
    if "type" in raw and not re.fullmatch(r"[A-Za-z_][\w.]*", kind):
        raise EntryError(
            path,
            raw.key_lines["type"],
            f"{what}.type must name an exception class (a subclass of the documented type), "
            f"not {raw.get('type')!r}",
        )
    if message == signature.message:
        raise EntryError(
            path,
            raw.key_lines["message"],
            f"{what}.message is the documented message; a rewording is torch's other words",
        )
    if not why or "\n" in why:
        raise EntryError(
            path,
            raw.key_lines["why"],
            f"{what}.why must be one line saying why torch's words are the documented error",
        )
    return Reworded(message=message, why=why, type=kind, line=line)


def _axis(data: Lines, key: str, allowed: tuple[str, ...], path: Path) -> tuple[str, ...]:
    if key not in data:
        return allowed
    values = data[key]
    line = data.key_lines[key]
    if not isinstance(values, list) or not values:
        raise EntryError(path, line, f"{key} must be a non-empty list drawn from {list(allowed)}")
    for v in values:
        if v not in allowed:
            raise EntryError(path, line, f"unknown {key[:-1]} {v!r}; allowed: {list(allowed)}")
    return tuple(values)


def failure_kind(v: Variant) -> str:
    """A dead end's documented failure kind: declared, or read from what it measures (its
    ``fails_as``, else an error)."""
    if v.meaning.kind is not None:
        return v.meaning.kind
    return v.fails_as.measures if v.fails_as is not None else "raises"


def rewritten_since(entries: Iterable[Entry]) -> dict[tuple[str, str], str]:
    """(entry, variant) -> when the variant's code was last rewritten (``rewritten``), for
    the variants that declare it: runs on both sides of it measured different code."""
    return {(e.id, v.name): v.rewritten for e in entries for v in e.variants if v.rewritten}


def measures_kind(v: Variant) -> str | None:
    """The kind of failure a dead end's runs can show as documented, or None where they
    cannot show its documented kind: an error counts for ``raises``, ``fails_as``
    postconditions for the kind they measure. None for any other kind: a baseline's
    ``fails_as`` is the documented situation failing silently, never a failure it is
    counted for (its rate is the documented error's alone)."""
    if v.kind != "dead_end":
        return None
    kind = failure_kind(v)
    if v.meaning.unmeasured:
        return None
    if kind == "raises":
        return kind
    return kind if v.fails_as is not None and v.fails_as.measures == kind else None


_VARIANT_KEYS = frozenset(
    {
        "name",
        "kind",
        "description",
        "devices",
        "precisions",
        "signature",
        "claim",
        "reading",
        "isolation",
        "fails_as",
        "requires",
        "baselines",
        "smells",
        "needs",
        "rewritten",
        "gpu",
    }
)


def _variant(data: Any, path: Path, line: int, gpu: str = "shared") -> Variant:
    if not isinstance(data, Lines):
        raise EntryError(path, line, "each variant must be a mapping")
    _check_keys(data, set(_VARIANT_KEYS), {"name", "kind", "description"}, path, "variant")
    name, kind = _name_and_kind(data, path)
    claim_ref, claimed_rate, meaning = (
        _claim(data, path, kind) if "claim" in data else (None, None, ClaimMeaning())
    )
    reading, isolation = _reading_and_isolation(data, path)
    signature = _variant_signature(data, path, kind)
    fails_as = None
    if "fails_as" in data:
        fails_as = _fails_as(data["fails_as"], path, data.key_lines["fails_as"], kind)
    devices, needs, gpu = _on_devices(data, path, name, gpu)
    return Variant(
        name=name,
        kind=kind,
        description=str(data["description"]).strip(),
        devices=devices,
        precisions=_axis(data, "precisions", PRECISIONS, path),
        signature=signature,
        fails_as=fails_as,
        claim_ref=claim_ref,
        claimed_rate=claimed_rate,
        meaning=meaning,
        reading=reading,
        isolation=isolation,
        line=data.line,
        requires=_requires(data, path),
        baselines=_baselines(data, path, kind),
        needs=needs,
        gpu=gpu,
        rewritten=_rewritten(data, path),
        smells=_variant_smells(data, path),
    )


def _name_and_kind(data: Lines, path: Path) -> tuple[str, str]:
    name = str(data["name"])
    if not NAME_PATTERN.match(name):
        raise EntryError(
            path, data.key_lines["name"], f"variant name {name!r} must match {NAME_PATTERN.pattern}"
        )
    kind = data["kind"]
    if kind not in KINDS:
        raise EntryError(
            path, data.key_lines["kind"], f"unknown variant kind {kind!r}; allowed: {list(KINDS)}"
        )
    return name, kind


def _reading_and_isolation(data: Lines, path: Path) -> tuple[Any, Any]:
    reading = data.get("reading")
    if reading not in (None, "literal", "sensible"):
        raise EntryError(path, data.key_lines["reading"], "reading must be 'literal' or 'sensible'")
    isolation = data.get("isolation")
    if isolation not in (None, "process"):
        raise EntryError(
            path,
            data.key_lines["isolation"],
            f"isolation must be 'process' (a fresh interpreter for this variant), got "
            f"{isolation!r}; without it the variant runs under the run's --isolation",
        )
    return reading, isolation


def _variant_signature(data: Lines, path: Path, kind: str) -> Signature | None:
    if "signature" not in data:
        return None
    signature = _signature(
        data["signature"], path, data.key_lines["signature"], "variant signature"
    )
    if kind == "control":
        raise EntryError(
            path,
            data.key_lines["signature"],
            "a control must pass everywhere; it cannot expect an error (signature)",
        )
    if signature.instead and kind != "baseline":
        raise EntryError(
            path,
            data["signature"].key_lines["instead"],
            "signature.instead belongs to a baseline: it says that the baseline's error "
            "is what torch raises where the document's message is",
        )
    return signature


def _on_devices(data: Lines, path: Path, name: str, gpu: str) -> tuple[Any, Any, str]:
    """The variant's devices, its needs of a cuda cell and what it takes of the GPU."""
    devices = _axis(data, "devices", DEVICES, path)
    needs = _needs(data, path)
    on_device = [n for n in needs if n not in COMPILE_NEEDS]
    if on_device and "cuda" not in devices:
        raise EntryError(
            path,
            data.key_lines["needs"],
            f"needs {on_device} are needs of a cuda cell; variant {name!r} runs on "
            f"{list(devices)} only",
        )
    if "gpu" in data:
        gpu = _gpu(data, path)
        if "cuda" not in devices:
            raise EntryError(
                path,
                data.key_lines["gpu"],
                f"gpu says what the variant takes of the GPU on a cuda cell; variant {name!r} "
                f"runs on {list(devices)} only",
            )
    return devices, needs, gpu


def _package(requirement: str) -> str:
    return canonicalize_name(Requirement(requirement).name)


# the record's limits (harness/store/validate.py: MAX_ITEMS pairs in ``requires``, MAX_ID
# characters of a name, MAX_VALUE of a value), checked when the entry loads, not when a
# finished run's record is refused (tests/spec/test_entries.py keeps them equal)
MAX_REQUIREMENTS = 200
MAX_REQUIREMENT_NAME = 200
MAX_REQUIREMENT_CHARS = 1_000
# a "name" that uv reads as a file: a wheel, an sdist, an archive
_LOCAL_FILE = re.compile(r"(?i)\.(?:whl|tar\.gz|tgz|tar\.bz2|zip|egg|tar)$")


def _requires(data: Lines, path: Path) -> tuple[str, ...]:
    """``requires: [PEP 508 requirement, ...]`` of an entry or a variant: each a
    requirement uv can resolve from the package index (no direct reference), one per
    package."""
    if "requires" not in data:
        return ()
    values = data["requires"]
    line = data.key_lines["requires"]
    if not isinstance(values, list) or not values:
        raise EntryError(
            path, line, 'requires must be a non-empty list of requirement strings, e.g. ["numpy<2"]'
        )
    if len(values) > MAX_REQUIREMENTS:
        raise EntryError(
            path,
            line,
            f"requires lists {len(values)} requirements; a record holds at most "
            f"{MAX_REQUIREMENTS} (with the entry's own)",
        )
    seen: set[str] = set()
    for value in values:
        if not isinstance(value, str):
            raise EntryError(
                path, line, f'requires: {value!r} is not a string; write each as "name<spec"'
            )
        if len(value) > MAX_REQUIREMENT_CHARS:
            raise EntryError(
                path,
                line,
                f"requires: a requirement of {len(value)} characters; a record keeps at most "
                f"{MAX_REQUIREMENT_CHARS}",
            )
        try:
            requirement = Requirement(str(value))
        except InvalidRequirement as exc:
            raise EntryError(
                path, line, f"requires: {str(value)!r} is not a PEP 508 requirement ({exc})"
            ) from None
        if requirement.url:
            raise EntryError(
                path,
                line,
                f"requires: {str(value)!r} is a direct reference; name a version range the "
                "package index serves (the environments are resolved from it)",
            )
        if _LOCAL_FILE.search(requirement.name) or any(
            spec.operator == "===" for spec in requirement.specifier
        ):
            raise EntryError(
                path,
                line,
                f"requires: {value!r} names a file or an arbitrary string, which uv would read as "
                "a local path; name a package and a version range the package index serves",
            )
        if len(requirement.name) > MAX_REQUIREMENT_NAME:
            raise EntryError(
                path,
                line,
                f"requires: a package name of {len(requirement.name)} characters; a record keeps "
                f"names of at most {MAX_REQUIREMENT_NAME}",
            )
        name = canonicalize_name(requirement.name)
        if name in seen:
            raise EntryError(path, line, f"requires names {name} twice; keep one requirement")
        seen.add(name)
    return tuple(str(v) for v in values)


def _one_line(value: Any, path: Path, line: int, what: str) -> str:
    text = value.strip() if isinstance(value, str) else ""
    if not text or "\n" in text:
        raise EntryError(path, line, f"{what} must be one line saying why (a reason, not empty)")
    return text


def _smell_kind(kind: Any, allowed: tuple[str, ...], path: Path, line: int, where: str) -> str:
    if kind not in allowed:
        raise EntryError(
            path, line, f"unknown smell {kind!r} {where}; allowed there: {list(allowed)}"
        )
    return str(kind)


def _variant_smells(data: Lines, path: Path) -> dict[str, str]:
    """A variant's ``smells: {kind: reason}``: why a smell the records show is not a defect."""
    if "smells" not in data:
        return {}
    raw, line = data["smells"], data.key_lines["smells"]
    if not isinstance(raw, Lines) or not raw:
        raise EntryError(path, line, "smells must be a mapping {kind: one-line reason}")
    allowed = tuple(k for k in SMELLS if k not in SMELLS_OF_ENTRY)
    return {
        _smell_kind(kind, allowed, path, raw.key_lines[kind], "on a variant"): _one_line(
            reason, path, raw.key_lines[kind], f"smells.{kind}"
        )
        for kind, reason in raw.items()
    }


def _retired(data: Lines, path: Path, variants: list[Variant]) -> dict[str, str]:
    """``retired: {name: reason}``: variants the entry no longer has (renamed, or measuring
    what it should not); their records stay in the store and are not read."""
    if "retired" not in data:
        return {}
    raw, line = data["retired"], data.key_lines["retired"]
    if not isinstance(raw, Lines) or not raw:
        raise EntryError(path, line, "retired must be a mapping {variant name: one-line reason}")
    names = {v.name for v in variants}
    out = {}
    for name, reason in raw.items():
        if name in names:
            raise EntryError(
                path,
                raw.key_lines[name],
                f"retired names {name!r}, which is still a variant; retire a name the entry "
                "no longer has",
            )
        out[str(name)] = _one_line(reason, path, raw.key_lines[name], f"retired.{name}")
    return out


def _entry_smells(data: Lines, path: Path) -> dict[str, dict[str, str]]:
    """The entry's ``smells: {never-fails: {postcondition: reason}}``."""
    if "smells" not in data:
        return {}
    raw, line = data["smells"], data.key_lines["smells"]
    shape = "smells must be a mapping {kind: {subject: one-line reason}}"
    if not isinstance(raw, Lines) or not raw:
        raise EntryError(path, line, shape)
    out: dict[str, dict[str, str]] = {}
    for kind, subjects in raw.items():
        kline = raw.key_lines[kind]
        kind = _smell_kind(kind, SMELLS_OF_ENTRY, path, kline, "at the entry's top level")
        if not isinstance(subjects, Lines) or not subjects:
            raise EntryError(path, kline, shape)
        out[kind] = {
            str(name): _one_line(reason, path, subjects.key_lines[name], f"smells.{kind}.{name}")
            for name, reason in subjects.items()
        }
    return out


def _rewritten(data: Lines, path: Path) -> str | None:
    """``rewritten: "2026-12-01"`` (or an ISO UTC time, quoted: the YAML reader takes no
    timestamps): the records started before it are not read."""
    if "rewritten" not in data:
        return None
    raw, line = data["rewritten"], data.key_lines["rewritten"]
    text = str(raw)
    try:
        when = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        when = None
    if when is None or (when.tzinfo is not None and when.utcoffset() != datetime.timedelta(0)):
        raise EntryError(
            path,
            line,
            f"rewritten must be an ISO date (2026-12-01) or UTC time (2026-12-01T11:00:00Z), "
            f"when the variant's code last changed what it measures; got {raw!r}",
        )
    return text.replace("Z", "+00:00")


def _needs(data: Lines, path: Path) -> tuple[str, ...]:
    """``needs: [torch.compile]``: what the variant needs beyond its cell."""
    if "needs" not in data:
        return ()
    raw, line = data["needs"], data.key_lines["needs"]
    if not isinstance(raw, list) or not raw:
        raise EntryError(path, line, f"needs must be a non-empty list drawn from {list(NEEDS)}")
    for name in raw:
        if name not in NEEDS:
            raise EntryError(path, line, f"unknown need {name!r}; known: {list(NEEDS)}")
    return tuple(raw)


def _gpu(data: Lines, path: Path) -> str:
    """``gpu: exclusive``: what the variant (or every variant of the entry) takes of the GPU."""
    raw = data["gpu"]
    if raw not in GPU_USES:
        raise EntryError(
            path,
            data.key_lines["gpu"],
            f"gpu must be one of {list(GPU_USES)}, got {raw!r}: exclusive where the variant "
            "fills the card or sizes itself from free memory, times kernels or measures "
            "memory; shared (the default) otherwise",
        )
    return str(raw)


def _baselines(data: Lines, path: Path, kind: str) -> tuple[str, ...]:
    """``baselines: [name, ...]``: the baselines a workaround or dead end answers (the
    names are checked against the entry's baselines once all variants are read)."""
    if "baselines" not in data:
        return ()
    raw, line = data["baselines"], data.key_lines["baselines"]
    if kind not in ("workaround", "dead_end"):
        raise EntryError(
            path,
            line,
            f"baselines names the baselines whose reproducing cells judge a workaround or "
            f"dead end; a {kind} is judged in every cell",
        )
    if not isinstance(raw, list) or not raw or not all(isinstance(n, str) for n in raw):
        raise EntryError(path, line, "baselines must be a non-empty list of baseline names")
    if len(set(raw)) != len(raw):
        raise EntryError(path, line, "baselines names a baseline twice")
    return tuple(raw)


def _claim(data: Lines, path: Path, kind: str) -> tuple[str, float | None, ClaimMeaning]:
    """A variant's ``claim: {ref, rate, kind, unmeasured, condition, within}``: the
    document's words it answers, their rate, and what the claim means."""
    claim = data["claim"]
    cline = data.key_lines["claim"]
    if not isinstance(claim, Lines):
        raise EntryError(path, cline, "claim must be a mapping with 'ref' and optional 'rate'")
    _check_keys(
        claim,
        {"ref", "rate", "kind", "unmeasured", "condition", "within", "detects"},
        {"ref"},
        path,
        "claim",
    )
    claimed_rate = _rate(claim.get("rate"), path, cline, "claim.rate")
    if claimed_rate is not None and kind in ("baseline", "control"):
        raise EntryError(
            path,
            claim.key_lines["rate"],
            f"a {kind} carries no claimed rate: a document's rates are about its "
            "workarounds (success) and dead ends (failure); the baseline's reproduction "
            "and a control's passing are measured, not claimed",
        )
    return str(claim["ref"]), claimed_rate, _meaning(claim, path, kind)


def _meaning(claim: Lines, path: Path, kind: str) -> ClaimMeaning:
    texts: dict[str, str | None] = {}
    for key in ("unmeasured", "condition", "within"):
        texts[key] = (
            _one_line(claim[key], path, claim.key_lines[key], f"claim.{key}")
            if key in claim
            else None
        )
    claim_kind = claim.get("kind")
    allowed = {"dead_end": FAILURE_KINDS, "workaround": PROMISE_KINDS}.get(kind, ())
    if claim_kind is not None and claim_kind not in allowed:
        raise EntryError(
            path,
            claim.key_lines["kind"],
            f"claim.kind {claim_kind!r} is not a kind a {kind}'s claim has; allowed: "
            + (str(list(allowed)) if allowed else "none (only workarounds and dead ends)"),
        )
    if texts["within"] and not texts["condition"]:
        raise EntryError(
            path,
            claim.key_lines["within"],
            "claim.within says how the variant meets claim.condition: there is no condition",
        )
    detects = claim.get("detects", [])
    if "detects" in claim and (
        claim_kind != "diagnostic"
        or not isinstance(detects, list)
        or not detects
        or not all(isinstance(d, str) and d.strip() for d in detects)
    ):
        raise EntryError(
            path,
            claim.key_lines["detects"],
            "claim.detects belongs to a diagnostic (claim.kind: diagnostic): a non-empty list "
            "of the postconditions that show it flags the faulty input and passes a good one",
        )
    return ClaimMeaning(
        kind=claim_kind,
        detects=tuple(detects),
        unmeasured=texts["unmeasured"],
        condition=texts["condition"],
        within=texts["within"],
        line=claim.line,
    )


def _fails_as(data: Any, path: Path, line: int, kind: str) -> FailsAs:
    """``fails_as: {outcome: wrong_result, postconditions: [name, ...]}`` on a dead end; on a
    baseline with ``instead: "why"``: the documented situation failing silently."""
    shape = "fails_as must be a mapping {outcome: wrong_result, postconditions: [name, ...]}"
    if kind not in ("dead_end", "baseline"):
        raise EntryError(
            path,
            line,
            f"fails_as declares how a dead end fails as documented; a {kind} is judged on passing",
        )
    if not isinstance(data, Lines):
        raise EntryError(path, line, shape)
    baseline = kind == "baseline"
    _check_keys(
        data,
        {"outcome", "postconditions", "instead"}
        if baseline
        else {"outcome", "postconditions", "measures"},
        {"outcome", "postconditions", "instead"} if baseline else {"outcome", "postconditions"},
        path,
        "fails_as",
    )
    instead = str(data.get("instead") or "").strip()
    if baseline and (not instead or "\n" in instead):
        raise EntryError(
            path,
            data.key_lines["instead"],
            "a baseline's fails_as.instead must be one line saying why this silent failure is "
            "the documented situation (torch raises nothing there)",
        )
    measures = data.get("measures", "wrong-result")
    if measures not in FAILURE_KINDS or measures == "raises":
        raise EntryError(
            path,
            data.key_lines["measures"],
            f"fails_as.measures must be one of {list(FAILURE_KINDS[1:])} (what its "
            f"postconditions measure), got {measures!r}",
        )
    outcome = data["outcome"]
    if outcome not in FAILS_AS_OUTCOMES:
        raise EntryError(
            path,
            data.key_lines["outcome"],
            f"fails_as.outcome must be one of {list(FAILS_AS_OUTCOMES)} (a run that ends "
            f"without an exception and a postcondition failed), got {outcome!r}; a dead end "
            "documented to raise declares that error as its signature",
        )
    names = data["postconditions"]
    pline = data.key_lines["postconditions"]
    if not isinstance(names, list) or not names:
        raise EntryError(path, pline, "fails_as.postconditions must be a non-empty list of names")
    seen: set[str] = set()
    for name in names:
        if not isinstance(name, str) or not name.strip():
            raise EntryError(path, pline, f"fails_as.postconditions: {name!r} is not a name")
        if name in seen:
            raise EntryError(path, pline, f"fails_as.postconditions: {name!r} twice")
        seen.add(name)
    return FailsAs(
        outcome=str(outcome),
        postconditions=tuple(names),
        line=pline,
        measures=str(measures),
        instead=instead,
    )


def _claims(data: Any, path: Path, line: int) -> Claims:
    if data is None:
        return Claims()
    if not isinstance(data, Lines):
        raise EntryError(path, line, "claims must be a mapping")
    _check_keys(
        data, {"verification", "fix_rate", "version_table", "conditions"}, set(), path, "claims"
    )
    rows = []
    for row in data.get("version_table") or []:
        if not isinstance(row, Lines):
            raise EntryError(
                path, data.key_lines["version_table"], "each version_table row must be a mapping"
            )
        _check_keys(
            row,
            {"spec", "status", "introduced", "deprecated"},
            {"spec", "status"},
            path,
            "version_table row",
        )
        rows.append(_version_claim(row, path))
    return Claims(
        verification=None if data.get("verification") is None else str(data["verification"]),
        fix_rate=_rate(
            data.get("fix_rate"), path, data.key_lines.get("fix_rate", line), "fix_rate"
        ),
        version_table=tuple(rows),
        conditions=tuple(str(c) for c in data.get("conditions") or ()),
    )


def _version_claim(row: Lines, path: Path) -> VersionClaim:
    spec = str(row["spec"])
    try:
        parse_claim_spec(spec)
    except ValueError as exc:
        raise EntryError(path, row.key_lines["spec"], f"version_table spec {exc}") from exc
    status = str(row["status"]).strip().lower()
    statuses = sorted(PRESENT_STATUSES | FIXED_STATUSES)
    if status not in statuses:
        raise EntryError(
            path,
            row.key_lines["status"],
            f"version_table status {row['status']!r} says neither that the error occurs nor "
            f"that it is fixed; use one of {statuses}",
        )
    bounds: dict[str, str | None] = {}
    for bound in ("introduced", "deprecated"):
        raw = row.get(bound)
        if raw is None:
            bounds[bound] = None
            continue
        try:
            Version(str(raw))
        except ValueError:  # InvalidVersion, or more digits than int() converts
            raise EntryError(
                path,
                row.key_lines[bound],
                f"version_table {bound} {raw!r} is not a version (write null when unknown)",
            ) from None
        bounds[bound] = str(raw)
    return VersionClaim(spec=spec, status=status, **bounds)


def load_entry(
    entry_dir: str | os.PathLike[str], root: str | os.PathLike[str] | None = None
) -> Entry:
    """Load and validate one entry directory. ``root`` is the repros/ folder (for the id check)."""
    entry_dir = Path(entry_dir)
    path = entry_dir / "entry.yaml"
    data = _load_yaml(path)
    allowed = {
        "id",
        "title",
        "signature",
        "claims",
        "variants",
        "source",
        "document",
        "repro",
        "origin",
        "requires",
        "smells",
        "retired",
        "gpu",
    }
    _check_keys(data, allowed, {"id", "signature", "variants"}, path, "entry")
    entry_id = _entry_id(data, path, entry_dir, root)
    variants = _variants(data, path, _gpu(data, path) if "gpu" in data else "shared")
    files = _files(data, path, entry_dir)
    signature = _signature(
        data["signature"], path, data.key_lines["signature"], "signature", documented=True
    )
    reworded = _reworded(data["signature"], path, signature)
    for v in variants:
        if v.signature == signature:
            raise EntryError(
                path,
                v.line,
                f"variant {v.name!r}: its signature is the documented one; a variant's "
                "signature names its own (related) expected error, so leave it out",
            )
    variants, lightning = _check_declared(variants, files["repro"], path)
    return Entry(
        id=entry_id,
        dir=entry_dir,
        title=str(data.get("title", entry_id)),
        signature=signature,
        claims=_claims(data.get("claims"), path, data.key_lines.get("claims", data.line)),
        variants=tuple(variants),
        source=files["source"],
        document=files["document"],
        repro=files["repro"],
        origin=_origin(
            data.get("origin"), path, data.key_lines.get("origin", data.line), entry_dir
        ),
        uses_lightning=lightning,
        reworded=reworded,
        requires=_requires(data, path),
        smells=_entry_smells(data, path),
        retired=_retired(data, path, variants),
        unmeasured=_unmeasured(entry_id, entry_dir, root),
    )


def _unmeasured(
    entry_id: str, entry_dir: Path, root: str | os.PathLike[str] | None
) -> tuple[UnmeasuredClaim, ...]:
    """The claims the entry's triage row says no run measures (none without a row)."""
    try:
        found = triage_row(entry_id, entry_dir, root)
    except TriageError as exc:  # an entry that cannot say what it leaves unmeasured fails
        raise EntryError(exc.path, exc.line, exc.problem) from exc
    return found[1].unmeasured if found is not None else ()


def _entry_id(data: Any, path: Path, entry_dir: Path, root: str | os.PathLike[str] | None) -> str:
    """The entry's id: of the id pattern, and its folder's path under ``root``."""
    entry_id = str(data["id"])
    if not ID_PATTERN.match(entry_id) or ".." in entry_id.split("/"):
        raise EntryError(
            path, data.key_lines["id"], f"entry id {entry_id!r} must match {ID_PATTERN.pattern}"
        )
    if root is not None:
        expected = entry_dir.resolve().relative_to(Path(root).resolve()).as_posix()
        if expected != entry_id:
            raise EntryError(
                path,
                data.key_lines["id"],
                f"entry id {entry_id!r} must equal its folder {expected!r}",
            )
    return entry_id


def _variants(data: Lines, path: Path, gpu: str = "shared") -> list[Variant]:
    """The entry's variants: a non-empty list, names unique, at least one baseline; ``gpu``
    the entry's, which a variant without its own takes."""
    variants_data = data["variants"]
    if not isinstance(variants_data, list) or not variants_data:
        raise EntryError(path, data.key_lines["variants"], "variants must be a non-empty list")
    variants = []
    seen: dict[str, int | None] = {}
    for raw in variants_data:
        v = _variant(raw, path, data.key_lines["variants"], gpu)
        if v.name in seen:
            raise EntryError(
                path, v.line, f"duplicate variant name {v.name!r} (first at line {seen[v.name]})"
            )
        seen[v.name] = v.line
        variants.append(v)
    if not any(v.kind == "baseline" for v in variants):
        raise EntryError(
            path, data.key_lines["variants"], "an entry needs at least one baseline variant"
        )
    baselines = [v.name for v in variants if v.kind == "baseline"]
    for v in variants:
        unknown = [n for n in v.baselines if n not in baselines]
        if unknown:
            raise EntryError(
                path,
                v.line,
                f"variant {v.name!r}: baselines names {', '.join(map(repr, unknown))}, not a "
                f"baseline of this entry; its baselines are {baselines}",
            )
    return variants


def _files(data: Lines, path: Path, entry_dir: Path) -> dict[str, Path]:
    """The entry's source, document and repro files: each inside its folder, and there."""
    files = {}
    for key, default in (
        ("source", "source.md"),
        ("document", "document.md"),
        ("repro", "repro.py"),
    ):
        name = str(data.get(key, default))
        target = (entry_dir / name).resolve()
        if entry_dir.resolve() not in target.parents:
            raise EntryError(
                path,
                data.key_lines.get(key, data.line),
                f"{key} {name!r} must stay inside {entry_dir}",
            )
        if not target.is_file():
            raise EntryError(
                path, data.key_lines.get(key, data.line), f"{key} file {name!r} does not exist"
            )
        files[key] = target
    return files


def _origin(data: Any, path: Path, line: int, entry_dir: Path) -> dict[str, Any]:
    if data is None:
        return {}
    if not isinstance(data, Lines):
        raise EntryError(path, line, "origin must be a mapping of facts about the document")
    _check_keys(data, set(ORIGIN_KEYS), set(), path, "origin")
    for key, value in data.items():
        if isinstance(value, (dict, Lines)):
            raise EntryError(path, data.key_lines[key], f"origin.{key} must be a value or a list")
    # the parts corrections builds paths from: plain names, never "..", never absolute
    # (a domain of "../../X", a path of "../x" or "/x" wrote outside the folder)
    for key, check in (
        ("domain", part_problem),
        ("id", relative_problem),
        ("path", relative_problem),
    ):
        value = data.get(key)
        if value is not None:
            problem = check(value) if isinstance(value, str) else f"{value!r} is not text"
            if problem is not None:
                raise EntryError(path, data.key_lines[key], f"origin.{key}: {problem}")
    record = data.get("record")
    if record is not None:
        # a plain file of the entry's folder, named without a folder (never through a link)
        target = entry_dir / str(record)
        if "/" in str(record) or "\\" in str(record) or str(record) in (".", ".."):
            raise EntryError(
                path, data.key_lines["record"], f"origin.record {record!r} must be a file name"
            )
        if target.is_symlink() or not target.is_file():
            raise EntryError(
                path,
                data.key_lines["record"],
                f"origin.record {record!r} is not a file beside entry.yaml",
            )
    commit = data.get("commit")
    if commit is not None and not re.fullmatch(r"[0-9a-f]{40}", str(commit)):
        raise EntryError(
            path, data.key_lines["commit"], f"origin.commit {commit!r} must be 40 hex digits"
        )
    return dict(data)


def _check_declared(variants: list[Variant], repro: Path, path: Path) -> tuple[list[Variant], bool]:
    """entry.yaml's variants and repro.py's VARIANTS name the same set; mark unwritten ones.
    Also: whether the reproducer uses lightning (declared.uses_lightning)."""
    try:
        declared = read_declared(repro)
    except DeclaredError as exc:
        raise EntryError(exc.path, exc.line, exc.message) from exc
    for v in variants:
        if v.name not in declared.variants:
            raise EntryError(
                path,
                v.line,
                f"variant {v.name!r} is not implemented by {repro.name}: its VARIANTS "
                f"(line {declared.variants_line}) has {sorted(declared.variants)}",
            )
    for v in variants:
        named = (
            [(n, "fails_as", v.fails_as.line) for n in v.fails_as.postconditions]
            if (v.fails_as is not None)
            else []
        )
        named += [(n, "claim.detects", v.meaning.line) for n in v.meaning.detects]
        for name, where, line in named:
            if not declared.can_report(name):
                near = difflib.get_close_matches(name, sorted(declared.literals), n=3)
                raise EntryError(
                    path,
                    line,
                    f"variant {v.name!r}: {where} names postcondition {name!r}, which "
                    f"{repro.name} never writes (no such string literal, and no f-string or "
                    f"'literal' + ... it builds names from fits it)"
                    + (f"; did you mean {', '.join(map(repr, near))}?" if near else ""),
                )
    names = {v.name for v in variants}
    for name, line in declared.variants.items():
        if name not in names:
            raise EntryError(
                repro,
                line,
                f"VARIANTS names {name!r}, which {path.name} does not declare; add it to "
                f"entry.yaml's variants or remove it here",
            )
    return [
        dataclasses.replace(v, written=False) if v.name in declared.not_written else v
        for v in variants
    ], declared.uses_lightning


def load_entries(root: str | os.PathLike[str]) -> tuple[Entry, ...]:
    """Every entry under ``root`` (repros/), sorted by id. Fails on the first invalid one."""
    root = Path(root)
    entries = [load_entry(p.parent, root) for p in sorted(root.rglob("entry.yaml"))]
    ids: dict[str, Path] = {}
    for e in entries:
        if e.id in ids:
            raise EntryError(
                e.dir / "entry.yaml", None, f"entry id {e.id!r} also used by {ids[e.id]}"
            )
        ids[e.id] = e.dir
    return tuple(sorted(entries, key=lambda e: e.id))
