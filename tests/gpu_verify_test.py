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
        # The same split by step index (what runs of the same age are compared by).
        self.assertEqual(gpu_verify.by_index(log, [(15 * MS, 40 * MS)], tail_ns=15 * MS),
                         {"idle": {1: 10.0, 6: 10.0}, "capturing": {2: 10.0, 3: 10.0, 4: 10.0},
                          "after_capture": {5: 10.0}, "kineto": {7: 12.0},
                          "after_kineto": {8: 8.0}})
        # No window: every untagged step before torch.profiler is idle.
        self.assertEqual(len(gpu_verify.classify(log, [])["idle"]), 6)

    def test_same_age_compares_the_steps_of_the_same_index(self):
        # The untraced run drifts (its later steps are slower): a traced run compared at the
        # same indices sees its own cost, not the drift.
        none = {i: 10.0 + (i - 100) * 0.01 for i in range(100, 200)}
        traced = {i: none[i] * 1.02 for i in range(150, 180)}
        got = gpu_verify.same_age(traced, none, first_index=100)
        self.assertEqual(got["steps"], 30)
        self.assertAlmostEqual(got["overhead_pct"], 2.0)
        # Steps before first_index (the warm-up) and indices the untraced run lacks don't count.
        self.assertEqual(gpu_verify.same_age(traced, none, first_index=170)["steps"], 10)
        self.assertIsNone(gpu_verify.same_age({300: 1.0}, none, first_index=0))

    def test_rounds_give_per_round_overheads_and_verdicts_on_their_median(self):
        def run(idle, capturing=None, kineto=None):
            out = {"idle": {i: idle for i in range(1000, 1100)}}
            if capturing is not None:
                out["capturing"] = {i: capturing for i in range(1100, 1200)}
            if kineto is not None:
                out["kineto"] = {i: kineto for i in range(1100, 1200)}
            return out
        none = {"idle": {i: 10.0 for i in range(1000, 1300)}}
        rounds = [gpu_verify.round_overheads(
            {"none": none, "loaded": run(10.0 * (1 + lp / 100), 10.0 * (1 + cp / 100)),
             "kineto": run(10.0, kineto=10.0 * (1 + kp / 100))}, 1000)
            for lp, cp, kp in ((0.1, 1.0, 5.0), (0.3, 2.0, 4.0), (0.9, 4.0, 6.0))]
        self.assertAlmostEqual(rounds[0]["loaded"]["overhead_pct"], 0.1)
        self.assertAlmostEqual(rounds[1]["capturing"]["overhead_pct"], 2.0)
        # Inside the loaded run: capturing against its own idle steps.
        self.assertAlmostEqual(rounds[2]["capturing_vs_loaded"]["overhead_pct"],
                               100 * (1.04 / 1.009 - 1))
        table, verdicts = gpu_verify.overhead_summary(rounds)
        self.assertAlmostEqual(table["loaded"]["median_pct"], 0.3)
        self.assertAlmostEqual(table["loaded"]["max_pct"], 0.9)
        self.assertAlmostEqual(table["capturing"]["median_pct"], 2.0)
        self.assertAlmostEqual(table["kineto"]["median_pct"], 5.0)
        self.assertEqual(table["loaded"]["steps"], 300)
        self.assertEqual(verdicts, {"loaded_under_0.5pct": True, "capturing_under_3pct": True,
                                    "capturing_no_worse_than_kineto": True,
                                    "no_residual_after_capture": False})  # nothing after
        md = gpu_verify.overhead_markdown(table, verdicts, 3)
        self.assertIn("| libprofctl_inject.so loaded, idle (before its capture) | 300 | 10.030 | "
                      "10.000 | +0.10 % | +0.30 % | +0.90 % | +0.30 % | +0.10 .. +0.90 % |", md)
        self.assertIn("- capturing_no_worse_than_kineto: yes", md)
        # A condition no round measured is a row of nothing and fails its verdict.
        rounds = [gpu_verify.round_overheads({"none": none, "loaded": run(10.0),
                                              "kineto": run(10.0, kineto=10.1)}, 1000)]
        table, verdicts = gpu_verify.overhead_summary(rounds)
        self.assertIsNone(table["capturing"])
        self.assertFalse(verdicts["capturing_under_3pct"])
        self.assertFalse(verdicts["capturing_no_worse_than_kineto"])
        self.assertIn("| profctl capturing | 0 |", gpu_verify.overhead_markdown(table, verdicts, 1))

    def test_residuals_and_the_noise_floor_come_from_inside_one_process(self):
        none = {"idle": {i: 10.0 for i in range(1000, 1400)}}
        # The loaded process: 10.2 before its capture, 11.0 capturing, 10.8 after it (the second
        # after the capture is a row of its own, not "after").
        loaded = {"idle": {**{i: 10.2 for i in range(1000, 1100)},
                           **{i: 10.8 for i in range(1250, 1400)}},
                  "capturing": {i: 11.0 for i in range(1100, 1200)},
                  "after_capture": {i: 12.0 for i in range(1200, 1250)}}
        # The kineto process: untraced 10.4 before its window (the A/A row), 15 inside, 12 after.
        kineto = {"idle": {i: 10.4 for i in range(1000, 1100)},
                  "kineto": {i: 15.0 for i in range(1100, 1200)},
                  "after_kineto": {i: 12.48 for i in range(1200, 1400)}}
        got = gpu_verify.round_overheads({"none": none, "loaded": loaded, "kineto": kineto}, 1000)
        self.assertAlmostEqual(got["aa_noise"]["overhead_pct"], 4.0)
        self.assertAlmostEqual(got["loaded"]["overhead_pct"], 2.0)
        self.assertEqual(got["loaded"]["steps"], 100)
        self.assertAlmostEqual(got["loaded_after"]["overhead_pct"], 8.0)
        self.assertEqual(got["loaded_after"]["steps"], 150)
        self.assertAlmostEqual(got["residual_after_capture"]["overhead_pct"],
                               100 * (10.8 / 10.2 - 1))
        self.assertAlmostEqual(got["capturing_vs_loaded"]["overhead_pct"], 100 * (11 / 10.2 - 1))
        self.assertAlmostEqual(got["after_capture"]["overhead_pct"], 20.0)
        self.assertAlmostEqual(got["kineto_vs_before"]["overhead_pct"], 100 * (15 / 10.4 - 1))
        self.assertAlmostEqual(got["residual_after_kineto"]["overhead_pct"], 20.0)
        table, verdicts = gpu_verify.overhead_summary([got])
        self.assertFalse(verdicts["no_residual_after_capture"])
        # Two untraced processes differ by 4 %: a 2 % idle cost between processes cannot be told.
        self.assertIsNone(verdicts["loaded_under_0.5pct"])
        self.assertIn("- loaded_under_0.5pct: cannot tell (the A/A row)",
                      gpu_verify.overhead_markdown(table, verdicts, 1))

    def test_other_kinds_get_rows_of_their_own(self):
        none = {"idle": {i: 10.0 for i in range(1000, 1300)}}
        got = gpu_verify.round_overheads({
            "none": none, "loaded": {"idle": {i: 10.0 for i in range(1000, 1100)}},
            "quiet": {"idle": {i: 10.1 for i in range(1000, 1300)}},
            "late": {"idle": {i: 10.0 for i in range(1000, 1100)},
                     "kineto": {i: 12.0 for i in range(1100, 1200)},
                     "after_kineto": {i: 10.5 for i in range(1200, 1300)}}}, 1000)
        self.assertAlmostEqual(got["quiet"]["overhead_pct"], 1.0)
        self.assertEqual(got["quiet"]["steps"], 300)
        self.assertAlmostEqual(got["late_window"]["overhead_pct"], 20.0)
        self.assertAlmostEqual(got["late_after"]["overhead_pct"], 5.0)
        table, _ = gpu_verify.overhead_summary([got])
        md = gpu_verify.overhead_markdown(table, {}, 1)
        self.assertIn("| kind quiet (--overhead-kinds) | 300 | 10.100 | 10.000 | +1.00 % |", md)
        self.assertIn("| kind late_after (--overhead-kinds) | 100 |", md)

    def test_pinning(self):
        argv = ["python3", "loop.py"]
        self.assertEqual(gpu_verify.pin_argv(argv, "auto", 16, True),
                         ["taskset", "-c", "0-7", "python3", "loop.py"])
        self.assertEqual(gpu_verify.pin_argv(argv, "auto", 4, True), argv)  # too few CPUs
        self.assertEqual(gpu_verify.pin_argv(argv, "3", 16, True),
                         ["taskset", "-c", "3", "python3", "loop.py"])
        self.assertEqual(gpu_verify.pin_argv(argv, "none", 16, True), argv)
        self.assertEqual(gpu_verify.pin_argv(argv, "2-5", 16, False), argv)  # no taskset
        r = run_script("--bundle=b", "--out=o", "--phases=overhead", "--pin=3;rm", "--dry-run")
        self.assertEqual(r.returncode, 2)
        self.assertIn("--pin=3;rm: want auto, none or a CPU list", r.stderr)

    def test_library_lines_are_what_the_injection_library_said(self):
        with tempfile.TemporaryDirectory() as tmp:
            log = os.path.join(tmp, "switch_detach.log")
            with open(log, "w") as f:
                f.write("pytorch_steps: step 50\n"
                        "profctl-inject: pid 7: CUPTI detached after a window "
                        "(PROFCTL_INJECT_DETACH=1)\n"
                        "pytorch_steps: step 100\n")

            class Procs:
                def log_path(self, name):
                    return os.path.join(tmp, name + ".log")

            class Env:
                procs = Procs()
            self.assertEqual(gpu_verify.library_lines(Env(), "switch_detach"),
                             ["profctl-inject: pid 7: CUPTI detached after a window "
                              "(PROFCTL_INJECT_DETACH=1)"])
            self.assertEqual(gpu_verify.library_lines(Env(), "never_started"), [])

    def test_round_order_rotates(self):
        self.assertEqual([gpu_verify.overhead_order(r)[0] for r in (1, 2, 3, 4)],
                         ["none", "loaded", "kineto", "none"])

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
        # "Off" runs that differ between themselves by the bound or more: cannot tell.
        table, noisy = gpu_verify.recorder_table({"off": [10.0] * 4, "on": [10.1] * 4}, 2.0,
                                                 off_medians=[10.0, 10.3])
        self.assertIsNone(noisy["recorder_within_2pct"])
        self.assertAlmostEqual(table["off_runs_spread_pct"], 3.0)
        md = gpu_verify.markdown(table, noisy)
        self.assertIn("differ by 3.00 % between themselves", md)
        self.assertIn("- recorder_within_2pct: cannot tell (the off runs differ more)", md)
        _, quiet = gpu_verify.recorder_table({"off": [10.0] * 4, "on": [10.1] * 4}, 2.0,
                                             off_medians=[10.0, 10.1])
        self.assertTrue(quiet["recorder_within_2pct"])
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
                       "--phases=cuda,pytorch,overhead,recorder,jax", "--rounds=3",
                       "--recorder-rounds=2", "--recorder-bound-pct=1.5", "--dry-run")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        plan = [line for line in r.stdout.splitlines() if line.startswith("gpu_verify: plan: ")]
        self.assertEqual(len(plan), 1 + 2 + 3 + 1 + 2 + 1 + 1 + 1, r.stdout)
        self.assertIn("overhead round 2: loaded, kineto, none: pytorch_steps 1000 + 300 steps",
                      r.stdout)
        self.assertIn("jax: examples/jax_steps.py with jax.profiler.start_server; profctl capture "
                      "--workers=grpc://127.0.0.1:PORT --duration=1000", r.stdout)
        self.assertIn("recorder round 2: off: profctl-agent --collectors=cupti (no "
                      "--flight-recorder)", r.stdout)
        self.assertIn("recorder nccl: profctl-agent --collectors=cupti --flight-recorder=30; "
                      "pytorch_steps --allreduce as 2 ranks", r.stdout)
        self.assertIn("--flight-recorder=30, the same steps, then profctl capture --last=5000ms",
                      r.stdout)
        self.assertIn("median step time on within 1.5 % of off", r.stdout)
        self.assertFalse(os.path.exists("/nonexistent/out"))

    def test_overhead_kinds_and_their_variables_are_checked(self):
        r = run_script("--bundle=b", "--out=o", "--phases=overhead", "--rounds=2",
                       "--overhead-kinds=none,loaded,cuda_only,quiet,late",
                       "--overhead-env=quiet:PROFCTL_AGENT_SOCKET=/nonexistent,"
                       "NVTX_INJECTION64_PATH=",
                       "--overhead-env=late@kineto:TEARDOWN_CUPTI=1", "--dry-run")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("overhead round 2: loaded, cuda_only, quiet, late, none:", r.stdout)
        for bad, why in ((["--overhead-kinds=loaded,kineto"], "none and loaded"),
                         (["--overhead-kinds=none,loaded,nope"], "none and loaded"),
                         (["--overhead-kinds=none,loaded,loaded"], "each kind once"),
                         (["--overhead-env=Quiet:A=1"], "NAME[@loaded|@kineto]"),
                         (["--overhead-env=quiet@none:A=1"], "NAME[@loaded|@kineto]"),
                         (["--overhead-env=loaded:A=1"], "with a new lower-case NAME"),
                         (["--overhead-env=quiet:A"], "VAR=VAL")):
            r = run_script("--bundle=b", "--out=o", "--phases=overhead", *bad, "--dry-run")
            self.assertEqual(r.returncode, 2, bad)
            self.assertIn(why, r.stderr, bad)

    def test_kind_environments(self):
        class Args:
            overhead_env_vars = {"quiet": {"PROFCTL_AGENT_SOCKET": "/x",
                                           "NVTX_INJECTION64_PATH": ""},
                                 "late": {"TEARDOWN_CUPTI": "1"}}
            overhead_env_base = {"quiet": "idle", "late": "kineto", "cap": "loaded"}

        class Env:
            args = Args()

            def injected_env(self):
                return {"CUDA_INJECTION64_PATH": "lib", "NVTX_INJECTION64_PATH": "lib",
                        "PROFCTL_AGENT_SOCKET": "sock"}
        env = Env()
        none = gpu_verify.overhead_kind_env(env, "none")
        self.assertNotIn("CUDA_INJECTION64_PATH", none)
        self.assertEqual(gpu_verify.overhead_kind_env(env, "loaded")["NVTX_INJECTION64_PATH"],
                         "lib")
        self.assertNotIn("CUDA_INJECTION64_PATH", gpu_verify.overhead_kind_env(env, "nvtx_only"))
        self.assertNotIn("NVTX_INJECTION64_PATH", gpu_verify.overhead_kind_env(env, "cuda_only"))
        quiet = gpu_verify.overhead_kind_env(env, "quiet")
        self.assertEqual((quiet["PROFCTL_AGENT_SOCKET"], quiet["CUDA_INJECTION64_PATH"]),
                         ("/x", "lib"))
        self.assertNotIn("NVTX_INJECTION64_PATH", quiet)  # VAR= unsets it
        late = gpu_verify.overhead_kind_env(env, "late")
        self.assertEqual(late["TEARDOWN_CUPTI"], "1")
        self.assertNotIn("CUDA_INJECTION64_PATH", late)
        self.assertEqual([gpu_verify.overhead_base(env.args, k)
                          for k in ("none", "loaded", "kineto", "quiet", "late", "cuda_only",
                                    "cap")],
                         ["none", "loaded", "kineto", "idle", "kineto", "idle", "loaded"])

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
        self.assertIn("unknown phase(s) ['recorders'] "
                      "(cuda, pytorch, overhead, recorder, jax, switches)", r.stderr)


