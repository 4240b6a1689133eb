"""harness/report/render/kbdomain.py: one knowledge-base domain's summary, worst claims first."""

from __future__ import annotations

from pathlib import Path

from harness.report.render.kbdomain import (
    claim_kind,
    render_domain_html,
    render_domain_markdown,
    summarize_domain,
)
from harness.spec.triage import load_triage

TRIAGE = """\
source: {repository: someone/kb, path: data/pytorch/, id_prefix: kb/}
entries:
  - kb_id: pytorch/a/env
    url: https://kb.example/a
    message: "RuntimeError: a happened"
    owner: me
    scriptable: cpu
    entry: kb/pytorch/a/env
    why: a script does it
    unmeasured:
      - {ref: "dead end 2", why: "a purchase"}
  - kb_id: pytorch/b/env
    url: https://kb.example/b
    message: "RuntimeError: b happened"
    owner: me
    scriptable: cuda
    entry: kb/pytorch/b/env
    why: needs a GPU
  - kb_id: pytorch/c/env
    url: https://kb.example/c
    message: "c happened"
    owner: me
    scriptable: no
    entry: null
    why: the OOM killer
"""


def verdict(
    claim: str,
    verdict: str,
    claimed: str = "",
    measured: str = "",
    subject: str = "",
    n: int = 10,
    *,
    advice: str | None = None,
    figure: str | None = None,
    grade: str | None = None,
):
    return {
        "claim": claim,
        "subject": subject,
        "claimed": claimed,
        "measured": measured,
        "verdict": verdict,
        "advice": advice,
        "figure": figure,
        "grade": grade,
        "label": verdict,
        "why": "because",
        "seen_instead": "RuntimeError: other (×3)" if verdict == "contradicted" else "",
        "n": n,
    }


AGGREGATES = {
    "kb/pytorch/a/env": {
        "id": "kb/pytorch/a/env",
        "runs": 40,
        "verdicts": [
            verdict(
                "documented message",
                "contradicted",
                "RuntimeError: a happened",
                "shown in 0/10",
                grade="other-error",
            ),
            verdict(
                "fix rate",
                "inconclusive (n=3)",
                "85%",
                "2/3 = 67% (CI 20.8–93.9%)",
                advice="inconclusive",
                figure="inconclusive",
            ),
            verdict(
                "workaround 1: success rate",
                "contradicted",
                "90%",
                "3/10 = 30% (CI 10.8–60.3%)",
                "workaround1-x",
                advice="inconclusive",
                figure="overstated",
            ),
            verdict(
                "workaround 2: success rate",
                "contradicted",
                "90%",
                "0/10 = 0% (CI 0–27.8%)",
                "workaround2-y",
                advice="wrong",
                figure="overstated",
            ),
            verdict(
                "dead end 1: failure rate",
                "confirmed",
                "70%",
                "7/10 = 70% (CI 39.7–89.2%)",
                "deadend1-z",
                advice="inconclusive",
                figure="inconclusive",
            ),
            verdict(
                "workaround 3: success rate",
                "confirmed",
                "60%",
                "57/57 = 100% (CI 93.7–100%)",
                "workaround3-u",
                n=57,
                advice="holds",
                figure="understated",
            ),
            verdict(
                "version table: torch>=2.0 (active)",
                "not measurable",
                "active",
                "no env",
                grade="other-error",
            ),
        ],
    },
    # b has no runs yet: it must show as not measured, never as a pass
}

MSGSEARCH = {
    "schema": 1,
    "entries": {
        "kb/pytorch/a/env": {
            "envs": {
                "e1": {"found": "none", "versions": {"torch": "2.0.1+cpu"}},
                "e2": {"found": "none", "versions": {"torch": "2.13.0+cpu"}},
            }
        },
        "kb/pytorch/c/env": {
            "envs": {
                "e1": {"found": "all", "versions": {"torch": "1.10.2+cu102"}},
                "e2": {"found": "some", "versions": {"torch": "2.13.0+cpu"}},
            }
        },
    },
}


def summary(tmp_path: Path):
    path = tmp_path / "repros" / "kb" / "pytorch" / "triage.yaml"
    path.parent.mkdir(parents=True)
    path.write_text(TRIAGE)
    return summarize_domain(load_triage(path), AGGREGATES, MSGSEARCH)


def test_claim_kinds() -> None:
    assert claim_kind("documented message") == "documented message"
    assert claim_kind("version table: torch>=1.10 (active)") == "version table"
    assert claim_kind("workaround 1: success rate (literal reading)") == "workaround"
    assert claim_kind("solution 2: success rate") == "workaround"
    assert claim_kind("dead end 2: failure rate") == "dead end"
    assert claim_kind("fix rate") == "fix rate"


