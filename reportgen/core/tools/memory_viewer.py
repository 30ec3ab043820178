"""Memory viewer: an HLO module's buffer assignment replayed as XProf does.

For one module and one memory space (XLA memory colour) this replays the
heap-simulator trace to find the peak of the working space, lists the
buffers live at that peak, and sums the allocations whose lifetime the
simulation does not cover (parameters, outputs, constants, thread-local).
The rules are XProf's (docs/xprof/memory_viewer.md); sizes stay in bytes
here and are converted to MiB only where XProf reports MiB.

The replay walks trace events one by one: a heap simulation is a sequence
of reference-count updates on a few thousand buffers at most, so it is a
loop over the module's (small) buffer table, not over capture events.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from reportgen.core.hlo.model import (
    ALLOC,
    FREE,
    SHARE_WITH,
    HloInstructionProto,
    HloModule,
    HloProto,
    ShapeProto,
    StackFrameIndexProto,
)
from reportgen.core.hlo.shapes import INT64_MAX, shape_text, subshape, unpadded_byte_size
from reportgen.core.host import HostContext
from reportgen.core.ops.op_metrics import device_ps_by_program
from reportgen.core.tools.memory_profile import NEAR_CAPACITY, allocator_capacities
from reportgen.summary_blocks import MemoryBlock, ProgramMemory

SMALL_BUFFER_BYTES = 16 * 1024
MIB = float(1 << 20)


class HeapSimulationError(ValueError):
    """The trace contradicts itself (XProf refuses such a module too)."""


def to_mib(n_bytes: int) -> float:
    return n_bytes / MIB


@dataclass
class Allocation:
    """A `BufferAllocationProto`, with what the viewer derives from it."""

    index: int
    size: int
    color: int
    is_thread_local: bool
    is_entry_parameter: bool
    is_constant: bool
    maybe_live_out: bool
    is_tuple: bool
    assigned: list[tuple[int, int]]  # (logical buffer id, offset)
    trace: int | None = None  # heap-simulator trace this allocation owns

    @property
    def indefinite(self) -> bool:
        # XProf 2.24 (XLA's ComputeIndefiniteAllocationsInBytes) no longer counts
        # thread-local allocations as live for the whole program.
        return self.is_entry_parameter or self.is_constant or self.maybe_live_out

    @property
    def category(self) -> str:
        if self.is_entry_parameter:
            return "Parameter"
        if self.maybe_live_out:
            return "Output"
        if self.is_thread_local:
            return "Thread-local"
        if self.is_constant:
            return "Constant"
        return "Temporary"


@dataclass
class LogicalBuffer:
    id: int
    size: int
    color: int
    shape_index: tuple[int, ...]
    allocation: Allocation
    offset: int
    instruction: HloInstructionProto = field(repr=False)
    shape: ShapeProto = field(repr=False)
    unpadded_size: int = 0

    @property
    def instruction_name(self) -> str:
        return self.instruction.name

    @property
    def name_with_index(self) -> str:
        if not self.shape_index:
            return self.instruction.name
        return f"{self.instruction.name}{{{','.join(map(str, self.shape_index))}}}"


@dataclass
class HeapObject:
    """One row of XProf's `maxHeap`: a buffer live at the peak (or the small-buffer sum)."""

    numbered: int
    label: str
    logical_buffer_id: int
    size_bytes: int
    unpadded_bytes: int
    instruction_name: str = ""
    category: str = ""  # XProf's group_name: Parameter, Output, Thread-local, Constant, Temporary
    tf_op_name: str = ""
    shape: str = ""
    op_code: str = ""
    source_file: str = ""
    source_line: int = 0
    stack_frame: str = ""

    @property
    def size_mib(self) -> float:
        return to_mib(self.size_bytes)

    @property
    def unpadded_mib(self) -> float:
        return to_mib(self.unpadded_bytes)


