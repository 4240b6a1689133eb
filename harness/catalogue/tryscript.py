"""`harness try SCRIPT`: a script, unmodified, across releases, and where its outcome changes.

The script runs as ``python SCRIPT`` (harness/inenv/script.py execs it) in each selected
environment: built by the same backend as a run's (the same environments folder and uv
cache), run by ``run_isolated`` as a run's child is (its own process group and session, the
wall-clock timeout that ends the group, the memory bound). Each release gets an outcome read
from how the process ended (``classify``): ``ok``, ``raised`` (the exception's type and
message, parsed from the traceback on its standard error), ``wrong_exit`` (a non-zero exit
without a traceback), ``crashed``, ``timeout`` or ``env_failed``.

Each run is one JSON line in a store of its own (``results/try/`` or ``--store``), one file
per script and content hash, never the catalogue's ``results/records``. A script that imports
no lightning runs once per torch release and python (the run's rule, ``one_per_torch``), and
its stored runs are reused across every lightning beside that torch.

``--bisect``: between two neighbouring releases of the table whose outcomes differ, the
releases in between (from the package index) are searched by harness/catalogue/bisect.py's
checked search. Two outcomes are the same where they are of one kind and, for a raised
exception, of one type with one message once its variable parts are masked (``mask``); with
``--expect REGEX`` every exception whose "Type: message" the regex finds (a bounded search:
harness/catalogue/explain.py) is the one error of interest.
"""

from __future__ import annotations

import datetime as dt
import fnmatch
import functools
import hashlib
import json
import os
import re
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from packaging.version import Version
from rich.console import Console
from rich.table import Table

from harness.config import Config
from harness.domain import clip
from harness.errors import InputError
from harness.spec.matrix import Cell, Environment, Matrix

__all__ = [
    "OUTCOMES",
    "Seen",
    "TryError",
    "TryRequest",
    "TryStore",
    "classify",
    "mask",
    "parse_traceback",
    "measure",
    "summary",
    "select_environments",
]

OUTCOMES = ("ok", "raised", "wrong_exit", "crashed", "timeout", "env_failed")
# a row that --max-builds left unbuilt is shown as "unmeasured", never stored
STDERR_KEPT = 4000  # characters of a run's standard error kept in its record
SCHEMA = 1


class TryError(InputError):
    """A script, range, store or option ``try`` cannot use."""


# -- reading how a script ended ----------------------------------------------------------

_HEADER = "Traceback (most recent call last):"
# the exception's line: a dotted name, then ": message" (or nothing: `raise KeyError`)
_RAISED = re.compile(r"^([A-Za-z_][\w]*(?:\.[A-Za-z_][\w]*)*)(?::[ \t]?(.*))?$")
# a line that can end a traceback without one before it in the tail (the tail may have cut
# the header off): a type named like an exception
_ANSI = re.compile(r"[\x1b\ufffd]\[[0-9;]*m")  # colours (the tail makes ESC U+FFFD)
_NAMED = re.compile(r"^(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Interrupt|Exit|Warning)\b")


def parse_traceback(stderr: str) -> tuple[str, str] | None:
    """The type and message of the last traceback on ``stderr``: the first unindented line
    after its last "Traceback (most recent call last):" header, and the lines below it (a
    message of several lines). None where there is none. Where the header was cut off the
    tail, the last line that names an exception type."""
    stderr = _ANSI.sub("", stderr)
    at = stderr.rfind(_HEADER)
    lines = stderr[at + len(_HEADER) :].splitlines() if at >= 0 else []
    for i, line in enumerate(lines):
        if not line or line[0].isspace():
            continue
        found = _RAISED.match(line)
        if found is None:
            continue
        rest = "\n".join([found.group(2) or "", *lines[i + 1 :]]).strip()
        return found.group(1), rest
    if at < 0:
        for line in reversed([x for x in stderr.splitlines() if x.strip()][-3:]):
            found = _RAISED.match(line)
            if found is not None and _NAMED.match(line):
                return found.group(1), (found.group(2) or "").strip()
    return None


_HEX = re.compile(r"\b0x[0-9a-fA-F]+\b")
_PATH = re.compile(r"(?:/[\w.+-]+){2,}")


def mask(message: str) -> str:
    """A message's first line with what a run formats in masked (addresses, paths, numbers,
    quoted names, devices, dtypes: harness/catalogue/msgsearch.py's rule): two releases that
    raise "the same" error compare equal through it."""
    from harness.catalogue.msgsearch import variable_parts

    first = message.strip().splitlines()[0] if message.strip() else ""
    return variable_parts(_PATH.sub("<path>", _HEX.sub("<addr>", first)), "<>")


