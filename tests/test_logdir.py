"""Finding runs and hosts: logdir shapes, gzip hosts, order, fsspec URLs."""

from __future__ import annotations

import gzip
import json
import uuid
from pathlib import Path

import fsspec
import pytest

from reportgen.errors import NoCapturesError
from reportgen.loaders.logdir import discover, merge_same_folder, natural_key, read_file
from reportgen.loaders.xspace import decode_xspace
from reportgen.pipeline.build import BuildOptions, build_site
from tests.conftest import LOGDIR, needs_shared

SAMPLE_RUNS = ["tf_keras_fast", "tf_keras_input_bound"]


def _shape(runs) -> list[tuple[str, list[str]]]:
    return [(r.name, [h.host for h in r.hosts]) for r in runs]


def test_logdir_profile_folder_and_run_folder(sample_logdir):
    expected = [(name, ["vm"]) for name in SAMPLE_RUNS]
    assert _shape(discover(str(sample_logdir))) == expected
    assert _shape(discover(str(sample_logdir / "plugins" / "profile"))) == expected
    assert _shape(discover(str(sample_logdir / "plugins" / "profile") + "/")) == expected
    one = discover(str(sample_logdir / "plugins" / "profile" / "tf_keras_fast"))
    assert _shape(one) == [("tf_keras_fast", ["vm"])]
    host = one[0].hosts[0]
    assert host.path.endswith("tf_keras_fast/vm.xplane.pb")
    assert host.size == (sample_logdir / "plugins/profile/tf_keras_fast/vm.xplane.pb").stat().st_size


def test_runs_filter(sample_logdir):
    assert _shape(discover(str(sample_logdir), {"tf_keras_fast"})) == [("tf_keras_fast", ["vm"])]
    with pytest.raises(NoCapturesError, match="matching --runs nope"):
        discover(str(sample_logdir), {"nope"})


@needs_shared
def test_shared_logdir_hosts_ignore_other_files():
    runs = {r.name: [h.host for h in r.hosts] for r in discover(str(LOGDIR))}
    assert runs["gpu_multi_worker"] == ["34.83.195.179_6003", "34.83.195.180_6003"]
    assert runs["jax_mlp"] == ["vm"]  # vm.trace.json.gz beside it is not a host
    assert list(runs) == sorted(runs, key=natural_key)


def test_gzipped_hosts_and_plain_file_precedence(tmp_path, sample_logdir):
    data = (sample_logdir / "plugins/profile/tf_keras_fast/vm.xplane.pb").read_bytes()
    run = tmp_path / "plugins" / "profile" / "zipped"
    run.mkdir(parents=True)
    (run / "worker.xplane.pb.gz").write_bytes(gzip.compress(data))
    (run / "both.xplane.pb.gz").write_bytes(b"not even gzip")
    (run / "both.xplane.pb").write_bytes(data)
    (run / ".xplane.pb").write_bytes(data)  # no host name: not a host file
    (run / "notes.txt").write_text("ignored")
    runs = discover(str(tmp_path))
    assert _shape(runs) == [("zipped", ["both", "worker"])]
    both, worker = runs[0].hosts
    assert both.path.endswith("both.xplane.pb")
    assert worker.path.endswith("worker.xplane.pb.gz")
    capture = decode_xspace(worker.path, read_file(worker.path))
    assert capture.host == "worker"
    assert capture.event_count == decode_xspace("x.xplane.pb", data).event_count


def test_natural_order_of_runs_and_hosts(tmp_path, sample_logdir):
    data = (sample_logdir / "plugins/profile/tf_keras_fast/vm.xplane.pb").read_bytes()
    profile = tmp_path / "plugins" / "profile"
    for run in ("run_10", "run_2", "Run_3", "run_1"):
        (profile / run).mkdir(parents=True)
        for host in ("host10", "host2", "host1"):
            (profile / run / f"{host}.xplane.pb").write_bytes(data)
    (profile / "empty_run").mkdir()  # no host files: not a run
    runs = discover(str(tmp_path))
    assert [r.name for r in runs] == ["run_1", "run_2", "Run_3", "run_10"]
    assert [h.host for h in runs[0].hosts] == ["host1", "host2", "host10"]


