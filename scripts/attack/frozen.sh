#!/usr/bin/env bash
# A frozen host at 10x: N live agents (default 2) and F frozen ones (SIGSTOP before the capture;
# default 1), a 2 s capture of all of them. A frozen agent's kernel still answers TCP handshakes,
# its process nothing: the others' window should start about 0.5 s in (frozen_host_wait_ms), not
# after the frozen GetInfo's 2 s timeout. Prints the capture's wall time and its prepare time.
# Usage: frozen.sh [N] [F]
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/common.sh"
N=${1:-2}
F=${2:-1}
workers=()
for i in $(seq 0 $((N - 1))); do
  workers+=("127.0.0.1:$(start_agent live$i --synthetic=rank=$i,world=$((N + F)))")
done
for i in $(seq 0 $((F - 1))); do
  workers+=("127.0.0.1:$(start_agent frozen$i --synthetic=rank=$((N + i)),world=$((N + F)))")
  kill -STOP "$(cat "$SCRATCH/frozen$i.pid")"
done
list=$(IFS=,; echo "${workers[*]}")
measure "capture of $N live + $F frozen, --duration=2000" \
  "$PROFCTL" capture --workers="$list" --duration=2000 --logdir="$SCRATCH/logs" --session=frozen
python3 - "$SCRATCH/logs/plugins/profile/frozen/session.json" <<'PY'
import collections, json, sys
m = json.load(open(sys.argv[1]))
print(f"prepare_ms {m.get('prepare_ms', 0):.0f}; hosts:",
      dict(collections.Counter(h.get("status", "?") for h in m.get("hosts", []))))
for h in m.get("hosts", []):
    if h.get("status") != "HOST_STATUS_OK" and "frozen" not in h.get("error", {}).get("message", ""):
        print("  ", h.get("address"), h.get("status"), h.get("recording"),
              h.get("error", {}).get("message", "")[:200])
PY
for i in $(seq 0 $((F - 1))); do kill -CONT "$(cat "$SCRATCH/frozen$i.pid")"; done
