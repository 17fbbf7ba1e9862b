#!/usr/bin/env python3
"""Integration test: clocksyncd talking to systemd (sd_notify), with a
NOTIFY_SOCKET the test owns in place of systemd's.

A master and two nodes on loopback:
  1. node n1 (probe_interval 10ms, WATCHDOG_USEC=1s) says READY=1, pings
     WATCHDOG=1 at most 500 ms apart (half the watchdog), and its STATUS=
     reaches "synchronized, bound ..., parent m (ADDRESS), depth 1"; a few
     STATUS= messages, not one per probe (it probes 100 times a second).
  2. n1's sync loop is stuck (its --sample_log is a FIFO the test stops
     reading: the loop blocks in the write, as on a hung disk): no
     WATCHDOG=1 for 3 s although the process lives and its gRPC service
     still answers; so systemd would restart it. Read again: pings resume.
  3. node n2 probes once a minute (probe_interval 60s, WATCHDOG_USEC=0.4s):
     its loop still pings at most 200 ms apart.
Usage: service_notify_test.py BIN_DIR WORK_DIR
"""

import fcntl
import json
import os
import random
import socket
import subprocess
import sys
import threading
import time

BIN, WORK = sys.argv[1:3]
DAEMON = os.path.join(BIN, "clocksyncd/clocksyncd")
CTL = os.path.join(BIN, "tools/clocksyncctl/clocksyncctl")
PORT = 27700 + random.randrange(0, 400, 10)
procs = []


def log(*args):
    print(*args, flush=True)


def fail(message):
    log("FAILED: " + message)
    for name in os.listdir(WORK):
        if name.endswith(".log"):
            log(f"--- {name}")
            with open(os.path.join(WORK, name)) as f:
                log(f.read()[-4000:])
    sys.exit(1)


class NotifySocket:
    """A unix datagram socket standing in for systemd's; keeps what arrives
    with its arrival time (monotonic)."""

    def __init__(self, name):
        # Socket paths are short (108 bytes): not under Bazel's TEST_TMPDIR.
        self.dir = f"/tmp/csn.{os.getpid()}.{name}"
        os.makedirs(self.dir, exist_ok=True)
        self.path = os.path.join(self.dir, "notify")
        if os.path.exists(self.path):
            os.unlink(self.path)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(self.path)
        self.sock.settimeout(0.1)
        self.messages = []  # (time, text)
        self.lock = threading.Lock()
        self.stop = False
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        while not self.stop:
            try:
                data = self.sock.recv(4096)
            except socket.timeout:
                continue
            with self.lock:
                self.messages.append((time.monotonic(), data.decode()))

    def since(self, t0, prefix=""):
        with self.lock:
            return [(t, m) for t, m in self.messages if t >= t0 and m.startswith(prefix)]

    def close(self):
        self.stop = True
        self.thread.join()
        self.sock.close()
        os.unlink(self.path)
        os.rmdir(self.dir)


class FifoReader:
    """Reads a FIFO (the daemon's --sample_log) while `reading` is set."""

    def __init__(self, path):
        os.mkfifo(path)
        # Opened first (non-blocking), so that the daemon's open does not wait.
        self.fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        # The smallest pipe: it fills after a few dozen samples.
        fcntl.fcntl(self.fd, fcntl.F_SETPIPE_SZ, 4096)
        self.reading = threading.Event()
        self.reading.set()
        self.stop = False
        self.bytes = 0
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        while not self.stop:
            if not self.reading.is_set():
                time.sleep(0.02)
                continue
            try:
                chunk = os.read(self.fd, 65536)
                self.bytes += len(chunk)
                if not chunk:
                    time.sleep(0.01)
            except BlockingIOError:
                time.sleep(0.01)


def start(name, args, env_extra=None):
    env = dict(os.environ)
    env.pop("NOTIFY_SOCKET", None)
    env.pop("WATCHDOG_USEC", None)
    env.update(env_extra or {})
    out = open(os.path.join(WORK, f"{name}.log"), "w")
    p = subprocess.Popen([DAEMON] + args, stdout=out, stderr=subprocess.STDOUT, env=env)
    procs.append(p)
    return p


def status(grpc_port):
    r = subprocess.run([CTL, f"--target=127.0.0.1:{grpc_port}", "status", "--json"],
                       capture_output=True, text=True, timeout=10)
    if r.returncode not in (0, 1):
        raise RuntimeError(f"clocksyncctl status: exit {r.returncode}: {r.stderr}")
    return json.loads(r.stdout)["status"]


def max_gap(times, until):
    gaps = [b - a for a, b in zip(times, times[1:])]
    if times:
        gaps.append(until - times[-1])
    return max(gaps) if gaps else float("inf")


