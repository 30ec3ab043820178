"""Work done once per test session, also when the session runs in several worker processes.

The suite runs on pytest-xdist's workers (`-n auto` in pyproject.toml): a module-level cache would build the
shared sites once per worker, seconds of CPU each on a machine where the workers already share the cores. The
first worker to ask builds under a file lock in a folder of the session (named after xdist's test run id); the
others wait for it and read its result. Without xdist the folder is this process's own.
"""

from __future__ import annotations

import atexit
import fcntl
import os
import pickle
import shutil
import tempfile
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")

RUN_ID_VARIABLE = "PYTEST_XDIST_TESTRUNUID"  # set by xdist in every worker, the same for one session
_RESULT = ".result.pickle"
_results: dict[str, object] = {}
_private_root: Path | None = None


def session_root(run_id: str | None = None) -> Path:
    """The folder shared by the session's processes: per xdist test run, or this process's own."""
    global _private_root
    run_id = run_id if run_id is not None else os.environ.get(RUN_ID_VARIABLE)
    if run_id:
        return Path(tempfile.gettempdir()) / f"reportgen-tests-{run_id}"
    if _private_root is None:
        _private_root = Path(tempfile.mkdtemp(prefix="reportgen-tests-"))
        atexit.register(shutil.rmtree, _private_root, True)
    return _private_root


@contextmanager
def _locked(path: Path):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def once(name: str, make: Callable[[Path], T]) -> T:
    """`make(folder)`'s result, computed by the first process of the session that asks; `folder` is an empty
    folder of the session, kept until it ends. The result must pickle."""
    if name in _results:
        return _results[name]  # type: ignore[return-value]
    folder = session_root() / name
    with _locked(folder.with_name(f"{name}.lock")):
        done = folder / _RESULT
        if done.exists():
            result = pickle.loads(done.read_bytes())
        else:
            shutil.rmtree(folder, ignore_errors=True)  # a process that failed half way
            folder.mkdir(parents=True)
            result = make(folder)
            done.write_bytes(pickle.dumps(result))
    _results[name] = result
    return result
