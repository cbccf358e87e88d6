#!/usr/bin/env bash
# Runs every fuzz target for SECONDS each (default 60) and prints, per target,
# the executions and what was found. Found inputs (crashes, timeouts, leaks)
# are copied to tests/fuzz-regressions/<target>/, where the ordinary test
# suite replays them (tests/it/fuzz_regressions.rs): fix, then commit them.
#
#   scripts/fuzz.sh 60
#
# Needs cargo-fuzz (`cargo install cargo-fuzz`). cargo-fuzz wants a nightly
# compiler for its sanitizer flags; this project builds with the machine's
# stable one, so the script runs libFuzzer without a sanitizer (-s none) and
# lets rustc accept cargo-fuzz's flags (RUSTC_BOOTSTRAP=1). Rust's own checks
# (bounds, overflow in debug assertions, which cargo-fuzz turns on) still
# turn a bug into a crash.
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
secs=${1:-60}
targets=(hostlist config theme slurm ib_sysfs wire agent_stream promtext)
export RUSTC_BOOTSTRAP=1
cargo fuzz build -s none >/dev/null
printf '%-14s %12s %10s  %s\n' target executions exec/s found
for t in "${targets[@]}"; do
  mkdir -p "corpus/$t" "artifacts/$t"
  log=$(mktemp)
  # libFuzzer exits non-zero on a finding; the figures are read either way.
  cargo fuzz run -s none "$t" "corpus/$t" -- -max_total_time="$secs" -timeout=10 \
    -rss_limit_mb=2048 -print_final_stats=1 >"$log" 2>&1 || true
  runs=$(grep -oE 'Done [0-9]+ runs' "$log" | grep -oE '[0-9]+' | tail -1 || true)
  [ -n "$runs" ] || runs=$(grep -oE 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -oE '[0-9]+$' | tail -1 || echo 0)
  found=$(find "artifacts/$t" -type f | wc -l)
  if [ "$found" -gt 0 ]; then
    mkdir -p "../tests/fuzz-regressions/$t"
    cp artifacts/"$t"/* "../tests/fuzz-regressions/$t/"
    what=$(find "artifacts/$t" -type f -printf '%f ' | head -c 200)
  else
    what=none
  fi
  printf '%-14s %12s %10s  %s\n' "$t" "$runs" "$((runs / secs))" "$what"
  rm -f "$log"
done