def main():
    master_probe, master_grpc = PORT, PORT + 1
    start("m", ["--master", "--node_id=m", f"--listen=127.0.0.1:{master_probe}",
                f"--grpc_listen=127.0.0.1:{master_grpc}", f"--shm_path={WORK}/m.shm"])
    n1_notify = NotifySocket("n1")
    fifo = FifoReader(os.path.join(WORK, "n1.samples"))
    t_start = time.monotonic()
    n1 = start("n1", ["--node_id=n1", f"--join=127.0.0.1:{master_grpc}",
                      f"--listen=127.0.0.1:{PORT + 2}", f"--grpc_listen=127.0.0.1:{PORT + 3}",
                      f"--shm_path={WORK}/n1.shm", "--probe_interval=10ms",
                      f"--sample_log={WORK}/n1.samples"],
               {"NOTIFY_SOCKET": n1_notify.path, "WATCHDOG_USEC": "1000000"})
    n2_notify = NotifySocket("n2")
    start("n2", ["--node_id=n2", f"--join=127.0.0.1:{master_grpc}",
                 f"--listen=127.0.0.1:{PORT + 4}", f"--grpc_listen=127.0.0.1:{PORT + 5}",
                 f"--shm_path={WORK}/n2.shm", "--probe_interval=60s", "--holdover_after=120s"],
          {"NOTIFY_SOCKET": n2_notify.path, "WATCHDOG_USEC": "400000"})

    # 1. Ready, regular pings, the status line once synchronized.
    want = f"synchronized, bound "
    parent = f"parent m (127.0.0.1:{master_probe}), depth 1"
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        statuses = [m for _, m in n1_notify.since(t_start, "STATUS=")]
        if any(m.startswith("STATUS=" + want) and m.endswith(parent) for m in statuses):
            break
        time.sleep(0.2)
    else:
        fail(f"n1 never said STATUS={want}...{parent}; got {n1_notify.since(t_start, 'STATUS=')}")
    if not n1_notify.since(t_start, "READY=1"):
        fail("n1 never said READY=1")
    log("n1:", [m for _, m in n1_notify.since(t_start, "STATUS=")][-1])
    t1 = time.monotonic()
    time.sleep(4)
    t2 = time.monotonic()
    pings = [t for t, _ in n1_notify.since(t1, "WATCHDOG=1") if t < t2]
    gap = max_gap(pings, t2)
    log(f"n1: {len(pings)} pings in 4 s, largest gap {gap * 1000:.0f} ms")
    if len(pings) < 8 or gap > 0.5:
        fail(f"n1: {len(pings)} pings in 4 s, largest gap {gap:.3f} s (want <= 0.5 s)")
    statuses = n1_notify.since(t1, "STATUS=")
    probes = status(PORT + 3)["probes_answered"]
    log(f"n1: {len(statuses)} STATUS= in 4 s ({probes} probes answered so far)")
    if len(statuses) > 3:
        fail(f"n1: {len(statuses)} STATUS= messages in 4 s: not 'on change or every 5 s'")

    # 2. The loop hangs in a write: no pings, though the process serves on.
    fifo.reading.clear()
    time.sleep(1.5)  # The pipe fills within a fraction of a second.
    t3 = time.monotonic()
    time.sleep(3)
    t4 = time.monotonic()
    during = n1_notify.since(t3, "WATCHDOG=1")
    if n1.poll() is not None:
        fail(f"n1 exited ({n1.returncode}) while its loop was stuck")
    try:
        answered = status(PORT + 3)
    except Exception as e:  # noqa: BLE001
        fail(f"n1's gRPC service did not answer while its loop was stuck: {e}")
    log(f"n1 stuck: {len(during)} pings in 3 s, gRPC still answers "
        f"(node {answered['node_id']})")
    if during:
        fail(f"n1 pinged {len(during)} times while its sync loop was stuck")
    fifo.reading.set()
    time.sleep(1)
    after = n1_notify.since(t4, "WATCHDOG=1")
    log(f"n1 unstuck: {len(after)} pings in the next second")
    if not after:
        fail("n1 did not ping again once its loop could go on")

    # 3. A node probing once a minute still pings at most 200 ms apart.
    t5 = time.monotonic()
    time.sleep(2)
    t6 = time.monotonic()
    pings = [t for t, _ in n2_notify.since(t5, "WATCHDOG=1") if t < t6]
    gap = max_gap(pings, t6)
    log(f"n2 (probe_interval 60s): {len(pings)} pings in 2 s, largest gap {gap * 1000:.0f} ms")
    if gap > 0.2:
        fail(f"n2: largest gap between pings {gap:.3f} s (want <= 0.2 s)")
    log("n2:", [m for _, m in n2_notify.since(0, "STATUS=")][-1:])

    for p in procs:
        p.terminate()
    for p in procs:
        try:
            p.wait(timeout=15)
        except subprocess.TimeoutExpired:
            p.kill()
    stopping = n1_notify.since(t_start, "STOPPING=1")
    if len(stopping) != 1:
        fail(f"n1 said STOPPING=1 {len(stopping)} times (want once)")
    fifo.stop = True
    n1_notify.close()
    n2_notify.close()
    log("PASS")


try:
    main()
finally:
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
