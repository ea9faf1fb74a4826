#!/bin/bash
# Input caps at 10x: what a hostile or huge input file costs `profctl analyze` before it is
# refused (or analysed): peak RSS and wall time under /usr/bin/time -v, each beside a good rank.
# PROFCTL=... picks the binary (e.g. an older build to compare). Needs ~2 GB of /tmp.
source "$(dirname "$0")/common.sh"
GOOD=$ROOT/tests/data/traces/rank3.pt.trace.json
d=$SCRATCH/in; mkdir -p "$d"; cp "$GOOD" "$d/rank-0.pt.trace.json"
# A gzip bomb of one JSON string in one gzip member: N GiB of 'a', level 9 (~1 MB per GiB).
bomb() {  # bomb GIB FILE
  python3 - "$1" "$2" <<'PY'
import sys, zlib
gib, f = int(sys.argv[1]), sys.argv[2]
z = zlib.compressobj(9, zlib.DEFLATED, 31)
chunk = b"a" * (1 << 20)
with open(f, "wb") as o:
    o.write(z.compress(b'{"traceEvents":[{"name":"'))
    for _ in range(gib << 10):
        o.write(z.compress(chunk))
    o.write(z.compress(b'"}]}')); o.write(z.flush())
PY
}
bomb 6 "$d/rank-1.pt.trace.json.gz"
echo "    6 GiB string bomb: $(stat -c %s "$d/rank-1.pt.trace.json.gz") compressed bytes"
measure "6 MB gzip bomb (+good rank)" "$PROFCTL" analyze "$d"
measure "6 MB gzip bomb --tool=all" "$PROFCTL" analyze "$d/rank-1.pt.trace.json.gz" --tool=all
rm -f "$d/rank-1.pt.trace.json.gz"
# A 1 GiB gzip bomb of whitespace inside a valid document (1 MB, level 9): refused by the ratio
# cap; with the cap off it is parsed through as it inflates, in the memory of a small file.
python3 - "$d/rank-1.pt.trace.json.gz" <<'PY'
import sys, zlib
z = zlib.compressobj(9, zlib.DEFLATED, 31)
with open(sys.argv[1], "wb") as o:
    o.write(z.compress(b'{"traceEvents":['))
    for _ in range(1 << 10):
        o.write(z.compress(b" " * (1 << 20)))
    o.write(z.compress(b']}')); o.write(z.flush())
PY
measure "1 GiB whitespace gzip bomb" "$PROFCTL" analyze "$d/rank-1.pt.trace.json.gz"
measure "1 GiB whitespace gzip bomb --max-inflate-ratio=0" "$PROFCTL" analyze "$d/rank-1.pt.trace.json.gz" --max-inflate-ratio=0
rm -f "$d/rank-1.pt.trace.json.gz"
# The 10x bomb of analyze_hostile.sh: 60 gzip -1 members of 1 GiB of one string (281 MB).
( printf '{"traceEvents":[{"name":"'; head -c 1G /dev/zero | tr '\0' a ) | gzip -1 >"$SCRATCH/member.gz"
for _ in $(seq 1 60); do cat "$SCRATCH/member.gz"; done >"$d/rank-1.pt.trace.json.gz"
rm -f "$SCRATCH/member.gz"
echo "    60-member bomb: $(stat -c %s "$d/rank-1.pt.trace.json.gz") compressed bytes"
measure "281 MB gzip bomb (+good rank)" "$PROFCTL" analyze "$d"
measure "281 MB gzip bomb --max-inflate-ratio=100000" "$PROFCTL" analyze "$d/rank-1.pt.trace.json.gz" --max-inflate-ratio=100000
rm -f "$d/rank-1.pt.trace.json.gz"
# A 300 MB string (an arg) in a plain file.
python3 - "$d/rank-1.pt.trace.json" <<'PY'
import sys
with open(sys.argv[1], "wb") as o:
    o.write(b'{"traceEvents":[{"ph":"X","ts":1,"dur":1,"pid":1,"tid":1,"name":"k","args":{"s":"')
    for _ in range(300): o.write(b"b" * 1000000)
    o.write(b'"}}]}')
PY
measure "300 MB string (+good rank)" "$PROFCTL" analyze "$d"
measure "300 MB string --tool=all" "$PROFCTL" analyze "$d/rank-1.pt.trace.json" --tool=all
measure "300 MB string --max-file-mb=100" "$PROFCTL" analyze "$d/rank-1.pt.trace.json" --max-file-mb=100
rm -f "$d/rank-1.pt.trace.json"
# A valid 200 MB dense trace (1.71 M `X` events of ~117 bytes: a ProfilerStep#N every 1,000,
# the rest alternately an aten::add cpu_op and a kernel), plain and gzipped, --tool=all.
python3 - "$d/dense.pt.trace.json" <<'PY'
import sys
n, out = 1710000, []
with open(sys.argv[1], "w") as o:
    o.write('{"traceEvents":[\n')
    for i in range(n):
        ts = 1700000000000000 + i * 10
        if i % 1000 == 0:
            e = '{"ph":"X","cat":"user_annotation","name":"ProfilerStep#%d","pid":1,"tid":1,"ts":%d,"dur":9990}' % (i // 1000, ts)
        elif i % 2:
            e = '{"ph":"X","cat":"cpu_op","name":"aten::add","pid":1,"tid":1,"ts":%d,"dur":4,"args":{"External id":%d}}' % (ts, i)
        else:
            e = '{"ph":"X","cat":"kernel","name":"add_kernel","pid":0,"tid":7,"ts":%d,"dur":3,"args":{"device":0}}' % ts
        o.write(e + (",\n" if i + 1 < n else "\n"))
    o.write("]}\n")
PY
echo "    dense trace: $(stat -c %s "$d/dense.pt.trace.json") bytes"
rm -f "$d/rank-0.pt.trace.json"
measure "200 MB dense trace --tool=all" "$PROFCTL" analyze "$d/dense.pt.trace.json" --tool=all
measure "200 MB dense trace (breakdown)" "$PROFCTL" analyze "$d/dense.pt.trace.json"
gzip -1 "$d/dense.pt.trace.json"
measure "200 MB dense trace gzipped --tool=all" "$PROFCTL" analyze "$d/dense.pt.trace.json.gz" --tool=all
rm -rf "$d"
# A 500 MB YAML value in `serve --config`: refused by the file's size before parsing.
[ "${SKIP_YAML:-0}" = 1 ] && exit 0
python3 - "$SCRATCH/coordinator.yaml" <<'PY'
import sys
with open(sys.argv[1], "w") as o:
    o.write("logdir: /tmp/x\nschedules:\n  - name: a\n    targets: [h:1]\n    interval: ")
    for _ in range(500): o.write("x" * 1000000)
    o.write("\n")
PY
measure "500 MB YAML value (serve --config)" "$PROFCTL" serve --config="$SCRATCH/coordinator.yaml" --port=0
