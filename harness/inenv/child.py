"""Runs variants of reproducers inside a target environment and writes their results.

This file is the only harness code that runs next to a torch it did not choose, on the
oldest interpreter of the matrix (Python 3.8/3.9). Keep it standard-library only and
compatible with Python 3.7+. It is run by path, isolated from the harness package, in
one of two modes:

    python -I harness/inenv/child.py JOB.json RESULT.json      # isolation "process": one job
    python -I harness/inenv/child.py --worker IMPORTS.json      # isolation "fork": a warm worker

File protocol (version PROTOCOL): the job is a JSON object
    {"protocol": 2, "repro": "/abs/repro.py", "variant": "...", "device": "cpu",
     "precision": "fp16", "signature": {"type": "RuntimeError", "message": "regex"},
     "variant_signature": {...} | null, "memory_limit_mb": 8192, "parent_pid": 123 (optional),
     "deadline": 1765432100.5 (optional: when the harness ends the job, seconds since the epoch)}
(the reproducer reads the deadline and the memory limit from the environment:
``HARNESS_JOB_DEADLINE``, ``HARNESS_MEMORY_LIMIT_MB``; reprokit's ``time_left`` and
``host_memory_mb``)
and the result, written atomically (temp file + rename) only when the child got far
enough to decide, is
    {"protocol": 2, "outcome": "...", "reason": "...", "exception": {...} | null,
     "checks": {...}, "versions": {...}, "warnings": [...], "duration_s": 1.2, "run_s": 0.3,
     "cuda_start_s": 0.41 (only where the variant started CUDA)}
(``run_s``: the seconds spent inside the reproducer's ``run()``; ``cuda_start_s``: the seconds
torch.cuda's lazy initialisation took when the variant first used CUDA). A child that dies
without writing a result is classified by the parent from its exit status (crashed /
timeout); see harness/execute/runner.py.

Worker protocol (``--worker``): the worker imports the environment's packages once and
reports what the health check reports (IMPORTS.json lists alternatives; CUDA is asked in
a fork), then reads one JSON request
per line on stdin and answers one JSON event per line on stdout:
    -> {"event": "ready", "ok": true, "pid": 1, "seconds": 4.1,
        "probe": {"versions": {...}, "missing": {...}}}   the health check's report
       (or "ok": false with "error": the traceback; the worker then exits)
    <- {"op": "run", "id": "7", "job": {...}, "result": "/r.json", "stdout": "/o", "stderr": "/e"}
    -> {"event": "started", "id": "7", "pid": 4242}     a forked child runs the job
    -> {"event": "refused", "id": "7", "reason": "..."}  forking is not safe here
    -> {"event": "ended", "id": "7", "pid": 4242, "status": 0, "strays": []}
       (raw wait status; "strays": "pid (name)" of the daemons it left, ended here)
Each child is a fresh fork of the clean worker, leads a session of its own and runs
exactly one job, as the one-job mode does. The worker never initialises CUDA; it
refuses to fork once CUDA is initialised in it. When stdin closes (the harness ended or
died) the worker kills its children's process groups and exits.

Daemons: the worker and each job's process (both modes) are child subreapers (Linux). A
daemon a job starts (fork, setsid, fork) is ended when the job ends and named in the
result's warnings, or in the worker's "strays" when the job's process died first.

A reproducer module (loaded as REPRO_MODULE, registered in sys.modules for the run) maps
each variant's name to its function in ``VARIANTS``; ``f(device, precision) -> dict`` returns
its postcondition checks as {name: {"ok": bool, "detail": str}}, and raises an exception
class named ``Unsupported`` when the variant's intent cannot be expressed in this
environment.
"""

from __future__ import annotations

import fcntl
import gc
import importlib
import importlib.util
import json
import os
import re
import select
import signal
import sys
import time
import traceback
import warnings

DEADLINE_VAR = "HARNESS_JOB_DEADLINE"  # when the harness ends the job (epoch seconds)
MEMORY_VAR = "HARNESS_MEMORY_LIMIT_MB"  # the host memory the job may hold
PROTOCOL = 2  # 2: "related" (the variant's own signature) apart from "reproduced"
NVML_CHECK = "PYTORCH_NVML_BASED_CUDA_CHECK"
_SET_HERE = []  # environment variables the worker set, which a job's child must not see
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


def message_of(exc):
    """``str(exc)``, or its repr where str() raises, or "<unprintable message>" where both
    raise: a variant's exception is measured, never a crash of the child's own code."""
    for show in (str, repr):
        try:
            return show(exc)
        except Exception:
            pass
    return "<unprintable message: str() and repr() of %s raise>" % type(exc).__name__


def signature_matches(exc, signature):
    if not signature:
        return False
    if not type_matches(exc, signature.get("type", "")):
        return False
    pattern = signature.get("message", "")
    return re.search(pattern, message_of(exc), re.DOTALL) is not None


def _frame_of(tb):
    """The innermost frame of a traceback: where the exception was raised."""
    last = None
    for frame in traceback.extract_tb(tb):
        last = frame
    if last is None:
        return ""
    return "%s:%s in %s" % (last.filename, last.lineno, last.name)


