"""Reproducer: "CUDA error: the graph update was not performed because it included changes
which violated constraints specific to instantiated graph update
(cudaErrorGraphExecUpdateFailure)" (deadends/cuda/graph-exec-update-failed/cuda12-linux).

An instantiated CUDA graph updated in place (cudaGraphExecUpdate) from a graph of another
shape. torch exposes no graph update, so the reproducer calls the CUDA runtime that torch
itself loaded (ctypes on the libcudart found in this process's mappings) and builds graphs of
memset nodes that write into a torch tensor; a launch then shows what the graph wrote. A
failing runtime call raises CudaError with the runtime's own error string and name, as a
CUDA_CHECK macro prints them. Each variant applies one workaround or dead end of
https://deadends.dev/cuda/graph-exec-update-failed/cuda12-linux. Every variant needs a CUDA
device (entry.yaml: devices [cuda]).
"""

from __future__ import annotations

import ctypes

import torch
from reprokit import Unsupported

ELEMENTS = 256  # int32 elements each memset node writes


class CudaError(RuntimeError):
    """A CUDA runtime call that did not return cudaSuccess."""


class MemsetParams(ctypes.Structure):  # cudaMemsetParams
    _fields_ = [
        ("dst", ctypes.c_void_p),
        ("pitch", ctypes.c_size_t),
        ("value", ctypes.c_uint),
        ("elementSize", ctypes.c_uint),
        ("width", ctypes.c_size_t),
        ("height", ctypes.c_size_t),
    ]


def loaded_cudart():
    """The path of the libcudart this process has mapped (torch's own), or None."""
    with open("/proc/self/maps") as f:
        paths = sorted({ln.split()[-1] for ln in f if "libcudart" in ln and "/" in ln})
    return paths[0] if paths else None


CALLS = (
    "cudaGetErrorString",
    "cudaGetErrorName",
    "cudaRuntimeGetVersion",
    "cudaGraphCreate",
    "cudaGraphAddMemsetNode",
    "cudaGraphInstantiateWithFlags",
    "cudaGraphExecUpdate",
    "cudaGraphExecMemsetNodeSetParams",
    "cudaGraphLaunch",
    "cudaDeviceSynchronize",
)


def bind(lib):
    """Argument types for the calls used (size_t and pointers must not be passed as int)."""
    ptr, out = ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)
    lib.cudaGetErrorString.restype = ctypes.c_char_p
    lib.cudaGetErrorName.restype = ctypes.c_char_p
    lib.cudaGraphCreate.argtypes = [out, ctypes.c_uint]
    lib.cudaGraphAddMemsetNode.argtypes = [
        out,
        ptr,
        out,
        ctypes.c_size_t,
        ctypes.POINTER(MemsetParams),
    ]
    lib.cudaGraphInstantiateWithFlags.argtypes = [out, ptr, ctypes.c_ulonglong]
    lib.cudaGraphExecUpdate.argtypes = [ptr, ptr, ptr]
    lib.cudaGraphExecMemsetNodeSetParams.argtypes = [ptr, ptr, ctypes.POINTER(MemsetParams)]
    lib.cudaGraphLaunch.argtypes = [ptr, ptr]
    return lib


def cudart():
    """Preconditions, then the CUDA runtime torch loaded: a CUDA device, a dynamically
    loaded libcudart of CUDA 12 or later (cudaGraphExecUpdate's current signature)."""
    if not torch.cuda.is_available():
        raise Unsupported("no CUDA device here: CUDA graphs exist only on a device")
    torch.cuda.init()
    torch.zeros(1, device="cuda")  # the primary context, made current
    path = loaded_cudart()
    if path is None:
        raise Unsupported("no libcudart is mapped in this process (torch linked it statically?)")
    lib = ctypes.CDLL(path)
    missing = [name for name in CALLS if not hasattr(lib, name)]
    if missing:
        raise Unsupported("%s lacks %s" % (path, ", ".join(missing)))
    bind(lib)
    version = ctypes.c_int()
    check(lib, lib.cudaRuntimeGetVersion(ctypes.byref(version)), "cudaRuntimeGetVersion")
    if version.value < 12000:
        raise Unsupported(
            "CUDA runtime %d: cudaGraphExecUpdate took other arguments before 12.0" % version.value
        )
    return lib


def check(lib, code, call):
    if code != 0:
        raise CudaError(
            "CUDA error: %s (%s) [%s]"
            % (
                lib.cudaGetErrorString(code).decode(),
                lib.cudaGetErrorName(code).decode(),
                call,
            )
        )


def memset_params(tensor, value):
    return MemsetParams(tensor.data_ptr(), 0, value, 4, tensor.numel(), 1)


