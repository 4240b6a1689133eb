"""A report that splices its whole files (harness/report/assembly.py): after a report that
kept its assembly and state, the next one takes the entries whose key and files did not
change from the assembly, leaves the files of entries none of which changed as they are,
splices the changed entries into the others, and writes the bytes a report that reads and
renders everything writes; a file the state does not vouch for is put together again."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from harness.report import assembly, cache, outputs
from harness.report.render import answers, html, jsonout
from tests.report.test_uptodate import (  # noqa: F401  (committed_lines: a fixture)
    OTHER,
    SEED,
    _outputs,
    committed_lines,
    report,
    two_entries,
)

# -- the pieces ------------------------------------------------------------------------


def test_a_file_of_lines_is_spliced_only_where_it_holds_a_line_an_entry():
    old = "a\u2028\n".encode() + b"b\rb\n" + b"c\n"  # split at newlines only
    assert assembly.split_lines(old, 3) == [old[: old.index(b"\n") + 1], b"b\rb\n", b"c\n"]
    assert assembly.splice_lines(old, 3, {1: b"B\n"}) == old.replace(b"b\rb\n", b"B\n")
    assert assembly.split_lines(old, 2) is None
    assert assembly.split_lines(old[:-1], 3) is None  # a last line without its newline


def _variants(seed: int) -> list[dict]:
    return [
        {"name": f"v{seed}-{k}", "not_counted": [["skipped", f"reason {(seed + k) % 3}", 1, [0]]]}
        for k in range(2)
    ]


def test_an_answers_part_read_back_gives_its_entries_variants_with_their_reasons():
    entries = [(f"pytorch/e{i}", _variants(i)) for i in range(3)]
    text = answers.answers_part(json.loads(json.dumps(entries))).encode("utf-8")
    assert assembly.part_variants(text, [e for e, _ in entries]) == [
        (e, json.loads(json.dumps(v))) for e, v in entries
    ]
    assert assembly.part_variants(text, ["pytorch/e0", "pytorch/e1"]) is None  # not its ids
    assert assembly.part_variants(text[:-1], [e for e, _ in entries]) is None
    damaged = text.replace(b'"reasons":[', b'"reasons":[],"was":[')  # numbers out of range
    assert assembly.part_variants(damaged, [e for e, _ in entries]) is None


def test_answers_heads_read_back_from_answers_js_data_are_the_heads():
    heads = [
        {
            "id": f"pytorch/e{i}",
            "seen": [["v", "RuntimeError", f"m{i % 2}", 3, [0]], ["w", "ValueError", "x", 1, [0]]],
            "envs": [["env-a", "2.1", "2.1", "3.11"], [f"env-{i}", "2.2", "", "3.12"]],
            "names": ["v", "w"],
        }
        for i in range(3)
    ]
    index = answers.answers_index(heads)
    assert answers.answers_heads(json.loads(json.dumps(index))) == heads
    index["entries"][1]["seen"][0][1] = 99  # a message that is not there
    with pytest.raises(ValueError):
        answers.answers_heads(index)


# -- a project's reports -----------------------------------------------------------------


@pytest.fixture
def project(tmp_path: Path, committed_lines: dict[str, list[str]]) -> Path:  # noqa: F811
    """Both seed entries, a file of each kind per entry (so that one entry's files can be
    left as they are), and SEED's last 20 records not yet in the store."""
    root = two_entries(tmp_path / "proj", committed_lines)
    (root / "later.jsonl").write_text("\n".join(committed_lines[SEED][-20:]) + "\n")
    return root


