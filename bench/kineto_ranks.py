#!/usr/bin/env python3
"""Writes N ranks of a real-shaped PyTorch profiler trace for `./dev bench`: the real H100
trace in tests/data/traces, its events repeated (each copy 40 ms later, its ProfilerStep numbers
after the last copy's) until a rank's JSON is about --mb MB, gzipped as PyTorch writes
*.pt.trace.json.gz. Times and numbers are edited as text: no float rounding.

  bench/kineto_ranks.py OUT_DIR [--ranks=4] [--mb=158]
"""
import argparse
import gzip
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.join(HERE, "..", "tests", "data", "traces", "h100_torch_profiler.pt.trace.json.gz")
COPY_US = 40_000  # the source's events span 36.8 ms


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--mb", type=float, default=158)
    a = ap.parse_args()
    text = gzip.decompress(open(SOURCE, "rb").read()).decode()
    start = text.index('"traceEvents": [') + len('"traceEvents": [')
    end = text.rindex("]")
    head, events, tail = text[:start], text[start:end].rstrip(), text[end:]
    steps = sorted({int(n) for n in re.findall(r"ProfilerStep#(\d+)", events)})
    step_count = steps[-1] + 1 if steps else 0
    copies = max(1, int(a.mb * 1e6 / len(text)))
    ts = re.compile(r'("ts": )(\d+)(\.\d+)?')
    step = re.compile(r"ProfilerStep#(\d+)")
    os.makedirs(a.out, exist_ok=True)
    for rank in range(a.ranks):
        parts = [head.replace("{", '{\n  "distributedInfo": {"rank": %d},' % rank, 1)]
        for k in range(copies):
            shifted = ts.sub(lambda m: "%s%d%s" % (m.group(1), int(m.group(2)) + k * COPY_US,
                                                   m.group(3) or ""), events)
            shifted = step.sub(lambda m: "ProfilerStep#%d" % (int(m.group(1)) + k * step_count),
                               shifted)
            parts.append(shifted if k == 0 else ",\n" + shifted.lstrip())
        parts.append("\n  " + tail)
        path = os.path.join(a.out, "rank%d.pt.trace.json.gz" % rank)
        with gzip.open(path, "wb", compresslevel=6) as f:
            for p in parts:
                f.write(p.encode())
        print("%s: %d copies, %.1f MB of JSON" % (path, copies, sum(len(p) for p in parts) / 1e6),
              file=sys.stderr)


if __name__ == "__main__":
    main()
