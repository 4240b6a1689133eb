"""Reproducer: "CUDA error: invalid pitch argument (cudaErrorInvalidPitchValue)"
(deadends/cuda/invalid-pitch/cuda12-linux).

A 2D device copy (cudaMemcpy2D) between torch tensors' device memory given a pitch the
runtime refuses: narrower than a row, or past the device's largest pitch
(cudaDevAttrMaxPitch). torch exposes no pitched copy, so the reproducer calls the CUDA runtime
that torch itself loaded (ctypes on the libcudart found in this process's mappings); a failing
call raises CudaError with the runtime's own error string and name, as a CUDA_CHECK macro
prints them. Each variant applies one workaround or dead end of
https://deadends.dev/cuda/invalid-pitch/cuda12-linux and compares the rows that arrive with
the rows sent. Every variant needs a CUDA device (entry.yaml: devices [cuda]).
"""

from __future__ import annotations

import ctypes

import torch
from reprokit import Unsupported

ROWS = 2
WIDTH = 256  # bytes per row
D2D = 3  # cudaMemcpyDeviceToDevice
MAX_PITCH_ATTR = 11  # cudaDevAttrMaxPitch


class CudaError(RuntimeError):
    """A CUDA runtime call that did not return cudaSuccess."""


def loaded_cudart():
    """The path of the libcudart this process has mapped (torch's own), or None."""
    with open("/proc/self/maps") as f:
        paths = sorted({ln.split()[-1] for ln in f if "libcudart" in ln and "/" in ln})
    return paths[0] if paths else None


CALLS = (
    "cudaGetErrorString",
    "cudaGetErrorName",
    "cudaMemcpy2D",
    "cudaMemcpy",
    "cudaMallocPitch",
    "cudaFree",
    "cudaDeviceGetAttribute",
)


def bind(lib):
    """Argument types for the calls used (size_t arguments must not be passed as int)."""
    size, ptr = ctypes.c_size_t, ctypes.c_void_p
    lib.cudaGetErrorString.restype = ctypes.c_char_p
    lib.cudaGetErrorName.restype = ctypes.c_char_p
    lib.cudaMemcpy2D.argtypes = [ptr, size, ptr, size, size, size, ctypes.c_int]
    lib.cudaMemcpy.argtypes = [ptr, ptr, size, ctypes.c_int]
    lib.cudaMallocPitch.argtypes = [ctypes.POINTER(ptr), ctypes.POINTER(size), size, size]
    lib.cudaFree.argtypes = [ptr]
    lib.cudaDeviceGetAttribute.argtypes = [ctypes.POINTER(ctypes.c_int), ctypes.c_int, ctypes.c_int]
    return lib


def cudart():
    """Preconditions, then the CUDA runtime torch loaded: a CUDA device and a dynamically
    loaded libcudart."""
    if not torch.cuda.is_available():
        raise Unsupported("no CUDA device here: pitched device copies exist only on a device")
    torch.zeros(1, device="cuda")  # the primary context, made current
    path = loaded_cudart()
    if path is None:
        raise Unsupported("no libcudart is mapped in this process (torch linked it statically?)")
    lib = ctypes.CDLL(path)
    missing = [name for name in CALLS if not hasattr(lib, name)]
    if missing:
        raise Unsupported("%s lacks %s" % (path, ", ".join(missing)))
    return bind(lib)


def check(lib, code, call):
    if code != 0:
        raise CudaError(
            "CUDA error: %s (%s) [%s]"
            % (lib.cudaGetErrorString(code).decode(), lib.cudaGetErrorName(code).decode(), call)
        )


def max_pitch(lib):
    value = ctypes.c_int()
    check(
        lib,
        lib.cudaDeviceGetAttribute(
            ctypes.byref(value), MAX_PITCH_ATTR, torch.cuda.current_device()
        ),
        "cudaDeviceGetAttribute(cudaDevAttrMaxPitch)",
    )
    return value.value


def copy2d(lib, dst, dpitch, src, spitch, width=WIDTH, rows=ROWS):
    torch.cuda.synchronize()  # torch's writes to src done before the runtime's copy
    check(lib, lib.cudaMemcpy2D(dst, dpitch, src, spitch, width, rows, D2D), "cudaMemcpy2D")
    torch.cuda.synchronize()


def rows_of(pitch):
    """ROWS rows of WIDTH known bytes, each starting ``pitch`` bytes after the one before,
    in one uint8 tensor: the tensor and the rows themselves."""
    buf = torch.zeros((ROWS - 1) * pitch + WIDTH, dtype=torch.uint8, device="cuda")
    rows = [
        ((torch.arange(WIDTH, device="cuda") + 7 * r) % 251).to(torch.uint8) for r in range(ROWS)
    ]
    for r, row in enumerate(rows):
        buf[r * pitch : r * pitch + WIDTH] = row
    return buf, rows


def rows_intact(got, sent):
    """Each row read back, in row-major order with the row width, equals the row sent."""
    bad = [
        r for r, row in enumerate(sent) if r >= len(got) or not torch.equal(got[r].cpu(), row.cpu())
    ]
    return {
        "rows_intact": {
            "ok": len(got) == len(sent) and not bad,
            "detail": "%d rows back, rows that differ from those sent: %s" % (len(got), bad),
        }
    }