@dataclass
class MemorySpaceView:
    """The memory viewer for one module and one memory space."""

    module: str  # display name: name(program id)
    module_name: str
    entry_computation_name: str
    memory_space: int
    heap_bytes: np.ndarray  # working space after each trace event (+ final), bytes, no indefinite part
    unpadded_heap_bytes: np.ndarray
    instruction_names: list[str]
    indefinite_bytes: int  # sum of the indefinite allocations of this colour (added to every point)
    peak_heap_bytes: int
    peak_unpadded_heap_bytes: int
    peak_position: int
    max_heap: list[HeapObject]
    by_size: list[int]  # indices into max_heap, largest first
    spans: dict[int, tuple[int, int]]  # logical buffer id -> (start, limit) in trace positions
    entry_parameters_bytes: int
    non_reusable_bytes: int
    maybe_live_out_bytes: int
    total_allocation_bytes: int
    indefinite_allocation_bytes: int
    indefinite_allocations: list[dict]
    error: str | None = None

    # --- XProf's displayed numbers (memory_viewer.md §5–6), MiB -----------------
    @property
    def add_mib(self) -> float:
        return to_mib(self.indefinite_bytes)

    @property
    def peak_heap_mib(self) -> float:
        return to_mib(self.peak_heap_bytes) + self.add_mib

    @property
    def peak_unpadded_heap_mib(self) -> float:
        return to_mib(self.peak_unpadded_heap_bytes) + self.add_mib

    @property
    def heap_sizes_mib(self) -> np.ndarray:
        return self.heap_bytes / MIB + self.add_mib

    @property
    def unpadded_heap_sizes_mib(self) -> np.ndarray:
        return self.unpadded_heap_bytes / MIB + self.add_mib

    @property
    def peak_bytes(self) -> int:
        """Peak allocation (bytes) including the indefinite allocations."""
        return self.peak_heap_bytes + self.indefinite_bytes

    @property
    def peak_unpadded_bytes(self) -> int:
        return self.peak_unpadded_heap_bytes + self.indefinite_bytes

    @property
    def padding_mib(self) -> float:
        """What the layouts' padding adds to the peak."""
        return self.peak_heap_mib - self.peak_unpadded_heap_mib

    @property
    def temporary_mib(self) -> float:
        """The peak without the allocations live for the whole program."""
        return self.peak_heap_mib - to_mib(self.indefinite_allocation_bytes)

    @property
    def temporary_with_fragmentation_mib(self) -> float:
        return to_mib(self.total_allocation_bytes - self.indefinite_allocation_bytes)

    @property
    def fragmentation_percent(self) -> float:
        total = to_mib(self.total_allocation_bytes)
        indefinite = to_mib(self.indefinite_allocation_bytes)
        denominator = total - indefinite
        return 0.0 if denominator == 0 else 100.0 * (total - self.peak_heap_mib) / denominator

    def buffers_frame(self) -> pd.DataFrame:
        """The buffers live at the peak, in program order (CSV / table rows)."""
        rows = []
        for rank, obj in enumerate(self.max_heap):
            size = obj.size_bytes
            rows.append(
                {
                    "Program order": rank,
                    "Size rank": self.by_size.index(rank) + 1 if rank in self.by_size else None,
                    "Instruction": obj.instruction_name or obj.label,
                    "Category": obj.category,
                    "Size (bytes)": size,
                    "Unpadded size (bytes)": obj.unpadded_bytes,
                    "Size (MiB)": obj.size_mib,
                    "Unpadded size (MiB)": obj.unpadded_mib,
                    "Expansion": (size / obj.unpadded_bytes) if obj.unpadded_bytes else None,
                    "Extra memory (bytes)": size - obj.unpadded_bytes if obj.logical_buffer_id >= 0 else 0,
                    "Shape": obj.shape,
                    "TF op name": obj.tf_op_name,
                    "Op code": obj.op_code,
                    "Logical buffer id": obj.logical_buffer_id,
                    "Source": f"{obj.source_file}:{obj.source_line}" if obj.source_file else "",
                }
            )
        return pd.DataFrame(rows, columns=BUFFER_COLUMNS)


