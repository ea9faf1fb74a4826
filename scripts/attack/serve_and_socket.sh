#!/bin/bash
# The daemon's caps at 10x: 640 idle WatchSessions streams against `profctl serve`
# (then ListSessions and StartCapture must still be answered), 640 idle
# connections to the injection socket from 160 processes, a 500 MB YAML
# value, hostile session names.
source "$(dirname "$0")/common.sh"
HERE=$(cd "$(dirname "$0")" && pwd)
LOG=$SCRATCH/logs; mkdir -p "$LOG"
port=$(start_agent a0 --synthetic=rank=0,world=1)
# -- the daemon with 640 idle watchers
sport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
printf 'logdir: %s\nschedules: []\n' "$LOG" >"$SCRATCH/coordinator.yaml"
"$PROFCTL" serve --config="$SCRATCH/coordinator.yaml" --port="$sport" --metrics-port=-1 >"$SCRATCH/serve.log" 2>&1 &
SPID=$!; PIDS+=($SPID)
for _ in $(seq 1 100); do timeout 5 "$PROFCTL" sessions --coordinator=127.0.0.1:$sport >/dev/null 2>&1 && break; sleep 0.1; done
python3 "$HERE/h2_watchers.py" 127.0.0.1:$sport 640 64 25 "$SCRATCH/ready" >"$SCRATCH/w.out" 2>&1 &
WP=$!; PIDS+=($WP)
for _ in $(seq 1 200); do [ -e "$SCRATCH/ready" ] && break; sleep 0.1; done
cat "$SCRATCH/w.out"
echo "daemon with 640 watchers: threads=$(awk '/^Threads/ {print $2}' /proc/$SPID/status) rss_mb=$(awk '/^VmRSS/ {print int($2/1024)}' /proc/$SPID/status)"
s=$(date +%s.%N); timeout 20 "$PROFCTL" sessions --coordinator=127.0.0.1:$sport >/dev/null 2>"$SCRATCH/e"; rc=$?
echo "ListSessions under 640 watchers: exit=$rc in $(echo "$(date +%s.%N) - $s" | bc) s $(tail -c 400 "$SCRATCH/e" | tr "\n" " ")"
s=$(date +%s.%N); timeout 30 "$PROFCTL" capture --coordinator=127.0.0.1:$sport --workers=127.0.0.1:$port --duration=500 --tolerance=50 >/dev/null 2>"$SCRATCH/e"; rc=$?
echo "StartCapture under 640 watchers: exit=$rc in $(echo "$(date +%s.%N) - $s" | bc) s $(tail -c 400 "$SCRATCH/e" | tr "\n" " ")"
wait $WP; cat "$SCRATCH/w.out" | tail -1
echo "daemon alive after: $(kill -0 $SPID 2>/dev/null && echo yes || echo no)"
# -- 640 idle connections to the injection socket, 4 from each of 160 processes
SOCK=$SCRATCH/inj/agent.sock
"$AGENT" --port=0 --bind=127.0.0.1 --port-file="$SCRATCH/c.port" --name=c --collectors=cupti \
  --inject-socket="$SOCK" >"$SCRATCH/c.log" 2>&1 &
CP=$!; PIDS+=($CP)
for _ in $(seq 1 100); do [ -S "$SOCK" ] && break; sleep 0.1; done
python3 - "$SOCK" <<'PY'
import os, socket, sys, time
path = sys.argv[1]
kids = []
for p in range(160):
    pid = os.fork()
    if pid == 0:
        ss = []
        for _ in range(4):
            s = socket.socket(socket.AF_UNIX); s.connect(path); ss.append(s)
        time.sleep(12)
        os._exit(0)
    kids.append(pid)
time.sleep(1.5)
# a late-comer while 640 idle connections are open: is it held open (it has
# its turn to Register) or closed at once?
t0 = time.monotonic()
s = socket.socket(socket.AF_UNIX); s.connect(path); s.settimeout(8)
try:
    d = s.recv(1)
    print("late-comer: closed after %.2f s (%s)" % (time.monotonic() - t0, "EOF" if d == b"" else "data"))
except socket.timeout:
    print("late-comer: still open after 8 s")
for k in kids: os.waitpid(k, 0)
PY
echo "agent after the flood: alive=$(kill -0 $CP 2>/dev/null && echo yes || echo no) fds=$(ls /proc/$CP/fd | wc -l) rss_mb=$(awk '/^VmRSS/ {print int($2/1024)}' /proc/$CP/status)"
grep -ci "register" "$SCRATCH/c.log" | sed 's/^/    log lines about registration: /'
# -- a 500 MB YAML value
python3 - "$SCRATCH/big.yaml" <<'PY'
import sys
with open(sys.argv[1], "w") as f:
    f.write("logdir: /tmp/x\nschedules:\n  - name: a\n    targets: [h:1]\n    duration: ")
    for _ in range(500): f.write("x" * (1 << 20))
    f.write("\n")
PY
measure "500 MB YAML value (serve --config)" "$PROFCTL" serve --config="$SCRATCH/big.yaml" --port=0
echo "    error bytes: $(wc -c <"$SCRATCH/err.txt")"
rm -f "$SCRATCH/big.yaml"
# -- hostile session names
for n in -rf ... .hidden _x "a/../../b" "$(printf 'a\nb')" "$(head -c 5000 /dev/zero | tr '\0' a)" "a b" "ä" "con" "a.." "..a"; do
  timeout 20 "$PROFCTL" capture --workers=127.0.0.1:$port --duration=200 --logdir="$LOG" --session="$n" >/dev/null 2>"$SCRATCH/e"
  rc=$?
  echo "session name $(printf %q "$n" | cut -c1-30): exit=$rc $(head -c 160 "$SCRATCH/e" | tr '\n' ' ')"
done
ls -a "$LOG/plugins/profile" 2>/dev/null | tr '\n' ' ' | cut -c1-300; echo
