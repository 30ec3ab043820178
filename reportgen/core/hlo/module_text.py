"""A whole HLO module as text, the way XProf's graph viewer prints it (`type=short_txt`).

XProf builds an `xla::HloModule` from the proto and prints it with
`HloPrintOptions::ShortParsable()` without large constants or metadata. This
module reproduces that printer from the module's HLO alone (the plain
dataclasses of `core/hlo/model.py`):

    text = module_text(module.hlo.hlo_module)
    text.text           # the module, byte for byte as XProf prints it
    text.lines          # {instruction name: its line without indentation or ROOT}
    text.unprinted      # what this printer cannot reproduce, one sentence each

The rules, from XLA's printer (hlo_module.cc, hlo_computation.cc,
hlo_instruction(s).cc, literal.cc):

* header: `HloModule <name>` with `is_scheduled=true` when the module has a
  schedule, the input/output aliases and buffer donors, the entry
  computation's layout (`(params)->result`, parameters annotated
  `/*index=N*/` every five) and the module's frontend attributes;
* computations in XLA's DFS post-order: for each computation no instruction
  calls (in id order), the computations it calls (depth first, callees before
  callers, in instruction order), then itself; each is `name {` … `}`, the
  entry prefixed `ENTRY `, followed by a blank line;
* instructions in the schedule's order where the computation is scheduled,
  else in XLA's post-order (operands first, first operand first, control
  predecessors before operands, from the instructions no other uses);
* an instruction: `name = shape opcode(operand names)`, then its attributes
  in XLA's order: the opcode's own (dimensions, slices, windows, dot and
  convolution numbers, …), called computations (`calls=`, `to_apply=`,
  `condition=`/`body=`, …), sharding, frontend attributes, then
  `backend_config` (raw when it reads as a JSON object, else quoted and
  C-escaped); constants print their value when it has at most ten elements,
  else `{...}`; parameters print their number.

Fields this printer does not render (an attribute XLA would print but that
the captures here never carry, including the fields the schema subset leaves
out, which the loader lists in `unknown_fields`) are listed in `unprinted`, so
the page can say where its text may differ from XProf's.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from enum import IntEnum

from reportgen.core.hlo.model import (
    Algorithm,
    AliasKind,
    ConvolutionDimensionNumbers,
    CustomCallApiVersion,
    CustomCallSchedule,
    DotDimensionNumbers,
    FftType,
    FrontendAttributes,
    GatherDimensionNumbers,
    HloComputationProto,
    HloInstructionProto,
    HloModuleProto,
    MeshAxesReplicaGroupListProto,
    MeshProto,
    OpSharding,
    PaddingConfig,
    PaddingType,
    Precision,
    PrecisionConfig,
    PrimitiveType,
    RandomAlgorithm,
    RandomDistribution,
    ScatterDimensionNumbers,
    ShardGroupType,
    ShardingType,
)
from reportgen.core.hlo.shapes import shape_text
from reportgen.core.hlo.text import dim_labels, literal_text, window_text

# XLA's HloOpcode names whose instructions carry a channel id / replica groups.
_CHANNEL_OPS = {"send", "send-done", "recv", "recv-done", "all-reduce", "all-reduce-start", "all-gather",
                "all-gather-start", "all-to-all", "ragged-all-to-all", "reduce-scatter", "collective-broadcast",
                "collective-permute", "collective-permute-start"}
_COLLECTIVE_OPS = {"all-reduce", "all-reduce-start", "all-gather", "all-gather-start", "all-to-all",
                   "ragged-all-to-all", "reduce-scatter", "collective-broadcast"}
_DIMENSIONS_OPS = {"reverse", "concatenate", "reduce", "transpose", "broadcast"}
_TO_APPLY_OPS = {"call", "map", "reduce-window", "reduce", "all-reduce", "reduce-scatter", "all-reduce-start",
                 "scatter", "sort", "scan"}
_ASYNC_OPS = {"async-start", "async-update", "async-done"}
# Collectives whose channel ids tie them together in XLA's instruction post-order.
_CHANNEL_DEPENDENT_OPS = {"all-reduce", "all-gather", "all-to-all", "collective-broadcast", "collective-permute",
                          "ragged-all-to-all", "reduce-scatter"}
_PRIMITIVE_TYPE_NAMES = {t.name.lower() for t in PrimitiveType} - {"primitive_type_invalid", "tuple",
                                                                               "opaque_type"} | {"opaque"}
_SIGNED = {"s1", "s2", "s4", "s8", "s16", "s32", "s64"}
_UNSIGNED = {"u1", "u2", "u4", "u8", "u16", "u32", "u64", "pred"}

# Fields of an instruction or module that XLA prints but this printer does not read
# (they are absent from our schema, so they arrive as unknown fields).
_UNPRINTED_INSTRUCTION_FIELDS = {59: "triangular_solve_options", 62: "cholesky_options", 86: "dot_sparsity",
                                 88: "original_value", 90: "ragged_dot_dimension_numbers", 91: "result_accuracy"}
# Instruction fields of XLA's 2026 proto that XProf's graph viewer does not print: JAX 0.12 writes 98 and 101
# (empty) on its dots, and a module carrying them matches XProf 2.24.2's text byte for byte
# (tests/captures/jax_mesh_cpu); so did a JAX 0.12 module carrying 102. No difference to report.
_SILENT_INSTRUCTION_FIELDS = {98, 101, 102}
# Module fields XLA's printer ignores (or prints only with metadata, which XProf turns off).
_SILENT_MODULE_FIELDS = {10, 13}


@dataclass
class ModuleText:
    text: str
    lines: dict[str, str] = field(default_factory=dict)  # instruction name → its printed line
    unprinted: list[str] = field(default_factory=list)


def sanitized_name(name: str) -> str:
    """XLA's NameUniquer::GetSanitizedName: what the module and its instructions are called once loaded."""
    if not name:
        return name
    chars = list(name)
    if not (chars[0].isascii() and (chars[0].isalpha() or chars[0] == "_")):
        chars[0] = "_"
    for i in range(1, len(chars)):
        c = chars[i]
        if not (c.isascii() and (c.isalnum() or c in "-._")):
            chars[i] = "_"
    result = "".join(chars)
    if result in _PRIMITIVE_TYPE_NAMES:
        result += "_"
    if result.startswith("__") and not result.startswith("__xla_"):
        result = "a" + result[1:]
    return result