BUFFER_COLUMNS = [
    "Program order", "Size rank", "Instruction", "Category", "Size (bytes)", "Unpadded size (bytes)",
    "Size (MiB)", "Unpadded size (MiB)", "Expansion", "Extra memory (bytes)", "Shape", "TF op name",
    "Op code", "Logical buffer id", "Source",
]


# --- indexing the module ---------------------------------------------------------------


@dataclass
class _Index:
    allocations: dict[int, Allocation]  # by allocation index, ascending (XProf's iteration order)
    buffers: dict[int, LogicalBuffer]
    traces: list
    stack_frames: StackFrameIndexProto


def _index(proto: HloProto) -> _Index:
    instructions = {}
    for computation in proto.hlo_module.computations:
        for instruction in computation.instructions:
            instructions[instruction.id] = instruction
    assignment = proto.buffer_assignment
    logical = {lb.id: lb for lb in assignment.logical_buffers}
    allocations: dict[int, Allocation] = {}
    buffers: dict[int, LogicalBuffer] = {}
    for ba in assignment.buffer_allocations:
        allocation = Allocation(
            index=ba.index, size=ba.size, color=ba.color, is_thread_local=ba.is_thread_local,
            is_entry_parameter=ba.is_entry_computation_parameter, is_constant=ba.is_constant,
            maybe_live_out=ba.maybe_live_out, is_tuple=ba.is_tuple,
            assigned=[(a.logical_buffer_id, a.offset) for a in ba.assigned],
        )
        allocations[ba.index] = allocation
        for lb_id, offset in allocation.assigned:
            lb = logical.get(lb_id)
            if lb is None:
                continue
            instruction = instructions.get(lb.defined_at.instruction_id)
            if instruction is None:
                continue
            shape = subshape(instruction.shape, lb.defined_at.shape_index)
            buffers[lb_id] = LogicalBuffer(
                id=lb_id, size=lb.size, color=lb.color, shape_index=tuple(lb.defined_at.shape_index),
                allocation=allocation, offset=offset, instruction=instruction, shape=shape,
                unpadded_size=unpadded_byte_size(shape),
            )
    traces = list(assignment.heap_simulator_traces)
    for i, trace in enumerate(traces):
        # The trace's own allocation index is not trusted: its first buffer decides.
        if not trace.events:
            continue
        buffer = buffers.get(trace.events[0].buffer_id)
        if buffer is not None:
            buffer.allocation.trace = i
    ordered = dict(sorted(allocations.items()))
    return _Index(ordered, buffers, traces, proto.hlo_module.stack_frame_index)


def _trace_for_color(index: _Index, color: int) -> int:
    for allocation in index.allocations.values():
        if allocation.color == color and not allocation.indefinite and allocation.trace is not None:
            return allocation.trace
    best, best_count = -1, 0
    for i, trace in enumerate(index.traces):
        count = sum(1 for e in trace.events if e.buffer_id in index.buffers
                    and index.buffers[e.buffer_id].color == color)
        if count > best_count:
            best, best_count = i, count
    return best


# --- heap simulation ------------------------------------------------------------------


@dataclass
class _Simulation:
    heap: list[int] = field(default_factory=list)
    unpadded: list[int] = field(default_factory=list)
    names: list[str] = field(default_factory=list)
    peak: int = 0
    peak_unpadded: int = 0
    peak_position: int = 0
    peak_live: list[int] = field(default_factory=list)
    peak_display: dict[int, int] = field(default_factory=dict)
    spans: dict[int, list[int]] = field(default_factory=dict)
    seen: set = field(default_factory=set)


