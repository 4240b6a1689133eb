"""Reproducer: "CUDA error: operation not permitted when stream is capturing"
(deadends/cuda/cuda-graphs-capture-error/cuda12-a100).

A small model's forward pass captured into a CUDA graph with torch.cuda.graph, after the
side-stream warm-up its documentation asks for. Inside the captured region the baselines do
what capture forbids: a CPU read of a device value (.item(), a stream synchronisation) and a
host tensor copied to the device (a pageable copy that synchronises). Each variant follows one
workaround or dead end of https://deadends.dev/cuda/cuda-graphs-capture-error/cuda12-a100.
CUDA only: graphs exist on no other device; without one every variant is unsupported.

One postcondition: the graph, replayed on new inputs copied into its static input, gives the
eager model's output (output_matches_eager).
"""

from __future__ import annotations

import torch
from reprokit import Unsupported
from torch import nn

WIDTH = 16
REPLAYS = 3
OFFSET = 0.5


def setup(device, precision):
    """The model on the GPU and a static input, or Unsupported where this cell has no graphs."""
    if precision != "fp32":
        raise Unsupported("what capture forbids does not depend on precision: fp32 only")
    if device != "cuda" or not torch.cuda.is_available():
        raise Unsupported("CUDA graphs need a CUDA device; this cell has none")
    if not hasattr(torch.cuda, "graph"):
        raise Unsupported("this torch has no torch.cuda.graph")
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(WIDTH, 32), nn.ReLU(), nn.Linear(32, 4)).to("cuda")
    return model, torch.zeros(8, WIDTH, device="cuda")


def warm_up(body):
    """A few runs of ``body`` on a side stream before capture, as torch.cuda.graph asks."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            body()
    torch.cuda.current_stream().wait_stream(side)


def capture(body, warm=True):
    """``body()`` captured into a CUDAGraph: (graph, its static output). The error the captured
    code raised is raised, not the follow-up error capture_end raises after it."""
    if warm:
        warm_up(body)
    graph = torch.cuda.CUDAGraph()
    first = []
    try:
        with torch.cuda.graph(graph):
            try:
                out = body()
            except Exception as e:
                first.append(e)
                raise
    except Exception:
        if first:
            raise first[0]
        raise
    return graph, out


def matches_eager(got, want):
    """``got``, ``want``: the outputs per input (graph or variant, eager)."""
    if not got or len(got) != len(want):
        return {"ok": False, "detail": "%d outputs for %d inputs" % (len(got), len(want))}
    worst = max((g.float().cpu() - w.float().cpu()).abs().max().item() for g, w in zip(got, want))
    return {
        "ok": worst <= 1e-4,  # inductor's fused kernels may round differently
        "detail": "max |output - eager| = %.3g over %d inputs" % (worst, len(got)),
    }


def inputs():
    gen = torch.Generator().manual_seed(1)
    return [torch.randn(8, WIDTH, generator=gen).to("cuda") for _ in range(REPLAYS)]


def replayed(graph, static_in, static_out, after=None):
    """Each input copied into the static input, the graph replayed, ``after`` applied."""
    outs = []
    for x in inputs():
        static_in.copy_(x)
        graph.replay()
        out = static_out.clone()
        outs.append(after(out) if after is not None else out)
    return outs


def normalised(y):
    return y / y.abs().max().item()


def eager(fn):
    with torch.no_grad():
        return [fn(x) for x in inputs()]


def baseline_sync_in_capture(device, precision):
    model, static_in = setup(device, precision)
    with torch.no_grad():
        graph, out = capture(lambda: normalised(model(static_in)))  # .item() while capturing
        got = replayed(graph, static_in, out)
    return {"output_matches_eager": matches_eager(got, eager(lambda x: normalised(model(x))))}


def baseline_host_tensor_in_capture(device, precision):
    model, static_in = setup(device, precision)

    def body():
        return model(static_in + torch.full((WIDTH,), OFFSET).to("cuda"))  # a host copy

    with torch.no_grad():
        graph, out = capture(body)
        got = replayed(graph, static_in, out)
    return {"output_matches_eager": matches_eager(got, eager(lambda x: model(x + OFFSET)))}


def workaround1_preallocated_input(device, precision):
    model, static_in = setup(device, precision)
    offset = torch.full((WIDTH,), OFFSET, device="cuda")  # allocated before the capture
    with torch.no_grad():
        graph, out = capture(lambda: model(static_in + offset))
        got = replayed(graph, static_in, out)
    return {"output_matches_eager": matches_eager(got, eager(lambda x: model(x + OFFSET)))}


def workaround2_cpu_read_outside(device, precision):
    model, static_in = setup(device, precision)
    with torch.no_grad():
        graph, out = capture(lambda: model(static_in))
        got = replayed(graph, static_in, out, after=normalised)  # .item() after each replay
    return {"output_matches_eager": matches_eager(got, eager(lambda x: normalised(model(x))))}


def workaround3_compile_cudagraph_trees(device, precision):
    model, _ = setup(device, precision)
    if not hasattr(torch, "compiler") or not hasattr(torch.compiler, "cudagraph_mark_step_begin"):
        raise Unsupported("this torch has no torch.compiler.cudagraph_mark_step_begin")
    import torch._inductor.config as inductor_config

    inductor_config.triton.cudagraph_trees = True  # the record's setting

    def fn(x):
        return normalised(model(x))  # the .item() left where it was: a graph break

    compiled = torch.compile(fn, mode="reduce-overhead")
    got = []
    with torch.no_grad():
        for x in inputs():
            torch.compiler.cudagraph_mark_step_begin()
            got.append(compiled(x).clone())  # the next step may overwrite a graph's output
    return {"output_matches_eager": matches_eager(got, eager(fn))}


def control_capture_device_work_only(device, precision):
    model, static_in = setup(device, precision)
    with torch.no_grad():
        graph, out = capture(lambda: model(static_in))
        got = replayed(graph, static_in, out)
    return {"output_matches_eager": matches_eager(got, eager(model))}


VARIANTS = {
    "baseline-sync-in-capture": baseline_sync_in_capture,
    "baseline-host-tensor-in-capture": baseline_host_tensor_in_capture,
    "workaround1-preallocated-input": workaround1_preallocated_input,
    "workaround2-cpu-read-outside": workaround2_cpu_read_outside,
    "workaround3-compile-cudagraph-trees": workaround3_compile_cudagraph_trees,
    "control-capture-device-work-only": control_capture_device_work_only,
}
