"""No stage of a host's build grows faster than what the capture holds: planes, lines, metadata, events, stats.

A capture of 100,000 GPU planes of one event each once ran for hours: a scan of every line and every metadata
name for each plane. Work is counted as lines of reportgen's code run (tests/workcount.py), not timed: for
sizes N, 2N and 4N the work added per item by the second doubling must be what the first added, within a
few percent (a loop over all planes inside the loop over planes adds twice as much per plane each doubling).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from reportgen.loaders.proto import hlo_pb2
from tests.hlo_builder import F32, Event, array
from tests.workcount import host_stage_lines
from tests.xspace import Space

TOLERANCE = 1.03  # the second doubling may add this much more work per item than the first


def gpu_planes(n: int, tag: str) -> bytes:
    space = Space()
    space.plane("/host:CPU", plane_id=0).line(1, "python3").event("train", 0, 1_000_000)
    for i in range(n):
        space.gpu(i).line(1, "Stream #1(Compute)").event(f"{tag}kernel_{i:07d}", 1_000 * i, 500, correlation_id=i)
    return space.serialize()


def tpu_planes(n: int, tag: str) -> bytes:
    space = Space()
    for i in range(n):
        space.plane(f"/device:TPU:{i}", plane_id=i + 1).line(1, "XLA Ops").event(f"{tag}fusion.{i:07d}", 1_000 * i, 500)
    return space.serialize()


def same_name_planes(n: int, tag: str) -> bytes:
    space = Space()
    for i in range(n):
        space.plane("/host:CPU", plane_id=i).line(1, "python3").event(f"{tag}op", 1_000 * i, 500)
    return space.serialize()


def lines(n: int, tag: str) -> bytes:
    space = Space()
    host = space.host_plane()
    for i in range(n):
        host.line(i + 1, f"thread {i}").event(f"{tag}op", 1_000 * i, 500)
    return space.serialize()


def metadata(n: int, tag: str) -> bytes:
    space = Space()
    host = space.host_plane()
    for i in range(n):
        host.metadata(f"{tag}op_{i:07d}")
    host.line(1, "python3").event(f"{tag}op_{0:07d}", 0, 500)
    return space.serialize()


def events(n: int, tag: str) -> bytes:
    space = Space()
    line = space.host_plane().line(1, "python3")
    for i in range(n):
        line.event(f"{tag}op_{i % 50}", 1_000 * i, 500, step_num=i % 7)
    return space.serialize()


def stats_per_event(n: int, tag: str) -> bytes:
    space = Space()
    line = space.host_plane().line(1, "python3")
    for i in range(20):
        line.event(f"{tag}op", 1_000 * i, 500, stats=[(f"stat_{k}", k) for k in range(n)])
    return space.serialize()


def hlo_instructions(n: int, tag: str) -> bytes:
    """One HLO module of a chain of `n` instructions, each with a buffer of its own, alive for two steps."""
    proto = hlo_pb2.HloProto()
    module = proto.hlo_module
    module.name, module.entry_computation_name, module.id = f"jit_{tag}f", "main", 7
    comp = module.computations.add()
    comp.name = "main"
    assignment = proto.buffer_assignment
    trace = assignment.heap_simulator_traces.add()
    for i in range(n):
        ins = comp.instructions.add()
        ins.id, ins.name, ins.opcode = i + 1, f"{tag}add.{i:07d}", "parameter" if i == 0 else "add"
        ins.metadata.op_name = f"jit({tag}f)/add"
        if i:
            ins.operand_ids.append(i)
        array(ins.shape, F32, [16])
        buffer = assignment.logical_buffers.add()
        buffer.id, buffer.size = 100 + i, 64
        buffer.defined_at.instruction_id = i + 1
        allocation = assignment.buffer_allocations.add()
        allocation.index, allocation.size = i, 64
        allocation.assigned.add(logical_buffer_id=100 + i, offset=0)
        trace.events.add(kind=Event.ALLOC, buffer_id=100 + i, instruction_name=ins.name)
        if i:
            trace.events.add(kind=Event.FREE, buffer_id=100 + i - 1, instruction_name=ins.name)
    comp.root_id = n
    space = Space()
    space.host_plane().line(1, "python3").event(f"{tag}op", 0, 500)
    space.plane("/host:metadata").metadata(f"jit_{tag}f(7)", **{"Hlo Proto": proto.SerializeToString()})
    return space.serialize()


@pytest.mark.parametrize("make, n", [
    (gpu_planes, 40), (tpu_planes, 40), (same_name_planes, 40), (lines, 200), (metadata, 1000), (events, 2000),
    (stats_per_event, 50), (hlo_instructions, 500),
], ids=lambda v: getattr(v, "__name__", str(v)))
def test_work_per_item_is_constant(make: Callable[[int, str], bytes], n: int):
    # One-time work (lazy imports, compiled kernels) out of the way first; each build's names differ (`tag`),
    # so that no cache of names kept from an earlier build spares a later one work.
    host_stage_lines(make(n // 4, "warm_n___"))
    work = [host_stage_lines(make(size, f"n{size:07d}_")) for size in (n, 2 * n, 4 * n)]
    first, second = (work[1] - work[0]) / n, (work[2] - work[1]) / (2 * n)
    assert first > 0, work  # the counter saw the code run
    assert second <= TOLERANCE * first + 1, (make.__name__, work, first, second)
