"""Capture `tests/captures/tf_pyfunc_input/`: a TF loop whose tf.data map runs a slow `tf.py_function` over batches.

    python scripts/captures/capture_tf_pyfunc_input.py LOGDIR

The pipeline is `from_tensor_slices(10240×128).batch(256).repeat().map(py_function(slow), num_parallel_calls=2)
.prefetch(1)`: the map runs over whole batches, two calls at a time, and `slow` spends about 5 ms of Python and NumPy
per batch (a busy loop of `np.tanh`), holding the GIL while it computes. The step is a `tf.function` training one
Dense(10) layer with SGD, well under a millisecond. 3 steps run before the profiler starts; 15 steps are marked with
`tf.profiler.experimental.Trace('train', step_num=i, _r=1)`. What the profile shows: each step waits for its batch
(IteratorGetNext) while the map's Python function runs. Writes `LOGDIR/plugins/profile/<timestamp>/<host>.xplane.pb`.
Needs `tensorflow-cpu`; the committed capture was made with TensorFlow 2.21.0 on a 2-core VM (`vm.xplane.pb`).
"""

from __future__ import annotations

import sys
import time

import numpy as np
import tensorflow as tf

STEPS, WARMUP = 15, 3


def slow(a):
    t0 = time.perf_counter()
    a = a.numpy()
    while time.perf_counter() - t0 < 0.005:
        a = np.tanh(a) * 1.0001
    return a.astype(np.float32)


def main(logdir: str) -> None:
    x = np.random.rand(256 * 40, 128).astype(np.float32)
    ds = (tf.data.Dataset.from_tensor_slices(x).batch(256).repeat()
          .map(lambda a: tf.ensure_shape(tf.py_function(slow, [a], tf.float32), (256, 128)), num_parallel_calls=2)
          .prefetch(1))
    dense = tf.keras.layers.Dense(10)
    opt = tf.keras.optimizers.SGD()

    @tf.function
    def step(a):
        with tf.GradientTape() as tape:
            value = tf.reduce_mean(dense(a) ** 2)
        opt.apply_gradients(zip(tape.gradient(value, dense.trainable_variables), dense.trainable_variables))
        return value

    batches = iter(ds)
    for _ in range(WARMUP):
        step(next(batches))
    tf.profiler.experimental.start(logdir)
    for i in range(STEPS):
        with tf.profiler.experimental.Trace("train", step_num=i, _r=1):
            step(next(batches)).numpy()
    tf.profiler.experimental.stop()


if __name__ == "__main__":
    main(sys.argv[1])
