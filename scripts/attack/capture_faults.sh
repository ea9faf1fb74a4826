#!/bin/bash
# Capture faults at 10x: SIGKILL of the coordinator at several points
# of a capture of N local agents, a full disk during the window, an agent
# killed and restarted mid-window, concurrent captures on the same agents.
# Usage: capture_faults.sh [N=24]
source "$(dirname "$0")/common.sh"
N=${1:-24}
LOG=$SCRATCH/logs
ports=()
for i in $(seq 0 $((N - 1))); do
  ports+=("127.0.0.1:$(start_agent "a$i" --synthetic=rank=$i,world=$N,gpus=2 --clock-skew-ms=$(( (i * 7) % 61 - 30 )))")
done
WORKERS=$(IFS=,; echo "${ports[*]}")
echo "started $N agents"
state() {  # state SESSION_DIR: status, hosts by status, leftover .tmp files
  python3 - "$1" <<'PY'
import json, sys, os, collections, glob
d = sys.argv[1]
try:
    j = json.load(open(os.path.join(d, "session.json")))
except Exception as e:
    print("    session.json:", e); j = {}
hosts = j.get("hosts", [])
c = collections.Counter(h.get("status", "?") for h in hosts)
tmps = [f for f in os.listdir(d) if ".tmp" in f] if os.path.isdir(d) else []
print("    status=%s hosts=%s tmp_files=%d running_marker=%s" % (j.get("status"), dict(c), len(tmps),
      any(f.startswith(".running") or f == "RUNNING" for f in os.listdir(d)) if os.path.isdir(d) else None))
PY
}
if [ -z "${ONLY_CONC:-}" ]; then
# 1) SIGKILL the coordinator at several points of a 2 s capture.
for t in ${KILL_AT:-0.2 1.0 2.2 2.6 3.2 4.5 6.0}; do
  s=kill_$(echo $t | tr . _)
  # no `timeout` wrapper here: $! must be profctl itself, the process killed
  "$PROFCTL" capture --workers="$WORKERS" --duration=2000 --tolerance=50 \
    --logdir="$LOG" --session=$s >"$SCRATCH/$s.out" 2>&1 &
  cp=$!; sleep $t; kill -9 $cp 2>/dev/null; wait $cp 2>/dev/null
  sleep 2.5  # the agents finish the window the killed capture asked for (else the next is refused: busy)
  echo "SIGKILL at ${t}s: folder files=$(ls "$LOG/plugins/profile/$s" 2>/dev/null | wc -l)"
  state "$LOG/plugins/profile/$s"
done
echo "--- profctl sessions after the kills:"
timeout 30 "$PROFCTL" sessions --logdir="$LOG" 2>&1 | head -12 | sed 's/^/    /'
for t in 2_2 4_5 6_0; do
  timeout 120 "$PROFCTL" analyze "$LOG/plugins/profile/kill_$t" >/dev/null 2>"$SCRATCH/an.err"
  echo "analyze kill_$t before recovery: exit=$? $(head -c 200 "$SCRATCH/an.err" | tr '\n' ' ')"
done
timeout 60 "$PROFCTL" capture --workers="$WORKERS" --duration=1000 --tolerance=50 --logdir="$LOG" \
  --session=after_kills >"$SCRATCH/next.out" 2>&1
echo "next capture: exit=$? $(grep -i 'abandon\|recover\|temporary' "$SCRATCH/next.out" | tr '\n' ' ' | cut -c1-1200)"
for t in $(echo ${KILL_AT:-0.2 1.0 2.2 2.6 3.2 4.5 6.0} | tr . _); do echo "kill_$t after recovery:"; state "$LOG/plugins/profile/kill_$t"; done
for t in 2_2 4_5 6_0; do
  timeout 120 "$PROFCTL" analyze "$LOG/plugins/profile/kill_$t" >/dev/null 2>"$SCRATCH/an.err"
  echo "analyze kill_$t after recovery: exit=$? $(head -c 200 "$SCRATCH/an.err" | tr '\n' ' ')"
