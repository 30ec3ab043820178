"""Training or inference? XProf's ModelTracker (model_tracker.cc).

A model is "training" when its op names show gradients: a TensorFlow name
scope `gradient_tape` or `gradients…`, or a JAX name component starting with
`transpose(` (the transpose of a JVP).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from reportgen.core.tf_op import name_scopes

_TF_NAME = re.compile(r"[A-Za-z0-9.][A-Za-z0-9_.\\/>-]*")
_TF_TYPE = re.compile(r"[A-Z_][a-zA-Z0-9_]*")
_JAX_TYPE = re.compile(r"[a-z_][a-z0-9_]*(\[.*\])?", re.DOTALL)


def _tf_gradients(op_name: str) -> bool:
    for scope in name_scopes(op_name):
        if scope.startswith("gradient"):
            rest = scope[len("gradient"):]
            if rest == "_tape" or rest.startswith("s"):
                return True
    return False


def _jax_transpose(op_name: str) -> bool:
    return any(part.startswith("transpose(") for part in op_name.split("/"))


def is_training(ops: Iterable[tuple[str, str]]) -> bool:
    """True when any (op name, op type) pair shows gradient computation."""
    for op_name, op_type in ops:
        if _TF_TYPE.fullmatch(op_type) and _TF_NAME.fullmatch(op_name):
            if _tf_gradients(op_name):
                return True
        elif op_name and _JAX_TYPE.fullmatch(op_type) and op_type in op_name.split("/")[-1]:
            if _jax_transpose(op_name):
                return True
        elif not op_type and _jax_transpose(op_name):
            return True
    return False
