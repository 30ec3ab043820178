"""The step ledger: every picosecond of every step given to exactly one cause, read from the timeline.

XProf's step-time breakdown types the spans it knows (device ops, memcpys,
input ops) and leaves the rest as 'All others'. On a GPU capture that rest is
the GPU idling for reasons only the host threads show; on a CPU-only JAX
capture it is mostly the compiled XLA program itself, which XProf's CPU
breakdown does not count as an op. The ledger reads those threads.

For each step window, the busy intervals of each cause below are merged and
clipped to the step; a moment goes to the first cause, in this order, that is
busy at that moment (HTA's idle-time breakdown and XProf's event-type
priorities do the same, with fewer causes):

 1. `device_compute`      a device kernel or XLA op that is neither a collective nor a copy
 2. `device_collectives`  NCCL / RCCL kernels; XLA collectives on TPU
 3. `device_copies`       memcpy / memset on a device
 4. `compiled_program`    hosts without a device only: the XLA:CPU executable running (ThunkExecutor,
                          the CPU executable's Execute, ops on the XLA threads `tf_XLA…`)
 5. `compilation`         XLA / JAX compilation on a host thread (a compile inside a dispatch, a jit cache
                          miss, is the compile's)
 6. `kernel_launch`       dispatch and launch: launch and copy API calls (host events with a correlation id),
                          the framework ops whose host part launches device work (a launch nested in the op),
                          and JAX / PJRT's dispatch of a compiled program (PjitFunction, PjRt…Execute). A device
                          idle while a launch is under way waits for that launch, whatever else runs beside it
 7. `input`               the consumer waiting for the next batch: tf.data's GetNext ops
                          (IteratorGetNext*, MultiDeviceIteratorGetNextFromShard), the functions a
                          GeneratorDataset calls through RemoteCall, input-pipeline stages (`_ipl_stage_name`),
                          trace annotations the program named as data loading (`data_loading`, `get_batch`,
                          `load_batch`, …), Python functions that make a batch (`batch`, `next_batch`, a
                          dataset or data loader's `__next__`) and JAX's transfers of it (`device_put`,
                          `jnp.asarray`)
 8. `synchronization`     a host thread in cuda/cu/hip…Synchronize
 9. `host_compute`        framework ops that run on the host (no device work launched from them)
10. `python`              Python functions (the Python tracer's `$file:line name` events)
11. `other`               none of these: the step's own markers, runtime bookkeeping, or nothing recorded

Start-up: a host's first analysed step that takes 1.5 times the median of the
steps after it or more (with at least two after it) holds one-off work — the
first call's tracing and function instantiation, the iterator's `init_func`, a
compile — and is set aside (`RunLedger.startup`): its time is reported once,
and the per-step shares describe the steady steps only, as XProf's step
analysis leaves out the steps it cannot take whole.

On a host with a device, 5–11 are the device's idle time split by what the
host threads were doing. The ledger sums to the step time exactly, by
construction. Producer-side tf.data work (the map functions running on
tf.data's threads) is not `input`: only the consumer's wait is, because a
pipeline that runs ahead costs the step nothing.

Times are the capture's picoseconds.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

import numpy as np

from reportgen.core.events import schema
from reportgen.core.events.intervals import merged
from reportgen.core.events.table import EventTable
from reportgen.core.events.tf_op import TENSORFLOW

LEDGER_KEYS: tuple[str, ...] = (
    "device_compute", "device_collectives", "device_copies", "compiled_program", "compilation", "kernel_launch",
    "input", "synchronization", "host_compute", "python", "other",
)
LEDGER_LABELS: dict[str, str] = {
    "device_compute": "Device compute",
    "device_collectives": "Device collectives",
    "device_copies": "Device copies",
    "compiled_program": "Compiled XLA program (host)",
    "input": "Waiting for input",
    "compilation": "Compilation",
    "synchronization": "Host waiting on the device (synchronize)",
    "kernel_launch": "Op dispatch and kernel launch",
    "host_compute": "Host compute (framework ops)",
    "python": "Python",
    "other": "Nothing identified",
}
DEVICE_KEYS = ("device_compute", "device_collectives", "device_copies")
TOP_NAMES = 5  # contributors kept per cause

# JAX's lowering of a traced function to a module (`lower_sharding_computation`, `lower_mesh_computation`) is part
# of compiling it: on a jit cache miss it runs before `backend_compile_and_load`.
COMPILE_NAMES = re.compile(r"backend_compile|compile_or_get_cached|Compiler::Compile|Client::Compile|(^|:)XlaCompile$|"
                           r"^lower_(sharding|mesh)_computation$|^jaxpr_to_mlir_module$")
SYNC_API_NAMES = re.compile(r"^(cuda|cu|hip)(Stream|Device|Ctx|Event)Synchronize", re.IGNORECASE)
# PJRT's CPU client blocking the dispatching thread until the devices' threads ran the program it launched (a
# program with collectives is launched synchronously): the host waits on the device, it does not dispatch.
_DEVICE_WAIT = re.compile(r"^Wait for LaunchOnDevice completion$")
_PROGRAM = re.compile(r"^ThunkExecutor::Execute|CpuExecutable::Execute|PjRtCpuExecutable::Execute|"
                      r"TfrtCpuExecutable::Execute")
# JAX / PJRT dispatching a compiled program to a device (the host's part of running it).
_DISPATCH = re.compile(r"^PjitFunction\(|PjRt\w*::Execute|PJRT_LoadedExecutable_Execute|ExecuteHelper|"
                       r"LoadedExecutable::Execute")
DISPATCH_NAMES = _DISPATCH  # for the findings: a contributor to `kernel_launch` that is a program's dispatch
# A tf.function's execution (`EagerLocalExecute: __inference_train_step_123`); tf.data's functions are not the step.
_TF_FUNCTION = re.compile(r"^EagerLocalExecute: __inference_(?!.*Dataset)")
# TF running an op eagerly, one op from Python (its fast path from Python, the op's local execution): the op's work,
# where no tf.function runs it.
_EAGER_OP = re.compile(r"^TFE_Py_FastPathExecute_C$|^EagerLocalExecute: (?!__inference_)")
_PROGRAM_LINE = "tf_XLA"  # XLA:CPU's thread pools: tf_XLAEigen, tf_XLAPjRtCpuClient, …
_TF_DATA_THREADS = ("tf_data_private_threadpool", "tf_data_iterator_resource")
# tf.data's consumer side: the GetNext ops (by op type) and their kernels' own events.
_INPUT_OP_TYPES = {"IteratorGetNext", "IteratorGetNextSync", "IteratorGetNextAsOptional",
                   "MultiDeviceIteratorGetNextFromShard", "OptionalGetValue"}
# XProf's own test is a name starting with "IteratorGetNext" (any case); the multi-device iterator's shard reads
# and from_generator's functions (called through RemoteCall) are the consumer's waits too.
_INPUT_EVENT = re.compile(r"(?i)^(EagerLocalExecute: )?(MultiDevice)?IteratorGetNext|^RemoteCall\w*__inference__(next|init|finalize)_func|"
                          # PJRT's CPU client copying a batch into device buffers (`jax.device_put`): a transfer
                          r"^H2D Dispatch$")
# Python functions (the Python tracer's `$file:line name`) that make or fetch a batch: `batch`, `make_batch`, …
_INPUT_FUNCTION = re.compile(r"(?i)^\$\S+ ((make|get|load|next|sample|read|fetch|generate|build|prepare)_?)?"
                             r"(batch(es)?|data|inputs?)$|^\$\S*(dataset|dataloader|data_loader|iterator)\S*\.py:\d+ "
                             r"(__next__|next|_next_internal)$|"
                             # JAX's host-to-device transfers of a batch (XProf's step breakdown counts host-to-device
                             # transfers as input too)
                             r"^\$\S*(api|array_constructors|lax_numpy)\.py:\d+ (device_put|asarray|array)$")
# What programs name their data loading (trace annotations, Python functions): whole words.
_INPUT_NAME = re.compile(r"(?i)(^|[\s:_.$])(data_?load(ing|er)?|load_?(data|batch(es)?)|get_?(next_?)?batch(es)?|"
                         r"next_?batch|input_?(fn|pipeline)|dataloader|prefetch_to_device)($|[\s(_.])")
_COLLECTIVE_PREFIX = ("nccl", "rccl", "all-reduce", "all-gather", "reduce-scatter", "collective-permute",
                      "all-to-all", "allreduce", "allgather")


@dataclass
class Contributor:
    """A name (event or op type) whose events held a cause's exposed time."""

    name: str
    count: int  # its events inside the steps
    exposed_ps: int  # the time it held the cause, over the steps (not its raw duration)
    per_step_ps: list[int] = field(default_factory=list)  # the same, step by step (the host's steps' order)


