"""deadends/cuda/illegal-memory-access/cuda12-linux on the CPU-only torch of the test
interpreter: every variant stops at its precondition, the child interpreter really runs and
reports where its error arose, and the postconditions fail on input that breaks them. Where
Triton is installed, its interpreter (TRITON_INTERPRET=1) runs the gather kernel on CPU
tensors: the kernel the GPU window will compile is checked here."""

from __future__ import annotations

import pytest

from tests.inenv.test_postconditions import failed, load

ENTRY = "deadends/cuda/illegal-memory-access/cuda12-linux"


@pytest.fixture
def repro(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")  # read when the kernel is decorated
    module = load(ENTRY)
    import torch

    if torch.cuda.is_available():
        pytest.skip("these tests are about a machine without CUDA")
    return module


@pytest.mark.torch
def test_every_variant_stops_at_its_precondition_without_cuda(repro) -> None:
    for variant in repro.VARIANTS.values():
        with pytest.raises(repro.Unsupported, match="no CUDA device here"):
            variant("cuda", "fp32")


@pytest.mark.torch
def test_the_child_reports_where_its_error_arose(repro) -> None:
    report, output = repro.in_child({"CUDA_LAUNCH_BLOCKING": "1"})
    assert report["located"] == "setup"  # the CPU build refuses the cuda tensors
    assert "not compiled with CUDA" in report["message"]
    with pytest.raises(repro.ChildError, match="at setup"):
        repro.raise_child_error(report, "CUDA_LAUNCH_BLOCKING=1")


@pytest.mark.torch
def test_error_at_the_launch_fails_where_the_error_arose_elsewhere(repro, monkeypatch) -> None:
    monkeypatch.setattr(repro, "require_cuda_and_triton", lambda: None)
    checks = repro.workaround1_launch_blocking_literal("cuda", "fp32")
    assert failed(checks) == {"error_at_the_launch"}  # it arose at setup, here


@pytest.mark.torch
def test_gathered_fails_for_other_values(repro) -> None:
    import torch

    x = torch.arange(float(repro.N))
    idx = torch.arange(8)
    assert failed(repro.gathered(x[idx] + 1, x, idx)) == {"gathered"}
    assert failed(repro.gathered(x[:3], x, idx)) == {"gathered"}


@pytest.mark.torch
def test_the_kernel_gathers_under_the_triton_interpreter(repro, monkeypatch) -> None:
    pytest.importorskip("triton", reason="Triton is not installed in the test interpreter")
    monkeypatch.setattr(repro, "DEVICE", "cpu")
    monkeypatch.setattr(repro, "require_cuda_and_triton", lambda: None)
    assert failed(repro.control_gather_in_range("cuda", "fp32")) == set()
    assert failed(repro.workaround2_check_indices("cuda", "fp32")) == set()
    monkeypatch.setattr(repro, "FAR", 5)  # an index in range: the check finds nothing
    assert failed(repro.workaround2_check_indices("cuda", "fp32")) == {"bad_index_found"}


@pytest.mark.torch
def test_the_kernel_compiles_for_the_windows_gpu(monkeypatch) -> None:
    pytest.importorskip("triton", reason="Triton is not installed in the test interpreter")
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    repro = load(ENTRY)  # the kernel decorated for the compiler, not the interpreter
    backends = pytest.importorskip("triton.backends.compiler")
    import triton
    from triton.compiler import ASTSource

    # compiled, not run: sm_90 (the H200 of the GPU window); no GPU is needed to compile
    source = ASTSource(
        fn=repro.gather_kernel,
        signature={
            "x_ptr": "*fp32",
            "idx_ptr": "*i64",
            "out_ptr": "*fp32",
            "n": "i32",
            "BLOCK": "constexpr",
        },
        constexprs={"BLOCK": repro.BLOCK},
    )
    ptx = triton.compile(source, target=backends.GPUTarget("cuda", 90, 32)).asm["ptx"]
    assert "ld.global" in ptx