@dataclass(frozen=True)
class Seen:
    """One release's outcome for a script."""

    outcome: str  # one of OUTCOMES
    type: str = ""  # the exception's type (outcome raised)
    message: str = ""  # its message (first lines)
    detail: str = ""  # why: the exit status, the signal, the build's error
    expected: bool | None = None  # --expect found it (None: no --expect, or nothing raised)

    @property
    def key(self) -> str:
        """What two releases must share to count as one outcome: the kind; a raised
        exception's type and masked message (with --expect: the error of interest as one)."""
        if self.outcome != "raised":
            return self.outcome
        if self.expected:
            return "expected error"
        return f"{self.type}: {mask(self.message)}"

    @property
    def text(self) -> str:
        """The table's words: the exception's first line, or the reason."""
        if self.outcome == "raised":
            first = self.message.splitlines()[0] if self.message else ""
            return f"{self.type}: {first}" if first else self.type
        return self.detail


def _expect_matches(expect: str | None, exc_type: str, message: str) -> bool | None:
    if expect is None:
        return None
    from harness.catalogue.explain import bounded_search

    found = bounded_search(expect, f"{exc_type}: {message}")
    if found is None:
        raise TryError(
            f"--expect {expect!r}: not a regex the harness searches with (unsafe, or slower "
            "than its bound); write it without nested repeats"
        )
    return found


def classify(child: Any, timeout_s: float, expect: str | None = None) -> Seen:
    """The outcome of one script run from how its process ended (a ChildResult)."""
    from harness.execute.runner import fallback

    if child.timed_out or child.memory_exceeded or child.worker_failure or child.signal:
        outcome, reason = fallback(child, timeout_s)
        return Seen(outcome.value, detail=reason)
    if child.exit_code == 0:
        return Seen("ok", detail="exit status 0")
    raised = parse_traceback(child.stderr_tail)
    if raised is not None:
        exc_type, message = raised
        return Seen(
            "raised",
            exc_type,
            message[:2000],
            f"exit status {child.exit_code}",
            _expect_matches(expect, exc_type, message),
        )
    last = [x for x in child.stderr_tail.splitlines() if x.strip()][-1:]
    said = f": {clip(last[0].strip(), 200)}" if last else ""
    return Seen("wrong_exit", detail=f"exit status {child.exit_code} without a traceback{said}")


# -- the store -----------------------------------------------------------------------------


