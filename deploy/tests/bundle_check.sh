#!/usr/bin/env bash
# deploy_bundle_check: makes the bundle from this build's binaries, unpacks it somewhere else,
# and proves it runs from there: every non-glibc library resolves inside the bundle, the
# wrappers run, and the bundled agent and profctl talk to each other over loopback.
#   bundle_check.sh MAKE_BUNDLE PROFCTL PROFCTL_AGENT [LIBPROFCTL_INJECT]
set -euo pipefail
make_bundle=$1; shift
work=$(mktemp -d)
agent_pid=""
cleanup() { [ -n "$agent_pid" ] && kill "$agent_pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
fail() { echo "bundle_check: FAIL: $*" >&2; exit 1; }

"$make_bundle" "$work/out/profctl-bundle.tar.gz" "$@"
mkdir "$work/elsewhere"
tar -C "$work/elsewhere" -xzf "$work/out/profctl-bundle.tar.gz"
b=$work/elsewhere/profctl-bundle
for f in bin/profctl bin/profctl-agent libexec/profctl libexec/profctl-agent README; do
  [ -e "$b/$f" ] || fail "$f missing"
done
[ $# -ge 3 ] && { [ -f "$b/lib/libprofctl_inject.so" ] || fail "lib/libprofctl_inject.so missing"; }

# Every library the real binaries load is glibc's or the bundle's.
for exe in "$b/libexec/profctl" "$b/libexec/profctl-agent"; do
  LD_LIBRARY_PATH="$b/lib/deps" ldd "$exe" > "$work/ldd.txt"
  grep -q "not found" "$work/ldd.txt" && fail "$exe: $(grep 'not found' "$work/ldd.txt")"
  while read -r lib _ path _; do
    case "$lib" in libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|ld-linux*|linux-vdso*|libresolv.so*) continue ;; esac
    [ -z "$path" ] && continue
    case "$path" in "$b/lib/deps/"*) ;; *) fail "$exe loads $lib from $path, not from the bundle" ;; esac
  done < <(awk '$2 == "=>" {print $1, $2, $3}' "$work/ldd.txt")
done
# (No `grep -q` behind a pipe in this script: with pipefail, a writer it leaves early fails the
# pipeline.)
compgen -G "$b/lib/deps/libgrpc*" >/dev/null || fail "no gRPC library bundled"

# The wrappers run from the new place, through a symlink too.
version=$("$b/bin/profctl" version) || fail "bin/profctl version failed"
[[ "$version" == "profctl "* ]] || fail "bin/profctl version said: $version"
ln -s "$b/bin/profctl" "$work/profctl-link"
version=$("$work/profctl-link" version) || fail "a symlink to bin/profctl failed"
[[ "$version" == "profctl "* ]] || fail "a symlink to bin/profctl said: $version"

# The bundled agent and profctl work together on loopback.
# Polls for its port file (at most 30 s), and fails at once, with the agent's log, if it exits.
"$b/bin/profctl-agent" --port=0 --port-file="$work/port" --log-level=warn > "$work/agent.log" 2>&1 &
agent_pid=$!
for _ in $(seq 1 300); do
  [ -s "$work/port" ] && break
  if ! kill -0 "$agent_pid" 2>/dev/null; then
    rc=0; wait "$agent_pid" || rc=$?
    agent_pid=""
    fail "the bundled agent exited ($rc) before writing its port file; its log:
$(cat "$work/agent.log")"
  fi
  sleep 0.1
done
[ -s "$work/port" ] || fail "the bundled agent wrote no port file within 30 s; its log:
$(cat "$work/agent.log")"
"$b/bin/profctl" ping --workers="127.0.0.1:$(head -1 "$work/port")" > "$work/ping.txt" ||
  fail "ping: $(cat "$work/ping.txt")"
grep -q " ok " "$work/ping.txt" || fail "ping did not reach the agent: $(cat "$work/ping.txt")"
echo "bundle_check: ok ($(ls "$b/lib/deps" | wc -l) bundled libraries)"
