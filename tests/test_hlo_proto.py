"""The HLO schema subset and XProf's CoreDetails: generated modules current, field numbers upstream's.

(`xplane.proto` has its own checks in tests/test_proto_schema.py.)"""

from __future__ import annotations

import ast
import dataclasses
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from reportgen.core.hlo import model
from reportgen.loaders.hlo import plain_hlo
from reportgen.loaders.proto import hlo_pb2, op_stats_pb2, trace_events_pb2
from tests.hlo_builder import sample_module

PROTO_DIR = Path(hlo_pb2.__file__).parent


@pytest.mark.parametrize("module", [hlo_pb2, op_stats_pb2, trace_events_pb2], ids=lambda m: m.__name__.rsplit(".")[-1])
def test_generated_module_matches_the_proto(tmp_path, module):
    name = module.DESCRIPTOR.name
    shutil.copy(PROTO_DIR / name, tmp_path / name)
    subprocess.run(
        [sys.executable, "-m", "grpc_tools.protoc", f"-I{tmp_path}", f"--python_out={tmp_path}", name],
        check=True,
    )
    # Compare descriptors, not text: the generator's formatting may change between
    # versions. Importing the fresh module would register the same file twice in
    # protobuf's default pool, so its serialized descriptor is read from the source.
    generated = (tmp_path / name.replace(".proto", "_pb2.py")).read_text()
    start = generated.index("AddSerializedFile(") + len("AddSerializedFile(")
    end = generated.index(")\n", start)
    assert ast.literal_eval(generated[start:end]) == module.DESCRIPTOR.serialized_pb


def test_core_details_fields_are_xprofs():
    """plugin/xprof/protobuf/op_stats.proto, message CoreDetails."""
    fields = {f.name: (f.number, f.type) for f in op_stats_pb2.CoreDetails.DESCRIPTOR.fields}
    uint32, string, boolean = 13, 9, 8
    assert fields == {"hostname": (1, string), "device_ordinal": (2, uint32), "core_num": (3, uint32),
                      "local_chip_id": (4, uint32), "global_chip_id": (5, uint32), "global_core_id": (6, uint32),
                      "is_sparse_core": (7, boolean)}
    assert op_stats_pb2.DESCRIPTOR.package == "reportgen.xprof"


def _messages(descriptor) -> list:
    return [descriptor, *(m for nested in descriptor.nested_types for m in _messages(nested))]


def test_core_dataclasses_mirror_every_message_of_the_proto():
    """core/hlo/model.py: one dataclass per message (map entries aside), the same fields in the same order,
    None-when-unset exactly for the message fields it lists; enums by the same numbers."""
    messages = [m for top in hlo_pb2.DESCRIPTOR.message_types_by_name.values() for m in _messages(top)
                if not m.GetOptions().map_entry]
    names = {m.full_name.removeprefix("reportgen.xla.") for m in messages}
    assert names == set(model.MESSAGES)
    for descriptor in messages:
        name = descriptor.full_name.removeprefix("reportgen.xla.")
        cls = model.MESSAGES[name]
        assert [f.name for f in dataclasses.fields(cls)] == [f.name for f in descriptor.fields], name
        message_fields = {f.name for f in descriptor.fields if f.message_type is not None and not f.is_repeated}
        assert model.OPTIONAL_FIELDS.get(name, frozenset()) <= message_fields, name
    assert {t.name: int(t) for t in model.PrimitiveType} == dict(hlo_pb2.PrimitiveType.items())
    kinds = hlo_pb2.HeapSimulatorTrace.Event
    assert (model.ALLOC, model.FREE, model.SHARE_WITH) == (kinds.ALLOC, kinds.FREE, kinds.SHARE_WITH)


def test_plain_modules_hold_the_protos_values_and_none_for_unset_optional_fields():
    proto = sample_module("jit_plain")
    plain = plain_hlo(proto)
    instruction = proto.hlo_module.computations[0].instructions[0]
    mirrored = plain.hlo_module.computations[0].instructions[0]
    assert (mirrored.name, mirrored.opcode, mirrored.id) == (instruction.name, instruction.opcode, instruction.id)
    assert mirrored.shape.dimensions == list(instruction.shape.dimensions)
    assert mirrored.window is None and not instruction.HasField("window")
    assert mirrored.metadata.op_name == instruction.metadata.op_name  # always an object, as proto3 reads it
    assert [lb.id for lb in plain.buffer_assignment.logical_buffers] == \
        [lb.id for lb in proto.buffer_assignment.logical_buffers]


def test_package_is_our_own():
    assert hlo_pb2.DESCRIPTOR.package == "reportgen.xla"


