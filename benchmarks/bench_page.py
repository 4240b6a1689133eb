"""The page at scale: results/index.html and what it loads, rendered from a synthetic store
by the code before a change and by this checkout, opened in headless Chromium, in one run.

    python benchmarks/bench_page.py [--store DIR] [--records 1000000] [--entries 2500]
        [--before REV] [--quick]

The store (a project folder whose results/records/*.jsonl bench_report.py's ``write_store``
writes) is kept in ``--store`` and reused when it is there already: writing a million
records takes minutes. Each side renders it into a project of its own (the records linked,
not copied) with ``python -m harness report --no-cache``, its code the checkout's as it was
when the benchmark started (after) or ``--before``'s (``git archive``: before). Then, per
side:

- the bytes the page loads at first paint (index.html, and any file it loads before the
  reader does anything), the answers file and what opening one entry loads;
- Chromium opening the page from file://, as a reader does: the marks a script appended to
  the page records (performance.now() when the page's own scripts have run, the first
  contentful paint where headless Chromium records one, the load event), the median of
  ``--repeat`` opens, and the wall time of the whole headless Chromium process (its start
  included) dumping the DOM and, painting the page, writing a screenshot.
"""

from __future__ import annotations

import argparse
import html
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_report import write_store  # noqa: E402

CHROMIUM = Path("/usr/bin/chromium")
# appended to the page (before </body>): it runs after the page's own scripts, and writes its
# marks into the DOM once the load event is over and the first paint is recorded
MARKS = """<script>
(function(){
  var script = performance.now();
  function paint(){ var p = performance.getEntriesByName("first-contentful-paint")[0]; return p ? p.startTime : null; }
  function done(){
    var nav = performance.getEntriesByType("navigation")[0];
    var pre = document.createElement("pre"); pre.id = "bench-marks";
    pre.textContent = JSON.stringify({script: script, fcp: paint(), dcl: nav ? nav.domContentLoadedEventEnd : null, load: nav ? nav.loadEventEnd : null, sections: document.querySelectorAll("section.entry").length, scripts: Array.prototype.map.call(document.querySelectorAll("script[src]"), function(s){ return s.getAttribute("src"); })});
    document.body.appendChild(pre);
  }
  var tries = 0;  // the paint's entry comes a little after the load event, if at all
  function wait(){ if (paint() === null && ++tries < 50) setTimeout(wait, 20); else done(); }
  window.addEventListener("load", function(){ setTimeout(wait, 0); });
})();
</script>"""


def _project(store: Path, where: Path) -> Path:
    """A project that reports ``store``'s records: its records linked, not copied."""
    records = where / "results" / "records"
    records.mkdir(parents=True)
    (where / "repros").mkdir()
    for f in sorted((store / "results" / "records").glob("*.jsonl")):
        os.link(f, records / f.name)
    return where


def _code(rev: str, where: Path) -> Path:
    """The harness package as it was at ``rev`` (git archive), in ``where``."""
    where.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", rev, "harness"], capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(where)], input=archive, check=True)
    return where


def _report(code: Path, repo: Path) -> float:
    env = {**os.environ, "PYTHONPATH": str(code)}
    cmd = [sys.executable, "-m", "harness", "--repo", str(repo), "report", "--no-cache"]
    t0 = time.perf_counter()
    done = subprocess.run(cmd, cwd=code, env=env, capture_output=True, text=True)
    if done.returncode:
        print(done.stdout[-2000:], done.stderr[-4000:], sep="\n")
        raise SystemExit(done.returncode)
    return time.perf_counter() - t0


def _chromium(profile: Path, *args: str) -> list[str]:
    """Headless Chromium at 1280 px with a profile of its own, then ``args``."""
    return [
        str(CHROMIUM),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--no-first-run",
        f"--user-data-dir={profile}",
        "--window-size=1280,1000",
        *args,
    ]


