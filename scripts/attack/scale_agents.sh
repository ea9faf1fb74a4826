#!/bin/bash
# Scale at 2x-10x: N local agent processes (synthetic, skewed clocks) captured in one
# window by one `profctl capture`, R rounds; prints each round's exit, headline, hosts
# by status, the capture's wall time and peak RSS, and the agents' total RSS.
# Usage: scale_agents.sh [N=512] [ROUNDS=3] [DURATION_MS=2000]
source "$(dirname "$0")/common.sh"
N=${1:-512}; ROUNDS=${2:-3}; DUR=${3:-2000}
ulimit -n 65536 2>/dev/null
ports=()
t0=$(date +%s.%N)
for i in $(seq 0 $((N - 1))); do
  ports+=("127.0.0.1:$(start_agent "a$i" --synthetic=rank=$i,world=$N,gpus=1 --clock-skew-ms=$(( (i * 7) % 61 - 30 )))") || exit 1
done
echo "started $N agents in $(echo "$(date +%s.%N) - $t0" | bc) s"
WORKERS=$(IFS=,; echo "${ports[*]}")
LOG=$SCRATCH/logs
for r in $(seq 1 "$ROUNDS"); do
  measure "round $r" "$PROFCTL" capture --workers="$WORKERS" --duration="$DUR" --logdir="$LOG" \
    --session="scale_$r" ${EXTRA:-}
  grep -m1 -E '^(ok|partial|failed|FAILED|OK)' "$SCRATCH/out.txt" | cut -c1-200 | sed 's/^/    headline: /'
  python3 - "$LOG/plugins/profile/scale_$r/session.json" <<'PY'
import json, sys, collections
try:
    j = json.load(open(sys.argv[1]))
except Exception as e:
    print("    session.json:", e); sys.exit()
hosts = j.get("hosts", [])
print("    status=%s hosts=%s" % (j.get("status"), dict(collections.Counter(h.get("status", "?") for h in hosts))))
bad = [h for h in hosts if h.get("status") != "HOST_STATUS_OK" and h.get("status") != "OK"]
for h in bad[:5]:
    print("     ", h.get("address"), h.get("status"), str(h.get("error", h.get("warnings", "")))[:200])
PY
  cp "$LOG/plugins/profile/scale_$r/session.json" "/tmp/scale_${N}_$r.session.json" 2>/dev/null
  cp "$SCRATCH/out.txt" "/tmp/scale_${N}_$r.out" 2>/dev/null
done
echo "agents' total RSS: $(ps -o rss= -p "$(cat "$SCRATCH"/*.pid | paste -sd,)" | awk '{s+=$1} END {printf "%d MB", s/1024}')"
