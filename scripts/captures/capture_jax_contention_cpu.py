"""Capture `tests/captures/jax_contention_cpu/`: a JAX training loop on the CPU, a few steps slowed by other processes.

    python scripts/captures/capture_jax_contention_cpu.py LOGDIR

The MLP of `capture_jax_prefetch_cpu.py` (two hidden layers of 512, plain SGD, a jitted step on XLA:CPU) on batches
of 512, so that a step takes tens of milliseconds and the slowdown stands out of a shared machine's noise, with
synchronous loading: each step makes its batch with numpy and `jax.device_put` itself, then runs the compiled program
and waits for it. Compiled and warmed up before the capture, then 16 steps marked with `StepTraceAnnotation("train")`
under `jax.profiler.trace`. Two CPU-burning processes (pure Python spin loops, forked before JAX starts its runtime
and waiting on an event) spin during steps 6 to 9 only: they start just before step 6 begins and stop when step 10
begins (each also stops by itself after `BURN_LIMIT_S` whatever happens, and is joined, or terminated, before the
script ends). Those steps run the same executable on the same input sizes, with no compilation and no input change,
only slower: what contention for the host's cores looks like from inside the profile (the burners are other
processes, so the capture does not show them). Writes `LOGDIR/plugins/profile/<timestamp>/<host>.xplane.pb`. Needs
only `jax` (CPU); the committed capture was made with JAX 0.10.2 on a 2-core VM (its host file `vm.xplane.pb`).
"""

from __future__ import annotations

import multiprocessing as mp
import os
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

BATCH, FEATURES, HIDDEN, CLASSES = 512, 256, 512, 10
WARMUP, STEPS = 3, 16
BURN_FIRST, BURN_LAST, BURNERS, BURN_LIMIT_S = 6, 9, 2, 5.0


def burn(ready, go, stop) -> None:
    """Spins one core from `go` until `stop`, or for at most BURN_LIMIT_S."""
    ready.set()
    if not go.wait(60.0):
        return
    deadline = time.monotonic() + BURN_LIMIT_S
    x = 0
    while not stop.is_set() and time.monotonic() < deadline:
        for _ in range(20000):
            x += 1


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
    return jax.device_put(x), jax.device_put(rng.integers(0, CLASSES, BATCH, dtype=np.int32))


def main(logdir: str) -> None:
    # Forked before JAX starts its runtime and threads (so the fork is safe); a forked child ends with `os._exit`,
    # at once, where a spawned one would spend a while tearing down the modules it imported.
    ctx = mp.get_context("fork")
    go, stop = ctx.Event(), ctx.Event()
    readies = [ctx.Event() for _ in range(BURNERS)]
    burners = [ctx.Process(target=burn, args=(r, go, stop), daemon=True) for r in readies]
    for proc in burners:
        proc.start()
    try:
        print("jax", jax.__version__, jax.devices(), flush=True)
        rng = np.random.default_rng(0)
        params = init(jax.random.PRNGKey(0))
        for _ in range(WARMUP):  # compiled and warmed up outside the capture
            params, value = train_step(params, *batch(rng))
        value.block_until_ready()
        for r in readies:
            r.wait(60.0)
        with jax.profiler.trace(logdir):
            for step in range(STEPS):
                if step == BURN_FIRST:
                    go.set()
                    time.sleep(0.005)  # let the burners get going before the step starts
                if step == BURN_LAST + 1:
                    stop.set()
                    time.sleep(0.005)
                with jax.profiler.StepTraceAnnotation("train", step_num=step):
                    params, value = train_step(params, *batch(rng))
                    value.block_until_ready()
    finally:
        go.set()
        stop.set()
        for proc in burners:
            proc.join(BURN_LIMIT_S + 5.0)
            if proc.is_alive():
                proc.terminate()
                proc.join()
    print("loss", float(value), "burners' exit codes", [proc.exitcode for proc in burners])
    for root, _, files in os.walk(logdir):
        for name in files:
            print(os.path.join(root, name), os.path.getsize(os.path.join(root, name)))


if __name__ == "__main__":
    main(sys.argv[1])
