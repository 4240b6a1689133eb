"""The HTML report in a real headless Chromium: it renders, its script runs, hostile text
in the data is not executed; the committed page fits 1280 px, and its "paste your error" box
answers as `harness explain` does. Screenshots at 1280 px go to tests/artifacts/."""

from __future__ import annotations

import dataclasses
import html
import json
import os
import re
import shutil
import subprocess
from collections.abc import Sequence
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from harness.catalogue.explain import Versions, explain
from harness.report.outputs import render_all
from tests.catalogue.test_explain import (
    BROADCAST,
    CHECKPOINT,
    CLIPPING,
    GRAD_SCALE,
    INPLACE,
    Committed,
    committed,  # noqa: F401  (a fixture: the committed records, aggregated once)
    traceback_of,
)
from tests.paths import REPO, committed_tree
from tests.report.test_render import HOSTILE, entry, records

CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = REPO / "tests" / "artifacts"
WIDTH = 1280
SEEDS = (GRAD_SCALE, CLIPPING)
NEWCOMER = (
    "NotImplementedError: Gradient clipping is not implemented for optimizers handling the "
    "unscaling"
)

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not CHROMIUM.exists(), reason="/usr/bin/chromium is absent (apt-get install chromium)"
    ),
]


def chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    profile = tmp_path / "profile"
    cmd = [
        str(CHROMIUM),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--no-first-run",
        f"--user-data-dir={profile}",
        *args,
    ]
    env = {**os.environ, "HOME": str(tmp_path)}
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env, check=True)


def with_script(page: Path, where: Path, script: str) -> Path:
    """A copy of ``page`` in ``where`` that runs ``script`` once the page's own has run, its
    files beside it (the answers file copied, cells/, sections/ and answers/ linked)."""
    where.mkdir(parents=True, exist_ok=True)
    for name in ("answers.js", "cells", "sections", "answers"):
        src, dst = page.parent / name, where / name
        if dst.exists() or not src.exists():
            continue
        if src.is_dir():
            dst.symlink_to(src.resolve(), target_is_directory=True)
        else:
            shutil.copyfile(src, dst)
    copy = where / "page.html"
    text = page.read_text(encoding="utf-8")
    copy.write_text(text.replace("</body>", f"<script>{script}</script></body>"), encoding="utf-8")
    return copy


def run_script(
    tmp_path: Path, page: Path, script: str, width: int = WIDTH, fragment: str = ""
) -> Any:
    """What ``script`` (run in ``page``, opened at ``fragment``) hands to ``done(value)``, as
    JSON."""
    wrapped = (
        "function done(v){var p=document.createElement('pre');p.id='result';"
        "p.textContent=JSON.stringify(v);document.body.appendChild(p);}"
        # the box answers once the answers file is loaded: wait for its answer
        "function answered(f){(function poll(){var o=document.getElementById('lookup-out');"
        "if(o.children.length)f(o);else setTimeout(poll,20);})();}" + script
    )
    copy = with_script(page, tmp_path / "run", wrapped)
    dom = chromium(
        tmp_path,
        f"--window-size={width},1000",
        "--virtual-time-budget=20000",
        "--dump-dom",
        copy.as_uri() + fragment,
    ).stdout
    found = re.search(r'<pre id="result">(.*?)</pre>', dom, re.S)
    assert found, dom[-2000:]
    return json.loads(html.unescape(found.group(1)))


def screenshot(
    tmp_path: Path, page: Path, shot: Path, script: str = "", height: int = 1000
) -> None:
    copy = with_script(page, tmp_path / f"shot-{shot.stem}", script)
    shot.unlink(missing_ok=True)
    chromium(
        tmp_path,
        "--virtual-time-budget=5000",
        f"--window-size={WIDTH},{height}",
        f"--screenshot={shot}",
        copy.as_uri(),
    )
    assert shot.read_bytes().startswith(b"\x89PNG")


