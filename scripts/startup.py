#!/usr/bin/env python3
"""How fast `fleetop demo` is on screen: time to the first frame and until
every node has data, measured in a real terminal (tmux), plus the worst
false alarms seen on the way (nodes shown stale or unreachable while the
fleet was still connecting).

    scripts/startup.py [--nodes 1024] [--runs 3] [--bin target/release/fleetop]

Prints one line per run and the median. A figure, not a test: it depends on
the machine (record the machine and date with it in docs/PERFORMANCE.md).
"""
import argparse
import os
import re
import statistics
import subprocess
import time


def tmux(*args):
    return subprocess.run(["tmux", *args], capture_output=True, text=True).stdout


def cpu_seconds(session):
    """CPU time (user + system) the console has used so far: the figure a
    busy machine does not inflate the way it inflates wall time."""
    pid = tmux("display-message", "-p", "-t", session, "#{pane_pid}").strip()
    try:
        fields = open(f"/proc/{pid}/stat").read().rsplit(") ", 1)[1].split()
        ticks = os.sysconf("SC_CLK_TCK")
        return (int(fields[11]) + int(fields[12])) / ticks
    except (OSError, IndexError, ValueError):
        return None


def run_once(binary, nodes, timeout):
    # STARTUP_ENV="VAR=value ...": environment for the console (allocator knobs, logs).
    extra_env = os.environ.get("STARTUP_ENV", "")
    session = f"fleetop-startup-{time.monotonic_ns()}"
    # The demo's one hung agent ("sim:hang") never fills: every other node must.
    want = nodes - 1
    t0 = time.monotonic()
    tmux("new-session", "-d", "-s", session, "-x", "200", "-y", "50", f"exec env {extra_env} {binary} demo --nodes {nodes}")
    first = filled = cpu = None
    worst_alarm = 0
    try:
        while time.monotonic() - t0 < timeout:
            screen = tmux("capture-pane", "-p", "-t", session)
            now = time.monotonic() - t0
            header = next((l for l in screen.splitlines() if "fleetop" in l and "nodes" in l), "")
            if header and first is None:
                first = now
            ok = re.search(r"(\d+) ok", header)
            alarms = sum(int(m) for m in re.findall(r"(\d+) (?:stale|unreachable)", header))
            worst_alarm = max(worst_alarm, alarms)
            if ok and int(ok.group(1)) >= want:
                filled = now
                cpu = cpu_seconds(session)
                break
            time.sleep(0.05)
    finally:
        tmux("kill-session", "-t", session)
    return first, filled, worst_alarm, cpu


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=1024)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--bin", default="target/release/fleetop")
    ap.add_argument("--timeout", type=float, default=60.0)
    a = ap.parse_args()
    firsts, fills = [], []
    for i in range(a.runs):
        first, filled, alarm, cpu = run_once(a.bin, a.nodes, a.timeout)
        fmt = lambda v: "never" if v is None else f"{v:.2f} s"
        print(f"run {i + 1}: first frame {fmt(first)}, all nodes filled {fmt(filled)}, "
              f"console CPU by then {fmt(cpu)}, most nodes shown stale/unreachable on the way: {alarm}")
        if first is not None:
            firsts.append(first)
        if filled is not None:
            fills.append(filled)
        time.sleep(1)
    if firsts and fills:
        print(f"median over {a.runs} runs, {a.nodes} nodes: first frame {statistics.median(firsts):.2f} s, "
              f"filled {statistics.median(fills):.2f} s")


if __name__ == "__main__":
    main()
