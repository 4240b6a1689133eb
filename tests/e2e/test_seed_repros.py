"""The seed reproducers, run for real on the torch/lightning installed in this interpreter
(the tests session installs torch 2.13.0 and lightning 2.6.6), must give the outcome that the
committed records say for the same versions: a regression check of the reproducers."""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from harness.catalogue.explain import strip_terminal
from harness.envs.backends import BuiltEnv
from harness.execute.plan import Job
from harness.execute.runner import run_job
from harness.outcomes import Outcome, signature_named
from harness.spec.entries import load_entries
from harness.spec.matrix import Cell, Environment
from harness.store.jsonl import Store, latest
from tests.paths import REPO, committed_records

pytestmark = [pytest.mark.torch, pytest.mark.slow]
ENTRIES = load_entries(REPO / "repros")
CASES = [
    pytest.param(e, v, p, id=f"{e.id}::{v.name}-{p}")
    for e in ENTRIES
    for v in e.variants
    if "cpu" in v.devices
    # version advice runs in an environment derived from its cell (requires:), not here
    and not e.requirements_for(v)
    for p in v.precisions
]


def _installed() -> tuple[str, str]:
    torch = pytest.importorskip(
        "torch", reason="needs torch in the test interpreter (nox -s tests)"
    )
    try:
        import lightning
    except ImportError:
        pytest.skip("needs lightning in the test interpreter (nox -s tests)")
    return torch.__version__, lightning.__version__


@pytest.fixture(scope="module")
def stored() -> dict[tuple[str, str, str], list]:
    torch_v, lightning_v = _installed()
    by_cell: dict[tuple[str, str, str], list] = {}
    for r in latest(Store(committed_records()).load().records):
        if (
            r.device == "cpu"
            and r.versions.get("torch") == torch_v
            and r.versions.get("lightning") == lightning_v
        ):
            by_cell.setdefault((r.entry, r.variant, r.precision), []).append(r)
    if not by_cell:
        pytest.skip(f"no committed records measured torch {torch_v} with lightning {lightning_v}")
    return by_cell


@pytest.fixture(scope="module")
def here() -> BuiltEnv:
    torch_v, lightning_v = _installed()
    py = f"{sys.version_info[0]}.{sys.version_info[1]}"
    env = Environment(python=py, torch=torch_v.split("+")[0], lightning=lightning_v)
    return BuiltEnv(
        env,
        Path(sys.prefix),
        Path(sys.executable),
        probe={"torch": torch_v, "lightning": lightning_v},
    )


@pytest.mark.parametrize(("entry", "variant", "precision"), CASES)
def test_variant_gives_the_stored_outcome(entry, variant, precision, here, stored) -> None:
    expected = stored.get((entry.id, variant.name, precision))
    if not expected and not any(key[0] == entry.id for key in stored):
        # a new entry: nothing of it is measured at these versions, so there is nothing to
        # regress against until its records are committed (an entry with records must have
        # them for every variant: the assert below)
        pytest.skip(f"{entry.id} has no committed record at these versions yet")
    assert expected, f"no committed record for {entry.id}::{variant.name} on cpu/{precision}"
    job = Job(entry, variant, Cell(here.env, "cpu", precision), 0)
    record = run_job(job, here, timeout_s=300, memory_limit_mb=0, provenance={"host": "test"})
    # the committed records' exceptions, classified by today's signatures (a record made
    # before a variant got its own related signature said other_error or reproduced)
    want = {_as_classified_now(r, entry, variant) for r in expected}
    if record.outcome == Outcome.UNSUPPORTED and all(
        map(_lightning_ran_another_precision, expected)
    ):
        # a precondition now decided before the run (reprokit.require_plugin_precision): the
        # committed records were measured before it and show Lightning substituting the
        # precision the variant asked for; the outcome the precondition gives is unsupported
        assert "Lightning runs" in record.reason, record.reason
        return
    assert record.outcome in want, (
        f"{job.id}: measured {record.outcome.value} ({record.reason or record.exception}), "
        f"committed records say {sorted(o.value for o in want)}"
    )
    if record.outcome in (Outcome.REPRODUCED, Outcome.RELATED, Outcome.OTHER_ERROR):
        seen = {(r.exception.type, _located(r.exception.message)) for r in expected if r.exception}
        assert (record.exception.type, _located(record.exception.message)) in seen


# a folder the reproducer made with tempfile.mkdtemp: its name differs in every run
_TEMP = re.compile(re.escape(tempfile.gettempdir()) + r"/[^\s\"':/]+/")
_PATH = re.compile(r"(/[^\s\"':]+)+/(repros/[^\s\"':]+)(\"?, line \d+|:\d+)?")


def _located(message: str) -> str:
    """A message with the checkout's own path and the line cut from the places in a
    reproducer it names (torch's compiler errors quote the reproducer's file: the committed
    run and this test run in different checkouts, of reproducers edited since), and without
    terminal escapes (the store now removes them whole; records stored before kept
    "\ufffd[1m")."""
    # the checkout's paths first: a checkout may itself live under the temporary folder
    message = _PATH.sub(
        lambda m: f"<repo>/{m[2]}" + (", line <n>" if m[3] else ""), strip_terminal(message)
    )
    return _TEMP.sub("<tmp>/", message)


def _signature_says(signature, exc) -> bool:
    # the harness's own rule for reading a record against a signature (a signature of type
    # Exception names every type, as the child's match on the class's bases does)
    if signature is None or exc is None:
        return False
    return signature_named(exc.type, exc.message, signature.type, signature.message)


def _as_classified_now(record, entry, variant) -> Outcome:
    if record.outcome in (Outcome.REPRODUCED, Outcome.RELATED, Outcome.OTHER_ERROR):
        if _signature_says(entry.signature, record.exception):
            return Outcome.REPRODUCED
        if _signature_says(variant.signature, record.exception):
            return Outcome.RELATED
    return record.outcome


def _lightning_ran_another_precision(record) -> bool:
    """Lightning's own warning, kept in the record: it ran another precision than asked."""
    return any(
        "Using `precision='bf16-mixed'` instead" in w for w in record.checks.get("_warnings", [])
    )


def test_a_baseline_runs_by_hand_and_says_what_happened() -> None:
    _installed()
    entry = next(e for e in ENTRIES if e.id == "pytorch/grad-scale-unscale-error")
    baseline = next(v for v in entry.variants if v.kind == "baseline")
    out = subprocess.run(
        [
            sys.executable,
            str(REPO / "repros" / "reprokit.py"),
            entry.id,
            "--variant",
            baseline.name,
            "--device",
            "cpu",
            "--precision",
            "fp32",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    text = out.stdout + out.stderr
    assert baseline.name in text, text
