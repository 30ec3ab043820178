"""XLA shapes as XLA prints and sizes them (ShapeUtil / Layout in XLA).

Only what profiler tools show: the human-readable shape with its layout
(`f32[8,128]{1,0:T(8,128)}`) and the unpadded byte size of a shape.
"""

from __future__ import annotations

from reportgen.core.hlo.model import LayoutProto, PrimitiveType, ShapeProto

# Bit width of each array element type (XLA primitive_util::BitWidth).
_BIT_WIDTH = {
    PrimitiveType.PRED: 8,
    PrimitiveType.S1: 1, PrimitiveType.U1: 1,
    PrimitiveType.S2: 2, PrimitiveType.U2: 2,
    PrimitiveType.S4: 4, PrimitiveType.U4: 4, PrimitiveType.F4E2M1FN: 4,
    PrimitiveType.S8: 8, PrimitiveType.U8: 8,
    PrimitiveType.F8E5M2: 8, PrimitiveType.F8E4M3: 8, PrimitiveType.F8E4M3FN: 8,
    PrimitiveType.F8E4M3B11FNUZ: 8, PrimitiveType.F8E3M4: 8, PrimitiveType.F8E5M2FNUZ: 8,
    PrimitiveType.F8E4M3FNUZ: 8, PrimitiveType.F8E8M0FNU: 8,
    PrimitiveType.S16: 16, PrimitiveType.U16: 16, PrimitiveType.F16: 16, PrimitiveType.BF16: 16,
    PrimitiveType.S32: 32, PrimitiveType.U32: 32, PrimitiveType.F32: 32,
    PrimitiveType.S64: 64, PrimitiveType.U64: 64, PrimitiveType.F64: 64, PrimitiveType.C64: 64,
    PrimitiveType.C128: 128,
}
_INTEGRAL = {
    PrimitiveType.S1, PrimitiveType.S2, PrimitiveType.S4, PrimitiveType.S8, PrimitiveType.S16,
    PrimitiveType.S32, PrimitiveType.S64, PrimitiveType.U1, PrimitiveType.U2, PrimitiveType.U4,
    PrimitiveType.U8, PrimitiveType.U16, PrimitiveType.U32, PrimitiveType.U64,
}
_TILE_COMBINE_DIMENSION = -(1 << 63)
INT64_MAX = (1 << 63) - 1
_ANNOTATION_PRINT_INTERVAL = 5


def type_name(element_type: int) -> str:
    """Lower-case XLA type name (`f32`, `bf16`, `pred`, `token`, `opaque`)."""
    if element_type == PrimitiveType.OPAQUE_TYPE:
        return "opaque"
    try:
        return PrimitiveType(element_type).name.lower()
    except ValueError:
        return "invalid"


def _is_array(shape: ShapeProto) -> bool:
    return shape.element_type in _BIT_WIDTH


def _dims_text(shape: ShapeProto) -> str:
    dynamic = list(shape.is_dynamic_dimension)
    parts = []
    for i, d in enumerate(shape.dimensions):
        if d == _TILE_COMBINE_DIMENSION:
            parts.append("?")
        elif i < len(dynamic) and dynamic[i]:
            parts.append(f"<={d}")
        else:
            parts.append(str(d))
    return ",".join(parts)


def layout_text(layout: LayoutProto) -> str:
    """XLA `Layout::ToString`: `{1,0:T(8,128)(2,1)S(1)}`."""
    extras = []
    if layout.tiles:
        tiles = "".join(
            "(" + ",".join("*" if d == _TILE_COMBINE_DIMENSION else str(d) for d in t.dimensions) + ")"
            for t in layout.tiles
        )
        extras.append("T" + tiles)
    alignment = layout.tail_padding_alignment_in_elements or 1
    if alignment != 1:
        extras.append(f"L({alignment})")
    for marker, ptype in (("#", layout.index_primitive_type), ("*", layout.pointer_primitive_type)):
        if ptype != PrimitiveType.PRIMITIVE_TYPE_INVALID:
            extras.append(f"{marker}({type_name(ptype) if ptype in _INTEGRAL else 'invalid'})")
    if layout.element_size_in_bits:
        extras.append(f"E({layout.element_size_in_bits})")
    if layout.memory_space:
        extras.append(f"S({layout.memory_space})")
    if layout.split_configs:
        extras.append(
            "SC" + "".join(f"({s.dimension}:{','.join(map(str, s.split_indices))})" for s in layout.split_configs)
        )
    if layout.physical_shape is not None:
        extras.append(f"P({shape_text(layout.physical_shape)})")
    if layout.dynamic_shape_metadata_prefix_bytes > 0:
        extras.append(f"M({layout.dynamic_shape_metadata_prefix_bytes})")
    body = ",".join(map(str, layout.minor_to_major))
    return "{" + body + (":" + "".join(extras) if extras else "") + "}"


def shape_text(shape: ShapeProto) -> str:
    """`ShapeUtil::HumanStringWithLayout`: e.g. `(f32[2]{0}, s32[])`."""
    if shape.element_type == PrimitiveType.TUPLE:
        parts = []
        for i, element in enumerate(shape.tuple_shapes):
            text = shape_text(element)
            if i and i % _ANNOTATION_PRINT_INTERVAL == 0:
                text = f"/*index={i}*/" + text
            parts.append(text)
        return "(" + ", ".join(parts) + ")"
    result = f"{type_name(shape.element_type)}[{_dims_text(shape)}]"
    if not _is_array(shape) or shape.layout is None:
        return result
    layout = layout_text(shape.layout)
    if len(shape.dimensions) == 0 and layout == "{}":
        return result  # XLA omits an empty scalar layout
    return result + layout


def unpadded_byte_size(shape: ShapeProto, pointer_size: int = 8) -> int:
    """`ShapeUtil::ByteSizeOf` under the default layout (no tiling, no padding).

    Tuples count one pointer per element; tokens are empty; opaque values
    are one pointer.
    """
    etype = shape.element_type
    if etype == PrimitiveType.TUPLE:
        return pointer_size * len(shape.tuple_shapes)
    if etype == PrimitiveType.TOKEN:
        return 0
    if etype == PrimitiveType.OPAQUE_TYPE:
        return pointer_size
    bits = _BIT_WIDTH.get(etype)
    if bits is None:
        return 0
    count = 1
    for d in shape.dimensions:
        count *= max(int(d), 0)
    size = count * max(bits // 8, 1) if bits >= 8 else count * 1
    # XLA's sizes are int64: a shape no program could allocate (dims like 2^62 x 2^62, which only a
    # damaged or hand-made capture holds) saturates there rather than growing a Python int past what
    # any column, array or file format downstream can hold.
    return min(size, INT64_MAX)


def subshape(shape: ShapeProto, shape_index) -> ShapeProto:
    """The shape a logical buffer describes: XProf takes the tuple element named
    by the *last* index only (kept for parity with XProf)."""
    if len(shape_index):
        i = shape_index[-1]
        if 0 <= i < len(shape.tuple_shapes):
            return shape.tuple_shapes[i]
    return shape


__all__ = ["INT64_MAX", "layout_text", "shape_text", "subshape", "type_name", "unpadded_byte_size"]
