#!/usr/bin/env python3
"""Why each failed test failed, short enough to survive a CI log that keeps only its tail.

usage: failed_tests_digest.py LAST_TEST_LOG [--max-chars=N]

`./dev test` runs this after a ctest run that failed. ctest prints each failed test's output
where the test ended, hundreds of lines above the summary; a CI that shows only the last few
thousand characters of a run shows the summary and none of the reasons. This reads ctest's
LastTest.log (build/test/Testing/Temporary/) and prints, for each failed test, the lines of its
output that say what failed (gtest's failures and their messages, FAIL: lines, sanitizer and
Python errors, "Timeout") and its last lines, each line cut to 200 characters and the whole
digest to --max-chars (default 1,500). The most telling comes last, where a log cut to its tail
keeps it: its last lines, then the lines that say what failed, then the test's name; what does
not fit is dropped from the start. Exit 0 (it only reads).
"""
import argparse
import re
import sys

# Lines that name a failure, in the order of how much they tell.
TELLING = re.compile(
    r"(^FAIL: |Failure$|: Failure|^\[  FAILED  \]|^Expected|^  Actual|Which is:|Value of:|"
    r"ERROR: (Address|Leak|Thread|Undefined)Sanitizer|runtime error:|SUMMARY: |Traceback|"
    r"^\w*Error: |Timeout|timed out|Segmentation fault|Aborted|exited \d+|did not)")
LINE_CHARS = 200


def failed_blocks(text):
    """(test name, its output lines, how it ended) for each test of LastTest.log that did not
    pass."""
    out = []
    for m in re.finditer(r"^\d+/\d+ Test: (\S+)\n(.*?)^\"\1\" end time", text, re.M | re.S):
        name, body = m.group(1), m.group(2)
        end = re.search(r"^Test (Passed|Failed|Not Run)\.?.*$", body, re.M)
        verdict = end.group(0) if end else "no verdict (killed or timed out?)"
        if end and end.group(1) == "Passed":
            continue
        timeout = re.search(r"^Test time = .*$", body, re.M)
        output = body.split("Output:\n", 1)[-1].split("<end of output>", 1)[0]
        lines = [l for l in output.splitlines() if l.strip() and not set(l.strip()) <= {"-"}]
        out.append((name, lines, verdict + (f" ({timeout.group(0)})" if timeout else "")))
    return out


def digest(name, lines, verdict, budget):
    """The digest of one failed test in at most `budget` characters, its most telling lines
    last (a log cut to its tail keeps those): its last lines, then the lines that say what
    failed, then its name. Lines are dropped from the start when over budget."""
    cut = [l if len(l) <= LINE_CHARS else l[:LINE_CHARS] + "..." for l in lines]
    telling = []
    for l in cut:
        if TELLING.search(l) and l not in telling:
            telling.append(l)
    tail = [l for l in cut[-5:] if l not in telling]
    parts = ["  (its last lines)"] + ["  " + l for l in tail] + ["  " + l for l in telling]
    last = f"dev: failed: {name}: {verdict}"
    kept, used = [], len(last) + 1
    for p in reversed(parts):  # the most telling first, kept while they fit
        if used + len(p) + 1 > budget:
            kept.append("  ...")
            break
        kept.append(p)
        used += len(p) + 1
    return "\n".join(list(reversed(kept)) + [last])


def main_with(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("log")
    ap.add_argument("--max-chars", type=int, default=1500)
    args = ap.parse_args(argv)
    try:
        with open(args.log, errors="replace") as f:
            text = f.read()
    except OSError as e:
        print(f"dev: no failed-test digest: {e}")
        return 0
    blocks = failed_blocks(text)
    if not blocks:
        print(f"dev: no failed test in {args.log}")
        return 0
    budget = max(400, args.max_chars // len(blocks))
    print("\n".join(digest(n, l, v, budget) for n, l, v in blocks))
    return 0


if __name__ == "__main__":
    sys.exit(main_with(sys.argv[1:]))
