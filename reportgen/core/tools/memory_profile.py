"""Memory profile: allocator activity on the host plane, as XProf computes it.

TensorFlow's allocators (and the TPU runtime) record every allocation and
deallocation as a `MemoryAllocation` / `MemoryDeallocation` event on the
`/host:CPU` plane, with the allocator's state after the operation as stats.
XProf turns them into, per allocator ("memory id"): a summary at the peak,
a sampled timeline and the breakdown of what was live at the peak
(docs/xprof/memory_profile.md). On TPU hosts it also lists when each HLO
module ran on each core (`hlo_module_runs`), which XProf's page uses to zoom
the timeline to one module's run. This module reproduces it over the decoded
event tables; nothing here loops over events in Python.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from reportgen.capture import KIND_INT64, KIND_REF, KIND_STR, NO_STRING, HostCapture, StatTable
from reportgen.core.events import schema
from reportgen.core.events.grouping import Grouping, group_events
from reportgen.core.events.table import EventTable
from reportgen.core.host import HostContext
from reportgen.summary_blocks import Allocator, MemoryBlock

ALLOCATION_EVENT, DEALLOCATION_EVENT = "MemoryAllocation", "MemoryDeallocation"
ALLOCATION, DEALLOCATION = 1, 2
MAX_TIMELINE_SNAPSHOTS = 1000
UNUSED_PREALLOCATED = "unused preallocated device memory"
# The memory breakdown table's columns, XProf's labels (plus exact byte counts).
BREAKDOWN_COLUMNS = {
    "op": "Op Name",
    "allocation_gib": "Allocation Size (GiBs)",
    "requested_gib": "Requested Size (GiBs)",
    "occurrences": "Occurrences",
    "region_type": "Region type",
    "data_type": "Data type",
    "shape": "Shape",
    "allocation_bytes": "Allocation Size (bytes)",
    "requested_bytes": "Requested Size (bytes)",
}
NEAR_CAPACITY = 0.10  # a peak within 10% of capacity is reported as out-of-memory risk

_DATA_TYPES = [
    "INVALID", "float", "double", "int32", "uint8", "int16", "int8", "string", "complex64", "int64", "bool",
    "qint8", "quint8", "qint32", "bfloat16", "qint16", "quint16", "uint16", "complex128", "half", "resource",
    "variant", "uint32", "uint64", "float8_e5m2", "float8_e4m3fn", "float8_e4m3fnuz", "float8_e4m3b11fnuz",
    "float8_e5m2fnuz", "int4", "uint4",
]


def data_type_string(code: int) -> str:
    """TensorFlow's `DataTypeString` for a `DataType` enum value."""
    if 0 <= code < len(_DATA_TYPES):
        return _DATA_TYPES[code]
    if 100 < code < 100 + len(_DATA_TYPES):
        return _DATA_TYPES[code - 100] + "_ref"
    return f"unknown dtype enum ({code})"


SNAPSHOT_COLUMNS = [
    "time_ps", "activity", "stack_bytes", "heap_bytes", "free_bytes", "fragmentation", "peak_bytes_in_use",
    "requested_bytes", "allocation_bytes", "address", "tf_op", "step", "region_type", "data_type", "shape",
]


