"""Faults leave the last good site: a build killed at any point, two builds into one folder, a full disk, a
read-only or unusable output folder. The previous site stays byte for byte, no process of the build
outlives it, and the next build succeeds (removing what a killed one left behind)."""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from reportgen.output import transaction as tx
from tests.clirun import _drop_file_permission_override, reportgen
from tests.conftest import REPO
from tests.logdirs import make_logdir, small_capture

SAMPLE = REPO / "reportgen" / "sample" / "plugins" / "profile"
FAST = SAMPLE / "tf_keras_fast" / "vm.xplane.pb"
SLOW = SAMPLE / "tf_keras_input_bound" / "vm.xplane.pb"


def _snapshot(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}


def _start(args: list[str], cwd: Path) -> subprocess.Popen:
    """A build in a session of its own: every process it starts can be found by that session."""
    return subprocess.Popen([sys.executable, "-m", "reportgen", *args], cwd=cwd, env=_env(), start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _session_processes(session: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) == session and fields[0] != "Z":  # the session id; zombies are already gone
            found.append(int(entry.name))
    return found


def _wait_until(condition, timeout: float = 120) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return False


def _no_processes_left(session: int) -> bool:
    return _wait_until(lambda: not _session_processes(session), timeout=30)


@pytest.fixture(scope="module")
def logdir(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("faults")
    return make_logdir(root / "logs", {"big": {f"h{i}": (FAST, SLOW)[i % 2] for i in range(4)},
                                       "small": {"a": small_capture(1)}})


@pytest.fixture(scope="module")
def previous_build(tmp_path_factory, logdir) -> Path:
    """A folder holding the small run's site (and its rebuild cache beside it), built once for the module."""
    root = tmp_path_factory.mktemp("previous")
    proc = reportgen("build", str(logdir), "-o", str(root / "site"), "--runs", "small", "--jobs", "1", "-q")
    assert proc.returncode == 0, proc.stderr
    return root


@pytest.fixture()
def previous(tmp_path, previous_build) -> tuple[Path, dict[str, str]]:
    """A copy of that site for this test, and its files' checksums."""
    shutil.copytree(previous_build, tmp_path, symlinks=True, dirs_exist_ok=True)
    site = tmp_path / "site"
    return site, _snapshot(site)


def _building(site: Path) -> list[Path]:
    return list(site.parent.glob(f".{site.name}.building-*"))


KILL_POINTS = {
    "starting": lambda site: bool(_building(site)),
    "hosts": lambda site: any(True for b in _building(site) for _ in (b / ".staging").glob("*/*")),
    "pages": lambda site: any((b / "big" / "index.html").exists() for b in _building(site)),
}


@pytest.mark.parametrize("point", list(KILL_POINTS))
def test_a_killed_build_leaves_the_previous_site_and_no_process(previous, logdir, point):
    site, before = previous
    proc = _start(["build", str(logdir), "-o", str(site), "--jobs", "2", "--no-cache", "-q"], site.parent)
    reached = _wait_until(lambda: KILL_POINTS[point](site) or proc.poll() is not None)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert reached and proc.returncode == -signal.SIGKILL, f"the build ended before the {point} point"
    assert _no_processes_left(proc.pid), f"processes outlived the build: {_session_processes(proc.pid)}"
    assert _snapshot(site) == before
    again = reportgen("build", str(logdir), "-o", str(site), "--jobs", "2", "-q")
    assert again.returncode == 0, again.stderr
    assert _building(site) == [] and not list(site.parent.glob(".site.old-*"))
    assert (site / "big" / "index.html").is_file()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_stopped_build_cleans_up_and_says_so(previous, logdir, signum):
    site, before = previous
    proc = _start(["build", str(logdir), "-o", str(site), "--jobs", "2", "--no-cache", "-q"], site.parent)
    assert _wait_until(lambda: KILL_POINTS["hosts"](site) or proc.poll() is not None)
    os.kill(proc.pid, signum)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signum, err
    assert f"build stopped ({signal.Signals(signum).name}); the output folder is as it was" in err
    assert "Traceback" not in err
    assert _no_processes_left(proc.pid), f"processes outlived the build: {_session_processes(proc.pid)}"
    assert _building(site) == [] and _snapshot(site) == before


def test_a_worker_started_as_the_pool_ends_leaves_no_traceback():
    """The fork server's hook: a worker whose pool semaphore is gone (the build ending its pool) is silent;
    any other failure is still printed."""
    code = """
import multiprocessing.synchronize as s, sys
from reportgen.pipeline import preload
lock = object.__new__(s.Lock)
try:
    lock.__setstate__((0, 1, 1, "/reportgen-test-no-such-semaphore"))
except FileNotFoundError:
    sys.excepthook(*sys.exc_info())
try:
    raise ValueError("another failure")
except ValueError:
    sys.excepthook(*sys.exc_info())
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_env(), timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "FileNotFoundError" not in proc.stderr and "ValueError: another failure" in proc.stderr


def test_two_builds_into_one_folder_never_mix(previous, logdir):
    site, _ = previous
    first = _start(["build", str(logdir), "-o", str(site), "--jobs", "1", "--no-cache", "-q"], site.parent)
    assert _wait_until(lambda: bool(_building(site)) or first.poll() is not None)
    # Held still while the second build starts: on a busy machine the first could otherwise end before
    # the second gets to the folder. A stopped process keeps its lock.
    os.kill(first.pid, signal.SIGSTOP)
    try:
        second = reportgen("build", str(logdir), "-o", str(site), "--runs", "small", "--jobs", "1", "-q")
    finally:
        os.kill(first.pid, signal.SIGCONT)
    assert second.returncode == 1, second.stderr
    assert f"another reportgen build is writing this folder (process {first.pid})" in second.stderr
    _, err = first.communicate(timeout=300)
    assert first.returncode == 0, err
    assert (site / "big" / "index.html").is_file() and (site / "small" / "index.html").is_file()


def test_a_build_killed_between_the_two_renames_is_recovered(tmp_path, monkeypatch):
    """Where the folders cannot be exchanged in one step, the old site is renamed aside first; a build that
    dies right then leaves no site at -o: the next one puts the old site back before anything else."""
    site = tmp_path / "site"
    first = tx.SiteTransaction(site)
    (first.tmp / "index.html").write_text("old")
    first.commit()
    before = _snapshot(site)
    second = tx.SiteTransaction(site)
    (second.tmp / "index.html").write_text("new")
    monkeypatch.setattr(tx, "_exchange", lambda a, b: False)
    real_replace = os.replace

    def dies_after_the_first(source, target):
        real_replace(source, target)
        if Path(target).name.startswith(".site.old-"):
            raise KeyboardInterrupt("killed here")

    monkeypatch.setattr(tx.os, "replace", dies_after_the_first)
    with pytest.raises(KeyboardInterrupt):
        second.commit()
    second.release()
    monkeypatch.undo()
    assert not site.exists() and len(list(tmp_path.glob(".site.old-*"))) == 1
    third = tx.SiteTransaction(site)  # puts it back, then builds as usual
    assert _snapshot(site) == before and not list(tmp_path.glob(".site.old-*"))
    third.abort()


def test_the_swap_leaves_no_moment_without_a_site(tmp_path):
    site = tmp_path / "site"
    for content in ("one", "two"):
        transaction = tx.SiteTransaction(site)
        (transaction.tmp / "index.html").write_text(content)
        transaction.commit()
    assert (site / "index.html").read_text() == "two"
    if not tx._exchange(tmp_path / "site", tmp_path / "site"):
        pytest.skip("this system cannot exchange two folders in one step (renameat2): the two-step swap is used")


def _full_disk_script(logdir: Path, mount: Path) -> str:
    build = f"{sys.executable} -m reportgen build {logdir} -o {mount}/site --jobs 1"
    return f"""set -u
mount -t tmpfs -o size=24m tmpfs {mount} || exit 77
{build} --runs small -q; echo "first=$?"
find {mount}/site -type f -exec sha256sum {{}} + | sort > {mount}/../before.txt
head -c $(( $(df --output=avail -B1 {mount} | tail -1) - 150000 )) /dev/zero > {mount}/filler 2>/dev/null
{build} -q 2> {mount}/../full-stderr.txt; echo "full=$?"
find {mount}/site -type f -exec sha256sum {{}} + | sort > {mount}/../after.txt
ls -a {mount} > {mount}/../listing.txt
rm {mount}/filler
{build} -q; echo "again=$?"
test -f {mount}/site/big/index.html && echo "again-site=ok"
"""


def test_a_full_disk_fails_clearly_and_keeps_the_old_site(tmp_path, logdir):
    """On a 24 MiB tmpfs of its own (a private mount namespace), filled to 150 KB of free space."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("making a small file system needs root and unshare(1)")
    mount = tmp_path / "disk"
    mount.mkdir()
    proc = subprocess.run(["unshare", "-m", "sh", "-c", _full_disk_script(logdir, mount)], capture_output=True,
                          text=True, env=_env(), cwd=tmp_path, timeout=600)
    if proc.returncode == 77 or "first=" not in proc.stdout:
        pytest.skip(f"no tmpfs could be mounted here: {proc.stderr.strip()[:200]}")
    assert "first=0" in proc.stdout and "full=1" in proc.stdout, proc.stdout + proc.stderr
    err = (tmp_path / "full-stderr.txt").read_text()
    assert "No space left on device" in err and "Traceback" not in err and len(err.splitlines()) <= 3, err
    assert (tmp_path / "before.txt").read_text() == (tmp_path / "after.txt").read_text()
    assert ".site.building" not in (tmp_path / "listing.txt").read_text()
    assert "again=0" in proc.stdout and "again-site=ok" in proc.stdout, proc.stdout + proc.stderr


def test_a_read_only_output_folder_is_a_clear_error(tmp_path, previous, logdir):
    site, before = previous
    preexec = _drop_file_permission_override if os.geteuid() == 0 else None  # root ignores modes otherwise
    tmp_path.chmod(0o555)
    probe = subprocess.run([sys.executable, "-c", "import sys; open(sys.argv[1], 'w')", str(tmp_path / "probe")],
                           capture_output=True, preexec_fn=preexec)
    if probe.returncode == 0:
        tmp_path.chmod(0o755)
        pytest.skip("a folder of mode 555 is writable here")
    try:
        proc = reportgen("build", str(logdir), "-o", str(site), "--runs", "small", "-q", preexec_fn=preexec)
        fresh = reportgen("build", str(logdir), "-o", str(tmp_path / "new"), "--runs", "small", "-q",
                          preexec_fn=preexec)
    finally:
        tmp_path.chmod(0o755)
    assert proc.returncode == 1 and "Permission denied" in proc.stderr and "Traceback" not in proc.stderr
    assert str(site) in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert fresh.returncode == 1 and "Permission denied" in fresh.stderr and "Traceback" not in fresh.stderr
    assert _snapshot(site) == before


def test_an_output_that_is_a_file_is_refused(tmp_path):
    target = tmp_path / "out"
    target.write_text("notes")
    proc = reportgen("build", str(FAST), "-o", str(target), "-q")
    assert proc.returncode == 1 and f"{target}: is a file, not a folder" in proc.stderr, proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"] and target.read_text() == "notes"


def test_an_empty_output_name_is_refused(tmp_path):
    proc = reportgen("build", str(FAST), "-o", "", cwd=tmp_path)
    assert proc.returncode == 1 and '-o "": the output folder has no name' in proc.stderr
    assert list(tmp_path.iterdir()) == []


def test_only_reportgens_own_folders_are_replaced(tmp_path, previous):
    site, before = previous
    (site / "notes.txt").write_text("mine")
    proc = reportgen("build", str(FAST), "-o", str(site), "-q")
    assert proc.returncode == 1 and "holds files reportgen did not write (notes.txt)" in proc.stderr
    assert (site / "notes.txt").read_text() == "mine"
    (site / "notes.txt").unlink()
    copied = tmp_path / "copied"  # a summary.json that says "reportgen" is not enough: the marker is
    copied.mkdir()
    shutil.copy(site / "summary.json", copied / "summary.json")
    (copied / "thesis.tex").write_text("precious")
    proc = reportgen("build", str(FAST), "-o", str(copied), "-q")
    assert proc.returncode == 1 and "is not a reportgen site" in proc.stderr
    assert (copied / "thesis.tex").read_text() == "precious"
    assert _snapshot(site) == before


def test_a_write_error_without_a_file_names_only_its_reason(tmp_path):
    from reportgen.pipeline.build import _what_failed

    transaction = SimpleNamespace(tmp=tmp_path / ".site.building-x")
    assert _what_failed(OSError(28, "No space left on device", ""), transaction) == "No space left on device"
    inside = OSError(28, "No space left on device", str(transaction.tmp / "run" / "trace.html"))
    assert _what_failed(inside, transaction) == "No space left on device: run/trace.html"


def test_a_stop_while_stops_are_held_waits_for_the_next_stop_point():
    from reportgen.pipeline.stopping import BuildStopped, stop_on_signals, stop_point, stops_held

    reached = []
    with stop_on_signals(), pytest.raises(BuildStopped) as stopped:
        with stops_held():
            os.kill(os.getpid(), signal.SIGTERM)
            reached.append("after the signal")  # not raised in the middle of the section
            os.kill(os.getpid(), signal.SIGHUP)  # a second signal does not replace the first
            reached.append("still running")
        reached.append("never: the block's end is a stop point")
    assert reached == ["after the signal", "still running"] and stopped.value.signum == signal.SIGTERM
    stop_point()  # nothing left held


# A stop signal at a fixed point of the first seconds (as the build machinery is imported): the import of
# the build's orchestration module, caught by an import hook, sends SIGTERM to the process itself.
STOPPED_WHILE_IMPORTING = """
import os, signal, sys
class Hook:
    def find_spec(self, name, path, target=None):
        if name == "reportgen.pipeline.build":
            os.kill(os.getpid(), signal.SIGTERM)
        return None
sys.meta_path.insert(0, Hook())
from reportgen.cli.main import main
sys.exit(main(["build", sys.argv[1], "-o", sys.argv[2], "-q"]))
"""


def test_a_stop_signal_while_the_build_starts_is_one_line_too(tmp_path):
    logdir = make_logdir(tmp_path / "logdir", {"a": {"vm": small_capture(1)}})
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", STOPPED_WHILE_IMPORTING, str(logdir), str(tmp_path / "site")],
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 128 + signal.SIGTERM, (done.returncode, done.stderr)
    assert done.stderr == "reportgen: build stopped (SIGTERM); the output folder is as it was\n"
    assert not (tmp_path / "site").exists()


def test_a_killed_multi_process_build_leaves_no_process_and_no_leak_warning(tmp_path, logdir):
    # multiprocessing's resource tracker outlives a build killed outright, removes its pool's semaphores and
    # warned of each as "leaked" on the build's stderr, after the build was gone.
    site = tmp_path / "site"
    code = ("from reportgen.pipeline.build import BuildOptions, build_site; "
            f"build_site([{str(logdir)!r}], BuildOptions(output={str(site)!r}, jobs=3, cache=False, "
            "parallel_min_bytes=0))")
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=tmp_path, env=_env(), start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    reached = _wait_until(lambda: KILL_POINTS["hosts"](site) or proc.poll() is not None)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert reached and proc.returncode == -signal.SIGKILL, "the build ended before its hosts ran"
    assert _no_processes_left(proc.pid), f"processes outlived the build: {_session_processes(proc.pid)}"
    err = proc.stderr.read()  # every process of the build has ended: all they wrote is there
    proc.stderr.close()
    assert "leaked" not in err and "Traceback" not in err, err
