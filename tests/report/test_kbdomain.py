"""harness/report/render/kbdomain.py: one knowledge-base domain's summary, worst claims first."""

from __future__ import annotations

from pathlib import Path

from harness.report import findings
from harness.report.render.kbdomain import (
    MEASURED,
    NO_APPLICABLE,
    NOT_MEASURED,
    NOT_SCRIPTABLE,
    WAITING,
    claim_kind,
    render_domain_html,
    render_domain_markdown,
    search_text,
    states_text,
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
                figure="consistent",
            ),
            verdict(
                "version table: torch>=2.0 (active)",
                "not measurable",
                "active",
                "no env",
                grade="other-error",
            ),
            # the row the aggregation writes for the claim the triage leaves unmeasured
            # (harness/aggregate/unmeasured.py): counted through it, once
            {
                **verdict(
                    "dead end 2: failure rate",
                    "not measurable",
                    "–",
                    "–",
                    n=0,
                    advice="not measurable",
                    figure="not measurable",
                ),
                "why": "not measured: a purchase",
            },
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
        "not as documented": 0,
        "depends on the release": 0,
        "inconclusive": 0,
        "not measurable": 0,
    }
    assert counts["fix rate"]["inconclusive"] == 1
    assert counts["version table"]["not measurable"] == 1
    # dead end 1 measured and confirmed; dead end 2 cannot be measured by any variant
    assert counts["dead end"] == {
        "confirmed": 1,
        "contradicted": 0,
        "not as documented": 0,
        "depends on the release": 0,
        "inconclusive": 0,
        "not measurable": 1,
    }