def _simulate(index: _Index, trace_id: int, single_allocation: bool = True) -> _Simulation:
    sim = _Simulation()
    if not 0 <= trace_id < len(index.traces):
        return sim
    events = index.traces[trace_id].events
    last = len(events) - 1
    buffers = index.buffers
    refcount: dict[int, int] = {}
    canonical: dict[int, int] = {}  # buffer -> the buffer it shares with
    display: dict[int, int] = {}  # root canonical -> buffer shown for it after re-use
    live: list[int] = []
    seen_allocations: set[int] = set()
    heap = unpadded = 0

    def root(buffer_id: int) -> int:
        # A chain of shares visits each buffer at most once; a longer walk is a
        # cycle the trace defines (a buffer shared with itself, a → b → a), which
        # XLA never writes and XProf's recursive lookup never leaves.
        start, steps = buffer_id, 0
        while buffer_id in canonical:
            buffer_id = canonical[buffer_id]
            steps += 1
            if steps > len(canonical):
                raise HeapSimulationError(f"Buffer {start} shares its memory in a cycle (through buffer {buffer_id}).")
        return buffer_id

    def increase(buffer_id: int, init_span: bool) -> None:
        nonlocal heap, unpadded
        buffer = buffers[buffer_id]
        live.append(buffer_id)
        heap += buffer.size
        unpadded += buffer.unpadded_size
        if heap > sim.peak:
            sim.peak = heap
            sim.peak_position = len(sim.heap) - 1
            sim.peak_unpadded = unpadded
            sim.peak_live = list(live)
            sim.peak_display = dict(display)
        if init_span:
            sim.spans[buffer_id] = [len(sim.heap) - 1, last]

    def decrease(buffer_id: int) -> None:
        nonlocal heap, unpadded
        buffer = buffers[buffer_id]
        live.remove(buffer_id)
        heap -= buffer.size
        if heap < 0:
            raise HeapSimulationError(f"Heap size should be non-negative, but get: {heap}")
        unpadded -= buffer.unpadded_size
        # Once its memory was re-used through SHARE_WITH, a canonical buffer's
        # own span ended at its first free; the re-using buffers' spans end
        # at their own frees (below).
        if buffer_id not in display and buffer_id in sim.spans:
            sim.spans[buffer_id][1] = len(sim.heap) - 1

    for event in events:
        sim.heap.append(heap)
        sim.unpadded.append(unpadded)
        sim.names.append(event.instruction_name)
        buffer = buffers.get(event.buffer_id)
        if buffer is None:
            continue
        sim.seen.add(buffer.id)
        seen_allocations.add(buffer.allocation.index)
        position = len(sim.heap) - 1
        if event.kind == ALLOC:
            key = root(buffer.id)
            refcount[key] = refcount.get(key, 0) + 1
            increase(buffer.id, init_span=True)
        elif event.kind == FREE:
            key = root(buffer.id)
            refcount[key] = refcount.get(key, 0) - 1
            if refcount[key] < 0:
                raise HeapSimulationError(f"Buffer {buffer.id} is freed multiple times.")
            if refcount[key] == 0:
                decrease(key)
            if buffer.id in canonical and buffer.id in sim.spans:
                sim.spans[buffer.id][1] = position  # a sharer's own lifetime ends at its free
        elif event.kind == SHARE_WITH:
            target = buffers.get(event.share_with_canonical_id)
            if target is None:
                continue
            canonical[buffer.id] = target.id
            key = root(target.id)
            refcount[key] = refcount.get(key, 0) + 1
            if refcount[key] == 1:
                # Memory re-used after the canonical buffer was freed: the
                # re-using buffer is what the peak list shows for it.
                display[key] = buffer.id
                sim.spans[buffer.id] = [position, last]
                increase(key, init_span=False)
        else:
            raise HeapSimulationError(f"Unhandled event kind: {event.kind}")
    sim.heap.append(heap)
    sim.unpadded.append(unpadded)
    sim.names.append("")
    if max(sim.heap) > INT64_MAX or max(sim.unpadded) > INT64_MAX:
        # Sizes past int64 (absurd shapes saturate at INT64_MAX each, and several of them add up):
        # no XLA program allocates that much, so the module's buffer sizes cannot be trusted.
        raise HeapSimulationError("the buffers live at once add up to more than 2^63 bytes")
    if single_allocation and len(seen_allocations) != 1:
        raise HeapSimulationError(
            "All heap simulation should work out of a single buffer allocation, actual "
            f"seen_buffer_allocations.size():{len(seen_allocations)}"
        )
    return sim


