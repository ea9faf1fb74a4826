#!/usr/bin/env python3
"""The real-GPU check in one command: capture real CUDA processes under
libprofctl_inject.so, check what arrived, and measure the overhead (docs/gpu-verification.md).

  scripts/gpu_verify.py --bundle=PROFCTL_BUNDLE(.tar.gz|dir) --out=DIR
                        [--phases=cuda,pytorch,overhead,recorder] [--rounds=2]
                        [--idle-steps=300] [--capture-ms=3000] [--kineto-steps=300]
                        [--cuda-steps=BIN] [--settle-s=10] [--phase-capture-ms=2000]
                        [--recorder-bound-pct=2] [--recorder-nccl-ranks=2] [--dry-run]

Run it from the repository root on a machine with an NVIDIA GPU and the CUDA toolkit (nvcc for
examples/cuda_steps, PyTorch for examples/pytorch_steps.py); profctl itself comes from the bundle
(deploy/bundle/make_bundle.sh), since a GPU image has no gRPC; the rest comes from this checkout
(tests/gpu_capture_check.py, tests/py/profctl_testlib.py, examples/). Only the Python standard
library.

Phases:
  cuda      build examples/cuda_steps (cmake + nvcc; or take --cuda-steps), run it under
            injection beside an agent with --collectors=cupti, wait until it registers and then
            --settle-s, `profctl capture` --phase-capture-ms (2 s), and run tests/gpu_capture_check.py on the session
            (kernels, memcpys, NVTX steps with sane times, a breakdown that adds up).
  pytorch   the same with examples/pytorch_steps.py.
  overhead  the same PyTorch loop, side by side, --rounds times, alternating:
              A: no injection; idle steps, then --kineto-steps steps under torch.profiler
                 (CPU + CUDA activities), then idle again;
              B: under injection with the agent; idle steps (library loaded, not recording),
                 then a --capture-ms profctl capture, then idle again.
            Every step's wall-clock start and end come from the loop's --step-log; a step counts as
            "capturing" when it overlaps the capture, from the requested start (when the
            processes enable CUPTI) to the agent's stop (session.json), so enabling and disabling
            are the capture's cost; the second after it (the flush) and A's steps after
            torch.profiler stopped are reported apart. Mean, median and p90 step time per
            condition, and each condition's overhead against A's idle steps before
            torch.profiler ran. Targets: loaded idle < 0.5 %, capturing < 3 %, capturing no
            worse than Kineto.
  recorder  the flight recorder's always-on level (docs/cupti.md): the same PyTorch loop under
            injection, --rounds times, alternating an agent without --flight-recorder ("off")
            and one with --flight-recorder=30 ("on"), idle steps only (no capture while timed);
            at the end of each "on" run a `profctl capture --last=5s` (its session kept, and
            whether it held steps). Median step time on vs off; passes when "on" is within
            --recorder-bound-pct (2 %) of "off". "On" includes the light level's CUPTI launch
            callback on every kernel launch of the loop. Then the collective launches: the loop
            with --allreduce (torch.distributed NCCL) as --recorder-nccl-ranks ranks (2; at
            most one per GPU; 0 skips it) under injection beside an agent with the recorder, a
            `profctl capture --last=5s`, and its pod trace must hold the ranks' NCCL launches:
            "nccl<Op>" events with a kernel_name on the host plane (docs/cupti.md), from every
            rank. With one GPU (one rank) NCCL may launch no kernel: reported, not required.
            Not one of the default phases.

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
    kineto_seen = False
    for _step, start, end, tag in step_log["steps"]:
        ms = (end - start) / 1e6
        if tag == "kineto":
            kineto_seen = True
            out["kineto"].append(ms)
        elif any(start < hi and end > lo for lo, hi in windows):
            out["capturing"].append(ms)
        elif any(hi <= start < hi + tail_ns for _, hi in windows):
            out["after_capture"].append(ms)
        elif kineto_seen:
            out["after_kineto"].append(ms)
        else:
            out["idle"].append(ms)
    return out


def stats(values):
    if not values:
        return None
    s = sorted(values)
    return {"steps": len(s), "mean_ms": statistics.fmean(s), "median_ms": statistics.median(s),
            "p90_ms": s[min(len(s) - 1, int(0.9 * len(s)))]}


def overhead_table(samples):
    """samples: condition -> [step ms], over every round. Conditions: "none" (A idle), "kineto"
    (A under torch.profiler), "loaded" (B idle), "capturing" (B inside a capture)."""
    table = {name: stats(values) for name, values in samples.items()}
    base = table.get("none")
    for name, row in table.items():
        if row is None or base is None:
            continue
        row["overhead_mean_pct"] = 100.0 * (row["mean_ms"] / base["mean_ms"] - 1)
        row["overhead_median_pct"] = 100.0 * (row["median_ms"] / base["median_ms"] - 1)
    verdicts = {}
    if base is not None:
        def pct(name):
            return table[name]["overhead_median_pct"] if table.get(name) else None
        loaded, capturing, kineto = pct("loaded"), pct("capturing"), pct("kineto")
        verdicts["loaded_under_0.5pct"] = loaded is not None and loaded < 0.5
        verdicts["capturing_under_3pct"] = capturing is not None and capturing < 3.0
        verdicts["capturing_no_worse_than_kineto"] = (capturing is not None and
                                                      kineto is not None and capturing <= kineto)
    return table, verdicts


def recorder_table(samples, bound_pct):
    """samples: "off" / "on" -> [step ms]. The stats of each, the overhead of "on" against
    "off" (median and mean, %), and whether the median's is within bound_pct."""
    table = {name: stats(values) for name, values in samples.items()}
    off, on = table.get("off"), table.get("on")
    verdicts = {f"recorder_within_{bound_pct:g}pct": False}
    if off is not None and on is not None:
        on["overhead_mean_pct"] = 100.0 * (on["mean_ms"] / off["mean_ms"] - 1)
        on["overhead_median_pct"] = 100.0 * (on["median_ms"] / off["median_ms"] - 1)
        verdicts[f"recorder_within_{bound_pct:g}pct"] = on["overhead_median_pct"] < bound_pct
    return table, verdicts


