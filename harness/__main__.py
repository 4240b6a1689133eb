"""Command line: python -m harness {run,list,plan,report,merge,diff,new,check,export,bisect,envs,msgsearch} ..."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from harness.config import Config, out_of_range
from harness.execute.plan import parse_shard


def _ranged(name: str, kind: type[int] | type[float]) -> Callable[[str], float]:
    """An argparse type: the text as ``kind`` inside RANGES[name], or exit 2 saying so."""

    def convert(text: str) -> float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{text!r} is not {'a whole number' if kind is int else 'a number'}"
            ) from None
        problem = out_of_range(name, value)
        if problem:
            raise argparse.ArgumentTypeError(problem)
        return value

    convert.__name__ = kind.__name__  # argparse names the type in its messages
    return convert


def _machine(text: str) -> str:
    if not 1 <= len(text) <= 100:
        raise argparse.ArgumentTypeError(f"must be 1 to 100 characters, got {len(text)}")
    return text


__all__ = ["main"]


def _add_selection(p: argparse.ArgumentParser, shard: bool = True) -> None:
    p.add_argument("--profile", help="matrix.yaml profile (default: the file's default_profile)")
    p.add_argument("--entry", action="append", default=[], metavar="GLOB", help="entry id filter")
    p.add_argument(
        "--variant", action="append", default=[], metavar="GLOB", help="variant name filter"
    )
    p.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="GLOB",
        help="environment id filter, e.g. 'py3.10-torch1.12*'",
    )
    p.add_argument("--cell", action="append", default=[], metavar="GLOB", help="cell id filter")
    if shard:
        p.add_argument(
            "--shard",
            default="1/1",
            help="run shard K of N (whole environments, balanced by job count)",
        )
    p.add_argument("--matrix", default="matrix.yaml", help="matrix file, relative to the repo")
    p.add_argument(
        "--python",
        default=None,
        metavar="PATH",
        help="run in this existing interpreter (its torch and lightning; nothing installed) "
        "instead of the matrix's environments; the profile's devices and precisions apply",
    )
    p.add_argument(
        "--trials",
        type=_ranged("trials", int),
        default=None,
        help="trials per cell (default: the profile's); with --resume, adds the missing ones",
    )


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="harness", description=__doc__)
    ap.add_argument("--repo", default=".", help="project root (matrix.yaml, repros/, results/)")
    sub = ap.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="build/reuse environments and run the matrix")
    _add_selection(run)
    run.add_argument("--resume", action="store_true", help="skip jobs whose records are stored")
    run.add_argument(
        "--list", action="store_true", help="show cells, exclusions and jobs; run nothing"
    )
    run.add_argument(
        "-j",
        "--jobs",
        type=_ranged("jobs", int),
        default=None,
        help="parallel children (default: CPUs)",
    )
    run.add_argument(
        "--timeout",
        type=_ranged("timeout_s", float),
        default=None,
        help="seconds per run (default: matrix.yaml)",
    )
    run.add_argument(
        "--memory-limit-mb",
        type=_ranged("memory_limit_mb", int),
        default=None,
        help="per child (default: matrix.yaml)",
    )
    run.add_argument(
        "--machine", type=_machine, default=None, help="record file name (default: host name)"
    )
    run.add_argument("--envs-dir", default=None, help="where environments live (default: .envs)")
    run.add_argument("--no-report", action="store_true", help="store records only")
    run.add_argument(
        "--keep-going",
        action="store_true",
        help="on a full disk, record env_failed (with the reason) for what cannot run and go "
        "on with the rest, instead of stopping; --resume retries env_failed jobs",
    )
    run.add_argument(
        "--isolation",
        choices=("fork", "process"),
        default=None,
        help="fork: a warm worker per environment imports torch once and forks a child per "
        "job; process: a fresh interpreter per job (default: fork where available)",
    )
    ls = sub.add_parser("list", help="show cells, exclusions and jobs of a profile")
    _add_selection(ls)
    plan = sub.add_parser(
        "plan",
        help="split a profile into CI jobs balanced by stored durations (--github: the job matrix)",
    )
    _add_selection(plan, shard=False)
    plan.add_argument(
        "--github", action="store_true", help="print the GitHub Actions matrix (one JSON line)"
    )
    plan.add_argument(
        "--shards", type=_ranged("shards", int), default=4, help="CI jobs to split into (default 4)"
    )
    plan.add_argument(
        "--machine-prefix",
        default=None,
        help="machine names are PREFIX-1..N (default: ci-<profile>)",
    )
    rep = sub.add_parser(
        "report", help="render tables, HTML, JSON and write-back from stored records"
    )
    rep.add_argument(
        "--check", action="store_true", help="write nothing; fail if outputs are stale"
    )
    rep.add_argument(
        "--no-cache",
        action="store_true",
        help="read every record file in full and render every entry (results/.cache is "
        "neither read nor written)",
    )
    rep.add_argument(
        "--since",
        metavar="REV",
        default=None,
        help="index.html opens with the cells changed since git revision REV's records",
    )
    diff = sub.add_parser(
        "diff",
        help="cells whose outcome changed between two record stores, machines or git revisions",
    )
    diff.add_argument("old", help="record folder or file, or a git revision (REV, REV:path)")
    diff.add_argument("new", help="record folder or file, or a git revision (REV, REV:path)")
    diff.add_argument(
        "--machine", default=None, help="one machine's records (name or id), both sides"
    )
    diff.add_argument("--old-machine", default=None, help="one machine's records in OLD")
    diff.add_argument("--new-machine", default=None, help="one machine's records in NEW")
    diff.add_argument(
        "--limit", type=_ranged("lines", int), default=50, help="lines per category (default 50)"
    )
    diff.add_argument(
        "--exit-code", action="store_true", help="exit 1 when some cell changed (like git diff)"
    )
    tox = sub.add_parser(
        "tox-ini", help="write tox.ini from matrix.yaml (one tox env per environment)"
    )
    tox.add_argument("--check", action="store_true", help="write nothing; fail if tox.ini differs")
    tox.add_argument("--matrix", default="matrix.yaml", help="matrix file, relative to the repo")
    ms = sub.add_parser(
        "msgsearch",
        help="does each documented message exist in the installed torch/lightning? "
        "(sources and compiled libraries; results/msgsearch.json)",
    )
    ms.add_argument("entry", nargs="*", metavar="ENTRY", help="entry id globs (default: all)")
    ms.add_argument(
        "--env", action="append", default=[], metavar="GLOB", help="environment id filter"
    )
    ms.add_argument(
        "--envs-dir",
        default=None,
        help="where environments live (default: HARNESS_ENVS_DIR or .envs)",
    )
    ms.add_argument(
        "--out", default="results/msgsearch.json", help="result file, relative to the repo"
    )
    merge = sub.add_parser("merge", help="add other machines' record files to results/records/")
    merge.add_argument("sources", nargs="+", help="record files (.jsonl) or folders of them")
    new = sub.add_parser(
        "new", help="scaffold repros/<id>/ from an error document (Markdown, scraped page, JSON)"
    )
    new.add_argument("document", help="the document file")
    new.add_argument("--id", default=None, help="entry id (default: from the document)")
    new.add_argument(
        "--format",
        choices=["markdown", "scraped", "deadends-json"],
        default=None,
        help="default: detected from the first line",
    )
    check = sub.add_parser(
        "check", help="validate entries (variants both ways, signatures, claims); builds nothing"
    )
    check.add_argument("entries", nargs="*", metavar="ENTRY", help="entry id globs (default: all)")
    export = sub.add_parser(
        "export", help="one standalone script (helpers inlined) running one variant"
    )
    export.add_argument(
        "entry", metavar="ENTRY", help="entry id, e.g. pytorch/grad-scale-unscale-error"
    )
    export.add_argument("--variant", required=True, help="the variant the script runs by default")
    export.add_argument("-o", "--output", default=None, help="write here (default: stdout)")
    bis = sub.add_parser(
        "bisect", help="the release where one cell's outcome changes (binary search, real runs)"
    )
    bis.add_argument("entry", metavar="ENTRY")
    bis.add_argument("--variant", required=True)
    bis.add_argument("--device", required=True, choices=["cpu", "cuda"])
    bis.add_argument("--precision", required=True, choices=["fp32", "fp16", "bf16"])
    axis = bis.add_mutually_exclusive_group(required=True)
    axis.add_argument("--torch", metavar="A..B", help="bisect torch releases from A to B")
    axis.add_argument("--lightning", metavar="A..B", help="bisect lightning releases")
    bis.add_argument("--python", default=None, help="interpreter (default: the matrix's pairing)")
    bis.add_argument("--with-lightning", default=None, help="hold lightning at this release")
    bis.add_argument("--with-torch", default=None, help="hold torch at this release")
    bis.add_argument("--machine", default=None, help="record file name (default: host name)")
    bis.add_argument("--envs-dir", default=None, help="where environments live")
    bis.add_argument("--matrix", default="matrix.yaml")
    bis.add_argument(
        "--timeout", type=_ranged("timeout_s", float), default=None, help="seconds per run"
    )
    envs = sub.add_parser("envs", help="target environments")
    envs_sub = envs.add_subparsers(dest="envs_command", required=True)
    build = envs_sub.add_parser(
        "build", help="build (or reuse) a profile's environments; run nothing"
    )
    build.add_argument("--profile", default=None, help="matrix.yaml profile (default: its default)")
    build.add_argument(
        "--env", action="append", default=[], metavar="GLOB", help="environment id filter"
    )
    build.add_argument("--matrix", default="matrix.yaml")
    build.add_argument("--envs-dir", default=None, help="where environments live (default: .envs)")
    prune = envs_sub.add_parser(
        "prune",
        help="remove the environments matrix.yaml no longer names (any profile); shows what "
        "each held on its own (files hardlinked from uv's cache stay in the cache)",
    )
    prune.add_argument("--dry-run", action="store_true", help="list what would go; remove nothing")
    prune.add_argument("--matrix", default="matrix.yaml")
    prune.add_argument("--envs-dir", default=None, help="where environments live (default: .envs)")
    return ap


def _envs_prune(args: argparse.Namespace, repo: Path, console: Console) -> int:
    from harness.envs.backends import prune_environments
    from harness.spec.matrix import MatrixError, load_matrix

    cfg = Config(repo=repo, matrix_file=args.matrix)
    cfg.envs_root = args.envs_dir
    try:
        matrix = load_matrix(cfg.matrix_path)
    except MatrixError as exc:
        console.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False)
        return 2
    keep = {e.id for row in matrix.rows for e in row.environments()}
    removed = prune_environments(cfg.envs_dir, keep, dry_run=args.dry_run)
    verb = "would remove" if args.dry_run else "removed"
    for p in removed:
        console.print(f"{verb} {p.path} ({p.bytes / 2**20:.0f} MiB of its own)", highlight=False)
    total = sum(p.bytes for p in removed)
    console.print(
        f"{len(removed)} environment(s) that {args.matrix} no longer names: {verb}, "
        f"{total / 2**30:.2f} GiB of their own; the others are kept in {cfg.envs_dir}. `uv cache prune` frees cache entries "
        "that no environment links to any more",
        highlight=False,
    )
    return 0


def _envs_build(args: argparse.Namespace, repo: Path, console: Console) -> int:
    import fnmatch
    import os

    from harness.envs.backends import (
        STANDIN_VAR,
        EnvFailed,
        ExistingBackend,
        MatrixBackend,
        UvBackend,
    )
    from harness.spec.matrix import MatrixError, load_matrix

    cfg = Config(repo=repo, profile=args.profile, matrix_file=args.matrix)
    cfg.envs_root = args.envs_dir
    try:
        expansion = load_matrix(cfg.matrix_path).expand(cfg.profile)
    except MatrixError as exc:
        console.print(f"[bold red]error:[/] {exc}", highlight=False, markup=False)
        return 2
    envs = [
        e
        for e in expansion.environments
        if not args.env or any(fnmatch.fnmatchcase(e.id, g) for g in args.env)
    ]
    if not envs:
        console.print(
            f"[bold red]error:[/] --env {' '.join(args.env)} matches no environment of profile "
            f"{expansion.profile!r}",
            highlight=False,
        )
        return 2
    standin = os.environ.get(STANDIN_VAR)
    backend = MatrixBackend(UvBackend(cfg.envs_dir, standin=standin), ExistingBackend(standin))
    failed = 0
    for env in envs:
        try:
            built = backend.ensure(env)
        except EnvFailed as exc:
            failed += 1
            first = str(exc).splitlines()[0] if str(exc) else ""
            console.print(f"failed {env.id}: {first}", highlight=False, markup=False)
            continue
        how = "reused" if built.reused else "built"
        console.print(
            f"{how:<7}{env.id} in {built.seconds:.1f} s: torch {built.probe.get('torch')}, "
            f"lightning {built.probe.get('lightning', built.probe.get('pytorch_lightning'))}",
            highlight=False,
            markup=False,
        )
    console.print(
        f"{len(envs) - failed} of {len(envs)} environments of profile {expansion.profile!r} "
        f"ready in {cfg.envs_dir}",
        highlight=False,
    )
    return 1 if failed else 0


def _tox_ini(repo: Path, matrix_file: str, check: bool, console: Console) -> int:
    import os

    from harness.ci.toxini import TOX_INI, check_tox_ini, render_tox_ini
    from harness.envs.backends import STANDIN_VAR
    from harness.spec.matrix import MatrixError, load_matrix

    try:
        matrix = load_matrix(repo / matrix_file)
    except MatrixError as exc:
        console.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False)
        return 2
    standin = os.environ.get(STANDIN_VAR)
    if check:
        problem = check_tox_ini(repo, matrix, standin)
        if problem:
            console.print(f"[bold red]stale:[/] {escape(str(problem))}", highlight=False)
            console.print("run `python -m harness tox-ini` and commit the result", highlight=False)
            return 1
        console.print(f"{TOX_INI} is up to date with {matrix_file}", highlight=False)
        return 0
    (repo / TOX_INI).write_text(render_tox_ini(matrix, standin), encoding="utf-8")
    console.print(f"wrote {repo / TOX_INI}", highlight=False)
    return 0
    return 0


def _bisect(args: argparse.Namespace, repo: Path, console: Console) -> int:
    from harness.catalogue.bisect import BisectRequest, run_bisect

    request = BisectRequest(
        entry=args.entry,
        variant=args.variant,
        device=args.device,
        precision=args.precision,
        axis="torch" if args.torch else "lightning",
        range=args.torch or args.lightning,
        python=args.python,
        with_lightning=args.with_lightning,
        with_torch=args.with_torch,
    )
    cfg = Config(repo=repo, matrix_file=args.matrix)
    cfg.machine = args.machine
    cfg.envs_root = args.envs_dir
    cfg.timeout_s = args.timeout
    return run_bisect(request, cfg, console)


def _export(args: argparse.Namespace, repo: Path, console: Console) -> int:
    from harness.catalogue.export import ExportError, export_script
    from harness.spec.entries import EntryError, load_entry

    repros = repo / "repros"
    folder = repros / args.entry
    if not (folder / "entry.yaml").is_file():
        console.print(
            f"[bold red]error:[/] no entry {escape(repr(args.entry))} ({escape(str(folder))}/entry.yaml)"
        )
        return 2
    try:
        script = export_script(load_entry(folder, repros), args.variant, repros / "reprokit.py")
    except (EntryError, ExportError) as exc:
        console.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False, markup=False)
        return 2
    if args.output:
        Path(args.output).write_text(script, encoding="utf-8")
        console.print(f"wrote {args.output} ({len(script.splitlines())} lines)", highlight=False)
    else:
        sys.stdout.write(script)
    return 0


def _check(args: argparse.Namespace, repo: Path, console: Console) -> int:
    from harness.catalogue.check import check_entries

    results = check_entries(repo / "repros", args.entries)
    if not results:
        console.print(
            f"[bold red]error:[/] no entry under {repo / 'repros'} matches "
            f"{' '.join(args.entries) or '*'}",
            highlight=False,
        )
        return 2
    for r in results:
        name = r.entry.id if r.entry else r.dir.relative_to(repo / "repros").as_posix()
        if r.ok:
            assert r.entry is not None
            n = len(r.entry.variants)
            written = sum(v.written for v in r.entry.variants)
            console.print(f"ok     {name}: {written}/{n} variants written", highlight=False)
        else:
            console.print(f"[bold red]FAILED[/] {name}", highlight=False)
        for e in r.errors:
            console.print(f"  error: {e}", highlight=False, markup=False)
        for t in r.todos:
            console.print(f"  to do: {t}", highlight=False, markup=False)
    failed = [r for r in results if not r.ok]
    console.print(f"{len(results)} entries checked, {len(failed)} with errors", highlight=False)
    return 2 if failed else 0


def _new(args: argparse.Namespace, repo: Path, console: Console) -> int:
    from harness.catalogue.scaffold import DocumentError, parse_document, write_scaffold

    path = Path(args.document)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        console.print(
            f"[bold red]error:[/] {escape(str(path))}: cannot read: {escape(str(exc))}",
            highlight=False,
        )
        return 2
    try:
        scaffold = parse_document(text, path, args.format)
        folder, files = write_scaffold(scaffold, repo / "repros", args.id)
    except (DocumentError, FileExistsError) as exc:
        console.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False)
        return 2
    console.print(
        f"{scaffold.format} document -> {folder.relative_to(repo)}/: "
        f"{len(scaffold.claims)} claimed workarounds/dead ends + baseline + control "
        f"(all listed in NOT_WRITTEN)",
        highlight=False,
    )
    for f in files:
        console.print(f"  wrote {f.relative_to(repo)}", highlight=False)
    console.print(
        "next: write repro.py (and the TODOs), then `python -m harness check "
        f"{folder.relative_to(repo / 'repros')}`",
        highlight=False,
    )
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    # soft_wrap: a message is never broken into lines (a file:line stays greppable in CI logs)
    console = Console(stderr=False, highlight=False, soft_wrap=True)
    repo = Path(args.repo).resolve()
    if not repo.is_dir():
        console.print(
            f"[bold red]error:[/] --repo {escape(args.repo)}: no such folder; name the project "
            "root (the folder with matrix.yaml, repros/ and results/)",
            highlight=False,
        )
        return 2
    envs_dir = getattr(args, "envs_dir", None)
    if envs_dir and Path(envs_dir).exists() and not Path(envs_dir).is_dir():
        console.print(
            f"[bold red]error:[/] --envs-dir {escape(envs_dir)} is a file; name a folder",
            highlight=False,
        )
        return 2
    if args.command == "merge":
        from harness.store.jsonl import Store

        missing = [s for s in args.sources if not Path(s).exists()]
        if missing:
            for s in missing:
                console.print(f"[bold red]error:[/] merge: {escape(s)}: no such file or folder")
            return 2
        store = Store(repo / "results" / "records")
        result = store.merge(args.sources)
        for w in (*result.warnings, *store.quarantine(result.refused)):
            console.print(f"[yellow]warning:[/] {escape(w)}", highlight=False)
        console.print(
            f"merged: {result.added} records added, {result.duplicates} already present, "
            f"{result.conflicts} conflicting"
        )
        if result.refused:
            console.print(
                f"[bold red]error:[/] {len(result.refused)} line(s) refused, copied with the "
                f"reason to {store.quarantine_dir}; fix them at the source and merge again",
                highlight=False,
            )
            return 2
        if result.conflicts:
            console.print(
                f"[bold red]error:[/] {result.conflicts} record(s) conflict with stored records "
                "of the same run (named above) and were kept out",
                highlight=False,
            )
            return 1
        return 0
    if args.command == "msgsearch":
        from harness.cli.msgsearch import msgsearch

        return msgsearch(repo, args.entry, args.env, args.envs_dir, args.out, console)
    if args.command == "diff":
        from harness.ci.diff import DiffError, diff_records, format_diff, load_side
        from harness.spec.entries import EntryError, load_entries

        try:
            entries = load_entries(repo / "repros")
        except EntryError as exc:
            console.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False)
            return 2
        try:
            old = load_side(args.old, repo, args.old_machine or args.machine, entries)
            new = load_side(args.new, repo, args.new_machine or args.machine, entries)
        except DiffError as exc:
            console.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False)
            return 2
        for w in (*old.warnings, *new.warnings):
            console.print(f"[yellow]warning:[/] {escape(w)}", highlight=False)
        result = diff_records(old, new)
        for line in format_diff(result, limit=max(1, args.limit)):
            console.print(line, markup=False, highlight=False)
        return 1 if args.exit_code and (result.changes or result.only_new) else 0
    if args.command == "tox-ini":
        return _tox_ini(repo, args.matrix, args.check, console)
    if args.command == "check":
        return _check(args, repo, console)
    if args.command == "export":
        return _export(args, repo, console)
    if args.command == "bisect":
        return _bisect(args, repo, console)
    if args.command == "envs":
        if args.envs_command == "prune":
            return _envs_prune(args, repo, console)
        return _envs_build(args, repo, console)
    if args.command == "new":
        return _new(args, repo, console)
    if args.command == "report":
        from harness.execute.steps import render_reports

        return render_reports(
            Config(repo=repo),
            console,
            check=args.check,
            since=args.since,
            cache=not args.no_cache,
        )
    try:
        shard = parse_shard(getattr(args, "shard", "1/1"))
    except ValueError as exc:
        console.print(f"[bold red]error:[/] {escape(str(exc))}")
        return 2
    cfg = Config(
        repo=repo,
        profile=args.profile,
        entries=tuple(args.entry),
        variants=tuple(args.variant),
        envs=tuple(args.env),
        cells=tuple(args.cell),
        shard=shard,
        matrix_file=args.matrix,
        trials=args.trials,
        python=args.python,
        list_only=args.command == "list" or getattr(args, "list", False),
    )
    if args.command == "run":
        cfg.resume = args.resume
        cfg.no_report = args.no_report
        cfg.machine = args.machine
        cfg.envs_root = args.envs_dir
        cfg.timeout_s = args.timeout
        cfg.memory_limit_mb = args.memory_limit_mb
        cfg.isolation = args.isolation
        cfg.keep_going = args.keep_going
        if args.jobs is not None:
            cfg.jobs = args.jobs
    if args.command == "plan":
        cfg.fan_out_shards = args.shards
        cfg.machine_prefix = args.machine_prefix
        cfg.github = args.github
    from harness.execute.steps import STEPS, RunState, run_steps

    steps = STEPS
    if args.command == "plan":
        from harness.ci.fanout import PLAN_STEPS

        steps = PLAN_STEPS
    try:
        return run_steps(RunState(config=cfg, console=console), steps)
    except KeyboardInterrupt:
        console.print("[bold yellow]interrupted[/]")
        return 130


if __name__ == "__main__":
    sys.exit(main())
