"""Capture `tests/captures/jax_many_small_jits/`: a JAX step made of 40 separately jitted tiny functions.

    python scripts/captures/capture_jax_many_small_jits.py LOGDIR

Each step calls 40 `jax.jit` functions one after the other (`tanh(x * c) + 0.001` on a 64×64 float32 array), with
no `jax.jit` around the step, and waits for the result. All 40 are compiled before the trace; 12 steps are marked
with `StepTraceAnnotation("train")` under `jax.profiler.trace`. What the profile shows: 40 tiny XLA:CPU executions
a step (microseconds each) and the host's dispatch of each call around them, which takes most of the step. Writes
`LOGDIR/plugins/profile/<timestamp>/<host>.xplane.pb`. Needs only `jax` (CPU); the committed capture was made with
JAX 0.10.2 on a 2-core VM (its host file `vm.xplane.pb`).
"""

from __future__ import annotations

import sys

import jax
import jax.numpy as jnp

CALLS, STEPS = 40, 12

FUNCTIONS = [jax.jit(lambda x, k=k: jnp.tanh(x * (1.0 + 0.01 * k)) + 0.001) for k in range(CALLS)]


def step(x):
    for f in FUNCTIONS:
        x = f(x)
    return x


def main(logdir: str) -> None:
    x = jnp.ones((64, 64), jnp.float32)
    step(x).block_until_ready()  # compiles all 40
    with jax.profiler.trace(logdir):
        for i in range(STEPS):
            with jax.profiler.StepTraceAnnotation("train", step_num=i):
                x = step(x)
                x.block_until_ready()


if __name__ == "__main__":
    main(sys.argv[1])
