"""Runs ONE variant of one reproducer inside a target environment and writes its result.

This file is the only harness code that runs next to a torch it did not choose, on the
oldest interpreter of the matrix (Python 3.8/3.9). Keep it standard-library only and
compatible with Python 3.7+. It is run by path, isolated from the harness package:

    python -I harness/child.py JOB.json RESULT.json

File protocol (version PROTOCOL): the job is a JSON object
    {"protocol": 2, "repro": "/abs/repro.py", "variant": "...", "device": "cpu",
     "precision": "fp16", "signature": {"type": "RuntimeError", "message": "regex"},
     "variant_signature": {...} | null, "parent_pid": 123 (optional)}
and the result, written atomically (temp file + rename) only when the child got far
enough to decide, is
    {"protocol": 2, "outcome": "...", "reason": "...", "exception": {...} | null,
     "checks": {...}, "versions": {...}, "warnings": [...], "duration_s": 1.2}
A child that dies without writing a result is classified by the parent from its exit
status (crashed / timeout); see harness/proc.py.

A reproducer module exposes ``run(variant, device, precision) -> dict`` returning its
postcondition checks as {name: {"ok": bool, "detail": str}}, and raises an exception
class named ``Unsupported`` when the variant's intent cannot be expressed in this
environment.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import signal
import sys
import time
import traceback
import warnings

PROTOCOL = 2  # 2: "related" (the variant's own signature) apart from "reproduced"
MAX_TEXT = 4000  # bound every text that goes into a result
OOM_PATTERNS = (
    r"out of memory",
    r"can't allocate memory",
    r"cannot allocate memory",
    r"std::bad_alloc",
)


def _bounded(text, limit=MAX_TEXT):
    text = str(text)
    if len(text) <= limit:
        return text
    half = limit // 2
    return text[:half] + "\n...[%d characters cut]...\n" % (len(text) - limit) + text[-half:]


def _qualname(exc_type):
    module = getattr(exc_type, "__module__", "") or ""
    name = getattr(exc_type, "__qualname__", exc_type.__name__)
    if module in ("builtins", "__main__", ""):
        return name
    return module + "." + name


def type_matches(exc, wanted):
    """True when the exception's class, or one of its bases, is named ``wanted``.

    ``wanted`` is a plain class name ("RuntimeError") or a dotted qualified name.
    """
    for klass in type(exc).__mro__:
        if wanted in (klass.__name__, _qualname(klass)):
            return True
    return False


def signature_matches(exc, signature):
    if not signature:
        return False
    if not type_matches(exc, signature.get("type", "")):
        return False
    pattern = signature.get("message", "")
    return re.search(pattern, str(exc), re.DOTALL) is not None


def _frame_of(tb):
    """The innermost frame of a traceback: where the exception was raised."""
    last = None
    for frame in traceback.extract_tb(tb):
        last = frame
    if last is None:
        return ""
    return "%s:%s in %s" % (last.filename, last.lineno, last.name)


def exception_info(exc):
    tb_text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return {
        "type": _qualname(type(exc)),
        "message": _bounded(str(exc)),
        "frame": _frame_of(exc.__traceback__),
        "traceback": _bounded(tb_text),
    }


def _is_oom(exc):
    if isinstance(exc, MemoryError) or type(exc).__name__ == "OutOfMemoryError":
        return True
    text = str(exc).lower()
    return any(re.search(p, text) for p in OOM_PATTERNS)


def classify(exc, checks, signature, variant_signature=None):
    """Decide the outcome of one finished run. Pure: exception or checks in, dict out."""
    if exc is not None:
        info = exception_info(exc)
        if type(exc).__name__ == "Unsupported":
            return {"outcome": "unsupported", "reason": _bounded(str(exc)), "exception": None}
        # the documented signature first: a variant's own (related) signature never
        # stands in for it, and the documented error is never recorded as related
        if signature_matches(exc, signature):
            return {"outcome": "reproduced", "reason": "", "exception": info}
        if signature_matches(exc, variant_signature):
            return {"outcome": "related", "reason": "", "exception": info}
        if _is_oom(exc):
            return {"outcome": "crashed", "reason": "out of memory: %s: %s" % (info["type"], info["message"][:500]),
                    "exception": info}
        return {"outcome": "other_error", "reason": "", "exception": info}
    failed = sorted(name for name, check in (checks or {}).items() if not check.get("ok"))
    if failed:
        details = "; ".join(
            "%s: %s" % (name, checks[name].get("detail", "")) for name in failed
        )
        return {"outcome": "wrong_result", "reason": _bounded("postcondition failed: " + details),
                "exception": None}
    return {"outcome": "ok", "reason": "", "exception": None}


def _normalise_checks(raw):
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise TypeError("run() must return a dict of checks, got %r" % type(raw).__name__)
    checks = {}
    for name, value in raw.items():
        if isinstance(value, dict):
            checks[str(name)] = {"ok": bool(value.get("ok")),
                                 "detail": _bounded(value.get("detail", ""), 500)}
        else:
            checks[str(name)] = {"ok": bool(value), "detail": ""}
    return checks


def versions():
    out = {"python": "%d.%d.%d" % sys.version_info[:3]}
    # only what the run really loaded: importing more here could fail under the memory
    # limit (the environment's probe records every version anyway)
    for name in ("torch", "lightning", "pytorch_lightning", "numpy"):
        module = sys.modules.get(name)
        if module is None:
            continue
        out[name] = str(getattr(module, "__version__", "?"))
    torch = sys.modules.get("torch")
    if torch is not None:
        out["torch_cuda"] = str(getattr(torch.version, "cuda", None))
        try:
            if torch.cuda.is_available():
                out["gpu"] = torch.cuda.get_device_name(0)
                out["cudnn"] = str(torch.backends.cudnn.version())
        except Exception as exc:  # a broken CUDA setup is provenance, not a crash
            out["gpu"] = "error: %s" % exc
    return out


def _load_repro(path):
    spec = importlib.util.spec_from_file_location("repro_under_test", path)
    if spec is None or spec.loader is None:
        raise ImportError("cannot load reproducer from %s" % path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def cuda_missing_reason(device):
    if device != "cuda":
        return None
    try:
        import torch
    except Exception as exc:
        return "torch does not import: %s" % exc
    if not torch.cuda.is_available():
        return "no CUDA device here (torch.cuda.is_available() is False; torch built with CUDA %s)" % (
            torch.version.cuda,
        )
    return None


def execute(job):
    """Run the job in this process and return the result dict (never raises)."""
    started = time.time()
    caught = []
    result = None
    exc = None
    checks = {}
    skip = cuda_missing_reason(job["device"])
    if skip is not None:
        result = {"outcome": "skipped", "reason": skip, "exception": None}
    else:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                module = _load_repro(job["repro"])
                checks = _normalise_checks(
                    module.run(job["variant"], job["device"], job["precision"])
                )
            except Exception as error:  # any exception is a measured outcome
                exc = error
                if isinstance(error, MemoryError):
                    # free what the runaway allocation holds, so the result can be written
                    traceback.clear_frames(error.__traceback__)
        result = classify(exc, checks, job.get("signature"), job.get("variant_signature"))
    seen = []
    for w in caught or []:
        text = "%s: %s" % (w.category.__name__, w.message)
        if text not in seen:
            seen.append(_bounded(text, 500))
    result.update({
        "protocol": PROTOCOL,
        "checks": checks,
        "versions": versions(),
        "warnings": seen[:20],
        "duration_s": round(time.time() - started, 3),
    })
    return result


def write_atomically(path, data):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(data, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _parent_of(pid):
    """The parent pid of ``pid`` (Linux /proc), or None where that cannot be read."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            text = f.read()
        return int(text[text.rindex(")") + 2:].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def watch_parent(parent_pid, interval=0.2):
    """End this run's whole process group if the harness that started it dies.

    The run leads a session of its own (so that a timeout ends all of it), which also
    means that nothing ends it when the harness is SIGKILLed or OOM-killed: a hanging
    reproducer and what it forked would hold their CPU or GPU for ever. A forked watcher
    (a process, not a thread: it needs no GIL and adds no thread to the reproducer) polls
    the run's parent and kills the group once it has changed. Returns the watcher's pid.
    """
    leader = os.getpid()
    if not parent_pid or os.getpgid(0) != leader:
        return None  # not started by the harness as a group leader: leave the group alone
    pid = os.fork()
    if pid:
        return pid
    try:
        while True:
            if os.getppid() != leader:
                os._exit(0)  # the run is over
            parent = _parent_of(leader)
            if parent is None:
                try:
                    os.kill(parent_pid, 0)
                    parent = parent_pid
                except OSError:
                    parent = -1
            if parent != parent_pid:
                os.killpg(leader, signal.SIGKILL)
            time.sleep(interval)
    finally:
        os._exit(0)


def stop_watching(pid):
    if pid:
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except OSError:
            pass


def main(argv):
    if len(argv) != 3:
        sys.stderr.write("usage: child.py JOB.json RESULT.json\n")
        return 2
    with open(argv[1]) as f:
        job = json.load(f)
    if job.get("protocol") != PROTOCOL:
        sys.stderr.write("child protocol %s cannot run job protocol %s\n" % (PROTOCOL, job.get("protocol")))
        return 3
    watcher = watch_parent(job.get("parent_pid"))
    limit_mb = job.get("memory_limit_mb") or 0
    if limit_mb and job["device"] == "cpu":
        # bound the address space before torch loads: a runaway allocation then fails
        # inside Python (MemoryError / "can't allocate memory") and is reported as
        # out of memory. Not on CUDA, whose driver reserves huge virtual ranges.
        import resource

        limit = int(limit_mb) * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    result = execute(job)
    write_atomically(argv[2], result)
    stop_watching(watcher)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
