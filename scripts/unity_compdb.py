#!/usr/bin/env python3
"""A compilation database with one entry per source, from a unity build's.

usage: unity_compdb.py BUILD_DIR
Reads BUILD_DIR/compile_commands.json. A unity build (PROFCTL_UNITY_BUILD) lists batch files
(cmake/ProfctlUnity.cmake: .../unity/TARGET_N.cc, first line MARKER, each #including several
sources by their paths relative to the batch file) instead of the sources:
clang-tidy, which checks one source at a time, would not find them. Writes
BUILD_DIR/compdb/compile_commands.json, where each batch is replaced by one entry per source it
includes, with the batch's command (the same flags: a batch holds one target's sources) and the
batch's object as "output" (what scripts/tidy_affected.py maps ninja's dependencies through).
Entries that are not batches are copied. The file is replaced atomically.
"""
import json
import os
import re
import sys

INCLUDE = re.compile(r'^#include "([^"]+)"\s*$')
# The first line of a batch file (PROFCTL_UNITY_MARKER in cmake/ProfctlUnity.cmake).
MARKER = "// profctl unity batch"


def batch_sources(path):
    """The sources a batch file includes, in order, as absolute paths; None if it is no batch."""
    with open(path) as f:
        if not f.readline().startswith(MARKER):
            return None
        here = os.path.dirname(path)
        return [os.path.normpath(os.path.join(here, m.group(1)))
                for m in map(INCLUDE.match, f) if m]


def expand(entry):
    """One entry per source for a batch entry; the entry itself otherwise."""
    path = os.path.normpath(os.path.join(entry["directory"], entry["file"]))
    sources = batch_sources(path) if os.path.exists(path) else None
    if sources is None:
        return [entry]
    out = []
    for src in sources:
        e = dict(entry)
        e["file"] = src
        if "command" in e:
            e["command"] = e["command"].replace(entry["file"], src)
        if "arguments" in e:
            e["arguments"] = [src if a == entry["file"] else a for a in e["arguments"]]
        if "output" not in e:
            args = e.get("arguments") or entry["command"].split()
            if "-o" in args:
                e["output"] = args[args.index("-o") + 1]
        out.append(e)
    return out


def main():
    build_dir = sys.argv[1]
    with open(os.path.join(build_dir, "compile_commands.json")) as f:
        entries = json.load(f)
    expanded = [e for entry in entries for e in expand(entry)]
    out_dir = os.path.join(build_dir, "compdb")
    os.makedirs(out_dir, exist_ok=True)
    tmp = os.path.join(out_dir, "compile_commands.json.tmp")
    with open(tmp, "w") as f:
        json.dump(expanded, f, indent=0)
    os.replace(tmp, os.path.join(out_dir, "compile_commands.json"))


if __name__ == "__main__":
    main()
