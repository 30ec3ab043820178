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
    """core/hlo/model.py: one dataclass per message (map entries aside), the same fields in the same order
    (then the loader's list of unknown field numbers where it keeps one), None-when-unset exactly for the
    singular message fields and oneof scalars it lists; enums by the same names and numbers."""
    messages = [m for top in hlo_pb2.DESCRIPTOR.message_types_by_name.values() for m in _messages(top)
                if not m.GetOptions().map_entry]
    names = {m.full_name.removeprefix("reportgen.xla.") for m in messages}
    assert names == set(model.MESSAGES)
    for descriptor in messages:
        name = descriptor.full_name.removeprefix("reportgen.xla.")
        cls = model.MESSAGES[name]
        extra = [model.UNKNOWN_FIELD_NUMBERS[name]] if name in model.UNKNOWN_FIELD_NUMBERS else []
        assert [f.name for f in dataclasses.fields(cls)] == [f.name for f in descriptor.fields] + extra, name
        may_be_unset = {f.name for f in descriptor.fields if not f.is_repeated and (
            f.message_type is not None or f.containing_oneof is not None)}
        assert model.OPTIONAL_FIELDS.get(name, frozenset()) <= may_be_unset, name
    enums = {e.full_name.removeprefix("reportgen.xla."): e for top in [hlo_pb2.DESCRIPTOR]
             for e in [*top.enum_types_by_name.values(),
                       *(e for m in messages for e in m.enum_types)]}
    assert set(model.ENUMS) == set(enums) - {"DimLevelType", "HeapSimulatorTrace.Event.Kind"}
    for name, enum in model.ENUMS.items():
        assert {t.name: int(t) for t in enum} == {v.name: v.number for v in enums[name].values}, name
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
    assert mirrored.sharding is None and mirrored.cross_program_prefetch_index is None
    assert plain.hlo_module.schedule is None and mirrored.unknown_fields == []
    assert [lb.id for lb in plain.buffer_assignment.logical_buffers] == \
        [lb.id for lb in proto.buffer_assignment.logical_buffers]


def test_package_is_our_own():
    assert hlo_pb2.DESCRIPTOR.package == "reportgen.xla"


