"""Per-host facts the findings need and no tool page computes, taken while the capture is in memory.

The tools already compute nearly everything the rules read; what they do not
is small and GPU- or capture-specific: how busy each GPU was in each step
(and its longest idle gaps), whether its copies were synchronous or from
pageable memory, how long host threads sat in CUDA/HIP synchronisation
calls, how much collective time overlapped compute, which top-level XLA
programs ran again and again (steps can be inferred from them when the
capture has no step markers), and each host's step windows (to compare
hosts' clocks). `host_facts` computes them once per host in the host stage,
vectorised over the event table; the rules never read the capture.

Times are the capture's picoseconds (the trace's clock).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field

import numpy as np

from reportgen.core.events import schema
from reportgen.core.events.intervals import intersection_length, merged, overlap_length, overlapping
from reportgen.core.events.table import EventTable
from reportgen.core.events.tf_op import TENSORFLOW, TF_DATA
from reportgen.core.hlo.model import HloModule
from reportgen.core.steps.ledger import COMPILE_NAMES, SYNC_API_NAMES, step_windows

GAP_MIN_PS = 1_000_000_000  # 1 ms: an idle stretch of a GPU worth showing
TOP_EVENTS = 3  # longest gaps, copies, synchronisation calls kept as evidence
WINDOWS_WITHOUT_STEPS = 10  # a GPU's active span cut into this many windows when the capture has no steps
_DETAIL = re.compile(r"(\w+):(\S+)")


@dataclass
class Window:
    """A step (or a slice of a stepless capture) on one GPU: its span and the GPU's busy time in it."""

    name: str
    begin_ps: int
    end_ps: int
    busy_ps: int

    @property
    def busy_percent(self) -> float:
        span = self.end_ps - self.begin_ps
        return 100.0 * self.busy_ps / span if span > 0 else 0.0


@dataclass
class TimedEvent:
    """One event kept as evidence: where and when it ran."""

    plane: str
    name: str
    begin_ps: int
    duration_ps: int
    detail: str = ""


@dataclass
class GpuActivity:
    """One GPU that ran something: its busy time in each window, its longest idle gaps, collective overlap."""

    plane: str
    windows: list[Window]
    gaps: list[tuple[int, int]]  # the longest idle stretches of at least GAP_MIN_PS inside the windows
    gap_total_ps: int  # every idle stretch of at least GAP_MIN_PS inside the windows
    collective_ps: int = 0  # time in collective kernels (nccl*, rccl*)
    collective_overlap_ps: int = 0  # of that, time when a compute kernel ran at the same time

    @property
    def window_ps(self) -> int:
        return sum(w.end_ps - w.begin_ps for w in self.windows)

    @property
    def busy_ps(self) -> int:
        return sum(w.busy_ps for w in self.windows)


@dataclass
class CopyStats:
    """Device copies (or memsets) of one kind: how many, how long on the device, how many bytes."""

    count: int = 0
    duration_ps: int = 0
    bytes: int = 0
    longest: list[TimedEvent] = field(default_factory=list)


@dataclass
class StepShare:
    """Host-thread work of one kind inside the steps: how many events, the time some thread spent in them (their
    union, clipped to the steps), and the longest ones."""

    count: int = 0
    busy_ps: int = 0
    longest: list[TimedEvent] = field(default_factory=list)


@dataclass
class ModuleRuns:
    """Executions of one top-level XLA program on a device's `XLA Modules` line."""

    name: str
    plane: str
    count: int
    total_ps: int
    first: list[tuple[int, int]]  # (begin, end) of the first executions
    mean_interval_ps: float  # from one start to the next


@dataclass
class ProgramActivity:
    """A device's `XLA Modules` line: from its first program run to its last, the time some program ran,
    and the longest stretches between runs."""

    plane: str
    first_ps: int
    last_ps: int
    busy_ps: int
    gaps: list[tuple[int, int]]
    # The steady state: from the first run of the plane's most executed program to the last run.
    steady_first_ps: int = 0
    steady_busy_ps: int = 0

    @property
    def idle_percent(self) -> float:
        span = self.last_ps - self.first_ps
        return 100.0 * (span - self.busy_ps) / span if span > 0 else 0.0

    @property
    def steady_idle_percent(self) -> float:
        span = self.last_ps - self.steady_first_ps
        return 100.0 * (span - self.steady_busy_ps) / span if span > 0 else 0.0