def test_no_captures_says_where_it_looked(tmp_path):
    with pytest.raises(NoCapturesError) as err:
        discover(str(tmp_path))
    assert str(tmp_path) in str(err.value) and "xplane.pb" in str(err.value)

    (tmp_path / "plugins" / "profile" / "run").mkdir(parents=True)
    # A file that is no capture (a `<host>.trace.json.gz` alone is one: an older profiler's trace).
    (tmp_path / "plugins" / "profile" / "run" / "vm.notes.txt").write_bytes(b"")
    with pytest.raises(NoCapturesError) as err:
        discover(str(tmp_path))
    assert str(tmp_path / "plugins" / "profile") in str(err.value)

    missing = tmp_path / "does-not-exist"
    with pytest.raises(NoCapturesError, match="no such file or directory") as err:
        discover(str(missing))
    assert str(missing) in str(err.value)

    a_file = tmp_path / "plugins" / "profile" / "run" / "vm.notes.txt"
    with pytest.raises(NoCapturesError, match="not a capture file"):
        discover(str(a_file))


def test_one_capture_file_is_a_run_named_after_its_folder(sample_logdir, tmp_path):
    path = sample_logdir / "plugins" / "profile" / "tf_keras_fast" / "vm.xplane.pb"
    (run,) = discover(str(path))
    assert (run.name, [h.host for h in run.hosts], run.hosts[0].path) == ("tf_keras_fast", ["vm"], str(path))
    assert run.hosts[0].size == path.stat().st_size
    with pytest.raises(NoCapturesError, match="not among --runs"):
        discover(str(path), {"other"})


def test_capture_files_of_one_folder_make_one_run(sample_logdir, tmp_path):
    folder = tmp_path / "fit"
    folder.mkdir()
    source = (sample_logdir / "plugins" / "profile" / "tf_keras_fast" / "vm.xplane.pb").read_bytes()
    for host in ("worker_10", "worker_2"):
        (folder / f"{host}.xplane.pb").write_bytes(source)
    gz = tmp_path / "other" / "chief.xplane.pb.gz"
    gz.parent.mkdir()
    gz.write_bytes(gzip.compress(source))
    runs = merge_same_folder([r for p in (folder / "worker_10.xplane.pb", gz, folder / "worker_2.xplane.pb")
                              for r in discover(str(p))])
    assert [(r.name, [h.host for h in r.hosts]) for r in runs] == [("fit", ["worker_2", "worker_10"]),
                                                                  ("other", ["chief"])]
    # A run folder given twice is two runs (the build suffixes the second name), as before.
    twice = merge_same_folder(discover(str(folder)) + discover(str(folder)))
    assert len(twice) == 2


@pytest.fixture
def memory_logdir(sample_logdir):
    """The bundled sample copied into fsspec's in-memory filesystem."""
    fs = fsspec.filesystem("memory")
    root = f"/logdir-{uuid.uuid4().hex}"
    for run in SAMPLE_RUNS:
        fs.pipe(f"{root}/plugins/profile/{run}/vm.xplane.pb",
                (sample_logdir / "plugins/profile" / run / "vm.xplane.pb").read_bytes())
    # A second, gzipped host in one run, and a run whose only host is gzipped.
    fast = (sample_logdir / "plugins/profile/tf_keras_fast/vm.xplane.pb").read_bytes()
    fs.pipe(f"{root}/plugins/profile/tf_keras_fast/vm2.xplane.pb.gz", gzip.compress(fast))
    fs.pipe(f"{root}/plugins/profile/run_10/solo.xplane.pb.gz", gzip.compress(fast))
    yield f"memory://{root}"
    fs.rm(root, recursive=True)


def test_memory_url_discovery(memory_logdir):
    runs = discover(memory_logdir)
    assert _shape(runs) == [("run_10", ["solo"]), ("tf_keras_fast", ["vm", "vm2"]), ("tf_keras_input_bound", ["vm"])]
    for run in runs:
        assert run.path.startswith("memory://")
        for host in run.hosts:
            assert host.path.startswith("memory://") and host.size > 0
    assert _shape(discover(memory_logdir + "/plugins/profile/tf_keras_fast")) == [("tf_keras_fast", ["vm", "vm2"])]


