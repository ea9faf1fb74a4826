#!/usr/bin/env bash
# ./dev bench: what each change costs, side by side with its target, in a few minutes. Not part of
# ./dev test (performance targets live here, never in timed tests). Builds the release binaries
# (build/release) and prints one table:
#   - analyze vs zcat: `profctl analyze --json` on 4 ranks of a real-shaped PyTorch trace (the H100
#     trace in tests/data repeated to ~158 MB of JSON a rank, bench/kineto_ranks.py), CPU time
#     against `zcat` of the same files (and libdeflate's whole-buffer gunzip when
#     libdeflate-gunzip is installed: the inflate floor), peak RSS;
#   - the outputs phase, pod trace size and coordinator memory per trace byte: a capture of 8
#     heavy hosts x 3 s (multihost_benchmark heavy);
#   - 1,024 hosts, 5 % dead or hung, 1 s window: wall - duration (multihost_benchmark scale), and
#     beside it what gRPC alone costs for the same calls a host (grpc_floor_benchmark): the floor
#     under the per-host targets.
# Environment: PROFCTL_BENCH_RUNS (default 1 run per row; the median is reported), PROFCTL_BENCH_SKIP
# (space-separated: analyze heavy scale), PROFCTL_BENCH_DATA (default /tmp/profctl_bench_kineto4).
# Notes the load average before each row: on a shared machine compare runs side by side.
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=${PROFCTL_JOBS:-$(nproc)}
RUNS=${PROFCTL_BENCH_RUNS:-1}
SKIP=" ${PROFCTL_BENCH_SKIP:-} "
DATA=${PROFCTL_BENCH_DATA:-/tmp/profctl_bench_kineto4}
REL=build/release

if [ ! -f "$REL/build.ninja" ]; then
  cmake -S . -B "$REL" -G Ninja -DCMAKE_BUILD_TYPE=Release -DPROFCTL_BUILD_TESTS=OFF \
    -DPROFCTL_WERROR=ON >/dev/null
fi
cmake --build "$REL" -j "$JOBS" --target profctl profctl-agent multihost_benchmark \
  grpc_floor_benchmark >/dev/null

load() { cut -d' ' -f1 /proc/loadavg; }
# cpu CMD...: runs CMD (output discarded); prints "wall_s cpu_s maxrss_mib".
cpu() {
  local f
  f=$(mktemp)
  /usr/bin/time -o "$f" -f '%e %U %S %M' "$@" >/dev/null 2>&1 || true
  awk '{printf "%.2f %.2f %.1f\n", $1, $2 + $3, $4 / 1024}' "$f"
  rm -f "$f"
}
# median of the first field of each line on stdin (whole line kept)
median() { sort -n -k1,1 | awk '{a[NR]=$0} END {print a[int((NR + 1) / 2)]}'; }

rows=()
row() { rows+=("$(printf '| %s | %s | %s | %s |' "$@")"); }

if [[ "$SKIP" != *" analyze "* ]]; then
  if [ ! -f "$DATA/rank3.pt.trace.json.gz" ]; then
    python3 bench/kineto_ranks.py "$DATA" --ranks=4 --mb=158 2>/dev/null
  fi
  files=("$DATA"/rank*.pt.trace.json.gz)
  l=$(load)
  z=""; a1=""; a2=""; ld=""
  for _ in $(seq "$RUNS"); do  # interleaved: zcat, analyze --jobs=1, analyze
    z+="$(cpu sh -c "zcat ${files[*]} > /dev/null")"$'\n'
    a1+="$(cpu "$REL/coordinator/profctl" analyze "$DATA" --json --jobs=1)"$'\n'
    a2+="$(cpu "$REL/coordinator/profctl" analyze "$DATA" --json)"$'\n'
    if command -v libdeflate-gunzip >/dev/null; then
      ld+="$(cpu sh -c "for f in ${files[*]}; do libdeflate-gunzip -c \$f > /dev/null; done")"$'\n'
    fi
  done
  read -r zw zc _ < <(awk '{print $2, $0}' <<<"${z%$'\n'}" | median | cut -d' ' -f2-)
  read -r a1w a1c a1m < <(awk '{print $2, $0}' <<<"${a1%$'\n'}" | median | cut -d' ' -f2-)
  read -r a2w a2c a2m < <(awk '{print $1, $0}' <<<"${a2%$'\n'}" | median | cut -d' ' -f2-)
  mb=$(for f in "${files[@]}"; do gzip -l "$f" | awk 'NR==2 {print $2}'; done |
       awk '{s += $1} END {printf "%.0f", s / 1e6}')
  row "analyze --jobs=1 CPU / zcat CPU (${#files[@]} ranks, $mb MB of JSON; load $l)" \
      "$(awk -v a="$a1c" -v z="$zc" 'BEGIN {printf "%.2fx (%.2f s / %.2f s)", a / z, a, z}')" \
      "<= 1.3x" "$(awk -v a="$a1c" -v z="$zc" 'BEGIN {print (a / z <= 1.3 ? "met" : "MISSED")}')"
  if [ -n "$ld" ]; then
    read -r lw lc _ < <(awk '{print $2, $0}' <<<"${ld%$'\n'}" | median | cut -d' ' -f2-)
    row "inflate floor: libdeflate-gunzip CPU / zcat CPU" \
        "$(awk -v a="$lc" -v z="$zc" 'BEGIN {printf "%.2fx (%.2f s)", a / z, a}')" "-" "-"
  fi
  row "analyze wall, default jobs / --jobs=1" "${a2w} s / ${a1w} s (CPU ${a2c} s)" "-" "-"
  row "analyze peak RSS, --jobs=1 / default jobs" "${a1m} / ${a2m} MiB" \
      "<= 64 MiB a file + what is kept per event" "-"
