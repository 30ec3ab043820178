"""A host file that changes under the build (truncated, appended, replaced, deleted after it was found)
is an input error of that host, named; the other hosts and runs are built.

The change is made at a fixed point of the build: as the host's decode starts (where a memory-mapped
file used to be read page by page, and a truncation ended the process with SIGBUS) or just before its
read, from a wrapper around the build's own functions. The build runs in a child process so that a
crash is a failed assertion, not a lost test session.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.logdirs import make_logdir, small_capture

BUILD_WITH_CHANGES = r"""
import json, os, sys
from pathlib import Path
from reportgen.pipeline import host_stage
from reportgen.pipeline.build import BuildOptions, build_site

logdir, output, where = sys.argv[1:4]
spare = Path(logdir) / "spare.bin"

def change(path):
    host = Path(path).name.split(".")[0]
    size = os.path.getsize(path)
    if host == "zero":
        os.truncate(path, 0)
    elif host == "half":
        os.truncate(path, size // 2)
    elif host == "appended":
        with open(path, "ab") as handle:
            handle.write(b"\0" * 4096)
    elif host == "replaced":
        os.replace(spare, path)
    elif host == "deleted":
        os.unlink(path)

real_decode, real_read = host_stage.decode_xspace, host_stage.read_host_file

def decode(path, data, host=None):
    if where == "decode":
        change(path)
    return real_decode(path, data, host=host)

def read(path, *args, **kwargs):
    if where == "read":
        change(path)
    return real_read(path, *args, **kwargs)

host_stage.decode_xspace, host_stage.read_host_file = decode, read
report = build_site([logdir], BuildOptions(output=output, jobs=1, cache=False))
print(json.dumps({"exit": report.exit_code, "errors": [e["local_message"] for e in report.errors],
                  "hosts": report.hosts}))
"""

CHANGED = ("zero", "half", "appended", "replaced", "deleted")


@pytest.mark.parametrize("where", ["decode", "read"])
def test_a_file_changed_under_the_build_is_that_hosts_input_error(tmp_path: Path, where: str) -> None:
    hosts = {name: small_capture(i + 1) for i, name in enumerate(CHANGED)}
    logdir = make_logdir(tmp_path / "logdir", {"a": {**hosts, "good": small_capture(9)}, "b": {"vm": small_capture(8)}})
    (logdir / "spare.bin").write_bytes(small_capture(7))
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", BUILD_WITH_CHANGES, str(logdir), str(tmp_path / "site"), where],
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"the build process ended with {done.returncode}: {done.stderr[-2000:]}"
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["exit"] == 2 and report["hosts"] == 2  # good and vm
    profile = logdir / "plugins" / "profile" / "a"
    errors = sorted(report["errors"])
    assert len(errors) == len(CHANGED), errors
    for name, error in zip(sorted(CHANGED), errors):
        assert error.startswith(f"{profile / name}.xplane.pb: ")
        assert "changed" in error or "truncated" in error or "replaced" in error or "deleted" in error \
            or "No such file" in error, error
    assert (tmp_path / "site" / "b" / "index.html").is_file()
    assert (tmp_path / "site" / "a" / "index.html").is_file()
    assert not list(tmp_path.glob(".site.building-*"))
