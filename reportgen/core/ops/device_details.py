"""Per-op details of the device op database that the op tools need beyond `OpMetricsDb`.

The device op metrics DB (`core.ops.device_db`) holds times, flops and
bytes per op. The op profile, HLO op stats and roofline also read, per op
(docs/xprof/op_stats.md §4.1, §4.5):

* the time normalized to the device's nominal clock (`time_scale_multiplier`
  event stat, 1 when absent) and the time stalled on DMA;
* the memory traffic by memory space and direction (the `memory_access_breakdown`
  metadata stat, per occurrence, times the occurrences);
* the deduplicated name, the source line and stack;
* from the HLO modules: the HLO text, shape and layout, and a fusion's inner
  instructions (`core.hlo.ops`).

They are computed per host where the capture is decoded, keyed like the op
DB by (`hlo_module_id`, `name`), and combined over hosts by
`combine_device_op_details` the way XProf's DB combiner adds records up.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from reportgen.capture import KIND_BYTES, NO_STRING, HostCapture
from reportgen.core.events import schema
from reportgen.core.events.table import EventTable
from reportgen.core.frames import empty_frame
from reportgen.core.hlo.model import HloModule
from reportgen.core.hlo.ops import HloOp, HloOpIndex
from reportgen.core.ops.op_metrics import IDLE, OpMetricsDb
from reportgen.core.ops.perf_env import plane_stats
from reportgen.core.steps.events import device_timespans

KEY = ["hlo_module_id", "name"]
OP_COLUMNS = [*KEY, "normalized_time_ps", "dma_stall_ps", "deduplicated_name", "source_file", "source_line",
              "source_stack", "core_type"]
MEMORY_COLUMNS = [*KEY, "memory_space", "operation_type", "bytes"]
TENSOR_CORE = "TensorCore"
READ, WRITE = 1, 2
HBM = 1  # XProf's MemorySpace / PerformanceInfo HBM


@empty_frame
def empty_ops() -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype=object if c in ("name", "deduplicated_name", "source_file",
                                                             "source_stack", "core_type") else
                                      np.float64 if c == "normalized_time_ps" else np.int64)
                         for c in OP_COLUMNS})


@empty_frame
def empty_memory() -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype=object if c == "name" else np.int64) for c in MEMORY_COLUMNS})


@dataclass
class DeviceOpDetails:
    """Details of a host's (or a run's) device ops; see the module docstring."""

    ops: pd.DataFrame = field(default_factory=empty_ops)
    memory: pd.DataFrame = field(default_factory=empty_memory)
    hlo: dict[tuple[int, str], HloOp] = field(default_factory=dict)  # (hlo_module_id, name) → HLO instruction
    program_names: dict[int, str] = field(default_factory=dict)  # unsigned program id → HLO module name
    # TPU memory layout flags of the first TPU plane (XProf's PerfEnv has_merged_vmem / has_megacore).
    has_merged_vmem: bool = False
    has_megacore: bool = False


def _split_source(text: str) -> tuple[str, int]:
    """`file:line` → (file, line); a text without a line number is all file."""
    head, sep, tail = text.rpartition(":")
    if sep and tail.isdigit():
        return head, int(tail)
    return text, 0


def _tpu_op_events(table: EventTable) -> pd.DataFrame:
    """Per TensorCore op-line event: its op key, occurrences, times and metadata row."""
    planes = table.planes_named(lambda n: n.startswith(schema.TPU_PLANE_PREFIX)
                                and not schema.SPARSE_CORE_RE.match(n))
    lines = np.concatenate([table.lines_of_plane(p) for p in planes]) if planes else np.zeros(0, np.int64)
    lines = lines[np.isin(table.line_names[lines], schema.OP_LINE_NAMES)]
    rows = table.events_of_lines(lines)
    program, has_program = table.md_int_stat("program_id")
    symbol, has_symbol = table.md_int_stat("symbol_id")
    md = table.md[rows]
    keep = has_program[md] & has_symbol[md] & (symbol[md] != 0)
    rows, md = rows[keep], md[keep]
    _, duration = device_timespans(table, rows)
    multiplier, has_multiplier = table.double_stat("time_scale_multiplier")
    dma, _ = table.int_stat("dma_stall_duration_ps", uint_ok=False)
    display = table.md_display_names[md]
    occurrences = table.capture.events["num_occurrences"].to_numpy(np.int64)[rows]
    return pd.DataFrame({
        "hlo_module_id": program[md], "name": np.where(display != "", display, table.md_names[md]).astype(object),
        "md": md, "occ": np.maximum(1, occurrences),
        "normalized_time_ps": duration * np.where(has_multiplier[rows], multiplier[rows], 1.0),
        "dma_stall_ps": dma[rows],
    })


def _md_bytes_stat(table: EventTable, name: str) -> np.ndarray:
    """Interned id of a bytes-valued metadata stat per metadata row (NO_STRING when absent)."""
    rows = table.capture.stat_rows(table.capture.metadata_stats, name)
    out = np.full(len(table.md_names), NO_STRING, np.int32)
    if len(rows):
        out[rows.owner[::-1]] = np.where(rows.kind == KIND_BYTES, rows.str_id, NO_STRING)[::-1]
    return out


def _tpu_details(table: EventTable) -> tuple[pd.DataFrame, pd.DataFrame]:
    events = _tpu_op_events(table)
    if events.empty:
        return empty_ops(), empty_memory()
    grouped = events.groupby(KEY, sort=False)
    ops = grouped.agg(normalized_time_ps=("normalized_time_ps", "sum"), dma_stall_ps=("dma_stall_ps", "sum"),
                      md=("md", "first")).reset_index()
    mds = ops["md"].to_numpy()
    strings = table.capture.strings

    def md_text(stat: str) -> list[str]:
        ids = table.md_str_stat(stat)[mds]
        return [strings[i] if i != NO_STRING and isinstance(strings[i], str) else "" for i in ids]

    sources = [_split_source(s) for s in md_text("source")]
    ops["deduplicated_name"] = md_text("deduplicated_name")
    ops["source_file"] = [f for f, _ in sources]
    ops["source_line"] = np.array([line for _, line in sources], np.int64)
    ops["source_stack"] = md_text("source_stack")
    ops["core_type"] = TENSOR_CORE
    ops = ops[OP_COLUMNS]

    # Memory traffic: each metadata's breakdown (per occurrence) times the occurrences of its events.
    raw_ids = _md_bytes_stat(table, "memory_access_breakdown")
    per_md = events.groupby([*KEY, "md"], sort=False)["occ"].sum().reset_index()
    rows = []
    for md in np.unique(per_md["md"]):
        # (memory space, operation type, bytes) tuples, decoded by the loader (loaders/stat_protos.py).
        breakdown_rows = table.capture.proto_stats.get(("memory_access_breakdown", int(raw_ids[md])), [])
        for space, op_type, nbytes in breakdown_rows:
            rows.append((md, space, op_type, nbytes))
    if not rows:
        return ops, empty_memory()
    breakdown = pd.DataFrame(rows, columns=["md", "memory_space", "operation_type", "bytes"])
    merged = per_md.merge(breakdown, on="md")
    merged["bytes"] = merged["bytes"] * merged["occ"]
    memory = merged.groupby([*KEY, "memory_space", "operation_type"], sort=False)["bytes"].sum().reset_index()
    return ops, memory[MEMORY_COLUMNS]


def _gpu_details(device_db: OpMetricsDb, index: HloOpIndex) -> pd.DataFrame:
    """XLA ops on GPU: deduplicated name and source line from their HLO instruction."""
    m = device_db.metrics
    records = []
    for pid, name in zip(m["hlo_module_id"].tolist(), m["name"].tolist()):
        op = index.find(pid, name) if pid != 0 else None
        if op is None:
            continue
        records.append({"hlo_module_id": pid, "name": name, "normalized_time_ps": 0.0, "dma_stall_ps": 0,
                        "deduplicated_name": op.deduplicated_name,
                        "source_file": op.source_file.rsplit("/", 1)[-1], "source_line": op.source_line,
                        "source_stack": "", "core_type": ""})
    return pd.DataFrame(records, columns=OP_COLUMNS) if records else empty_ops()


def device_op_details(capture: HostCapture, device_db: OpMetricsDb, is_tpu: bool,
                      modules: dict[int, HloModule], table: EventTable | None = None) -> DeviceOpDetails:
    """The details of one host's device ops (`device_db`: that host's device op DB; `modules`: its
    HLO modules; `table`: the capture's shared event columns, when the caller has them)."""
    index = HloOpIndex(modules)
    if is_tpu:
        ops, memory = _tpu_details(table if table is not None else EventTable(capture))
    else:
        ops, memory = _gpu_details(device_db, index), empty_memory()
    hlo = {}
    m = device_db.metrics
    for pid, name, category in zip(m["hlo_module_id"].tolist(), m["name"].tolist(), m["category"].tolist()):
        if category == IDLE:
            continue
        op = index.find(pid, name)
        if op is not None:
            hlo[(int(pid), name)] = op
    flags = _tpu_flags(capture) if is_tpu else {}
    return DeviceOpDetails(ops=ops, memory=memory, hlo=hlo, program_names=index.program_names,
                           has_merged_vmem=bool(flags.get("has_merged_vmem", 0)),
                           has_megacore=bool(flags.get("has_megacore", 0)))


