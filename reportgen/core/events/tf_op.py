"""Framework op names: XProf's `ParseTfOpFullname` (docs/xprof/op_stats.md §2.1).

A full name `name:type` is classified as a TensorFlow op, a JAX op, a tf.data
iterator (`Iterator::…`), a memcpy, or unknown (user TraceMe names). Parsing is
per distinct string (metadata names, `tf_op` stat values), never per event.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

UNKNOWN = "Unknown"
TENSORFLOW = "TensorFlow"
JAX = "JAX"
TF_DATA = "TfData"
MEMCPY_H2D = "MemcpyHToD"
MEMCPY_D2H = "MemcpyDToH"
MEMCPY_D2D = "MemcpyDToD"
MEMCPY_H2H = "MemcpyHToH"
INPUT_PIPELINE = "InputPipeline"

DATASET_TYPE = "Dataset"
UNKNOWN_TYPE = ""  # XProf's kUnknownOp

# XProf's RE2 patterns, matched in full. In its C++ source the name pattern's
# `\\/` is an escaped slash (no backslash is allowed), and RE2's `.` does not
# match a newline.
TF_OP_NAME_RE = re.compile(r"[A-Za-z0-9.][A-Za-z0-9_./>-]*")
TF_OP_TYPE_RE = re.compile(r"[A-Z_][a-zA-Z0-9_]*")
JAX_OP_TYPE_RE = re.compile(r"[a-z_][a-z0-9_]*(\[.*\])?")
_INTEGER = re.compile(r"\s*[+-]?[0-9]+\s*")
_MEMCPY_PREFIXES = (
    ("memcpyhtod", MEMCPY_H2D),
    ("memcpydtoh", MEMCPY_D2H),
    ("memcpydtod", MEMCPY_D2D),
    ("memcpyhtoh", MEMCPY_H2H),
)


@dataclass(frozen=True)
class TfOp:
    category: str
    name: str
    type: str


def derive_op_type(full_op_name: str) -> str:
    """`model/layer/MatMul_1` → `MatMul`: last scope component minus a numeric suffix."""
    op_name = full_op_name.split("/")[-1]
    suffix = op_name.split("_")[-1]
    if _INTEGER.fullmatch(suffix) and len(suffix) < len(op_name):
        return op_name[: len(op_name) - len(suffix) - 1]
    return op_name


@lru_cache(maxsize=1 << 16)
def parse_tf_op_fullname(fullname: str) -> TfOp:
    name, sep, op_type = fullname.partition(":")
    if not sep:
        lowered = fullname.lower()
        for prefix, category in _MEMCPY_PREFIXES:
            if lowered.startswith(prefix):
                return TfOp(category, fullname, category)
        return TfOp(UNKNOWN, fullname, UNKNOWN_TYPE)
    if name == "Iterator":
        return TfOp(TF_DATA, fullname, DATASET_TYPE)
    if TF_OP_NAME_RE.fullmatch(name) and TF_OP_TYPE_RE.fullmatch(op_type):
        return TfOp(TENSORFLOW, name, op_type)
    candidate = op_type or derive_op_type(name)
    if JAX_OP_TYPE_RE.fullmatch(candidate):
        return TfOp(JAX, name, candidate.split("[", 1)[0])
    if not op_type:
        return TfOp(TENSORFLOW, name, candidate)
    return TfOp(UNKNOWN, fullname, UNKNOWN_TYPE)


def is_infeed_enqueue_type(op_type: str) -> bool:
    return op_type.startswith("InfeedEnqueue")


def is_outside_compilation(provenance: str, long_name: str) -> bool:
    return (
        provenance.endswith(":XlaSendToHost")
        or provenance.endswith(":XlaRecvFromHost")
        or ("send-done" in long_name and "is_host_transfer=true" in long_name)
    )


def name_scopes(op_name: str) -> list[str]:
    return op_name.split("/")[:-1]