def test_counts_by_advice_figure_and_grade(tmp_path: Path) -> None:
    s = summary(tmp_path)
    advice = s.by_advice()
    assert advice["workaround"] == {
        "holds": 1,
        "wrong": 1,
        "fails otherwise": 0,
        "depends on the release": 0,
        "inconclusive": 1,
        "not measurable": 0,
    }
    assert advice["fix rate"] == {
        "holds": 0,
        "wrong": 0,
        "fails otherwise": 0,
        "depends on the release": 0,
        "inconclusive": 1,
        "not measurable": 0,
    }
    # dead end 2 cannot be measured by any variant: not measurable, both answers
    assert advice["dead end"] == {
        "holds": 0,
        "wrong": 0,
        "fails otherwise": 0,
        "depends on the release": 0,
        "inconclusive": 1,
        "not measurable": 1,
    }
    figure = s.by_figure()
    assert figure["workaround"] == {
        "consistent": 1,
        "overstated": 2,
        "depends on the release": 0,
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
    # wrong advice, then the invented message, then an overstated figure; a consistent
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
    # confirmed, contradicted, not as documented, depends on the release, inconcl., n.m.
    assert "| documented message | 0 | 1 | 0 | 0 | 0 | 0 |" in md
    assert "| all | 2 | 3 | 0 | 0 | 1 | 2 |" in md
    assert "## Rate claims by advice" in md and "## Rate claims by figure" in md
    # holds, wrong, fails otherwise, depends on the release, inconcl., n.m.
    assert "| workaround | 1 | 1 | 0 | 0 | 1 | 0 |" in md
    # consistent, overstated, depends on the release, inconcl., not stated, n.m.
    assert "| workaround | 1 | 2 | 0 | 0 | 0 | 0 |" in md
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


# -- small domains: every count and list reads well when empty or small ----------------------


def _triage(tmp_path: Path, name: str, rows: list[tuple[str, str]]) -> object:
    """A triage file of ``rows`` (kb slug, scriptable) in domain kb/<name>."""
    text = "source: {repository: someone/kb, path: data/" + name + "/, id_prefix: kb/}\nentries:\n"
    for slug, scriptable in rows:
        entry = "null" if scriptable == "no" else f"kb/{name}/{slug}/env"
        text += (
            f"  - kb_id: {name}/{slug}/env\n"
            f"    url: https://kb.example/{slug}\n"
            f'    message: "RuntimeError: {slug} went wrong on the device"\n'
            "    owner: me\n"
            f"    scriptable: {scriptable}\n"
            f"    entry: {entry}\n"
            f"    why: {'a two-GPU collective' if scriptable == 'no' else 'a script does it'}\n"
        )
    path = tmp_path / "repros" / "kb" / name / "triage.yaml"
    path.parent.mkdir(parents=True)
    path.write_text(text)
    return load_triage(path)


def _agg(eid: str, cells: dict[str, list[str | None]], counted: int, verdicts=()) -> dict:
    """An entry's compat.json dict: per variant, its cpu-fp32 statuses (one per environment)."""
    return {
        "id": eid,
        "runs": sum(st is not None for sts in cells.values() for st in sts),
        "counted": counted,
        "cells": {v: {"cpu-fp32": {"status": sts, "counts": {}}} for v, sts in cells.items()},
        "verdicts": list(verdicts),
    }


def _search(*found: str) -> dict:
    return {
        "envs": {
            f"e{i}": {"found": f, "versions": {"torch": t}}
            for i, (f, t) in enumerate(zip(found, ("1.10.2+cpu", "2.13.0+cpu"), strict=False))
        }
    }


def test_a_domain_without_runs_or_search_reads_well(tmp_path: Path) -> None:
    triage = _triage(tmp_path, "empty", [("a", "cpu"), ("b", "no")])
    s = summarize_domain(triage, {}, {})
    assert [e.state for e in s.entries] == [NOT_MEASURED, NOT_SCRIPTABLE]
    md = render_domain_markdown(s)
    assert "(2 entries)" in md
    assert "| 2 | 1 | 0 | 1 | 0 | 0 | 1 | not searched |" in md
    assert "Message search: not run yet (python -m harness msgsearch)." in md
    assert "No entry of this domain has a counted run yet: no claim is counted" in md
    assert "## Claims by verdict" not in md and "## Waiting for a GPU" not in md
    assert "1 entry, never counted" in md
    assert "- [empty/b/env](https://kb.example/b): a two-GPU collective" in md
    for bad in ("0 of 0", ": ;", ": .", "1 have", "1 entries"):
        assert bad not in md
    html = render_domain_html(s, "domains/kb-empty.md")
    assert "No entry of this domain has a counted run yet" in html and "<table>" not in html
    assert "triage: 1 on CPU, 0 only on CUDA, 1 not by a script; 1 not measured yet." in html
    row = findings._domain_row(s, "results/domains/kb-empty.md")
    # source, entries, measured, waiting, confirmed, contradicted, not as documented,
    # depends on the release, inconclusive, not measurable, messages shown, invented
    assert row == (
        "| [kb-empty](results/domains/kb-empty.md) | 2 | 0 | 0 | 0 | 0 | 0 | 0 | 0 | 0 | 0 | 0 |"
    )


def test_cuda_entries_all_skipped_wait_for_a_gpu_and_are_never_counted(tmp_path: Path) -> None:
    triage = _triage(tmp_path, "gpu", [("a", "cuda"), ("b", "cuda")])
    not_measurable = verdict("workaround 1: success rate", "not measurable", "90%", "0/0")
    aggregates = {
        "kb/gpu/a/env": _agg("kb/gpu/a/env", {"baseline": ["skipped", "skipped"]}, 0),
        "kb/gpu/b/env": _agg(
            "kb/gpu/b/env",
            {"baseline": ["skipped", None], "workaround1": ["skipped", "skipped"]},
            0,
            [not_measurable],
        ),
    }
    s = summarize_domain(triage, aggregates, {"entries": {"kb/gpu/a/env": _search("all", "all")}})
    assert [e.state for e in s.entries] == [WAITING, WAITING]
    assert s.entries[1].waiting == ("baseline", "workaround1")
    assert not s.claims and s.verdicts()["not measurable"] == 0  # not measured: not counted
    md = render_domain_markdown(s)
    assert "| cuda | waiting for a GPU (3 skipped) | – | – |" in md
    assert "No entry of this domain has a counted run yet (2 entries waiting for a GPU)" in md
    assert "## Waiting for a GPU" in md
    assert "- [kb/gpu/a/env](../compat/kb__gpu__a__env.md): every variant" in md
    assert "1 documented message searched for in the installed torch and lightning (2 " in md
    assert "1 found whole in every release, 0 in some releases, 0 only in parts, 0 nowhere" in md
    assert "1 not searched yet" in md
    assert "None: every entry has a reproducer." in md
    assert (
        findings._domain_row(s, "p.md")
        == "| [kb-gpu](p.md) | 2 | 0 | 2 | 0 | 0 | 0 | 0 | 0 | 0 | 0 | 0 |"
    )


def test_a_mixed_domain(tmp_path: Path) -> None:
    triage = _triage(
        tmp_path,
        "mixed",
        [("a", "cpu"), ("b", "cuda"), ("c", "no"), ("d", "cpu"), ("e", "cpu")],
    )
    aggregates = {
        # measured on CPU; its CUDA variant skipped everywhere
        "kb/mixed/a/env": _agg(
            "kb/mixed/a/env",
            {"baseline": ["reproduced", "reproduced"], "workaround1-cuda": ["skipped", None]},
            2,
            [
                verdict("documented message", "confirmed", grade="verbatim"),
                verdict(
                    "workaround 1: success rate",
                    "not measurable",
                    "90%",
                    "0/0",
                    n=0,
                    advice="not measurable",
                    figure="not measurable",
                ),
            ],
        ),
        "kb/mixed/b/env": _agg("kb/mixed/b/env", {"baseline": ["skipped"]}, 0),
        # ran, but no run applies (the API is missing everywhere): its verdicts stand
        "kb/mixed/e/env": _agg(
            "kb/mixed/e/env",
            {"baseline": ["unsupported"]},
            0,
            [verdict("documented message", "not measurable", grade="not measurable")],
        ),
    }
    search = {
        "entries": {
            "kb/mixed/a/env": _search("all", "all"),
            "kb/mixed/b/env": _search("none", "all"),
            "kb/mixed/c/env": _search("some", "none"),
            "kb/mixed/d/env": _search("none", "none"),
        }
    }
    s = summarize_domain(triage, aggregates, search)
    assert [e.state for e in s.entries] == [
        MEASURED,
        WAITING,
        NOT_SCRIPTABLE,
        NOT_MEASURED,
        NO_APPLICABLE,
    ]
    assert s.triage() == {"cpu": 3, "cuda": 1, "no": 1}
    assert s.entries[0].waiting == ("workaround1-cuda",)
    assert s.spreads() == {
        "every release": 1,
        "some releases": 1,
        "parts only": 1,
        "nowhere": 1,
        "not searched": 1,
    }
    assert s.verdicts() == {
        "confirmed": 1,
        "contradicted": 0,
        "not as documented": 0,
        "depends on the release": 0,
        "inconclusive": 0,
        "not measurable": 2,
    }
    assert (
        states_text(s) == "1 measured, 1 waiting for a GPU, 1 no applicable run, 1 not measured yet"
    )
    md = render_domain_markdown(s)
    assert "| 5 | 3 | 1 | 1 | 1 | 1 | 2 | 3 of 4 searched |" in md
    assert "## Claims by verdict" in md
    assert "- [kb/mixed/a/env](../compat/kb__mixed__a__env.md): `workaround1-cuda`" in md
    assert "| no applicable run (1 unsupported or not built) | not measurable |" in md
    assert "4 documented messages searched for in the installed torch and lightning " in md
    assert "(2 environments, torch 1.10.2–2.13.0)" in md
    html = render_domain_html(s, "domains/kb-mixed.md")
    assert "5 entries from someone/kb; triage: 3 on CPU, 1 only on CUDA, 1 not by a script" in html
    assert "Rate claims by advice: not measurable 1; by figure: not measurable 1." in html
    row = findings._domain_row(s, "p.md").split(" | ")
    assert row[1:] == ["5", "1", "1", "1", "0", "0", "0", "0", "2", "1", "0 |"], row


def test_a_message_found_nowhere_but_raised_is_the_searchs_blind_spot(tmp_path: Path) -> None:
    """torch formats some messages whole at run time ("on a {backend.upper()} device"): the
    search cannot see them, the runs can; the page says so instead of calling it invented."""
    triage = _triage(tmp_path, "fmt", [("a", "cpu"), ("b", "cpu")])
    raised = verdict("documented message", "confirmed", grade="verbatim")
    aggregates = {
        eid: _agg(eid, {"baseline": ["reproduced"]}, 1, [raised])
        for eid in ("kb/fmt/a/env", "kb/fmt/b/env")
    }
    gpu_build = {"envs": {"e": {"found": "none", "versions": {"torch": "2.4.1+cu121"}}}}
    search = {"entries": {"kb/fmt/a/env": gpu_build, "kb/fmt/b/env": _search("all", "all")}}
    s = summarize_domain(triage, aggregates, search)
    assert [e.search_missed for e in s.entries] == [True, False]
    md = render_domain_markdown(s)
    assert "none in 1 of 1 environments (torch 2.4.1); raised in runs all the same" in md
    assert "1 nowhere (1 of them raised in runs all the same: assembled at run time, or" in md
    assert "CPU-only build" not in md  # a CUDA build was among those searched
    cpu_only = {"entries": {"kb/fmt/b/env": _search("all", "all")}}
    assert "every torch searched is a CPU-only build" in search_text(
        summarize_domain(triage, aggregates, cpu_only)
    )
