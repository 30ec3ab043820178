"""Links a capture defines (buffer sharing, fusion bodies, calls, operands) and sizes it states are data:
a cycle or an absurd shape costs one module its numbers, never the host or the build.

Each run below is one HLO module (the memory viewer's sample, tests/hlo_builder.py) with one link or
size damaged, as a structure-aware fuzz of the HLO protos in `/host:metadata` makes them. The build runs
as a subprocess with a bounded wait: before these walks detected cycles it never ended.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reportgen.loaders.proto import hlo_pb2
from tests.clirun import reportgen
from tests.hlo_builder import Event, sample_module
from tests.xspace import Space

US = 1_000_000
MODULE = "jit_sample(7)"


def _share(proto: hlo_pb2.HloProto, after: int, buffer_id: int, canonical: int) -> None:
    """A SHARE_WITH event inserted after trace event `after`."""
    events = proto.buffer_assignment.heap_simulator_traces[0].events
    kept = [hlo_pb2.HeapSimulatorTrace.Event().FromString(e.SerializeToString()) for e in events]
    share = hlo_pb2.HeapSimulatorTrace.Event(kind=Event.SHARE_WITH, buffer_id=buffer_id,
                                             share_with_canonical_id=canonical, instruction_name="tuple.1")
    kept.insert(after + 1, share)
    del events[:]
    events.extend(kept)


def _instruction(proto: hlo_pb2.HloProto, name: str) -> hlo_pb2.HloInstructionProto:
    return next(i for c in proto.hlo_module.computations for i in c.instructions if i.name == name)


def shared_with_itself() -> hlo_pb2.HloProto:
    proto = sample_module()
    _share(proto, 4, 12, 12)  # copy.2, just allocated, shares its memory with itself
    return proto


def shared_in_a_cycle() -> hlo_pb2.HloProto:
    proto = sample_module()
    _share(proto, 3, 11, 14)  # tuple.1{0} shares fusion.1's memory (event 3), then fusion.1 shares tuple.1{0}'s
    return proto


def fusion_calling_itself() -> hlo_pb2.HloProto:
    """fusion.1's body holds four fusions that call that body again, their operands in a ring; a `call`
    whose computation calls itself; stack frames that are each other's parent."""
    proto = sample_module()
    body = proto.hlo_module.computations.add(id=2, name="fused_computation")
    for k in range(4):
        inner = body.instructions.add(id=100 + k, name=f"fusion.in.{k}", opcode="fusion", called_computation_ids=[2])
        inner.operand_ids.extend([100 + (k + 1) % 4])  # operands in a ring as well
        inner.shape.CopyFrom(_instruction(proto, "fusion.1").shape)
    body.root_id = 100
    _instruction(proto, "fusion.1").called_computation_ids.append(2)
    looping = proto.hlo_module.computations.add(id=3, name="calls_itself")
    looping.instructions.add(id=200, name="call.self", opcode="call", called_computation_ids=[3])
    proto.hlo_module.computations[0].instructions.add(id=201, name="call.0", opcode="call", called_computation_ids=[3])
    proto.hlo_module.stack_frame_index.stack_frames[1].parent_frame_id = 1  # frame 1 -> 2 -> 1
    return proto


def absurd_shapes() -> hlo_pb2.HloProto:
    proto = sample_module()
    for name in ("copy.2", "small.3", "fusion.1"):  # fusion.1: the op the GPU kernel ran
        shape = _instruction(proto, name).shape
        del shape.dimensions[:]
        shape.dimensions.extend([1 << 62, 1 << 62])
        del shape.layout.minor_to_major[:]
        shape.layout.minor_to_major.extend([1, 0])
    return proto


def layouts_out_of_range() -> hlo_pb2.HloProto:
    """Layouts that are no permutation of their shape's dimensions (found by the HLO fuzz of bench/fuzz.py)."""
    proto = sample_module()
    for name, layout in (("small.3", [7]), ("copy.2", [0, 0]), ("fusion.1", [1, 0, 2])):
        shape = _instruction(proto, name).shape
        del shape.layout.minor_to_major[:]
        shape.layout.minor_to_major.extend(layout)
    return proto


RUNS = {"share_self": shared_with_itself, "share_cycle": shared_in_a_cycle,
        "fusion_cycle": fusion_calling_itself, "absurd_shapes": absurd_shapes, "bad_layout": layouts_out_of_range}


def capture(proto: hlo_pb2.HloProto) -> bytes:
    """A GPU host whose kernels ran fusion.1 (so the op profile opens its body) beside the module."""
    space = Space(("host",))
    space.plane("/host:metadata").metadata(MODULE, md_id=7, **{"Hlo Proto": proto.SerializeToString()})
    space.plane("/host:CPU").line(1, "python").event("train", 0, 100 * US, _r=1, step_num=0)
    stream = space.gpu(0).line(7, "Stream #7(Compute)")
    stream.event("loop_fusion_kernel", 10 * US, 20 * US, hlo_op="fusion.1", program_id=7, correlation_id=1)
    return space.serialize()


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[Path, object]:
    root = tmp_path_factory.mktemp("links")
    for run, make in RUNS.items():
        folder = root / "logdir" / "plugins" / "profile" / run
        folder.mkdir(parents=True)
        (folder / "host.xplane.pb").write_bytes(capture(make()))
    # The bounded wait is the test: a walk that loops raises TimeoutExpired here (and the child is killed).
    done = reportgen("build", str(root / "logdir"), "-o", str(root / "site"), "--jobs", "1", "--no-cache",
                     cwd=root, timeout=180)
    return root / "site", done


def test_build_ends_with_every_host_built(built):
    site, done = built
    assert done.returncode == 0, done.stderr
    assert "internal error" not in done.stderr and "Traceback" not in done.stderr
    runs = json.loads((site / "summary.json").read_text())["runs"]
    for run in RUNS:
        assert runs[run]["hosts"] == ["host"] and runs[run]["errors"] == [], (run, runs[run]["errors"])


@pytest.mark.parametrize("run", ["share_self", "share_cycle", "absurd_shapes"])
def test_memory_viewer_names_the_module_it_cannot_replay(built, run):
    site, _ = built
    page = (site / run / "memory_viewer.html").read_text()
    assert "Failed to process heap simulator trace" in page
    reason = "more than 2^63 bytes" if run == "absurd_shapes" else "shares its memory in a cycle"
    assert reason in page


def test_fusion_cycle_opens_the_body_once(built):
    site, _ = built
    page = (site / "fusion_cycle" / "memory_viewer.html").read_text()
    assert "Failed to process heap simulator trace" not in page  # the trace itself is sound
    top = json.loads((site / "summary.json").read_text())["runs"]["fusion_cycle"]["overview"]["top_ops"]
    assert [op["name"] for op in top] == ["jit(f)/add"]  # fusion.1's op, found and described
    assert "fusion.in.3" in (site / "fusion_cycle" / "op_profile.html").read_text()  # its body, opened once
