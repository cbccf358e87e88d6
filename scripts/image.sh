#!/usr/bin/env bash
# Builds the agent's OCI image with buildah (Debian's package), from the
# release binary: deploy/container/Containerfile, FROM scratch plus the
# stripped binary and the shared libraries `ldd` names. No registry and no
# daemon: `--isolation chroot` builds it as root on a plain machine or CI.
#
#   scripts/image.sh            # localhost/fleetop-agent:VERSION, and
#                               # target/image/fleetop-agent-VERSION.oci.tar
#   skopeo copy oci-archive:target/image/fleetop-agent-0.1.0.oci.tar \
#       docker://registry.example/fleetop-agent:0.1.0     # to your registry
#
# Storage is buildah's vfs driver unless STORAGE_DRIVER says otherwise: it
# needs no overlay or fuse, so it works inside containers and CI runners.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v buildah >/dev/null || { echo "image.sh: buildah is missing: apt-get install buildah" >&2; exit 1; }
export STORAGE_DRIVER="${STORAGE_DRIVER:-vfs}"
bin=target/release/fleetop-agent
[ -x "$bin" ] || cargo build --release --locked -p fleetop-agent
# "fleetop-agent 0.1.0 (commit 0123456789ab)"
read -r _ version _ commit < <("$bin" --version)
commit=${commit%)}

stage=target/image
rm -rf "$stage"
mkdir -p "$stage/rootfs/usr/bin"
strip -o "$stage/rootfs/usr/bin/fleetop-agent" "$bin"
# The loader and each library at the path the binary asks for, copied
# (not linked) so the image holds the files.
ldd "$bin" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }' |
  while read -r lib; do
    install -D -m 0755 "$(readlink -f "$lib")" "$stage/rootfs$lib"
  done
# The libraries the agent loads at run time need more of the C library than
# the agent links: NVIDIA's libnvidia-ml.so.1 (mounted by the NVIDIA
# container runtime) names libpthread.so.0, libdl.so.2, librt.so.1 and
# libm.so.6; AMD's libamd_smi.so (from the host's /opt/rocm, the AMD
# variant of the DaemonSet) is C++: libstdc++.so.6 and libgcc_s.so.1. Each
# from the directory the agent's libc.so.6 came from.
libdir=$(dirname "$(ldd "$bin" | awk '$1 == "libc.so.6" { print $3 }')")
for so in libpthread.so.0 libdl.so.2 librt.so.1 libm.so.6 libstdc++.so.6 libgcc_s.so.1; do
  [ -e "$stage/rootfs$libdir/$so" ] && continue
  [ -e "$libdir/$so" ] || { echo "image.sh: $libdir/$so is missing (libc6, libstdc++6, libgcc-s1)" >&2; exit 1; }
  install -D -m 0755 "$(readlink -f "$libdir/$so")" "$stage/rootfs$libdir/$so"
done

tag="localhost/fleetop-agent:$version"
buildah build --quiet --isolation chroot --layers=false \
  --build-arg "VERSION=$version" --build-arg "COMMIT=$commit" \
  -f deploy/container/Containerfile -t "$tag" "$stage" >/dev/null
buildah push --quiet "$tag" "oci-archive:$stage/fleetop-agent-$version.oci.tar:fleetop-agent:$version"
echo "$tag"
echo "$stage/fleetop-agent-$version.oci.tar"
