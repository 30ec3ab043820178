"""HLO modules as plain Python: the part of XLA's `HloProto` the tools read, one dataclass per message.

The loaders parse a capture's serialized HLO protos once per host and hand
core these objects (`reportgen.loaders.hlo`): nothing in core touches
protobuf. Each class mirrors the XLA message of the same name in
`loaders/proto/hlo.proto`: the same fields, in the same order, with proto3's
values (0, "", empty lists) for fields the file does not set. A message field
is always an object (its defaults when unset), except the few that tools ask
"is it there?" of, which are None when absent (`OPTIONAL_FIELDS`: e.g. an
instruction's `literal`, `window` and `sharding`, a module's `schedule`, a
shape's `layout`). Enums are plain ints, named by the IntEnums of `ENUMS`.
Instructions and modules also list the numbers of the fields the capture
carries that the schema subset leaves out (`unknown_fields`, filled by the
loader), so that the module printer can say what it does not print.
tests/test_hlo_proto.py keeps these classes and the `.proto` in step.

`HloModule` is one compiled program of the capture: its program id, its name
and its `HloProto`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum
from functools import cached_property


class PrimitiveType(IntEnum):
    """XLA's element types (xla_data.proto), by their numbers."""

    PRIMITIVE_TYPE_INVALID = 0
    PRED = 1
    S1 = 30
    S2 = 26
    S4 = 21
    S8 = 2
    S16 = 3
    S32 = 4
    S64 = 5
    U1 = 31
    U2 = 27
    U4 = 22
    U8 = 6
    U16 = 7
    U32 = 8
    U64 = 9
    F16 = 10
    F32 = 11
    BF16 = 16
    F64 = 12
    F8E5M2 = 19
    F8E4M3 = 28
    F8E4M3FN = 20
    F8E4M3B11FNUZ = 23
    F8E3M4 = 29
    F8E5M2FNUZ = 24
    F8E4M3FNUZ = 25
    F4E2M1FN = 32
    F8E8M0FNU = 33
    C64 = 15
    C128 = 18
    TUPLE = 13
    OPAQUE_TYPE = 14
    TOKEN = 17
    BUFFER = 34


# HeapSimulatorTrace.Event.Kind
ALLOC, FREE, SHARE_WITH = 0, 1, 2


class Precision(IntEnum):
    """PrecisionConfig.Precision."""

    DEFAULT = 0
    HIGH = 1
    HIGHEST = 2


class Algorithm(IntEnum):
    """PrecisionConfig.Algorithm (a dot's algorithm)."""

    ALG_UNSET = 0
    ALG_DOT_ANY_F8_ANY_F8_F32 = 1
    ALG_DOT_ANY_F8_ANY_F8_F32_FAST_ACCUM = 2
    ALG_DOT_F16_F16_F16 = 3
    ALG_DOT_F16_F16_F32 = 4
    ALG_DOT_BF16_BF16_BF16 = 5
    ALG_DOT_BF16_BF16_F32 = 6
    ALG_DOT_BF16_BF16_F32_X3 = 7
    ALG_DOT_BF16_BF16_F32_X6 = 8
    ALG_DOT_TF32_TF32_F32 = 9
    ALG_DOT_TF32_TF32_F32_X3 = 10
    ALG_DOT_F32_F32_F32 = 11
    ALG_DOT_F64_F64_F64 = 12
    ALG_DOT_BF16_BF16_F32_X9 = 13


class ShardingType(IntEnum):
    """OpSharding.Type."""

    REPLICATED = 0
    MAXIMAL = 1
    TUPLE = 2
    OTHER = 3
    MANUAL = 4
    UNKNOWN = 5
    UNREDUCED = 6


class ShardGroupType(IntEnum):
    """OpSharding.ShardGroupType."""

    AS = 0
    LIKE = 1


class RandomDistribution(IntEnum):
    RNG_INVALID = 0
    RNG_UNIFORM = 1
    RNG_NORMAL = 2


class RandomAlgorithm(IntEnum):
    RNG_DEFAULT = 0
    RNG_THREE_FRY = 1
    RNG_PHILOX = 2


class FftType(IntEnum):
    FFT = 0
    IFFT = 1
    RFFT = 2
    IRFFT = 3


class PaddingType(IntEnum):
    PADDING_INVALID = 0
    PADDING_VALID = 1
    PADDING_SAME = 2


