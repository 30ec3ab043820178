"""Shared fixtures: the real captures and XProf's outputs in ../shared/captures."""

from __future__ import annotations

import os
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
