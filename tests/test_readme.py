"""The README's quick start and the CI script stay in step."""

from __future__ import annotations

import re

from tests.conftest import REPO


def _quick_start() -> list[str]:
    readme = (REPO / "README.md").read_text()
    section = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```sh\n(.*?)```", section, re.S)
    assert block, "the quick start has a ```sh block"
    return [line for line in block.group(1).splitlines() if line.strip()]


def test_quick_start_is_two_commands():
    install_and_build, install_and_test = _quick_start()
    assert install_and_build == "pip install . && reportgen build"
    assert install_and_test.endswith("&& pytest") and "[test]" in install_and_test


def test_ci_runs_the_readme_commands_in_order():
    script = (REPO / ".ci" / "run").read_text()
    assert script.startswith("#!/usr/bin/env bash\n")
    assert "set -euo pipefail" in script
    build = re.search(r'^BUILD_COMMAND="(.*)"$', script, re.M)
    test = re.search(r'^TEST_COMMAND="(.*)"$', script, re.M)
    assert build and build.group(1) == _quick_start()[0]
    assert test and test.group(1) == _quick_start()[1]
    # Both run, in that order, in the one virtual environment.
    assert 0 < script.index('bash -c "$BUILD_COMMAND"') < script.index('bash -c "$TEST_COMMAND"')
    assert "reportgen --version" in script.split('bash -c "$TEST_COMMAND"', 1)[1]
    assert (REPO / ".ci" / "run").stat().st_mode & 0o111, ".ci/run is executable"


def _usage_block() -> str:
    readme = (REPO / "README.md").read_text()
    section = readme.split("## Usage", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```\n(.*?)```", section, re.S)
    assert block, "Usage has a ``` block"
    return block.group(1)


def test_usage_lists_every_command_and_its_options():
    """The pages and `--help` point to every command (`serve` for the trace's Perfetto link, `publish`): the
    README's Usage block lists each one, with every option its parser takes."""
    import argparse

    from reportgen.cli.main import COMMANDS, parser

    usage = _usage_block()
    commands = re.findall(r"^reportgen (\w[\w-]*)", usage, re.M)
    assert set(COMMANDS) <= set(commands), sorted(set(COMMANDS) - set(commands))
    sub = next(a for a in parser()._actions if isinstance(a, argparse._SubParsersAction))
    for name, command_parser in sub.choices.items():
        lines = usage.split(f"reportgen {name} ", 1)[1].split("\nreportgen ", 1)[0]
        missing = [action.option_strings[-1] for action in command_parser._actions
                   if action.option_strings and "--help" not in action.option_strings
                   and not any(re.search(rf"(?<![\w-]){re.escape(o)}(?![\w-])", lines) for o in action.option_strings)]
        assert missing == [], f"reportgen {name}: {missing}"
