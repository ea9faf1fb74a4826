#!/bin/bash
# Files that are not regular files, at 10x: what `profctl analyze`, `diff` and `sessions` do
# with FIFOs, links to /dev/zero, directories and devices named like their inputs, what
# `diff --html` does to a FIFO, a directory, a link, a read-only file and (as root) /dev/full,
# and how fast every command leaves on SIGTERM and SIGINT. Each case prints one line:
# "NAME: exit=E wall=W" and the first lines of stderr; nothing here may hang (every step has a
# 60 s bound) or replace anything but a regular file.
# PROFCTL=... picks the binary (default build/release; build/test works too).
source "$(dirname "$0")/common.sh"
GOOD=$ROOT/tests/data/traces/rank3.pt.trace.json
run() {  # run NAME CMD...: exit code, wall time, first stderr lines
  local name=$1; shift
  local t0 t1 rc
  t0=$(date +%s.%N)
  timeout 60 "$@" >"$SCRATCH/out.txt" 2>"$SCRATCH/err.txt"
  rc=$?
  t1=$(date +%s.%N)
  printf '%s: exit=%d wall=%.2fs\n' "$name" "$rc" "$(echo "$t1 - $t0" | bc)"
  grep -v '^$' "$SCRATCH/err.txt" | cut -c1-240 | head -3 | sed 's/^/    /'
}

# Inputs: 10 FIFOs, 10 links to /dev/zero, 10 directories and 10 links to /dev/urandom named
# like traces beside one good trace; each named, the good one analysed (exit 3).
d=$SCRATCH/traces; mkdir -p "$d"; cp "$GOOD" "$d/rank-0.pt.trace.json"
for i in $(seq 1 10); do
  mkfifo "$d/fifo-$i.pt.trace.json"
  ln -s /dev/zero "$d/zero-$i.xplane.pb"
  mkdir "$d/dir-$i.xplane.pb"
  ln -s /dev/urandom "$d/random-$i.pt.trace.json.gz"
done
run "analyze: 40 non-files beside a good trace" "$PROFCTL" analyze "$d"
run "diff: the same folder against the good trace" "$PROFCTL" diff "$d" "$GOOD"
run "analyze: a FIFO named on the command line" "$PROFCTL" analyze "$d/fifo-1.pt.trace.json"
run "analyze: a link to /dev/zero named on the command line" "$PROFCTL" analyze "$d/zero-1.xplane.pb"

# Session manifests: session.json as a link to /dev/zero, a FIFO, a directory.
for kind in zero fifo dir; do
  s=$SCRATCH/logs/plugins/profile/$kind; mkdir -p "$s"
  case $kind in
    zero) ln -s /dev/zero "$s/session.json" ;;
    fifo) mkfifo "$s/session.json" ;;
    dir) mkdir "$s/session.json" ;;
  esac
  run "analyze: session.json is a $kind" "$PROFCTL" analyze "$s"
  run "diff: session.json is a $kind" "$PROFCTL" diff "$s" "$GOOD"
done
mkfifo "$SCRATCH/logs/plugins/profile/fifo/.profctl_running"
run "sessions: a log dir of such sessions" "$PROFCTL" sessions --logdir="$SCRATCH/logs"

# Outputs: diff --html onto a FIFO, a directory, a link to a file, a read-only file and a regular
# file of ours; as root also onto a character device made here (never the machine's own).
o=$SCRATCH/out; mkdir -p "$o"
mkfifo "$o/fifo.html"; mkdir "$o/dir.html"; echo keep >"$o/target.html"
ln -s "$o/target.html" "$o/link.html"; echo keep >"$o/ro.html"; chmod 444 "$o/ro.html"
echo old >"$o/mine.html"
for f in fifo dir link ro mine; do
  run "diff --html=$f.html" "$PROFCTL" diff "$GOOD" "$GOOD" --html="$o/$f.html"
done
if [ "$(id -u)" = 0 ] && mknod "$o/full.html" c 1 7 2>/dev/null; then
  run "diff --html=<a /dev/full node>" "$PROFCTL" diff "$GOOD" "$GOOD" --html="$o/full.html"
fi
echo "    after: $(cd "$o" && for f in *; do printf '%s=%s ' "$f" "$(stat -c %F "$f" | tr ' ' _)"; done)"
echo "    target.html: $(cat "$o/target.html"), ro.html: $(cat "$o/ro.html"), mine.html: $(head -c 15 "$o/mine.html")"

# Signals: each command is sent SIGTERM (then, on a second run, SIGINT) once it has read its
# input folder for 0.3 s; it must be gone within 2 s. A big folder keeps it busy: 10 copies of
# a 20 MB trace.
big=$SCRATCH/big; mkdir -p "$big"
python3 - "$big/r0.pt.trace.json" <<'PY'
import sys
with open(sys.argv[1], "w") as o:
    o.write('{"traceEvents":[\n')
    n = 170000
    for i in range(n):
        ts = 1700000000000000 + i * 10
        if i % 1000 == 0:
            e = '{"ph":"X","cat":"user_annotation","name":"ProfilerStep#%d","pid":1,"tid":1,"ts":%d,"dur":9990}' % (i // 1000, ts)
        else:
            e = '{"ph":"X","cat":"cpu_op","name":"aten::add","pid":1,"tid":1,"ts":%d,"dur":4}' % ts
        o.write(e + (",\n" if i + 1 < n else "\n"))
    o.write("]}\n")
PY
for i in $(seq 1 9); do cp "$big/r0.pt.trace.json" "$big/r$i.pt.trace.json"; done
for sig in TERM INT; do
  for cmd in "analyze $big --tool=all" "diff $big $big"; do
    # A background job of a script starts with SIGINT ignored (bash does that without job
    # control): restored to the default here, as a terminal's Ctrl-C would find it.
    # shellcheck disable=SC2086
    python3 -c 'import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execv(sys.argv[1], sys.argv[1:])' \
      "$PROFCTL" $cmd --jobs=1 >/dev/null 2>&1 &
    pid=$!
    # Signalled once it is profctl with SIGINT and SIGTERM blocked for its signal thread (an
    # earlier signal would find the wrapper), then after 0.3 s of reading.
    for _ in $(seq 1 500); do
      [ "$(readlink "/proc/$pid/exe")" = "$(readlink -f "$PROFCTL")" ] &&
        (( (0x$(awk '/^SigBlk/ {print $2}' "/proc/$pid/status") & 0x4002) == 0x4002 )) && break
      sleep 0.02
    done
    sleep 0.3
    t0=$(date +%s.%N)
    kill -s "$sig" "$pid"
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.02; done
    if kill -0 "$pid" 2>/dev/null; then
      echo "SIG$sig ${cmd%% *}: still running after 2 s"; kill -9 "$pid"
    fi
    wait "$pid"; rc=$?
    printf 'SIG%s %s: exit=%d gone after %.2fs\n' "$sig" "${cmd%% *}" "$rc" \
      "$(echo "$(date +%s.%N) - $t0" | bc)"
  done
done
