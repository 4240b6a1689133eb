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

from harness.aggregate.model import DEPENDS, INCONCLUSIVE, NOT_MEASURABLE
from harness.report.render.kbdomain import (
    MEASURED,
    WAITING,
    DomainSummary,
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


# the README's table: one row per entry outside a knowledge-base domain ("single entry":
# the seeds and the entries written here) and one per domain (five 600-character bullets
# could not be read at a glance); the sentences stay on the pages
_HEADER = (
    "| Source | Entries | Measured | Waiting for a GPU | Claims confirmed | contradicted "
    "| not as documented | depends on the release | inconclusive | not measurable "
    "| Messages verbatim / reworded | invented |"
)
_RULE = "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
_SHOWS = ("verbatim", "variable-parts", "reworded")
_INVENTED = ("other-error", "not-raised")


def _seed_row(entry: Mapping[str, Any]) -> str:
    verdicts = entry.get("verdicts", ())
    seen = Counter(str(v.get("verdict")) for v in verdicts)
    message = next((v for v in verdicts if v.get("claim") == "documented message"), {})
    grade = message.get("grade") or NOT_MEASURABLE
    page = f"results/compat/{entry['id'].replace('/', '__')}.md"
    return (
        f"| [{entry['id']}]({page}) (single entry) | 1 | {1 if entry.get('runs') else 0} | 0 "
        f"| {seen['confirmed']} | {seen['contradicted']} | {seen['not as documented']} "
        f"| {seen[DEPENDS]} | {seen[INCONCLUSIVE]} | {seen[NOT_MEASURABLE]} | {1 if grade in _SHOWS else 0} "
        f"| {1 if grade in _INVENTED else 0} |"
    )


def _domain_row(s: DomainSummary, page: str) -> str:
    states = s.states()
    v = s.verdicts()
    g = s.by_grade()
    name = f"[{s.name}]({page})" if page else s.name
    return (
        f"| {name} | {len(s.entries)} | {states[MEASURED]} | {states[WAITING]} "
        f"| {v.get('confirmed', 0)} | {v.get('contradicted', 0)} "
        f"| {v.get('not as documented', 0)} | {v.get(DEPENDS, 0)} | {v.get(INCONCLUSIVE, 0)} "
        f"| {v.get(NOT_MEASURABLE, 0)} "
        f"| {sum(g.get(x, 0) for x in _SHOWS)} | {sum(g.get(x, 0) for x in _INVENTED)} |"
    )


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
    rows = [_seed_row(e) for e in entries if e["id"] not in in_domain and e.get("runs")]
    rows += [
        _domain_row(s, page) for s, page in zip(domains, pages or [""] * len(domains), strict=True)
    ]
    return "\n".join(
        [
            f"Written by `python -m harness report` from the records: {compat.get('records', 0):,} "
            f"runs, {f'{cuda:,} of them' if cuda else 'none'} on CUDA. A row per entry "
            "outside a domain (a seed or an entry written here) and per knowledge-base domain; "
            "each links its page, "
            "[docs/findings.md](docs/findings.md) tells what the figures mean. Claims are "
            "counted where their entry was measured; a message is *invented* where no run "
            "raised it (other-error, not-raised).",
            "",
            _HEADER,
            _RULE,
            *rows,
        ]
    )


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
