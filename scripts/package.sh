#!/usr/bin/env bash
# Builds the Debian packages of the agent and the console with cargo-deb
# (crates.io: `cargo install cargo-deb`), writing them under target/debian/.
# The man pages and completions are made by the release binaries
# themselves, so they cannot drift from the flags.
#
#   scripts/package.sh
#   dpkg -i target/debian/fleetop-agent_*.deb      # on each GPU node
set -euo pipefail
cd "$(dirname "$0")/.."
command -v cargo-deb >/dev/null || { echo "package.sh: cargo-deb is missing: cargo install cargo-deb" >&2; exit 1; }
cargo build --release --locked -p fleetop -p fleetop-agent
pkg=target/release/pkg
rm -rf "$pkg"
for who in console:fleetop agent:fleetop-agent; do
  dir=$pkg/${who%%:*} bin=target/release/${who#*:} name=${who#*:}
  mkdir -p "$dir/man"
  "$bin" man --out "$dir/man"
  # Debian's man pages are gzipped, without a name or time in the header
  # (-n), so that a rebuild gives the same bytes.
  gzip -9n "$dir"/man/*.1
  "$bin" completions bash >"$dir/$name.bash"
  "$bin" completions zsh >"$dir/_$name"
  "$bin" completions fish >"$dir/$name.fish"
done
cargo deb --no-build --strip -p fleetop-agent
cargo deb --no-build --strip -p fleetop
ls target/debian/*.deb
# Debian's own checks, where lintian is installed (.ci/run installs it): an
# error fails the build; warnings are printed.
if command -v lintian >/dev/null; then
  for name in fleetop-agent fleetop; do
    deb=$(ls -t target/debian/"${name}"_*.deb | head -n 1)
    lintian --fail-on error "$deb"
  done
fi
