#!/bin/bash
# Hostile inputs at 10x: `profctl analyze` on nested JSON, a gzip bomb, a
# huge string and a huge event name, each beside a good rank file.
source "$(dirname "$0")/common.sh"
GOOD=$ROOT/tests/data/traces/rank3.pt.trace.json
nest() {  # nest DEPTH FILE: a trace whose first event's args nest DEPTH arrays
  python3 - "$1" "$2" <<'PY'
import sys
d, f = int(sys.argv[1]), sys.argv[2]
with open(f, "w") as o:
    o.write('{"traceEvents":[{"name":"x","ph":"X","ts":1,"dur":1,"args":{"a":')
    o.write("[" * d); o.write("]" * d); o.write("}}]}")
PY
}
for depth in 100000 1000000; do
  d=$SCRATCH/nest$depth; mkdir -p "$d"; cp "$GOOD" "$d/rank-0.pt.trace.json"
  nest $depth "$d/rank-1.pt.trace.json"
  measure "nested depth $depth (+good rank)" "$PROFCTL" analyze "$d" --json
  python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print('    failed_files:', [f['path'].split('/')[-1] for f in j.get('failed_files',[])], 'hosts:', len(j.get('hosts',j.get('ranks',[]))))" "$SCRATCH/out.txt" 2>&1 | head -2
  measure "nested depth $depth --tool=all" "$PROFCTL" analyze "$d/rank-1.pt.trace.json" --tool=all
  rm -rf "$d"
done
# 10x the 6 MB gzip bomb: ~60 MB of gzip inflating to ~60 GB of one JSON string.
d=$SCRATCH/bomb; mkdir -p "$d"; cp "$GOOD" "$d/rank-0.pt.trace.json"
( printf '{"traceEvents":[{"name":"'; head -c 1G /dev/zero | tr '\0' a ) | gzip -1 >"$SCRATCH/member.gz"
for _ in $(seq 1 60); do cat "$SCRATCH/member.gz"; done >"$d/rank-1.pt.trace.json.gz"
rm -f "$SCRATCH/member.gz"
echo "    bomb: $(stat -c %s "$d/rank-1.pt.trace.json.gz") compressed bytes"
measure "gzip bomb 10x (+good rank)" "$PROFCTL" analyze "$d"
measure "gzip bomb 10x, --max-inflate-ratio=100000" "$PROFCTL" analyze "$d/rank-1.pt.trace.json.gz" --max-inflate-ratio=100000
measure "gzip bomb 10x --tool=all" "$PROFCTL" analyze "$d/rank-1.pt.trace.json.gz" --tool=all
rm -rf "$d"
# 10x the 300 MB string (3 GB) as an arg, and 10x the 200 MB event name (2 GB).
big() {  # big BYTES FIELD FILE
  python3 - "$1" "$2" "$3" <<'PY'
import sys
n, field, f = int(sys.argv[1]), sys.argv[2], sys.argv[3]
chunk = b"b" * (1 << 24)
with open(f, "wb") as o:
    if field == "name":
        o.write(b'{"traceEvents":[{"ph":"X","ts":1,"dur":1,"pid":1,"tid":1,"name":"')
    else:
        o.write(b'{"traceEvents":[{"ph":"X","ts":1,"dur":1,"pid":1,"tid":1,"name":"k","args":{"s":"')
    left = n
    while left > 0:
        c = chunk[:min(left, len(chunk))]; o.write(c); left -= len(c)
    o.write(b'"}]}' if field == "name" else b'"}}]}')
PY
}
d=$SCRATCH/str; mkdir -p "$d"; cp "$GOOD" "$d/rank-0.pt.trace.json"
big 3000000000 arg "$d/rank-1.pt.trace.json"
measure "3 GB string (+good rank)" "$PROFCTL" analyze "$d"
measure "3 GB string --tool=all" "$PROFCTL" analyze "$d/rank-1.pt.trace.json" --tool=all
rm -f "$d/rank-1.pt.trace.json"
big 2000000000 name "$d/rank-1.pt.trace.json"
measure "2 GB event name --tool=all (+good rank)" "$PROFCTL" analyze "$d" --tool=all
rm -rf "$d"
