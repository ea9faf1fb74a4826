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

For measuring overhead (scripts/gpu_verify.py, docs/gpu-verification.md): --steps=0 runs until
SIGTERM/SIGINT; SIGUSR1 records the next --kineto-steps steps with torch.profiler; --progress=N
prints every N steps; --step-log=FILE writes each measured step's wall-clock start and end (ns,
CLOCK_REALTIME, the clock profctl's capture window is on) and whether torch.profiler was on.
"""
import argparse
import json
import os
import signal
import sys
import time

import torch


class Signals:
    """SIGUSR1: record the next --kineto-steps steps with torch.profiler. SIGTERM/SIGINT: stop
    after the current step (then the step log is written)."""

    def __init__(self):
        self.kineto_requested = False
        self.stop = False
        signal.signal(signal.SIGUSR1, self._kineto)
        signal.signal(signal.SIGTERM, self._stop)
        signal.signal(signal.SIGINT, self._stop)

    def _kineto(self, *_):
        self.kineto_requested = True

    def _stop(self, *_):
        self.stop = True


def write_atomically(path, data):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(data, f)
    os.replace(tmp, path)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=500,
                        help="measured steps after the warm-up; 0: until SIGTERM/SIGINT")
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--width", type=int, default=4096)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--kineto-window", default="",
                        help="START:COUNT: record those steps with torch.profiler")
    parser.add_argument("--kineto-steps", type=int, default=100,
                        help="steps a SIGUSR1-started torch.profiler window records")
    parser.add_argument("--kineto-trace", default="",
                        help="write the torch.profiler window's trace here (export_chrome_trace; "
                             "a .gz name is compressed), after the window, outside the timed steps")
    parser.add_argument("--progress", type=int, default=0,
                        help="print 'pytorch_steps: step N' every N steps (0: never)")
    parser.add_argument("--step-log", default="",
                        help="write every step's wall-clock start and end (ns) here as JSON")
    parser.add_argument("--allreduce", action="store_true",
                        help="all-reduce the gradients over torch.distributed's NCCL backend "
                             "every step (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT as torchrun "
                             "sets them; LOCAL_RANK picks the GPU): NCCL collectives for the "
                             "flight recorder's launch check")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("pytorch_steps: no CUDA device")

    device = torch.device("cuda")
    dist = None
    if args.allreduce:
        import torch.distributed as dist  # noqa: PLC0415 (only with --allreduce)
        local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
        dist.init_process_group("nccl")
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
    signals = Signals()
    log = []  # [step, start wall ns, end wall ns, "kineto" or ""]
    kineto_costs_ms = []  # torch.profiler's own enter and exit, outside the timed steps

    times = []
    step = 0
    loss_value = float("nan")
    while not signals.stop and (args.steps <= 0 or step < args.warmup + args.steps):
        if signals.kineto_requested and profiler is None:
            signals.kineto_requested = False
            kineto_start, kineto_count = step, args.kineto_steps
        if step == kineto_start:
            t = time.perf_counter()
            # A schedule, so that step() marks each step (ProfilerStep#N), as users' loops do.
            profiler = torch.profiler.profile(
                activities=[torch.profiler.ProfilerActivity.CPU,
                            torch.profiler.ProfilerActivity.CUDA],
                schedule=torch.profiler.schedule(wait=0, warmup=0, active=kineto_count,
                                                 repeat=1))
            profiler.__enter__()
            kineto_costs_ms.append(1e3 * (time.perf_counter() - t))
        wall_start = time.time_ns()
        start = time.perf_counter()
        torch.cuda.nvtx.range_push(f"train_step {step}")
        with torch.cuda.nvtx.range("data"):
            x = host_x.to(device, non_blocking=True)
            y = host_y.to(device, non_blocking=True)
        with torch.cuda.nvtx.range("forward_backward"):
            loss = torch.nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
        if dist is not None:
            with torch.cuda.nvtx.range("allreduce"):
                for p in model.parameters():
                    dist.all_reduce(p.grad)
        with torch.cuda.nvtx.range("optimizer"):
            optimizer.step()
        loss_value = loss.item()  # synchronizes, as a real loop's logging does
        torch.cuda.nvtx.range_pop()
        if profiler is not None:
            profiler.step()
        elapsed = time.perf_counter() - start
        in_kineto = profiler is not None
        if step >= args.warmup:
            times.append(elapsed)
            log.append([step, wall_start, wall_start + int(elapsed * 1e9),
                        "kineto" if in_kineto else ""])
        if profiler is not None and step == kineto_start + kineto_count - 1:
            t = time.perf_counter()
            profiler.__exit__(None, None, None)
            kineto_costs_ms.append(1e3 * (time.perf_counter() - t))
            if args.kineto_trace:
                profiler.export_chrome_trace(args.kineto_trace)
            profiler = None
            print(f"pytorch_steps: kineto window steps {kineto_start}..{step} done", flush=True)
        step += 1
        if args.progress > 0 and step % args.progress == 0:
            print(f"pytorch_steps: step {step}", flush=True)
    if profiler is not None:
        profiler.__exit__(None, None, None)
    if dist is not None:
        dist.destroy_process_group()
    mean_ms = 1e3 * sum(times) / max(len(times), 1)
    print(f"pytorch_steps: {len(times)} steps, mean step {mean_ms:.3f} ms, loss {loss_value:.4f}",
          flush=True)
    if args.step_log:
        write_atomically(args.step_log, {"warmup": args.warmup, "steps": log,
                                         "kineto_enter_exit_ms": kineto_costs_ms})
    return 0


if __name__ == "__main__":
    sys.exit(main())
