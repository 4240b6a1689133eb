"""deadends/cuda/nccl-init-rank-mismatch: each postcondition made to fail on the real torch
of the test interpreter (the reports of a real one-rank gloo group judged against a world of
two), the CPU twin's refusal, and the CUDA-only variant's precondition on a machine without
CUDA."""

from __future__ import annotations

import pytest

from tests.inenv.test_postconditions import failed, load

ENTRY = "deadends/cuda/nccl-init-rank-mismatch/*"


@pytest.mark.torch
def test_postconditions_fail_on_a_group_smaller_than_asked() -> None:
    m = load(ENTRY)
    assert failed(m.control_rank_in_range("cpu", "fp32")) == set()
    # a real one-rank group's report, judged as if two ranks had been asked for: one never
    # joined and the sum lacks its share
    report = {"rank": 0, "size": 1, "sum": 1.0}
    assert failed(m.group_checks(0, 2, [report])) == {"every_rank_joined", "all_reduce_sum"}
    assert failed(m.group_checks(0, 1, [dict(report, sum=2.0)])) == {"all_reduce_sum"}
    assert failed(m.group_checks(0, 1, [dict(report, rank=1)])) == {"every_rank_joined"}


@pytest.mark.torch
def test_gloo_refuses_the_out_of_range_rank() -> None:
    m = load(ENTRY)
    with pytest.raises(RuntimeError, match="rank < size"):
        m.baseline_rank_out_of_range("cpu", "fp32")


@pytest.mark.torch
def test_cuda_variants_reach_their_precondition_without_cuda() -> None:
    m = load(ENTRY)
    import torch

    if torch.cuda.is_available():
        pytest.skip("the precondition under test is the absence of CUDA")
    for fn in m.VARIANTS.values():
        with pytest.raises(m.Unsupported, match="no CUDA device"):
            fn("cuda", "fp32")
        with pytest.raises(m.Unsupported, match="fp32 only"):
            fn("cpu", "fp16")


@pytest.mark.torch
def test_launch_exited_cleanly_fails_on_a_process_that_exits_nonzero(tmp_path) -> None:
    m = load(ENTRY)
    import subprocess
    import sys

    code = "import sys; sys.stderr.write('ValueError: bad rank\\n'); sys.exit(3)"
    proc = subprocess.Popen([sys.executable, "-c", code], stderr=subprocess.PIPE)
    reports, failures = m._collect(str(tmp_path), [proc])
    assert reports == [] and failures == ["rc 3: ValueError: bad rank"]
    assert failed(m.exit_check(failures)) == {"launch_exited_cleanly"}
