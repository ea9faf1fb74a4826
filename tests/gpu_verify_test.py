#!/usr/bin/env python3
"""Tests of scripts/gpu_verify.py (docs/gpu-verification.md) on a machine without a GPU.

  gpu_verify_test.py --agent=BIN --profctl=BIN

- its arithmetic: steps split by capture window and torch.profiler tag (edges left out),
  per-condition statistics, overheads against the no-tracer steps, the targets' verdicts;
- no GPU: exit 77 with a line saying so; bad flags and a bundle that lacks a file: named;
- the capture phase end to end with the stand-in CUDA process (--app) in cuda_steps' place:
  registration, capture, gpu_capture_check.py over the session; a program that dies first: named;
- the overhead phase end to end: a real agent and `profctl capture` beside
  examples/pytorch_steps.py run on a stand-in torch (tests/fake_torch), one round of each run
  kind: every condition gets steps, the capture window comes from session.json, and the JSON and
  Markdown results are written.
"""

import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import gpu_verify  # noqa: E402

ARGS = None
MS = 1_000_000


def steps(*rows):
    return {"warmup": 0, "steps": [list(r) for r in rows]}


class ArithmeticTest(unittest.TestCase):
    def test_classify_by_window_and_tag(self):
        log = steps((1, 0, 10 * MS, ""),            # before the window: idle
                    (2, 10 * MS, 20 * MS, ""),      # overlaps the window's start: capturing
                    (3, 20 * MS, 30 * MS, ""),      # inside: capturing
                    (4, 30 * MS, 40 * MS, ""),      # ends on the window's stop: capturing
                    (5, 40 * MS, 50 * MS, ""),      # within the tail after it: after_capture
                    (6, 60 * MS, 70 * MS, ""),      # after the tail: idle
                    (7, 70 * MS, 82 * MS, "kineto"),
                    (8, 82 * MS, 90 * MS, ""))      # after torch.profiler: after_kineto
        split = gpu_verify.classify(log, [(15 * MS, 40 * MS)], tail_ns=15 * MS)
        self.assertEqual(split["idle"], [10.0, 10.0])
        self.assertEqual(split["capturing"], [10.0, 10.0, 10.0])
        self.assertEqual(split["after_capture"], [10.0])
        self.assertEqual(split["kineto"], [12.0])
        self.assertEqual(split["after_kineto"], [8.0])
        # No window: every untagged step before torch.profiler is idle.
        self.assertEqual(len(gpu_verify.classify(log, [])["idle"]), 6)

    def test_overheads_and_verdicts(self):
        table, verdicts = gpu_verify.overhead_table({
            "none": [10.0] * 9 + [20.0], "loaded": [10.02] * 10, "capturing": [10.2] * 10,
            "kineto": [10.5] * 10})
        self.assertEqual(table["none"]["steps"], 10)
        self.assertAlmostEqual(table["none"]["mean_ms"], 11.0)
        self.assertEqual(table["none"]["median_ms"], 10.0)
        self.assertEqual(table["none"]["p90_ms"], 20.0)
        self.assertAlmostEqual(table["loaded"]["overhead_median_pct"], 0.2)
        self.assertAlmostEqual(table["capturing"]["overhead_median_pct"], 2.0)
        self.assertAlmostEqual(table["kineto"]["overhead_median_pct"], 5.0)
        self.assertEqual(verdicts, {"loaded_under_0.5pct": True, "capturing_under_3pct": True,
                                    "capturing_no_worse_than_kineto": True})
        _, worse = gpu_verify.overhead_table({"none": [10.0], "loaded": [10.1],
                                              "capturing": [10.25], "kineto": [10.2]})
        self.assertEqual(worse, {"loaded_under_0.5pct": False, "capturing_under_3pct": True,
                                 "capturing_no_worse_than_kineto": False})
        # A condition without steps is a row of nothing and fails its verdict.
        table, verdicts = gpu_verify.overhead_table({"none": [10.0], "loaded": [],
                                                     "capturing": [10.1], "kineto": [10.2]})
        self.assertIsNone(table["loaded"])
        self.assertFalse(verdicts["loaded_under_0.5pct"])
        md = gpu_verify.markdown(table, verdicts)
        self.assertIn("| libprofctl_inject.so loaded, idle | 0 |", md)
        self.assertIn("| profctl capturing | 1 | 10.100 | 10.100 | 10.100 | +1.00 % |", md)
        self.assertIn("- loaded_under_0.5pct: NO", md)

    def test_recorder_verdict_within_the_bound(self):
        table, verdicts = gpu_verify.recorder_table({"off": [10.0] * 10, "on": [10.15] * 10},
                                                    2.0)
        self.assertAlmostEqual(table["on"]["overhead_median_pct"], 1.5)
        self.assertEqual(verdicts, {"recorder_within_2pct": True})
        md = gpu_verify.markdown(table, verdicts)
        self.assertIn("| library loaded, agent with --flight-recorder | 10 | 10.150 | 10.150 | "
                      "10.150 | +1.50 % |", md)
        self.assertIn("| library loaded, agent without --flight-recorder | 10 |", md)
        _, over = gpu_verify.recorder_table({"off": [10.0], "on": [10.25]}, 2.0)
        self.assertEqual(over, {"recorder_within_2pct": False})
        _, tighter = gpu_verify.recorder_table({"off": [10.0], "on": [10.15]}, 1.0)
        self.assertEqual(tighter, {"recorder_within_1pct": False})
        # No steps on one side: no verdict can pass.
        table, none = gpu_verify.recorder_table({"off": [], "on": [10.0]}, 2.0)
        self.assertIsNone(table["off"])
        self.assertEqual(none, {"recorder_within_2pct": False})


