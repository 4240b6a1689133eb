"""An entry's bottom line: five or six plain sentences a reader takes in at a glance, made
from the same verdicts as the tables (harness/aggregate/verdicts.py), never from anything
else.

1. Is the documented message real: raised word for word, in other words, or never (and
   then what happens instead, as the entry declares or as the runs raised it).
2. Where the error occurs: the torch releases whose runs raised it (one change of release
   said as such) and the devices they ran on; a device with no run is said, with why.
3. What works: the workarounds whose advice holds (or holds on one side of a release).
4. What to avoid: the dead ends that fail, and the workarounds that do not work.
5. What was not measured, and why.
6. Where the evidence is weak: a claim that rests on few setups, or is not settled.

A "setup" is what the tables call a scenario: one release pair on one device and precision.
The sentences use no word of the harness's own vocabulary (verdict, grade, baseline,
variant, scenario): docs/reference/outcomes-and-verdicts.md maps them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from packaging.version import Version

from harness.aggregate.model import (
    CONFIRMED,
    CONTRADICTED,
    DEPENDS,
    FAILS_OTHERWISE,
    HOLDS,
    INCONCLUSIVE,
    NOT_MEASURABLE,
    WRONG,
    EntryAggregate,
    VariantAggregate,
    Verdict,
)
from harness.aggregate.verdicts import _release_states, _span
from harness.spec.entries import Entry

__all__ = [
    "WEAK_SETUPS",
    "bottom_line",
    "devices_measured",
    "plain",
    "where_it_occurs",
]

WEAK_SETUPS = 5  # a claim that rests on fewer setups than this is called weak evidence
_SHORT = 110  # a description is cut at a word near this many characters


def plain(text: str, limit: int = _SHORT) -> str:
    """``text`` on one line, cut at a word boundary near ``limit`` characters."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text[:limit].rsplit(" ", 1)[0].rstrip(",;:")
    return cut + "…"


def _quoted(type_: str, message: str, limit: int = 160) -> str:
    text = f"{type_}: {message}" if type_ else message
    return "“" + plain(text, limit) + "”"


def _setups(k: int, n: int) -> str:
    if n == 1:
        return "in the one setup tried" if k else "not in the one setup tried"
    if k == n:
        return f"in every one of the {n} setups tried"
    if k == 0:
        return f"in none of the {n} setups tried"
    return f"in {k} of the {n} setups tried"


def _per_package(
    agg: EntryAggregate, variants: Sequence[VariantAggregate], package: str
) -> dict[Version, list[int]]:
    """release of ``package`` -> [setups that raised the error, setups tried]: the
    variants' environments added up, as the version rows add them (``_release_states``)."""
    counts: dict[str, list[int]] = {}
    for v in variants:
        for env, k, n, *_rest in v.by_env:
            slot = counts.setdefault(env, [0, 0])
            slot[0] += k
            slot[1] += n
    return _release_states(package, agg.envs, counts)


def _releases(agg: EntryAggregate, baselines: Sequence[VariantAggregate]) -> str:
    """Where the documented error occurred, in releases: every release tried, or the one
    change of torch (else of lightning) it follows, or how many releases."""
    torch = _per_package(agg, baselines, "torch")
    if torch and all(k for k, _ in torch.values()):
        n = len(torch)
        return f"on every torch release tried ({_span(list(torch))}, {n} release{'s' if n > 1 else ''})"
    for package in ("torch", "lightning"):
        per = _per_package(agg, baselines, package)
        if not per or any(0 < k < n for k, n in per.values()):
            continue  # a release where it occurred in some setups only: no clean change
        order = list(per)
        states = [per[r][0] > 0 for r in order]
        changes = [i for i in range(1, len(states)) if states[i] != states[i - 1]]
        if len(changes) != 1:
            continue
        shows = [r for r, s in zip(order, states, strict=True) if s]
        quiet = [r for r, s in zip(order, states, strict=True) if not s]
        below, at = order[changes[0] - 1], order[changes[0]]
        return (
            f"on {package} {_span(shows)} and not on {_span(quiet)}: it "
            f"{'appears' if states[-1] else 'stops'} between {package} {below} and {at}"
        )
    shows = [r for r, (k, _) in torch.items() if k]
    listed = ", ".join(str(r) for r in shows[:6]) + ("…" if len(shows) > 6 else "")
    return f"on {len(shows)} of the {len(torch)} torch releases tried ({listed})"


