"""Shared fixtures: the real captures and XProf's outputs in ../shared/captures."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

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
