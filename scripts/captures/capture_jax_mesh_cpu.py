"""Capture `tests/captures/jax_mesh_cpu/`: a JAX data-parallel step sharded over 4 CPU devices, profiled by
`jax.profiler`.

    XLA_FLAGS=--xla_force_host_platform_device_count=4 python scripts/captures/capture_jax_mesh_cpu.py LOGDIR

A linear model's gradient step under `shard_map` over a one-axis mesh (`data`, 4 devices): each device takes its
quarter of the batch, and the gradients and loss are summed over the mesh with `lax.psum`, which XLA compiles to
all-reduces whose replica groups it writes as a mesh (`replica_groups=mesh['data'=4] {'data'}`, carried in the
HLO proto's `mesh_axes_replica_group_list`). Compiled and warmed up before the capture, then 4 steps marked with
`StepTraceAnnotation("train")`, the Python tracer off. Writes `LOGDIR/plugins/profile/<timestamp>/<host>.xplane.pb`.
The committed capture was made with JAX 0.12.0.1 on CPU (its run folder renamed `jax_mesh_cpu`, its host file
`vm.xplane.pb`), and XProf's graph viewer text beside it with XProf 2.24.2 (see the capture's README).
"""

from __future__ import annotations

import os
import sys

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=4")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import Mesh, NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

BATCH, FEATURES = 64, 32
STEPS = 4


def main(logdir: str) -> None:
    devices = jax.devices()
    assert len(devices) >= 4, f"4 devices wanted, {len(devices)} found: set XLA_FLAGS as above"
    mesh = Mesh(np.array(devices[:4]), ("data",))

    def local_step(w, x, y):
        def loss(w):
            return jnp.sum((x @ w - y) ** 2)

        value, grad = jax.value_and_grad(loss)(w)
        # Summed over the mesh's `data` axis: an all-reduce over the mesh.
        return w - 1e-4 * jax.lax.psum(grad, "data"), jax.lax.psum(value, "data")

    step = jax.jit(jax.shard_map(local_step, mesh=mesh, in_specs=(P(), P("data"), P("data")),
                                 out_specs=(P(), P())))
    rng = np.random.default_rng(0)
    data = NamedSharding(mesh, P("data"))
    w = jnp.zeros((FEATURES, 1), jnp.float32)
    x = jax.device_put(rng.random((BATCH, FEATURES), dtype=np.float32), data)
    y = jax.device_put(rng.random((BATCH, 1), dtype=np.float32), data)
    w, value = step(w, x, y)  # compile and warm up outside the capture
    value.block_until_ready()
    # The Python tracer off and the host tracer at its first level: the capture stays small enough to commit
    # (≈ 370 KB with the defaults), and what it is for, the modules, is all there.
    options = jax.profiler.ProfileOptions()
    options.python_tracer_level = 0
    options.host_tracer_level = 1
    jax.profiler.start_trace(logdir, profiler_options=options)
    for n in range(STEPS):
        with jax.profiler.StepTraceAnnotation("train", step_num=n):
            w, value = step(w, x, y)
            value.block_until_ready()
    jax.profiler.stop_trace()
    print(f"loss {float(value):.4f}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "logs")
