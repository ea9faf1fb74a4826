#!/usr/bin/env python3
"""The flight recorder's CUDA light level end to end through real processes, without a GPU.

  cupti_recorder_e2e_check.py --agent=BIN --profctl=BIN --app=BIN

An agent with --collectors=cupti --flight-recorder=30 ("host-a") and two stand-in CUDA ranks
(profctl_fake_cuda_app: the injection library's own agent client; it sends its step signal and,
once the agent's Recorder message asks for them, each step's NCCL all-reduce launch, as the
library's CUPTI launch callbacks would). Then `profctl capture --last=1000ms`: the snapshot's pod
trace must hold both ranks' "ncclAllReduce" launches (kernel_name, nccl_launch_seq without
gaps) on their main-thread lines of host-a's /host:CPU plane, each inside one of its process's
NVTX steps. Exit 0 when all holds, 1 otherwise.
"""

import argparse
import gzip
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "py"))
from profctl_testlib import Failure, Processes  # noqa: E402
from profctl_testlib import wait_for  # noqa: E402

DEADLINE_S = 30
HOST = "host-a"
last_output = [""]  # the last snapshot's summary, for a failure message


def snapshot(args, port, logdir, session):
    """(exit code, pod trace events) of `profctl capture --last=1000ms`. Exit 3 (an empty past:
    no step ended yet) is accepted; anything else but 0 fails."""
    # --tolerance: how punctually a loaded machine takes the snapshot is not what this checks (a
    # run beside two busy loops took one 14 ms after its instant: late, exit 3).
    r = subprocess.run([args.profctl, "capture", f"--workers=127.0.0.1:{port}", "--last=1000ms",
                        "--tolerance=500", f"--logdir={logdir}", f"--session={session}",
                        "--pod-trace-json"],
                       capture_output=True, text=True, timeout=120, check=False)
    last_output[0] = r.stdout[-1200:]
    if r.returncode not in (0, 3):
        raise Failure(f"profctl capture --last exited {r.returncode}: {r.stdout[-1500:]}"
                      f"{r.stderr[-1500:]}")
    with gzip.open(os.path.join(logdir, "plugins", "profile", session, "pod.trace.json.gz"),
                   "rt") as f:
        return r.returncode, json.load(f).get("traceEvents", [])


def launches_and_steps(events):
    """pid of the process -> ([launch events], [(start, end) of its steps]) on HOST's host plane."""
    host_pids = {e["pid"] for e in events if e.get("ph") == "M" and
                 e.get("name") == "process_name" and
                 e.get("args", {}).get("name") == f"{HOST} /host:CPU"}
    lines = {(e["pid"], e.get("tid")): e.get("args", {}).get("name", "") for e in events
             if e.get("ph") == "M" and e.get("name") == "thread_name"}
    out = {}
    for e in events:
        if e.get("pid") not in host_pids or e.get("ph") != "X":
            continue
        m = re.match(r"pid (\d+) tid (\d+)", lines.get((e["pid"], e.get("tid")), ""))
        if not m:
            continue
        launches, steps = out.setdefault(int(m.group(1)), ([], []))
        if "kernel_name" in e.get("args", {}):
            launches.append(e)
        elif re.match(r"(train_)?step \d+$", e["name"]):
            steps.append((e["ts"], e["ts"] + e["dur"]))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--agent", required=True)
    ap.add_argument("--profctl", required=True)
    ap.add_argument("--app", required=True)
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="profctl-cupti-recorder-e2e-")
    procs = Processes(work)
    try:
        return run(args, work, procs)
    except Failure as e:
        print(f"FAIL: {e}\n{procs.log_tails()}")
        return 1
    finally:
        procs.stop_all()
        shutil.rmtree(work, ignore_errors=True)


def run(args, work, procs):
    socket = os.path.join(work, HOST, "agent.sock")
    port = procs.start_agent(args.agent, "agent", [
        f"--name={HOST}", "--collectors=cupti", f"--inject-socket={socket}",
        "--flight-recorder=30"])
    apps, ready = {}, []
    for rank in (0, 1):
        env = dict(os.environ, PROFCTL_AGENT_SOCKET=socket, RANK=str(rank), LOCAL_RANK=str(rank),
                   CUDA_VISIBLE_DEVICES=str(rank))
        ready_file = os.path.join(work, f"rank{rank}.ready")
        apps[rank] = procs.start(f"rank{rank}", [args.app, f"--ready-file={ready_file}",
                                                 "--step-ms=20", "--compute-ms=10"], env)
        ready.append(ready_file)
    wait_for("registration of both ranks", lambda: all(os.path.exists(f) for f in ready), procs,
             timeout_s=DEADLINE_S)
    logdir = os.path.join(work, "logs")
    pids = {apps[r].pid for r in (0, 1)}
    # Snapshots (each a new session) until one holds both ranks' launches and the recorder holds
    # the whole second asked (before that a snapshot is partial, exit 3: SHORT_RECORDER), within
    # the deadline. A snapshot asks the ranks for what they hold, so the launches are there
    # from the first one on.
    attempt = [0]
    found = {}
    last_rc = [None]

    def both_ranks_launched():
        attempt[0] += 1
        last_rc[0], events = snapshot(args, port, logdir, f"last{attempt[0]}")
        found.clear()
        found.update(launches_and_steps(events))
        return last_rc[0] == 0 and all(len(found.get(pid, ([], []))[0]) >= 5 for pid in pids)
    wait_for("a snapshot holding both ranks' NCCL launches", both_ranks_launched, procs,
             timeout_s=DEADLINE_S)
    problems = []
    if last_rc[0] != 0:
        problems.append(f"the snapshot holding the launches exited {last_rc[0]}, want 0: "
                        f"{last_output[0]}")
    for pid in sorted(pids):
        launches, steps = found[pid]
        names = {e["name"] for e in launches}
        if names != {"ncclAllReduce"}:
            problems.append(f"pid {pid}: launch events named {sorted(names)}, want ncclAllReduce")
        kernels = {e["args"]["kernel_name"] for e in launches}
        if kernels != {"ncclDevKernel_AllReduce_Sum_bf16_RING_LL"}:
            problems.append(f"pid {pid}: kernel_name {sorted(kernels)}")
        if any(e.get("tid") != launches[0].get("tid") or e["dur"] != 0 for e in launches):
            problems.append(f"pid {pid}: launches not 0-long on one (the main) thread's line")
        seqs = sorted(int(e["args"]["nccl_launch_seq"]) for e in launches)
        if seqs != list(range(seqs[0], seqs[0] + len(seqs))):
            problems.append(f"pid {pid}: launch sequence numbers with gaps: {seqs}")
        outside = [e["ts"] for e in launches if not any(s <= e["ts"] <= t for s, t in steps)]
        # The snapshot's edges may cut a launch's step off; at most one at each end.
        if len(outside) > 2:
            problems.append(f"pid {pid}: {len(outside)} of {len(launches)} launches in no step")
        print(f"pid {pid}: {len(launches)} NCCL launches (seq {seqs[0]}..{seqs[-1]}), "
              f"{len(steps)} steps")
    for p in problems:
        print(f"FAIL: {p}")
    if problems:
        print(procs.log_tails())
        return 1
    print("cupti_recorder_e2e_check: everything holds")
    return 0


if __name__ == "__main__":
    sys.exit(main())
