#!/usr/bin/env python3
"""One console against N simulated agents: the figures of issue 22's table.

    cargo build --release --workspace
    python3 scripts/scale.py --nodes 1024 [--gpus 8] [--window 60] [--bin target/release]

What it does:
  - starts `fleetop-agent swarm --count N` (simulated H100 nodes, 8 GPUs,
    1 Hz, plaintext on loopback) and waits for its hostfile; as several
    swarm processes of at most --per-swarm agents where N is larger (each
    agent holds two open files, and a process may hold 20,000 here);
  - starts the console (`fleetop --hostfile ...`) in tmux at 200x50;
  - times the first frame and the moment every node is shown ok;
  - after a warm-up, over a window of --window seconds: the console's CPU
    (user + system, from /proc) and its RSS, the swarm's CPU too (a swarm
    at 100% of a core is the agents falling behind, not the console), the
    swarm's protobuf bytes (SIGUSR1 makes it print its totals) and, from
    the kernel's per-socket counters, nothing else: the bytes figure is the
    payload the agents sent, divided by the GPU-samples they took;
  - reads the console's header every second: the most nodes it ever showed
    stale, unreachable or connecting once all had been shown (false alarms:
    every agent here is healthy), and whether it said it was behind;
  - counts every stale and unreachable flag the console raised, from its
    timeline (its own state directory), until all were shown, in the
    warm-up and in the window;
  - ends the console, and waits for it, before the agents.

Prints one line per figure and a Markdown table row for docs/PERFORMANCE.md.
A figure, never a test: it depends on the machine (write the machine and the
date beside it).
"""
import argparse
import http.server
import json
import os
import re
import resource
import signal
import subprocess
import sys
import tempfile
import threading
import time


def tmux(*args):
    return subprocess.run(["tmux", *args], capture_output=True, text=True).stdout


