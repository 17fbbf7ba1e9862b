#!/usr/bin/env bash
# deploy/package.sh: builds clocksync's Debian packages from Bazel's outputs
# with dpkg-deb, and prints the path of each .deb it wrote:
#   clocksyncd         the daemon, clocksyncctl, the systemd units, the
#                      default configuration /etc/clocksync/clocksyncd.conf
#   libclocksync1      the shared library libclocksync.so.1 (C APIs of
#                      client/clocksync.h and tracer/clocksync_trace.h) and
#                      the LTTng-UST clock plugin libclocksync-lttng.so
#   libclocksync-dev   headers in /usr/include/clocksync, the .so link,
#                      clocksync.pc, the CMake package clocksync
#   clocksync-tools    clocksync-trace, -postmortem, -replay, -simulate
# The version is the file VERSION (Debian revision -1). Maintainer scripts
# and control files: deploy/debian/. Man pages come from each program's
# --help (help2man). docs/PACKAGING.md says what lintian reports and why.
set -euo pipefail

usage() {
  cat <<'EOF'
usage: deploy/package.sh [--out=DIR] [--no_build] [--lintian]
  --out=DIR    where the .deb files go (default dist/; created)
  --no_build   package what bazel-bin holds (no `bazel build`)
  --lintian    run lintian on the packages (exit 1 on an error)
Prints the path of each .deb it wrote, one per line, on standard output.
EOF
}

out=dist
build=1
run_lintian=0
for arg in "$@"; do
  case "$arg" in
    --out=*) out=${arg#--out=} ;;
    --no_build) build=0 ;;
    --lintian) run_lintian=1 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "package.sh: unknown argument '$arg' (see --help)" >&2; exit 2 ;;
  esac
done
[[ -n "$out" ]] || { echo "package.sh: --out is empty" >&2; exit 2; }

cd "$(dirname "$0")/.."
root_dir=$PWD
for tool in dpkg-deb dpkg-shlibdeps dpkg-architecture help2man strip; do
  command -v "$tool" >/dev/null ||
    { echo "package.sh: $tool not found (deploy/setup.sh installs it)" >&2; exit 1; }
done

upstream=$(tr -d ' \n' < VERSION)
[[ "$upstream" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] ||
  { echo "package.sh: VERSION '$upstream' is not MAJOR.MINOR.PATCH" >&2; exit 1; }
version="$upstream-1"
arch=$(dpkg --print-architecture)
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null)
pointer_bytes=$(( $(dpkg-architecture -qDEB_HOST_ARCH_BITS 2>/dev/null) / 8 ))
# Reproducible: the date of the last commit, or SOURCE_DATE_EPOCH.
epoch=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}
changelog_date=$(LC_ALL=C date -u -R -d "@$epoch")

targets=(
  //clocksyncd:clocksyncd
  //tools/clocksyncctl:clocksyncctl
  //tools/trace:clocksync-trace
  //tools/postmortem:postmortem
  //tools/replay:replay
  //tools/simulate:simulate
  //tracer:libclocksync.so.1
  //lttng:libclocksync-lttng.so
)
if ((build)); then
  bazel build "${targets[@]}" >&2
fi
bin=$(bazel info bazel-bin 2>/dev/null)