def fake_torch_env():
    """The environment in which examples/pytorch_steps.py runs on the stand-in torch, 2 ms a
    step."""
    return dict(os.environ, PYTHONPATH=os.path.join(HERE, "fake_torch"), FAKE_TORCH_STEP_MS="2")


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
        env = fake_torch_env()
        out = os.path.join(self.tmp, "out")
        r = run_script(f"--bundle={self.bundle}", f"--out={out}", "--phases=recorder",
                       "--recorder-rounds=1", "--warmup-steps=40", "--idle-steps=60", "--no-gpu-ok",
                       env=env)
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

    def test_switches_phase_captures_each_switch_twice(self):
        env = fake_torch_env()
        out = os.path.join(self.tmp, "out")
        r = run_script(f"--bundle={self.bundle}", f"--out={out}", "--phases=switches",
                       "--settle-s=0.2", "--phase-capture-ms=300", "--no-gpu-ok", env=env)
        with open(os.path.join(out, "gpu_verification.json")) as f:
            phase = json.load(f)["phases"]["switches"]
        self.assertEqual(phase["failed"], [], r.stdout[-3000:] + r.stderr[-3000:])
        self.assertEqual(sorted(phase["check"]), ["detach", "hooks", "light"])
        self.assertEqual(phase["check"]["detach"]["env"], {"PROFCTL_INJECT_DETACH": "1"})
        self.assertEqual(phase["check"]["light"]["env"], {"PROFCTL_INJECT_WINDOW": "launches"})
        self.assertEqual(phase["check"]["hooks"]["env"],
                         {"PROFCTL_INJECT_NVTX_STEPS": "1", "PROFCTL_INJECT_DETACH": "1"})
        for name, got in phase["check"].items():
            self.assertEqual(len(got["captures"]), 2, name)
            self.assertEqual(got["library_said"], [], name)  # no library in the stand-in
            starts = []
            for capture in got["captures"]:
                with open(os.path.join(capture["session_dir"], "session.json")) as f:
                    manifest = json.load(f)
                self.assertEqual(int(manifest["request"]["duration_ms"]), 300)
                starts.append(int(manifest["start_at_ns"]))
                # No GPU here: the check fails and is reported, the phase goes on.
                self.assertIn("gpu_capture_check.py failed", capture["check"]["error"])
            # The second capture comes the gap after the first.
            self.assertGreaterEqual(starts[1] - starts[0], 3_000_000_000, name)

    def test_overhead_phase_end_to_end(self):
        env = fake_torch_env()
        out = os.path.join(self.tmp, "out")
        r = run_script(f"--bundle={self.bundle}", f"--out={out}", "--phases=overhead",
                       "--rounds=1", "--warmup-steps=40", "--idle-steps=60", "--capture-ms=400",
                       "--kineto-steps=40", "--no-gpu-ok", env=env)
        self.assertEqual(r.returncode, 0, r.stdout[-3000:] + r.stderr[-3000:])
        with open(os.path.join(out, "gpu_verification.json")) as f:
            result = json.load(f)
        phase = result["phases"]["overhead"]
        self.assertNotIn("error", phase)
        self.assertEqual([run["run"] for run in phase["runs"]], ["none1", "loaded1", "kineto1"])
        table = phase["table"]
        for condition in ("loaded", "capturing", "capturing_vs_loaded", "kineto"):
            self.assertIsNotNone(table[condition], condition)
            self.assertGreater(table[condition]["steps"], 0, condition)
            self.assertGreater(table[condition]["median_ms"], 1.5, condition)  # 2 ms steps
            self.assertGreater(table[condition]["base_median_ms"], 1.5, condition)
        # Exactly the SIGUSR1 window, every one of its indices also run untraced.
        self.assertEqual(table["kineto"]["steps"], 40)
        # The steps of a 400 ms window fill it: about 400 ms / their mean of them (~200 of the
        # ~2 ms steps, fewer and longer on a loaded machine), and none outside it; the untraced
        # run reached each of their indices.
        (run_b,) = [run for run in phase["runs"] if run["run"] == "loaded1"]
        capturing = run_b["capturing"]
        self.assertGreater(capturing["steps"], 0.5 * 400 / capturing["mean_ms"], capturing)
        self.assertLess(capturing["steps"], 220)
        self.assertEqual(table["capturing"]["steps"], capturing["steps"])
        ((start, stop),) = run_b["windows_ns"]
        self.assertAlmostEqual((stop - start) / MS, 400, delta=50)
        self.assertTrue(os.path.isfile(os.path.join(run_b["session_dir"], "session.json")))
        # Idle before the capture (from --warmup-steps on: about --idle-steps of them) and after
        # it (past its flush second) are rows of their own; steps before --warmup-steps are never
        # compared.
        (run_n,) = [run for run in phase["runs"] if run["run"] == "none1"]
        self.assertGreaterEqual(table["loaded"]["steps"], 60)
        self.assertGreaterEqual(table["loaded_after"]["steps"], 60)
        self.assertEqual(table["loaded"]["steps"] + table["loaded_after"]["steps"],
                         run_b["idle"]["steps"] - (40 - 20))  # logged from step 20
        for row in ("loaded_after", "residual_after_capture", "aa_noise", "kineto_vs_before",
                    "residual_after_kineto"):
            self.assertIsNotNone(table[row], row)
        self.assertGreater(run_n["idle"]["steps"], 40 + 60 + 200)
        self.assertEqual(set(phase["verdicts"]), {"loaded_under_0.5pct", "capturing_under_3pct",
                                                  "capturing_no_worse_than_kineto",
                                                  "no_residual_after_capture"})
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

    def test_a_kind_whose_process_dies_costs_only_its_rows(self):
        env = fake_torch_env()
        out = os.path.join(self.tmp, "out")
        # `broken`'s loop cannot import torch: it exits at once.
        r = run_script(f"--bundle={self.bundle}", f"--out={out}", "--phases=overhead",
                       "--rounds=1", "--warmup-steps=40", "--idle-steps=60", "--capture-ms=400",
                       "--overhead-kinds=none,loaded,broken",
                       "--overhead-env=broken:PYTHONPATH=/nonexistent", "--no-gpu-ok", env=env)
        self.assertEqual(r.returncode, 0, r.stdout[-3000:] + r.stderr[-3000:])
        self.assertIn("run broken1 FAILED (its rows are left empty)", r.stdout)
        with open(os.path.join(out, "gpu_verification.json")) as f:
            phase = json.load(f)["phases"]["overhead"]
        (broken,) = [run for run in phase["runs"] if run["run"] == "broken1"]
        self.assertIn("exited", broken["error"])
        self.assertIsNone(phase["table"].get("broken"))
        self.assertIsNotNone(phase["table"]["capturing_vs_loaded"])

    def test_trace_summary_counts_planes_steps_and_files(self):
        tmp = tempfile.mkdtemp(prefix="profctl-trace-summary-")
        try:
            with open(os.path.join(tmp, "session.json"), "w") as f:
                json.dump({"hosts": [{"host": "h", "status": "OK", "warnings": ["w"]}]}, f)
            events = [{"ph": "M", "name": "process_name", "pid": 1,
                       "args": {"name": "h /device:GPU:0"}},
                      {"ph": "M", "name": "process_name", "pid": 2,
                       "args": {"name": "h /host:CPU"}},
                      {"ph": "X", "pid": 1, "ts": 0, "dur": 1}, {"ph": "X", "pid": 1, "ts": 2},
                      {"ph": "X", "pid": 2, "ts": 0, "dur": 1}, {"ph": "i", "pid": 1, "ts": 3}]
            with gzip.open(os.path.join(tmp, "pod.trace.json.gz"), "wt") as f:
                json.dump({"traceEvents": events}, f)
            with open(os.path.join(tmp, "pod_step_breakdown.json"), "w") as f:
                json.dump({"steps": [{"step": s, "hosts": [
                    {"host": "h", "step_time_ms": t, "categories_ms": {"compute": t}}]}
                    for s, t in ((1, 2.0), (2, 4.0), (3, 3.0))]}, f)
            got = gpu_verify.trace_summary(tmp)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        self.assertEqual(got["plane_events"], {"h /device:GPU:0": 2, "h /host:CPU": 1})
        self.assertEqual(got["gpu_events"], 2)
        self.assertEqual(got["steps"], 3)
        self.assertEqual(got["median_step_ms"], 3.0)
        self.assertAlmostEqual(got["categories_ms_mean"]["compute"], 3.0)
        self.assertEqual(got["hosts"], [{"host": "h", "status": "OK", "warnings": ["w"]}])
        self.assertEqual(sorted(got["files"]), ["pod.trace.json.gz", "pod_step_breakdown.json",
                                                "session.json"])

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
