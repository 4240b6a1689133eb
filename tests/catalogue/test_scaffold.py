"""`harness new` and `harness check`: the three document formats, malformed documents, the
seed documents scaffolded back into the claims their hand-written entries hold, and 4-part
deadends ids through loader, plan, report file names and write-back."""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
from pathlib import Path

import pytest

from harness.__main__ import main
from harness.catalogue.scaffold import DocumentError, parse_document, write_scaffold
from harness.spec.entries import load_entries, load_entry
from tests.paths import REPO, RESOURCES

DOCS = RESOURCES / "documents"
RECORD = DOCS / "deadends-record.json"
GRAD = REPO / "repros" / "pytorch" / "grad-scale-unscale-error"
CLIP = REPO / "repros" / "lightning" / "gradient-clipping-optimizer-handles-unscaling"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "repros").mkdir()
    shutil.copy(REPO / "repros" / "reprokit.py", tmp_path / "repros")
    shutil.copy(REPO / "matrix.yaml", tmp_path)
    return tmp_path


def _claims(entry) -> set[tuple[str, float | None]]:
    return {(v.claim_ref, v.claimed_rate) for v in entry.variants if v.claim_ref}


@pytest.mark.parametrize("hand", [GRAD, CLIP], ids=["markdown", "scraped"])
def test_a_seed_document_scaffolds_the_claims_of_its_hand_written_entry(
    project: Path, hand: Path
) -> None:
    written = load_entry(hand, REPO / "repros")
    scaffold = parse_document((hand / "source.md").read_text(), hand / "source.md")
    folder, _ = write_scaffold(scaffold, project / "repros", written.id)
    new = load_entry(folder, project / "repros")
    assert new.signature == written.signature
    assert new.claims.verification == written.claims.verification
    assert new.claims.fix_rate == written.claims.fix_rate
    assert new.claims.version_table == written.claims.version_table
    assert _claims(new) == _claims(written)
    assert (folder / "source.md").read_text() == (hand / "source.md").read_text()  # verbatim
    assert not any(v.written for v in new.variants)


def test_the_json_form_keeps_facts_and_copies_no_prose(project: Path) -> None:
    assert main(["--repo", str(project), "new", str(RECORD)]) == 0
    folder = project / "repros" / "deadends" / "pytorch" / "fixture-widget-error" / "pt2-linux"
    entry = load_entries(project / "repros")[0]
    assert entry.id == "deadends/pytorch/fixture-widget-error/pt2-linux" and entry.dir == folder
    assert entry.signature.type == "RuntimeError"
    # the signature is made from the message; the record's own regex is kept as a fact
    assert entry.signature.message == "widget frobnication failed for tensor"
    assert entry.origin["regex"] == "(widget.*frobnication|frobnicat.*failed)"
    assert entry.claims.fix_rate == 0.8 and entry.claims.verification == "auto_generated"
    assert [(r.spec, r.status) for r in entry.claims.version_table] == [("torch>=2.1", "active")]
    assert _claims(entry) == {
        ("workaround 1", 0.9),
        ("workaround 2", 0.5),
        ("dead end 1", 0.6),
        ("dead end 2", 0.75),
    }
    assert entry.origin["url"] == "https://deadends.dev/pytorch/fixture-widget-error/pt2-linux"
    assert entry.origin["review_status"] == "auto_generated" and entry.origin["confidence"] == 0.7
    assert entry.origin["related"] == ["pytorch/other-error/pt2-linux"]
    # the prose stays out of our files; a workaround's condition is a fact its claim carries
    # (judged only within it), and each claim's kind is proposed from the record's words.
    # The record itself is kept beside them byte for byte (what `corrections` edits)
    assert (folder / "kb-record.json").read_bytes() == RECORD.read_bytes()
    assert entry.origin["record"] == "kb-record.json"
    for path in folder.iterdir():
        if path.name == "kb-record.json":
            continue
        text = path.read_text().replace("FIXTURE-PROSE-CONDITION", "")
        assert "FIXTURE-PROSE" not in text, path
    meanings = {v.claim_ref: (v.meaning.kind, v.meaning.condition) for v in entry.variants}
    assert meanings["workaround 2"] == ("fix", "FIXTURE-PROSE-CONDITION")
    assert meanings["dead end 1"] == ("slower", None)  # "... slower"
    assert meanings["dead end 2"] == ("raises", None)  # "... same error"
    assert entry.origin["url"] in (folder / "document.md").read_text()
    assert all(v.description.startswith("TODO") for v in entry.variants)


