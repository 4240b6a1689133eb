"""`python -m harness corrections`: the kept deadends.dev records' corrections as separate
proposals by kind, each record checked against its original by the rules (only conditions and
regexes grow, no rate, no CUDA record moved by CPU runs, no date without a verbatim in-scope
run), outcome lines one per record x workaround x release x device, and the knowledge base's
schema and business rules as tests/resources/deadends-record.schema.json and
harness/catalogue/kbrecord.py write them down (the knowledge base's own code checks them in
`nox -s kb`). Everything here reads the committed tree."""

from __future__ import annotations

import copy
import dataclasses
import functools
import json
import re
from pathlib import Path

import jsonschema
import pytest

from harness.__main__ import main
from harness.catalogue.corrections import (
    correct,
    duplicate_lines,
    outcome_lines,
    plain_sentence_problem,
    rule_breaks,
)
from harness.catalogue.kbevidence import record_on_cuda
from harness.catalogue.kbrecord import _safe_url, dumps_like, loads, problems
from harness.catalogue.scaffold import parse_deadends_json
from harness.spec.entries import load_entries
from tests.paths import RESOURCES, committed_tree

SCHEMA = json.loads((RESOURCES / "deadends-record.schema.json").read_text(encoding="utf-8"))
PROPOSALS = ("signatures", "conditions")


def _written() -> list[tuple[str, Path, Path]]:
    """(proposal, written file, kept original) for every record file of the committed tree."""
    tree = committed_tree()
    out = tree / "results" / "corrections"
    kept = {}
    for e in load_entries(tree / "repros"):
        if e.origin.get("record"):
            kept[str(e.origin["path"])] = e.dir / str(e.origin["record"])
    found = []
    for proposal in PROPOSALS:
        for path in sorted((out / proposal / "data" / "canons").rglob("*.json")):
            rel = path.relative_to(out / proposal).as_posix()
            found.append((proposal, path, kept[rel]))
    return found


@functools.cache
def _measured():
    from harness.store.columnar import load_latest
    from harness.store.jsonl import Store

    tree = committed_tree()
    entries = {e.id: e for e in load_entries(tree / "repros")}
    table = load_latest(Store(tree / "results" / "records"), None, update=False)
    return entries, table


def _agg(entry_id: str):
    from harness.aggregate import aggregate_table

    entries, table = _measured()
    entry = entries[entry_id]
    (agg,) = aggregate_table(table, list(entries.values()), ids=[entry_id])
    return entry, agg, (entry.dir / "kb-record.json").read_bytes()


def test_the_committed_corrections_are_what_the_committed_records_give(capsys) -> None:
    assert main(["--repo", str(committed_tree()), "corrections", "--check"]) == 0
    assert "up to date" in capsys.readouterr().out


def test_every_written_record_keeps_the_rules_and_the_knowledge_bases_schema() -> None:
    found = _written()
    assert {p for p, _, _ in found} == set(PROPOSALS)
    for proposal, written, original in found:
        data = loads(written.read_bytes())
        before = loads(original.read_bytes())
        jsonschema.validate(data, SCHEMA)
        assert problems(data) == [], written
        assert data != before, f"{written}: a record with no change is written"
        moved = data["error"].get("last_confirmed") != before["error"].get("last_confirmed")
        breaks = rule_breaks(before, data, cuda_record=False, confirmed_run=moved)
        assert breaks == [], (written, breaks)
        # one kind a proposal: a conditions file moves no regex or date, and the reverse
        changed = {
            k for k in ("regex", "last_confirmed") if data["error"].get(k) != before["error"].get(k)
        }
        if proposal == "conditions":
            assert not changed, written
        else:
            assert changed and all(
                a.get("condition") == b.get("condition")
                for key in ("workarounds", "dead_ends")
                for a, b in zip(data[key], before[key], strict=True)
            ), written


def test_no_cuda_record_is_moved_by_the_cpu_runs_of_the_committed_tree() -> None:
    entries, _ = _measured()
    by_path = {str(e.origin.get("path")): e for e in entries.values() if e.origin.get("record")}
    for _, written, original in _written():
        rel = written.as_posix().split("/data/canons/", 1)[1]
        entry = by_path["data/canons/" + rel]
        assert not record_on_cuda(loads(original.read_bytes()), entry), written


