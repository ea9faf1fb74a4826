#!/usr/bin/env python3
"""Checks a GPU capture that `profctl capture` saved: did kernels, memcpys and NVTX steps arrive
with sane times, and does the breakdown make sense?

  gpu_capture_check.py SESSION_DIR [--host=NAME[:GPUS]]... [--min-steps=N] [--straggler=HOST]
                       [--unavailable=TEXT] [--lost-pid=PID] [--xprof-check=BIN] [--summary=FILE]

SESSION_DIR is LOGDIR/plugins/profile/SESSION. Only the Python standard library is used (it runs
on a GPU image that has no profctl build): it reads session.json, pod.trace.json.gz (the pod
trace as JSON: capture with --pod-trace-json) and pod_step_breakdown.json.

Every host (all of session.json's, or those named by --host, each with at least GPUS GPU planes,
default 1):
- its status is OK and its recording complete;
- each of its GPU planes ("<host> /device:GPU:<n>") holds kernels (with kernel_details) and
  memcpys (with memcpy_details), all inside the host's recording window (session.json's
  aligned_start_ns..aligned_stop_ns; a late host's is later) with 50 ms of slack, none with a
  negative or window-long duration, and most kernels (90 %) carry a correlation_id that a CUDA API
  call on the host plane also carries (the launch and its kernel are tied together);
- its host plane holds NVTX step ranges ("train_step <n>"), at least --min-steps (default 3) per
  process, inside its window;
- in the breakdown: at least --min-steps steps with this host in every one (but the first and
  the last, which a window edge may cut on some hosts), each host-step's
  categories summing to its step time (to 0.01 ms), compute > 0 in most steps, and step times
  within [0.2, 5] x the host's median (no absurd step).
--straggler: the breakdown names HOST the straggler in most steps. --unavailable: some warning
says GPU tracing was unavailable and contains TEXT (a conflict is reported, never silent).
--lost-pid: the capture says pid PID vanished (its data lost, the others' kept). --xprof-check:
run that checker on every .xplane.pb. --summary: write the per-host numbers as JSON there.

Prints what it checked; exit 0 when everything holds, 1 otherwise (each failure on a FAIL: line).
"""

import argparse
import collections
import gzip
import json
import os
import re
import statistics
import subprocess
import sys

SLACK_US = 50_000
STEP_RE = re.compile(r"^train_step (\d+)$")


class Checker:
    def __init__(self):
        self.failures = []

    def ok(self, msg):
        print(f"ok: {msg}")

    def fail(self, msg):
        print(f"FAIL: {msg}")
        self.failures.append(msg)

    def expect(self, cond, ok_msg, fail_msg):
        (self.ok if cond else self.fail)(ok_msg if cond else fail_msg)
        return cond


def load(c, session_dir, name, opener=open):
    path = os.path.join(session_dir, name)
    try:
        with opener(path, "rt") as f:
            return json.load(f)
    except (OSError, ValueError, EOFError) as e:
        c.fail(f"cannot read {path}: {e}")
        return None


def parse_hosts(specs, session):
    if not specs:
        return {h["host"]: 1 for h in session.get("hosts", [])}
    hosts = {}
    for spec in specs:
        name, _, gpus = spec.partition(":")
        if not name or (gpus and not gpus.isdigit()):
            raise SystemExit(f"gpu_capture_check: --host wants NAME[:GPUS], got '{spec}'")
        hosts[name] = int(gpus) if gpus else 1
    return hosts


def planes_of(events):
    """pid -> plane name (the trace's process_name metadata)."""
    return {e["pid"]: e["args"]["name"] for e in events
            if e.get("ph") == "M" and e.get("name") == "process_name"}


