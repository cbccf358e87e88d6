#!/usr/bin/env python3
"""Cost of one exporter page with many GPUs on one node (issue 49, part 5).

Serves one dcgm-exporter page of N GPUs (two series each), or one AMD
device-metrics-exporter page of N one-line GPUs, on loopback, and runs
`fleetop export --once` against it. Prints each run's wall time, peak RSS
(/usr/bin/time) and how many GPUs the node was exported with: before the
bound, the cost grew with the square of the GPUs; after it, a node keeps
64 GPUs and the rest of the page costs its parsing only.

    cargo build --release -p fleetop
    python3 scripts/page_cost.py --dcgm 10000 50000 100000 --amd 190000
    FLEETOP_BIN=path/to/other/fleetop python3 scripts/page_cost.py ...   # a baseline
"""

import argparse
import http.server
import json
import os
import socketserver
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FLEETOP = os.environ.get("FLEETOP_BIN", os.path.join(ROOT, "target", "release", "fleetop"))


def dcgm_page(gpus):
    out = []
    for g in range(gpus):
        # Two series a GPU: 100,000 GPUs are 200,000 samples, 14 MB (the
        # page's bounds are 200,000 samples and 16 MiB).
        l = f'gpu="{g}",UUID="GPU-{g:08x}",Hostname="big"'
        out.append(f"DCGM_FI_DEV_GPU_UTIL{{{l}}} {g % 101}\n")
        out.append(f"DCGM_FI_DEV_GPU_TEMP{{{l}}} 40\n")
    return "".join(out).encode()


def amd_page(gpus):
    # One line a GPU (about 44 bytes: 190,000 of them are 8.4 MB).
    return "".join(f'gpu_gfx_activity{{gpu_id="{g}",hostname="big"}} 7\n' for g in range(gpus)).encode()


def serve(body):
    class H(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            try:
                self.wfile.write(body)
            except OSError:
                pass

        def log_message(self, *args):
            pass

    class S(socketserver.ThreadingMixIn, http.server.HTTPServer):
        daemon_threads = True

    srv = S(("127.0.0.1", 0), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv, f"127.0.0.1:{srv.server_address[1]}"


def measured(what, flag, body, timeout):
    srv, addr = serve(body)
    start = time.monotonic()
    try:
        p = subprocess.run(
            ["/usr/bin/time", "-f", "maxrss_kb=%M", FLEETOP, "export", "--once", "--scrape-timeout", "300s",
             "--timeout", f"{timeout}s", flag, addr],
            capture_output=True, text=True, timeout=timeout + 60)
    except subprocess.TimeoutExpired:
        print(f"{what}: over {timeout + 60} s", flush=True)
        srv.shutdown()
        return
    secs = time.monotonic() - start
    srv.shutdown()
    err = p.stderr.strip().splitlines()
    rss = next((l.split("=")[1] for l in err if l.startswith("maxrss_kb=")), "0")
    try:
        gpus = len(json.loads(p.stdout)["nodes"][0]["gpus"])
    except (ValueError, KeyError, IndexError):
        gpus = "?"
    warn = next((l for l in err if "more than 64 GPUs" in l), "")
    print(f"{what} ({len(body) / 1e6:.1f} MB): exit {p.returncode}, {secs:.2f} s, "
          f"peak RSS {int(rss) / 1024:.0f} MiB, {gpus} GPUs exported"
          + (", warned" if warn else ""), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dcgm", type=int, nargs="*", default=[10_000, 50_000, 100_000])
    ap.add_argument("--amd", type=int, nargs="*", default=[190_000])
    ap.add_argument("--timeout", type=int, default=300)
    a = ap.parse_args()
    print(f"binary: {FLEETOP}", flush=True)
    for n in a.dcgm:
        measured(f"dcgm-exporter, {n:,} GPUs on one node", "--dcgm-exporter", dcgm_page(n), a.timeout)
    for n in a.amd:
        measured(f"AMD exporter, {n:,} one-line GPUs on one node", "--amd-exporter", amd_page(n), a.timeout)


if __name__ == "__main__":
    sys.exit(main())
