"""Renderers: hostile run text stays text; the same records give the same bytes."""

from __future__ import annotations

import dataclasses
import json
import re
from html.parser import HTMLParser
from typing import Any

from harness.aggregate import aggregate
from harness.outcomes import Outcome
from harness.report.render import STATUSES
from harness.report.render.html import (
    cell_file_name,
    cell_files,
    html_part,
    render_cell_data,
    render_html,
    section_files,
)
from harness.report.render.jsonout import read_compat, render_json
from harness.report.render.markdown import md, render_entry
from harness.report.render.plots import render_png
from harness.spec.entries import Claims, Entry, Signature, Variant
from harness.store.records import ExceptionInfo, Record

HOSTILE = "<script>document.title='pwned'</script> | `tick` </script><img src=x onerror=alert(1)> [l](javascript:x)\nline2 _em_"
ENVS = ["py3.10-torch1.12.1-lightning2.1.4", "py3.11-torch2.5.1-lightning2.4.0"]


def records() -> list[Record]:
    out = []
    for env in ENVS:
        torch = env.split("torch")[1].split("-")[0]
        for variant, kind, outcome in (
            ("base", "baseline", Outcome.REPRODUCED),
            ("wa", "workaround", Outcome.OTHER_ERROR),
            ("ctl", "control", Outcome.OK),
        ):
            for trial in range(2):
                exc = None
                if outcome is not Outcome.OK:
                    exc = ExceptionInfo("RuntimeError", HOSTILE, "<frame>|x.py:1", "tb")
                out.append(
                    Record(
                        entry="pytorch/hostile",
                        variant=variant,
                        kind=kind,
                        cell=f"{env}-cpu-fp16",
                        env=env,
                        device="cpu",
                        precision="fp16",
                        trial=trial,
                        outcome=outcome,
                        exception=exc,
                        reason=HOSTILE if outcome is Outcome.OTHER_ERROR else "",
                        versions={
                            "python": "3.10",
                            "torch": torch + "+cu102",
                            "lightning": "2.1.4",
                        },
                        provenance={
                            "host": "<b>host</b>",
                            "harness_version": "0.1.0",
                            "git_rev": "abc",
                        },
                        started_at="2024-05-01T00:00:00Z",
                    )
                )
    out.append(
        Record(
            entry="pytorch/hostile",
            variant="wa",
            kind="workaround",
            cell=f"{ENVS[0]}-cuda-bf16",
            env=ENVS[0],
            device="cuda",
            precision="bf16",
            trial=0,
            outcome=Outcome.SKIPPED,
            reason="no CUDA | here",
        )
    )
    return out


def entry(tmp_path) -> Entry:
    doc = tmp_path / "document.md"
    doc.write_text(
        "".join(
            f"<!-- harness:{b}:begin --><!-- harness:{b}:end -->\n"
            for b in ("measured-versions", "measured-rates", "verification")
        ),
        encoding="utf-8",
    )
    return Entry(
        id="pytorch/hostile",
        dir=tmp_path,
        title="Hostile <title> | test",
        signature=Signature("RuntimeError", "<script>"),
        claims=Claims(fix_rate=0.9),
        variants=(
            Variant("base", "baseline", "b"),
            Variant("wa", "workaround", "w", claim_ref="workaround 1", claimed_rate=0.8),
            Variant("ctl", "control", "c"),
        ),
        source=doc,
        document=doc,
        repro=doc,
    )


def test_md_escape():
    assert md("a|b`c<d>\\e\r\nf") == "a\\|b\\`c\\<d>\\\\e<br>f"
    assert md("snake_case_name") == "snake_case_name"
    assert md("_em_") == "\\_em\\_"
    assert md("[x](y)") == "\\[x\\](y)"
    assert md("> quoted") == "\\> quoted" and md("a -> b") == "a -> b"
    # no entity, and no escape code: what is left of one in records stored before the
    # store removed them ("\ufffd[1m") is dropped
    assert md("two options, \ufffd[1mdo those steps\ufffd[0m") == "two options, do those steps"
    assert "&#" not in md("`[*~#$&|]`")