class DryRunTest(unittest.TestCase):
    def test_launch_summary_counts_the_host_planes_nccl_launches(self):
        host, other = "gpu-host /host:CPU", "gpu-host /device:GPU:0"
        events = [
            {"ph": "M", "name": "process_name", "pid": 1, "args": {"name": host}},
            {"ph": "M", "name": "process_name", "pid": 2, "args": {"name": other}},
            {"ph": "M", "name": "thread_name", "pid": 1, "tid": 11,
             "args": {"name": "pid 100 tid 11"}},
            {"ph": "M", "name": "thread_name", "pid": 1, "tid": 21,
             "args": {"name": "pid 200 tid 21"}},
            {"ph": "X", "name": "ncclAllReduce", "pid": 1, "tid": 11, "ts": 1, "dur": 0,
             "args": {"kernel_name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
                      "nccl_launch_seq": 4}},
            {"ph": "X", "name": "ncclAllReduce", "pid": 1, "tid": 11, "ts": 2, "dur": 0,
             "args": {"kernel_name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
                      "nccl_launch_seq": 6}},
            {"ph": "X", "name": "ncclAllGather", "pid": 1, "tid": 21, "ts": 3, "dur": 0,
             "args": {"kernel_name": "ncclDevKernel_AllGather_RING_LL", "nccl_launch_seq": 0}},
            # Not launches: no kernel_name, another plane, not nccl.
            {"ph": "X", "name": "ncclAllReduce", "pid": 1, "tid": 11, "ts": 4, "dur": 5},
            {"ph": "X", "name": "ncclDevKernel_AllReduce", "pid": 2, "tid": 1, "ts": 4, "dur": 5,
             "args": {"kernel_name": "x"}},
            {"ph": "X", "name": "train_step 5", "pid": 1, "tid": 11, "ts": 0, "dur": 9,
             "args": {"kernel_name": "x"}},
        ]
        tmp = tempfile.mkdtemp(prefix="profctl-launch-summary-")
        try:
            with gzip.open(os.path.join(tmp, "pod.trace.json.gz"), "wt") as f:
                json.dump({"traceEvents": events}, f)
            got = gpu_verify.launch_summary(tmp)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        self.assertEqual(got, {"launches": 3, "ops": {"ncclAllReduce": 2, "ncclAllGather": 1},
                               "threads": 2, "processes": ["100", "200"],
                               "sequence_gaps": 1})

    def test_dry_run_plans_every_phase_without_a_gpu_or_bundle(self):
        r = run_script("--bundle=/nonexistent/bundle.tar.gz", "--out=/nonexistent/out",
                       "--phases=cuda,pytorch,overhead,recorder", "--rounds=2",
                       "--recorder-bound-pct=1.5", "--dry-run")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        plan = [line for line in r.stdout.splitlines() if line.startswith("gpu_verify: plan: ")]
        self.assertEqual(len(plan), 1 + 2 + 2 + 2 + 1 + 1, r.stdout)
        self.assertIn("recorder round 2: off: profctl-agent --collectors=cupti (no "
                      "--flight-recorder)", r.stdout)
        self.assertIn("recorder nccl: profctl-agent --collectors=cupti --flight-recorder=30; "
                      "pytorch_steps --allreduce as 2 ranks", r.stdout)
        self.assertIn("--flight-recorder=30, the same steps, then profctl capture --last=5000ms",
                      r.stdout)
        self.assertIn("median step time on within 1.5 % of off", r.stdout)
        self.assertFalse(os.path.exists("/nonexistent/out"))

    def test_bad_recorder_flags_are_named(self):
        r = run_script("--bundle=b", "--out=o", "--phases=recorder", "--recorder-bound-pct=0",
                       "--dry-run")
        self.assertEqual(r.returncode, 2)
        self.assertIn("--recorder-bound-pct=0: must be in (0, 100]", r.stderr)
        r = run_script("--bundle=b", "--out=o", "--phases=recorder", "--recorder-nccl-ranks=-1",
                       "--dry-run")
        self.assertEqual(r.returncode, 2)
        self.assertIn("--recorder-nccl-ranks=-1: must be in [0, 64]", r.stderr)
        r = run_script("--bundle=b", "--out=o", "--phases=recorders", "--dry-run")
        self.assertEqual(r.returncode, 2)
        self.assertIn("unknown phase(s) ['recorders'] (cuda, pytorch, overhead, recorder)",
                      r.stderr)


