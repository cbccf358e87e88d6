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
    python3 scripts/prom_flood.py --worst --timeouts 120s   # every answer at fleetop's bounds (issue 49)
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


def worst_answer(names, hosts, gpus, label_bytes, max_bytes):
    """The answer that holds the most inside fleetop's bounds: every name the
    query asks for, on `hosts` nodes of `gpus` GPUs (the refresh's bound on
    GPUs), every descriptive label `label_bytes` long, cut to `max_bytes`."""
    pad = "x" * label_bytes
    parts = [b'{"status":"success","data":{"resultType":"vector","result":[']
    size = len(parts[0])
    first = True
    for name in names:
        for i in range(hosts * gpus):
            one = ('{"metric":{"__name__":"%s","Hostname":"node%07d","gpu":"%d","UUID":"GPU-%d%s",'
                   '"modelName":"%s","pci_bus_id":"%s"},"value":[1764300000.0,"%d"]}'
                   % (name, i // gpus, i % gpus, i, pad, pad, pad, i % 101)).encode()
            if size + len(one) + 8 > max_bytes:
                break
            parts.append(one if first else b"," + one)
            size += len(one) + 1
            first = False
    parts.append(b"]}}")
    return b"".join(parts)


def serve_worst(hosts, gpus, label_bytes, max_bytes):
    import re
    import urllib.parse
    cache = {}

    class H(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self):
            q = urllib.parse.parse_qs(urllib.parse.urlparse(self.path).query).get("query", [""])[0]
            m = re.search(r'__name__=~?"([^"]+)"', q)
            names = tuple(m.group(1).split("|")) if m else ("up",)
            if names not in cache:
                cache[names] = worst_answer(names, hosts, gpus, label_bytes, max_bytes)
            body = cache[names]
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
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
    return f"http://127.0.0.1:{srv.server_address[1]}"


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
    ap.add_argument("--worst", action="store_true",
                    help="instead: every query answered with what it asks for, at fleetop's bounds "
                         "(16,384 nodes, 19 GPUs each, 300-byte labels, 190 MB an answer)")
    ap.add_argument("--worst-hosts", type=int, default=16_384)
    ap.add_argument("--worst-gpus", type=int, default=19)
    ap.add_argument("--worst-label-bytes", type=int, default=300)
    ap.add_argument("--worst-answer-mb", type=int, default=190,
                    help="each answer cut to this; 60 keeps a first read's ~16 answers under 1 GiB, read whole")
    a = ap.parse_args()
    if a.worst:
        url = serve_worst(a.worst_hosts, a.worst_gpus, a.worst_label_bytes, a.worst_answer_mb << 20)
        for t in a.timeouts:
            measured(f"--prometheus at the bounds ({a.worst_hosts:,} nodes x {a.worst_gpus} GPUs, "
                     f"{a.worst_label_bytes}-byte labels, answers of {a.worst_answer_mb} MB at most), --scrape-timeout {t}",
                     ["export", "--once", "--scrape-timeout", t, "--prometheus", url])
        return 0
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
