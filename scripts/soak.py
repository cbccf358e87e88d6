#!/usr/bin/env python3
"""Fault soak: many real agent processes, faults at random, and the console
watched from outside. Prints figures; asserts nothing about speed.

    cargo build --release && sudo python3 scripts/soak.py [--minutes 10] [--agents 256]

What it does, for the whole run:
  - starts N fleetop-agent processes (simulated backend, 2 GPUs each, 1 s
    interval) on loopback, and one more inside a network namespace this
    script creates (needs root and iproute2), reached over a veth pair;
  - runs `fleetop export --format ndjson --interval 1s` over all of them and,
    when tmux is installed, the TUI in a tmux session of its own;
  - at random: SIGKILL an agent and restart it later, SIGSTOP/SIGCONT one,
    and cut the namespaced agent off (its veth set down: packets dropped,
    nothing refused) and back;
  - reads every snapshot: when each faulty node turned stale and unreachable
    after going silent, and ok again after coming back;
  - samples the console's RSS (export and TUI) every 10 s.

At the end it prints time-to-detect (stale, unreachable) and time-to-recover
(p50/p99/max, seconds), how many faults each figure is over, RSS over time,
whether the export or the TUI ever died or stalled (no snapshot for 5 s),
and writes the same as JSON beside --out. Everything it started is stopped,
the namespace removed, on exit or Ctrl-C.
"""

import argparse
import json
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from datetime import datetime

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(ROOT, "target", "release")
NS = "fleetop-soak"
VETH_HOST, VETH_NS = "fsoak0", "fsoak1"
# Addresses of this script's own namespace (a /30 on its own veth pair).
HOST_IP, NS_IP = "10.213.0.1", "10.213.0.2"


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def run(*cmd, check=True):
    return subprocess.run(cmd, check=check, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def rss_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def pct(values, p):
    if not values:
        return None
    s = sorted(values)
    return s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))]


class Agent:
    def __init__(self, name, listen, netns=None):
        self.name, self.listen, self.netns = name, listen, netns
        self.proc = None
        self.start()

    def start(self):
        cmd = [
            os.path.join(BIN, "fleetop-agent"),
            "--backend", "sim", "--sim-gpus", "2", "--sim-ib-ports", "1",
            "--sim-hostname", self.name, "--interval", "1s", "--listen", self.listen,
        ]
        if self.netns:
            cmd = ["ip", "netns", "exec", self.netns] + cmd
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     env=dict(os.environ, FLEETOP_LOG="error"))

    def signal(self, sig):
        try:
            os.kill(self.proc.pid, sig)
        except ProcessLookupError:
            pass

    def stop(self):
        self.signal(signal.SIGCONT)
        self.signal(signal.SIGKILL)
        self.proc.wait()


def setup_netns():
    run("ip", "netns", "del", NS, check=False)
    run("ip", "link", "del", VETH_HOST, check=False)
    run("ip", "netns", "add", NS)
    run("ip", "link", "add", VETH_HOST, "type", "veth", "peer", "name", VETH_NS)
    run("ip", "link", "set", VETH_NS, "netns", NS)
    run("ip", "addr", "add", f"{HOST_IP}/30", "dev", VETH_HOST)
    run("ip", "link", "set", VETH_HOST, "up")
    run("ip", "netns", "exec", NS, "ip", "addr", "add", f"{NS_IP}/30", "dev", VETH_NS)
    run("ip", "netns", "exec", NS, "ip", "link", "set", VETH_NS, "up")
    run("ip", "netns", "exec", NS, "ip", "link", "set", "lo", "up")


def teardown_netns():
    run("ip", "link", "del", VETH_HOST, check=False)
    run("ip", "netns", "del", NS, check=False)


