#!/usr/bin/env bash
# Reservation leases at 10x: N agents (default 10) and one more behind a slow link, so the
# capture's prepare stays open for seconds (longer than the agents' 2 s lease).
#   1) 3 s into that prepare (longer than one lease), another capture of one of the agents: refused while the live
#      coordinator renews its reservations.
#   2) the coordinator SIGKILLed 4 s into the prepare: how long until a capture of the whole pod is
#      accepted (its reservations lapse one lease after its last renewal).
# Usage: leases.sh [N]
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/common.sh"
N=${1:-10}
LOG=$SCRATCH/logs
workers=()
for i in $(seq 0 $((N - 1))); do
  workers+=("127.0.0.1:$(start_agent a$i --synthetic=rank=$i,world=$N)")
done
# A slow link to one more agent: 400 ms each way (a delaying TCP proxy), so its prepare (GetInfo,
# then clock samples of 0.8 s each) keeps the capture preparing for about 3-5 s.
slow_agent=$(start_agent slow --synthetic=rank=0,world=1)
slow_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
python3 - "$slow_port" "$slow_agent" <<'PY' &
import asyncio, sys
listen, target = int(sys.argv[1]), int(sys.argv[2])
async def pipe(r, w):
    loop = asyncio.get_running_loop()
    try:
        while data := await r.read(65536):
            due = loop.time() + 0.4
            await asyncio.sleep(max(0, due - loop.time()))
            w.write(data); await w.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        w.close()
async def serve(cr, cw):
    ur, uw = await asyncio.open_connection("127.0.0.1", target)
    await asyncio.gather(pipe(cr, uw), pipe(ur, cw))
async def main():
    await (await asyncio.start_server(serve, "127.0.0.1", listen)).serve_forever()
asyncio.run(main())
PY
PIDS+=($!)
sleep 0.3
pod=$(IFS=,; echo "${workers[*]}")
# A capture whose prepare waits for the slow host; $! is profctl itself (the process killed).
long_args() {
  echo --workers="$pod,127.0.0.1:$slow_port" --duration=200 --prepare-timeout=8000 --late=fail \
    --logdir="$LOG"
}
# 1) renewal
"$PROFCTL" capture $(long_args) --session=held >"$SCRATCH/held.out" 2>&1 &
cp=$!; PIDS+=($cp)
sleep 3
timeout 20 "$PROFCTL" capture --workers="${workers[0]}" --duration=100 --prepare-timeout=300 \
  --logdir="$LOG" --session=probe >"$SCRATCH/probe.out" 2>&1
echo "1) another capture 3 s into a live prepare: exit=$? $(grep -o 'reserved for another capture[^;]*' "$SCRATCH/probe.out" | head -1)"
wait $cp
echo "   (the held capture: $(grep -m1 -o "session [^ ]*: [a-z]*, [0-9/]* hosts captured" "$SCRATCH/held.out"); its prepare: $(python3 -c 'import json,sys; print(round(json.load(open(sys.argv[1]))["prepare_ms"]), "ms")' "$LOG/plugins/profile/held/session.json"))"
# 2) SIGKILL mid-prepare
"$PROFCTL" capture $(long_args) --session=killed >"$SCRATCH/killed.out" 2>&1 &
cp=$!
sleep 4; kill -9 $cp 2>/dev/null; wait $cp 2>/dev/null
k=$(date +%s.%N); n=0
while :; do
  n=$((n + 1))
  timeout 20 "$PROFCTL" capture --workers="$pod" --duration=100 --prepare-timeout=300 \
    --logdir="$LOG" --session=after_$n >"$SCRATCH/after.out" 2>&1 && break
  [ $n -eq 1 ] && cp "$SCRATCH/after.out" "$SCRATCH/first_refusal.out"
  cp "$SCRATCH/after.out" "$SCRATCH/last_refusal.out"; echo "$(date +%s.%N) $(grep -m1 -o 'FAILED.*\|failed .*' "$SCRATCH/after.out" | cut -c1-160)" >>"$SCRATCH/refusals.txt"
  [ $n -ge 100 ] && break
done
echo "2) coordinator SIGKILLed 4 s into its prepare: the pod captured again $(echo "$(date +%s.%N) - $k" | bc | cut -c1-5) s after the kill (attempt $n; the first refusal: $(grep -m1 -o 'FAILED.*\|failed .*' "$SCRATCH/first_refusal.out" | head -1 | cut -c1-200))"
[ -n "${VERBOSE:-}" ] && cat "$SCRATCH/refusals.txt"
