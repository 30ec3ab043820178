"""What a build says while it works: the progress bar names the work in progress, not the last step done, and
its clock counts the whole command."""

from __future__ import annotations

import re

from reportgen.loaders.logdir import HostFile
from reportgen.pipeline import runners
from reportgen.pipeline.host_stage import HostTask
from reportgen.pipeline.progress import BuildProgress, command_seconds
from tests.logdirs import FAST


def _elapsed_s(line: str) -> int:
    minutes, seconds = re.search(r"\| (\d+):(\d\d)", line).groups()
    return int(minutes) * 60 + int(seconds)


def test_the_bar_names_the_work_in_progress_and_counts_from_the_process_start(capsys):
    progress = BuildProgress(bar=True)
    try:
        age = int(command_seconds())  # this process's age: it only grows
        progress.stage("hosts", 3, "host")
        progress.begin("tpu_run/t1v-host-0")
        progress.begin("gpu_run/worker-1")
        progress.step("gpu_run/worker-1")  # the later host ends first: the bar goes on naming the one under way
        line = progress.line()
        assert "tpu_run/t1v-host-0" in line and "worker-1" not in line, line
        assert progress.in_progress() == ["tpu_run/t1v-host-0"]
        progress.stage("pages", 2, "run")  # a new stage keeps the command's clock
        assert _elapsed_s(progress.line()) >= age
        for run in ("a", "b", "c"):
            progress.begin(run)
        assert progress.line().rstrip().endswith("a, b +1 more"), progress.line()
    finally:
        progress.close()
    capsys.readouterr()


def test_each_runner_says_which_host_it_starts_before_it_is_done(tmp_path):
    events: list[tuple[str, str]] = []
    host = HostFile(host="vm", path=str(FAST), size=FAST.stat().st_size)
    work = [(HostTask(index=i, run=f"run{i}", host=host), tmp_path / f"{i}", False) for i in range(2)]
    runners.run_serial(work, lambda task, _outcome: events.append(("done", task.run)),
                       lambda task: events.append(("started", task.run)))
    assert events == [("started", "run0"), ("done", "run0"), ("started", "run1"), ("done", "run1")]


def test_the_clock_starts_with_the_command_not_with_the_shell_that_execs_it():
    # `bash -c "pip install . && reportgen build"` runs reportgen in the shell's own process (bash execs the last
    # command): that process's start is the shell's, and pip's time is no part of the build's.
    import subprocess
    import sys

    code = "from reportgen.pipeline.progress import command_seconds; print(command_seconds())"
    proc = subprocess.run(["bash", "-c", f"sleep 5; exec {sys.executable} -c '{code}'"], capture_output=True,
                          text=True, check=True)
    assert float(proc.stdout) < 5.0  # with the shell's clock it would be 5 s or more
