#!/usr/bin/env python3
"""A JAX training loop with JAX's own profiler server on, for capturing through TSL.

See docs/tensorflow-interop.md.

Each step is a `jax.profiler.StepTraceAnnotation("train", step_num=N)` (the step root XProf and
profctl's breakdown read: `_r`=1 with `step_num`), and inside it a host-side input step
("next_batch": a batch made with NumPy and put on the device; a name the breakdown counts as
waiting for input, analysis/op_classify.h) and one jitted training step (forward, backward and an
SGD update of a small MLP). Nothing here knows about profctl:

    python3 examples/jax_steps.py --port=9999 --steps=0 &
    profctl capture --workers=grpc://localhost:9999 --duration=2000     # JAX's server directly
    profctl-agent --collectors=tsl --tsl-local=localhost:9999 &          # or through an agent
    profctl capture --workers=localhost:6009 --duration=2000

--steps=0 runs until SIGTERM/SIGINT; --progress=N prints 'jax_steps: step N' every N steps.
"""
import argparse
import signal
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=9999,
                        help="the port of jax.profiler.start_server")
    parser.add_argument("--steps", type=int, default=500, help="0: until SIGTERM/SIGINT")
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--width", type=int, default=2048)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--progress", type=int, default=0,
                        help="print 'jax_steps: step N' every N steps (0: never)")
    args = parser.parse_args()

    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))

    jax.profiler.start_server(args.port)
    print(f"jax_steps: profiler server on port {args.port}, devices {jax.devices()}", flush=True)

    key = jax.random.PRNGKey(0)
    params = []
    for _ in range(args.layers):
        key, sub = jax.random.split(key)
        params.append((jax.random.normal(sub, (args.width, args.width), jnp.float32) /
                       np.sqrt(args.width), jnp.zeros((args.width,), jnp.float32)))

    def loss_fn(params, x, y):
        h = x
        for w, b in params:
            h = jax.nn.gelu(h @ w + b)
        return jnp.mean((h - y) ** 2)

    @jax.jit
    def train_step(params, x, y):
        loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
        return jax.tree_util.tree_map(lambda p, g: p - 1e-3 * g, params, grads), loss

    rng = np.random.default_rng(0)
    step = 0
    loss = None
    t0 = time.perf_counter()
    while not stop and (args.steps <= 0 or step < args.steps):
        with jax.profiler.StepTraceAnnotation("train", step_num=step):
            with jax.profiler.TraceAnnotation("next_batch"):
                x = jax.device_put(rng.standard_normal((args.batch, args.width), np.float32))
                y = jax.device_put(rng.standard_normal((args.batch, args.width), np.float32))
            params, loss = train_step(params, x, y)
            loss.block_until_ready()  # as a real loop's logging does
        step += 1
        if args.progress > 0 and step % args.progress == 0:
            print(f"jax_steps: step {step}", flush=True)
    elapsed = time.perf_counter() - t0
    print(f"jax_steps: {step} steps, mean step {1e3 * elapsed / max(step, 1):.3f} ms, "
          f"loss {float(loss) if loss is not None else float('nan'):.4f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
