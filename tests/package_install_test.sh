#!/usr/bin/env bash
# tests/package_install_test.sh: builds the Debian packages
# (deploy/package.sh --lintian) and installs them on this machine the way a
# user would, then checks what a user would:
#   - dpkg -i, then apt-get -f install for dependencies; all four installed
#   - systemd-analyze verify on the installed units
#   - man finds a page for every installed program
#   - pkg-config --cflags --libs clocksync
#   - a C program built with plain gcc, a C++ program built with plain CMake
#     (find_package(clocksync)), both run against a master and a node
#     started from the installed /usr/sbin/clocksyncd (waited for with the
#     installed clocksyncctl): they read global time within its bound and
#     write traces that otf2-print reads
#   - dpkg -r keeps the configuration, dpkg -P leaves nothing behind: the
#     file lists of /etc, /usr, /lib and /var/lib (outside dpkg's and apt's
#     own state) are the same before the install and after the purge.
# Safe on a build machine: it refuses to run when any of the packages is
# installed already, and purges them (and stops its daemons) on every exit.
# Needs root (or sudo). deploy/test.sh runs it; CLOCKSYNC_SKIP_PACKAGE_TEST=1
# skips it there.
set -euo pipefail
cd "$(dirname "$0")/.."
SUDO=
[[ $(id -u) -eq 0 ]] || SUDO=sudo
PACKAGES=(clocksyncd libclocksync1 libclocksync-dev clocksync-tools)

fail() { echo "package_install_test: FAIL: $*" >&2; exit 1; }
step() { echo "== $*"; }

for p in "${PACKAGES[@]}"; do
  if dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q installed; then
    fail "$p is installed already; this test installs and purges it (dpkg -P $p first)"
  fi
done

work=$(mktemp -d "${TMPDIR:-/tmp}/clocksync-pkgtest.XXXXXX")
chmod 755 "$work"
daemon_pids=()
installed=0
cleanup() {
  local status=$?
  for pid in "${daemon_pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${daemon_pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  if ((installed)); then
    $SUDO dpkg -P "${PACKAGES[@]}" >/dev/null 2>&1 || true
  fi
  rm -rf "$work"
  exit $status
}
trap cleanup EXIT

# What the machine holds outside package-manager state and caches.
snapshot() {
  find /etc /usr /lib /var/lib -xdev \
    \( -path /var/lib/dpkg -o -path /var/lib/apt -o -path /var/lib/ucf \
       -o -path /etc/ld.so.cache -o -path /var/lib/systemd/deb-systemd-helper-masked \
       -o -path /var/cache -o -path '/usr/lib/python3*/__pycache__' \) -prune -o -print |
    LC_ALL=C sort
}

