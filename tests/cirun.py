"""Running the CI recipes' own scripts here, as GitHub Actions and GitLab CI run them.

- `evaluate` / `interpolate`: GitHub's expression language, as far as the
  recipes use it (contexts, literals, ==, !=, !, &&, ||, parentheses,
  always/success/failure), with its loose comparisons (strings equal
  regardless of case; null, '' and 0 alike).
- `run_composite`: the steps of a composite action in order: each `run:`
  script by `bash --noprofile --norc -eo pipefail FILE`, as a runner runs
  `shell: bash`, with the step's `env:` evaluated, GITHUB_OUTPUT,
  GITHUB_STEP_SUMMARY and GITHUB_ACTION_PATH set, and `if:` honoured; a
  `uses:` step (another action: upload-artifact…) is recorded with its
  evaluated inputs and not run.
- `gitlab_job`: a job of a .gitlab-ci.yml with its `extends:` merged, and
  `run_gitlab_script`: its `script:` entries in one bash, as the runner does
  (`set -eo pipefail`).
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import yaml

# -- expressions


class ExpressionError(Exception):
    pass


_TOKEN = re.compile(r"\s*(?:(?P<str>'(?:[^']|'')*')|(?P<num>\d+(?:\.\d+)?)|(?P<op>==|!=|&&|\|\||[!()])"
                    r"|(?P<name>[A-Za-z_][A-Za-z0-9_-]*(?:\.[A-Za-z_*][A-Za-z0-9_-]*)*))")


def _tokens(text: str) -> list[tuple[str, str]]:
    out, pos = [], 0
    text = text.strip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise ExpressionError(f"cannot read {text[pos:]!r} in {text!r}")
        kind = m.lastgroup
        out.append((kind, m.group(kind)))
        pos = m.end()
    return out


def _number(value: object) -> float:
    if value is None:
        return 0.0
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, (int, float)):
        return float(value)
    try:
        return float(value) if str(value).strip() else 0.0
    except ValueError:
        return float("nan")


def _equal(a: object, b: object) -> bool:
    if isinstance(a, str) and isinstance(b, str):
        return a.lower() == b.lower()
    if type(a) is type(b) and not isinstance(a, (int, float)):
        return a == b
    return _number(a) == _number(b)


def truthy(value: object) -> bool:
    return value not in (None, False, 0, 0.0, "")


def as_string(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


class _Parser:
    def __init__(self, text: str, context: dict, status: str) -> None:
        self.tokens = _tokens(text)
        self.pos = 0
        self.context = context
        self.status = status  # "success" or "failure": how the steps before went
        self.text = text

    def peek(self) -> tuple[str, str] | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self, value: str | None = None) -> tuple[str, str]:
        token = self.peek()
        if token is None or (value is not None and token[1] != value):
            raise ExpressionError(f"expected {value or 'more'} in {self.text!r}")
        self.pos += 1
        return token

    def parse(self) -> object:
        value = self.or_()
        if self.peek() is not None:
            raise ExpressionError(f"unexpected {self.peek()[1]!r} in {self.text!r}")
        return value

    def or_(self) -> object:
        value = self.and_()
        while self.peek() == ("op", "||"):
            self.take()
            right = self.and_()
            value = value if truthy(value) else right
        return value

    def and_(self) -> object:
        value = self.not_()
        while self.peek() == ("op", "&&"):
            self.take()
            right = self.not_()
            value = right if truthy(value) else value
        return value

    def not_(self) -> object:
        if self.peek() == ("op", "!"):
            self.take()
            return not truthy(self.not_())
        return self.compare()

    def compare(self) -> object:
        left = self.primary()
        if self.peek() in (("op", "=="), ("op", "!=")):
            op = self.take()[1]
            right = self.primary()
            return _equal(left, right) if op == "==" else not _equal(left, right)
        return left

    def primary(self) -> object:
        kind, value = self.take()
        if value == "(":
            inner = self.or_()
            self.take(")")
            return inner
        if kind == "str":
            return value[1:-1].replace("''", "'")
        if kind == "num":
            return float(value)
        if kind != "name":
            raise ExpressionError(f"unexpected {value!r} in {self.text!r}")
        if value in ("true", "false"):
            return value == "true"
        if value == "null":
            return None
        if self.peek() == ("op", "("):
            self.take()
            self.take(")")
            functions = {"always": True, "success": self.status == "success", "failure": self.status == "failure",
                         "cancelled": False}
            if value not in functions:
                raise ExpressionError(f"function {value}() is not supported here")
            return functions[value]
        node: object = self.context
        for part in value.split("."):
            node = node.get(part) if isinstance(node, dict) else None
        return node


def evaluate(text: str, context: dict, status: str = "success") -> object:
    return _Parser(text, context, status).parse()


def interpolate(text: object, context: dict) -> str:
    """A value with ${{ … }} parts replaced by what they evaluate to."""
    if not isinstance(text, str):
        return as_string(text)
    return re.sub(r"\$\{\{(.*?)\}\}", lambda m: as_string(evaluate(m.group(1), context)), text)


def condition(text: object, context: dict, status: str) -> bool:
    """A step's `if:`: an expression (${{ }} optional), success() when absent."""
    if text is None:
        return status == "success"
    if isinstance(text, bool):
        return text and status == "success"
    source = str(text).strip()
    if source.startswith("${{") and source.endswith("}}"):
        source = source[3:-2]
    uses_status = re.search(r"\b(always|success|failure|cancelled)\(\)", source) is not None
    result = truthy(evaluate(source, context, status))
    return result if uses_status else (status == "success" and result)