@dataclass
class AllocatorProfile:
    """XProf's `PerAllocatorMemoryProfile` for one memory id, in plain tables.

    `timeline` is XProf's `sampled_timeline_snapshots` (all events when there
    are at most 1000), sorted by time; `breakdown` its active allocations at
    the peak (special rows first where XProf sorts them first).
    """

    memory_id: str
    events: int  # snapshots recorded for this allocator
    timeline: pd.DataFrame  # SNAPSHOT_COLUMNS, time_ps line-relative as XProf's time_offset_ps
    peak_bytes_usage_lifetime: int
    peak_stats: dict  # stack_bytes, heap_bytes, free_bytes, fragmentation, peak_bytes_in_use
    peak_time_ps: int
    memory_capacity: int
    peak_step: int
    breakdown: pd.DataFrame  # op, allocation_bytes, requested_bytes, occurrences, region_type, data_type, shape
    failed_allocations: int = 0  # allocation events that requested bytes but got none

    @property
    def peak_bytes(self) -> int:
        return self.peak_stats["peak_bytes_in_use"]

    @property
    def near_capacity(self) -> bool:
        """The peak is within NEAR_CAPACITY of the allocator's capacity."""
        return self.memory_capacity > 0 and self.peak_bytes >= (1 - NEAR_CAPACITY) * self.memory_capacity

    @property
    def out_of_memory(self) -> bool:
        return self.near_capacity or self.failed_allocations > 0

    @property
    def allocations(self) -> int:
        """Counted over the timeline shown, as XProf's summary counts them."""
        return int((self.timeline["activity"] == ALLOCATION).sum())

    @property
    def deallocations(self) -> int:
        return int((self.timeline["activity"] == DEALLOCATION).sum())

    @property
    def sampled(self) -> bool:
        return self.events > len(self.timeline)

    @property
    def fragmentation_percent(self) -> float:
        return 100.0 * self.peak_stats["fragmentation"]


def _memory_events(table: EventTable) -> np.ndarray:
    """Rows of the memory events on the host plane, in line then file order."""
    if table.host_plane is None:
        return np.zeros(0, dtype=np.int64)
    is_memory_md = np.isin(table.md_names, [ALLOCATION_EVENT, DEALLOCATION_EVENT])
    # The host plane's lines are stored in order, each line's events contiguously.
    return np.flatnonzero((table.plane == table.host_plane) & is_memory_md[table.md])


def _memory_ids(table: EventTable, rows: np.ndarray) -> np.ndarray:
    """The memory id of each event: the last of index_on_host / device_ordinal / allocator_name."""
    capture = table.capture
    stats = capture.event_stats
    is_memory = np.zeros(table.n, bool)
    is_memory[rows] = True
    # Only these three stats of the memory events, back in file order so the last one wins.
    positions = np.concatenate([table.stat_positions(k) for k in ("index_on_host", "device_ordinal", "allocator_name")])
    positions = np.sort(positions[is_memory[stats.owner[positions]]])
    out = np.full(len(rows), "", dtype=object)
    if len(positions) == 0:
        return out
    sel = StatTable(stats.owner[positions], stats.key[positions], stats.kind[positions], stats.raw[positions],
                    stats.str_id[positions])
    is_name = sel.key == capture.string_id("allocator_name")
    text = np.empty(len(sel), dtype=object)
    ints = np.where(sel.kind == KIND_INT64, sel.raw, 0)  # IntValue
    unique_ints, inverse = np.unique(ints[~is_name], return_inverse=True)
    text[~is_name] = unique_ints.astype(str).astype(object)[inverse.reshape(-1)]
    # StrOrRefValue: a name given as bytes (or a number) reads as "" (a bytes id would not sort with text).
    is_text = (sel.kind == KIND_STR) | (sel.kind == KIND_REF)
    text[is_name] = _strings(table, np.where(is_text, sel.str_id, NO_STRING)[is_name])
    out[np.searchsorted(rows, sel.owner)] = text  # in file order: the last one wins (rows are sorted)
    return out


def _strings(table: EventTable, ids: np.ndarray) -> np.ndarray:
    unique, inverse = np.unique(ids, return_inverse=True)
    return table.strings(unique)[inverse.reshape(-1)]


