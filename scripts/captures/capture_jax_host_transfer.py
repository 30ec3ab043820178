"""Capture `tests/captures/jax_host_transfer/`: each step makes a 64 MB batch with NumPy and `jax.device_put`s it.

    python scripts/captures/capture_jax_host_transfer.py LOGDIR

Each of 10 steps builds `np.random.rand(4096, 4096).astype(np.float32)` on the host (128 MB of float64 made first),
puts it on the CPU device with `jax.device_put` (PJRT's CPU client copies it into device buffers: its `H2D Dispatch`
events), then runs a jitted `jnp.sum` compiled before the trace. Steps are marked with `StepTraceAnnotation("train")`
under `jax.profiler.trace`; JAX's Python tracer is on (its default), and records `astype` but not NumPy's random
generator (native code it does not see). What the profile shows: the step is the batch's making and its copy, not
the program. Writes `LOGDIR/plugins/profile/<timestamp>/<host>.xplane.pb`. Needs only `jax` (CPU); the committed
capture was made with JAX 0.10.2 on a 2-core VM (its host file `vm.xplane.pb`).
"""

from __future__ import annotations

import sys

import jax
import jax.numpy as jnp
import numpy as np

STEPS, SIDE = 10, 4096

reduce_sum = jax.jit(lambda x: jnp.sum(x))


def main(logdir: str) -> None:
    reduce_sum(jnp.ones((SIDE, SIDE), jnp.float32)).block_until_ready()
    with jax.profiler.trace(logdir):
        for i in range(STEPS):
            with jax.profiler.StepTraceAnnotation("train", step_num=i):
                batch = np.random.rand(SIDE, SIDE).astype(np.float32)
                reduce_sum(jax.device_put(batch)).block_until_ready()


if __name__ == "__main__":
    main(sys.argv[1])