# --- the peak snapshot ----------------------------------------------------------------


def _source(instruction: HloInstructionProto, frames: StackFrameIndexProto) -> tuple[str, int, str]:
    lines = []
    frame_id = instruction.metadata.stack_frame_id
    seen = set()
    while 0 < frame_id <= len(frames.stack_frames) and frame_id not in seen:
        seen.add(frame_id)
        frame = frames.stack_frames[frame_id - 1]
        frame_id = frame.parent_frame_id
        name, line, column = "", -1, -1
        loc_id = frame.file_location_id
        if 0 < loc_id <= len(frames.file_locations):
            location = frames.file_locations[loc_id - 1]
            line, column = location.line, location.column
            if 0 < location.file_name_id <= len(frames.file_names):
                name = frames.file_names[location.file_name_id - 1]
        lines.append(f"{name}:{line}:{column}")
    stack = "\n".join(lines)
    if instruction.metadata.source_file:
        return instruction.metadata.source_file, instruction.metadata.source_line, stack
    if stack:
        first = stack.split("\n", 1)[0].split(":")
        if len(first) >= 2:
            try:
                line_number = int(first[1])
            except ValueError:
                line_number = 0
            return first[0], line_number, stack
    return "", 0, ""


def _heap_object(buffer: LogicalBuffer, color: int, frames) -> HeapObject:
    instruction = buffer.instruction
    shape = shape_text(buffer.shape)
    op_name = instruction.metadata.op_name
    source_file, source_line, stack = _source(instruction, frames)
    return HeapObject(
        numbered=color,
        label=f"{instruction.name}: {shape} # {op_name}",
        logical_buffer_id=buffer.id,
        size_bytes=buffer.size,
        unpadded_bytes=buffer.unpadded_size,
        instruction_name=buffer.name_with_index,
        category=buffer.allocation.category,
        tf_op_name=op_name,
        shape=shape,
        op_code=instruction.opcode,
        source_file=source_file,
        source_line=source_line,
        stack_frame=stack if source_file else "",
    )


def _largest_buffer(index: _Index, allocation: Allocation) -> LogicalBuffer | None:
    best, best_size = None, 0
    for lb_id, _offset in allocation.assigned:
        buffer = index.buffers.get(lb_id)
        if buffer is not None and buffer.size > best_size:
            best, best_size = buffer, buffer.size
    return best


def _allocation_summary(index: _Index, allocation: Allocation) -> dict:
    attributes = []
    if allocation.is_entry_parameter:
        attributes.append("entry computation parameter")
    if allocation.maybe_live_out:
        attributes.append("may-be live out")
    if not allocation.is_thread_local and not allocation.is_tuple:
        attributes.append("reusable")
    logical = []
    for lb_id, _offset in allocation.assigned:
        buffer = index.buffers.get(lb_id)
        logical.append(
            {"id": lb_id, "hlo_name": buffer.instruction_name if buffer else "",
             "shape": shape_text(buffer.shape) if buffer else "",
             "shape_index": list(buffer.shape_index) if buffer else []}
        )
    shapes = {b["shape"] for b in logical}
    return {
        "id": allocation.index, "size_bytes": allocation.size, "category": allocation.category,
        "attributes": attributes, "logical_buffers": logical,
        "common_shape": shapes.pop() if len(shapes) == 1 and logical and logical[0]["shape"] else "",
    }


def memory_colors(module: HloModule) -> list[int]:
    """The memory spaces a module allocates in; 0 (default memory) always first."""
    colors = {ba.color for ba in module.hlo.buffer_assignment.buffer_allocations}
    return [0, *sorted(colors - {0})]


