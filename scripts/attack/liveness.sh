#!/bin/bash
# Liveness at 10x: liveness of concurrent captures on the same agents. Starts N local agents, then
# RUNS times starts K `profctl capture`s together (every other one lists the workers in reverse
# order) and reports, per run, how many hosts each capture saved, whether a pod was split, and
# how long each took. Expected (wait-die, docs/life-of-a-capture.md): every capture gets all or
# nothing, and exactly one of them gets the whole pod.
# Usage: liveness.sh [N=24] [RUNS=5] [K=2]   (PROFCTL/AGENT: the binaries, as in common.sh)
source "$(dirname "$0")/common.sh"
N=${1:-24}
RUNS=${2:-5}
K=${3:-2}
LOG=$SCRATCH/logs
ports=()
for i in $(seq 0 $((N - 1))); do
  ports+=("127.0.0.1:$(start_agent "a$i" --synthetic=rank=$i,world=$N,gpus=2)")
done
WORKERS=$(IFS=,; echo "${ports[*]}")
REV=$(echo "$WORKERS" | tr , '\n' | tac | paste -sd,)
echo "started $N agents; $RUNS runs of $K concurrent captures"
for r in $(seq 1 "$RUNS"); do
  t0=$(date +%s.%N)
  for j in $(seq 1 "$K"); do
    w=$WORKERS; [ $((j % 2)) -eq 0 ] && w=$REV
    timeout 90 "$PROFCTL" capture --workers="$w" --duration=1000 --tolerance=50 --logdir="$LOG" \
      --session="live${r}_$j" >"$SCRATCH/l${r}_$j.out" 2>&1 &
  done
  wait
  t1=$(date +%s.%N)
  python3 - "$LOG/plugins/profile" "$r" "$K" "$N" "$t0" "$t1" <<'PY'
import json, os, sys, collections
root, r, k, n, t0, t1 = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5]), float(sys.argv[6])
saved, notes = [], []
for j in range(1, k + 1):
    p = os.path.join(root, "live%d_%d" % (r, j), "session.json")
    if not os.path.exists(p):
        saved.append(-1); notes.append("capture %d: no session.json" % j); continue
    m = json.load(open(p))
    hosts = m.get("hosts", [])
    ok = sum(1 for h in hosts if h.get("status", "").replace("HOST_STATUS_", "") in ("OK", "INCOMPLETE"))
    saved.append(ok)
    errs = collections.Counter((h.get("error") or {}).get("message", "")[:150] for h in hosts if h.get("error"))
    notes.append("capture %d: %d/%d prepare_ms=%s %s" % (j, ok, n, m.get("prepare_ms"), errs.most_common(1)))
whole = sum(1 for s in saved if s == n)
split = sum(1 for s in saved if 0 < s < n)
print("run %d: whole=%d split=%d saved=%s wall=%.1fs" % (r, whole, split, saved, t1 - t0))
for x in notes: print("    " + x)
PY
done
