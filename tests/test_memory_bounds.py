"""Captures that would need more memory than a host may use are refused, named with the estimate and the
budget, while the good runs beside them build; no input can take the build (or the machine) down.

The builds run in a subprocess whose address space is capped (RLIMIT_AS): were a bound to regress, the
build would fail this test with a MemoryError instead of exhausting the shared machine.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from reportgen.errors import CaptureError
from reportgen.loaders import limits
from reportgen.loaders.xspace import decode_xspace
from tests.conftest import REPO
from tests.hostile import absurd_length, empty_events, gzip_bomb, run_capped
from tests.wirebytes import key, ld, varint

GOOD = REPO / "reportgen/sample/plugins/profile/tf_keras_fast/vm.xplane.pb"
ADDRESS_SPACE = 3 << 30  # the capped build: numba and numpy need about 1.5 GiB of it
BOMB_EVENTS = 1 << 29  # 1 GiB of empty events inflated, ≈ 1 MB of gzip
MANY_EVENTS = 30_000_000  # 60 MB on disk


@pytest.fixture(scope="module")
def user_cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("user-cache")


@pytest.fixture(scope="module")
def warm_kernels(tmp_path_factory, user_cache) -> Path:
    """The kernel cache filled by a build of the bundled sample: a machine's first build compiles the kernels in
    child processes (LLVM, well over 100 MiB each), which the peak RSS of that build counts but no capture costs."""

    out = tmp_path_factory.mktemp("warm")
    proc = _clean_build(["-o", str(out / "site"), "--no-cache", "-q"], out, user_cache)
    assert proc.returncode == 0, proc.stderr
    return user_cache


def _clean_build(args: list[str], cwd: Path, cache: Path) -> subprocess.CompletedProcess:
    """`reportgen build ARGS` in an environment of its own: what earlier tests of this worker left in the
    environment (numba, allocator or cache settings) would change the memory it is measured by."""
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(cwd), "XDG_CACHE_HOME": str(cache), "PYTHONPATH": str(REPO),
           "LANG": "C.UTF-8"}
    return subprocess.run([sys.executable, "-m", "reportgen", "build", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def hostile_build(tmp_path_factory, user_cache):
    root = tmp_path_factory.mktemp("hostile")
    profile = root / "logdir" / "plugins" / "profile"
    inputs = {
        "bomb": lambda run: gzip_bomb(run / "bomb.xplane.pb.gz", BOMB_EVENTS),
        "many_events": lambda run: (run / "many.xplane.pb").write_bytes(empty_events(MANY_EVENTS)),
        "absurd_length": lambda run: (run / "absurd.xplane.pb").write_bytes(absurd_length()),
        "zeros": lambda run: (run / "zeros.xplane.pb").write_bytes(bytes(10_000_000)),
    }
    for name, make in inputs.items():
        run = profile / name
        run.mkdir(parents=True)
        make(run)
        (run / "good.xplane.pb").write_bytes(GOOD.read_bytes())
    (profile / "zz_good").mkdir()
    (profile / "zz_good" / "vm.xplane.pb").write_bytes(GOOD.read_bytes())
    proc = run_capped(["build", str(root / "logdir"), "-o", str(root / "site"), "--jobs", "2"], ADDRESS_SPACE,
                      cwd=root, user_cache=user_cache)
    return proc, root / "site"


def test_the_good_runs_build_beside_hostile_captures(hostile_build):
    proc, site = hostile_build
    assert proc.returncode == 2, proc.stderr
    summary = json.loads((site / "summary.json").read_text())
    for run in ("bomb", "many_events", "absurd_length", "zeros"):
        assert summary["runs"][run]["hosts"] == ["good"]
    assert summary["runs"]["zz_good"]["hosts"] == ["vm"] and summary["runs"]["zz_good"]["errors"] == []
    assert "MemoryError" not in proc.stderr and "internal error" not in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize("run, problem", [
    ("bomb", r"bomb\.xplane\.pb\.gz: needs (at least|about) [\d.]+ [GM]iB of memory .*more than the [\d.]+ [GM]iB one "
             r"host may use; refused \(raise the limit with --max-memory\)"),
    ("many_events", r"many\.xplane\.pb: needs about [\d.]+ GiB of memory \(30,000,000 events, 1 line, 1 plane\), more "
                    r"than the [\d.]+ [GM]iB one host may use"),
    ("absurd_length", r"absurd\.xplane\.pb: a length-delimited field runs past its enclosing message"),
    ("zeros", r"zeros\.xplane\.pb: a field numbered 0, which protobuf forbids .*at byte 0\)"),
])
def test_each_hostile_capture_is_named_with_its_problem(hostile_build, run, problem):
    proc, site = hostile_build
    errors = json.loads((site / "summary.json").read_text())["runs"][run]["errors"]
    assert len(errors) == 1 and re.search(problem, errors[0]["message"]), errors
    assert re.search(problem, proc.stderr), proc.stderr


def test_a_bomb_is_inflated_in_bounded_steps(tmp_path):
    """Inflating stops once past the budget: the 1 GiB the file holds is never held."""
    path = gzip_bomb(tmp_path / "bomb.xplane.pb.gz", BOMB_EVENTS)
    with limits.memory_budget(64 << 20), pytest.raises(CaptureError, match=r"inflates to more than 32\.\d MiB"):
        decode_xspace(str(path), path.read_bytes())


def test_the_estimate_is_checked_before_the_columns_exist():
    data = empty_events(1_000_000)  # 2 MB: columns and analyses of ≈ 250 MB, beside the process's own
    with limits.memory_budget(400 << 20), pytest.raises(CaptureError, match=r"1,000,000 events"):
        decode_xspace("many.xplane.pb", data)
    assert decode_xspace("many.xplane.pb", data).event_count == 1_000_000  # unlimited: it decodes


def test_max_memory_is_a_size(tmp_path):
    from tests.clirun import reportgen

    proc = reportgen("build", str(GOOD), "-o", str(tmp_path / "site"), "--max-memory", "lots")
    assert proc.returncode == 1 and "--max-memory: 'lots' is not a size" in proc.stderr
    proc = reportgen("build", str(GOOD), "-o", str(tmp_path / "site"), "--max-memory", "1M", "-q")
    assert proc.returncode == 1 and re.search(r"vm\.xplane\.pb: needs about .* more than the 1\.0 MiB", proc.stderr)


def _wide(kind: str, n: int) -> bytes:
    """An XSpace wide in one dimension: `n` event metadata entries, lines or planes, one event each at most."""
    def event(md: int = 1) -> bytes:
        return ld(4, key(1, 0) + varint(md) + key(3, 0) + varint(1000))

    def metadata(i: int) -> bytes:
        return ld(4, key(1, 0) + varint(i) + ld(2, key(1, 0) + varint(i) + ld(2, b"op%d" % i)))

    def line(i: int) -> bytes:
        return ld(3, key(1, 0) + varint(i) + ld(2, b"l") + event())

    def plane(i: int, body: bytes) -> bytes:
        return ld(1, key(1, 0) + varint(i) + ld(2, b"/host:CPU") + body)

    if kind == "metadata":
        planes = [plane(0, line(0) + b"".join(metadata(i + 1) for i in range(n)))]
    elif kind == "lines":
        planes = [plane(0, b"".join(line(i) for i in range(n)) + metadata(1))]
    else:
        planes = [plane(i, line(0) + metadata(1)) for i in range(n)]
    return b"".join(planes) + ld(4, b"wide")


# Builds of these captures measured (peak RSS of `reportgen build --jobs 1`): 1,000,000 metadata entries
# 1.5 GiB, 100,000 lines 1.7 GiB, 100,000 planes 2.5 GiB; each was accepted under the budgets below while the
# estimate counted events above all.
@pytest.mark.parametrize("kind, n, budget, held", [
    ("metadata", 1_000_000, "1500M", "1,000,000 event metadata entries"),
    ("lines", 100_000, "512M", "100,000 lines"),
    ("planes", 100_000, "1500M", "100,000 planes"),
])
def test_wide_captures_are_refused_by_what_they_hold(kind, n, budget, held):
    from reportgen.pipeline.memory import parse_size

    data = _wide(kind, n)
    with limits.memory_budget(parse_size(budget)), pytest.raises(CaptureError, match=re.escape(held)):
        decode_xspace(f"{kind}.xplane.pb", data)


def test_a_chrome_trace_of_many_threads_is_refused_by_its_rows():
    """Each thread is a timeline row with busy bins of its own: 50,000 threads of one event each need about
    600 MB, whatever the file's few megabytes of JSON say."""
    from reportgen.legacy.chrome_trace import read_trace

    events = [{"ph": "X", "pid": 1, "tid": i, "ts": i, "dur": 1, "name": "op"} for i in range(50_000)]
    data = orjson.dumps({"traceEvents": events})
    with limits.memory_budget(256 << 20), pytest.raises(CaptureError, match=r"50,000 events on 50,000 timeline "
                                                                              r"rows \(threads\)"):
        read_trace("many.trace.json", data)
    with limits.memory_budget(1 << 30):  # within the budget: read
        assert len(read_trace("many.trace.json", data).events) == 50_000


