"""Capture `tests/captures/keras3_input_stall/`: Keras 3 `model.fit` on TensorFlow (CPU) starved by its input.

    python scripts/captures/capture_keras3_input_stall.py LOGDIR

A tiny dense classifier (784 -> 64 -> 10) trained by `model.fit` for one epoch of 12 batches from a `tf.data`
pipeline whose map is slow on purpose: a `tf.py_function` per batch that sleeps 5 ms and normalises the batch with
numpy, run with no `num_parallel_calls` and no `prefetch` (tf.data's injected prefetch turned off too), so every
training step waits in `IteratorGetNext` for the map. Profiled by Keras' own
`keras.callbacks.TensorBoard(log_dir=LOGDIR, profile_batch=(3, 8))`, which wraps each profiled batch in a
`tf.profiler.experimental.Trace("Profiled batch", step_num=batch)`: Keras 3's step marker, which XProf does not take
as a step (Keras 2's `fit` wrapped each step in `Trace("train", step_num=..., _r=1)`). Writes
`LOGDIR/train/plugins/profile/<timestamp>/<host>.xplane.pb` (the callback profiles into its `train` folder). Needs
`tensorflow-cpu` (with Keras 3); the committed capture was made with TensorFlow 2.21.0 and Keras 3.15.1 on a
2-core VM (its host file `vm.xplane.pb`).
"""

from __future__ import annotations

import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

BATCH, FEATURES, HIDDEN, CLASSES, BATCHES = 64, 784, 64, 10, 12
SLEEP_S = 0.005


def slow_transform(x, y):
    time.sleep(SLEEP_S)  # a slow decode / augmentation, on the one tf.data thread that runs the map
    x = x.numpy()
    x = (x - x.mean(axis=1, keepdims=True)) / (x.std(axis=1, keepdims=True) + 1e-6)
    return x.astype(np.float32), y


def dataset() -> tf.data.Dataset:
    rng = np.random.default_rng(0)
    x = rng.random((BATCH * BATCHES, FEATURES), dtype=np.float32)
    y = rng.integers(0, CLASSES, BATCH * BATCHES).astype(np.int32)

    def transform(xb, yb):
        xb, yb = tf.py_function(slow_transform, [xb, yb], [tf.float32, tf.int32])
        return tf.ensure_shape(xb, (None, FEATURES)), tf.ensure_shape(yb, (None,))

    ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(BATCH).map(transform)  # no parallelism, no prefetch
    options = tf.data.Options()
    options.experimental_optimization.inject_prefetch = False
    return ds.with_options(options)


def main(logdir: str) -> None:
    print("tensorflow", tf.__version__, "keras", keras.__version__, flush=True)
    keras.utils.set_random_seed(0)
    model = keras.Sequential([
        keras.Input((FEATURES,)),
        keras.layers.Dense(HIDDEN, activation="relu"),
        keras.layers.Dense(CLASSES),
    ])
    model.compile(optimizer="sgd", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    callback = keras.callbacks.TensorBoard(log_dir=logdir, profile_batch=(3, 8))
    model.fit(dataset(), epochs=1, shuffle=False, callbacks=[callback], verbose=2)
    for root, _, files in os.walk(logdir):
        for name in files:
            print(os.path.join(root, name), os.path.getsize(os.path.join(root, name)))


if __name__ == "__main__":
    main(sys.argv[1])
