"""Memory profile rules (docs/xprof/memory_profile.md) on XSpaces built in code.

Step ids come from the core's event grouping (its rules: tests/test_core_rules.py)."""

from __future__ import annotations

import numpy as np

from reportgen.core.events.table import EventTable
from reportgen.core.tools.memory_profile import (
    UNUSED_PREALLOCATED,
    allocator_capacities,
    data_type_string,
    hlo_module_runs,
    hlo_modules_json,
    out_of_memory_messages,
)
from reportgen.core.tools.memory_profile import memory_profiles as profiles_of_table
from tests.xspace import Ref, Space, memory_event


def memory_profiles(capture):
    return profiles_of_table(EventTable(capture))

MIB = 1 << 20


def test_data_type_names_follow_tensorflow():
    assert data_type_string(0) == "INVALID"
    assert data_type_string(1) == "float"
    assert data_type_string(14) == "bfloat16"
    assert data_type_string(30) == "uint4"
    assert data_type_string(101) == "float_ref"
    assert data_type_string(77) == "unknown dtype enum (77)"


def _stepped_capture():
    """Two `train` steps on the Python thread; allocations nested in them, one outside."""
    b = Space(("host",))
    host = b.plane("/host:CPU")
    line = host.line(name="python", timestamp_ns=1_000)
    t0 = 1_000_000  # the line's timestamp in ps: events are placed by absolute time, offsets stay as below
    memory_event(line, "MemoryAllocation", t0 + 10, heap=MIB, free=10 * MIB, requested=MIB, allocated=MIB,
                 address=0x10, peak=MIB, tf_op="before", region_type="output", data_type=1, shape="[1]")
    line.event("train", t0 + 100, 1000, _r=1, step_num=7)
    memory_event(line, "MemoryAllocation", t0 + 200, heap=3 * MIB, free=8 * MIB, requested=2 * MIB,
                 allocated=2 * MIB, address=0x20, peak=3 * MIB, tf_op="a", region_type="temp", data_type=1,
                 shape="[2]")
    memory_event(line, "MemoryDeallocation", t0 + 300, heap=MIB, free=10 * MIB, requested=2 * MIB, allocated=2 * MIB,
                 address=0x20, peak=3 * MIB)
    line.event("train", t0 + 2000, 1000, _r=1, step_num=8)
    memory_event(line, "MemoryAllocation", t0 + 2100, heap=2 * MIB, stack=MIB // 2, free=8 * MIB, requested=MIB,
                 allocated=MIB, address=0x30, peak=3 * MIB, tf_op="b", region_type="output", data_type=14,
                 shape="[3]", fragmentation=0.25)
    memory_event(line, "MemoryAllocation", t0 + 2200, heap=3 * MIB, stack=MIB // 2, free=7 * MIB, requested=MIB,
                 allocated=MIB, address=0x40, peak=3 * MIB, tf_op="b", region_type="output", data_type=14,
                 shape="[3]", fragmentation=0.5)
    memory_event(line, "MemoryDeallocation", t0 + 2300, heap=2 * MIB, stack=MIB // 2, free=8 * MIB, requested=MIB,
                 allocated=MIB, address=0x99, peak=3 * MIB)
    memory_event(line, "MemoryAllocation", t0 + 5000, heap=MIB, free=10 * MIB, requested=MIB, allocated=MIB,
                 address=0x50, peak=3 * MIB, tf_op="after")
    return b.capture()


def test_roots_group_nested_events_and_steps_are_repaired():
    capture = _stepped_capture()
    profile = memory_profiles(capture)["bfc"]
    t = profile.timeline
    assert list(t["time_ps"]) == [10, 200, 300, 2100, 2200, 2300, 5000]  # line-relative offsets
    # Grouped: 0 and 1 (two train roots); the leading event gets 0, the trailing one last + 1.
    assert list(t["step"]) == [0, 0, 0, 1, 1, 1, 2]


