#!/usr/bin/env python3
"""A PyTorch training loop with NVTX step ranges, for trying profctl's GPU tracing (docs/cupti.md).

Each step is a `torch.cuda.nvtx` range named "train_step <n>" (the breakdown's default step
pattern), so a capture of the host shows steps, and inside them the host-to-device copy, the
forward/backward kernels and the optimizer. Nothing here knows about profctl: run it under
injection,

    CUDA_INJECTION64_PATH=/path/to/libprofctl_inject.so \\
    NVTX_INJECTION64_PATH=/path/to/libprofctl_inject.so \\
    python3 examples/pytorch_steps.py --steps 2000

then `profctl capture` the agent's host. With --kineto-window=START:COUNT it records steps
START..START+COUNT-1 with torch.profiler (CUDA activities) instead, to compare overheads; profctl
then reports "GPU tracing unavailable ... held by another CUPTI subscriber" for that window.
It prints the mean step time of the measured steps at the end.
"""
import argparse
import time

import torch


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--width", type=int, default=4096)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--kineto-window", default="",
                        help="START:COUNT: record those steps with torch.profiler")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("pytorch_steps: no CUDA device")

    device = torch.device("cuda")
    torch.manual_seed(0)
    layers = []
    for _ in range(args.layers):
        layers += [torch.nn.Linear(args.width, args.width), torch.nn.GELU()]
    model = torch.nn.Sequential(*layers).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-4)
    host_x = torch.randn(args.batch, args.width).pin_memory()
    host_y = torch.randn(args.batch, args.width).pin_memory()

    kineto_start, kineto_count = -1, 0
    if args.kineto_window:
        kineto_start, kineto_count = (int(v) for v in args.kineto_window.split(":"))
    profiler = None

    times = []
    for step in range(args.warmup + args.steps):
        if step == kineto_start:
            profiler = torch.profiler.profile(
                activities=[torch.profiler.ProfilerActivity.CPU,
                            torch.profiler.ProfilerActivity.CUDA])
            profiler.__enter__()
        start = time.perf_counter()
        torch.cuda.nvtx.range_push(f"train_step {step}")
        with torch.cuda.nvtx.range("data"):
            x = host_x.to(device, non_blocking=True)
            y = host_y.to(device, non_blocking=True)
        with torch.cuda.nvtx.range("forward_backward"):
            loss = torch.nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
        with torch.cuda.nvtx.range("optimizer"):
            optimizer.step()
        loss_value = loss.item()  # synchronizes, as a real loop's logging does
        torch.cuda.nvtx.range_pop()
        if step >= args.warmup:
            times.append(time.perf_counter() - start)
        if profiler is not None and step == kineto_start + kineto_count - 1:
            profiler.__exit__(None, None, None)
            profiler = None
    mean_ms = 1e3 * sum(times) / max(len(times), 1)
    print(f"pytorch_steps: {len(times)} steps, mean step {mean_ms:.3f} ms, loss {loss_value:.4f}")


if __name__ == "__main__":
    main()