def markdown(table, verdicts):
    names = {"none": "no tracer", "loaded": "libprofctl_inject.so loaded, idle",
             "capturing": "profctl capturing", "kineto": "torch.profiler (Kineto, CUDA)",
             "after_capture": "(1 s after a profctl capture: flush)",
             "after_kineto": "(no tracer, after torch.profiler stopped)",
             "off": "library loaded, agent without --flight-recorder",
             "on": "library loaded, agent with --flight-recorder"}
    lines = ["| condition | steps | mean ms | median ms | p90 ms | overhead (median) |",
             "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for key in ("none", "loaded", "capturing", "kineto", "after_capture", "after_kineto", "off",
                "on"):
        if key not in table:
            continue
        row = table[key]
        if row is None:
            lines.append(f"| {names[key]} | 0 | | | | |")
            continue
        over = row.get("overhead_median_pct")
        lines.append(f"| {names[key]} | {row['steps']} | {row['mean_ms']:.3f} | "
                     f"{row['median_ms']:.3f} | {row['p90_ms']:.3f} | "
                     f"{'' if over is None or key in ('none', 'off') else f'{over:+.2f} %'} |")
    lines.append("")
    for k, v in verdicts.items():
        lines.append(f"- {k}: {'yes' if v else 'NO'}")
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

    def start(self, name, argv, env=None, cwd=None):
        """A program, its output in DIR/NAME.log."""
        return self.procs.start(name, argv, env=env, cwd=cwd)

    def wait_registered(self, name, timeout_s=120):
        """Until the agent logs program NAME's registration (the library loaded at CUDA's
        start); fails as soon as either exits."""
        pid = self.procs.get(name).pid
        self.procs.wait_line("agent", rf"inject server: pid {pid} \(.*\) registered", timeout_s,
                             watch=[name])

    def capture(self, session, duration_ms, ok_codes=(0,), last=False):
        """profctl capture of the agent (with `last`: a snapshot of the past duration_ms,
        --last); returns (session folder, the agent's recording window (CLOCK_REALTIME ns), what
        profctl printed). Exit codes outside `ok_codes` fail."""
        logdir = os.path.join(self.out, "logs")
        window = f"--last={duration_ms}ms" if last else f"--duration={duration_ms}"
        r = subprocess.run([self.profctl, "capture", f"--workers=127.0.0.1:{self.port}",
                            window, f"--logdir={logdir}",
                            f"--session={session}", "--tolerance=500", "--pod-trace-json"],
                           capture_output=True, text=True, timeout=duration_ms / 1000 + 120,
                           check=False)
        write_atomically(os.path.join(self.out, f"capture_{session}.log"), r.stdout + r.stderr)
        session_dir = os.path.join(logdir, "plugins", "profile", session)
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


def overhead_run(env, kind, round_no):
    """One run of the loop: kind "A" (no injection, a torch.profiler window) or "B" (injection,
    a profctl capture). Returns (step log, capture windows, what was printed)."""
    args = env.args
    name = f"overhead_{kind}{round_no}"
    step_log = os.path.join(env.out, name + ".steps.json")
    run_env = env.injected_env() if kind == "B" else dict(os.environ)
    progress = 50

    def wait_for_step(n):  # the first progress line at or past step n
        env.procs.wait_line(
            name, rf"pytorch_steps: step {(n + progress - 1) // progress * progress}$", 600)

    app = env.start(name, pytorch_argv(args, step_log, progress), env=run_env)
    windows = []
    notes = {}
    try:
        if kind == "B" and not args.no_gpu_ok:
            env.wait_registered(name)
        warm = 20 + args.idle_steps
        wait_for_step(warm)
        if kind == "A":
            app.send_signal(signal.SIGUSR1)
            env.procs.wait_line(name, r"kineto window steps \d+\.\.\d+ done", 600)
        else:
            # Only the window matters here (what arrives is the capture phases' check): a partial
            # session (exit 3: a late start, a breakdown with no steps) still times the steps.
            session_dir, window, printed = env.capture(name, args.capture_ms, ok_codes=(0, 3))
            windows.append(window)
            notes["session_dir"] = session_dir
            notes["capture_printed_tail"] = printed[-800:]
        target = current_step(env.procs, name, 600) + args.idle_steps
        wait_for_step(target)
    finally:
        rc = env.procs.stop(name)
    if not os.path.exists(step_log):
        raise Failure(f"{name}: the loop exited {rc} without its step log "
                      f"(log: {env.procs.log_path(name)})")
    if rc != 0:
        notes["exit"] = rc  # it wrote its steps, then failed (at exit): the steps still count
    with open(step_log) as f:
        return json.load(f), windows, notes


