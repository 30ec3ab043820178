"""Structure-aware fuzzing in the suite: a fixed set of mutated captures (tests/fuzzing.py, seed 23) through
the host stage, and every 25th through a whole build. None may fail as an internal error, print a traceback
or a warning, or crash the process; each either builds or is an input error naming the file.
`bench/fuzz.py` runs the same cases by the ten thousand."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings

import numpy as np

from reportgen.loaders.logdir import HostFile
from reportgen.pipeline.host_stage import HostTask, process_host
from tests.conftest import REPO
from tests.xspace import host_space

CASES = 200
SEED = 23
BUILD_EVERY = 25


def test_mutated_captures_build_or_fail_as_input_errors():
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-m", "tests.fuzzing", "worker", str(SEED), "0", str(CASES),
                           str(BUILD_EVERY)], capture_output=True, text=True, cwd=REPO, env=env, timeout=600)
    records = [json.loads(line) for line in proc.stdout.splitlines()]
    results = [r for r in records if "case" in r]
    started = [r["start"] for r in records if "start" in r]
    assert proc.returncode == 0 and len(results) == CASES, (
        f"the process ended with status {proc.returncode} during case {started[-1] if started else None}:\n"
        f"{proc.stderr[-3000:]}")
    bad = [r for r in results if r["outcome"] not in ("built", "input error")]
    assert bad == [], bad[:3]
    for r in results:
        if r["outcome"] == "input error":
            assert "fuzz.xplane.pb" in r["message"], r
    assert "Traceback" not in proc.stderr and "Warning" not in proc.stderr, proc.stderr[-3000:]
    assert sum(r["outcome"] == "built" for r in results) > CASES // 2  # the mutations leave most captures usable


def test_a_host_far_from_its_captures_start_builds_its_busy_heatmaps_without_a_warning(tmp_path):
    # Found by bench/fuzz.py (10,000 cases): at 2^60 ps one float step is 256 ps, so the heatmaps' 200 time
    # slices of a 1 ns span collapsed onto each other and their width was 0 (a division warning, then NaN).
    space = host_space("far")
    line = space.host_plane().line(1, "python")
    for n in range(3):
        line.event("train", 2**60 + n * 300, 200, step_num=n, _r=1)
    path = tmp_path / "far.xplane.pb"
    path.write_bytes(space.serialize())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        task = HostTask(index=0, run="r", host=HostFile(host="far", path=str(path), size=path.stat().st_size))
        outcome = process_host(task, str(tmp_path / "out"))
    assert outcome.error is None, outcome.error
    activity = outcome.parts["trace"].export.activity
    assert len(activity["busy_percent"]) and np.isfinite(activity["busy_percent"]).all()
    assert np.isfinite(outcome.parts["inventory"].activity["busy_percent"]).all()
