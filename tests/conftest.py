"""Shared fixtures: the real captures and XProf's outputs in ../shared/captures."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path

import pytest

from tests.session_once import session_root

REPO = Path(__file__).resolve().parent.parent


def shared_dir() -> Path:
    return Path(os.environ.get("REPORTGEN_SHARED", REPO.parent / "shared"))


CAPTURES = shared_dir() / "captures"
LOGDIR = CAPTURES / "logdir"
ORACLE = CAPTURES / "oracle"
RUNS = sorted(p.name for p in (LOGDIR / "plugins" / "profile").iterdir()) if LOGDIR.exists() else []

needs_shared = pytest.mark.skipif(
    not LOGDIR.exists(), reason=f"shared captures not found at {CAPTURES} (set REPORTGEN_SHARED)"
)


# The suite runs on pytest-xdist's workers, one module per worker at a time (`-n auto --dist loadfile` in
# pyproject.toml; `pytest -n0` runs it in one process). xdist hands out the modules with the most tests first;
# these take longest (seconds, measured one after the other on a 2-core machine: browsers, killed builds,
# first compiles), so they go first instead, longest first, and the short ones fill in: no long module starts
# last while the other workers idle.
LONGEST_MODULES = (
    "test_ux_browser.py",  # 103
    "test_faults.py",  # 57
    "test_kernels.py",  # 32
    "test_timeline_page.py",  # 29
    "test_ci_recipes.py",  # 29
    "test_fuzz.py",  # 23
    "test_graph_viewer_page.py",  # 21
    "test_build_dask.py",  # 19
    "test_cli.py",  # 19
    "test_browser.py",  # 18
    "test_publish.py",  # 15
    "test_build_cache.py",  # 14
    "test_device_tools_pages.py",  # 14
    "test_memory_bounds.py",  # 13
    "test_bad_input.py",  # 13
)


def pytest_xdist_make_scheduler(config, log):
    if config.getoption("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class LongestFirst(LoadFileScheduling):
        def _assign_work_unit(self, node) -> None:
            if not getattr(self, "_ordered", False):
                rank = {name: i for i, name in enumerate(LONGEST_MODULES)}
                ordered = sorted(self.workqueue.items(),
                                 key=lambda item: rank.get(Path(item[0]).name, len(rank)))
                self.workqueue.clear()
                self.workqueue.update(ordered)
                self._ordered = True
            super()._assign_work_unit(node)

    return LongestFirst(config, log)


def pytest_configure(config):
    # An xdist controller names the test run itself, so that it knows the folder its workers share
    # (tests/session_once.py) and can remove it when the session ends.
    if (not hasattr(config, "workerinput") and getattr(config.option, "numprocesses", None)
            and getattr(config.option, "testrunuid", None) is None):
        config.option.testrunuid = uuid.uuid4().hex


def pytest_sessionstart(session):
    # On a machine (or checkout: numba keys its cache by source path) whose kernels are not compiled yet, the
    # first build of every worker, and of the build processes the tests start beside it, would each compile
    # them at once: ≈ 19 s of CPU each. The controller compiles them first, with one build of the sample.
    config = session.config
    if hasattr(config, "workerinput") or not getattr(config.option, "numprocesses", None):
        return
    from reportgen import kernels
    from tests.clirun import reportgen

    if kernels.CACHE_PROBLEM is not None or not kernels.cold_modules():
        return
    with tempfile.TemporaryDirectory(prefix="reportgen-warm-up-") as scratch:
        reportgen("build", "-o", str(Path(scratch) / "site"), "-q", "--jobs", "1", "--no-cache", cwd=Path(scratch),
                  timeout=600)


def pytest_sessionfinish(session):
    run_id = getattr(session.config.option, "testrunuid", None)
    if run_id and not hasattr(session.config, "workerinput"):
        shutil.rmtree(session_root(run_id), ignore_errors=True)


def host_files(run: str) -> list[Path]:
    return sorted((LOGDIR / "plugins" / "profile" / run).glob("*.xplane.pb"))


@pytest.fixture(scope="session")
def sample_logdir() -> Path:
    return REPO / "reportgen" / "sample"


GCS_BUCKET = "reports"  # the bucket the emulator starts with


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def gcs_emulator():
    """A real GCS emulator (gcp-storage-emulator, in memory) on a loopback port, holding the bucket
    `GCS_BUCKET`: its endpoint URL. Tests that use it are skipped when the emulator is not installed."""
    try:
        import gcp_storage_emulator  # noqa: F401
    except ImportError:
        pytest.skip("gcp-storage-emulator is not installed (pip install -e '.[test]')")
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "gcp_storage_emulator", "start", "--host", "127.0.0.1", "--port", str(port),
         "--in-memory", "--default-bucket", GCS_BUCKET],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    endpoint = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(f"{endpoint}/storage/v1/b", timeout=1).read()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    pytest.fail("the storage emulator did not start")
                time.sleep(0.1)
        yield endpoint
    finally:
        process.terminate()
        process.wait(timeout=10)