# -- GitHub composite actions


def load_yaml(path: Path) -> dict:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def workflow_on(workflow: dict) -> object:
    """The `on:` key (YAML 1.1 reads a bare `on` as true)."""
    return workflow.get("on", workflow.get(True))


@dataclass
class StepRun:
    id: str | None
    name: str
    ran: bool
    uses: str | None = None
    with_: dict[str, str] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    returncode: int | None = None
    stdout: str = ""
    stderr: str = ""
    outputs: dict[str, str] = field(default_factory=dict)


@dataclass
class ActionRun:
    steps: list[StepRun]
    outputs: dict[str, str]
    failed: bool

    @property
    def returncode(self) -> int:
        codes = [s.returncode for s in self.steps if s.ran and s.returncode]
        return codes[0] if codes else 0

    def step(self, name_or_id: str) -> StepRun:
        return next(s for s in self.steps if name_or_id in (s.id, s.name))

    @property
    def stdout(self) -> str:
        return "".join(s.stdout for s in self.steps)


def read_outputs(path: Path) -> dict[str, str]:
    """A GITHUB_OUTPUT file: `name=value` lines and `name<<DELIMITER` blocks."""
    outputs: dict[str, str] = {}
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    i = 0
    while i < len(lines):
        line = lines[i]
        if "<<" in line and ("=" not in line or line.index("<<") < line.index("=")):
            name, delimiter = line.split("<<", 1)
            end = lines.index(delimiter, i + 1)
            outputs[name] = "\n".join(lines[i + 1:end])
            i = end + 1
            continue
        name, _, value = line.partition("=")
        outputs[name] = value
        i += 1
    return outputs


