"""Memory viewer rules (docs/xprof/memory_viewer.md) on an HLO module built in code."""

from __future__ import annotations

from reportgen.core.hlo.model import HloModule
from reportgen.core.hlo.shapes import shape_text, unpadded_byte_size
from reportgen.core.tools.memory_viewer import memory_colors, memory_space_view
from reportgen.loaders.hlo import plain_hlo, to_plain
from reportgen.loaders.proto import hlo_pb2
from tests.hlo_builder import F32, array, sample_module

MIB = float(1 << 20)


def view(space: int = 0):
    proto = sample_module()
    return memory_space_view(HloModule(7, proto.hlo_module.name, plain_hlo(proto)), space)


def test_heap_simulation_timeline_and_peak():
    v = view()
    assert list(v.heap_bytes) == [0, 65536, 65552, 16, 65552, 131088, 131072, 65536, 0]
    assert v.peak_heap_bytes == 131088 and v.peak_position == 4
    assert v.peak_unpadded_heap_bytes == 16 + 65536 + 51200  # copy.2 is padded by its tiles
    assert v.indefinite_bytes == 65536  # the parameter, added to every point
    assert v.peak_heap_mib == 131088 / MIB + 65536 / MIB
    assert v.peak_bytes == 131088 + 65536
    assert v.instruction_names[-1] == "" and len(v.instruction_names) == 9


def test_buffers_live_at_peak_show_the_reusing_buffer_and_sum_small_ones():
    v = view()
    names = [(o.numbered, o.instruction_name, o.category, o.size_bytes) for o in v.max_heap]
    assert names == [
        (0, "p0", "Parameter", 65536),
        (1, "tuple.1{0}", "Temporary", 65536),  # shares fusion.1's memory after it was freed
        (2, "copy.2", "Temporary", 65536),
        (3, "", "", 16),
    ]
    assert v.max_heap[3].label == "small (<16384 bytes)" and v.max_heap[3].logical_buffer_id == -1
    assert v.max_heap[1].label == "tuple.1: f32[1024,16]{1,0} # jit(f)/pack"
    assert v.by_size == [0, 1, 2, 3]


def test_source_info_from_metadata_or_stack_frames():
    v = view()
    copy = v.max_heap[2]
    assert (copy.source_file, copy.source_line, copy.stack_frame) == ("a.py", 3, "a.py:3:4\nb.py:7:1")
    assert v.max_heap[0].source_file == ""


def test_buffer_spans_follow_sharing_and_reuse():
    v = view()
    # fusion.1 ends at its own free; the re-using tuple.1{0} at its free; copy.2 at its free.
    assert v.spans == {11: (0, 2), 13: (1, 5), 14: (3, 6), 12: (4, 7)}


def test_totals_leave_thread_local_allocations_out():
    v = view()
    assert v.total_allocation_bytes == 65536 + 200000
    assert v.indefinite_allocation_bytes == 65536
    assert v.entry_parameters_bytes == 65536
    assert v.non_reusable_bytes == 4  # thread-local
    assert [a["id"] for a in v.indefinite_allocations] == [0]
    assert round(v.fragmentation_percent, 6) == round(100 * (265536 - 196624) / 200000, 6)


def test_memory_space_without_trace_keeps_only_whole_program_buffers():
    proto = sample_module()
    for lb in proto.buffer_assignment.logical_buffers:
        if lb.id == 10:
            lb.color = 1
    proto.buffer_assignment.buffer_allocations[0].color = 1
    module = HloModule(7, "jit_sample", plain_hlo(proto))
    assert memory_colors(module) == [0, 1]
    v = memory_space_view(module, 1)
    assert len(v.heap_bytes) == 0 and v.peak_heap_bytes == 0
    assert v.peak_heap_mib == 65536 / MIB  # only the indefinite part
    assert v.max_heap == []  # indefinite buffers are listed for memory space 0 only


def test_inconsistent_trace_is_reported_not_raised():
    proto = sample_module()
    proto.buffer_assignment.heap_simulator_traces[0].events.add(kind=hlo_pb2.HeapSimulatorTrace.Event.FREE,
                                                                 buffer_id=12)
    v = memory_space_view(HloModule(7, "jit_sample", plain_hlo(proto)), 0)
    assert v.error and "freed multiple times" in v.error


def test_shape_text_matches_xla_printing():
    shape = hlo_pb2.ShapeProto()
    array(shape, F32, [100, 128], tiles=[(8, 128), (2, 1)])
    shape.layout.memory_space = 1
    assert shape_text(to_plain(shape)) == "f32[100,128]{1,0:T(8,128)(2,1)S(1)}"
    tup = hlo_pb2.ShapeProto(element_type=hlo_pb2.TUPLE)
    for _ in range(6):
        array(tup.tuple_shapes.add(), F32, [2])
    assert shape_text(to_plain(tup)) == "(" + ", ".join(["f32[2]{0}"] * 5) + ", /*index=5*/f32[2]{0})"
    scalar = hlo_pb2.ShapeProto(element_type=hlo_pb2.S32)
    scalar.layout.SetInParent()
    assert shape_text(to_plain(scalar)) == "s32[]"
    no_layout = hlo_pb2.ShapeProto(element_type=hlo_pb2.BF16, dimensions=[3], is_dynamic_dimension=[True])
    assert shape_text(to_plain(no_layout)) == "bf16[<=3]"


def test_unpadded_sizes_ignore_layout_padding():
    shape = hlo_pb2.ShapeProto()
    array(shape, F32, [100, 128], tiles=[(8, 128)])
    assert unpadded_byte_size(to_plain(shape)) == 51200
    pair = hlo_pb2.ShapeProto(element_type=hlo_pb2.TUPLE, tuple_shapes=[shape, shape])
    assert unpadded_byte_size(to_plain(pair)) == 16
    assert unpadded_byte_size(to_plain(hlo_pb2.ShapeProto(element_type=hlo_pb2.PRED, dimensions=[10]))) == 10
    assert unpadded_byte_size(to_plain(hlo_pb2.ShapeProto(element_type=hlo_pb2.TOKEN))) == 0
