"""harness/catalogue/check.py: `check` lists the rewordings it sees in the runs, for an
expert to declare or leave."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.catalogue.check import check_entries, check_entry
from tests.spec.test_entries import GOOD, make

EMBEDDING = GOOD.replace(
    'signature: {type: RuntimeError, message: "boom"}',
    'signature: {type: IndexError, message: "index out of range in Embedding"}',
)


def compat(*messages: tuple[str, str, int]) -> dict[str, object]:
    return {
        "id": "demo/err",
        "variants": [
            {
                "name": "baseline",
                "kind": "baseline",
                "messages": [
                    {"type": t, "message": m, "count": c, "outcomes": ["other_error"], "envs": []}
                    for t, m, c in messages
                ],
            },
            {
                "name": "control",
                "kind": "control",
                "messages": [
                    {"type": "IndexError", "message": "index out of range in x", "count": 9}
                ],
            },
        ],
    }


def test_check_lists_the_rewordings_it_sees(tmp_path: Path) -> None:
    d = make(tmp_path, EMBEDDING)
    (d / "document.md").write_text(
        "".join(
            f"<!-- harness:{b}:begin --><!-- harness:{b}:end -->\n"
            for b in ("measured-versions", "measured-rates", "verification")
        )
    )
    seen = compat(
        ("IndexError", "index out of range in self", 171),
        ("ValueError", "index out of range in self", 5),  # another type: not a rewording
        ("IndexError", "list assignment failed", 2),  # no shared word
    )
    result = check_entry(d, tmp_path, compat=seen)
    assert result.ok
    [line] = [t for t in result.todos if "reworded" in t]
    assert "IndexError: index out of range in self" in line
    assert "171 runs of baseline" in line and "shares 'index', 'out', 'range'" in line
    assert "signature.reworded" in line


def test_a_declared_rewording_is_no_candidate_but_one_that_matches_nothing_is_named(
    tmp_path: Path,
) -> None:
    declared = EMBEDDING.replace(
        'message: "index out of range in Embedding"}',
        'message: "index out of range in Embedding", reworded: '
        '{message: "index out of range in self", why: "torch names the argument"}}',
    )
    d = make(tmp_path, declared)
    seen = compat(("IndexError", "index out of range in self", 171))
    assert not [t for t in check_entry(d, tmp_path, compat=seen).todos if "reworded" in t]
    other = compat(("IndexError", "index 7 is out of bounds", 4))
    [line] = [t for t in check_entry(d, tmp_path, compat=other).todos if "reworded" in t]
    assert "matches none of the baseline runs' messages" in line


def test_a_baseline_that_declares_what_torch_says_instead_is_no_candidate(tmp_path: Path) -> None:
    said = EMBEDDING.replace(
        '{name: baseline, kind: baseline, description: "raises"}',
        '{name: baseline, kind: baseline, description: "raises", signature: {type: IndexError, '
        'message: "in self", instead: "torch names the argument: the umbrella text is not its"}}',
    )
    assert said != EMBEDDING
    d = make(tmp_path, said)
    seen = compat(("IndexError", "index out of range in self", 171))
    assert not [t for t in check_entry(d, tmp_path, compat=seen).todos if "reworded" in t]


def test_check_entries_reads_the_results_beside_repros(tmp_path: Path) -> None:
    repros = tmp_path / "repros"
    make(repros, EMBEDDING)
    (tmp_path / "results").mkdir()
    # schema 1, one file: a project whose report is older than compat.json's parts
    document = {
        "schema": 1,
        "records": 3,
        "entries": [compat(("IndexError", "index out of range in self", 3))],
    }
    (tmp_path / "results" / "compat.json").write_text(json.dumps(document), encoding="utf-8")
    [result] = check_entries(repros)
    assert [t for t in result.todos if "index out of range in self" in t]


# -- claims judged as their document means them (claim_problems) --------------------------


def test_check_refuses_a_measurement_of_another_kind_than_the_claims() -> None:
    import dataclasses
    from pathlib import Path as P

    from harness.catalogue.check import claim_problems
    from harness.spec.entries import ClaimMeaning, Entry, FailsAs, Reworded
    from tests.aggregate.test_aggregate import make_entry

    entry = make_entry(de_rate=0.7)
    base, wa, de, ctl = entry.variants

    def with_(*variants, **fields) -> Entry:
        return Entry(**{**entry.__dict__, "variants": (base, *variants, ctl), **fields})

    yaml = P("entry.yaml")
    assert claim_problems(with_(wa, de), yaml) == []  # an error, measured by its runs
    slower = dataclasses.replace(de, meaning=ClaimMeaning(kind="slower"))
    [problem] = claim_problems(with_(slower), yaml)
    assert "the document's failure is slower, and its runs show errors" in problem
    timed = dataclasses.replace(
        slower, fails_as=FailsAs("wrong_result", ("ratio",), measures="slower")
    )
    assert claim_problems(with_(timed), yaml) == []
    by_dtype = dataclasses.replace(timed, fails_as=FailsAs("wrong_result", ("ratio",)))
    assert "its fails_as measures wrong-result" in claim_problems(with_(by_dtype), yaml)[0]
    declared = dataclasses.replace(
        slower, meaning=ClaimMeaning(kind="slower", unmeasured="no timing")
    )
    assert claim_problems(with_(declared), yaml) == []
    check = dataclasses.replace(wa, meaning=ClaimMeaning(kind="diagnostic"))
    assert "judged by detection" in claim_problems(with_(check), yaml)[0]
    detects = dataclasses.replace(wa, meaning=ClaimMeaning(kind="diagnostic", detects=("x",)))
    assert claim_problems(with_(detects), yaml) == []
    # a twin device's words are a stand-in, never a rewording of the documented message
    meta = Reworded("Tensor on device meta is not on the expected device", "why")
    assert "stand-in" in claim_problems(with_(wa, reworded=meta), yaml)[0]
    cuda = dataclasses.replace(entry.signature, message="NCCL error: invalid argument")
    cpu = Reworded("rank < size on cpu", "why")
    assert claim_problems(with_(wa, reworded=cpu, signature=cuda), yaml)
    assert not claim_problems(
        with_(wa, reworded=Reworded("NCCL Error 4", "why"), signature=cuda), yaml
    )


# a real imported entry (copied): its record has workarounds 1-2 and dead ends 1-2, and
# variants for the workarounds only; its triage row says why neither dead end is measured
CUDNN = "deadends/cuda/cudnn-not-compiled-with-support/cuda12-linux"
CUDNN_TRIAGE = """\
source:
  repository: dbwls99706/deadends.dev
  path: data/canons/cuda/
  id_prefix: deadends/
