"""`harness try SCRIPT --save-as ID`: the script and what it measured as a scaffolded entry.

The entry is written by the scaffolding `new` uses (``write_scaffold``: the loader's checks
first, never an overwrite): its signature is the error the script raised (the one ``--expect``
names, else the newest release's), its document the table ``try`` measured; the script is
kept beside it as ``script.py`` and the baseline runs it unmodified (``runpy``, as
``__main__``) on the CPU at fp32. The control is left to the author (None: not written).
"""

from __future__ import annotations

from pathlib import Path

from packaging.version import Version

from harness.catalogue.tryscript import Row, Trial, TryError

__all__ = ["render_repro", "save_as"]


def render_repro(entry_id: str, uses_lightning: bool) -> str:
    lightning = (
        "    import pytorch_lightning  # noqa: F401  (the script imports lightning)\n"
        if uses_lightning
        else ""
    )
    return f'''"""Reproducer of {entry_id}: script.py (saved by `harness try --save-as`), run as it is.

TODO: the control (the same program without the cause), and postconditions a run can fail.
"""

from __future__ import annotations

import runpy
from pathlib import Path

from reprokit import Unsupported

SCRIPT = Path(__file__).with_name("script.py")


def baseline(device, precision):
    if device != "cpu" or precision != "fp32":
        raise Unsupported("the script as written runs on the CPU at fp32")
{lightning}    runpy.run_path(str(SCRIPT), run_name="__main__")
    return {{}}


VARIANTS = {{
    "baseline": baseline,
    "control": None,
}}
'''


def _error_row(trial: Trial) -> Row:
    raised = [r for r in trial.rows if r.seen.outcome == "raised"]
    if not raised:
        raise TryError(
            f"--save-as {trial.request.save_as}: the script raised nothing on the releases "
            "measured; an entry needs the error it documents"
        )
    wanted = [r for r in raised if r.seen.expected] or raised
    return max(wanted, key=lambda r: (Version(r.env.torch), Version(r.env.lightning)))


def _document(trial: Trial, row: Row) -> str:
    lines = [
        f"# {row.seen.type}: {row.seen.message.splitlines()[0] if row.seen.message else ''}",
        "",
        f"Measured by `python -m harness try {trial.script.name}` on {trial.request.device}:",
        "",
        "| torch | lightning | python | outcome | message |",
        "|---|---|---|---|---|",
    ]
    for r in trial.rows:
        text = r.seen.text.splitlines()[0] if r.seen.text else ""
        lines.append(
            f"| {r.env.torch} | {r.env.lightning} | {r.env.python} | {r.seen.outcome} | "
            f"{text.replace('|', '/')[:160]} |"
        )
    return "\n".join(lines) + "\n"


def save_as(trial: Trial) -> Path:
    from harness.catalogue.scaffold import (
        DocumentError,
        Scaffold,
        _first_sentence,
        message_pattern,
        write_scaffold,
    )
    from harness.spec.entries import EntryError, load_entry

    entry_id = trial.request.save_as or ""
    row = _error_row(trial)
    first = row.seen.message.splitlines()[0] if row.seen.message else ""
    source = trial.script.read_text()
    scaffold = Scaffold(
        format="try",
        entry_id=entry_id,
        title=f"{row.seen.type}: {_first_sentence(first)}"[:200],
        exc_type=row.seen.type.rsplit(".", 1)[-1],
        message=message_pattern(_first_sentence(first)),
        type_named=True,
        origin={"generated_by": f"harness try {trial.script.name} (sha256 {trial.sha[:12]})"},
        source_text=f"```python\n{source}\n```\n",
        document_text=_document(trial, row),
    )
    repros = trial.cfg.repros_dir
    try:
        folder, _ = write_scaffold(scaffold, repros, entry_id)
    except FileExistsError as exc:
        raise TryError(str(exc)) from exc
    except DocumentError as exc:
        raise TryError(str(exc)) from exc
    (folder / "script.py").write_text(source)
    (folder / "repro.py").write_text(render_repro(entry_id, trial.uses_lightning))
    try:
        load_entry(folder, repros)
    except EntryError as exc:  # pragma: no cover - the scaffold was loaded before
        raise TryError(f"{folder}: the saved entry does not load: {exc}") from exc
    trial.say(
        f"--save-as: wrote {folder} (entry.yaml, repro.py running script.py as its baseline, "
        "source.md, document.md); next: the control, then `python -m harness check "
        f"{entry_id}`"
    )
    return folder
