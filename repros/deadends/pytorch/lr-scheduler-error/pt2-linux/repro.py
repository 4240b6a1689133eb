"""Reproducer: "ValueError: learning rate scheduler step called at wrong time"
(deadends.dev pytorch/lr-scheduler-error/pt2-linux).

An SGD optimizer with a StepLR schedule meant per epoch (lr 0.1, x0.1 every epoch), and a
OneCycleLR with a fixed number of total steps. The baselines step the scheduler at the
wrong time (before optimizer.step(); past OneCycleLR's total_steps); each variant checks
the learning rate every optimizer step really used against the schedule it meant.
"""

from __future__ import annotations

import warnings

import torch

LR, GAMMA, EPOCHS, BATCHES = 0.1, 0.1, 3, 4


def sgd(device):
    """An SGD optimizer on one parameter, and a training step returning the lr it used."""
    p = torch.nn.Parameter(torch.ones(2, device=device))
    opt = torch.optim.SGD([p], lr=LR)

    def train_step() -> float:
        opt.zero_grad()
        (p * p).sum().backward()
        used = opt.param_groups[0]["lr"]
        opt.step()
        return used

    return opt, train_step


def one_cycle(device, steps) -> dict:
    """OneCycleLR(total_steps=4) stepped after each of ``steps`` optimizer steps."""
    opt, train_step = sgd(device)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=LR, total_steps=4)
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


def step_lr(device, order) -> dict:
    """EPOCHS epochs of a per-epoch StepLR, its step() taken ``order``: "after" the
    optimizer's, "before" it, "checked" (before it, with get_last_lr() compared with the
    intended lr), after "every-batch" of BATCHES, or "never"."""
    opt, train_step = sgd(device)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=GAMMA)
    intended = [LR * GAMMA**e for e in range(EPOCHS)]  # the lr each epoch is meant to use
    used, detected = [], []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for epoch in range(EPOCHS):
            if order in ("before", "checked"):
                sched.step()
                if order == "checked":
                    current = sched.get_last_lr()[0]
                    detected.append(abs(current - intended[epoch]) > 1e-12)
                    print(
                        "epoch %d: get_last_lr() %s, intended %s"
                        % (epoch, current, intended[epoch])
                    )
                used.append(train_step())
            elif order == "every-batch":
                for _ in range(BATCHES):
                    used.append(train_step())
                    sched.step()
            else:
                used.append(train_step())
                if order != "never":
                    sched.step()
    per_epoch = used[::BATCHES] if order == "every-batch" else used
    order_warnings = [
        str(w.message)[:120] for w in caught if "lr_scheduler.step()" in str(w.message)
    ]
    if order == "checked":
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


def baseline_step_before_optimizer(device, precision):
    return step_lr(device, "before")


def baseline_onecycle_past_total_steps(device, precision):
    return one_cycle(device, 6)


def workaround1_step_after_optimizer(device, precision):
    return step_lr(device, "after")


def workaround2_get_last_lr_check(device, precision):
    return step_lr(device, "checked")


def deadend1_step_every_batch(device, precision):
    return step_lr(device, "every-batch")


def deadend2_never_step(device, precision):
    return step_lr(device, "never")


def control_onecycle_within_total_steps(device, precision):
    return one_cycle(device, 4)


VARIANTS = {
    "baseline-step-before-optimizer": baseline_step_before_optimizer,
    "baseline-onecycle-past-total-steps": baseline_onecycle_past_total_steps,
    "workaround1-step-after-optimizer": workaround1_step_after_optimizer,
    "workaround2-get-last-lr-check": workaround2_get_last_lr_check,
    "deadend1-step-every-batch": deadend1_step_every_batch,
    "deadend2-never-step": deadend2_never_step,
    "control-onecycle-within-total-steps": control_onecycle_within_total_steps,
}
