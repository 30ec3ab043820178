"""HLO instructions as text, the way XLA prints them (`%name = shape opcode(operands), attributes`).

The op profile shows an op's HLO expression. For ops on a device op line the
capture carries it (the event metadata's name); for the instructions inside
a fusion it does not, so it is printed here from the module's instructions. The format
follows XLA's default print options without metadata: result shape with
layout, operand shapes and names, and the attributes most ops carry
(dimensions, windows, dot and convolution dimension numbers, called
computations, small constants). Attributes not listed here are left out.

Shapes keep their layout (`{3,2,1,0:T(8,128)S(5)}`); `physical_dims` tells
how a tiled layout pads each dimension, which is what makes an op's memory
footprint larger than its logical shape.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from reportgen.core.hlo.model import (
    ConvolutionDimensionNumbers,
    HloInstructionProto,
    LiteralProto,
    PrimitiveType,
    ShapeProto,
    Window,
)

_TYPE_NAMES = {int(t): t.name.lower() for t in PrimitiveType}
_TYPE_NAMES[PrimitiveType.OPAQUE_TYPE] = "opaque"
TUPLE = PrimitiveType.TUPLE
TOKEN = PrimitiveType.TOKEN
# XLA prints constants with at most this many elements; larger ones as `{...}`.
MAX_PRINTED_CONSTANT_ELEMENTS = 10


def element_type_name(element_type: int) -> str:
    return _TYPE_NAMES.get(element_type, "invalid")


def _layout_text(shape: ShapeProto) -> str:
    if shape.layout is None:
        return ""
    layout = shape.layout
    extras = "".join("T(" + ",".join(str(d) for d in tile.dimensions) + ")" for tile in layout.tiles)
    if layout.element_size_in_bits:
        extras += f"E({layout.element_size_in_bits})"
    if layout.memory_space:
        extras += f"S({layout.memory_space})"
    minor_to_major = ",".join(str(d) for d in layout.minor_to_major)
    if not minor_to_major and not extras:
        return ""
    return "{" + minor_to_major + (":" + extras if extras else "") + "}"


def shape_text(shape: ShapeProto) -> str:
    """`f32[5,1024]{1,0:T(8,128)}`; tuples as `(a, b)`."""
    if shape.element_type == TUPLE:
        return "(" + ", ".join(shape_text(s) for s in shape.tuple_shapes) + ")"
    name = element_type_name(shape.element_type)
    if shape.element_type == TOKEN:
        return name + "[]"
    dims = []
    for i, d in enumerate(shape.dimensions):
        dynamic = i < len(shape.is_dynamic_dimension) and shape.is_dynamic_dimension[i]
        dims.append(("<=" if dynamic else "") + str(d))
    return f"{name}[{','.join(dims)}]" + _layout_text(shape)


# Per float type: (digits tried first, digits that always round-trip, NaN payload mask, quiet-NaN payload).
# XLA's RoundTripFpToString prints f32/f64 with digits10 and falls back to max_digits10
# when that does not read back; narrower types go straight to max_digits10.
_FLOAT_FORMATS = {
    "f64": (15, 17, (1 << 52) - 1, 1 << 51),
    "f32": (6, 9, (1 << 23) - 1, 1 << 22),
    "f16": (None, 5, (1 << 10) - 1, 1 << 9),
    "bf16": (None, 4, (1 << 7) - 1, 1 << 6),
}


def _float_text(value: float, kind: str = "f32", bits: int | None = None) -> str:
    """XLA's RoundTripFpToString: `%.{digits10}g` when it reads back as the same value,
    else `%.{max_digits10}g`; NaN keeps its sign and a non-default payload (`nan(0x1)`)."""
    first, fallback, payload_mask, quiet = _FLOAT_FORMATS[kind]
    if math.isnan(value):
        negative = math.copysign(1.0, value) < 0
        text = "-nan" if negative else "nan"
        if bits is not None and (bits & payload_mask) != quiet:
            text += f"(0x{bits & payload_mask:x})"
        return text
    if first is not None:
        text = f"{value:.{first}g}"
        cast = np.float32 if kind == "f32" else np.float64
        if cast(float(text)) == cast(value):
            return text
    return f"{value:.{fallback}g}"


def _float_elements(values: np.ndarray, kind: str, bits: np.ndarray) -> list[str]:
    return [_float_text(float(v), kind, int(b)) for v, b in zip(values, bits)]


def _literal_values(literal: LiteralProto, rank: int) -> list[str] | None:
    """The literal's elements as XLA prints them, row-major; None when the payload is not readable."""
    element_type = element_type_name(literal.shape.element_type)
    if element_type == "pred":
        # XLA prints an array of predicates as 1/0 (denser), a scalar as true/false.
        return [("1" if v else "0") if rank else ("true" if v else "false") for v in literal.preds]
    for field in ("s32s", "s64s", "u32s", "u64s"):
        values = getattr(literal, field)
        if len(values):
            return [str(int(v)) for v in values]
    if len(literal.f32s):
        values = np.asarray(literal.f32s, dtype=np.float32)
        return _float_elements(values, "f32", values.view(np.uint32))
    if len(literal.f64s):
        values = np.asarray(literal.f64s, dtype=np.float64)
        return _float_elements(values, "f64", values.view(np.uint64))
    for field, kind, dtype in (("c64s", "f32", np.float32), ("c128s", "f64", np.float64)):
        values = getattr(literal, field)
        if len(values):
            parts = np.asarray(values, dtype=dtype)
            bits = parts.view(np.uint32 if dtype is np.float32 else np.uint64)
            texts = _float_elements(parts, kind, bits)
            return [f"({texts[i]}, {texts[i + 1]})" for i in range(0, len(texts) - 1, 2)]
    packed = {"s8s": "<i1", "u8s": "<u1", "s16s": "<i2", "u16s": "<u2"}
    for field, dtype in packed.items():
        raw = getattr(literal, field)
        if raw:
            return [str(int(v)) for v in np.frombuffer(raw, dtype=dtype)]
    if literal.f16s:
        values = np.frombuffer(literal.f16s, dtype="<f2")
        return _float_elements(values.astype(np.float64), "f16", values.view(np.uint16))
    if literal.bf16s:
        raw = np.frombuffer(literal.bf16s, dtype="<u2")
        values = (raw.astype(np.uint32) << 16).view(np.float32)
        return _float_elements(values, "bf16", raw)
    if math.prod(literal.shape.dimensions) == 0:
        return []
    return None


