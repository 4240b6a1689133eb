"""The table of commands: every subcommand the parser offers is one Command of
harness.cli.COMMANDS, in a module of its own, and each answers --help."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import harness.cli
from harness.cli import COMMANDS, build_parser, main
from harness.cli.command import Command
from tests.paths import REPO

# the command line as users know it (README, docs/reference/cli.md, noxfile.py, CI)
NAMES = (
    "run",
    "list",
    "plan",
    "report",
    "diff",
    "nightly",
    "tox-ini",
    "msgsearch",
    "merge",
    "new",
    "check",
    "export",
    "bisect",
    "envs",
    "explain",
    "corrections",
    "try",
)


def subcommands() -> list[str]:
    (sub,) = (a for a in build_parser()._actions if a.dest == "command")
    return list(sub.choices)


def test_the_table_is_every_command_in_help_order() -> None:
    assert tuple(c.name for c in COMMANDS) == NAMES
    assert subcommands() == list(NAMES)


def test_every_command_class_in_harness_cli_is_in_the_table_each_in_its_own_module() -> None:
    found: dict[str, type[Command]] = {}
    for info in pkgutil.iter_modules(harness.cli.__path__):
        module = importlib.import_module(f"harness.cli.{info.name}")
        for _, value in inspect.getmembers(module, inspect.isclass):
            if issubclass(value, Command) and value is not Command:
                found[value.__qualname__] = value
    assert sorted(found) == sorted(c.__qualname__ for c in COMMANDS)
    modules = [c.__module__ for c in COMMANDS]
    assert len(set(modules)) == len(modules)


@pytest.mark.parametrize("name", NAMES)
def test_every_command_answers_help(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main([name, "--help"])
    assert done.value.code == 0
    assert f"usage: harness {name}" in capsys.readouterr().out


def test_python_m_harness_and_the_installed_script_call_the_same_main() -> None:
    from harness.__main__ import main as module_main

    assert module_main is main
    tomllib = pytest.importorskip("tomllib")
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    module, _, name = scripts["harness"].partition(":")
    assert getattr(importlib.import_module(module), name) is main


def test_a_bad_option_is_argparse_s_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["run", "--jobs", "0"])
    assert done.value.code == 2
    assert "argument -j/--jobs: must be from 1 to 256, got 0" in capsys.readouterr().err


def test_help_names_every_command_in_its_summary(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out.replace("\n", "")  # argparse wraps the line
    summary = out.split("Command line:", 1)[1].split("}", 1)[0]
    assert summary.split("{", 1)[1].split(",") == list(NAMES)


def test_a_filtered_list_shows_the_environments_it_selects_not_the_whole_profile(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from tests.paths import REPO

    argv = ["--repo", str(REPO), "list", "--profile", "cpu"]
    argv += ["--entry", "pytorch/grad-scale-unscale-error", "--env", "py3.11-torch2.13.0-*"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "the filters select 1 of them (the other 58 are not listed)" in out
    assert "py3.10-torch1.12.1" not in out
    assert len(out.splitlines()) < 15


def test_a_clipped_text_ends_at_a_word() -> None:
    from harness.domain import clip

    text = "env_failed: No module named 'pkg_resources' while importing pytorch_lightning"
    assert clip(text, 40) == "env_failed: No module named ..."
    assert clip(text, 200) == text
    assert len(clip("x" * 100, 20)) <= 20