def script_hash(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def env_key(env: Environment, device: str, uses_lightning: bool) -> str:
    """Runs of one key measure the same thing: a script that imports no lightning is the
    same run whatever lightning lies beside its torch (the run's own rule, one_per_torch);
    the requirements --with added are part of it."""
    lit = env.lightning if uses_lightning else "*"
    extra = "".join(f" +{r}" for r in sorted(env.requires))
    return f"py{env.python}-torch{env.torch}-lightning{lit}-{device}{extra}"


@dataclass
class TryStore:
    """One JSON line per run, a file per script content (``<stem>-<sha12>.jsonl``)."""

    root: Path
    script: Path
    sha: str

    @property
    def path(self) -> Path:
        return self.root / f"{self.script.stem}-{self.sha[:12]}.jsonl"

    def load(self) -> list[dict[str, Any]]:
        if not self.path.is_file():
            return []
        out = []
        for n, line in enumerate(self.path.read_text().splitlines(), 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except ValueError as exc:
                raise TryError(f"{self.path}:{n}: not a JSON line ({exc})") from exc
            if isinstance(rec, dict) and rec.get("sha256") == self.sha:
                out.append(rec)
        return out

    def append(self, record: dict[str, Any]) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a") as f:
            f.write(json.dumps(record, sort_keys=True) + "\n")

    def latest(self, uses_lightning: bool) -> dict[str, dict[str, Any]]:
        """key -> the newest stored run of it (env_key)."""
        out: dict[str, dict[str, Any]] = {}
        for rec in self.load():
            requires = tuple(rec.get("requires") or ())
            env = Environment(rec["python"], rec["torch"], rec["lightning"], requires=requires)
            out[env_key(env, rec["device"], uses_lightning)] = rec
        return out


def seen_of(rec: dict[str, Any], expect: str | None = None) -> Seen:
    """A stored run's outcome, read against this call's --expect (not the one it ran with)."""
    exc_type, message = rec.get("type", ""), rec.get("message", "")
    expected = _expect_matches(expect, exc_type, message) if rec["outcome"] == "raised" else None
    return Seen(rec["outcome"], exc_type, message, rec.get("detail", ""), expected)


def record_for(
    script: Path, sha: str, env: Environment, device: str, seen: Seen, extra: dict[str, Any]
) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "script": str(script),
        "sha256": sha,
        "env": env.id,
        "python": env.python,
        "torch": env.torch,
        "lightning": env.lightning,
        "device": device,
        "requires": list(env.requires),
        **{k: v for k, v in asdict(seen).items()},
        "started_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        **extra,
    }


# -- which environments ------------------------------------------------------------------


def select_environments(
    matrix: Matrix,
    profile: str | None,
    torch: str | None,
    lightning: str | None,
    envs: Sequence[str],
    uses_lightning: bool,
) -> list[Environment]:
    """The profile's environments by default; with a --torch or --lightning range or an --env
    glob, every environment of the matrix's rows (no rule excluding it on CPU) that they
    select. A script that imports no lightning: one per torch release and python."""
    from harness.catalogue.bisect import _within, parse_range
    from harness.execute.plan import one_per_torch

    if torch or lightning or envs:
        pool = sorted(
            {
                e
                for row in matrix.rows
                if not row.interpreter
                for e in row.environments()
                if matrix.excluding_rule(Cell(e, "cpu", "fp32")) is None
            }
        )
    else:
        pool = list(matrix.expand(profile).environments)
    chosen = []
    for env in pool:
        if torch and not _within(Version(env.torch), *parse_range(torch)):
            continue
        if lightning and not _within(Version(env.lightning), *parse_range(lightning)):
            continue
        if envs and not any(fnmatch.fnmatchcase(env.id, g) for g in envs):
            continue
        chosen.append(env)
    if not uses_lightning:
        chosen = one_per_torch(chosen)
    if not chosen:
        said = " ".join(
            f"{flag} {value}"
            for flag, value in (("--torch", torch), ("--lightning", lightning))
            if value
        )
        said += "".join(f" --env {g}" for g in envs)
        raise TryError(f"{said.strip() or 'the profile'} selects no environment of {matrix.path}")
    return sorted(chosen, key=lambda e: (Version(e.torch), Version(e.lightning), e.python))


# -- the command ---------------------------------------------------------------------------


@dataclass(frozen=True)
class TryRequest:
    script: str
    profile: str | None = None
    torch: str | None = None
    lightning: str | None = None
    envs: tuple[str, ...] = ()
    device: str = "cpu"
    expect: str | None = None
    bisect: bool = False
    store: str | None = None  # default results/try
    requires: tuple[str, ...] = ()  # --with: requirements added to every environment
    rerun: bool = False
    max_builds: int | None = None
    save_as: str | None = None


@dataclass
class Row:
    env: Environment
    seen: Seen
    how: str  # "stored run", "run (environment reused)", "run (environment built in N s)"
    seconds: float = 0.0


@dataclass
class Trial:
    """One ``try``'s harness side: its script, store, environments and runs."""

    request: TryRequest
    cfg: Config
    console: Console
    matrix: Matrix
    script: Path
    sha: str
    uses_lightning: bool
    store: TryStore
    rows: list[Row] = field(default_factory=list)
    built: list[str] = field(default_factory=list)
    runs: int = 0
    started: float = 0.0  # time.monotonic() when measure began

    def say(self, text: str) -> None:
        self.console.print(text, markup=False)

    @functools.cached_property
    def _backend(self) -> Any:
        from harness.envs.backends import STANDIN_VAR, UvBackend

        return UvBackend(self.cfg.envs_dir, standin=os.environ.get(STANDIN_VAR))

    @functools.cached_property
    def _bound(self) -> Any:
        from harness.execute import memory

        return memory.choose(self.memory_mb)

    @property
    def timeout_s(self) -> float:
        return self.cfg.timeout_s or self.matrix.timeout_s

    @property
    def memory_mb(self) -> int:
        return self.cfg.memory_limit_mb or self.matrix.memory_limit_mb

    def stored(self) -> dict[str, dict[str, Any]]:
        return {} if self.request.rerun else self.store.latest(self.uses_lightning)

    def derive(self, env: Environment) -> Environment:
        """``env`` with the --with requirements, derived as a variant's ``requires:`` is
        (Environment.with_requires: itself where the row already satisfies them)."""
        if not self.request.requires:
            return env
        return env.with_requires(self.request.requires, lightning=self.uses_lightning)

    def key_of(self, env: Environment) -> str:
        return env_key(env, self.request.device, self.uses_lightning)

    def is_built(self, env: Environment) -> bool:
        return self.built_env(env) is not None

    def built_env(self, env: Environment) -> Environment | None:
        """``env``, or for a script without lightning an environment of the same torch and
        python already built here (any lightning): no build for what is measured alike."""
        from harness.envs.backends import MARKER

        if (self.cfg.envs_dir / env.id / MARKER).is_file():
            return env
        if self.uses_lightning or env.requires:
            return None
        for other in self.matrix_envs():
            if (other.python, other.torch) == (env.python, env.torch) and (
                self.cfg.envs_dir / other.id / MARKER
            ).is_file():
                return other
        return None

    def matrix_envs(self) -> list[Environment]:
        return sorted(
            {e for row in self.matrix.rows if not row.interpreter for e in row.environments()}
        )

    def builds_left(self) -> int | None:
        """How many more environments --max-builds allows (None: no cap)."""
        cap = self.request.max_builds
        return None if cap is None else max(cap - len(self.built), 0)

    def observe(self, env: Environment) -> Row:
        """The stored run of ``env``'s key, else a run (building the environment if needed,
        where --max-builds allows one more)."""
        held = self.stored().get(self.key_of(env))
        if held is not None:
            return Row(env, seen_of(held, self.request.expect), "stored run")
        ready = self.built_env(env)
        if ready is None and self.builds_left() == 0:
            cap = self.request.max_builds
            return Row(env, Seen("unmeasured", detail=f"not built (--max-builds {cap})"), "-")
        return self.measure(ready or env)

    def measure(self, env: Environment) -> Row:
        from harness.envs.backends import EnvFailed
        from harness.execute.proc import run_isolated

        started = time.monotonic()
        try:
            built = self._backend.ensure(env)
        except EnvFailed as exc:
            seen = Seen("env_failed", detail=_failure(str(exc)))
            self.store.append(record_for(self.script, self.sha, env, self.request.device, seen, {}))
            return Row(env, seen, "environment failed", time.monotonic() - started)
        how = "run (environment reused)"
        if not built.reused:
            self.built.append(env.id)
            how = f"run (environment built in {built.seconds:.0f} s)"
        flags = ["-E", "-s"] if built.isolated else []
        job = {
            "script": str(self.script),
            "device": self.request.device,
            "memory_limit_mb": self.memory_mb,
            "flags": flags,
        }
        child_env = dict(os.environ)
        if self.request.device == "cpu":
            child_env["CUDA_VISIBLE_DEVICES"] = ""
        child = run_isolated(
            [str(built.python), str(SCRIPT_RUNNER)],
            job,
            self.timeout_s,
            env=child_env,
            bound=self._bound,
        )
        self.runs += 1
        seen = classify(child, self.timeout_s, self.request.expect)
        self.store.append(
            record_for(
                self.script,
                self.sha,
                env,
                self.request.device,
                seen,
                {
                    "exit_code": child.exit_code,
                    "signal": child.signal,
                    "duration_s": round(child.duration_s, 3),
                    "stderr_tail": child.stderr_tail[-STDERR_KEPT:],
                    "versions": built.versions(),
                    "machine": self.cfg.machine or "",
                },
            )
        )
        return Row(env, seen, how, time.monotonic() - started)


SCRIPT_RUNNER = Path(__file__).parents[1] / "inenv" / "script.py"


def _failure(text: str) -> str:
    """What a failed build says, in a line: the installer's reason (its last lines) after
    the command it ran."""
    lines = [x.strip() for x in text.strip().splitlines() if x.strip()]
    reason = " ".join(lines[1:][-3:]) or (lines[0] if lines else "")
    return _first_words(reason, 300)


def _first_words(text: str, limit: int) -> str:
    """At most ``limit`` characters of ``text``'s first line, cut at a word's end."""
    return clip(text.strip().splitlines()[0] if text.strip() else "", limit)


def check_requires(requires: Sequence[str]) -> None:
    """--with takes requirements (PEP 508) of packages other than the axes: torch and
    lightning are chosen by --torch, --lightning and --env."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name

    for text in requires:
        try:
            name = canonicalize_name(Requirement(text).name)
        except InvalidRequirement as exc:
            raise TryError(f"--with {text!r}: not a requirement ({exc})") from exc
        if name in ("torch", "lightning", "pytorch-lightning"):
            raise TryError(
                f"--with {text!r}: {name} is an axis; choose its releases with --torch, "
                "--lightning or --env"
            )


def _script(path: str, repo: Path) -> Path:
    script = Path(path)
    if not script.is_absolute():
        script = (Path.cwd() / script).resolve()
    if not script.is_file():
        raise TryError(f"{path}: no such file; name a Python script")
    try:
        import ast

        ast.parse(script.read_text(), str(script))
    except (SyntaxError, UnicodeDecodeError, ValueError) as exc:
        raise TryError(f"{path}: not Python source this harness can read: {exc}") from exc
    return script


def uses_lightning_script(script: Path) -> bool:
    import ast

    from harness.spec.declared import uses_lightning

    return uses_lightning(ast.parse(script.read_text(), str(script)))


def table(trial: Trial, rows: Sequence[Row]) -> Table:
    t = Table(title=f"{trial.script.name} ({trial.sha[:12]}) on {trial.request.device}")
    t.add_column("torch")
    t.add_column("lightning" if trial.uses_lightning else "lightning (not imported)")
    t.add_column("python")
    t.add_column("outcome")
    t.add_column("message")
    t.add_column("from")
    for row in rows:
        mark = " (--expect)" if row.seen.expected else ""
        t.add_row(
            row.env.torch,
            row.env.lightning,
            row.env.python,
            row.seen.outcome + mark,
            _first_words(row.seen.text, 120),
            _short_how(row),
        )
    return t


def _short_how(row: Row) -> str:
    if row.how == "stored run":
        return "stored"
    if "built" in row.how:
        return f"built+run {row.seconds:.0f} s"
    return f"run {row.seconds:.0f} s" if row.how.startswith("run") else row.how


def measure(request: TryRequest, cfg: Config, console: Console) -> Trial:
    """The script run (or read from the store) in each selected environment, and the
    table printed; what the request asks next (--bisect, --save-as) is the caller's
    (harness/cli/trycmd.py: trybisect and trysave read this module, not the other way)."""
    from harness.spec.matrix import load_matrix

    if request.torch:
        from harness.catalogue.bisect import parse_range

        parse_range(request.torch)
    if request.lightning:
        from harness.catalogue.bisect import parse_range

        parse_range(request.lightning)
    if request.expect is not None:
        _expect_matches(request.expect, "", "")  # a bad regex is said before anything runs
    check_requires(request.requires)
    script = _script(request.script, cfg.repo)
    matrix = load_matrix(cfg.matrix_path)
    uses = uses_lightning_script(script)
    sha = script_hash(script)
    root = Path(request.store) if request.store else cfg.repo / "results" / "try"
    if root.resolve() == cfg.records_dir.resolve():
        raise TryError(f"--store {root}: that is the catalogue's record store; name another")
    trial = Trial(request, cfg, console, matrix, script, sha, uses, TryStore(root, script, sha))
    envs = [
        trial.derive(e)
        for e in select_environments(
            matrix, request.profile, request.torch, request.lightning, request.envs, uses
        )
    ]
    trial.say(
        f"{script}: {len(envs)} environment(s)"
        + ("" if uses else " (the script imports no lightning: one per torch release)")
        + f"; runs stored in {trial.store.path}"
    )
    trial.started = time.monotonic()
    plan_builds(trial, envs)
    for env in envs:
        row = trial.observe(env)
        trial.rows.append(row)
        trial.say(f"  torch {env.torch} lightning {env.lightning}: {row.seen.outcome} [{row.how}]")
    wide = Console(file=console.file, width=max(console.width, 150), highlight=False)
    wide.print(table(trial, trial.rows))
    return trial


def summary(trial: Trial) -> str:
    """The last line: runs, rows, environments built, time since ``measure`` began."""
    return (
        f"{trial.runs} run(s), {len(trial.rows)} row(s); environments built: "
        f"{', '.join(trial.built) or 'none'}; {time.monotonic() - trial.started:.0f} s"
    )


def plan_builds(trial: Trial, envs: Sequence[Environment]) -> None:
    """Say which environments the table needs built before any is."""
    stored = trial.stored()
    to_build = [e for e in envs if trial.key_of(e) not in stored and not trial.is_built(e)]
    if to_build:
        from harness.catalogue.bisect import build_plan, index_listing, may_build

        cache = trial.cfg.envs_dir / ".index-cache"
        index_listing("torch", cache)
        if trial.uses_lightning:
            index_listing("lightning", cache)
        builds = [may_build(e, cache) for e in to_build]
        for line in build_plan(builds, len(builds), trial.request.max_builds):
            trial.say(line)
