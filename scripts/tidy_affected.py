#!/usr/bin/env python3
"""Which sources a change can affect, for `./dev test`'s clang-tidy.

usage: tidy_affected.py BUILD_DIR SOURCES_FILE < CHANGED
  CHANGED       paths (relative to the repository root) that differ from main, one a line
  SOURCES_FILE  the sources clang-tidy checks, one a line
Prints every source of SOURCES_FILE that is in CHANGED, or whose object in BUILD_DIR's last build
depends on a header in CHANGED (ninja's dependency log, `ninja -t deps`), one a line, sorted.
The compilation database read is BUILD_DIR/compdb/ (scripts/unity_compdb.py) when there is one:
in a unity build an object is a batch of sources, and a header any of them includes counts for
all of them.
"""
import json
import os
import subprocess
import sys


def main():
    build_dir, sources_file = sys.argv[1], sys.argv[2]
    root = os.getcwd()
    sources = {l.strip() for l in open(sources_file) if l.strip()}
    changed = {l.strip() for l in sys.stdin if l.strip()}
    affected = sources & changed
    headers = {os.path.join(root, c) for c in changed if c.endswith(".h")}
    if headers:
        # object file -> sources, from the compilation database.
        compdb = os.path.join(build_dir, "compdb", "compile_commands.json")
        if not os.path.exists(compdb):
            compdb = os.path.join(build_dir, "compile_commands.json")
        with open(compdb) as f:
            commands = json.load(f)
        sources_of = {}
        for c in commands:
            out = c.get("output")
            if out is None:  # older CMake: the object follows -o
                args = c.get("arguments") or c["command"].split()
                out = args[args.index("-o") + 1] if "-o" in args else None
            if out is not None:
                sources_of.setdefault(os.path.normpath(os.path.join(c["directory"], out)), []).append(
                    os.path.relpath(os.path.normpath(os.path.join(c["directory"], c["file"])), root))
        deps = subprocess.run(["ninja", "-C", build_dir, "-t", "deps"], check=True,
                              capture_output=True, text=True).stdout
        abs_build = os.path.abspath(build_dir)
        obj = None
        for line in deps.splitlines():
            if not line.strip():
                continue
            if not line.startswith(" "):
                obj = os.path.normpath(os.path.join(abs_build, line.split(":", 1)[0]))
                continue
            dep = os.path.normpath(os.path.join(abs_build, line.strip()))
            if dep in headers:
                affected.update(s for s in sources_of.get(obj, []) if s in sources)
    for s in sorted(affected):
        print(s)


if __name__ == "__main__":
    main()
