#!/usr/bin/env bash
# The checks that need a real NVIDIA GPU, for a machine that has the driver,
# nvidia-smi and PyTorch but no Rust: binaries built elsewhere in release are
# handed in BIN_DIR, and every figure is written to OUT_DIR.
#
#   cargo build --release && cargo bench --bench nvml_sample --no-run
#   mkdir -p target/gpu-check && cp target/release/fleetop target/release/fleetop-agent target/gpu-check/
#   cp "$(ls -t target/release/deps/nvml_sample-* | grep -v '\.d$' | head -1)" target/gpu-check/nvml_sample
#   scripts/gpu-check.sh target/gpu-check OUT            # on the GPU machine
#
# What it records (docs/performance-log.md, "On a real GPU", has the figures):
#   1. the GPUs as nvidia-smi sees them, and one `fleetop-agent sample --once`
#      beside nvidia-smi's reading of the same fields;
#   2. the agent's CPU per sample through the real driver (the nvml_sample
#      bench, the same clock as on the fake NVML);
#   3. a serving agent under a busy GPU (a PyTorch GEMM loop): its CPU per
#      sample and the bytes it sends a console per GPU-sample (ss's
#      bytes_sent: HTTP/2 and gRPC framing included);
#   4. the quick burn-in suite through `fleetop bench`, and PyTorch's own
#      copies of the same sizes, to compare hbm_d2d and pcie_h2d/d2h.
# Each step has its own timeout and writes what it could; none stops the rest.
# STEPS=13 runs only those (the agent of step 3 serves step 4's burn-in).
set -u
STEPS=${STEPS:-1234}
BIN=$(cd "$1" && pwd)
OUT=$(mkdir -p "$2" && cd "$2" && pwd)
PORT=50551
log() { echo "[$(date -u +%H:%M:%S)] $*" | tee -a "$OUT/steps.log"; }

# The CUDA libraries PyTorch's wheels bring (cuBLAS, NCCL), for the agent's
# run-time loader; libcuda.so.1 is the driver's own.
PYLIBS=$(python3 - <<'EOF' 2>/dev/null
import glob, os
try:
    import nvidia
    roots = list(nvidia.__path__)
except Exception:
    roots = []
print(":".join(sorted({os.path.dirname(p) for r in roots for p in glob.glob(os.path.join(r, "*", "lib", "*.so*"))})))
EOF
)
export LD_LIBRARY_PATH="${PYLIBS}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export FLEETOP_AUDIT_LOG="$OUT/audit.jsonl"
log "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"

log "1. the GPUs"
date -u +%FT%TZ >"$OUT/date.txt"
nvidia-smi -L >"$OUT/nvidia-smi-L.txt" 2>&1
nvidia-smi --query-gpu=name,driver_version,pci.bus_id,memory.total,power.limit,clocks.max.sm \
  --format=csv >"$OUT/gpus.csv" 2>&1
ls "$BIN" >>"$OUT/steps.log"
FIELDS=utilization.gpu,memory.used,temperature.gpu,power.draw,clocks.sm,clocks.mem,pcie.link.gen.current,pcie.link.width.current
nvidia-smi --query-gpu=$FIELDS --format=csv >"$OUT/smi-before.csv" 2>&1
timeout 60 "$BIN/fleetop-agent" sample --once --format json --backend nvml --kmsg none --state-dir none \
  >"$OUT/sample.json" 2>"$OUT/sample.err"
rc=$?
nvidia-smi --query-gpu=$FIELDS --format=csv >"$OUT/smi-after.csv" 2>&1
log "sample: rc=$rc $(wc -c <"$OUT/sample.json") bytes"

log "2. CPU per sample through the real driver"
if [[ $STEPS == *2* && -x "$BIN/nvml_sample" ]]; then
  (cd "$OUT" && FLEETOP_BENCH_NVML_LIB=libnvidia-ml.so.1 timeout 120 "$BIN/nvml_sample" --bench \
    --warm-up-time 3 --measurement-time 20 >"$OUT/nvml_sample.txt" 2>&1)
  log "nvml_sample: rc=$?"
fi

log "3. a serving agent under a busy GPU"
printf '%s' "gpu-check-$$-$RANDOM$RANDOM" >"$OUT/bench.token"
chmod 600 "$OUT/bench.token"
"$BIN/fleetop-agent" --listen 127.0.0.1:$PORT --backend nvml --kmsg none --state-dir none \
  --kubelet-socket none --bench-token-file "$OUT/bench.token" --insecure >"$OUT/agent.log" 2>&1 &
AGENT=$!
cat >"$OUT/burn.py" <<'EOF'
import sys, time, torch
end = time.time() + float(sys.argv[1])
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
n = 0
while time.time() < end:
    for _ in range(20):
        c = a @ b
    torch.cuda.synchronize()
    n += 20
print(f"{n} GEMMs of 8192^3 bf16", flush=True)
EOF
timeout 90 python3 "$OUT/burn.py" 70 >"$OUT/burn.log" 2>&1 &
BURN=$!
sleep 8
# The console reads through a counting relay, so the bytes are known where
# ss is missing: what the agent sent, HTTP/2 and gRPC framing included.
cat >"$OUT/relay.py" <<'EOF'
import asyncio, sys
listen, target, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
down = 0
async def pipe(r, w, count):
    global down
    while data := await r.read(65536):
        if count:
            down += len(data)
        w.write(data)
        await w.drain()
    w.close()