def run_script(*flags, env=None):
    env = dict(env if env is not None else os.environ, PYTHONDONTWRITEBYTECODE="1")
    return subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "gpu_verify.py"),
                           *flags], capture_output=True, text=True, env=env, timeout=300,
                          check=False)


class CommandTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="profctl-gpu-verify-")
        self.bundle = os.path.join(self.tmp, "profctl-bundle")
        os.makedirs(os.path.join(self.bundle, "bin"))
        os.makedirs(os.path.join(self.bundle, "lib"))
        os.symlink(ARGS.profctl, os.path.join(self.bundle, "bin", "profctl"))
        os.symlink(ARGS.agent, os.path.join(self.bundle, "bin", "profctl-agent"))
        # Never loaded here: no CUDA program starts, the stand-in loop only carries the variables.
        with open(os.path.join(self.bundle, "lib", "libprofctl_inject.so"), "wb") as f:
            f.write(b"stand-in")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def test_no_gpu_exits_77(self):
        if shutil.which("nvidia-smi"):
            self.skipTest("this machine has nvidia-smi")
        r = run_script(f"--bundle={self.bundle}", f"--out={self.tmp}/out")
        self.assertEqual(r.returncode, 77, r.stderr)
        self.assertIn("no NVIDIA GPU here", r.stderr)

    def test_bad_flags_and_bundle_are_named(self):
        r = run_script(f"--bundle={self.bundle}", f"--out={self.tmp}/out", "--phases=cuda,tpu")
        self.assertEqual(r.returncode, 2)
        self.assertIn("unknown phase(s) ['tpu']", r.stderr)
        os.remove(os.path.join(self.bundle, "lib", "libprofctl_inject.so"))
        r = run_script(f"--bundle={self.bundle}", f"--out={self.tmp}/out", "--no-gpu-ok")
        self.assertEqual(r.returncode, 1)
        self.assertIn("the bundle has no lib/libprofctl_inject.so", r.stderr)

    def test_capture_phase_end_to_end(self):
        """The cuda phase with the stand-in CUDA process in cuda_steps' place: the agent, the
        registration it waits for, the capture and the checker over its session."""
        if not ARGS.app:
            self.skipTest("no profctl_fake_cuda_app (built with the CUPTI headers)")
        out = os.path.join(self.tmp, "out")
        r = run_script(f"--bundle={self.bundle}", f"--out={out}", "--phases=cuda",
                       f"--cuda-steps={ARGS.app}", "--settle-s=0.5", "--no-gpu-ok")
        self.assertEqual(r.returncode, 0, r.stdout[-3000:] + r.stderr[-3000:])
        self.assertIn("gpu_capture_check: everything holds", r.stdout)
        with open(os.path.join(out, "gpu_verification.json")) as f:
            phase = json.load(f)["phases"]["cuda"]
        check = phase["check"]["gpu-host"]
        self.assertEqual(list(check["gpus"]), ["gpu-host /device:GPU:0"])
        self.assertGreater(check["gpus"]["gpu-host /device:GPU:0"]["kernels"], 100)
        self.assertGreaterEqual(check["steps"], 50)  # 2 s of 20 ms steps, edges cut
        self.assertTrue(os.path.isfile(os.path.join(phase["session_dir"], "session.json")))
        # The program is stopped at the end: nothing of ours is left running.
        with open(os.path.join(out, "agent.log")) as f:
            self.assertRegex(f.read(), r"inject server: pid \d+ left")

    def test_a_program_that_dies_before_registering_is_named(self):
        out = os.path.join(self.tmp, "out")
        r = run_script(f"--bundle={self.bundle}", f"--out={out}", "--phases=cuda",
                       "--cuda-steps=/bin/false", "--settle-s=0", "--no-gpu-ok")
        self.assertEqual(r.returncode, 1)
        self.assertIn("cuda_steps exited (1) while waiting for", r.stdout)
        with open(os.path.join(out, "gpu_verification.md")) as f:
            self.assertIn("## cuda\nFAILED: cuda_steps exited (1)", f.read())

    def test_recorder_phase_end_to_end(self):
        env = dict(os.environ, PYTHONPATH=os.path.join(HERE, "fake_torch"),
                   FAKE_TORCH_STEP_MS="2")
        out = os.path.join(self.tmp, "out")
        r = run_script(f"--bundle={self.bundle}", f"--out={out}", "--phases=recorder",
                       "--rounds=1", "--idle-steps=60", "--no-gpu-ok", env=env)
        with open(os.path.join(out, "gpu_verification.json")) as f:
            result = json.load(f)
        phase = result["phases"]["recorder"]
        self.assertNotIn("error", phase, r.stdout[-3000:] + r.stderr[-3000:])
        for condition in ("off", "on"):
            self.assertIsNotNone(phase["table"][condition], condition)
            self.assertGreaterEqual(phase["table"][condition]["steps"], 40, condition)
            self.assertGreater(phase["table"][condition]["median_ms"], 1.5, condition)
        self.assertIn("recorder_within_2pct", phase["verdicts"])
        # The "on" agent kept a past: its --last snapshot is a session of 5 s of the past.
        on = [run for run in phase["runs"] if run["run"] == "on1"][0]
        with open(os.path.join(on["snapshot_session_dir"], "session.json")) as f:
            self.assertEqual(int(json.load(f)["request"]["past_ms"]), 5000)
        # The NCCL launch run: two stand-in ranks with --allreduce, a snapshot of the recorder's
        # past whose pod trace was read (no library is loaded here, so it holds no launch).
        nccl = [run for run in phase["runs"] if run["run"] == "nccl"][0]
        self.assertEqual(nccl["ranks"], 2)
        self.assertEqual(nccl["launches"], 0)
        self.assertTrue(os.path.isfile(os.path.join(nccl["snapshot_session_dir"],
                                                    "pod.trace.json.gz")))
        self.assertIn("recorder_nccl_launches_from_every_rank", phase["verdicts"])
        self.assertIn("NCCL launches in a 5 s snapshot of 2 rank(s): 0", phase["markdown"])
        # The last agent (the NCCL run's) recorded the cupti collector's past.
        with open(os.path.join(out, "agent.log")) as f:
            self.assertIn("flight recorder: the last 30 s of cupti", f.read())

    def test_overhead_phase_end_to_end(self):
        env = dict(os.environ, PYTHONPATH=os.path.join(HERE, "fake_torch"),
                   FAKE_TORCH_STEP_MS="2")
        out = os.path.join(self.tmp, "out")
        r = run_script(f"--bundle={self.bundle}", f"--out={out}", "--phases=overhead",
                       "--rounds=1", "--idle-steps=60", "--capture-ms=400", "--kineto-steps=40",
                       "--no-gpu-ok", env=env)
        self.assertEqual(r.returncode, 0, r.stdout[-3000:] + r.stderr[-3000:])
        with open(os.path.join(out, "gpu_verification.json")) as f:
            result = json.load(f)
        phase = result["phases"]["overhead"]
        self.assertNotIn("error", phase)
        table = phase["table"]
        for condition in ("none", "loaded", "capturing", "kineto"):
            self.assertIsNotNone(table[condition], condition)
            self.assertGreater(table[condition]["steps"], 0, condition)
            self.assertGreater(table[condition]["median_ms"], 1.5, condition)  # 2 ms steps
        self.assertEqual(table["kineto"]["steps"], 40)  # exactly the SIGUSR1 window
        # The steps of a 400 ms window fill it: about 400 ms / their mean of them (~200 of the
        # ~2 ms steps, fewer and longer on a loaded machine), and none outside it.
        capturing = table["capturing"]
        self.assertGreater(capturing["steps"], 0.5 * 400 / capturing["mean_ms"], capturing)
        self.assertLess(capturing["steps"], 220)
        (run_b,) = [run for run in phase["runs"] if run["run"] == "B1"]
        ((start, stop),) = run_b["windows_ns"]
        self.assertAlmostEqual((stop - start) / MS, 400, delta=50)
        self.assertTrue(os.path.isfile(os.path.join(run_b["session_dir"], "session.json")))
        self.assertEqual(set(phase["verdicts"]), {"loaded_under_0.5pct", "capturing_under_3pct",
                                                  "capturing_no_worse_than_kineto"})
        with open(os.path.join(out, "gpu_verification.md")) as f:
            md = f.read()
        self.assertIn("| profctl capturing |", md)
        self.assertIn("| torch.profiler (Kineto, CUDA) | 40 |", md)
        # The same --out again: refused, the first run's sessions untouched.
        again = run_script(f"--bundle={self.bundle}", f"--out={out}", "--phases=overhead",
                           "--no-gpu-ok", env=env)
        self.assertEqual(again.returncode, 1)
        self.assertIn("already holds a run", again.stderr)
        self.assertTrue(os.path.isfile(os.path.join(run_b["session_dir"], "session.json")))


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--agent", required=True)
    ap.add_argument("--profctl", required=True)
    ap.add_argument("--app", help="profctl_fake_cuda_app, where built")
    ARGS, rest = ap.parse_known_args()
    ARGS.agent = os.path.abspath(ARGS.agent)
    ARGS.profctl = os.path.abspath(ARGS.profctl)
    ARGS.app = os.path.abspath(ARGS.app) if ARGS.app else None
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)
