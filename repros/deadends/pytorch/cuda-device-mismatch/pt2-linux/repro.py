"""Reproducer: "Expected all tensors to be on the same device"
(deadends/pytorch/cuda-device-mismatch/pt2-linux).

A model moved to the CUDA device and an input batch left on the CPU: one training step.
Each variant applies one workaround or dead end of the knowledge-base entry
(https://deadends.dev/pytorch/cuda-device-mismatch/pt2-linux). Written for CUDA cells; the
harness skips them where no CUDA device exists.
"""

from __future__ import annotations

import torch
from reprokit import Unsupported
from torch import nn


def one_step(place) -> dict:
    """``place(model, x, y)`` -> (model, x, y) where the variant puts them; then one step."""
    torch.manual_seed(0)
    model, x, y = place(nn.Linear(8, 2), torch.randn(16, 8), torch.randn(16, 2))
    out = model(x)
    loss = (out - y).pow(2).mean()
    loss.backward()
    return {
        "trained_on_the_gpu": {
            # the cell asks for CUDA: a step that runs elsewhere has given up the GPU
            "ok": out.device.type == "cuda" and model.weight.grad is not None,
            "detail": "output on %s, weight.grad %s"
            % (out.device, "present" if model.weight.grad is not None else "missing"),
        },
        "loss_finite": {"ok": bool(torch.isfinite(loss).item()), "detail": "loss %s" % loss.item()},
    }


def baseline_input_left_on_cpu(device, precision):
    return one_step(lambda model, x, y: (model.to("cuda"), x, y.to("cuda")))


def workaround1_literal_model_device(device, precision):
    def place(model, x, y):
        model = model.to("cuda")
        return model, x.to(model.device), y.to("cuda")  # nn.Module has no .device attribute

    return one_step(place)


def workaround1_parameter_device(device, precision):
    def place(model, x, y):
        model = model.to("cuda")
        return model, x.to(next(model.parameters()).device), y.to("cuda")

    return one_step(place)


def workaround2_one_device_variable(device, precision):
    dev = torch.device("cuda:0")
    return one_step(lambda model, x, y: (model.to(dev), x.to(dev), y.to(dev)))


def deadend1_everything_on_cpu(device, precision):
    return one_step(lambda model, x, y: (model, x, y))


def deadend2_cuda_without_index(device, precision):
    # its documented failure is the wrong GPU of several: the model sits on the GPU the
    # setup gave it (the second), the batch is moved with .cuda(), which takes the current
    # device (the first); on one GPU there is no wrong GPU to take, and an ok would read
    # "the dead end works"
    count = torch.cuda.device_count()
    if count < 2:
        raise Unsupported(
            "dead end 2's failure (the wrong GPU in a multi-GPU setup) needs two CUDA "
            "devices; this machine has %d" % count
        )
    return one_step(lambda model, x, y: (model.to("cuda:1"), x.cuda(), y.cuda()))


def control_both_on_cuda(device, precision):
    def place(model, x, y):
        return (
            model.to("cuda"),
            torch.randn(16, 8, device="cuda"),
            torch.randn(16, 2, device="cuda"),
        )

    return one_step(place)


VARIANTS = {
    "baseline-input-left-on-cpu": baseline_input_left_on_cpu,
    "workaround1-literal-model-device": workaround1_literal_model_device,
    "workaround1-parameter-device": workaround1_parameter_device,
    "workaround2-one-device-variable": workaround2_one_device_variable,
    "deadend1-everything-on-cpu": deadend1_everything_on_cpu,
    "deadend2-cuda-without-index": deadend2_cuda_without_index,
    "control-both-on-cuda": control_both_on_cuda,
}