class CustomCallSchedule(IntEnum):
    SCHEDULE_NONE = 0
    SCHEDULE_LATEST = 1
    SCHEDULE_EARLIEST = 2


class CustomCallApiVersion(IntEnum):
    API_VERSION_UNSPECIFIED = 0
    API_VERSION_ORIGINAL = 1
    API_VERSION_STATUS_RETURNING = 2
    API_VERSION_STATUS_RETURNING_UNIFIED = 3
    API_VERSION_TYPED_FFI = 4


class AliasKind(IntEnum):
    """Kind (of an input/output alias)."""

    UNDEFINED_ALIAS = 0
    MAY_ALIAS = 1
    MUST_ALIAS = 2


# --- xla_data.proto ---------------------------------------------------------------------------


@dataclass(slots=True)
class TileProto:
    dimensions: list[int] = field(default_factory=list)


@dataclass(slots=True)
class SplitConfigProto:
    dimension: int = 0
    split_indices: list[int] = field(default_factory=list)


@dataclass(slots=True)
class LayoutProto:
    minor_to_major: list[int] = field(default_factory=list)
    tiles: list[TileProto] = field(default_factory=list)
    element_size_in_bits: int = 0
    memory_space: int = 0
    dim_level_types: list[int] = field(default_factory=list)
    physical_shape: ShapeProto | None = None
    index_primitive_type: int = 0
    pointer_primitive_type: int = 0
    dim_unique: list[bool] = field(default_factory=list)
    dim_ordered: list[bool] = field(default_factory=list)
    dynamic_shape_metadata_prefix_bytes: int = 0
    tail_padding_alignment_in_elements: int = 0
    split_configs: list[SplitConfigProto] = field(default_factory=list)


@dataclass(slots=True)
class ShapeProto:
    element_type: int = 0
    dimensions: list[int] = field(default_factory=list)
    tuple_shapes: list[ShapeProto] = field(default_factory=list)
    layout: LayoutProto | None = None
    is_dynamic_dimension: list[bool] = field(default_factory=list)


@dataclass(slots=True)
class ProgramShapeProto:
    parameters: list[ShapeProto] = field(default_factory=list)
    result: ShapeProto = field(default_factory=ShapeProto)
    parameter_names: list[str] = field(default_factory=list)


@dataclass(slots=True)
class OpMetadata:
    op_type: str = ""
    op_name: str = ""
    source_file: str = ""
    source_line: int = 0
    size_of_generated_code_in_bytes: int = 0
    size_of_memory_working_set_in_bytes: int = 0
    deduplicated_name: str = ""
    stack_frame_id: int = 0
    scheduling_name: str = ""
    source_end_line: int = 0
    source_column: int = 0
    source_end_column: int = 0


@dataclass(slots=True)
class LiteralProto:
    shape: ShapeProto = field(default_factory=ShapeProto)
    preds: list[bool] = field(default_factory=list)
    u8s: bytes = b""
    s32s: list[int] = field(default_factory=list)
    s64s: list[int] = field(default_factory=list)
    u32s: list[int] = field(default_factory=list)
    u64s: list[int] = field(default_factory=list)
    f32s: list[float] = field(default_factory=list)
    f64s: list[float] = field(default_factory=list)
    tuple_literals: list[LiteralProto] = field(default_factory=list)
    f16s: bytes = b""
    bf16s: bytes = b""
    s8s: bytes = b""
    u16s: bytes = b""
    s16s: bytes = b""
    c64s: list[float] = field(default_factory=list)  # real, imaginary, real, …
    c128s: list[float] = field(default_factory=list)


@dataclass(slots=True)
class WindowDimension:
    size: int = 0
    stride: int = 0
    padding_low: int = 0
    padding_high: int = 0
    window_dilation: int = 0
    base_dilation: int = 0
    window_reversal: bool = False


@dataclass(slots=True)
class Window:
    dimensions: list[WindowDimension] = field(default_factory=list)


@dataclass(slots=True)
class ConvolutionDimensionNumbers:
    kernel_input_feature_dimension: int = 0
    kernel_output_feature_dimension: int = 0
    kernel_spatial_dimensions: list[int] = field(default_factory=list)
    input_batch_dimension: int = 0
    input_feature_dimension: int = 0
    output_batch_dimension: int = 0
    output_feature_dimension: int = 0
    input_spatial_dimensions: list[int] = field(default_factory=list)
    output_spatial_dimensions: list[int] = field(default_factory=list)