fi

if [[ "$SKIP" != *" heavy "* ]]; then
  l=$(load)
  out=$("$REL/bench/multihost_benchmark" heavy --hosts=8 --duration=3000 --runs="$RUNS" 2>/dev/null |
        tail -1)
  # | 8 x 3.0 s | runs | XSpace | trace / ratio | outputs (min-max) / per window | collect | rss / per budget | cpu | saved |
  IFS='|' read -r _ _ _ xs tr outp _ rss _ saved _ <<<"$out"
  ratio=$(awk -F/ '{gsub(/ /, "", $2); print $2}' <<<"$tr")
  per_window=$(awk -F/ '{gsub(/ /, "", $2); print $2}' <<<"$outp")
  rss_ratio=$(awk -F/ '{gsub(/ /, "", $2); print $2}' <<<"$rss")
  row "pod trace bytes / XSpace bytes (8 heavy hosts x 3 s, ${xs// /} MiB; load $l)" "$ratio" \
      "<= 0.4" "$(awk -v r="$ratio" 'BEGIN {print (r <= 0.4 ? "met" : "MISSED")}')"
  row "outputs phase / window" "$(awk -F/ '{gsub(/ +$/, "", $1); print $1 " ms: " $2}' <<<"${outp# }")" "<= 0.5" \
      "$(awk -v r="$per_window" 'BEGIN {print (r <= 0.5 ? "met" : "MISSED")}')"
  row "coordinator peak RSS / (2 x traces + 64 MiB)" "$(awk -F/ '{gsub(/ +$/, "", $1); print $1 " MiB: " $2}' <<<"${rss# }")" "<= 1" \
      "$(awk -v r="$rss_ratio" 'BEGIN {print (r <= 1 ? "met" : "MISSED")}')"
  row "hosts saved" "${saved// /}" "all" "-"
fi

if [[ "$SKIP" != *" scale "* ]]; then
  l=$(load)
  out=$("$REL/bench/multihost_benchmark" scale --hosts=1024 --runs="$RUNS" 2>/dev/null | tail -1)
  IFS='|' read -r _ _ _ _ wall _ _ after rss cpuh _ <<<"$out"
  row "1,024 hosts (5 % dead or hung): wall - duration, ms (load $l)" "${wall# }" "< 1500" \
      "$(awk -v w="${wall%% (*}" 'BEGIN {print (w + 0 < 1500 ? "met" : "MISSED")}')"
  row "1,024 hosts: coordinator peak RSS (MiB) / CPU per host (ms)" "${rss// /} / ${cpuh// /}" \
      "- / <= 1" "$(awk -v c="${cpuh// /}" 'BEGIN {print (c + 0 <= 1 ? "met" : "MISSED")}')"
  floor=$("$REL/bench/grpc_floor_benchmark" --hosts=1024 2>/dev/null |
    sed -E 's/.*cpu\/host ([0-9.]+) ms.*peak rss above start ([0-9.]+) KiB.*/\1 ms, \2 KiB/')
  row "gRPC alone, the same calls for 1,024 hosts: CPU / peak RSS a host (the floor)" "$floor" \
      "<= 1 ms, <= 64 KiB" "-"
fi

echo "| what | measured | target | |"
echo "|---|---|---|---|"
printf '%s\n' "${rows[@]}"
