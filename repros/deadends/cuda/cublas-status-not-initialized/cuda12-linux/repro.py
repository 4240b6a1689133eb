"""Reproducer: "CUDA error: CUBLAS_STATUS_NOT_INITIALIZED"
(deadends/cuda/cublas-status-not-initialized/cuda12-linux).

cuBLAS makes its handle (cublasCreate) at a process's first matrix product on a device, and
allocates device memory for it outside torch's caching allocator. The baselines make that
first product on a device already full: of live tensors (fill), or of blocks the caching
allocator keeps after the tensors were freed (a long-lived process). Each variant follows one
workaround of https://deadends.dev/cuda/cublas-status-not-initialized/cuda12-linux, in a
process of its own, so that its product is the first. CUDA only: the CPU build has no cuBLAS;
without a GPU every variant is unsupported.

One postcondition: the product equals the same product computed on the host
(product_matches_host).
"""

from __future__ import annotations

import torch
from reprokit import Unsupported

MIB = 1 << 20
HEADROOM_MIB = 1024  # what the smaller "batch" leaves free: ample for a cuBLAS handle


def setup(device, precision):
    """The operands and the product's output on the GPU, made before the device is filled
    (the product then allocates nothing through torch); no product made yet."""
    if precision != "fp32":
        raise Unsupported("a cuBLAS handle's memory does not depend on precision: fp32 only")
    if device != "cuda" or not torch.cuda.is_available():
        raise Unsupported("cuBLAS needs a CUDA device; this cell has none")
    if not hasattr(torch.cuda, "mem_get_info"):
        raise Unsupported("this torch has no torch.cuda.mem_get_info")
    torch.manual_seed(0)
    a, b = torch.randn(64, 32), torch.randn(32, 16)
    return a, b, a.to("cuda"), b.to("cuda"), torch.empty(64, 16, device="cuda")


def _out_of_memory(e):
    return "out of memory" in str(e)


def fill(leave_mib=0):
    """Device memory taken with uint8 tensors, large chunks first, until less than 1 MiB more
    fits (beyond ``leave_mib``, first taken and then released to the driver)."""
    held, chunk = [], 1024 * MIB
    reserve = torch.empty(leave_mib * MIB, dtype=torch.uint8, device="cuda") if leave_mib else None
    while chunk >= MIB:
        try:
            held.append(torch.empty(chunk, dtype=torch.uint8, device="cuda"))
        except RuntimeError as e:  # torch.cuda.OutOfMemoryError derives from RuntimeError
            if not _out_of_memory(e):
                raise
            chunk //= 2
    if reserve is not None:
        del reserve
        torch.cuda.empty_cache()  # the headroom back to the driver, where cuBLAS can have it
    return held


def free_mib():
    return torch.cuda.mem_get_info()[0] / MIB


def product(a, b, ga, gb, out, note):
    got = torch.mm(ga, gb, out=out).cpu()  # the process's first cuBLAS call
    worst = (got - a @ b).abs().max().item()
    return {
        "product_matches_host": {
            "ok": worst <= 1e-4,
            "detail": "max |gpu - host| = %.3g; %s" % (worst, note),
        }
    }


def baseline_full_device(device, precision):
    a, b, ga, gb, out = setup(device, precision)
    held = fill()
    note = "%.0f MiB free of live tensors, %d held" % (free_mib(), len(held))
    return product(a, b, ga, gb, out, note)


def baseline_cached_blocks(device, precision):
    a, b, ga, gb, out = setup(device, precision)
    held = fill()
    del held  # freed tensors: the caching allocator keeps their blocks
    note = "%.0f MiB free, %.0f MiB reserved by the cache" % (
        free_mib(),
        torch.cuda.memory_reserved() / MIB,
    )
    return product(a, b, ga, gb, out, note)


def workaround1_smaller_batch(device, precision):
    a, b, ga, gb, out = setup(device, precision)
    held = fill(leave_mib=HEADROOM_MIB)  # the program takes less of the device
    note = "%.0f MiB free, %d held" % (free_mib(), len(held))
    return product(a, b, ga, gb, out, note)


def workaround3_empty_cache_literal(device, precision):
    a, b, ga, gb, out = setup(device, precision)
    held = fill()
    torch.cuda.empty_cache()  # the tensors are still alive: nothing cached to release
    note = "%.0f MiB free after empty_cache, %d held" % (free_mib(), len(held))
    return product(a, b, ga, gb, out, note)


def workaround3_empty_cache_cached_blocks(device, precision):
    a, b, ga, gb, out = setup(device, precision)
    held = fill()
    del held
    torch.cuda.empty_cache()  # the cached blocks back to the driver
    note = "%.0f MiB free after empty_cache" % free_mib()
    return product(a, b, ga, gb, out, note)


def control_first_product_on_free_device(device, precision):
    a, b, ga, gb, out = setup(device, precision)
    return product(a, b, ga, gb, out, "%.0f MiB free, nothing filled" % free_mib())


VARIANTS = {
    "baseline-full-device": baseline_full_device,
    "baseline-cached-blocks": baseline_cached_blocks,
    "workaround1-smaller-batch": workaround1_smaller_batch,
    "workaround3-empty-cache-literal": workaround3_empty_cache_literal,
    "workaround3-empty-cache-cached-blocks": workaround3_empty_cache_cached_blocks,
    "control-first-product-on-free-device": control_first_product_on_free_device,
}
