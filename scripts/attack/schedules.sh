#!/usr/bin/env bash
# N schedules of one agent due at the same instant (default 300, 10x the 30 of a busy
# coordinator): one run captures (the others find its host busy and are skipped); prints how long
# that 100 ms capture took from its start to its end (session.json: finished_ns - start_at_ns)
# and how many times the schedules' state was written. Usage: schedules.sh [N]
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/common.sh"
N=${1:-300}
LOG=$SCRATCH/logs
port=$(start_agent a0 --synthetic=rank=0,world=1)
{
  printf 'logdir: %s\nschedules:\n' "$LOG"
  for i in $(seq 1 "$N"); do
    printf '  - name: s%03d\n    targets: [127.0.0.1:%s]\n    interval: 10s\n    duration: 100ms\n' "$i" "$port"
  done
} >"$SCRATCH/coordinator.yaml"
"$PROFCTL" serve --config="$SCRATCH/coordinator.yaml" --port=0 --metrics-port=-1 \
  >"$SCRATCH/serve.log" 2>&1 &
PIDS+=($!)
# The first run that captured: its session.json with a final status.
for _ in $(seq 1 400); do
  done_json=$(grep -l '"status": "SESSION_STATUS_\(OK\|PARTIAL\|FAILED\)"' "$LOG"/plugins/profile/*/session.json 2>/dev/null | head -1)
  [ -n "$done_json" ] && break
  sleep 0.1
done
[ -n "$done_json" ] || { echo "no session finished"; tail -5 "$SCRATCH/serve.log"; exit 1; }
python3 - "$done_json" "$N" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
took = (int(m["finished_ns"]) - int(m["start_at_ns"])) / 1e6
print(f"{sys.argv[2]} schedules due together: the 100 ms capture took {took:.0f} ms from its "
      f"start to its end ({m['status']}, collect_ms={m.get('collect_ms')})")
PY
sleep 2
echo "runs skipped (host busy): $(grep -c 'skipped: host' "$SCRATCH/serve.log")"