@dataclass(slots=True)
class DotDimensionNumbers:
    lhs_contracting_dimensions: list[int] = field(default_factory=list)
    rhs_contracting_dimensions: list[int] = field(default_factory=list)
    lhs_batch_dimensions: list[int] = field(default_factory=list)
    rhs_batch_dimensions: list[int] = field(default_factory=list)


@dataclass(slots=True)
class GatherDimensionNumbers:
    offset_dims: list[int] = field(default_factory=list)
    collapsed_slice_dims: list[int] = field(default_factory=list)
    start_index_map: list[int] = field(default_factory=list)
    index_vector_dim: int = 0
    operand_batching_dims: list[int] = field(default_factory=list)
    start_indices_batching_dims: list[int] = field(default_factory=list)


@dataclass(slots=True)
class ScatterDimensionNumbers:
    update_window_dims: list[int] = field(default_factory=list)
    inserted_window_dims: list[int] = field(default_factory=list)
    scatter_dims_to_operand_dims: list[int] = field(default_factory=list)
    index_vector_dim: int = 0
    input_batching_dims: list[int] = field(default_factory=list)
    scatter_indices_batching_dims: list[int] = field(default_factory=list)


@dataclass(slots=True)
class PaddingConfigDimension:
    """PaddingConfig.PaddingConfigDimension."""

    edge_padding_low: int = 0
    edge_padding_high: int = 0
    interior_padding: int = 0


@dataclass(slots=True)
class PaddingConfig:
    dimensions: list[PaddingConfigDimension] = field(default_factory=list)


@dataclass(slots=True)
class PrecisionConfig:
    operand_precision: list[int] = field(default_factory=list)  # Precision
    algorithm: int = 0  # Algorithm


@dataclass(slots=True)
class FrontendAttributes:
    map: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class Statistic:
    stat_name: str = ""
    stat_val: float = 0.0


@dataclass(slots=True)
class StatisticsViz:
    stat_index_to_visualize: int = 0
    statistics: list[Statistic] = field(default_factory=list)


@dataclass(slots=True)
class OpSharding:
    type: int = 0  # ShardingType
    tile_shape: ShapeProto = field(default_factory=ShapeProto)
    tile_assignment_dimensions: list[int] = field(default_factory=list)
    tile_assignment_devices: list[int] = field(default_factory=list)
    tuple_shardings: list[OpSharding] = field(default_factory=list)
    replicate_on_last_tile_dim: bool = False
    metadata: list[OpMetadata] = field(default_factory=list)
    last_tile_dims: list[int] = field(default_factory=list)  # ShardingType
    iota_reshape_dims: list[int] = field(default_factory=list)
    iota_transpose_perm: list[int] = field(default_factory=list)
    is_shard_group: bool = False
    shard_group_id: int = 0
    shard_group_type: int = 0  # ShardGroupType


@dataclass(slots=True)
class ReplicaGroup:
    replica_ids: list[int] = field(default_factory=list)


@dataclass(slots=True)
class IotaReplicaGroupListProto:
    num_replica_groups: int = 0
    num_devices_per_group: int = 0
    iota_reshape_dims: list[int] = field(default_factory=list)
    iota_transpose_perm: list[int] = field(default_factory=list)


@dataclass(slots=True)
class CollectiveDeviceListProto:
    replica_groups: list[ReplicaGroup] = field(default_factory=list)
    iota_replica_group_list: IotaReplicaGroupListProto = field(default_factory=IotaReplicaGroupListProto)


@dataclass(slots=True)
class MeshAxis:
    name: str = ""
    size: int = 0


@dataclass(slots=True)
class MeshProto:
    axes: list[MeshAxis] = field(default_factory=list)
    device_ids: list[int] = field(default_factory=list)
    # Not a proto field: fields of a newer mesh this schema does not know (the printer says so).
    unknown_fields: list[int] = field(default_factory=list)


@dataclass(slots=True)
class SubAxis:
    pre_size: int = 0
    size: int = 0


@dataclass(slots=True)
class AxisRefProto:
    mesh_axis_index: int = 0
    sub_axis_info: SubAxis | None = None


@dataclass(slots=True)
class MeshAxesReplicaGroupListProto:
    mesh: MeshProto = field(default_factory=MeshProto)
    axes: list[AxisRefProto] = field(default_factory=list)


