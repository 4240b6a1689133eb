"""Where the tests find the repository and their resources (one definition), and the
committed tree: what git holds, never what a local run appended or re-rendered (a
newcomer's own `nox -s matrix` must not change the answer a test expects)."""

import atexit
import functools
import io
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RESOURCES = REPO / "tests" / "resources"


@functools.cache
def committed_tree() -> Path:
    """A folder holding repros/, matrix.yaml and results/ as the checkout's HEAD commits
    them (git archive): a record file a local run added is not there, one it appended to or
    a page it re-rendered is as committed. Outside a git checkout: the checkout itself."""
    try:
        archive = subprocess.run(
            ["git", "-C", str(REPO), "archive", "HEAD", "repros", "matrix.yaml", "results"],
            capture_output=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return REPO
    folder = Path(tempfile.mkdtemp(prefix="committed-tree-"))
    # removed when the process that made it ends (each test worker makes its own once)
    atexit.register(shutil.rmtree, folder, True)
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        # the "data" filter where this Python has it (3.11.4 and later; Debian's python3.11
        # is 3.11.2): the archive is this checkout's own HEAD either way
        if hasattr(tarfile, "data_filter"):
            tar.extractall(folder, filter="data")
        else:
            tar.extractall(folder)
    return folder


def committed_records() -> Path:
    """results/records/ of the committed tree."""
    return committed_tree() / "results" / "records"