def only(element_id: str) -> str:
    """A script that leaves only ``element_id`` in <main> (the header stays), an entry's
    section opened first: a screenshot of one part of the page at the top of the window."""
    hide = (
        "document.querySelectorAll('main > *, #entries > *').forEach(function(x){"
        f"if(x.id!=={json.dumps(element_id)}&&!(x.id==='entries'&&x.querySelector('#'+{json.dumps(element_id)})))"
        "x.style.display='none';});window.scrollTo(0,0);"
    )
    if not element_id.startswith("e-"):
        return hide
    return opening(element_id, hide)


def opening(element_id: str, script: str) -> str:
    """``script``, run once the entry whose section is ``element_id`` is opened (its row
    clicked: its section loaded from its section file)."""
    return (
        f"(function(){{var a=document.querySelector('#summary a[href=\"#'+{json.dumps(element_id)}+'\"]');"
        f"a.click();(function poll(){{if(document.getElementById({json.dumps(element_id)})){{{script}}}"
        "else setTimeout(poll,20);})();})();"
    )


def open_all(script: str) -> str:
    """``script``, run once every entry is opened (harnessOpen: their sections loaded)."""
    return f"window.harnessOpen(null,function(){{{script}}});"


def ask(error: str, torch: str, lightning: str, button: str = "ask-go") -> str:
    return (
        f"document.getElementById('ask-error').value={json.dumps(error)};"
        f"document.getElementById('lookup-torch').value={json.dumps(torch)};"
        f"document.getElementById('lookup-lightning').value={json.dumps(lightning)};"
        f"document.getElementById({json.dumps(button)}).click();"
    ).replace("</", "<\\/")