@dataclass(slots=True)
class SourceTarget:
    source: int = 0
    target: int = 0


@dataclass(slots=True)
class OutputOperandAliasing:
    output_shape_index: list[int] = field(default_factory=list)
    operand_index: int = 0
    operand_shape_index: list[int] = field(default_factory=list)


@dataclass(slots=True)
class ParameterReplication:
    replicated_at_leaf_buffers: list[bool] = field(default_factory=list)


@dataclass(slots=True)
class ComputationDevice:
    """DeviceAssignmentProto.ComputationDevice."""

    replica_device_ids: list[int] = field(default_factory=list)


@dataclass(slots=True)
class DeviceAssignmentProto:
    replica_count: int = 0
    computation_count: int = 0
    computation_devices: list[ComputationDevice] = field(default_factory=list)


# --- hlo.proto ----------------------------------------------------------------------------------


@dataclass(slots=True)
class SliceDimensions:
    """HloInstructionProto.SliceDimensions."""

    start: int = 0
    limit: int = 0
    stride: int = 0


@dataclass(slots=True)
class HloInstructionProto:
    name: str = ""
    opcode: str = ""
    shape: ShapeProto = field(default_factory=ShapeProto)
    metadata: OpMetadata = field(default_factory=OpMetadata)
    literal: LiteralProto | None = None
    parameter_number: int = 0
    fusion_kind: str = ""
    tuple_index: int = 0
    dimensions: list[int] = field(default_factory=list)
    window: Window | None = None
    convolution_dimension_numbers: ConvolutionDimensionNumbers | None = None
    slice_dimensions: list[SliceDimensions] = field(default_factory=list)
    exponent_bits: int = 0
    mantissa_bits: int = 0
    dynamic_slice_sizes: list[int] = field(default_factory=list)
    padding_config: PaddingConfig = field(default_factory=PaddingConfig)
    outfeed_config: bytes = b""
    distribution: int = 0  # RandomDistribution
    epsilon: float = 0.0
    feature_index: int = 0
    channel_id: int = 0
    infeed_config: bytes = b""
    custom_call_target: str = ""
    outfeed_shape: ShapeProto = field(default_factory=ShapeProto)
    dot_dimension_numbers: DotDimensionNumbers | None = None
    fft_type: int = 0  # FftType
    fft_length: list[int] = field(default_factory=list)
    gather_dimension_numbers: GatherDimensionNumbers = field(default_factory=GatherDimensionNumbers)
    gather_slice_sizes: list[int] = field(default_factory=list)
    id: int = 0
    operand_ids: list[int] = field(default_factory=list)
    control_predecessor_ids: list[int] = field(default_factory=list)
    called_computation_ids: list[int] = field(default_factory=list)
    sharding: OpSharding | None = None
    backend_config: bytes = b""
    all_reduce_id: int = 0
    is_host_transfer: bool = False
    scatter_dimension_numbers: ScatterDimensionNumbers = field(default_factory=ScatterDimensionNumbers)
    replica_groups: list[ReplicaGroup] = field(default_factory=list)
    feature_group_count: int = 0
    precision_config: PrecisionConfig = field(default_factory=PrecisionConfig)
    source_target_pairs: list[SourceTarget] = field(default_factory=list)
    domain_entry_sharding: OpSharding = field(default_factory=OpSharding)
    domain_exit_sharding: OpSharding = field(default_factory=OpSharding)
    constrain_layout: bool = False
    operand_shapes_with_layout: list[ShapeProto] = field(default_factory=list)
    batch_group_count: int = 0
    is_stable: bool = False
    parameter_replication: ParameterReplication | None = None
    comparison_direction: str = ""
    custom_call_has_side_effect: bool = False
    delta: int = 0
    indices_are_sorted: bool = False
    frontend_attributes: FrontendAttributes = field(default_factory=FrontendAttributes)
    unique_indices: bool = False
    rng_algorithm: int = 0  # RandomAlgorithm
    use_global_device_ids: bool = False
    comparison_type: str = ""
    is_cross_program_prefetch: bool = False
    output_operand_aliasing: list[OutputOperandAliasing] = field(default_factory=list)
    padding_type: int = 0  # PaddingType
    custom_call_schedule: int = 0  # CustomCallSchedule
    custom_call_api_version: int = 0  # CustomCallApiVersion
    async_execution_thread: str = ""
    cross_program_prefetch_index: int | None = None  # a oneof of one field: None when unset
    k: int = 0
    statistics_viz: StatisticsViz = field(default_factory=StatisticsViz)
    largest: bool = False
    collective_device_list: CollectiveDeviceListProto = field(default_factory=CollectiveDeviceListProto)
    is_composite: bool = False
    mesh_axes_replica_group_list: MeshAxesReplicaGroupListProto | None = None
    # Not a proto field: the numbers of the fields XLA wrote that the schema subset leaves out (the loader
    # lists them, so that the module printer can say what it does not print).
    unknown_fields: list[int] = field(default_factory=list)