def _open(page: Path, tmp: Path) -> tuple[dict[str, object], float]:
    """Chromium's marks for ``page`` (opened with MARKS appended), and its wall time."""
    copy = page.parent / "bench-page.html"
    text = page.read_text(encoding="utf-8")
    copy.write_text(text.replace("</body>", MARKS + "</body>"), encoding="utf-8")
    profile = tmp / "profile"
    shutil.rmtree(profile, ignore_errors=True)
    cmd = _chromium(
        profile,
        # the DOM is dumped once the page's timers have run (the marks wait for the load
        # event and the paint); the marks themselves are real time
        "--virtual-time-budget=5000",
        "--dump-dom",
        copy.as_uri(),
    )
    t0 = time.perf_counter()
    dom = subprocess.run(
        cmd, capture_output=True, text=True, timeout=600, env={**os.environ, "HOME": str(tmp)}
    ).stdout
    wall = time.perf_counter() - t0
    copy.unlink()
    found = re.search(r'<pre id="bench-marks">(.*?)</pre>', dom, re.S)
    if not found:
        raise SystemExit(f"no marks in the DOM Chromium dumped for {page}: {dom[-500:]}")
    return json.loads(html.unescape(found.group(1))), wall


def _screenshot(page: Path, tmp: Path) -> float:
    """The wall time of headless Chromium opening ``page`` and writing a screenshot of it
    (its start included): a paint, which headless Chromium does not always record as one."""
    profile = tmp / "profile"
    shutil.rmtree(profile, ignore_errors=True)
    shot = tmp / "shot.png"
    shot.unlink(missing_ok=True)
    cmd = _chromium(profile, f"--screenshot={shot}", page.as_uri())
    t0 = time.perf_counter()
    subprocess.run(cmd, capture_output=True, timeout=600, env={**os.environ, "HOME": str(tmp)})
    wall = time.perf_counter() - t0
    if not shot.is_file():
        raise SystemExit(f"no screenshot of {page}")
    return wall


def _size(path: Path) -> int:
    return path.stat().st_size if path.is_file() else 0


def _first_entry_files(results: Path) -> list[Path]:
    """What opening the first entry loads, on the page as rendered: its section file
    (none where the page holds every section) and, when a cell is looked at, its cells
    file."""
    files = [results / "cells" / "0000.js"]
    if (results / "sections").is_dir():
        files.insert(0, results / "sections" / "0000.js")
    return files


def _answers_files(results: Path) -> list[Path]:
    """The answers file and, where the variants are apart, one part (the box loads the
    parts of the entries it answers with: one for a pasted error that one entry documents)."""
    files = [results / "answers.js"]
    if (results / "answers").is_dir():
        files.append(results / "answers" / "0000.js")
    return files


def measure(label: str, code: Path, repo: Path, tmp: Path, repeat: int) -> dict[str, object]:
    wall = _report(code, repo)
    results = repo / "results"
    page = results / "index.html"
    opens = [_open(page, tmp) for _ in range(repeat)]
    shots = [_screenshot(page, tmp) for _ in range(repeat)]
    marks = [m for m, _ in opens]

    def median(key: str) -> float:
        values = [float(m[key]) for m in marks if m[key] is not None]  # type: ignore[arg-type]
        return statistics.median(values) if values else float("nan")

    first_paint = [page] + [results / str(s) for s in marks[0]["scripts"]]  # type: ignore[union-attr]
    return {
        "label": label,
        "report_s": wall,
        "index": _size(page),
        "first_paint_bytes": sum(_size(p) for p in first_paint),
        "first_paint_files": len(first_paint),
        "answers": sum(_size(p) for p in _answers_files(results)),
        "answers_index": _size(results / "answers.js"),
        "open_entry": sum(_size(p) for p in _first_entry_files(results)),
        "sections_on_page": marks[0]["sections"],
        "script_ms": median("script"),
        "fcp_ms": median("fcp"),
        "load_ms": median("load"),
        "chromium_s": statistics.median(w for _, w in opens),
        "screenshot_s": statistics.median(shots),
    }