def c_escape(text: str | bytes) -> str:
    """absl::CEscape: quotes, backslashes and control characters escaped; other bytes
    outside printable ASCII as three octal digits."""
    raw = text.encode("utf-8", "surrogateescape") if isinstance(text, str) else text
    out = []
    for b in raw:
        if b == 0x0A:
            out.append("\\n")
        elif b == 0x0D:
            out.append("\\r")
        elif b == 0x09:
            out.append("\\t")
        elif b == 0x22:
            out.append('\\"')
        elif b == 0x27:
            out.append("\\'")
        elif b == 0x5C:
            out.append("\\\\")
        elif 0x20 <= b < 0x7F:
            out.append(chr(b))
        else:
            out.append(f"\\{b:03o}")
    return "".join(out)


_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)


def lexes_as_json_dict(text: str) -> bool:
    """XLA's LexesAsJsonDict: `{` … balanced braces (outside strings) … `}`, nothing else but space."""
    body = text.lstrip(" \t\n\r")
    if not body.startswith("{"):
        return False
    depth, i = 0, 0
    while i < len(body):
        c = body[i]
        if c == '"':
            match = _JSON_STRING.match(body, i)
            if match is None:
                return False
            i = match.end()
            continue
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return body[i + 1:].strip(" \t\n\r") == ""
        i += 1
    return False


def _enum_name(enum: type[IntEnum], value: int) -> str:
    """The name of an enum value; a number the schema does not name prints as the number."""
    try:
        return enum(value).name
    except ValueError:
        return str(value)


def _raw(data: bytes) -> str:
    return data.decode("utf-8", "surrogateescape")


def _join_ints(values) -> str:
    return ",".join(str(int(v)) for v in values)


def _shape_index(values) -> str:
    return "{" + _join_ints(values) + "}"


def _frontend_attributes_text(attributes: FrontendAttributes) -> str:
    parts = []
    for key, value in sorted(attributes.map.items()):
        parts.append(f"{key}={value}" if lexes_as_json_dict(value) else f'{key}="{c_escape(value)}"')
    return "{" + ",".join(parts) + "}"


def _tile_assignment_text(sharding: OpSharding) -> str:
    dims = "devices=[" + _join_ints(sharding.tile_assignment_dimensions) + "]"
    if sharding.iota_reshape_dims:
        text = dims + "<=[" + _join_ints(sharding.iota_reshape_dims) + "]"
        perm = list(sharding.iota_transpose_perm)
        if perm and perm != list(range(len(perm))):
            text += "T(" + _join_ints(perm) + ")"
        return text
    return dims + _join_ints(sharding.tile_assignment_devices)


_SUBGROUP_NAMES = {ShardingType.MANUAL: "manual", ShardingType.MAXIMAL: "maximal",
                   ShardingType.REPLICATED: "replicated", ShardingType.UNREDUCED: "unreduced"}


