#!/usr/bin/env python3
"""deploy/soak.py: the demo tree under churn and hostile traffic for a long
time, every daemon's memory, threads and file descriptors sampled each
minute (run through deploy/soak.sh, which builds and sets up).

Every minute, one of (in turn):
  - a node killed (SIGKILL) and started again with the same flags;
  - a node told to leave (SIGTERM), then started again;
  - a node frozen (SIGSTOP) for 10 s;
and all the time, at a low rate: garbage and replayed datagrams on the probe
ports, Heartbeats and Joins without the tree's key (the tree runs with one),
WatchStatus streams opened and dropped, GetTopology from the master.
A cluster_monitor checks every node's bound against the master's time the
whole run (4 checks/s).

Samples go to WORK/samples.csv (minute,node,pid,rss_kb,threads,grpc_threads,
fds): `threads` are the daemon's own (named after the process), `grpc_threads`
gRPC's pools (sync server, event engine, timers, executors), which grow and
shrink with load on their own. At the end, for each daemon that ran the whole
time (the master and the nodes never restarted), the mean of the last third
of its samples against the middle third: RSS may not grow by more than
--max_rss_growth_kb (not judged under ASan, whose quarantine holds freed
memory), its own threads by more than 2 and file descriptors by more than 3,
each sustained (every sample of the last third above every sample of the
middle third); gRPC's threads may not pass --max_grpc_threads (their pools
are bounded; a stream that never ends pins threads until the bound). Prints
FIGURE lines and exits 1 when something is not flat or a bound was violated.

Usage: soak.py --bin_dir=DIR --cluster=deploy/local_cluster.sh --proto=FILE
               --work_dir=DIR [--minutes=60] [--nodes=13] [--base_port=31900]
"""

import argparse
import csv
import json
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time



def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--bin_dir", required=True)
    p.add_argument("--cluster", required=True)
    p.add_argument("--proto", required=True)
    p.add_argument("--work_dir", required=True)
    p.add_argument("--minutes", type=float, default=60)
    p.add_argument("--nodes", type=int, default=13)
    p.add_argument("--max_rss_growth_kb", type=int, default=4096)
    # 8-13 are seen on the demo tree under the hostile traffic; each of the
    # daemon's two gRPC servers may grow its pool to 64 (max_threads).
    p.add_argument("--max_grpc_threads", type=int, default=48)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--base_port", type=int, default=31900,
                   help="probes on base_port + i, gRPC on base_port + 100 + i")
    return p.parse_args()


ARGS = parse_args()
PORT = ARGS.base_port
WORK = ARGS.work_dir
T0 = time.time()
os.makedirs(WORK, exist_ok=True)
subprocess.run(["protoc", f"--proto_path={os.path.dirname(ARGS.proto)}",
                f"--python_out={WORK}", ARGS.proto], check=True)
sys.path.insert(0, WORK)
import grpc  # noqa: E402
import clocksync_pb2 as pb  # noqa: E402

rng = random.Random(ARGS.seed)


def log(*args):
    print(f"[soak {(time.time() - T0) / 60:6.2f} min]", *args, flush=True)


def read_pids():
    out = {}
    with open(os.path.join(WORK, "pids")) as f:
        for line in f:
            name, pid = line.split()
            out[name] = int(pid)
    return out


PIDS = {}
RESTARTED = set()


def cmdline(pid):
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        return [a.decode() for a in f.read().split(b"\0") if a]


def restart(name, argv):
    log_file = open(os.path.join(WORK, f"{name}.log"), "a")
    proc = subprocess.Popen(argv, stdout=log_file, stderr=subprocess.STDOUT,
                            start_new_session=True)
    PIDS[name] = proc.pid
    RESTARTED.add(name)
    return proc


CHILDREN = []  # Popen objects of restarted daemons (reaped at the end).


def churn(minute):
    nodes = sorted(n for n in PIDS if n != "master")
    name = nodes[rng.randrange(len(nodes))]
    pid = PIDS[name]
    action = ("kill", "leave", "freeze")[minute % 3]
    if action == "freeze":
        log(f"churn: {name} frozen for 10 s")
        os.kill(pid, signal.SIGSTOP)
        time.sleep(10)
        os.kill(pid, signal.SIGCONT)
        return
    argv = cmdline(pid)
    os.kill(pid, signal.SIGKILL if action == "kill" else signal.SIGTERM)
    deadline = time.time() + 15
    while time.time() < deadline and os.path.exists(f"/proc/{pid}"):
        try:
            # Reap it if it is our child; otherwise wait for it to vanish.
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                break
        except ChildProcessError:
            pass
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().split()[2] == "Z":
                    break
        except FileNotFoundError:
            break
        time.sleep(0.1)
    time.sleep(1)
    # A daemon this script restarted earlier is its child: reap it.
    for proc in CHILDREN:
        if proc.pid == pid:
            proc.wait(timeout=5)
    CHILDREN[:] = [p for p in CHILDREN if p.pid != pid]
    CHILDREN.append(restart(name, argv))
    log(f"churn: {name} {'killed' if action == 'kill' else 'left'} and restarted "
        f"(pid {PIDS[name]})")


