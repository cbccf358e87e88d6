#!/usr/bin/env python3
"""Scale benchmark of `--prometheus`: N simulated dcgm-exporter nodes x 8 GPUs
(swarm processes serving dcgm-exporter's text, one target per node), scraped
by one real Prometheus (/usr/bin/prometheus) every 15 s, read by the console
(the TUI in a tmux pane, release build) at a 5 s refresh. Prints the
console's CPU (% of one core) and RSS, the query latency (p50/p99 of each
instant query and of a whole refresh), Prometheus' own CPU and RSS, and the
time and size of one `export --once`.

    cargo build --release -p fleetop
    python3 scripts/prom_scale.py --nodes 1024 --minutes 3

Everything runs on loopback in a temp dir and is stopped at the end.
"""

import argparse
import asyncio
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FLEETOP = os.environ.get("FLEETOP_BIN", os.path.join(ROOT, "target", "release", "fleetop"))
PROMETHEUS = "/usr/bin/prometheus"
HZ = os.sysconf("SC_CLK_TCK")

# dcgm-exporter's default counters plus the profiling ones: (name, type, value(node, gpu, t)).
FIELDS = [
    ("DCGM_FI_DEV_SM_CLOCK", "gauge", lambda n, g, t: 1980),
    ("DCGM_FI_DEV_MEM_CLOCK", "gauge", lambda n, g, t: 2619),
    ("DCGM_FI_DEV_MEMORY_TEMP", "gauge", lambda n, g, t: 9223372036854775794),
    ("DCGM_FI_DEV_GPU_TEMP", "gauge", lambda n, g, t: 40 + (n + g + t) % 40),
    ("DCGM_FI_DEV_POWER_USAGE", "gauge", lambda n, g, t: 100.0 + (n * 7 + g * 13 + t) % 600),
    ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter", lambda n, g, t: 10**9 + t * 5000),
    ("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "counter", lambda n, g, t: 0),
    ("DCGM_FI_DEV_GPU_UTIL", "gauge", lambda n, g, t: (n * 31 + g * 17 + t) % 101),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", lambda n, g, t: (n + g + t) % 60),
    ("DCGM_FI_DEV_XID_ERRORS", "gauge", lambda n, g, t: 0),
    ("DCGM_FI_DEV_FB_FREE", "gauge", lambda n, g, t: 81559 - (n * 1000 + g) % 80000),
    ("DCGM_FI_DEV_FB_USED", "gauge", lambda n, g, t: (n * 1000 + g) % 80000),
    ("DCGM_FI_PROF_SM_ACTIVE", "gauge", lambda n, g, t: ((n + g + t) % 100) / 100),
    ("DCGM_FI_PROF_SM_OCCUPANCY", "gauge", lambda n, g, t: ((n + g) % 100) / 200),
    ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "gauge", lambda n, g, t: ((n + t) % 100) / 150),
    ("DCGM_FI_PROF_DRAM_ACTIVE", "gauge", lambda n, g, t: ((g + t) % 100) / 120),
]


def node_name(i):
    return f"node{i:05d}"


def dcgm_text(i, t, gpus):
    host = node_name(i)
    out = []
    for name, ty, val in FIELDS:
        out.append(f"# HELP {name} {name}.\n# TYPE {name} {ty}\n")
        for g in range(gpus):
            labels = (
                f'gpu="{g}",UUID="GPU-{i:08x}-{g:04x}-0000-0000-000000000000",'
                f'pci_bus_id="00000000:{0x18 + g * 16:02X}:00.0",device="nvidia{g}",'
                f'modelName="NVIDIA H100 80GB HBM3",Hostname="{host}",'
                f'DCGM_FI_DRIVER_VERSION="550.54.15",container="",namespace="",pod=""'
            )
            out.append(f"{name}{{{labels}}} {val(i, g, t)}\n")
    return "".join(out).encode()


