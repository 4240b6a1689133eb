"""Reproducer: "Module is not registered as a submodule"
(deadends.dev pytorch/module-not-registered/pt2-linux).

A small MLP keeps its hidden layers in a plain Python list or dict (the documented
cause), then trains one SGD step over model.parameters(). Every variant checks that each
layer's parameters are among model.parameters() and in the state_dict, and that one
step moved every layer, so silently untrained layers are `wrong_result`.

    python repro.py --list
    python repro.py --variant baseline-plain-list --device cpu --precision fp32
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from torch import nn

# reprokit:begin (the shared helpers, repros/reprokit.py; `harness export` inlines them)
sys.path.insert(
    0, next(str(d) for d in Path(__file__).resolve().parents if (d / "reprokit.py").is_file())
)
from reprokit import check_variant, main  # noqa: E402

# reprokit:end

VARIANTS = {
    "baseline-plain-list": "hidden layers in a plain Python list, the output layer an attribute",
    "baseline-plain-dict": "hidden layers in a plain Python dict, the output layer an attribute",
    "baseline-all-in-list": "every layer in a plain Python list (the model has no registered parameter)",
    "workaround1-modulelist": "hidden layers in nn.ModuleList",
    "workaround2-moduledict": "hidden layers in nn.ModuleDict",
    "deadend1-register-manually": "each hidden layer registered in __init__ with self.add_module(name, layer)",
    "deadend2-self-dict": "hidden layers stored with self.__dict__['hidden'] = nn.ModuleList(...)",
    "control-attributes": "each layer an ordinary attribute",
}
NOT_WRITTEN: list[str] = []


class MLP(nn.Module):
    def __init__(self, how: str) -> None:
        super().__init__()
        torch.manual_seed(0)
        hidden = [nn.Linear(4, 8), nn.Linear(8, 8)]
        self.how = how
        if how == "list":
            self.hidden = hidden
        elif how == "dict":
            self.hidden = {"h0": hidden[0], "h1": hidden[1]}
        elif how == "modulelist":
            self.hidden = nn.ModuleList(hidden)
        elif how == "moduledict":
            self.hidden = nn.ModuleDict({"h0": hidden[0], "h1": hidden[1]})
        elif how == "add_module":
            for i, layer in enumerate(hidden):
                self.add_module("h%d" % i, layer)
        elif how == "all-list":
            pass  # the output layer joins the list below
        elif how == "__dict__":
            self.__dict__["hidden"] = nn.ModuleList(hidden)
        else:
            self.h0, self.h1 = hidden
        out = nn.Linear(8, 2)
        if how == "all-list":
            self.hidden = hidden + [out]
        else:
            self.out = out
        self.layers = hidden + [out]  # plain list for the checks: not registered by itself

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers[:-1]:
            x = torch.relu(layer(x))
        return self.layers[-1](x)


def run(variant: str, device: str = "cpu", precision: str = "fp32") -> dict:
    check_variant(variant, VARIANTS, NOT_WRITTEN)
    how = {
        "baseline-plain-list": "list",
        "baseline-plain-dict": "dict",
        "baseline-all-in-list": "all-list",
        "workaround1-modulelist": "modulelist",
        "workaround2-moduledict": "moduledict",
        "deadend1-register-manually": "add_module",
        "deadend2-self-dict": "__dict__",
        "control-attributes": "attributes",
    }[variant]
    model = MLP(how)
    model.to(device)
    layers = model.__dict__["layers"]
    registered = {id(p) for p in model.parameters()}
    unregistered = [
        i
        for i, layer in enumerate(layers)
        if any(id(p) not in registered for p in layer.parameters())
    ]
    on_device = [str(layer.weight.device) for layer in layers]
    before = [layer.weight.detach().clone() for layer in layers]
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(16, 4, generator=torch.Generator().manual_seed(1)).to(device)
    y = torch.randn(16, 2, generator=torch.Generator().manual_seed(2)).to(device)
    opt.zero_grad()
    ((model(x) - y) ** 2).mean().backward()
    opt.step()
    still = [
        i
        for i, (layer, b) in enumerate(zip(layers, before))
        if torch.equal(layer.weight.detach(), b)
    ]  # noqa: B905
    return {
        "all_layers_registered": {
            "ok": not unregistered,
            "detail": "layers whose parameters model.parameters() misses: %s of %d; state_dict keys %s"
            % (unregistered, len(layers), sorted(model.state_dict())),
        },
        "all_layers_trained": {
            "ok": not still,
            "detail": "layers one SGD step left unchanged: %s" % still,
        },
        "all_layers_moved_to_device": {
            "ok": all(d.startswith(device) for d in on_device),
            "detail": "layer devices after model.to(%r): %s" % (device, on_device),
        },
    }


if __name__ == "__main__":
    sys.exit(
        main(
            run,
            VARIANTS,
            __doc__,
            sys.argv[1:],
            not_written=NOT_WRITTEN,
            fixed_precision={v: "fp32" for v in VARIANTS},
        )
    )