def check_session(c, session, hosts):
    c.expect(session.get("status") == "SESSION_STATUS_OK",
             "session status OK", f"session status is {session.get('status')}")
    by_name = {h.get("host"): h for h in session.get("hosts", [])}
    for host in hosts:
        h = by_name.get(host)
        if h is None:
            c.fail(f"{host}: not in session.json (hosts: {sorted(by_name)})")
            continue
        c.expect(h.get("status") == "HOST_STATUS_OK" and
                 h.get("recording") == "RECORDING_COMPLETE",
                 f"{host}: captured, recording complete",
                 f"{host}: status {h.get('status')}, recording {h.get('recording')} "
                 f"({h.get('error', h.get('recording_detail', ''))})")


def host_windows(session, hosts, duration_us):
    """host -> its recording window in the pod trace's microseconds (0 = the common start): a
    host that started late (inside --tolerance) records later than the common window."""
    base = int(session.get("start_at_ns", 0) or 0)
    out = {}
    for h in session.get("hosts", []):
        name = h.get("host")
        start, stop = h.get("aligned_start_ns"), h.get("aligned_stop_ns")
        if name in hosts and base and start and stop:
            out[name] = ((int(start) - base) / 1000, (int(stop) - base) / 1000)
    return {host: out.get(host, (0, duration_us)) for host in hosts}


def check_trace(c, trace, hosts, windows, min_steps, summary):
    events = trace.get("traceEvents", [])
    planes = planes_of(events)
    by_pid = collections.defaultdict(list)
    for e in events:
        if e.get("ph") == "X":
            by_pid[e["pid"]].append(e)
    for host, want_gpus in hosts.items():
        s = summary.setdefault(host, {})
        lo, hi = windows[host][0] - SLACK_US, windows[host][1] + SLACK_US
        host_pid = next((p for p, n in planes.items() if n == f"{host} /host:CPU"), None)
        gpu_pids = sorted(p for p, n in planes.items()
                          if re.fullmatch(re.escape(host) + r" /device:GPU:\d+", n))
        if not c.expect(len(gpu_pids) >= want_gpus,
                        f"{host}: {len(gpu_pids)} GPU plane(s)",
                        f"{host}: {len(gpu_pids)} GPU plane(s), want at least {want_gpus} "
                        f"(planes: {sorted(planes.values())})"):
            continue
        api_corr = set()
        steps_by_thread = collections.defaultdict(list)
        if host_pid is None:
            c.fail(f"{host}: no '{host} /host:CPU' plane (CUDA API calls, NVTX ranges)")
        else:
            for e in by_pid[host_pid]:
                corr = e.get("args", {}).get("correlation_id")
                if corr is not None and e["name"].startswith(("cuda", "cu")):
                    api_corr.add(corr)
                m = STEP_RE.match(e["name"])
                if m:
                    steps_by_thread[e.get("tid")].append(e)
        s["api_calls"] = len(api_corr)
        s["gpus"] = {}
        for pid in gpu_pids:
            name = planes[pid]
            kernels = [e for e in by_pid[pid] if "kernel_details" in e.get("args", {})]
            copies = [e for e in by_pid[pid] if "memcpy_details" in e.get("args", {})]
            c.expect(kernels, f"{name}: {len(kernels)} kernels", f"{name}: no kernels")
            c.expect(copies, f"{name}: {len(copies)} memcpys", f"{name}: no memcpys")
            outside = [e for e in kernels + copies
                       if e["ts"] < lo or e["ts"] + e["dur"] > hi or e["dur"] < 0 or
                       e["dur"] > hi - lo]
            c.expect(not outside, f"{name}: every kernel and memcpy inside the window",
                     f"{name}: {len(outside)} events outside [{lo:.0f}, {hi:.0f}] us or with an "
                     f"absurd duration, e.g. {outside[:1]}")
            tied = sum(1 for e in kernels if e["args"].get("correlation_id") in api_corr)
            if kernels:
                c.expect(tied >= 0.9 * len(kernels),
                         f"{name}: {tied}/{len(kernels)} kernels tied to their launch",
                         f"{name}: only {tied}/{len(kernels)} kernels have a correlation_id "
                         "that a CUDA API call on the host plane has")
            busy_us = sum(e["dur"] for e in kernels)
            s["gpus"][name] = {"kernels": len(kernels), "memcpys": len(copies),
                               "kernel_busy_ms": round(busy_us / 1000, 3)}
        if host_pid is None:
            continue
        if not c.expect(steps_by_thread, f"{host}: NVTX step ranges on "
                        f"{len(steps_by_thread)} thread(s)",
                        f"{host}: no NVTX step ranges ('train_step <n>') on its host plane"):
            continue
        for tid, steps in sorted(steps_by_thread.items()):
            inside = [e for e in steps if lo <= e["ts"] and e["ts"] + e["dur"] <= hi and
                      e["dur"] > 0]
            c.expect(len(inside) >= min_steps,
                     f"{host} thread {tid}: {len(inside)} NVTX steps inside the window",
                     f"{host} thread {tid}: {len(inside)} NVTX steps inside the window "
                     f"(of {len(steps)}), want at least {min_steps}")
        s["nvtx_steps"] = sum(len(v) for v in steps_by_thread.values())


