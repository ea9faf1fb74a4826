#!/usr/bin/env python3
"""How the house is built, at one commit: lines per folder, the largest files and functions.

usage: house_stats.py [REV] [--top=10]

Reads the tracked C++ sources of REV (default HEAD) through git, so any two commits compare
without a checkout. Production code is every .cc/.h outside tests/, bench/, fuzz/ and not named
*_test.cc; the rest is test code. Prints lines per top-level folder (production, and test), the
`--top` largest production files, the `--top` largest production functions, and the number of
gtest tests (TEST, TEST_F, TEST_P and TYPED_TEST definitions in test code).

Functions are found by brace matching, not by a compiler: a body is a `{` at namespace or class
depth whose statement holds a parameter list and starts with no control keyword; its size is its
lines from the signature's first line to the closing brace, lambdas and local classes included.
Good enough to rank; a number off by a line or two is possible on unusual formatting.
"""
import argparse
import collections
import re
import subprocess
import sys

TEST_DIRS = ("tests/", "bench/", "fuzz/")
NOT_FUNCTIONS = re.compile(
    r"^\s*(if|for|while|switch|else|do|try|catch|namespace|class|struct|union|enum|extern|"
    r"return|case|default)\b")
SCOPES = re.compile(r"^\s*(template\s*<.*>\s*)?(namespace|class|struct|union|enum|extern)\b")


def git(*args):
    return subprocess.run(["git", *args], check=True, capture_output=True, text=True).stdout


def sources(rev):
    names = git("ls-tree", "-r", "--name-only", rev).splitlines()
    return [n for n in names if n.endswith((".cc", ".h")) and not n.startswith("build/")]


def is_test(path):
    return path.startswith(TEST_DIRS) or path.endswith("_test.cc") or "/testdata/" in path


def strip_code(line, state):
    """The line without comments and string or character literals; `state` carries an open
    block comment across lines."""
    out = []
    i = 0
    if state.get("raw"):
        end = line.find(state["raw"])
        if end < 0:
            return ""
        i = end + len(state["raw"])
        state["raw"] = None
    while i < len(line):
        if state["block"]:
            end = line.find("*/", i)
            if end < 0:
                return "".join(out)
            state["block"] = False
            i = end + 2
            continue
        c = line[i]
        if line.startswith("//", i):
            break
        if line.startswith("/*", i):
            state["block"] = True
            i += 2
            continue
        if c == "'" and i > 0 and line[i - 1].isalnum():
            i += 1  # a digit separator (86'400'000), not a character literal
            continue
        if c == "R" and line.startswith('R"', i):  # a raw string: R"delim( ... )delim"
            delim = line[i + 2:line.find("(", i)] if "(" in line[i:] else ""
            end = line.find(")" + delim + '"', i)
            if end < 0:
                state["raw"] = ")" + delim + '"'
                return "".join(out)
            out.append('""')
            i = end + len(delim) + 2
            continue
        if c in "\"'":
            j = i + 1
            while j < len(line) and line[j] != c:
                j += 2 if line[j] == "\\" else 1
            out.append(c + c)
            i = j + 1
            continue
        out.append(c)
        i += 1
    return "".join(out)


def functions(path, text):
    """(lines, 'path:line name') of every function body found in `text`."""
    found = []
    stack = []  # per open brace: "scope", "fn" or "block"
    head, head_line = [], None  # code since the last ; { or }, and its first line
    state = {"block": False}
    fn_start = None
    for n, raw in enumerate(text.splitlines(), 1):
        code = strip_code(raw, state)
        if code.strip().startswith("#"):
            continue
        for ch in code + " ":
            if ch in "{};":
                text_head = "".join(head).strip()
                first = head_line or n
                head, head_line = [], None
                if ch == ";":
                    continue
                if ch == "}":
                    kind = stack.pop() if stack else "scope"
                    if kind == "fn" and fn_start is not None:
                        found.append((n - fn_start[0] + 1, f"{path}:{fn_start[0]} {fn_start[1]}"))
                        fn_start = None
                    continue
                if "fn" in stack:
                    stack.append("block")
                elif (SCOPES.match(text_head) or "(" not in text_head or
                      NOT_FUNCTIONS.match(text_head) or text_head.rstrip().endswith("=")):
                    stack.append("scope")
                else:
                    stack.append("fn")
                    names = re.findall(r"([~\w:]+(?:operator\S*)?)\s*\(", text_head)
                    fn_start = (first, names[0] if names else "?")
                continue
            if not ch.isspace() and head_line is None:
                head_line = n
            head.append(ch)
        if "".join(head).strip() in ("public:", "private:", "protected:"):
            head, head_line = [], None  # an access label is not the next function's start
    return found


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("rev", nargs="?", default="HEAD")
    ap.add_argument("--top", type=int, default=10)
    args = ap.parse_args()
    rev = git("rev-parse", "--short", args.rev).strip()
    prod, test = collections.Counter(), collections.Counter()
    files, funcs, tests = [], [], 0
    for path in sources(rev):
        text = git("show", f"{rev}:{path}")
        lines = text.count("\n")
        folder = path.split("/", 1)[0] if "/" in path else "."
        if is_test(path):
            test[folder] += lines
            tests += len(re.findall(r"^(TEST|TEST_F|TEST_P|TYPED_TEST)\(", text, re.M))
            continue
        prod[folder] += lines
        files.append((lines, path))
        funcs += functions(path, text)
    total = sum(prod.values())
    print(f"house_stats {rev}: {total:,} lines of production C++, {sum(test.values()):,} of tests; "
          f"{tests:,} gtest tests")
    print("production lines per folder:")
    for folder, n in prod.most_common():
        print(f"  {folder:<12} {n:>7,}  {100 * n / total:5.1f} %")
    print("test lines per folder:")
    for folder, n in test.most_common():
        print(f"  {folder:<12} {n:>7,}")
    print(f"the {args.top} largest production files:")
    for n, path in sorted(files, reverse=True)[:args.top]:
        print(f"  {n:>6,}  {path}")
    print(f"the {args.top} largest production functions (lines):")
    for n, where in sorted(funcs, reverse=True)[:args.top]:
        print(f"  {n:>6,}  {where}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
