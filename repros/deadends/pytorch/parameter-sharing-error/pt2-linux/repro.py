"""Reproducer: "RuntimeError: shared parameter found with different gradients"
(deadends.dev pytorch/parameter-sharing-error/pt2-linux).

A tiny language-model head with tied weights: the output projection shares the
embedding's weight (one Parameter in two modules). The baselines hand that Parameter to
the optimizer twice; each variant takes one SGD step and checks that it equals the
step computed by hand (w - lr * grad, the gradient summed over both uses) and that the
weights are still tied where tying is meant.
"""

from __future__ import annotations

import warnings

import torch
from torch import nn

LR = 0.5


class TiedLM(nn.Module):
    def __init__(self, tie: str) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.embedding = nn.Embedding(10, 4)
        self.head = nn.Linear(4, 10, bias=False)
        if tie == "assign":
            self.head.weight = self.embedding.weight
        elif tie == "clone":
            self.head.weight = nn.Parameter(self.embedding.weight.detach().clone())

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.head(self.embedding(ids))


def listed_twice(model):
    return list(model.embedding.parameters()) + list(model.head.parameters())


def one_step(
    device, tie="assign", optimizer=lambda model: torch.optim.SGD(model.parameters(), lr=LR)
):
    """One SGD step of TiedLM(tie) with ``optimizer(model)``, against w - lr * grad."""
    model = TiedLM(tie).to(device)
    opt = optimizer(model)
    ids = torch.tensor([1, 2, 3, 2], device=device)
    target = torch.tensor([2, 3, 4, 1], device=device)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    opt.zero_grad()
    nn.functional.cross_entropy(model(ids), target).backward()
    grads = {n: p.grad.detach().clone() for n, p in model.named_parameters()}
    opt.step()
    expected = {n: before[n] - LR * grads[n] for n in before}
    after = dict(model.named_parameters())
    errors = {n: (after[n].detach() - expected[n]).abs().max().item() for n in expected}
    held = sum(len(g["params"]) for g in opt.param_groups)
    checks = {
        "one_sgd_step": {
            "ok": all(e < 1e-6 for e in errors.values()),
            "detail": "max |w - (w0 - lr*grad)| per parameter %s; the optimizer holds %d tensors for %d distinct parameters"
            % (errors, held, len(list(model.parameters()))),
        }
    }
    if tie != "none":  # the control shares nothing: one_sgd_step is all it answers for
        tied = model.head.weight is model.embedding.weight
        checks["still_tied"] = {
            "ok": tied or bool(torch.equal(model.head.weight, model.embedding.weight)),
            "detail": "head.weight is embedding.weight: %s; max |difference| %s"
            % (tied, (model.head.weight - model.embedding.weight).abs().max().item()),
        }
    return checks


def baseline_tied_listed_twice(device, precision):
    return one_step(device, optimizer=lambda model: torch.optim.SGD(listed_twice(model), lr=LR))


def baseline_tied_in_two_groups(device, precision):
    def two_groups(model):
        return torch.optim.SGD(
            [{"params": model.embedding.parameters()}, {"params": model.head.parameters()}], lr=LR
        )

    return one_step(device, optimizer=two_groups)


def workaround1_tie_by_assignment(device, precision):
    # "decoder.weight = encoder.weight" applied to the first baseline, which already ties
    # that way: the tie by assignment, the baseline's optimizer kept as it is (handing the
    # optimizer only unique parameters, model.parameters() or set(), is workaround 2)
    return one_step(
        device, "assign", optimizer=lambda model: torch.optim.SGD(listed_twice(model), lr=LR)
    )


def workaround2_set_of_parameters(device, precision):
    return one_step(
        device, optimizer=lambda model: torch.optim.SGD(set(listed_twice(model)), lr=LR)
    )


def deadend1_clone_shared(device, precision):
    return one_step(device, "clone")


def deadend2_ignore_warnings(device, precision):
    def warnings_ignored(model):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return torch.optim.SGD(listed_twice(model), lr=LR)

    return one_step(device, optimizer=warnings_ignored)


def control_untied(device, precision):
    return one_step(device, "none")


VARIANTS = {
    "baseline-tied-listed-twice": baseline_tied_listed_twice,
    "baseline-tied-in-two-groups": baseline_tied_in_two_groups,
    "workaround1-tie-by-assignment": workaround1_tie_by_assignment,
    "workaround2-set-of-parameters": workaround2_set_of_parameters,
    "deadend1-clone-shared": deadend1_clone_shared,
    "deadend2-ignore-warnings": deadend2_ignore_warnings,
    "control-untied": control_untied,
}
