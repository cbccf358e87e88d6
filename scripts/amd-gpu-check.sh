#!/usr/bin/env bash
# The AMD burn-in on a real AMD Instinct MI300X node, for when one is lent:
# a machine with ROCm 6 or 7 (amdgpu, libamdhip64, libhipblas, AMD SMI) and
# maybe PyTorch for ROCm and rocm-bandwidth-test, but no Rust. Nothing is
# built there: binaries built elsewhere in release, stripped, are handed in
# BIN_DIR (as for scripts/gpu-check.sh), and every figure goes to OUT_DIR.
#
#   cargo build --release
#   mkdir -p target/amd-gpu-check
#   cp target/release/fleetop target/release/fleetop-agent target/amd-gpu-check/
#   strip target/amd-gpu-check/*
#   scripts/amd-gpu-check.sh target/amd-gpu-check OUT        # on the MI300X node
#
# What it records (docs/burn-in.md, "On AMD GPUs", is what it checks):
#   1. the GPUs as amd-smi (or rocm-smi) sees them, ROCm's version, where
#      the HIP and hipBLAS libraries are, and one `fleetop-agent sample
#      --once --backend amd` (backend, models, PCI addresses);
#   2. the quick burn-in suite through `fleetop bench` on an agent serving
#      with --backend amd: the HIP checks, judged against the MI300X floors;
#   3. rocm-bandwidth-test's copies, where it is installed (raw output);
#   4. PyTorch's copies, peer copies and BF16 GEMM of the same sizes, where
#      PyTorch for ROCm is installed;
#   5. a dated table: each check's figure, verdict and floor beside
#      PyTorch's, printed and written to OUT_DIR/table.txt.
# Each step has its own timeout and writes what it could; none stops the rest.
set -u
BIN=$(cd "$1" && pwd)
OUT=$(mkdir -p "$2" && cd "$2" && pwd)
PORT=${PORT:-50561}
ROCM=${ROCM_PATH:-/opt/rocm}
export ROCM_PATH=$ROCM
export FLEETOP_AUDIT_LOG="$OUT/audit.jsonl"
log() { echo "[$(date -u +%H:%M:%S)] $*" | tee -a "$OUT/steps.log"; }

log "1. the GPUs"
date -u +%FT%TZ >"$OUT/date.txt"
ls "$BIN" >>"$OUT/steps.log"
cat "$ROCM/.info/version" >"$OUT/rocm-version.txt" 2>&1
ls -l "$ROCM"/lib/libamdhip64.so* "$ROCM"/lib/libhipblas.so* "$ROCM"/lib/libamd_smi.so* >"$OUT/libs.txt" 2>&1
if command -v amd-smi >/dev/null; then
  timeout 60 amd-smi static --asic --bus --board --partition >"$OUT/amd-smi-static.txt" 2>&1
  timeout 60 amd-smi topology >"$OUT/amd-smi-topology.txt" 2>&1
else
  timeout 60 rocm-smi --showproductname --showbus --showtopo >"$OUT/rocm-smi.txt" 2>&1
fi
timeout 60 "$BIN/fleetop-agent" sample --once --format json --backend amd --kmsg none --state-dir none \
  >"$OUT/sample.json" 2>"$OUT/sample.err"
log "sample: rc=$? $(wc -c <"$OUT/sample.json") bytes"
python3 - "$OUT/sample.json" <<'EOF' 2>&1 | tee -a "$OUT/steps.log"
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except Exception as e:
    sys.exit(f"no sample: {e}")
i = d["info"]
print(f"backend {i.get('backend')}, {len(i.get('gpus', []))} GPU(s):",
      ", ".join(sorted({g.get('model', '?') for g in i.get('gpus', [])})))
for g in i.get("gpus", []):
    print(f"  {g.get('index')}: {g.get('model')} {g.get('pci_bus_id')} "
          f"{g.get('compute_partition', '')}/{g.get('memory_partition', '')}")
EOF

log "2. the quick suite through fleetop bench, on an agent serving --backend amd"
printf '%s' "amd-gpu-check-$$-$RANDOM$RANDOM" >"$OUT/bench.token"
chmod 600 "$OUT/bench.token"
"$BIN/fleetop-agent" --listen 127.0.0.1:$PORT --backend amd --kmsg none --state-dir none \
  --kubelet-socket none --bench-token-file "$OUT/bench.token" --insecure >"$OUT/agent.log" 2>&1 &
AGENT=$!
sleep 5
timeout 300 "$BIN/fleetop" bench --hosts 127.0.0.1:$PORT --token-file "$OUT/bench.token" --insecure \
  --yes --suite quick --format json >"$OUT/bench.json" 2>"$OUT/bench.err"
log "bench: rc=$? (1 is a failed or incomplete node: the table says which check)"
kill $AGENT 2>/dev/null
wait $AGENT 2>/dev/null