def sharding_text(sharding: OpSharding) -> str:
    """HloSharding::Print without metadata (`{replicated}`, `{devices=[2,1]0,1}`, `{{…}, {…}}`)."""
    kind = sharding.type
    if kind == ShardingType.TUPLE:
        return "{" + ", ".join(sharding_text(s) for s in sharding.tuple_shardings) + "}"
    group = ""
    if sharding.is_shard_group:
        verb = "shard_as" if sharding.shard_group_type == ShardGroupType.AS else "shard_like"
        group = f" {verb} {sharding.shard_group_id}"
    if kind == ShardingType.REPLICATED:
        return "{replicated" + group + "}"
    if kind == ShardingType.MANUAL:
        return "{manual" + group + "}"
    if kind == ShardingType.UNKNOWN:
        return "{unknown" + group + "}"
    if kind == ShardingType.UNREDUCED:
        return "{unreduced" + group + "}"
    if kind == ShardingType.MAXIMAL:
        device = sharding.tile_assignment_devices[0] if sharding.tile_assignment_devices else 0
        return f"{{maximal device={device}" + group + "}"
    text = "{" + _tile_assignment_text(sharding)
    if sharding.replicate_on_last_tile_dim:
        text += " last_tile_dim_replicate"
    if sharding.last_tile_dims:
        text += " last_tile_dims={" + ", ".join(_SUBGROUP_NAMES.get(t, "error_type.")
                                                for t in sharding.last_tile_dims) + "}"
    return text + group + "}"


def _mesh_text(mesh: MeshProto) -> str:
    """XLA's Mesh::ToString as XProf 2.24.2 prints it (axis names quoted)."""
    if not mesh.axes:
        return f"maximal_mesh[device_id={mesh.device_ids[0]}]" if mesh.device_ids else "mesh[]"
    axes = ",".join(f"'{axis.name}'={axis.size}" for axis in mesh.axes)
    # A mesh without device ids is the iota over its axes, which XLA leaves unsaid.
    devices = f", device_ids=({_join_ints(mesh.device_ids)})" if mesh.device_ids else ""
    return f"mesh[{axes}]{devices}"


def _mesh_groups_text(groups: MeshAxesReplicaGroupListProto) -> str:
    """XLA's MeshAxesReplicaGroupList::ToString: the mesh, then the axes (or sub-axes `name:(pre)size`) the
    collective groups its devices by."""
    mesh = groups.mesh
    names = []
    for axis in groups.axes:
        index = axis.mesh_axis_index
        name = f"'{mesh.axes[index].name}'" if 0 <= index < len(mesh.axes) else str(index)
        if axis.sub_axis_info is not None:
            name += f":({axis.sub_axis_info.pre_size}){axis.sub_axis_info.size}"
        names.append(name)
    return f"{_mesh_text(mesh)} {{{','.join(names)}}}"


def _replica_groups_text(instr: HloInstructionProto) -> str:
    # XLA 2026 writes a collective's groups over a mesh only as mesh axes (field 93), which its printer
    # prefers to any list. Otherwise XProf's XLA reads the list from the instruction's replica_groups; a
    # module that only carries the compact iota list (collective_device_list) prints `{}` there.
    if instr.mesh_axes_replica_group_list is not None:
        return _mesh_groups_text(instr.mesh_axes_replica_group_list)
    groups = instr.replica_groups
    return "{" + ",".join("{" + _join_ints(g.replica_ids) + "}" for g in groups) + "}"


def _precision_attributes(config: PrecisionConfig) -> list[str]:
    attrs = []
    if any(p != Precision.DEFAULT for p in config.operand_precision):
        names = [_enum_name(Precision, p).lower() for p in config.operand_precision]
        attrs.append("operand_precision={" + ",".join(names) + "}")
    if config.algorithm != Algorithm.ALG_UNSET:
        attrs.append("algorithm=" + _enum_name(Algorithm, config.algorithm).removeprefix("ALG_").lower())
    return attrs


def _dot_numbers_text(dnums: DotDimensionNumbers) -> str:
    parts = []
    if dnums.lhs_batch_dimensions:
        parts.append("lhs_batch_dims={" + _join_ints(dnums.lhs_batch_dimensions) + "}")
    parts.append("lhs_contracting_dims={" + _join_ints(dnums.lhs_contracting_dimensions) + "}")
    if dnums.rhs_batch_dimensions:
        parts.append("rhs_batch_dims={" + _join_ints(dnums.rhs_batch_dimensions) + "}")
    parts.append("rhs_contracting_dims={" + _join_ints(dnums.rhs_contracting_dimensions) + "}")
    return ", ".join(parts)


def _gather_text(dnums: GatherDimensionNumbers) -> str:
    text = ("offset_dims={" + _join_ints(dnums.offset_dims) + "}, collapsed_slice_dims={"
            + _join_ints(dnums.collapsed_slice_dims) + "}, start_index_map={" + _join_ints(dnums.start_index_map))
    if dnums.operand_batching_dims:
        text += "}, operand_batching_dims={" + _join_ints(dnums.operand_batching_dims)
    if dnums.start_indices_batching_dims:
        text += "}, start_indices_batching_dims={" + _join_ints(dnums.start_indices_batching_dims)
    return text + f"}}, index_vector_dim={dnums.index_vector_dim}"