def snapshot_table(table: EventTable, group_id: np.ndarray | None = None) -> pd.DataFrame:
    """Every memory event of the host plane with XProf's snapshot fields, in event order.

    Stats are read as XProf's converter reads them (its own stats, IntValue,
    the last of duplicates). `group_id` is the step group of every event
    (`Grouping.group_id`); without it steps read -1, for callers that only
    need the allocator states.
    """
    rows = _memory_events(table)
    if len(rows) == 0:
        return pd.DataFrame(columns=["memory_id", *SNAPSHOT_COLUMNS])
    line_start_ps = table.capture.lines["timestamp_ns"].to_numpy(np.int64)[table.line[rows]] * 1000
    columns = {
        "memory_id": _memory_ids(table, rows),
        "time_ps": table.start[rows] - line_start_ps,
        "activity": np.where(table.md_names[table.md[rows]] == ALLOCATION_EVENT, ALLOCATION, DEALLOCATION),
    }
    for column, stat in (("stack_bytes", "bytes_reserved"), ("heap_bytes", "bytes_allocated"),
                         ("free_bytes", "bytes_available"), ("peak_bytes_in_use", "peak_bytes_in_use"),
                         ("requested_bytes", "requested_bytes"), ("allocation_bytes", "allocation_bytes"),
                         ("address", "addr")):
        columns[column] = table.int_stat_at(stat, rows, uint_ok=False, last=True)[0]
    columns["fragmentation"] = table.double_stat_at("fragmentation", rows, last=True)[0]
    columns["step"] = group_id[rows] if group_id is not None else np.full(len(rows), -1, dtype=np.int64)
    for column, stat in (("tf_op", "tf_op"), ("region_type", "region_type"), ("shape", "shape")):
        columns[column] = _strings(table, table.str_stat_at(stat, rows, last=True))
    code, has_type = table.int_stat_at("data_type", rows, uint_ok=False, last=True)
    unique, inverse = np.unique(code, return_inverse=True)
    types = np.array([data_type_string(int(c)) for c in unique], dtype=object)[inverse.reshape(-1)]
    columns["data_type"] = np.where(has_type, types, "")
    return pd.DataFrame(columns)


def _peak(snapshots: pd.DataFrame) -> int:
    """Position (event order) of XProf's peak: the last event with the highest stack + heap."""
    in_use = (snapshots["stack_bytes"] + snapshots["heap_bytes"]).to_numpy()
    return int(np.flatnonzero(in_use == in_use.max())[-1])


def _int64_sum(*values: int) -> int:
    """The sum as XProf computes it, in int64 arithmetic: absurd byte counts in a capture wrap around (as
    the arrays above do) instead of growing past what the pages and summary.json can hold."""
    return int(np.array(values, dtype=np.int64).sum())


def _repair_steps(step: np.ndarray) -> np.ndarray:
    """Ungrouped events take the step after the last grouped one (XProf UpdateStepId)."""
    valid = step != -1
    last = np.maximum.accumulate(np.where(valid, np.arange(len(step)), -1))
    previous = np.where(last >= 0, step[np.maximum(last, 0)], -1)
    return np.where(valid, step, previous + 1)


def _copy_allocation_metadata(snap: pd.DataFrame) -> pd.DataFrame:
    """A deallocation shows what its allocation held (XProf UpdateDeallocation).

    Per address, in time order: the first allocation after the previous
    deallocation is the one a deallocation matches; a deallocation with no
    allocation since the previous one matches nothing.
    """
    order = np.arange(len(snap))
    frame = pd.DataFrame({"address": snap["address"].to_numpy(), "order": order,
                          "dealloc": (snap["activity"] == DEALLOCATION).to_numpy()})
    frame = frame.sort_values(["address", "order"], kind="stable")
    # Segment = number of deallocations strictly before, per address.
    frame["segment"] = frame.groupby("address")["dealloc"].cumsum() - frame["dealloc"]
    allocs = frame[~frame["dealloc"]]
    first_alloc = allocs.groupby(["address", "segment"])["order"].first()
    deallocs = frame[frame["dealloc"]]
    source = first_alloc.reindex(pd.MultiIndex.from_arrays([deallocs["address"], deallocs["segment"]]))
    matched = source.notna().to_numpy()
    targets = deallocs["order"].to_numpy()[matched]
    sources = source.to_numpy()[matched].astype(np.int64)
    out = snap.copy()
    for column in ("tf_op", "region_type", "data_type", "shape"):
        values = out[column].to_numpy().copy()
        values[targets] = values[sources]
        out[column] = values
    return out