def test_memory_url_builds_a_site(memory_logdir, tmp_path, sample_logdir):
    out = tmp_path / "site"
    report = build_site([memory_logdir], BuildOptions(output=str(out), jobs=1))
    assert report.exit_code == 0 and report.errors == []
    assert (report.runs, report.hosts) == (3, 4)
    summary = json.loads((out / "summary.json").read_text())
    assert {name: run["hosts"] for name, run in summary["runs"].items()} == {
        "run_10": ["solo"], "tf_keras_fast": ["vm", "vm2"], "tf_keras_input_bound": ["vm"],
    }
    for run in summary["runs"]:
        page = (out / run / "index.html").read_text()
        assert "data-vega-spec" in page
    # The same captures read from the local sample give the same event counts
    # (the memory logdir adds two gzipped copies of tf_keras_fast).
    local = build_site([str(sample_logdir)], BuildOptions(output=str(tmp_path / "local"), jobs=1))
    fast = (sample_logdir / "plugins/profile/tf_keras_fast/vm.xplane.pb").read_bytes()
    assert report.events == local.events + 2 * decode_xspace("x.xplane.pb", fast).event_count


def test_links_are_followed_inside_and_refused_outside_and_odd_entries_are_named(tmp_path, sample_logdir):
    import os

    good = (sample_logdir / "plugins" / "profile" / "tf_keras_fast" / "vm.xplane.pb").read_bytes()
    profile = tmp_path / "logs" / "plugins" / "profile"
    mixed = profile / "mixed"
    mixed.mkdir(parents=True)
    (mixed / "real.xplane.pb").write_bytes(good)
    (mixed / "inside.xplane.pb").symlink_to("real.xplane.pb")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "x.xplane.pb").write_bytes(good)
    (mixed / "outside.xplane.pb").symlink_to(elsewhere / "x.xplane.pb")
    (mixed / "dangling.xplane.pb").symlink_to("nothing.xplane.pb")
    os.mkfifo(mixed / "fifo.xplane.pb")
    (mixed / "folder.xplane.pb").mkdir()
    (mixed / "notes.txt").symlink_to("/etc/hostname")  # not named like an input: not a problem of the run
    (profile / "linked").symlink_to("mixed")
    (profile / "away").symlink_to(elsewhere)
    runs = {r.name: r for r in discover(str(tmp_path / "logs"))}
    assert sorted(runs) == ["away", "linked", "mixed"]
    assert [h.host for h in runs["mixed"].hosts] == ["inside", "real"]
    assert [h.host for h in runs["linked"].hosts] == ["inside", "real"]
    problems = {Path(path).name: why for path, why, _ in runs["mixed"].problems}
    assert problems == {
        "outside.xplane.pb": "is a symbolic link to a place outside the folder given; links are followed only "
                             "within it",
        "dangling.xplane.pb": "is a symbolic link that leads nowhere (No such file or directory)",
        "fifo.xplane.pb": "is a FIFO (named pipe), not a capture file",
        "folder.xplane.pb": "is a folder, not a capture file",
    }
    assert not any(str(tmp_path) in why for _, why, _ in runs["mixed"].problems)  # the site shows `why`
    details = {Path(path).name: detail for path, _, detail in runs["mixed"].problems}
    assert str(elsewhere / "x.xplane.pb") in details["outside.xplane.pb"]  # the terminal also gets `detail`
    assert runs["away"].hosts == [] and "this run folder is a symbolic link to a place outside" in (
        runs["away"].problems[0][1])


def test_an_unreadable_run_is_an_error_of_that_run_only(tmp_path, sample_logdir):
    from tests.clirun import reportgen, unreadable_file_runner

    good = (sample_logdir / "plugins" / "profile" / "tf_keras_fast" / "vm.xplane.pb").read_bytes()
    profile = tmp_path / "logs" / "plugins" / "profile"
    for run in ("locked", "open"):
        (profile / run).mkdir(parents=True)
        (profile / run / "vm.xplane.pb").write_bytes(good)
    preexec, reason = unreadable_file_runner(profile / "locked")
    if reason:
        pytest.skip(reason)
    try:
        proc = reportgen("build", str(tmp_path / "logs"), "-o", str(tmp_path / "site"), "--jobs", "1", "-q",
                         preexec_fn=preexec)
    finally:
        (profile / "locked").chmod(0o755)
    assert proc.returncode == 2, proc.stderr
    assert f"{profile / 'locked'}: this run folder cannot be read (Permission denied)" in proc.stderr
    summary = json.loads((tmp_path / "site" / "summary.json").read_text())
    assert summary["runs"]["open"]["hosts"] == ["vm"]
    assert summary["runs"]["locked"]["errors"] == [
        {"path": "locked", "message": "locked: this run folder cannot be read (Permission denied)"}]
