#!/usr/bin/env bash
# The stream flood of issue 13, measured: an agent's RSS before, while one
# connection holds STREAMS Subscribe streams with a zero window, and after
# the client goes. Prints figures; not a test (timings and RSS depend on
# the machine). Usage: scripts/stream-flood.sh [STREAMS] [HOLD_S] [AGENT FLAGS...]
# PROFILE=dev measures a debug build (quicker to build, bigger).
set -euo pipefail
cd "$(dirname "$0")/.."
streams=${1:-5000}
hold=${2:-10}
shift 2 || true
profile=${PROFILE:-release}
dir=$([ "$profile" = dev ] && echo debug || echo "$profile")
cargo build -q -p fleetop-agent --profile "$profile" --example stream_flood --bin fleetop-agent
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
target/$dir/fleetop-agent --backend sim --listen "127.0.0.1:$port" "$@" 2>/dev/null &
agent=$!
trap 'kill $agent 2>/dev/null || true' EXIT
rss() { awk '/VmRSS/ {print $2 " kB"}' "/proc/$agent/status"; }
sleep 2
echo "agent RSS before:     $(rss)"
# Twice (ROUNDS=N for more): memory freed after the first flood is reused by the second, so RSS
# after the second is about RSS after the first (the allocator keeps freed
# pages, so RSS does not fall back to the figure before).
for round in $(seq 1 "${ROUNDS:-2}"); do
  target/$dir/examples/stream_flood "127.0.0.1:$port" "$streams" "$hold" &
  flood=$!
  sleep "$hold"
  echo "agent RSS during $round:   $(rss)"
  wait $flood
  sleep 2
  echo "agent RSS after $round:    $(rss)"
done
