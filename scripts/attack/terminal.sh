#!/usr/bin/env bash
# Control bytes from a trace on the terminal: a Kineto trace whose kernel names carry ESC, BEL, DEL
# and a UTF-8 C1 CSI (U+009B), 10 of each kind; counts the raw control bytes each --csv output
# passes to stdout (it should be 0: they are written as the text \xNN).
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/common.sh"
python3 - "$ROOT/tests/data/traces/rank3.pt.trace.json" "$SCRATCH/a" "$SCRATCH/b" <<'PY'
import json, os, sys
j = json.load(open(sys.argv[1]))
bad = ["\x1b]0;pwned\x07", "\x1b[2J", "\x7f", "\u009b31m"]
n = 0
for e in j["traceEvents"]:
    if e.get("cat") == "kernel":
        e["name"] = "".join(bad) * 10 + f"k{n}"
        n += 1
for d in sys.argv[2:]:
    os.makedirs(d)
    json.dump(j, open(os.path.join(d, "rank-0.pt.trace.json"), "w"))
PY
count() { tr -cd '\000-\010\013\014\016-\037\177\302' | wc -c; }
for cmd in "analyze $SCRATCH/a --csv" "analyze $SCRATCH/a --tool=kernel_stats --csv" \
           "analyze $SCRATCH/a --tool=all --csv" "diff $SCRATCH/a $SCRATCH/b --csv"; do
  n=$(timeout 60 "$PROFCTL" $cmd 2>/dev/null | count)
  echo "profctl $cmd: $n raw control bytes on stdout" | sed "s|$SCRATCH/||g"
done
