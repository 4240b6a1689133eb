"""harness/catalogue/gpu_use.py: `check` refuses a CUDA variant that fills or measures the card
and shares the GPU; the committed entries declare each one."""

from __future__ import annotations

from pathlib import Path

from harness.catalogue.check import check_entry
from harness.catalogue.gpu_use import card_uses
from harness.spec.entries import load_entries, load_entry
from tests.paths import REPO
from tests.spec.test_entries import GOOD, make

KIT = REPO / "repros" / "reprokit.py"
# a baseline that sizes its tensor from the free memory through a helper of its own, and a
# control that only computes
REPRO = """\
import torch

from reprokit import on_capped_card


def free_bytes():
    return torch.cuda.mem_get_info()[0]


def baseline(device, precision):
    torch.empty(free_bytes() // 2, dtype=torch.uint8, device=device)
    return {}


def capped(device, precision):
    return on_capped_card(lambda: None, lambda card: {}, 2)


def control(device, precision):
    return {"ran": {"ok": bool(torch.ones(1, device=device).sum()), "detail": ""}}


VARIANTS = {"baseline": baseline, "control": control}
"""


def test_a_variant_that_reads_the_free_memory_through_its_own_helper_is_found(
    tmp_path: Path,
) -> None:
    e = load_entry(make(tmp_path, GOOD, repro=REPRO), tmp_path)
    [use] = card_uses(e, e.variant("baseline"), KIT)
    assert use.calls == ("mem_get_info",) and use.what == "reads the device's free memory"
    assert use.where == f"{e.repro}:7"
    assert card_uses(e, e.variant("control"), KIT) == []


def entry_dir(tmp_path: Path, text: str) -> Path:
    d = make(tmp_path, text, repro=REPRO)
    (d / "document.md").write_text(
        "".join(
            f"<!-- harness:{b}:begin --><!-- harness:{b}:end -->\n"
            for b in ("measured-versions", "measured-rates", "verification")
        )
    )
    return d


def test_check_refuses_it_until_it_says_gpu_exclusive(tmp_path: Path) -> None:
    d = entry_dir(tmp_path, GOOD)
    result = check_entry(d, tmp_path)
    [problem] = result.errors
    assert problem.startswith(f"{d / 'entry.yaml'}:4: variant 'baseline' runs on cuda")
    assert "reads the device's free memory (mem_get_info" in problem
    assert "Declare gpu: exclusive" in problem
    declared = GOOD.replace('description: "raises"}', 'description: "raises", gpu: exclusive}')
    assert check_entry(entry_dir(tmp_path, declared), tmp_path).errors == []


def test_reprokit_s_capped_card_is_followed_into_the_kit(tmp_path: Path) -> None:
    repro = REPRO.replace('{"baseline": baseline,', '{"baseline": capped,')
    e = load_entry(make(tmp_path, GOOD, repro=repro), tmp_path)
    uses = card_uses(e, e.variant("baseline"), KIT)
    assert uses[0].calls == ("on_capped_card",) and uses[0].where == f"{e.repro}:16"
    assert "measures the peak memory" in [u.what for u in uses]  # inside the kit's helper


def test_a_cpu_only_variant_takes_nothing_of_the_card(tmp_path: Path) -> None:
    text = GOOD.replace('description: "raises"}', 'description: "raises", devices: [cpu]}')
    e = load_entry(make(tmp_path, text, repro=REPRO), tmp_path)
    assert card_uses(e, e.variant("baseline"), KIT) == []


def test_every_committed_cuda_variant_that_fills_or_measures_the_card_is_exclusive() -> None:
    found = {
        (e.id, v.name)
        for e in load_entries(REPO / "repros")
        for v in e.variants
        if card_uses(e, v, KIT)
    }
    assert (
        "deadends/cuda/cublas-status-not-initialized/cuda12-linux",
        "baseline-full-device",
    ) in found
    assert (
        "deadends/pytorch/cuda-out-of-memory/pytorch2-linux",
        "workaround3-detach-to-cpu",
    ) in found
    assert ("deadends/cuda/cudnn-rnn-backward-error/cuda12-a100", "deadend1-disable-cudnn") in found
    entries = {e.id: e for e in load_entries(REPO / "repros")}
    assert {entries[e].variant(v).gpu for e, v in found} == {"exclusive"}
