#!/usr/bin/env python3
"""The GPU path end to end through real processes, on a machine without a GPU.

  cupti_e2e_check.py --agent=BIN --profctl=BIN --app=BIN [--xprof-check=BIN] [--keep=DIR]

Two agents with --collectors=cupti ("host-a", "host-b"), each with its own inject socket, and
stand-in CUDA processes (profctl_fake_cuda_app: the injection library's own agent client and
CUPTI record conversion, only the GPU simulated) registered on them from launcher variables
(RANK, LOCAL_RANK, CUDA_VISIBLE_DEVICES):

  host-a  rank 0 (GPU 0)  rank 1 (GPU 1, its GPU clock 1.2345 s off the wall clock)
  host-b  rank 2 (GPU 0, 4 ms more compute per step: the straggler)
          rank 3 (GPU 1, SIGKILLs itself 300 ms into the window)
          rank 4 (GPU 2, GPU tracing held by another subscriber, "Nsight Systems")

`profctl capture` of both hosts must succeed (exit 0), print the conflict, and save a session that
tests/gpu_capture_check.py passes: kernels, memcpys and NVTX steps on every live rank's GPU plane
inside the window, launches tied to kernels, a breakdown whose straggler is host-b, the dead rank
and the held one reported by pid/text, the .xplane.pb files conform to XProf. The same check runs
on a real GPU's capture (docs/gpu-verification.md).

Then host-a's agent is SIGKILLed one second into a capture: that capture fails for host-a, its
ranks run on (fail-open), and once an agent is back on the same socket (left stale by the dead
one) they register again by themselves and the next capture has both GPUs' data.
Exit 0 when all holds, 1 otherwise.
"""

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
DEADLINE_S = 30


def wait_for(what, cond, procs):
    """Polls cond() until true; fails when DEADLINE_S passes or a process we started exits."""
    end = time.monotonic() + DEADLINE_S
    while time.monotonic() < end:
        if cond():
            return
        for name, p in procs:
            if p.poll() is not None:
                raise SystemExit(f"FAIL: {name} exited with {p.returncode} while waiting for {what}")
        time.sleep(0.02)
    raise SystemExit(f"FAIL: no {what} within {DEADLINE_S} s")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--agent", required=True)
    ap.add_argument("--profctl", required=True)
    ap.add_argument("--app", required=True)
    ap.add_argument("--xprof-check")
    ap.add_argument("--keep", help="copy the work folder (logs, session) here at the end")
    args = ap.parse_args()

    work = tempfile.mkdtemp(prefix="profctl-cupti-e2e-")
    procs = []  # (name, Popen)
    try:
        return run(args, work, procs)
    finally:
        for _, p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for name, p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                print(f"note: {name} ignored SIGTERM for 10 s; killed")
                p.kill()
                p.wait()
        if args.keep:
            # Everything but sockets (an agent SIGKILLed leaves its socket file behind).
            shutil.copytree(work, args.keep, dirs_exist_ok=True,
                            ignore=lambda d, names: [n for n in names if n.endswith(".sock")])
        shutil.rmtree(work, ignore_errors=True)


def start(procs, name, argv, work, env=None):
    log = open(os.path.join(work, name + ".log"), "w")
    p = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env)
    log.close()
    procs.append((name, p))
    return p


def start_agent(args, work, procs, host, name):
    """An agent named `host` with the cupti collector on WORK/HOST/agent.sock, on a free port
    written to WORK/HOST.port (returned)."""
    port_file = os.path.join(work, host + ".port")
    start(procs, name,
          [args.agent, "--port=0", f"--port-file={port_file}", f"--name={host}",
           "--collectors=cupti", f"--inject-socket={os.path.join(work, host, 'agent.sock')}"],
          work)
    return port_file


def agent_ports(work, hosts):
    return ",".join(f"127.0.0.1:{open(os.path.join(work, h + '.port')).read().strip()}"
                    for h in hosts)


