"""Aggregates -> Markdown: one compatibility page per entry, and the blocks that write-back
puts into an entry's document. Every run-derived text goes through ``md()``."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping, Sequence

from harness.aggregate import (
    CellValue,
    EntryAggregate,
    EnvInfo,
    ReproRange,
    VariantAggregate,
    documented_failure_text,
    pct,
    slice_id,
)
from harness.aggregate.smells import Smell
from harness.report.render import GLYPH, LABEL, STATUSES, entry_slug
from harness.report.render.grid import (
    AxisRange,
    Grid,
    GridCell,
    axis_ranges,
    make_grid,
    release_order,
)

__all__ = [
    "md",
    "render_entry",
    "smells_section",
    "measured_versions_block",
    "measured_rates_block",
    "verification_block",
    "cell_text",
    "legend",
]

# Backslash-escape what Markdown could act on (CommonMark, and so GitHub, lets any ASCII
# punctuation be escaped; \< starts no HTML): the file reads as the text was written and
# renders the same, where entities (&#96;) showed as such in a terminal and a code view. A
# pipe as \| cannot split a GFM table cell; a newline becomes <br> (a cell holds one line).
_MD_SPECIAL = re.compile(r"([\\`*\[\]<|~#$&])")
_MD_LINES = str.maketrans({"\r": "", "\n": "<br>", "\t": " "})
_EDGE_UNDERSCORE = re.compile(r"(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")
# what is left of a terminal escape whose ESC an older store replaced by U+FFFD ("\ufffd[1m"):
# records stored since keep no escape at all (store/validate.py, R12)
_ESCAPE_REMNANT = re.compile("\ufffd\\[[0-9;]*m")


def md(text: object) -> str:
    """Run-derived text, safe anywhere in a Markdown line or table cell."""
    # the same few texts (env ids, versions, messages, names) recur across tables and
    # entries: escape each distinct string once
    return _md_str(text if type(text) is str else str(text))


@functools.lru_cache(maxsize=1 << 14)
def _md_str(text: str) -> str:
    if "\ufffd[" in text:
        text = _ESCAPE_REMNANT.sub("", text)
    out = _MD_SPECIAL.sub(r"\\\1", text).translate(_MD_LINES)
    if "_" in out:  # only an underscore at a word edge can start or end emphasis
        out = _EDGE_UNDERSCORE.sub(r"\\_", out)
    if out.startswith(">"):  # a block quote where the text starts a line
        out = "\\" + out
    return out


def _row(cells: Iterable[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    return [_row(header), _row("---" for _ in header), *(_row(r) for r in rows)]


def cell_text(value: CellValue | None) -> str:
    if value is None:
        return ""
    if len(value.counts) == 1:  # one outcome (the common case): its glyph
        return GLYPH[value.status]
    glyph = GLYPH[value.status]
    if value.status == "flaky":
        return "~ " + " ".join(f"{GLYPH[o]}{c}" for o, c in value.counts)
    if value.trials > 1 and len(value.counts) > 1:
        return glyph + " (" + " ".join(f"{GLYPH[o]}{c}" for o, c in value.counts) + ")"
    return glyph


DISAGREE = "‼"  # marks a cell whose machines saw different outcomes


def legend() -> str:
    return " · ".join(f"{GLYPH[s]} {LABEL[s]}" for s in STATUSES) + (
        " (a flaky cell shows its trials per outcome, e.g. `~ ✖2 ✔1`; a cell measured on "
        "several machines that agree shows their one outcome, the machines listed under "
        f'"Machines"; where they disagree, each machine\'s outcome, e.g. `✖/✔ {DISAGREE}`: '
        'see "Machines disagree")'
    )


def machine_cell_text(agg: EntryAggregate, key: tuple[str, str, str, str]) -> str:
    """A cell as shown in a table: one outcome where its machines agree (the trials of all
    of them), each machine's where they disagree."""
    values = agg.by_machine.get(key)
    if values is None or key not in agg.disagree:
        return cell_text(agg.cells.get(key))
    return "/".join(cell_text(v) for _, v in values) + f" {DISAGREE}"


def shared_cells_text(agg: EntryAggregate) -> list[str]:
    """Which machines measured the same cells, and how many of those cells they agree on."""
    if not agg.by_machine:
        return []
    pairs: dict[tuple[str, ...], list[int]] = {}
    for key, values in agg.by_machine.items():
        counts = pairs.setdefault(tuple(m for m, _ in values), [0, 0])
        counts[0] += 1
        counts[1] += key in agg.disagree
    return [
        "",
        *(
            f"{n} cells were measured on each of {', '.join(md(m) for m in machines)}: "
            f"they agree on {n - differ} (shown as one outcome)"
            + (f", disagree on {differ} (marked {DISAGREE})" if differ else "")
            + "."
            for machines, (n, differ) in sorted(pairs.items())
        ),
    ]