def exception_info(exc):
    try:
        tb_text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    except Exception:  # an exception object hostile enough to break the formatter
        tb_text = "<the traceback of %s could not be formatted>" % type(exc).__name__
    return {
        "type": _qualname(type(exc)),
        "message": _bounded(message_of(exc)),
        "frame": _frame_of(exc.__traceback__),
        "traceback": _bounded(tb_text),
    }


def _is_oom(exc):
    if isinstance(exc, MemoryError) or type(exc).__name__ == "OutOfMemoryError":
        return True
    text = message_of(exc).lower()
    return any(re.search(p, text) for p in OOM_PATTERNS)


# the packages under test: an exception class of theirs that happens to be named
# "Unsupported" (torch._dynamo.exc.Unsupported, raised when torch.compile cannot trace
# something) is a measured failure, never the reproducer saying "this cell cannot express
# the variant"
_UNDER_TEST = ("torch", "lightning", "pytorch_lightning", "lightning_fabric")


def is_unsupported(exc):
    """True for the reproducer's own Unsupported (reprokit's or one it defines)."""
    module = (getattr(type(exc), "__module__", "") or "").split(".")[0]
    return type(exc).__name__ == "Unsupported" and module not in _UNDER_TEST


def classify(exc, checks, signature, variant_signature=None):
    """Decide the outcome of one finished run. Pure: exception or checks in, dict out."""
    if exc is not None:
        info = exception_info(exc)
        if is_unsupported(exc):
            return {"outcome": "unsupported", "reason": _bounded(message_of(exc)), "exception": None}
        # the documented signature first: a variant's own (related) signature never
        # stands in for it, and the documented error is never recorded as related
        if signature_matches(exc, signature):
            return {"outcome": "reproduced", "reason": "", "exception": info}
        if signature_matches(exc, variant_signature):
            return {"outcome": "related", "reason": "", "exception": info}
        if _is_oom(exc):
            return {
                "outcome": "crashed",
                "reason": "out of memory: %s: %s" % (info["type"], info["message"][:500]),
                "exception": info,
            }
        return {"outcome": "other_error", "reason": "", "exception": info}
    failed = sorted(name for name, check in (checks or {}).items() if not check.get("ok"))
    if failed:
        details = "; ".join("%s: %s" % (name, checks[name].get("detail", "")) for name in failed)
        return {
            "outcome": "wrong_result",
            "reason": _bounded("postcondition failed: " + details),
            "exception": None,
        }
    return {"outcome": "ok", "reason": "", "exception": None}


def _normalise_checks(raw):
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise TypeError("run() must return a dict of checks, got %r" % type(raw).__name__)
    checks = {}
    for name, value in raw.items():
        if isinstance(value, dict):
            checks[str(name)] = {
                "ok": bool(value.get("ok")),
                "detail": _bounded(value.get("detail", ""), 500),
            }
        else:
            checks[str(name)] = {"ok": bool(value), "detail": ""}
    return checks


def versions():
    """The versions of what the run really loaded, and the GPU it saw (in the child)."""
    # only what is loaded: importing more here could fail under the memory limit (the
    # environment's health check records every version anyway)
    out = versions_loaded()
    torch = sys.modules.get("torch")
    if torch is not None:
        try:
            if torch.cuda.is_available():
                out["gpu"] = torch.cuda.get_device_name(0)
                out["cudnn"] = str(torch.backends.cudnn.version())
        except Exception as exc:  # a broken CUDA setup is provenance, not a crash
            out["gpu"] = "error: %s" % exc
    return out


# the module name a reproducer runs under: registered in sys.modules for the run, so that
# dataclasses (under `from __future__ import annotations`), pickle (torch.save of an object
# whose class repro.py defines) and DataLoader workers find it; the records name exception
# classes a reproducer defines after it. reprokit.REPRO_MODULE, for a run by hand, is the same
REPRO_MODULE = "repro_under_test"
KIT = "reprokit.py"  # the reproducers' shared helpers, in the first folder above repro.py


def _kit_folder(path):
    folder = os.path.dirname(os.path.realpath(path))
    while not os.path.isfile(os.path.join(folder, KIT)):
        if os.path.dirname(folder) == folder:
            return None
        folder = os.path.dirname(folder)
    return folder