@dataclass(slots=True)
class HloComputationProto:
    name: str = ""
    instructions: list[HloInstructionProto] = field(default_factory=list)
    program_shape: ProgramShapeProto = field(default_factory=ProgramShapeProto)
    id: int = 0
    root_id: int = 0
    is_fusion_computation: bool = False
    execution_thread: str = ""


@dataclass(slots=True)
class InstructionSequence:
    instruction_ids: list[int] = field(default_factory=list)


@dataclass(slots=True)
class HloScheduleProto:
    sequences: dict[int, InstructionSequence] = field(default_factory=dict)


@dataclass(slots=True)
class FileLocation:
    file_name_id: int = 0
    function_name_id: int = 0
    line: int = 0
    column: int = 0


@dataclass(slots=True)
class StackFrame:
    file_location_id: int = 0
    parent_frame_id: int = 0


@dataclass(slots=True)
class StackFrameIndexProto:
    file_names: list[str] = field(default_factory=list)
    function_names: list[str] = field(default_factory=list)
    file_locations: list[FileLocation] = field(default_factory=list)
    stack_frames: list[StackFrame] = field(default_factory=list)


@dataclass(slots=True)
class AliasEntryProto:
    """HloInputOutputAliasProto.AliasEntryProto."""

    output_shape_index: list[int] = field(default_factory=list)
    parameter_number: int = 0
    parameter_shape_index: list[int] = field(default_factory=list)
    kind: int = 0  # AliasKind


@dataclass(slots=True)
class HloInputOutputAliasProto:
    entries: list[AliasEntryProto] = field(default_factory=list)


@dataclass(slots=True)
class BufferDonorEntryProto:
    """HloBufferDonorProto.BufferDonorEntryProto."""

    parameter_number: int = 0
    parameter_shape_index: list[int] = field(default_factory=list)


@dataclass(slots=True)
class HloBufferDonorProto:
    entries: list[BufferDonorEntryProto] = field(default_factory=list)


@dataclass(slots=True)
class HloModuleProto:
    name: str = ""
    entry_computation_name: str = ""
    computations: list[HloComputationProto] = field(default_factory=list)
    host_program_shape: ProgramShapeProto | None = None
    id: int = 0
    entry_computation_id: int = 0
    schedule: HloScheduleProto | None = None
    input_output_alias: HloInputOutputAliasProto = field(default_factory=HloInputOutputAliasProto)
    is_dynamic: bool = False
    spmd_output_sharding: OpSharding = field(default_factory=OpSharding)
    spmd_parameters_shardings: list[OpSharding] = field(default_factory=list)
    device_assignment: DeviceAssignmentProto | None = None
    use_auto_spmd_partitioning: bool = False
    stack_frame_index: StackFrameIndexProto = field(default_factory=StackFrameIndexProto)
    buffer_donor: HloBufferDonorProto = field(default_factory=HloBufferDonorProto)
    frontend_attributes: FrontendAttributes = field(default_factory=FrontendAttributes)
    unknown_fields: list[int] = field(default_factory=list)  # not a proto field: see HloInstructionProto's


@dataclass(slots=True)
class BufferLocation:
    """LogicalBufferProto.Location."""

    instruction_name: str = ""
    shape_index: list[int] = field(default_factory=list)
    instruction_id: int = 0


@dataclass(slots=True)
class LogicalBufferProto:
    id: int = 0
    size: int = 0
    defined_at: BufferLocation = field(default_factory=BufferLocation)
    color: int = 0


@dataclass(slots=True)
class AssignedBuffer:
    """BufferAllocationProto.Assigned."""

    logical_buffer_id: int = 0
    offset: int = 0
    size: int = 0