def _nest(values: list[str], dims: list[int]) -> str:
    """XLA's one-line literal layout: `{1, 2}` for rank 1; for rank >= 2 the innermost
    lists get inner spaces (`{ { 1, 2 }, { 3, 4 } }`) and rank > 3 marks outer indices
    (`{ /*i0=0*/ { ...`)."""
    rank = len(dims)
    if rank == 0:
        return values[0]
    if rank == 1:
        return "{" + ", ".join(values) + "}"

    def level(start: int, depth: int, index: list[int]) -> str:
        size = dims[depth]
        if depth == rank - 1:
            pad = "" if size <= 1 else " "
            return "{" + pad + ", ".join(values[start:start + size]) + pad + "}"
        step = math.prod(dims[depth + 1:])
        opening = "{ "
        if rank > 3 and index:
            opening = "{" + f" /*i{len(index) - 1}={index[-1]}*/" + (" " if size > 0 else "")
        children = [level(start + i * step, depth + 1, [*index, i]) for i in range(size)]
        return opening + ", ".join(children) + " }"

    return level(0, 0, [])


def literal_text(literal: LiteralProto) -> str:
    """A constant's value as XLA prints it without large constants: arrays of at most ten
    elements in full, larger arrays and tuples as `{...}`."""
    shape = literal.shape
    if shape.element_type == TUPLE or math.prod(shape.dimensions) > MAX_PRINTED_CONSTANT_ELEMENTS:
        return "{...}"
    dims = list(shape.dimensions)
    values = _literal_values(literal, len(dims))
    if values is None or len(values) != math.prod(dims):
        return "{...}"
    return _nest(values, dims)


