"""Capture `tests/captures/jax_prefetch_cpu/`: a JAX training loop on the CPU whose input is prefetched.

    python scripts/captures/capture_jax_prefetch_cpu.py LOGDIR

A small MLP (256 -> 512 -> 512 -> 10, batches of 256) trained by plain SGD with a jitted step on XLA:CPU. A
background thread makes each batch with numpy (the per-sample normalisation an input pipeline would do), puts it on
the device with `jax.device_put` and in a `queue.Queue` four deep, so when a step starts its batch is normally
ready: the step only does `q.get()`, then runs the compiled program and waits for it. Compiled and warmed up before
the capture, then 10 steps marked with `StepTraceAnnotation("train")` under `jax.profiler.trace`. The capture shows
what an expert expects of a prefetched pipeline: no input stall, each step is the XLA:CPU program. Writes
`LOGDIR/plugins/profile/<timestamp>/<host>.xplane.pb`. Needs only `jax` (CPU); the committed capture was made with
JAX 0.10.2 on a 2-core VM (its host file `vm.xplane.pb`).
"""

from __future__ import annotations

import os
import queue
import sys
import threading

import jax
import jax.numpy as jnp
import numpy as np

BATCH, FEATURES, HIDDEN, CLASSES = 256, 256, 512, 10
WARMUP, STEPS, DEPTH = 3, 10, 4


def init(key):
    k = jax.random.split(key, 3)
    return {
        "w1": jax.random.normal(k[0], (FEATURES, HIDDEN)) * 0.05,
        "w2": jax.random.normal(k[1], (HIDDEN, HIDDEN)) * 0.05,
        "w3": jax.random.normal(k[2], (HIDDEN, CLASSES)) * 0.05,
    }


def loss(p, x, y):
    h = jax.nn.relu(x @ p["w1"])
    h = jax.nn.relu(h @ p["w2"])
    logits = h @ p["w3"]
    return -jnp.mean(jnp.sum(jax.nn.log_softmax(logits) * jax.nn.one_hot(y, CLASSES), axis=-1))


@jax.jit
def train_step(p, x, y):
    value, grads = jax.value_and_grad(loss)(p, x, y)
    return jax.tree_util.tree_map(lambda a, b: a - 0.01 * b, p, grads), value


def batch(rng: np.random.Generator):
    x = rng.standard_normal((BATCH, FEATURES), dtype=np.float32)
    x = (x - x.mean(axis=1, keepdims=True)) / (x.std(axis=1, keepdims=True) + 1e-6)
    return x, rng.integers(0, CLASSES, BATCH, dtype=np.int32)


def producer(q: queue.Queue, count: int) -> None:
    rng = np.random.default_rng(0)
    for _ in range(count):
        x, y = batch(rng)
        q.put((jax.device_put(x), jax.device_put(y)))  # on the device before the step asks for it


def main(logdir: str) -> None:
    print("jax", jax.__version__, jax.devices(), flush=True)
    q: queue.Queue = queue.Queue(maxsize=DEPTH)
    thread = threading.Thread(target=producer, args=(q, WARMUP + STEPS), daemon=True)
    thread.start()
    params = init(jax.random.PRNGKey(0))
    for _ in range(WARMUP):  # compiled and warmed up outside the capture
        x, y = q.get()
        params, value = train_step(params, x, y)
    value.block_until_ready()
    while q.qsize() < DEPTH and thread.is_alive():  # let the producer fill the queue before tracing
        threading.Event().wait(0.01)
    with jax.profiler.trace(logdir):
        for step in range(STEPS):
            with jax.profiler.StepTraceAnnotation("train", step_num=step):
                x, y = q.get()
                params, value = train_step(params, x, y)
                value.block_until_ready()
    thread.join()
    print("loss", float(value))
    for root, _, files in os.walk(logdir):
        for name in files:
            print(os.path.join(root, name), os.path.getsize(os.path.join(root, name)))


if __name__ == "__main__":
    main(sys.argv[1])
