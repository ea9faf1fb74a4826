#!/usr/bin/env bash
# Builds a relocatable tarball of profctl for machines without gRPC/protobuf/abseil (a GPU image,
# an HPC node): the binaries, libprofctl_inject.so, and every shared library they need that is not
# glibc's, in one folder that runs from wherever it is unpacked (docs/cupti.md, docs/deployment.md).
#
#   deploy/bundle/make_bundle.sh OUT.tar.gz PROFCTL PROFCTL_AGENT [LIBPROFCTL_INJECT]
#
# Layout (under profctl-bundle/):
#   bin/profctl, bin/profctl-agent   wrappers: run the real binary with the bundled libraries
#   libexec/                         the real binaries
#   lib/libprofctl_inject.so         for CUDA_INJECTION64_PATH / NVTX_INJECTION64_PATH (libc only)
#   lib/deps/                        non-glibc shared libraries of the binaries (ldd), libstdc++ too
# glibc itself is not bundled (it must match the kernel interface and the loader): the target needs
# glibc >= the build machine's (Debian 12: 2.36).
set -euo pipefail
if [ $# -lt 3 ]; then
  sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
  exit 2
fi
out=$1 profctl=$2 agent=$3 inject=${4:-}
for f in "$profctl" "$agent" ${inject:+"$inject"}; do
  [ -x "$f" ] || [ -f "$f" ] || { echo "make_bundle: no such file: $f" >&2; exit 2; }
done
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
root=$stage/profctl-bundle
mkdir -p "$root/bin" "$root/libexec" "$root/lib/deps"

# glibc's own libraries stay the target's.
is_glibc() {
  case "$(basename "$1")" in
    libc.so.*|libm.so.*|libpthread.so.*|libdl.so.*|librt.so.*|libresolv.so.*|libutil.so.*|\
    ld-linux*.so.*|libanl.so.*|libnss_*.so.*|libBrokenLocale.so.*|libmvec.so.*) return 0 ;;
  esac
  return 1
}

copy_deps() {  # $1 = an ELF file
  local lib
  # "libfoo.so.1 => /usr/lib/x86_64-linux-gnu/libfoo.so.1 (0x...)"; a "not found" fails the bundle.
  if ldd "$1" | grep "not found" >/dev/null; then
    echo "make_bundle: $1 needs libraries this machine does not have:" >&2
    ldd "$1" | grep "not found" >&2
    exit 1
  fi
  for lib in $(ldd "$1" | awk '$2 == "=>" && $3 ~ /^\// {print $3}'); do
    is_glibc "$lib" && continue
    [ -e "$root/lib/deps/$(basename "$lib")" ] || cp -L "$lib" "$root/lib/deps/"
  done
}

for b in "$profctl" "$agent"; do
  name=$(basename "$b")
  cp -L "$b" "$root/libexec/$name"
  copy_deps "$b"
  cat > "$root/bin/$name" <<WRAP
#!/bin/sh
# Runs $name with the libraries bundled beside it (profctl-bundle/lib/deps).
here=\$(dirname "\$(readlink -f "\$0")")
LD_LIBRARY_PATH="\$here/../lib/deps\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}" exec "\$here/../libexec/$name" "\$@"
WRAP
  chmod 755 "$root/bin/$name"
done
if [ -n "$inject" ]; then
  cp -L "$inject" "$root/lib/libprofctl_inject.so"
  # The injection library lives inside the user's process, beside the framework's own copies of
  # these: it must link none of them (inject_exports_check checks the same at build time).
  if ldd "$root/lib/libprofctl_inject.so" | awk '$2 == "=>" {print $1}' |
       grep -E '^lib(grpc|protobuf|absl|spdlog|fmt|yaml|boost|re2|ssl|crypto|z)[^a-z]' >/dev/null; then
    echo "make_bundle: libprofctl_inject.so links a library the user's process may also load:" >&2
    ldd "$root/lib/libprofctl_inject.so" >&2
    exit 1
  fi
fi
# awk reads all of ldd's output: `head -1` could close the pipe early, and with pipefail the
# SIGPIPE would end this script silently.
glibc=$(ldd --version | awk 'NR == 1 {print $NF}')
cat > "$root/README" <<TXT
profctl bundle, built on $(. /etc/os-release && echo "$PRETTY_NAME") (glibc $glibc): needs glibc >= $glibc.
  bin/profctl-agent --collectors=cupti --inject-socket=/tmp/profctl/agent.sock
  CUDA_INJECTION64_PATH=\$PWD/lib/libprofctl_inject.so NVTX_INJECTION64_PATH=\$PWD/lib/libprofctl_inject.so python train.py
  bin/profctl capture --workers=localhost:6000 --duration=2000
TXT
mkdir -p "$(dirname "$out")"
tar -C "$stage" -czf "$out.tmp" profctl-bundle
mv "$out.tmp" "$out"
echo "make_bundle: $out ($(du -h "$out" | cut -f1), $(ls "$root/lib/deps" | wc -l) libraries)"