def _dims(values) -> str:
    return "{" + ",".join(str(v) for v in values) + "}"


def window_text(window: Window) -> str:
    """`size=3x3 stride=2x2 pad=1_1x1_1 …` as XLA prints a window (without braces)."""
    dims = window.dimensions
    if not dims:
        return ""
    parts = ["size=" + "x".join(str(d.size) for d in dims)]
    if any(d.stride != 1 for d in dims):
        parts.append("stride=" + "x".join(str(d.stride) for d in dims))
    if any(d.padding_low or d.padding_high for d in dims):
        parts.append("pad=" + "x".join(f"{d.padding_low}_{d.padding_high}" for d in dims))
    if any(d.base_dilation not in (0, 1) for d in dims):
        parts.append("lhs_dilate=" + "x".join(str(d.base_dilation) for d in dims))
    if any(d.window_dilation not in (0, 1) for d in dims):
        parts.append("rhs_dilate=" + "x".join(str(d.window_dilation) for d in dims))
    if any(d.window_reversal for d in dims):
        parts.append("rhs_reversal=" + "x".join("1" if d.window_reversal else "0" for d in dims))
    return " ".join(parts)


def dim_labels(numbers: ConvolutionDimensionNumbers) -> str:
    """XLA's `dim_labels=b01f_01io->b01f` for a convolution."""

    def labels(rank: int, first: tuple[int, str], second: tuple[int, str], spatial) -> str:
        out = ["?"] * rank
        for index, label in (first, second):
            if 0 <= index < rank:
                out[index] = label
        for i, d in enumerate(spatial):
            if 0 <= d < rank:
                out[d] = str(i)
        return "".join(out)

    rank = len(numbers.input_spatial_dimensions) + 2
    lhs = labels(rank, (numbers.input_batch_dimension, "b"), (numbers.input_feature_dimension, "f"),
                 numbers.input_spatial_dimensions)
    rhs = labels(rank, (numbers.kernel_input_feature_dimension, "i"), (numbers.kernel_output_feature_dimension, "o"),
                 numbers.kernel_spatial_dimensions)
    out = labels(rank, (numbers.output_batch_dimension, "b"), (numbers.output_feature_dimension, "f"),
                 numbers.output_spatial_dimensions)
    return f"{lhs}_{rhs}->{out}"


# Opcodes whose `dimensions` attribute XLA prints even when empty.
_DIMENSIONS_ALWAYS = {"broadcast", "transpose", "reduce", "reverse", "concatenate", "sort"}
_TO_APPLY = {"reduce", "reduce-window", "all-reduce", "all-reduce-start", "reduce-scatter", "map", "scatter",
             "select-and-scatter", "sort", "call"}