def _seen_by(value: CellValue) -> str:
    return ", ".join(f"{LABEL[o]} ×{c}" for o, c in value.counts)


def disagreement_table(agg: EntryAggregate) -> list[str]:
    """The cells whose machines saw different outcomes, and what each machine saw."""
    rows = [
        [
            md(k[0]),
            md(k[1]),
            md(f"{k[2]}-{k[3]}"),
            "; ".join(f"{md(m)}: {_seen_by(v)}" for m, v in agg.by_machine[k]),
        ]
        for k in sorted(agg.disagree)
    ]
    if not rows:
        return []
    return [
        "",
        "## Machines disagree",
        "",
        "Cells measured on several machines whose applicable runs ended differently:",
        "",
        *_table(["Variant", "Environment", "Device-precision", "What each machine saw"], rows),
    ]


def _env_header(e: EnvInfo) -> str:
    parts = [f"torch {md(e.torch)}" if e.torch else md(e.id)]
    if e.lightning:
        parts.append(f"L {md(e.lightning)}")
    if e.python:
        parts.append(f"py {md(e.python)}")
    return "<br>".join(parts)


def _envs(envs: Sequence[str], limit: int = 8) -> str:
    shown = ", ".join(md(e) for e in envs[:limit])
    if len(envs) > limit:
        shown += f", … and {len(envs) - limit} more"
    return shown


def _claim(v: VariantAggregate) -> str:
    parts = []
    if v.claim_ref:
        parts.append(md(v.claim_ref))
    if v.claimed_rate is not None:
        parts.append(pct(v.claimed_rate))
    if v.reading:
        parts.append(f"{md(v.reading)} reading")
    if v.fails_as:
        parts.append("documented failure: " + md(documented_failure_text(v.fails_as)))
    if v.kind == "baseline" and v.shown.k > v.overall.k:
        # its runs read as the documented error at a grade other than verbatim
        read = [g for g, _ in v.grades if g != "verbatim"][:1]
        parts.append(
            f"shows the documented error ({md(', '.join(read))}) in {v.shown.k}/{v.shown.n}"
        )
    if v.requires:
        parts.append("requires " + md(" ".join(v.requires)))
    return ", ".join(parts) or "–"


def advice_text(v: VariantAggregate, limit: int = 3) -> str:
    """ "run with numpy<2 (numpy 2.4.6 → 1.26.4)": a variant of version advice, shown in
    the cells it answers for, and what its requirements changed there; "" for the others."""
    if not v.requires:
        return ""
    shown = "; ".join(md(c) for c in v.changed[:limit])
    if len(v.changed) > limit:
        shown += f"; … and {len(v.changed) - limit} more"
    return f"run with {md(' '.join(v.requires))}" + (f" ({shown})" if shown else "")


def _range_cells(r: ReproRange) -> list[str]:
    return [
        md(r.first) if r.first else "never",
        md(r.last) if r.last else "never",
        md(r.newest) if r.newest else "–",
        "–" if r.in_newest is None else ("yes" if r.in_newest else "no"),
        _envs(r.gaps) or "–",
    ]


def _public_version(text: str) -> str:
    return text.split("+", 1)[0]  # "2.4.1+cu121" -> "2.4.1": the release a user looks up


def variant_precisions(
    agg: EntryAggregate, variant: str, device: str, ran: set[tuple[str, str, str]]
) -> list[str]:
    """The precisions of ``device`` that ``variant`` ran in anywhere, in the entry's order
    (``ran``: ``_ran(agg)``, made once per entry)."""
    return [p for d, p in agg.slices if d == device and (variant, d, p) in ran]


def _ran(agg: EntryAggregate) -> set[tuple[str, str, str]]:
    """(variant, device, precision) of every cell of the entry's environments."""
    envs = {e.id for e in agg.envs}
    return {(v, d, p) for v, env, d, p in agg.cells if env in envs}


def slice_grid(agg: EntryAggregate, variant: str, device: str, precision: str) -> Grid:
    key = (device, precision)
    return make_grid(
        GridCell(
            _public_version(e.torch),
            _public_version(e.lightning),
            agg.cells[(variant, e.id, *key)].status,
            cell_text(agg.cells[(variant, e.id, *key)]),
        )
        for e in agg.envs
        if (variant, e.id, *key) in agg.cells
    )