def test_a_written_record_differs_from_its_original_only_where_a_value_changed() -> None:
    for _, written, original in _written():
        raw = original.read_bytes()
        assert dumps_like(raw, loads(raw)) == raw  # nothing changed: the same bytes
        assert dumps_like(raw, loads(written.read_bytes())) == written.read_bytes()
        kept = set(written.read_text(encoding="utf-8").splitlines())
        old_lines = raw.decode().splitlines()
        assert len([line for line in old_lines if line in kept]) >= len(old_lines) - 4


def test_reading_a_written_record_back_through_new_gives_the_same_claims() -> None:
    for _, written, original in _written():
        again = parse_deadends_json(written.read_text(encoding="utf-8"), written)
        first = parse_deadends_json(original.read_text(encoding="utf-8"), original)
        assert again.entry_id == first.entry_id and again.fix_rate == first.fix_rate
        assert [(c.ref, c.rate) for c in again.claims] == [(c.ref, c.rate) for c in first.claims]
        assert again.verification == first.verification


def test_the_outcome_lines_are_one_per_record_workaround_release_and_device() -> None:
    out = committed_tree() / "results" / "corrections" / "outcomes" / "data" / "outcomes"
    (path,) = sorted(out.glob("*.jsonl"))
    lines = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]
    assert lines and duplicate_lines(lines) == []
    for row in lines:
        assert set(row) == {
            "timestamp",
            "error_id",
            "workaround_action",
            "success",
            "canon_exists",
            "environment",
            "notes",
        }
        assert row["notes"].startswith("torch-error-harness: a scripted reproduction")
        assert row["environment"]["device"] == "cpu"  # no CUDA run is committed
    # a failed literal reading is a failure of the advice as written
    padding = [
        x
        for x in lines
        if x["error_id"] == "pytorch/embedding-index-error/pt2-linux"
        and "padding_idx" in x["workaround_action"]
    ]
    assert padding and not any(x["success"] for x in padding)


def test_the_summary_names_every_triaged_record() -> None:
    import yaml

    tree = committed_tree()
    summary = (tree / "results" / "corrections" / "README.md").read_text(encoding="utf-8")
    for triage in sorted((tree / "repros" / "deadends").glob("*/triage.yaml")):
        for row in yaml.safe_load(triage.read_text(encoding="utf-8"))["entries"]:
            assert f"`{row['kb_id']}`" in summary, row["kb_id"]


# -- the rules on real aggregates, the records changed -------------------------------------


def test_a_cuda_claim_is_not_moved_by_its_cpu_twin() -> None:
    entry, agg, original = _agg("deadends/cuda/cusolver-internal-error/cuda12-a100")
    assert agg.n_counted  # its CPU twin ran
    c = correct(entry, agg, original)
    assert c.changes == [] and c.unraised is None
    assert outcome_lines(c) == []
    # the same runs, the record said to be on no GPU and of the pytorch runtime: its CPU runs
    # now count, so the device rule is what held them back
    record = loads(original)
    record["environment"]["runtime"] = {"name": "pytorch", "version_range": ">=1.0"}
    record["environment"].pop("hardware", None)
    entry = dataclasses.replace(entry, signature=dataclasses.replace(entry.signature, device=""))
    freed = correct(entry, agg, dumps_like(original, record))
    assert outcome_lines(freed)


def test_only_runs_inside_the_records_range_count() -> None:
    entry, agg, original = _agg("deadends/pytorch/embedding-index-error/pt2-linux")
    c = correct(entry, agg, original)
    assert {ch.kind for ch in c.changes} >= {"condition", "date"}
    record = loads(original)
    record["environment"]["runtime"]["version_range"] = ">=9.0"  # no run lies there
    outside = correct(entry, agg, dumps_like(original, record))
    assert outside.changes == []
    assert outcome_lines(outside) == []
    assert any("scope" in left.why for left in outside.left)
    # a range that keeps the newest line only: the lines name only its releases
    record["environment"]["runtime"]["version_range"] = ">=2.15"
    newest = correct(entry, agg, dumps_like(original, record))
    assert {x["environment"]["torch"] for x in outcome_lines(newest)} == {"2.15.0"}


def test_no_rate_is_written_and_a_condition_is_a_plain_sentence() -> None:
    entry, agg, original = _agg("deadends/pytorch/embedding-index-error/pt2-linux")
    c = correct(entry, agg, original)
    before = loads(original)
    for key, rate in (("workarounds", "success_rate"), ("dead_ends", "fail_rate")):
        assert [x[rate] for x in c.record[key]] == [x[rate] for x in before[key]]
    (condition,) = [ch for ch in c.changes if ch.kind == "condition"]
    assert "padding_idx" in condition.new and plain_sentence_problem(condition.new) is None
    assert not re.search(r"\d+/\d+", condition.new)


