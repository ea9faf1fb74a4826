#!/usr/bin/env bash
# The flight recorder's snapshot against --max-held-mb: one synthetic agent with a heavy job
# (8 GPUs, KERNELS kernels per 10 ms step, at most 256) and the default recorder (--flight-recorder-mb=64),
# left recording SECONDS + 20 %, then `profctl capture --last=SECONDS s`. Prints the agent's
# resident set before the snapshot and its peak (VmHWM), the ring it kept (its start-up line) and
# the trace saved, once under the default --max-held-mb=512 (the ring lowered to 512/11 MiB) and
# once under --max-held-mb=4096 (the ring left at 64 MiB: the old behaviour).
# Usage: recorder_memory.sh [SECONDS] [KERNELS]
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/common.sh"
SECS=${1:-30}
KERNELS=${2:-256}
for held in 512 4096; do
  port=$(start_agent rec$held --flight-recorder=$((SECS * 2)) --max-held-mb=$held \
    --synthetic=gpus=8,step_ms=10,kernels_per_step=$KERNELS)
  pid=$(cat "$SCRATCH/rec$held.pid")
  sleep "$(echo "$SECS * 1.2" | bc)"
  before=$(awk '/VmRSS/ {print int($2/1024)}' /proc/$pid/status)
  timeout 300 "$PROFCTL" capture --workers=127.0.0.1:$port --last=${SECS}s \
    --logdir="$SCRATCH/logs" --session=rec$held >"$SCRATCH/cap$held.txt" 2>&1
  rc=$?
  peak=$(awk '/VmHWM/ {print int($2/1024)}' /proc/$pid/status)
  trace=$(du -sm "$SCRATCH/logs/plugins/profile/rec$held" | cut -f1)
  echo "--max-held-mb=$held: capture exit $rc; agent RSS before ${before} MiB, peak ${peak} MiB; session folder ${trace} MiB"
  grep -i "recorder" "$SCRATCH/rec$held.log" | head -2 | cut -c1-250 | sed 's/^/    /'
  grep -i "recorded\|partial\|holds" "$SCRATCH/cap$held.txt" | head -2 | cut -c1-250 | sed 's/^/    /'
  kill "$pid"
done