def check_breakdown(c, breakdown, hosts, min_steps, straggler, summary):
    steps = breakdown.get("steps", [])
    c.expect(len(steps) >= min_steps, f"breakdown: {len(steps)} steps",
             f"breakdown: {len(steps)} steps, want at least {min_steps}")
    cats = breakdown.get("categories", [])
    per_host = collections.defaultdict(list)
    # The hosts' windows open and close a little apart, so the first and the last step may be
    # cut on some host (the breakdown says so in a warning); any other step must have them all.
    edges = {min(s.get("step", 0) for s in steps), max(s.get("step", 0) for s in steps)} \
        if steps else set()
    for step in steps:
        seen = {h["host"] for h in step.get("hosts", [])}
        missing = set(hosts) - seen
        if missing and step.get("step") not in edges:
            c.fail(f"breakdown: step {step.get('step')} lacks {sorted(missing)}")
        for h in step.get("hosts", []):
            per_host[h["host"]].append(h)
    for host in hosts:
        rows = per_host.get(host, [])
        if not rows:
            c.fail(f"{host}: in no step of the breakdown")
            continue
        bad_sum = [r for r in rows
                   if abs(sum(r["categories_ms"].get(k, 0) for k in cats) - r["step_time_ms"])
                   > 0.01]
        c.expect(not bad_sum, f"{host}: every step's categories sum to its step time",
                 f"{host}: {len(bad_sum)} steps whose categories do not sum to the step time, "
                 f"e.g. {bad_sum[:1]}")
        computing = sum(1 for r in rows if r["categories_ms"].get("compute", 0) > 0)
        c.expect(computing * 2 > len(rows), f"{host}: compute in {computing}/{len(rows)} steps",
                 f"{host}: compute in only {computing}/{len(rows)} steps")
        times = [r["step_time_ms"] for r in rows]
        median = statistics.median(times)
        absurd = [t for t in times if not 0.2 * median <= t <= 5 * median]
        c.expect(median > 0 and not absurd,
                 f"{host}: step time median {median:.3f} ms, min {min(times):.3f}, "
                 f"max {max(times):.3f}",
                 f"{host}: step times {absurd[:5]} ms are far from the median {median:.3f} ms")
        means = {k: round(statistics.fmean(r["categories_ms"].get(k, 0) for r in rows), 3)
                 for k in cats}
        summary.setdefault(host, {}).update(
            {"steps": len(rows), "step_ms_median": median, "categories_ms_mean": means})
    if straggler:
        named = sum(1 for s in steps if s.get("straggler") == straggler)
        c.expect(named * 2 > len(steps),
                 f"breakdown: {straggler} is the straggler in {named}/{len(steps)} steps",
                 f"breakdown: {straggler} is the straggler in only {named}/{len(steps)} steps "
                 f"(summary: {breakdown.get('summary', {}).get('straggler')})")