def test_md_renders_as_the_text_was_written():
    """CommonMark with GFM tables (what GitHub renders; markdown-it-py comes with rich) reads
    each escape back as the character."""
    import html as html_module

    from markdown_it import MarkdownIt

    text = "a|b `tick` <script>x</script> [link](y) *not em* _x_ ~~no~~ #1 $x$ &amp; \\n"
    parser = MarkdownIt("commonmark").enable(["table", "strikethrough"])
    html = parser.render("| c |\n| --- |\n| " + md(text) + " |\n")
    match = re.search(r"<td>(.*)</td>", html)
    assert match is not None, html
    assert html_module.unescape(match.group(1)) == text
    assert "<script>" not in html and "<a " not in html and "<em>" not in html


def test_markdown_keeps_hostile_text_as_text(tmp_path):
    [agg] = aggregate(records(), [entry(tmp_path)]).entries
    text = render_entry(agg)
    # every < that could open a tag is escaped (\<: CommonMark's escape, no entity)
    assert not re.search(r"(?<!\\)<(script|img|b>)", text)
    assert "&#" not in text and "&lt;" not in text  # no entities: the file reads as written
    assert "\\<script>document.title='pwned'\\</script> \\| \\`tick\\`" in text
    # every table row has the same number of cells as its header: no pipe leaked
    for block in re.findall(r"(?:^\|.*\|$\n?)+", text, flags=re.M):
        rows = block.strip("\n").split("\n")
        widths = {len(re.findall(r"(?<!\\)\|", r)) for r in rows}
        assert len(widths) == 1, rows
    assert "no CUDA \\| here" in text
    # the workaround never worked: 0/2 scenarios (four trials) against 80%
    assert (
        "**contradicted: inconclusive (n=2); figure overstated: 0/2 scenarios vs 80% claimed**"
        in text
    )


def sections_of(aggs: Any, torch_only: Any = ()) -> str:
    """The entries' sections as the page puts them in when they are opened: the markup of
    their lines in the section files (harnessSection(slug, markup);)."""
    out = []
    for line in html_part(aggs.entries, torch_only=torch_only).sections.splitlines():
        assert line.startswith("harnessSection(") and line.endswith(");")
        slug, markup = json.loads("[" + line[len("harnessSection(") : -2] + "]")
        assert f'id="e-{slug}"' in markup
        out.append(markup)
    return "".join(out)


