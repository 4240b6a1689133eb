"""Untrusted inputs: each test replays one attack (paths, patterns, sizes, text, special files,
big integers, nightly and merge trust) on a copy of the small test project (tests/resources/reliability, six standing in for torch, plus a
deadends.dev record kept beside an entry made by `new`) through the real CLI, and asserts the
refusal (a named error, exit 2, nothing changed) or the bound. docs/reliability.md lists them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.e2e.test_read_only_results import read_only
from tests.e2e.test_reliability import REPO, SCENARIOS, Project

RECORD = SCENARIOS / "deadends" / "kb-record.json"
KEPT = "deadends/python/attributeerror-tensor-no-grad/torch2.0-linux"


def cli(
    project: Project, *args: str, stdin: str | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "harness", "--repo", str(project.root), *args],
        cwd=project.root,
        env=project.env(),
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def tree(root: Path) -> dict[str, bytes | str]:
    """Every path under ``root`` with its bytes (a link: its target): what "nothing changed"
    compares."""
    found: dict[str, bytes | str] = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if "__pycache__" in rel or rel.startswith(("tmp/", "envs/")):
            continue
        if path.is_symlink():
            found[rel] = "-> " + os.readlink(path)
        elif path.is_file():
            found[rel] = path.read_bytes()
        else:
            found[rel] = "folder"
    return found


def refused(done: subprocess.CompletedProcess[str], *words: str) -> str:
    """The named error of a refusal: exit 2, no traceback, each of ``words`` in it."""
    out = done.stdout + done.stderr
    assert done.returncode == 2, out
    assert "Traceback" not in out, out
    for w in words:
        assert w in out, out
    return out


def record(**change: object) -> dict:
    data = json.loads(RECORD.read_text(encoding="utf-8"))
    for dotted, value in change.items():
        at = data
        *parts, last = dotted.split("__")
        for p in parts:
            at = at[p]
        at[last] = value
    return data


@pytest.fixture
def project(tmp_path: Path) -> Project:
    return Project(tmp_path / "proj")


@pytest.fixture
def kept(project: Project) -> Project:
    """The project with a deadends.dev record kept beside an entry, as `new` makes it."""
    kb_path = "data/canons/python/attributeerror-tensor-no-grad/torch2.0-linux.json"
    done = cli(project, "new", "--kb-path", kb_path, "--kb-commit", "0" * 40, str(RECORD))
    assert done.returncode == 0, done.stdout + done.stderr
    return project


# -- 1. nothing written outside its place -----------------------------------------------


@pytest.mark.parametrize(
    "domain", ["../../../../../X", "/abs", "a/b", "..", ".hidden", "x\x1b[31m"]
)
def test_new_refuses_a_record_whose_domain_is_not_a_plain_name(
    project: Project, tmp_path: Path, domain: str
) -> None:
    evil = tmp_path / "evil.json"
    evil.write_text(json.dumps(record(error__domain=domain)))
    before = tree(project.root)
    refused(cli(project, "new", str(evil)), "error.domain")
    assert tree(project.root) == before
    assert not list(tmp_path.rglob("X*"))


@pytest.mark.parametrize("kb_path", ["../../../evil.json", "/tmp/evil.json", "data/../x.json"])
def test_new_refuses_a_kb_path_outside_the_knowledge_base(project: Project, kb_path: str) -> None:
    before = tree(project.root)
    done = cli(project, "new", "--kb-path", kb_path, "--kb-commit", "0" * 40, str(RECORD))
    refused(done, "origin.path")
    assert tree(project.root) == before


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("path", "../../../../../../evil.json"),
        ("path", "/tmp/evil.json"),
        ("domain", "../../X"),
        ("id", "../../x"),
    ],
)
def test_the_loader_refuses_an_origin_part_that_leaves_its_folder(
    kept: Project, tmp_path: Path, key: str, value: str
) -> None:
    entry = kept.root / "repros" / KEPT / "entry.yaml"
    lines = entry.read_text().splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if line.startswith(f"  {key}:"))
    lines[at] = f"  {key}: {json.dumps(value)}\n"
    entry.write_text("".join(lines))
    before = tree(kept.root)
    out_dir = tmp_path / "out"
    for argv in (("corrections",), ("corrections", "-o", str(out_dir)), ("check",), ("list",)):
        refused(cli(kept, *argv), f"entry.yaml:{at + 1}: origin.{key}")
    assert tree(kept.root) == before
    assert not out_dir.exists()
    assert not (tmp_path / "evil.json").exists()


def test_corrections_writes_every_file_through_one_containment_check(tmp_path: Path) -> None:
    """The class, not the example: whatever a plan holds, the writer builds each path from
    plain parts under its folder (harness/paths.under)."""
    from harness.paths import OutsideProject, under

    top = tmp_path / "out"
    top.mkdir()
    (tmp_path / "elsewhere").mkdir()
    (top / "linked").symlink_to(tmp_path / "elsewhere")
    for rel in ("../x.md", "/etc/x", "a/../../x", "a//b", "linked/x.md", "a\\..\\x", ""):
        with pytest.raises(OutsideProject):
            under(top, rel)
    assert under(top, "signatures/data/canons/a.json") == top / "signatures/data/canons/a.json"


@pytest.mark.parametrize("where", ["a-file", "a-link", "results-records", "repros"])
def test_corrections_output_is_refused_where_export_refuses(
    kept: Project, tmp_path: Path, where: str
) -> None:
    target = {
        "a-file": tmp_path / "afile",
        "a-link": tmp_path / "link",
        "results-records": kept.root / "results" / "records",
        "repros": kept.root / "repros" / "out",
    }[where]
    (tmp_path / "afile").write_text("mine\n")
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    (kept.root / "results" / "records").mkdir(parents=True)
    before = tree(kept.root), tree(tmp_path / "real"), (tmp_path / "afile").read_bytes()
    out = refused(cli(kept, "corrections", "-o", str(target)), str(target))
    assert after_is(before, kept, tmp_path), out


def after_is(before: tuple, kept: Project, tmp_path: Path) -> bool:
    return before == (tree(kept.root), tree(tmp_path / "real"), (tmp_path / "afile").read_bytes())


def test_corrections_into_a_read_only_folder_is_a_named_error(
    kept: Project, tmp_path: Path
) -> None:
    out_dir = tmp_path / "ro"
    out_dir.mkdir()
    argv = [sys.executable, "-m", "harness", "--repo", str(kept.root), "corrections"]
    done = read_only(kept, out_dir, *argv, "-o", str(out_dir))
    refused(done, str(out_dir))
    assert not list(out_dir.iterdir())


# -- 2. every pattern bounded ----------------------------------------------------------------


def _kept_record(kept: Project) -> Path:
    return kept.root / "repros" / KEPT / "kb-record.json"


@pytest.mark.parametrize("regex", ["(.+)+Z", "(a|a)*$", "(\\\\w+\\\\s?)+$"])
def test_a_kept_records_exponential_regex_is_refused_before_it_runs(
    kept: Project, regex: str
) -> None:
    path = _kept_record(kept)
    data = json.loads(path.read_text(encoding="utf-8"))
    data["error"]["regex"] = json.loads(f'"{regex}"')
    path.write_text(json.dumps(data, indent=2), encoding="utf-8")
    before = tree(kept.root)
    start = time.monotonic()
    for argv in (("corrections", "--check"), ("corrections",)):
        refused(cli(kept, *argv, timeout=60), "kb-record.json", "error.regex", "backtrack")
    assert time.monotonic() - start < 60
    assert tree(kept.root) == before


@pytest.mark.parametrize("signature", ["x.*x.*x.*x.*y", "a.*a.*a.*b", "(?:x.*x.*x.*y)|a"])
def test_the_loader_refuses_polynomial_backtracking(project: Project, signature: str) -> None:
    entry = project.root / "repros" / "waits" / "gate" / "entry.yaml"
    text = entry.read_text()
    entry.write_text(text.replace('message: "never raised"', f"message: {json.dumps(signature)}"))
    before = tree(project.root)
    for argv in (("check",), ("list",), ("report",)):
        out = cli(project, *argv)
        assert out.returncode == 2 and "Traceback" not in out.stdout + out.stderr
        assert "entry.yaml:3: signature.message may backtrack for long" in out.stdout + out.stderr
    assert tree(project.root) == before


def test_grading_a_2000_character_message_is_bounded_in_time() -> None:
    """What `report` does with each stored record (outcomes.grade), on the worst message for
    a signature the loader admits (two ambiguous repetitions): it was 2 s a search unbounded,
    several searches a record; a pattern the loader never saw is bounded the same way."""
    from harness.matching import MATCH_SECONDS, bounded_search
    from harness.outcomes import grade

    start = time.monotonic()
    for _ in range(3):
        grade(
            "other_error",
            "RuntimeError",
            "x" * 2000,
            "RuntimeError",
            "x.*x.*y",
            "x.*x.*z",
            "RuntimeError",
        )
    assert time.monotonic() - start < 3 * 4 * MATCH_SECONDS + 2
    start = time.monotonic()
    assert bounded_search("x.*x.*x.*x.*y", "x" * 2000) is None  # timed out: found nothing
    assert time.monotonic() - start < MATCH_SECONDS + 1


def test_the_pages_paste_box_matches_a_bounded_text_with_admitted_patterns(tmp_path: Path) -> None:
    """The page cannot interrupt a RegExp: it runs only patterns the loader's check admits
    (answers.py sends "" for the rest) on at most 1,000 characters of a pasted message; a
    2,000-character paste against the worst admitted pattern answers in a bounded time."""
    import re
    import shutil

    from harness.report.render.answers import _signature

    js = (REPO / "harness/report/render/static/answer.js").read_text(encoding="utf-8")
    cap = int(re.search(r"MATCH_CHARS = (\d+)\b", js).group(1))
    assert cap <= 1000
    assert "re.test(r.message.slice(0, MATCH_CHARS))" in js
    assert _signature("RuntimeError", "x.*x.*x.*x.*y")[1] == ""  # refused: never on the page
    admitted = _signature("RuntimeError", "x.*x.*y")[1]
    assert admitted
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is absent")
    script = (
        f"var re = new RegExp({json.dumps(admitted)}, 's'), t = Date.now();"
        f"re.test('x'.repeat(2000).slice(0, {cap})); console.log(Date.now() - t);"
    )
    took = subprocess.run([node, "-e", script], capture_output=True, text=True, timeout=60)
    assert int(took.stdout) < 5000, took.stdout


# -- 3. memory: bounded before parsed ------------------------------------------------------


def test_new_on_a_50_mb_record_is_refused_by_its_size_in_bounded_memory(
    project: Project, tmp_path: Path
) -> None:
    big = tmp_path / "big.json"
    data = record()
    data["verdict"]["summary"] = "x" * 50_000_000
    big.write_text(json.dumps(data))
    before = tree(project.root)
    done = subprocess.run(
        [
            "prlimit",
            "--as=1500000000",
            sys.executable,
            "-m",
            "harness",
            "--repo",
            str(project.root),
            "new",
            str(big),
        ],
        cwd=project.root,
        env=project.env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    refused(done, "big.json", "larger than")
    assert tree(project.root) == before


def test_the_json_depth_count_keeps_no_stack_per_character() -> None:
    import resource

    from harness.catalogue.scaffold import _json_depth_within

    text = '{"a": "' + "x" * 20_000_000 + '"}'
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    assert _json_depth_within(text, 64) is None
    grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert grown_kib < 100_000  # the old pattern kept about 120 bytes a character: 2.4 GB


# -- 4. text that stops every command ---------------------------------------------------------

BAD_TEXT = {
    "beyond-unicode": '"\\U00110000"',
    "lone-surrogate": '"\\ud800"',
    "escape": '"red \\e[31m title"',
    "bell": '"bell \\a"',
    "c1": '"csi \\x9b"',
}


@pytest.mark.parametrize("value", list(BAD_TEXT.values()), ids=list(BAD_TEXT))
def test_a_value_no_page_can_hold_in_entry_yaml_is_named(project: Project, value: str) -> None:
    entry = project.root / "repros" / "waits" / "gate" / "entry.yaml"
    lines = entry.read_text().splitlines(keepends=True)
    lines[1] = f"title: {value}\n"
    entry.write_text("".join(lines))
    before = tree(project.root)
    for argv in (("list",), ("check",), ("report",)):
        refused(cli(project, *argv), "entry.yaml:")
    assert tree(project.root) == before


@pytest.mark.parametrize("value", list(BAD_TEXT.values()), ids=list(BAD_TEXT))
def test_a_value_no_page_can_hold_in_matrix_yaml_is_named(project: Project, value: str) -> None:
    matrix = project.root / "matrix.yaml"
    matrix.write_text(matrix.read_text().replace('"every variant once"', value))
    before = tree(project.root)
    refused(cli(project, "list"), "matrix.yaml")
    assert tree(project.root) == before


@pytest.mark.parametrize(
    ("where", "value"),
    [("title", "\ud800"), ("title", "\x1b[31m"), ("summary", "\x07"), ("summary", "\x9b")],
)
def test_a_record_with_such_text_is_refused_by_new(
    project: Project, tmp_path: Path, where: str, value: str
) -> None:
    evil = tmp_path / "evil.json"
    data = (
        record(error__signature="RuntimeError: boom " + value)
        if where == "title"
        else record(verdict__summary="a " + value)
    )
    evil.write_text(json.dumps(data))  # ensure_ascii: the surrogate as an escape
    before = tree(project.root)
    refused(cli(project, "new", str(evil)), "evil.json", "refused")
    assert tree(project.root) == before


# -- 5. special files and unwritable outputs -------------------------------------------------


@pytest.mark.parametrize("which", ["entry.yaml", "matrix.yaml"])
def test_a_fifo_in_place_of_a_yaml_file_is_refused_without_blocking(
    project: Project, which: str
) -> None:
    path = project.root / (
        "matrix.yaml" if which == "matrix.yaml" else "repros/waits/gate/entry.yaml"
    )
    path.unlink()
    os.mkfifo(path)
    refused(cli(project, "list", timeout=30), which, "not a regular file (a FIFO)")
    report = cli(project, "report", timeout=30)  # reads entries, never the matrix
    assert report.returncode == 2 and "Traceback" not in report.stdout + report.stderr
    if which == "entry.yaml":
        assert "not a regular file (a FIFO)" in report.stdout + report.stderr


def test_new_on_a_fifo_is_refused_without_blocking(project: Project, tmp_path: Path) -> None:
    fifo = tmp_path / "record.json"
    os.mkfifo(fifo)
    refused(cli(project, "new", str(fifo), timeout=30), "not a regular file (a FIFO)")


def _store_with_one_night(project: Project) -> Path:
    """The project's store with the records of tests/ci/test_nightly's two nights."""
    from tests.ci.test_nightly import NIGHT_1, NIGHT_2

    store = project.root / "results" / "records"
    store.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps(r.to_dict()) for r in [*NIGHT_1, *NIGHT_2]]
    (store / "ci-cpu-1.jsonl").write_text("\n".join(lines) + "\n")
    return store


@pytest.mark.parametrize("where", ["/dev/full", "a-folder"])
def test_nightly_summary_that_cannot_be_written_is_named(
    project: Project, tmp_path: Path, where: str
) -> None:
    _store_with_one_night(project)
    target = "/dev/full" if where == "/dev/full" else str(tmp_path)
    before = tree(project.root)
    out = refused(cli(project, "nightly", "--summary", target, "--issues", "off"), "--summary")
    assert "no snapshot was written" in out
    assert tree(project.root) == before


# -- 6. integers past Python's int-string limit ---------------------------------------------

GIANT = "2." + "9" * 5000


@pytest.mark.parametrize(
    "argv",
    [
        ("explain", "--torch", GIANT),
        ("explain", "--lightning", GIANT),
        (
            "bisect",
            "waits/gate",
            "--variant",
            "held",
            "--device",
            "cpu",
            "--precision",
            "fp32",
            "--torch",
            f"1.0..{GIANT}",
        ),
        (
            "bisect",
            "waits/gate",
            "--variant",
            "held",
            "--device",
            "cpu",
            "--precision",
            "fp32",
            "--torch",
            "1.0..2.0",
            "--with-lightning",
            GIANT,
        ),
    ],
    ids=["explain-torch", "explain-lightning", "bisect-range", "bisect-with"],
)
def test_a_5000_digit_version_is_a_named_error(project: Project, argv: tuple[str, ...]) -> None:
    before = tree(project.root)
    refused(cli(project, *argv, stdin="RuntimeError: never raised\n"), "at most 64 characters")
    assert tree(project.root) == before


def test_a_probe_answering_a_5000_digit_version_is_read_without_a_traceback() -> None:
    """What a probe answers is read through the same bounded parse (domain.parse_version)."""
    from packaging.version import InvalidVersion

    from harness.catalogue.bisect import BisectError, parse_range
    from harness.domain import parse_version
    from harness.envs.backends import _is_version, _public
    from harness.envs.capabilities import RuntimeFacts

    assert not _is_version(GIANT)
    assert _public(GIANT) == GIANT
    facts = RuntimeFacts.from_probe({"python": "9" * 5000 + ".1", "torch": GIANT})
    assert facts.torch is None and facts.python is None
    with pytest.raises(InvalidVersion):
        parse_version(GIANT)
    with pytest.raises(BisectError):
        parse_range(f"1.0..{GIANT}")


# -- 7. the nightly and merge trust no more than they should ---------------------------------


@pytest.mark.parametrize("night", ["2026-13-45", "2026-02-30", "2999-01-01"])
def test_nightly_refuses_a_night_that_is_no_date(project: Project, night: str) -> None:
    _store_with_one_night(project)
    before = tree(project.root)
    refused(cli(project, "nightly", "--night", night, "--issues", "off"), "--night")
    assert tree(project.root) == before


def test_a_record_from_the_future_does_not_move_the_night(project: Project) -> None:
    from tests.ci.test_nightly import NIGHT2

    store = _store_with_one_night(project)
    line = json.loads((store / "ci-cpu-1.jsonl").read_text().splitlines()[-1])
    line["started_at"] = "2099-01-01T00:00:00Z"
    with (store / "ci-cpu-1.jsonl").open("a") as f:
        f.write(json.dumps(line) + "\n")
    done = cli(project, "nightly", "--issues", "off")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "warning: 1 records start after" in done.stdout
    written = sorted(p.name for p in (project.root / "results" / "nightly").glob("*.json"))
    assert written == [f"{NIGHT2}.json"]


def test_merge_keeps_out_a_record_claiming_this_machines_id(
    project: Project, tmp_path: Path
) -> None:
    from harness.envs.provenance import machine_id
    from tests.ci.test_nightly import NIGHT_1

    store = project.root / "results" / "records"
    store.mkdir(parents=True)
    own = machine_id(store)
    forged = tmp_path / "other.jsonl"
    d = NIGHT_1[0].to_dict() | {"machine": "other", "machine_id": own}
    forged.write_text(json.dumps(d) + "\n")
    before = tree(project.root)
    done = cli(project, "merge", str(forged))
    out = done.stdout + done.stderr
    assert done.returncode == 1 and "Traceback" not in out, out
    assert "claims this machine's id" in out and "1 conflicting" in out
    after = tree(project.root)
    after.pop("results/records/.merge.lock", None)  # the merge's lock: no record
    assert after == before


class _Index:
    """An index that answers ``torch`` with the release under test, as uv would."""

    def __init__(self, torch: str, releases: list[str] | None = None) -> None:
        from tests.ci.test_releases import LIGHTNING, TORCH, TableIndex

        self.table = TableIndex({"torch": releases or TORCH, "lightning": LIGHTNING})
        self.torch = torch

    def newest(self, requirements, python):  # type: ignore[no-untyped-def]
        if list(requirements) == ["torch"]:
            return {"torch": self.torch}
        return self.table.newest(requirements, python)


@pytest.mark.parametrize(
    "release", ["2.16.0+cpu", "2.16.0rc1", "2.16.0.dev20260101", "99999.0.0", GIANT]
)
def test_plan_new_releases_takes_no_local_pre_or_absurd_release(
    tmp_path: Path, release: str
) -> None:
    from harness.ci.releases import find_new_releases
    from harness.spec.matrix import load_matrix
    from tests.ci.test_releases import _before_2_14

    found = find_new_releases(load_matrix(_before_2_14(tmp_path)), _Index(release))
    assert found.rows == ()
    assert any("is not added" in n for n in found.notes), found.notes


def test_plan_new_releases_asks_about_a_bounded_number_of_lines(tmp_path: Path) -> None:
    from harness.ci.releases import MAX_NEW_LINES, find_new_releases
    from harness.spec.matrix import load_matrix
    from tests.ci.test_releases import LIGHTNING, TORCH, TableIndex, _before_2_14

    many = TORCH + [f"{major}.{minor}.0" for major in range(3, 13) for minor in range(1000)]
    index = TableIndex({"torch": many, "lightning": LIGHTNING})
    start = time.monotonic()
    found = find_new_releases(load_matrix(_before_2_14(tmp_path)), index)
    assert len(found.rows) == MAX_NEW_LINES
    assert any(f"more than {MAX_NEW_LINES} new torch lines" in n for n in found.notes)
    assert len(index.asked) < 20 * MAX_NEW_LINES
    assert time.monotonic() - start < 60


# -- 8. the weak cases ------------------------------------------------------------------------


def test_a_duplicate_key_in_a_record_is_refused(project: Project, tmp_path: Path) -> None:
    evil = tmp_path / "dup.json"
    text = json.dumps(record(), indent=2)
    evil.write_text(text.replace('"url":', '"url": "https://deadends.dev/x",\n  "url":', 1))
    before = tree(project.root)
    refused(cli(project, "new", str(evil)), "'url' is given twice")
    assert tree(project.root) == before


def test_a_duplicate_key_in_a_stored_line_is_refused_by_merge(
    project: Project, tmp_path: Path
) -> None:
    from tests.ci.test_nightly import NIGHT_1

    line = json.dumps(NIGHT_1[0].to_dict() | {"machine": "other", "machine_id": "0" * 12})
    forged = tmp_path / "other.jsonl"
    forged.write_text(line[:-1] + ', "outcome": "ok"}\n')
    done = cli(project, "merge", str(forged))
    out = done.stdout + done.stderr
    assert done.returncode == 2 and "Traceback" not in out, out
    assert "'outcome' is given twice" in out
    assert not list((project.root / "results" / "records").glob("*.jsonl"))


@pytest.mark.parametrize("url", ["javascript:alert(1)", "data:text/html,x", "file:///etc/passwd"])
def test_a_source_url_that_is_not_http_is_never_a_link(
    project: Project, tmp_path: Path, url: str
) -> None:
    evil = tmp_path / "evil.json"
    evil.write_text(json.dumps(record(url=url)))
    done = cli(project, "new", str(evil))
    assert done.returncode == 0, done.stdout + done.stderr
    document = (project.root / "repros" / KEPT / "document.md").read_text()
    assert f"]({url})" not in document and "not linked" in document


@pytest.mark.parametrize(
    "url", ["https://a b/", "https://x.org/\tpages", "https://x.org/<b>", "javascript:x"]
)
def test_pages_url_that_is_not_one_public_url_is_refused(kept: Project, url: str) -> None:
    before = tree(kept.root)
    refused(cli(kept, "corrections", "--pages-url", url), "--pages-url")
    assert tree(kept.root) == before


def test_export_of_a_title_with_a_control_character_writes_a_script_that_compiles(
    tmp_path: Path,
) -> None:
    """A title cannot hold NUL from entry.yaml any more (class 4); export escapes such a
    character wherever a title comes from, so its script always compiles."""
    import dataclasses

    from harness.catalogue.export import _docstring
    from harness.spec.entries import load_entries

    (e,) = [x for x in load_entries(_project_repros(tmp_path)) if x.id == "waits/gate"]
    hostile = dataclasses.replace(e, title="a\x00b\x1b[31m\u2028c")
    text = _docstring(hostile, hostile.variants[0], "fp32")
    compile(text, "export", "exec")
    assert "\x00" not in text and "\x1b" not in text


def _project_repros(tmp_path: Path) -> Path:
    return Project(tmp_path / "p").root / "repros"


def test_gpu_box_budget_is_a_plain_integer_before_bash_arithmetic(tmp_path: Path) -> None:
    script = REPO / "scripts" / "gpu-box.sh"
    marker = tmp_path / "ran"
    for name in ("GPU_BOX_BUDGET_S", "GPU_BOX_MARGIN_S", "GPU_BOX_JOBS"):
        env = dict(os.environ, **{name: f"a[$(touch {marker})]"})
        done = subprocess.run(
            ["bash", str(script), "--dry-run"], env=env, capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 2, done.stdout + done.stderr
        assert f"{name}=" in done.stdout and "whole number" in done.stdout
        assert not marker.exists()
