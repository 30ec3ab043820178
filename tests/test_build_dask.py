"""The per-host stage on a real Dask cluster: a scheduler and two workers, each its own process.

The workers read the host files from the logdir's URL themselves: a local
path, and gs:// served by a real GCS emulator on a loopback port (the
workers and the building process reach it the way they would reach GCS,
through gcsfs configured by environment variables).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from reportgen.cli.main import main
from reportgen.errors import SchedulerError
from reportgen.pipeline import runners
from reportgen.pipeline.build import BuildOptions, build_site
from tests.conftest import GCS_BUCKET as BUCKET
from tests.logdirs import FAST, INPUT_BOUND, assert_same_site, make_logdir, pod_runs, site_bytes

distributed = pytest.importorskip("distributed", reason="Dask distributed is not installed (the test extra has it)")

REPO = Path(__file__).resolve().parent.parent


def _gcs_env(endpoint: str) -> dict[str, str]:
    """gcsfs aimed at the emulator, anonymously, for any process started with it."""
    return {"STORAGE_EMULATOR_HOST": endpoint, "FSSPEC_GCS_TOKEN": "anon", "FSSPEC_GS_TOKEN": "anon",
            "GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT": "false"}


def _dask_command(*args: str) -> list[str]:
    # `python -m distributed.cli.dask_scheduler` and `…dask_worker` are the `dask scheduler|worker` commands.
    return [sys.executable, "-m", *args]


@contextmanager
def _cluster(folder: Path, workers: int, env: dict[str, str]) -> Iterator[tuple[str, list[subprocess.Popen]]]:
    """A scheduler and `workers` workers (no nanny: a killed worker stays dead), each its own process on
    loopback: (the scheduler's address, the workers' processes)."""
    folder.mkdir(parents=True, exist_ok=True)
    scheduler_file = folder / "scheduler.json"
    logs = []
    processes = []

    def start(name: str, args: list[str]) -> None:
        log = open(folder / f"{name}.log", "wb")
        logs.append(log)
        processes.append(subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=folder))

    start("scheduler", _dask_command("distributed.cli.dask_scheduler", "--host", "127.0.0.1", "--port", "0",
                                     "--no-dashboard", "--scheduler-file", str(scheduler_file)))
    try:
        deadline = time.monotonic() + 60
        while not scheduler_file.exists():
            assert processes[0].poll() is None, (folder / "scheduler.log").read_text()
            assert time.monotonic() < deadline, "the Dask scheduler did not start"
            time.sleep(0.1)
        for n in range(workers):
            start(f"worker{n}", _dask_command("distributed.cli.dask_worker", "--scheduler-file", str(scheduler_file),
                                             "--no-nanny", "--nthreads", "1", "--no-dashboard",
                                             "--host", "127.0.0.1", "--name", f"w{n}"))
        with distributed.Client(scheduler_file=str(scheduler_file), timeout=60) as client:
            client.wait_for_workers(workers, timeout=60)
            address = client.scheduler.address
        yield address, processes[1:]
    finally:
        # Workers first, while the scheduler can take their goodbye; then the scheduler.
        for group in (processes[1:], processes[:1]):
            for process in group:
                if process.poll() is None:
                    process.terminate()
            for process in group:
                try:
                    process.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
        for log in logs:
            log.close()


def _worker_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, request):
    try:  # workers that can read gs:// from the emulator, when it is installed
        gcs = _gcs_env(request.getfixturevalue("gcs_emulator"))
    except pytest.skip.Exception:
        gcs = {}
    with _cluster(tmp_path_factory.mktemp("dask"), 2, {**_worker_env(), **gcs}) as (address, _workers):
        yield address


@pytest.fixture(scope="module")
def logdir(tmp_path_factory):
    return make_logdir(tmp_path_factory.mktemp("dask-logdir"), pod_runs())


@pytest.fixture(scope="module")
def local(logdir, tmp_path_factory):
    out = tmp_path_factory.mktemp("dask-local") / "site"
    return build_site([str(logdir)], BuildOptions(output=str(out), jobs=1, cache=False))


def test_a_build_on_dask_equals_the_local_build_byte_for_byte(cluster, logdir, local, tmp_path):
    remote = build_site([str(logdir)], BuildOptions(output=str(tmp_path / "dask"), scheduler=cluster, cache=False))
    assert remote.runner == "dask" and local.runner == "serial"
    assert remote.decoded == local.decoded and len(remote.decoded) == 3
    assert [e["message"] for e in remote.errors] == [e["message"] for e in local.errors]
    assert_same_site(local.output, tmp_path / "dask")
    # Files written by the host stage on the workers travelled back with the results.
    assert "pod/data/inventory/hosts/worker-1.csv" in site_bytes(tmp_path / "dask")


def test_dask_results_feed_the_rebuild_cache(cluster, logdir, local, tmp_path):
    args = ["build", str(logdir), "-o", str(tmp_path / "site"), "--scheduler", cluster, "-q"]
    assert main(args) == 2  # one host file is truncated
    again = build_site([str(logdir)], BuildOptions(output=str(tmp_path / "site"), scheduler=cluster))
    assert again.decoded == [] and len(again.cached) == 3
    assert again.runner == "dask"  # the broken host is tried again (failures are never cached)
    assert [e["path"] for e in again.errors] == ["pod/worker-2.xplane.pb"]
    assert_same_site(local.output, tmp_path / "site")


def test_workers_read_host_files_from_a_gcs_logdir(cluster, gcs_emulator, logdir, local, tmp_path):
    from reportgen.output.publish import gcs_filesystem

    emulator = gcs_emulator
    fs = gcs_filesystem(emulator)
    for path in sorted((logdir / "plugins" / "profile").rglob("*.xplane.pb")):
        fs.pipe(f"{BUCKET}/logs/{path.relative_to(logdir).as_posix()}", path.read_bytes())
    env = {**os.environ, "PYTHONPATH": str(REPO), **_gcs_env(emulator)}
    command = [sys.executable, "-m", "reportgen", "build", f"gs://{BUCKET}/logs", "-o", str(tmp_path / "site"),
               "--scheduler", cluster, "-v"]
    first = subprocess.run(command, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    assert first.returncode == 2, first.stderr  # one host file is truncated
    assert "reportgen: pod/worker-0.xplane.pb: decoded" in first.stderr
    # The terminal names the broken file by its URL; the site by its place in the logdir.
    assert f"gs://{BUCKET}/logs/plugins/profile/pod/worker-2.xplane.pb" in first.stderr
    assert_same_site(local.output, tmp_path / "site")
    # A rebuild keys the hosts by the store's checksums: nothing is decoded again.
    second = subprocess.run(command, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    assert second.returncode == 2, second.stderr
    assert "reportgen: pod/worker-0.xplane.pb: from the rebuild cache" in second.stderr
    assert "decoded" not in second.stderr
    assert_same_site(local.output, tmp_path / "site")


@pytest.mark.parametrize("address", ["127.0.0.1", "garbage", "http://127.0.0.1:8787"])
def test_an_address_dask_cannot_dial_is_one_line_before_anything_is_built(tmp_path, capsys, address):
    # Dask's Client raised a ValueError half-started, then timed out closing itself 40 s later at exit:
    # two tracebacks. The logdir is empty, so the address is judged before the captures are looked for.
    code = main(["build", str(tmp_path), "-o", str(tmp_path / "site"), "--scheduler", address])
    out, err = capsys.readouterr()
    assert code == 1 and out == ""
    (line,) = err.strip().splitlines()
    assert line.startswith(f"reportgen: --scheduler {address}: not a Dask scheduler address (")
    assert not (tmp_path / "site").exists()


# Enough hosts that most are still to do when the first one is back: the workers are killed then.
LOST_HOSTS = {f"h{i}": (FAST if i % 2 else INPUT_BOUND) for i in range(8)}
# How long a test waits for a build that should end on its own; the build waiting forever is the failure.
BUILD_ENDS_S = 300


def _build_killing_workers(logdir: Path, out: Path, address: str, workers: list[subprocess.Popen],
                           **options) -> tuple[dict, list[str]]:
    """A Dask build (on a thread of its own) that kills `workers` as its first host is back:
    {"report" or "error": …}, and the hosts back before the build ended."""
    decoded: list[str] = []
    ended: dict = {}

    def log(line: str) -> None:
        if ": decoded, " in line:
            if not decoded:
                for worker in workers:
                    worker.kill()
            decoded.append(line.split(": decoded, ")[0])

    def build() -> None:
        try:
            ended["report"] = build_site([str(logdir)], BuildOptions(output=str(out), scheduler=address, cache=False,
                                                                     log=log, **options))
        except Exception as exc:  # noqa: BLE001 (the test reads it)
            ended["error"] = exc

    thread = threading.Thread(target=build, daemon=True)
    thread.start()
    thread.join(BUILD_ENDS_S)
    assert not thread.is_alive(), "the build is still waiting for the workers it lost"
    return ended, decoded


def test_a_killed_worker_hands_its_hosts_to_the_other(tmp_path):
    logdir = make_logdir(tmp_path / "logs", {"lost": LOST_HOSTS})
    local = build_site([str(logdir)], BuildOptions(output=str(tmp_path / "local"), jobs=1, cache=False))
    with _cluster(tmp_path / "dask", 2, _worker_env()) as (address, workers):
        ended, decoded = _build_killing_workers(logdir, tmp_path / "site", address, workers[:1])
    assert "error" not in ended, ended
    report = ended["report"]
    assert report.runner == "dask" and report.hosts == len(LOST_HOSTS) and decoded
    assert_same_site(local.output, tmp_path / "site")


def test_with_no_worker_left_the_build_fails_in_time_naming_the_hosts_not_built(tmp_path, monkeypatch):
    monkeypatch.setattr(runners, "NO_WORKERS_TIMEOUT_S", 5.0)
    logdir = make_logdir(tmp_path / "logs", {"lost": LOST_HOSTS})
    previous = build_site([str(logdir)], BuildOptions(output=str(tmp_path / "site"), jobs=1, cache=False))
    before = site_bytes(previous.output)
    with _cluster(tmp_path / "dask", 2, _worker_env()) as (address, workers):
        ended, decoded = _build_killing_workers(logdir, tmp_path / "site", address, workers)
    error = ended.get("error")
    assert isinstance(error, SchedulerError), ended
    message = str(error)
    assert message.startswith(f"the Dask cluster {address} has had no worker for 5 s; "), message
    not_built = [f"lost/{host}.xplane.pb" for host in LOST_HOSTS if f"lost/{host}.xplane.pb" not in decoded]
    assert not_built and f"{len(not_built)} host{'s' if len(not_built) > 1 else ''} not built: " in message
    assert all(path in message for path in not_built), message
    assert not any(path in message for path in decoded), message
    assert site_bytes(tmp_path / "site") == before  # the previous site is as it was