def _scatter_text(dnums: ScatterDimensionNumbers) -> str:
    text = ("update_window_dims={" + _join_ints(dnums.update_window_dims) + "}, inserted_window_dims={"
            + _join_ints(dnums.inserted_window_dims) + "}, scatter_dims_to_operand_dims={"
            + _join_ints(dnums.scatter_dims_to_operand_dims))
    if dnums.input_batching_dims:
        text += "}, input_batching_dims={" + _join_ints(dnums.input_batching_dims)
    if dnums.scatter_indices_batching_dims:
        text += "}, scatter_indices_batching_dims={" + _join_ints(dnums.scatter_indices_batching_dims)
    return text + f"}}, index_vector_dim={dnums.index_vector_dim}"


def _padding_text(config: PaddingConfig) -> str:
    interior = any(d.interior_padding for d in config.dimensions)
    return "x".join(f"{d.edge_padding_low}_{d.edge_padding_high}" + (f"_{d.interior_padding}" if interior else "")
                    for d in config.dimensions)


def _aliasing_text(pairs) -> str:
    return "{" + ", ".join(f"{_shape_index(p.output_shape_index)}: ({p.operand_index}, "
                           f"{_shape_index(p.operand_shape_index)})" for p in pairs) + "}"


def _default_comparison_type(element_type: str) -> str:
    if element_type in _SIGNED:
        return "SIGNED"
    if element_type in _UNSIGNED:
        return "UNSIGNED"
    return "FLOAT"


def _float_attr(value: float) -> str:
    """absl::StrCat of a float: six significant digits."""
    return f"{value:.6g}"


