#!/usr/bin/env python3
"""scripts/failed_tests_digest.py: what `./dev test` prints last when a test failed, so that a
CI log that keeps only its tail still says why."""

import contextlib
import io
import os
import sys
import tempfile
import unittest

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "scripts"))
import failed_tests_digest  # noqa: E402

SEP = "-" * 58


def block(index, name, output, verdict):
    """One test's entry in ctest's LastTest.log, as ctest 3.25 writes it."""
    return (f"{index}/3 Testing: {name}\n{index}/3 Test: {name}\n"
            f"Command: \"/usr/bin/python3\" \"/x/{name}.py\"\nDirectory: /x\n"
            f"\"{name}\" start time: Nov 29 09:41 UTC\nOutput:\n{SEP}\n{output}\n"
            f"<end of output>\nTest time =   7.48 sec\n{SEP}\n{verdict}\n"
            f"\"{name}\" end time: Nov 29 09:42 UTC\n"
            f"\"{name}\" time elapsed: 00:00:07\n{SEP}\n\n")


class DigestTest(unittest.TestCase):

    def run_digest(self, text, *flags):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "LastTest.log")
            with open(path, "w") as f:
                f.write(text)
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                rc = failed_tests_digest.main_with([path, *flags])
        self.assertEqual(rc, 0)
        return out.getvalue()

    def test_names_only_the_failed_tests_with_their_failure_lines_and_last_lines(self):
        noise = "\n".join(f"progress line {i}" for i in range(500))
        text = (block(1, "passing_check", "FAIL: not a failure of a passing test", "Test Passed.") +
                block(2, "cupti_e2e_check",
                      noise + "\nFAIL: profctl capture exited 3\nthe last thing it printed",
                      "Test Failed.") +
                block(3, "Gtest.Case",
                      "x.cc:12: Failure\nValue of: a\n  Actual: 2\nExpected: 3\n[  FAILED  ] Gtest.Case",
                      "Test Failed."))
        out = self.run_digest(text, "--max-chars=6000")
        self.assertNotIn("passing_check", out)
        self.assertIn("dev: failed: cupti_e2e_check: Test Failed.", out)
        self.assertIn("  FAIL: profctl capture exited 3", out)
        self.assertIn("  the last thing it printed", out)
        self.assertNotIn("progress line 10\n", out)  # only the last lines of the noise
        self.assertIn("dev: failed: Gtest.Case", out)
        self.assertIn("  x.cc:12: Failure", out)
        self.assertIn("  Expected: 3", out)

    def test_the_digest_keeps_under_its_budget_with_the_most_telling_last(self):
        lines = "\n".join(f"FAIL: problem {i} " + "y" * 1000 for i in range(50))
        out = self.run_digest(block(1, "big_check", lines, "Test Failed."), "--max-chars=1000")
        self.assertLessEqual(len(out), 1000 + 1)
        self.assertTrue(out.rstrip().endswith("dev: failed: big_check: Test Failed. "
                                              "(Test time =   7.48 sec)"), out[-200:])
        self.assertIn("FAIL: problem 49 ", out)  # the failure lines nearest the end kept
        self.assertNotIn("y" * 300, out)  # every line cut
        self.assertTrue(out.startswith("  ..."))

    def test_a_tail_of_the_output_still_names_the_test_and_its_failure(self):
        noise = "\n".join(f"agent log line {i} " + "z" * 150 for i in range(300))
        text = block(1, "cupti_e2e_check", "FAIL: profctl capture exited 3\n" + noise,
                     "Test Failed.")
        tail = self.run_digest(text)[-600:]
        self.assertIn("FAIL: profctl capture exited 3", tail)
        self.assertIn("dev: failed: cupti_e2e_check", tail)

    def test_a_test_killed_before_its_verdict_is_reported(self):
        text = block(1, "hung_check", "waiting", "Test Failed.").replace("Test Failed.\n", "")
        out = self.run_digest(text)
        self.assertIn("dev: failed: hung_check: no verdict", out)

    def test_no_log_or_no_failure_is_said_and_is_not_an_error(self):
        self.assertIn("no failed test", self.run_digest(block(1, "ok", "fine", "Test Passed.")))
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            rc = failed_tests_digest.main_with(["/nonexistent/LastTest.log"])
        self.assertEqual(rc, 0)
        self.assertIn("no failed-test digest", out.getvalue())


if __name__ == "__main__":
    unittest.main()