@dataclass
class GpuMix:
    """What the GPUs of a host ran: time per framework op type (XProf's `TensorFlow Ops` lines), how many kernels,
    how many of them matrix or convolution kernels, and whether the op names speak of a model made of those."""

    op_type_ps: dict[str, int] = field(default_factory=dict)
    kernels: int = 0
    kernel_ps: int = 0
    matrix_kernels: int = 0  # GEMM / convolution kernels (cuBLAS, cuDNN, CUTLASS, XLA's dot fusions)
    matrix_model: str = ""  # a name scope that says the model is made of matmuls or convolutions ("" if none)


# Eigen's element-wise kernels say `TensorConversionOp` (a cast), so convolutions are matched by longer names.
_MATRIX_KERNEL = re.compile(r"(?i)gemm|xmma|cutlass|cublas|cudnn|convolution|conv[123]d|fprop|wgrad|dgrad|nvjet|"
                            r"matmul|\bdot|triton_|sm\d\d_")
_MATRIX_MODEL = re.compile(r"(?i)(attention|einsum|matmul|dense|conv\d?d?|linear|transformer|bert|resnet|mlp)")


def _gpu_mix(table: EventTable, gpu: list[int]) -> GpuMix:
    mix = GpuMix()
    if not gpu:
        return mix
    lines = np.flatnonzero(np.isin(table.line_planes, gpu))
    real = lines[~table.derived_lines[lines]]
    rows = table.events_of_lines(real)
    rows = rows[table.duration[rows] > 0]
    copy_md = np.array([str(n).startswith(("Memcpy", "Memset")) for n in table.md_names], dtype=bool)
    kernels = rows[~copy_md[table.md[rows]]]
    mix.kernels, mix.kernel_ps = len(kernels), int(table.duration[kernels].sum())
    matrix_md = np.array([bool(_MATRIX_KERNEL.search(str(n))) for n in table.md_names], dtype=bool)
    mix.matrix_kernels = int(matrix_md[table.md[kernels]].sum())
    ops = table.events_of_lines(lines[table.line_names[lines] == "TensorFlow Ops"])
    if len(ops):
        types = np.array([op.type or str(d) for op, d in zip(table.md_tf_op, table.md_display_names)], dtype=object)
        ids, inverse = np.unique(table.md[ops], return_inverse=True)
        totals = np.bincount(inverse, weights=table.duration[ops].astype(np.float64))
        for md, ps in zip(ids.tolist(), totals.tolist()):
            mix.op_type_ps[str(types[md])] = mix.op_type_ps.get(str(types[md]), 0) + int(ps)
        found = next((m.group(1) for n in table.md_names[ids] if (m := _MATRIX_MODEL.search(str(n)))), None)
        mix.matrix_model = found or ""
    return mix


@dataclass
class HostFacts:
    host: str
    framework: str  # "tensorflow", "jax" or "" (unknown)
    steps: list[tuple[str, int, int]] = field(default_factory=list)  # (name, begin, end), this host's own steps
    gpus: list[GpuActivity] = field(default_factory=list)
    sync_copies: CopyStats = field(default_factory=CopyStats)  # memcpy/memset with async:0
    pageable_copies: CopyStats = field(default_factory=CopyStats)  # memcpy from or to pageable host memory
    sync_calls: StepShare = field(default_factory=lambda: StepShare())  # host threads in *Synchronize calls
    module_runs: list[ModuleRuns] = field(default_factory=list)  # most executed first
    programs: list[ProgramActivity] = field(default_factory=list)  # one per device plane with program runs
    # Compilation between two analysed steps (a jitted function first called mid-training): once, not per step.
    compilation_between: StepShare = field(default_factory=StepShare)
    gpu_mix: GpuMix = field(default_factory=lambda: GpuMix())  # what the GPUs ran, by op type and kernel kind
    # Per program spanning several devices (its display name, `name(program id)`): how many, and whether every
    # parameter and output is replicated over them (each device holds and moves the whole arrays).
    program_devices: dict[str, int] = field(default_factory=dict)
    replicated_programs: list[str] = field(default_factory=list)
    # Programs that reuse some argument's buffer for an output (input/output aliasing: `donate_argnums` in effect).
    aliased_programs: list[str] = field(default_factory=list)
    # Per program: the FLOPs of one run's matrix multiplications (dots and cuBLAS GEMM calls, while loops counted by
    # their known trip count), from its optimised HLO; absent where a loop's trip count is unknown.
    program_flops: dict[str, float] = field(default_factory=dict)
    # Per program (its HLO module name): how many times the host had it executed (PJRT's `…Execute (name)`).
    program_executions: dict[str, int] = field(default_factory=dict)
    # The host's events in brief: (count, their starts summed, their durations summed, in ps). Two host files with
    # the same fingerprint hold the same events at the same picoseconds: one profile saved twice.
    fingerprint: tuple[int, int, int] = (0, 0, 0)


