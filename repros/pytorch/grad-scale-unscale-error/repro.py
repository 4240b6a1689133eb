"""Reproducer: "GradScaler unscale_() encountered None gradient" (pytorch/grad-scale-unscale-error).

A tiny model with a submodule that the forward pass never uses, trained with the usual
GradScaler loop (scale -> backward -> unscale_ -> step -> update). The document says
unscale_() raises on the unused parameters' None gradients; each variant applies one of
its workarounds or dead ends.

    python repro.py --list
    python repro.py --variant baseline-unused-submodule --device cpu --precision fp16

Precision: fp32 = no autocast, fp16/bf16 = torch.autocast with that dtype. The GradScaler
is used in every precision: it is what the document is about.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import sys

import torch
from torch import nn

STEPS = 3
LR = 0.1


class Unsupported(Exception):
    """The variant's intent cannot be expressed with this torch on this device."""


VARIANTS = {
    "baseline-unused-submodule": "all parameters in the optimizer, one submodule unused in forward",
    "baseline-no-grad-params-only": "the optimizer holds only the unused submodule's parameters",
    "workaround1-literal": "optimizer built from [p ... if p.requires_grad and p.grad is not None] at construction",
    "workaround1-filter-after-backward": "the same filter, applied after a first backward",
    "workaround2-requires-grad-false": "requires_grad=False on the unused submodule",
    "workaround2-no-grad": "the auxiliary submodule runs under torch.no_grad() in forward",
    "deadend1-requires-grad-true": "requires_grad=True set on every parameter",
    "deadend2-unscale-twice": "scaler.unscale_(optimizer) called twice per step",
    "control-all-params-used": "every parameter used in forward, normal scaler loop",
}


class Net(nn.Module):
    def __init__(self, with_unused: bool = True, aux_under_no_grad: bool = False) -> None:
        super().__init__()
        self.used = nn.Linear(8, 8)
        self.head = nn.Linear(8, 1)
        self.unused = nn.Linear(8, 8) if with_unused else None
        self.aux_under_no_grad = aux_under_no_grad

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.used(x))
        if self.unused is not None and self.aux_under_no_grad:
            with torch.no_grad():  # workaround 2, no_grad reading: computed, but outside the graph
                aux = self.unused(x)
            h = h + 0.1 * aux
        return self.head(h)


# -- capabilities (checked before the behaviour under test) ------------------------------


def autocast_dtype(device: str, precision: str) -> torch.dtype | None:
    if precision == "fp32":
        return None
    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}[precision]
    a = torch.ones(4, 4, device=device)
    try:
        with torch.autocast(device, dtype=dtype):
            produced = torch.mm(a, a).dtype
    except Exception as exc:  # old CPU autocast refuses float16 on entry
        raise Unsupported(
            f"torch.autocast({device!r}, dtype={dtype}) is not available: {exc}"
        ) from exc
    if produced != dtype:
        raise Unsupported(
            f"torch.autocast({device!r}, dtype={dtype}) produced {produced} from torch.mm"
        )
    return dtype


def make_scaler(device: str):
    amp = getattr(torch, "amp", None)
    if amp is not None and hasattr(amp, "GradScaler"):
        scaler = amp.GradScaler(device)
        api = f"torch.amp.GradScaler({device!r})"
    elif device == "cuda":
        scaler = torch.cuda.amp.GradScaler()
        api = "torch.cuda.amp.GradScaler()"
    else:
        raise Unsupported(
            f"no GradScaler for {device!r}: torch.amp.GradScaler is missing and torch.cuda.amp.GradScaler "
            "only scales CUDA tensors"
        )
    if not scaler.is_enabled():
        raise Unsupported(f"{api} disabled itself on {device!r} (scaler.is_enabled() is False)")
    return scaler, api


# -- the training loop ----------------------------------------------------------------


