"""The CI recipes, run here: the GitHub composite action (and its example workflows) and
the GitLab job, on the bundled sample, exactly as written.

What runs for real: every `run:` / `script:` of the recipes (bash), reportgen
(this checkout, as `python3 -m reportgen` and a `reportgen` command), `gh`,
`curl` and `jq`. What is simulated, because neither service can be reached
from here: the GitHub and GitLab APIs (tests/forge.py, a local HTTPS server
answering the endpoints the recipes call), the `uses:` steps of other actions
(actions/upload-artifact and download-artifact: recorded with their inputs,
and the paths they would upload checked), the user's own capture step (the
sample captures stand in for it), and the install steps (reportgen is this
checkout; jq comes from apt here as it does in the GitLab job's before_script).
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from xml.etree import ElementTree

import pytest

from tests.cirun import (
    base_env,
    condition,
    gitlab_job,
    gitlab_variables,
    interpolate,
    load_yaml,
    run_composite,
    run_gitlab_script,
    workflow_on,
)
from tests.conftest import REPO
from tests.forge import GITHUB_TOKEN, GITLAB_JOB_TOKEN, GITLAB_TOKEN, Forge, ForgeServer, self_signed_certificate
from tests.logdirs import FAST, INPUT_BOUND

ACTION = REPO / ".github" / "actions" / "reportgen"
COMMENT_ACTION = REPO / ".github" / "actions" / "reportgen-comment"
WORKFLOW = REPO / "examples" / "github" / "profile.yml"
COMMENT_WORKFLOW = REPO / "examples" / "github" / "profile-comment.yml"
GITLAB_CI = REPO / "examples" / "gitlab" / ".gitlab-ci.yml"
BUDGET = REPO / "examples" / "profile-budget.toml"
REPORT_USES = "OWNER/reportgen/.github/actions/reportgen@REF"
COMMENT_USES = "OWNER/reportgen/.github/actions/reportgen-comment@REF"
MARKER = "<!-- reportgen:sticky:reportgen -->"

TOOLS = ("gh", "jq", "curl", "openssl")
missing_tools = [tool for tool in TOOLS if shutil.which(tool) is None]
needs_tools = pytest.mark.skipif(
    bool(missing_tools),
    reason=f"the recipes' tools are missing: {', '.join(missing_tools)} (apt-get install gh jq curl openssl)")


def zip_of(files: dict[str, bytes | Path]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data if isinstance(data, bytes) else data.read_bytes())
    return buffer.getvalue()


def capture(workspace: Path, run: str, source: Path) -> None:
    """What the user's capture step leaves: logs/plugins/profile/<run>/<host>.xplane.pb."""
    shutil.rmtree(workspace / "logs", ignore_errors=True)
    folder = workspace / "logs" / "plugins" / "profile" / run
    folder.mkdir(parents=True)
    shutil.copy(source, folder / "vm.xplane.pb")


@pytest.fixture(scope="module")
def certificate(tmp_path_factory) -> tuple[Path, Path]:
    made = self_signed_certificate(tmp_path_factory.mktemp("forge"))
    assert made is not None
    return made


@pytest.fixture
def tools_dir(tmp_path) -> Path:
    """python3 / python: the interpreter running the tests; reportgen: this checkout,
    as the console script `pip install` makes."""
    folder = tmp_path / "bin"
    folder.mkdir()
    # Wrappers, not links: a virtual environment's python finds its packages from the path it is run by.
    for name, command in (("python3", ""), ("python", ""), ("reportgen", " -m reportgen")):
        script = folder / name
        script.write_text(f'#!/bin/sh\nexec "{sys.executable}"{command} "$@"\n')
        script.chmod(0o755)
    return folder


def job_env(tmp_path: Path, tools_dir: Path, certificate) -> dict[str, str]:
    env = base_env(tmp_path / "home", [tools_dir])
    (tmp_path / "home").mkdir(exist_ok=True)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    env["SSL_CERT_FILE"] = str(certificate[0])  # gh (Go) trusts the forge's certificate
    env["CURL_CA_BUNDLE"] = str(certificate[0])
    env["GH_CONFIG_DIR"] = str(tmp_path / "gh-config")
    return env


# -- GitHub