def build(lib, tensors, values, chain):
    """A graph of one memset node per tensor (writing values[i] into tensors[i]); the nodes
    in a chain (each after the one before) or independent. Returns (graph, nodes)."""
    graph = ctypes.c_void_p()
    check(lib, lib.cudaGraphCreate(ctypes.byref(graph), 0), "cudaGraphCreate")
    nodes = []
    for tensor, value in zip(tensors, values):
        node = ctypes.c_void_p()
        deps = (ctypes.c_void_p * 1)(nodes[-1]) if (chain and nodes) else None
        count = 1 if deps is not None else 0
        params = memset_params(tensor, value)
        code = lib.cudaGraphAddMemsetNode(
            ctypes.byref(node), graph, deps, count, ctypes.byref(params)
        )
        check(lib, code, "cudaGraphAddMemsetNode")
        nodes.append(node.value)
    return graph, nodes


def instantiate(lib, graph):
    exe = ctypes.c_void_p()
    check(
        lib,
        lib.cudaGraphInstantiateWithFlags(ctypes.byref(exe), graph, ctypes.c_ulonglong(0)),
        "cudaGraphInstantiateWithFlags",
    )
    return exe


def update(lib, exe, graph):
    info = (ctypes.c_char * 64)()  # cudaGraphExecUpdateResultInfo (24 bytes), with room
    check(lib, lib.cudaGraphExecUpdate(exe, graph, ctypes.byref(info)), "cudaGraphExecUpdate")


def launch(lib, exe):
    check(lib, lib.cudaGraphLaunch(exe, None), "cudaGraphLaunch")
    check(lib, lib.cudaDeviceSynchronize(), "cudaDeviceSynchronize")


def tensors(n):
    return [torch.zeros(ELEMENTS, dtype=torch.int32, device="cuda") for _ in range(n)]


def wrote(ts, values):
    """Each tensor holds the value its graph node was last given, in every element."""
    got = [sorted(set(t.cpu().tolist())) for t in ts]
    want = [[v] for v in values]
    return {
        "graph_wrote_values": {
            "ok": got == want,
            "detail": "tensors hold %s; the graph's nodes were given %s" % (got, values),
        }
    }


def baseline_update_more_nodes(device, precision):
    lib = cudart()
    ts = tensors(2)
    first, _ = build(lib, ts[:1], [3], chain=True)
    exe = instantiate(lib, first)
    second, _ = build(lib, ts, [5, 6], chain=True)  # one node more
    update(lib, exe, second)
    launch(lib, exe)
    return wrote(ts, [5, 6])


def workaround1_set_node_params(device, precision):
    lib = cudart()
    ts = tensors(1)
    graph, nodes = build(lib, ts, [3], chain=True)
    exe = instantiate(lib, graph)
    params = memset_params(ts[0], 7)  # only the node's parameter changes
    check(
        lib,
        lib.cudaGraphExecMemsetNodeSetParams(exe, ctypes.c_void_p(nodes[0]), ctypes.byref(params)),
        "cudaGraphExecMemsetNodeSetParams",
    )
    launch(lib, exe)
    return wrote(ts, [7])


def workaround1_update_same_topology(device, precision):
    lib = cudart()
    ts = tensors(2)
    first, _ = build(lib, ts, [3, 4], chain=True)
    exe = instantiate(lib, first)
    second, _ = build(lib, ts, [7, 8], chain=True)  # the same nodes and edges, new values
    update(lib, exe, second)
    launch(lib, exe)
    return wrote(ts, [7, 8])


def workaround2_pool_per_topology(device, precision):
    lib = cudart()
    ts = tensors(2)
    # one instantiated graph per topology, made at start-up
    pool = {n: instantiate(lib, build(lib, ts[:n], [1] * n, chain=True)[0]) for n in (1, 2)}
    wanted, _ = build(lib, ts, [5, 6], chain=True)  # the two-node shape, new values
    exe = pool[2]
    update(lib, exe, wanted)
    launch(lib, exe)
    return wrote(ts, [5, 6])


def deadend2_update_other_edges(device, precision):
    lib = cudart()
    ts = tensors(2)
    first, _ = build(lib, ts, [3, 4], chain=True)
    exe = instantiate(lib, first)
    second, _ = build(lib, ts, [5, 6], chain=False)  # as many nodes, the edge removed
    update(lib, exe, second)
    launch(lib, exe)
    return wrote(ts, [5, 6])


def control_launch_as_built(device, precision):
    lib = cudart()
    ts = tensors(2)
    graph, _ = build(lib, ts, [3, 4], chain=True)
    launch(lib, instantiate(lib, graph))
    return wrote(ts, [3, 4])


VARIANTS = {
    "baseline-update-more-nodes": baseline_update_more_nodes,
    "workaround1-set-node-params": workaround1_set_node_params,
    "workaround1-update-same-topology": workaround1_update_same_topology,
    "workaround2-pool-per-topology": workaround2_pool_per_topology,
    "deadend2-update-other-edges": deadend2_update_other_edges,
    "control-launch-as-built": control_launch_as_built,
}
