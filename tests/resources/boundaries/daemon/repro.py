"""Variants that leave a daemon behind (fork, setsid, fork, every descriptor closed): the
daemon's command line ends with $REL_SIGNAL_DIR, so that the test finds it (no torch)."""

import os
import sys
import time


def _daemon(mark):
    read_end, write_end = os.pipe()  # not inheritable: the daemon's exec closes it
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
    while os.read(read_end, 1):  # until the daemon has exec'd
        pass
    os.close(read_end)


def leaves(device, precision):
    _daemon(os.environ.get("REL_SIGNAL_DIR", "daemon"))
    return {"returned": {"ok": True, "detail": "a daemon is still running"}}


def leaves_and_hangs(device, precision):
    _daemon(os.environ.get("REL_SIGNAL_DIR", "daemon"))
    time.sleep(3600)


def leaves_and_dies(device, precision):
    _daemon(os.environ.get("REL_SIGNAL_DIR", "daemon"))
    os._exit(3)


VARIANTS = {
    "leaves": leaves,
    "leaves-and-hangs": leaves_and_hangs,
    "leaves-and-dies": leaves_and_dies,
}


if __name__ == "__main__":
    print(VARIANTS[sys.argv[1]]("cpu", "fp32"))