entries:
  - kb_id: cuda/cudnn-not-compiled-with-support/cuda12-linux
    url: https://deadends.dev/cuda/cudnn-not-compiled-with-support/cuda12-linux
    message: "RuntimeError: cuDNN error: CUDNN_STATUS_NOT_SUPPORTED"
    owner: kb-c
    scriptable: cuda
    entry: deadends/cuda/cudnn-not-compiled-with-support/cuda12-linux
    why: a strided conv2d
    unmeasured:
      - {ref: "dead end 1", why: "a cuDNN downgrade"}
      - {ref: "dead end 2", why: "a slowdown with no figure"}
"""


def cudnn_repo(tmp_path: Path, triage: str) -> Path:
    import shutil

    from tests.paths import REPO

    shutil.copytree(REPO / "repros" / CUDNN, tmp_path / "repros" / CUDNN)
    shutil.copy(REPO / "repros" / "reprokit.py", tmp_path / "repros" / "reprokit.py")
    (tmp_path / "repros" / "deadends" / "cuda" / "triage.yaml").write_text(triage)
    return tmp_path


def test_every_claim_of_the_document_has_a_variant_or_a_reason(tmp_path: Path) -> None:
    from harness.catalogue.check import document_claims

    repo = cudnn_repo(tmp_path, CUDNN_TRIAGE)
    [result] = check_entries(repo / "repros")
    assert result.ok, result.errors
    assert result.entry is not None
    assert document_claims(result.entry) == (
        "workaround 1",
        "workaround 2",
        "dead end 1",
        "dead end 2",
    )


def test_a_claim_with_neither_variant_nor_reason_fails_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from harness.cli import main

    triage = CUDNN_TRIAGE.replace(
        '      - {ref: "dead end 2", why: "a slowdown with no figure"}\n', ""
    )
    repo = cudnn_repo(tmp_path, triage)
    [result] = check_entries(repo / "repros")
    [problem] = result.errors
    assert "the document's dead end 2 has no variant and no reason" in problem
    assert problem.startswith(f"{repo / 'repros' / CUDNN / 'entry.yaml'}:")
    assert "triage.yaml:6" in problem  # where its reason would go: the entry's triage row
    assert main(["--repo", str(repo), "check"]) == 2
    assert "dead end 2 has no variant and no reason" in capsys.readouterr().out


def test_a_reason_for_a_claim_the_document_lacks_fails_check(tmp_path: Path) -> None:
    triage = CUDNN_TRIAGE.replace('ref: "dead end 2"', 'ref: "dead end 3"')
    [result] = check_entries(cudnn_repo(tmp_path, triage) / "repros")
    assert len(result.errors) == 2, result.errors
    assert "the document's dead end 2 has no variant and no reason" in result.errors[0]
    assert "unmeasured names 'dead end 3', which the document of" in result.errors[1]
