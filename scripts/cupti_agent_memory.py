#!/usr/bin/env python3
"""Peak memory of a profctl-agent collecting CUPTI records (docs/agent-protection.md).

  cupti_agent_memory.py --agent=BIN --profctl=BIN --app=BIN [--procs=1] [--kernels=4000]
                        [--duration-ms=2000] [--agent-arg=--max-held-mb=512 ...]

One agent with --collectors=cupti under `/usr/bin/time -v`, --procs stand-in CUDA processes
(tests/fake_cuda_app.cc, --kernels compute kernels per 20 ms step) registered on it, one
`profctl capture` of --duration-ms; then the agent is stopped and this prints what it received
(its "cupti: ... bytes received" log line), its resident set before the capture and its peak
(time's "Maximum resident set size"), and the peak over the bytes received. Measures only: it
asserts nothing (exit 1 only when a step fails).
"""

import os
import re
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "py"))
from profctl_testlib import check_parser, read_port, run_in_work_folder, wait_for  # noqa: E402

MIB = 1 << 20


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        return int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1))


def main():
    ap = check_parser(__doc__, binaries=("agent", "profctl", "app"))
    ap.add_argument("--procs", type=int, default=1)
    ap.add_argument("--kernels", type=int, default=4000)
    ap.add_argument("--duration-ms", type=int, default=2000)
    ap.add_argument("--agent-arg", action="append", default=[])
    args = ap.parse_args()
    return run_in_work_folder("profctl-cupti-mem-", lambda work, procs: run(args, work, procs))


def run(args, work, procs):
    sock = os.path.join(work, "agent.sock")
    port_file = os.path.join(work, "agent.port")
    time_out = os.path.join(work, "time.txt")
    timed = procs.start("agent", [
        "/usr/bin/time", "-v", "-o", time_out, args.agent, "--port=0", "--bind=127.0.0.1",
        f"--port-file={port_file}", "--name=mem", "--collectors=cupti",
        f"--inject-socket={sock}", *args.agent_arg])
    wait_for("the agent's port file",
             lambda: os.path.exists(port_file) and os.path.getsize(port_file) > 0,
             procs, timeout_s=30)
    port = read_port(port_file)
    with open(f"/proc/{timed.pid}/task/{timed.pid}/children") as f:
        agent_pid = int(f.read().split()[0])
    ready = []
    for rank in range(args.procs):
        env = dict(os.environ, PROFCTL_AGENT_SOCKET=sock, RANK=str(rank), LOCAL_RANK=str(rank),
                   CUDA_VISIBLE_DEVICES=str(rank))
        ready_file = os.path.join(work, f"rank{rank}.ready")
        procs.start(f"rank{rank}", [args.app, f"--ready-file={ready_file}",
                                    f"--kernels={args.kernels}"], env)
        ready.append(ready_file)
    wait_for("registration of every process", lambda: all(os.path.exists(f) for f in ready),
             procs, timeout_s=30)
    base = rss_kib(agent_pid)
    t0 = time.monotonic()
    r = subprocess.run([args.profctl, "capture", f"--workers=127.0.0.1:{port}",
                        f"--duration={args.duration_ms}", f"--logdir={work}/logs",
                        "--session=mem", "--tolerance=500"],
                       capture_output=True, text=True, timeout=600, check=False)
    took = time.monotonic() - t0
    print((r.stdout + r.stderr)[-1500:])
    os.kill(agent_pid, signal.SIGTERM)
    timed.wait(timeout=60)
    with open(time_out) as f:
        peak = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", f.read()).group(1))
    log = procs.output("agent")
    m = re.search(r"cupti: (\d+) processes, (\d+) bytes received", log)
    received = int(m.group(2)) if m else None
    trace = sum(os.path.getsize(os.path.join(d, n)) for d, _, ns in os.walk(f"{work}/logs")
                for n in ns if n.endswith(".xplane.pb"))
    print(f"capture exit {r.returncode} in {took:.1f} s; processes {args.procs}, kernels/step "
          f"{args.kernels}, window {args.duration_ms} ms")
    print(f"agent RSS before the capture {base / 1024:.0f} MiB, peak {peak / 1024:.0f} MiB; "
          f"trace saved {trace / MIB:.0f} MiB")
    if received:
        print(f"received {received / MIB:.0f} MiB: peak / received {peak * 1024 / received:.2f}, "
              f"(peak - before) / received {(peak - base) * 1024 / received:.2f}")
    else:
        print("received: not logged by this agent (an agent older than its received-bytes log line)")
    for line in log.splitlines():
        if "cupti:" in line and ("bytes" in line or "over" in line or "cap" in line):
            print("agent:", line[-300:])
    return 0


if __name__ == "__main__":
    sys.exit(main())
