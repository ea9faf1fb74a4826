#!/usr/bin/env bash
# A flood of refused Capture calls at an agent for SECONDS (default 10; the flood that wrote 3.0 MB
# of log in 10 s was 15,416 calls): how many were answered, and how much the agent logged.
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/common.sh"
SECONDS_=${1:-10}
port=$(start_agent a0 --synthetic=rank=0,world=1)
before=$(stat -c %s "$SCRATCH/a0.log")
timeout $((SECONDS_ + 30)) python3 "$HERE/h2_capture_flood.py" 127.0.0.1:$port "$SECONDS_" 4
after=$(stat -c %s "$SCRATCH/a0.log")
echo "agent log: $((after - before)) bytes, $(grep -c "rejected" "$SCRATCH/a0.log") 'rejected' lines"
grep "more like it" "$SCRATCH/a0.log" | cut -c1-260