def _load_repro(path):
    """repro.py as the module REPRO_MODULE, with the folder of reprokit.py first on sys.path
    (``from reprokit import ...``). The run's process ends with the run: neither outlives it."""
    kit = _kit_folder(path)
    if kit is not None:
        sys.path.insert(0, kit)
    spec = importlib.util.spec_from_file_location(REPRO_MODULE, path)
    if spec is None or spec.loader is None:
        raise ImportError("cannot load reproducer from %s" % path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[REPRO_MODULE] = module
    spec.loader.exec_module(module)
    return module


def variant_function(module, name):
    """The function VARIANTS maps ``name`` to (None: not written yet)."""
    variants = getattr(module, "VARIANTS", None)
    if not isinstance(variants, dict):
        raise TypeError("repro.py has no VARIANTS dict {name: function}")
    if name not in variants:
        raise ValueError("unknown variant %r; known: %s" % (name, ", ".join(variants)))
    return variants[name]


def cuda_missing_reason(device):
    """Why a CUDA cell cannot run here, or None; asked without initialising CUDA in this
    process, which runs the variant next: a variant that forks (multiprocessing's "fork",
    DataLoader workers) must find fork as clean as a user's own script would."""
    if device != "cuda":
        return None
    try:
        import torch
    except Exception as exc:
        return "torch does not import: %s" % exc
    available = _cuda_available(torch)
    if available is None:
        return "cannot tell whether CUDA is available: the fork that asked it died"
    if not available:
        return (
            "no CUDA device here (torch.cuda.is_available() is False; torch built with CUDA %s)"
            % (torch.version.cuda,)
        )
    return None


def _cuda_available(torch):
    """torch.cuda.is_available(), or None where the fork that asked it died. Its default
    (cudaGetDeviceCount) initialises the driver, which poisons fork for this process; the
    NVML check (PYTORCH_NVML_BASED_CUDA_CHECK, torch >= 2.0) is a weaker answer, and torch
    1.10 to 1.13 have none: the exact answer comes from a short-lived fork instead."""
    if not hasattr(torch._C, "_cuda_getDeviceCount"):  # a build without CUDA: nothing to ask
        return False
    if not hasattr(os, "fork") or torch.cuda.is_initialized():
        # no fork to poison (Windows), or it is poisoned already (a fork would see no CUDA)
        return torch.cuda.is_available()
    return _in_a_fork(_is_available)


def _is_available():
    import torch

    return bool(torch.cuda.is_available())


def undefined_globals(function):
    """The global names ``function`` loads that neither its module nor builtins define, nor
    it assigns (``global``): each a NameError once it runs. Read from the bytecode
    (LOAD_GLOBAL) of the function, of what is defined in it and of the module's functions
    it calls, nothing run."""
    import builtins
    import dis

    known = function.__globals__
    loaded, stored = [], set()
    seen_functions = {id(function)}
    codes = [getattr(function, "__code__", None)]
    while codes:
        code = codes.pop()
        if code is None:
            continue
        for instruction in dis.get_instructions(code):
            if instruction.opname == "STORE_GLOBAL":
                stored.add(instruction.argval)
            if instruction.opname != "LOAD_GLOBAL":
                continue
            name = str(instruction.argval)
            if name not in loaded:
                loaded.append(name)
            called = known.get(name)
            # a helper of the same reproducer: its body runs too
            if (
                callable(called)
                and getattr(called, "__globals__", None) is known
                and id(called) not in seen_functions
            ):
                seen_functions.add(id(called))
                codes.append(getattr(called, "__code__", None))
        codes.extend(c for c in code.co_consts if hasattr(c, "co_code"))
    missing = [
        name
        for name in loaded
        if name not in known and name not in stored and not hasattr(builtins, name)
    ]
    if missing:  # bound in a branch this machine did not take (`if triton is not None:`)
        bound = _module_bindings(getattr(function.__code__, "co_filename", ""))
        missing = [name for name in missing if name not in bound]
    return missing


def _module_bindings(filename):
    """Every name the module binds at its top level, in any branch of an if, try, with or
    for (a kernel defined only where triton imports): the names a run elsewhere may have."""
    import ast

    try:
        with open(filename, encoding="utf-8") as f:
            tree = ast.parse(f.read(), filename)
    except (OSError, SyntaxError, ValueError):
        return set()

    def stored(target):
        return {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}

    names, todo = set(), list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)  # its body binds names of its own, not the module's
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                names |= stored(target)
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign, ast.For, ast.AsyncFor)):
            names |= stored(node.target)
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            for item in node.items:
                if item.optional_vars is not None:
                    names |= stored(item.optional_vars)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
        for field in ("body", "orelse", "finalbody", "handlers"):
            todo.extend(getattr(node, field, ()) or ())
    return names


def checked_skip(job, reason):
    """A job whose cell cannot run here (no CUDA): ``skipped`` with ``reason``, once
    repro.py has imported, VARIANTS names the variant and its function loads no undefined
    global; otherwise the error (``other_error``) that the run would have met first."""
    function = None
    try:
        function = variant_function(_load_repro(job["repro"]), job["variant"])
        if function is not None:
            missing = undefined_globals(function)
            if missing:
                raise NameError(
                    "name %r is not defined (variant %r loads it; found in its bytecode "
                    "without running it)" % (missing[0], job["variant"])
                )
    except Exception as error:  # the reproducer's own error, whatever it is
        info = exception_info(error)
        return {
            "outcome": "other_error",
            "reason": _bounded(
                "the reproducer failed before its %s cell was skipped (%s): %s: %s"
                % (job["device"], reason, info["type"], info["message"])
            ),
            "exception": info,
        }
    if function is None:
        return {
            "outcome": "skipped",
            "reason": "not written: VARIANTS maps %r to None" % job["variant"],
            "exception": None,
        }
    return {
        "outcome": "skipped",
        "reason": reason + "; repro.py imported and its variant found, not run",
        "exception": None,
    }