def serve(port, first, count, gpus):
    """One swarm process: answers /metrics?node=nodeNNNNN for its share of nodes.
    Bodies are rebuilt every 15 s (the values move), cached in between."""
    cache = {}

    async def handle(reader, writer):
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                line = head.split(b"\r\n", 1)[0].decode()
                path = line.split(" ")[1]
                q = urllib.parse.parse_qs(urllib.parse.urlparse(path).query)
                i = int(q.get("node", ["node0"])[0][4:])
                t = int(time.time() // 15)
                body = cache.get(i)
                if body is None or body[0] != t:
                    body = (t, dcgm_text(i, t, gpus))
                    cache[i] = body
                writer.write(
                    b"HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n"
                    + f"Content-Length: {len(body[1])}\r\n\r\n".encode()
                    + body[1]
                )
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, ValueError, IndexError):
            pass
        finally:
            writer.close()

    async def main():
        server = await asyncio.start_server(handle, "127.0.0.1", port, backlog=1024)
        async with server:
            await server.serve_forever()

    asyncio.run(main())


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get_json(url):
    with urllib.request.urlopen(url, timeout=30) as r:
        return json.loads(r.read())


def query(base, q):
    return get_json(f"{base}/api/v1/query?{urllib.parse.urlencode({'query': q})}")


def scalar(base, q):
    r = query(base, q)["data"]["result"]
    return float(r[0]["value"][1]) if r else 0.0


