"""Training or inference? XProf's ModelTracker (model_tracker.cc).

A model is "training" when its op names show gradients: a TensorFlow name
scope `gradient_tape` or `gradients…`, or a JAX name component starting with
`transpose(` (the transpose of a JVP).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from reportgen.core.events.tf_op import JAX_OP_TYPE_RE, TF_OP_NAME_RE, TF_OP_TYPE_RE, name_scopes

if TYPE_CHECKING:
    from reportgen.core.hlo.model import HloModule


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
        if TF_OP_TYPE_RE.fullmatch(op_type) and TF_OP_NAME_RE.fullmatch(op_name):
            if _tf_gradients(op_name):
                return True
        elif op_name and JAX_OP_TYPE_RE.fullmatch(op_type) and op_type in op_name.split("/")[-1]:
            if _jax_transpose(op_name):
                return True
        elif not op_type and _jax_transpose(op_name):
            return True
    return False


def modules_show_training(modules: Mapping[int, HloModule]) -> bool:
    """True when the framework ops of any HLO instruction (its OpMetadata) show
    gradient computation: XProf feeds its ModelTracker from the HLO protos."""
    return is_training(
        (instruction.metadata.op_name, instruction.metadata.op_type)
        for module in modules.values()
        for computation in module.hlo.hlo_module.computations
        for instruction in computation.instructions
    )