STOP = threading.Event()
HOSTILE = {"datagrams": 0, "refused_rpcs": 0, "watches": 0, "topologies": 0}


def hostile():
    """Low-rate hostile traffic until STOP: about 20 actions a second."""
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    channel = grpc.insecure_channel(f"127.0.0.1:{PORT + 100}")

    def unary(method, req, resp):
        return channel.unary_unary(f"/clocksync.Clocksync/{method}",
                                   request_serializer=type(req).SerializeToString,
                                   response_deserializer=resp.FromString)

    watch = channel.unary_stream("/clocksync.Clocksync/WatchStatus",
                                 request_serializer=pb.WatchStatusRequest.SerializeToString,
                                 response_deserializer=pb.NodeStatus.FromString)
    while not STOP.is_set():
        kind = rng.randrange(10)
        try:
            if kind < 6:
                port = PORT + rng.randrange(ARGS.nodes)
                size = rng.choice([0, 1, 40, 96, 96, 200])
                data = bytes(rng.randrange(256) for _ in range(size))
                if size == 96 and rng.random() < 0.5:
                    data = b"CSPR\x02\x01" + data[6:]  # Looks like a request.
                udp.sendto(data, ("127.0.0.1", port))
                HOSTILE["datagrams"] += 1
            elif kind < 8:
                try:
                    unary("Heartbeat", pb.HeartbeatRequest(node_id="n1", subtree_size=2**40),
                          pb.HeartbeatResponse)(pb.HeartbeatRequest(
                              node_id="n1", subtree_size=2**40), timeout=1)
                except grpc.RpcError:
                    HOSTILE["refused_rpcs"] += 1
            elif kind == 8:
                stream = watch(pb.WatchStatusRequest(interval_ms=50), timeout=0.5)
                try:
                    for _ in stream:
                        pass
                except grpc.RpcError:
                    pass
                HOSTILE["watches"] += 1
            else:
                try:
                    unary("GetTopology", pb.GetTopologyRequest(), pb.Topology)(
                        pb.GetTopologyRequest(), timeout=5)
                except grpc.RpcError:
                    pass
                HOSTILE["topologies"] += 1
        except OSError:
            pass
        STOP.wait(0.05)
    channel.close()


def sample(minute, writer):
    for name, pid in sorted(PIDS.items()):
        try:
            with open(f"/proc/{pid}/status") as f:
                fields = dict(line.split(":", 1) for line in f if ":" in line)
            rss_kb = int(fields["VmRSS"].split()[0])
            fds = len(os.listdir(f"/proc/{pid}/fd"))
            with open(f"/proc/{pid}/comm") as f:
                own_name = f.read().strip()
            names = []
            for task in os.listdir(f"/proc/{pid}/task"):
                try:
                    with open(f"/proc/{pid}/task/{task}/comm") as f:
                        names.append(f.read().strip())
                except FileNotFoundError:
                    pass  # the thread ended between the listing and the read
        except (FileNotFoundError, ProcessLookupError, KeyError):
            continue
        threads = sum(1 for n in names if n == own_name)
        writer.writerow([minute, name, pid, rss_kb, threads, len(names) - threads, fds])