def test_peak_summary_is_the_last_event_with_the_most_in_use():
    p = memory_profiles(_stepped_capture())["bfc"]
    assert p.peak_bytes == 3 * MIB + MIB // 2
    assert p.peak_time_ps == 2200
    assert p.peak_stats == {"stack_bytes": MIB // 2, "heap_bytes": 3 * MIB, "free_bytes": 7 * MIB,
                            "fragmentation": 0.5, "peak_bytes_in_use": 3 * MIB + MIB // 2}
    assert p.memory_capacity == 3 * MIB + MIB // 2 + 7 * MIB
    assert p.peak_bytes_usage_lifetime == 3 * MIB  # the last event's own figure
    assert p.peak_step == 1
    assert p.fragmentation_percent == 50.0
    assert (p.allocations, p.deallocations) == (5, 2)


def test_deallocations_show_what_their_allocation_held():
    t = memory_profiles(_stepped_capture())["bfc"].timeline
    dealloc = t[t["time_ps"] == 300].iloc[0]
    assert (dealloc["tf_op"], dealloc["region_type"], dealloc["data_type"], dealloc["shape"]) == (
        "a", "temp", "float", "[2]")
    unmatched = t[t["time_ps"] == 2300].iloc[0]
    assert unmatched["tf_op"] == "" and unmatched["data_type"] == ""


def test_breakdown_at_peak_merges_equal_rows_and_adds_special_rows():
    b = memory_profiles(_stepped_capture())["bfc"].breakdown
    rows = [tuple(r) for r in b.itertuples(index=False)]
    # Step 1 up to the peak: two equal 1 MiB allocations of op b (merged), heap 3 MiB of which
    # 2 MiB are accounted for -> 1 MiB unused preallocated; stack 0.5 MiB.
    assert rows == [
        ("b", MIB, MIB, 2, "output", "bfloat16", "[3]"),
        (UNUSED_PREALLOCATED, MIB, MIB, 1, "persist/dynamic", "INVALID", "unknown"),
        ("stack", MIB // 2, MIB // 2, 1, "stack", "INVALID", "unknown"),
    ]


def test_unmatched_deallocation_before_peak_counts_against_unmapped_bytes():
    b = Space(("host",))
    line = b.plane("/host:CPU").line(name="t")
    memory_event(line, "MemoryDeallocation", 5, heap=MIB, allocated=MIB, address=0x1, peak=2 * MIB)
    memory_event(line, "MemoryAllocation", 10, heap=2 * MIB, requested=MIB, allocated=MIB, address=0x2,
                 peak=2 * MIB, tf_op="x")
    rows = [tuple(r) for r in memory_profiles(b.capture())["bfc"].breakdown.itertuples(index=False)]
    # heap 2 MiB - 1 MiB allocated + 1 MiB deallocated - 1 MiB unmapped deallocation = 1 MiB;
    # equal sizes sort by op name.
    assert rows == [(UNUSED_PREALLOCATED, MIB, MIB, 1, "persist/dynamic", "INVALID", "unknown"),
                    ("x", MIB, MIB, 1, "", "", "")]


def _reference_sample(in_use, limit=1000):
    n = len(in_use)
    w = n // limit
    count1 = limit * (w + 1) - n
    out = []
    for width, count, start in ((w, count1, 0), (w + 1, limit - count1, w * count1)):
        for i in range(count):
            box = list(in_use[start + width * i: start + width * (i + 1)])
            out.append(start + width * i + box.index(max(box)))
    return out


def test_large_timelines_are_sampled_like_xprof():
    rng = np.random.default_rng(1)
    heap = rng.integers(1, 1000, size=2500) * 1024
    b = Space(("host",))
    line = b.plane("/host:CPU").line(name="t")
    for i, h in enumerate(heap):
        memory_event(line, "MemoryAllocation", 10 * (i + 1), heap=int(h), allocated=1, address=i + 1)
    p = memory_profiles(b.capture())["bfc"]
    assert p.events == 2500 and p.sampled
    assert len(p.timeline) == 1000
    expected = _reference_sample(list(heap))
    assert list(p.timeline["time_ps"]) == [10 * (i + 1) for i in expected]


def test_memory_ids_from_allocator_names_and_device_indices():
    b = Space(("host",))
    host = b.plane("/host:CPU")
    host.stat_id("GPU_0_bfc")
    line = host.line(name="t")
    line.event("MemoryAllocation", 1, 1, allocator_name=Ref("GPU_0_bfc"), bytes_allocated=5, allocation_bytes=5)
    line.event("MemoryAllocation", 2, 1, index_on_host=3, bytes_allocated=7, allocation_bytes=7)
    line.event("MemoryAllocation", 3, 1, bytes_allocated=1)
    profiles = memory_profiles(b.capture())
    assert list(profiles) == ["", "3", "GPU_0_bfc"]  # sorted as XProf sorts memory ids
    assert profiles["3"].peak_bytes == 7


def test_an_allocator_name_given_as_bytes_reads_as_no_name():
    """XProf reads allocator_name with StrOrRefValue: bytes are no name (a fuzzed capture gave bytes and the
    memory ids, bytes and text, could not be sorted: an internal error)."""
    b = Space(("host",))
    line = b.plane("/host:CPU").line(name="t")
    line.event("MemoryAllocation", 1, 1, allocator_name=b"\x00raw", bytes_allocated=5, allocation_bytes=5)
    line.event("MemoryAllocation", 2, 1, allocator_name="bfc", bytes_allocated=7, allocation_bytes=7)
    profiles = memory_profiles(b.capture())
    assert list(profiles) == ["", "bfc"]
    assert profiles[""].peak_bytes == 5


def test_out_of_memory_is_flagged_near_capacity_and_on_failed_allocations():
    b = Space(("host",))
    line = b.plane("/host:CPU").line(name="t")
    memory_event(line, "MemoryAllocation", 1, allocator="near", heap=95, free=5, allocated=95, requested=95)
    memory_event(line, "MemoryAllocation", 1, allocator="roomy", heap=50, free=50, allocated=50, requested=50)
    memory_event(line, "MemoryAllocation", 1, allocator="failed", heap=10, free=90, allocated=10, requested=10)
    memory_event(line, "MemoryAllocation", 2, allocator="failed", heap=10, free=90, allocated=0, requested=64)
    b.proto.warnings.append("Allocator ran out of memory trying to allocate 64B")
    capture = b.capture()
    p = memory_profiles(capture)
    assert p["near"].near_capacity and p["near"].out_of_memory
    assert not p["roomy"].out_of_memory
    assert p["failed"].failed_allocations == 1 and p["failed"].out_of_memory
    assert out_of_memory_messages(capture) == ["Allocator ran out of memory trying to allocate 64B"]


def test_no_host_plane_or_no_memory_events_means_no_profile():
    b = Space(("host",))
    b.plane("/device:GPU:0").line(name="s").event("MemoryAllocation", 1, 1, bytes_allocated=1)
    assert memory_profiles(b.capture()) == {}
    b = Space(("host",))
    b.plane("/host:CPU").line(name="t").event("op", 1, 1)
    assert memory_profiles(b.capture()) == {}


def test_stats_are_read_as_the_converter_walks_them():
    """The last copy of a duplicated stat wins; metadata stats are not the event's."""
    b = Space(("host",))
    host = b.plane("/host:CPU")
    host.metadata("MemoryAllocation", bytes_available=999)
    line = host.line(name="t")
    memory_event(line, "MemoryAllocation", 5, heap=MIB, allocated=MIB, tf_op="first")
    line.event("MemoryDeallocation", 9, 1, allocator_name="bfc", bytes_allocated=0, tf_op="x")
    event = line.proto.events[0]
    for name, value in (("bytes_allocated", 2 * MIB), ("tf_op", "second")):
        stat = event.stats.add()
        stat.metadata_id = host.stat_id(name)
        if isinstance(value, int):
            stat.int64_value = value
        else:
            stat.str_value = value
    capture = b.capture()
    p = memory_profiles(capture)["bfc"]
    assert p.peak_stats["heap_bytes"] == 2 * MIB and p.peak_stats["free_bytes"] == 0
    assert p.timeline["tf_op"].iloc[0] == "second"
    assert allocator_capacities(EventTable(capture)) == {"bfc": p.memory_capacity}


def test_hlo_module_runs_number_every_tpu_cores_modules_with_line_relative_times():
    space = Space(("host",))
    space.plane("/host:CPU").line(1, "python").event("x", 0, 1)
    for core, line_start_ns in ((1, 5_000), (0, 2_000)):  # planes in capture order, not by core number
        plane = space.plane(f"/device:TPU:{core}")
        plane.line(1, "XLA Ops", timestamp_ns=line_start_ns).event("fusion", line_start_ns * 1000 + 10, 5)
        modules = plane.line(2, "XLA Modules", timestamp_ns=line_start_ns)
        modules.event("jit_f(7)", line_start_ns * 1000 + 100, 50).event("jit_g(8)", line_start_ns * 1000 + 400, 7)
    space.plane("/device:GPU:0").line(1, "XLA Modules").event("gpu module", 0, 1)  # TPU planes only
    runs = hlo_module_runs(EventTable(space.capture()))
    assert hlo_modules_json(runs) == [
        {"name": "jit_f(7)", "startTimePs": "100", "endTimePs": "150", "id": "0", "planeName": "TPU:1"},
        {"name": "jit_g(8)", "startTimePs": "400", "endTimePs": "407", "id": "1", "planeName": "TPU:1"},
        {"name": "jit_f(7)", "startTimePs": "100", "endTimePs": "150", "id": "2", "planeName": "TPU:0"},
        {"name": "jit_g(8)", "startTimePs": "400", "endTimePs": "407", "id": "3", "planeName": "TPU:0"},
    ]
    assert hlo_module_runs(EventTable(Space().capture())).empty


def test_absurd_byte_counts_wrap_as_int64_without_a_warning():
    """Byte counts near 2^63 (a fuzzed capture) add up in int64 as XProf's do: no overflow warning, no number
    that summary.json could not hold."""
    import warnings

    from reportgen.core.tools.memory_profile import allocator_capacities

    b = Space(("host",))
    line = b.plane("/host:CPU").line(name="t")
    memory_event(line, "MemoryAllocation", 1, stack=2**62, heap=2**62, free=2**62, allocated=8, requested=8)
    capture = b.capture()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        profile = memory_profiles(capture)["bfc"]
        capacities = allocator_capacities(EventTable(capture))
    assert profile.peak_stats["peak_bytes_in_use"] == -(2**63)  # 2^62 + 2^62 in int64
    assert profile.memory_capacity == -(2**63) + 2**62
    assert capacities == {"bfc": -(2**63) + 2**62}
