"""Helpers every reproducer shares: capability checks, autocast and GradScaler, Lightning
precision preconditions, postconditions that can fail, and the command line that runs a
reproducer by hand:

    python repros/reprokit.py pytorch/grad-scale-unscale-error --list
    python repros/reprokit.py pytorch/grad-scale-unscale-error --variant baseline-unused-submodule --precision fp16

This file runs inside target environments, next to a torch it did not choose (1.10 to
2.13 and later) on Python 3.7 or newer: standard library and torch/lightning only, no
syntax newer than 3.7 (tests/inenv/test_reprokit.py parses it with feature_version=(3, 7)).
A repro.py imports it as ``from reprokit import ...``: run as above, this folder is the
script's own and so first on sys.path; the harness's child puts it there too, and
`python -m harness export ENTRY --variant V` writes one variant with the helpers it calls.

The contract with the harness (docs/reference/entry-yaml.md has all of it): ``VARIANTS``, a
module-level dict literal in repro.py, maps each variant's name to its function
``f(device, precision) -> {name: {"ok": bool, "detail": str}}`` (its postconditions), or to
None while it is not written. A function raises ``Unsupported`` (decided before the
behaviour under test) when the cell cannot express the variant's intent. What a variant is
and where it runs (description, devices, precisions) is entry.yaml's.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.util
import math
import os
import sys

__all__ = [
    "LIGHTNING_PRECISION",
    "LIGHTNING_PRECISION_SHORT",
    "REPRO_MODULE",
    "Unsupported",
    "above",
    "at_most",
    "autocast",
    "autocast_dtype",
    "check_fused_adamw",
    "describe_plugin",
    "finite",
    "from_transformers",
    "host_memory_mb",
    "import_lightning",
    "lightning_submodule",
    "load",
    "main",
    "make_scaler",
    "moved",
    "needs_cuda",
    "no_code_ran",
    "payload",
    "on_capped_card",
    "report",
    "require_plugin_precision",
    "time_left",
    "with_lightning_precision",
]

# the harness precisions -> Lightning's precision flags, as Lightning 2 spells them; and the
# short spelling (precision=16), the only one Lightning 1.8/1.9 take ('16-mixed' there is
# "invalid"; 1.8 wants the number: its '16' ends in "No precision set"), which Lightning 2
# still reads as an alias. with_lightning_precision picks what the installed one takes.
LIGHTNING_PRECISION = {"fp32": "32-true", "fp16": "16-mixed", "bf16": "bf16-mixed"}
LIGHTNING_PRECISION_SHORT = {"fp32": 32, "fp16": 16, "bf16": "bf16"}


class Unsupported(Exception):
    """The variant's intent cannot be expressed in this cell (the harness records
    `unsupported` with this message as the reason; it never counts either way)."""


# -- capabilities: checked before the behaviour under test --------------------------------


def autocast_dtype(device, precision):
    """The autocast dtype for fp16/bf16 (None for fp32), after checking that
    torch.autocast really produces it on this device; Unsupported otherwise."""
    import torch

    if precision == "fp32":
        return None
    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}[precision]
    a = torch.ones(4, 4, device=device)
    asked = "torch.autocast(%r, dtype=%s)" % (device, dtype)
    try:
        with torch.autocast(device, dtype=dtype):
            produced = torch.mm(a, a).dtype
    except Exception as exc:  # old CPU autocast refuses float16 on entry
        raise Unsupported("%s is not available: %s" % (asked, exc))
    if produced != dtype:
        raise Unsupported("%s produced %s from torch.mm" % (asked, produced))
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

    if hasattr(getattr(torch, "amp", None), "GradScaler"):
        scaler, api = torch.amp.GradScaler(device), "torch.amp.GradScaler(%r)" % device
    elif device == "cuda":
        scaler, api = torch.cuda.amp.GradScaler(), "torch.cuda.amp.GradScaler()"
    else:
        why = "torch.amp.GradScaler is missing and torch.cuda.amp.GradScaler only scales CUDA"
        raise Unsupported("no GradScaler for %r: %s tensors" % (device, why))
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


def from_transformers(*names):
    """The classes ``names`` of transformers (its logging quietened), or Unsupported where
    transformers does not import here (the harness installs it through entry.yaml
    ``requires``); its lazy loader wraps a model module's own import error (a release that
    needs a newer torch) in a RuntimeError, said the same way."""
    try:
        import transformers

        classes = tuple(getattr(transformers, name) for name in names)
    except ImportError as exc:
        raise Unsupported("transformers does not import here: %s" % exc)
    except RuntimeError as exc:
        if "Failed to import transformers" not in str(exc):
            raise
        raise Unsupported("transformers does not import here: %s" % str(exc).splitlines()[-1])
    transformers.logging.set_verbosity_error()
    return classes


# -- the job's limits: its deadline and its host memory -----------------------------------
# The harness ends a job at its deadline and bounds the host memory it holds; it says both in
# the job's environment (harness/inenv/child.py). A wait of the reproducer derived from the
# deadline ends first, so that a stuck child is named by the reproducer, not cut by the
# harness. Run by hand, neither is set: the defaults hold.


def time_left(default_s=300.0, margin_s=15.0, at_least_s=1.0):
    """Seconds a wait of the reproducer may take: what is left of the job's deadline less
    ``margin_s`` (to name what was stuck and write the result), at least ``at_least_s``;
    ``default_s`` where no deadline is set (run by hand), and never more than it."""
    import time

    deadline = os.environ.get("HARNESS_JOB_DEADLINE")
    if not deadline:
        return default_s
    try:
        left = float(deadline) - time.time() - margin_s
    except ValueError:
        return default_s
    return max(at_least_s, min(default_s, left))


def host_memory_mb(default=None):
    """The host memory (MiB) the job's processes may hold, beyond which the harness ends them;
    ``default`` where none is set (run by hand)."""
    value = os.environ.get("HARNESS_MEMORY_LIMIT_MB")
    try:
        return int(value) if value else default
    except ValueError:
        return default


# -- a small card: the GPU allocator's out of memory on any GPU ----------------------------


def needs_cuda(why="needs a CUDA device: the error is the GPU allocator's"):
    import torch

    if not torch.cuda.is_available():
        raise Unsupported(why)


def _out_of_memory(exc):
    return isinstance(exc, RuntimeError) and "out of memory" in str(exc)


def on_capped_card(measure, run, over, what="the workload"):
    """``run(card)`` (-> postconditions; ``card`` the card's size in bytes) with this
    process capped to a card ``over`` times
    smaller than the peak memory ``measure()`` takes on this GPU uncapped: the card is made
    to measure on any GPU (a few GiB even on a 141 GB H200), so that ``what`` needs ``over``
    times the card. Every postcondition's detail says the sizes and the run's own peak; the
    cap is lifted afterwards. Unsupported without CUDA, or where ``measure()`` does not fit
    this GPU uncapped (the card could not be sized)."""
    import torch

    needs_cuda()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    try:
        measure()
    except RuntimeError as exc:  # torch.cuda.OutOfMemoryError derives from it
        if not _out_of_memory(exc):
            raise
        raise Unsupported("this GPU cannot run %s uncapped, to size the card: %s" % (what, exc))
    torch.cuda.synchronize()
    need = torch.cuda.max_memory_allocated()
    torch.cuda.empty_cache()
    card = need / over
    total = torch.cuda.get_device_properties(0).total_memory
    torch.cuda.set_per_process_memory_fraction(card / total)
    try:
        torch.cuda.reset_peak_memory_stats()
        checks = run(card)
        torch.cuda.synchronize()
        sizes = "; peak %.0f MiB on a card of %.0f MiB (%s needs %.0f MiB)" % (
            torch.cuda.max_memory_allocated() / 2**20,
            card / 2**20,
            what,
            need / 2**20,
        )
        for check in checks.values():
            check["detail"] += sizes
        return checks
    finally:
        torch.cuda.set_per_process_memory_fraction(1.0)
        torch.cuda.empty_cache()


# -- postconditions: each returns {"ok": bool, "detail": str} and each can fail -----------
# An empty input is a failure, never a vacuous pass (all() over nothing is True).


def finite(values, what="losses"):
    values = [float(v) for v in values]
    detail = "%s=%s" % (what, values) if values else "no %s were recorded" % what
    return {"ok": bool(values) and all(math.isfinite(v) for v in values), "detail": detail}


def moved(before, after, what="parameters"):
    """Every tensor of ``after`` ({name: tensor}) differs from ``before`` (same names)."""
    if not after:
        return {"ok": False, "detail": "no %s to compare" % what}
    change = {}
    for name, t in after.items():
        change[name] = (t.detach().float().cpu() - before[name].float().cpu()).abs().max().item()
    still = sorted(n for n, c in change.items() if not c > 0)
    detail = "max |change| per tensor: %s" % change
    return {"ok": not still, "detail": "unchanged: %s; %s" % (still, detail) if still else detail}


def at_most(values, limit, what):
    values = [float(v) for v in values]
    detail = "%s: %s; must be <= %s" % (what, values, limit) if values else "no %s recorded" % what
    return {"ok": bool(values) and all(v <= limit for v in values), "detail": detail}


def above(values, limit, what):
    values = [float(v) for v in values]
    detail = "%s: %s; must be > %s" % (what, values, limit) if values else "no %s recorded" % what
    return {"ok": bool(values) and all(v > limit for v in values), "detail": detail}


# -- security: a payload in a file that runs code when the file is loaded -----------------


class _Payload:
    """Pickles as a call of os.mkdir(marker): an unpickler that runs it creates the folder.
    Harmless, and it shows whether loading a file ran code the file chose."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.mkdir, (self.marker,))


def payload(folder):
    """(an object to put in a file that is pickled, the marker its unpickling creates)."""
    marker = os.path.join(folder, "payload-ran")
    return _Payload(marker), marker


def no_code_ran(marker, how):
    """The postcondition of a load: the file's payload did not run (its marker is absent)."""
    ran = os.path.exists(marker)
    detail = "%s: the payload %s" % (
        how,
        "ran (code from the file executed)" if ran else "did not run",
    )
    return {"ok": not ran, "detail": detail}


# -- running a variant by hand -------------------------------------------------------------


def report(variant, device, precision, name=None):
    """Run a variant function and print its postconditions; exit status 0 if all held, else 3.
    An exception propagates, traceback and all: what a bug report wants."""
    version = getattr(sys.modules.get("torch"), "__version__", "(not imported)")
    print("torch %s, %s, %s, %s" % (version, name or variant.__name__, device, precision))
    checks = variant(device, precision)
    width = max([len(n) for n in checks] + [10]) + 2
    for name, check in checks.items():
        print("%s%s  %s" % (name.ljust(width), "ok  " if check["ok"] else "FAIL", check["detail"]))
    return 0 if all(c["ok"] for c in checks.values()) else 3


# the name a reproducer is loaded under, by hand and by the harness (harness/inenv/child.py):
# dataclasses and pickle find a module by name in sys.modules, and the records name the
# classes of exceptions a reproducer defines after it (repro_under_test.DocumentedError)
REPRO_MODULE = "repro_under_test"


def load(path):
    """repro.py as the module REPRO_MODULE, registered in sys.modules."""
    spec = importlib.util.spec_from_file_location(REPRO_MODULE, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[REPRO_MODULE] = module
    spec.loader.exec_module(module)
    return module


def _entry_variants(folder):
    """entry.yaml's variants as {name: {description, devices, precisions}}; {} where PyYAML
    is not installed (every Lightning requires it; a torch-only environment may lack it)."""
    try:
        import yaml
    except ImportError:
        print("(PyYAML is not installed: entry.yaml's descriptions and limits are not read)")
        return {}
    with open(os.path.join(folder, "entry.yaml"), encoding="utf-8") as f:
        data = yaml.safe_load(f)
    return {str(v["name"]): v for v in data.get("variants") or []}


def main(argv=None):
    """python repros/reprokit.py ENTRY [--variant V] [--device D] [--precision P] [--list]:
    ENTRY is an entry folder, its repro.py or an id under repros/. Exit status: 0 ok,
    1 raised, 2 unsupported (or outside entry.yaml's devices/precisions), 3 a postcondition
    failed, 4 not written."""
    parser = argparse.ArgumentParser(prog="reprokit.py", description=main.__doc__.split(":")[0])
    parser.add_argument("entry", help="an entry folder, its repro.py, or an id under repros/")
    parser.add_argument("--variant", help="default: the first in entry.yaml")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument(
        "--precision",
        choices=["fp32", "fp16", "bf16"],
        help="default: fp16 where the variant runs it, else its first in entry.yaml",
    )
    parser.add_argument("--list", action="store_true", help="list the variants and exit")
    args = parser.parse_args(argv)
    path = args.entry
    if not os.path.exists(path):  # an id: relative to this folder, repros/
        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), path)
    if os.path.isdir(path):
        path = os.path.join(path, "repro.py")
    declared = _entry_variants(os.path.dirname(path))
    module = load(path)
    variants = module.VARIANTS
    if args.list:
        width = max(len(n) for n in variants) + 2
        for name, function in variants.items():
            text = " ".join(str(declared.get(name, {}).get("description", "")).split())
            mark = "  (not written)" if function is None else ""
            print("%s%s%s" % (name.ljust(width), text, mark))
        return 0
    name = args.variant or next(iter(declared or variants))
    if name not in variants:
        parser.error("unknown variant %r; known: %s" % (name, ", ".join(variants)))
    limits = declared.get(name, {})
    precisions = limits.get("precisions") or ["fp32", "fp16", "bf16"]
    precision = args.precision or ("fp16" if "fp16" in precisions else precisions[0])
    for axis, value in (("devices", args.device), ("precisions", precision)):
        if value not in limits.get(axis, [value]):
            print("UNSUPPORTED: entry.yaml runs %s on %s %s only" % (name, axis, limits[axis]))
            return 2
    if variants[name] is None:
        print("NOT WRITTEN: variant %r is None in VARIANTS" % name)
        return 4
    try:
        return report(variants[name], args.device, precision, "variant " + name)
    except Unsupported as exc:
        print("UNSUPPORTED:", exc)
        return 2
    except Exception as exc:
        print("RAISED %s: %s" % (type(exc).__name__, exc))
        return 1


if __name__ == "__main__":
    # run as a script this module is __main__; the reproducer imports `reprokit`: one copy of
    # the helpers (and of Unsupported) for both
    import reprokit

    sys.exit(reprokit.main())
