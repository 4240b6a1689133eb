"""Reproducer: "RuntimeError: shared parameter found with different gradients"
(deadends.dev pytorch/parameter-sharing-error/pt2-linux).

A tiny language-model head with tied weights: the output projection shares the
embedding's weight (one Parameter in two modules). The baselines hand that Parameter to
the optimizer twice; each variant takes one SGD step and checks that it equals the
step computed by hand (w - lr * grad, the gradient summed over both uses) and that the
weights are still tied where tying is meant.

    python repro.py --list
    python repro.py --variant baseline-tied-listed-twice --device cpu --precision fp32
"""

from __future__ import annotations

import sys
import warnings
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
    "baseline-tied-listed-twice": "SGD(list(embedding.parameters()) + list(head.parameters())): the tied weight twice in one group",
    "baseline-tied-in-two-groups": "the embedding and the head in two parameter groups (the tied weight in both)",
    "workaround1-tie-by-assignment": "head.weight = embedding.weight, optimizer over model.parameters()",
    "workaround2-set-of-parameters": "the baseline's list de-duplicated with set(...) before SGD",
    "deadend1-clone-shared": "head.weight = nn.Parameter(embedding.weight.clone()): untied copies",
    "deadend2-ignore-warnings": "the baseline's optimizer built with every warning ignored",
    "control-untied": "no sharing: separate embedding and head weights, model.parameters()",
}
NOT_WRITTEN: list[str] = []
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


def run(variant: str, device: str = "cpu", precision: str = "fp32") -> dict:
    check_variant(variant, VARIANTS, NOT_WRITTEN)
    tie = {"deadend1-clone-shared": "clone", "control-untied": "none"}.get(variant, "assign")
    model = TiedLM(tie).to(device)
    shared = tie == "assign"
    twice = list(model.embedding.parameters()) + list(model.head.parameters())
    if variant in ("baseline-tied-listed-twice",):
        opt = torch.optim.SGD(twice, lr=LR)
    elif variant == "deadend2-ignore-warnings":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            opt = torch.optim.SGD(twice, lr=LR)
    elif variant == "baseline-tied-in-two-groups":
        opt = torch.optim.SGD(
            [{"params": model.embedding.parameters()}, {"params": model.head.parameters()}], lr=LR
        )
    elif variant == "workaround2-set-of-parameters":
        opt = torch.optim.SGD(set(twice), lr=LR)
    else:
        opt = torch.optim.SGD(model.parameters(), lr=LR)

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
    if variant != "control-untied":
        tied = model.head.weight is model.embedding.weight
        checks["still_tied"] = {
            "ok": tied or bool(torch.equal(model.head.weight, model.embedding.weight)),
            "detail": "head.weight is embedding.weight: %s; max |difference| %s"
            % (tied, (model.head.weight - model.embedding.weight).abs().max().item()),
        }
    if shared is False and variant == "control-untied":
        checks["separate"] = {
            "ok": model.head.weight is not model.embedding.weight,
            "detail": "the control's head and embedding are distinct parameters",
        }
    return checks


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
