"""TF op names as XProf reads them (`ParseTfOpFullname`, op_stats.md §2.1).

Host events are named `<op name>:<op type>` (TensorFlow), `<name>:<jax type>`
(JAX), `Iterator::<stage>::…` (tf.data) or `MemcpyHToD…` (memcpys); anything
else is a user annotation (category Unknown) and is not an op. Parsing is
per distinct name (event metadata), never per event.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

UNKNOWN = "Unknown"
TENSORFLOW = "TensorFlow"
JAX = "Jax"
TF_DATA = "TfData"
INPUT_PIPELINE = "InputPipeline"
MEMCPY_H2D = "MemcpyHToD"
MEMCPY_D2H = "MemcpyDToH"
MEMCPY_D2D = "MemcpyDToD"
MEMCPY_H2H = "MemcpyHToH"

DATASET_OP_TYPE = "Dataset"

_TF_OP_NAME = re.compile(r"[A-Za-z0-9.][A-Za-z0-9_.\\/>-]*")
_TF_OP_TYPE = re.compile(r"[A-Z_][a-zA-Z0-9_]*")
_JAX_OP_TYPE = re.compile(r"[a-z_][a-z0-9_]*(\[.*\])?", re.DOTALL)
_INTEGER = re.compile(r"\s*[-+]?[0-9]+\s*")
# Memcpy prefixes, matched case-insensitively; category and type share the name.
_MEMCPY = (MEMCPY_H2D, MEMCPY_D2H, MEMCPY_D2D, MEMCPY_H2H)


@dataclass(frozen=True)
class TfOp:
    category: str
    name: str
    type: str
    id: int = 0  # input-pipeline stage id; 0 for every other op


def _derived_op_type(full_op_name: str) -> str:
    """`model/layer/MatMul_1` → `MatMul`: last scope component minus a numeric suffix."""
    op_name = full_op_name.rsplit("/", 1)[-1]
    head, sep, suffix = op_name.rpartition("_")
    if sep and _INTEGER.fullmatch(suffix):
        return head
    return op_name


def parse_tf_op_fullname(fullname: str, category: str = UNKNOWN, op_type: str = "", op_id: int = 0) -> TfOp:
    """XProf's ParseTfOpFullname. A known (category, non-empty type) is kept as is."""
    if category != UNKNOWN and op_type != "":
        return TfOp(category, fullname, op_type, op_id)
    name, colon, typ = fullname.partition(":")
    if not colon:
        lowered = name.lower()
        for memcpy in _MEMCPY:
            if lowered.startswith(memcpy.lower()):
                return TfOp(memcpy, fullname, memcpy, op_id)
        return TfOp(category, fullname, op_type, op_id)
    if name == "Iterator":
        # Dataset ops keep their whole name (`Iterator::Root::Map`).
        return TfOp(TF_DATA, fullname, DATASET_OP_TYPE, op_id)
    if _TF_OP_NAME.fullmatch(name) and _TF_OP_TYPE.fullmatch(typ):
        return TfOp(TENSORFLOW, name, typ, op_id)
    derived = typ if typ else _derived_op_type(name)
    if _JAX_OP_TYPE.fullmatch(derived):
        return TfOp(JAX, name, derived.split("[", 1)[0], op_id)
    if not typ:
        return TfOp(TENSORFLOW, name, derived, op_id)
    return TfOp(category, fullname, op_type, op_id)


def is_tf_data_name(name: str) -> bool:
    """True for tf.data iterator event names (`Iterator::…`), XProf's TfData category."""
    return name.startswith("Iterator:")


def iterator_name(long_name: str) -> str:
    """`Iterator::Root::Prefetch::MapAndBatch` → `MapAndBatch` (XProf's IteratorName)."""
    return long_name.rsplit("::", 1)[-1]


def is_infeed_enqueue_op(op_type: str) -> bool:
    return op_type.startswith("InfeedEnqueue")