umask 022
work=$(mktemp -d "${TMPDIR:-/tmp}/clocksync-package.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$out"
out=$(cd "$out" && pwd)

# fill FILE: the control-file placeholders.
fill() {
  sed -e "s|@VERSION@|$version|g" -e "s|@UPSTREAM_VERSION@|$upstream|g" \
    -e "s|@ARCH@|$arch|g" -e "s|@MULTIARCH@|$multiarch|g" \
    -e "s|@POINTER_BYTES@|$pointer_bytes|g" -e "s|@DATE@|$changelog_date|g" "$1"
}

# install_program SRC DEST: a stripped executable (as dh_strip does).
install_program() {
  install -D -m 0755 "$1" "$2"
  strip --strip-unneeded --remove-section=.comment --remove-section=.note "$2"
}

# man_page PROGRAM SECTION "NAME LINE" INCLUDE DEST_DIR: help2man of the
# installed PROGRAM's --help, gzipped (-n: no timestamp).
man_page() {
  local program=$1 section=$2 name=$3 include=$4 dir=$5
  mkdir -p "$dir/usr/share/man/man$section"
  local page="$dir/usr/share/man/man$section/$(basename "$program").$section"
  help2man --no-info --section="$section" --name="$name" \
    --version-string="$upstream" --include="$include" \
    --output="$page" "$program" ||
    { echo "package.sh: help2man failed for $program" >&2; exit 1; }
  gzip -9n "$page"
}

# docs PACKAGE_ROOT PACKAGE: copyright and changelog.Debian.gz.
docs() {
  local doc="$1/usr/share/doc/$2"
  install -D -m 0644 deploy/debian/copyright "$doc/copyright"
  fill deploy/debian/changelog | gzip -9n > "$doc/changelog.Debian.gz"
}

# shlibs_depends FILE...: the Depends of what FILE... link (dpkg-shlibdeps).
shlibs_depends() {
  mkdir -p "$work/shlibdeps/debian"
  printf 'Source: clocksync\n\nPackage: clocksync\nArchitecture: any\n' \
    > "$work/shlibdeps/debian/control"
  (cd "$work/shlibdeps" && dpkg-shlibdeps -O --warnings=1 "$@" 2>/dev/null) |
    sed -n 's/^shlibs:Depends=//p'
}

# build_deb PACKAGE_ROOT PACKAGE [FILES_FOR_SHLIBDEPS...]: control,
# md5sums, maintainer scripts, then dpkg-deb.
build_deb() {
  local root=$1 package=$2
  shift 2
  local meta=deploy/debian/$package
  mkdir -p "$root/DEBIAN"
  local depends=""
  if (($#)); then
    depends=$(shlibs_depends "$@")
    [[ -n "$depends" ]] || { echo "package.sh: no shared-library dependencies found for $package" >&2; exit 1; }
  fi
  local size
  size=$(du -sk --exclude=DEBIAN "$root" | cut -f1)
  fill "$meta/control" | sed -e "s|@SHLIBS@|$depends|" -e "s|@SIZE@|$size|" \
    > "$root/DEBIAN/control"
  for script in postinst prerm postrm; do
    if [[ -f "$meta/$script" ]]; then
      install -m 0755 "$meta/$script" "$root/DEBIAN/$script"
    fi
  done
  for file in conffiles shlibs triggers; do
    if [[ -f "$meta/$file" ]]; then
      fill "$meta/$file" > "$root/DEBIAN/$file"
      chmod 0644 "$root/DEBIAN/$file"
    fi
  done
  (cd "$root" && find . -type f ! -path './DEBIAN/*' -printf '%P\0' | LC_ALL=C sort -z |
    xargs -0r md5sum) > "$root/DEBIAN/md5sums"
  chmod 0644 "$root/DEBIAN/md5sums"
  # Reproducible file times.
  find "$root" -exec touch -h -d "@$epoch" {} +
  local deb="$out/${package}_${version}_${arch}.deb"
  dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >/dev/null
  echo "$deb"
}

# ---- clocksyncd ----
r=$work/clocksyncd
install_program "$bin/clocksyncd/clocksyncd" "$r/usr/sbin/clocksyncd"
install_program "$bin/tools/clocksyncctl/clocksyncctl" "$r/usr/bin/clocksyncctl"
for unit in clocksyncd.service clocksync-wait.service clocksync-metrics.service \
    clocksync-metrics.timer; do
  install -D -m 0644 "deploy/$unit" "$r/lib/systemd/system/$unit"
done
install -D -m 0644 deploy/clocksyncd.conf "$r/etc/clocksync/clocksyncd.conf"
docs "$r" clocksyncd
for doc in README.md docs/CONFIG.md docs/USAGE.md docs/CLOCKSYNCCTL.md \
    docs/MEMBERSHIP.md docs/PROBE_PROTOCOL.md docs/SECURITY.md docs/ACCURACY.md \
    docs/ACCURACY_LOG.md; do
  install -m 0644 "$doc" "$r/usr/share/doc/clocksyncd/"
done
man_page "$r/usr/sbin/clocksyncd" 8 "cluster clock synchronization daemon" \
  deploy/debian/man/clocksyncd.h2m "$r"
man_page "$r/usr/bin/clocksyncctl" 1 "ask a clocksyncd node how well it is synchronized" \
  deploy/debian/man/clocksyncctl.h2m "$r"
build_deb "$r" clocksyncd -e"$r/usr/sbin/clocksyncd" -e"$r/usr/bin/clocksyncctl"

# ---- libclocksync1 ----
r=$work/libclocksync1
libdir=usr/lib/$multiarch
install -D -m 0644 "$bin/tracer/libclocksync.so.1" "$r/$libdir/libclocksync.so.1"
strip --strip-unneeded --remove-section=.comment --remove-section=.note \
  "$r/$libdir/libclocksync.so.1"
# The LTTng-UST clock plugin (LTTNG_UST_CLOCK_PLUGIN names it; dlopen()ed,
# never linked: a private directory, no soname).
install -D -m 0644 "$bin/lttng/libclocksync-lttng.so" "$r/$libdir/clocksync/libclocksync-lttng.so"
strip --strip-unneeded --remove-section=.comment --remove-section=.note \
  "$r/$libdir/clocksync/libclocksync-lttng.so"
docs "$r" libclocksync1
install -m 0644 docs/LTTNG.md "$r/usr/share/doc/libclocksync1/"
# The symbols file: every exported function, since this version.
mkdir -p "$r/DEBIAN"
{
  echo "libclocksync.so.1 libclocksync1 #MINVER#"
  nm -D --defined-only "$r/$libdir/libclocksync.so.1" | awk '{print $3}' |
    sed -n 's/@@\(CLOCKSYNC_[0-9]*\)$/@\1/p; s/^\(CLOCKSYNC_[0-9]*\)$/\1@\1/p' |
    LC_ALL=C sort -u | sed "s/^/ /; s/\$/ $upstream/"
} > "$r/DEBIAN/symbols"
chmod 0644 "$r/DEBIAN/symbols"
build_deb "$r" libclocksync1 -e"$r/$libdir/libclocksync.so.1" \
  -e"$r/$libdir/clocksync/libclocksync-lttng.so"

# ---- libclocksync-dev ----
r=$work/libclocksync-dev
mkdir -p "$r/usr/include/clocksync" "$r/$libdir/pkgconfig" "$r/$libdir/cmake/clocksync"
# Installed as <clocksync/NAME>: the tree's "client/NAME" includes become
# <clocksync/NAME>.
for header in client/clocksync.h client/clocksync_errors.h client/clocksync.hpp \
    shm/shm_layout.h tracer/clocksync_trace.h tracer/clocksync_trace.hpp; do
  sed -E 's|#include "(client\|shm\|tracer)/([A-Za-z0-9_]+\.hp?p?)"|#include <clocksync/\2>|' \
    "$header" > "$r/usr/include/clocksync/$(basename "$header")"
done
if grep -n '#include "' "$r/usr/include/clocksync/"*; then
  echo "package.sh: an installed header still includes a tree path (above)" >&2
  exit 1
fi
ln -s libclocksync.so.1 "$r/$libdir/libclocksync.so"
fill deploy/debian/libclocksync-dev/clocksync.pc.in > "$r/$libdir/pkgconfig/clocksync.pc"
fill deploy/debian/libclocksync-dev/clocksyncConfig.cmake.in \
  > "$r/$libdir/cmake/clocksync/clocksyncConfig.cmake"
fill deploy/debian/libclocksync-dev/clocksyncConfigVersion.cmake.in \
  > "$r/$libdir/cmake/clocksync/clocksyncConfigVersion.cmake"
docs "$r" libclocksync-dev
for doc in docs/TRACER.md docs/SHM_LAYOUT.md docs/TRACE_FORMAT.md; do
  install -m 0644 "$doc" "$r/usr/share/doc/libclocksync-dev/"
done
build_deb "$r" libclocksync-dev

# ---- clocksync-tools ----
r=$work/clocksync-tools
install_program "$bin/tools/trace/clocksync-trace" "$r/usr/bin/clocksync-trace"
install_program "$bin/tools/postmortem/postmortem" "$r/usr/bin/clocksync-postmortem"
install_program "$bin/tools/replay/replay" "$r/usr/bin/clocksync-replay"
install_program "$bin/tools/simulate/simulate" "$r/usr/bin/clocksync-simulate"
man_page "$r/usr/bin/clocksync-trace" 1 "merge, compare, profile and export clocksync traces" \
  deploy/debian/man/tools.h2m "$r"
man_page "$r/usr/bin/clocksync-postmortem" 1 "post-mortem clock corrections of local times" \
  deploy/debian/man/tools.h2m "$r"
man_page "$r/usr/bin/clocksync-replay" 1 "replay probe samples through the clock estimator" \
  deploy/debian/man/tools.h2m "$r"
man_page "$r/usr/bin/clocksync-simulate" 1 "write simulated probe scenarios" \
  deploy/debian/man/tools.h2m "$r"
docs "$r" clocksync-tools
install -m 0644 docs/POSTMORTEM.md "$r/usr/share/doc/clocksync-tools/"
build_deb "$r" clocksync-tools -e"$r/usr/bin/clocksync-trace" \
  -e"$r/usr/bin/clocksync-postmortem" -e"$r/usr/bin/clocksync-replay" \
  -e"$r/usr/bin/clocksync-simulate"

if ((run_lintian)); then
  # The tags suppressed are listed with their reasons in docs/PACKAGING.md.
  lintian --fail-on error --suppress-tags-from-file deploy/debian/lintian.suppress \
    "$out"/*_"${version}"_"${arch}".deb >&2
fi