log "3. rocm-bandwidth-test"
RBT=$(command -v rocm-bandwidth-test || command -v rocm_bandwidth_test || ls "$ROCM"/bin/rocm-bandwidth-test 2>/dev/null)
if [[ -n $RBT ]]; then
  # Unidirectional copies between every pair of devices (CPUs and GPUs).
  timeout 600 "$RBT" -a >"$OUT/rbt.txt" 2>&1
  log "rocm-bandwidth-test: rc=$? ($OUT/rbt.txt)"
else
  log "rocm-bandwidth-test is not installed: skipped"
fi

log "4. PyTorch's copies and GEMM"
cat >"$OUT/torch_amd.py" <<'EOF'
# The agent's checks, done by PyTorch for ROCm (torch.cuda is HIP there):
# the same sizes, the same convention (bytes counted once), events around
# each call, the median after warm-up.
import json, statistics, time, torch

def timed(op, warmup=3, iterations=20):
    for _ in range(warmup):
        op()
    torch.cuda.synchronize()
    secs = []
    for _ in range(iterations):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record(); op(); e.record(); e.synchronize()
        secs.append(s.elapsed_time(e) / 1e3)
    return statistics.median(secs)

out = {"torch": torch.__version__, "hip": getattr(torch.version, "hip", None), "gpus": []}
n = torch.cuda.device_count()
for i in range(n):
    torch.cuda.set_device(i)
    g = {"gpu": i, "name": torch.cuda.get_device_name(i)}
    a = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    b = torch.empty_like(a)
    g["hbm_d2d"] = (1 << 30) / timed(lambda: b.copy_(a)) / 1e9
    if n > 1:
        j = (i + 1) % n
        c = torch.empty(1 << 30, dtype=torch.uint8, device=f"cuda:{j}")
        g["nvlink_p2p"] = (1 << 30) / timed(lambda: c.copy_(a, non_blocking=True)) / 1e9
        del c
    del a, b
    host = torch.empty(256 << 20, dtype=torch.uint8).pin_memory()
    dev = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    g["pcie_h2d"] = (256 << 20) / timed(lambda: dev.copy_(host, non_blocking=True)) / 1e9
    g["pcie_d2h"] = (256 << 20) / timed(lambda: host.copy_(dev, non_blocking=True)) / 1e9
    del host, dev
    x = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    y = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    secs = timed(lambda: [x @ y for _ in range(16)], warmup=2, iterations=10)
    g["gemm_tflops"] = 16 * 2 * 8192 ** 3 / secs / 1e12
    del x, y
    torch.cuda.empty_cache()
    out["gpus"].append({k: (round(v, 1) if isinstance(v, float) else v) for k, v in g.items()})
print(json.dumps(out, indent=1))
EOF
timeout 600 python3 "$OUT/torch_amd.py" >"$OUT/torch.json" 2>"$OUT/torch.err"
log "torch: rc=$? (non-zero: no PyTorch for ROCm, see torch.err)"

log "5. the table"
python3 - "$OUT" <<'EOF' | tee "$OUT/table.txt"
import json, os, sys
out = sys.argv[1]
def load(name):
    try:
        return json.load(open(os.path.join(out, name)))
    except Exception:
        return None
date = open(os.path.join(out, "date.txt")).read().strip()
bench, torch = load("bench.json"), load("torch.json")
print(f"AMD burn-in on {os.uname().nodename}, {date}")
if torch:
    print(f"PyTorch {torch.get('torch')} (HIP {torch.get('hip')})")
ref = {g["gpu"]: g for g in (torch or {}).get("gpus", [])}
print(f"{'check':<22}{'gpu':>4}{'peer':>5}{'fleetop':>11}{'unit':>9}{'verdict':>9}{'floor':>9}{'torch':>10}{'ratio':>7}")
for node in (bench or {}).get("nodes", []):
    if node.get("error"):
        print(f"node error: {node['error']}")
    for r in node.get("results", []):
        v, t = r.get("value"), ref.get(r.get("gpu"), {}).get(r["name"])
        ratio = f"{v / t:.2f}" if v and t else ""
        cell = lambda x, f: "" if x is None else f.format(x)
        print(f"{r['name']:<22}{cell(r.get('gpu'), '{}'):>4}{cell(r.get('peer'), '{}'):>5}"
              f"{cell(v, '{:.1f}'):>11}{r.get('unit') or '':>9}{r['verdict']:>9}"
              f"{cell(r.get('expected_min'), '{:.0f}'):>9}{cell(t, '{:.1f}'):>10}{ratio:>7}")
        if r["verdict"] != "pass" and r.get("reason"):
            print(f"{'':<26}{r['reason']}")
if not bench:
    print("no burn-in report: see bench.err and agent.log")
print("rocm-bandwidth-test: " + ("rbt.txt" if os.path.exists(os.path.join(out, "rbt.txt")) else "not run"))
EOF
log "done: $OUT"
