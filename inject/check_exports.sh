#!/bin/sh
# Checks libprofctl_inject.so: it exports only its entry points, and needs none of the libraries a
# framework may carry its own copy of (a second protobuf/gRPC/abseil in one process crashes).
# Usage: check_exports.sh path/to/libprofctl_inject.so
set -eu
lib="$1"
allowed='^(InitializeInjection|InitializeInjectionNvtx2)$'
exports=$(nm -D --defined-only "$lib" | awk 'NF >= 3 { print $3 }' | sed 's/@.*//' | sort -u)
bad=$(printf '%s\n' "$exports" | grep -Ev "$allowed" | grep -v '^$' || true)
if [ -n "$bad" ]; then
  echo "FAIL: $lib exports more than its entry points:" >&2
  printf '%s\n' "$bad" >&2
  exit 1
fi
for sym in InitializeInjection InitializeInjectionNvtx2; do
  if ! printf '%s\n' "$exports" | grep -x "$sym" >/dev/null; then
    echo "FAIL: $lib does not export $sym" >&2
    exit 1
  fi
done
needed=$(readelf -d "$lib" | awk '/\(NEEDED\)/ { print $NF }' | tr -d '[]')
forbidden=$(printf '%s\n' "$needed" | grep -Ei 'protobuf|grpc|absl|spdlog|re2|yaml|boost|cupti' || true)
if [ -n "$forbidden" ]; then
  echo "FAIL: $lib needs libraries it must not link:" >&2
  printf '%s\n' "$forbidden" >&2
  exit 1
fi
echo "OK: exports $(printf '%s' "$exports" | tr '\n' ' '); needs $(printf '%s' "$needed" | tr '\n' ' ')"
