#!/usr/bin/env python3
"""The real-GPU check in one command: capture real CUDA processes under
libprofctl_inject.so, check what arrived, and measure the overhead (docs/gpu-verification.md).

  scripts/gpu_verify.py --bundle=PROFCTL_BUNDLE(.tar.gz|dir) --out=DIR
                        [--phases=cuda,pytorch,overhead,recorder,jax,switches] [--rounds=2]
                        [--warmup-steps=1000] [--idle-steps=300] [--capture-ms=3000]
                        [--kineto-steps=300] [--overhead-kinds=none,loaded,kineto]
                        [--overhead-env=NAME[@loaded|@kineto]:VAR=VAL,...]...
                        [--cuda-steps=BIN] [--settle-s=10] [--phase-capture-ms=2000]
                        [--recorder-rounds=2] [--recorder-bound-pct=2] [--recorder-nccl-ranks=2]
                        [--jax-capture-ms=1000] [--pin=auto|none|CPUS] [--dry-run]

Run it from the repository root on a machine with an NVIDIA GPU and the CUDA toolkit (nvcc for
examples/cuda_steps, PyTorch for examples/pytorch_steps.py); profctl itself comes from the bundle
(deploy/bundle/make_bundle.sh), since a GPU image has no gRPC; the rest comes from this checkout
(tests/gpu_capture_check.py, tests/py/profctl_testlib.py, examples/). Only the Python standard
library.

Phases:
  cuda      build examples/cuda_steps (cmake + nvcc; or take --cuda-steps), run it under
            injection beside an agent with --collectors=cupti, wait until it registers and then
            --settle-s, `profctl capture` --phase-capture-ms (2 s), and run
            tests/gpu_capture_check.py on the session
            (kernels, memcpys, NVTX steps with sane times, a breakdown that adds up).
  pytorch   the same with examples/pytorch_steps.py.
  overhead  the same PyTorch loop, --rounds rounds of one process per --overhead-kinds kind
            (none: no injection; loaded: under injection beside the agent; kineto: no
            injection, torch.profiler; nvtx_only / cuda_only and --overhead-env kinds to
            attribute a cost), in an order rotated each round. Every process takes the same
            schedule: --warmup-steps (never compared), --idle-steps, its middle part (loaded: a
            --capture-ms profctl capture and the second after it; kineto: --kineto-steps under
            torch.profiler, CPU + CUDA; the others: as long as a capture takes), then
            --idle-steps more. Every step's wall-clock start and end come from the loop's
            --step-log; a step counts as "capturing" when it overlaps the capture, from the
            requested start to the agent's stop (session.json). Rows: each condition against the
            untraced process's steps of the same indices (same age); inside one process, its
            capture or torch.profiler window and its idle steps after it against its own steps
            before, net of the untraced process's drift (difference in differences); and the
            kineto process's steps before its window against the untraced ones (A/A: the noise
            between two processes). Verdicts on the medians over rounds: capturing < 3 % and no
            worse than torch.profiler, nothing left after a capture (< 0.5 %), all inside one
            process; idle < 0.5 % between processes, "cannot tell" while the A/A row is wider.
  recorder  the flight recorder's always-on level (docs/cupti.md): the same PyTorch loop under
            injection, --recorder-rounds times, alternating an agent without --flight-recorder
            ("off") and one with --flight-recorder=30 ("on"), idle steps after --warmup-steps
            only (no capture while timed);
            at the end of each "on" run a `profctl capture --last=5s` (its session kept, and
            whether it held steps). Median step time on vs off; passes when "on" is within
            --recorder-bound-pct (2 %) of "off", "cannot tell" when the "off" runs' own medians
            differ by that much (two processes differ by more than the bound). "On" includes the
            light level's CUPTI launch callback on every kernel launch of the loop. Then the
            collective launches: the loop with --allreduce (torch.distributed NCCL) as
            --recorder-nccl-ranks ranks (2; at most one per GPU; 0 skips it) under injection
            beside an agent with the recorder, a `profctl capture --last=5s`, and its pod trace
            must hold the ranks' NCCL launches: "nccl<Op>" events with a kernel_name on the host
            plane (docs/cupti.md), from every rank. With one GPU (one rank) NCCL may launch no
            kernel: reported, not required. Not one of the default phases.
  switches  the library's diagnosis switches (SWITCH_RUNS: PROFCTL_INJECT_DETACH=1, CUPTI
            detached after every window; PROFCTL_INJECT_WINDOW=launches, a window recording the
            launch, copy and synchronisation calls one by one; PROFCTL_INJECT_NVTX_STEPS=1 with
            the detach, the step signal from the library's own NVTX handlers), each on its own
            PyTorch loop under injection, captured twice --phase-capture-ms SWITCH_GAP_S (3) s
            apart, each capture checked by tests/gpu_capture_check.py and reported (the second
            "detach" and "hooks" ones run on a CUPTI attached again). Not a default phase.
  jax       examples/jax_steps.py (JAX's own profiler server, StepTraceAnnotation steps),
            captured by `profctl capture --workers=grpc://127.0.0.1:PORT` and through
            `profctl-agent --collectors=tsl --tsl-local=127.0.0.1:PORT`, --jax-capture-ms each;
            each session must be whole, with GPU events and at least 3 steps. Not one of the
            default phases.

--dry-run prints the plan (each phase's runs, agents and captures) and exits 0 without a GPU,
bundle or process: a check that the flags parse and the phases plan.

Writes DIR/gpu_verification.json (every number) and DIR/gpu_verification.md (the tables for
docs/gpu-verification.md), and keeps each phase's logs and sessions under DIR. Exit 0 when every
phase ran and its checks held (the overhead targets are reported, not enforced: a noisy machine
should not read as a broken tracer); 1 when a phase failed; 77 when there is no GPU.
"""

import argparse
import glob
import gzip
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tarfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
# The tests' process helpers, from the same checkout (it travels with this script: the bundle
# holds only the binaries).
sys.path.insert(0, os.path.join(ROOT, "tests", "py"))
from profctl_testlib import Failure, Processes, hold  # noqa: E402

HOST = "gpu-host"


def log(msg):
    print(f"gpu_verify: {msg}", flush=True)


def write_atomically(path, text):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


# ---------------------------------------------------------------------------------------------
# Step logs -> conditions -> numbers. Pure functions (tests/gpu_verify_test.py).

TAIL_NS = 1_000_000_000


def classify(step_log, windows, tail_ns=TAIL_NS):
    """Splits a --step-log's steps by condition. `windows`: [(start_ns, stop_ns)] of profctl
    captures during the run, from the requested start (when the processes enable CUPTI) to the
    agent's stop. A step that overlaps a window is "capturing" (its enable and disable cost is
    the capture's); one within `tail_ns` after a window's stop is "after_capture" (the flush
    and the batches sent to the agent); a torch.profiler step is "kineto"; an untagged step
    after the first torch.profiler step is "after_kineto" (whatever state it left); the rest
    are "idle"."""
    out = {"idle": [], "capturing": [], "after_capture": [], "kineto": [], "after_kineto": []}
    for _index, cond, ms in classify_steps(step_log, windows, tail_ns):
        out[cond].append(ms)
    return out


def by_index(step_log, windows, tail_ns=TAIL_NS):
    """classify() keeping each step's index: condition -> {step index: ms}."""
    out = {}
    for index, cond, ms in classify_steps(step_log, windows, tail_ns):
        out.setdefault(cond, {})[index] = ms
    return out


def classify_steps(step_log, windows, tail_ns):
    """(step index, condition, ms) of every step, in order (classify() says which condition)."""
    kineto_seen = False
    for step, start, end, tag in step_log["steps"]:
        ms = (end - start) / 1e6
        if tag == "kineto":
            kineto_seen = True
            cond = "kineto"
        elif any(start < hi and end > lo for lo, hi in windows):
            cond = "capturing"
        elif any(hi <= start < hi + tail_ns for _, hi in windows):
            cond = "after_capture"
        elif kineto_seen:
            cond = "after_kineto"
        else:
            cond = "idle"
        yield step, cond, ms