def row_major(flat, width=WIDTH):
    return [flat[r * width : (r + 1) * width] for r in range(ROWS)]


def baseline_pitch_narrower_than_row(device, precision):
    lib = cudart()
    src, sent = rows_of(WIDTH)
    dst = torch.zeros(ROWS * WIDTH, dtype=torch.uint8, device="cuda")
    copy2d(lib, dst.data_ptr(), WIDTH - 4, src.data_ptr(), WIDTH)  # rows 4 bytes too narrow
    return rows_intact(row_major(dst), sent)


def baseline_pitch_past_max(device, precision):
    lib = cudart()
    pitch = max_pitch(lib) + 64  # rows further apart than the device allows a pitch to say
    src, sent = rows_of(pitch)
    dst = torch.zeros(ROWS * WIDTH, dtype=torch.uint8, device="cuda")
    copy2d(lib, dst.data_ptr(), WIDTH, src.data_ptr(), pitch)
    return rows_intact(row_major(dst), sent)


def workaround1_malloc_pitch(device, precision):
    lib = cudart()
    src, sent = rows_of(WIDTH)
    ptr, pitch = ctypes.c_void_p(), ctypes.c_size_t()
    check(
        lib,
        lib.cudaMallocPitch(ctypes.byref(ptr), ctypes.byref(pitch), WIDTH, ROWS),
        "cudaMallocPitch",
    )
    try:
        # the rows into the pitched allocation with the pitch the runtime chose, and back
        copy2d(lib, ptr.value, pitch.value, src.data_ptr(), WIDTH)
        out = torch.zeros(ROWS * WIDTH, dtype=torch.uint8, device="cuda")
        copy2d(lib, out.data_ptr(), WIDTH, ptr.value, pitch.value)
    finally:
        lib.cudaFree(ptr)
    return rows_intact(row_major(out), sent)


def workaround2_1d_row_major(device, precision):
    lib = cudart()
    pitch = max_pitch(lib) + 64
    src, sent = rows_of(pitch)
    out = torch.zeros(ROWS * WIDTH, dtype=torch.uint8, device="cuda")
    torch.cuda.synchronize()
    for r in range(ROWS):  # each row by its own 1D copy, addressed row * row stride
        code = lib.cudaMemcpy(out.data_ptr() + r * WIDTH, src.data_ptr() + r * pitch, WIDTH, D2D)
        check(lib, code, "cudaMemcpy")
    torch.cuda.synchronize()
    return rows_intact(row_major(out), sent)


def workaround3_tile_under_max_pitch(device, precision):
    lib = cudart()
    limit = max_pitch(lib)
    pitch = limit + 64
    src, sent = rows_of(pitch)
    out = torch.zeros(ROWS * WIDTH, dtype=torch.uint8, device="cuda")
    # the rows' stride is past the limit: the copy split into tiles of one row, each tile's
    # own pitch its row width
    for r in range(ROWS):
        copy2d(lib, out.data_ptr() + r * WIDTH, WIDTH, src.data_ptr() + r * pitch, WIDTH, rows=1)
    return rows_intact(row_major(out), sent)


def deadend1_pitch_exactly_row_width(device, precision):
    lib = cudart()
    src, sent = rows_of(WIDTH)
    width = WIDTH - 1  # an odd row width, no alignment padding
    dst = torch.zeros(ROWS * width, dtype=torch.uint8, device="cuda")
    copy2d(lib, dst.data_ptr(), width, src.data_ptr(), WIDTH, width=width)
    return rows_intact(row_major(dst, width), [row[:width] for row in sent])


def deadend2_wrong_pitch_1d(device, precision):
    lib = cudart()
    src, sent = rows_of(WIDTH)
    assumed = WIDTH + 32  # the pitch the 2D offsets assume: padded rows
    flat = torch.zeros((ROWS - 1) * assumed + WIDTH, dtype=torch.uint8, device="cuda")
    copy2d(lib, flat.data_ptr(), assumed, src.data_ptr(), WIDTH)
    return rows_intact(row_major(flat), sent)  # read back with the real row width


def control_pitch_equal_to_row(device, precision):
    lib = cudart()
    src, sent = rows_of(WIDTH)
    dst = torch.zeros(ROWS * WIDTH, dtype=torch.uint8, device="cuda")
    copy2d(lib, dst.data_ptr(), WIDTH, src.data_ptr(), WIDTH)
    return rows_intact(row_major(dst), sent)


VARIANTS = {
    "baseline-pitch-narrower-than-row": baseline_pitch_narrower_than_row,
    "baseline-pitch-past-max": baseline_pitch_past_max,
    "workaround1-malloc-pitch": workaround1_malloc_pitch,
    "workaround2-1d-row-major": workaround2_1d_row_major,
    "workaround3-tile-under-max-pitch": workaround3_tile_under_max_pitch,
    "deadend1-pitch-exactly-row-width": deadend1_pitch_exactly_row_width,
    "deadend2-wrong-pitch-1d": deadend2_wrong_pitch_1d,
    "control-pitch-equal-to-row": control_pitch_equal_to_row,
}
