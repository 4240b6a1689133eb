"""Reproducer: "Expected all tensors to be on the same device, but found at least two devices,
cuda:0 and cpu" (deadends/cuda/tensor-device-mismatch/cuda12-linux).

One training step of a small MLP whose parameters and inputs are not on the same device. On a
CUDA cell the other device is the GPU and torch raises the documented error; on a CPU cell the
meta device stands for the GPU (a device of its own, with no data), and torch refuses the mix
in its own words (entry.yaml `signature.reworded`). Each variant applies one workaround or
dead end of https://deadends.dev/cuda/tensor-device-mismatch/cuda12-linux. Workaround 3 and
its baseline (a tensor made inside forward()) need two real devices: CUDA cells only.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from reprokit import Unsupported, finite, moved
from torch import nn


class Net(nn.Module):
    """An MLP; ``mask`` is how forward() makes a tensor of its own: None (it makes none),
    "default" (torch.ones(n): the CPU, whatever the input's device) or "input" (on x.device)."""

    def __init__(self, mask=None):
        super().__init__()
        self.body = nn.Linear(4, 8)
        self.head = nn.Linear(8, 2)
        self.mask = mask

    def forward(self, x):
        h = torch.relu(self.body(x))
        if self.mask == "default":
            h = h * torch.ones(h.shape[-1])
        elif self.mask == "input":
            h = h * torch.ones(h.shape[-1], device=x.device)
        return self.head(h)


def other_device(device):
    """The device that is not the CPU: cuda on a CUDA cell; meta (checked to run the model
    on its own) on a CPU cell."""
    if device == "cuda":
        return "cuda"
    try:
        Net().to("meta")(torch.ones(2, 4, device="meta"))
    except Exception as exc:
        raise Unsupported(
            "meta tensors cannot run the model in this torch: %s: %s" % (type(exc).__name__, exc)
        )
    # the stand-in must refuse a CPU input where CUDA does, shown on a 2x2 layer of its
    # own: torch 1.13's meta Linear accepts one silently (the step then fails at .item())
    try:
        out = nn.Linear(2, 2).to("meta")(torch.ones(1, 2))
    except RuntimeError:
        return "meta"
    raise Unsupported(
        "this torch's meta Linear accepts a CPU input (it returned a %s tensor): the meta "
        "device cannot stand for a second device here" % out.device
    )


def one_device():
    # the workaround's own line
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def batches():
    """Two batches of 8 samples, made on the CPU as a dataset's tensors are."""
    torch.manual_seed(0)
    x = torch.randn(16, 4)
    y = (x.sum(dim=1) > 0).long()
    return [(x[:8], y[:8]), (x[8:], y[8:])]


def train(model, data, no_grad=False):
    """One SGD step per batch; the losses and whether every parameter moved."""
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    losses = []
    for x, y in data:
        if no_grad:
            with torch.no_grad():
                losses.append(F.cross_entropy(model(x), y).item())
            continue
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    checks = {"loss_finite": finite(losses)}
    if not no_grad:
        checks["params_trained"] = moved(before, dict(model.named_parameters()))
    return checks


def fp32_only(precision):
    if precision != "fp32":
        raise Unsupported("where a tensor lives does not depend on precision: fp32 only")


def baseline_input_on_cpu(device, precision):
    fp32_only(precision)
    torch.manual_seed(0)
    model = Net().to(other_device(device))
    return train(model, batches())


def baseline_forward_made_tensor(device, precision):
    fp32_only(precision)
    torch.manual_seed(0)
    model = Net(mask="default").to(device)
    return train(model, [(x.to(device), y.to(device)) for x, y in batches()])


def workaround1_single_device_variable(device, precision):
    fp32_only(precision)
    target = one_device()
    torch.manual_seed(0)
    model = Net().to(target)
    return train(model, [(x.to(target), y.to(target)) for x, y in batches()])


def workaround2_dataloader_pin_memory(device, precision):
    fp32_only(precision)
    target = one_device()
    x = torch.cat([b[0] for b in batches()])
    y = torch.cat([b[1] for b in batches()])
    loader = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(x, y), batch_size=8, pin_memory=True
    )
    torch.manual_seed(0)
    model = Net().to(target)
    return train(model, ((xb.to(target), yb.to(target)) for xb, yb in loader))


def workaround3_mask_on_input_device(device, precision):
    fp32_only(precision)
    torch.manual_seed(0)
    model = Net(mask="input").to(device)
    return train(model, [(x.to(device), y.to(device)) for x, y in batches()])


def deadend1_model_only_to_device(device, precision):
    fp32_only(precision)
    far = other_device(device)
    torch.manual_seed(0)
    model = Net().cuda() if far == "cuda" else Net().to(far)
    return train(model, batches())


def deadend2_no_grad(device, precision):
    fp32_only(precision)
    torch.manual_seed(0)
    model = Net().to(other_device(device))
    return train(model, batches(), no_grad=True)


def deadend3_numpy_roundtrip_input(device, precision):
    fp32_only(precision)
    torch.manual_seed(0)
    model = Net().to(other_device(device))
    data = [(torch.from_numpy(x.numpy()), torch.from_numpy(y.numpy())) for x, y in batches()]
    return train(model, data)


def deadend3_numpy_roundtrip_all(device, precision):
    fp32_only(precision)
    torch.manual_seed(0)
    model = Net().to(other_device(device))
    with torch.no_grad():
        for p in model.parameters():
            p.data = torch.from_numpy(p.detach().numpy())
    data = [(torch.from_numpy(x.numpy()), torch.from_numpy(y.numpy())) for x, y in batches()]
    return train(model, data)


def control_all_on_one_device(device, precision):
    fp32_only(precision)
    torch.manual_seed(0)
    model = Net().to(device)
    return train(model, [(x.to(device), y.to(device)) for x, y in batches()])


VARIANTS = {
    "baseline-input-on-cpu": baseline_input_on_cpu,
    "baseline-forward-made-tensor": baseline_forward_made_tensor,
    "workaround1-single-device-variable": workaround1_single_device_variable,
    "workaround2-dataloader-pin-memory": workaround2_dataloader_pin_memory,
    "workaround3-mask-on-input-device": workaround3_mask_on_input_device,
    "deadend1-model-only-to-device": deadend1_model_only_to_device,
    "deadend2-no-grad": deadend2_no_grad,
    "deadend3-numpy-roundtrip-input": deadend3_numpy_roundtrip_input,
    "deadend3-numpy-roundtrip-all": deadend3_numpy_roundtrip_all,
    "control-all-on-one-device": control_all_on_one_device,
}
