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

import os
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "py"))
from profctl_testlib import Failure, check_parser, run_in_work_folder  # noqa: E402
from profctl_testlib import wait_for as wait_until  # noqa: E402

DEADLINE_S = 30


def wait_for(what, cond, procs):
    """wait_until with this check's deadline."""
    wait_until(what, cond, procs, timeout_s=DEADLINE_S)


def main():
    ap = check_parser(__doc__, binaries=("agent", "profctl", "app"))
    ap.add_argument("--xprof-check")
    ap.add_argument("--keep", help="copy the work folder (logs, session) here at the end")
    args = ap.parse_args()
    return run_in_work_folder("profctl-cupti-e2e-", lambda work, procs: run(args, work, procs),
                              keep=args.keep)


def cupti_agent_flags(procs, host):
    """The flags of an agent named `host` with the cupti collector on WORK/HOST/agent.sock."""
    return [f"--name={host}", "--collectors=cupti",
            f"--inject-socket={os.path.join(procs.work, host, 'agent.sock')}"]


def workers(ports):
    return ",".join(f"127.0.0.1:{p}" for p in ports)


def agent_killed_mid_capture(args, work, procs, apps, ports):
    """host-a's agent dies one second into a capture; its ranks must survive it and register
    with the next agent on their own. Returns the problems found."""
    problems = []
    logdir = os.path.join(work, "logs")
    capture = procs.start("capture-killed", [
        args.profctl, "capture", f"--workers={workers([ports['host-a']])}", "--duration=2500",
        f"--logdir={logdir}", "--session=killed", "--tolerance=500", "--pod-trace-json"])
    # The agent says when its window starts (on its clock, which is this machine's: no skew);
    # it is killed one second after that.
    start_at = int(procs.wait_line("agent-host-a", r"capture 'killed' accepted: start_at=(\d+)",
                                   DEADLINE_S, watch=["capture-killed"]).group(1))
    wait_for("1 s of host-a's window", lambda: time.time_ns() >= start_at + 10**9,
             procs.only(["agent-host-a", "capture-killed"]))
    procs.stop("agent-host-a", signal.SIGKILL)
    # profctl exits within the window, its retries and the deadline whatever the agent does.
    try:
        wait_until("end of profctl capture after its agent was killed",
                   lambda: capture.poll() is not None, timeout_s=120)
    except Failure:
        return problems + ["profctl capture did not exit after its agent was killed"]
    rc = capture.returncode
    print(procs.output("capture-killed"))
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
    port = procs.start_agent(args.agent, "agent-host-a-2", cupti_agent_flags(procs, "host-a"))
    log_path = procs.log_path("agent-host-a-2")

    def registered_again():
        with open(log_path, errors="replace") as f:
            text = f.read()
        return all(f"pid {apps[r].pid} (" in text and "registered" in text for r in (0, 1))
    wait_for("ranks 0 and 1 registering with the new agent", registered_again,
             [("agent-host-a-2", procs.get("agent-host-a-2"))])
    r = subprocess.run([args.profctl, "capture", f"--workers={workers([port])}",
                        "--duration=600", f"--logdir={logdir}", "--session=again",
                        "--tolerance=500", "--pod-trace-json"],
                       capture_output=True, text=True, timeout=120, check=False)
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
    ports = {host: procs.start_agent(args.agent, "agent-" + host, cupti_agent_flags(procs, host))
             for host in ("host-a", "host-b")}

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
        apps[rank] = procs.start(f"rank{rank}",
                                 [args.app, f"--ready-file={ready_file}"] + common + extra, env)
        ready.append(ready_file)
    wait_for("registration of every rank", lambda: all(os.path.exists(f) for f in ready), procs)

    logdir = os.path.join(work, "logs")
    # A wide --tolerance: what is under test is the GPU path, not how punctually a loaded CI
    # machine starts the agents' windows.
    cmd = [args.profctl, "capture", f"--workers={workers(ports.values())}", "--duration=1500",
           f"--logdir={logdir}", "--session=gpu", "--tolerance=500", "--pod-trace-json"]
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
    problems += agent_killed_mid_capture(args, work, procs, apps, ports)
    for name, code in procs.exited():
        if name not in ("rank3", "agent-host-a", "capture-killed"):
            problems.append(f"{name} exited ({code}) during the captures")
    for p in problems:
        print(f"FAIL: {p}")
    if problems:
        print(procs.log_tails())
        return 1
    print("cupti_e2e_check: everything holds")
    return 0


if __name__ == "__main__":
    sys.exit(main())