def _sample(snap: pd.DataFrame, limit: int = MAX_TIMELINE_SNAPSHOTS) -> np.ndarray:
    """Indices XProf keeps for the timeline: the highest-usage event of each of `limit` windows."""
    n = len(snap)
    if n <= limit:
        return np.arange(n)
    width = n // limit
    count1 = limit * (width + 1) - n
    count2 = limit - count1
    in_use = (snap["stack_bytes"] + snap["heap_bytes"]).to_numpy()
    picks = []
    for w, count, start in ((width, count1, 0), (width + 1, count2, width * count1)):
        if count <= 0:
            continue
        block = in_use[start:start + w * count].reshape(count, w)
        picks.append(start + np.arange(count) * w + block.argmax(axis=1))  # argmax: first max wins
    return np.concatenate(picks)


def _breakdown(snap: pd.DataFrame, peak_step: int, peak_time_ps: int, peak_stats: dict) -> pd.DataFrame:
    """What was live at the peak, in the peak's step (XProf ProcessActiveAllocations)."""
    stop = int(np.searchsorted(snap["time_ps"].to_numpy(), peak_time_ps, side="right"))
    window = snap.iloc[:stop]
    window = window[window["step"].to_numpy() == peak_step]
    alloc_bytes = window["allocation_bytes"].to_numpy()
    is_alloc = (window["activity"] == ALLOCATION).to_numpy()
    unmapped = peak_stats["heap_bytes"] - int(alloc_bytes[is_alloc].sum()) + int(alloc_bytes[~is_alloc].sum())

    # Replay XProf's address map without a loop: an allocation (re)maps its
    # address, a deallocation unmaps it. A deallocation finds its address
    # mapped iff an allocation of it came after the previous deallocation.
    events = pd.DataFrame({"address": window["address"].to_numpy(), "position": np.arange(len(window)),
                           "is_alloc": is_alloc, "is_dealloc": (~is_alloc).astype(np.int64)})
    events["segment"] = events.groupby("address")["is_dealloc"].cumsum() - events["is_dealloc"]
    has_alloc = events[events["is_alloc"]].groupby(["address", "segment"]).size()
    deallocs = events[~events["is_alloc"]]
    mapped = has_alloc.reindex(pd.MultiIndex.from_arrays([deallocs["address"], deallocs["segment"]])).notna()
    unmapped -= int(alloc_bytes[~is_alloc][~mapped.to_numpy()].sum())
    # Live at the end: the last allocation of each address with no deallocation after it.
    last_alloc = events[events["is_alloc"]].groupby("address")["position"].max()
    last_dealloc = deallocs.groupby("address")["position"].max()
    live = last_alloc[last_alloc > last_dealloc.reindex(last_alloc.index).fillna(-1)]
    rows = window.iloc[np.sort(live.to_numpy())][
        ["tf_op", "allocation_bytes", "requested_bytes", "region_type", "data_type", "shape"]
    ].rename(columns={"tf_op": "op"})
    specials = []
    if unmapped > 0:
        specials.append({"op": UNUSED_PREALLOCATED, "allocation_bytes": unmapped, "requested_bytes": unmapped,
                         "region_type": "persist/dynamic", "data_type": "INVALID", "shape": "unknown"})
    if peak_stats["stack_bytes"] > 0:
        stack = peak_stats["stack_bytes"]
        specials.append({"op": "stack", "allocation_bytes": stack, "requested_bytes": stack,
                         "region_type": "stack", "data_type": "INVALID", "shape": "unknown"})
    table = pd.concat([rows, pd.DataFrame(specials, columns=rows.columns)], ignore_index=True)
    keys = ["allocation_bytes", "requested_bytes", "op", "region_type", "data_type", "shape"]
    table = table.sort_values(keys, ascending=[False, False, True, True, True, True], kind="stable")
    merged = table.groupby(keys, sort=False, dropna=False).size().rename("occurrences").reset_index()
    return merged[["op", "allocation_bytes", "requested_bytes", "occurrences", "region_type", "data_type", "shape"]]