def cpu_s(pid):
    with open(f"/proc/{pid}/stat") as f:
        parts = f.read().rsplit(")", 1)[1].split()
    return (int(parts[11]) + int(parts[12])) / HZ


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))] if xs else float("nan")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=1024)
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument("--swarms", type=int, default=2)
    ap.add_argument("--minutes", type=float, default=3)
    ap.add_argument("--scrape", default="15s")
    ap.add_argument("--refresh", default="5s")
    ap.add_argument("--query-timeout", default="30s", help="the console's --scrape-timeout")
    ap.add_argument("--serve", nargs=3, type=int, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.serve:
        serve(a.serve[0], a.serve[1], a.serve[2], a.gpus)
        return
    for b in (FLEETOP, PROMETHEUS):
        if not os.path.exists(b):
            sys.exit(f"missing {b} (cargo build --release -p fleetop; apt install prometheus)")
    if not shutil.which("tmux"):
        sys.exit("missing tmux")
    tmp = tempfile.mkdtemp(prefix="fleetop-promscale-")
    procs = []
    tmux_sock = f"fleetop-promscale-{os.getpid()}"
    try:
        per = (a.nodes + a.swarms - 1) // a.swarms
        groups = []
        for k in range(a.swarms):
            first, count = k * per, max(0, min(per, a.nodes - k * per))
            if count == 0:
                continue
            port = free_port()
            procs.append(subprocess.Popen([sys.executable, __file__, "--gpus", str(a.gpus), "--serve", str(port), str(first), str(count)]))
            groups.append((port, [node_name(i) for i in range(first, first + count)]))
        static = "".join(
            f"      - targets: [{', '.join(repr(n) for n in names)}]\n        labels: {{swarm: '127.0.0.1:{port}'}}\n"
            for port, names in groups
        )
        cfg = (
            f"global:\n  scrape_interval: {a.scrape}\n  scrape_timeout: {a.scrape}\n"
            "scrape_configs:\n  - job_name: dcgm\n    static_configs:\n" + static
            + "    relabel_configs:\n"
            "      - {source_labels: [__address__], target_label: __param_node}\n"
            "      - {source_labels: [__address__], target_label: instance}\n"
            "      - {source_labels: [swarm], target_label: __address__}\n"
            "      - {action: labeldrop, regex: swarm}\n"
        )
        with open(os.path.join(tmp, "prometheus.yml"), "w") as f:
            f.write(cfg)
        pport = free_port()
        base = f"http://127.0.0.1:{pport}"
        plog = open(os.path.join(tmp, "prometheus.log"), "w")
        prom = subprocess.Popen(
            [PROMETHEUS, f"--config.file={tmp}/prometheus.yml", f"--storage.tsdb.path={tmp}/data",
             f"--web.listen-address=127.0.0.1:{pport}"],
            stdout=plog, stderr=plog)
        procs.append(prom)
        t0 = time.time()
        while True:
            try:
                n_up = scalar(base, "count(sum_over_time(up[2m]) >= 2)")
            except Exception:
                n_up = 0
            if n_up >= a.nodes:
                break
            if time.time() - t0 > 300:
                log = open(os.path.join(tmp, "prometheus.log")).read()[-2000:]
                sys.exit(f"only {n_up:.0f} of {a.nodes} targets scraped twice within 300 s\n{log}")
            time.sleep(3)
        print(f"prometheus: {a.nodes} targets scraped twice after {time.time() - t0:.0f} s", file=sys.stderr)

        # One export --once: wall time and size.
        t1 = time.time()
        out = subprocess.run([FLEETOP, "export", "--once", "--prometheus", base, "--timeout", "60s", "--scrape-timeout", a.query_timeout,
                              "--format", "ndjson"], capture_output=True, env={**os.environ, "XDG_CONFIG_HOME": tmp})
        export_s = time.time() - t1
        snap = json.loads(out.stdout) if out.returncode == 0 else {"nodes": []}
        export_nodes = len(snap["nodes"])
        export_gpus = sum(len(n["gpus"]) for n in snap["nodes"])

        # The TUI, in a 200x50 tmux pane, logging query latencies.
        state = os.path.join(tmp, "state")
        env = f"XDG_CONFIG_HOME={tmp} XDG_STATE_HOME={state} FLEETOP_LOG=fleetop::ingest::prometheus=debug TERM=xterm-256color"
        tmux = ["tmux", "-L", tmux_sock]
        # A first session keeps the server up so the console's pane can stay after an exit (to show why).
        subprocess.run(tmux + ["-f", "/dev/null", "new-session", "-d", "-s", "keep", "sleep 3600"], check=True)
        subprocess.run(tmux + ["set-option", "-g", "remain-on-exit", "on"], check=True)
        subprocess.run(tmux + ["new-session", "-d", "-s", "tui", "-x", "200", "-y", "50",
                               f"exec env {env} {FLEETOP} --prometheus {base} --scrape-interval {a.refresh} --scrape-timeout {a.query_timeout}"], check=True)
        pid = int(subprocess.run(tmux + ["list-panes", "-t", "tui", "-F", "#{pane_pid}"],
                                 capture_output=True, text=True, check=True).stdout.split()[0])
        time.sleep(30)  # start-up: discovery, history backfill, first refreshes
        if not os.path.exists(f"/proc/{pid}/stat"):
            pane = subprocess.run(tmux + ["capture-pane", "-p", "-t", "tui"], capture_output=True, text=True).stdout
            sys.exit(f"the console exited:\n{pane}")
        log_path = os.path.join(state, "fleetop", "fleetop.log")
        log_start = os.path.getsize(log_path)
        c0, p0, w0 = cpu_s(pid), cpu_s(prom.pid), time.time()
        rss, prss = [], []
        end = w0 + a.minutes * 60
        while time.time() < end:
            rss.append(rss_mb(pid))
            prss.append(rss_mb(prom.pid))
            time.sleep(1)
        wall = time.time() - w0
        console_cpu = (cpu_s(pid) - c0) / wall * 100
        prom_cpu = (cpu_s(prom.pid) - p0) / wall * 100
        with open(log_path) as f:
            f.seek(log_start)
            log = f.read()
        q_ms = [int(m) for m in re.findall(r"prometheus query answered in (\d+) ms", log)]
        r_ms = [int(m) for m in re.findall(r"prometheus refresh read in (\d+) ms", log)]
        series = get_json(f"{base}/api/v1/status/tsdb")["data"]["headStats"]["numSeries"]
        print(f"date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
        print(f"nodes: {a.nodes} x {a.gpus} GPUs, scrape {a.scrape}, refresh {a.refresh}, swarms {len(groups)}, measured {wall:.0f} s")
        print(f"prometheus head series: {series:.0f}")
        print(f"console (TUI) CPU: {console_cpu:.1f}% of one core; RSS max {max(rss):.0f} MB, last {rss[-1]:.0f} MB")
        print(f"instant query latency: p50 {pct(q_ms, 50)} ms, p99 {pct(q_ms, 99)} ms (n={len(q_ms)})")
        print(f"whole refresh (all queries + mapping): p50 {pct(r_ms, 50)} ms, p99 {pct(r_ms, 99)} ms (n={len(r_ms)})")
        print(f"prometheus CPU: {prom_cpu:.1f}% of one core; RSS max {max(prss):.0f} MB")
        print(f"export --once: {export_s:.1f} s, {export_nodes} nodes, {export_gpus} GPUs, {len(out.stdout) / 1e6:.1f} MB"
              + ("" if out.returncode == 0 else f" (failed: {out.stderr.decode()[-300:]})"))
    finally:
        subprocess.run(["tmux", "-L", tmux_sock, "kill-server"], capture_output=True)
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