def run(variant: str, device: str = "cpu", precision: str = "fp32") -> dict:
    if variant not in VARIANTS:
        raise ValueError("unknown variant {!r}; known: {}".format(variant, ", ".join(VARIANTS)))
    dtype = autocast_dtype(device, precision)
    scaler, scaler_api = make_scaler(device)

    torch.manual_seed(0)
    model = Net(
        with_unused=variant != "control-all-params-used",
        aux_under_no_grad=variant == "workaround2-no-grad",
    ).to(device)
    x = torch.randn(16, 8, device=device)
    y = torch.randn(16, 1, device=device)

    if variant == "workaround2-requires-grad-false":
        model.unused.requires_grad_(False)
    if variant == "deadend1-requires-grad-true":
        for p in model.parameters():
            p.requires_grad_(True)

    trained = {n: p for n, p in model.named_parameters() if not n.startswith("unused.")}
    if variant == "baseline-no-grad-params-only":
        trained = {}  # nothing in this optimizer can train
    before = {n: p.detach().clone() for n, p in model.named_parameters()}

    def forward_backward() -> float:
        with torch.autocast(device, dtype=dtype) if dtype is not None else contextlib.nullcontext():
            out = model(x)
        loss = ((out.float() - y) ** 2).mean()
        scaler.scale(loss).backward()
        return loss.item()

    optimizer = None
    if variant == "workaround1-literal":
        # exactly as the document writes it; no backward has run yet
        optimizer = torch.optim.SGD(
            [p for p in model.parameters() if p.requires_grad and p.grad is not None], lr=0.01
        )
    elif variant == "baseline-no-grad-params-only":
        optimizer = torch.optim.SGD(model.unused.parameters(), lr=LR)
    elif variant != "workaround1-filter-after-backward":
        optimizer = torch.optim.SGD(model.parameters(), lr=LR)

    losses = []
    scales = []
    for _ in range(STEPS):
        if optimizer is not None:
            optimizer.zero_grad(set_to_none=True)
        losses.append(forward_backward())
        if optimizer is None:  # workaround 1, sensible reading: filter once gradients exist
            kept = [p for p in model.parameters() if p.requires_grad and p.grad is not None]
            optimizer = torch.optim.SGD(kept, lr=LR)
        scales.append(scaler.get_scale())
        scaler.unscale_(optimizer)
        if variant == "deadend2-unscale-twice":
            scaler.unscale_(optimizer)
        scaler.step(optimizer)
        scaler.update()

    none_grads = sorted(n for n, p in model.named_parameters() if p.grad is None)
    moved = {n: (p.detach() - before[n]).abs().max().item() for n, p in trained.items()}
    unused_moved = {
        n: (p.detach() - before[n]).abs().max().item()
        for n, p in model.named_parameters()
        if n.startswith("unused.")
    }
    n_opt = sum(len(g["params"]) for g in optimizer.param_groups)
    return {
        "loss_finite": {"ok": all(math.isfinite(v) for v in losses), "detail": f"losses={losses}"},
        "trained_params_moved": {
            "ok": all(v > 0 for v in moved.values()),
            "detail": f"max |change| per trained parameter: {moved}; unused: {unused_moved}; "
            f"optimizer holds {n_opt} tensors; None grads after the last step: {none_grads}",
        },
        "scaler_active": {
            "ok": scaler.is_enabled(),
            "detail": f"{scaler_api}, scale per step {scales}, autocast dtype {dtype}",
        },
    }


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variant", default="baseline-unused-submodule")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--precision", default="fp16", choices=["fp32", "fp16", "bf16"])
    parser.add_argument("--list", action="store_true", help="list the variants and exit")
    args = parser.parse_args(argv)
    if args.list:
        for name, text in VARIANTS.items():
            print(f"{name:<36} {text}")
        return 0
    print(f"torch {torch.__version__}, variant {args.variant}, {args.device}, {args.precision}")
    try:
        checks = run(args.variant, args.device, args.precision)
    except Unsupported as exc:
        print("UNSUPPORTED:", exc)
        return 2
    except Exception as exc:
        print(f"RAISED {type(exc).__name__}: {exc}")
        return 1
    for name, check in checks.items():
        mark = "ok  " if check["ok"] else "FAIL"
        print(f"{name:<22} {mark}  {check['detail']}")
    return 0 if all(c["ok"] for c in checks.values()) else 3


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