def _cell_texts(agg: EntryAggregate) -> dict[tuple[str, str, str, str], str]:
    """Every cell's text as ``machine_cell_text`` gives it (none empty), once per entry:
    the tables look each up rather than calling it once a cell (a million calls at 2,500
    entries)."""
    texts = {key: cell_text(value) for key, value in agg.cells.items()}
    for key in agg.disagree:
        if key in agg.by_machine:
            texts[key] = machine_cell_text(agg, key)
    return texts


def _variant_table(
    agg: EntryAggregate,
    variant: str,
    device: str,
    precisions: Sequence[str],
    releases: Sequence[tuple[str, str, str]],
    texts: Mapping[tuple[str, str, str, str], str],
) -> list[str]:
    """One variant on one device as a torch x lightning table (none where it never ran
    there): a cell holds the text of each precision the variant ran in, in the entry's
    order ("_" where not run there), and where a python version splits one torch x lightning
    pair into several environments, each environment's texts in the entry's order.
    ``releases``: each environment's id and public torch and lightning release; ``texts``:
    ``_cell_texts(agg)``, made once per entry."""
    get = texts.get
    by_pair: dict[tuple[str, str], list[str]] = {}
    if len(precisions) == 1:  # (the common case: the one text, where the cell ran)
        (precision,) = precisions
        for env, torch, lightning in releases:
            text = get((variant, env, device, precision))
            if text:
                by_pair.setdefault((torch, lightning), []).append(text)
    else:
        for env, torch, lightning in releases:
            row = [get((variant, env, device, p), "") for p in precisions]
            if any(row):
                by_pair.setdefault((torch, lightning), []).append(" ".join(t or "_" for t in row))
    if not by_pair:
        return []
    torches = release_order(t for t, _ in by_pair)
    lightnings = release_order(lit for _, lit in by_pair)
    header = ["torch ↓ lightning →", *(md(lit) for lit in lightnings)]
    return _table(
        header,
        ([md(t), *(" ".join(by_pair.get((t, lit), ())) for lit in lightnings)] for t in torches),
    )


def outcome_tables(
    agg: EntryAggregate, variants: Sequence[VariantAggregate] | None = None
) -> list[str]:
    """Per device, per variant: the torch x lightning grid (the layout of Lightning's own
    compatibility table), each cell the outcome per precision of that device."""
    variants = agg.variants if variants is None else variants
    releases = [(e.id, _public_version(e.torch), _public_version(e.lightning)) for e in agg.envs]
    texts, ran = _cell_texts(agg), _ran(agg)
    lines: list[str] = []
    for device in dict.fromkeys(d for d, _ in agg.slices):
        for v in variants:
            precisions = variant_precisions(agg, v.name, device, ran)
            table = _variant_table(agg, v.name, device, precisions, releases, texts)
            if not table:
                continue
            advice = advice_text(v)
            lines += [
                "",
                f"### {md(v.name)} ({md(v.kind)}) on {md(device)}: {' '.join(precisions)}"
                + (f", {advice}" if advice else ""),
                "",
            ]
            lines += table
    return lines


def _axis_text(r: AxisRange) -> str:
    if r.first is None:
        return "never"
    span = md(r.first) if r.first == r.last else f"{md(r.first)} to {md(r.last)}"
    return span + ("" if r.contiguous else " (not in between: see the grid)")


def axis_tables(agg: EntryAggregate) -> list[str]:
    """Where each baseline reproduces along each axis: per torch, the first and last
    lightning; per lightning, the first and last torch (introduced / fixed)."""
    lines: list[str] = []
    for v in agg.variants:
        if v.kind != "baseline":
            continue
        for d, p in agg.slices:
            grid = slice_grid(agg, v.name, d, p)
            per_torch, per_lightning = axis_ranges(grid, "reproduced")
            if not any(r.hits for r in per_torch):
                continue
            lines += ["", f"### {md(v.name)} on {md(d)}-{md(p)}", ""]
            lines += _table(
                ["torch", "lightning measured", "reproduces with lightning"],
                [[md(r.fixed), str(len(r.measured)), _axis_text(r)] for r in per_torch],
            )
            lines.append("")
            lines += _table(
                ["lightning", "torch measured", "reproduces with torch"],
                [[md(r.fixed), str(len(r.measured)), _axis_text(r)] for r in per_lightning],
            )
    return lines or ["The documented error reproduced in no cell."]