@pytest.fixture(autouse=True)
def one_entry_a_file(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(html, "CELL_FILE_ENTRIES", 1)
    monkeypatch.setattr(html, "SECTION_FILE_ENTRIES", 1)
    monkeypatch.setattr(answers, "ANSWERS_PART_ENTRIES", 1)
    monkeypatch.setattr(jsonout, "PART_ENTRIES", 1)


def _append(root: Path, n: int | None = None) -> None:
    lines = (root / "later.jsonl").read_text().splitlines()[:n]
    with open(root / "results" / "records" / "vm.jsonl", "a", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


def _as_full(root: Path, tmp_path: Path) -> dict[str, bytes]:
    """What a report that reads and renders everything writes from the same project."""
    again = tmp_path / "full"
    shutil.rmtree(again, ignore_errors=True)
    shutil.copytree(root, again, ignore=shutil.ignore_patterns(".cache"))
    assert report(again, cache=False)[0] == 0
    return _outputs(again)


class Spy:
    """What the report took from the render cache and the assembly."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.got: list[str] = []
        self.plans: list[outputs._Plan] = []
        real_get, real_plan = cache.RenderCache.get, outputs._plan

        def get(store, key, pages=True):
            self.got.append(key)
            return real_get(store, key, pages)

        def plan(*args):
            self.plans.append(real_plan(*args))
            return self.plans[-1]

        self.numbered = 0  # reports that numbered answers.js's entries anew
        real_index = outputs.answers_index

        def index(heads):
            self.numbered += 1
            return real_index(heads)

        monkeypatch.setattr(cache.RenderCache, "get", get)
        monkeypatch.setattr(outputs, "_plan", plan)
        monkeypatch.setattr(outputs, "answers_index", index)


def test_a_report_after_an_append_splices_the_changed_entry_into_the_whole_files(
    project, tmp_path, monkeypatch
):
    assert report(project)[0] == 0
    results = project / "results"
    other_files = ["cells/0000.js", "sections/0000.js", "answers/0000.js", "aggregates/0000.jsonl"]
    assert OTHER < SEED  # lightning/... sorts first: index 0, SEED index 1
    before = {name: (results / name).stat() for name in other_files}

    spy = Spy(monkeypatch)
    _append(project)
    assert report(project)[0] == 0
    [plan] = spy.plans
    assert spy.numbered == 0  # answers.js: SEED's text spliced in, OTHER's kept as it was
    assert set(plan.kept) == {0} and plan.need == {1}  # OTHER from the assembly
    assert set(plan.unchanged) == set(other_files)
    assert set(plan.lines) == {"cells/0001.js", "sections/0001.js", "aggregates/0001.jsonl"}
    assert len(spy.got) == 1  # only SEED looked up in the render cache (and rendered)
    for name in other_files:  # left as they were
        now = (results / name).stat()
        assert (now.st_ino, now.st_mtime_ns) == (before[name].st_ino, before[name].st_mtime_ns)
    assert _outputs(project) == _as_full(project, tmp_path)


@pytest.mark.parametrize(
    ("new", "place"),
    [
        ("lightning/aaa-new", 0),  # before both: each kept entry one place on
        ("lightning/zzz-new", 1),  # between them
        ("pytorch/zzz-new", 2),  # after both
    ],
)
def test_a_new_entry_is_put_among_the_kept_ones_from_their_old_lines(
    project, tmp_path, monkeypatch, new, place
):
    """A run that measured a new entry: the others are taken from the assembly wherever they
    stand now, their lines and variants from the files they were in (one entry a file
    here, so each file after the new entry holds another entry than before); only the new
    entry is looked up in the render cache and rendered."""
    assert report(project)[0] == 0
    results = project / "results"
    spy = Spy(monkeypatch)
    lines = [
        json.dumps({**json.loads(line), "entry": new})
        for line in (project / "later.jsonl").read_text().splitlines()
    ]
    with open(results / "records" / "vm.jsonl", "a", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    assert report(project)[0] == 0
    [plan] = spy.plans
    assert plan.need == {place} and set(plan.kept) == {0, 1, 2} - {place}
    assert new not in plan.previous.ids and len(spy.got) == 1  # the new entry alone
    # answers.js: after the first entry, the new one names only what an entry before it
    # names, so its text is spliced among the others' as they are; first, it names first
    # what later entries name, and every entry is numbered again
    assert spy.numbered == (1 if place == 0 else 0)
    # the files before the new entry stand; each one from it on is put together anew
    assert plan.unchanged == {
        name_of(k) for _, name_of in outputs._groups().values() for k in range(place)
    }
    assert _outputs(project) == _as_full(project, tmp_path)


@pytest.mark.parametrize("place", [0, 1, 2])
def test_an_entry_gone_leaves_the_others_kept_where_they_stand_now(
    project, tmp_path, monkeypatch, place
):
    """The records of an entry removed (another machine's record file deleted): the entries
    after it move a place back, taken from the assembly with their old lines; nothing is
    rendered."""
    gone = ["lightning/aaa-gone", "lightning/zzz-gone", "pytorch/zzz-gone"][place]
    lines = [
        json.dumps({**json.loads(line), "entry": gone})
        for line in (project / "later.jsonl").read_text().splitlines()
    ]
    other = project / "results" / "records" / "other-machine.jsonl"
    other.write_text("\n".join(lines) + "\n")
    assert report(project)[0] == 0
    spy = Spy(monkeypatch)
    other.unlink()
    assert report(project)[0] == 0
    plan = spy.plans[-1]
    assert plan.need == set() and set(plan.kept) == {0, 1} and gone in plan.previous.ids
    assert spy.got == []  # nothing looked up in the render cache
    assert _outputs(project) == _as_full(project, tmp_path)


@pytest.mark.parametrize(
    "damage",
    [
        "sections/0000.js",  # a file of an entry that did not change, edited
        "answers/0000.js",
        "cells/0001.js",  # a file of the entry that changed, its lines not what they were
        "aggregates/0000.jsonl",
        "aggregates/0001.jsonl",
        "compat.json",
        "answers.js",  # what the assembly reads each entry's head from: no assembly
        "compat/lightning__gradient-clipping-optimizer-handles-unscaling.md",  # a page
    ],
)
def test_a_file_the_state_does_not_vouch_for_is_put_together_again(
    project, tmp_path, monkeypatch, damage
):
    assert report(project)[0] == 0
    path = project / "results" / damage
    path.write_bytes(path.read_bytes() + b"\n\n")
    spy = Spy(monkeypatch)
    _append(project)
    assert report(project)[0] == 0
    if damage == "answers.js":
        assert spy.plans == []
        assert _outputs(project) == _as_full(project, tmp_path)
        return
    plan = spy.plans[-1]  # (a page to render again: every entry loaded, then the plan again)
    assert damage not in plan.unchanged
    if damage.endswith(".md"):  # its entry is not taken from the assembly: its page is checked
        assert 0 not in plan.kept and spy.got
    assert _outputs(project) == _as_full(project, tmp_path)


def test_an_assembly_of_another_state_or_damaged_is_not_used(project, tmp_path, monkeypatch):
    assert report(project)[0] == 0
    kept = project / "results" / assembly.ASSEMBLY_FILE
    doc = json.loads(kept.read_bytes())
    doc["token"] = "0" * 32  # another report's
    kept.write_text(json.dumps(doc))
    spy = Spy(monkeypatch)
    _append(project, 10)
    assert report(project)[0] == 0
    assert spy.plans == []  # no assembly: every entry's share, as before it
    assert _outputs(project) == _as_full(project, tmp_path)

    doc = json.loads(kept.read_bytes())
    doc["kept"][0]["pages"] = [["../../outside.md", "0" * 64]]
    kept.write_text(json.dumps(doc))
    _append(project)
    assert report(project)[0] == 0
    assert spy.plans == []
    assert _outputs(project) == _as_full(project, tmp_path)


def test_answers_js_numbered_anew_names_the_kept_entries_again_from_their_texts(
    project, tmp_path, monkeypatch
):
    """Where the changed entries would move the numbers (here: the splice refused), every
    entry is numbered again, the kept ones named again from their texts in answers.js."""
    assert report(project)[0] == 0
    spy = Spy(monkeypatch)
    monkeypatch.setattr(outputs, "answers_spliced", lambda *args: None)
    _append(project)
    assert report(project)[0] == 0
    assert spy.numbered == 1 and set(spy.plans[0].kept) == {0}
    assert _outputs(project) == _as_full(project, tmp_path)


def test_an_assembly_whose_answers_lengths_do_not_cut_answers_js_is_not_used(
    project, tmp_path, monkeypatch
):
    assert report(project)[0] == 0
    kept = project / "results" / assembly.ASSEMBLY_FILE
    doc = json.loads(kept.read_bytes())
    doc["kept"][0]["answers"][0] += 1
    doc["kept"][1]["answers"][0] -= 1
    kept.write_text(json.dumps(doc))
    spy = Spy(monkeypatch)
    _append(project)
    assert report(project)[0] == 0
    assert spy.plans == []
    assert _outputs(project) == _as_full(project, tmp_path)


def test_kept_texts_that_do_not_read_back_make_the_report_put_everything_together(
    project, tmp_path, monkeypatch
):
    """answers.js not what the assembly says of it (its texts do not read back as entries):
    the report goes on without the assembly, every entry's share from the render cache."""
    assert report(project)[0] == 0
    spy = Spy(monkeypatch)
    monkeypatch.setattr(outputs, "answers_spliced", lambda *args: None)

    def unreadable(*args):
        raise ValueError("not answers.js's entries")

    monkeypatch.setattr(outputs, "named_heads", unreadable)
    _append(project)
    assert report(project)[0] == 0
    assert len(spy.plans) == 1 and spy.numbered == 1  # the second pass: no plan, no splice
    assert _outputs(project) == _as_full(project, tmp_path)
