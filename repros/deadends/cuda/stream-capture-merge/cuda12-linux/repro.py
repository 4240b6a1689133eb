"""Reproducer: "CUDA error: operation failed due to a previous error during capture
(cudaErrorStreamCaptureMerge)" (deadends/cuda/stream-capture-merge/cuda12-linux).

CUDA graph capture with torch.cuda.CUDAGraph: two kernels (y = 2x, z = y + 1) captured,
replayed, and their output checked. The baseline merges two captures: a stream capturing a
second graph waits on an event recorded in the first graph's capture. Each variant applies
one workaround or dead end of https://deadends.dev/cuda/stream-capture-merge/cuda12-linux.
CUDA cells only; a variant whose capture fails runs in a fresh process (entry.yaml isolation).
"""

from __future__ import annotations

import torch
from reprokit import Unsupported

N = 1 << 16


def needs_graphs(precision):
    if precision != "fp32":
        raise Unsupported("stream capture does not depend on precision: fp32 only")
    if not torch.cuda.is_available():
        raise Unsupported("needs a CUDA device: stream capture is CUDA's")
    if not hasattr(torch.cuda, "CUDAGraph"):
        raise Unsupported("torch.cuda.CUDAGraph is missing in torch %s" % torch.__version__)


def inputs():
    x = torch.arange(N, device="cuda", dtype=torch.float32)
    (x * 2 + 1).add_(x)  # the kernels run once before any capture (lazy module loading)
    torch.cuda.synchronize()
    return x


def replayed(graph, x, z):
    """Replay ``graph`` on new input (x += 1 first) and check z == 2x + 1."""
    x.add_(1.0)
    graph.replay()
    torch.cuda.synchronize()
    want = 2 * x + 1
    wrong = int((z != want).sum())
    return {
        "replay_correct": {
            "ok": wrong == 0,
            "detail": "%d of %d outputs differ from 2x + 1 after replay" % (wrong, N),
        }
    }


def capture_on_one_stream(between=None):
    """y = 2x, ``between()``, z = y + 1 in one torch.cuda.graph capture; replayed, checked."""
    x = inputs()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y = x * 2
        if between is not None:
            y = between(y)
        z = y + 1
    return replayed(graph, x, z)


def wait_on_another_capture():
    x = inputs()
    s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
    g1, g2 = torch.cuda.CUDAGraph(), torch.cuda.CUDAGraph()
    done = torch.cuda.Event()
    with torch.cuda.stream(s1):
        g1.capture_begin()
        try:
            y = x * 2
            done.record(s1)
            with torch.cuda.stream(s2):
                g2.capture_begin()
                try:
                    s2.wait_event(done)  # an event of graph 1's capture
                    z = y + 1
                finally:
                    g2.capture_end()
        finally:
            g1.capture_end()
    return replayed(g2, x, z)


def baseline_wait_on_another_capture(device, precision):
    needs_graphs(precision)
    return wait_on_another_capture()


def workaround1_fork_join_root(device, precision):
    needs_graphs(precision)
    x = inputs()
    side = torch.cuda.Stream()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y = x * 2
        root = torch.cuda.current_stream()
        side.wait_stream(root)  # fork from the capturing stream
        with torch.cuda.stream(side):
            z = y + 1
        root.wait_stream(side)  # join back before the capture ends
    return replayed(graph, x, z)


def workaround2_event_sync(device, precision):
    needs_graphs(precision)
    x = inputs()
    side = torch.cuda.Stream()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        root = torch.cuda.current_stream()
        y = x * 2
        ready = torch.cuda.Event()
        ready.record(root)  # where dead end 1 synchronizes the device
        side.wait_event(ready)
        with torch.cuda.stream(side):
            z = y + 1
        root.wait_stream(side)
    return replayed(graph, x, z)


def deadend1_device_synchronize(device, precision):
    needs_graphs(precision)

    def synchronize(y):
        torch.cuda.synchronize()
        return y

    return capture_on_one_stream(between=synchronize)


def deadend2_wait_on_another_capture(device, precision):
    needs_graphs(precision)
    return wait_on_another_capture()


def control_single_stream_capture(device, precision):
    needs_graphs(precision)
    return capture_on_one_stream()


VARIANTS = {
    "baseline-wait-on-another-capture": baseline_wait_on_another_capture,
    "workaround1-fork-join-root": workaround1_fork_join_root,
    "workaround2-event-sync": workaround2_event_sync,
    "deadend1-device-synchronize": deadend1_device_synchronize,
    "deadend2-wait-on-another-capture": deadend2_wait_on_another_capture,
    "control-single-stream-capture": control_single_stream_capture,
}