def start_tags(page: str) -> list[str]:
    class Tags(HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.tags: list[str] = []

        def handle_starttag(self, tag: str, attrs: Any) -> None:
            self.tags.append(tag)

    parser = Tags()
    parser.feed(page)
    return parser.tags


# -- a page of hostile records ---------------------------------------------------------------


def hostile_entry(tmp_path: Path):
    e = entry(tmp_path)
    variants = tuple(
        dataclasses.replace(v, description=HOSTILE, claim_ref=v.claim_ref and HOSTILE)
        for v in e.variants
    )
    return dataclasses.replace(e, variants=variants)


@pytest.fixture(scope="module")
def page(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("browser")
    render_all(records(), [hostile_entry(tmp)], tmp / "results")
    return tmp / "results" / "index.html"


def test_dom_after_script_ran(page, tmp_path):
    # a <script> in the page clicks the first cell, so the dumped DOM shows a detail panel
    assert '<aside id="detail" aria-live="polite" hidden>' in page.read_text(encoding="utf-8")
    clicking = with_script(
        page, tmp_path / "click", open_all('document.querySelector("td.c").click()')
    )
    dom = chromium(tmp_path, "--virtual-time-budget=5000", "--dump-dom", clicking.as_uri()).stdout
    assert 'data-ready="1"' in dom  # the page's own script ran to its end
    assert "<title>Measured compatibility</title>" in dom  # hostile text did not set document.title
    assert "pwned" not in dom.split("</head>")[0]
    assert dom.count('class="heatmap"') == 2  # cpu/fp16 and cuda/bf16
    assert 'class="c s0' in dom and 'class="verdicts"' in dom
    detail = dom.split('<aside id="detail"', 1)[1]
    assert "hidden" not in detail.split(">", 1)[0]  # shown: no longer hidden
    assert "<dl>" in detail and "Exception" in detail and "Machine" in detail
    # the message shows as text in the detail panel, its markup escaped
    assert "&lt;script&gt;document.title='pwned'&lt;/script&gt;" in detail
    assert "<img" not in dom


def test_screenshot_artifact(page, tmp_path):
    ARTIFACTS.mkdir(exist_ok=True)
    screenshot(tmp_path, page, ARTIFACTS / "report.png")


def test_look_up_my_versions_answers_from_the_answers_file(page, tmp_path):
    # torch 2.5.1 with lightning 2.1.4 (what the records say was installed); the patch optional
    for torch in ("2.5.1", "2.5"):
        looking = with_script(page, tmp_path / torch, ask("", torch, "2.1", "lookup-go"))
        dom = chromium(
            tmp_path, "--virtual-time-budget=5000", "--dump-dom", looking.as_uri()
        ).stdout
        out = dom.split('id="lookup-out"', 1)[1].split("</section>", 1)[0]
        assert f"1 entry was measured at torch {torch} + lightning 2.1." in out
        assert "measured at torch 2.5.1 + lightning 2.1.4" in out
        assert "pytorch/hostile" in out and "legend-words" in out  # and a legend
        # the baseline's cell as the heatmap shows it: reproduced (✖) in cpu-fp16
        base = out.split("<b>base</b>", 1)[1].split("</tr>", 1)[0]
        assert 'class="c s0" title="reproduced ×2">✖' in base
        assert "not run" in base  # cuda-bf16 was not run for this pair: said, never inferred
        # the variant's description, as text
        assert "&lt;script&gt;document.title='pwned'&lt;/script&gt;" in base
        assert "<img" not in dom and "pwned" not in dom.split("</head>")[0]
    options = page.read_text(encoding="utf-8").split('id="torch-releases"', 1)[1]
    assert options.index('"1.12.1"') < options.index('"2.5.1"')


def test_the_box_keeps_hostile_text_as_text(page, tmp_path):
    """An error pasted with markup in it, and hostile entry and variant texts in the answers
    file: everything shows as text, nothing runs."""
    result = with_script(page, tmp_path / "ask", ask(HOSTILE, "2.5.1", "", "ask-go"))
    dom = chromium(tmp_path, "--virtual-time-budget=5000", "--dump-dom", result.as_uri()).stdout
    out = dom.split('id="lookup-out"', 1)[1].split("</section>", 1)[0]
    assert "matched by the documented signature: RuntimeError: &lt;script&gt;" in out
    assert "your error: &lt;script&gt;document.title='pwned'&lt;/script&gt; | `tick`" in out
    assert "Hostile &lt;title&gt; | test" in out  # the entry's title
    assert "<img" not in out and "<script" not in out
    assert "img" not in start_tags(dom)  # the injected script's own text aside, no element
    assert "<title>Measured compatibility</title>" in dom and 'data-ready="1"' in dom
    # versions typed with markup in them: said to be no version, as text
    typed = "<img src=x onerror=alert(1)>"
    for button in ("ask-go", "lookup-go"):
        result = with_script(page, tmp_path / button, ask(HOSTILE, typed, typed, button))
        dom = chromium(tmp_path, "--virtual-time-budget=5000", "--dump-dom", result.as_uri()).stdout
        out = dom.split('id="lookup-out"', 1)[1].split("</section>", 1)[0]
        assert 'torch "&lt;img src=x onerror=alert(1)&gt;" is not a version' in out
        assert "<img" not in out and "img" not in start_tags(dom)


def test_the_entry_filter_hides_the_summary_rows_too(page, tmp_path):
    script = open_all(
        "var f=document.getElementById('entry-filter');f.value='no such entry';"
        "f.dispatchEvent(new Event('input'));"
        "done([document.querySelector('#summary tbody tr').className,"
        "document.querySelector('section.entry').className]);"
    )
    assert run_script(tmp_path, page, script) == ["hidden", "entry hidden"]


def test_a_variant_shows_only_in_the_precisions_it_ran(page, tmp_path):
    # "wa" alone ran on cuda/bf16 (skipped): the cuda/bf16 table has its row only
    script = open_all(
        "done(Array.prototype.map.call(document.querySelectorAll('table.heatmap'),"
        "function(t){return [t.getAttribute('data-slice'),"
        "Array.prototype.map.call(t.tBodies[0].rows,function(r){return r.cells[0].textContent;})];}));"
    )
    assert run_script(tmp_path, page, script) == [
        ["cpu-fp16", ["base", "wa", "ctl"]],
        ["cuda-bf16", ["wa"]],
    ]


# what the page loaded (script elements' src) and holds
LOADED = (
    "function loaded(){return Array.prototype.map.call(document.querySelectorAll('script[src]'),"
    "function(x){return x.getAttribute('src');});}"
    "function sections(){return Array.prototype.map.call(document.querySelectorAll('section.entry'),"
    "function(x){return [x.id, x.querySelectorAll('table.heatmap').length];});}"
    "function when(f, g){(function poll(){if(f())g();else setTimeout(poll,20);})();}"
)


def test_an_entry_opens_from_its_row_and_its_section_comes_from_its_file(page, tmp_path):
    """Issue 37: the page holds no section; clicking an entry's row loads its section file
    and puts its section on the page, its heatmaps in it, the link in the address."""
    script = LOADED + (
        "var before=[loaded(),sections()];"
        "document.querySelector('#summary tbody tr td:nth-child(2)').click();"
        "when(function(){return sections().length;},function(){"
        "done([before,loaded(),sections(),location.hash]);});"
    )
    before, after, opened, where = run_script(tmp_path, page, script)
    assert before == [[], []]  # nothing loaded, no section, before the reader does anything
    assert after == ["sections/0000.js"]
    assert opened == [["e-pytorch__hostile", 2]]
    assert where == "#e-pytorch__hostile"


def test_an_entry_past_the_first_files_finds_its_section_and_data_files(tmp_path, monkeypatch):
    """An entry's row and section name no file (an entry added before it leaves both as they
    were): the page's script finds its section file and data file from its row's place.
    Here each file holds one entry, so the third entry's are sections/0002.js and
    cells/0002.js: opened from its row, its section comes from the one and a cell's details
    from the other."""
    from harness.report.render import answers as answers_module
    from harness.report.render import html as html_module

    monkeypatch.setattr(html_module, "SECTION_FILE_ENTRIES", 1)
    monkeypatch.setattr(html_module, "CELL_FILE_ENTRIES", 1)
    monkeypatch.setattr(answers_module, "ANSWERS_PART_ENTRIES", 1)
    others = [dataclasses.replace(r, entry=f"pytorch/a{k}") for k in range(2) for r in records()]
    render_all(records() + others, [hostile_entry(tmp_path)], tmp_path / "results")
    results = tmp_path / "results"
    assert (
        (results / "sections" / "0002.js")
        .read_text()
        .startswith('harnessSection("pytorch__hostile"')
    )
    assert (results / "cells" / "0002.js").read_text().startswith('harnessCells("pytorch__hostile"')
    script = LOADED + opening(
        "e-pytorch__hostile",
        "document.querySelector('#e-pytorch__hostile td.c').click();"
        "when(function(){return document.getElementById('detail').textContent.indexOf('Machine')>=0;},"
        "function(){done([loaded(),sections()]);});",
    )
    loaded, opened = run_script(tmp_path, results / "index.html", script)
    # (and nightly/states.js, which a cell's details look up)
    assert [src for src in loaded if src.startswith(("sections/", "cells/"))] == [
        "sections/0002.js",
        "cells/0002.js",
    ]
    assert opened == [["e-pytorch__hostile", 2]]
    # the box: each entry's variants from its own part (answers/NNNN.js, NNNN its place)
    script = (
        LOADED
        + ask("", "2.5.1", "2.1", "lookup-go")
        + ("answered(function(o){done([loaded(), o.innerHTML.split('<b>base</b>').length - 1]);});")
    )
    loaded, bases = run_script(tmp_path, results / "index.html", script)
    assert sorted(src for src in loaded if src.startswith("answers/")) == [
        f"answers/{k:04d}.js" for k in range(3)
    ]
    assert bases == 3  # each entry's baseline row: every entry's variants found


def test_a_link_to_an_entry_opens_it(page, tmp_path):
    script = LOADED + (
        "when(function(){return sections().length;},function(){"
        "var s=document.getElementById('e-pytorch__hostile').getBoundingClientRect();"
        "done([loaded(),sections(),s.top<window.innerHeight]);});"
    )
    result = run_script(tmp_path, page, script, fragment="#e-pytorch__hostile")
    assert result == [["sections/0000.js"], [["e-pytorch__hostile", 2]], True]


# -- the committed page ------------------------------------------------------------------------

# the page as committed (git), not as a local run re-rendered it
COMMITTED = committed_tree() / "results" / "index.html"
committed_page = pytest.mark.skipif(
    not COMMITTED.exists(), reason="results/index.html is not rendered (python -m harness report)"
)


@committed_page
def test_the_seed_entries_fit_1280_px(tmp_path):
    script = open_all(
        "var r={page:document.documentElement.scrollWidth,window:window.innerWidth};"
        "document.querySelectorAll('section.entry').forEach(function(s){var w=0;"
        "s.querySelectorAll('table.heatmap').forEach(function(t){"
        "w=Math.max(w,Math.ceil(t.getBoundingClientRect().right));});"
        "r[s.getAttribute('data-id')]=w;});done(r);"
    )
    widths = run_script(tmp_path, COMMITTED, script)
    assert widths["window"] == WIDTH
    assert widths["page"] <= WIDTH, widths  # no sideways scrolling
    for seed in SEEDS:
        assert 0 < widths[seed] <= WIDTH, (seed, widths[seed])
    (ARTIFACTS / "widths.json").parent.mkdir(exist_ok=True)
    (ARTIFACTS / "widths.json").write_text(json.dumps(widths, indent=1), encoding="utf-8")


@committed_page
def test_the_box_says_first_that_a_pasted_error_is_not_the_entrys(tmp_path):
    """Issue 35, as explain says it: torch 2.6's weights-only refusal, which dead end 2 of
    checkpoint-loading-error raises, is not that entry's error; its advice is titled as the
    entry's, not the pasted error's."""
    paste = "_pickle.UnpicklingError: Weights only load failed. In PyTorch 2.6, we changed it"
    script = ask(paste, "2.6.0", "2.6") + "answered(function(o){done(o.innerText);});"
    text = run_script(tmp_path, COMMITTED, script)
    # the headline first: what the paste is, as explain says it
    assert text.lstrip().startswith("This is not the error the entry"), text[:2000]
    assert "deadend2-pickle-model-literal runs into" in text.split("your error:", 1)[0]
    assert "Workarounds for the entry's error (RuntimeError: Error(s) in loading state_dict" in text


@committed_page
def test_the_box_answers_the_newcomers_question(tmp_path):
    script = ask(NEWCOMER, "2.5.1", "2.5") + ("answered(function(o){done(o.innerText);});")
    text = run_script(tmp_path, COMMITTED, script)
    assert f"matched by the documented signature: {NEWCOMER}" in text
    assert CLIPPING in text
    assert "for your versions: measured at torch 2.5.1 + lightning 2.5.6" in text
    rows = {line.split("\t")[1].split(" (")[0]: line for line in text.split("\n") if "\t" in line}
    # every run ok, and none: however many trials the committed machines measured there
    assert re.search(
        r"works: ok in (?:every run here \(\d+ runs|(\d+)/\1 scenarios here)",
        rows["solution2-plain-optimizer"],
    )
    assert re.search(
        r"does not work: (?:not ok in every run here|ok in 0/[1-9]\d* scenarios here)",
        rows["solution1-trainer-bf16-mixed"],
    )
    assert "the documented error reproduces" in rows["baseline-fabric-plugin"]
    assert f"--entry {CLIPPING}" in text


@committed_page
def test_a_link_to_an_entry_shows_its_section_below_the_header(tmp_path):
    """A deep link (#e-<slug>) into the committed page, the domain sections above it: the
    entry is opened and its heading shown just below the header that stays at the top."""
    script = LOADED + (
        "when(function(){return sections().length;},function(){setTimeout(function(){"
        f"var s=document.getElementById('e-{CLIPPING.replace('/', '__')}').getBoundingClientRect();"
        "var h=document.querySelector('header').getBoundingClientRect();"
        "done([sections(),Math.round(s.top-h.bottom),window.scrollY>0]);},50);});"
    )
    slug = CLIPPING.replace("/", "__")
    opened, gap, scrolled = run_script(tmp_path, COMMITTED, script, fragment=f"#e-{slug}")
    assert opened == [[f"e-{slug}", 6]] and scrolled
    assert 0 <= gap <= 8, gap


@committed_page
def test_the_box_loads_the_variants_of_the_entries_it_answers_with(tmp_path):
    """answers.js holds what a pasted error is matched against; the variants are in parts
    (answers/NNNN.js), loaded for the entries the box answers with: one part for the
    newcomer's error, every part to look up every entry."""
    parts = sorted(p.name for p in (COMMITTED.parent / "answers").glob("*.js"))
    assert len(parts) > 1
    script = (
        LOADED
        + ask(NEWCOMER, "2.5.1", "2.5")
        + ("answered(function(o){done([loaded(), o.innerText.indexOf('matched by') >= 0]);});")
    )
    files, answered = run_script(tmp_path, COMMITTED, script)
    assert answered and files[0] == "answers.js" and len(files) == 2, files
    assert files[1].startswith("answers/") and not any(f.startswith("sections/") for f in files)
    script = (
        LOADED + ask("", "2.5.1", "2.5", "lookup-go") + "answered(function(o){done(loaded());});"
    )
    files = run_script(tmp_path, COMMITTED, script)
    assert sorted(files) == ["answers.js"] + [f"answers/{name}" for name in parts]


def _cases() -> list[tuple[str, str, str]]:
    """Five real tracebacks from the committed records (two seeds, three domain entries) at
    their versions; the newcomer's question; versions never measured; no versions; a series;
    an unknown error."""
    cases = []
    for e, variant, outcome in (
        (CLIPPING, "baseline-fabric-plugin", "reproduced"),
        (GRAD_SCALE, "baseline-no-grad-params-only", "other_error"),
        (INPLACE, "baseline-add-inplace", "reproduced"),
        (BROADCAST, "baseline-rowwise-scale", "other_error"),
        (CHECKPOINT, "baseline-module-prefix", "reproduced"),
    ):
        tb, versions = traceback_of(e, variant, outcome)
        if e == BROADCAST:  # another user's sizes
            tb = re.sub(r"tensor a \(\d+\)", "tensor a (512)", tb)
        cases.append((tb, versions.torch, versions.lightning))
    return cases + [
        (NEWCOMER, "2.5.1", "2.5"),
        (NEWCOMER, "99.0.0", "2.6.6"),
        (NEWCOMER, "2.5.0", "2.5.6"),
        (NEWCOMER, "", ""),
        (cases[1][0], "2.4", "1.9"),
        ("RuntimeError: Expected all tensors to be on the same devise", "", ""),
    ]


def _compare(case: Sequence[str], x: Any, page: dict[str, Any]) -> None:
    assert page["guessed"] == x.guessed, case
    assert [(a["entry"], a["how"]) for a in page["answers"]] == [
        (a.match.entry, a.match.how) for a in x.answers
    ], case
    for a, p in zip(x.answers, page["answers"], strict=True):
        if x.guessed:
            assert p["score"] == pytest.approx(a.match.score, abs=1e-9), case
            continue
        assert p["where"]["exact"] == a.where.exact, case
        assert sorted(p["where"]["envs"]) == sorted(a.where.envs), case
        assert p["where"]["said"] == a.where.said, case
        answered = {v["name"]: v for v in p["variants"]}
        for v in a.baselines + a.variants:
            q = answered.pop(v.name)
            assert (q["advice"], q["k"], q["n"], q["words"]) == (
                v.advice,
                v.here.k,
                v.here.n,
                v.words,
            ), (case[1:], v.name)
            assert q["cells"] == [c.text() for c in v.cells], (case[1:], v.name)
        assert not answered, case


@committed_page
def test_the_box_answers_as_explain_does(tmp_path, committed: Committed):  # noqa: F811
    """The page's answer (static/answer.js over results/answers.js) for each case is
    explain's: the same entries matched the same way, the same environments, and per
    variant the same advice, counts, words and cells."""
    cases = _cases()
    script = (
        f"var cases={json.dumps(cases)},out=[];".replace("</", "<\\/")
        + "(function next(i){if(i===cases.length){done(out);return;}"
        "harnessExplain(cases[i][0],cases[i][1],cases[i][2],function(r){out.push(r);next(i+1);});})(0);"
    )
    answers = run_script(tmp_path, COMMITTED, script)
    for case, page_answer in zip(cases, answers, strict=True):
        x = explain(
            case[0],
            Versions(case[1], case[2]),
            committed.entries,
            committed.table,
            aggs=committed.aggs,
        )
        _compare(case, x, page_answer)


@committed_page
def test_screenshots_of_the_committed_page(tmp_path):
    """At 1280 px: the top of the page, the box answering the newcomer, the lookup, each
    seed's section, a domain entry's, and a cell's details (tests/artifacts/page-*.png)."""
    ARTIFACTS.mkdir(exist_ok=True)
    heatmap = "#e-lightning__gradient-clipping-optimizer-handles-unscaling table.heatmap"
    shots = {
        "page-top": ("", 1000),
        "page-ask": (only("ask") + ask(NEWCOMER, "2.5.1", "2.5"), 1400),
        "page-lookup": (only("ask") + ask("", "2.5.1", "2.5", "lookup-go"), 1400),
        "page-seed-lightning": (
            only("e-lightning__gradient-clipping-optimizer-handles-unscaling"),
            1100,
        ),
        "page-seed-torch": (only("e-pytorch__grad-scale-unscale-error"), 1100),
        "page-domain-entry": (only("e-deadends__pytorch__amp-autocast-error__pt2-linux"), 1000),
        "page-detail": (
            opening(
                "e-lightning__gradient-clipping-optimizer-handles-unscaling",
                only("e-lightning__gradient-clipping-optimizer-handles-unscaling")
                + f"document.querySelectorAll({json.dumps(heatmap)})[1].tBodies[0].rows[0].children[50].click();",
            ),
            1000,
        ),
    }
    for name, (script, height) in shots.items():
        screenshot(tmp_path, COMMITTED, ARTIFACTS / f"{name}.png", script, height)


def test_the_box_never_runs_a_pattern_that_may_backtrack_catastrophically(tmp_path):
    """Issue 36: the paste box ran every signature as a RegExp, which a browser cannot
    interrupt: `(x+x+)+y` against a pasted run of x froze the tab. The page gets only
    patterns the loader's check passes ("" for others) and skips an empty one, so the box
    answers at once, and the entry is not said to match by that signature."""
    from harness.spec.entries import Signature

    risky = dataclasses.replace(
        entry(tmp_path), signature=Signature(type="RuntimeError", message="(x+x+)+y")
    )
    render_all(records(), [risky], tmp_path / "results")
    page = tmp_path / "results" / "index.html"
    paste = "RuntimeError: " + "x" * 64
    script = (
        f"window.harnessExplain({json.dumps(paste)}, '2.5.1', '', function(x){{"
        "done(x.answers.map(function(a){ return [a.entry, a.how]; }));});"
    )
    answers = run_script(tmp_path, page, script)
    assert ["pytorch/hostile", "documented"] not in answers, answers