def execute(job):
    """Run the job in this process and return the result dict (never raises)."""
    started = time.time()
    caught = []
    result = None
    exc = None
    checks = {}
    run_s = 0.0
    function = None
    cuda_start = []  # the seconds torch.cuda's initialisation took, where the variant used it
    # "skip": the parent decided the cell cannot run here (no CUDA); the reproducer is
    # still imported and its variant checked, so that a typo shows without a GPU
    skip = job.get("skip") or cuda_missing_reason(job["device"])
    if skip is not None:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = checked_skip(job, skip)
    else:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                function = variant_function(_load_repro(job["repro"]), job["variant"])
                if function is not None:
                    if job["device"] == "cuda":
                        cuda_start = _time_cuda_start()
                    run_started = time.time()
                    try:
                        raw = function(job["device"], job["precision"])
                    finally:
                        run_s = time.time() - run_started
                    checks = _normalise_checks(raw)
            except Exception as error:  # any exception is a measured outcome
                exc = error
                if isinstance(error, MemoryError):
                    # free what the runaway allocation holds, so the result can be written
                    traceback.clear_frames(error.__traceback__)
        if exc is None and function is None:
            # a scaffold's variant whose code is missing: the plan never schedules one; one
            # run anyway is never a pass or an error, and never counted
            result = {
                "outcome": "skipped",
                "reason": "not written: VARIANTS maps %r to None" % job["variant"],
                "exception": None,
            }
        else:
            result = classify(exc, checks, job.get("signature"), job.get("variant_signature"))
    seen = []
    for w in caught or []:
        text = "%s: %s" % (w.category.__name__, message_of(w.message))
        if text not in seen:
            seen.append(_bounded(text, 500))
    result.update(
        {
            "protocol": PROTOCOL,
            "checks": checks,
            "versions": versions(),
            "warnings": seen[:20],
            "duration_s": round(time.time() - started, 3),
            "run_s": round(run_s, 4),
        }
    )
    if cuda_start:
        result["cuda_start_s"] = round(cuda_start[0], 4)
    return result


def _time_cuda_start():
    """A list that gets the seconds torch.cuda's lazy initialisation takes, the first time
    the variant uses CUDA (every path to a CUDA context calls torch.cuda._lazy_init, the C++
    ones by attribute). Nothing is started here: what the variant measures is unchanged."""
    took = []
    torch = sys.modules.get("torch")
    cuda = getattr(torch, "cuda", None)
    original = getattr(cuda, "_lazy_init", None)
    if original is None or cuda.is_initialized():
        return took

    def timed_lazy_init():
        if took or cuda.is_initialized():
            return original()
        begun = time.perf_counter()
        try:
            return original()
        finally:
            took.append(time.perf_counter() - begun)
            cuda._lazy_init = original

    cuda._lazy_init = timed_lazy_init
    return took


def write_atomically(path, data):
    tmp = "%s.%d.tmp" % (path, os.getpid())  # a name no other process writes
    with open(tmp, "w") as f:  # no fsync: the harness reads it at once, a crash reruns the job
        json.dump(data, f)
    os.replace(tmp, path)


def _parent_of(pid):
    """The parent pid of ``pid`` (Linux /proc), or None where that cannot be read."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            text = f.read()
        return int(text[text.rindex(")") + 2 :].split()[1])
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


PR_SET_CHILD_SUBREAPER = 36  # linux/prctl.h


def become_subreaper():
    """Make this process the reaper of its orphaned descendants (Linux 3.4+, prctl via
    ctypes): one that leaves the run's process group and session (fork, setsid, fork) is
    then reparented here, not to init, and is found when the run ends. Not inherited by
    a fork. False where it cannot be (another OS, no ctypes): there only the run's
    process group is ended, as before."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except Exception:  # no ctypes in this build, no prctl in this libc
        return False


def _children_of(pid):
    """(pid, state, process group, name) of each process whose parent is ``pid``
    (Linux /proc; none where it cannot be read)."""
    found = []
    try:
        names = os.listdir("/proc")
    except OSError:
        return found
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % name) as f:
                text = f.read()
            end = text.rindex(")")
            fields = text[end + 2 :].split()
            if int(fields[1]) == pid:
                found.append((int(name), fields[0], int(fields[2]), text[text.index("(") + 1 : end]))
        except (OSError, ValueError, IndexError):
            continue
    return found


def _has_children():
    """False when this process has no child at all (cheap: no /proc scan)."""
    try:
        os.waitpid(-1, os.WNOHANG)
    except ChildProcessError:
        return False
    return True


