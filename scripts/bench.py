#!/usr/bin/env python3
"""fleetop's process benchmarks: prints figures, asserts nothing.

  cargo build --release --workspace && python3 scripts/bench.py [SECONDS]

1. Agent: CPU and RSS of `fleetop-agent --backend sim --sim-gpus 8` at 1 Hz
   with one console subscribed.
2. Fan-in over real gRPC: 256 simulated agents in one helper process
   (`fleetop-agent swarm`) streaming to one `fleetop export --format ndjson`:
   the console's CPU (% of one core) and RSS, and bytes per GPU-sample, both
   as protobuf payload (counted by the agents) and as loopback traffic
   (TCP/IP + HTTP/2 included, both directions).
"""
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(ROOT, "target", "release")
SECONDS = int(sys.argv[1]) if len(sys.argv) > 1 else 60
WARMUP = 10
TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime + stime


def rss_mb(pid, key="VmRSS"):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) / 1024
    return float("nan")


def lo_bytes():
    with open("/proc/net/dev") as f:
        for line in f:
            if line.strip().startswith("lo:"):
                return int(line.split(":")[1].split()[0])
    return 0


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, timeout=20):
    end = time.time() + timeout
    while time.time() < end:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"nothing listens on {port}")


def measure(pid, seconds):
    c0, t0 = cpu_seconds(pid), time.time()
    time.sleep(seconds)
    c1, t1 = cpu_seconds(pid), time.time()
    return 100.0 * (c1 - c0) / (t1 - t0)


def agent_bench():
    port = free_port()
    agent = subprocess.Popen([f"{BIN}/fleetop-agent", "--backend", "sim", "--sim-gpus", "8",
                              "--listen", f"127.0.0.1:{port}"], stderr=subprocess.DEVNULL)
    wait_port(port)
    console = subprocess.Popen([f"{BIN}/fleetop", "export", "--hosts", f"127.0.0.1:{port}",
                                "--format", "ndjson", "--interval", "10s"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(WARMUP)
    cpu = measure(agent.pid, SECONDS)
    rss = rss_mb(agent.pid)
    hwm = rss_mb(agent.pid, "VmHWM")
    console.terminate(); agent.terminate()
    console.wait(); agent.wait()
    print(f"agent (sim, 8 GPUs, 1 Hz, 1 subscriber): cpu {cpu:.3f}% of one core, "
          f"rss {rss:.1f} MB (peak {hwm:.1f} MB) over {SECONDS}s")


def swarm_stats(swarm):
    """Asks the swarm for its running totals (SIGUSR1) and reads the line."""
    swarm.send_signal(signal.SIGUSR1)
    line = swarm.stderr.readline()
    return {k: int(v) for k, v in (kv.split("=") for kv in line.split()[1:])}


def fanin_bench(nodes=256, interval="1s"):
    with tempfile.TemporaryDirectory() as d:
        hostfile = os.path.join(d, "hosts")
        swarm = subprocess.Popen([f"{BIN}/fleetop-agent", "swarm", "--count", str(nodes),
                                  "--sim-gpus", "8", "--hostfile", hostfile],
                                 stderr=subprocess.PIPE, text=True)
        end = time.time() + 60
        while not os.path.exists(hostfile) and time.time() < end:
            time.sleep(0.1)
        console = subprocess.Popen([f"{BIN}/fleetop", "export", "--hostfile", hostfile,
                                    "--format", "ndjson", "--interval", interval],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(WARMUP)
        stats0 = swarm_stats(swarm)
        lo0 = lo_bytes()
        cpu = measure(console.pid, SECONDS)
        lo1 = lo_bytes()
        stats1 = swarm_stats(swarm)
        rss = rss_mb(console.pid)
        hwm = rss_mb(console.pid, "VmHWM")
        swarm_cpu = measure(swarm.pid, 5)
        console.terminate(); console.wait()
        swarm.send_signal(signal.SIGTERM)
        swarm.wait()
        gpu_samples = stats1["gpu_samples"] - stats0["gpu_samples"]
        per_gpu = (stats1["protobuf_bytes_sent"] - stats0["protobuf_bytes_sent"]) / max(gpu_samples, 1)
        window_gpu_samples = nodes * 8 * SECONDS
        print(f"fan-in ({nodes} agents x 8 GPUs at 1 Hz, export every {interval}): console cpu {cpu:.2f}% "
              f"of one core, rss {rss:.1f} MB (peak {hwm:.1f} MB); protobuf {per_gpu:.1f} B per GPU-sample in the window; "
              f"loopback {(lo1 - lo0) / window_gpu_samples:.1f} B per GPU-sample (both directions, "
              f"TCP/IP and HTTP/2 included); swarm helper cpu {swarm_cpu:.1f}%")


if __name__ == "__main__":
    for b in (f"{BIN}/fleetop", f"{BIN}/fleetop-agent"):
        if not os.path.exists(b):
            raise SystemExit(f"{b} missing: cargo build --release --workspace")
    print(f"# {time.strftime('%Y-%m-%d')}, {os.cpu_count()} cores, {SECONDS}s windows after {WARMUP}s warm-up")
    agent_bench()
    fanin_bench(interval="1s")
    fanin_bench(interval="60s")
