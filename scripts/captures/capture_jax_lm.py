"""Capture `tests/captures/jax_lm_h200/`: a JAX transformer language model training on one NVIDIA GPU.

    python scripts/captures/capture_jax_lm.py LOGDIR

Four pre-norm transformer blocks (bf16 matmuls, causal softmax attention, GELU MLP) run under `lax.scan`, an XLA
while loop; optax's Adam; token batches made on the host with numpy. Compiled and warmed up before the capture,
then 10 steps marked with `StepTraceAnnotation("train")`. Needs `jax[cuda]`, `optax` and a GPU; the committed
capture was made with JAX 0.11.2 on an H200 (its run folder renamed `jax_lm_h200`, its host file gzipped as
`vm.xplane.pb.gz`), and XProf's outputs beside it with the shared captures' `run_oracle.py` (XProf 2.24.2).
"""
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np
import optax

print("jax", jax.__version__, jax.devices(), flush=True)
VOCAB, SEQ, BATCH, DIM, HEADS, LAYERS = 8192, 512, 16, 512, 8, 4


def init(key):
    k = jax.random.split(key, 8)
    s = 0.02
    return {
        "embed": jax.random.normal(k[0], (VOCAB, DIM)) * s,
        "layers": {
            "qkv": jax.random.normal(k[1], (LAYERS, DIM, 3 * DIM)) * s,
            "out": jax.random.normal(k[2], (LAYERS, DIM, DIM)) * s,
            "up": jax.random.normal(k[3], (LAYERS, DIM, 4 * DIM)) * s,
            "down": jax.random.normal(k[4], (LAYERS, 4 * DIM, DIM)) * s,
            "ln1": jnp.ones((LAYERS, DIM)), "ln2": jnp.ones((LAYERS, DIM)),
        },
        "head": jax.random.normal(k[5], (DIM, VOCAB)) * s,
    }


def layer_norm(x, g):
    m = x.mean(-1, keepdims=True)
    v = ((x - m) ** 2).mean(-1, keepdims=True)
    return (x - m) * jax.lax.rsqrt(v + 1e-5) * g


def block(x, p):
    h = layer_norm(x, p["ln1"]).astype(jnp.bfloat16)
    q, k, v = jnp.split(h @ p["qkv"].astype(jnp.bfloat16), 3, axis=-1)
    q, k, v = (t.reshape(BATCH, SEQ, HEADS, DIM // HEADS) for t in (q, k, v))
    att = jnp.einsum("bqhd,bkhd->bhqk", q, k) / np.sqrt(DIM // HEADS)
    mask = jnp.tril(jnp.ones((SEQ, SEQ), bool))
    att = jax.nn.softmax(jnp.where(mask, att.astype(jnp.float32), -1e9), axis=-1).astype(jnp.bfloat16)
    o = jnp.einsum("bhqk,bkhd->bqhd", att, v).reshape(BATCH, SEQ, DIM)
    x = x + (o @ p["out"].astype(jnp.bfloat16)).astype(jnp.float32)
    h = layer_norm(x, p["ln2"]).astype(jnp.bfloat16)
    h = jax.nn.gelu(h @ p["up"].astype(jnp.bfloat16))
    return x + (h @ p["down"].astype(jnp.bfloat16)).astype(jnp.float32), None


def loss(params, tokens):
    x = params["embed"][tokens[:, :-1]]
    x, _ = jax.lax.scan(block, x, params["layers"])
    logits = (x.astype(jnp.bfloat16) @ params["head"].astype(jnp.bfloat16)).astype(jnp.float32)
    return optax.softmax_cross_entropy_with_integer_labels(logits, tokens[:, 1:]).mean()


opt = optax.adam(1e-3)


@jax.jit
def train_step(params, state, tokens):
    value, grads = jax.value_and_grad(loss)(params, tokens)
    updates, state = opt.update(grads, state, params)
    return optax.apply_updates(params, updates), state, value


rng = np.random.default_rng(0)
params = init(jax.random.PRNGKey(0))
state = opt.init(params)
for _ in range(3):
    params, state, value = train_step(params, state, jnp.asarray(rng.integers(0, VOCAB, (BATCH, SEQ + 1))))
value.block_until_ready()
out = sys.argv[1]
jax.profiler.start_trace(out)
for step in range(10):
    with jax.profiler.StepTraceAnnotation("train", step_num=step):
        tokens = rng.integers(0, VOCAB, (BATCH, SEQ + 1))
        params, state, value = train_step(params, state, jnp.asarray(tokens))
        value.block_until_ready()
jax.profiler.stop_trace()
print("loss", float(value), flush=True)
for root, _, files in os.walk(out):
    for f in files:
        print(os.path.join(root, f), os.path.getsize(os.path.join(root, f)))