async def client(cr, cw):
    ar, aw = await asyncio.open_connection("127.0.0.1", target)
    await asyncio.gather(pipe(cr, aw, False), pipe(ar, cw, True), return_exceptions=True)
async def report():
    while True:
        with open(out, "w") as f:
            f.write(str(down))
        await asyncio.sleep(0.2)
async def main():
    server = await asyncio.start_server(client, "127.0.0.1", listen)
    asyncio.create_task(report())
    await server.serve_forever()
asyncio.run(main())
EOF
timeout 100 python3 "$OUT/relay.py" $((PORT + 1)) $PORT "$OUT/relay.count" 2>"$OUT/relay.err" &
RELAY=$!
sleep 1
"$BIN/fleetop" export --hosts 127.0.0.1:$((PORT + 1)) --count 60 --format ndjson \
  >"$OUT/export.ndjson" 2>"$OUT/export.err" &
EXPORT=$! # bounded by a watchdog
(sleep 90 && kill $EXPORT 2>/dev/null) &
cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }
relayed() { cat "$OUT/relay.count" 2>/dev/null || echo 0; }
sent() {
  ss -tinpH state established "( sport = :$PORT )" 2>/dev/null |
    grep -o 'bytes_sent:[0-9]*' | cut -d: -f2 | awk '{s += $1} END {print s + 0}'
}
sleep 15 # the description and the history are sent first; measure the live stream
c0=$(cpu $AGENT) b0=$(sent) r0=$(relayed) t0=$(date +%s.%N)
sleep 40
c1=$(cpu $AGENT) b1=$(sent) r1=$(relayed) t1=$(date +%s.%N)
TCK=$(getconf CLK_TCK)
NGPU=$(python3 -c 'import json, sys; print(len(json.load(open(sys.argv[1]))["sample"]["gpus"]))' "$OUT/sample.json")
python3 - "$c0" "$c1" "$b0" "$b1" "$t0" "$t1" "$TCK" "$NGPU" "$r0" "$r1" >"$OUT/serving.txt" <<'EOF'
import sys
c0, c1, b0, b1, t0, t1, tck, ngpu, r0, r1 = map(float, sys.argv[1:])
secs = t1 - t0
print(f"window {secs:.1f} s, {int(ngpu)} GPU(s), 1 s interval")
print(f"agent CPU: {(c1 - c0) / tck / secs * 100:.2f}% of a core, {(c1 - c0) / tck / secs * 1e3:.2f} ms per sample")
print(f"bytes sent to the console (ss): {(b1 - b0) / secs:.0f} B/s, {(b1 - b0) / secs / ngpu:.1f} B per GPU-sample")
print(f"bytes the agent sent (relay): {(r1 - r0) / secs:.0f} B/s, {(r1 - r0) / secs / ngpu:.1f} B per GPU-sample")
EOF
cat "$OUT/serving.txt" | tee -a "$OUT/steps.log"
wait $EXPORT
log "export: rc=$? $(wc -l <"$OUT/export.ndjson") snapshots"
kill $RELAY 2>/dev/null
kill $BURN 2>/dev/null
wait $BURN 2>/dev/null
nvidia-smi --query-gpu=$FIELDS,clocks_event_reasons.active --format=csv >"$OUT/smi-after-burn.csv" 2>&1

log "4. burn-in: the quick suite, then PyTorch's copies of the same sizes"
if [[ $STEPS == *4* ]]; then
  timeout 240 "$BIN/fleetop" bench --hosts 127.0.0.1:$PORT --token-file "$OUT/bench.token" --insecure \
    --yes --suite quick --format json >"$OUT/bench.json" 2>"$OUT/bench.err"
  log "bench: rc=$?"
fi
kill $AGENT 2>/dev/null
wait $AGENT 2>/dev/null
cat >"$OUT/copies.py" <<'EOF'
import json, statistics, torch

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

out = {"torch": torch.__version__, "cuda": torch.version.cuda, "gpus": []}
for i in range(torch.cuda.device_count()):
    torch.cuda.set_device(i)
    a = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    b = torch.empty_like(a)
    d2d = (1 << 30) / timed(lambda: b.copy_(a)) / 1e9
    del a, b
    host = torch.empty(256 << 20, dtype=torch.uint8).pin_memory()
    dev = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    h2d = (256 << 20) / timed(lambda: dev.copy_(host, non_blocking=True)) / 1e9
    d2h = (256 << 20) / timed(lambda: host.copy_(dev, non_blocking=True)) / 1e9
    out["gpus"].append({"gpu": i, "name": torch.cuda.get_device_name(i),
                        "hbm_d2d_gbps": round(d2d, 1), "pcie_h2d_gbps": round(h2d, 1), "pcie_d2h_gbps": round(d2h, 1)})
print(json.dumps(out, indent=1))
EOF
if [[ $STEPS == *4* ]]; then
  timeout 120 python3 "$OUT/copies.py" >"$OUT/torch-copies.json" 2>"$OUT/torch-copies.err"
  log "torch copies: rc=$?"
fi
log "done"
