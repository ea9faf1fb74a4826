#!/usr/bin/env python3
"""House rules the build holds over the tracked sources, tests and docs (docs/design/decisions.md,
"Tests"): comments, tests and docs state behaviour, never issue numbers ("issue 28 item 2" says
nothing once the issue is closed); one start_agent helper for the Python checks
(tests/py/profctl_testlib.py), which the others call. Skipped (exit 77) outside a git checkout."""

import os
import re
import subprocess
import sys
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

TEXT = (".cc", ".h", ".py", ".sh", ".md", ".cmake", ".txt", ".yaml", ".yml", ".in", ".js", ".css",
        ".proto")
ISSUE = re.compile(r"\bissues? ?#?[0-9]+", re.IGNORECASE)
# Files still naming issues, each with who restates them; this list only shrinks.
ISSUE_EXCEPTIONS = {
    # The dated history of measurements (STYLE: history goes in commit messages and
    # docs/perf.md), where an issue names the work a measurement belongs to.
    "docs/perf.md",
}
START_AGENT = re.compile(r"^\s*def start_agent\b", re.MULTILINE)


def tracked():
    r = subprocess.run(["git", "-C", ROOT, "ls-files", "-z"], capture_output=True, check=False)
    if r.returncode != 0:
        return None
    return [f for f in r.stdout.decode().split("\0") if f]


def read(path):
    with open(os.path.join(ROOT, path), encoding="utf-8", errors="replace") as f:
        return f.read()


def issue_mentions(text):
    """(line number, line) of each line naming an issue number."""
    return [(n, line.strip()) for n, line in enumerate(text.splitlines(), 1)
            if ISSUE.search(line)]


class SourceRulesTest(unittest.TestCase):

    def test_no_source_test_or_doc_names_an_issue_number(self):
        found = []
        for f in FILES:
            if f.endswith(TEXT) and f not in ISSUE_EXCEPTIONS and f != "tests/py/source_rules_test.py":
                found += [f"{f}:{n}: {line}" for n, line in issue_mentions(read(f))]
        self.assertEqual(found, [], "state the behaviour, not the issue:\n" + "\n".join(found))

    def test_the_rule_finds_issue_numbers_and_only_them(self):
        self.assertTrue(issue_mentions("// fixed for issue 28 item 2"))
        self.assertTrue(issue_mentions("(Issue #7)"))
        self.assertTrue(issue_mentions("see issues 26"))
        self.assertFalse(issue_mentions("an issue with 2 hosts"))
        self.assertFalse(issue_mentions("tissue 5"))

    def test_every_python_check_starts_agents_through_the_one_helper(self):
        defs = [f for f in FILES if f.endswith(".py") and START_AGENT.search(read(f))]
        self.assertEqual(defs, ["tests/py/profctl_testlib.py"])


FILES = tracked()

if __name__ == "__main__":
    if FILES is None:
        print("source_rules_test: not a git checkout; skipped")
        sys.exit(77)
    unittest.main()
