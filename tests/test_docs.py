"""The documentation against the tree: every module of harness/ named in docs/architecture.md,
every relative link of README.md and docs/ pointing at a file (and heading) that exists,
the README a front door of at most 150 lines."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from harness.aggregate import FLAKY
from harness.outcomes import Outcome
from harness.report.render import GLYPH
from tests.paths import REPO

ARCHITECTURE = REPO / "docs" / "architecture.md"
README = REPO / "README.md"
README_MAX_LINES = 150
# what another tool writes between these (report's findings paragraph)
FINDINGS_MARKERS = ("<!-- findings:begin -->", "<!-- findings:end -->")

_FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.MULTILINE | re.DOTALL)
_CODE_SPAN = re.compile(r"`[^`\n]*`")
_LINK = re.compile(r"!?\[[^\]\n]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)


def _markdown_files() -> list[Path]:
    return [README, *sorted((REPO / "docs").rglob("*.md"))]


def _prose(text: str) -> str:
    """The text without fenced code blocks and code spans, where a link is not a link."""
    return _CODE_SPAN.sub("", _FENCE.sub("", text))


def _anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = _CODE_SPAN.sub(lambda m: m.group(0).strip("`"), heading)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link's text only
    return "".join(c for c in text.lower() if c.isalnum() or c in " -_").replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    text = _FENCE.sub("", path.read_text(encoding="utf-8"))
    return {_anchor(h) for h in _HEADING.findall(text)}


def _relative_links(path: Path) -> list[str]:
    links = _LINK.findall(_prose(path.read_text(encoding="utf-8")))
    return [t for t in links if not re.match(r"[a-z][a-z0-9+.-]*:", t, re.IGNORECASE)]


def test_every_module_of_harness_is_named_in_architecture() -> None:
    text = ARCHITECTURE.read_text(encoding="utf-8")
    modules = sorted(
        p.relative_to(REPO).as_posix()
        for p in (REPO / "harness").rglob("*.py")
        if "__pycache__" not in p.parts
    )
    assert modules, "no module found under harness/"
    missing = [m for m in modules if f"`{m}`" not in text]
    assert not missing, (
        f"{ARCHITECTURE.relative_to(REPO)} does not name {len(missing)} module(s) of harness/; "
        "add a line for each: " + ", ".join(missing)
    )


def test_architecture_names_no_module_that_does_not_exist() -> None:
    text = ARCHITECTURE.read_text(encoding="utf-8")
    named = set(re.findall(r"`(harness/[\w/]+\.py)`", text))
    gone = sorted(n for n in named if not (REPO / n).is_file())
    assert not gone, f"docs/architecture.md names module(s) that do not exist: {', '.join(gone)}"


def test_the_vocabulary_lists_every_outcome_with_its_glyph() -> None:
    text = ARCHITECTURE.read_text(encoding="utf-8")
    rows = [f"| {GLYPH[o.value]} | `{o.value}` |" for o in Outcome]
    rows.append(f"| {GLYPH[FLAKY]} | flaky |")
    missing = [row for row in rows if row not in text]
    assert not missing, "docs/architecture.md's glyph legend lacks: " + "; ".join(missing)


@pytest.mark.parametrize("doc", _markdown_files(), ids=lambda p: p.relative_to(REPO).as_posix())
def test_relative_links_point_at_files_and_headings_that_exist(doc: Path) -> None:
    broken = []
    for target in _relative_links(doc):
        file_part, _, anchor = target.partition("#")
        dest = (doc.parent / file_part).resolve() if file_part else doc
        if not dest.exists():
            broken.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
            broken.append(f"{target}: no heading #{anchor} in {dest.relative_to(REPO)}")
    assert not broken, f"{doc.relative_to(REPO)}: broken link(s): " + "; ".join(broken)


def test_the_readme_is_a_front_door() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, (
        f"README.md has {len(lines)} lines, at most {README_MAX_LINES}: "
        "move the detail into docs/ and link to it"
    )


def test_the_readme_marks_its_findings_once() -> None:
    text = README.read_text(encoding="utf-8")
    begin, end = FINDINGS_MARKERS
    assert text.count(begin) == 1 and text.count(end) == 1, "one findings:begin and one :end"
    assert text.index(begin) < text.index(end)


def test_the_link_checker_sees_a_broken_link_and_an_anchor(tmp_path: Path) -> None:
    # the checks above pass on a good tree; this shows that they can fail
    page = tmp_path / "page.md"
    page.write_text(
        "# A heading: with `code` (and 2)\n\n[ok](#a-heading-with-code-and-2) [gone](nowhere.md)"
        " [web](https://example.org) `[in code](nope.md)`\n```\n[fenced](nope.md)\n```\n",
        encoding="utf-8",
    )
    assert _relative_links(page) == ["#a-heading-with-code-and-2", "nowhere.md"]
    assert _anchors(page) == {"a-heading-with-code-and-2"}


PERFORMANCE = REPO / "docs" / "performance.md"
PERFORMANCE_MAX_LINES = 300
# a diary's words: a work session's number, a tracker's number as the name of a change
_DIARY = re.compile(r"\b[Ss]essions? \d{1,3}\b|\b[Ii]ssues? #?\d{1,3}\b")


def test_the_architecture_picture_is_what_its_script_draws() -> None:
    import runpy

    script = runpy.run_path(str(REPO / "scripts" / "architecture_svg.py"))
    picture = REPO / "docs" / "architecture.svg"
    assert picture.read_text(encoding="utf-8") == script["svg"](), (
        "docs/architecture.svg is stale: run python scripts/architecture_svg.py"
    )
    gone = [m for m in script["modules"]() if not (REPO / m).is_file()]
    assert not gone, f"the picture names module(s) that do not exist: {', '.join(gone)}"
    assert ARCHITECTURE.read_text(encoding="utf-8").count("](architecture.svg)") == 1


def test_performance_is_a_reference_page() -> None:
    lines = PERFORMANCE.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= PERFORMANCE_MAX_LINES, (
        f"docs/performance.md has {len(lines)} lines, at most {PERFORMANCE_MAX_LINES}: "
        "a figure, what it measures, the command and the target; the history is in git"
    )


def _diary_lines(paths: list[Path]) -> list[str]:
    found = []
    for path in paths:
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if _DIARY.search(line):
                found.append(f"{path.relative_to(REPO)}:{n}: {line.strip()[:100]}")
    return found


def test_the_docs_and_the_code_keep_no_diary() -> None:
    code = list((REPO / "harness").rglob("*.py"))
    found = _diary_lines([*_markdown_files(), *code])
    assert not found, "name the subject, not the session or the tracker:\n" + "\n".join(found)


def test_every_evidence_file_is_linked_from_a_page_outside_it() -> None:
    # (a link's text may run over two lines: the target is what is looked for)
    evidence = REPO / "docs" / "evidence"
    target = re.compile(r"\]\(\s*<?((?:\.\./)*evidence/[^)#\s>]+)")
    linked = {
        (doc.parent / found).resolve()
        for doc in _markdown_files()
        if doc.parent != evidence
        for found in target.findall(_prose(doc.read_text(encoding="utf-8")))
    }
    # a page's figures sit in a folder of its name beside it, each linked from that page
    local = re.compile(r"\]\(\s*<?([^)#\s>:]+)")
    for page in evidence.glob("*.md"):
        figures = evidence / page.stem
        for found in local.findall(page.read_text(encoding="utf-8")):
            path = (evidence / found).resolve()
            if path.parent == figures.resolve():
                linked.add(path)
    files = [p for p in sorted(evidence.rglob("*")) if p.is_file()]
    unlinked = [str(p.relative_to(evidence)) for p in files if p.resolve() not in linked]
    assert not unlinked, f"docs/evidence/ keeps only what a page links: {', '.join(unlinked)}"


def test_the_diary_check_sees_a_session_and_an_issue_number(tmp_path: Path) -> None:
    page = tmp_path / "harness" / "page.md"
    page.parent.mkdir()
    page.write_text("Session 16 measured it.\nAs issue 31 found.\nThe session's figure.\n")
    global REPO
    saved, REPO = REPO, tmp_path
    try:
        assert [line.split(":")[1] for line in _diary_lines([page])] == ["1", "2"]
    finally:
        REPO = saved