def memory_space_view(module: HloModule, memory_space: int = 0, single_allocation: bool = True) -> MemorySpaceView:
    """XProf's memory viewer result for one module and memory colour.

    `single_allocation=False` skips XProf's check that the heap simulation
    works out of one buffer allocation (the memory viewer of TensorBoard 1.x,
    which read Cloud TPU's memory_viewer.json files, had no such check).
    """
    index = _index(module.hlo)
    error = None
    try:
        sim = _simulate(index, _trace_for_color(index, memory_space), single_allocation)
    except HeapSimulationError as exc:
        sim, error = _Simulation(), f"Failed to process heap simulator trace: {exc}"

    objects: list[HeapObject] = []
    small = 0
    indefinite = 0

    def add(buffer: LogicalBuffer) -> None:
        nonlocal small
        if buffer.size < SMALL_BUFFER_BYTES:
            small += buffer.size
        else:
            objects.append(_heap_object(buffer, len(objects), index.stack_frames))

    allocations = [a for a in index.allocations.values() if a.color == memory_space]
    for allocation in allocations:
        if not allocation.indefinite:
            continue
        largest = _largest_buffer(index, allocation)
        if largest is None:
            continue
        indefinite += allocation.size
        if memory_space == 0:
            add(largest)
    for buffer_id in sim.peak_live:
        shown = sim.peak_display.get(buffer_id, buffer_id)
        add(index.buffers[shown])
    if small:
        objects.append(HeapObject(numbered=len(objects), label=f"small (<{SMALL_BUFFER_BYTES} bytes)",
                                  logical_buffer_id=-1, size_bytes=small, unpadded_bytes=0))
    # XProf sorts with std::sort (unstable) by size only; a stable sort keeps
    # program order among equal sizes.
    by_size = sorted(range(len(objects)), key=lambda i: -objects[i].size_bytes)

    return MemorySpaceView(
        module=module.display_name,
        module_name=module.hlo.hlo_module.name,
        entry_computation_name=module.hlo.hlo_module.entry_computation_name,
        memory_space=memory_space,
        heap_bytes=np.asarray(sim.heap, dtype=np.int64),
        unpadded_heap_bytes=np.asarray(sim.unpadded, dtype=np.int64),
        instruction_names=sim.names,
        indefinite_bytes=indefinite,
        peak_heap_bytes=sim.peak,
        peak_unpadded_heap_bytes=sim.peak_unpadded,
        peak_position=sim.peak_position,
        max_heap=objects,
        by_size=by_size,
        spans={b: (s[0], s[1]) for b, s in sim.spans.items() if b in sim.seen},
        entry_parameters_bytes=sum(a.size for a in allocations if a.is_entry_parameter),
        non_reusable_bytes=sum(a.size for a in allocations if a.is_thread_local or a.is_tuple),
        maybe_live_out_bytes=sum(a.size for a in allocations if a.maybe_live_out),
        total_allocation_bytes=sum(a.size for a in allocations if not a.is_thread_local),
        indefinite_allocation_bytes=sum(a.size for a in allocations if a.indefinite),
        indefinite_allocations=[_allocation_summary(index, a) for a in allocations if a.indefinite],
        error=error,
    )




# --- the tool: every module of every host -------------------------------------------------------

OOM_TOP_BUFFERS = 5


@dataclass
class ModuleViews:
    name: str  # display name: module(program id)
    spaces: list[MemorySpaceView]
    note: str = ""  # where the module comes from when not from an XSpace (older captures' files)


@dataclass
class HostMemoryViewer:
    modules: dict[str, ModuleViews]
    capacity_bytes: int = 0  # the largest allocator capacity recorded on this host (0: unknown)
    errors: list[str] = field(default_factory=list)
    device_ps: dict[str, int] = field(default_factory=dict)  # module → its ops' device time on this host


def _default_peak(views: ModuleViews) -> int:
    return max((v.peak_bytes for v in views.spaces if v.memory_space == 0), default=0)


def host_memory_viewer(host: HostContext) -> HostMemoryViewer | None:
    """Each of the host's HLO modules in each memory space it allocates in; None without modules."""
    modules = host.hlo_modules
    if not modules:
        return None
    views: dict[str, ModuleViews] = {}
    for module in modules.values():
        views[module.display_name] = ModuleViews(
            module.display_name, [memory_space_view(module, space) for space in memory_colors(module)]
        )
    capacity = max(allocator_capacities(host.events).values(), default=0)
    by_program = device_ps_by_program(host.op_stats.device_db)
    device_ps = {m.display_name: by_program[m.program_id] for m in modules.values() if m.program_id in by_program}
    return HostMemoryViewer(modules=dict(sorted(views.items())), capacity_bytes=capacity, device_ps=device_ps)