def github_contexts(server: ForgeServer, workspace: Path, runner_temp: Path, *, event: str, pr: int | None = None,
                    head_repo: str = "octo/model", sha: str = "a1" * 20) -> tuple[dict, dict[str, str]]:
    """The job's contexts and the runner's GITHUB_* variables for one event."""
    repo = "octo/model"
    ref = f"refs/pull/{pr}/merge" if pr else "refs/heads/main"
    event_payload = {"pull_request": {"number": pr, "head": {"sha": sha, "repo": {"full_name": head_repo}}}} if pr \
        else {}
    github = {"event_name": event, "repository": repo, "server_url": server.base_url, "token": GITHUB_TOKEN,
              "base_ref": "main" if pr else "", "ref": ref, "ref_name": f"{pr}/merge" if pr else "main",
              "sha": sha, "run_id": "9001", "workspace": str(workspace), "event": event_payload}
    runner_temp.mkdir(parents=True, exist_ok=True)
    env = {
        "GITHUB_ACTIONS": "true", "CI": "true", "GITHUB_EVENT_NAME": event, "GITHUB_REPOSITORY": repo,
        "GITHUB_SERVER_URL": server.base_url, "GITHUB_API_URL": f"{server.base_url}/api/v3",
        "GITHUB_RUN_ID": "9001", "GITHUB_SHA": sha, "GITHUB_REF": ref, "GITHUB_REF_NAME": github["ref_name"],
        "GITHUB_BASE_REF": github["base_ref"], "GITHUB_WORKSPACE": str(workspace),
        "GITHUB_WORKFLOW_REF": f"{repo}/.github/workflows/profile.yml@{ref}",
        "GITHUB_STEP_SUMMARY": str(runner_temp / "step-summary.md"), "RUNNER_TEMP": str(runner_temp),
    }
    Path(env["GITHUB_STEP_SUMMARY"]).write_text("")
    return {"github": github, "vars": {}, "secrets": {}, "env": {}, "runner": {"temp": str(runner_temp)}}, env


def workflow_report_inputs(context: dict) -> dict[str, str]:
    """The example workflow's report step: its `with:`, evaluated. The steps before it are
    the user's (checkout, Python, dependencies, the capture) and GCS sign-in."""
    workflow = load_yaml(WORKFLOW)
    steps = workflow["jobs"]["profile"]["steps"]
    report = next(s for s in steps if s.get("uses") == REPORT_USES)
    before = steps[:steps.index(report)]
    assert {s.get("id") for s in before if "run" in s} == {"deps", "capture"}
    signin = next(s for s in before if str(s.get("uses", "")).startswith("google-github-actions/auth@"))
    assert not condition(signin["if"], context, "success")  # no GCS variables set: no sign-in
    inputs = {key: interpolate(value, context) for key, value in report["with"].items()}
    # reportgen is this checkout already: the action's pip install of its own repository is not run here.
    return {**inputs, "install": "false"}


def uploads(run) -> dict[str, Path]:
    """What the upload-artifact steps whose `if:` held would upload, by artifact name."""
    return {s.with_["name"]: Path(s.with_["path"]) for s in run.steps if s.uses == "actions/upload-artifact@v7"}


def marker_comments(forge: Forge, pr: int) -> list[dict]:
    return [c for c in forge.comments.get(pr, []) if c["body"].startswith(MARKER)]