def _where(agg: EntryAggregate, baselines: Sequence[VariantAggregate]) -> str:
    """Where the documented error occurred: its releases and devices."""
    if not any(k for v in baselines for _e, k, *_r in v.by_env):
        return ""
    return f"It occurs {_releases(agg, baselines)}; {_devices(agg, baselines)}."


_DEVICE_WORDS = {"cpu": "CPU", "cuda": "CUDA", "mps": "MPS"}


def _devices(agg: EntryAggregate, baselines: Sequence[VariantAggregate]) -> str:
    """The devices the error was measured on, and those it was not, with why."""
    ran = _ran_on(baselines)
    measured = [_DEVICE_WORDS.get(d, d) for d, yes in ran.items() if yes]
    missing = [d for d, yes in ran.items() if not yes]
    if not measured:
        return "no setup could run it: " + "; ".join(
            f"{_DEVICE_WORDS.get(d, d)}: {_why_not(baselines, d)}" for d in missing
        )
    text = f"measured on {' and '.join(measured)}"
    for device in missing:
        text += f", not on {_DEVICE_WORDS.get(device, device)} ({_why_not(baselines, device)})"
    return text


def _ran_on(variants: Sequence[VariantAggregate]) -> dict[str, bool]:
    """device -> whether some run of ``variants`` counted there, devices in slice order."""
    ran: dict[str, bool] = {}
    for v in variants:
        for slice_name, rate in v.by_slice:
            device = slice_name.split("-", 1)[0]
            ran[device] = ran.get(device, False) or rate.n > 0
    return ran


def _why_not(variants: Sequence[VariantAggregate], device: str) -> str:
    skipped = [nc for v in variants for nc in v.not_counted if nc.outcome == "skipped"]
    if device == "cuda" and any(nc.reason.lower().startswith("no cuda") for nc in skipped):
        return "no GPU machine ran it"
    if skipped:
        return plain(skipped[0].reason, 80)
    return "no run could be made there"


def _label(v: Verdict) -> str:
    """'workaround 1' of 'workaround 1: success rate (sensible reading)'."""
    return v.claim.split(":", 1)[0]


# an entry's descriptions name its failing code by the harness's word for it
_BASELINE_WORDS = (
    (re.compile(r"\bbaseline-[\w.-]*\w"), "the failing code"),
    (re.compile(r"\b[Tt]he baseline's\b"), "the failing code's"),
    (re.compile(r"\b[Tt]he baseline\b"), "the failing code"),
    (re.compile(r"\bthe variant\b"), "it"),
    (re.compile(r"\bbaselines\b"), "failing codes"),
    (re.compile(r"\bbaseline\b"), "failing code"),
)


def _plain_words(text: str) -> str:
    for pattern, words in _BASELINE_WORDS:
        text = pattern.sub(words, text)
    return text


def _what(agg: EntryAggregate, v: Verdict) -> str:
    """The variant the verdict judges, by what it does."""
    try:
        description = agg.variant(v.subject).description
    except KeyError:
        description = ""
    return plain(_plain_words(description)) if description.strip() else _label(v)


def _count(v: Verdict) -> tuple[int, int] | None:
    """(k, n) of a rate verdict's measured text ("57/57 = 100% ...")."""
    head = v.measured.split(" ", 1)[0]
    if "/" not in head:
        return None
    k, _, n = head.partition("/")
    return (int(k), int(n)) if k.isdigit() and n.isdigit() else None


def _depends_side(v: Verdict) -> str:
    """What a release-split verdict says after its colon: 'works in torch ..., does not ...'."""
    words = v.words.split(": ", 1)[-1] if v.words.startswith(DEPENDS) else v.words
    return words.split(": the change lies", 1)[0]


def _message_sentence(entry: Entry | None, agg: EntryAggregate, message: Verdict | None) -> str:
    documented = _quoted(agg.signature_type, agg.signature_text)
    baselines = [v for v in agg.variants if v.kind == "baseline"]
    if message is None:
        return f"The documented error {documented} has no reproducer yet."
    if message.verdict == CONFIRMED:
        k, n = _shown(message)
        how = {
            "verbatim": "word for word",
            "variable-parts": "with other names or sizes in it",
            "reworded": "in other words",
            "prefix": "with more text after it",
        }.get(message.grade, "")
        words = f"raised {how} " if how else "raised "
        return f"The error is real: the code the document describes {words}{documented} {_setups(k, n)}."
    if message.verdict == CONTRADICTED:
        text = f"No run raised the documented message {documented}"
        k, n = _shown(message)
        if n:
            text += f" ({_setups(0, n)})"
        instead = _declared_instead(entry, baselines)
        seen = max((m for b in baselines for m in b.messages), key=lambda m: m.count, default=None)
        if instead:
            words = f"; torch's words there: {_quoted(seen.type, seen.message)}" if seen else ""
            return f"{text}. What happens instead: {instead}{words}."
        if seen is not None:
            return f"{text}. The same code raised {_quoted(seen.type, seen.message)} instead."
        return f"{text}; the same code ran without an error."
    if message.verdict == INCONCLUSIVE:
        return f"Whether {documented} occurs is not settled: too few setups could show it."
    return (
        f"Whether {documented} occurs was not measured: {_unmeasured_message(message, baselines)}."
    )


