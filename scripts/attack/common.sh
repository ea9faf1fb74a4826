# Shared helpers for the attack scripts: each attacks one defence at 10x its stated limit.
# Each script makes one scratch folder under /tmp, bounds every step with
# `timeout`, kills only the processes it started and removes its files on exit.
set -u
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
PROFCTL=${PROFCTL:-$ROOT/build/release/coordinator/profctl}
AGENT=${AGENT:-$ROOT/build/release/agent/profctl-agent}
SCRATCH=$(mktemp -d /tmp/profctl-attack-XXXXXX)
PIDS=()
cleanup() {
  # start_agent runs in $(...), a subshell: its pids are in $SCRATCH/*.pid
  for p in "${PIDS[@]}" $(cat "$SCRATCH"/*.pid 2>/dev/null); do kill -9 "$p" 2>/dev/null; done
  wait 2>/dev/null
  grep -q " $SCRATCH/" /proc/mounts && umount "$SCRATCH"/mnt 2>/dev/null
  rm -rf "$SCRATCH"
}
trap cleanup EXIT
# measure NAME CMD...: runs CMD under /usr/bin/time -v with a 300 s bound and
# prints "NAME: exit=E rss_mb=M wall_s=W" plus the first stderr lines.
measure() {
  local name=$1; shift
  local t=$SCRATCH/time.$$.txt
  /usr/bin/time -v -o "$t" timeout 300 "$@" >"$SCRATCH/out.txt" 2>"$SCRATCH/err.txt"
  local rc=$?
  local rss wall
  rss=$(awk -F: '/Maximum resident/ {printf "%d", $2/1024}' "$t")
  wall=$(awk '/Elapsed \(wall/ {print $NF}' "$t")
  echo "$name: exit=$rc rss_mb=$rss wall=$wall"
  grep -v '^$' "$SCRATCH/err.txt" | cut -c1-300 | head -4 | sed 's/^/    /'
}
# start_agent NAME [flags]: starts a local synthetic agent, prints its port.
start_agent() {
  local name=$1; shift
  "$AGENT" --port=0 --bind=127.0.0.1 --port-file="$SCRATCH/$name.port" --name="$name" \
    --collectors=synthetic "$@" >"$SCRATCH/$name.log" 2>&1 &
  echo $! >"$SCRATCH/$name.pid"
  for _ in $(seq 1 200); do
    [ -s "$SCRATCH/$name.port" ] && { cat "$SCRATCH/$name.port"; return 0; }
    sleep 0.05
  done
  echo "agent $name did not start" >&2; return 1
}