def check_xprof(c, xprof_check, session_dir):
    """xprof_check on every .xplane.pb: every rule must hold (the cupti collector names each
    kernel's op, tf_op, after its launch's NVTX range or API call, and joins launching threads
    such as PyTorch's autograd thread to the steps their process marks)."""
    files = sorted(f for f in os.listdir(session_dir) if f.endswith(".xplane.pb"))
    if not c.expect(files, f"{len(files)} .xplane.pb files", "no .xplane.pb file"):
        return
    r = subprocess.run([xprof_check] + [os.path.join(session_dir, f) for f in files],
                       capture_output=True, text=True, check=False)
    rules = collections.Counter(m.group(1) for m in
                                re.finditer(r"^  \[([a-z0-9-]+)\]", r.stdout, re.M))
    c.expect(r.returncode == 0 and not rules,
             f"xprof_check: {len(files)} .xplane.pb files conform",
             f"xprof_check: rc {r.returncode}, rules broken {dict(rules)}: "
             f"{(r.stdout + r.stderr)[-2000:]}")


def all_warnings(breakdown):
    out = list(breakdown.get("warnings", []))
    for h in breakdown.get("hosts", []):
        out += [f"{h.get('host')}: {w}" for w in h.get("warnings", [])]
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("session_dir")
    ap.add_argument("--host", action="append", default=[], help="NAME[:GPUS]")
    ap.add_argument("--min-steps", type=int, default=3)
    ap.add_argument("--straggler")
    ap.add_argument("--unavailable")
    ap.add_argument("--lost-pid", type=int)
    ap.add_argument("--xprof-check")
    ap.add_argument("--summary")
    args = ap.parse_args()

    c = Checker()
    session = load(c, args.session_dir, "session.json")
    if session is None:
        return finish(c)
    hosts = parse_hosts(args.host, session)
    if not hosts:
        c.fail("session.json names no host")
        return finish(c)
    duration_us = int(session.get("request", {}).get("duration_ms", 0)) * 1000
    summary = {}
    check_session(c, session, hosts)
    trace = load(c, args.session_dir, "pod.trace.json.gz", gzip.open)
    breakdown = load(c, args.session_dir, "pod_step_breakdown.json")
    if trace is None or breakdown is None:
        return finish(c)
    try:
        check_trace(c, trace, hosts, host_windows(session, hosts, duration_us), args.min_steps,
                    summary)
        check_breakdown(c, breakdown, hosts, args.min_steps, args.straggler, summary)
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        c.fail(f"malformed session files: {type(e).__name__}: {e}")
        return finish(c)
    warnings = all_warnings(breakdown)
    for w in warnings:
        print(f"warning: {w}")
    if args.unavailable:
        hit = [w for w in warnings if "unavailable" in w and args.unavailable in w]
        c.expect(hit, f"the conflict is reported: {hit[:1]}",
                 f"no warning says GPU tracing was unavailable with '{args.unavailable}'")
    if args.lost_pid is not None:
        pid = re.compile(rf"\bpid {args.lost_pid}\b")
        hit = [w for w in warnings if pid.search(w)]
        c.expect(hit, f"the lost process is reported: {hit[:1]}",
                 f"no warning names pid {args.lost_pid} (the process that died)")
    if args.xprof_check:
        check_xprof(c, args.xprof_check, args.session_dir)
    if args.summary:
        tmp = args.summary + ".tmp"
        with open(tmp, "w") as f:
            json.dump(summary, f, indent=1, sort_keys=True)
        os.replace(tmp, args.summary)
    return finish(c)


def finish(c):
    if c.failures:
        print(f"gpu_capture_check: {len(c.failures)} check(s) failed")
        return 1
    print("gpu_capture_check: everything holds")
    return 0


if __name__ == "__main__":
    sys.exit(main())
