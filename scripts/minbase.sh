#!/bin/sh
# A minimal Debian 12 root (debootstrap --variant=minbase bookworm), as an
# image build or Packer starts from: no systemd, no adduser. The package
# test installs the agent's package into a copy of it with apt-get. Made
# once and kept across runs (about 200 MB); prints its path.
#
#   scripts/minbase.sh            # ~/.cache/fleetop/minbase-bookworm
set -eu
root="${FLEETOP_CACHE:-$HOME/.cache/fleetop}/minbase-bookworm"
if [ ! -e "$root/.complete" ]; then
  command -v debootstrap >/dev/null || { echo "minbase.sh: debootstrap is missing: apt-get install debootstrap" >&2; exit 1; }
  rm -rf "$root"
  mkdir -p "$root"
  debootstrap --variant=minbase bookworm "$root" http://deb.debian.org/debian >"$root.log" 2>&1 ||
    { tail -n 20 "$root.log" >&2; exit 1; }
  # apt's downloads are not needed again.
  rm -f "$root"/var/cache/apt/archives/*.deb
  touch "$root/.complete"
fi
echo "$root"