def main():
    subprocess.run([ARGS.cluster, "--no_build", f"--bin_dir={ARGS.bin_dir}",
                    f"--work_dir={WORK}", "--detach", f"--base_port={PORT}",
                    f"--nodes={ARGS.nodes}", "--max_children=3", "--auth"], check=True)
    PIDS.update(read_pids())
    with open(os.path.join(WORK, "monitor_flags")) as f:
        flags = f.read().split()
    seconds = int(ARGS.minutes * 60)
    time.sleep(10)  # Let the tree form before the monitor starts counting.
    monitor = subprocess.Popen(
        [os.path.join(ARGS.bin_dir, "tools/cluster_monitor/cluster_monitor"), *flags,
         f"--duration_s={seconds}", "--warmup_s=0", "--interval_s=0.25", "--json"],
        stdout=subprocess.PIPE, text=True)
    hostile_thread = threading.Thread(target=hostile, daemon=True)
    hostile_thread.start()
    samples_path = os.path.join(WORK, "samples.csv")
    with open(samples_path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["minute", "node", "pid", "rss_kb", "threads", "grpc_threads", "fds"])
        # A churn step a minute (at least two in a short run); samples every
        # minute, or every 10 s in runs under 10 minutes, so that a short
        # run has enough of them to tell a level from a trend.
        steps = max(2, int(round(ARGS.minutes)))
        step_s = seconds / steps
        sample_s = 60.0 if ARGS.minutes >= 10 else 10.0
        start = time.time()
        next_sample, next_churn, step = start, start + step_s, 1
        while True:
            now = time.time()
            if now >= next_sample:
                sample(round((now - start) / 60, 2), writer)
                f.flush()
                next_sample += sample_s
            if now >= start + seconds:
                break
            if now >= next_churn and step < steps:
                churn(step)
                step += 1
                next_churn += step_s
            time.sleep(max(0.0, min(next_sample, next_churn, start + seconds) - time.time()))
    STOP.set()
    hostile_thread.join()
    out, _ = monitor.communicate(timeout=120)
    violations = sum(n["bound_violations"] for n in json.loads(out)["nodes"])
    checks = sum(n["checks"] for n in json.loads(out)["nodes"])
    asan_pids = {}
    for name, pid in PIDS.items():
        try:
            with open(f"/proc/{pid}/maps") as f:
                asan_pids[name] = "libasan" in f.read()
        except OSError:
            pass
    for pid in PIDS.values():
        try:
            os.kill(pid, signal.SIGCONT)
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    for proc in CHILDREN:
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()

    # Flatness, per daemon that ran the whole time: the mean of the last
    # third of the samples against the mean of the middle third (the first
    # is warm-up: arenas, gRPC threads and connections settling), so a
    # level that wanders (gRPC's thread pool, connections to children that
    # come and go) passes and a trend does not. Under ASan the RSS includes
    # its quarantine of freed memory and is reported, not judged.
    rows = list(csv.DictReader(open(samples_path)))
    problems = []
    growth = {"rss_kb": 0, "threads": 0, "fds": 0}
    max_grpc_threads = 0
    limits = {"rss_kb": ARGS.max_rss_growth_kb, "threads": 2, "fds": 3}
    for name in sorted({r["node"] for r in rows} - RESTARTED):
        series = [r for r in rows if r["node"] == name]
        if len(series) < 3:
            continue
        third = max(1, len(series) // 3)
        middle = series[third:2 * third] or series[1:2]
        last = series[-third:]
        asan = asan_pids.get(name, False)
        most = max(int(r["grpc_threads"]) for r in series)
        max_grpc_threads = max(max_grpc_threads, most)
        if most > ARGS.max_grpc_threads:
            problems.append(f"{name}: {most} gRPC threads (more than {ARGS.max_grpc_threads})")
        for key in growth:
            mean = lambda rs: sum(int(r[key]) for r in rs) / len(rs)  # noqa: E731
            delta = mean(last) - mean(middle)
            growth[key] = max(growth[key], round(delta))
            if key == "rss_kb" and asan:
                continue
            # Threads and descriptors come in steps (gRPC's pool grows a
            # poller under a burst and keeps it a while): a rise counts only
            # when it is sustained, every sample of the last third above
            # every sample of the middle third.
            sustained = key == "rss_kb" or (
                min(int(r[key]) for r in last) > max(int(r[key]) for r in middle))
            if delta > limits[key] and sustained:
                problems.append(f"{name}: {key} {mean(middle):.0f} -> {mean(last):.0f} "
                                f"(first {series[0][key]}, last {series[-1][key]})")
    log(f"hostile traffic: {HOSTILE}")
    log(f"{checks} bound checks, {violations} violations; restarted: {sorted(RESTARTED)}")
    print(f"FIGURE soak_minutes {ARGS.minutes:g} min")
    print(f"FIGURE soak_bound_violations {violations} checks")
    print(f"FIGURE soak_max_rss_growth {growth['rss_kb']} kB"
          + (" (ASan: not judged)" if any(asan_pids.values()) else ""))
    print(f"FIGURE soak_max_thread_growth {growth['threads']} threads")
    print(f"FIGURE soak_max_fd_growth {growth['fds']} fds")
    print(f"FIGURE soak_max_grpc_threads {max_grpc_threads} threads")
    print(f"samples: {samples_path}")
    if violations:
        problems.append(f"{violations} bound violations")
    if problems:
        log("NOT FLAT:\n  " + "\n  ".join(problems))
        sys.exit(1)
    log("PASS: memory, threads and descriptors flat; bounds held")


if __name__ == "__main__":
    main()