def stats(values):
    if not values:
        return None
    s = sorted(values)
    return {"steps": len(s), "mean_ms": statistics.fmean(s), "median_ms": statistics.median(s),
            "p90_ms": s[min(len(s) - 1, int(0.9 * len(s)))]}


def recorder_table(samples, bound_pct, off_medians=()):
    """samples: "off" / "on" -> [step ms]. The stats of each, the overhead of "on" against
    "off" (median and mean, %), and whether the median's is within bound_pct. "On" and "off" are
    different processes: when the "off" runs' own medians (`off_medians`, one a run) differ by
    bound_pct or more, two processes differ by more than the bound, and the verdict is None
    ("cannot tell")."""
    table = {name: stats(values) for name, values in samples.items()}
    off, on = table.get("off"), table.get("on")
    key = f"recorder_within_{bound_pct:g}pct"
    verdicts = {key: False}
    if off is not None and on is not None:
        on["overhead_mean_pct"] = 100.0 * (on["mean_ms"] / off["mean_ms"] - 1)
        on["overhead_median_pct"] = 100.0 * (on["median_ms"] / off["median_ms"] - 1)
        verdicts[key] = on["overhead_median_pct"] < bound_pct
        if len(off_medians) >= 2:
            spread = 100.0 * (max(off_medians) / min(off_medians) - 1)
            table["off_runs_spread_pct"] = spread
            if spread >= bound_pct:
                verdicts[key] = None
    return table, verdicts