def test_last_confirmed_needs_a_verbatim_run_in_the_newest_line() -> None:
    entry, agg, original = _agg("deadends/pytorch/embedding-index-error/pt2-linux")
    record = loads(original)
    record["environment"]["runtime"]["version_range"] = ">=2.0,<2.1"  # an old line only
    c = correct(entry, agg, dumps_like(original, record))
    assert c.record["error"]["last_confirmed"] == record["error"]["last_confirmed"]
    assert any(x.field == "error.last_confirmed" and "newest line" in x.why for x in c.left)


# -- the rules, each shown able to fail on a constructed record ------------------------------


def _record() -> dict:
    return loads((RESOURCES / "documents" / "deadends-record.json").read_bytes())


@pytest.mark.parametrize(
    ("change", "words", "flags"),
    [
        (lambda d: d["workarounds"][0].update(success_rate=1.0), "success_rate written", {}),
        (lambda d: d["dead_ends"][0].update(fail_rate=0.0), "fail_rate written", {}),
        (lambda d: d["verdict"].update(fix_success_rate=1.0), "fix_success_rate changed", {}),
        (lambda d: d["verdict"].update(resolvable="maybe"), "resolvable changed", {}),
        (
            lambda d: d["workarounds"][0].update(condition="Works on torch 2.1."),
            "CUDA record changed",
            {"cuda_record": True},
        ),
        (
            lambda d: d["error"].update(last_confirmed="2099-01-01"),
            "last_confirmed moved without",
            {},
        ),
        (lambda d: d["metadata"].update(last_verification="2099-01-01"), "last_verification", {}),
        (
            lambda d: d["environment"]["runtime"].update(version_range=">=2.0,<2.6"),
            "never narrowed",
            {},
        ),
        (lambda d: d["error"].update(regex="zzz"), "replaced, not grown", {}),
        (lambda d: d["error"].update(regex="zzz"), "no longer matches the record's own", {}),
        (lambda d: d["error"].update(signature="AttributeError: x"), "signature changed", {}),
        (
            lambda d: d["workarounds"][0].update(
                condition="Fails on torch 2.1: see /tmp/kb-x/cache/model.bin."
            ),
            "holds a path",
            {},
        ),
        (
            lambda d: d["workarounds"][0].update(
                condition="RuntimeError: index out of range in self"
            ),
            "holds an exception text",
            {},
        ),
        (
            lambda d: d["workarounds"][0].update(condition="Works in 0/198 runs."),
            "holds a count of runs",
            {},
        ),
        (
            lambda d: d["transition_graph"]["leads_to"].append(
                {"error_id": "pytorch/x/y", "probability": 1.0}
            ),
            "transition_graph",
            {},
        ),
    ],
)
def test_each_rule_fails_on_a_record_that_breaks_it(change, words, flags) -> None:
    before = _record()
    assert rule_breaks(before, copy.deepcopy(before), **flags) == []
    after = copy.deepcopy(before)
    change(after)
    found = rule_breaks(before, after, **flags)
    assert any(words in f for f in found), (words, found)


def test_a_grown_regex_and_an_appended_sentence_keep_the_rules() -> None:
    before = _record()
    after = copy.deepcopy(before)
    old = before["error"]["regex"]
    after["error"]["regex"] = old + "|index out of range in self"
    old_condition = before["workarounds"][0].get("condition") or ""
    after["workarounds"][0]["condition"] = (
        old_condition + " In a scripted reproduction, it did not work on torch 2.0.1–2.5.1."
    ).strip()
    assert rule_breaks(before, after) == []
    after["error"]["last_confirmed"] = "2099-01-01"
    assert rule_breaks(before, after, confirmed_run=True) == []


def test_duplicate_outcome_lines_are_found() -> None:
    line = {
        "error_id": "pytorch/x/y",
        "workaround_action": "Do it",
        "environment": {"torch": "2.1.2", "device": "cpu"},
    }
    assert duplicate_lines([line]) == []
    assert duplicate_lines([line, dict(line, success=False)])
    other = dict(line, environment={"torch": "2.1.2", "device": "cuda"})
    assert duplicate_lines([line, other]) == []


def _record() -> dict:
    return loads((RESOURCES / "documents" / "deadends-record.json").read_bytes())