@dataclass
class LedgerStep:
    name: str
    begin_ps: int
    end_ps: int
    ps: dict[str, int]  # LEDGER_KEYS → exposed time in this step; sums to end_ps - begin_ps

    @property
    def duration_ps(self) -> int:
        return self.end_ps - self.begin_ps


@dataclass
class HostLedger:
    """One host's steps, each split over LEDGER_KEYS, and who held each cause."""

    host: str
    has_device: bool
    inferred_from: str = ""  # "" when the steps are the capture's own (XProf's); else how they were inferred
    steps: list[LedgerStep] = field(default_factory=list)
    top: dict[str, list[Contributor]] = field(default_factory=dict)  # cause → most exposed names first
    gpu_private_threads: bool = False  # TF_GPU_THREAD_MODE=gpu_private in effect (threads tf_gpu_private_*)
    python_generator: bool = False  # a tf.data source is a Python generator (`from_generator`)
    distributed_iterator: bool = False  # input comes through tf.distribute's multi-device iterator
    python_traced: bool = False  # the Python tracer was on (`$file:line function` events)
    tf_function: bool = False  # the step runs a traced tf.function (`__inference_…`, tf.data's own left out)
    eager_ops: bool = False  # ops run eagerly from Python (`EagerLocalExecute: MatMul`, …)
    # While the step waited for input: how long, and the time tf.data's own threads were busy then (summed over the
    # threads: their ratio is how many of them kept working on average, what parallelism already uses).
    input_ps: int = 0
    producer_busy_ps: int = 0
    # Of the input wait, the time a Python function ran inside tf.data (`tf.py_function` / `tf.numpy_function`:
    # EagerPyFunc, PyFunc ops), which holds the GIL whatever the map's parallelism.
    input_python_ps: int = 0
    # Of the steps' unidentified time ('other'), the time such a Python function ran inside tf.data: the step's own
    # Python (the loop, a tf.function's call) waits for the GIL it holds.
    other_ps: int = 0
    other_python_ps: int = 0
    # The host events of its first step that no later step repeats as long: (name, how much longer it ran there
    # than at most in a later step), innermost first; what a start-up step (below) spent its extra time on.
    one_off: list[tuple[str, int]] = field(default_factory=list)
    # Set by run_ledger: the first analysed step when it is start-up (left out of `steps`), and per cause the
    # names that held that cause in it, (name, ps).
    startup: list[LedgerStep] = field(default_factory=list)
    startup_top: dict[str, list[tuple[str, int]]] = field(default_factory=dict)
    # Set by run_ledger: the capture's steps that the run's step analysis does not keep (XProf leaves out the steps
    # it cannot take whole, at the capture's ends), by name.
    not_analysed: list[str] = field(default_factory=list)

    def total_ps(self, key: str) -> int:
        return sum(s.ps[key] for s in self.steps)