def test_html_escapes_markup_and_script_data(tmp_path):
    aggs = aggregate(records(), [entry(tmp_path)])
    page = render_html(aggs)
    section = sections_of(aggs)
    assert page.count("<script") == 1  # the page's own script, nothing else
    assert page.count("</script>") == 1
    for text in (page, section):
        assert "<img" not in text and "<b>host" not in text
    assert "<script" not in section
    assert (
        "&lt;script&gt;document.title=&#x27;pwned&#x27;&lt;/script&gt;" in section
    )  # in the verdicts table
    assert "innerHTML" not in page and "http" not in page.replace(
        "http-equiv", ""
    )  # self-contained
    # the entry's section is in its section file, which the page loads with <script src>
    assert section_files([html_part(aggs.entries)])[0][0] == "sections/0000.js"
    assert '<tr data-id="pytorch/hostile">' in page and 'class="heatmap' not in page
    # the page's script names the files from the row's place and the entries a file holds
    assert "SECTION_ENTRIES = 16, CELL_ENTRIES = 64;" in page
    # the cell details are in the entry's data file, which the page loads with <script src>
    [agg] = aggs.entries
    script = render_cell_data(agg)
    assert cell_file_name(0) == "cells/0000.js" and cell_files([agg]) == [("cells/0000.js", script)]
    assert "cells/" not in section and "sections/" not in section
    prefix = 'harnessCells("pytorch__hostile",'
    assert script.startswith(prefix) and script.endswith(");\n")
    data_text = script[len(prefix) : -3]
    assert "<" not in data_text and ">" not in data_text
    data = json.loads(data_text)
    assert HOSTILE in data["strings"]
    assert data["shape"] == [2, 3, 2]  # (cpu-fp16, cuda-bf16) x (base, wa, ctl) x environments
    cells = data["cells"]
    assert [STATUSES[s] if s is not None else None for s in cells["status"][:2]] == [
        "reproduced",
        "reproduced",
    ]
    assert (
        cells["trials"][:2] == [2, 2]
        and sum(cells["trials"]) == len(data["trials"]["outcome"]) == 13
    )
    assert "<b>host</b>" in data["strings"][data["trials"]["machine"][0]]
    exc = data["exceptions"][data["trials"]["exception"][0]]
    assert [data["strings"][i] for i in exc] == ["RuntimeError", HOSTILE, "<frame>|x.py:1"]

    class Tags(HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.tags: list[str] = []

        def handle_starttag(self, tag, attrs):
            self.tags.append(tag)

    parser = Tags()
    parser.feed(page)
    assert "img" not in parser.tags and parser.tags.count("script") == 1


def test_json_schema_and_content(tmp_path):
    files = render_json(aggregate(records(), [entry(tmp_path)]))
    index = json.loads(files["compat.json"])
    assert index == {
        "schema": 2,
        "records": 13,
        "parts": [{"file": "aggregates/0000.jsonl", "ids": ["pytorch/hostile"]}],
    }
    [line] = files["aggregates/0000.jsonl"].decode("utf-8").splitlines()
    e = json.loads(line)
    assert [x["id"] for x in e["environments"]] == ENVS
    assert e["cells"]["base"]["cpu-fp16"] == {
        "status": ["reproduced", "reproduced"],
        "counts": {ENVS[0]: {"reproduced": 2}, ENVS[1]: {"reproduced": 2}},
    }
    assert e["cells"]["base"]["cuda-bf16"]["status"] == [None, None]
    wa = next(v for v in e["variants"] if v["name"] == "wa")
    # the rates count scenarios, the runs trials
    assert (
        wa["overall"]["k"] == 0
        and wa["overall"]["n"] == 2
        and wa["runs"] == 5
        and wa["not_counted"][0]["reason"] == "no CUDA | here"
    )


def test_json_read_back_whole_is_the_aggregates_document(tmp_path):
    recs = records() + [dataclasses.replace(r, entry="pytorch/other") for r in records()]
    aggs = aggregate(recs, [entry(tmp_path)])
    for name, data in render_json(aggs).items():
        (tmp_path / "results" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "results" / name).write_bytes(data)
    whole = json.loads(json.dumps(aggs.to_dict()))  # tuples as lists
    assert read_compat(tmp_path / "results") == {**whole, "schema": 2}


def test_png_is_a_png_and_deterministic(tmp_path):
    [agg] = aggregate(records(), [entry(tmp_path)]).entries
    png = render_png(agg)
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and png == render_png(agg)


def test_markdown_shows_each_machine_of_a_cell_and_where_they_disagree(tmp_path):
    from dataclasses import replace

    from harness.report.render.markdown import render_entry as render

    base = records()
    rs = [replace(base[0], machine="gpu-box", machine_id="g1")]
    rs.append(
        replace(base[0], machine="laptop", machine_id="l1", outcome=Outcome.OK, exception=None)
    )
    [agg] = aggregate(rs, [entry(tmp_path)]).entries
    text = render(agg)
    # in the torch x lightning table's row, not only in the legend's example
    assert "\n| 1.12.1 | ✖/✔ ‼ |\n" in text
    assert "## Machines disagree" in text
    # and in the page's heatmap: each machine's outcome, what each saw in its title
    sections = html_part([agg]).sections
    assert (
        'title=\\"machines disagree: gpu-box: reproduced ×1; laptop: ok ×1\\">✖/✔ ‼</td>'
        in sections
    )
    assert "gpu-box: reproduced ×1; laptop: ok ×1" in text
    assert "1 cells were measured on each of gpu-box, laptop: they agree on 0" in text


def test_markdown_shows_one_outcome_where_the_machines_agree(tmp_path):
    """Two machines both called "vm" (told apart by their ids) that saw the same outcome:
    one glyph, not `✖/✖`; the machines are listed under "Machines"."""
    from dataclasses import replace

    from harness.report.render.markdown import render_entry as render

    base = records()
    rs = [
        replace(base[0], machine="vm", machine_id="0090f3974aca"),
        replace(base[0], machine="vm", machine_id="7c1d2e3f4a5b"),
    ]
    [agg] = aggregate(rs, [entry(tmp_path)]).entries
    assert agg.by_machine and not agg.disagree
    text = render(agg)
    assert "✖/✖" not in text and "## Machines disagree" not in text
    grid = text.split("## Outcomes", 1)[1].split("## Rates", 1)[0]
    assert "| 1.12.1 | ✖ |" in grid
    assert (
        "1 cells were measured on each of vm (0090f397), vm (7c1d2e3f): they agree on 1 "
        "(shown as one outcome)." in text
    )


def test_entry_page_shows_the_torch_by_lightning_grid_and_the_ranges_along_each_axis() -> None:
    agg = aggregate(records()).entries[0]
    page = render_entry(agg)
    # ENVS: torch 1.12.1 with lightning 2.1.4, torch 2.5.1 with lightning 2.4.0 (the records
    # say lightning 2.1.4 was installed in both: the installed version is what the grid shows)
    grid = page.split("### base (baseline) on cpu: fp16", 1)[1].split("###", 1)[0]
    rows = [ln for ln in grid.splitlines() if ln.startswith("| ")]
    assert rows[0] == "| torch ↓ lightning → | 2.1.4 |"
    assert rows[2:] == ["| 1.12.1 | ✖ |", "| 2.5.1 | ✖ |"]  # local labels (+cu102) dropped
    axis = page.split("## Along each axis: torch x lightning", 1)[1]
    assert "| 2.1.4 | 2 | 1.12.1 to 2.5.1 |" in axis  # per lightning: first and last torch
    assert "| 1.12.1 | 1 | 2.1.4 |" in axis  # per torch: where along lightning


def test_grid_leaves_a_pair_that_was_not_run_empty() -> None:
    recs = [
        dataclasses.replace(r, versions={**r.versions, "lightning": "2.4.0"})
        if r.env == ENVS[1]
        else r
        for r in records()
    ]
    page = render_entry(aggregate(recs).entries[0])
    grid = page.split("### base (baseline) on cpu: fp16", 1)[1].split("###", 1)[0]
    rows = [ln for ln in grid.splitlines() if ln.startswith("| ")]
    assert rows[0] == "| torch ↓ lightning → | 2.1.4 | 2.4.0 |"
    assert rows[2:] == ["| 1.12.1 | ✖ |  |", "| 2.5.1 |  | ✖ |"]


def test_html_heatmap_columns_rows_and_variant_titles(tmp_path):
    """Columns grouped by torch with lightning beneath; a torch-only entry's one per torch
    release; a variant only in the slices it ran; its description in its row's title, as
    text."""
    e = entry(tmp_path)
    e = dataclasses.replace(
        e, variants=tuple(dataclasses.replace(v, description=HOSTILE) for v in e.variants)
    )
    aggs = aggregate(records(), [e])
    section = sections_of(aggs).split('<section class="entry"', 1)[1]
    assert '<th class="axis">lightning →</th>' in section
    assert 'colspan="1" title="torch 1.12.1">1.12.1</th>' in section
    assert 'data-envs="0" title="torch 1.12.1 + lightning 2.1.4: ' + ENVS[0] in section
    # cuda/bf16: "wa" alone ran there (skipped); base and ctl have no row
    cuda = section.split('data-slice="cuda-bf16" data-si="1"', 1)[1].split("</table>", 1)[0]
    assert cuda.count("<tr>") == 3 and 'data-v="1"' in cuda and 'data-v="0"' not in cuda
    escaped = "&lt;script&gt;document.title=&#x27;pwned&#x27;&lt;/script&gt;"
    assert f'title="workaround (workaround 1): {escaped}' in section
    assert "<img" not in section
    # the same entry as one whose reproducer imports no lightning
    torch_only = sections_of(aggs, torch_only={"pytorch/hostile"})
    heads = torch_only.split('<table class="heatmap', 1)[1].split("</thead>", 1)[0]
    assert "lightning →" not in heads and heads.count('th class="col"') == 2
    assert 'table class="heatmap by-torch"' in torch_only
    assert "(the reproducer imports no lightning: any lightning gives this answer)" in heads


def test_the_page_holds_a_row_per_entry_and_no_section(tmp_path):
    """Issue 37: at 2,500 entries a page with every section was 60 MB. The page holds a
    short row per entry; the sections (heatmaps, rates, verdicts) are in the section files,
    16 entries a file, loaded when an entry is opened."""
    e = entry(tmp_path)
    many = [dataclasses.replace(r, entry=f"pytorch/e{i:02d}") for i in range(40) for r in records()]
    one, forty = aggregate(records(), [e]), aggregate(many, [e])
    page = render_html(forty)
    per_entry = (len(page) - len(render_html(one))) / 39
    assert per_entry < 400, per_entry  # a row: its link, its counts, its section file
    assert '<section class="entry"' not in page and 'class="heatmap' not in page
    files = section_files([html_part(forty.entries)])
    assert [name for name, _ in files] == [f"sections/{k:04d}.js" for k in range(3)]
    assert [text.count("\n") for _, text in files] == [16, 16, 9]  # and pytorch/hostile
    assert all(text.count('class=\\"heatmap') >= 16 for _, text in files[:2])
    # (the page finds an entry's section file from its row's place: the rows name none)
    assert '<tr data-id="pytorch/e39"><td><a href="#e-pytorch__e39">' in page
    rows = page.split('<table id="summary">', 1)[1].split("</table>", 1)[0]
    assert rows.count("<tr data-id=") == 41 and "sections/" not in rows and "data-part" not in rows


def test_markdown_lists_what_each_variant_is(tmp_path):
    e = entry(tmp_path)
    e = dataclasses.replace(
        e, variants=tuple(dataclasses.replace(v, description=HOSTILE) for v in e.variants)
    )
    [agg] = aggregate(records(), [e]).entries
    text = render_entry(agg)
    table = text.split("## Variants", 1)[1].split("## Outcomes", 1)[0]
    assert "| Variant | Kind | Claim | What it is |" in table
    assert "| wa | workaround | workaround 1 | \\<script>document.title='pwned'\\</script>" in table
    assert "\\[l\\](javascript:x) line2 \\_em\\_ |" in table  # one line, as text


def test_markdown_grid_joins_the_environments_of_one_torch_lightning_pair(tmp_path):
    """Two python versions of one torch x lightning pair share a cell of the page's grid:
    each environment's texts, a precision each ("_" where it did not run there), in the
    entry's order of environments; the heading names the precisions the variant ran in."""
    from dataclasses import replace

    from harness.report.render import GLYPH

    base = records()[0]  # a baseline record of ENVS[0], cpu fp16, reproduced
    a, b = "py3.10-torch1.12.1-lightning2.1.4", "py3.11-torch1.12.1-lightning2.1.4"

    def run(env: str, precision: str, outcome: Outcome) -> Record:
        return replace(
            base,
            env=env,
            cell=f"{env}-cpu-{precision}",
            precision=precision,
            trial=0,
            outcome=outcome,
            exception=base.exception if outcome is not Outcome.OK else None,
        )

    rs = [
        run(a, "fp16", Outcome.REPRODUCED),
        run(b, "fp16", Outcome.OK),
        run(b, "fp32", Outcome.REPRODUCED),
    ]
    [agg] = aggregate(rs, [entry(tmp_path)]).entries
    precisions = [p for d, p in agg.slices if d == "cpu"]
    assert sorted(precisions) == ["fp16", "fp32"]
    text = render_entry(agg)
    heading = f"### base (baseline) on cpu: {' '.join(precisions)}"
    assert heading in text
    table = text.split(heading, 1)[1].split("\n\n", 2)[1].splitlines()
    assert table[0] == "| torch ↓ lightning → | 2.1.4 |"
    shown = {
        (a, "fp16"): GLYPH["reproduced"],
        (b, "fp16"): GLYPH["ok"],
        (b, "fp32"): GLYPH["reproduced"],
    }
    per_env = [
        " ".join(shown.get((e.id, p), "_") for p in precisions) for e in agg.envs if e.id in (a, b)
    ]
    assert table[2] == f"| 1.12.1 | {' '.join(per_env)} |"
    assert len(table) == 3  # one torch release, one lightning release