class _Printer:
    """One module: its computations and instructions indexed for printing."""

    def __init__(self, proto: HloModuleProto):
        self.proto = proto
        self.unprinted: list[str] = []
        self.computations = sorted(proto.computations, key=lambda c: c.id)
        self.computation_by_id = {c.id: c for c in self.computations}
        # Instructions of each computation in the proto's order: XProf loads modules without
        # preserving instruction ids, so XLA renumbers them in that order before sorting by id.
        self.ordered = {c.id: list(c.instructions) for c in self.computations}
        self.instr_by_id: dict[int, dict[int, HloInstructionProto]] = {
            cid: {i.id: i for i in instrs} for cid, instrs in self.ordered.items()}
        self.names: dict[tuple[int, int], str] = {
            (cid, i.id): sanitized_name(i.name) for cid, instrs in self.ordered.items() for i in instrs}
        self.async_callers: set[int] = {cid for c in self.computations for i in c.instructions
                                        if i.opcode in _ASYNC_OPS for cid in i.called_computation_ids}
        self.lines: dict[str, str] = {}

    # -- order ---------------------------------------------------------------------------
    def computation_order(self) -> list[HloComputationProto]:
        called = {cid for c in self.computations for i in c.instructions for cid in i.called_computation_ids}
        order: list[HloComputationProto] = []
        added: set[int] = set()
        for computation in self.computations:
            if computation.id in called:
                continue
            for embedded in self._embedded(computation):
                if embedded not in added:
                    added.add(embedded)
                    order.append(self.computation_by_id[embedded])
            added.add(computation.id)
            order.append(computation)
        missing = [c for c in self.computations if c.id not in added]
        if missing:  # a cycle of calls: XLA would refuse the module; print them anyway
            self.unprinted.append("computations called only from a cycle of calls: "
                                  + ", ".join(c.name for c in missing))
            order.extend(missing)
        return order

    def _embedded(self, computation: HloComputationProto) -> list[int]:
        """MakeEmbeddedComputationsList: callees depth first, each after its own callees."""
        visited: set[int] = set()
        post_order: list[int] = []
        stack: list[tuple[int, int]] = []

        def push_called(called_ids) -> None:
            for cid in reversed(list(called_ids)):
                if cid in self.computation_by_id and cid not in visited:
                    visited.add(cid)
                    stack.append((cid, 0))

        for instr in self.ordered[computation.id]:
            push_called(instr.called_computation_ids)
            while stack:
                cid, position = stack[-1]
                instrs = self.ordered[cid]
                if position == len(instrs):
                    stack.pop()
                    post_order.append(cid)
                else:
                    stack[-1] = (cid, position + 1)
                    push_called(instrs[position].called_computation_ids)
        return post_order

    def instruction_order(self, computation: HloComputationProto) -> list[HloInstructionProto]:
        by_id = self.instr_by_id[computation.id]
        sequences = self.proto.schedule.sequences if self.proto.schedule is not None else {}
        if computation.id in sequences:
            ids = sequences[computation.id].instruction_ids
            if all(i in by_id for i in ids) and len(ids) == len(by_id):
                return [by_id[i] for i in ids]
            self.unprinted.append(f"the schedule of {computation.name} does not match its instructions; "
                                  "printed in post-order")
        return self._post_order(computation)

    def _channel_dependencies(self, instrs) -> dict[int, list[int]]:
        assignment = self.proto.device_assignment
        if assignment is not None and assignment.computation_count == 1:
            return {}
        groups: dict[int, list[int]] = {}
        deps: dict[int, list[int]] = {}
        for instr in instrs:
            if instr.opcode in _CHANNEL_DEPENDENT_OPS and instr.channel_id > 0:
                group = groups.setdefault(instr.channel_id, [])
                deps[instr.id] = list(group)
                group.append(instr.id)
        return deps

    def _post_order(self, computation: HloComputationProto) -> list[HloInstructionProto]:
        """HloComputation::ForEachInstructionPostOrder, step for step."""
        instrs = self.ordered[computation.id]
        by_id = self.instr_by_id[computation.id]
        used = {op for i in instrs for op in i.operand_ids}
        deps = self._channel_dependencies(instrs)
        state: dict[int, int] = {}  # 1 visiting, 2 visited
        out: list[HloInstructionProto] = []
        for root in instrs:
            if root.id in used:
                continue
            stack = [root.id] if state.get(root.id) != 2 else []
            while stack:
                current = stack[-1]
                seen = state.get(current, 0)
                if seen == 0:
                    state[current] = 1
                else:
                    stack.pop()
                    if seen != 2:
                        state[current] = 2
                        out.append(by_id[current])
                    continue
                instr = by_id[current]
                if current != root.id:
                    stack.extend(d for d in deps.get(current, ()) if state.get(d) != 2)
                stack.extend(op for op in reversed(instr.operand_ids) if op in by_id and state.get(op) != 2)
                stack.extend(p for p in instr.control_predecessor_ids if p in by_id and state.get(p) != 2)
        return out

    # -- text ----------------------------------------------------------------------------
    def header(self) -> str:
        proto = self.proto
        text = "HloModule " + sanitized_name(proto.name)
        if proto.schedule is not None:
            text += ", is_scheduled=true"
        aliases = sorted(proto.input_output_alias.entries, key=lambda e: tuple(e.output_shape_index))
        if aliases:
            text += ", input_output_alias={ " + ", ".join(
                f"{_shape_index(e.output_shape_index)}: ({e.parameter_number}, "
                f"{_shape_index(e.parameter_shape_index)}, "
                f"{'must-alias' if e.kind == AliasKind.MUST_ALIAS else 'may-alias'})" for e in aliases) + " }"
        donors = sorted(proto.buffer_donor.entries,
                        key=lambda e: (e.parameter_number, tuple(e.parameter_shape_index)))
        if donors:
            text += ", buffer_donor={ " + ", ".join(
                f"({e.parameter_number}, {_shape_index(e.parameter_shape_index)})" for e in donors) + " }"
        if proto.host_program_shape is not None:
            program = proto.host_program_shape
            params = ""
            for i, shape in enumerate(program.parameters):
                if i:
                    params += f", /*index={i}*/" if i % 5 == 0 else ", "
                params += shape_text(shape)
            text += ", entry_computation_layout={(" + params + ")->" + shape_text(program.result) + "}"
        if proto.frontend_attributes.map:
            text += ", frontend_attributes=" + _frontend_attributes_text(proto.frontend_attributes)
        for number in proto.unknown_fields:
            if number not in _SILENT_MODULE_FIELDS:
                self.unprinted.append(f"module field {number} (not read by this printer)")
        return text

    def can_expand_async(self, computation_id: int) -> bool:
        """HloComputation::CanExpandIntoSingleInstruction: parameters feeding one root, in order."""
        computation = self.computation_by_id.get(computation_id)
        if computation is None:
            return False
        instrs = self.ordered[computation_id]
        root = self.instr_by_id[computation_id].get(computation.root_id)
        if root is None:
            return False
        params = [i for i in instrs if i.opcode == "parameter"]
        if len(params) + 1 != len(instrs):
            return False
        by_number = {p.parameter_number: p.id for p in params}
        return list(root.operand_ids) == [by_number.get(n) for n in range(len(params))]

    def computation_text(self, computation: HloComputationProto) -> str:
        entry = computation.id == self.proto.entry_computation_id
        out = ("ENTRY " if entry else "") + computation.name + " {\n"
        for instr in self.instruction_order(computation):
            line = self.instruction_text(computation, instr)
            self.lines.setdefault(self.names[(computation.id, instr.id)], line)
            out += "  " + ("ROOT " if instr.id == computation.root_id else "") + line + "\n"
        out += "}"
        if computation.execution_thread and computation.execution_thread != "main":
            out += f', execution_thread="{computation.execution_thread}"'
        return out

    def _operand_name(self, cid: int, operand_id: int) -> str:
        return self.names.get((cid, operand_id), "null")

    def instruction_text(self, computation: HloComputationProto, instr: HloInstructionProto) -> str:
        cid = computation.id
        op = instr.opcode
        name = self.names[(cid, instr.id)]
        shown_op = op
        wrapped = None
        if op in _ASYNC_OPS:
            start = self._async_start(cid, instr)
            if start is not None and start.called_computation_ids and self.can_expand_async(
                    start.called_computation_ids[0]):
                wrapped_id = start.called_computation_ids[0]
                wrapped_comp = self.computation_by_id[wrapped_id]
                wrapped = self.instr_by_id[wrapped_id][wrapped_comp.root_id]
                shown_op = wrapped.opcode + op[len("async"):]
        if op == "parameter":
            operands = str(instr.parameter_number)
        elif op == "constant":
            operands = literal_text(instr.literal) if instr.literal is not None else "{...}"
            if operands == "{...}" and instr.literal is not None and math.prod(instr.literal.shape.dimensions) <= 10 \
                    and instr.literal.shape.element_type != PrimitiveType.TUPLE:
                self.unprinted.append(f"the value of constant {name} (an element type this printer does not read)")
        else:
            operands = ", ".join(self._operand_name(cid, o) for o in instr.operand_ids)
        text = f"{name} = {shape_text(instr.shape)} {shown_op}({operands})"
        attrs = self.own_attributes(cid, instr)
        if wrapped is not None and op == "async-start":
            attrs += self.own_attributes(wrapped_id, wrapped)
        attrs += self.called_attributes(cid, instr, sugared=wrapped is not None)
        if instr.sharding is not None:
            attrs.append("sharding=" + sharding_text(instr.sharding))
        if instr.frontend_attributes.map:
            attrs.append("frontend_attributes=" + _frontend_attributes_text(instr.frontend_attributes))
        if instr.statistics_viz.statistics:
            self.unprinted.append(f"the statistics of {name}")
        for number in instr.unknown_fields:
            if number in _SILENT_INSTRUCTION_FIELDS:
                continue
            label = _UNPRINTED_INSTRUCTION_FIELDS.get(number, f"field {number}")
            self.unprinted.append(f"{label} of {name}")
        mesh_groups = instr.mesh_axes_replica_group_list
        if mesh_groups is not None and mesh_groups.mesh.unknown_fields:
            fields = ", ".join(str(n) for n in mesh_groups.mesh.unknown_fields)
            self.unprinted.append(f"the replica groups' mesh of {name} (its fields {fields})")
        if instr.backend_config:
            config = _raw(instr.backend_config)
            attrs.append("backend_config=" + (config if lexes_as_json_dict(config) else f'"{c_escape(config)}"'))
        return text + "".join(", " + a for a in attrs)

    def _async_start(self, cid: int, instr: HloInstructionProto) -> HloInstructionProto | None:
        current = instr
        for _ in range(64):
            if current.opcode == "async-start":
                return current
            if not current.operand_ids:
                return None
            current = self.instr_by_id[cid].get(current.operand_ids[0])
            if current is None:
                return None
        return None

    def own_attributes(self, cid: int, instr: HloInstructionProto) -> list[str]:
        """PrintExtraAttributesImpl of the instruction's class."""
        op = instr.opcode
        attrs: list[str] = []
        if op in ("batch-norm-training", "batch-norm-inference", "batch-norm-grad"):
            attrs += [f"epsilon={_float_attr(instr.epsilon)}", f"feature_index={instr.feature_index}"]
        elif op == "fft":
            attrs += [f"fft_type={_enum_name(FftType, instr.fft_type)}", "fft_length={" + _join_ints(
                instr.fft_length) + "}"]
        elif op == "async-start":
            if instr.async_execution_thread and instr.async_execution_thread != "main":
                attrs.append(f'async_execution_thread="{instr.async_execution_thread}"')
        elif op == "copy-start":
            if instr.cross_program_prefetch_index is not None:
                attrs.append(f"cross_program_prefetch_index={instr.cross_program_prefetch_index}")
            elif instr.is_cross_program_prefetch:
                attrs.append("cross_program_prefetch_index=0")
        elif op == "compare":
            attrs.append(f"direction={instr.comparison_direction}")
            operand = self.instr_by_id[cid].get(instr.operand_ids[0]) if instr.operand_ids else None
            if instr.comparison_type and operand is not None:
                element = _enum_name(PrimitiveType, operand.shape.element_type).lower()
                if instr.comparison_type != _default_comparison_type(element):
                    attrs.append(f"type={instr.comparison_type}")
        elif op in _CHANNEL_OPS:
            if instr.channel_id > 0:
                attrs.append(f"channel_id={instr.channel_id}")
            if op in ("send", "send-done", "recv", "recv-done") and instr.is_host_transfer:
                attrs.append("is_host_transfer=true")
            if op in _COLLECTIVE_OPS:
                attrs.append("replica_groups=" + _replica_groups_text(instr))
                if instr.constrain_layout:
                    attrs.append("constrain_layout=true")
            if op in ("all-gather", "all-gather-start"):
                attrs.append("dimensions={" + _join_ints(instr.dimensions[:1]) + "}")
                if instr.use_global_device_ids:
                    attrs.append("use_global_device_ids=true")
            elif op in ("all-reduce", "all-reduce-start", "reduce-scatter"):
                if instr.use_global_device_ids:
                    attrs.append("use_global_device_ids=true")
                if op == "reduce-scatter":
                    attrs.append("dimensions={" + _join_ints(instr.dimensions[:1]) + "}")
            elif op == "all-to-all" and instr.dimensions:
                attrs.append("dimensions={" + _join_ints(instr.dimensions[:1]) + "}")
            elif op in ("collective-permute", "collective-permute-start"):
                attrs.append("source_target_pairs={" + ",".join(
                    f"{{{p.source},{p.target}}}" for p in instr.source_target_pairs) + "}")
                if instr.dynamic_slice_sizes:
                    self.unprinted.append(f"the slice sizes of {sanitized_name(instr.name)}")
        elif op in _DIMENSIONS_OPS:
            attrs.append("dimensions={" + _join_ints(instr.dimensions) + "}")
        elif op == "sort":
            attrs.append("dimensions={" + _join_ints(instr.dimensions) + "}")
            if instr.is_stable:
                attrs.append("is_stable=true")
        elif op == "reshape":
            if len(instr.dimensions) == 1:
                attrs.append(f"inferred_dimension={instr.dimensions[0]}")
        elif op == "map":
            attrs.append("dimensions={" + _join_ints(range(len(instr.shape.dimensions))) + "}")
        elif op == "slice":
            dims = instr.slice_dimensions
            strides = [d.stride or 1 for d in dims]
            omit = all(s == 1 for s in strides)
            attrs.append("slice={" + ", ".join(
                f"[{d.start}:{d.limit}" + ("" if omit else f":{s}") + "]" for d, s in zip(dims, strides)) + "}")
        elif op == "fusion":
            attrs.append(f"kind={instr.fusion_kind}")
            if instr.output_operand_aliasing:
                attrs.append("output_to_operand_aliasing=" + _aliasing_text(instr.output_operand_aliasing))
        elif op == "rng":
            attrs.append("distribution=" + _enum_name(RandomDistribution, instr.distribution).lower())
        elif op == "rng-bit-generator":
            attrs.append("algorithm=" + _enum_name(RandomAlgorithm, instr.rng_algorithm).lower())
        elif op == "rng-get-and-update-state":
            attrs.append(f"delta={instr.delta}")
        elif op == "parameter":
            if instr.parameter_replication is not None and instr.parameter_replication.replicated_at_leaf_buffers:
                attrs.append("parameter_replication={" + ",".join(
                    "true" if r else "false" for r in instr.parameter_replication.replicated_at_leaf_buffers) + "}")
        elif op == "get-tuple-element":
            attrs.append(f"index={instr.tuple_index}")
        elif op == "reduce-precision":
            attrs += [f"exponent_bits={instr.exponent_bits}", f"mantissa_bits={instr.mantissa_bits}"]
        elif op == "infeed":
            if instr.infeed_config:
                attrs.append(f'infeed_config="{c_escape(instr.infeed_config)}"')
        elif op == "outfeed":
            attrs.append("outfeed_shape=" + shape_text(instr.outfeed_shape))
            if instr.outfeed_config:
                attrs.append(f'outfeed_config="{c_escape(instr.outfeed_config)}"')
        elif op == "convolution":
            if instr.window is not None and instr.window.dimensions:
                attrs.append("window={" + window_text(instr.window) + "}")
            attrs.append("dim_labels=" + dim_labels(instr.convolution_dimension_numbers
                                                    or ConvolutionDimensionNumbers()))
            if max(instr.feature_group_count, 1) != 1:
                attrs.append(f"feature_group_count={instr.feature_group_count}")
            if max(instr.batch_group_count, 1) != 1:
                attrs.append(f"batch_group_count={instr.batch_group_count}")
            attrs += _precision_attributes(instr.precision_config)
        elif op in ("reduce-window", "select-and-scatter"):
            if instr.window is not None and instr.window.dimensions:
                attrs.append("window={" + window_text(instr.window) + "}")
        elif op == "custom-call":
            attrs += self._custom_call_attributes(instr)
        elif op == "pad":
            attrs.append("padding=" + _padding_text(instr.padding_config))
        elif op == "dynamic-slice":
            attrs.append("dynamic_slice_sizes={" + _join_ints(instr.dynamic_slice_sizes) + "}")
        elif op == "gather":
            attrs.append(_gather_text(instr.gather_dimension_numbers))
            attrs.append("slice_sizes={" + _join_ints(instr.gather_slice_sizes) + "}")
            if instr.indices_are_sorted:
                attrs.append("indices_are_sorted=true")
        elif op == "scatter":
            attrs.append(_scatter_text(instr.scatter_dimension_numbers))
            if instr.indices_are_sorted:
                attrs.append("indices_are_sorted=true")
            if instr.unique_indices:
                attrs.append("unique_indices=true")
        elif op == "iota":
            attrs.append("iota_dimension=" + (str(instr.dimensions[0]) if instr.dimensions else "0"))
        elif op == "dot":
            attrs.append(_dot_numbers_text(instr.dot_dimension_numbers or DotDimensionNumbers()))
            attrs += _precision_attributes(instr.precision_config)
        elif op in ("get-dimension-size", "set-dimension-size"):
            attrs.append("dimensions={" + _join_ints(instr.dimensions[:1]) + "}")
        elif op == "topk":
            attrs += [f"k={instr.k}", f"largest={'true' if instr.largest else 'false'}"]
        elif op == "domain":
            self.unprinted.append(f"the domain metadata of {sanitized_name(instr.name)}")
        return attrs

    def _custom_call_attributes(self, instr: HloInstructionProto) -> list[str]:
        attrs = []
        if instr.window is not None:
            attrs.append("window={" + window_text(instr.window) + "}")
        if instr.convolution_dimension_numbers is not None:
            attrs.append("dim_labels=" + dim_labels(instr.convolution_dimension_numbers))
        if max(instr.feature_group_count, 1) != 1:
            attrs.append(f"feature_group_count={instr.feature_group_count}")
        if max(instr.batch_group_count, 1) != 1:
            attrs.append(f"batch_group_count={instr.batch_group_count}")
        attrs += _precision_attributes(instr.precision_config)
        if instr.padding_type != PaddingType.PADDING_INVALID:
            attrs.append("padding_type=" + _enum_name(PaddingType, instr.padding_type))
        attrs.append(f'custom_call_target="{c_escape(instr.custom_call_target)}"')
        if instr.constrain_layout:
            attrs.append("operand_layout_constraints={" + ", ".join(
                shape_text(s) for s in instr.operand_shapes_with_layout) + "}")
        if instr.custom_call_has_side_effect:
            attrs.append("custom_call_has_side_effect=true")
        if instr.literal is not None:
            self.unprinted.append(f"the literal of custom call {sanitized_name(instr.name)}")
        if instr.output_operand_aliasing:
            attrs.append("output_to_operand_aliasing=" + _aliasing_text(instr.output_operand_aliasing))
        if instr.custom_call_schedule != CustomCallSchedule.SCHEDULE_NONE:
            attrs.append("schedule=" + _enum_name(CustomCallSchedule, instr.custom_call_schedule))
        if instr.custom_call_api_version != CustomCallApiVersion.API_VERSION_ORIGINAL:
            attrs.append("api_version=" + _enum_name(CustomCallApiVersion, instr.custom_call_api_version))
        return attrs

    def _computation_name(self, cid: int) -> str:
        computation = self.computation_by_id.get(cid)
        return computation.name if computation is not None else "null"

    def called_attributes(self, cid: int, instr: HloInstructionProto, sugared: bool) -> list[str]:
        """The called computations, by name (XLA's kNameOnly subcomputation mode)."""
        op = instr.opcode
        called = [self._computation_name(c) for c in instr.called_computation_ids]
        if op == "while":
            return [f"condition={called[1]}", f"body={called[0]}"] if len(called) == 2 else []
        if op == "select-and-scatter":
            return [f"select={called[0]}", f"scatter={called[1]}"] if len(called) == 2 else []
        if op == "conditional":
            predicate = self.instr_by_id[cid].get(instr.operand_ids[0]) if instr.operand_ids else None
            if predicate is not None and predicate.shape.element_type == PrimitiveType.PRED \
                    and len(called) == 2:
                return [f"true_computation={called[0]}", f"false_computation={called[1]}"]
            return ["branch_computations={" + ", ".join(called) + "}"]
        if op in _TO_APPLY_OPS:
            attrs = [f"to_apply={called[0]}"] if called else []
            if op == "call" and instr.is_composite:
                attrs.append("is_composite=true")
            return attrs
        if op == "custom-call":
            return ["called_computations={" + ", ".join(called) + "}"] if called else []
        if op in _ASYNC_OPS:
            return [f"calls={called[0]}"] if op == "async-start" and called and not sugared else []
        return ["calls=" + ", ".join(called)] if called else []


def module_text(proto: HloModuleProto) -> ModuleText:
    """The module as XProf's graph viewer prints it with `type=short_txt`."""
    printer = _Printer(proto)
    out = printer.header() + "\n\n"
    for computation in printer.computation_order():
        if computation.id in printer.async_callers and printer.can_expand_async(computation.id):
            continue  # folded into its async-start/-done lines, as XLA's syntax sugar does
        out += printer.computation_text(computation) + "\n\n"
    return ModuleText(out, printer.lines, list(dict.fromkeys(printer.unprinted)))


__all__ = ["ModuleText", "c_escape", "lexes_as_json_dict", "module_text", "sanitized_name", "sharding_text"]