def main():
    global BIN
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=10)
    ap.add_argument("--agents", type=int, default=256)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", default=os.path.join(ROOT, "target", "soak.json"))
    ap.add_argument("--bin", default=BIN, help="where fleetop and fleetop-agent are (default target/release)")
    args = ap.parse_args()
    BIN = args.bin
    rng = random.Random(args.seed)
    for b in ("fleetop", "fleetop-agent"):
        if not os.path.exists(os.path.join(BIN, b)):
            sys.exit(f"{b} missing: cargo build --release")
    use_ns = os.geteuid() == 0 and subprocess.run(["ip", "netns", "list"], capture_output=True).returncode == 0

    agents = {}
    for i in range(args.agents):
        name = f"soak{i + 1:04d}"
        agents[name] = Agent(name, f"127.0.0.1:{free_port()}")
    cut_name = None
    if use_ns:
        setup_netns()
        cut_name = "soakns"
        agents[cut_name] = Agent(cut_name, f"{NS_IP}:50051", netns=NS)
    hostfile = os.path.join(ROOT, "target", "soak-hosts")
    with open(hostfile, "w") as f:
        for name, a in agents.items():
            host, port = a.listen.rsplit(":", 1)
            f.write(f"{host}:{port}\n")
    # Console names nodes by host; map back to agent names.
    by_addr = {a.listen: name for name, a in agents.items()}
    time.sleep(2)

    env = dict(os.environ, XDG_CONFIG_HOME="/nonexistent", FLEETOP_LOG="error")
    export = subprocess.Popen(
        [os.path.join(BIN, "fleetop"), "export", "--hostfile", hostfile, "--format", "ndjson",
         "--interval", "1s", "--timeout", "30s"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, text=True, bufsize=1)
    tmux = None
    if subprocess.run(["tmux", "-V"], capture_output=True).returncode == 0:
        tmux = f"fleetop-soak-{os.getpid()}"
        subprocess.run(["tmux", "-L", tmux, "new-session", "-d", "-x", "200", "-y", "50",
                        f"env XDG_CONFIG_HOME=/nonexistent {os.path.join(BIN, 'fleetop')} --hostfile {hostfile}"],
                       check=True, env=env)

    statuses = {}          # name -> list of (t, status)
    last_snapshot = [time.time()]
    stalls = []
    lock = threading.Lock()

    def reader():
        for line in export.stdout:
            t = time.time()
            try:
                snap = json.loads(line)
            except ValueError:
                continue
            with lock:
                gap = t - last_snapshot[0]
                if gap > 5:
                    stalls.append(("export", round(gap, 1)))
                last_snapshot[0] = t
                for n in snap["nodes"]:
                    name = by_addr.get(n["address"], n["name"])
                    statuses.setdefault(name, []).append((t, n["status"]))

    threading.Thread(target=reader, daemon=True).start()

    events = []            # dicts: name, kind, silent_at, back_at
    rss = []               # (t, export_kib, tui_kib)
    busy = set()
    start = time.time()
    end = start + args.minutes * 60
    next_rss = start
    pending = []           # (when, fn)

    def tui_pid():
        if not tmux:
            return None
        r = subprocess.run(["tmux", "-L", tmux, "display", "-p", "#{pane_pid}"], capture_output=True, text=True)
        return int(r.stdout.strip()) if r.returncode == 0 and r.stdout.strip() else None

    try:
        # Let the first snapshot in before any fault.
        while not statuses and time.time() < start + 60:
            time.sleep(0.5)
        while time.time() < end:
            now = time.time()
            for item in [p for p in pending if p[0] <= now]:
                pending.remove(item)
                item[1]()
            if now >= next_rss:
                rss.append((round(now - start), rss_kib(export.pid), rss_kib(tui_pid()) if tmux else None))
                next_rss += 10
                if export.poll() is not None:
                    stalls.append(("export exited", export.returncode))
                    break
                if tmux and subprocess.run(["tmux", "-L", tmux, "has-session"], capture_output=True).returncode != 0:
                    stalls.append(("tui exited", None))
                    tmux = None
            # A fault every few seconds, on a node not already in one; outages
            # of 20-60 s so that unreachable (30 s) can be seen.
            if rng.random() < 0.25:
                kinds = ["kill", "stop"] + (["cut"] if cut_name and cut_name not in busy else [])
                kind = rng.choice(kinds)
                name = cut_name if kind == "cut" else rng.choice([n for n in agents if n != cut_name])
                if name not in busy:
                    busy.add(name)
                    a = agents[name]
                    ev = {"name": name, "kind": kind, "silent_at": now, "back_at": None}
                    events.append(ev)
                    outage = rng.uniform(20, 60)
                    if kind == "kill":
                        a.signal(signal.SIGKILL)
                        a.proc.wait()
                        back = a.start
                    elif kind == "stop":
                        a.signal(signal.SIGSTOP)
                        back = lambda a=a: a.signal(signal.SIGCONT)
                    else:
                        run("ip", "link", "set", VETH_HOST, "down")
                        back = lambda: run("ip", "link", "set", VETH_HOST, "up")

                    def come_back(ev=ev, back=back, name=name):
                        back()
                        ev["back_at"] = time.time()
                        # Leave it alone a while after, so recovery is measured.
                        pending.append((time.time() + 20, lambda: busy.discard(name)))

                    pending.append((now + outage, come_back))
            time.sleep(1)
    finally:
        for _, fn in sorted(pending, key=lambda p: p[0]):
            try:
                fn()
            except Exception:
                pass
        time.sleep(3)
        export.terminate()
        if tmux:
            subprocess.run(["tmux", "-L", tmux, "kill-server"], capture_output=True)
        for a in agents.values():
            a.stop()
        if use_ns:
            teardown_netns()

    def first(name, after, want, before=None):
        for t, s in statuses.get(name, []):
            if t >= after and (before is None or t <= before) and s in want:
                return t
        return None

    stale, unreach, recover = [], [], []
    for ev in events:
        back = ev["back_at"]
        t = first(ev["name"], ev["silent_at"], ("stale", "unreachable"), back)
        if t:
            stale.append(t - ev["silent_at"])
        if back and back - ev["silent_at"] > 35:
            t = first(ev["name"], ev["silent_at"], ("unreachable",), back)
            if t:
                unreach.append(t - ev["silent_at"])
        if back:
            t = first(ev["name"], back, ("ok",))
            if t:
                recover.append(t - back)

    def fig(v):
        return {"n": len(v), "p50_s": round(pct(v, 50), 1) if v else None,
                "p99_s": round(pct(v, 99), 1) if v else None, "max_s": round(max(v), 1) if v else None}

    result = {
        "date": datetime.now().strftime("%Y-%m-%d"),
        "agents": len(agents), "minutes": args.minutes, "netns_cut": bool(use_ns),
        "faults": {k: sum(1 for e in events if e["kind"] == k) for k in ("kill", "stop", "cut")},
        "time_to_stale": fig(stale), "time_to_unreachable": fig(unreach), "time_to_recover": fig(recover),
        "rss_kib": rss, "stalls_or_exits": stalls,
    }
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    print(f"soak {result['date']}: {result['agents']} agents, {args.minutes} min, faults {result['faults']}")
    for k in ("time_to_stale", "time_to_unreachable", "time_to_recover"):
        print(f"  {k:20} {result[k]}")
    if rss:
        ex = [r[1] for r in rss if r[1]]
        tu = [r[2] for r in rss if r[2]]
        print(f"  export RSS MiB: first {ex[0] / 1024:.1f}, last {ex[-1] / 1024:.1f}, max {max(ex) / 1024:.1f}" if ex else "")
        if tu:
            print(f"  TUI RSS MiB:    first {tu[0] / 1024:.1f}, last {tu[-1] / 1024:.1f}, max {max(tu) / 1024:.1f}")
    print(f"  stalls or exits: {stalls or 'none'}")
    print(f"  (full figures: {args.out})")


if __name__ == "__main__":
    main()