def end_descendants(keep=(), group=None, grace=5.0):
    """Kill and reap every child of this process but ``keep``, again and again: a
    subreaper inherits the children of each one it kills, so the loop ends when nothing
    the run started is left (or after ``grace`` seconds). Returns "pid (name)" of each
    that was running outside process group ``group`` (default: this process's), a
    daemon the run left behind; those inside it would end with the group anyway."""
    group = os.getpgid(0) if group is None else group
    me = os.getpid()
    escaped = []
    seen = set()
    deadline = time.time() + grace
    while time.time() < deadline:
        children = [c for c in _children_of(me) if c[0] not in keep]
        if not children:
            break
        for pid, state, pgid, name in children:
            if state not in ("Z", "X") and pgid != group and pid not in seen:
                seen.add(pid)
                escaped.append("%d (%s)" % (pid, name))
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        for child in children:
            _reap(child[0], deadline)
    return escaped


def _reap(pid, deadline):
    while True:
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return
        if done or time.time() > deadline:
            return
        time.sleep(0.005)


def _end_run(watcher):
    # the run is over: a SIGCHLD handler it installed must not judge the children ended
    # here, the parent's watcher among them (torch's DataLoader raises "worker ... is killed
    # by signal" from its handler, which then escaped from the harness's own reaping: "exit
    # status 1 without a result")
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    except (ValueError, OSError):  # not the main thread: nothing of the run's runs here
        pass
    stop_watching(watcher)
    return end_descendants() if _has_children() else []


def strays_text(escaped):
    """What a record says of the daemons a run left (the host writes the same words)."""
    n = len(escaped)
    return "ended %d process%s the run left running outside its process group: %s" % (
        n,
        "" if n == 1 else "es",
        ", ".join(escaped[:10]) + (" and %d more" % (n - 10) if n > 10 else ""),
    )


def stop_watching(pid):
    if pid:
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except OSError:
            pass


def _vm_bytes():
    """This process's mapped address space (Linux /proc), or 0 where it cannot be read."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def run_here(job, result_path, parent_pid, already_mapped=0):
    """Run one job in this process (a session leader) and write its result file.

    The memory limit bounds the address space: a runaway allocation then fails inside
    Python (MemoryError / "can't allocate memory") and is reported as out of memory. It
    is what the variant may map on top of ``already_mapped``: nothing in a fresh
    interpreter (set before torch loads), the warm worker's imports in a forked child.
    Not on CUDA, whose driver reserves huge virtual ranges.
    """
    watcher = watch_parent(parent_pid)
    become_subreaper()  # a daemon the variant starts stays this process's to end
    limit_mb = job.get("memory_limit_mb") or 0
    # what the reproducer may read (reprokit.time_left, reprokit.host_memory_mb)
    if job.get("deadline"):
        os.environ[DEADLINE_VAR] = repr(float(job["deadline"]))
    if limit_mb:
        os.environ[MEMORY_VAR] = str(int(limit_mb))
    if limit_mb and job["device"] == "cpu":
        import resource

        limit = int(already_mapped) + int(limit_mb) * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    try:
        result = execute(job)
    except BaseException:  # sys.exit() in a variant: nothing it started outlives it either
        escaped = _end_run(watcher)
        if escaped:
            sys.stderr.write("harness: %s\n" % strays_text(escaped))
        raise
    escaped = _end_run(watcher)
    if escaped:
        result["warnings"] = list(result.get("warnings") or []) + [strays_text(escaped)]
    write_atomically(result_path, result)


def main(argv):
    if len(argv) == 3 and argv[1] == "--worker":
        with open(argv[2]) as f:
            code = serve(json.load(f))
        # the worker's children are ended and reaped and every message was written: exit
        # now, without the interpreter's teardown of torch (a quarter of a second that the
        # harness would wait for between environments)
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(code)
    if len(argv) != 3:
        sys.stderr.write("usage: child.py JOB.json RESULT.json | child.py --worker IMPORTS.json\n")
        return 2
    with open(argv[1]) as f:
        job = json.load(f)
    if job.get("protocol") != PROTOCOL:
        sys.stderr.write(
            "child protocol %s cannot run job protocol %s\n" % (PROTOCOL, job.get("protocol"))
        )
        return 3
    run_here(job, argv[2], job.get("parent_pid"))
    return 0


# -- the environment's imports, shared by the health check and the warm worker ------------


def _in_a_fork(read, *args):
    """``read(*args)`` (JSON-able) computed in a short-lived fork, so that whatever it
    initialises (CUDA) never touches this process."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        answer = None
        try:
            os.close(read_end)
            answer = read(*args)
        except BaseException:
            pass
        finally:
            try:
                data = json.dumps(answer).encode()
                while data:
                    data = data[os.write(write_end, data) :]
            finally:
                os._exit(0)
    os.close(write_end)
    sent = _read_to_end(read_end)
    os.waitpid(pid, 0)
    try:
        return json.loads(sent.decode() or "null")
    except ValueError:
        return None