def _table(rows: list[dict[str, object]]) -> str:
    lines = [
        ("", *(str(r["label"]) for r in rows)),
        ("python -m harness report (no cache)", *(f"{r['report_s']:.1f} s" for r in rows)),
        ("index.html", *(f"{int(r['index']) / 1e6:.2f} MB" for r in rows)),  # type: ignore[call-overload]
        (
            "loaded at first paint",
            *(
                f"{int(r['first_paint_bytes']) / 1e6:.2f} MB, {r['first_paint_files']} file(s)"  # type: ignore[call-overload]
                for r in rows
            ),
        ),
        ("entry sections in the page at first paint", *(str(r["sections_on_page"]) for r in rows)),
        (
            "answers.js (the box's first load)",
            *(f"{int(r['answers_index']) / 1e6:.2f} MB" for r in rows),  # type: ignore[call-overload]
        ),
        (
            "the box answering one entry's error",
            *(f"{int(r['answers']) / 1e6:.2f} MB" for r in rows),  # type: ignore[call-overload]
        ),
        (
            "opening an entry, then a cell",
            *(f"+{int(r['open_entry']) / 1e6:.2f} MB" for r in rows),  # type: ignore[call-overload]
        ),
        ("page's scripts done (performance.now)", *(f"{r['script_ms']:.0f} ms" for r in rows)),
        (
            "first contentful paint (as recorded)",
            *(
                "none recorded" if r["fcp_ms"] != r["fcp_ms"] else f"{r['fcp_ms']:.0f} ms"
                for r in rows
            ),
        ),
        ("load event end", *(f"{r['load_ms']:.0f} ms" for r in rows)),
        ("headless Chromium, start to DOM dumped", *(f"{r['chromium_s']:.1f} s" for r in rows)),
        ("headless Chromium, start to screenshot", *(f"{r['screenshot_s']:.1f} s" for r in rows)),
    ]
    width = [max(len(line[i]) for line in lines) for i in range(len(lines[0]))]
    return "\n".join(
        "  ".join(
            cell.ljust(width[i]) if i == 0 else cell.rjust(width[i]) for i, cell in enumerate(line)
        )
        for line in lines
    )


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--store", type=Path, help="a project folder with results/records (kept)")
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--entries", type=int, default=2500)
    ap.add_argument("--machines", type=int, default=2)
    ap.add_argument("--before", default="main", help="the code before (a git revision)")
    ap.add_argument("--repeat", type=int, default=3, help="opens of each page (the median)")
    ap.add_argument(
        "--quick", action="store_true", help="20,000 records of 100 entries, one open each"
    )
    args = ap.parse_args()
    if args.quick:
        args.records, args.entries, args.repeat = 20_000, 100, 1
    if not CHROMIUM.exists():
        raise SystemExit(f"{CHROMIUM} is absent (apt-get install chromium)")
    before = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", args.before],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    with tempfile.TemporaryDirectory(prefix="bench-page-") as tmp_name:
        tmp = Path(tmp_name)
        store = args.store or tmp / "store"
        records = store / "results" / "records"
        if not any(records.glob("*.jsonl")):
            records.mkdir(parents=True, exist_ok=True)
            t0 = time.perf_counter()
            n = write_store(records, args.records, args.entries, args.machines)
            print(f"store written: {n:,} records in {time.perf_counter() - t0:.0f} s")
        size = sum(p.stat().st_size for p in records.glob("*.jsonl"))
        print(f"store: {store} ({size / 1e6:,.0f} MB of records)")
        print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at start")
        # the checkout's code as it is now (an edit while the benchmark runs changes nothing)
        after = tmp / "after-code"
        shutil.copytree(
            ROOT / "harness", after / "harness", ignore=shutil.ignore_patterns("__pycache__")
        )
        rows = [
            measure(
                f"before ({before})",
                _code(before, tmp / "before-code"),
                _project(store, tmp / "before"),
                tmp,
                args.repeat,
            ),
            measure(
                "after (this checkout)", after, _project(store, tmp / "after"), tmp, args.repeat
            ),
        ]
        print()
        print(_table(rows))
        print(f"\nload average at the end: {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