@dataclass(slots=True)
class BufferAllocationProto:
    index: int = 0
    size: int = 0
    is_thread_local: bool = False
    is_entry_computation_parameter: bool = False
    parameter_number: int = 0
    maybe_live_out: bool = False
    color: int = 0
    assigned: list[AssignedBuffer] = field(default_factory=list)
    parameter_shape_index: list[int] = field(default_factory=list)
    is_tuple: bool = False
    is_constant: bool = False


@dataclass(slots=True)
class HeapSimulatorEvent:
    """HeapSimulatorTrace.Event; `kind` is ALLOC, FREE or SHARE_WITH."""

    kind: int = ALLOC
    buffer_id: int = 0
    computation_name: str = ""
    instruction_name: str = ""
    share_with_canonical_id: int = 0


@dataclass(slots=True)
class HeapSimulatorTrace:
    events: list[HeapSimulatorEvent] = field(default_factory=list)
    whole_module_simulation: bool = False
    buffer_allocation_index: int = 0


@dataclass(slots=True)
class BufferAlias:
    """BufferAssignmentProto.BufferAlias."""

    source_buffer_id: int = 0
    location: BufferLocation = field(default_factory=BufferLocation)


@dataclass(slots=True)
class BufferAssignmentProto:
    logical_buffers: list[LogicalBufferProto] = field(default_factory=list)
    buffer_aliases: list[BufferAlias] = field(default_factory=list)
    buffer_allocations: list[BufferAllocationProto] = field(default_factory=list)
    heap_simulator_traces: list[HeapSimulatorTrace] = field(default_factory=list)


@dataclass(slots=True)
class HloProto:
    hlo_module: HloModuleProto = field(default_factory=HloModuleProto)
    buffer_assignment: BufferAssignmentProto = field(default_factory=BufferAssignmentProto)


# --- compiled programs --------------------------------------------------------------------------

_U64 = 1 << 64


@dataclass
class HloModule:
    """One compiled program: its (unsigned) program id, XLA module name and HLO."""

    program_id: int
    name: str  # hlo.hlo_module.name
    hlo: HloProto = field(repr=False)

    @property
    def display_name(self) -> str:
        """XProf's module-list name (`HloModuleNameWithProgramId`)."""
        return module_display_name(self.name, self.program_id)

    @cached_property
    def instructions(self) -> dict[str, HloInstructionProto]:
        """Every instruction by name, over all computations (the first of a name wins)."""
        found: dict[str, HloInstructionProto] = {}
        for computation in self.hlo.hlo_module.computations:
            for instruction in computation.instructions:
                found.setdefault(instruction.name, instruction)
        return found


def module_display_name(name: str, program_id: int) -> str:
    return f"{name}({program_id % _U64})"


def program_key(program_id: int) -> int:
    """The key of a program id in a host's modules (an int64 stat holds the uint64's bit pattern)."""
    return program_id % _U64


def instruction_provenance(instruction: HloInstructionProto) -> str:
    """`op_name:op_type` of the framework op an instruction was lowered from (its
    OpMetadata), or '' when the metadata names neither."""
    metadata = instruction.metadata
    if not metadata.op_name and not metadata.op_type:
        return ""
    return f"{metadata.op_name}:{metadata.op_type}"


def sorted_module_names(modules: dict[int, HloModule]) -> list[str]:
    """Module-list names in XProf's order (plain string sort)."""
    return sorted(m.display_name for m in modules.values())