def range_table(agg: EntryAggregate) -> list[str]:
    rows = []
    for v in agg.variants:
        for r in v.ranges:
            rows.append([md(v.name), "any" if r.slice == "*" else md(r.slice), *_range_cells(r)])
    if not rows:
        return ["No baseline runs."]
    return _table(
        [
            "Baseline",
            "Device-precision",
            "First reproduced (introduced)",
            "Last reproduced",
            "Newest measured",
            "Reproduces in newest",
            "Not reproduced between",
        ],
        rows,
    )


def variants_table(agg: EntryAggregate) -> list[str]:
    """What each variant is (entry.yaml's description), before the tables that name them."""
    rows = [
        [
            md(v.name),
            md(v.kind),
            md(v.claim_ref) if v.claim_ref else "–",
            md(" ".join(v.description.split())) or "–",
        ]
        for v in agg.variants
    ]
    return ["## Variants", "", *_table(["Variant", "Kind", "Claim", "What it is"], rows)]


def rates_table(agg: EntryAggregate) -> list[str]:
    header = [
        "Variant",
        "Kind",
        "Claim",
        "Metric",
        "Overall (k/n, 95% CI)",
        *(slice_id(s) for s in agg.slices),
    ]
    rows = [
        [
            md(v.name),
            md(v.kind),
            _claim(v),
            md(v.metric),
            v.overall.text(),
            *(r.text() for _, r in v.by_slice),
        ]
        for v in agg.variants
    ]
    return _table(header, rows)


def verdicts_table(agg: EntryAggregate) -> list[str]:
    rows = [
        [
            md(v.claim),
            md(v.subject) or "–",
            md(v.claimed),
            md(v.measured),
            f"**{md(v.label)}**",
            md(v.why),
            md(v.seen_instead) or "–",
        ]
        for v in agg.verdicts
    ]
    return _table(
        ["Claim", "Subject", "Claimed", "Measured", "Verdict", "Why", "Seen instead"], rows
    )


def messages_tables(agg: EntryAggregate) -> list[str]:
    """Per variant, the exceptions its runs raised, each distinct message once, with its
    grade against the documented message."""
    lines: list[str] = []
    for v in agg.variants:
        if not v.messages:
            continue
        lines += [f"### {md(v.name)}", ""]
        lines += _table(
            ["Count", "Outcomes", "Read as", "Type", "Message", "Environments"],
            (
                [
                    str(m.count),
                    md(", ".join(m.outcomes)),
                    md(m.grade) or "–",
                    md(m.type),
                    md(m.message),
                    _envs(m.envs),
                ]
                for m in v.messages
            ),
        )
        lines.append("")
    return lines or ["No exceptions were raised.", ""]


def not_counted_table(agg: EntryAggregate) -> list[str]:
    rows = [
        [md(v.name), md(n.outcome), md(n.reason) or "–", str(n.count), _envs(n.envs)]
        for v in agg.variants
        for n in v.not_counted
    ]
    if not rows:
        return ["None."]
    return _table(["Variant", "Outcome", "Reason", "Count", "Environments"], rows)


def machines_table(agg: EntryAggregate) -> list[str]:
    return _table(
        [
            "Machine",
            "Host",
            "OS",
            "CPU",
            "GPU",
            "Driver",
            "CUDA",
            "Harness",
            "Git rev",
            "Runs",
            "First run",
            "Last run",
        ],
        (
            [
                md(m.name),
                md(m.host),
                md(m.os),
                md(m.cpu),
                md(m.gpu),
                md(m.driver),
                md(m.cuda),
                md(m.harness_version),
                md(m.git_rev),
                str(m.runs),
                md(m.first),
                md(m.last),
            ]
            for m in agg.machines
        ),
    )


def smells_section(smells: Sequence[Smell]) -> list[str]:
    """What the records say of the reproducer (harness/aggregate/smells.py), each with the
    reason entry.yaml gives, or none yet."""
    lines = [
        "",
        "## Smells",
        "",
        "What the records say of the reproducer itself (docs/reference/entry-yaml.md, "
        "smells): each is fixed in repro.py or explained in entry.yaml.",
        "",
    ]
    if not smells:
        return [*lines, "None."]
    return lines + _table(
        ["Where", "Smell", "What the records show", "Explained"],
        (
            [md(s.where), md(s.kind), md(s.detail), md(s.explained) if s.explained else "**no**"]
            for s in smells
        ),
    )


def correction_line(kb_id: str, domain: str) -> str:
    """Where a knowledge-base entry's corrections are: the summary of the proposals, which
    names the proposals that carry the record or says why it is left alone (`python -m
    harness corrections`)."""
    return (
        f"Corrections for the knowledge base: [{md(kb_id)} ({md(domain)}) in the proposals' "
        "summary](../corrections/README.md), written by `python -m harness corrections` (it "
        "names the proposal that carries the record, or why the record is left alone)."
    )