def memory_viewer_data(host_names: list[str], parts: dict[str, HostMemoryViewer]) -> dict | None:
    """The run's modules (`host_names`: the run's host order; by name, as XProf lists them) and the largest
    allocator capacity.

    `picker` is the order the page's module picker lists them, the first one shown: most device time first
    (the run's hosts together), then, where that is equal (a CPU capture has no device ops), the largest peak
    of the default memory space. XProf's picker goes by name, which opened a JAX run on a module of 0.46 % of
    the device time instead of the one of 99.5 %."""
    # A module compiled on several hosts is the same program: the first host's copy is shown.
    modules: dict[str, ModuleViews] = {}
    device_ps: dict[str, int] = {}
    capacity = 0
    for host in host_names:
        part = parts.get(host)
        if part is None:
            continue
        capacity = max(capacity, part.capacity_bytes)
        for name, views in part.modules.items():
            modules.setdefault(name, views)
        for name, ps in part.device_ps.items():
            device_ps[name] = device_ps.get(name, 0) + ps
    if not modules:
        return None
    picker = sorted(modules, key=lambda n: (-device_ps.get(n, 0), -_default_peak(modules[n]), n))
    total = sum(device_ps.values())
    percent = {n: 100.0 * device_ps.get(n, 0) / total for n in modules} if total > 0 else {}
    return {"modules": dict(sorted(modules.items())), "capacity": capacity, "picker": picker,
            "device_percent": percent}


def memory_viewer_summary(data: dict) -> MemoryBlock:
    """The memory viewer's part of the run's `memory` block of summary.json."""
    modules = {}
    for name, mv in data["modules"].items():
        default = next((v for v in mv.spaces if v.memory_space == 0), None)
        if default is not None:
            modules[name] = ProgramMemory(peak_bytes=default.peak_bytes,
                                          peak_unpadded_bytes=default.peak_unpadded_bytes)
    return MemoryBlock(modules=modules)


def near_capacity(view: MemorySpaceView, capacity: int) -> dict | None:
    """The peak against the device's capacity when it comes within NEAR_CAPACITY of it, else None."""
    if capacity <= 0 or view.peak_bytes < (1 - NEAR_CAPACITY) * capacity:
        return None
    top = [view.max_heap[i] for i in view.by_size[:OOM_TOP_BUFFERS]]
    return {"peak": view.peak_bytes, "capacity": capacity, "percent": 100.0 * view.peak_bytes / capacity, "top": top}


def heap_rows(view: MemorySpaceView) -> list[dict]:
    """The buffers live at the peak, each with its size rank, expansion and lifetime span."""
    by_size_rank = {i: rank for rank, i in enumerate(view.by_size)}
    rows = []
    whole_program = (0, max(len(view.heap_bytes) - 2, 0))
    for i, o in enumerate(view.max_heap):
        span = view.spans.get(o.logical_buffer_id)
        if span is None and o.logical_buffer_id >= 0 and o.category != "Temporary" and len(view.heap_bytes) > 1:
            span = whole_program  # parameters, outputs and constants live for the whole program
        rows.append({
            "order": i, "size_rank": by_size_rank.get(i, 0) + 1, "obj": o,
            "expansion": o.size_bytes / o.unpadded_bytes if o.unpadded_bytes else None,
            "extra": o.size_bytes - o.unpadded_bytes if o.logical_buffer_id >= 0 else 0,
            "span": span,
        })
    return rows


__all__ = ["heap_rows", "HeapObject", "host_memory_viewer", "HostMemoryViewer", "memory_colors", "memory_space_view",
           "memory_viewer_data", "memory_viewer_summary", "MemorySpaceView", "ModuleViews", "near_capacity",
           "to_mib"]