# Field numbers checked against xla/service/hlo.proto and xla/xla_data.proto.
XLA_FIELDS = {
    "HloProto": {"hlo_module": 1, "buffer_assignment": 3},
    "HloModuleProto": {"name": 1, "entry_computation_name": 2, "computations": 3, "host_program_shape": 4,
                       "id": 5, "entry_computation_id": 6, "schedule": 7, "stack_frame_index": 17},
    "HloComputationProto": {"name": 1, "instructions": 2, "program_shape": 4, "id": 5, "root_id": 6,
                            "is_fusion_computation": 7, "execution_thread": 8},
    "HloInstructionProto": {"name": 1, "opcode": 2, "shape": 3, "metadata": 7, "parameter_number": 9,
                            "fusion_kind": 11, "tuple_index": 13, "dimensions": 14, "custom_call_target": 28,
                            "id": 35, "operand_ids": 36, "control_predecessor_ids": 37,
                            "called_computation_ids": 38, "backend_config": 43, "async_execution_thread": 79,
                            "literal": 8, "window": 15, "convolution_dimension_numbers": 16,
                            "dot_dimension_numbers": 30, "feature_group_count": 50, "batch_group_count": 58,
                            "comparison_direction": 63},
    "LiteralProto": {"shape": 1, "preds": 2, "u8s": 3, "s32s": 4, "s64s": 5, "u32s": 6, "u64s": 7, "f32s": 8,
                     "f64s": 9, "tuple_literals": 10, "f16s": 11, "bf16s": 13, "s8s": 15, "u16s": 16, "s16s": 17},
    "WindowDimension": {"size": 1, "stride": 2, "padding_low": 3, "padding_high": 4, "window_dilation": 5,
                        "base_dilation": 6, "window_reversal": 7},
    "Window": {"dimensions": 1},
    "ConvolutionDimensionNumbers": {"input_batch_dimension": 7, "input_feature_dimension": 8,
                                    "input_spatial_dimensions": 11, "kernel_input_feature_dimension": 3,
                                    "kernel_output_feature_dimension": 4, "kernel_spatial_dimensions": 6,
                                    "output_batch_dimension": 9, "output_feature_dimension": 10,
                                    "output_spatial_dimensions": 12},
    "DotDimensionNumbers": {"lhs_contracting_dimensions": 1, "rhs_contracting_dimensions": 2,
                            "lhs_batch_dimensions": 3, "rhs_batch_dimensions": 4},
    "ShapeProto": {"element_type": 2, "dimensions": 3, "tuple_shapes": 4, "layout": 5, "is_dynamic_dimension": 6},
    "LayoutProto": {"minor_to_major": 1, "tiles": 6, "element_size_in_bits": 7, "memory_space": 8,
                    "dim_level_types": 9, "physical_shape": 10, "index_primitive_type": 11,
                    "pointer_primitive_type": 12, "dim_unique": 13, "dim_ordered": 14,
                    "dynamic_shape_metadata_prefix_bytes": 15, "tail_padding_alignment_in_elements": 16,
                    "split_configs": 17},
    "OpMetadata": {"op_type": 1, "op_name": 2, "source_file": 3, "source_line": 4, "stack_frame_id": 15,
                   "source_end_line": 17, "source_column": 18, "source_end_column": 19},
    "LogicalBufferProto": {"id": 1, "size": 2, "defined_at": 3, "color": 4},
    "BufferAllocationProto": {"index": 1, "size": 2, "is_thread_local": 3, "is_entry_computation_parameter": 5,
                              "parameter_number": 6, "maybe_live_out": 7, "color": 8, "assigned": 9,
                              "parameter_shape_index": 10, "is_tuple": 11, "is_constant": 12},
    "HeapSimulatorTrace": {"events": 1, "whole_module_simulation": 2, "buffer_allocation_index": 3},
    "BufferAssignmentProto": {"logical_buffers": 1, "buffer_aliases": 2, "buffer_allocations": 3,
                              "heap_simulator_traces": 4},
    "StackFrameIndexProto": {"file_names": 1, "function_names": 2, "file_locations": 3, "stack_frames": 4},
}


def test_field_numbers_are_xlas():
    for message, fields in XLA_FIELDS.items():
        descriptor = hlo_pb2.DESCRIPTOR.message_types_by_name[message]
        assert {f.name: f.number for f in descriptor.fields if f.name in fields} == fields, message
    event = hlo_pb2.HeapSimulatorTrace.Event.DESCRIPTOR
    assert {f.name: f.number for f in event.fields} == {
        "kind": 1, "buffer_id": 2, "computation_name": 3, "instruction_name": 4, "share_with_canonical_id": 5}
    location = hlo_pb2.LogicalBufferProto.Location.DESCRIPTOR
    assert {f.name: f.number for f in location.fields} == {"instruction_name": 2, "shape_index": 3,
                                                          "instruction_id": 4}
    assert hlo_pb2.PrimitiveType.Value("F32") == 11 and hlo_pb2.PrimitiveType.Value("BF16") == 16
    assert hlo_pb2.PrimitiveType.Value("TUPLE") == 13


def test_unknown_fields_are_skipped_on_decode():
    proto = hlo_pb2.HloProto()
    proto.hlo_module.name = "m"
    # Append a field XLA has and we leave out (HloModuleProto.is_dynamic = 11, varint 1).
    module_bytes = proto.hlo_module.SerializeToString() + bytes([11 << 3, 1])
    wire = bytes([1 << 3 | 2, len(module_bytes)]) + module_bytes
    parsed = hlo_pb2.HloProto.FromString(wire)
    assert parsed.hlo_module.name == "m"


def test_trace_events_fields_are_tensorflows():
    """tensorflow/core/profiler/protobuf/trace_events.proto (ids uint64 as in TF 1.x's copy: same varints)."""
    def fields(message):
        return {f.name: (f.number, f.type) for f in message.DESCRIPTOR.fields}

    uint64, string, message = 4, 9, 11
    assert fields(trace_events_pb2.Trace) == {"devices": (1, message), "trace_events": (4, message)}
    assert fields(trace_events_pb2.Device) == {"name": (1, string), "device_id": (2, uint64),
                                               "resources": (3, message)}
    assert fields(trace_events_pb2.Resource) == {"name": (1, string), "resource_id": (2, uint64)}
    assert fields(trace_events_pb2.TraceEvent) == {
        "device_id": (1, uint64), "resource_id": (2, uint64), "name": (3, string), "timestamp_ps": (9, uint64),
        "duration_ps": (10, uint64), "args": (11, message)}
    assert trace_events_pb2.DESCRIPTOR.package == "reportgen.tftrace"
