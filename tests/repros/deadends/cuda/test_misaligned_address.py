"""deadends/cuda/misaligned-address/cuda12-linux on the CPU-only torch of the test
interpreter: every variant stops at its precondition, the child interpreter really runs and
reports where its error arose, and the postconditions fail on input that breaks them. Where
Triton is installed, its interpreter (TRITON_INTERPRET=1) runs the kernel on CPU tensors,
where unaligned words are read without a fault: the CPU has no twin of this error."""

from __future__ import annotations

import pytest

from tests.inenv.test_postconditions import failed, load

ENTRY = "deadends/cuda/misaligned-address/cuda12-linux"


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
def test_error_at_the_launch_fails_where_the_error_arose_elsewhere(repro, monkeypatch) -> None:
    monkeypatch.setattr(repro, "require_cuda_and_triton", lambda: None)
    checks = repro.workaround1_launch_blocking("cuda", "fp32")
    assert failed(checks) == {"error_at_the_launch"}  # it arose at setup, here


@pytest.mark.torch
def test_the_no_caching_dead_end_raises_its_childs_error(repro, monkeypatch) -> None:
    monkeypatch.setattr(repro, "require_cuda_and_triton", lambda: None)
    with pytest.raises(repro.ChildError, match="at setup.*NO_CUDA_MEMORY_CACHING"):
        repro.deadend2_no_caching_allocator("cuda", "fp32")


@pytest.mark.torch
def test_words_read_fails_for_other_words(repro, monkeypatch) -> None:
    import torch

    monkeypatch.setattr(repro, "DEVICE", "cpu")
    buf = repro.buffer()
    right = buf[1 : 1 + 4 * repro.WORDS].clone().view(torch.int32)
    assert failed(repro.words_read(right, buf, 1)) == set()
    assert failed(repro.words_read(right, buf, 0)) == {"words_read"}  # the other start
    assert failed(repro.words_read(right[:3], buf, 1)) == {"words_read"}


@pytest.mark.torch
def test_the_kernel_reads_under_the_triton_interpreter(repro, monkeypatch) -> None:
    pytest.importorskip("triton", reason="Triton is not installed in the test interpreter")
    monkeypatch.setattr(repro, "DEVICE", "cpu")
    monkeypatch.setattr(repro, "require_cuda_and_triton", lambda: None)
    for name in ("control-aligned-start", "workaround2-long-indices", "baseline-words-at-odd-byte"):
        assert failed(repro.VARIANTS[name]("cuda", "fp32")) == set(), name
    assert failed(repro.workaround3_check_alignment("cuda", "fp32")) == set()
    monkeypatch.setattr(repro, "ODD", 0)  # an aligned start: nothing to find
    assert failed(repro.workaround3_check_alignment("cuda", "fp32")) == {"misalignment_found"}


@pytest.mark.torch
def test_the_kernel_compiles_for_the_windows_gpu_with_word_loads(monkeypatch) -> None:
    pytest.importorskip("triton", reason="Triton is not installed in the test interpreter")
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    repro = load(ENTRY)  # the kernel decorated for the compiler, not the interpreter
    backends = pytest.importorskip("triton.backends.compiler")
    import triton
    from triton.compiler import ASTSource

    # compiled, not run: sm_90 (the H200 of the GPU window); no GPU is needed to compile
    for long in (False, True):
        source = ASTSource(
            fn=repro.words_kernel,
            signature={
                "bytes_ptr": "*u8",
                "out_ptr": "*i32",
                "start": "i32",
                "n": "i32",
                "BLOCK": "constexpr",
                "LONG": "constexpr",
            },
            constexprs={"BLOCK": repro.BLOCK, "LONG": long},
        )
        ptx = triton.compile(source, target=backends.GPUTarget("cuda", 90, 32)).asm["ptx"]
        assert "ld.global.b32" in ptx  # 4-byte word loads: at an odd address, misaligned