def _tpu_flags(capture: HostCapture) -> dict:
    rows = capture.plane_rows(schema.TPU_PLANE_PREFIX)
    if rows.empty:
        return {}
    stats = plane_stats(capture, int(rows.index[0]))
    return {k: v for k, v in stats.items() if k in ("has_merged_vmem", "has_megacore") and isinstance(v, int)}


def combine_device_op_details(parts: list[DeviceOpDetails]) -> DeviceOpDetails:
    """Hosts added up: times and bytes summed per op, text from the first host that has it."""
    if len(parts) == 1:
        return parts[0]
    ops = pd.concat([p.ops for p in parts if len(p.ops)], ignore_index=True) if any(len(p.ops) for p in parts) \
        else empty_ops()
    if len(ops):
        grouped = ops.groupby(KEY, sort=False)
        sums = grouped[["normalized_time_ps", "dma_stall_ps"]].sum()
        texts = {}
        for col in ["deduplicated_name", "source_file", "source_stack", "core_type"]:
            texts[col] = ops[col].where(ops[col] != "").groupby([ops[k] for k in KEY], sort=False).first()
        out = sums.join(pd.DataFrame(texts)).fillna("")
        out["source_line"] = grouped["source_line"].max()
        ops = out.reset_index()[OP_COLUMNS]
    memories = [p.memory for p in parts if len(p.memory)]
    memory = (pd.concat(memories, ignore_index=True)
              .groupby([*KEY, "memory_space", "operation_type"], sort=False)["bytes"].sum().reset_index()
              [MEMORY_COLUMNS]) if memories else empty_memory()
    hlo: dict = {}
    names: dict = {}
    for p in parts:
        for key, op in p.hlo.items():
            hlo.setdefault(key, op)
        for pid, name in p.program_names.items():
            names.setdefault(pid, name)
    first = next((p for p in parts if p.has_merged_vmem or p.has_megacore), parts[0])
    return DeviceOpDetails(ops=ops, memory=memory, hlo=hlo, program_names=names,
                           has_merged_vmem=first.has_merged_vmem, has_megacore=first.has_megacore)


__all__ = ["DeviceOpDetails", "HBM", "READ", "WRITE", "combine_device_op_details", "device_op_details"]
