"""Memory profile numbers against XProf's `memory_profile.json` on the shared captures."""

from __future__ import annotations

import json
import math
from functools import cache

import pytest

from reportgen.core.events.table import EventTable
from reportgen.core.tools.memory_profile import ALLOCATION, hlo_module_runs, hlo_modules_json, memory_profiles
from reportgen.loaders.xspace import decode_xspace
from tests.conftest import LOGDIR, ORACLE, RUNS, needs_shared

pytestmark = needs_shared


def oracle_files():
    """(run, host file, oracle json) for every run and host XProf wrote a memory profile for."""
    for run in RUNS:
        per_host = ORACLE / run / "per_host"
        run_dir = LOGDIR / "plugins" / "profile" / run
        if per_host.exists():
            for host_dir in sorted(per_host.iterdir()):
                if (host_dir / "memory_profile.json").exists():
                    yield run, run_dir / f"{host_dir.name}.xplane.pb", host_dir / "memory_profile.json"
        elif (ORACLE / run / "memory_profile.json").exists():
            hosts = sorted(run_dir.glob("*.xplane.pb"))
            assert len(hosts) == 1
            yield run, hosts[0], ORACLE / run / "memory_profile.json"


@cache
def profiles(path) -> dict:
    return memory_profiles(EventTable(decode_xspace(str(path), path.read_bytes())))


def allocator_cases():
    for run, path, oracle in oracle_files():
        expected = json.loads(oracle.read_text())
        for memory_id in expected["memoryIds"]:
            yield pytest.param(path, oracle, memory_id, id=f"{run}/{path.stem.split('.')[0]}/{memory_id}")


@pytest.mark.parametrize(("run", "path", "oracle"), [pytest.param(*f, id=f"{f[0]}/{f[1].name}")
                                                     for f in oracle_files()])
def test_memory_ids_match_xprof(run, path, oracle):
    assert list(profiles(path)) == json.loads(oracle.read_text())["memoryIds"]


def test_expected_allocators_present():
    ids = {run: set() for run in RUNS}
    for run, path, _ in oracle_files():
        ids[run] |= set(profiles(path))
    assert ids["tf_keras_fast"] == {"mklcpu"} and ids["tf_keras_input_bound"] == {"mklcpu"}
    assert ids["tpu_inference_2"] == {"0", "1", "2", "3"}
    assert ids["jax_mlp"] == set()


def close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=0.01, abs_tol=1e-9)


@pytest.mark.parametrize(("path", "oracle", "memory_id"), list(allocator_cases()))
def test_allocator_matches_xprof(path, oracle, memory_id):
    expected = json.loads(oracle.read_text())["memoryProfilePerAllocator"][memory_id]
    p = profiles(path)[memory_id]
    summary, peak = expected["profileSummary"], expected["profileSummary"]["peakStats"]

    # Summary numbers: exact (fragmentation is a double XProf prints with 6 digits).
    assert p.peak_bytes_usage_lifetime == int(summary["peakBytesUsageLifetime"])
    assert p.peak_bytes == int(peak["peakBytesInUse"])
    assert p.peak_stats["stack_bytes"] == int(peak["stackReservedBytes"])
    assert p.peak_stats["heap_bytes"] == int(peak["heapAllocatedBytes"])
    assert p.peak_stats["free_bytes"] == int(peak["freeMemoryBytes"])
    assert math.isclose(p.peak_stats["fragmentation"], peak["fragmentation"], rel_tol=1e-5, abs_tol=1e-12)
    assert p.peak_time_ps == int(summary["peakStatsTimePs"])
    assert p.memory_capacity == int(summary["memoryCapacity"])
    timeline = expected["sampledTimelineSnapshots"]
    assert p.allocations == sum(s["activityMetadata"]["memoryActivity"] == "ALLOCATION" for s in timeline)
    assert p.deallocations == len(timeline) - p.allocations

    # Timeline points: same events (XProf's sort is unstable: compare in a canonical order), values within 1%.
    theirs = sorted(
        (int(s["timeOffsetPs"]), int(s["aggregationStats"]["heapAllocatedBytes"]),
         int(s["aggregationStats"]["stackReservedBytes"]), int(s["aggregationStats"]["freeMemoryBytes"]),
         s["aggregationStats"].get("fragmentation", 0), s["activityMetadata"]["memoryActivity"],
         s["activityMetadata"].get("tfOpName", ""), int(s["activityMetadata"]["stepId"]),
         s["activityMetadata"].get("regionType", ""), s["activityMetadata"].get("dataType", ""),
         s["activityMetadata"].get("tensorShape", ""), int(s["activityMetadata"].get("requestedBytes", 0)),
         int(s["activityMetadata"].get("allocationBytes", 0)))
        for s in timeline
    )
    mine = sorted(
        (int(r.time_ps), int(r.heap_bytes), int(r.stack_bytes), int(r.free_bytes), float(r.fragmentation),
         "ALLOCATION" if r.activity == ALLOCATION else "DEALLOCATION", r.tf_op, int(r.step), r.region_type,
         r.data_type, r.shape, int(r.requested_bytes), int(r.allocation_bytes))
        for r in p.timeline.itertuples()
    )
    assert len(mine) == len(theirs)
    for a, b in zip(mine, theirs):
        assert a[0] == b[0] and a[5:11] == b[5:11]
        assert all(close(x, y) for x, y in zip(a[1:5] + a[11:], b[1:5] + b[11:]))

    # Breakdown rows at the peak: same rows in XProf's order, sizes within 1%.
    snaps, specials = expected.get("memoryProfileSnapshots", []), expected.get("specialAllocations", [])
    rows = []
    for a in expected.get("activeAllocations", []):
        i = int(a["snapshotIndex"])
        md = specials[int(a["specialIndex"])] if i < 0 else snaps[i]["activityMetadata"]
        rows.append((md.get("tfOpName", ""), int(md.get("allocationBytes", 0)), int(md.get("requestedBytes", 0)),
                     int(a["numOccurrences"]), md.get("regionType", ""), md.get("dataType", ""),
                     md.get("tensorShape", "")))
    assert p.peak_step == next((int(s.get("stepId", 0)) for s in specials), p.peak_step)
    got = list(p.breakdown.itertuples(index=False, name=None))
    assert len(got) == len(rows)
    for a, b in zip(got, rows):
        assert (a[0], a[3], a[4], a[5], a[6]) == (b[0], b[3], b[4], b[5], b[6])
        assert close(a[1], b[1]) and close(a[2], b[2])


@pytest.mark.parametrize(("run", "path", "oracle"), [pytest.param(*f, id=f"{f[0]}/{f[1].name}")
                                                     for f in oracle_files()])
def test_hlo_module_runs_match_xprof(run, path, oracle):
    """XProf's `hloModules`: every run of every TPU core's XLA Modules line, byte for byte."""
    runs = hlo_module_runs(EventTable(decode_xspace(str(path), path.read_bytes())))
    expected = json.loads(oracle.read_text())["hloModules"]
    assert hlo_modules_json(runs) == expected
    if run == "tpu_inference_2":
        assert len(expected) == 414
