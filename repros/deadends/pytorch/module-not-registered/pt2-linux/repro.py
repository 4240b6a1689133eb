"""Reproducer: "Module is not registered as a submodule"
(deadends.dev pytorch/module-not-registered/pt2-linux).

A small MLP keeps its hidden layers in a plain Python list or dict (the documented
cause), gains one more hidden layer after construction (as a model that grows does), then
trains one SGD step over model.parameters(). Every variant checks that each
layer's parameters are among model.parameters() and in the state_dict, and that one
step moved every layer, so silently untrained layers are `wrong_result`.
"""

from __future__ import annotations

import copy

import torch
from torch import nn


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

    def grow(self) -> None:
        """A hidden layer added after construction (a model that grows, as a dynamic
        architecture does), stored the way this model stores its hidden layers."""
        layer = nn.Linear(8, 8)
        how = self.how
        if how in ("list", "all-list"):
            self.hidden.insert(len(self.hidden) - (how == "all-list"), layer)
        elif how in ("dict", "moduledict"):
            self.hidden["h2"] = layer
        elif how in ("modulelist", "__dict__"):
            self.hidden.append(layer)
        elif how == "add_module":
            # registered by hand in __init__ only: a layer added later is not
            self.__dict__.setdefault("grown", []).append(layer)
        else:
            self.h2 = layer
        self.layers.insert(len(self.layers) - 1, layer)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers[:-1]:
            x = torch.relu(layer(x))
        return self.layers[-1](x)


def train_step(device, how) -> dict:
    """One SGD step of MLP(how) over model.parameters()."""
    model = MLP(how)
    model.grow()
    # model.to() reaches the layers it knows: on a copy, to float64, a move that can be seen
    # on any device (a move to the CPU it is already on cannot)
    copied = copy.deepcopy(model).to(torch.float64)
    followed = [str(layer.weight.dtype) for layer in copied.__dict__["layers"]]
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
        "all_layers_follow_model_to": {
            "ok": all(d.startswith(device) for d in on_device)
            and all(d == "torch.float64" for d in followed),
            "detail": "layer devices after model.to(%r): %s; dtypes after .to(torch.float64): %s"
            % (device, on_device, followed),
        },
    }


def baseline_plain_list(device, precision):
    return train_step(device, "list")


def baseline_plain_dict(device, precision):
    return train_step(device, "dict")


def baseline_all_in_list(device, precision):
    return train_step(device, "all-list")


def workaround1_modulelist(device, precision):
    return train_step(device, "modulelist")


def workaround2_moduledict(device, precision):
    return train_step(device, "moduledict")


def deadend1_register_manually(device, precision):
    return train_step(device, "add_module")


def deadend2_self_dict(device, precision):
    return train_step(device, "__dict__")


def control_attributes(device, precision):
    return train_step(device, "attributes")


VARIANTS = {
    "baseline-plain-list": baseline_plain_list,
    "baseline-plain-dict": baseline_plain_dict,
    "baseline-all-in-list": baseline_all_in_list,
    "workaround1-modulelist": workaround1_modulelist,
    "workaround2-moduledict": workaround2_moduledict,
    "deadend1-register-manually": deadend1_register_manually,
    "deadend2-self-dict": deadend2_self_dict,
    "control-attributes": control_attributes,
}