def _intervals(table: EventTable, rows: np.ndarray, windows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The union of the rows' [start, end) clipped to the (sorted, disjoint) windows [k, 0:2]."""
    if len(rows) == 0 or len(windows) == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    s, e = merged(table.start[rows], table.end[rows])
    return _clip(s, e, windows)


def _clip(s: np.ndarray, e: np.ndarray, windows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    out_s, out_e = [], []
    for lo, hi in windows.tolist():  # one turn per step: its intervals found by bisection
        a, b = np.searchsorted(e, lo, side="right"), np.searchsorted(s, hi, side="left")
        cs, ce = np.clip(s[a:b], lo, hi), np.clip(e[a:b], lo, hi)
        keep = ce > cs
        out_s.append(cs[keep])
        out_e.append(ce[keep])
    return np.concatenate(out_s), np.concatenate(out_e)


def _union(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    if len(a[0]) == 0:
        return b
    if len(b[0]) == 0:
        return a
    return merged(np.concatenate([a[0], b[0]]), np.concatenate([a[1], b[1]]))


def _minus(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """A − B for sorted disjoint interval sets: A intersected with the gaps of B (linear after two bisections, no
    sort: these sets hold every kernel of a capture)."""
    if len(a[0]) == 0 or len(b[0]) == 0:
        return a
    lowest, highest = np.iinfo(np.int64).min, np.iinfo(np.int64).max
    gap_s = np.concatenate([[lowest], b[1]])
    gap_e = np.concatenate([b[0], [highest]])
    keep = gap_e > gap_s
    return _intersect(a, (gap_s[keep], gap_e[keep]))


def _intersect(a: tuple[np.ndarray, np.ndarray], c: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """A ∩ C for sorted disjoint interval sets, sorted and disjoint: each pair of overlapping intervals (at most
    |A| + |C| of them) found by bisection."""
    lo = np.searchsorted(c[1], a[0], side="right")  # the first C interval ending after each A interval starts
    hi = np.searchsorted(c[0], a[1], side="left")  # past the last C interval starting before it ends
    counts = np.maximum(hi - lo, 0)
    total = int(counts.sum())
    if total == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    which_a = np.repeat(np.arange(len(counts)), counts)
    first = np.repeat(lo - np.concatenate([[0], np.cumsum(counts)[:-1]]), counts)
    which_c = first + np.arange(total)
    start = np.maximum(a[0][which_a], c[0][which_c])
    end = np.minimum(a[1][which_a], c[1][which_c])
    keep = end > start
    return start[keep], end[keep]


def _inside(intervals: tuple[np.ndarray, np.ndarray], points: np.ndarray) -> np.ndarray:
    """Per point: does it lie in one of the sorted disjoint [s, e)."""
    s, e = intervals
    k = np.searchsorted(s, points, side="right") - 1
    return (k >= 0) & (e[np.maximum(k, 0)] > points)


def covered_before(intervals: tuple[np.ndarray, np.ndarray], t: np.ndarray) -> np.ndarray:
    """Per time t: how much of the sorted disjoint intervals lies before t (exact, in integers)."""
    s, e = intervals
    if len(s) == 0:
        return np.zeros(len(t), np.int64)
    cum = np.concatenate([[0], np.cumsum(e - s)])
    k = np.searchsorted(s, t, side="right")  # intervals starting at or before t
    last = np.maximum(k - 1, 0)
    partial = np.clip(t - s[last], 0, (e - s)[last])
    return np.where(k > 0, cum[last] + partial, 0)


def _per_window(intervals: tuple[np.ndarray, np.ndarray], windows: np.ndarray) -> np.ndarray:
    return covered_before(intervals, windows[:, 1]) - covered_before(intervals, windows[:, 0])


@dataclass
class _Names:
    """Per event metadata, what its name says: each test run once over the (interned) names, not per event."""

    collective: np.ndarray
    copy: np.ndarray
    input: np.ndarray
    compile: np.ndarray
    sync: np.ndarray
    program: np.ndarray
    python: np.ndarray
    generator: np.ndarray
    dispatch: np.ndarray


def _names(table: EventTable) -> _Names:
    flags = np.zeros((len(table.md_names), 9), dtype=bool)
    for i, raw in enumerate(table.md_names.tolist()):
        n = str(raw)
        op = n.lstrip("%")  # TPU XLA ops are named by their HLO text: `%copy-done.2 = f32[…] copy-done(…)`
        flags[i] = (op.lower().startswith(_COLLECTIVE_PREFIX),
                    op.startswith(("Memcpy", "Memset", "copy-start", "copy-done")),
                    bool(_INPUT_EVENT.search(n) or _INPUT_NAME.search(n) or _INPUT_FUNCTION.search(n)),
                    bool(COMPILE_NAMES.search(n)), bool(SYNC_API_NAMES.match(n) or _DEVICE_WAIT.match(n)),
                    bool(_PROGRAM.search(n)),
                    n.startswith("$"),
                    n.endswith("::Generator"),
                    bool(_DISPATCH.search(n)))
    return _Names(*(flags[:, k] for k in range(9)))


def _md_mask(table: EventTable, predicate) -> np.ndarray:
    return np.array([bool(predicate(str(n))) for n in table.md_names], dtype=bool)


def _lines_named(table: EventTable, prefixes: tuple[str, ...]) -> np.ndarray:
    """Per line: does its (thread) name start with one of `prefixes`."""
    return np.array([str(n).startswith(prefixes) for n in table.line_names], dtype=bool)


def _nested_in(table: EventTable, rows: np.ndarray, outer: np.ndarray) -> np.ndarray:
    """Per row: does it begin inside one of the `outer` rows of the same thread."""
    out = np.zeros(len(rows), dtype=bool)
    if len(rows) == 0 or len(outer) == 0:
        return out
    for line in np.intersect1d(table.line[rows], table.line[outer]).tolist():  # a host has tens of threads
        mine = np.flatnonzero(table.line[rows] == line)
        theirs = outer[table.line[outer] == line]
        theirs = theirs[np.argsort(table.start[theirs], kind="stable")]
        reach = np.maximum.accumulate(table.end[theirs])
        k = np.searchsorted(table.start[theirs], table.start[rows[mine]], side="right") - 1
        out[mine] = (k >= 0) & (reach[np.maximum(k, 0)] > table.start[rows[mine]])
    return out


def _enclosing(table: EventTable, outer: np.ndarray, inner: np.ndarray) -> np.ndarray:
    """Per `outer` row: does an `inner` row of the same thread begin inside it (a thread's events nest, so it lies
    inside it)."""
    out = np.zeros(len(outer), dtype=bool)
    if len(outer) == 0 or len(inner) == 0:
        return out
    for line in np.intersect1d(table.line[outer], table.line[inner]).tolist():
        mine = np.flatnonzero(table.line[outer] == line)
        starts = np.sort(table.start[inner[table.line[inner] == line]])
        lo = np.searchsorted(starts, table.start[outer[mine]], side="left")
        hi = np.searchsorted(starts, table.end[outer[mine]], side="left")
        out[mine] = hi > lo
    return out


def _launching_ops(table: EventTable, ops: np.ndarray, launches: np.ndarray) -> np.ndarray:
    """Per framework-op row: does a launch event (correlation id) of the same thread begin inside it."""
    out = np.zeros(len(ops), dtype=bool)
    if len(ops) == 0 or len(launches) == 0:
        return out
    for line in np.intersect1d(table.line[ops], table.line[launches]).tolist():  # a host has tens of threads
        mine = np.flatnonzero(table.line[ops] == line)
        starts = np.sort(table.start[launches[table.line[launches] == line]])
        first = np.searchsorted(starts, table.start[ops[mine]], side="left")
        ok = first < len(starts)
        out[mine[ok]] = starts[first[ok]] < table.end[ops[mine[ok]]]
    return out


def _device_rows(table: EventTable, names: _Names) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(compute, collective, copy) rows of the device planes: GPU streams (XProf's derived lines left out), TPU
    XLA ops."""
    gpu = table.planes_named(lambda name: name.startswith(schema.GPU_PLANE_PREFIX))
    tpu = table.planes_named(lambda name: name.startswith(schema.TPU_PLANE_PREFIX))
    lines = np.flatnonzero((np.isin(table.line_planes, gpu) & ~table.derived_lines) |
                           (np.isin(table.line_planes, tpu) & (table.line_names == schema.XLA_OP_LINE)))
    rows = table.events_of_lines(lines)
    rows = rows[table.duration[rows] > 0]
    empty = np.zeros(0, np.int64)
    if len(rows) == 0:
        return empty, empty, empty
    collective_md, copy_md = names.collective, names.copy
    is_copy = copy_md[table.md[rows]]
    if table.has_stat("memcpy_details") or table.has_stat("memset_details"):
        is_copy |= (table.str_stat_at("memcpy_details", rows) >= 0) | (table.str_stat_at("memset_details", rows) >= 0)
    is_collective = collective_md[table.md[rows]] & ~is_copy
    return rows[~is_copy & ~is_collective], rows[is_collective], rows[is_copy]


def _host_rows(table: EventTable, has_device: bool, names: _Names) -> dict[str, np.ndarray]:
    """The host-thread rows of each host-side cause (a row may fall in several; precedence sorts that out)."""
    empty = np.zeros(0, np.int64)
    keys = LEDGER_KEYS[3:-1]
    if table.host_plane is None:
        return dict.fromkeys(keys, empty)
    lines = table.lines_of_plane(table.host_plane)
    lines = lines[~table.derived_lines[lines]]
    rows = table.events_of_lines(lines)
    rows = rows[table.duration[rows] > 0]
    md = table.md[rows]
    # tf.data's own threads run the pipeline ahead of the step (producer side): their ops are not the step's.
    producer = _lines_named(table, _TF_DATA_THREADS)[table.line[rows]]
    tf_ops = table.md_tf_op
    framework = np.array([op.category == TENSORFLOW for op in tf_ops], dtype=bool)[md]
    input_type = np.array([op.type in _INPUT_OP_TYPES for op in tf_ops], dtype=bool)[md]
    is_input = input_type | names.input[md]
    if table.has_stat("_ipl_stage_name"):  # input-pipeline stages that newer pipelines annotate (XProf: input)
        stage = table.str_stat_at("_ipl_stage_name", rows)
        is_input |= (stage >= 0) & (table.strings(np.maximum(stage, 0)) != "")
    is_compile = names.compile[md]
    is_sync = names.sync[md]
    is_python = names.python[md]
    launch = table.stat_present("correlation_id")[rows] if table.has_stat("correlation_id") else \
        np.zeros(len(rows), bool)
    dispatch = rows[names.dispatch[md] & ~launch]
    # A dispatch that compiles is a jit cache miss: its time besides the compile (tracing the function, lowering
    # it) is the recompilation's too.
    compiling = _enclosing(table, dispatch, rows[is_compile])
    dispatch, missed = dispatch[~compiling], dispatch[compiling]
    out = {
        "compiled_program": empty,
        "input": rows[is_input],
        "compilation": np.concatenate([rows[is_compile], missed]),
        "synchronization": rows[is_sync],
        # JAX's dispatch inside an input function (jnp.asarray's transfer, a data-loading annotation) is the input's.
        "kernel_launch": np.concatenate([rows[launch], dispatch[~_nested_in(table, dispatch, rows[is_input])]]),
        "host_compute": empty,
        "python": rows[is_python & ~is_input & ~producer],
    }
    eager = _md_mask(table, lambda n: bool(_EAGER_OP.search(n)))[md]
    ops = rows[(framework | eager) & ~is_input & ~is_compile & ~launch & ~producer]
    if has_device:
        dispatch = _launching_ops(table, ops, rows[launch])
        out["kernel_launch"] = np.concatenate([out["kernel_launch"], ops[dispatch]])
        out["host_compute"] = ops[~dispatch]
    else:
        on_xla_threads = _lines_named(table, (_PROGRAM_LINE,))[table.line[rows]]
        # XLA's threads also run the host-to-device copies of a batch, which are its transfer, not the program; the
        # thread pool's own regions wrap whatever a task runs, so they say nothing of their own.
        wrapper = _md_mask(table, lambda n: n.startswith("ThreadpoolListener::"))[md]
        program = names.program[md] | (on_xla_threads & ~names.input[md] & ~wrapper)
        out["compiled_program"] = rows[program]
        out["host_compute"] = ops
    return out


def _outermost(table: EventTable, rows: np.ndarray) -> np.ndarray:
    """The rows not nested inside another of `rows` on the same thread (a moment of one thread counts once)."""
    if len(rows) == 0:
        return rows
    rows = rows[np.lexsort((-table.end[rows], table.start[rows], table.line[rows]))]
    line, end = table.line[rows], table.end[rows]
    first = np.concatenate([[True], line[1:] != line[:-1]])
    reach = end.copy()
    starts = np.flatnonzero(first)
    for a, b in zip(starts, [*starts[1:], len(rows)]):  # one turn per thread
        np.maximum.accumulate(reach[a:b], out=reach[a:b])
    before = np.concatenate([[np.iinfo(np.int64).min], reach[:-1]])
    return rows[first | (table.start[rows] >= before)]


_PY_FUNC_TYPES = {"EagerPyFunc", "PyFunc", "PyFuncStateless"}


def _python_in_pipeline(table: EventTable, waiting: tuple[np.ndarray, np.ndarray]) -> int:
    """The time of the input wait during which a tf.py_function / numpy_function op ran on some thread."""
    if len(waiting[0]) == 0 or table.host_plane is None:
        return 0
    py_md = np.array([op.type in _PY_FUNC_TYPES for op in table.md_tf_op], dtype=bool)
    rows = table.events_of_lines(table.lines_of_plane(table.host_plane))
    rows = rows[py_md[table.md[rows]] & (table.duration[rows] > 0)]
    if len(rows) == 0:
        return 0
    s, e = merged(table.start[rows], table.end[rows])
    return int((covered_before((s, e), waiting[1]) - covered_before((s, e), waiting[0])).sum())


def _producer_busy(table: EventTable, waiting: tuple[np.ndarray, np.ndarray]) -> tuple[int, int]:
    """(the input wait's length, the busy time of tf.data's threads inside it, summed over the threads)."""
    total = int((waiting[1] - waiting[0]).sum())
    if total == 0 or table.host_plane is None:
        return total, 0
    lines = table.lines_of_plane(table.host_plane)
    lines = lines[_lines_named(table, _TF_DATA_THREADS)[lines]]
    busy = 0
    for line in lines.tolist():  # one turn per tf.data thread
        rows = table.events_of_lines(np.array([line]))
        rows = rows[table.duration[rows] > 0]
        if len(rows) == 0:
            continue
        s, e = merged(table.start[rows], table.end[rows])
        busy += int((covered_before((s, e), waiting[1]) - covered_before((s, e), waiting[0])).sum())
    return total, busy


def _contributors(table: EventTable, rows: np.ndarray, exposed: tuple[np.ndarray, np.ndarray],
                  windows: np.ndarray) -> list[Contributor]:
    """The names whose events held most of a cause's exposed time, step by step. A name's events are merged first
    (nested calls, the same op on several devices), so that no moment counts twice for it."""
    if len(rows) == 0 or len(exposed[0]) == 0:
        return []
    rows = _outermost(table, rows)
    held = covered_before(exposed, table.end[rows]) - covered_before(exposed, table.start[rows])
    rows, held = rows[held > 0], held[held > 0]
    if len(rows) == 0:
        return []
    # Candidates by an upper bound (each event's own part, summed by name), then each measured exactly.
    mds, inverse = np.unique(table.md[rows], return_inverse=True)
    md_ps = np.bincount(inverse, weights=held.astype(np.float64))
    by_name: dict[str, list[int]] = {}
    bound: dict[str, float] = {}
    for k, (md, ps) in enumerate(zip(mds.tolist(), md_ps.tolist())):
        name = str(table.md_display_names[md]) or str(table.md_names[md])
        by_name.setdefault(name, []).append(k)
        bound[name] = bound.get(name, 0.0) + ps
    candidates = sorted(bound, key=lambda n: (-bound[n], n))[:2 * TOP_NAMES]
    out = []
    for name in candidates:
        mine = rows[np.isin(inverse, by_name[name])]
        per_step = _per_window(_intersect(merged(table.start[mine], table.end[mine]), exposed), windows)
        out.append(Contributor(name, len(mine), int(per_step.sum()), [int(v) for v in per_step]))
    out.sort(key=lambda c: (-c.exposed_ps, c.name))
    return out[:TOP_NAMES]


MIN_STEADY_STEPS = 2  # steps after a start-up step, to tell it from them
STARTUP_FACTOR = 1.5  # a first step this many times the median of the later ones is start-up (ours)
ONE_OFF_MIN_PS = 10_000_000  # 10 µs: shorter one-off events are not named (and a quarter of the extra at least)
ONE_OFF_NAMED = 3
ONE_OFF_EXPLAINED = 0.75  # an event whose inner one-off events hold this much of its extra is named by them


def _one_off_events(table: EventTable, windows: np.ndarray) -> list[tuple[str, int]]:
    """The host events of the first step that run longer there than at most in any later step: (name, the extra
    time), the innermost of nested ones (a compile rather than the dispatch around it), longest extra first."""
    if len(windows) < MIN_STEADY_STEPS + 1 or table.host_plane is None:
        return []
    lines = table.lines_of_plane(table.host_plane)
    rows = table.events_of_lines(lines[~table.derived_lines[lines]])
    rows = rows[table.duration[rows] > 0]
    first = rows[(table.start[rows] >= windows[0, 0]) & (table.start[rows] < windows[0, 1])]
    later = rows[(table.start[rows] >= windows[1, 0]) & (table.start[rows] < windows[-1, 1])]
    if len(first) == 0:
        return []
    longest_later = np.zeros(len(table.md_names), np.int64)
    np.maximum.at(longest_later, table.md[later], table.duration[later])
    end = np.minimum(table.end[first], windows[0, 1])
    extra = end - table.start[first] - longest_later[table.md[first]]
    later_spans = windows[1:, 1] - windows[1:, 0]
    excess = int(windows[0, 1] - windows[0, 0] - np.median(later_spans))
    keep = extra >= max(ONE_OFF_MIN_PS, excess // 4)
    candidates = sorted(zip(first[keep].tolist(), extra[keep].tolist()), key=lambda c: table.duration[c[0]])
    kept: list[tuple[int, int]] = []
    for row, more in candidates:  # shortest first: an event is left out when the ones inside it explain it
        inner = [(k, k_more) for k, k_more in kept if table.line[k] == table.line[row] and
                 table.start[k] >= table.start[row] and table.end[k] <= table.end[row]]
        outermost = [k_more for k, k_more in inner if not any(
            j != k and table.start[j] <= table.start[k] and table.end[k] <= table.end[j] for j, _ in inner)]
        if sum(outermost) < ONE_OFF_EXPLAINED * more:
            kept.append((row, more))
    # Of the events kept, one inside another is part of it: the outer one is named (its extra holds the inner's).
    kept = [(row, more) for row, more in kept if not any(
        k != row and table.line[k] == table.line[row] and table.start[k] <= table.start[row] and
        table.end[row] <= table.end[k] for k, _ in kept)]
    kept.sort(key=lambda c: -c[1])
    out: list[tuple[str, int]] = []
    for row, more in kept:
        md = table.md[row]
        name = str(table.md_display_names[md]) or str(table.md_names[md])
        if name not in (n for n, _ in out):
            out.append((name, int(more)))
    return out[:ONE_OFF_NAMED]


def step_windows(step_db) -> list[tuple[str, int, int]]:
    """(name, begin, end) of each step of a host's step database, over all its cores, disjoint and in time order
    (a step that begins before the previous one ends starts where that one ends)."""
    s = step_db.steps
    if s.empty:
        return []
    # One pass over the rows (a step has a row per core): a pandas group-by costs ≈ 1 ms a host
    # however few the steps, and a pod's run has thousands of hosts.
    begin = s["begin_ps"].to_numpy(np.int64)
    spans: dict[int, list] = {}  # step → [name of its first row, earliest begin, latest end]
    for step, name, b, e in zip(s["step_num"].tolist(), s["name"].tolist(), begin.tolist(),
                                (begin + s["duration_ps"].to_numpy(np.int64)).tolist()):
        span = spans.get(step)
        if span is None:
            spans[step] = [name, b, e]
        else:
            span[1], span[2] = min(span[1], b), max(span[2], e)
    return _disjoint([(str(name) or str(step), b, e) for step, (name, b, e) in spans.items() if e > b])


def host_ledger(host: str, table: EventTable, steps: list[tuple[str, int, int]], inferred_from: str = "") -> HostLedger:
    """The ledger of one host over its (disjoint, time-ordered) steps (name, begin, end)."""
    names = _names(table)
    compute, collective, copies = _device_rows(table, names)
    has_device = bool(len(compute) or len(collective) or len(copies))
    gpu_private = any(str(n).startswith("tf_gpu_private") for n in table.line_names)
    # A Python generator feeds tf.data when a GeneratorDataset runs a py_func (from_generator); tf.distribute's
    # multi-device iterator runs a GeneratorDataset too, but its functions are RemoteCalls to the source device.
    py_func = np.array([op.type in _PY_FUNC_TYPES for op in table.md_tf_op], dtype=bool)
    generator = bool(names.generator.any() and py_func.any()) or any(
        "generator_py_func" in str(n) for n in table.md_names)
    distributed = any("MultiDeviceIterator" in str(n) for n in table.md_names)
    ledger = HostLedger(host, has_device, inferred_from, gpu_private_threads=gpu_private, python_generator=generator,
                        distributed_iterator=distributed, python_traced=bool(names.python.any()),
                        tf_function=any(_TF_FUNCTION.search(str(n)) for n in table.md_names),
                        eager_ops=any(str(n).startswith("EagerLocalExecute: ") and _EAGER_OP.search(str(n))
                                      for n in table.md_names))
    if not steps:
        return ledger
    windows = np.array([[b, e] for _, b, e in steps], dtype=np.int64)
    host_rows = _host_rows(table, has_device, names)
    by_key = {"device_compute": compute, "device_collectives": collective, "device_copies": copies, **host_rows}
    covered = (np.zeros(0, np.int64), np.zeros(0, np.int64))
    per_step: dict[str, np.ndarray] = {}
    for key in LEDGER_KEYS[:-1]:
        rows = by_key[key]
        mine = _intervals(table, rows, windows)
        if key == "kernel_launch":
            # A dispatch (or launching op) that waits inside for the device is not dispatching while it waits: that
            # part is synchronization's, below it in the precedence.
            mine = _minus(mine, _intervals(table, by_key["synchronization"], windows))
        exposed = _minus(mine, covered)
        per_step[key] = _per_window(exposed, windows)
        ledger.top[key] = _contributors(table, rows, exposed, windows)
        if key == "input":
            ledger.input_ps, ledger.producer_busy_ps = _producer_busy(table, exposed)
            ledger.input_python_ps = _python_in_pipeline(table, exposed)
        covered = _union(covered, mine)
    spans = windows[:, 1] - windows[:, 0]
    per_step["other"] = spans - _per_window(covered, windows)
    rest = _minus((windows[:, 0].copy(), windows[:, 1].copy()), covered)
    ledger.other_ps = int((rest[1] - rest[0]).sum())
    ledger.other_python_ps = _python_in_pipeline(table, rest) if ledger.other_ps else 0
    ledger.top["other"] = []
    ledger.one_off = _one_off_events(table, windows)
    ledger.steps = [LedgerStep(name, int(b), int(e), {k: int(per_step[k][i]) for k in LEDGER_KEYS})
                    for i, (name, b, e) in enumerate(steps)]
    return ledger




# --- steps where the capture marks none ---------------------------------------------------------------------

MIN_INFERRED_STEPS = 3
_KERAS3_BATCH = "Profiled batch"


def inferred_steps(table: EventTable) -> tuple[list[tuple[str, int, int]], str]:
    """Steps for a capture whose steps XProf does not find: Keras 3's `Profiled batch <n>` host events, else the
    program's own step markers that XProf's grouping did not take (`Trace(..., step_num=…, _r=1)`), else the runs of
    the most repeated top-level XLA program (one run to the next), with how they were found."""
    if table.host_plane is not None:
        rows = table.events_of_lines(table.lines_of_plane(table.host_plane))
        batch_md = _md_mask(table, lambda n: n.startswith(_KERAS3_BATCH))
        rows = rows[batch_md[table.md[rows]] & (table.duration[rows] > 0)]
        if len(rows) >= 1:
            rows = rows[np.argsort(table.start[rows], kind="stable")]
            return (_disjoint([(str(table.names_of(np.array([r]))[0]), int(table.start[r]), int(table.end[r]))
                               for r in rows]), "Keras's 'Profiled batch' events")
    if table.host_plane is not None and table.has_stat("_r") and table.has_stat("step_num"):
        rows = table.events_of_lines(table.lines_of_plane(table.host_plane))
        _, marked = table.int_stat_at("_r", rows)
        numbers, numbered = table.int_stat_at("step_num", rows)
        keep = marked & numbered & (table.duration[rows] > 0)
        if keep.sum() >= 1:
            mine = rows[keep]
            names = table.names_of(mine)
            windows = [(f"{n} {int(k)}", int(table.start[r]), int(table.end[r]))
                       for r, n, k in zip(mine.tolist(), names.tolist(), numbers[keep].tolist())]
            return _disjoint(windows), "the program's `Trace(..., step_num=…, _r=1)` markers"
    best: tuple[int, int, str, np.ndarray] | None = None
    for line in np.flatnonzero(table.line_names == schema.XLA_MODULE_LINE).tolist():
        rows = table.events_of_lines(np.array([line]))
        rows = rows[table.duration[rows] > 0]
        if len(rows) == 0:
            continue
        names = table.names_of(rows)
        values, counts = np.unique(names.astype(str), return_counts=True)
        k = int(np.argmax(counts))
        mine = rows[names.astype(str) == values[k]]
        candidate = (int(counts[k]), int(table.duration[mine].sum()), str(values[k]), mine)
        if best is None or candidate[:2] > best[:2]:
            best = candidate
    if best is None or best[0] < MIN_INFERRED_STEPS:
        return [], ""
    count, _, name, rows = best
    rows = rows[np.argsort(table.start[rows], kind="stable")]
    starts = table.start[rows]
    ends = np.concatenate([starts[1:], [table.end[rows[-1]]]])
    windows = [(f"{name} #{i + 1}", int(b), int(e)) for i, (b, e) in enumerate(zip(starts.tolist(), ends.tolist()))]
    return _disjoint(windows), f"the {count} runs of {name} (one run's start to the next)"


def _disjoint(windows: list[tuple[str, int, int]]) -> list[tuple[str, int, int]]:
    out, reach = [], None
    for name, begin, end in sorted(windows, key=lambda w: (w[1], w[2])):
        begin = begin if reach is None else max(begin, reach)
        if end > begin:
            out.append((name, begin, end))
            reach = end
    return out


# --- a run's ledger ---------------------------------------------------------------------------------------

@dataclass
class RunLedger:
    """The hosts' ledgers over the steps the run's step analysis keeps (or the inferred ones)."""

    hosts: list[HostLedger]

    @property
    def steps(self) -> list[tuple[str, LedgerStep]]:
        return [(h.host, s) for h in self.hosts for s in h.steps]

    @property
    def step_count(self) -> int:
        return sum(len(h.steps) for h in self.hosts)

    @property
    def inferred_from(self) -> str:
        return next((h.inferred_from for h in self.hosts if h.inferred_from), "")

    @property
    def startup(self) -> list[tuple[HostLedger, LedgerStep]]:
        """Each host's start-up step, set aside from the steps the shares are over."""
        return [(h, s) for h in self.hosts for s in h.startup]

    @property
    def not_analysed(self) -> int:
        """The capture's steps that the run's step analysis leaves out (over the hosts)."""
        return sum(len(h.not_analysed) for h in self.hosts)

    def steady_stats(self) -> dict[str, float]:
        """The steps' (start-up left out) count, average, standard deviation (the sample's), fastest and slowest,
        in ms."""
        times = [s.duration_ps / 1e9 for _, s in self.steps]
        if not times:
            return {"steps": 0, "average_ms": 0.0, "standard_deviation_ms": 0.0, "minimum_ms": 0.0,
                    "maximum_ms": 0.0}
        mean = sum(times) / len(times)
        sd = (sum((t - mean) ** 2 for t in times) / (len(times) - 1)) ** 0.5 if len(times) > 1 else 0.0
        return {"steps": len(times), "average_ms": mean, "standard_deviation_ms": sd, "minimum_ms": min(times),
                "maximum_ms": max(times)}

    @property
    def has_device(self) -> bool:
        return any(h.has_device for h in self.hosts)

    @property
    def gpu_private_threads(self) -> bool:
        return any(h.gpu_private_threads for h in self.hosts)

    @property
    def python_generator(self) -> bool:
        return any(h.python_generator for h in self.hosts)

    @property
    def distributed_iterator(self) -> bool:
        return any(h.distributed_iterator for h in self.hosts)

    @property
    def python_traced(self) -> bool:
        return any(h.python_traced for h in self.hosts)

    @property
    def tf_function(self) -> bool:
        return any(h.tf_function for h in self.hosts)

    @property
    def eager_ops(self) -> bool:
        return any(h.eager_ops for h in self.hosts)

    @property
    def input_python_percent(self) -> float | None:
        """The share of the input wait during which a tf.py_function ran (None: no wait)."""
        wait = sum(h.input_ps for h in self.hosts)
        return 100.0 * sum(h.input_python_ps for h in self.hosts) / wait if wait else None

    @property
    def other_python_percent(self) -> float | None:
        """The share of the unidentified step time during which a tf.py_function ran (None: none unidentified)."""
        rest = sum(h.other_ps for h in self.hosts)
        return 100.0 * sum(h.other_python_ps for h in self.hosts) / rest if rest else None

    @property
    def producer_threads_busy(self) -> float | None:
        """While the steps waited for input: how many of tf.data's threads were busy on average (None: no wait, or
        no tf.data threads recorded)."""
        wait = sum(h.input_ps for h in self.hosts)
        busy = sum(h.producer_busy_ps for h in self.hosts)
        return busy / wait if wait and busy else None

    def total_ps(self, key: str) -> int:
        return sum(h.total_ps(key) for h in self.hosts)

    @property
    def step_ps(self) -> int:
        return sum(s.duration_ps for _, s in self.steps)

    def average_ms(self, key: str) -> float:
        n = self.step_count
        return self.total_ps(key) / 1e9 / n if n else 0.0

    def percent(self, key: str) -> float:
        total = self.step_ps
        return 100.0 * self.total_ps(key) / total if total else 0.0

    @property
    def step_ms(self) -> float:
        n = self.step_count
        return self.step_ps / 1e9 / n if n else 0.0

    def top(self, key: str) -> list[tuple[str, int, float]]:
        """(name, events, ms per step) of the names that held `key`, over the hosts, most first."""
        n = self.step_count
        held: dict[str, list[float]] = {}
        for h in self.hosts:
            for c in h.top.get(key, []):
                entry = held.setdefault(c.name, [0, 0.0])
                entry[0] += c.count
                entry[1] += c.exposed_ps
        rows = sorted(held.items(), key=lambda kv: (-kv[1][1], kv[0]))[:TOP_NAMES]
        return [(name, int(count), ps / 1e9 / n if n else 0.0) for name, (count, ps) in rows]


def _kept(c: Contributor, keep: list[bool]) -> Contributor:
    """A contributor over the kept steps only."""
    if not c.per_step_ps or all(keep):
        return c
    per_step = [v for v, k in zip(c.per_step_ps, keep) if k]
    return replace(c, exposed_ps=sum(per_step), per_step_ps=per_step)


def run_ledger(hosts: list[HostLedger], kept: dict[str, set[str]] | None = None) -> RunLedger:
    """The run's ledger; `kept`: per host, the names of the steps its step analysis keeps (XProf drops
    incomplete steps at the capture's ends); a host not in it keeps all of its steps."""
    out = []
    for h in hosts:
        names = (kept or {}).get(h.host)
        keep = [names is None or s.name in names for s in h.steps]
        steps = [s for s, k in zip(h.steps, keep) if k]
        startup: list[LedgerStep] = []
        startup_top: dict[str, list[tuple[str, int]]] = {}
        one_off = h.one_off
        # One-off work makes the first step longer than every later one as well as well above their median: a
        # first step that a later one outlasts is variation (a later recompile, a noisy pipeline), not start-up.
        if len(steps) >= MIN_STEADY_STEPS + 1 and \
                steps[0].duration_ps >= STARTUP_FACTOR * float(np.median([s.duration_ps for s in steps[1:]])) and \
                steps[0].duration_ps > max(s.duration_ps for s in steps[1:]):
            first = keep.index(True)
            keep[first] = False
            startup, steps = [steps[0]], steps[1:]
            startup_top = {key: [(c.name, c.per_step_ps[first]) for c in found
                                 if len(c.per_step_ps) > first and c.per_step_ps[first] > 0]
                           for key, found in h.top.items()}
            one_off = one_off if first == 0 else []  # named for the host's first step only
        top = {key: sorted((_kept(c, keep) for c in found), key=lambda c: (-c.exposed_ps, c.name))
               for key, found in h.top.items()}
        out.append(replace(h, steps=steps, top=top, startup=startup, startup_top=startup_top,
                           one_off=one_off if startup else [],
                           not_analysed=[s.name for s in h.steps if names is not None and s.name not in names]))
    return RunLedger(out)


__all__ = ["COMPILE_NAMES", "DEVICE_KEYS", "DISPATCH_NAMES", "LEDGER_KEYS", "LEDGER_LABELS", "SYNC_API_NAMES",
           "Contributor", "HostLedger", "LedgerStep", "RunLedger", "covered_before", "host_ledger", "inferred_steps",
           "run_ledger", "step_windows"]
