#!/usr/bin/env python3
"""The entry the checks run as scripts share (profctl_testlib.check_parser, run_in_work_folder):
a Failure becomes exit 1 with FAIL and the logs' tails, a process left running is stopped, the
work folder is removed, and --keep's copy has everything but sockets."""

import contextlib
import io
import os
import shutil
import socket
import sys
import tempfile
import unittest

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from profctl_testlib import Failure, check_parser, run_in_work_folder  # noqa: E402

# A child that runs until it is stopped and says so first (the log tail the test looks for).
FOREVER = [sys.executable, "-c",
           "import sys, time; print('child up', flush=True); time.sleep(600)"]


class RunInWorkFolderTest(unittest.TestCase):

    def test_a_failure_is_exit_1_with_the_logs_and_everything_is_stopped_and_removed(self):
        seen = {}

        def body(work, procs):
            seen["work"] = work
            seen["child"] = procs.start("child", FOREVER)
            procs.wait_line("child", "child up")
            raise Failure("the thing did not happen")

        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            rc = run_in_work_folder("profctl-testlib-test-", body)
        self.assertEqual(rc, 1)
        self.assertIn("FAIL: the thing did not happen", out.getvalue())
        self.assertIn("--- child.log (last lines)\nchild up", out.getvalue())
        self.assertIsNotNone(seen["child"].poll(), "the child still runs")
        self.assertFalse(os.path.exists(seen["work"]), "the work folder is left behind")

    def test_the_body_s_exit_code_and_keep_copies_all_but_sockets(self):
        keep = tempfile.mkdtemp(prefix="profctl-testlib-keep-")
        self.addCleanup(shutil.rmtree, keep, ignore_errors=True)

        def body(work, _):
            os.makedirs(os.path.join(work, "host-a"))
            with open(os.path.join(work, "host-a", "agent.log"), "w") as f:
                f.write("kept\n")
            s = socket.socket(socket.AF_UNIX)
            s.bind(os.path.join(work, "host-a", "agent.sock"))
            s.close()
            return 7

        self.assertEqual(run_in_work_folder("profctl-testlib-test-", body, keep=keep), 7)
        with open(os.path.join(keep, "host-a", "agent.log")) as f:
            self.assertEqual(f.read(), "kept\n")
        self.assertEqual(os.listdir(os.path.join(keep, "host-a")), ["agent.log"])


class CheckParserTest(unittest.TestCase):

    def test_each_binary_is_required_and_the_description_is_the_doc_s_first_line(self):
        ap = check_parser("Checks a thing.\n\nMore words.", binaries=("agent", "app"))
        self.assertEqual(ap.description, "Checks a thing.")
        args = ap.parse_args(["--agent=/bin/a", "--app=/bin/b"])
        self.assertEqual((args.agent, args.app), ("/bin/a", "/bin/b"))
        with contextlib.redirect_stderr(io.StringIO()) as err, self.assertRaises(SystemExit) as e:
            ap.parse_args(["--agent=/bin/a"])
        self.assertEqual(e.exception.code, 2)
        self.assertIn("--app", err.getvalue())


if __name__ == "__main__":
    unittest.main()