done
# 2) A full disk: a tmpfs with just over the 64 MiB the capture checks for,
#    pre-filled so the traces of the window cannot all be written.
MNT=$SCRATCH/mnt; mkdir -p "$MNT"
if mount -t tmpfs -o size=72m tmpfs "$MNT" 2>/dev/null; then
  # 65 MiB free at the start (the capture checks for 64); a filler takes
  # the rest 1 s into the 4 s window.
  head -c $((7 * 1024 * 1024)) /dev/zero >"$MNT/filler0"
  timeout 60 "$PROFCTL" capture --workers="$WORKERS" --duration=4000 --tolerance=50 --logdir="$MNT/logs" \
    --session=diskfull >"$SCRATCH/df.out" 2>&1 &
  cp=$!; sleep 1.5; head -c $((80 * 1024 * 1024)) /dev/zero >"$MNT/filler" 2>/dev/null
  wait $cp; rc=$?
  echo "disk full 1.5 s into the window (tmpfs 72 MiB): exit=$rc $(grep -i 'space\|disk\|error\|fail' "$SCRATCH/df.out" | head -3 | tr '\n' ' ' | cut -c1-400)"
  state "$MNT/logs/plugins/profile/diskfull"
  rm -f "$MNT/filler" "$MNT/filler0"
  timeout 30 "$PROFCTL" sessions --logdir="$MNT/logs" 2>&1 | head -4 | sed 's/^/    /'
  timeout 60 "$PROFCTL" capture --workers="$WORKERS" --duration=1000 --tolerance=50 --logdir="$MNT/logs" \
    --session=after_diskfull >"$SCRATCH/df2.out" 2>&1
  echo "next capture after freeing the disk: exit=$?"; state "$MNT/logs/plugins/profile/diskfull"
  timeout 120 "$PROFCTL" analyze "$MNT/logs/plugins/profile/diskfull" >/dev/null 2>"$SCRATCH/an.err"
  echo "analyze diskfull: exit=$? $(head -c 200 "$SCRATCH/an.err" | tr '\n' ' ')"
  umount "$MNT"
else
  echo "disk full: SKIPPED (tmpfs mount not allowed)"
fi
fi
# 3) Concurrent captures on the same agents: all-or-nothing per capture.
for k in 2 10; do
  rev=$(echo "$WORKERS" | tr , '\n' | tac | paste -sd,)
  for j in $(seq 1 $k); do
    w=$WORKERS; [ $((j % 2)) -eq 0 ] && w=$rev
    timeout 90 "$PROFCTL" capture --workers="$w" --duration=1000 --tolerance=50 --logdir="$LOG" \
      --session=conc${k}_$j --json >"$SCRATCH/c$j.json" 2>"$SCRATCH/c$j.err" &
  done
  wait
  SCRATCH=$SCRATCH python3 - "$LOG/plugins/profile" $k $N <<'PY'
import json, sys, os, collections
root, k, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
res = []
for j in range(1, k + 1):
    p = os.path.join(root, "conc%d_%d" % (k, j), "session.json")
    if not os.path.exists(p): res.append("none"); continue
    h = json.load(open(p)).get("hosts", [])
    ok = sum(1 for x in h if x.get("status", "").replace("HOST_STATUS_", "") in ("OK", "INCOMPLETE", "LATE"))
    res.append("%d/%d" % (ok, n))
for j in (1, 2):
    e = open(os.path.join(os.environ["SCRATCH"], "c%d.err" % j)).read().strip().splitlines()
    print("    capture %d stderr: %s" % (j, " | ".join(e[:2])[:300]))
for j in range(1, k + 1):
    p = os.path.join(root, "conc%d_%d" % (k, j), "session.json")
    if os.path.exists(p):
        h = json.load(open(p)).get("hosts", [])
        errs = collections.Counter(str(x.get("error") or x.get("detail") or x.get("status"))[:200] for x in h)
        print("    capture %d: %s" % (j, errs.most_common(2)))
split = [r for r in res if r not in ("none", "0/%d" % n, "%d/%d" % (n, n))]
print("%d concurrent captures: hosts saved per capture %s; split pods: %d" % (k, res, len(split)))
PY
done
# 4) Retries: one agent SIGKILLed 1.2 s into a 4 s window, back 0.5 s later on its port.
p0=${ports[0]##*:}
timeout 60 "$PROFCTL" capture --workers="$WORKERS" --duration=4000 --tolerance=50 --retries=3 \
  --logdir="$LOG" --session=retry --json >"$SCRATCH/retry.json" 2>"$SCRATCH/retry.err" &
cp=$!
sleep 1.4; kill -9 "$(cat "$SCRATCH/a0.pid")"; sleep 0.5
"$AGENT" --port="$p0" --bind=127.0.0.1 --name=a0 --collectors=synthetic \
  --synthetic=rank=0,world=$N,gpus=2 >"$SCRATCH/a0b.log" 2>&1 &
echo $! >"$SCRATCH/a0.pid"
wait $cp; echo "agent killed mid-window and back: capture exit=$?"
python3 - "$LOG/plugins/profile/retry/session.json" "$p0" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
for x in j["hosts"]:
    if x.get("name") == "a0" or x.get("address", "").endswith(":" + sys.argv[2]):
        print("    host a0:", x.get("status"), "attempts:", len(x.get("attempt_log", [])),
              {k: v for k, v in x.items() if k not in ("attempt_log", "clock")} if len(str(x)) < 2000 else str(x)[:600])
PY