def phase_overhead(env):
    env.start_cupti_agent()
    samples = {"none": [], "kineto": [], "loaded": [], "capturing": [], "after_capture": [],
               "after_kineto": []}
    runs = []
    try:
        for round_no in range(1, env.args.rounds + 1):
            for kind in ("A", "B"):
                step_log, windows, notes = overhead_run(env, kind, round_no)
                split = classify(step_log, windows)
                if kind == "A":
                    samples["none"] += split["idle"]
                    samples["kineto"] += split["kineto"]
                    samples["after_kineto"] += split["after_kineto"]
                else:
                    samples["loaded"] += split["idle"]
                    samples["capturing"] += split["capturing"]
                    samples["after_capture"] += split["after_capture"]
                runs.append({"run": f"{kind}{round_no}", "windows_ns": windows,
                             "kineto_enter_exit_ms": step_log.get("kineto_enter_exit_ms", []),
                             **{k: stats(v) for k, v in split.items()}, **notes})
                log(f"run {kind}{round_no}: " + ", ".join(
                    f"{k} {len(v)} steps" for k, v in split.items() if v))
    finally:
        env.stop_all()
    table, verdicts = overhead_table(samples)
    return {"runs": runs, "table": table, "verdicts": verdicts,
            "markdown": markdown(table, verdicts)}


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
        env.start(name, pytorch_argv(args, step_log, progress), env=env.injected_env())
        try:
            if not args.no_gpu_ok:
                env.wait_registered(name)
            target = 20 + args.idle_steps
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
        split = classify(json.load(f), [])
    return split["idle"], notes


def phase_recorder(env):
    samples = {"off": [], "on": []}
    runs = []
    nccl = None
    try:
        for round_no in range(1, env.args.rounds + 1):
            for on in (False, True):
                steps, notes = recorder_run(env, on, round_no)
                # The first 20 steps warm up (compilation, allocator): not timed.
                steps = steps[20:]
                samples["on" if on else "off"] += steps
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
    table, verdicts = recorder_table(samples, env.args.recorder_bound_pct)
    md = markdown(table, verdicts)
    if nccl is not None:
        seen = nccl["launches"] > 0 and len(nccl["processes"]) >= nccl["ranks"]
        verdicts["recorder_nccl_launches_from_every_rank"] = seen
        ops = ", ".join(f"{k} {v}" for k, v in sorted(nccl["ops"].items()))
        md += (f"\n\nNCCL launches in a 5 s snapshot of {nccl['ranks']} rank(s): "
               f"{nccl['launches']} ({ops}) on {nccl['threads']} thread(s) of {len(nccl['processes'])} process(es), "
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
                lines.append(f"overhead round {r}: A: pytorch_steps without injection, "
                             f"{args.idle_steps} idle + {args.kineto_steps} torch.profiler steps"
                             f"; B: under injection beside {agent}, {args.idle_steps} idle steps, "
                             f"profctl capture --duration={args.capture_ms}, idle again")
        elif phase == "recorder":
            for r in range(1, args.rounds + 1):
                lines.append(f"recorder round {r}: off: {agent} (no --flight-recorder), "
                             f"pytorch_steps under injection, 20 + {args.idle_steps} steps; on: "
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
    unknown = set(phases) - {"cuda", "pytorch", "overhead", "recorder"}
    if unknown:
        ap.error(f"unknown phase(s) {sorted(unknown)} (cuda, pytorch, overhead, recorder)")
    if (args.rounds < 1 or args.idle_steps < 50 or args.capture_ms < 100 or
            args.kineto_steps < 1 or args.settle_s < 0 or args.phase_capture_ms < 100):
        ap.error("--rounds >= 1, --idle-steps >= 50, --capture-ms >= 100, --kineto-steps >= 1, "
                 "--settle-s >= 0, --phase-capture-ms >= 100")
    if not 0 <= args.recorder_nccl_ranks <= 64:
        ap.error(f"--recorder-nccl-ranks={args.recorder_nccl_ranks}: must be in [0, 64]")
    if not 0 < args.recorder_bound_pct <= 100:
        ap.error(f"--recorder-bound-pct={args.recorder_bound_pct:g}: must be in (0, 100]")
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
                                       "recorder": phase_recorder}[phase](env)
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