def test_new_refuses_to_overwrite(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--repo", str(project), "new", str(RECORD)]) == 0
    assert main(["--repo", str(project), "new", str(RECORD)]) == 2
    assert "never overwrites" in capsys.readouterr().out


def test_a_scaffold_checks_clean_with_its_to_dos_and_plans_no_job(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from harness.execute.plan import make_plan
    from harness.spec.matrix import load_matrix

    main(["--repo", str(project), "new", str(RECORD)])
    capsys.readouterr()
    assert main(["--repo", str(project), "check", "deadends/*"]) == 0
    out = capsys.readouterr().out
    assert "ok     deadends/pytorch/fixture-widget-error/pt2-linux: 0/6 variants written" in out
    assert "to do:" in out and "entry.yaml:" in out
    plan = make_plan(
        load_matrix(project / "matrix.yaml").expand("smoke"), load_entries(project / "repros")
    )
    assert not plan.jobs and plan.not_applicable
    assert main(["--repo", str(project), "check", "nothing/*"]) == 2


def test_check_names_a_broken_entry_and_goes_on(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    main(["--repo", str(project), "new", str(RECORD)])
    shutil.copytree(GRAD, project / "repros" / "pytorch" / "grad-scale-unscale-error")
    repro = project / "repros" / "pytorch" / "grad-scale-unscale-error" / "repro.py"
    repro.write_text(
        repro.read_text().replace('"control-all-params-used":', '"control-all-params-usd":')
    )
    capsys.readouterr()
    assert main(["--repo", str(project), "check"]) == 2
    out = capsys.readouterr().out
    assert "FAILED pytorch/grad-scale-unscale-error" in out
    lines = (repro.parent / "entry.yaml").read_text().splitlines()
    line = next(n for n, t in enumerate(lines, 1) if "name: control-all-params-used" in t)
    assert (
        f"entry.yaml:{line}: variant 'control-all-params-used' is not implemented by repro.py"
    ) in out
    assert "ok     deadends/pytorch/fixture-widget-error/pt2-linux" in out


def test_a_four_part_id_reports_and_writes_back(project: Path) -> None:
    main(["--repo", str(project), "new", str(RECORD)])
    assert main(["--repo", str(project), "report"]) == 0
    stem = "deadends__pytorch__fixture-widget-error__pt2-linux"
    assert (project / "results" / "compat" / f"{stem}.md").is_file()
    document = (
        project
        / "repros"
        / "deadends"
        / "pytorch"
        / "fixture-widget-error"
        / "pt2-linux"
        / "document.md"
    )
    assert "<!-- harness:verification:begin -->\nVerification:" in document.read_text()
    assert main(["--repo", str(project), "report", "--check"]) == 0


def _record(**changes: object) -> str:
    data = json.loads(RECORD.read_text())
    for dotted, value in changes.items():
        target = data
        *parents, last = dotted.split("__")
        for p in parents:
            target = target[p]
        if value is None:
            del target[last]
        else:
            target[last] = value
    return json.dumps(data)


SEED_MD = (GRAD / "source.md").read_text()
SEED_SCRAPED = (CLIP / "source.md").read_text()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (SEED_MD.replace("## Workarounds", "## Fixes"), "no '## Workarounds' section"),
        (SEED_MD.replace("- **ID:**", "- **Id-ish:**"), "no '- **ID:** <domain>/<slug>' bullet"),
        (SEED_MD.replace("**Fix Rate:** 88%", "**Fix Rate:** most"), "is not a percentage"),
        (
            SEED_MD.replace("| torch>=1.10 | active | — | — |", "| torch>=1.10 | active |"),
            "a Version Compatibility row needs 4 cells",
        ),
        (SEED_SCRAPED.replace("\nSolutions\n", "\nFixes\n"), "no 'Solutions' section"),
        (SEED_SCRAPED.replace("\nError message\n", "\nMessage\n"), "no 'Error message' section"),
        ("{not json", "not valid JSON"),
        (_record(verdict__fix_success_rate=None), "no 'verdict.fix_success_rate' field"),
        (_record(error__regex="(unclosed"), "'error.regex' is not a valid regular expression"),
        (_record(error__regex="(a|ab)*c"), "'error.regex' may backtrack catastrophically"),
        (_record(workarounds=[{"action": "x", "success_rate": 1.5}]), "must be a fraction"),
        (_record(id="Bad Id"), "is not '<domain>/<slug>/<env>'"),
        ("Some page\nwithout a format\n", "unknown document format"),
    ],
)
def test_a_malformed_document_names_what_is_missing(text: str, message: str) -> None:
    with pytest.raises(DocumentError) as info:
        parse_document(text, "doc.txt")
    assert message in str(info.value) and str(info.value).startswith("doc.txt")


# -- scaffolds that check clean (issue 23) ------------------------------------------------------

HOOK = DOCS / "lightning-hook-removed.md"


def test_the_signature_is_the_messages_first_sentence_with_its_placeholders_free() -> None:
    # the message holds the document's placeholder and a link that differs between releases
    s = parse_document(HOOK.read_text(), HOOK)
    assert s.message == "Support for `training_epoch_end` has been removed in v2\\.0\\.0"
    assert (
        s.title
        == "NotImplementedError: Support for `training_epoch_end` has been removed in v2.0.0"
    )
    assert s.origin["message"].startswith("NotImplementedError: Support for")
    assert "{type(model).__name__}" in s.origin["message"]  # the document's words, kept
    # a placeholder inside the first sentence is a variable part: it matches what torch prints
    doc = HOOK.read_text().replace(
        HOOK.read_text().splitlines()[0],
        "# RuntimeError: Expected `{name}` on <device>, got {actual} (and more). See the docs.",
    )
    message = parse_document(doc, HOOK).message
    assert re.search(message, "Expected `weight` on cuda:0, got cpu (and more)"), message
    assert not re.search(message, "Expected `weight` on cuda:0")
    # an abbreviation is not the end of a sentence
    doc = doc.replace("(and more). See", "(e.g. `w`). See")
    assert parse_document(doc, HOOK).message.endswith("(e\\.g\\. `w`\\)")


def test_a_range_on_an_axis_the_matrix_lacks_is_a_condition_with_a_note() -> None:
    s = parse_document(
        _record(
            environment__runtime__name="cuda", environment__runtime__version_range=">=11.0,<13.0"
        ),
        "doc.json",
    )
    assert s.version_table == ()
    assert any(
        c.startswith("cuda>=11.0,<13.0: ") and "an axis the matrix does not have" in c
        for c in s.conditions
    )
    doc = HOOK.read_text().replace("| lightning<2.0 | not_affected |", "| cuda>=12 | active |")
    md = parse_document(doc, HOOK)
    assert [r[0] for r in md.version_table] == ["lightning>=2.0"]
    assert any(c.startswith("cuda>=12: ") for c in md.conditions)


def test_every_dead_end_gets_a_failure_declaration_to_do(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--repo", str(project), "new", str(HOOK)]) == 0
    folder = project / "repros" / "lightning" / "training-epoch-end-removed"
    lines = (folder / "entry.yaml").read_text().splitlines()
    dead = next(n for n, t in enumerate(lines) if t.strip() == "kind: dead_end")
    todo = next(t for t in lines[dead:] if "TODO" in t)
    assert "signature" in todo and "fails_as" in todo, todo
    capsys.readouterr()
    assert main(["--repo", str(project), "check", "lightning/*"]) == 0
    out = capsys.readouterr().out
    assert "ok     lightning/training-epoch-end-removed" in out and "fails_as" in out


def _with_signature(folder: Path, message: str) -> None:
    path = folder / "entry.yaml"
    text = path.read_text()
    old = next(t for t in text.splitlines() if t.startswith("  message: "))
    path.write_text(text.replace(old, f"  message: {json.dumps(message)}", 1))


@pytest.mark.parametrize(
    ("message", "problem"),
    [
        # the escaped placeholder `new` used to write: it matches no release's message
        (
            "Support for `training_epoch_end` has been removed in v2\\.0\\.0\\. "
            "`\\{type\\(model\\)\\.__name__\\}` implements this method",
            "matches the document's placeholder {type(model).__name__} as written",
        ),
        ("Support for `validation_epoch_end` has been removed", "does not match the document"),
        (
            "Support for `training_epoch_end` has been removed in v2.0.0. .* examples in "
            "https://github.com/Lightning-AI/lightning/pull/16520",
            "holds a link",
        ),
    ],
)
def test_check_flags_a_signature_the_documents_own_error_text_does_not_bear_out(
    project: Path, capsys: pytest.CaptureFixture[str], message: str, problem: str
) -> None:
    main(["--repo", str(project), "new", str(HOOK)])
    folder = project / "repros" / "lightning" / "training-epoch-end-removed"
    _with_signature(folder, message)
    capsys.readouterr()
    assert main(["--repo", str(project), "check", "lightning/*"]) == 2
    out = capsys.readouterr().out
    assert "FAILED lightning/training-epoch-end-removed" in out and problem in out, out


def test_a_message_that_names_no_exception_type_checks_clean(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # "CUDA error: ..." is the message itself, not a type and a message
    doc = project / "record.json"
    doc.write_text(_record(error__signature="CUDA error: context is destroyed (cudaErrorX)"))
    assert main(["--repo", str(project), "new", str(doc)]) == 0
    capsys.readouterr()
    assert main(["--repo", str(project), "check"]) == 0, capsys.readouterr().out


@pytest.mark.parametrize("nested", ["[", '{"a": '], ids=["lists", "objects"])
def test_json_nested_deeper_than_yaml_may_be_is_named_not_a_recursion_error(nested: str) -> None:
    """`new` on JSON nested 100,000 deep: a RecursionError traceback (issue 25, item 7)."""
    closing = "]" if nested == "[" else "}"
    text = '{"id": "x/y/z",\n"deep": ' + nested * 100_000 + "1" + closing * 100_000 + "}"
    with pytest.raises(DocumentError, match=r"doc.json:2: not valid JSON: nested more than 64"):
        parse_document(text, "doc.json", "deadends-json")
    # brackets inside strings are text, not nesting
    quoted = json.dumps({"id": "x/y/z", "text": "[" * 1000})
    with pytest.raises(DocumentError) as caught:
        parse_document(quoted, "doc.json", "deadends-json")
    assert "nested" not in str(caught.value)


@pytest.mark.parametrize(
    ("kind", "words", "proposed"),
    [
        ("dead_end", "Loses mixed precision benefits", "precision"),
        ("dead_end", "Brittle and error-prone; breaks when the model changes.", "brittle"),
        ("dead_end", "Pickle files have arbitrary code execution risk.", "security"),
        ("dead_end", "Slow collation", "slower"),
        ("dead_end", "Loses 2x speedup", "slower"),
        ("dead_end", "Doubles memory usage, slows training", "more-memory"),
        ("dead_end", "Silently missing weights", "wrong-result"),
        ("dead_end", "Crash", "raises"),
        ("dead_end", "Doesn't affect already-compiled PyTorch binary", "raises"),
        ("workaround", "Compare keys to diagnose the mismatch", "diagnostic"),
        ("workaround", "Verify installation with torch.cuda.is_available()", "diagnostic"),
        ("workaround", "Return tuple of tensors from __getitem__", "fix"),
    ],
)
def test_new_proposes_a_claims_kind_from_its_words(kind: str, words: str, proposed: str) -> None:
    from harness.catalogue.scaffold import propose_kind

    assert propose_kind(kind, words) == proposed


SEED_SOURCE = (
    Path(__file__).resolve().parents[2] / "repros/pytorch/grad-scale-unscale-error/source.md"
)


@pytest.mark.parametrize(
    ("old", "new", "line", "words"),
    [
        ("- **Fix Rate:** 88%", "- **Fix Rate:** 150%", 7, "Fix Rate 150% is not a rate"),
        ("(90% success)", "(150% success)", 22, "workaround 1's success rate 150%"),
        ("(85% success)", "(-5% success)", 26, "workaround 2's success rate -5%"),
        ("(60% fail)", "(999% fail)", 33, "dead end 1's failure rate 999%"),
        ("(80% fail)", "(" + "9" * 400 + "% fail)", 34, "dead end 2's failure rate 9999"),
    ],
)
def test_new_refuses_a_rate_outside_0_to_100_with_its_line_and_writes_nothing(
    project: Path, tmp_path: Path, old: str, new: str, line: int, words: str, capsys
) -> None:
    """A rate new cannot keep (150%, -5%, 400 digits) is refused with the document's line:
    before, new wrote 1.5, inf or dropped the figure, and the loader then refused every entry."""
    text = SEED_SOURCE.read_text(encoding="utf-8")
    assert old in text
    doc = tmp_path / "doc.md"
    doc.write_text(text.replace(old, new), encoding="utf-8")
    assert main(["--repo", str(project), "new", str(doc)]) == 2
    out = capsys.readouterr()
    assert f"{doc}:{line}" in out.out + out.err and words in out.out + out.err
    assert not list((project / "repros").rglob("entry.yaml"))


def test_new_never_writes_what_the_loader_refuses(
    project: Path, tmp_path: Path, monkeypatch
) -> None:
    """Whatever the parser lets through, the entry is loaded before it is written."""
    from harness.catalogue import scaffold

    s = scaffold.parse_document(SEED_SOURCE.read_text(encoding="utf-8"), SEED_SOURCE)
    broken = dataclasses.replace(s, fix_rate=1.5)  # as if a parser let it through
    with pytest.raises(scaffold.DocumentError, match="refused by the loader"):
        scaffold.write_scaffold(broken, project / "repros")
    assert not (project / "repros" / s.entry_id).exists()


def test_new_never_writes_through_a_linked_folder(project: Path, tmp_path: Path, capsys) -> None:
    """Issue 36, item 8: a linked folder in repros/ took new's files outside the project."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (project / "repros" / "deadends").symlink_to(outside, target_is_directory=True)
    assert main(["--repo", str(project), "new", str(RECORD)]) == 2
    assert "never writes through a link" in capsys.readouterr().out
    assert not any(outside.iterdir())


def test_new_finds_the_entry_that_already_documents_the_error(
    project: Path, tmp_path: Path, capsys
) -> None:
    """Issue 35: a document of an error the catalogue already has became a second entry."""
    assert main(["--repo", str(project), "new", str(SEED_SOURCE)]) == 0
    again = tmp_path / "again.md"
    again.write_text(
        SEED_SOURCE.read_text(encoding="utf-8").replace(
            "pytorch/grad-scale-unscale-error", "pytorch/grad-scale-none-gradient"
        ),
        encoding="utf-8",
    )
    capsys.readouterr()
    assert main(["--repo", str(project), "new", str(again)]) == 2
    out = capsys.readouterr().out
    assert "already documents this error: pytorch/grad-scale-unscale-error" in out
    assert not (project / "repros" / "pytorch" / "grad-scale-none-gradient").exists()
    assert main(["--repo", str(project), "new", str(again), "--anyway"]) == 0


def _git(cwd: Path, *args: str) -> str:
    import subprocess

    return subprocess.run(
        ["git", "-c", "user.email=t@t", "-c", "user.name=t", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


def test_a_json_record_from_a_checkout_names_its_path_and_commit(
    project: Path, tmp_path: Path
) -> None:
    kb = tmp_path / "kb"
    record = kb / "data" / "canons" / "pytorch" / "fixture" / "pt2-linux.json"
    record.parent.mkdir(parents=True)
    record.write_bytes(RECORD.read_bytes())
    _git(kb, "init", "-q")
    _git(kb, "add", ".")
    _git(kb, "commit", "-qm", "x")
    commit = _git(kb, "rev-parse", "HEAD")
    assert main(["--repo", str(project), "new", str(record)]) == 0
    entry = load_entries(project / "repros")[0]
    assert entry.origin["path"] == "data/canons/pytorch/fixture/pt2-linux.json"
    assert entry.origin["commit"] == commit
    assert (entry.dir / "kb-record.json").read_bytes() == record.read_bytes()


def test_a_changed_record_names_no_commit(project: Path, tmp_path: Path) -> None:
    kb = tmp_path / "kb"
    record = kb / "e.json"
    kb.mkdir()
    record.write_bytes(RECORD.read_bytes())
    _git(kb, "init", "-q")
    _git(kb, "add", ".")
    _git(kb, "commit", "-qm", "x")
    record.write_bytes(RECORD.read_bytes().replace(b'"url"', b'"url" ', 1))
    assert main(["--repo", str(project), "new", str(record)]) == 0
    entry = load_entries(project / "repros")[0]
    # the file differs from every commit: its bytes are kept, no commit is claimed for them
    assert "commit" not in entry.origin and "path" not in entry.origin
    assert (entry.dir / "kb-record.json").read_bytes() == record.read_bytes()


@pytest.mark.parametrize(
    ("words", "requires"),
    [
        ("Pin torch<2.1 until the fix is released", ("torch<2.1",)),
        (
            'Pin Lightning below 2.0: `pip install "pytorch-lightning<2.0"`',
            ("pytorch-lightning<2.0",),
        ),
        ("Downgrade to PyTorch Lightning 1.9", ("pytorch-lightning==1.9.*",)),
        ("Downgrade torch to 2.0.1", ("torch==2.0.1",)),
        ("downgrade numpy below 2", ("numpy<2",)),
        ("Upgrade to torch 2.6 or later", ("torch>=2.6",)),
        ("upgrade lightning to 2.1.0 and numpy to 2", ("lightning>=2.1.0",)),
        ("Use the on_train_epoch_end hook instead", ()),
        ("Upgrade to the latest version", ()),
    ],
)
def test_version_advice_is_read_as_requirements(words: str, requires: tuple[str, ...]) -> None:
    from harness.catalogue.scaffold import version_advice

    assert version_advice(words) == requires


def test_new_writes_version_advice_as_the_variants_requires(project: Path) -> None:
    doc = DOCS / "lightning-hook-removed.md"
    scaffold = parse_document(doc.read_text(), doc)
    folder, _ = write_scaffold(scaffold, project / "repros", "lightning/hook-removed")
    entry = load_entry(folder, project / "repros")
    by_ref = {v.claim_ref: v for v in entry.variants if v.claim_ref}
    assert by_ref["workaround 2"].requires == ("pytorch-lightning<2.0",)
    assert by_ref["workaround 1"].requires == ()