@needs_tools
def test_pull_request_gets_one_sticky_comment_and_fails_over_budget(tmp_path, tools_dir, certificate):
    forge = Forge()
    # main's pushes: the newest kept no artifact (expired), the one before has the capture;
    # a pull request from a fork ran on a branch also named main: never the baseline.
    forge.add_run("main", artifacts={"reportgen-capture": zip_of({"vm.xplane.pb": FAST})})
    forge.add_run("main", event="pull_request", artifacts={"reportgen-capture": zip_of({"vm.xplane.pb": FAST})})
    forge.add_run("main", artifacts={"reportgen-capture": zip_of({"vm.xplane.pb": INPUT_BOUND})}, expired=True)
    for i in range(130):  # the sticky comment goes past the first page of 100
        forge.add_comment(42, f"review comment {i}: looks good")
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    shutil.copy(BUDGET, workspace / "profile-budget.toml")
    capture(workspace, "2026_05_02_09_30_00", INPUT_BOUND)  # the pull request makes the input pipeline slow
    env = job_env(tmp_path, tools_dir, certificate)

    with ForgeServer(forge, *certificate) as server:
        context, github_env = github_contexts(server, workspace, tmp_path / "runner", event="pull_request", pr=42)
        run = run_composite(ACTION, workflow_report_inputs(context), context, {**env, **github_env},
                            tmp_path / "runner")
        # The check fails the job, at its end: after the summary, the uploads and the comment.
        assert run.failed and run.returncode == 3
        assert [s.name for s in run.steps if s.returncode] == ["Fail on a budget breach or unreadable input"]
        outputs = run.outputs
        assert (outputs["baseline"], outputs["candidate"], outputs["check-status"]) == ("main", "pr-42", "3")
        posted = marker_comments(forge, 42)
        assert len(posted) == 1 and len(forge.comments[42]) == 131
        body = posted[0]["body"]
        assert body == Path(run.outputs["comment"]).read_text(encoding="utf-8") and len(body) < 65_536
        assert "<code>main</code> → <code>pr\\-42</code>" in body and "slower** per step" in body
        assert "❌ **2 of 3 checks over budget**" in body
        assert f"artifact\\)]({server.base_url}/octo/model/actions/runs/9001)" in body  # the run's page
        # The baseline: main's newest push with an unexpired capture artifact; never the pull request's run.
        assert len(forge.requests("GET", r"/actions/artifacts/\d+/zip$")) == 1
        assert not forge.requests("GET", rf"/actions/runs/{forge.runs[1]['id']}/")
        # The check's annotations: one ::error per breach, on the budget file's line of that budget.
        check = run.step("check").stdout
        assert [line for line in check.splitlines() if line.startswith("::")][2:] == [
            "::error file=profile-budget.toml,line=6,title=pr-42%3A over the input-share budget::pr-42: 73.6%25 of "
            "the step time waits for input, over the 20%25 budget (max input percent; XProf: HIGHLY input-bound)",
            "::error file=profile-budget.toml,line=7,title=pr-42%3A over the regression budget::pr-42 against main: "
            "step time 24.24 ms → 137.82 ms (+113.58 ms, +468.5%25), over the 5%25 regression budget; beyond the "
            "runs' noise (p < 0.0001)",
            # The run's finding, as an annotation of its own (no budget refuses findings here).
            "::warning title=pr-42%3A high finding input.tf_data_bottleneck::The step waits for input 73.6%25 of "
            "the time; the tf.data bottleneck is MapAndBatch (Iterator::Root::MapAndBatch). What to do: Run the map "
            "function in parallel (the trace recorded parallelism=1): pass num_parallel_calls to map. "
            "(`dataset.map(f, num_parallel_calls=tf.data.AUTOTUNE)`) Upstream of MapAndBatch is ShuffleAndRepeat: "
            "the elements it sees are shuffled and never repeat exactly, so a cache after it would hold nothing "
            "reusable. Cache the deterministic part instead: move the map before the shuffle and repeat and cache "
            "right after it (source → map → cache → shuffle → repeat → batch → prefetch); keep any random "
            "augmentation after the cache. (`dataset = source.map(f, num_parallel_calls=tf.data.AUTOTUNE).cache()"
            ".shuffle(n).repeat().batch(b).prefetch(tf.data.AUTOTUNE)`) This pipeline has no prefetch: add one as "
            "the last transformation so that input preparation overlaps the training step. (`dataset = "
            "dataset.prefetch(tf.data.AUTOTUNE)`)",
        ]
        assert re.search(r"^::stop-commands::[0-9a-f]{32}$", check, re.M)  # the plain report runs no command
        # The job summary: the same report, no marker, no charts (nothing published to link them from).
        summary = Path(github_env["GITHUB_STEP_SUMMARY"]).read_text(encoding="utf-8")
        assert summary.startswith("## Profile comparison") and "![" not in summary and MARKER not in summary
        assert "❌ **2 of 3 checks over budget**" in summary
        # What the upload steps upload exists.
        files = uploads(run)
        assert sorted(files) == ["reportgen-capture", "reportgen-comment", "reportgen-junit", "reportgen-site"]
        assert (files["reportgen-site"] / "index.html").is_file()
        assert (files["reportgen-site"] / "compare" / "main--vs--pr-42.html").is_file()
        assert [p.name for p in files["reportgen-capture"].iterdir()] == ["vm.xplane.pb"]
        assert (files["reportgen-comment"] / "pr-number").read_text() == "42\n"
        junit = ElementTree.parse(files["reportgen-junit"]).getroot()
        assert (junit.get("tests"), junit.get("failures")) == ("3", "2")

        # The next push: the comment step finds that comment (on the second page) and edits it.
        step = run.step("Post or update the sticky comment")
        next_body = tmp_path / "next.md"
        next_body.write_text(body.replace("2 of 3 checks over budget", "1 of 3 checks over budget"))
        done = subprocess.run(["bash", str(ACTION / "sticky-comment.sh"), str(next_body), "42"],
                              env={**env, **github_env, **step.env}, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert len(marker_comments(forge, 42)) == 1 and len(forge.comments[42]) == 131
    assert len(forge.requests("POST", r"/issues/42/comments$")) == 1
    assert len(forge.requests("PATCH", rf"/issues/comments/{posted[0]['id']}$")) == 1
    assert "1 of 3 checks over budget" in marker_comments(forge, 42)[0]["body"]


@needs_tools
def test_push_to_main_builds_without_a_baseline(tmp_path, tools_dir, certificate):
    forge = Forge()
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    shutil.copy(BUDGET, workspace / "profile-budget.toml")
    capture(workspace, "2026_05_03_08_00_00", FAST)
    env = job_env(tmp_path, tools_dir, certificate)
    with ForgeServer(forge, *certificate) as server:
        context, github_env = github_contexts(server, workspace, tmp_path / "runner", event="push")
        run = run_composite(ACTION, workflow_report_inputs(context), context, {**env, **github_env},
                            tmp_path / "runner")
    assert not run.failed, [(s.name, s.stderr[-2000:]) for s in run.steps if s.returncode]
    assert (run.outputs["candidate"], run.outputs["baseline"], run.outputs["check-status"]) == ("main", "", "0")
    assert not forge.log  # no baseline to look for on a push, no comment
    skipped = {s.name for s in run.steps if not s.ran and s.uses is None}
    assert "Post or update the sticky comment" in skipped and "Publish the site" in skipped
    assert "within budget: main: input 0.4% ≤ 20%" in run.step("check").stdout
    assert "regression" not in run.step("check").stdout  # turned off: nothing to compare with
    files = uploads(run)
    assert "reportgen-comment" not in files and (files["reportgen-capture"] / "vm.xplane.pb").is_file()
    summary = Path(github_env["GITHUB_STEP_SUMMARY"]).read_text(encoding="utf-8")
    assert summary.startswith("## Profile summary") and "All 2 checks within budget" in summary
    # The compiled kernels' folder is kept between jobs, restored before the build: the folder this job's
    # build compiles into, under a key of what its machine code holds for (reportgen, numba, the CPU).
    from reportgen import kernels

    names = [s.name for s in run.steps]
    kept = next(s for s in run.steps if (s.uses or "").startswith("actions/cache@"))
    assert names.index(kept.name) < names.index("Build the site")
    assert kept.with_ == {"path": str(kernels.CACHE_DIR), "key": kernels.cache_key()}
    assert list(kernels.CACHE_DIR.rglob("*.nbi")), "the build compiled its kernels into that folder"


def test_the_kernel_cache_key_names_what_the_machine_code_holds_for():
    import llvmlite.binding as ll
    import numba

    from reportgen import __version__, kernels

    key = kernels.cache_key()
    assert key.startswith(f"reportgen-kernels-{__version__}-") and f"-numba-{numba.__version__}-" in key
    assert ll.get_host_cpu_name() in key and re.fullmatch(r"[A-Za-z0-9._-]+", key), key  # a file name too
    assert kernels.cache_key() == key


@needs_tools
def test_the_gitlab_job_keeps_the_current_kernels_only(tmp_path, tools_dir, certificate):
    """The job's cache holds one folder per kernel key: the current one is the build's NUMBA_CACHE_DIR, and the
    folders of other keys (another reportgen, numba or CPU) are removed, so the cache does not grow."""
    from reportgen import kernels

    config = load_yaml(GITLAB_CI)
    job = gitlab_job(config, "reportgen")
    assert job["cache"]["paths"] == [".reportgen-kernels/"] and job["cache"]["when"] == "always"
    workspace = tmp_path / "project"
    kept = workspace / ".reportgen-kernels"
    (kept / "reportgen-kernels-0.0.1-old").mkdir(parents=True)
    env = job_env(tmp_path, tools_dir, certificate)
    variables = gitlab_variables(config, job)
    assert variables["REPORTGEN_KERNELS"] == "$CI_PROJECT_DIR/.reportgen-kernels"
    env.update(variables, REPORTGEN_KERNELS=str(kept), CI_PROJECT_DIR=str(workspace))
    setup = [entry for entry in job["before_script"] if "NUMBA_CACHE_DIR" in entry]
    done = run_gitlab_script([*setup, 'printf "%s\\n" "$NUMBA_CACHE_DIR"'], env, workspace)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(kept / kernels.cache_key())
    assert sorted(p.name for p in kept.iterdir()) == []  # the old key's folder is gone; the build makes its own


@needs_tools
def test_fork_pull_request_is_commented_by_the_workflow_run(tmp_path, tools_dir, certificate):
    forge = Forge()
    forge.pulls[7] = {"head": {"sha": "c3" * 20}}
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    capture(workspace, "2026_05_04_10_00_00", FAST)
    env = job_env(tmp_path, tools_dir, certificate)
    with ForgeServer(forge, *certificate) as server:
        # The fork's run: read-only token, no comment; the body goes to the comment artifact.
        context, github_env = github_contexts(server, workspace, tmp_path / "runner", event="pull_request", pr=7,
                                              head_repo="someone/model-fork", sha="c3" * 20)
        inputs = workflow_report_inputs(context)
        run = run_composite(ACTION, {**inputs, "budget": ""}, context, {**env, **github_env}, tmp_path / "runner")
        assert not run.failed
        assert "::notice title=reportgen::pull request from someone/model-fork" in run.stdout
        assert not forge.requests("POST", "/comments") and not forge.requests("PATCH", "/comments")
        artifact = uploads(run)["reportgen-comment"]

        # The workflow_run in the base repository: download that artifact (simulated: a copy), comment.
        workflow = load_yaml(COMMENT_WORKFLOW)
        assert workflow_on(workflow) == {"workflow_run": {"workflows": ["profile"], "types": ["completed"]}}
        job = workflow["jobs"]["comment"]
        event = {"workflow_run": {"id": 9001, "event": "pull_request", "head_sha": "c3" * 20,
                                  "head_repository": {"full_name": "someone/model-fork"}}}
        wr_context = {"github": {**context["github"], "event_name": "workflow_run", "event": event}}
        assert condition(job["if"], wr_context, "success")
        download, comment_step = job["steps"]
        assert download["uses"] == "actions/download-artifact@v8"
        got = {k: interpolate(v, wr_context) for k, v in download["with"].items()}
        assert got == {"name": "reportgen-comment", "path": "comment", "run-id": "9001", "github-token": GITHUB_TOKEN}
        shutil.copytree(artifact, workspace / "comment")
        assert comment_step["uses"] == COMMENT_USES
        wr_inputs = {k: interpolate(v, wr_context) for k, v in comment_step["with"].items()}
        posted = run_composite(COMMENT_ACTION, wr_inputs, wr_context, {**env, **github_env}, tmp_path / "wr")
        assert not posted.failed, posted.steps[0].stderr
        assert len(marker_comments(forge, 7)) == 1

        # A push to the fork after that run: the pull request's head moved on; no comment from the old run.
        forge.pulls[7] = {"head": {"sha": "d4" * 20}}
        forge.comments.clear()
        stale = run_composite(COMMENT_ACTION, wr_inputs, wr_context, {**env, **github_env}, tmp_path / "wr2")
    assert not stale.failed and not forge.comments
    assert "is at " + "d4" * 20 in stale.stdout


@needs_tools
def test_sticky_comment_refuses_a_body_without_marker(tmp_path, tools_dir, certificate):
    forge = Forge()
    body = tmp_path / "comment.md"
    body.write_text("## Profile summary\n")
    env = job_env(tmp_path, tools_dir, certificate)
    with ForgeServer(forge, *certificate) as server:
        env.update(GITHUB_REPOSITORY=forge.repo, GITHUB_SERVER_URL=server.base_url, GH_TOKEN=GITHUB_TOKEN)
        done = subprocess.run(["bash", str(ACTION / "sticky-comment.sh"), str(body), "3"], env=env,
                              capture_output=True, text=True)
    assert done.returncode == 1 and "does not open with a sticky-comment marker" in done.stderr
    assert not forge.log


@needs_tools
@pytest.mark.parametrize("token_login", [None, "octo-ci"], ids=["workflow-token", "personal-token"])
def test_sticky_comment_edits_only_a_comment_of_the_tokens_identity(tmp_path, tools_dir, certificate, token_login):
    """Anyone can comment a body that opens with the marker, before the workflow's first comment: the
    recipe must neither edit that one nor take it for its own."""
    forge = Forge(token_login=token_login)
    planted = forge.add_comment(3, f"{MARKER}\n[Profile summary](https://evil.example/)", login="mallory")
    forge.add_comment(3, f"{MARKER}\nquoted by a reviewer", login="octo-reviewer")
    body = tmp_path / "comment.md"
    env = job_env(tmp_path, tools_dir, certificate)
    with ForgeServer(forge, *certificate) as server:
        env.update(GITHUB_REPOSITORY=forge.repo, GITHUB_SERVER_URL=server.base_url, GH_TOKEN=GITHUB_TOKEN)
        for push in ("first", "second"):
            body.write_text(f"{MARKER}\n## Profile summary ({push} push)\n")
            done = subprocess.run(["bash", str(ACTION / "sticky-comment.sh"), str(body), "3"], env=env,
                                  capture_output=True, text=True)
            assert done.returncode == 0, done.stderr
    assert planted["body"] == f"{MARKER}\n[Profile summary](https://evil.example/)"
    ours = [c for c in forge.comments[3] if c["user"]["login"] == (token_login or "github-actions[bot]")]
    assert len(ours) == 1 and ours[0]["body"] == f"{MARKER}\n## Profile summary (second push)\n"
    assert len(forge.comments[3]) == 3
    assert len(forge.requests("POST", r"/issues/3/comments$")) == 1
    patched = [r.path.rsplit("/", 1)[1] for r in forge.requests("PATCH", "/comments/")]
    assert patched == [str(ours[0]["id"])]


def test_prepare_takes_a_capture_folder_whose_name_holds_a_newline(tmp_path, tools_dir, certificate):
    """Run folders are the profiler's or the user's names: a newline in one must neither break the copy
    nor start a line of the step's output (which the runner would read as a workflow command)."""
    logs = tmp_path / "logs" / "plugins" / "profile"
    for run, source in (("2026_01_01\n::error::planted", INPUT_BOUND), ("2026_02_02\n::warning::x", FAST)):
        (logs / run).mkdir(parents=True)
        shutil.copy(source, logs / run / "vm.xplane.pb")
    env = job_env(tmp_path, tools_dir, certificate)
    env.update(LOGDIR=str(tmp_path / "logs"), NAME="reportgen", RUNNER_TEMP=str(tmp_path / "runner"),
               GITHUB_OUTPUT=str(tmp_path / "output"), PR_NUMBER="4", GITHUB_ACTION_PATH=str(ACTION))
    (tmp_path / "runner").mkdir()
    done = subprocess.run(["bash", str(ACTION / "prepare.sh")], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    copied = tmp_path / "runner" / "reportgen-reportgen" / "logdir" / "plugins" / "profile" / "pr-4" / "vm.xplane.pb"
    assert copied.read_bytes() == FAST.read_bytes()  # the newest run by name
    assert not [line for line in done.stdout.splitlines() if line.startswith("::")], done.stdout


# -- GitLab


@needs_tools
def test_merge_request_gets_one_sticky_note_and_fails_over_budget(tmp_path, tools_dir, certificate):
    config = load_yaml(GITLAB_CI)
    job = gitlab_job(config, "reportgen")
    assert job["needs"] == ["profile"] and job["rules"] == [{"if": '$CI_PIPELINE_SOURCE == "merge_request_event"'}]
    assert gitlab_job(config, "reportgen:default-branch")["allow_failure"] == {"exit_codes": [3]}
    assert job["artifacts"]["reports"] == {"junit": "reportgen/junit.xml", "codequality": "reportgen/codequality.json"}

    forge = Forge()
    forge.job_artifacts[("main", "profile")] = zip_of({"logs/plugins/profile/2026_04_30_20_00_00/vm.xplane.pb": FAST})
    for i in range(120):
        forge.add_note(5, f"note {i}")
    forge.add_note(5, f"{MARKER}\nchanged the description", system=True)  # a system note quoting it: not ours
    planted = forge.add_note(5, f"{MARKER}\n[summary](https://evil.example/)")  # another user's: not ours
    workspace = tmp_path / "project"
    workspace.mkdir()
    shutil.copy(BUDGET, workspace / "profile-budget.toml")
    capture(workspace, "2026_05_05_11_00_00", INPUT_BOUND)
    env = job_env(tmp_path, tools_dir, certificate)
    with ForgeServer(forge, *certificate) as server:
        env.update(gitlab_variables(config, job))
        env.update({
            "CI": "true", "GITLAB_CI": "true", "CI_API_V4_URL": f"{server.base_url}/api/v4", "CI_PROJECT_ID": "7",
            "CI_PROJECT_DIR": str(workspace), "CI_JOB_TOKEN": GITLAB_JOB_TOKEN, "CI_PIPELINE_SOURCE":
            "merge_request_event", "CI_MERGE_REQUEST_IID": "5", "CI_MERGE_REQUEST_TARGET_BRANCH_NAME": "main",
            "CI_COMMIT_REF_SLUG": "feature-x", "CI_JOB_URL": "https://gitlab.example/octo/model/-/jobs/77",
            "CI_PIPELINE_URL": "https://gitlab.example/octo/model/-/pipelines/66",
            "REPORTGEN_GITLAB_TOKEN": GITLAB_TOKEN,
        })
        done = run_gitlab_script(job["script"], env, workspace)
        assert done.returncode == 3, done.stderr[-3000:]
        ours = [n for n in forge.notes[5] if n["author"]["id"] == forge.gitlab_user_id]
        assert len(ours) == 1 and ours[0]["body"].startswith(MARKER) and len(forge.notes[5]) == 123
        body = ours[0]["body"]
        assert body == (workspace / "reportgen/site/summary/summary.md").read_text(encoding="utf-8")
        assert "<code>main</code> → <code>mr\\-5</code>" in body and "❌ **2 of 3 checks over budget**" in body
        assert "[Site](https://gitlab.example/octo/model/-/jobs/77/artifacts/file/reportgen/site/index.html)" in body
        # The reports GitLab reads, and what the artifacts keep.
        junit = ElementTree.parse(workspace / "reportgen/junit.xml").getroot()
        assert (junit.get("tests"), junit.get("failures")) == ("3", "2")
        quality = json.loads((workspace / "reportgen/codequality.json").read_text())
        assert [(q["check_name"], q["location"]) for q in quality] == [
            ("reportgen/budget/max_input_percent", {"path": "profile-budget.toml", "lines": {"begin": 6}}),
            ("reportgen/budget/max_regression", {"path": "profile-budget.toml", "lines": {"begin": 7}}),
            ("reportgen/finding/input.tf_data_bottleneck", {"path": ".", "lines": {"begin": 1}})]
        assert (workspace / "reportgen/site/index.html").is_file()

        # The next pipeline's note entry finds that note (past the first page of 100) and edits it.
        done = run_gitlab_script([job["script"][2]], env, workspace)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "updated the merge request's note" in done.stdout
    assert len(forge.requests("POST", "/notes$")) == 1 and len(forge.requests("PUT", rf"/notes/{ours[0]['id']}$")) == 1
    assert len(forge.notes[5]) == 123 and planted["body"] == f"{MARKER}\n[summary](https://evil.example/)"
    # The baseline came with the job token, the notes with the project access token.
    assert all(r.headers.get("JOB-TOKEN") == GITLAB_JOB_TOKEN for r in forge.requests("GET", "/jobs/artifacts/"))