def test_a_chrome_trace_thread_that_is_not_a_name_is_an_input_error():
    from reportgen.legacy.chrome_trace import read_trace

    data = orjson.dumps([{"ph": "X", "pid": [1], "tid": {"a": 1}, "ts": 0, "dur": 1, "name": "op"}])
    with pytest.raises(CaptureError, match="pid or tid is neither a number nor a string"):
        read_trace("odd.trace.json", data)


@pytest.mark.parametrize("kind, n", [("metadata", 200_000), ("lines", 20_000), ("planes", 20_000)])
def test_a_wide_capture_builds_within_its_estimate(tmp_path, warm_kernels, kind, n):
    """The whole build's peak memory (this process and its workers) stays within what the capture was estimated
    to need, under a budget of exactly that estimate."""
    from reportgen.loaders.xspace import estimate_memory

    run = tmp_path / "logdir" / "plugins" / "profile" / kind
    run.mkdir(parents=True)
    data = _wide(kind, n)
    (run / "wide.xplane.pb").write_bytes(data)
    estimate = estimate_memory("wide.xplane.pb", data)
    # Built twice, the second measured: a kernel this capture needs and the sample did not is compiled by the
    # first (in the building process: LLVM's memory, over 100 MiB, is no cost of the capture).
    for _ in range(2):
        proc = _clean_build([str(tmp_path / "logdir"), "-o", str(tmp_path / "site"), "--jobs", "1", "--no-cache",
                             "--timings", "--max-memory", str(estimate)], tmp_path, warm_kernels)
        assert proc.returncode == 0, proc.stderr
    peak = re.search(r"peak RSS ([\d,]+) MiB", proc.stdout + proc.stderr)
    assert peak, proc.stdout
    assert int(peak.group(1).replace(",", "")) << 20 <= estimate, (kind, peak.group(0), estimate >> 20)