def test_the_schema_rules_refuse_what_the_knowledge_base_refuses() -> None:
    good = _record()
    # the fixture lists a confused error by its id alone: the rules say so, without failing
    assert any("frequently_confused_with[0]" in p for p in problems(good))
    good["transition_graph"]["frequently_confused_with"] = [
        {"error_id": "pytorch/other-error/pt2-linux", "distinction": "another error"}
    ]
    good["metadata"]["evidence_count"] = 3
    good["verdict"].update(resolvable="true", fix_success_rate=0.8, confidence=0.7)
    assert problems(good) == []
    for change, words in (
        (
            lambda d: d["verdict"].update(resolvable="true", fix_success_rate=0.6),
            "resolvable 'true'",
        ),
        (
            lambda d: d["verdict"].update(resolvable="false", fix_success_rate=0.3),
            "resolvable 'false'",
        ),
        (lambda d: d["metadata"].update(evidence_count=2), "caps confidence"),
        (lambda d: d["error"].update(regex="(a+)+"), "ReDoS"),
        (lambda d: d["error"].update(regex="(unclosed"), "does not compile"),
        (lambda d: d.update(url="https://example.com/x"), "url must be"),
        (lambda d: d["dead_ends"][0].update(sources=["http://10.0.0.1/x"]), "not a public"),
        (lambda d: d["dead_ends"][0].update(fail_rate=1.5), "fail_rate"),
        (lambda d: d["metadata"].update(review_status="checked"), "review_status"),
        (lambda d: d.update(dead_ends=[]), "at least one dead end"),
    ):
        bad = json.loads(json.dumps(good))
        change(bad)
        found = problems(bad)
        assert any(words in p for p in found), (words, found)
        with pytest.raises(jsonschema.ValidationError):
            if words in (
                "resolvable 'true'",
                "resolvable 'false'",
                "caps confidence",
                "ReDoS",
                "does not compile",
                "url must be",
                "not a public",
            ):
                raise jsonschema.ValidationError("a business rule, not the schema")
            jsonschema.validate(bad, SCHEMA)


@pytest.mark.parametrize(
    ("url", "safe"),
    [
        ("https://deadends.dev/pytorch/x/y", True),
        ("http://example.org/page", True),
        ("ftp://example.org/x", False),
        ("http://localhost:8000/", False),
        ("http://127.0.0.1/", False),
        ("http://192.168.1.4/", False),
        ("http://169.254.1.1/", False),
        ("http://0177.0.0.1/", False),
        ("https://[::1]/", False),
    ],
)
def test_a_source_is_a_public_http_url(url: str, safe: bool) -> None:
    assert _safe_url(url) is safe


def test_a_changed_rate_keeps_the_files_number_style_and_the_other_lines() -> None:
    raw = b'{\n  "a": 0.90,\n  "b": {\n    "c": 0.70\n  },\n  "d": "x"\n}\n'
    data = loads(raw)
    data["b"]["c"] = 0.5
    assert (
        dumps_like(raw, data) == b'{\n  "a": 0.90,\n  "b": {\n    "c": 0.50\n  },\n  "d": "x"\n}\n'
    )
    data["e"] = {"f": [1]}
    written = dumps_like(raw, data).decode()
    assert '"a": 0.90,' in written and '"f": [\n      1\n    ]' in written
    with pytest.raises(ValueError, match="two-space"):
        dumps_like(b'{"a": 1, "b": 2}', {"a": 2, "b": 2})


def test_the_summary_lists_each_claim_no_variant_measures_with_its_reason() -> None:
    """A claim of a record no variant measures is named with its triage's reason (its verdict
    row's "not measured: why"), in the summary and where its condition is left alone."""
    from harness.catalogue.kbcorrections import plan_corrections
    from harness.spec.triage import find_triages

    entries, table = _measured()
    triages = find_triages(committed_tree() / "repros")
    planned = plan_corrections(table, list(entries.values()), triages, domain="cuda")
    summary = planned.files["README.md"].decode("utf-8")
    assert "## Claims not measured" in summary
    named = 0
    for row in next(t for t in triages if t.path.parent.name == "cuda").entries:
        claimed = {v.claim_ref for v in entries[row.entry].variants} if row.entry else set()
        for u in row.unmeasured:
            if u.ref not in claimed:
                line = f"- `{row.kb_id}` (entry `{row.entry}`), {u.ref}: not measured: "
                assert line + u.why[:40] in summary, (row.kb_id, u.ref)
                named += 1
    assert named
    entry, agg, original = _agg("deadends/cuda/cusolver-internal-error/cuda12-a100")
    left = {x.field: x.why for x in correct(entry, agg, original).left}
    assert left["workarounds[2].condition"].startswith("not measured: updating the CUDA toolkit")
