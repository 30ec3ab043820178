"""Hosts in parallel worker processes build the same site, byte for byte, as one process."""

from __future__ import annotations

import io
from pathlib import Path

import pandas as pd
import pytest

from reportgen.loaders.logdir import HostFile
from reportgen.loaders.xspace import decode_xspace
from reportgen.pipeline.build import EXIT_PARTIAL, BuildOptions, build_site
from reportgen.pipeline.host_stage import HostTask, host_context
from reportgen.pipeline.runners import (
    NO_WORKERS_TIMEOUT_S,
    PARALLEL_MIN_BYTES,
    DaskCluster,
    ProcessPool,
    Serial,
    _Handout,
    choose_executor,
    worth_a_pool,
)
from tests.logdirs import FAST, assert_same_site, make_logdir, pod_runs, site_bytes


@pytest.fixture(scope="module")
def builds(tmp_path_factory):
    root = tmp_path_factory.mktemp("parallel")
    logdir = make_logdir(root / "logdir", pod_runs())
    serial = build_site([str(logdir)], BuildOptions(output=str(root / "serial"), jobs=1, cache=False))
    # The test hosts are small: asked to, the build starts workers for them all the same.
    parallel = build_site([str(logdir)], BuildOptions(output=str(root / "parallel"), jobs=2, cache=False,
                                                      parallel_min_bytes=0))
    return serial, parallel


def test_two_jobs_run_in_worker_processes_and_match_one_job_byte_for_byte(builds):
    serial, parallel = builds
    assert serial.runner == "serial"
    assert parallel.runner == "processes"
    assert serial.decoded == parallel.decoded == ["pod/worker-0.xplane.pb", "pod/worker-1.xplane.pb",
                                                  "solo/vm.xplane.pb"]
    assert_same_site(serial.output, parallel.output)


def test_small_hosts_stay_in_the_building_process(tmp_path):
    """Starting workers costs seconds of CPU: hosts weighing less than that much work are built here."""
    logdir = make_logdir(tmp_path / "logdir", pod_runs())
    report = build_site([str(logdir)], BuildOptions(output=str(tmp_path / "site"), jobs=2, cache=False))
    assert report.runner == "serial"
    work = [(HostTask(index=i, run="r", host=HostFile(host=f"h{i}", path=f"h{i}.xplane.pb", size=size)), None, False)
            for i, size in enumerate([40 * 2**20, 30 * 2**20])]
    assert worth_a_pool(work) and not worth_a_pool(work[:1])
    assert not worth_a_pool([(HostTask(0, "r", HostFile("h", "h.xplane.pb", 2**20)), None, False)] * 2)
    gzipped = [(HostTask(i, "r", HostFile(f"h{i}", f"h{i}.xplane.pb.gz", 5 * 2**20)), None, False) for i in range(2)]
    assert worth_a_pool(gzipped)  # 10 MB of gzip: about 80 MB of capture
    # Each host has a fixed cost whatever its size: a pod's many tiny hosts are worth the workers, a few are not.
    tiny = [(HostTask(i, "r", HostFile(f"h{i}", f"h{i}.xplane.pb", 300)), None, False) for i in range(100)]
    assert worth_a_pool(tiny) and not worth_a_pool(tiny[:10])


def test_a_broken_host_fails_alone_in_either_mode(builds):
    for report in builds:
        assert report.exit_code == EXIT_PARTIAL
        assert [e["path"] for e in report.errors] == ["pod/worker-2.xplane.pb"]
        assert report.hosts == 3


def test_host_stage_outputs_reach_the_site_and_a_failed_host_leaves_none(builds):
    _, parallel = builds
    files = site_bytes(parallel.output)
    per_host = sorted(rel for rel in files if rel.startswith("pod/data/inventory/hosts/"))
    assert per_host == [f"pod/data/inventory/hosts/worker-{i}.csv" for i in range(2)]
    assert "solo/data/inventory/hosts/vm.csv" in files
    # Each host's file holds that host's rows of the run's table.
    run_table = pd.read_csv(io.BytesIO(files["pod/data/inventory/lines.csv"]))
    for i in range(2):
        host_table = pd.read_csv(io.BytesIO(files[f"pod/data/inventory/hosts/worker-{i}.csv"]))
        expected = run_table[run_table["host"] == f"worker-{i}"].drop(columns="host").reset_index(drop=True)
        pd.testing.assert_frame_equal(host_table, expected)
    page = files["pod/inventory.html"].decode()
    assert 'href="data/inventory/hosts/worker-0.csv"' in page
    assert not any(".staging" in rel for rel in files)
    assert not (parallel.output / ".staging").exists()