def probe_report(wanted, facts_in_a_fork=False):
    """The environment's health check: import ``wanted`` (lists of alternatives, the first
    that imports wins), then report {"versions": {...}, "missing": {alternatives: error}}:
    the versions that really loaded and what torch sees of CUDA. ``facts_in_a_fork``: ask
    CUDA in a fork (the warm worker, which must never initialise CUDA itself)."""
    if facts_in_a_fork and NVML_CHECK not in os.environ:
        os.environ[NVML_CHECK] = "1"  # torch >= 2.0 answers is_available() from NVML
        _SET_HERE.append(NVML_CHECK)
    missing = {}
    for alternatives in wanted:
        errors = []
        for name in alternatives:
            try:
                importlib.import_module(name)
                break
            except Exception as exc:
                errors.append("%s: %s" % (type(exc).__name__, exc))
        else:
            # the first alternative's error, then why each other one did not import either
            missing["/".join(alternatives)] = errors[0] + "".join(
                " (%s: %s)" % (name, error) for name, error in zip(alternatives[1:], errors[1:])
            )
    for optional in ("numpy",):
        try:
            importlib.import_module(optional)
        except ImportError:
            pass
    if facts_in_a_fork and hasattr(os, "fork"):
        found = _in_a_fork(_probe_versions, wanted)
        if not isinstance(found, dict):  # the fork died asking CUDA: what is loaded, no facts
            found = versions_loaded()
            found["cuda_available"] = "error: the probe's fork died asking CUDA"
    else:
        found = _probe_versions(wanted)
    return {"versions": found, "missing": missing}