def agent_killed_mid_capture(args, work, procs, apps):
    """host-a's agent dies one second into a capture; its ranks must survive it and register
    with the next agent on their own. Returns the problems found."""
    problems = []
    logdir = os.path.join(work, "logs")
    capture = subprocess.Popen(
        [args.profctl, "capture", f"--workers={agent_ports(work, ['host-a'])}",
         "--duration=2500", f"--logdir={logdir}", "--session=killed", "--tolerance=500"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    procs.append(("capture-killed", capture))  # killed at the end if it hangs
    printed = []
    # profctl exits within the window, its retries and the deadline whatever the agent does:
    # reading its output to the end is bounded by that (and by ctest's timeout).
    for line in capture.stdout:
        printed.append(line)
        if "recording: 1 of" in line:
            agent = dict(procs)["agent-host-a"]
            agent.kill()
            agent.wait()
    try:
        rc = capture.wait(timeout=120)
    except subprocess.TimeoutExpired:
        return problems + ["profctl capture did not exit after its agent was killed"]
    print("".join(printed))
    if rc == 0:
        problems.append("the capture whose only agent was killed mid-window exited 0")
    # The checker must see that this capture holds nothing (it is not a yes-machine).
    failed = subprocess.run([sys.executable, os.path.join(HERE, "gpu_capture_check.py"),
                             os.path.join(logdir, "plugins", "profile", "killed")],
                            capture_output=True, text=True, check=False)
    if failed.returncode != 1 or "FAIL: host-a: status HOST_STATUS_FAILED" not in failed.stdout:
        problems.append(f"gpu_capture_check.py passed the failed capture: {failed.stdout[-800:]}")
    for rank in (0, 1):
        if apps[rank].poll() is not None:
            problems.append(f"rank {rank} exited ({apps[rank].returncode}) when its agent died")
    # A new agent on the same socket path: the old one left its socket file behind.
    port_file = os.path.join(work, "host-a.port")
    os.remove(port_file)
    start_agent(args, work, procs, "host-a", "agent-host-a-2")
    log_path = os.path.join(work, "agent-host-a-2.log")

    def registered_again():
        with open(log_path, errors="replace") as f:
            text = f.read()
        return all(f"pid {apps[r].pid} (" in text and "registered" in text for r in (0, 1))
    wait_for("ranks 0 and 1 registering with the new agent", registered_again, procs[-1:])
    wait_for("the new agent's port file",
             lambda: os.path.exists(port_file) and os.path.getsize(port_file) > 0, procs[-1:])
    r = subprocess.run([args.profctl, "capture", f"--workers={agent_ports(work, ['host-a'])}",
                        "--duration=600", f"--logdir={logdir}", "--session=again",
                        "--tolerance=500"], capture_output=True, text=True, timeout=120,
                       check=False)
    if r.returncode != 0:
        problems.append(f"the capture after the agent came back exited {r.returncode}: "
                        f"{r.stdout[-1500:]}{r.stderr[-1500:]}")
    check = [sys.executable, os.path.join(HERE, "gpu_capture_check.py"),
             os.path.join(logdir, "plugins", "profile", "again"), "--host=host-a:2",
             "--min-steps=10"]
    if subprocess.run(check, check=False).returncode != 0:
        problems.append("gpu_capture_check.py failed on the capture after the agent came back")
    return problems


def run(args, work, procs):
    port_files = [start_agent(args, work, procs, host, "agent-" + host)
                  for host in ("host-a", "host-b")]
    wait_for("agent port files", lambda: all(
        os.path.exists(f) and os.path.getsize(f) > 0 for f in port_files), procs)
    workers = agent_ports(work, ["host-a", "host-b"])

    # Every rank's all-reduce ends when the slowest rank (host-b's rank 2: 1.5 ms input + 14 ms
    # compute) is ready.
    common = ["--step-ms=20", "--input-ms=1.5", "--pod-ready-ms=15.5", "--allreduce-ms=2"]
    ranks = [  # (host, rank, local rank, device, extra flags)
        ("host-a", 0, 0, "0", ["--compute-ms=10"]),
        ("host-a", 1, 1, "1", ["--compute-ms=10", "--gpu-offset-ms=1234.5"]),
        ("host-b", 2, 0, "0", ["--compute-ms=14"]),
        ("host-b", 3, 1, "1", ["--compute-ms=10", "--die-in-window-ms=300"]),
        ("host-b", 4, 2, "2", ["--compute-ms=10", "--held-by=Nsight Systems"]),
    ]
    ready = []
    apps = {}
    for host, rank, local, device, extra in ranks:
        env = dict(os.environ, PROFCTL_AGENT_SOCKET=os.path.join(work, host, "agent.sock"),
                   RANK=str(rank), LOCAL_RANK=str(local), CUDA_VISIBLE_DEVICES=device)
        ready_file = os.path.join(work, f"rank{rank}.ready")
        apps[rank] = start(procs, f"rank{rank}",
                           [args.app, f"--ready-file={ready_file}"] + common + extra, work, env)
        ready.append(ready_file)
    wait_for("registration of every rank", lambda: all(os.path.exists(f) for f in ready), procs)

    logdir = os.path.join(work, "logs")
    # A wide --tolerance: what is under test is the GPU path, not how punctually a loaded CI
    # machine starts the agents' windows.
    cmd = [args.profctl, "capture", f"--workers={workers}", "--duration=1500",
           f"--logdir={logdir}", "--session=gpu", "--tolerance=500"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    print(r.stdout + r.stderr)
    problems = []
    if r.returncode != 0:
        problems.append(f"profctl capture exited {r.returncode}")
    if "held by another CUPTI subscriber (Nsight Systems)" not in r.stdout:
        problems.append("profctl capture did not print rank 4's conflict "
                        "('held by another CUPTI subscriber (Nsight Systems)')")
    try:
        if apps[3].wait(timeout=DEADLINE_S) != -signal.SIGKILL:
            problems.append(f"rank 3 did not die in the window (exit {apps[3].returncode})")
    except subprocess.TimeoutExpired:
        problems.append("rank 3 did not die in the window (still running)")
    check = [sys.executable, os.path.join(HERE, "gpu_capture_check.py"),
             os.path.join(logdir, "plugins", "profile", "gpu"),
             "--host=host-a:2", "--host=host-b:1", "--min-steps=20", "--straggler=host-b",
             "--unavailable=Nsight Systems", f"--lost-pid={apps[3].pid}"]
    if args.xprof_check:
        check.append(f"--xprof-check={args.xprof_check}")
    if subprocess.run(check, check=False).returncode != 0:
        problems.append("gpu_capture_check.py failed (above)")
    problems += agent_killed_mid_capture(args, work, procs, apps)
    for name, p in procs:
        if name not in ("rank3", "agent-host-a", "capture-killed") and p.poll() is not None:
            problems.append(f"{name} exited ({p.returncode}) during the captures")
    for p in problems:
        print(f"FAIL: {p}")
    if problems:
        for name, _ in procs:
            path = os.path.join(work, name + ".log")
            if not os.path.exists(path):
                continue
            with open(path, errors="replace") as f:
                print(f"--- {name}.log (last lines)\n" + "".join(f.readlines()[-15:]))
        return 1
    print("cupti_e2e_check: everything holds")
    return 0


if __name__ == "__main__":
    sys.exit(main())