@pytest.mark.parametrize("executable", [None, "", "/bin/true"], ids=["none", "empty", "not-python"])
def test_the_staging_folder_goes_when_no_child_can_remove_it(builds, tmp_path, monkeypatch, executable):
    # An embedding program may have no `sys.executable`, or name itself: the build removes the staging
    # folder's leftovers in its own process then (`/bin/true` ends at once having removed nothing).
    monkeypatch.setattr("sys.executable", executable)
    serial, _ = builds
    logdir = make_logdir(tmp_path / "logdir", pod_runs())
    report = build_site([str(logdir)], BuildOptions(output=str(tmp_path / "site"), jobs=1, cache=False))
    assert report.exit_code == EXIT_PARTIAL  # the truncated host, as in the other builds
    assert not (report.output / ".staging").exists()
    assert_same_site(serial.output, report.output)


def test_host_outputs_stay_inside_the_run_folder(tmp_path):
    capture = decode_xspace(str(FAST), FAST.read_bytes(), host="vm")
    ctx = host_context("r", capture, str(tmp_path))
    for bad in ("../escape.csv", "/abs.csv", "a//b.csv", "a/./b.csv", ""):
        with pytest.raises(ValueError):
            ctx.output_path(bad)
    with pytest.raises(ValueError):
        ctx.open_output("x.csv", "rb")
    with ctx.open_output("data/x/y.csv") as handle:
        handle.write(b"1\n")
    assert (tmp_path / "r" / "data" / "x" / "y.csv").read_bytes() == b"1\n"


def _work(*sizes: int) -> list:
    return [(HostTask(index=i, run="r", host=HostFile(host=f"h{i}", path=f"/logs/h{i}.xplane.pb", size=size)),
             Path(f"/staging/{i}"), False) for i, size in enumerate(sizes)]


def test_a_worker_keeps_a_second_light_host_queued_and_heavy_ones_go_one_at_a_time():
    tiny, heavy = 300, 64 * 2**20
    hosts = _Handout(_work(tiny, tiny, tiny, heavy, heavy, tiny))
    assert hosts.for_workers() is None  # no worker up yet: the building process takes them
    hosts.worker_started()
    taken = [hosts.for_workers(), hosts.for_workers()]
    assert [t[0].index for t in taken] == [0, 1] and hosts.for_workers() is None
    hosts.back()
    assert hosts.for_workers()[0].index == 2  # a light host behind the one in work
    assert hosts.for_this_process()[0].index == 3
    hosts.back()
    assert hosts.for_workers() is None  # a heavy host waits until the worker's queue is empty
    hosts.back()
    assert hosts.for_workers()[0].index == 4
    assert hosts.for_workers()[0].index == 5  # light: it may wait behind the heavy one
    assert hosts.for_workers() is None and hosts.for_this_process() is None


def test_one_executor_is_chosen_for_the_work_left_after_the_cache():
    tiny, heavy = 300, 64 * 2**20
    assert choose_executor([], scheduler="tcp://127.0.0.1:8786", jobs=4) is None  # every host from the cache
    assert choose_executor(_work(heavy, heavy), scheduler=None, jobs=1) == Serial()
    assert choose_executor(_work(tiny, tiny), scheduler=None, jobs=4, min_bytes=PARALLEL_MIN_BYTES) == Serial()
    assert choose_executor(_work(heavy, heavy), scheduler=None, jobs=4, min_bytes=PARALLEL_MIN_BYTES) == ProcessPool(4)
    dask = choose_executor(_work(tiny), scheduler="tcp://127.0.0.1:8786", jobs=4)
    assert dask == DaskCluster("tcp://127.0.0.1:8786", NO_WORKERS_TIMEOUT_S)
    assert [e.name for e in (Serial(), ProcessPool(2), dask)] == ["serial", "processes", "dask"]