def _probe_versions(wanted):
    v = versions()
    for alternatives in wanted:
        for name in alternatives:
            if name in sys.modules:
                v[name] = str(getattr(sys.modules[name], "__version__", "?"))
    torch = sys.modules.get("torch")
    if torch is None:
        return v

    def fact(key, read):
        try:
            value = read()
        except Exception as exc:  # a broken CUDA setup is a fact about the machine
            value = "error: %s: %s" % (type(exc).__name__, str(exc)[:300])
        if value is not None:
            v[key] = value

    fact("torch_hip", lambda: str(getattr(torch.version, "hip", None)))
    # torch.compile's inductor imports setuptools (torch.utils.cpp_extension) to build its
    # kernels: found without importing it, "" where it is not installed
    fact("setuptools", _setuptools_version)
    # Triton, found without importing it ("" where it is not installed), and the CUDA runtime
    # library that importing torch mapped ("" none: linked statically, or a CPU build)
    fact("triton", lambda: "yes" if importlib.util.find_spec("triton") is not None else "")
    fact("cuda_runtime", _mapped_cudart)
    fact("cuda_available", lambda: str(torch.cuda.is_available()))
    # the architectures this build has kernels for; readable without a GPU
    flags = getattr(torch._C, "_cuda_getArchFlags", None)
    fact(
        "cuda_arch_list",
        lambda: (
            " ".join(torch.cuda.get_arch_list())
            if torch.cuda.is_available()
            else (flags() if flags else None)
        ),
    )
    if v.get("cuda_available") == "True":
        fact("compute_capability", lambda: "%d.%d" % torch.cuda.get_device_capability(0))
        fact("bf16_supported", lambda: str(torch.cuda.is_bf16_supported()))
        fact("device_count", lambda: str(torch.cuda.device_count()))
        driver = getattr(torch._C, "_cuda_getDriverVersion", None)
        if driver is not None:
            fact("cuda_driver_api", lambda: "%d.%d" % divmod(driver() // 10, 100))
    return v


def _mapped_cudart():
    try:
        with open("/proc/self/maps") as f:
            paths = sorted({ln.split()[-1] for ln in f if "libcudart" in ln and "/" in ln})
    except OSError:
        return None  # not Linux: not looked
    return paths[0] if paths else ""


def _setuptools_version():
    if importlib.util.find_spec("setuptools") is None:
        return ""
    try:
        from importlib import metadata  # Python 3.8+
    except ImportError:
        return "?"
    try:
        return metadata.version("setuptools")
    except Exception:  # installed without its metadata
        return "?"


def versions_loaded():
    """The versions of what is loaded, without asking CUDA anything (see versions())."""
    out = {"python": "%d.%d.%d" % sys.version_info[:3]}
    for name in ("torch", "lightning", "pytorch_lightning", "numpy"):
        module = sys.modules.get(name)
        if module is not None:
            out[name] = str(getattr(module, "__version__", "?"))
    torch = sys.modules.get("torch")
    if torch is not None:
        out["torch_cuda"] = str(getattr(torch.version, "cuda", None))
    return out


# -- the warm worker ------------------------------------------------------------------------


def fork_refusal():
    """Why forking a child from this process is unsafe now, or None when it is safe."""
    torch = sys.modules.get("torch")
    try:
        if torch is not None and torch.cuda.is_initialized():
            return "CUDA is initialised in the warm worker (forking after that is unsafe)"
    except Exception as exc:  # an unreadable CUDA state is not a safe one
        return "cannot tell whether CUDA is initialised in the warm worker: %s" % exc
    try:
        with open("/proc/self/maps") as f:
            if any("libcuda.so" in line for line in f):
                return "the CUDA driver is loaded in the warm worker (forking after that is unsafe)"
    except OSError:
        return "cannot read /proc/self/maps to tell whether the CUDA driver is loaded"
    return None


def _forked_child(request, closing, leader=False):
    """In the fork: become a session leader, take the job's files as stdio, run the job.
    ``leader``: it already is one (a spare, see _fork_spare)."""
    if not leader:
        os.setsid()  # its own process group: a timeout ends all of it
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # as in a fresh interpreter
    for fd in closing:  # the worker's protocol and wake-up pipes are not the job's
        os.close(fd)
    for name in _SET_HERE:  # the job sees the environment a fresh interpreter would
        os.environ.pop(name, None)
    stdin = os.open(os.devnull, os.O_RDONLY)
    out = os.open(request["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    err = os.open(request["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    for fd, target in ((stdin, 0), (out, 1), (err, 2)):
        os.dup2(fd, target)
        os.close(fd)
    job = request["job"]
    if job.get("protocol") != PROTOCOL:
        sys.stderr.write(
            "child protocol %s cannot run job protocol %s\n" % (PROTOCOL, job.get("protocol"))
        )
        return 3
    # what the worker has mapped (torch and the rest) is not the variant's to pay for
    # no watcher of its own (a fork of this size costs tens of ms): the worker's reaper
    # ends this group if the worker dies, the worker ends it if the harness dies
    run_here(job, request["result"], None, already_mapped=_vm_bytes())
    return 0


def _exit_with(job_in_fork):
    """In a fork: run ``job_in_fork()`` and end the process with the status it returns
    (sys.exit() in a reproducer: the status it asked for; any other escape: 1), never
    returning into the worker's code."""
    code = 70
    try:
        code = job_in_fork()
    except SystemExit as exc:  # sys.exit() in a reproducer: the exit status it asked for
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:
        traceback.print_exc()
        code = 1
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def _start_child(request, closing):
    """Fork one child for ``request``; return its pid (the parent's side only)."""
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid:
        return pid
    _exit_with(lambda: _forked_child(request, closing))
    return 0  # not reached


class _Spare:
    """A child forked ahead of its job (the fork is the costliest part of starting one):
    it leads its own session at once and waits for its request on a pipe. It is a fresh
    fork of the clean worker like any child; the worker never changes between jobs, so
    forking it a moment earlier changes nothing a job can see."""

    def __init__(self, pid, feed):
        self.pid = pid
        self.feed = feed  # the write end of its request pipe

    def hand(self, request):
        data = json.dumps(request).encode()
        try:
            while data:
                data = data[os.write(self.feed, data):]
        finally:
            os.close(self.feed)

    def dismiss(self):
        """No job for it: closing its pipe unread ends it (it exits on EOF)."""
        try:
            os.close(self.feed)
        except OSError:
            pass


def _fork_spare(closing):
    """Fork a spare child (see _Spare); None where forking is not safe now."""
    if fork_refusal() is not None:
        return None
    sys.stdout.flush()
    sys.stderr.flush()
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid:
        os.close(read_end)
        return _Spare(pid, write_end)
    _exit_with(lambda: _spare_waits(read_end, write_end, closing))
    return None  # not reached


def _read_to_end(fd):
    """Everything a pipe's writer sends before it closes its end; ``fd`` is closed."""
    chunks = []
    while True:
        data = os.read(fd, 1 << 16)
        if not data:
            break
        chunks.append(data)
    os.close(fd)
    return b"".join(chunks)


def _spare_waits(read_end, write_end, closing):
    """In a spare: lead a session of its own, wait for the request, run it (0 when
    dismissed unread)."""
    os.close(write_end)
    os.setsid()  # its own process group from the start: the reaper can end it
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    for fd in closing:  # the worker's pipes: the reaper's must close when the worker dies
        os.close(fd)
    request = _read_to_end(read_end)
    if not request:  # dismissed: the worker is stopping
        return 0
    return _forked_child(json.loads(request.decode()), (), leader=True)


def serve(wanted):
    """The warm worker: import once, then fork one child per requested job."""
    channel = os.dup(1)  # the protocol; stray prints from imports go to stderr instead
    os.dup2(2, 1)

    def send(message):
        data = (json.dumps(message) + "\n").encode()
        while data:
            data = data[os.write(channel, data) :]  # BrokenPipeError: the harness is gone

    # a job's process that dies leaving a daemon (it killed by the timeout, or it crashed)
    # leaves it to the worker, which ends it (_serve_requests)
    become_subreaper()
    # forked while the worker is still small: one reaper instead of a watcher per job
    reaper, reaper_pid = _start_reaper()
    started = time.time()
    try:
        report = probe_report(wanted, facts_in_a_fork=True)
    except BaseException as exc:
        send(
            {
                "event": "ready",
                "ok": False,
                "pid": os.getpid(),
                "error": _bounded(
                    "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
                ),
            }
        )
        return 1
    if hasattr(gc, "freeze"):  # 3.7+: a child's collections never touch (so never copy)
        gc.freeze()  # the worker's objects: their pages stay shared with the worker
    send(
        {
            "event": "ready",
            "ok": True,
            "pid": os.getpid(),
            "probe": report,
            "seconds": round(time.time() - started, 3),
            "protocol": PROTOCOL,
        }
    )
    running = {}  # pid -> request id
    # a child's end wakes the loop at once (SIGCHLD writes a byte to this pipe)
    wake_read, wake_write = os.pipe()
    for fd in (wake_read, wake_write):
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_NONBLOCK)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)
    try:
        _serve_requests(send, (channel, wake_read, wake_write, reaper), running, reaper_pid)
    except (BrokenPipeError, KeyboardInterrupt):
        pass
    for pid in running:  # the harness is gone: nobody will read their results
        _kill_group(pid)
    for pid in list(running):
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass
    return 0


def _serve_requests(send, own_fds, running, reaper_pid):
    wake, reaper = own_fds[1], own_fds[3]
    results = {}  # pid -> the result file its job writes
    pending = b""
    reading = True
    spare = None  # a child forked ahead of the next request (_fork_spare)
    try:
        while reading or running:
            if reading and spare is None:
                spare = _fork_spare(own_fds)
                if spare is not None:
                    os.write(reaper, ("+%d\n" % spare.pid).encode())
            watched = [0, wake] if reading else [wake]
            ready, _, _ = select.select(watched, [], [], 0.5 if running else None)
            if wake in ready:
                try:
                    os.read(wake, 4096)
                except OSError:  # nothing left to read (non-blocking)
                    pass
            if reading and 0 in ready:
                data = os.read(0, 1 << 16)
                if not data:
                    reading = False  # the harness is gone: nobody will read a result
                    for pid in running:
                        _kill_group(pid)
                pending += data
                pending, spare = _start_requested(pending, send, own_fds, running, results, spare)
            spare = _reap_ended(send, running, results, spare, reaper, reaper_pid, reading)
    finally:
        if spare is not None:  # stopping: the spare exits when its pipe closes unread
            spare.dismiss()
            try:
                os.waitpid(spare.pid, 0)
            except ChildProcessError:
                pass


def _start_requested(pending, send, own_fds, running, results, spare):
    """Start a job for each whole request line in ``pending`` (in the spare, where there is
    one); returns what is left of ``pending`` and the spare (None: handed a job)."""
    reaper = own_fds[3]
    while b"\n" in pending:
        line, pending = pending.split(b"\n", 1)
        if not line.strip():
            continue
        request = json.loads(line.decode())
        if request.get("op") != "run":
            continue
        refusal = fork_refusal()
        if refusal is not None:
            send({"event": "refused", "id": request["id"], "reason": refusal})
            continue
        if spare is not None:
            pid = spare.pid
            spare.hand(request)
            spare = None
        else:  # the spare died, or a second request came before a new one
            pid = _start_child(request, own_fds)
            os.write(reaper, ("+%d\n" % pid).encode())
        running[pid] = request["id"]
        results[pid] = request.get("result", "")
        send({"event": "started", "id": request["id"], "pid": pid})
    return pending, spare


def _reap_ended(send, running, results, spare, reaper, reaper_pid, reading):
    """Reap every child that ended and say so (while the harness reads); returns the spare
    (None: it ended before its job came)."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            running.clear()
            return spare
        if pid == 0:
            return spare
        if spare is not None and pid == spare.pid:  # ended before its job came
            spare.dismiss()
            spare = None
            os.write(reaper, ("-%d\n" % pid).encode())
            continue
        request_id = running.pop(pid, None)
        strays = []
        if request_id is not None:
            os.write(reaper, ("-%d\n" % pid).encode())
            result = results.pop(pid, "")
            # a job's process that wrote its result ended its own daemons first
            # (run_here); one that did not may have left them here
            if status != 0 or not (result and os.path.exists(result)):
                keep = set(running) | {reaper_pid}
                if spare is not None:
                    keep.add(spare.pid)
                strays = end_descendants(keep, group=pid)
        if request_id is not None and reading:
            send(
                {
                    "event": "ended",
                    "id": request_id,
                    "pid": pid,
                    "status": status,
                    "strays": strays,
                }
            )


def _start_reaper():
    """Fork the worker's reaper; return the pipe that tells it the children's groups, and
    its pid.

    It reads "+PGID" / "-PGID" lines; when the pipe closes (the worker exited or was
    killed, however) it kills every group still listed and exits, so that a job's
    process group never outlives its worker. It ignores SIGTERM and SIGINT: its one job
    is to outlive the worker by a moment.
    """
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid:
        os.close(read_end)
        return write_end, pid
    try:
        os.close(write_end)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        groups = set()
        pending = b""
        while True:
            data = os.read(read_end, 4096)
            if not data:
                break
            pending += data
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                text = line.decode()
                if text[:1] == "+":
                    groups.add(int(text[1:]))
                elif text[:1] == "-":
                    groups.discard(int(text[1:]))
        for pgid in groups:
            _kill_group(pgid)
    finally:
        os._exit(0)


def _kill_group(pgid):
    try:
        os.killpg(pgid, signal.SIGKILL)
    except OSError:
        pass


if __name__ == "__main__":
    sys.exit(main(sys.argv))
