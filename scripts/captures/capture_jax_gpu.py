"""Capture `tests/captures/jax_gpu_h200/`: a JAX training run on one NVIDIA GPU, profiled by `jax.profiler`.

    python scripts/captures/capture_jax_gpu.py LOGDIR

A small CNN (two cuDNN convolutions with max pooling) and an MLP head, trained on synthetic images that the host
makes with numpy each step (per-image normalisation and flips: a slow input pipeline, as a heavy `tf.data` map
would be), compiled and warmed up before the capture, then 12 steps marked with `StepTraceAnnotation("train")`.
Writes `LOGDIR/plugins/profile/<timestamp>/<host>.xplane.pb`. Needs `jax[cuda]` and a GPU; the committed capture
was made with JAX 0.11.2 on an H200 (its run folder renamed `jax_gpu_h200`, its host file `vm.xplane.pb`), and
XProf's outputs beside it with the shared captures' `run_oracle.py` (XProf 2.24.2).
"""

from __future__ import annotations

import os
import sys

import jax
import jax.numpy as jnp
import numpy as np

BATCH, HEIGHT, WIDTH, CHANNELS, CLASSES = 128, 64, 64, 3, 10
STEPS = 12


def init(key):
    k = jax.random.split(key, 6)
    return {
        "c1": jax.random.normal(k[0], (3, 3, CHANNELS, 32)) * 0.1,
        "c2": jax.random.normal(k[1], (3, 3, 32, 64)) * 0.05,
        "w1": jax.random.normal(k[2], (16 * 16 * 64, 1024)) * 0.01,
        "w2": jax.random.normal(k[3], (1024, 1024)) * 0.02,
        "w3": jax.random.normal(k[4], (1024, CLASSES)) * 0.02,
    }


def forward(p, x):
    for kernel in ("c1", "c2"):
        x = jax.lax.conv_general_dilated(x, p[kernel], (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
        x = jax.nn.relu(x)
        x = jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
    x = x.reshape(x.shape[0], -1)
    x = jax.nn.gelu(x.astype(jnp.bfloat16) @ p["w1"].astype(jnp.bfloat16)).astype(jnp.float32)
    x = jax.nn.gelu(x @ p["w2"])
    return x @ p["w3"]


def loss(p, x, y):
    logits = forward(p, x)
    return -jnp.mean(jnp.sum(jax.nn.log_softmax(logits) * jax.nn.one_hot(y, CLASSES), axis=-1))


@jax.jit
def train_step(p, x, y):
    value, grads = jax.value_and_grad(loss)(p, x, y)
    return jax.tree_util.tree_map(lambda a, b: a - 0.01 * b, p, grads), value


def batch(rng: np.random.Generator):
    images = rng.random((BATCH, HEIGHT, WIDTH, CHANNELS), dtype=np.float32)
    images = (images - images.mean(axis=(1, 2, 3), keepdims=True)) / (images.std(axis=(1, 2, 3), keepdims=True)
                                                                     + 1e-6)
    flip = rng.random(BATCH) < 0.5
    images[flip] = images[flip, :, ::-1]
    return images, rng.integers(0, CLASSES, BATCH)


def main(logdir: str) -> None:
    print("jax", jax.__version__, jax.devices(), flush=True)
    rng = np.random.default_rng(0)
    params = init(jax.random.PRNGKey(0))
    for _ in range(3):  # compiled and warmed up outside the capture
        x, y = batch(rng)
        params, value = train_step(params, jnp.asarray(x), jnp.asarray(y))
    value.block_until_ready()
    jax.profiler.start_trace(logdir)
    for step in range(STEPS):
        with jax.profiler.StepTraceAnnotation("train", step_num=step):
            x, y = batch(rng)
            params, value = train_step(params, jnp.asarray(x), jnp.asarray(y))
            value.block_until_ready()
    jax.profiler.stop_trace()
    for root, _, files in os.walk(logdir):
        for name in files:
            print(os.path.join(root, name), os.path.getsize(os.path.join(root, name)))


if __name__ == "__main__":
    main(sys.argv[1])
