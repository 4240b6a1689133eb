"""harness/aggregate/unmeasured.py: every claim of a document has a verdict row; one no
variant measures reads "not measured: why", with the reason its triage row gives, on the
entry's page, in its JSON and in the domain's counts (once)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.aggregate import aggregate_entry
from harness.aggregate.model import NOT_MEASURABLE
from harness.aggregate.unmeasured import is_unmeasured, unmeasured_claims
from harness.outcomes import Outcome
from harness.report.render.kbdomain import summarize_domain
from harness.report.render.markdown import render_entry
from harness.spec.entries import Entry, load_entry
from harness.spec.triage import find_triages
from tests.aggregate.test_aggregate import E1
from tests.aggregate.test_verdicts import run
from tests.spec.test_entries import F, make

EID = "kb/pytorch/a/env"
ENTRY = f"""\
id: {EID}
signature: {{type: RuntimeError, message: "boom"}}
variants:
  - {{name: base, kind: baseline, description: "raises"}}
  - {{name: wa, kind: workaround, claim: {{ref: "workaround 1", rate: 0.9}}, description: "x"}}
  - {{name: ctl, kind: control, description: "works"}}
"""
REPRO = F + 'VARIANTS = {"base": f, "wa": f, "ctl": f}\n'
TRIAGE = f"""\
source:
  repository: someone/kb
  path: data/pytorch/
  id_prefix: kb/
entries:
  - kb_id: pytorch/a/env
    url: https://kb.example/pytorch/a/env
    message: "RuntimeError: boom"
    owner: me
    scriptable: {{scriptable}}
    entry: {EID}
    why: a script raises it
    unmeasured:
      - {{ref: "dead end 1", why: "a purchase no script can make"}}
      - {{ref: "workaround 1", why: "only its local reading is measurable"}}
"""


def load(tmp_path: Path, scriptable: str = "cpu") -> Entry:
    repros = tmp_path / "repros"
    (repros / "kb" / "pytorch").mkdir(parents=True)
    (repros / "kb" / "pytorch" / "triage.yaml").write_text(
        TRIAGE.replace("{scriptable}", scriptable)
    )
    return load_entry(make(repros, ENTRY, EID, REPRO), repros)


def records(entry_id: str = EID) -> list:
    return [
        run("base", "baseline", E1, Outcome.REPRODUCED, entry=entry_id),
        run("wa", "workaround", E1, Outcome.OK, entry=entry_id),
        run("ctl", "control", E1, Outcome.OK, entry=entry_id),
    ]


def test_a_claim_no_variant_measures_gets_a_row_with_its_reason(tmp_path: Path) -> None:
    entry = load(tmp_path)
    agg = aggregate_entry(entry, records())
    [row] = [v for v in agg.verdicts if v.claim.startswith("dead end 1")]
    assert row.claim == "dead end 1: failure rate" and row.subject == ""
    assert row.verdict == row.advice == row.figure == NOT_MEASURABLE
    assert row.why == "not measured: a purchase no script can make"
    assert is_unmeasured(row.subject, row.why)
    # a claim a variant measures (in part) keeps its variant's row, and only that one
    assert [v.subject for v in agg.verdicts if v.claim.startswith("workaround 1")] == ["wa"]
    assert [u.ref for u in unmeasured_claims(entry)] == ["dead end 1"]


def test_the_row_is_on_the_page_and_in_the_json(tmp_path: Path) -> None:
    agg = aggregate_entry(load(tmp_path), records())
    page = render_entry(agg)
    [line] = [ln for ln in page.splitlines() if ln.startswith("| dead end 1")]
    assert "not measured: a purchase no script can make" in line
    assert "**not measurable**" in line
    rows = agg.to_dict()["verdicts"]
    assert {
        "claim": "dead end 1: failure rate",
        "verdict": NOT_MEASURABLE,
        "why": "not measured: a purchase no script can make",
    }.items() <= next(r for r in rows if r["claim"].startswith("dead end 1")).items()


@pytest.mark.parametrize("scriptable", ["cpu", "cuda"])
def test_the_domain_counts_it_once_measured_or_waiting(tmp_path: Path, scriptable: str) -> None:
    """Counted through its verdict row, never a second time from the triage; an entry still
    waiting for a GPU counts it all the same: it is not measurable whatever runs."""
    entry = load(tmp_path, scriptable)
    recs = records()
    if scriptable == "cuda":  # every run skipped: the entry waits for a GPU
        recs = [run(r.variant, r.kind, E1, Outcome.SKIPPED, entry=EID) for r in recs]
    agg = aggregate_entry(entry, recs)
    [triage] = find_triages(tmp_path / "repros")
    summary = summarize_domain(triage, {EID: agg.to_dict()}, {})
    counts = summary.counts()
    assert counts["dead end"][NOT_MEASURABLE] == 1
    assert summary.by_advice()["dead end"][NOT_MEASURABLE] == 1
    # the partly measured workaround: its variant's row alone (none while it waits)
    assert sum(counts["workaround"].values()) == (1 if scriptable == "cpu" else 0)
