"""harness/spec/triage.py: the triage file of a knowledge-base domain."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.spec.triage import TriageError, find_triages, load_triage
from tests.paths import REPO

GOOD = """\
source:
  repository: someone/kb
  path: data/pytorch/
  id_prefix: kb/
entries:
  - kb_id: pytorch/b/env
    url: https://kb.example/pytorch/b/env
    message: "RuntimeError: b happened (pid 12)"
    owner: me
    scriptable: no
    entry: null
    why: needs two GPUs
  - kb_id: pytorch/a/env
    url: https://kb.example/pytorch/a/env
    message: a happened
    owner: me
    scriptable: cpu
    entry: kb/pytorch/a/env
    why: >
      a two-line
      reason
    unmeasured:
      - {ref: "dead end 1", why: "a purchase"}
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "triage.yaml"
    path.write_text(text)
    return path


def test_loads_sorted_with_reasons(tmp_path: Path) -> None:
    triage = load_triage(write(tmp_path, GOOD))
    assert [t.kb_id for t in triage.entries] == ["pytorch/a/env", "pytorch/b/env"]
    a, b = triage.entries
    assert a.why == "a two-line reason" and a.reproducible and a.entry == "kb/pytorch/a/env"
    assert a.unmeasured[0].ref == "dead end 1"
    assert not b.reproducible and b.entry is None
    assert triage.by_entry() == {"kb/pytorch/a/env": a}
    assert (
        triage.entry_id(b) == "kb/pytorch/b/env"
        and b.message == "RuntimeError: b happened (pid 12)"
    )


@pytest.mark.parametrize(
    ("old", "new", "at", "words"),
    [
        ("scriptable: no", "scriptable: maybe", "scriptable: maybe", "scriptable must be one of"),
        (
            "entry: kb/pytorch/a/env",
            "entry: null",
            "entry: null\n    why: >",
            "names its repros/ entry id",
        ),
        ("entry: null", "entry: kb/x", "entry: kb/x", "entry: null"),
        (
            "pytorch/b/env\n",
            "pytorch/a/env\n",
            "- kb_id: pytorch/a/env\n    url: https://kb.example/pytorch/a",
            "also at line",
        ),
        (
            "    owner: me\n    scriptable: cpu",
            "    owner: me\n    colour: red\n    scriptable: cpu",
            "colour: red",
            "unknown key 'colour'",
        ),
        (
            '      - {ref: "dead end 1", why: "a purchase"}',
            '      - {ref: "dead end 1"}',
            '{ref: "dead end 1"}',
            "missing required key(s) ['why']",
        ),
    ],
)
def test_errors_name_the_line(tmp_path: Path, old: str, new: str, at: str, words: str) -> None:
    assert old in GOOD
    text = GOOD.replace(old, new, 1)
    line = text[: text.index(at)].count("\n") + 1  # the line where `at` starts
    path = write(tmp_path, text)
    with pytest.raises(TriageError) as info:
        load_triage(path)
    assert info.value.line == line, str(info.value)
    assert words in info.value.message
    assert str(info.value).startswith(f"{path}:{line}: ")


def test_not_yaml_names_the_line(tmp_path: Path) -> None:
    with pytest.raises(TriageError, match=r"triage.yaml:3: not valid YAML"):
        load_triage(write(tmp_path, "source:\n  a: b\n c: [\n"))


def test_the_repository_triage_is_valid() -> None:
    triages = find_triages(REPO / "repros")
    assert triages, "no triage file under repros/"
    for triage in triages:
        assert triage.entries
        for row in triage.entries:
            assert row.why and row.url.startswith("https://")


def test_imported_entries_match_their_triage_row() -> None:
    """Each written entry of a triaged domain: its documented signature is made from the
    document's message, and its origin is the row's. The signature is its fixed parts in
    order (msgsearch.message_regex: numbers, quoted names, devices, dtypes are variable), or
    the first of them up to a word's end where the document's message runs on past what the
    library prints (a folder it left out: "... model.safetensors found in directory <path>"),
    or, where the fixed parts alone say nothing of the error, its words exactly as `new`
    writes them ('Tensor' object has no attribute 'grad': without the quoted names, "object
    has no attribute" would match any AttributeError)."""
    from harness.catalogue.msgsearch import message_regex
    from harness.catalogue.scaffold import _first_sentence, message_pattern, split_type
    from harness.spec.entries import load_entry

    checked = 0
    for triage in find_triages(REPO / "repros"):
        for row in triage.entries:
            folder = REPO / "repros" / triage.entry_id(row)
            if row.entry is None or not (folder / "entry.yaml").is_file():
                continue
            entry = load_entry(folder, REPO / "repros")
            assert entry.origin["message"] == row.message, row.kb_id
            assert entry.origin["id"] == row.kb_id
            exact = message_pattern(_first_sentence(split_type(row.message)[1]))
            fixed, sig = message_regex(row.message), entry.signature.message
            head = fixed.startswith(sig) and fixed[len(sig) : len(sig) + 1] in (" ", "")
            assert sig == exact or (head and len(sig.split()) >= 3), row.kb_id
            checked += 1
    assert checked


def test_an_entry_carries_the_claims_its_triage_row_leaves_unmeasured(tmp_path: Path) -> None:
    from harness.spec.entries import load_entry
    from tests.spec.test_entries import GOOD as ENTRY
    from tests.spec.test_entries import make

    repros = tmp_path / "repros"
    (repros / "kb" / "pytorch").mkdir(parents=True)
    (repros / "kb" / "pytorch" / "triage.yaml").write_text(GOOD)
    mine = make(repros, ENTRY.replace("demo/err", "kb/pytorch/a/env"), "kb/pytorch/a/env")
    other = make(repros, ENTRY.replace("demo/err", "kb/pytorch/c/env"), "kb/pytorch/c/env")
    [claim] = load_entry(mine, repros).unmeasured
    assert (claim.ref, claim.why) == ("dead end 1", "a purchase")
    assert load_entry(other, repros).unmeasured == ()  # no row of its own: nothing


def test_an_invalid_triage_fails_the_entry_it_speaks_for(tmp_path: Path) -> None:
    from harness.spec.entries import EntryError, load_entry
    from tests.spec.test_entries import GOOD as ENTRY
    from tests.spec.test_entries import make

    repros = tmp_path / "repros"
    (repros / "kb" / "pytorch").mkdir(parents=True)
    path = repros / "kb" / "pytorch" / "triage.yaml"
    path.write_text(GOOD.replace('{ref: "dead end 1", why: "a purchase"}', '{ref: "dead end 1"}'))
    folder = make(repros, ENTRY.replace("demo/err", "kb/pytorch/a/env"), "kb/pytorch/a/env")
    with pytest.raises(EntryError, match=r"triage.yaml:\d+: .*missing required key"):
        load_entry(folder, repros)
