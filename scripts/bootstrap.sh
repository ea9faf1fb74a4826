#!/usr/bin/env bash
# Installs the Debian 12 packages profctl needs to build (and, with --test, to test). Idempotent:
# prints nothing and touches nothing when every package is already installed.
#   scripts/bootstrap.sh          build and demo
#   scripts/bootstrap.sh --test   also what only tests need (headless Chromium for report.html;
#                                 Python gRPC and protobuf for the TensorFlow-client test;
#                                 openssl, which the TLS tests make certificates with; clang and
#                                 its libFuzzer runtime for the fuzzers, docs/fuzzing.md;
#                                 python3-yaml, python3-jsonschema, iproute2, systemd-analyze and
#                                 shellcheck for the deployment checks, deploy/tests)
set -euo pipefail

PACKAGES=(
  g++ cmake ninja-build ccache pkg-config git
  protobuf-compiler libprotobuf-dev protobuf-compiler-grpc libgrpc++-dev
  libabsl-dev libboost-dev libspdlog-dev libyaml-cpp-dev zlib1g-dev libssl-dev
  libgtest-dev libgmock-dev libbenchmark-dev rapidjson-dev libre2-dev
  clang-format clang-tidy lld
)
if [ "${1:-}" = "--test" ]; then
  PACKAGES+=(chromium nodejs python3-grpcio python3-protobuf openssl clang libclang-rt-dev
             python3-yaml python3-jsonschema iproute2 systemd shellcheck)
fi

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
    echo "bootstrap: missing packages (${missing[*]}) and not root; install them or run as root" >&2
    exit 1
  fi
fi
echo "bootstrap: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq >/dev/null
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
