"""Runs a user's script as ``python SCRIPT`` under the bounds of a run (``harness try``).

Standard library only, run by path by the target environment's interpreter, like child.py:

    python harness/inenv/script.py JOB.json RESULT.json

The job is ``{"script": "/abs/path.py", "device": "cpu", "memory_limit_mb": 8192,
"flags": ["-E", "-s"]}``. On a CPU job the memory limit bounds the address space (as
child.py does in a fresh interpreter; not on CUDA, whose driver reserves huge ranges);
then this process becomes ``python [flags] SCRIPT`` (exec: the same process, so the
run's process group, timeout and memory bound hold it). It writes no result: the harness
reads the script's exit status and the traceback on its standard error.
"""

import json
import os
import sys


def main(argv):
    with open(argv[1]) as f:
        job = json.load(f)
    limit_mb = job.get("memory_limit_mb") or 0
    if limit_mb and job.get("device") == "cpu":
        import resource

        limit = int(limit_mb) * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    flags = [str(f) for f in job.get("flags") or []]
    os.execv(sys.executable, [sys.executable] + flags + [job["script"]])


if __name__ == "__main__":
    main(sys.argv)
