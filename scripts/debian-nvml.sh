#!/bin/sh
# Fetches Debian's own libnvidia-ml.so.1 (bookworm non-free, libnvidia-ml1)
# for the image test, without changing this machine's apt sources: a
# private sources list and package lists under the cache directory, and
# `apt-get download` of the one package, unpacked with dpkg-deb. Prints the
# library's path. Kept across runs; the package is never installed.
#
#   scripts/debian-nvml.sh        # ~/.cache/fleetop/libnvidia-ml1/.../libnvidia-ml.so.1
set -eu
cache="${FLEETOP_CACHE:-$HOME/.cache/fleetop}/libnvidia-ml1"
lib="$cache/root/usr/lib/x86_64-linux-gnu/nvidia/current/libnvidia-ml.so.1"
if [ ! -e "$lib" ]; then
  rm -rf "$cache"
  mkdir -p "$cache/lists/partial" "$cache/archives/partial" "$cache/root"
  cat >"$cache/sources.list" <<'LIST'
deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian bookworm non-free
deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian-security bookworm-security non-free
LIST
  set -- -o Dir::Etc::SourceList="$cache/sources.list" -o Dir::Etc::SourceParts=/dev/null \
    -o Dir::State::Lists="$cache/lists" -o Dir::Cache::Archives="$cache/archives" -o APT::Sandbox::User=root
  apt-get -qq "$@" update
  (cd "$cache" && apt-get -qq "$@" download libnvidia-ml1)
  dpkg-deb -x "$cache"/libnvidia-ml1_*.deb "$cache/root"
fi
# The package's path may move between driver series: find it.
[ -e "$lib" ] || lib=$(find "$cache/root" -name 'libnvidia-ml.so.1' | head -n 1)
[ -n "$lib" ] && [ -e "$lib" ] || { echo "debian-nvml.sh: no libnvidia-ml.so.1 in libnvidia-ml1" >&2; exit 1; }
echo "$lib"