def _unmeasured_message(message: Verdict, baselines: Sequence[VariantAggregate]) -> str:
    why = message.why
    if "waiting for a CUDA run" in why or "only a CUDA run can raise" in why:
        return (
            "only a CUDA run can raise it; runs on CPU stood in for it and cannot show its "
            "message, and no GPU machine has run it yet"
        )
    if "declares instead" in why:
        return "the runs here could only stand in for it (on CPU), and a stand-in cannot show its message"
    if "no baseline run was applicable" in why:
        cuda = _why_not(baselines, "cuda")
        if cuda == "no GPU machine ran it":
            return "it needs a CUDA GPU, and no GPU machine has run it yet"
        return "no run could set up its situation (" + cuda + ")"
    return plain(why, 160)


def _shown(message: Verdict) -> tuple[int, int]:
    """(setups that showed the message, setups tried) of the message verdict's words."""
    m = re.search(
        r"(\d+)/(\d+) (?:applicable )?baseline scenarios", message.words or message.measured
    )
    if m is None:
        m = re.search(r"shown in (\d+)/(\d+)", message.measured)
    return (int(m[1]), int(m[2])) if m else (0, 0)


def _declared_instead(entry: Entry | None, baselines: Sequence[VariantAggregate]) -> str:
    """What the entry declares the situation does instead (a baseline's signature.instead or
    fails_as.instead), where that baseline's runs did it."""
    if entry is None:
        return ""
    ran = {b.name for b in baselines if b.related.k or b.silent.k}
    for v in entry.variants:
        if v.kind != "baseline" or v.name not in ran:
            continue
        said = (v.signature.instead if v.signature is not None else "") or (
            v.fails_as.instead if v.fails_as is not None else ""
        )
        if said:
            return plain(said, 300).rstrip(".")
    return ""


def _works(agg: EntryAggregate, rates: Sequence[Verdict]) -> str:
    good, split = [], []
    for v in rates:
        kind = _kind(agg, v)
        if kind != "workaround":
            continue
        if v.advice == HOLDS:
            count = _count(v)
            good.append(_what(agg, v) + (f" ({_setups(*count)})" if count else ""))
        elif v.advice == DEPENDS:
            split.append(f"{_what(agg, v)} ({_depends_side(v)})")
    if not good and not split:
        tried = [
            v
            for v in rates
            if _kind(agg, v) == "workaround" and v.advice not in (NOT_MEASURABLE, "")
        ]
        return "No documented fix worked in the runs." if tried else ""
    parts = good + split
    return "What works: " + "; ".join(parts) + "."


def _avoid(agg: EntryAggregate, rates: Sequence[Verdict]) -> str:
    parts = []
    for v in rates:
        kind = _kind(agg, v)
        if kind == "workaround" and v.advice == WRONG:
            count = _count(v)
            parts.append(_what(agg, v) + (f" (it worked {_setups(*count)})" if count else ""))
        elif kind == "dead_end" and v.advice in (HOLDS, FAILS_OTHERWISE):
            parts.append(
                _what(agg, v)
                + (
                    " (it fails, though not as the document says)"
                    if v.advice == FAILS_OTHERWISE
                    else ""
                )
            )
        elif kind == "dead_end" and v.advice == DEPENDS:
            parts.append(f"{_what(agg, v)} ({_depends_side(v)})")
    harmless = [_what(agg, v) for v in rates if _kind(agg, v) == "dead_end" and v.advice == WRONG]
    text = ("Avoid: " + "; ".join(parts) + ".") if parts else ""
    if harmless:
        text += (" " if text else "") + (
            "Documented as failing, but it did not fail here: " + "; ".join(harmless) + "."
        )
    return text


def _kind(agg: EntryAggregate, v: Verdict) -> str:
    try:
        return agg.variant(v.subject).kind
    except KeyError:
        return ""