def test_counts_by_kind_and_verdict(tmp_path: Path) -> None:
    s = summary(tmp_path)
    counts = s.counts()
    assert counts["documented message"]["contradicted"] == 1
    assert counts["workaround"] == {
        "confirmed": 1,
        "contradicted": 2,
        "inconclusive": 0,
        "not measurable": 0,
    }
    assert counts["fix rate"]["inconclusive"] == 1
    assert counts["version table"]["not measurable"] == 1
    # dead end 1 measured and confirmed; dead end 2 cannot be measured by any variant
    assert counts["dead end"] == {
        "confirmed": 1,
        "contradicted": 0,
        "inconclusive": 0,
        "not measurable": 1,
    }


def test_counts_by_advice_figure_and_grade(tmp_path: Path) -> None:
    s = summary(tmp_path)
    advice = s.by_advice()
    assert advice["workaround"] == {"holds": 1, "wrong": 1, "inconclusive": 1, "not measurable": 0}
    assert advice["fix rate"] == {"holds": 0, "wrong": 0, "inconclusive": 1, "not measurable": 0}
    # dead end 2 cannot be measured by any variant: not measurable, both answers
    assert advice["dead end"] == {"holds": 0, "wrong": 0, "inconclusive": 1, "not measurable": 1}
    figure = s.by_figure()
    assert figure["workaround"] == {
        "confirmed": 0,
        "understated": 1,
        "overstated": 2,
        "inconclusive": 0,
        "not stated": 0,
        "not measurable": 0,
    }
    assert figure["dead end"]["not measurable"] == 1 and figure["dead end"]["inconclusive"] == 1
    assert s.by_grade() == {
        "verbatim": 0,
        "variable-parts": 0,
        "reworded": 0,
        "other-error": 1,
        "not-raised": 0,
        "not measurable": 0,
    }


def test_most_wrong_lists_wrong_advice_and_invented_messages_first(tmp_path: Path) -> None:
    wrong = summary(tmp_path).most_wrong()
    # wrong advice, then the invented message, then an overstated figure; an understated
    # figure (workaround 3: 57/57 against 60%) is never among them
    assert [(w.claim, round(w.gap, 1)) for w in wrong] == [
        ("workaround 2: success rate", 62.2),
        ("documented message", 100.0),
        ("workaround 1: success rate", 29.7),
    ]


def test_entries_unmeasured_and_not_scriptable(tmp_path: Path) -> None:
    s = summary(tmp_path)
    a, b, c = s.entries
    assert a.measured and a.runs == 40 and a.message_found_anywhere is False
    assert a.message_found == "none in 2 of 2 environments (torch 2.0.1–2.13.0)"
    assert not b.measured and b.message_found == "not searched" and b.message_found_anywhere is None
    assert c.scriptable == "no" and c.entry == "kb/pytorch/c/env"
    assert (
        c.message_found
        == "all in 1 of 2 environments (torch 1.10.2); some in 1 of 2 environments (torch 2.13.0)"
    )
    assert not [x for x in s.claims if x.entry != "kb/pytorch/a/env"]


def test_markdown_links_the_evidence(tmp_path: Path) -> None:
    md = render_domain_markdown(summary(tmp_path))
    assert "# Domain kb-pytorch" in md
    assert "| documented message | 0 | 1 | 0 | 0 |" in md
    assert "| all | 2 | 3 | 1 | 2 |" in md
    assert "## Rate claims by advice" in md and "## Rate claims by figure" in md
    assert "| workaround | 1 | 1 | 1 | 0 |" in md  # holds / wrong / inconclusive / not measurable
    assert "| workaround | 0 | 1 | 2 | 0 | 0 | 0 |" in md  # confirmed / understated / overstated …
    assert "## Documented messages by grade" in md
    assert "| 0 | 0 | 0 | 1 | 0 | 0 |" in md
    assert "[kb/pytorch/a/env](../compat/kb__pytorch__a__env.md)" in md
    assert md.index("workaround 2: success rate (workaround2-y)") < md.index(
        "documented message | RuntimeError: a happened"
    )
    assert (
        "workaround3-u" not in md.split("## The most wrong claims first")[1].split("## Entries")[0]
    )
    assert "| [kb/pytorch/b/env](https://kb.example/b) | cuda | not measured yet | – |" in md
    assert "- [pytorch/c/env](https://kb.example/c): the OOM killer" in md
    assert "- kb/pytorch/a/env, dead end 2: a purchase" in md


def test_html_section(tmp_path: Path) -> None:
    page = render_domain_html(summary(tmp_path), "domains/kb-pytorch.md")
    assert page.startswith('<section class="domain" id="domain-kb-pytorch">')
    assert '<a href="domains/kb-pytorch.md">' in page
    assert '<a href="#e-kb__pytorch__a__env">' in page
    assert "<td>workaround</td><td>1</td><td>2</td>" in page
    assert "other-error 1" in page
