"""Variants that wait for the test (no torch needed).

Each blocking variant writes an empty file `<tag>.<pid>` into $REL_SIGNAL_DIR when it
starts, then blocks while `$REL_SIGNAL_DIR/hold` exists, then passes.
"""

import os
import signal
import sys
import time

OK = {"released": {"ok": True, "detail": "the test let it go"}}


def _announce(tag):
    folder = os.environ.get("REL_SIGNAL_DIR")
    if folder:
        open(os.path.join(folder, "%s.%d" % (tag, os.getpid())), "w").close()


def _wait():
    folder = os.environ.get("REL_SIGNAL_DIR")
    while folder and os.path.exists(os.path.join(folder, "hold")):
        time.sleep(0.05)


def run(variant, device, precision):
    if variant == "held":
        _announce("held")
        _wait()
        return OK
    if variant == "stubborn":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        _announce("stubborn")
        _wait()
        return OK
    if variant == "forks":
        if os.fork() == 0:
            _announce("grandchild")
            _wait()
            os._exit(0)
        _announce("forks")
        _wait()
        return OK
    if variant == "after":
        return OK
    raise ValueError("unknown variant " + variant)


def held(device, precision):  # blocks while the hold file exists
    return run("held", device, precision)


def stubborn(device, precision):  # ignores SIGTERM and blocks
    return run("stubborn", device, precision)


def forks(device, precision):  # forks a grandchild; both block
    return run("forks", device, precision)


def after(device, precision):  # returns at once
    return run("after", device, precision)


VARIANTS = {"held": held, "stubborn": stubborn, "forks": forks, "after": after}

if __name__ == "__main__":
    print(run(sys.argv[1], "cpu", "fp32"))