def _framework(table: EventTable, module_names: list[str]) -> str:
    # JAX names its XLA programs after the jitted function; that is decisive. A JAX capture can still hold an event
    # whose name parses as a TF op (StreamExecutor's `ThenExecuteCallback:GetEventForComputeStreamSyncPoint`).
    if any(n.startswith(("jit_", "pjit_", "jit(", "pmap_")) for n in module_names):
        return "jax"
    if table.host_plane is not None and len(table.md_tf_op):
        categories = {op.category for op in table.md_tf_op}
        if TENSORFLOW in categories or TF_DATA in categories:
            return "tensorflow"
    # TF's eager runtime names its events itself (an eager step holds no `name:Type` op events).
    if any(str(n).startswith(("EagerLocalExecute: ", "TFE_Py_")) for n in table.md_names):
        return "tensorflow"
    return ""


def _gaps(starts: np.ndarray, ends: np.ndarray, windows: list[tuple[str, int, int]]) -> tuple[list, int]:
    """Idle stretches of at least GAP_MIN_PS between the (sorted, disjoint) busy intervals, inside the windows."""
    found = []
    for _, lo, hi in windows:  # one turn per step: the busy intervals of each are found by bisection
        a, b = np.searchsorted(ends, lo, side="right"), np.searchsorted(starts, hi, side="left")
        s, e = np.clip(starts[a:b], lo, hi), np.clip(ends[a:b], lo, hi)
        idle_begin, idle_end = np.concatenate([[lo], e]), np.concatenate([s, [hi]])
        keep = idle_end - idle_begin >= GAP_MIN_PS
        found += list(zip(idle_begin[keep].tolist(), idle_end[keep].tolist()))
    total = int(sum(b - a for a, b in found))
    found.sort(key=lambda g: (-(g[1] - g[0]), g[0]))
    return found[:TOP_EVENTS], total


def _gpu_activity(table: EventTable, plane: int, steps: list[tuple[str, int, int]],
                  is_collective: np.ndarray) -> GpuActivity | None:
    """The GPU's busy time in each step it ran a kernel in (or, without steps, in each slice of its active span
    with a kernel): a GPU the job does not compute on (copies only, or idle) is not judged idle."""
    lines = table.lines_of_plane(plane)
    lines = lines[~table.derived_lines[lines]]
    rows = table.events_of_lines(lines)
    rows = rows[table.duration[rows] > 0]
    if len(rows) == 0:
        return None
    busy = merged(table.start[rows], table.end[rows])
    copy = (table.str_stat("memcpy_details")[rows] >= 0) | (table.str_stat("memset_details")[rows] >= 0)
    kernels = merged(table.start[rows[~copy]], table.end[rows[~copy]])
    if steps:
        windows = steps
    else:
        first, last = int(busy[0][0]), int(busy[1][-1])
        edges = np.linspace(first, last, WINDOWS_WITHOUT_STEPS + 1).astype(np.int64)
        windows = [(f"{k + 1}/{WINDOWS_WITHOUT_STEPS}", int(a), int(b)) for k, (a, b) in
                   enumerate(zip(edges[:-1], edges[1:])) if b > a]
    windows = [(n, b, e) for n, b, e in windows if overlap_length(kernels[0], kernels[1], b, e) > 0]
    if not windows:
        return None  # no kernel inside the steps analysed
    gaps, gap_total = _gaps(busy[0], busy[1], windows)
    collective = is_collective[table.md[rows]]
    comm = merged(table.start[rows[collective]], table.end[rows[collective]])
    compute = merged(table.start[rows[~collective]], table.end[rows[~collective]])
    return GpuActivity(
        plane=table.plane_names[plane],
        windows=[Window(n, b, e, overlap_length(busy[0], busy[1], b, e)) for n, b, e in windows],
        gaps=gaps, gap_total_ps=gap_total,
        collective_ps=int((comm[1] - comm[0]).sum()), collective_overlap_ps=intersection_length(comm, compute),
    )


