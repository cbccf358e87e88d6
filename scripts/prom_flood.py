#!/usr/bin/env python3
"""Memory of fleetop against hostile servers, as issue 40 measured it.

1. `export --prometheus` where every query is answered with SERIES series
   (1,000,000 to each of the 13 queries took 9.7 GB before a refresh was
   bounded as a whole), for each --scrape-timeout given.
2. `node cordon --kubernetes` against an API server that answers 500 MB
   (1.56 GB before each answer was bounded).

Prints each run's wall time, peak RSS (/usr/bin/time) and its one-line error.

    cargo build --release -p fleetop
    python3 scripts/prom_flood.py --series 1000000 --timeouts 2s 60s
"""

import argparse
import http.server
import os
import socketserver
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FLEETOP = os.environ.get("FLEETOP_BIN", os.path.join(ROOT, "target", "release", "fleetop"))


def answer(series):
    parts = [b'{"status":"success","data":{"resultType":"vector","result":[']
    for i in range(series):
        sep = b"," if i else b""
        parts.append(
            sep
            + b'{"metric":{"__name__":"DCGM_FI_DEV_GPU_UTIL","Hostname":"node%07d","gpu":"%d"},"value":[1764300000.0,"%d"]}'
            % (i // 8, i % 8, i % 101)
        )
    parts.append(b"]}}")
    return b"".join(parts)


def measured(what, args, env=None):
    start = time.monotonic()
    p = subprocess.run(["/usr/bin/time", "-f", "maxrss_kb=%M", FLEETOP, *args],
                       capture_output=True, text=True, timeout=600, env=env)
    secs = time.monotonic() - start
    err = p.stderr.strip().splitlines()
    rss = next((l.split("=")[1] for l in err if l.startswith("maxrss_kb=")), "0")
    said = next((l for l in err + p.stdout.splitlines() if "FAIL" in l or l.startswith("fleetop:")), "")
    print(f"{what}: exit {p.returncode}, {secs:.1f} s, peak RSS {int(rss) / 1024:.0f} MiB; said: {said[:200]}",
          flush=True)


def serve(body):
    class H(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def answer(self):
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            try:
                self.wfile.write(body)
            except OSError:
                pass

        do_GET = do_PATCH = do_POST = answer

        def log_message(self, *args):
            pass

    class S(socketserver.ThreadingMixIn, http.server.HTTPServer):
        daemon_threads = True

    srv = S(("127.0.0.1", 0), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{srv.server_address[1]}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--series", type=int, default=1_000_000)
    ap.add_argument("--timeouts", nargs="+", default=["2s", "60s"])
    a = ap.parse_args()
    body = answer(a.series)
    print(f"each answer: {a.series:,} series, {len(body) / 1e6:.0f} MB", flush=True)

    url = serve(body)
    for t in a.timeouts:
        measured(f"--prometheus, --scrape-timeout {t}",
                 ["export", "--once", "--scrape-timeout", t, "--prometheus", url])
    del body
    url = serve(b" " * 500_000_000)
    with tempfile.TemporaryDirectory() as d:
        kc = os.path.join(d, "kubeconfig")
        with open(kc, "w") as f:
            f.write("apiVersion: v1\nkind: Config\ncurrent-context: t\nclusters:\n- name: c\n  cluster:\n"
                    f"    server: {url}\ncontexts:\n- name: t\n  context:\n    cluster: c\n    user: u\n"
                    "users:\n- name: u\n  user:\n    token: t\n")
        env = dict(os.environ, FLEETOP_AUDIT_LOG=os.path.join(d, "audit.jsonl"))
        env.pop("KUBECONFIG", None)
        measured("--kubernetes, a 500 MB answer",
                 ["node", "cordon", "gpu01", "--reason", "probe", "--kubernetes", "--yes", "--kubeconfig", kc], env)


if __name__ == "__main__":
    sys.exit(main())
