"""Helpers every reproducer shares: capability checks, autocast and GradScaler, Lightning
precision preconditions, postconditions that can fail, and the command line.

This file runs inside target environments, next to a torch it did not choose (1.10 to
2.13 and later) on Python 3.7 or newer: standard library and torch/lightning only, no
syntax newer than 3.7 (tests/test_reprokit.py parses it with feature_version=(3, 7)).
A reproducer finds it by walking up from its own folder (see any repros/*/*/repro.py);
`python -m harness export ENTRY --variant V` inlines it into one standalone script.

The contract with the harness (docs/reference/entry-yaml.md has all of it):
- ``VARIANTS``, a module-level dict literal in repro.py, names every variant it implements;
  ``NOT_WRITTEN``, a list literal, names those whose code is still to be written. The host
  reads both with ``ast`` (no torch) and checks them against entry.yaml.
- ``run(variant, device, precision)`` returns its postcondition checks
  ``{name: {"ok": bool, "detail": str}}``; raises ``Unsupported`` (decided before the
  behaviour under test) when the cell cannot express the variant's intent.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import math
import sys

__all__ = [
    "LIGHTNING_PRECISION",
    "LIGHTNING_PRECISION_SHORT",
    "NotWritten",
    "Unsupported",
    "above",
    "at_most",
    "autocast",
    "autocast_dtype",
    "check_fused_adamw",
    "check_variant",
    "describe_plugin",
    "finite",
    "import_lightning",
    "lightning_submodule",
    "main",
    "make_scaler",
    "moved",
    "require_plugin_precision",
    "with_lightning_precision",
]

# the harness precisions -> Lightning's precision flags, as Lightning 2 spells them; and the
# short spelling (precision=16), the only one Lightning 1.8/1.9 take ('16-mixed' there is
# "invalid"; 1.8 wants the number: its '16' ends in "No precision set"), which Lightning 2
# still reads as an alias. with_lightning_precision picks what the installed one takes.
LIGHTNING_PRECISION = {"fp32": "32-true", "fp16": "16-mixed", "bf16": "bf16-mixed"}
LIGHTNING_PRECISION_SHORT = {"fp32": 32, "fp16": 16, "bf16": "bf16"}
# exit codes of main(), for people running a reproducer by hand
EXIT_OK, EXIT_RAISED, EXIT_UNSUPPORTED, EXIT_WRONG, EXIT_NOT_WRITTEN = 0, 1, 2, 3, 4


class Unsupported(Exception):
    """The variant's intent cannot be expressed in this cell (the harness records
    `unsupported` with this message as the reason; it never counts either way)."""


class NotWritten(Exception):
    """The variant is named in the scaffold but its code is not written yet. The harness
    never schedules a variant listed in NOT_WRITTEN; if one is run anyway (its name was
    removed from NOT_WRITTEN without writing its code) the child records `skipped` with
    this reason: never a pass, never an error, never counted."""


def check_variant(variant, variants, not_written=()):
    """The first line of every run(): an unknown name is a ValueError, an unwritten one
    raises NotWritten."""
    if variant not in variants:
        raise ValueError("unknown variant %r; known: %s" % (variant, ", ".join(variants)))
    if variant in not_written:
        raise NotWritten("variant %r is not written yet (listed in NOT_WRITTEN)" % variant)


# -- capabilities: checked before the behaviour under test --------------------------------


def autocast_dtype(device, precision):
    """The autocast dtype for fp16/bf16 (None for fp32), after checking that
    torch.autocast really produces it on this device; Unsupported otherwise."""
    import torch

    if precision == "fp32":
        return None
    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}[precision]
    a = torch.ones(4, 4, device=device)
    try:
        with torch.autocast(device, dtype=dtype):
            produced = torch.mm(a, a).dtype
    except Exception as exc:  # old CPU autocast refuses float16 on entry
        raise Unsupported(
            "torch.autocast(%r, dtype=%s) is not available: %s" % (device, dtype, exc)
        )
    if produced != dtype:
        raise Unsupported(
            "torch.autocast(%r, dtype=%s) produced %s from torch.mm" % (device, dtype, produced)
        )
    return dtype


def autocast(device, dtype):
    """torch.autocast(device, dtype) or, for fp32 (dtype None), a context that does nothing."""
    import torch

    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device, dtype=dtype)


def make_scaler(device):
    """An enabled GradScaler for ``device`` and the API used, or Unsupported."""
    import torch

    amp = getattr(torch, "amp", None)
    if amp is not None and hasattr(amp, "GradScaler"):
        scaler, api = amp.GradScaler(device), "torch.amp.GradScaler(%r)" % device
    elif device == "cuda":
        scaler, api = torch.cuda.amp.GradScaler(), "torch.cuda.amp.GradScaler()"
    else:
        raise Unsupported(
            "no GradScaler for %r: torch.amp.GradScaler is missing and "
            "torch.cuda.amp.GradScaler only scales CUDA tensors" % device
        )
    if not scaler.is_enabled():
        raise Unsupported("%s disabled itself on %r (scaler.is_enabled() is False)" % (api, device))
    return scaler, api


def check_fused_adamw(device, lr=1e-2):
    """Unsupported unless torch.optim.AdamW(fused=True) takes a step on ``device``."""
    import torch

    p = torch.zeros(2, device=device, requires_grad=True)
    try:
        opt = torch.optim.AdamW([p], lr=lr, fused=True)
        p.grad = torch.ones_like(p)
        opt.step()
    except Exception as exc:
        raise Unsupported(
            "torch.optim.AdamW(fused=True) does not work on %r: %s: %s"
            % (device, type(exc).__name__, exc)
        )


# -- Lightning ----------------------------------------------------------------------------


def import_lightning(part):
    """lightning.<part> (the unified package) or its standalone twin
    (lightning_fabric, pytorch_lightning); Unsupported where the release has neither
    (Fabric arrived in lightning 1.9: 1.8 has LightningLite instead)."""
    twin = {"fabric": "lightning_fabric", "pytorch": "pytorch_lightning"}[part]
    try:
        return importlib.import_module("lightning." + part)
    except ImportError as first:
        try:
            return importlib.import_module(twin)
        except ImportError as second:
            raise Unsupported(
                "lightning.%s is missing in lightning %s and %s does not import: %s; %s"
                % (part, _installed("lightning"), twin, first, second)
            )


def _installed(package):
    try:
        return getattr(importlib.import_module(package), "__version__", "?")
    except ImportError:
        return "(not installed)"


def lightning_submodule(package, name, why):
    """``<package>.<name>`` or Unsupported naming the release that lacks it."""
    try:
        return importlib.import_module(package.__name__ + "." + name)
    except ImportError as exc:
        raise Unsupported(
            "%s.%s (%s) is missing in %s %s: %s"
            % (
                package.__name__,
                name,
                why,
                package.__name__,
                getattr(package, "__version__", "?"),
                exc,
            )
        )


def with_lightning_precision(make, precision):
    """``make(flag)`` builds a Trainer or Fabric with Lightning's precision flag ``flag``;
    call it with the harness precision spelt the way the installed Lightning takes it.
    A capability check, not a version list: first Lightning 2's spelling ('16-mixed'); where
    Lightning refuses that value (an exception naming it, as 1.8 and 1.9 do: "Precision
    '16-mixed' is invalid"), the short spelling (16). Returns (what make returned, the flag
    it took). Any other exception propagates; so does the first one if the short spelling
    fails too."""
    flag = LIGHTNING_PRECISION[precision]
    try:
        return make(flag), flag
    except Exception as exc:
        if repr(flag) not in str(exc):  # not a refusal of the value itself
            raise
        short = LIGHTNING_PRECISION_SHORT[precision]
        try:
            return make(short), short
        except Exception:
            raise exc


def describe_plugin(plugin):
    scaler = getattr(plugin, "scaler", None)
    return "%s(precision=%r), scaler=%s" % (
        type(plugin).__name__,
        getattr(plugin, "precision", "?"),
        "None"
        if scaler is None
        else "%s enabled=%s" % (type(scaler).__name__, scaler.is_enabled()),
    )


def require_plugin_precision(plugin, precision, asked, flag=None):
    """Precondition, checked after the Fabric/Trainer is configured and before it trains:
    Lightning runs the precision the variant asked for (with a scaler exactly for
    16-mixed), in either spelling (``flag``: the one it was given, default Lightning 2's).
    Lightning turns '16-mixed' into 'bf16-mixed' on CPU (16 into 'bf16' before 2.0); such
    a cell cannot express the variant and is Unsupported, with what Lightning runs instead."""
    wanted = flag or LIGHTNING_PRECISION[precision]
    scaler = getattr(plugin, "scaler", None)
    got = str(getattr(plugin, "precision", "?"))
    has_scaler = scaler is not None and scaler.is_enabled()
    spellings = (LIGHTNING_PRECISION[precision], str(LIGHTNING_PRECISION_SHORT[precision]))
    if got not in spellings or has_scaler != (precision == "fp16"):
        raise Unsupported(
            "%s asked for %r; Lightning runs %s instead" % (asked, wanted, describe_plugin(plugin))
        )


# -- postconditions: each returns {"ok": bool, "detail": str} and each can fail -----------
# An empty input is a failure, never a vacuous pass (all() over nothing is True).


def finite(values, what="losses"):
    values = [float(v) for v in values]
    return {
        "ok": bool(values) and all(math.isfinite(v) for v in values),
        "detail": "%s=%s" % (what, values) if values else "no %s were recorded" % what,
    }


def moved(before, after, what="parameters"):
    """Every tensor of ``after`` ({name: tensor}) differs from ``before`` (same names)."""
    if not after:
        return {"ok": False, "detail": "no %s to compare" % what}
    change = {}
    for name, tensor in after.items():
        change[name] = (
            (tensor.detach().float().cpu() - before[name].float().cpu()).abs().max().item()
        )
    still = sorted(n for n, c in change.items() if not c > 0)
    detail = "max |change| per tensor: %s" % change
    if still:
        detail = "unchanged: %s; %s" % (still, detail)
    return {"ok": not still, "detail": detail}


def at_most(values, limit, what):
    values = [float(v) for v in values]
    return {
        "ok": bool(values) and all(v <= limit for v in values),
        "detail": "%s: %s; must be <= %s" % (what, values, limit)
        if values
        else "no %s recorded" % what,
    }


def above(values, limit, what):
    values = [float(v) for v in values]
    return {
        "ok": bool(values) and all(v > limit for v in values),
        "detail": "%s: %s; must be > %s" % (what, values, limit)
        if values
        else "no %s recorded" % what,
    }


# -- the command line ---------------------------------------------------------------------


def main(
    run,
    variants,
    doc,
    argv=None,
    not_written=(),
    fixed_precision=None,
    default_variant=None,
    default_precision=None,
):
    """Run one variant by hand and print what happened, as the harness would record it.

    Exit status: 0 ok, 1 raised, 2 unsupported, 3 a postcondition failed, 4 not written."""
    fixed_precision = fixed_precision or {}
    parser = argparse.ArgumentParser(
        description=(doc or "").strip().splitlines()[0] if doc else None
    )
    parser.add_argument("--variant", default=default_variant or next(iter(variants)))
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument(
        "--precision",
        choices=["fp32", "fp16", "bf16"],
        help="default: the variant's own, else fp16",
    )
    parser.add_argument("--list", action="store_true", help="list the variants and exit")
    args = parser.parse_args(argv)
    if args.list:
        width = max(len(n) for n in variants) + 2
        for name, text in variants.items():
            mark = "  (not written)" if name in not_written else ""
            print("%s%s%s" % (name.ljust(width), text, mark))
        return EXIT_OK
    precision = args.precision or fixed_precision.get(args.variant) or default_precision or "fp16"
    try:
        import torch

        version = torch.__version__
    except ImportError:
        version = "not installed"
    print("torch %s, variant %s, %s, %s" % (version, args.variant, args.device, precision))
    try:
        checks = run(args.variant, args.device, precision)
    except NotWritten as exc:
        print("NOT WRITTEN:", exc)
        return EXIT_NOT_WRITTEN
    except Unsupported as exc:
        print("UNSUPPORTED:", exc)
        return EXIT_UNSUPPORTED
    except Exception as exc:
        print("RAISED %s: %s" % (type(exc).__name__, exc))
        return EXIT_RAISED
    width = max([len(n) for n in checks] + [10]) + 2
    for name, check in checks.items():
        print("%s%s  %s" % (name.ljust(width), "ok  " if check["ok"] else "FAIL", check["detail"]))
    return EXIT_OK if all(c["ok"] for c in checks.values()) else EXIT_WRONG


if __name__ == "__main__":
    sys.exit("reprokit is a library: run a repros/<id>/repro.py")
