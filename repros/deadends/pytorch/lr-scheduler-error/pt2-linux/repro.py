"""Reproducer: "ValueError: learning rate scheduler step called at wrong time"
(deadends.dev pytorch/lr-scheduler-error/pt2-linux).

An SGD optimizer with a StepLR schedule meant per epoch (lr 0.1, x0.1 every epoch), and a
OneCycleLR with a fixed number of total steps. The baselines step the scheduler at the
wrong time (before optimizer.step(); past OneCycleLR's total_steps); each variant checks
the learning rate every optimizer step really used against the schedule it meant.

    python repro.py --list
    python repro.py --variant baseline-step-before-optimizer --device cpu --precision fp32
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import torch

# reprokit:begin (the shared helpers, repros/reprokit.py; `harness export` inlines them)
sys.path.insert(
    0, next(str(d) for d in Path(__file__).resolve().parents if (d / "reprokit.py").is_file())
)
from reprokit import check_variant, main  # noqa: E402

# reprokit:end

VARIANTS = {
    "baseline-step-before-optimizer": "each epoch: scheduler.step() before optimizer.step()",
    "baseline-onecycle-past-total-steps": "OneCycleLR(total_steps=4) stepped 6 times",
    "workaround1-step-after-optimizer": "each epoch: optimizer.step(), then scheduler.step()",
    "workaround2-get-last-lr-check": "the baseline's order, with get_last_lr() compared with the intended schedule before each optimizer step",
    "deadend1-step-every-batch": "a per-epoch StepLR stepped after every one of 4 batches",
    "deadend2-never-step": "the scheduler is never stepped",
    "control-onecycle-within-total-steps": "OneCycleLR(total_steps=4) stepped 4 times, after optimizer.step()",
}
NOT_WRITTEN: list[str] = []
LR, GAMMA, EPOCHS, BATCHES = 0.1, 0.1, 3, 4


def run(variant: str, device: str = "cpu", precision: str = "fp32") -> dict:
    check_variant(variant, VARIANTS, NOT_WRITTEN)
    p = torch.nn.Parameter(torch.ones(2, device=device))
    opt = torch.optim.SGD([p], lr=LR)

    def train_step() -> float:
        opt.zero_grad()
        (p * p).sum().backward()
        used = opt.param_groups[0]["lr"]
        opt.step()
        return used

    if "onecycle" in variant:
        sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=LR, total_steps=4)
        steps = 6 if variant.startswith("baseline") else 4
        used = []
        for _ in range(steps):
            used.append(train_step())
            sched.step()
        # one cycle: warm up from max_lr/25 to max_lr, then anneal below the start
        return {
            "one_cycle": {
                "ok": len(used) == steps and used[-1] < used[0] < max(used) <= LR + 1e-12,
                "detail": "learning rates used %s over %d steps (max_lr %s)" % (used, steps, LR),
            }
        }

    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=GAMMA)
    intended = [LR * GAMMA**e for e in range(EPOCHS)]  # the lr each epoch is meant to use
    used, detected = [], []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for epoch in range(EPOCHS):
            if variant in ("baseline-step-before-optimizer", "workaround2-get-last-lr-check"):
                sched.step()
                if variant == "workaround2-get-last-lr-check":
                    current = sched.get_last_lr()[0]
                    detected.append(abs(current - intended[epoch]) > 1e-12)
                    print(
                        "epoch %d: get_last_lr() %s, intended %s"
                        % (epoch, current, intended[epoch])
                    )
                used.append(train_step())
            elif variant == "deadend1-step-every-batch":
                for _ in range(BATCHES):
                    used.append(train_step())
                    sched.step()
            else:
                used.append(train_step())
                if variant != "deadend2-never-step":
                    sched.step()
    per_epoch = used[::BATCHES] if variant == "deadend1-step-every-batch" else used
    order_warnings = [
        str(w.message)[:120] for w in caught if "lr_scheduler.step()" in str(w.message)
    ]
    if variant == "workaround2-get-last-lr-check":
        return {
            "detects_wrong_lr": {
                "ok": any(detected),
                "detail": "get_last_lr() differed from the intended lr in epochs %s" % detected,
            }
        }
    return {
        "lr_follows_schedule": {
            "ok": len(per_epoch) == EPOCHS
            and all(abs(u - i) < 1e-12 for u, i in zip(per_epoch, intended)),  # noqa: B905 (Python 3.7)
            "detail": "lr used at the start of each epoch %s, intended %s; warnings about the order: %s"
            % (per_epoch, intended, order_warnings),
        }
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
