#!/usr/bin/env bash
# Recording size on the demo: bytes per node-second of `fleetop record`, and
# an hour of the fleet extrapolated. Two recordings of the same demo, SHORT
# and LONG seconds: both hold the agents' history sent at connect, so their
# difference is the live stream alone.
#
#   cargo build --release && scripts/record-size.sh [NODES] [SHORT] [LONG]
set -euo pipefail
nodes=${1:-256}
short=${2:-30}
long=${3:-120}
bin=${FLEETOP:-target/release/fleetop}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
for d in "$short" "$long"; do
    "$bin" record --demo --nodes "$nodes" --gpus 8 --duration "${d}s" --out "$dir/$d.rec" 2>"$dir/$d.log"
    tail -n 1 "$dir/$d.log" >&2
done
a=$(stat -c %s "$dir/$short.rec")
b=$(stat -c %s "$dir/$long.rec")
python3 - "$nodes" "$short" "$long" "$a" "$b" <<'PY'
import sys
nodes, short, long_, a, b = map(int, sys.argv[1:])
per = (b - a) / nodes / (long_ - short)
print(f"{nodes} nodes x 8 GPUs: {per:.0f} bytes per node-second live; "
      f"one hour: {per * nodes * 3600 / 1e6:.0f} MB (+ {a / 1e6:.1f} MB of history at connect)")
PY
