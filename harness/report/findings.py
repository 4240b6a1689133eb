"""The README's findings, written by `report` from the records between two markers, so that
what a reader sees first is never a figure somebody typed and forgot:

    <!-- findings:begin -->
    ...replaced...
    <!-- findings:end -->

Input: compat.json's document (the aggregates as rendered) and the domains' summaries
(harness/report/render/kbdomain.py). Pure functions; outputs.render_all decides where the
text goes, and `report --check` fails while the README's block differs from it. A README
without the markers is left alone.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from harness.aggregate.model import ADVICE, FIGURES, NOT_MEASURABLE, WRONG
from harness.report.render.kbdomain import (
    RATE_KINDS,
    DomainSummary,
    claim_kind,
    counted_list,
    plural,
    search_text,
    states_text,
    triage_text,
)
from harness.report.writeback import WritebackError

__all__ = ["BEGIN", "END", "fill_findings", "render_findings"]

BEGIN = "<!-- findings:begin -->"
END = "<!-- findings:end -->"
_NOT_COUNTED = frozenset({"unsupported", "skipped", "env_failed"})


def _runs_on(entry: Mapping[str, Any], device: str) -> int:
    """Applicable runs of an entry in the slices of ``device`` (from its cells)."""
    total = 0
    for per in entry.get("cells", {}).values():
        for slice_name, slot in per.items():
            if not slice_name.startswith(device + "-"):
                continue
            envs = [e["id"] for e in entry.get("environments", ())]
            for env, status in zip(envs, slot.get("status", ()), strict=False):
                if status is None:
                    continue
                counts = slot.get("counts", {}).get(env) or {status: 1}
                total += sum(c for o, c in counts.items() if o not in _NOT_COUNTED)
    return total


def _tally(answers: Sequence[str], seen: Counter[str]) -> str:
    return ", ".join(f"{a} {seen[a]}" for a in answers if seen[a])


def _torch_range(entry: Mapping[str, Any], envs: set[str]) -> str:
    torch = [
        e.get("torch", "?").split("+")[0] for e in entry.get("environments", ()) if e["id"] in envs
    ]
    if not torch:
        return ""
    return f"torch {torch[0]}" if torch[0] == torch[-1] else f"torch {torch[0]} to {torch[-1]}"


def _entry_line(entry: Mapping[str, Any]) -> str:
    verdicts = entry.get("verdicts", ())
    message = next((v for v in verdicts if v.get("claim") == "documented message"), {})
    grade = message.get("grade") or NOT_MEASURABLE
    baselines = [v for v in entry.get("variants", ()) if v.get("kind") == "baseline"]
    shown = sum(b.get("shown", {}).get("k", 0) for b in baselines)
    applicable = sum(b.get("shown", {}).get("n", 0) for b in baselines)
    envs = {env for b in baselines for env, s, n in b.get("env_shows", ()) if (s if shown else n)}
    where = _torch_range(entry, envs)
    text = f"- *{entry.get('title', entry['id'])}* (`{entry['id']}`): the documented message"
    if grade == NOT_MEASURABLE:
        text += " not measured yet"
    else:
        text += f": {grade}, shown in {shown}/{applicable} baseline runs"
        if where:
            text += f" ({where})" if shown else f" (measured in {where})"
    rates = [v for v in verdicts if claim_kind(str(v.get("claim", ""))) in RATE_KINDS]
    advice = Counter(str(v.get("advice") or "") for v in rates)
    figure = Counter(str(v.get("figure") or "") for v in rates)
    if rates:
        text += f"; advice: {_tally(ADVICE, advice)}"
        wrong = [v for v in rates if v.get("advice") == WRONG][:3]
        if wrong:
            text += (
                " ("
                + "; ".join(
                    f"wrong: {v['claim']}"
                    + (f", {v['subject']}" if v.get("subject") else "")
                    + f", {v['measured'].split(' = ')[0]}"
                    for v in wrong
                )
                + ")"
            )
        text += f"; figures: {_tally(FIGURES, figure)}"
    return text + "."


def _domain_line(s: DomainSummary, page: str) -> str:
    advice: Counter[str] = Counter()
    for row in s.by_advice().values():
        advice.update(row)
    figure: Counter[str] = Counter()
    for row in s.by_figure().values():
        figure.update(row)
    text = (
        f"- *{s.repository}, {s.name}* ({plural(len(s.entries), 'entry', 'entries')}; "
        f"{triage_text(s)}): {states_text(s)}; "
    )
    if s.claims or s.unmeasured:
        text += (
            f"claims: {counted_list(s.verdicts())}; documented messages: "
            f"{counted_list(s.by_grade())}; rate claims' advice: "
            f"{_tally(ADVICE, advice) or 'none'}; their figures: "
            f"{_tally(FIGURES, figure) or 'none'}; "
        )
    else:
        text += "no claim counted yet; "
    return text + f"message search: {search_text(s)}. See [the summary]({page})."


def render_findings(
    compat: Mapping[str, Any],
    domains: Sequence[DomainSummary],
    pages: Sequence[str] = (),
) -> str:
    """The block's text. ``compat``: compat.json's document; ``domains``: the summaries of
    the knowledge-base domains, ``pages`` their pages' paths as the README links them."""
    entries = list(compat.get("entries", ()))
    in_domain = {e.entry for s in domains for e in s.entries}
    cuda = sum(_runs_on(e, "cuda") for e in entries)
    lines = [
        f"Written by `python -m harness report` from the records: {compat.get('records', 0):,} "
        f"runs, {f'{cuda:,} of them' if cuda else 'none'} on CUDA "
        "([docs/findings.md](docs/findings.md) tells what they mean):",
        *(_entry_line(e) for e in entries if e["id"] not in in_domain and e.get("runs")),
    ]
    for s, page in zip(domains, pages or [""] * len(domains), strict=True):
        lines.append(_domain_line(s, page))
    return "\n".join(lines)


def fill_findings(text: str, block: str, path: str | os.PathLike[str]) -> str | None:
    """``text`` with the inside of its findings markers replaced by ``block``; None when it
    holds no markers. A repeated or unbalanced marker is an error naming the line."""
    begins = _lines_of(text, BEGIN)
    ends = _lines_of(text, END)
    if not begins and not ends:
        return None
    if len(begins) != 1 or len(ends) != 1 or ends[0][0] < begins[0][0]:
        # the line of the first marker too many, or of the one that is out of place
        extra = begins[1:] or ends[1:] or ends or begins
        raise WritebackError(
            path, extra[0][1], f"the findings need one '{BEGIN}' and, after it, one '{END}'"
        )
    newline = "\r\n" if "\r\n" in text else "\n"
    start, end = begins[0][0] + len(BEGIN), ends[0][0]
    return text[:start] + newline + block.replace("\n", newline) + newline + text[end:]


def _lines_of(text: str, marker: str) -> list[tuple[int, int]]:
    """(offset, line) of each occurrence of ``marker``."""
    out, at = [], text.find(marker)
    while at >= 0:
        out.append((at, text.count("\n", 0, at) + 1))
        at = text.find(marker, at + len(marker))
    return out
