#!/usr/bin/env bash
# Installs every Debian package clocksync needs to build, test and run, then
# checks that the code-generation and build tools work. Idempotent: packages
# already present are not reinstalled and `apt-get update` runs at most once.
set -euo pipefail

PACKAGES=(
  bazel-bootstrap bazel-platforms bazel-rules-java bazel-skylib
  build-essential g++ clang libclang-rt-14-dev pkg-config
  protobuf-compiler protobuf-compiler-grpc libprotobuf-dev libprotoc-dev
  libgrpc++-dev libgrpc-dev libabsl-dev libspdlog-dev libfmt-dev
  libgtest-dev libgmock-dev libbenchmark-dev libsystemd-dev
  libopen-trace-format2-dev otf2-tools
  python3 procps iproute2
  iptables python3-grpcio python3-protobuf  # fault tests: loss, a gRPC client of our own
  prometheus   # promtool: the metrics lint test (the server is not needed)
  chrony       # the peer deploy/vs_chrony.sh measures us against (run with -x)
  dpkg-dev help2man lintian cmake man-db  # deploy/package.sh and the install test
  systemd      # systemd-analyze: //deploy:unit_files_test (verify, security)
  liblttng-ust-dev lttng-tools babeltrace2  # lttng/: the clock plugin, its example and merge test
  openssl      # certificates for //tests:collector_tls_test
  python3-matplotlib  # tools/simulate_cluster/plot_scale.py: docs/scale_*.png
  chromium     # headless: `clocksync-trace view --png`; //tools/trace:view_browser_test loads the view's page
)

die() { echo "setup.sh: $*" >&2; exit 1; }

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]})); then
  [[ $(id -u) -eq 0 ]] || SUDO=sudo
  echo "setup.sh: installing ${missing[*]}"
  ${SUDO:-} apt-get update -qq || die "apt-get update failed (is a Debian mirror reachable?)"
  DEBIAN_FRONTEND=noninteractive ${SUDO:-} apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" >/dev/null || die "apt-get install failed for: ${missing[*]}"
fi

command -v bazel >/dev/null || die "bazel not found after installing bazel-bootstrap"
bazel --version >/dev/null 2>&1 || die "bazel does not run"
command -v protoc >/dev/null || die "protoc not found (package protobuf-compiler)"
protoc --version >/dev/null || die "protoc does not run"
command -v grpc_cpp_plugin >/dev/null || die "grpc_cpp_plugin not found (package protobuf-compiler-grpc)"
[[ -d /usr/share/bazel/tools/platforms || -d /usr/share/bazel/platforms ]] || \
  die "Bazel platforms missing (package bazel-platforms)"
echo "setup.sh: all build dependencies present ($(protoc --version), gcc $(gcc -dumpversion))"