def run_composite(action_dir: Path, inputs: dict[str, str], context: dict, env: dict[str, str],
                  workdir: Path) -> ActionRun:
    """Run the composite action in `action_dir` with `inputs` (the caller's `with:`,
    evaluated), in a job whose contexts are `context` and environment `env`."""
    action = load_yaml(action_dir / "action.yml")
    assert action["runs"]["using"] == "composite"
    workdir.mkdir(parents=True, exist_ok=True)
    declared = action.get("inputs") or {}
    unknown = set(inputs) - set(declared)
    assert not unknown, f"inputs the action does not declare: {sorted(unknown)}"
    for name, spec in declared.items():
        if spec.get("required") and not inputs.get(name):
            raise AssertionError(f"required input {name} not given")
    ctx = dict(context)
    ctx["inputs"] = {name: inputs[name] if name in inputs else interpolate(spec.get("default", ""), ctx)
                     for name, spec in declared.items()}
    ctx["steps"] = {}
    status = "success"
    runs: list[StepRun] = []
    for number, step in enumerate(action["runs"]["steps"]):
        sid = step.get("id")
        name = step.get("name") or step.get("uses") or f"step {number}"
        if not condition(step.get("if"), ctx, status):
            runs.append(StepRun(sid, name, ran=False))
            if sid:
                ctx["steps"][sid] = {"outputs": {}, "outcome": "skipped", "conclusion": "skipped"}
            continue
        step_env = {key: interpolate(value, ctx) for key, value in (step.get("env") or {}).items()}
        if "uses" in step:
            with_ = {key: interpolate(value, ctx) for key, value in (step.get("with") or {}).items()}
            runs.append(StepRun(sid, name, ran=False, uses=step["uses"], with_=with_, env=step_env))
            continue
        assert step.get("shell") == "bash", f"{name}: the recipes' scripts are bash"
        script = workdir / f"step-{number}.sh"
        script.write_text(step["run"], encoding="utf-8")
        output_file = workdir / f"step-{number}.output"
        output_file.write_text("")
        full_env = {**env, **step_env, "GITHUB_OUTPUT": str(output_file), "GITHUB_ACTION_PATH": str(action_dir)}
        done = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)], env=full_env,
                              cwd=env.get("GITHUB_WORKSPACE"), capture_output=True, text=True, timeout=600)
        outputs = read_outputs(output_file)
        runs.append(StepRun(sid, name, ran=True, env=step_env, returncode=done.returncode, stdout=done.stdout,
                            stderr=done.stderr, outputs=outputs))
        outcome = "success" if done.returncode == 0 else "failure"
        if sid:
            ctx["steps"][sid] = {"outputs": outputs, "outcome": outcome, "conclusion": outcome}
        if done.returncode != 0:
            status = "failure"
    outputs = {name: interpolate(spec.get("value", ""), ctx) for name, spec in (action.get("outputs") or {}).items()}
    return ActionRun(runs, outputs, failed=status == "failure")


def run_scripts(action: dict) -> list[tuple[str, str]]:
    """(step name, script) of every `run:` step of a composite action or workflow."""
    steps = action.get("runs", {}).get("steps") or [s for job in (action.get("jobs") or {}).values()
                                                   for s in job.get("steps", [])]
    return [(s.get("name") or s.get("id") or "?", s["run"]) for s in steps if "run" in s]


# -- GitLab CI


def gitlab_job(config: dict, name: str) -> dict:
    """The job with its `extends:` templates merged in (the job's own keys win)."""
    job = dict(config[name])
    parents = job.pop("extends", [])
    for parent in [parents] if isinstance(parents, str) else parents:
        job = {**gitlab_job(config, parent), **job}
    return job


def gitlab_variables(config: dict, job: dict) -> dict[str, str]:
    variables = {}
    for source in (config.get("variables") or {}, job.get("variables") or {}):
        for key, value in source.items():
            variables[key] = str(value["value"] if isinstance(value, dict) else value)
    return variables


def run_gitlab_script(entries: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    """The script entries in one bash, as GitLab Runner runs them: variables and
    functions carry from one entry to the next, the first failing command ends it."""
    script = cwd / ".gitlab-job.sh"
    script.write_text("\n".join(entries) + "\n", encoding="utf-8")
    try:
        return subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)], env=env, cwd=cwd,
                              capture_output=True, text=True, timeout=600)
    finally:
        script.unlink()


def base_env(home: Path, path_dirs: list[Path]) -> dict[str, str]:
    """A clean environment for a job: a PATH (the given folders first), a HOME of
    its own (but this user's cache), and none of this machine's CI variables."""
    keep = ("LANG", "LC_ALL", "TMPDIR", "PYTHONPATH", "NUMBA_CACHE_DIR")
    env = {k: v for k, v in os.environ.items() if k in keep}
    env["PATH"] = os.pathsep.join([*map(str, path_dirs), "/usr/local/bin", "/usr/bin", "/bin"])
    env["HOME"] = str(home)
    # reportgen's compiled kernels stay where this user keeps them (a runner's cache, as it were):
    # a new HOME would compile them again in every job.
    env["XDG_CACHE_HOME"] = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return env
