"""`python -m harness corrections`: every kept deadends.dev record, corrected by what the runs
measured, checked as the knowledge base checks it (its schema and business rules as
tests/resources/deadends-record.schema.json and harness/catalogue/kbrecord.py write them
down), written byte-stable, read back through `new`, and its outcome lines counted as the
aggregates count runs. Everything here reads the committed tree."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from harness.__main__ import main
from harness.catalogue.kbrecord import _safe_url, dumps_like, loads, problems
from harness.catalogue.scaffold import parse_deadends_json
from harness.report.render.jsonout import read_compat
from harness.spec.entries import load_entries
from tests.paths import RESOURCES, committed_tree

SCHEMA = json.loads((RESOURCES / "deadends-record.schema.json").read_text(encoding="utf-8"))


def _written() -> list[tuple[Path, Path]]:
    """(written file, kept original) for every corrected record of the committed tree."""
    tree = committed_tree()
    out = tree / "results" / "corrections"
    kept = {}
    for e in load_entries(tree / "repros"):
        if e.origin.get("record"):
            kept[str(e.origin["path"])] = e.dir / str(e.origin["record"])
    pairs = []
    for path in sorted((out / "data" / "canons").rglob("*.json")):
        rel = path.relative_to(out).as_posix()
        pairs.append((path, kept[rel]))
    return pairs


def test_the_committed_corrections_are_what_the_committed_records_give(capsys) -> None:
    assert main(["--repo", str(committed_tree()), "corrections", "--check"]) == 0
    assert "up to date" in capsys.readouterr().out


def test_every_written_record_passes_the_knowledge_bases_schema_and_rules() -> None:
    pairs = _written()
    assert len(pairs) >= 30  # the committed records correct dozens of records
    kept_ids = {loads(k.read_bytes())["id"] for _, k in pairs}
    for written, original in pairs:
        data = loads(written.read_bytes())
        jsonschema.validate(data, SCHEMA)
        assert problems(data) == [], written
        before = loads(original.read_bytes())
        assert data["id"] == before["id"] and data["url"] == before["url"]
        # the maintainers' field is never touched
        assert data["metadata"]["review_status"] == before["metadata"]["review_status"]
        # an edge added to the graph names a record the knowledge base holds
        old_refs = {e["error_id"] for e in before["transition_graph"]["leads_to"]}
        for edge in data["transition_graph"]["leads_to"]:
            assert edge["error_id"] in old_refs or edge["error_id"] in kept_ids


def test_a_written_record_differs_from_its_original_only_where_a_value_changed() -> None:
    for written, original in _written():
        raw = original.read_bytes()
        assert dumps_like(raw, loads(raw)) == raw  # nothing changed: the same bytes
        assert dumps_like(raw, loads(written.read_bytes())) == written.read_bytes()
        old_lines = raw.decode().splitlines()
        new_lines = written.read_text(encoding="utf-8").splitlines()
        # every original line whose value did not change is still there, byte for byte
        kept = set(new_lines)
        unchanged = [line for line in old_lines if line in kept]
        assert len(unchanged) >= len(old_lines) - 40, written


def test_reading_a_written_record_back_through_new_gives_the_same_entry() -> None:
    for written, original in _written():
        again = parse_deadends_json(written.read_text(encoding="utf-8"), written)
        first = parse_deadends_json(original.read_text(encoding="utf-8"), original)
        data = loads(written.read_bytes())
        assert again.entry_id == first.entry_id and again.format == first.format
        assert again.fix_rate == data["verdict"]["fix_success_rate"]
        rates = {c.ref: c.rate for c in again.claims}
        for i, w in enumerate(data["workarounds"], 1):
            assert rates[f"workaround {i}"] == w["success_rate"]
        for i, d in enumerate(data["dead_ends"], 1):
            assert rates[f"dead end {i}"] == d["fail_rate"]
        assert again.origin["message"] == data["error"]["signature"]
        assert again.origin["regex"] == data["error"]["regex"]
        # what the corrections do not touch reads back as it was
        assert [c.ref for c in again.claims] == [c.ref for c in first.claims]
        assert again.verification == first.verification


def test_the_outcome_lines_count_each_workarounds_counted_runs() -> None:
    tree = committed_tree()
    compat = read_compat(tree / "results")
    by_kb = {}
    for e in load_entries(tree / "repros"):
        if e.origin.get("record"):
            by_kb[str(e.origin["id"])] = e.id
    aggs = {a["id"]: a for a in compat["entries"]}
    seen: dict[tuple[str, str], list[bool]] = {}
    for path in sorted((tree / "results" / "corrections" / "data" / "outcomes").glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            assert set(row) == {
                "timestamp",
                "error_id",
                "workaround_action",
                "success",
                "canon_exists",
                "environment",
                "notes",
            }
            assert row["canon_exists"] is True and isinstance(row["success"], bool)
            assert set(row["environment"]) == {
                "python",
                "torch",
                "lightning",
                "device",
                "precision",
            }
            assert row["timestamp"][:10] in path.name
            seen.setdefault(
                (row["error_id"], row["notes"].split("variant ")[1].split(",")[0]), []
            ).append(row["success"])
    assert seen, "the committed records give outcome lines"
    for (kb_id, variant), successes in seen.items():
        agg = aggs[by_kb[kb_id]]
        v = next(x for x in agg["variants"] if x["name"] == variant)
        assert v["kind"] == "workaround"
        # one line per counted run, success where the run was ok: the aggregate's k/n
        assert (sum(successes), len(successes)) == (v["overall"]["k"], v["overall"]["n"])


def test_the_review_names_every_triaged_record() -> None:
    tree = committed_tree()
    for triage in sorted((tree / "repros" / "deadends").glob("*/triage.yaml")):
        review = (
            tree / "results" / "corrections" / "review" / f"{triage.parent.name}.md"
        ).read_text(encoding="utf-8")
        import yaml

        for row in yaml.safe_load(triage.read_text(encoding="utf-8"))["entries"]:
            assert f"`{row['kb_id']}`" in review, row["kb_id"]


# -- the rules, each shown able to fail ---------------------------------------------------


def _record() -> dict:
    return loads((RESOURCES / "documents" / "deadends-record.json").read_bytes())


def test_the_rules_refuse_what_the_knowledge_base_refuses() -> None:
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


def test_a_workaround_that_raises_another_records_error_leads_to_it() -> None:
    import dataclasses

    from harness.aggregate import Failure, aggregate_table
    from harness.catalogue.corrections import correct, record_signatures
    from harness.store.columnar import load_latest
    from harness.store.jsonl import Store

    tree = committed_tree()
    entries = load_entries(tree / "repros")
    by_id = {e.id: e for e in entries}
    entry = by_id["deadends/pytorch/broadcast-shape-mismatch/pt2-linux"]
    other = by_id["deadends/pytorch/embedding-index-error/pt2-linux"]
    table = load_latest(Store(tree / "results" / "records"), None, update=False)
    (agg,) = aggregate_table(table, entries, ids=[entry.id])
    w = next(v for v in agg.variants if v.kind == "workaround" and v.overall.n)
    raised = Failure("other_error", "IndexError: index out of range in self", 3)
    variants = tuple(
        dataclasses.replace(v, failures=(raised,)) if v.name == w.name else v for v in agg.variants
    )
    others = {other.id: record_signatures(other)}
    original = (entry.dir / "kb-record.json").read_bytes()
    plain = correct(entry, agg, original, others=others)
    assert not plain.record["transition_graph"]["leads_to"]  # as measured: no edge
    c = correct(entry, dataclasses.replace(agg, variants=variants), original, others=others)
    (edge,) = c.record["transition_graph"]["leads_to"]
    assert edge["error_id"] == other.origin["id"]
    assert edge["probability"] == round(3 / w.overall.n, 2)
    assert any(ch.kind == "leads to" for ch in c.changes)
    assert problems(c.record) == []
