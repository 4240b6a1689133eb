"""Reproducer: "Expected all tensors to be on the same device, but found at least two devices,
cuda:0 and cpu" (deadends/pytorch/device-mismatch/pytorch2-linux).

A classifier on the CUDA device given a batch left on the CPU, or trained with a class-weighted
loss whose weight tensor stayed on the CPU. Each variant applies one workaround or dead end of
the knowledge-base entry (https://deadends.dev/pytorch/device-mismatch/pytorch2-linux). Written
for CUDA cells (skipped where no CUDA device exists); dead end 2 also runs in CPU cells, where
its stated failure (code that hard-codes .cuda() breaks on a CPU-only machine) can show.
"""

from __future__ import annotations

import torch
from torch import nn


def one_step(
    device,
    move_x=True,
    move_criterion=True,
    create_on_device=False,
    cuda_calls=False,
    check=None,
    fix_criterion=None,
) -> dict:
    """One step of a classifier moved to the cell's device with .to(device): the batch
    (``move_x``) and the weighted criterion (``move_criterion``) too, or every tensor made
    there (``create_on_device``), or everything moved with .cuda() instead (``cuda_calls``);
    then, before the forward, ``check(model, x)`` -> the batch and
    ``fix_criterion(criterion)`` -> the criterion (what a workaround adds to a baseline)."""
    dev = torch.device(device)
    torch.manual_seed(0)
    model = nn.Linear(8, 3)
    x = torch.randn(16, 8)
    labels = torch.randint(0, 3, (16,))
    weight = torch.tensor([1.0, 2.0, 0.5])
    if create_on_device:
        x = torch.randn(16, 8, device=dev)
        labels = torch.randint(0, 3, (16,), device=dev)
        weight = torch.tensor([1.0, 2.0, 0.5], device=dev)
    criterion = nn.CrossEntropyLoss(weight=weight)
    if cuda_calls:
        model, x, labels, criterion = model.cuda(), x.cuda(), labels.cuda(), criterion.cuda()
    else:
        model = model.to(dev)
        if move_x:
            x = x.to(dev)
        labels = labels.to(dev)
        if move_criterion:
            criterion = criterion.to(dev)
    if check is not None:
        x = check(model, x)
    if fix_criterion is not None:
        criterion = fix_criterion(criterion)
    out = model(x)
    loss = criterion(out, labels)
    loss.backward()
    return {
        "trained_on_the_cells_device": {
            "ok": out.device.type == dev.type and model.weight.grad is not None,
            "detail": "output on %s (cell: %s), weight.grad %s"
            % (out.device, device, "present" if model.weight.grad is not None else "missing"),
        },
        "loss_finite": {"ok": bool(torch.isfinite(loss).item()), "detail": "loss %s" % loss.item()},
    }


def baseline_input_left_on_cpu(device, precision):
    return one_step(device, move_x=False)


def baseline_loss_weight_on_cpu(device, precision):
    return one_step(device, move_criterion=False)


def workaround1_device_variable(device, precision):
    # the record's line added to the first baseline's code: one device variable, chosen as
    # the record writes it, and the batch the baseline left behind moved with it
    chosen = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return one_step(device, move_x=False, check=lambda model, x: x.to(chosen))


def workaround2_literal_check_only(device, precision):
    def assert_same_device(model, x):
        model_dev = next(model.parameters()).device
        assert x.device == model_dev, "batch on %s, model on %s" % (x.device, model_dev)
        return x

    return one_step(device, move_x=False, check=assert_same_device)


def workaround2_check_then_move(device, precision):
    def move_when_apart(model, x):
        model_dev = next(model.parameters()).device
        return x.to(model_dev) if x.device != model_dev else x

    return one_step(device, move_x=False, check=move_when_apart)


def workaround3_loss_to_device(device, precision):
    # the second baseline's code, its criterion (the class weights it holds) then moved to
    # the model's device before the loss
    def criterion_to_model_device(criterion):
        return criterion.to(torch.device(device))

    return one_step(device, move_criterion=False, fix_criterion=criterion_to_model_device)


def deadend1_create_on_gpu(device, precision):
    return one_step(device, create_on_device=True)


def deadend2_cuda_everywhere(device, precision):
    return one_step(device, cuda_calls=True)


def control_all_on_device(device, precision):
    return one_step(device)


VARIANTS = {
    "baseline-input-left-on-cpu": baseline_input_left_on_cpu,
    "baseline-loss-weight-on-cpu": baseline_loss_weight_on_cpu,
    "workaround1-device-variable": workaround1_device_variable,
    "workaround2-literal-check-only": workaround2_literal_check_only,
    "workaround2-check-then-move": workaround2_check_then_move,
    "workaround3-loss-to-device": workaround3_loss_to_device,
    "deadend1-create-on-gpu": deadend1_create_on_gpu,
    "deadend2-cuda-everywhere": deadend2_cuda_everywhere,
    "control-all-on-device": control_all_on_device,
}