def cpu_seconds(pid):
    try:
        fields = open(f"/proc/{pid}/stat").read().rsplit(") ", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def rss_mib(pid):
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def swarm_totals(swarms):
    """SIGUSR1, then the last totals line each swarm printed, summed."""
    for proc, _ in swarms:
        proc.send_signal(signal.SIGUSR1)
    time.sleep(0.5)
    total = {}
    for _, log_path in swarms:
        lines = [l for l in open(log_path).read().splitlines() if l.startswith("swarm:")]
        if not lines:
            return None
        for k, v in (kv.split("=") for kv in lines[-1].split()[1:]):
            total[k] = total.get(k, 0) + int(v)
    return total


def swarms_cpu(swarms):
    each = [cpu_seconds(p.pid) for p, _ in swarms]
    return None if None in each else sum(each)


def socket_bytes_sent(ports):
    """What the agents' TCP sockets have sent (`ss -ti`'s bytes_sent: the
    HTTP/2 and gRPC framing included, the TCP/IP headers not). An agent's
    accepted connections have its listening port as their local port; by
    port, not `ss -p`, whose walk of every process's open files takes the
    busy box's CPU for seconds and made agents late."""
    out = subprocess.run(["ss", "-tinH", "state", "established"], capture_output=True, text=True).stdout
    total, mine = 0, False
    for line in out.splitlines():
        if not line.startswith((" ", "\t")):
            fields = line.split()
            local = fields[2] if len(fields) > 2 else ""
            mine = local.rsplit(":", 1)[-1] in ports
            continue
        m = re.search(r"bytes_sent:(\d+)", line)
        if mine and m:
            total += int(m.group(1))
    return total


def timeline_flags(path, kinds=("stale", "unreachable")):
    """The times (ms since the epoch) of the flags of `kinds` the console
    raised, from its timeline."""
    times = []
    try:
        for line in open(path):
            event = json.loads(line)
            raised = event.get("what", {}).get("flag_raised")
            if raised and raised.get("kind") in kinds:
                times.append(event["time_ms"])
    except (OSError, ValueError):
        pass
    return times


def header(session):
    """The header's two lines as one: the counts, then `console behind`
    and the flags."""
    lines = tmux("capture-pane", "-p", "-t", session).splitlines()
    at = next((i for i, l in enumerate(lines) if "fleetop" in l and "nodes" in l), None)
    return "" if at is None else " ".join(lines[at:at + 2])


def count(words, text):
    return sum(int(m) for m in re.findall(r"(\d+) (?:%s)" % "|".join(words), text))


def export_once(console, hostfile, a):
    """`fleetop export --once` after the warm-up: wall time, CPU, peak RSS,
    and how many nodes the snapshot holds with a sample."""
    time.sleep(a.warmup)
    out = tempfile.NamedTemporaryFile(prefix="fleetop-export-", suffix=".json", delete=False)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.monotonic()
    extra = ["--backfill", a.backfill] if a.backfill else []
    # Its debug log says where the time went: connecting, histories, writing.
    log = tempfile.NamedTemporaryFile(prefix="fleetop-export-", suffix=".log", delete=False)
    rc = subprocess.run([console, "export", "--hostfile", hostfile, "--once", "--timeout", "60s", *extra],
                        stdout=out, stderr=log,
                        env={**os.environ, "XDG_CONFIG_HOME": "/nonexistent", "FLEETOP_LOG": "fleetop::session=debug,fleetop::cmd::export=debug"}).returncode
    wall = time.monotonic() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    doc = json.load(open(out.name))
    nodes = doc.get("nodes", [])
    sampled = sum(1 for n in nodes if n.get("gpus"))
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    size = os.path.getsize(out.name)
    os.unlink(out.name)
    for line in open(log.name):
        if "settl" in line or "snapshot written" in line:
            print("  " + line.strip())
    os.unlink(log.name)
    print(f"export --once{' --backfill ' + a.backfill if a.backfill else ''}: exit {rc}, {wall:.1f} s wall, {cpu:.1f} s CPU, peak RSS {after.ru_maxrss / 1024:.0f} MiB, "
          f"{len(nodes)} nodes ({sampled} with GPUs), {size / 1e6:.1f} MB of JSON")


def watch(console, hostfile, swarms, a):
    """`fleetop watch` posting to a local webhook: its CPU and RSS over the
    window after the warm-up, and the alerts it posted."""
    posted = []

    class Hook(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            posted.append(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hook)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    proc = subprocess.Popen([console, "watch", "--hostfile", hostfile,
                             "--webhook", f"http://127.0.0.1:{server.server_port}/"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, "XDG_CONFIG_HOME": "/nonexistent"})
    try:
        time.sleep(a.warmup)
        c0, n0 = cpu_seconds(proc.pid), len(posted)
        t = time.monotonic()
        rss = []
        while time.monotonic() - t < a.window:
            rss.append(rss_mib(proc.pid) or 0)
            time.sleep(1)
        c1 = cpu_seconds(proc.pid)
        pct = (c1 - c0) / (time.monotonic() - t) * 100
        print(f"watch: {pct:.1f}% of one core, RSS {max(rss):.0f} MiB, "
              f"{len(posted)} webhook posts ({len(posted) - n0} in the window)")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        server.shutdown()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=1024)
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument("--window", type=float, default=60.0, help="seconds measured, after the warm-up")
    ap.add_argument("--warmup", type=float, default=20.0, help="seconds after every node is shown")
    ap.add_argument("--timeout", type=float, default=180.0, help="for every node to be shown")
    ap.add_argument("--bin", default="target/release")
    ap.add_argument("--per-swarm", type=int, default=8000, help="agents in one swarm process at most")
    ap.add_argument("--mode", choices=["tui", "export", "watch"], default="tui",
                    help="the console in tmux; one `export --once` after the warm-up; or `watch` over the window")
    ap.add_argument("--backfill", help="export: its --backfill (default: all the agents hold)")
    ap.add_argument("--history", type=float, default=0,
                    help="seconds the agents run before the console starts: the history it is sent first")
    a = ap.parse_args()

    tmp = tempfile.mkdtemp(prefix="fleetop-scale-")
    hostfile = os.path.join(tmp, "hosts")
    swarms, counts = [], []
    parts = -(-a.nodes // a.per_swarm)
    session = f"fleetop-scale-{os.getpid()}"
    try:
        t = time.monotonic()
        for i in range(parts):
            first = 1 + i * a.nodes // parts
            size = (i + 1) * a.nodes // parts - i * a.nodes // parts
            counts.append(size)
            log = os.path.join(tmp, f"swarm{i}.log")
            proc = subprocess.Popen(
                [os.path.join(a.bin, "fleetop-agent"), "swarm", "--count", str(size), "--first", str(first),
                 "--hostfile", f"{hostfile}.{i}", "--backend", "sim", "--sim-gpus", str(a.gpus),
                 "--interval", "1s"],
                stdout=subprocess.DEVNULL, stderr=open(log, "w"), env={**os.environ, "FLEETOP_LOG": "warn"})
            swarms.append((proc, log))
        for i, (proc, log) in enumerate(swarms):
            # Whole once it has every agent's line.
            while not os.path.exists(f"{hostfile}.{i}") or \
                    len(open(f"{hostfile}.{i}").read().splitlines()) < counts[i]:
                if proc.poll() is not None:
                    sys.exit(f"a swarm ended: {open(log).read()[-2000:]}")
                if time.monotonic() - t > a.timeout:
                    sys.exit("a swarm did not write its hostfile")
                time.sleep(0.2)
        with open(hostfile, "w") as out:
            for i in range(parts):
                out.write(open(f"{hostfile}.{i}").read())
        print(f"swarm: {a.nodes} agents up in {time.monotonic() - t:.1f} s ({parts} processes)")
        time.sleep(a.history)

        console = os.path.join(a.bin, "fleetop")
        if a.mode == "export":
            return export_once(console, hostfile, a)
        if a.mode == "watch":
            return watch(console, hostfile, swarms, a)
        # Its own state directory: the timeline then holds this run's flags only.
        timeline = os.path.join(tmp, "state", "fleetop", "timeline.jsonl")
        t0, wall0 = time.monotonic(), time.time() * 1000
        tmux("new-session", "-d", "-s", session, "-x", "200", "-y", "50",
             f"exec env XDG_CONFIG_HOME=/nonexistent XDG_STATE_HOME={tmp}/state {console} --hostfile {hostfile}")
        pid = tmux("display-message", "-p", "-t", session, "#{pane_pid}").strip()
        first = shown = None
        # While nodes are still connecting, stale and unreachable are false
        # alarms all the same.
        start_alarm, start_behind = 0, ""
        while time.monotonic() - t0 < a.timeout:
            h = header(session)
            now = time.monotonic() - t0
            if h and first is None:
                first = now
            start_alarm = max(start_alarm, count(["stale", "unreachable"], h))
            m = re.search(r"behind (\S+)", h)
            if m:
                start_behind = m.group(1)
            ok = re.search(r"(\d+) ok", h)
            if ok and int(ok.group(1)) >= a.nodes:
                shown = now
                break
            time.sleep(0.1)
        fmt = lambda v: "never" if v is None else f"{v:.1f} s"
        print(f"console: first frame {fmt(first)}, every node shown ok {fmt(shown)}")
        if shown is None:
            print(f"header at the end: {header(session)}")
        print(f"until then: most nodes shown stale/unreachable {start_alarm}, "
              f"behind {start_behind or 'never said'}")

        shown_wall = time.time() * 1000
        time.sleep(a.warmup)
        ports = {line.rsplit(":", 1)[-1] for line in open(hostfile).read().split()}
        c0, s0 = cpu_seconds(pid), swarms_cpu(swarms)
        b0 = swarm_totals(swarms)
        k0 = socket_bytes_sent(ports)
        w0, window_wall = time.monotonic(), time.time() * 1000
        worst_alarm, worst_behind, rss = 0, "", []
        while time.monotonic() - w0 < a.window:
            h = header(session)
            worst_alarm = max(worst_alarm, count(["stale", "unreachable", "conn"], h))
            m = re.search(r"behind (\S+)", h)
            if m:
                worst_behind = m.group(1)
            r = rss_mib(pid)
            if r:
                rss.append(r)
            time.sleep(1)
        elapsed = time.monotonic() - w0
        c1, s1 = cpu_seconds(pid), swarms_cpu(swarms)
        b1 = swarm_totals(swarms)
        k1 = socket_bytes_sent(ports)
        end_wall = time.time() * 1000

        console_pct = (c1 - c0) / elapsed * 100 if c0 is not None and c1 is not None else None
        swarm_pct = (s1 - s0) / elapsed * 100 if s0 is not None and s1 is not None else None
        bytes_per = ms_per = wire_per = None
        if b0 and b1:
            gpu_samples = b1["gpu_samples"] - b0["gpu_samples"]
            sent = b1["protobuf_bytes_sent"] - b0["protobuf_bytes_sent"]
            node_samples = b1["samples"] - b0["samples"]
            if gpu_samples:
                bytes_per = sent / gpu_samples
                wire_per = (k1 - k0) / gpu_samples
            if node_samples and console_pct is not None:
                ms_per = (c1 - c0) * 1000 / node_samples
        top_rss = max(rss) if rss else None
        print(f"console CPU: {console_pct:.1f}% of one core" if console_pct is not None else "console CPU: ?")
        print(f"swarm CPU: {swarm_pct:.1f}% of one core" if swarm_pct is not None else "swarm CPU: ?")
        print(f"console RSS: {top_rss:.0f} MiB ({top_rss * 1024 / a.nodes:.0f} KiB a node)" if top_rss else "RSS: ?")
        print(f"console CPU per node-sample: {ms_per:.3f} ms" if ms_per else "CPU per node-sample: ?")
        print(f"protobuf bytes per GPU-sample: {bytes_per:.0f} B" if bytes_per else "bytes: ?")
        print(f"TCP payload per GPU-sample (HTTP/2, gRPC framing): {wire_per:.0f} B" if wire_per else "TCP: ?")
        print(f"false alarms (most nodes shown stale/unreachable/connecting): {worst_alarm}")
        print(f"behind: {worst_behind or 'never said'}")
        # Every flag, not only those a header read once a second caught.
        flags = [t for t in timeline_flags(timeline) if t <= end_wall]
        parts_of_run = [("until all shown", wall0, shown_wall),
                        ("warm-up", shown_wall, window_wall), ("window", window_wall, end_wall)]
        print("stale/unreachable flags raised (timeline): " + ", ".join(
            f"{name} {sum(1 for t in flags if lo <= t < hi)}" for name, lo, hi in parts_of_run))
        cell = lambda v, f: "?" if v is None else f.format(v)
        print("| nodes | console CPU | RSS | CPU per node-sample | bytes per GPU-sample (protobuf / TCP payload) "
              "| first frame | all shown | false alarms | swarm CPU |")
        print(f"| {a.nodes:,} | {cell(console_pct, '{:.1f}%')} | {cell(top_rss, '{:.0f} MiB')} | "
              f"{cell(ms_per, '{:.3f} ms')} | {cell(bytes_per, '{:.0f}')} / {cell(wire_per, '{:.0f} B')} | "
              f"{cell(first, '{:.1f} s')} | "
              f"{cell(shown, '{:.1f} s')} | {worst_alarm} | {cell(swarm_pct, '{:.0f}%')} |")
    finally:
        # The console ends first, and is waited for: agents gone before it
        # would be flagged stale by it in its last seconds.
        console_pid = tmux("display-message", "-p", "-t", session, "#{pane_pid}").strip()
        tmux("kill-session", "-t", session)
        deadline = time.monotonic() + 15
        while console_pid and os.path.exists(f"/proc/{console_pid}") and time.monotonic() < deadline:
            time.sleep(0.1)
        for proc, _ in swarms:
            proc.send_signal(signal.SIGTERM)
        for proc, _ in swarms:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()


if __name__ == "__main__":
    main()