def _attributes(instr: HloInstructionProto, computation_names: dict[int, str]) -> list[str]:
    op = instr.opcode
    attrs: list[str] = []
    called = [f"%{computation_names.get(c, c)}" for c in instr.called_computation_ids]
    if op == "get-tuple-element":
        attrs.append(f"index={instr.tuple_index}")
    if op == "iota" and instr.dimensions:
        attrs.append(f"iota_dimension={instr.dimensions[0]}")
    elif op in _DIMENSIONS_ALWAYS or (instr.dimensions and op not in ("fusion", "custom-call")):
        attrs.append(f"dimensions={_dims(instr.dimensions)}")
    if instr.window is not None and instr.window.dimensions:
        attrs.append("window={" + window_text(instr.window) + "}")
    if op == "convolution" and instr.convolution_dimension_numbers is not None:
        attrs.append("dim_labels=" + dim_labels(instr.convolution_dimension_numbers))
    if instr.feature_group_count > 1:
        attrs.append(f"feature_group_count={instr.feature_group_count}")
    if instr.batch_group_count > 1:
        attrs.append(f"batch_group_count={instr.batch_group_count}")
    if op == "dot" and instr.dot_dimension_numbers is not None:
        dnums = instr.dot_dimension_numbers
        for label, values in (("lhs_batch_dims", dnums.lhs_batch_dimensions),
                              ("lhs_contracting_dims", dnums.lhs_contracting_dimensions),
                              ("rhs_batch_dims", dnums.rhs_batch_dimensions),
                              ("rhs_contracting_dims", dnums.rhs_contracting_dimensions)):
            if len(values) or label.endswith("contracting_dims"):
                attrs.append(f"{label}={_dims(values)}")
    if op == "compare" and instr.comparison_direction:
        attrs.append(f"direction={instr.comparison_direction}")
    if op == "fusion":
        attrs.append(f"kind={instr.fusion_kind}")
        if called:
            attrs.append(f"calls={called[0]}")
    elif op == "while" and len(called) == 2:
        attrs.extend([f"condition={called[1]}", f"body={called[0]}"])
    elif op == "conditional" and called:
        attrs.append("branch_computations={" + ", ".join(called) + "}")
    elif op in _TO_APPLY and len(called) == 1:
        attrs.append(f"to_apply={called[0]}")
    elif called:
        attrs.append("calls=" + (called[0] if len(called) == 1 else "{" + ", ".join(called) + "}"))
    if op == "custom-call" and instr.custom_call_target:
        attrs.append(f'custom_call_target="{instr.custom_call_target}"')
    return attrs


def instruction_text(instr: HloInstructionProto, instructions: dict[int, HloInstructionProto],
                     computation_names: dict[int, str]) -> str:
    """The instruction as XLA prints it; `instructions` maps ids to the operands' protos."""
    op = instr.opcode
    if op == "parameter":
        operands = str(instr.parameter_number)
    elif op == "constant":
        operands = literal_text(instr.literal) if instr.literal is not None else "{...}"
    else:
        parts = []
        for operand_id in instr.operand_ids:
            operand = instructions.get(operand_id)
            parts.append(f"{shape_text(operand.shape)} %{operand.name}" if operand is not None else "%?")
        operands = ", ".join(parts)
    text = f"%{instr.name} = {shape_text(instr.shape)} {op}({operands})"
    attrs = _attributes(instr, computation_names)
    return text + (", " + ", ".join(attrs) if attrs else "")


@dataclass
class PhysicalDim:
    """One dimension in memory order (major to minor): its size and the tile size it is padded to."""

    dimension: int  # logical dimension number
    size: int
    alignment: int  # 1 when the layout does not tile this dimension
    semantics: str = ""  # batch / feature / spatial for convolutions, else ""

    @property
    def padded(self) -> int:
        return -(-self.size // self.alignment) * self.alignment if self.alignment > 1 else self.size


def physical_dims(shape: ShapeProto) -> list[PhysicalDim]:
    """Array dimensions major to minor with the first tile's padding (XLA tiles the most minor dimensions)."""
    if shape.element_type in (TUPLE, TOKEN) or shape.layout is None:
        return []
    rank = len(shape.dimensions)
    minor_to_major = list(shape.layout.minor_to_major)
    # Only a permutation of the dimensions is a layout (XLA's verifier refuses any other): one naming a
    # dimension the shape lacks, or one twice, reads as the default order.
    order = minor_to_major[::-1] if sorted(minor_to_major) == list(range(rank)) else list(range(rank))
    tile = list(shape.layout.tiles[0].dimensions) if shape.layout.tiles else []
    align = [1] * rank
    for k in range(1, min(len(tile), rank) + 1):
        align[rank - k] = max(1, int(tile[-k]))
    return [PhysicalDim(d, int(shape.dimensions[d]), align[i]) for i, d in enumerate(order)]


__all__ = ["PhysicalDim", "dim_labels", "element_type_name", "instruction_text", "literal_text", "physical_dims",
           "shape_text", "window_text"]