def _shown_name(table: EventTable, row: int) -> str:
    """An event's name as the trace shows it: its display name when it has one (a TF op's type)."""
    display = str(table.md_display_names[table.md[row]])
    return display or str(table.names_of(row))


def _is_collective(table: EventTable) -> np.ndarray:
    """Per event metadata: a collective kernel (NCCL on Nvidia, RCCL on AMD)."""
    return np.array([str(n).lower().startswith(("nccl", "rccl")) for n in table.md_names], dtype=bool)


def _count(text: str) -> int:
    return int(text) if text.isdigit() else 0


def _details(text: str) -> dict[str, str]:
    return dict(_DETAIL.findall(text))


def _copy_stats(table: EventTable, rows: np.ndarray, detail_ids: np.ndarray, sizes: np.ndarray) -> CopyStats:
    if len(rows) == 0:
        return CopyStats()
    order = np.lexsort((table.start[rows], -table.duration[rows]))[:TOP_EVENTS]
    details = table.strings(detail_ids[order])
    return CopyStats(
        count=len(rows), duration_ps=int(table.duration[rows].sum()), bytes=int(sizes.sum()),
        longest=[TimedEvent(table.plane_names[table.plane[rows[i]]], _shown_name(table, rows[i]),
                            int(table.start[rows[i]]), int(table.duration[rows[i]]), str(text))
                 for i, text in zip(order, details)],
    )


def _copies(table: EventTable, gpu: list[int]) -> tuple[CopyStats, CopyStats]:
    """Synchronous copies and memsets (async:0), and copies from or to pageable memory, on the GPUs."""
    if not gpu:
        return CopyStats(), CopyStats()
    memcpy = table.str_stat("memcpy_details")
    memset = table.str_stat("memset_details")
    details = np.where(memcpy >= 0, memcpy, memset)
    rows = np.flatnonzero(np.isin(table.plane, gpu) & ~table.derived_lines[table.line] & (details >= 0))
    if len(rows) == 0:
        return CopyStats(), CopyStats()
    # Each distinct details string is parsed once (they are interned).
    ids, inverse = np.unique(details[rows], return_inverse=True)
    parsed = [_details(str(t)) for t in table.strings(ids)]
    size = np.array([_count(p.get("size", p.get("num_bytes", ""))) for p in parsed], dtype=np.int64)[inverse]
    sync = np.array([p.get("async") == "0" for p in parsed], dtype=bool)[inverse]
    pageable = np.array(["pageable" in (p.get("kind_src"), p.get("kind_dst")) for p in parsed], dtype=bool)[inverse]
    ids = details[rows]
    return (_copy_stats(table, rows[sync], ids[sync], size[sync]),
            _copy_stats(table, rows[pageable], ids[pageable], size[pageable]))


def _sync_calls(table: EventTable, steps) -> StepShare:
    """Host threads blocked in CUDA/HIP synchronisation calls (driver/runtime API events), inside the steps (or,
    without steps, over the host's whole timeline)."""
    if table.host_plane is None:
        return StepShare()
    rows = table.events_of_lines(table.lines_of_plane(table.host_plane))
    matching = np.array([bool(SYNC_API_NAMES.match(str(n))) for n in table.md_names], dtype=bool)
    rows = rows[matching[table.md[rows]] & (table.duration[rows] > 0)]
    if len(rows) == 0:
        return StepShare()
    windows = steps or [("", int(table.start[rows].min()), int(table.end[rows].max()))]
    return _step_share(table, rows, windows)


def _module_runs(table: EventTable) -> tuple[list[ModuleRuns], list[ProgramActivity]]:
    """Top-level XLA program executions per device plane's `XLA Modules` line (most executed first), and
    each such line's activity."""
    runs, activity = [], []
    for line in np.flatnonzero(table.line_names == schema.XLA_MODULE_LINE):
        plane = int(table.line_planes[line])
        rows = table.events_of_lines(np.array([line]))
        rows = rows[table.duration[rows] > 0]
        if len(rows) == 0:
            continue
        busy = merged(table.start[rows], table.end[rows])
        first, last = int(busy[0][0]), int(busy[1][-1])
        gaps, _ = _gaps(busy[0], busy[1], [("", first, last)])
        names = table.names_of(rows)
        most = max(sorted(set(names.tolist())), key=lambda n: int((names == n).sum()))
        steady = int(table.start[rows[names == most]].min())
        activity.append(ProgramActivity(table.plane_names[plane], first, last, int((busy[1] - busy[0]).sum()), gaps,
                                        steady, overlap_length(busy[0], busy[1], steady, last)))
        for name in sorted(set(names.tolist())):
            mine = rows[names == name]
            mine = mine[np.argsort(table.start[mine], kind="stable")]
            starts = table.start[mine]
            runs.append(ModuleRuns(
                name=str(name), plane=table.plane_names[plane], count=len(mine),
                total_ps=int(table.duration[mine].sum()),
                first=[(int(table.start[r]), int(table.end[r])) for r in mine[:TOP_EVENTS]],
                mean_interval_ps=float(np.diff(starts).mean()) if len(starts) > 1 else 0.0,
            ))
    runs.sort(key=lambda m: (-m.count, -m.total_ps, m.plane, m.name))
    return runs, activity


