#!/usr/bin/env bash
# `profctl analyze --tool=all` on an XSpace whose one event name is MB megabytes (default 200):
# peak RSS and wall time.
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/common.sh"
MB=${1:-200}
python3 - "$MB" "$SCRATCH/big.xplane.pb" <<'PY'
import sys
def varint(n):
    out = b""
    while True:
        b = n & 0x7f; n >>= 7
        if n: out += bytes([b | 0x80])
        else: return out + bytes([b])
def field(num, wt, payload):
    key = varint((num << 3) | wt)
    return key + varint(payload) if wt == 0 else key + varint(len(payload)) + payload
name = b"b" * (int(sys.argv[1]) << 20)
md = field(1, 0, 1) + field(2, 2, name)                       # XEventMetadata{id, name}
event = field(1, 0, 1) + field(2, 0, 1000) + field(3, 0, 10**6)  # XEvent{metadata_id, offset, duration}
line = field(1, 0, 1) + field(2, 2, b"python") + field(3, 0, 1764400000 * 10**9) + field(4, 2, event)
plane = field(1, 0, 1) + field(2, 2, b"/host:CPU") + field(3, 2, line) + field(4, 2, field(1, 0, 1) + field(2, 2, md))
open(sys.argv[2], "wb").write(field(1, 2, plane) + field(4, 2, b"bighost"))
PY
measure "analyze --tool=all, a ${MB} MB event name" "$PROFCTL" analyze "$SCRATCH/big.xplane.pb" --tool=all