_NOTHING_TO_JUDGE = (
    "baseline never reproduced",
    "no cell in which to test it",
    "no baseline run was applicable",
)


def _not_measured(agg: EntryAggregate, verdicts: Sequence[Verdict]) -> str:
    """The claims no run could judge: those waiting for the error to occur, said once, and
    the others with their reason."""
    missing = [
        v
        for v in verdicts
        if v.verdict == NOT_MEASURABLE
        and v.claim.startswith(("workaround", "dead end", "solution", "example"))
    ]
    waiting = list(
        dict.fromkeys(_label(v) for v in missing if any(w in v.why for w in _NOTHING_TO_JUDGE))
    )
    others = list(
        dict.fromkeys(
            f"{_label(v)} ({_reason(v)})"
            for v in missing
            if not any(w in v.why for w in _NOTHING_TO_JUDGE)
        )
    )
    parts = []
    if waiting:
        parts.append(
            f"{_and(waiting)}, which {'need' if len(waiting) > 1 else 'needs'} the error to "
            "occur first and it never did"
        )
    parts += others[:4] + ([f"{len(others) - 4} more"] if len(others) > 4 else [])
    return ("Not measured: " + "; ".join(parts) + ".") if parts else ""


def _and(items: Sequence[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _reason(v: Verdict) -> str:
    why = v.why.split(";", 1)[0]
    if why.startswith("not measured: "):
        why = why[len("not measured: ") :]
    if why.startswith("none of its runs in reproducing cells"):
        return "none of its runs could be made where the error occurred"
    return plain(_plain_words(why), 90)


def _weak(verdicts: Sequence[Verdict]) -> str:
    weak = []
    for v in verdicts:
        if v.advice == INCONCLUSIVE or (not v.advice and v.verdict == INCONCLUSIVE):
            weak.append(f"{_label(v)} is not settled")
        elif v.verdict in (CONFIRMED, CONTRADICTED) and 0 < v.n < WEAK_SETUPS and v.advice:
            weak.append(f"{_label(v)} rests on {v.n} setup{'s' if v.n != 1 else ''}")
    if not weak:
        return ""
    return "Weak evidence: " + "; ".join(dict.fromkeys(weak)) + "."


def bottom_line(entry: Entry | None, agg: EntryAggregate) -> tuple[str, ...]:
    """The entry's bottom line, one sentence (or two) per point, from ``agg.verdicts``."""
    verdicts = agg.verdicts
    message = next((v for v in verdicts if v.claim == "documented message"), None)
    baselines = [v for v in agg.variants if v.kind == "baseline"]
    rates = [v for v in verdicts if v.subject and v.advice]
    out = [_message_sentence(entry, agg, message)]
    if message is not None and message.verdict == CONFIRMED:
        out.append(_where(agg, baselines))
    elif baselines:
        devices = _devices(agg, baselines)
        if devices and not devices.startswith("no setup"):
            out.append(devices[0].upper() + devices[1:] + ".")
    advice = [_works(agg, rates), _avoid(agg, rates)]
    if message is not None and _stood_in(message):
        # what was measured where only a stand-in for the error could run (a CPU twin of a
        # CUDA error) speaks for the stand-in, and is said so
        advice = [_on_stand_ins(s) for s in advice if s]
    out += [*advice, _not_measured(agg, verdicts), _weak(verdicts)]
    return tuple(s for s in out if s)


def _stood_in(message: Verdict) -> bool:
    return message.verdict == NOT_MEASURABLE and any(
        w in message.why for w in ("declares instead", "waiting for a CUDA run")
    )


def _on_stand_ins(sentence: str) -> str:
    """A sentence on fixes measured only where a stand-in ran: said as such."""
    head, _, rest = sentence.partition(": ")
    if not rest:
        return f"On the stand-in runs only (the error itself was never raised): {sentence}"
    return f"{head}, on the stand-in runs only (the error itself was never raised): {rest}"


def where_it_occurs(agg: EntryAggregate) -> str:
    """'It occurs on torch ...; measured on CPU, not on CUDA (...).' ("" where no run raised
    the documented error): the bottom line's second sentence, for explain."""
    return _where(agg, [v for v in agg.variants if v.kind == "baseline"])


def devices_measured(agg: EntryAggregate) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(devices some run of the entry counted on, devices none did), as readers write them."""
    ran = _ran_on(agg.variants)
    return (
        tuple(_DEVICE_WORDS.get(d, d) for d, yes in ran.items() if yes),
        tuple(_DEVICE_WORDS.get(d, d) for d, yes in ran.items() if not yes),
    )