# Field numbers checked against xla/service/hlo.proto and xla/xla_data.proto.
XLA_FIELDS = {
    "HloProto": {"hlo_module": 1, "buffer_assignment": 3},
    "HloModuleProto": {"name": 1, "entry_computation_name": 2, "computations": 3, "host_program_shape": 4,
                       "id": 5, "entry_computation_id": 6, "schedule": 7, "stack_frame_index": 17,
                       "input_output_alias": 8, "is_dynamic": 11, "spmd_output_sharding": 12,
                       "spmd_parameters_shardings": 14, "device_assignment": 15, "use_auto_spmd_partitioning": 16,
                       "buffer_donor": 18, "frontend_attributes": 19},
    "HloComputationProto": {"name": 1, "instructions": 2, "program_shape": 4, "id": 5, "root_id": 6,
                            "is_fusion_computation": 7, "execution_thread": 8},
    "HloInstructionProto": {"name": 1, "opcode": 2, "shape": 3, "metadata": 7, "parameter_number": 9,
                            "fusion_kind": 11, "tuple_index": 13, "dimensions": 14, "custom_call_target": 28,
                            "id": 35, "operand_ids": 36, "control_predecessor_ids": 37,
                            "called_computation_ids": 38, "backend_config": 43, "async_execution_thread": 79,
                            "literal": 8, "window": 15, "convolution_dimension_numbers": 16,
                            "dot_dimension_numbers": 30, "feature_group_count": 50, "batch_group_count": 58,
                            "comparison_direction": 63, "slice_dimensions": 17, "exponent_bits": 18,
                            "mantissa_bits": 19, "dynamic_slice_sizes": 20, "padding_config": 21,
                            "outfeed_config": 22, "distribution": 23, "epsilon": 24, "feature_index": 25,
                            "channel_id": 26, "infeed_config": 27, "outfeed_shape": 29, "fft_type": 31,
                            "fft_length": 32, "gather_dimension_numbers": 33, "gather_slice_sizes": 34,
                            "sharding": 40, "all_reduce_id": 45, "is_host_transfer": 47,
                            "scatter_dimension_numbers": 48, "replica_groups": 49, "precision_config": 51,
                            "source_target_pairs": 52, "domain_entry_sharding": 54, "domain_exit_sharding": 55,
                            "constrain_layout": 56, "operand_shapes_with_layout": 57, "is_stable": 60,
                            "parameter_replication": 61, "custom_call_has_side_effect": 65, "delta": 66,
                            "indices_are_sorted": 67, "frontend_attributes": 68, "unique_indices": 69,
                            "rng_algorithm": 70, "use_global_device_ids": 71, "comparison_type": 72,
                            "is_cross_program_prefetch": 73, "output_operand_aliasing": 74, "padding_type": 75,
                            "custom_call_schedule": 76, "custom_call_api_version": 77,
                            "cross_program_prefetch_index": 80, "k": 81, "statistics_viz": 82, "largest": 85,
                            "collective_device_list": 87, "is_composite": 89, "mesh_axes_replica_group_list": 93},
    "OpSharding": {"type": 1, "tile_shape": 2, "tile_assignment_dimensions": 3, "tile_assignment_devices": 4,
                   "tuple_shardings": 5, "replicate_on_last_tile_dim": 6, "metadata": 7, "last_tile_dims": 8,
                   "iota_reshape_dims": 9, "iota_transpose_perm": 10, "is_shard_group": 11, "shard_group_id": 12,
                   "shard_group_type": 13},
    "GatherDimensionNumbers": {"offset_dims": 1, "collapsed_slice_dims": 2, "start_index_map": 3,
                               "index_vector_dim": 4, "operand_batching_dims": 5, "start_indices_batching_dims": 6},
    "ScatterDimensionNumbers": {"update_window_dims": 1, "inserted_window_dims": 2,
                                "scatter_dims_to_operand_dims": 3, "index_vector_dim": 4, "input_batching_dims": 5,
                                "scatter_indices_batching_dims": 6},
    "PrecisionConfig": {"operand_precision": 1, "algorithm": 2},
    "CollectiveDeviceListProto": {"replica_groups": 1, "iota_replica_group_list": 2},
    # XLA 2026 (xla_data.proto), as a JAX 0.12 capture writes them (tests/captures/jax_mesh_cpu).
    "MeshAxesReplicaGroupListProto": {"mesh": 1, "axes": 2},
    "MeshProto": {"axes": 1, "device_ids": 2},
    "AxisRefProto": {"mesh_axis_index": 1, "sub_axis_info": 2},
    "HloInputOutputAliasProto": {"entries": 1},
    "DeviceAssignmentProto": {"replica_count": 1, "computation_count": 2, "computation_devices": 3},
    "LiteralProto": {"shape": 1, "preds": 2, "u8s": 3, "s32s": 4, "s64s": 5, "u32s": 6, "u64s": 7, "f32s": 8,
                     "f64s": 9, "tuple_literals": 10, "f16s": 11, "bf16s": 13, "s8s": 15, "u16s": 16, "s16s": 17,
                     "c64s": 12, "c128s": 18},
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
    # Append a field XLA has and we leave out (HloModuleProto.dynamic_parameter_binding = 10, empty message).
    module_bytes = proto.hlo_module.SerializeToString() + bytes([10 << 3 | 2, 0])
    wire = bytes([1 << 3 | 2, len(module_bytes)]) + module_bytes
    parsed = hlo_pb2.HloProto.FromString(wire)
    assert parsed.hlo_module.name == "m"
    # The plain module keeps its number, for the printer to say what it does not print.
    assert plain_hlo(parsed).hlo_module.unknown_fields == [10]


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