def markdown(table, verdicts):
    names = {"off": "library loaded, agent without --flight-recorder",
             "on": "library loaded, agent with --flight-recorder"}
    lines = ["| condition | steps | mean ms | median ms | p90 ms | overhead (median) |",
             "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for key in ("off", "on"):
        if key not in table:
            continue
        row = table[key]
        if not isinstance(row, (dict, type(None))):
            continue
        if row is None:
            lines.append(f"| {names[key]} | 0 | | | | |")
            continue
        over = row.get("overhead_median_pct")
        lines.append(f"| {names[key]} | {row['steps']} | {row['mean_ms']:.3f} | "
                     f"{row['median_ms']:.3f} | {row['p90_ms']:.3f} | "
                     f"{'' if over is None or key == 'off' else f'{over:+.2f} %'} |")
    lines.append("")
    if "off_runs_spread_pct" in table:
        lines.append(f"The \"off\" runs' medians differ by {table['off_runs_spread_pct']:.2f} % "
                     "between themselves (the noise between processes).")
        lines.append("")
    for k, v in verdicts.items():
        said = "cannot tell (the off runs differ more)" if v is None else "yes" if v else "NO"
        lines.append(f"- {k}: {said}")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------
# Processes.

def current_step(procs, name, timeout_s):
    """The step count of the newest 'pytorch_steps: step N' line NAME printed: what it printed
    while we were busy, else the next one."""
    latest = None
    for line in procs.new_lines(name):
        m = re.search(r"pytorch_steps: step (\d+)$", line)
        if m:
            latest = int(m.group(1))
    if latest is None:
        latest = int(procs.wait_line(name, r"pytorch_steps: step (\d+)$", timeout_s).group(1))
    return latest


class Env:
    def __init__(self, args):
        self.args = args
        self.out = os.path.abspath(args.out)
        if os.path.exists(os.path.join(self.out, "logs")):
            raise Failure(f"--out={args.out} already holds a run (its logs/): pass a new or "
                          "empty folder, so no session of that run is overwritten")
        os.makedirs(self.out, exist_ok=True)
        self.bundle = self._unpack(args.bundle)
        self.profctl = os.path.join(self.bundle, "bin", "profctl")
        self.agent_bin = os.path.join(self.bundle, "bin", "profctl-agent")
        self.inject = os.path.join(self.bundle, "lib", "libprofctl_inject.so")
        for f in (self.profctl, self.agent_bin, self.inject):
            if not os.path.exists(f):
                raise Failure(f"the bundle has no {os.path.relpath(f, self.bundle)} "
                              "(deploy/bundle/make_bundle.sh OUT profctl profctl-agent "
                              "libprofctl_inject.so)")
        self.socket = os.path.join(self.out, "run", "agent.sock")
        self.cupti = find_libcupti()
        # Every process's output in DIR/NAME.log; the agent and the programs are stopped at the
        # end of each phase, whatever happened in it.
        self.procs = Processes(self.out, grace_s=60)
        self.port = None

    def _unpack(self, bundle):
        if os.path.isdir(bundle):
            root = os.path.join(bundle, "profctl-bundle")
            return os.path.abspath(root if os.path.isdir(root) else bundle)
        dest = os.path.join(self.out, "bundle")
        shutil.rmtree(dest, ignore_errors=True)
        with tarfile.open(bundle) as t:
            if hasattr(tarfile, "data_filter"):
                t.extractall(dest, filter="tar")
            else:
                t.extractall(dest)
        return os.path.join(dest, "profctl-bundle")

    def injected_env(self):
        env = dict(os.environ, CUDA_INJECTION64_PATH=self.inject,
                   NVTX_INJECTION64_PATH=self.inject, PROFCTL_AGENT_SOCKET=self.socket)
        if self.cupti:
            env["PROFCTL_CUPTI_PATH"] = self.cupti
        return env

    def start_cupti_agent(self, extra=()):
        """The agent (DIR/agent.log), once it listens: it writes DIR/agent.port then, after its
        inject socket is up. `extra`: more agent flags."""
        self.port = self.procs.start_agent(self.agent_bin, "agent", [
            f"--name={HOST}", "--collectors=cupti", f"--inject-socket={self.socket}",
            *extra], timeout_s=30)

    def pinned(self, argv):
        """argv on the same CPUs in every run, so that runs compared with each other do not
        differ by the cores the scheduler gave them (pin_argv, --pin)."""
        return pin_argv(argv, self.args.pin, os.cpu_count() or 1,
                        shutil.which("taskset") is not None and not self.args.no_gpu_ok)

    def start(self, name, argv, env=None, cwd=None):
        """A program, its output in DIR/NAME.log."""
        return self.procs.start(name, argv, env=env, cwd=cwd)

    def wait_registered(self, name, timeout_s=120):
        """Until the agent logs program NAME's registration (the library loaded at CUDA's
        start); fails as soon as either exits."""
        pid = self.procs.get(name).pid
        self.procs.wait_line("agent", rf"inject server: pid {pid} \(.*\) registered", timeout_s,
                             watch=[name])

    def run_capture(self, session, worker, duration_ms, last=False):
        """`profctl capture` of one worker (an agent, or grpc://host:port) into DIR/logs, its
        output in DIR/capture_SESSION.log (with `last`: a snapshot of the past duration_ms,
        --last); returns (the completed process, the session folder)."""
        logdir = os.path.join(self.out, "logs")
        window = f"--last={duration_ms}ms" if last else f"--duration={duration_ms}"
        r = subprocess.run([self.profctl, "capture", f"--workers={worker}", window,
                            f"--logdir={logdir}", f"--session={session}", "--tolerance=500",
                            "--pod-trace-json"],
                           capture_output=True, text=True, timeout=duration_ms / 1000 + 120,
                           check=False)
        write_atomically(os.path.join(self.out, f"capture_{session}.log"), r.stdout + r.stderr)
        return r, os.path.join(logdir, "plugins", "profile", session)

    def capture(self, session, duration_ms, ok_codes=(0,), last=False):
        """profctl capture of the agent (with `last`: a snapshot of the past duration_ms,
        --last); returns (session folder, the agent's recording window (CLOCK_REALTIME ns), what
        profctl printed). Exit codes outside `ok_codes` fail."""
        r, session_dir = self.run_capture(session, f"127.0.0.1:{self.port}", duration_ms, last)
        if r.returncode not in ok_codes:
            raise Failure(f"profctl capture {session} exited {r.returncode}: "
                          f"{(r.stdout + r.stderr)[-1500:]}")
        with open(os.path.join(session_dir, "session.json")) as f:
            manifest = json.load(f)
        # From the requested start (on the agent's clock: when the processes enable CUPTI) to
        # the agent's stop; this host's clock is the loop's.
        hosts = manifest.get("hosts", [])
        host = hosts[0] if hosts else {}
        start = int(host.get("requested_start_ns") or host.get("agent_start_ns") or
                    manifest["start_at_ns"])
        stop = int(host.get("agent_stop_ns") or start + duration_ms * 1_000_000)
        return session_dir, (start, stop), r.stdout

    def stop_all(self):
        """Stops the agent and every program still running."""
        self.procs.stop_all()


def pin_argv(argv, pin, cpus, have_taskset):
    """argv under `taskset -c LIST` as --pin says: "auto" the first half of the machine's CPUs
    where it has 8 or more (the agent and profctl are not pinned), "none" nothing, else the CPU
    list given (e.g. "3" or "2-5"). Unchanged without taskset."""
    if not have_taskset or pin == "none":
        return argv
    if pin == "auto":
        return argv if cpus < 8 else ["taskset", "-c", f"0-{cpus // 2 - 1}"] + argv
    return ["taskset", "-c", pin] + argv


def find_libcupti():
    """libcupti for the library to dlopen when its soname is not loaded yet (PROFCTL_CUPTI_PATH):
    the one a pip CUDA install brings (nvidia-cuda-cupti: the copy PyTorch's own profiler loads,
    so a PyTorch process ends up with one libcupti), else the toolkit's, else None (the
    library's own search)."""
    patterns = []
    for p in sys.path:
        patterns.append(os.path.join(p, "nvidia", "cuda_cupti", "lib", "libcupti.so*"))
        patterns.append(os.path.join(p, "nvidia", "cu*", "lib", "libcupti.so*"))
    homes = [os.environ.get("CUDA_HOME", ""), "/usr/local/cuda"]
    patterns += [os.path.join(h, sub, "libcupti.so*") for h in homes if h
                 for sub in ("extras/CUPTI/lib64", "lib64", "targets/x86_64-linux/lib")]
    for pattern in patterns:
        found = sorted(glob.glob(pattern))
        if found:
            return found[0]
    return None


def check_capture(env, session_dir, name, min_steps):
    summary = os.path.join(env.out, f"summary_{name}.json")
    r = subprocess.run([sys.executable, os.path.join(ROOT, "tests", "gpu_capture_check.py"),
                        session_dir, f"--host={HOST}:1", f"--min-steps={min_steps}",
                        f"--summary={summary}"], capture_output=True, text=True, check=False)
    write_atomically(os.path.join(env.out, f"check_{name}.log"), r.stdout + r.stderr)
    print(r.stdout, end="")
    if r.returncode != 0:
        raise Failure(f"gpu_capture_check.py failed on the {name} capture")
    with open(summary) as f:
        return json.load(f)


# ---------------------------------------------------------------------------------------------
# Phases.

def phase_capture(env, name, argv, cwd=None):
    try:
        env.start_cupti_agent()
        env.start(name, argv, env=env.injected_env(), cwd=cwd)
        env.wait_registered(name)
        # Let the program reach its steady loop (CUDA context, cuBLAS handles, first kernels):
        # --settle-s, during which neither it nor the agent may exit.
        hold(f"{name}'s --settle-s before the capture", env.args.settle_s,
             env.procs.only([name, "agent"]))
        session_dir, _, printed = env.capture(name, env.args.phase_capture_ms)
        print(printed, end="")
        result = {"session_dir": session_dir, "check": check_capture(env, session_dir, name, 5)}
        # The program stops first, and the agent says it left before the agent stops in turn.
        pid = env.procs.get(name).pid
        env.procs.stop(name)
        env.procs.wait_line("agent", rf"inject server: pid {pid} left", 60)
        return result
    finally:
        env.stop_all()


def build_cuda_steps(env):
    """examples/cuda_steps built with cmake and nvcc under --out; its path."""
    build = os.path.join(env.out, "cuda_steps_build")
    for argv in (["cmake", "-S", os.path.join(ROOT, "examples", "cuda_steps"), "-B", build,
                  "-DCMAKE_BUILD_TYPE=Release"], ["cmake", "--build", build, "-j"]):
        r = subprocess.run(argv, capture_output=True, text=True, check=False)
        if r.returncode != 0:
            raise Failure(f"{' '.join(argv)}: {(r.stdout + r.stderr)[-1500:]}")
    binary = os.path.join(build, "cuda_steps")
    if not os.path.exists(binary):
        raise Failure("examples/cuda_steps was not built: cmake found no CUDA compiler (nvcc)")
    return binary


def phase_cuda(env):
    binary = env.args.cuda_steps or build_cuda_steps(env)
    return phase_capture(env, "cuda_steps", [binary, "--steps=100000000"])


def pytorch_argv(args, step_log, progress=0):
    return [args.python, os.path.join(ROOT, "examples", "pytorch_steps.py"), "--steps=0",
            f"--progress={progress}", f"--kineto-steps={args.kineto_steps}"] + \
        ([f"--step-log={step_log}"] if step_log else [])


def phase_pytorch(env):
    return phase_capture(env, "pytorch_steps", pytorch_argv(env.args, None))


OVERHEAD_KINDS = ("none", "loaded", "kineto")
# What the untraced and idle runs add to --capture-ms in their middle part, so that they reach
# every step index of a capture run: its prepare, the window, the flush, the second held after
# it (TAIL_NS), with room for a loaded machine.
UNTRACED_MIDDLE_S = 4
# Idle-only kinds that attribute the library's idle cost (--overhead-kinds): the library loaded
# through one of its two entry points only (no capture in them).
OVERHEAD_PARTIAL = {"nvtx_only": "CUDA_INJECTION64_PATH", "cuda_only": "NVTX_INJECTION64_PATH"}


def overhead_order(round_no, kinds=OVERHEAD_KINDS):
    """The round's run order, rotated each round (none, loaded, kineto; loaded, kineto, none;
    ...), so that no kind always runs first on a machine that warms up or cools down."""
    kinds = tuple(kinds)
    k = (round_no - 1) % len(kinds)
    return kinds[k:] + kinds[:k]


def overhead_kind_env(env, kind):
    """The environment of an overhead run of `kind`: none and kineto without the library;
    loaded with it (CUDA and NVTX injection); nvtx_only / cuda_only through one entry point;
    a --overhead-env kind: loaded plus its variables."""
    base = overhead_base(env.args, kind)
    if base in ("none", "kineto"):
        run_env = {k: v for k, v in os.environ.items()
                   if k not in ("CUDA_INJECTION64_PATH", "NVTX_INJECTION64_PATH")}
    else:
        run_env = env.injected_env()
    if kind in OVERHEAD_PARTIAL:
        run_env.pop(OVERHEAD_PARTIAL[kind])
    for k, v in env.args.overhead_env_vars.get(kind, {}).items():
        if v:
            run_env[k] = v
        else:
            run_env.pop(k, None)  # VAR= unsets it
    return run_env


def overhead_base(args, kind):
    """What a run of `kind` does in its middle: "loaded" (a capture), "kineto" (a torch.profiler
    window), "none" (the untraced run) or "idle" (the library loaded, nothing: nvtx_only,
    cuda_only, a --overhead-env kind without @loaded or @kineto)."""
    if kind in ("none", "loaded", "kineto"):
        return kind
    base = getattr(args, "overhead_env_base", {}).get(kind)
    return base if base in ("loaded", "kineto") else "idle"


def overhead_run(env, kind, round_no):
    """One run of the loop: "none" (no injection, no tracer at all), "loaded" (under injection
    beside the agent, a profctl capture in the middle) or "kineto" (no injection, a
    torch.profiler window in the middle). Every kind runs --warmup-steps, then --idle-steps, then
    its middle part (none: as long as a capture takes), then --idle-steps more: their steps
    line up by index, so each is compared with the untraced run's steps of the same age.
    Returns (step log, capture windows, notes)."""
    args = env.args
    name = f"overhead_{kind}{round_no}"
    step_log = os.path.join(env.out, name + ".steps.json")
    run_env = overhead_kind_env(env, kind)
    progress = 50

    def wait_for_step(n):  # the first progress line at or past step n
        env.procs.wait_line(
            name, rf"pytorch_steps: step {(n + progress - 1) // progress * progress}$", 600)

    app = env.start(name, env.pinned(pytorch_argv(args, step_log, progress)), env=run_env)
    windows = []
    notes = {}
    try:
        # Only the plain loaded run waits for its registration (its capture must hold it); the
        # other kinds may never register (no agent socket, a library told to stay out), and a
        # capture of them is timed whatever it holds.
        if kind == "loaded" and not args.no_gpu_ok:
            env.wait_registered(name)
        wait_for_step(args.warmup_steps + args.idle_steps)
        middle = overhead_base(args, kind)
        if middle == "kineto":
            app.send_signal(signal.SIGUSR1)
            env.procs.wait_line(name, r"kineto window steps \d+\.\.\d+ done", 600)
        elif middle == "loaded":
            # Only the window matters here (what arrives is checked on the first capture): a
            # partial session (exit 3: a late start, a breakdown with no steps) still times the
            # steps; a --overhead-env kind may even fail its capture (exit 1: a library told to
            # stay out of CUPTI until then), and its window still says when CUPTI was on.
            t = time.monotonic()
            ok_codes = (0, 3) if kind == "loaded" else (0, 1, 3)
            session_dir, window, printed = env.capture(name, args.capture_ms, ok_codes=ok_codes)
            notes["capture_exit_ok_codes"] = list(ok_codes)
            notes["capture_wall_s"] = time.monotonic() - t
            windows.append(window)
            notes["session_dir"] = session_dir
            notes["capture_printed_tail"] = printed[-800:]
            # The second after the window's stop is a row of its own (the flush): the idle
            # steps after the capture are counted from its end.
            hold(f"{name}'s second after its capture", TAIL_NS / 1e9, env.procs.only([name]))
        else:
            # As long as a capture of --capture-ms takes from its request to its end (prepare,
            # the window, the flush), so that the untraced run has steps at every index the
            # others' middle parts reach.
            hold(f"{name}'s untraced middle part", args.capture_ms / 1000 + UNTRACED_MIDDLE_S,
                 env.procs.only([name]))
        target = current_step(env.procs, name, 600) + args.idle_steps
        wait_for_step(target)
    finally:
        rc = env.procs.stop(name)
    notes["library_said"] = library_lines(env, name)
    if not os.path.exists(step_log):
        raise Failure(f"{name}: the loop exited {rc} without its step log "
                      f"(log: {env.procs.log_path(name)})")
    if rc != 0:
        notes["exit"] = rc  # it wrote its steps, then failed (at exit): the steps still count
    with open(step_log) as f:
        return json.load(f), windows, notes


def same_age(test, base, first_index):
    """The overhead of steps `test` against the untraced run's steps `base` of the same indices
    (the same age of the process), both {index: ms}, from `first_index` on: {"steps",
    "median_ms", "base_median_ms", "overhead_pct"}, or None when they share no index."""
    common = sorted(i for i in test if i in base and i >= first_index)
    if not common:
        return None
    t = statistics.median(test[i] for i in common)
    b = statistics.median(base[i] for i in common)
    return {"steps": len(common), "median_ms": t, "base_median_ms": b,
            "overhead_pct": 100.0 * (t / b - 1)}


def did(after, before, base, first_index):
    """Difference in differences: how much slower a process's steps `after` something are than
    its steps `before` it, over how much slower the untraced process `base` is at the same
    indices (its own drift with age), all {index: ms} from `first_index` on. Neither the
    process-to-process difference nor the drift with age is in it. None when a side is empty."""
    a = {i: ms for i, ms in after.items() if i in base and i >= first_index}
    b = {i: ms for i, ms in before.items() if i in base and i >= first_index}
    if not a or not b:
        return None
    traced = statistics.median(a.values()) / statistics.median(b.values())
    untraced = (statistics.median(base[i] for i in a) / statistics.median(base[i] for i in b))
    return {"steps": len(a), "median_ms": statistics.median(a.values()),
            "base_median_ms": statistics.median(b.values()),
            "overhead_pct": 100.0 * (traced / untraced - 1)}


def before_after(split, middle):
    """A run's idle steps split at its middle part (`middle`: the steps of its capture or
    torch.profiler window): (before, after); after leaves out the second after a capture
    ("after_capture") and takes a torch.profiler run's "after_kineto" steps."""
    marks = split.get(middle, {})
    idle = split.get("idle", {})
    if not marks:
        return idle, {}
    first, last = min(marks), max(marks)
    before = {i: ms for i, ms in idle.items() if i < first}
    after = {i: ms for i, ms in idle.items() if i > last}
    after.update(split.get("after_kineto", {}))
    return before, after


def round_overheads(runs, first_index):
    """One round's overheads. runs: kind -> by_index() of that run. Across processes, each
    condition against the "none" run's steps of the same indices (same_age); inside one process,
    its capture or torch.profiler window and what follows against its own idle steps before
    them, net of the untraced process's drift between the same indices (did: neither the
    process-to-process difference nor the drift with age is in it). The kineto run's steps
    before its window are a second untraced process: "aa_noise" is what two untraced processes
    differ by, the floor under every cross-process row."""
    none = runs["none"].get("idle", {})
    loaded, kineto = runs.get("loaded", {}), runs.get("kineto", {})
    l_before, l_after = before_after(loaded, "capturing")
    k_before, k_after = before_after(kineto, "kineto")
    out = {"aa_noise": same_age(k_before, none, first_index) if kineto else None,
           "loaded": same_age(l_before, none, first_index),
           "capturing": same_age(loaded.get("capturing", {}), none, first_index),
           "capturing_vs_loaded": did(loaded.get("capturing", {}), l_before, none, first_index),
           "after_capture": same_age(loaded.get("after_capture", {}), none, first_index),
           "loaded_after": same_age(l_after, none, first_index),
           "residual_after_capture": did(l_after, l_before, none, first_index),
           "kineto": same_age(kineto.get("kineto", {}), none, first_index),
           "kineto_vs_before": did(kineto.get("kineto", {}), k_before, none, first_index),
           "after_kineto": same_age(k_after, none, first_index),
           "residual_after_kineto": did(k_after, k_before, none, first_index)}
    for kind, split in runs.items():
        if kind in OVERHEAD_KINDS:
            continue
        if "kineto" in split:  # a torch.profiler window with other variables
            before, after = before_after(split, "kineto")
            out[f"{kind}_window"] = same_age(split["kineto"], none, first_index)
            out[f"{kind}_after"] = same_age(after, none, first_index)
            out[f"{kind}_residual"] = did(after, before, none, first_index)
        elif "capturing" in split:  # a capture with other variables
            before, after = before_after(split, "capturing")
            out[kind] = same_age(before, none, first_index)
            out[f"{kind}_capturing"] = did(split["capturing"], before, none, first_index)
            out[f"{kind}_residual"] = did(after, before, none, first_index)
        else:
            out[kind] = same_age(split.get("idle", {}), none, first_index)
    return out


OVERHEAD_ROWS = ("aa_noise", "loaded", "capturing", "capturing_vs_loaded", "after_capture",
                 "loaded_after", "residual_after_capture", "kineto", "kineto_vs_before",
                 "after_kineto", "residual_after_kineto")


def overhead_rows(rounds):
    """The conditions to show: OVERHEAD_ROWS, then the other kinds' idle rows (nvtx_only, ...)."""
    extra = []
    for r in rounds:
        extra += [k for k in r if k not in OVERHEAD_ROWS and k not in extra]
    return list(OVERHEAD_ROWS) + extra


def overhead_summary(rounds):
    """rounds: [round_overheads()]. Per condition: each round's overhead, their median, min and
    max, and the steps counted; the targets' verdicts on the medians over rounds."""
    table = {}
    for cond in overhead_rows(rounds):
        rows = [r.get(cond) for r in rounds]
        pcts = [r["overhead_pct"] for r in rows if r is not None]
        table[cond] = None if not pcts else {
            "rounds_pct": [None if r is None else r["overhead_pct"] for r in rows],
            "median_pct": statistics.median(pcts), "min_pct": min(pcts), "max_pct": max(pcts),
            "steps": sum(r["steps"] for r in rows if r is not None),
            "median_ms": statistics.median(r["median_ms"] for r in rows if r is not None),
            "base_median_ms": statistics.median(r["base_median_ms"] for r in rows
                                                if r is not None)}

    def pct(cond):
        return table[cond]["median_pct"] if table.get(cond) else None
    # The capture's verdicts read the rows inside one process; the idle one compares two
    # processes, which it can only do when two untraced ones agree within the bound (the A/A
    # row): else None, "cannot tell".
    loaded, aa = pct("loaded"), table.get("aa_noise")
    capturing, kineto = pct("capturing_vs_loaded"), pct("kineto_vs_before")
    residual = pct("residual_after_capture")
    idle = loaded is not None and loaded < 0.5
    if aa is not None and max(abs(aa["min_pct"]), abs(aa["max_pct"])) >= 0.5:
        idle = None
    verdicts = {"loaded_under_0.5pct": idle,
                "capturing_under_3pct": capturing is not None and capturing < 3.0,
                "capturing_no_worse_than_kineto": (capturing is not None and kineto is not None
                                                   and capturing <= kineto),
                "no_residual_after_capture": residual is not None and residual < 0.5}
    return table, verdicts


def overhead_markdown(table, verdicts, n_rounds):
    names = {"aa_noise": "A/A: a second untraced process (the noise floor)",
             "loaded": "libprofctl_inject.so loaded, idle (before its capture)",
             "capturing": "profctl capturing",
             "capturing_vs_loaded": "profctl capturing, against its process's idle steps before",
             "after_capture": "(1 s after a profctl capture: flush)",
             "loaded_after": "library loaded, idle after its capture",
             "residual_after_capture": "idle after a capture, against the same process before",
             "kineto": "torch.profiler (Kineto, CUDA)",
             "kineto_vs_before": "torch.profiler, against its process's steps before",
             "after_kineto": "(no tracer, after torch.profiler stopped)",
             "residual_after_kineto": "after torch.profiler, against the same process before"}
    rounds = " | ".join(f"round {r}" for r in range(1, n_rounds + 1))
    lines = [f"| condition | steps | median ms | baseline median ms | {rounds} | median over "
             "rounds | min .. max |",
             "| --- | ---: | ---: | ---: | " + " | ".join(["---:"] * n_rounds) +
             " | ---: | ---: |"]
    for cond in [c for c in OVERHEAD_ROWS if c in table] + \
            [c for c in table if c not in OVERHEAD_ROWS]:
        row = table.get(cond)
        label = names.get(cond, f"kind {cond} (--overhead-kinds)")
        if row is None:
            lines.append(f"| {label} | 0 | | | " + " | ".join([""] * n_rounds) + " | | |")
            continue
        per = " | ".join("" if p is None else f"{p:+.2f} %" for p in row["rounds_pct"])
        lines.append(f"| {label} | {row['steps']} | {row['median_ms']:.3f} | "
                     f"{row['base_median_ms']:.3f} | {per} | {row['median_pct']:+.2f} % | "
                     f"{row['min_pct']:+.2f} .. {row['max_pct']:+.2f} % |")
    lines.append("")
    for k, v in verdicts.items():
        lines.append(f"- {k}: {'cannot tell (the A/A row)' if v is None else 'yes' if v else 'NO'}")
    return "\n".join(lines) + "\n"


def phase_overhead(env):
    env.start_cupti_agent()
    rounds, runs = [], []
    first_check = None
    try:
        for round_no in range(1, env.args.rounds + 1):
            split = {}
            for kind in overhead_order(round_no, env.args.overhead_kinds):
                try:
                    step_log, windows, notes = overhead_run(env, kind, round_no)
                except (Failure, OSError, subprocess.SubprocessError, ValueError, KeyError) as e:
                    if kind in ("none", "loaded"):
                        raise  # the baseline and the library itself: the phase fails
                    # Another kind (a diagnosis switch, torch.profiler) that broke its process
                    # costs its own rows only, not the rounds measured.
                    runs.append({"run": f"{kind}{round_no}", "error": str(e)})
                    log(f"run {kind}{round_no} FAILED (its rows are left empty): {e}")
                    continue
                split[kind] = by_index(step_log, windows)
                if kind == "loaded" and first_check is None and not env.args.no_gpu_ok:
                    # The first capture's session, checked as the capture phases check theirs
                    # (recorded, not fatal: the phase measures time).
                    first_check = try_check_capture(env, notes["session_dir"], "overhead")
                runs.append({"run": f"{kind}{round_no}", "windows_ns": windows,
                             "kineto_enter_exit_ms": step_log.get("kineto_enter_exit_ms", []),
                             **{k: stats(list(v.values())) for k, v in split[kind].items()},
                             **notes})
                log(f"run {kind}{round_no}: " + ", ".join(
                    f"{k} {len(v)} steps" for k, v in split[kind].items() if v))
            rounds.append(round_overheads(split, env.args.warmup_steps))
    finally:
        env.stop_all()
    table, verdicts = overhead_summary(rounds)
    return {"runs": runs, "rounds": rounds, "table": table, "verdicts": verdicts,
            "first_capture_check": first_check,
            "markdown": overhead_markdown(table, verdicts, len(rounds))}


def try_check_capture(env, session_dir, name):
    try:
        return check_capture(env, session_dir, name, 5)
    except (Failure, OSError, ValueError) as e:
        return {"error": str(e)}


RECORDER_SECONDS = 30
RECORDER_SNAPSHOT_MS = 5000


def recorder_run(env, on, round_no):
    """One run of the loop under injection beside a fresh agent with (`on`) or without the
    flight recorder; idle steps only, then (on) a --last snapshot. Returns (step ms, notes)."""
    args = env.args
    name = f"recorder_{'on' if on else 'off'}{round_no}"
    step_log = os.path.join(env.out, name + ".steps.json")
    progress = 50
    env.start_cupti_agent([f"--flight-recorder={RECORDER_SECONDS}"] if on else [])
    notes = {}
    try:
        env.start(name, env.pinned(pytorch_argv(args, step_log, progress)),
                  env=env.injected_env())
        try:
            if not args.no_gpu_ok:
                env.wait_registered(name)
            target = args.warmup_steps + args.idle_steps
            env.procs.wait_line(
                name, rf"pytorch_steps: step {(target + progress - 1) // progress * progress}$",
                600)
        finally:
            rc = env.procs.stop(name)
        if on:
            # After the timed steps: the snapshot's cost is not the always-on level's.
            session_dir, _, printed = env.capture(name, RECORDER_SNAPSHOT_MS, ok_codes=(0, 3),
                                                  last=True)
            notes["snapshot_session_dir"] = session_dir
            notes["snapshot_printed_tail"] = printed[-800:]
    finally:
        env.procs.stop("agent")
    if not os.path.exists(step_log):
        raise Failure(f"{name}: the loop exited {rc} without its step log "
                      f"(log: {env.procs.log_path(name)})")
    with open(step_log) as f:
        idle = by_index(json.load(f), []).get("idle", {})
    # Steps before --warmup-steps are not timed: the loop drifts over its first seconds, and
    # "off" and "on" are compared at the same ages.
    return [ms for i, ms in sorted(idle.items()) if i >= args.warmup_steps], notes


def phase_recorder(env):
    samples = {"off": [], "on": []}
    off_medians = []
    runs = []
    nccl = None
    try:
        for round_no in range(1, env.args.recorder_rounds + 1):
            for on in (False, True):
                steps, notes = recorder_run(env, on, round_no)
                samples["on" if on else "off"] += steps
                if not on and steps:
                    off_medians.append(statistics.median(steps))
                runs.append({"run": f"{'on' if on else 'off'}{round_no}", **(stats(steps) or {}),
                             **notes})
                log(f"run recorder {'on' if on else 'off'}{round_no}: {len(steps)} steps")
        if env.args.recorder_nccl_ranks > 0:
            gpus = gpu_present() or ""
            nccl = launches_run(env, len([g for g in gpus.splitlines() if g.startswith("GPU ")]))
            runs.append(nccl)
            log(f"run recorder nccl: {nccl['ranks']} ranks, {nccl['launches']} NCCL launches "
                f"({nccl['ops']}) on {nccl['threads']} threads of processes {nccl['processes']}")
    finally:
        env.stop_all()
    table, verdicts = recorder_table(samples, env.args.recorder_bound_pct, off_medians)
    md = markdown(table, verdicts)
    if nccl is not None:
        seen = nccl["launches"] > 0 and len(nccl["processes"]) >= nccl["ranks"]
        verdicts["recorder_nccl_launches_from_every_rank"] = seen
        ops = ", ".join(f"{k} {v}" for k, v in sorted(nccl["ops"].items()))
        md += (f"\n\nNCCL launches in a 5 s snapshot of {nccl['ranks']} rank(s): "
               f"{nccl['launches']} ({ops}) on {nccl['threads']} thread(s) of "
               f"{len(nccl['processes'])} process(es), "
               f"{nccl['sequence_gaps']} sequence gap(s)")
        # Enforced where it must hold: NCCL launches kernels for two ranks or more. A stand-in
        # torch (tests) has no library loaded and one rank's NCCL may launch none.
        if not seen and nccl["ranks"] >= 2 and not env.args.no_gpu_ok:
            raise Failure(f"the recorder's snapshot of {nccl['ranks']} NCCL ranks holds "
                          f"{nccl['launches']} NCCL launches from processes "
                          f"{nccl['processes']} (session {nccl['snapshot_session_dir']})")
    return {"runs": runs, "table": table, "verdicts": verdicts, "markdown": md}


RECORDER_NCCL_STEPS = 100


def launch_summary(session_dir, host=HOST):
    """The NCCL launches a session's pod trace holds on `host`'s /host:CPU plane: events named
    "nccl..." with a kernel_name arg (the flight recorder's light level, docs/cupti.md). Returns
    {"launches", "ops" (name -> count), "threads", "processes" (from the line names "pid P tid
    T" where the trace names threads), "sequence_gaps"}."""
    path = os.path.join(session_dir, "pod.trace.json.gz")
    with gzip.open(path, "rt") as f:
        events = json.load(f).get("traceEvents", [])
    host_pids = {e["pid"] for e in events
                 if e.get("ph") == "M" and e.get("name") == "process_name" and
                 e.get("args", {}).get("name") == f"{host} /host:CPU"}
    thread_names = {(e["pid"], e.get("tid")): e.get("args", {}).get("name", "")
                    for e in events if e.get("ph") == "M" and e.get("name") == "thread_name"}
    ops, threads, processes, seqs = {}, set(), set(), {}
    launches = 0
    for e in events:
        if e.get("pid") not in host_pids or e.get("ph") not in ("X", "i", "I"):
            continue
        args = e.get("args", {})
        if not e.get("name", "").startswith("nccl") or "kernel_name" not in args:
            continue
        launches += 1
        ops[e["name"]] = ops.get(e["name"], 0) + 1
        threads.add(e.get("tid"))
        m = re.match(r"pid (\d+) tid \d+", thread_names.get((e["pid"], e.get("tid")), ""))
        process = m.group(1) if m else "?"
        processes.add(process)
        if "nccl_launch_seq" in args:
            seqs.setdefault(process, []).append(int(args["nccl_launch_seq"]))
    # Launches of one process numbered without a gap: none lost between its first and last.
    gaps = sum(max(v) - min(v) + 1 - len(set(v)) for v in seqs.values())
    return {"launches": launches, "ops": ops, "threads": len(threads),
            "processes": sorted(processes), "sequence_gaps": gaps}


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launches_run(env, gpu_count):
    """The loop with --allreduce as ranks under injection beside an agent with the recorder,
    then a --last snapshot; returns the run's record (launch_summary and verdict inputs)."""
    args = env.args
    ranks = args.recorder_nccl_ranks
    if gpu_count:
        ranks = min(ranks, gpu_count)
    record = {"run": "nccl", "ranks": ranks}
    env.start_cupti_agent([f"--flight-recorder={RECORDER_SECONDS}"])
    names = [f"recorder_nccl_rank{r}" for r in range(ranks)]
    port = free_port()
    progress = 10
    try:
        for r, name in enumerate(names):
            rank_env = dict(env.injected_env(), RANK=str(r), LOCAL_RANK=str(r),
                            WORLD_SIZE=str(ranks), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
            env.start(name, pytorch_argv(args, None, progress) + ["--allreduce"], env=rank_env)
        for name in names:
            if not args.no_gpu_ok:
                env.wait_registered(name)
        for name in names:
            env.procs.wait_line(name, rf"pytorch_steps: step {RECORDER_NCCL_STEPS}$", 600)
        session_dir, _, printed = env.capture("recorder_nccl", RECORDER_SNAPSHOT_MS,
                                              ok_codes=(0, 3), last=True)
        record["snapshot_session_dir"] = session_dir
        record["snapshot_printed_tail"] = printed[-800:]
    finally:
        for name in names:
            env.procs.stop(name)
        env.procs.stop("agent")
    record.update(launch_summary(session_dir))
    return record


# ---------------------------------------------------------------------------------------------
# The library's diagnosis switches, each on its own process, captured twice.

# NAME -> the variables of its process (docs/cupti.md, "Cost on a real GPU").
SWITCH_RUNS = (
    ("detach", {"PROFCTL_INJECT_DETACH": "1"}),
    ("light", {"PROFCTL_INJECT_WINDOW": "launches"}),
    ("hooks", {"PROFCTL_INJECT_NVTX_STEPS": "1", "PROFCTL_INJECT_DETACH": "1"}),
)
SWITCH_GAP_S = 3


def library_lines(env, name):
    """What the injection library said on `name`'s stderr ("profctl-inject: ..." lines: a
    diagnosis switch's outcome, such as the detach)."""
    try:
        with open(env.procs.log_path(name), errors="replace") as f:
            return [line.strip() for line in f if line.startswith("profctl-inject:")][:10]
    except OSError:
        return []


def phase_switches(env):
    """Each diagnosis switch of SWITCH_RUNS on one PyTorch loop under injection beside the cupti
    agent: after registering and --settle-s, two captures of --phase-capture-ms SWITCH_GAP_S
    apart, each checked by tests/gpu_capture_check.py (kernels tied to their launches, NVTX
    steps). The second capture of "detach" is the one after a detach: CUPTI attached again, and
    its NVTX steps say whether libcupti's NVTX handler records after that. Reported per capture;
    the phase fails only when a capture did not run."""
    args = env.args
    result = {}
    failed = []
    try:
        env.start_cupti_agent()
        for name, variables in SWITCH_RUNS:
            run = f"switch_{name}"
            env.start(run, env.pinned(pytorch_argv(args, None)),
                      env=dict(env.injected_env(), **variables))
            got = {"env": variables, "captures": []}
            try:
                if not args.no_gpu_ok:  # a stand-in torch (tests) loads no library
                    env.wait_registered(run)
                hold(f"{run}'s --settle-s", args.settle_s, env.procs.only([run, "agent"]))
                for i in (1, 2):
                    if i == 2:
                        hold(f"{run}'s gap between captures", SWITCH_GAP_S,
                             env.procs.only([run, "agent"]))
                    session_dir, _, printed = env.capture(f"{run}_{i}", args.phase_capture_ms,
                                                          ok_codes=(0, 3))
                    check = try_check_capture(env, session_dir, f"{run}_{i}")
                    got["captures"].append({"session_dir": session_dir, "check": check,
                                            "printed_tail": printed[-600:]})
                    log(f"switch {name} capture {i}: "
                        f"{'checked' if 'error' not in check else check['error']}")
            except (Failure, OSError, subprocess.SubprocessError) as e:
                got["error"] = str(e)
                failed.append(f"{name}: {e}")
            finally:
                env.procs.stop(run)
            got["library_said"] = library_lines(env, run)
            result[name] = got
    finally:
        env.stop_all()
    return {"check": result, "failed": failed}


# ---------------------------------------------------------------------------------------------
# JAX through its own profiler server.

def trace_summary(session_dir):
    """What a session of a TSL capture holds, from session.json, pod.trace.json.gz and
    pod_step_breakdown.json: each host's status and warnings, the events on each plane of the
    pod trace (by process name), the steps of the breakdown with their median time and
    categories, and the .xplane.pb files with their sizes."""
    out = {"files": {}}
    for f in sorted(os.listdir(session_dir)):
        out["files"][f] = os.path.getsize(os.path.join(session_dir, f))
    with open(os.path.join(session_dir, "session.json")) as f:
        manifest = json.load(f)
    out["hosts"] = [{"host": h.get("host"), "status": h.get("status"),
                     "warnings": h.get("warnings", [])[:5]} for h in manifest.get("hosts", [])]
    planes = {}
    path = os.path.join(session_dir, "pod.trace.json.gz")
    if os.path.exists(path):
        with gzip.open(path, "rt") as f:
            events = json.load(f).get("traceEvents", [])
        names = {e["pid"]: e.get("args", {}).get("name", "")
                 for e in events if e.get("ph") == "M" and e.get("name") == "process_name"}
        for e in events:
            if e.get("ph") == "X":
                plane = names.get(e.get("pid"), str(e.get("pid")))
                planes[plane] = planes.get(plane, 0) + 1
    out["plane_events"] = planes
    out["gpu_events"] = sum(n for p, n in planes.items() if "/device:GPU" in p)
    path = os.path.join(session_dir, "pod_step_breakdown.json")
    out["steps"] = 0
    if os.path.exists(path):
        with open(path) as f:
            breakdown = json.load(f)
        steps = breakdown.get("steps", [])
        out["steps"] = len(steps)
        rows = [h for s in steps for h in s.get("hosts", [])]
        if rows:
            out["median_step_ms"] = statistics.median(h.get("step_time_ms", 0) for h in rows)
            cats = {}
            for h in rows:
                for k, v in h.get("categories_ms", {}).items():
                    cats[k] = cats.get(k, 0) + v / len(rows)
            out["categories_ms_mean"] = cats
        out["breakdown_warnings"] = breakdown.get("warnings", [])[:5]
    return out


def phase_jax(env):
    """examples/jax_steps.py with JAX's profiler server, captured twice: by `profctl capture
    --workers=grpc://` (JAX's server directly) and through an agent's tsl collector
    (--tsl-local). Each session must hold a GPU plane with events and steps."""
    args = env.args
    port = free_port()
    name = "jax_steps"
    result = {}
    failures = []
    run_env = dict(os.environ, XLA_PYTHON_CLIENT_PREALLOCATE="false")
    try:
        env.start(name, env.pinned([args.python, os.path.join(ROOT, "examples", "jax_steps.py"),
                                    f"--port={port}", "--steps=0", "--progress=100"]),
                  env=run_env)
        # Compiled and in its steady loop.
        env.procs.wait_line(name, r"jax_steps: step 300$", 300)
        for how in ("grpc", "tsl"):
            if how == "grpc":
                worker = f"grpc://127.0.0.1:{port}"
            else:
                env.port = env.procs.start_agent(env.agent_bin, "agent_tsl", [
                    f"--name={HOST}", "--collectors=tsl", f"--tsl-local=127.0.0.1:{port}"],
                    timeout_s=30)
                worker = f"127.0.0.1:{env.port}"
            r, session_dir = env.run_capture(f"jax_{how}", worker, args.jax_capture_ms)
            rc, tail = r.returncode, (r.stdout + r.stderr)[-1500:]
            got = {"exit": rc, "worker": worker, "session_dir": session_dir, "printed": tail}
            try:
                got.update(trace_summary(session_dir))
            except (OSError, ValueError, KeyError) as e:
                got["summary_error"] = str(e)
            result[how] = got
            log(f"jax {how}: exit {rc}, {got.get('gpu_events', 0)} GPU events, "
                f"{got.get('steps', 0)} steps, files {got.get('files')}")
            if rc != 0 or not got.get("gpu_events") or got.get("steps", 0) < 3:
                failures.append(f"{how}: exit {rc}, {got.get('gpu_events', 0)} GPU events, "
                                f"{got.get('steps', 0)} steps ({session_dir})")
    finally:
        env.stop_all()
    if failures:
        result["failures"] = failures
    return {"check": result, "failed": failures}


def plan(args, phases):
    """What a run would do, one line per step, for --dry-run."""
    lines = [f"bundle {args.bundle}, out {args.out}"]
    agent = "profctl-agent --collectors=cupti"
    for phase in phases:
        if phase in ("cuda", "pytorch"):
            program = "examples/cuda_steps" if phase == "cuda" else "examples/pytorch_steps.py"
            lines.append(f"{phase}: {agent}; {program} under injection; after registering and "
                         f"{args.settle_s:g} s, profctl capture --duration={args.phase_capture_ms}"
                         "; tests/gpu_capture_check.py on the session")
        elif phase == "overhead":
            for r in range(1, args.rounds + 1):
                lines.append(f"overhead round {r}: "
                             f"{', '.join(overhead_order(r, args.overhead_kinds))}: pytorch_steps"
                             f" {args.warmup_steps} + {args.idle_steps} steps, then none: "
                             f"{args.capture_ms / 1000 + UNTRACED_MIDDLE_S:g} s untraced / "
                             f"loaded: under injection beside {agent}, profctl capture "
                             f"--duration={args.capture_ms} / kineto: {args.kineto_steps} "
                             f"torch.profiler steps; then {args.idle_steps} steps")
            lines.append("overhead verdicts: each condition against the untraced run's steps of "
                         "the same index, median over rounds")
        elif phase == "jax":
            lines.append(f"jax: examples/jax_steps.py with jax.profiler.start_server; profctl "
                         f"capture --workers=grpc://127.0.0.1:PORT --duration={args.jax_capture_ms}"
                         f"; then profctl-agent --collectors=tsl --tsl-local=127.0.0.1:PORT and "
                         f"profctl capture of the agent --duration={args.jax_capture_ms}")
        elif phase == "switches":
            for name, variables in SWITCH_RUNS:
                assigns = ",".join(f"{k}={v}" for k, v in variables.items())
                lines.append(f"switches {name}: {agent}; examples/pytorch_steps.py under "
                             f"injection with {assigns}; after registering and "
                             f"{args.settle_s:g} s, two profctl captures "
                             f"--duration={args.phase_capture_ms} {SWITCH_GAP_S} s apart; "
                             "tests/gpu_capture_check.py on each")
        elif phase == "recorder":
            for r in range(1, args.recorder_rounds + 1):
                lines.append(f"recorder round {r}: off: {agent} (no --flight-recorder), "
                             f"pytorch_steps under injection, {args.warmup_steps} + "
                             f"{args.idle_steps} steps (the first {args.warmup_steps} not "
                             "timed); on: "
                             f"{agent} --flight-recorder={RECORDER_SECONDS}, the same steps, then "
                             f"profctl capture --last={RECORDER_SNAPSHOT_MS}ms")
            lines.append(f"recorder verdict: median step time on within "
                         f"{args.recorder_bound_pct:g} % of off")
            if args.recorder_nccl_ranks > 0:
                lines.append(f"recorder nccl: {agent} --flight-recorder={RECORDER_SECONDS}; "
                             f"pytorch_steps --allreduce as {args.recorder_nccl_ranks} ranks (at "
                             f"most one per GPU) under injection, {RECORDER_NCCL_STEPS} steps, "
                             f"then profctl capture --last={RECORDER_SNAPSHOT_MS}ms; its pod "
                             "trace must hold nccl<Op> launches with kernel_name from every rank")
    return lines


def write_results(env, gpus, result):
    """gpu_verification.json and .md under --out, as they stand; returns the Markdown."""
    write_atomically(os.path.join(env.out, "gpu_verification.json"),
                     json.dumps(result, indent=1, sort_keys=True) + "\n")
    md = [f"GPU: {gpus}", f"libcupti: {env.cupti}", ""]
    for phase, r in result["phases"].items():
        md.append(f"## {phase}")
        if "error" in r:
            md.append(f"FAILED: {r['error']}")
        elif phase in ("overhead", "recorder"):
            md.append(r["markdown"])
        elif phase == "jax":
            md.append("```\n" + json.dumps(r["check"], indent=1, sort_keys=True)[:6000] +
                      "\n```")
        else:
            md.append("```\n" + json.dumps(r["check"], indent=1, sort_keys=True) + "\n```")
        md.append("")
    text = "\n".join(md)
    write_atomically(os.path.join(env.out, "gpu_verification.md"), text)
    return text


def gpu_present():
    try:
        r = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=60,
                           check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return r.stdout.strip() if r.returncode == 0 and "GPU" in r.stdout else None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bundle", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--phases", default="cuda,pytorch,overhead")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--idle-steps", type=int, default=300)
    ap.add_argument("--warmup-steps", type=int, default=1000,
                    help="overhead: steps every run takes before the compared ones (past the "
                         "loop's own drift over its first seconds); steps before it are not "
                         "compared")
    ap.add_argument("--recorder-rounds", type=int, default=2)
    ap.add_argument("--pin", default="auto",
                    help="CPUs the loops run on (taskset -c): auto (the first half of a machine "
                         "of 8 CPUs or more), none, or a CPU list such as 3 or 2-5")
    ap.add_argument("--overhead-kinds", default="none,loaded,kineto",
                    help="the overhead phase's runs each round: none and loaded always; kineto; "
                         "nvtx_only / cuda_only (the library through one entry point, idle); "
                         "any NAME given by --overhead-env")
    ap.add_argument("--overhead-env", action="append", default=[],
                    help="NAME[@loaded|@kineto]:VAR=VAL[,VAR=VAL...]: an overhead kind NAME, the "
                         "library loaded and idle with these variables set too (@loaded: and a "
                         "capture in the middle; @kineto: no library, a torch.profiler window); "
                         "VAR= unsets VAR; repeatable")
    ap.add_argument("--jax-capture-ms", type=int, default=1000,
                    help="the jax phase's captures (small sessions: the .xplane.pb is a test "
                         "fixture)")
    ap.add_argument("--capture-ms", type=int, default=3000)
    ap.add_argument("--kineto-steps", type=int, default=300)
    ap.add_argument("--phase-capture-ms", type=int, default=2000,
                    help="the cuda and pytorch phases' capture (a shorter one makes a smaller "
                         "session, e.g. for test fixtures)")
    ap.add_argument("--python", default=sys.executable, help="the Python that has PyTorch")
    ap.add_argument("--cuda-steps", help="an examples/cuda_steps binary already built "
                    "(default: build it with cmake and nvcc)")
    ap.add_argument("--settle-s", type=float, default=10,
                    help="seconds a program runs after registering before it is captured")
    ap.add_argument("--recorder-bound-pct", type=float, default=2.0,
                    help="the recorder phase passes when the median step time with the agent's "
                         "--flight-recorder is within this many %% of without")
    ap.add_argument("--recorder-nccl-ranks", type=int, default=2,
                    help="the recorder phase's NCCL launch check runs the loop with --allreduce "
                         "as this many ranks (at most one per GPU; 0 skips it)")
    ap.add_argument("--dry-run", action="store_true",
                    help="print what each phase would run and exit 0 (no GPU, bundle or process)")
    ap.add_argument("--no-gpu-ok", action="store_true",
                    help="FOR TESTS: run without a GPU (the loop given a stand-in torch)")
    args = ap.parse_args()
    phases = [p for p in args.phases.split(",") if p]
    unknown = set(phases) - {"cuda", "pytorch", "overhead", "recorder", "jax", "switches"}
    if unknown:
        ap.error(f"unknown phase(s) {sorted(unknown)} "
                 "(cuda, pytorch, overhead, recorder, jax, switches)")
    if (args.rounds < 1 or args.idle_steps < 50 or args.capture_ms < 100 or
            args.kineto_steps < 1 or args.settle_s < 0 or args.phase_capture_ms < 100 or
            args.warmup_steps < 20 or args.recorder_rounds < 1 or args.jax_capture_ms < 100):
        ap.error("--rounds >= 1, --idle-steps >= 50, --capture-ms >= 100, --kineto-steps >= 1, "
                 "--settle-s >= 0, --phase-capture-ms >= 100, --warmup-steps >= 20, "
                 "--recorder-rounds >= 1, --jax-capture-ms >= 100")
    if not 0 <= args.recorder_nccl_ranks <= 64:
        ap.error(f"--recorder-nccl-ranks={args.recorder_nccl_ranks}: must be in [0, 64]")
    if not 0 < args.recorder_bound_pct <= 100:
        ap.error(f"--recorder-bound-pct={args.recorder_bound_pct:g}: must be in (0, 100]")
    if args.pin not in ("auto", "none") and not re.fullmatch(r"\d+(-\d+)?(,\d+(-\d+)?)*",
                                                              args.pin):
        ap.error(f"--pin={args.pin}: want auto, none or a CPU list such as 3 or 2-5")
    args.overhead_env_vars, args.overhead_env_base = {}, {}
    for spec in args.overhead_env:
        head, _, assigns = spec.partition(":")
        name, _, base = head.partition("@")
        pairs = [a.partition("=") for a in assigns.split(",") if a]
        if not re.fullmatch(r"[a-z][a-z0-9_]*", name) or not pairs or \
                any(not k or not eq for k, eq, _ in pairs) or base not in ("", "loaded", "kineto") \
                or name in OVERHEAD_KINDS or name in OVERHEAD_PARTIAL:
            ap.error(f"--overhead-env={spec}: want NAME[@loaded|@kineto]:VAR=VAL[,VAR=VAL...] "
                     "with a new lower-case NAME")
        args.overhead_env_vars[name] = {k: v for k, _, v in pairs}
        args.overhead_env_base[name] = base or "idle"
    args.overhead_kinds = [k for k in args.overhead_kinds.split(",") if k]
    known = set(OVERHEAD_KINDS) | set(OVERHEAD_PARTIAL) | set(args.overhead_env_vars)
    if (set(args.overhead_kinds) - known or "none" not in args.overhead_kinds or
            "loaded" not in args.overhead_kinds or
            len(set(args.overhead_kinds)) != len(args.overhead_kinds)):
        ap.error(f"--overhead-kinds={','.join(args.overhead_kinds)}: none and loaded, each kind "
                 f"once, of {sorted(known)}")
    if args.dry_run:
        for line in plan(args, phases):
            print(f"gpu_verify: plan: {line}")
        return 0

    gpus = gpu_present()
    if gpus is None and not args.no_gpu_ok:
        print("gpu_verify: no NVIDIA GPU here (nvidia-smi -L lists none): nothing to verify",
              file=sys.stderr)
        return 77
    try:
        env = Env(args)
    except (Failure, OSError, tarfile.TarError) as e:
        print(f"gpu_verify: {e}", file=sys.stderr)
        return 1
    result = {"gpus": gpus, "libcupti": env.cupti, "bundle": env.bundle,
              "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "phases": {}}
    failed = []
    for phase in phases:
        log(f"phase {phase}")
        try:
            result["phases"][phase] = {"cuda": phase_cuda, "pytorch": phase_pytorch,
                                       "overhead": phase_overhead,
                                       "recorder": phase_recorder,
                                       "jax": phase_jax,
                                       "switches": phase_switches}[phase](env)
            if result["phases"][phase].get("failed"):
                failed.append(phase)
                log(f"phase {phase} FAILED: {result['phases'][phase]['failed']}")
        except (Failure, OSError, subprocess.SubprocessError, ValueError, KeyError) as e:
            result["phases"][phase] = {"error": str(e)}
            failed.append(phase)
            log(f"phase {phase} FAILED: {e}")
            env.stop_all()
        # After every phase: a run cut short (a time limit) keeps what it measured.
        md = write_results(env, gpus, result)
    print(md)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
