"""A tiny reproducer whose variants fail in every way a real one can (no torch needed)."""

import os
import signal
import sys
import time


class Unsupported(Exception):
    pass


class DocumentedError(RuntimeError):
    pass


class Unprintable(Exception):
    """An exception whose message cannot be read: str() and repr() raise."""

    def __str__(self):
        raise RuntimeError("no str for you")

    def __repr__(self):
        raise RuntimeError("no repr either")


def _escape(mark):
    """fork, setsid, fork: a grandchild in a session of its own (PPID 1 once its parent
    is gone) that closes every descriptor and sleeps, as a daemon does. It execs a
    Python whose command line ends with ``mark``, so that a test can find it; returns
    once it has (its end of the pipe closes on exec)."""
    read_end, write_end = os.pipe()  # not inheritable: exec closes it
    pid = os.fork()
    if pid == 0:
        os.setsid()
        if os.fork() == 0:
            os.closerange(0, write_end)
            os.closerange(write_end + 1, 4096)
            code = "import time; time.sleep(3600)"
            os.execv(sys.executable, [sys.executable, "-I", "-S", "-c", code, mark])
        os._exit(0)
    os.close(write_end)
    os.waitpid(pid, 0)
    while os.read(read_end, 1):
        pass
    os.close(read_end)


def run(variant, device, precision):
    if variant == "documented":
        raise DocumentedError("GradScaler unscale_() encountered None gradient (tiny)")
    if variant == "other":
        raise ValueError("something else went wrong")
    if variant in ("ok", "control"):
        return {"moved": {"ok": True, "detail": "weights changed by 0.1"}}
    if variant == "wrong":
        return {
            "moved": {"ok": True, "detail": ""},
            "finite": {"ok": False, "detail": "loss is nan"},
        }
    if variant == "unsupported":
        raise Unsupported("torch.amp.GradScaler('cpu') does not exist here")
    if variant == "segfault":
        os.kill(os.getpid(), signal.SIGSEGV)
    if variant == "exit":
        os._exit(3)
    if variant == "hang":
        time.sleep(3600)
    if variant == "ignore-term":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        time.sleep(3600)
    if variant == "fork-hang":
        if os.fork() == 0:
            time.sleep(3600)
        time.sleep(3600)
    if variant == "oom":
        hog = []
        while True:
            hog.append(bytearray(64 * 1024 * 1024))
    if variant == "mutate":  # changes what a later variant would see, if it shared a process
        import json

        json.harness_mutated = True
        os.environ["HARNESS_MUTATED"] = "1"
        sys.path.insert(0, "/harness-mutated")
        return {"moved": {"ok": True, "detail": "mutated json, os.environ and sys.path"}}
    if variant == "clean":
        import json

        leaks = [
            what
            for what, seen in (
                ("json.harness_mutated", hasattr(json, "harness_mutated")),
                ("os.environ", "HARNESS_MUTATED" in os.environ),
                ("sys.path", "/harness-mutated" in sys.path),
            )
            if seen
        ]
        return {"clean": {"ok": not leaks, "detail": "leaked: %s" % leaks if leaks else ""}}
    if variant == "limits":  # what the harness tells the reproducer of the job's limits
        kit = _kit()
        return {
            "deadline": {"ok": kit.time_left() < 300, "detail": "%.1f s left" % kit.time_left()},
            "memory": {"ok": kit.host_memory_mb() is not None, "detail": str(kit.host_memory_mb())},
        }
    if variant == "stuck-child":  # waits for a child that never ends, as long as the job may
        import subprocess

        subprocess.run(
            [sys.executable, "-c", "import time; time.sleep(3600)"],
            timeout=_kit().time_left(default_s=3600, margin_s=5),
        )
    if variant == "sys-exit":
        sys.exit(4)
    if variant == "loud":
        for _ in range(200):
            sys.stdout.write("x" * 10000 + "\n")
        sys.stderr.buffer.write(bytes(range(256)) * 100)
        return {"moved": {"ok": True, "detail": "after printing 2 MB"}}
    if variant == "unprintable":
        raise Unprintable()
    if variant == "sigchld-handler":  # as torch's DataLoader: a handler that raises when a
        # worker is killed, and a worker still alive when the variant returns

        def handler(signum, frame):
            raise RuntimeError("DataLoader worker (pid %d) is killed by signal" % worker)

        signal.signal(signal.SIGCHLD, handler)
        worker = os.fork()
        if worker == 0:
            time.sleep(3600)
            os._exit(0)
        return {"moved": {"ok": True, "detail": "left a worker with a SIGCHLD handler"}}
    if variant in ESCAPES:  # leaves a daemon behind, then returns, hangs or dies
        how = variant.split("-", 1)[1]
        _escape(os.environ.get("TINY_ESCAPE_MARK", "tiny-escape"))
        if how == "hang":
            time.sleep(3600)
        if how == "crash":
            os._exit(3)
        return {"moved": {"ok": True, "detail": "left a daemon behind"}}
    raise ValueError("unknown variant " + variant)


def _kit():
    """repros/reprokit.py of this checkout (the harness puts it on sys.path only for entries
    under repros/)."""
    import importlib.util

    path = os.path.join(os.path.dirname(__file__), *[".."] * 5, "repros", "reprokit.py")
    spec = importlib.util.spec_from_file_location("reprokit_of_the_checkout", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def documented(device, precision):
    return run("documented", device, precision)


def other(device, precision):
    return run("other", device, precision)


def ok(device, precision):
    return run("ok", device, precision)


def wrong(device, precision):
    return run("wrong", device, precision)


def unsupported(device, precision):
    return run("unsupported", device, precision)


def control(device, precision):
    return run("control", device, precision)


# the variants entry.yaml declares (read statically by the harness)
VARIANTS = {
    "documented": documented,
    "other": other,
    "ok": ok,
    "wrong": wrong,
    "unsupported": unsupported,
    "control": control,
}
# the fault variants tests/execute/test_runner.py runs as ad-hoc variants of this entry, added
# at run time where the static reading does not look
FAULTS = ("segfault", "exit", "hang", "ignore-term", "fork-hang", "oom", "mutate", "clean")
FAULTS += ("limits", "stuck-child")
# escape-*: leave a daemon whose command line ends with $TINY_ESCAPE_MARK (the test's)
ESCAPES = ("escape-ok", "escape-hang", "escape-crash")
for _name in FAULTS + ("sys-exit", "loud", "unprintable", "sigchld-handler") + ESCAPES:
    VARIANTS[_name] = lambda device, precision, _name=_name: run(_name, device, precision)

if __name__ == "__main__":
    print(run(sys.argv[1], "cpu", "fp32"))
