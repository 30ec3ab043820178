"""GPU kernel stats: one report per kernel–op pair, as XProf's kernel_stats DB.

Rules: `docs/xprof/kernel_stats.md` and `op_stats.md` §6/§9, checked against
XProf 2.24.2 (the oracle) where the write-up is silent:

* Only GPU planes (`/device:GPU:*`), non-derived lines, events with a
  non-zero duration whose **own** last `kernel_details` stat (string or ref)
  is non-empty. Durations are truncated to whole nanoseconds.
* The aggregation key is (kernel name, grid, block, registers, static and
  dynamic shared memory, uses TensorCore, op TensorCore-eligible, op name);
  occupancy is not part of it: the first event of a key (plane, line, event
  order) supplies it.
* TensorCore use depends on the plane's `device_vendor`: Nvidia and AMD
  each have a list of kernel-name fragments; any other vendor (or none)
  never counts as using TensorCores.
* Op eligibility: the TF op name rules, plus JAX's `dot_general` and
  `conv_general_dilated` anywhere in the name; for kernels with a `tf_op`,
  an einsum equation `x,y->z` or a TensorCore kernel also makes the op
  eligible.
* Reports are sorted by total duration (descending), ties by the key
  (ascending), and the top 1000 kept — per host, and again after the hosts'
  reports are concatenated (identical reports of two hosts stay two rows).

The work is grouped: events are first aggregated per distinct combination
of raw ids (kernel name, kernel_details string, tf_op, equation, hlo_op,
program id, vendor), so every string is parsed once per distinct value.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from reportgen.capture import KIND_REF, KIND_STR, NO_STRING
from reportgen.core.events import schema
from reportgen.core.events.table import EventTable
from reportgen.core.events.tf_op import parse_tf_op_fullname
from reportgen.core.frames import empty_frame
from reportgen.core.hlo.model import HloModule, instruction_provenance, program_key

MAX_KERNEL_REPORTS = 1000  # XProf's kMaxNumOfKernels

VENDOR_OTHER, VENDOR_NVIDIA, VENDOR_AMD = 0, 1, 2

NVIDIA_TENSOR_CORE_FRAGMENTS = (
    "16816", "c1688", "conv1x1", "conv2d_c1_k1", "dgrad_1x1_stride_2x2", "direct_group",
    "first_layer_wgrad_kernel", "h1688", "h884", "hmma", "i16832", "i8816", "s884", "s1688",
    "xmma_gemm", "xmma_implicit_gemm", "xmma_sparse_conv", "xmma_sparse_gemm",
    "xmma_warp_specialized_implicit_gemm",
)
# Matrix-core kernels on AMD GPUs (measured on XProf 2.24.2; case-sensitive).
AMD_TENSOR_CORE_FRAGMENTS = ("mfma", "wmma", "xdl", "attn_fwd")

_OP_ENDINGS = (
    "Conv2D", "Conv2DBackpropFilter", "Conv2DBackpropInput", "Conv3D", "DepthwiseConv2dNative",
    "DepthwiseConv2dNativeBackpropFilter", "DepthwiseConv2dNativeBackpropInput", "/MatMul", "FusedMatMul",
    "/CudnnRNN", "XlaDot", "XlaDotV2",
)
_OP_FRAGMENTS = (
    "BatchMatMul", "CudnnRNNV", "CudnnRNNForward", "CudnnRNNBackprop", "dot_general", "conv_general_dilated",
)

# Column order of a kernel report table (the key first, in comparison order).
KEY_COLUMNS = [
    "name", "grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z", "registers_per_thread",
    "static_shmem_bytes", "dynamic_shmem_bytes", "is_kernel_using_tensor_core", "is_op_tensor_core_eligible",
    "op_name",
]
VALUE_COLUMNS = ["occupancy_pct", "occurrences", "total_duration_ns", "min_duration_ns", "max_duration_ns"]
REPORT_COLUMNS = KEY_COLUMNS + VALUE_COLUMNS
_LAUNCH_INT_COLUMNS = KEY_COLUMNS[1:10]


# --- kernel_details ------------------------------------------------------------

_ASCII_SPACE = " \t\n\v\f\r"
_UINT32_MAX = 2**32 - 1
_DECIMAL_FLOAT = re.compile(r"-?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")
_HEX_FLOAT = re.compile(r"-?0[xX]([0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)([pP][+-]?\d+)?")
_SPECIAL_FLOAT = re.compile(r"-?(inf|infinity|nan(\([0-9A-Za-z_]*\))?)", re.IGNORECASE)


def _parse_uint32(text: str) -> int | None:
    """absl::SimpleAtoi into uint32: surrounding ASCII whitespace, optional '+', decimal digits."""
    text = text.strip(_ASCII_SPACE)
    if text.startswith("+"):
        text = text[1:]
    if not text or not text.isascii() or not text.isdigit():
        return None
    value = int(text)
    return value if value <= _UINT32_MAX else None


def _parse_double(text: str) -> float | None:
    """absl::SimpleAtod: a strtod-style number filling the whole (whitespace-trimmed) token."""
    text = text.strip(_ASCII_SPACE)
    if text.startswith("+"):
        text = text[1:]
        if text.startswith("-"):
            return None
    if _DECIMAL_FLOAT.fullmatch(text):
        return float(text)
    if _HEX_FLOAT.fullmatch(text):
        sign = -1.0 if text.startswith("-") else 1.0
        return sign * float.fromhex(text.lstrip("-"))
    if _SPECIAL_FLOAT.fullmatch(text):
        body = text.lstrip("-").lower()
        value = math.inf if body.startswith("inf") else math.nan
        return -value if text.startswith("-") and value == math.inf else value
    return None


def _parse_dims(text: str) -> list[int] | None:
    parts = text.split(",")
    if len(parts) != 3:
        return None
    dims = [_parse_uint32(p) for p in parts]
    return None if any(d is None for d in dims) else dims


@dataclass(frozen=True)
class LaunchParams:
    registers_per_thread: int = 0
    static_shmem_bytes: int = 0
    dynamic_shmem_bytes: int = 0
    grid: tuple[int, int, int] = (1, 1, 1)
    block: tuple[int, int, int] = (1, 1, 1)
    occupancy_pct: float = 0.0  # float32 precision, as XProf stores it


def parse_kernel_details(details: str) -> LaunchParams:
    """`regs:N static_shared:N dynamic_shared:N grid:x,y,z block:x,y,z occ_pct:F`.

    Tokens are separated by spaces and newlines; a token is `key:value` with
    exactly one colon. Unknown keys and values that do not parse are ignored
    (the previous value stays), as in XProf's ParseKernelLaunchParams.
    """
    found: dict[str, object] = {}
    for token in re.split(r"[ \n]", details):
        parts = token.split(":")
        if len(parts) != 2:
            continue
        key, value = parts
        if key in ("regs", "static_shared", "dynamic_shared"):
            number = _parse_uint32(value)
            if number is not None:
                found[key] = number
        elif key in ("grid", "block"):
            dims = _parse_dims(value)
            if dims is not None:
                found[key] = tuple(dims)
        elif key == "occ_pct":
            pct = _parse_double(value)
            if pct is not None:
                found[key] = pct
    with np.errstate(over="ignore"):  # float32 overflow is XProf's inf too
        occupancy = float(np.float32(found.get("occ_pct", 0.0)))
    return LaunchParams(
        registers_per_thread=found.get("regs", 0),
        static_shmem_bytes=found.get("static_shared", 0),
        dynamic_shmem_bytes=found.get("dynamic_shared", 0),
        grid=found.get("grid", (1, 1, 1)),
        block=found.get("block", (1, 1, 1)),
        occupancy_pct=occupancy,
    )


# --- TensorCore rules ------------------------------------------------------------

def is_kernel_using_tensor_core(kernel_name: str, vendor: int) -> bool:
    if vendor == VENDOR_NVIDIA:
        fragments = NVIDIA_TENSOR_CORE_FRAGMENTS
    elif vendor == VENDOR_AMD:
        fragments = AMD_TENSOR_CORE_FRAGMENTS
    else:
        return False
    return any(f in kernel_name for f in fragments)


def is_op_tensor_core_eligible(op_name: str) -> bool:
    return op_name.endswith(_OP_ENDINGS) or any(f in op_name for f in _OP_FRAGMENTS)


def is_einsum_tensor_core_eligible(equation: str) -> bool:
    if not equation:
        return False
    sides = equation.split("->")
    return len(sides) == 2 and len(sides[0].split(",")) == 2


# --- extraction --------------------------------------------------------------------

def gpu_planes(table: EventTable) -> np.ndarray:
    """Rows of the GPU planes, in file order."""
    return np.array(table.planes_named(lambda name: name.startswith(schema.GPU_PLANE_PREFIX)), dtype=np.int64)


def _plane_vendors(table: EventTable, planes: np.ndarray) -> dict[int, int]:
    capture = table.capture
    rows = capture.stat_rows(capture.plane_stats, "device_vendor")
    vendors = {int(p): VENDOR_OTHER for p in planes}
    for owner, kind, sid in zip(rows.owner, rows.kind, rows.str_id):
        if int(owner) in vendors and kind in (KIND_STR, KIND_REF):
            text = capture.string(int(sid))
            vendors[int(owner)] = {"Nvidia": VENDOR_NVIDIA, "AMD": VENDOR_AMD}.get(text, VENDOR_OTHER)
    return vendors


def kernel_events(table: EventTable, planes: np.ndarray | None = None) -> pd.DataFrame:
    """The kernel events of the GPU planes, one row each, in file order.

    Columns: plane, vendor, name_id, details_id, tf_op_id, equation_id,
    hlo_op_id, program_id (-1 absent), duration_ns. Stats are the event's own,
    the last of duplicates (XProf's GpuEventStats walks every stat).
    """
    planes = gpu_planes(table) if planes is None else planes
    candidate = (
        np.isin(table.plane, planes)
        & ~table.derived_lines[table.line]
        & (table.duration != 0)
    )
    rows = np.flatnonzero(candidate)
    details = table.str_stat_at("kernel_details", rows, last=True)
    empty = table.capture.string_id("")
    is_kernel = (details != NO_STRING) & (details != empty)
    rows, details = rows[is_kernel], details[is_kernel]
    vendors = _plane_vendors(table, planes)
    vendor_of_plane = np.zeros(len(table.plane_names), dtype=np.int64)
    for plane, vendor in vendors.items():
        vendor_of_plane[plane] = vendor
    name_ids = table.capture.event_metadata["name_id"].to_numpy()[table.md[rows]]
    program_id, has_program = table.int_stat_at("program_id", rows, last=True)
    return pd.DataFrame(
        {
            "plane": table.plane[rows],
            "vendor": vendor_of_plane[table.plane[rows]],
            "name_id": name_ids.astype(np.int64),
            "details_id": details.astype(np.int64),
            "tf_op_id": table.str_stat_at("tf_op", rows, last=True).astype(np.int64),
            "equation_id": table.str_stat_at("equation", rows, last=True).astype(np.int64),
            "hlo_op_id": table.str_stat_at("hlo_op", rows, last=True).astype(np.int64),
            "program_id": np.where(has_program, program_id, -1),
            # XProf's durations are whole nanoseconds, truncated.
            "duration_ns": table.duration[rows] // 1000,
        }
    )


_RAW_KEY = ["vendor", "name_id", "details_id", "tf_op_id", "equation_id", "hlo_op_id", "program_id"]


@dataclass
class _RawGroups:
    """Kernel events aggregated per distinct raw-id combination, in first-appearance order."""

    keys: np.ndarray  # (groups, len(_RAW_KEY)) int64
    total: np.ndarray
    min: np.ndarray
    max: np.ndarray
    count: np.ndarray


def _group_raw(events: pd.DataFrame) -> _RawGroups:
    keys = np.column_stack([events[c].to_numpy(dtype=np.int64) for c in _RAW_KEY])
    duration = events["duration_ns"].to_numpy(dtype=np.int64)
    order = np.lexsort(keys.T[::-1])
    ordered = keys[order]
    new_group = np.ones(len(order), dtype=bool)
    new_group[1:] = (ordered[1:] != ordered[:-1]).any(axis=1)
    starts = np.flatnonzero(new_group)
    ordered_duration = duration[order]
    first_event = np.minimum.reduceat(order, starts)
    appearance = np.argsort(first_event, kind="stable")
    return _RawGroups(
        keys=ordered[starts][appearance],
        total=np.add.reduceat(ordered_duration, starts)[appearance],
        min=np.minimum.reduceat(ordered_duration, starts)[appearance],
        max=np.maximum.reduceat(ordered_duration, starts)[appearance],
        count=np.diff(np.append(starts, len(order)))[appearance],
    )


def kernel_reports(
    table: EventTable,
    modules: Mapping[int, HloModule] | None = None,
    limit: int | None = MAX_KERNEL_REPORTS,
) -> pd.DataFrame:
    """The host's kernel stats DB: all GPU planes merged, sorted, top `limit`.

    `modules` are the capture's HLO modules (`loaders.hlo.hlo_modules`): an
    XLA kernel (`hlo_op` stat) whose instruction is found there takes the
    instruction's framework op (`op_name:op_type` from its OpMetadata);
    otherwise it keeps the op name its `tf_op` stat gives (usually none), as
    XProf does when the HLO instruction is not found.
    """
    capture = table.capture
    planes = gpu_planes(table)
    if len(planes) == 0:  # no GPU: no kernel (and no event frame to build)
        return empty_reports()
    events = kernel_events(table, planes)
    if events.empty:
        return empty_reports()
    # 1. Aggregate the events per distinct raw combination (vectorised; few groups).
    raw = _group_raw(events)
    # 2. Derive each combination's report key (strings parsed once per distinct value)
    #    and merge combinations that share one, in first-appearance order: the
    #    earliest launch of a key supplies its occupancy, as in XProf's map.
    strings: dict[int, str] = {}

    def text(sid: int) -> str:
        value = strings.get(sid)
        if value is None:
            value = strings[sid] = str(capture.string(sid))
        return value

    launches: dict[int, LaunchParams] = {}
    merged: dict[tuple, list] = {}
    for (vendor, name_id, details_id, tf_op_id, equation_id, hlo_op_id, program_id), total, low, high, count in zip(
        raw.keys.tolist(), raw.total.tolist(), raw.min.tolist(), raw.max.tolist(), raw.count.tolist()
    ):
        name = text(name_id)
        params = launches.get(details_id)
        if params is None:
            params = launches[details_id] = parse_kernel_details(text(details_id))
        uses_tc = is_kernel_using_tensor_core(name, vendor)
        op_name, eligible = "", False
        tf_op = text(tf_op_id)
        if tf_op:
            op_name = parse_tf_op_fullname(tf_op).name
            eligible = (
                is_einsum_tensor_core_eligible(text(equation_id)) or is_op_tensor_core_eligible(op_name) or uses_tc
            )
        if modules and hlo_op_id != NO_STRING and program_id >= 0:
            module = modules.get(program_key(program_id))
            instruction = module.instructions.get(text(hlo_op_id).split("::")[-1]) if module else None
            if instruction is not None:
                # The framework op's name without its type, as XProf 2.24.2 lists it (JAX's ops have no type:
                # "jit(step)/dot_general", not "jit(step)/dot_general:").
                op_name = parse_tf_op_fullname(instruction_provenance(instruction)).name
                eligible = is_op_tensor_core_eligible(op_name) or eligible
        key = (name, *params.grid, *params.block, params.registers_per_thread, params.static_shmem_bytes,
               params.dynamic_shmem_bytes, uses_tc, eligible, op_name)
        entry = merged.get(key)
        if entry is None:
            merged[key] = [params.occupancy_pct, count, total, low, high]
        else:
            entry[1] += count
            entry[2] += total
            entry[3] = min(entry[3], low)
            entry[4] = max(entry[4], high)
    # 3. Total duration descending, ties by the key ascending; top `limit`.
    ordered = sorted(merged.items(), key=lambda item: (-item[1][2], item[0]))
    if limit is not None:
        ordered = ordered[:limit]
    return pd.DataFrame([(*key, *values) for key, values in ordered], columns=REPORT_COLUMNS).astype(
        _REPORT_DTYPES
    )


_REPORT_DTYPES = {
    **{c: "int64" for c in REPORT_COLUMNS},
    "name": object,
    "op_name": object,
    "is_kernel_using_tensor_core": bool,
    "is_op_tensor_core_eligible": bool,
    "occupancy_pct": float,
}


@empty_frame
def empty_reports() -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype=t) for c, t in _REPORT_DTYPES.items()})[REPORT_COLUMNS]


def sort_reports(reports: pd.DataFrame, limit: int | None = MAX_KERNEL_REPORTS) -> pd.DataFrame:
    """Total duration descending, then the key ascending; keep `limit` rows.

    A stable sort, so equal reports (two hosts' copies of one kernel) keep
    their input order.
    """
    ordered = reports.sort_values(
        ["total_duration_ns", *KEY_COLUMNS],
        ascending=[False] + [True] * len(KEY_COLUMNS),
        kind="stable",
    )
    if limit is not None:
        ordered = ordered.head(limit)
    return ordered.reset_index(drop=True)


def combine_host_reports(per_host: Mapping[str, pd.DataFrame], limit: int = MAX_KERNEL_REPORTS) -> pd.DataFrame:
    """XProf's multi-host combine: concatenate every host's reports, re-sort, top `limit`.

    Identical kernels of different hosts are not merged. Adds a `host` column.
    """
    if not per_host:
        return empty_reports().assign(host=pd.Series(dtype=object))
    # One concat and one host column: a copy of each host's frame with its name cost ≈ 0.4 ms a host, four
    # times a build, in a run of thousands of hosts (most of them with no reports).
    # The hosts that have reports, and one empty frame for all those that have none (a pod's CPU hosts:
    # concatenating a thousand empty frames cost ≈ 0.3 s per combine), which gives the columns the same types.
    with_reports = {host: frame for host, frame in per_host.items() if len(frame)}
    empty = next((host for host, frame in per_host.items() if not len(frame)), None)
    if empty is not None:
        with_reports[empty] = per_host[empty]
    reports = pd.concat(list(with_reports.values()), ignore_index=True)
    hosts = np.repeat(np.array(list(with_reports), dtype=object), [len(frame) for frame in with_reports.values()])
    reports["host"] = pd.array(hosts, dtype="str")  # the dtype `assign` gives a column of names
    return sort_reports(reports, limit)


def kernel_time_by_op(reports: pd.DataFrame) -> pd.DataFrame:
    """XProf's GroupKernelReportsByOpName (kernel_stats.md §4), indexed by op name:
    `is_op_tensor_core_eligible` of the op's first report, `total_duration_ns`
    over its reports and `tensor_core_duration_ns` over those using TensorCores.
    The overview and TF stats pages look framework ops up here by exact name."""
    frame = pd.DataFrame({
        "op_name": reports["op_name"].to_numpy(object),
        "is_op_tensor_core_eligible": reports["is_op_tensor_core_eligible"].to_numpy(bool),
        "total_duration_ns": reports["total_duration_ns"].to_numpy(np.int64),
        "tensor_core_duration_ns": np.where(reports["is_kernel_using_tensor_core"].to_numpy(bool),
                                            reports["total_duration_ns"].to_numpy(np.int64), 0),
    })
    return frame.groupby("op_name", sort=False).agg(
        is_op_tensor_core_eligible=("is_op_tensor_core_eligible", "first"),
        total_duration_ns=("total_duration_ns", "sum"),
        tensor_core_duration_ns=("tensor_core_duration_ns", "sum"),
    )


def tensor_core_utilization(reports: pd.DataFrame, op_names) -> np.ndarray:
    """Per framework op name: the share of its kernel time on TensorCores (0 when no kernel names it)."""
    by_op = kernel_time_by_op(reports).reindex(pd.Index(op_names, dtype=object))
    total = by_op["total_duration_ns"].to_numpy(np.float64)
    on_tensor_cores = by_op["tensor_core_duration_ns"].to_numpy(np.float64)
    known = np.isfinite(total) & (total != 0)
    return np.divide(on_tensor_cores, total, out=np.zeros(len(total)), where=known)


def kernel_stats_table(reports: pd.DataFrame) -> pd.DataFrame:
    """XProf's kernel_stats DataTable rows (kernel_stats.md §3), one per report, in order."""
    occurrences = reports["occurrences"].to_numpy()
    total = reports["total_duration_ns"].to_numpy()
    shmem = (reports["static_shmem_bytes"].to_numpy() + reports["dynamic_shmem_bytes"].to_numpy()) % 2**32
    table = pd.DataFrame(
        {
            "rank": np.arange(1, len(reports) + 1),
            "kernel_name": reports["name"].to_numpy(),
            "registers_per_thread": reports["registers_per_thread"].to_numpy(),
            # uint32 addition in XProf: the sum wraps.
            "shmem_bytes": shmem,
            "block_dim": _dims(reports, "block"),
            "grid_dim": _dims(reports, "grid"),
            "occupancy_pct": reports["occupancy_pct"].to_numpy(dtype=float),
            "is_op_tensor_core_eligible": reports["is_op_tensor_core_eligible"].to_numpy(dtype=bool),
            "is_kernel_using_tensor_core": reports["is_kernel_using_tensor_core"].to_numpy(dtype=bool),
            "op_name": reports["op_name"].to_numpy(),
            "occurrences": occurrences,
            "total_duration_us": total / 1000.0,
            # Integer division of the nanosecond totals, then microseconds.
            "avg_duration_us": (total // np.maximum(occurrences, 1)) / 1000.0,
            "min_duration_us": reports["min_duration_ns"].to_numpy() / 1000.0,
            "max_duration_us": reports["max_duration_ns"].to_numpy() / 1000.0,
        }
    )
    if "host" in reports:
        table["host"] = reports["host"].to_numpy()
    return table


def _dims(reports: pd.DataFrame, prefix: str) -> list[str]:
    x, y, z = (reports[f"{prefix}_{axis}"].to_numpy() for axis in "xyz")
    return [f"{a},{b},{c}" for a, b, c in zip(x, y, z)]
