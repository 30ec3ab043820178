"""Capture `tests/captures/jax_recompile_midrun/`: a jitted train step recompiled once, mid-run, for a new batch size.

    python scripts/captures/capture_jax_recompile_midrun.py LOGDIR

A jitted MLP step (512 → 1024 → 10, squared error, plain SGD through `jax.grad`) on batches of 256 for steps 0–5 and
of 200 from step 6 on; only the batch of 256 is compiled before the trace, so step 6 traces, lowers and compiles the
step again (a jit cache miss) and every other step runs the compiled program. 14 steps marked with
`StepTraceAnnotation("train")` under `jax.profiler.trace`. Writes `LOGDIR/plugins/profile/<timestamp>/<host>.xplane.pb`.
Needs only `jax` (CPU); the committed capture was made with JAX 0.10.2 on a 2-core VM (its host file `vm.xplane.pb`).
"""

from __future__ import annotations

import sys

import jax
import jax.numpy as jnp
import numpy as np

STEPS, SWITCH = 14, 6


def loss(p, x, y):
    h = jax.nn.relu(x @ p["w1"])
    return jnp.mean((h @ p["w2"] - y) ** 2)


@jax.jit
def train(p, x, y):
    g = jax.grad(loss)(p, x, y)
    return jax.tree_util.tree_map(lambda a, b: a - 1e-3 * b, p, g)


def main(logdir: str) -> None:
    k = jax.random.PRNGKey(0)
    p = {"w1": jax.random.normal(k, (512, 1024)) * 0.02, "w2": jax.random.normal(k, (1024, 10)) * 0.02}
    data = {b: (jnp.asarray(np.random.rand(b, 512), jnp.float32), jnp.asarray(np.random.rand(b, 10), jnp.float32))
            for b in (256, 200)}
    p = train(p, *data[256])  # compiled for 256 only
    jax.block_until_ready(p)
    with jax.profiler.trace(logdir):
        for i in range(STEPS):
            with jax.profiler.StepTraceAnnotation("train", step_num=i):
                p = train(p, *data[256 if i < SWITCH else 200])
                jax.block_until_ready(p)


if __name__ == "__main__":
    main(sys.argv[1])