def render_entry(
    agg: EntryAggregate, smells: Sequence[Smell] = (), correction: tuple[str, str] | None = None
) -> str:
    """An entry's compatibility page (results/compat/<slug>.md), its sections in order.
    ``correction``: (kb id, domain) of an entry whose knowledge-base record is kept."""
    lines = [f"# {md(agg.title)}", ""]
    if agg.title != agg.id:
        lines += [f"Entry: {md(agg.id)}", ""]
    if correction is not None:
        lines += [correction_line(*correction), ""]
    if agg.signature_type:
        # the message as text; the pattern that matches it is in the entry's entry.yaml
        lines += [
            f"Documented signature: {md(agg.signature_type)}: {md(agg.signature_text)}",
            "",
        ]
    if agg.bottom_line:
        # the verdicts in plain sentences (harness/aggregate/bottomline.py); the tables follow
        lines += ["## Bottom line", "", *(f"- {md(s)}" for s in agg.bottom_line), ""]
    lines += [
        f"Measured on {agg.n_runs} runs ({agg.n_counted} applicable), newest run "
        f"{md(agg.newest[:10]) or '–'}, harness {md(', '.join(agg.harness_versions)) or '–'}.",
        "",
        f"![heatmap]({entry_slug(agg.id)}.png)",
        "",
        *variants_table(agg),
        "",
        "## Outcomes",
        "",
        "Legend: " + legend() + ". Empty: not run. Each cell lists the device's precisions "
        "in the order the heading names; `_`: that precision was not run there.",
    ]
    lines += outcome_tables(agg)
    lines += disagreement_table(agg)
    lines += [
        "",
        "## Rates",
        "",
        "Every k/n counts scenarios (a variant in one release x device x precision: one cell); "
        "a scenario is a hit only where every trial was one. Reproduction: reproduced / "
        "applicable scenarios. Success (workaround) and failure (dead end): "
        "in cells where a baseline reproduces: where one of its runs shows the documented error "
        "at the message's grade (verbatim, variable-parts, reworded: docs/reference/outcomes-and-verdicts.md). Not "
        "applicable (never counted): unsupported, skipped, env_failed.",
        "",
    ]
    lines += rates_table(agg)
    lines += ["", "## Where the documented error reproduces", ""]
    lines += range_table(agg)
    lines += ["", "## Along each axis: torch x lightning", ""]
    lines += axis_tables(agg)
    lines += ["", "## Claimed vs measured", ""]
    lines += verdicts_table(agg)
    lines += smells_section(smells)
    lines += [
        "",
        "## Messages seen",
        "",
        "Read as: the message's grade against the documented one (docs/reference/outcomes-and-verdicts.md): verbatim, "
        "variable-parts, reworded (declared in entry.yaml), other-error.",
        "",
    ]
    lines += messages_tables(agg)
    lines += ["## Not counted (unsupported, skipped, env_failed)", ""]
    lines += not_counted_table(agg)
    lines += ["", "## Environments", ""]
    lines += _table(
        ["Environment", "torch", "lightning", "python"],
        ([md(e.id), md(e.torch), md(e.lightning), md(e.python)] for e in agg.envs),
    )
    lines += ["", "## Machines", ""]
    lines += machines_table(agg)
    lines += shared_cells_text(agg)
    lines.append("")
    return "\n".join(lines)


# -- write-back blocks (the text between an entry document's markers) --------------------


def measured_versions_block(agg: EntryAggregate) -> str:
    baselines = [v for v in agg.variants if v.kind == "baseline"]
    if not agg.n_runs:
        return "Not measured yet."
    lines = range_table(agg)
    lines += ["", "Baseline outcomes, torch x lightning (" + legend() + "):"]
    lines += outcome_tables(agg, baselines)
    return "\n".join(lines)


def measured_rates_block(agg: EntryAggregate) -> str:
    if not agg.n_runs:
        return "Not measured yet."
    return "\n".join(rates_table(agg) + ["", *verdicts_table(agg)])


def verification_block(agg: EntryAggregate) -> str:
    if not agg.n_runs:
        return "Verification: not measured yet."
    revs = sorted({m.git_rev for m in agg.machines if m.git_rev})
    rev = f" (git {md(', '.join(revs))})" if revs else ""
    date = md(agg.newest[:10]) if agg.newest else "date unknown"
    return (
        f"Verification: measured on {agg.n_runs} runs ({agg.n_counted} applicable), {date}, "
        f"harness {md(', '.join(agg.harness_versions)) or 'unknown'}{rev}."
    )