# The message classes by the name of the message they mirror (the loader's converter and the schema test).
MESSAGES: dict[str, type] = {
    "TileProto": TileProto, "SplitConfigProto": SplitConfigProto, "LayoutProto": LayoutProto,
    "ShapeProto": ShapeProto, "ProgramShapeProto": ProgramShapeProto, "OpMetadata": OpMetadata,
    "LiteralProto": LiteralProto, "WindowDimension": WindowDimension, "Window": Window,
    "ConvolutionDimensionNumbers": ConvolutionDimensionNumbers, "DotDimensionNumbers": DotDimensionNumbers,
    "GatherDimensionNumbers": GatherDimensionNumbers, "ScatterDimensionNumbers": ScatterDimensionNumbers,
    "PaddingConfig.PaddingConfigDimension": PaddingConfigDimension, "PaddingConfig": PaddingConfig,
    "PrecisionConfig": PrecisionConfig, "FrontendAttributes": FrontendAttributes, "Statistic": Statistic,
    "StatisticsViz": StatisticsViz, "OpSharding": OpSharding, "ReplicaGroup": ReplicaGroup,
    "IotaReplicaGroupListProto": IotaReplicaGroupListProto, "CollectiveDeviceListProto": CollectiveDeviceListProto,
    "MeshProto.MeshAxis": MeshAxis, "MeshProto": MeshProto, "AxisRefProto.SubAxis": SubAxis,
    "AxisRefProto": AxisRefProto, "MeshAxesReplicaGroupListProto": MeshAxesReplicaGroupListProto,
    "SourceTarget": SourceTarget, "OutputOperandAliasing": OutputOperandAliasing,
    "ParameterReplication": ParameterReplication, "DeviceAssignmentProto.ComputationDevice": ComputationDevice,
    "DeviceAssignmentProto": DeviceAssignmentProto, "HloInstructionProto.SliceDimensions": SliceDimensions,
    "HloInstructionProto": HloInstructionProto, "HloComputationProto": HloComputationProto,
    "HloScheduleProto.InstructionSequence": InstructionSequence, "HloScheduleProto": HloScheduleProto,
    "StackFrameIndexProto.FileLocation": FileLocation, "StackFrameIndexProto.StackFrame": StackFrame,
    "StackFrameIndexProto": StackFrameIndexProto,
    "HloInputOutputAliasProto.AliasEntryProto": AliasEntryProto, "HloInputOutputAliasProto": HloInputOutputAliasProto,
    "HloBufferDonorProto.BufferDonorEntryProto": BufferDonorEntryProto, "HloBufferDonorProto": HloBufferDonorProto,
    "HloModuleProto": HloModuleProto,
    "LogicalBufferProto.Location": BufferLocation, "LogicalBufferProto": LogicalBufferProto,
    "BufferAllocationProto.Assigned": AssignedBuffer, "BufferAllocationProto": BufferAllocationProto,
    "HeapSimulatorTrace.Event": HeapSimulatorEvent, "HeapSimulatorTrace": HeapSimulatorTrace,
    "BufferAssignmentProto.BufferAlias": BufferAlias, "BufferAssignmentProto": BufferAssignmentProto,
    "HloProto": HloProto,
}
# Fields that are None when the proto does not set them (see the module notes).
OPTIONAL_FIELDS: dict[str, frozenset[str]] = {
    "HloInstructionProto": frozenset({"literal", "window", "convolution_dimension_numbers", "dot_dimension_numbers",
                                      "sharding", "parameter_replication", "cross_program_prefetch_index",
                                      "mesh_axes_replica_group_list"}),
    "AxisRefProto": frozenset({"sub_axis_info"}),
    "HloModuleProto": frozenset({"host_program_shape", "schedule", "device_assignment"}),
    "ShapeProto": frozenset({"layout"}),
    "LayoutProto": frozenset({"physical_shape"}),
}
# Fields the loader adds after a message's own: the numbers of the fields the file carries that the schema
# subset does not know (XLA fields this project does not read).
UNKNOWN_FIELD_NUMBERS: dict[str, str] = {"HloInstructionProto": "unknown_fields", "HloModuleProto": "unknown_fields",
                                         "MeshProto": "unknown_fields"}
# The enums of the schema by the name of the proto enum they mirror.
ENUMS: dict[str, type[IntEnum]] = {
    "PrimitiveType": PrimitiveType, "PrecisionConfig.Precision": Precision, "PrecisionConfig.Algorithm": Algorithm,
    "OpSharding.Type": ShardingType, "OpSharding.ShardGroupType": ShardGroupType,
    "RandomDistribution": RandomDistribution, "RandomAlgorithm": RandomAlgorithm, "FftType": FftType,
    "PaddingType": PaddingType, "CustomCallSchedule": CustomCallSchedule,
    "CustomCallApiVersion": CustomCallApiVersion, "Kind": AliasKind,
}

__all__ = ["ALLOC", "ENUMS", "FREE", "MESSAGES", "OPTIONAL_FIELDS", "SHARE_WITH", "UNKNOWN_FIELD_NUMBERS", "HloModule",
           "HloProto", "PrimitiveType", "instruction_provenance", "module_display_name", "program_key",
           "sorted_module_names"]