def allocator_profile(memory_id: str, events: pd.DataFrame) -> AllocatorProfile:
    """XProf's post-processing of one allocator's events (given in event order)."""
    peak_row = events.iloc[_peak(events)]
    peak_stats = {
        "stack_bytes": int(peak_row["stack_bytes"]),
        "heap_bytes": int(peak_row["heap_bytes"]),
        "free_bytes": int(peak_row["free_bytes"]),
        "fragmentation": float(peak_row["fragmentation"]),
        "peak_bytes_in_use": _int64_sum(int(peak_row["stack_bytes"]), int(peak_row["heap_bytes"])),
    }
    peak_time = int(peak_row["time_ps"])
    capacity = _int64_sum(peak_stats["peak_bytes_in_use"], peak_stats["free_bytes"])
    lifetime_peak = int(events["peak_bytes_in_use"].iloc[-1])

    snap = events.sort_values("time_ps", kind="stable").reset_index(drop=True)
    snap["step"] = _repair_steps(snap["step"].to_numpy())
    snap = _copy_allocation_metadata(snap)
    timeline = snap.iloc[_sample(snap)].reset_index(drop=True)
    in_use = (snap["stack_bytes"] + snap["heap_bytes"]).to_numpy()
    at_peak = np.flatnonzero(in_use == peak_stats["peak_bytes_in_use"])
    peak_step = int(snap["step"].iloc[at_peak[-1]]) if len(at_peak) else 0
    return AllocatorProfile(
        memory_id=memory_id,
        events=len(snap),
        timeline=timeline[SNAPSHOT_COLUMNS],
        peak_bytes_usage_lifetime=lifetime_peak,
        peak_stats=peak_stats,
        peak_time_ps=peak_time,
        memory_capacity=capacity,
        peak_step=peak_step,
        breakdown=_breakdown(snap, peak_step, peak_time, peak_stats),
        failed_allocations=int(((snap["activity"] == ALLOCATION) & (snap["requested_bytes"] > 0)
                                & (snap["allocation_bytes"] == 0)).sum()),
    )


_OOM_TEXT = re.compile(r"out of memory|resource[_ ]?exhausted|\bOOM\b|failed to allocate", re.IGNORECASE)


def out_of_memory_messages(capture: HostCapture) -> list[str]:
    """Errors and warnings the profiler stored in the capture that report memory exhaustion."""
    return [m for m in [*capture.errors, *capture.warnings] if _OOM_TEXT.search(m)]


def allocator_capacities(table: EventTable) -> dict[str, int]:
    """Each allocator's capacity as XProf's summary reports it (in use + free at the peak)."""
    capacities = {}
    for memory_id, events in snapshot_table(table).groupby("memory_id", sort=True):
        peak = events.iloc[_peak(events.reset_index(drop=True))]
        capacities[memory_id] = _int64_sum(int(peak["stack_bytes"]), int(peak["heap_bytes"]), int(peak["free_bytes"]))
    return capacities


def memory_profiles(table: EventTable, grouping: Grouping | None = None) -> dict[str, AllocatorProfile]:
    """Per memory id (sorted as XProf sorts them), the allocator's profile; {} when none.

    Steps come from the host's event grouping (`grouping.group_events`), done
    here when the caller has not done it already.
    """
    if len(_memory_events(table)) == 0:
        return {}
    group_id = (grouping if grouping is not None else group_events(table)).group_id
    snapshots = snapshot_table(table, group_id)
    return {
        memory_id: allocator_profile(memory_id, group.drop(columns="memory_id").reset_index(drop=True))
        for memory_id, group in sorted(snapshots.groupby("memory_id", sort=False), key=lambda kv: kv[0])
    }




