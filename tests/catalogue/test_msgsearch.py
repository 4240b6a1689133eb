"""harness/catalogue/msgsearch.py: fixed parts of a message and the search of installed packages.

Fast tests use a tiny fake site-packages folder (files written here: a .py source and a
.so-named binary); the slow one reads a real torch of the matrix."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from harness.__main__ import main
from harness.catalogue import msgsearch
from harness.catalogue.msgsearch import (
    Message,
    TextStore,
    file_text,
    fixed_parts,
    load_results,
    merge_results,
    search_env,
    verdict,
)
from tests.paths import REPO

# the project's own environments (`.envs`, the harness's default), or HARNESS_ENVS_DIR
ENVS = Path(os.environ.get("HARNESS_ENVS_DIR", str(REPO / ".envs")))


@pytest.mark.parametrize(
    ("message", "parts"),
    [
        (
            "RuntimeError: DataLoader worker (pid(s) 12345) exited unexpectedly",
            ("DataLoader worker (pid(s", "exited unexpectedly"),
        ),
        (
            "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
            ("CUDA out of memory. Tried to allocate",),
        ),
        (
            "RuntimeError: expected scalar type Float but found Half",
            ("expected scalar type", "but found"),
        ),
        ("found at least two devices, cuda:0 and cpu!", ("found at least two devices",)),
        ("hook 'fn' has changed the size of value", ("has changed the size of value",)),
        (
            "DataLoader worker is killed by signal: Killed",
            ("DataLoader worker is killed by signal",),
        ),
        ("element 0 of tensors does not require grad", ("of tensors does not require grad",)),
        ("Loss is nan at step N", ("Loss is nan at step",)),
        (
            "torch.cuda.amp.autocast only works with CUDA",
            ("torch.cuda.amp.autocast only works with CUDA",),
        ),
        ("12 34", ()),
    ],
)
def test_fixed_parts(message: str, parts: tuple[str, ...]) -> None:
    assert fixed_parts(message) == parts


def test_verdict() -> None:
    assert verdict([True, True]) == "all"
    assert verdict([True, False]) == "some"
    assert verdict([False]) == "none"
    assert verdict([]) == "none"


def fake_env(root: Path, name: str = "py3.9-torch9.9.9-lightning0.0.1") -> Path:
    env = root / name
    site = env / "lib" / "python3.9" / "site-packages"
    (site / "torch" / "lib").mkdir(parents=True)
    (site / "torch" / "__init__.py").write_text(
        'raise RuntimeError("the size of a thing must match")\n'
    )
    # a compiled library: NUL-separated C strings among binary bytes
    blob = (
        b"\x7fELF\x00\x01" * 1000
        + b"\x00CUDA out of memory. Tried to allocate \x00"
        + b"\xff" * 5000
    )
    (site / "torch" / "lib" / "libfake.so").write_bytes(blob)
    (site / "torch" / "lib" / "notes.txt").write_text(
        "Bad file descriptor in a text file is not searched\n"
    )
    (site / "lightning").mkdir()
    (site / "lightning" / "x.py").write_text("MSG = 'DataLoader worker is killed by signal'\n")
    (site / "numpy").mkdir()
    (site / "numpy" / "y.py").write_text("'Loss is nan at step'  # another package: not searched\n")
    (site / "torch-9.9.9+cpu.dist-info").mkdir()
    (site / "lightning-0.0.1.dist-info").mkdir()
    return env


PARTS = [
    "the size of a thing must match",
    "CUDA out of memory. Tried to allocate",
    "DataLoader worker is killed by signal",
    "Bad file descriptor",
    "Loss is nan at step",
]


def test_search_finds_sources_and_binaries_only_in_torch_and_lightning(tmp_path: Path) -> None:
    s = search_env(fake_env(tmp_path), PARTS)
    assert s.hits == {
        "the size of a thing must match": "torch/__init__.py",
        "CUDA out of memory. Tried to allocate": "torch/lib/libfake.so",
        "DataLoader worker is killed by signal": "lightning/x.py",
        "Bad file descriptor": None,  # only in a .txt file
        "Loss is nan at step": None,  # only in numpy
    }
    assert s.versions == {"torch": "9.9.9+cpu", "lightning": "0.0.1"}
    assert s.files == 3


def test_a_part_across_a_chunk_boundary_is_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = fake_env(tmp_path)
    offset = (
        (env / "lib/python3.9/site-packages/torch/lib/libfake.so").read_bytes().index(b"CUDA out")
    )
    for chunk in (offset + 3, offset + 10, 7):  # the boundary falls inside the needle
        monkeypatch.setattr(msgsearch, "CHUNK", chunk)
        assert (
            search_env(env, PARTS).hits["CUDA out of memory. Tried to allocate"]
            == "torch/lib/libfake.so"
        )


def test_hardlinked_files_are_read_once(tmp_path: Path) -> None:
    a = fake_env(tmp_path, "a")
    b = tmp_path / "b"
    for src in sorted(a.rglob("*")):
        dst = b / src.relative_to(a)
        if src.is_dir():
            dst.mkdir(parents=True, exist_ok=True)
        else:
            os.link(src, dst)
    cache: dict[tuple[int, int], set[bytes]] = {}
    first = search_env(a, PARTS, cache)
    size = len(cache)
    second = search_env(b, PARTS, cache)
    assert len(cache) == size == 3
    assert first.hits == second.hits


def test_file_text_keeps_the_runs_a_part_can_lie_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "lib.so"
    path.write_bytes(
        b"\x01\x02_ZN3c10symbolsHaveNoSpaces\x00CUDA out of memory. Tried to allocate \x00"
        b"short one\x00a b\x00" + b"\xff" * 20 + b"\x00tab\tseparated words\n"
    )
    want = b"\n".join(
        sorted([b"CUDA out of memory. Tried to allocate ", b"short one", b"tab\tseparated words"])
    )
    assert file_text(path) == want
    for chunk in (1, 5, 17, 40):  # a run cut by a chunk's end is carried whole to the next
        monkeypatch.setattr(msgsearch, "CHUNK", chunk)
        assert file_text(path) == want


def test_a_part_with_a_newline_is_looked_for_in_the_file_itself(tmp_path: Path) -> None:
    env = fake_env(tmp_path)
    (env / "lib/python3.9/site-packages/torch/two.py").write_text('"first line\nsecond line"')
    s = search_env(env, ["first line\nsecond line", "first line second line"])
    assert s.hits == {"first line\nsecond line": "torch/two.py", "first line second line": None}


def test_the_store_answers_new_messages_without_reading_a_file_again(tmp_path: Path) -> None:
    env = fake_env(tmp_path)
    store = TextStore(tmp_path / "cache" / "t.sqlite")
    first = search_env(env, PARTS[:2], {}, store)
    assert first.read == 3 and first.read_bytes == first.bytes
    store.close()
    # another process, other messages: every answer from the stored text
    store = TextStore(tmp_path / "cache" / "t.sqlite")
    again = search_env(env, PARTS, {}, store)
    assert again.read == 0
    assert again.hits == search_env(env, PARTS).hits
    # a file changed in place has a new modification time: read anew, the change seen
    lib = env / "lib/python3.9/site-packages/lightning/x.py"
    lib.write_text("MSG = 'Loss is nan at step'\n")
    os.utime(lib, ns=(1, 1))
    changed = search_env(env, PARTS, {}, store)
    store.close()
    assert changed.read == 1
    assert changed.hits["Loss is nan at step"] == "lightning/x.py"
    assert changed.hits["DataLoader worker is killed by signal"] is None


def test_merge_keeps_other_envs_and_drops_them_when_the_message_changes(tmp_path: Path) -> None:
    env = fake_env(tmp_path)
    s = search_env(env, PARTS)
    m = Message(
        "x/entry",
        "RuntimeError: CUDA out of memory. Tried to allocate 2 (Bad file descriptor)",
    )
    r = merge_results({}, [m], [s])
    row = r["entries"]["x/entry"]
    assert row["parts"] == ["CUDA out of memory. Tried to allocate", "Bad file descriptor"]
    assert row["envs"][env.name]["found"] == "some"
    assert row["envs"][env.name]["parts"][0]["file"] == "torch/lib/libfake.so"
    other = dict(
        r, entries={"x/entry": dict(row, envs={**row["envs"], "old-env": {"found": "none"}})}
    )
    again = merge_results(other, [m], [s])
    assert set(again["entries"]["x/entry"]["envs"]) == {env.name, "old-env"}
    changed = merge_results(other, [Message("x/entry", "Loss is nan at step 3")], [s])
    assert set(changed["entries"]["x/entry"]["envs"]) == {env.name}
    assert changed["entries"]["x/entry"]["envs"][env.name]["found"] == "none"


def test_results_of_another_schema_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "m.json"
    path.write_text(json.dumps({"schema": 99, "entries": {}}))
    with pytest.raises(ValueError, match="schema 99"):
        load_results(path)


TRIAGE = """\
source: {repository: a/b, path: data/, id_prefix: kb/}
entries:
  - kb_id: pytorch/oom/env
    url: https://kb.example/oom
    message: "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"
    owner: me
    scriptable: no
    entry: null
    why: needs a GPU here
  - kb_id: pytorch/made-up/env
    url: https://kb.example/made-up
    message: "RuntimeError: GradScaler unscale_() encountered None gradient"
    owner: me
    scriptable: no
    entry: null
    why: for the test