def _clipped(starts: np.ndarray, ends: np.ndarray, windows: list[tuple[str, int, int]]):
    """Sorted disjoint intervals cut to the (disjoint) windows."""
    out_s, out_e = [], []
    for _, lo, hi in windows:
        a, b = np.searchsorted(ends, lo, side="right"), np.searchsorted(starts, hi, side="left")
        out_s.append(np.clip(starts[a:b], lo, hi))
        out_e.append(np.clip(ends[a:b], lo, hi))
    if not out_s:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    return np.concatenate(out_s), np.concatenate(out_e)


def _step_share(table: EventTable, rows: np.ndarray, steps) -> StepShare:
    """The host-thread events `rows` inside the steps (see StepShare)."""
    if len(rows) == 0 or not steps:
        return StepShare()
    begins = np.array([b for _, b, _ in steps], np.int64)
    ends = np.array([e for _, _, e in steps], np.int64)
    rows = rows[overlapping(table.start[rows], table.end[rows], begins, ends)]
    if len(rows) == 0:
        return StepShare()
    busy = _clipped(*merged(table.start[rows], table.end[rows]), steps)
    busy_ps = int((busy[1] - busy[0]).sum())
    order = np.lexsort((table.start[rows], -table.duration[rows]))[:TOP_EVENTS]
    host_plane = table.plane_names[table.host_plane]
    return StepShare(count=len(rows), busy_ps=busy_ps,
                     longest=[TimedEvent(host_plane, _shown_name(table, rows[i]), int(table.start[rows[i]]),
                                         int(table.duration[rows[i]])) for i in order])


def _compilation_between(table: EventTable, steps) -> StepShare:
    """Compilation on host threads in the gaps between consecutive steps."""
    gaps = [("", a[2], b[1]) for a, b in zip(steps, steps[1:]) if b[1] > a[2]]
    if table.host_plane is None or not gaps:
        return StepShare()
    rows = table.events_of_lines(table.lines_of_plane(table.host_plane))
    compile_md = np.array([bool(COMPILE_NAMES.search(str(n))) for n in table.md_names], dtype=bool)
    rows = rows[compile_md[table.md[rows]] & (table.duration[rows] > 0)]
    return _step_share(table, rows, gaps)


_REPLICATED = 0  # xla.OpSharding.Type.REPLICATED
_GEMM_TARGETS = ("__cublas$gemm", "__cublas$lt$matmul")  # XLA:GPU's GEMM custom calls


def _matmul_flops(module: HloModule) -> float | None:
    """2·M·N·K summed over the module's dots and GEMM custom calls, each counted as often as it runs per run of the
    program (a while body as often as its known trip count); None where a loop's trip count is unknown or the
    program convolves."""
    hlo = module.hlo.hlo_module
    computations = {c.id: c for c in hlo.computations}
    by_id = {i.id: i for c in hlo.computations for i in c.instructions}
    total = 0.0
    stack = [(hlo.entry_computation_id, 1)]
    visits = 0
    while stack:
        computation, times = stack.pop()
        visits += 1
        if computation not in computations or visits > 100_000:  # a malformed module: no number
            return None
        for ins in computations[computation].instructions:
            if ins.opcode == "convolution" or ins.custom_call_target.startswith("__cudnn$conv"):
                return None  # convolutions' FLOPs are not counted here: no number rather than a wrong one
            runs = times
            if ins.opcode == "while":
                try:
                    runs = times * int(json.loads(ins.backend_config or b"{}")["known_trip_count"]["n"])
                except (KeyError, TypeError, ValueError):
                    return None
            stack.extend((c, runs) for c in ins.called_computation_ids)
            if ins.opcode == "dot":
                contracting, out = list(ins.dot_dimension_numbers.lhs_contracting_dimensions), ins.shape
            elif ins.opcode == "custom-call" and ins.custom_call_target in _GEMM_TARGETS:
                config = json.loads(ins.backend_config or b"{}").get("gemm_backend_config", {})
                contracting = [int(d) for d in config.get("dot_dimension_numbers", {}).get(
                    "lhs_contracting_dimensions", [])]
                out = ins.shape.tuple_shapes[0] if ins.shape.tuple_shapes else ins.shape
            else:
                continue
            lhs = by_id.get(ins.operand_ids[0]) if ins.operand_ids else None
            if lhs is None or any(d >= len(lhs.shape.dimensions) for d in contracting):
                return None
            total += 2.0 * math.prod(out.dimensions) * math.prod(lhs.shape.dimensions[d] for d in contracting) * times
    return total