# --- HLO modules: when each program ran on each TPU core -------------------------------------------

TPU_PLANE_PREFIX = "/device:TPU:"
MODULE_COLUMNS = ["id", "name", "plane", "start_ps", "end_ps"]


def hlo_module_runs(table: EventTable) -> pd.DataFrame:
    """XProf's `hlo_modules` of the memory profile: every event of the `XLA Modules` line of every TPU
    plane (planes in capture order, events in line order), numbered from 0, with its device (the plane
    name without `/device:`) and its start and end as offsets from its line's start, like the
    allocator timeline's times."""
    lines = table.capture.lines
    frames = []
    for plane in table.planes_named(lambda name: name.startswith(TPU_PLANE_PREFIX)):
        device = table.plane_names[plane][len("/device:"):]
        for line in np.flatnonzero((lines["plane"].to_numpy() == plane)
                                   & (lines["name"].to_numpy() == schema.XLA_MODULE_LINE)).tolist():
            first, count = int(table.line_first[line]), int(table.line_count[line])
            rows = np.arange(first, first + count)
            start = table.start[rows] - int(lines["timestamp_ns"].iat[line]) * 1000
            frames.append(pd.DataFrame({"name": table.md_names[table.md[rows]], "plane": device, "start_ps": start,
                                        "end_ps": start + table.duration[rows]}))
    if not frames:
        return pd.DataFrame({c: pd.Series(dtype=object if c in ("name", "plane") else np.int64)
                             for c in MODULE_COLUMNS})
    runs = pd.concat(frames, ignore_index=True)
    runs.insert(0, "id", np.arange(len(runs), dtype=np.int64))
    return runs


def hlo_modules_json(runs: pd.DataFrame) -> list[dict]:
    """The runs as XProf's memory profile JSON lists them (64-bit numbers as strings)."""
    return [{"name": name, "startTimePs": str(start), "endTimePs": str(end), "id": str(i), "planeName": plane}
            for i, name, plane, start, end in zip(runs["id"], runs["name"], runs["plane"], runs["start_ps"],
                                                  runs["end_ps"])]


# --- the tool: every allocator of every host ------------------------------------------------------


@dataclass
class HostMemoryProfile:
    profiles: dict[str, AllocatorProfile]
    oom_messages: list[str] = field(default_factory=list)
    hlo_modules: pd.DataFrame | None = None  # hlo_module_runs(): the TPU programs' runs, to zoom the timeline to


def host_memory_profile(host: HostContext) -> HostMemoryProfile | None:
    """The host's allocators (None when it recorded no allocation), its out-of-memory errors and its
    HLO module runs."""
    profiles = memory_profiles(host.events, host.grouping)
    if not profiles:
        return None
    return HostMemoryProfile(profiles=profiles, oom_messages=out_of_memory_messages(host.capture),
                             hlo_modules=hlo_module_runs(host.events))


def memory_profile_summary(hosts: dict[str, HostMemoryProfile]) -> MemoryBlock:
    """The memory profile's part of the run's `memory` block: every allocator, keyed `<host>/<memory id>`."""
    profiles = {}
    for host, part in hosts.items():
        for memory_id, p in part.profiles.items():
            profiles[f"{host}/{memory_id}"] = Allocator(
                peak_bytes=p.peak_bytes,
                peak_time_ms=p.peak_time_ps / 1e9,
                capacity_bytes=p.memory_capacity,
                fragmentation_percent=p.fragmentation_percent,
                allocations=p.allocations,
                deallocations=p.deallocations,
            )
    return MemoryBlock(profiles=profiles)


__all__ = ["BREAKDOWN_COLUMNS", "NEAR_CAPACITY", "allocator_capacities", "AllocatorProfile", "data_type_string",
           "hlo_module_runs", "hlo_modules_json", "host_memory_profile", "HostMemoryProfile", "memory_profile_summary",
           "memory_profiles", "out_of_memory_messages", "snapshot_table"]