"""


def test_cli_writes_the_result_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = tmp_path / "repo"
    (repo / "repros" / "kb").mkdir(parents=True)
    (repo / "repros" / "kb" / "triage.yaml").write_text(TRIAGE)
    envs = tmp_path / "envs"
    envs.mkdir()
    env = fake_env(envs)
    assert main(["--repo", str(repo), "msgsearch", "--envs-dir", str(envs)]) == 0
    data = json.loads((repo / "results" / "msgsearch.json").read_text())
    assert data["entries"]["kb/pytorch/oom/env"]["envs"][env.name]["found"] == "all"
    assert data["entries"]["kb/pytorch/made-up/env"]["envs"][env.name]["found"] == "none"
    out = capsys.readouterr().out
    assert "kb/pytorch/made-up/env" in out and "none in 1" in out
    assert "2 messages (2 fixed parts) in 1 environments: 3 files read" in out
    assert (repo / "results" / ".cache" / "msgsearch.sqlite").is_file()
    assert main(["--repo", str(repo), "msgsearch", "--envs-dir", str(envs)]) == 0
    assert "in 1 environments: 0 files read" in capsys.readouterr().out  # the stored text
    assert main(["--repo", str(repo), "msgsearch", "nothing/*", "--envs-dir", str(envs)]) == 2
    assert main(["--repo", str(repo), "msgsearch", "--envs-dir", str(envs), "--env", "py2*"]) == 2
    assert "no environment under" in capsys.readouterr().out


MATRIX = """\
version: 1
defaults: {trials: 1, timeout_s: 60, memory_limit_mb: 1024}
devices: [cpu]
precisions: [fp32]
environments:
  - {torch: "9.9.9", python: ["3.9", "3.10"], lightning: ["0.0.1"]}