step "deploy/package.sh --lintian"
deploy/package.sh --out="$work/dist" --lintian > "$work/debs"
mapfile -t debs < "$work/debs"
((${#debs[@]} == 4)) || fail "package.sh wrote ${#debs[@]} packages, want 4: ${debs[*]}"
for deb in "${debs[@]}"; do [[ -f "$deb" ]] || fail "package.sh printed $deb, which does not exist"; done

snapshot > "$work/before"
step "dpkg -i ${debs[*]##*/}"
installed=1
if ! $SUDO dpkg -i "${debs[@]}"; then
  step "apt-get -f install (dependencies)"
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get -f install -y -qq
fi
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" | grep -q "install ok installed" || fail "$p is not installed"
done

step "installed files"
for f in /usr/sbin/clocksyncd /usr/bin/clocksyncctl /usr/bin/clocksync-trace \
    /usr/bin/clocksync-postmortem /usr/bin/clocksync-replay /usr/bin/clocksync-simulate; do
  [[ -x "$f" ]] || fail "$f is not installed"
  # (Abseil's --help, of the tools, exits 1: judge the text.)
  help=$("$f" --help 2>&1 || true)
  [[ "$help" == *"--"* ]] || fail "$f --help prints no usage"
done
version=$(tr -d ' \n' < VERSION)
[[ "$(/usr/sbin/clocksyncd --version)" == "clocksyncd $version" ]] ||
  fail "clocksyncd --version says '$(/usr/sbin/clocksyncd --version)', want 'clocksyncd $version'"
[[ -f /etc/clocksync/clocksyncd.conf ]] || fail "no /etc/clocksync/clocksyncd.conf"
if [[ -d /run/systemd/system ]]; then
  systemctl is-enabled clocksyncd.service >/dev/null || fail "clocksyncd.service is not enabled"
else
  # No systemd running: the enablement is the symlink deb-systemd-helper made.
  [[ -L /etc/systemd/system/multi-user.target.wants/clocksyncd.service ]] ||
    fail "clocksyncd.service was not enabled on install"
fi

step "man pages"
for page in clocksyncd.8 clocksyncctl.1 clocksync-trace.1 clocksync-postmortem.1 \
    clocksync-replay.1 clocksync-simulate.1; do
  name=${page%.*}
  section=${page##*.}
  found=$(man -w "$section" "$name" 2>/dev/null) || fail "man $section $name: no page"
  # Whole outputs in variables: `cmd | grep -q` fails under pipefail when
  # grep exits before cmd has written everything (SIGPIPE).
  page=$(zcat "$found")
  grep -q "^\.TH" <<<"$page" || fail "$found is not a man page"
done

step "systemd-analyze verify"
for unit in clocksyncd.service clocksync-wait.service clocksync-metrics.service \
    clocksync-metrics.timer; do
  [[ -f /lib/systemd/system/$unit ]] || fail "/lib/systemd/system/$unit is not installed"
done
(cd /lib/systemd/system && systemd-analyze verify clocksyncd.service \
  clocksync-wait.service clocksync-metrics.service clocksync-metrics.timer) ||
  fail "systemd-analyze verify"

step "pkg-config --cflags --libs clocksync"
flags=$(pkg-config --cflags --libs clocksync) || fail "pkg-config knows no clocksync"
echo "$flags"
[[ "$flags" == *-lclocksync* ]] || fail "pkg-config --libs clocksync lacks -lclocksync: $flags"
[[ "$(pkg-config --modversion clocksync)" == "$version" ]] || fail "pkg-config --modversion"

step "a C program with plain gcc"
# shellcheck disable=SC2046
gcc -std=c11 -Wall -Wextra -Werror -o "$work/time_and_trace" tests/package/time_and_trace.c \
  $(pkg-config --cflags --libs clocksync) || fail "gcc against the installed library"
libs=$(ldd "$work/time_and_trace")
grep -Eq "libclocksync.so.1 => (/usr)?/lib/" <<<"$libs" ||
  fail "the C program does not load the installed libclocksync.so.1: $libs"

step "a C++ program with plain CMake"
cp tests/package/CMakeLists.txt tests/package/time_and_trace.cc "$work/"
cmake -S "$work" -B "$work/build" -DCLOCKSYNC_MIN_VERSION="${version%.*}" >/dev/null ||
  fail "cmake: find_package(clocksync ${version%.*})"
cmake --build "$work/build" >/dev/null || fail "cmake --build"

step "a master and a node from the installed clocksyncd"
base=$((20000 + RANDOM % 20000))
/usr/sbin/clocksyncd --master --node_id=m --listen=127.0.0.1:$base \
  --grpc_listen=127.0.0.1:$((base + 1)) --shm_path="$work/m.shm" \
  --probe_interval=50ms > "$work/m.log" 2>&1 &
daemon_pids+=($!)
/usr/sbin/clocksyncd --node_id=n1 --join=127.0.0.1:$((base + 1)) \
  --listen=127.0.0.1:$((base + 2)) --grpc_listen=127.0.0.1:$((base + 3)) \
  --shm_path="$work/n1.shm" --probe_interval=50ms > "$work/n1.log" 2>&1 &
daemon_pids+=($!)
if ! /usr/bin/clocksyncctl --target=127.0.0.1:$((base + 3)) --max_error_ns=1000000 \
    --wait_timeout=60s --interval=200ms wait; then
  tail -5 "$work/m.log" "$work/n1.log"
  fail "the node did not synchronize within 60 s"
fi

step "the programs against the node"
mkdir -p "$work/traces"
"$work/time_and_trace" "$work/n1.shm" "$work/traces" || fail "the C program"
"$work/build/time_and_trace_cpp" "$work/n1.shm" "$work/traces" || fail "the C++ program"
for archive in c_program.r0 cpp_program.r0; do
  otf2-print "$work/traces/$archive/traces.otf2" > "$work/$archive.txt" 2>&1 ||
    { head "$work/$archive.txt"; fail "otf2-print $archive"; }
done
enters=$(grep -c "^ENTER" "$work/c_program.r0.txt" || true)
((enters == 100)) || fail "otf2-print shows $enters ENTER events of the C program, want 100"
grep -q "^MPI_SEND\|^MPI_ISEND\|SEND" "$work/c_program.r0.txt" || fail "no send in the C trace"
enters=$(grep -c "^ENTER" "$work/cpp_program.r0.txt" || true)
((enters == 100)) || fail "otf2-print shows $enters ENTER events of the C++ program, want 100"

step "the LTTng-UST clock plugin against the node"
plugin=/usr/lib/$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null)/clocksync/libclocksync-lttng.so
[[ -f "$plugin" ]] || fail "$plugin is not installed"
if [[ -f /usr/include/lttng/ust-clock.h || -n "$(find /usr/include -path '*/lttng/ust-clock.h' 2>/dev/null)" ]]; then
  gcc -std=c11 -Wall -Wextra -Werror -o "$work/lttng_clock" tests/package/lttng_clock.c \
    -llttng-ust-common || fail "gcc against liblttng-ust-dev"
  read -r value realtime < <(LTTNG_UST_CLOCK_PLUGIN="$plugin" CLOCKSYNC_SHM="$work/n1.shm" \
    "$work/lttng_clock" 2>"$work/lttng_clock.err") || fail "the LTTng clock program"
  # Global time less the plugin's 1 ms bias, about CLOCK_REALTIME (the
  # master anchors global time to it) and nothing said on stderr.
  python3 -c 'import sys; v, r = map(int, sys.argv[1:]); sys.exit(abs(v + 1000000 - r) > 1e9)' \
    "$value" "$realtime" || fail "LTTng's clock with the plugin reads $value, CLOCK_REALTIME $realtime"
  [[ ! -s "$work/lttng_clock.err" ]] || { cat "$work/lttng_clock.err"; fail "the plugin complained"; }
  echo "LTTng clock with the plugin: $value (CLOCK_REALTIME $realtime)"
else
  echo "liblttng-ust-dev is not installed: the plugin's file checked only"
fi

for pid in "${daemon_pids[@]}"; do kill "$pid"; done
for pid in "${daemon_pids[@]}"; do wait "$pid" || fail "a daemon did not stop cleanly"; done
daemon_pids=()

step "dpkg -r keeps the configuration"
$SUDO dpkg -r "${PACKAGES[@]}" >/dev/null
[[ ! -e /usr/sbin/clocksyncd ]] || fail "dpkg -r left /usr/sbin/clocksyncd"
[[ ! -e /usr/include/clocksync ]] || fail "dpkg -r left /usr/include/clocksync"
[[ -f /etc/clocksync/clocksyncd.conf ]] || fail "dpkg -r removed the configuration"

step "dpkg -P leaves nothing behind"
# Only clocksyncd has conffiles: the others are gone with dpkg -r already.
for p in "${PACKAGES[@]}"; do
  if dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "config-files"; then
    $SUDO dpkg -P "$p" >/dev/null
  fi
done
[[ ! -e /etc/clocksync ]] || fail "dpkg -P left /etc/clocksync"
installed=0
snapshot > "$work/after"
if ! diff "$work/before" "$work/after" > "$work/left"; then
  cat "$work/left"
  fail "the purge left the machine different (above: < before, > after)"
fi
for p in "${PACKAGES[@]}"; do
  if dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "installed\|config-files"; then
    fail "$p is still known to dpkg after the purge"
  fi
done
echo "package_install_test: ok (${#debs[@]} packages, version $version)"