def _all_replicated(sharding) -> bool:
    if sharding is None:
        return True
    if sharding.tuple_shardings:
        return all(_all_replicated(t) for t in sharding.tuple_shardings)
    return sharding.type == _REPLICATED


def _program_placement(modules: list[HloModule]) -> tuple[dict[str, int], list[str]]:
    """(devices per program that spans several, the programs whose parameters and outputs are all replicated),
    from each module's device assignment and SPMD shardings."""
    devices: dict[str, int] = {}
    replicated: list[str] = []
    for m in modules:
        module = m.hlo.hlo_module
        assignment = module.device_assignment
        count = (assignment.computation_count or 1) * (assignment.replica_count or 1) if assignment else 1
        if count <= 1:
            continue
        devices[m.display_name] = count
        params = module.spmd_parameters_shardings
        if params and all(_all_replicated(p) for p in params) and _all_replicated(module.spmd_output_sharding):
            replicated.append(m.display_name)
    return devices, replicated


_EXECUTE = re.compile(r"LoadedExecutable::Execute \((\S+)\)$")


def _executions(table: EventTable) -> dict[str, int]:
    """Per program name: the host events of PJRT executing it."""
    if table.host_plane is None:
        return {}
    rows = table.events_of_lines(table.lines_of_plane(table.host_plane))
    counts = np.bincount(table.md[rows], minlength=len(table.md_names))
    out: dict[str, int] = {}
    for md in np.flatnonzero(counts).tolist():
        m = _EXECUTE.search(str(table.md_names[md]))
        if m:
            out[m.group(1)] = out.get(m.group(1), 0) + int(counts[md])
    return out


def host_facts(host: str, table: EventTable, step_db, module_names: list[str],
               modules: list[HloModule] | None = None) -> HostFacts:
    """The host's facts (`step_db`: the host's own step database, `module_names`: its HLO modules' names,
    `modules`: the modules themselves)."""
    devices, replicated = _program_placement(modules or [])
    steps = step_windows(step_db)
    gpu = table.planes_named(lambda name: name.startswith(schema.GPU_PLANE_PREFIX))
    sync, pageable = _copies(table, gpu)
    runs, programs = _module_runs(table)
    collective = _is_collective(table) if gpu else np.zeros(0, bool)
    between = _compilation_between(table, steps)
    return HostFacts(
        host=host,
        framework=_framework(table, module_names),
        steps=steps,
        # Which metadata are collectives is read once: per GPU it was a scan of every name per plane.
        gpus=[a for a in (_gpu_activity(table, p, steps, collective) for p in gpu) if a is not None],
        sync_copies=sync,
        pageable_copies=pageable,
        sync_calls=_sync_calls(table, steps),
        module_runs=runs,
        programs=programs,
        compilation_between=between,
        gpu_mix=_gpu_mix(table, gpu),
        program_devices=devices,
        replicated_programs=replicated,
        aliased_programs=[m.display_name for m in modules or [] if m.hlo.hlo_module.input_output_alias.entries],
        program_flops={m.display_name: f for m in modules or [] if (f := _matmul_flops(m))},
        program_executions=_executions(table),
        # Sums wrap around in int64 on long captures: still the same for the same events.
        fingerprint=(len(table.start), int(table.start.sum()), int(table.duration.sum())),
    )


__all__ = ["GAP_MIN_PS", "CopyStats", "GpuActivity", "GpuMix", "HostFacts", "ModuleRuns", "ProgramActivity",
           "StepShare",
           "TimedEvent", "Window", "host_facts"]