profiles:
  one: {description: "the one environment"}
default_profile: one
"""


def test_cli_profile_keeps_its_environments(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = tmp_path / "repo"
    (repo / "repros" / "kb").mkdir(parents=True)
    (repo / "repros" / "kb" / "triage.yaml").write_text(TRIAGE)
    (repo / "matrix.yaml").write_text(MATRIX)
    envs = tmp_path / "envs"
    envs.mkdir()
    env = fake_env(envs)
    fake_env(envs, env.name + "-with-extra")  # derived: not one of the profile's
    args = ["--repo", str(repo), "msgsearch", "--envs-dir", str(envs), "--no-cache"]
    # one of the profile's two environments is not built: no partial answer for the profile
    assert main([*args, "--profile", "one"]) == 2
    assert "1 environment(s) of the profile not built" in capsys.readouterr().out
    assert main([*args, "--profile", "one", "--env", "py3.9-*"]) == 0
    data = json.loads((repo / "results" / "msgsearch.json").read_text())
    assert set(data["entries"]["kb/pytorch/oom/env"]["envs"]) == {env.name}
    assert not (repo / "results" / ".cache").exists()


def _real_env(pattern: str) -> Path:
    found = sorted(ENVS.glob(pattern)) if ENVS.is_dir() else []
    if not found:
        pytest.skip(f"no built environment {pattern} under {ENVS} (HARNESS_ENVS_DIR)")
    return found[0]


@pytest.mark.slow
def test_real_torch_has_real_messages_and_not_the_gradscaler_one() -> None:
    env = _real_env("py3.11-torch2.13.0-*")
    real = "RuntimeError: one of the variables needed for gradient computation has been modified by an inplace operation"
    made_up = "RuntimeError: GradScaler unscale_() encountered None gradient"
    parts = [*fixed_parts(real), *fixed_parts(made_up)]
    s = search_env(env, parts)
    assert s.hits[fixed_parts(real)[0]] is not None
    assert s.hits[fixed_parts(made_up)[0]] is None
    assert s.versions["torch"].startswith("2.13.0")
    assert s.bytes > 100_000_000  # the compiled libraries were read, not only the sources
