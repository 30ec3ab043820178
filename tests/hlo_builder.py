"""A small HLO module with a buffer assignment, built in code for the memory viewer rule tests."""

from __future__ import annotations

from reportgen.loaders.proto import hlo_pb2

F32, S32, TUPLE = hlo_pb2.F32, hlo_pb2.S32, hlo_pb2.TUPLE
Event = hlo_pb2.HeapSimulatorTrace.Event


def array(shape: hlo_pb2.ShapeProto, element_type: int, dims: list[int], minor_to_major=None, tiles=()):
    shape.element_type = element_type
    shape.dimensions.extend(dims)
    shape.layout.minor_to_major.extend(minor_to_major if minor_to_major is not None else reversed(range(len(dims))))
    for tile in tiles:
        shape.layout.tiles.add().dimensions.extend(tile)
    return shape


def sample_module(name: str = "jit_sample") -> hlo_pb2.HloProto:
    """Parameter p0 (64 KiB, whole program) and a temporary allocation whose trace
    frees fusion.1, re-uses its memory for tuple.1{0} (SHARE_WITH), then allocates
    the padded copy.2: the peak (event 4) holds small.3, tuple.1{0} and copy.2."""
    proto = hlo_pb2.HloProto()
    module = proto.hlo_module
    module.name = name
    module.entry_computation_name = "main"
    frames = module.stack_frame_index
    frames.file_names.extend(["a.py", "b.py"])
    loc = frames.file_locations.add()
    loc.file_name_id, loc.line, loc.column = 1, 3, 4
    loc = frames.file_locations.add()
    loc.file_name_id, loc.line, loc.column = 2, 7, 1
    frame = frames.stack_frames.add()
    frame.file_location_id, frame.parent_frame_id = 1, 2
    frame = frames.stack_frames.add()
    frame.file_location_id = 2

    comp = module.computations.add()
    comp.name = "main"

    def instruction(iid: int, iname: str, opcode: str, op_name: str = ""):
        ins = comp.instructions.add()
        ins.id, ins.name, ins.opcode = iid, iname, opcode
        ins.metadata.op_name = op_name
        return ins

    array(instruction(1, "p0", "parameter", "x").shape, F32, [1024, 16])
    fusion = instruction(2, "fusion.1", "fusion", "jit(f)/add")
    array(fusion.shape, F32, [1024, 16])
    fusion.metadata.source_file, fusion.metadata.source_line = "f.py", 9
    tup = instruction(3, "tuple.1", "tuple", "jit(f)/pack")
    tup.shape.element_type = TUPLE
    array(tup.shape.tuple_shapes.add(), F32, [1024, 16])
    scalar = tup.shape.tuple_shapes.add()
    scalar.element_type = S32
    scalar.layout.SetInParent()
    copy = instruction(4, "copy.2", "copy", "jit(f)/copy")
    array(copy.shape, F32, [100, 128], tiles=[(8, 128)])
    copy.metadata.stack_frame_id = 1
    array(instruction(5, "small.3", "add").shape, F32, [4])
    array(instruction(6, "tl.4", "constant").shape, F32, [1])

    assignment = proto.buffer_assignment
    for bid, iid, size, index in ((10, 1, 65536, ()), (11, 2, 65536, ()), (12, 4, 65536, ()), (13, 5, 16, ()),
                                  (14, 3, 65536, (0,)), (15, 6, 4, ())):
        lb = assignment.logical_buffers.add()
        lb.id, lb.size = bid, size
        lb.defined_at.instruction_id = iid
        lb.defined_at.shape_index.extend(index)

    def allocation(index: int, size: int, buffers, **flags):
        ba = assignment.buffer_allocations.add()
        ba.index, ba.size = index, size
        for key, value in flags.items():
            setattr(ba, key, value)
        for bid, offset in buffers:
            a = ba.assigned.add()
            a.logical_buffer_id, a.offset = bid, offset
        return ba

    allocation(0, 65536, [(10, 0)], is_entry_computation_parameter=True)
    allocation(1, 200000, [(11, 0), (12, 65536), (13, 131072), (14, 0)])
    allocation(2, 4, [(15, 0)], is_thread_local=True)

    trace = assignment.heap_simulator_traces.add()
    for kind, bid, iname, share in ((Event.ALLOC, 11, "fusion.1", 0), (Event.ALLOC, 13, "small.3", 0),
                                    (Event.FREE, 11, "tuple.1", 0), (Event.SHARE_WITH, 14, "tuple.1", 11),
                                    (Event.ALLOC, 12, "copy.2", 0), (Event.FREE, 13, "copy.2", 0),
                                    (Event.FREE, 14, "copy.2", 0), (Event.FREE, 12, "copy.2", 0)):
        event = trace.events.add()
        event.kind, event.buffer_id, event.instruction_name = kind, bid, iname
        event.share_with_canonical_id = share
    return proto
