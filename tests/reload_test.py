#!/usr/bin/env python3
"""Integration test: reloading clocksyncd (SIGHUP, what systemctl reload
sends) changes the tree's probe key live, and a bad file changes nothing.

A keyed master m (--config with probe_key_file, a NOTIFY_SOCKET of the
test's own) and two static nodes probing it, pa with key A and pb with key
B, each with its own key file:
  1. m holds A: pa's probes are answered (it synchronizes), pb's are not
     (m counts them as bad_mac).
  2. m's key file now holds B; SIGHUP: RELOADING=1 then READY=1, and from
     then on pb's probes are answered and pa's are not. A node joining
     with key B is placed (its Join is checked against the new key).
  3. The file holds B then A (a key change under way): m accepts both and
     signs with B.
  4. A bad key file, then an invalid configuration file: each reload is
     refused with the reason in the log, READY=1 again, and m answers as
     before.
  5. A key that needs a restart (node_id) and a live one (log_interval):
     the log names the first as needing a restart and keeps it, applies
     the second.
  6. pa's key file now holds B; SIGHUP to pa: its probes are answered again.
Usage: reload_test.py BIN_DIR WORK_DIR
"""

import json
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time

BIN, WORK = sys.argv[1:3]
DAEMON = os.path.join(BIN, "clocksyncd/clocksyncd")
CTL = os.path.join(BIN, "tools/clocksyncctl/clocksyncctl")
PORT = 27000 + random.randrange(0, 400, 10)
KEY_A = "000102030405060708090a0b0c0d0e0f"
KEY_B = "f0e0d0c0b0a090807060504030201000"
M_PROBE, M_GRPC = PORT, PORT + 1
procs = {}


def log(*args):
    print(*args, flush=True)


def fail(message):
    log("FAILED: " + message)
    for name in sorted(os.listdir(WORK)):
        if name.endswith(".log"):
            log(f"--- {name}")
            with open(os.path.join(WORK, name)) as f:
                log(f.read()[-3000:])
    sys.exit(1)


def write(name, text, mode=0o600):
    path = os.path.join(WORK, name)
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, mode)
    return path


class NotifySocket:
    """A unix datagram socket standing in for systemd's."""

    def __init__(self):
        self.dir = f"/tmp/csr.{os.getpid()}"  # Short: socket paths are.
        os.makedirs(self.dir, exist_ok=True)
        self.path = os.path.join(self.dir, "notify")
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(self.path)
        self.sock.settimeout(0.1)
        self.messages = []
        self.lock = threading.Lock()
        self.stop = False
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        while not self.stop:
            try:
                data = self.sock.recv(4096).decode()
            except socket.timeout:
                continue
            with self.lock:
                self.messages.append(data)

    def count(self, prefix):
        with self.lock:
            return sum(1 for m in self.messages if m.startswith(prefix))

    def close(self):
        self.stop = True
        self.thread.join()
        self.sock.close()
        os.unlink(self.path)
        os.rmdir(self.dir)


def start(name, args, env_extra=None):
    env = {k: v for k, v in os.environ.items() if k not in ("NOTIFY_SOCKET", "WATCHDOG_USEC")}
    env.update(env_extra or {})
    out = open(os.path.join(WORK, f"{name}.log"), "w")
    procs[name] = subprocess.Popen([DAEMON] + args, stdout=out, stderr=subprocess.STDOUT,
                                   env=env)


def status(grpc_port):
    r = subprocess.run([CTL, f"--target=127.0.0.1:{grpc_port}", "status", "--json"],
                       capture_output=True, text=True, timeout=10)
    if r.returncode not in (0, 1):
        raise RuntimeError(f"clocksyncctl status on {grpc_port}: exit {r.returncode}: {r.stderr}")
    return json.loads(r.stdout)["status"]


def answered(grpc_port):
    return int(status(grpc_port).get("probes_answered", "0"))


def bad_macs():
    return int(status(M_GRPC).get("dropped_on_probe_port", {}).get("bad_mac", "0"))


def pa_refused():
    """Replies pa dropped for a bad MAC."""
    return int(status(PORT + 3).get("dropped_from_parent", {}).get("bad_mac", "0"))


def wait_for(what, check, timeout_s=15):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except RuntimeError:  # Not listening yet.
            pass
        time.sleep(0.2)
    fail(f"timed out waiting for {what}")


def growth(grpc_port, seconds=1.5):
    """Probes answered to the node in the next `seconds`."""
    before = answered(grpc_port)
    time.sleep(seconds)
    return answered(grpc_port) - before


def log_of(name):
    with open(os.path.join(WORK, f"{name}.log")) as f:
        return f.read()


def m_log():
    return log_of("m")


def reload_m(notify, expect_in_log):
    """SIGHUP to m; waits for RELOADING=1 and READY=1 and the log line."""
    reloading, ready = notify.count("RELOADING=1"), notify.count("READY=1")
    logged = len(m_log())
    procs["m"].send_signal(signal.SIGHUP)
    wait_for("RELOADING=1 and READY=1 from m",
             lambda: notify.count("RELOADING=1") > reloading and notify.count("READY=1") > ready)
    wait_for(f"'{expect_in_log}' in m's log", lambda: expect_in_log in m_log()[logged:], 5)
    time.sleep(0.3)  # Let requests of before the reload be answered or dropped.


def m_config(node_id="m", log_interval="1s", extra=""):
    return (f'master: true\nnode_id: "{node_id}"\nlisten: "127.0.0.1:{M_PROBE}"\n'
            f'grpc_listen: "127.0.0.1:{M_GRPC}"\nshm_path: "{WORK}/m.shm"\n'
            f'probe_key_file: "{WORK}/m.key"\nlog_interval: "{log_interval}"\n{extra}')


def node(name, port, key_file, extra=()):
    start(name, [f"--node_id={name}", f"--parent=127.0.0.1:{M_PROBE}",
                 f"--listen=127.0.0.1:{port}", f"--grpc_listen=127.0.0.1:{port + 1}",
                 f"--shm_path={WORK}/{name}.shm", f"--probe_key_file={WORK}/{key_file}",
                 "--probe_interval=50ms", *extra])


def main():
    write("m.key", KEY_A + "\n")
    write("pa.key", KEY_A + "\n")
    write("pb.key", KEY_B + "\n")
    config = write("m.conf", m_config(), 0o644)
    notify = NotifySocket()
    start("m", [f"--config={config}"], {"NOTIFY_SOCKET": notify.path})
    wait_for("m READY=1", lambda: notify.count("READY=1") >= 1)
    pa, pb = PORT + 2, PORT + 4
    node("pa", pa, "pa.key")
    node("pb", pb, "pb.key")

    # 1. Key A: pa answered, pb not.
    wait_for("pa synchronized", lambda: status(pa + 1).get("state") == "SYNC_STATE_SYNCED")
    wait_for("m counting pb's probes as bad_mac", lambda: bad_macs() > 5)
    a, b = growth(pa + 1), growth(pb + 1)
    log(f"1. m with key A: pa +{a} answered, pb +{b} (pb total {answered(pb + 1)})")
    if a == 0 or b != 0 or answered(pb + 1) != 0:
        fail(f"key A: pa +{a}, pb +{b} answered (want pa > 0, pb 0)")

    # 2. Key B, reloaded: pb answered, pa not; a node with B joins.
    write("m.key", KEY_B + "\n")
    reload_m(notify, "authenticated with the keys now in")
    wait_for("pb synchronized", lambda: status(pb + 1).get("state") == "SYNC_STATE_SYNCED")
    a, b = growth(pa + 1), growth(pb + 1)
    log(f"2. m reloaded with key B: pa +{a} answered, pb +{b}")
    if a != 0 or b == 0:
        fail(f"key B: pa +{a}, pb +{b} answered (want pa 0, pb > 0)")
    j = PORT + 6
    write("j.key", KEY_B + "\n")
    start("j", ["--node_id=j", f"--join=127.0.0.1:{M_GRPC}", f"--listen=127.0.0.1:{j}",
                f"--grpc_listen=127.0.0.1:{j + 1}", f"--shm_path={WORK}/j.shm",
                f"--probe_key_file={WORK}/j.key", "--probe_interval=50ms"])
    wait_for("j (key B) joined m and synchronized",
             lambda: status(j + 1).get("state") == "SYNC_STATE_SYNCED"
             and status(j + 1).get("depth") == 1)
    log("2. j joined with key B:", status(j + 1).get("parent"))

    # 3. B then A: both accepted, B signs (so pa, holding A only, drops
    # the replies to the requests m now accepts).
    write("m.key", f"{KEY_B}\n{KEY_A}\n")
    reload_m(notify, "(and a second key accepted)")
    refused_before, macs_before = pa_refused(), bad_macs()
    b = growth(pb + 1)
    refused, macs = pa_refused() - refused_before, bad_macs() - macs_before
    log(f"3. m with keys B, A: pb +{b} answered; m dropped +{macs} requests, "
        f"pa dropped +{refused} replies (signed with B)")
    if b == 0 or macs != 0 or refused == 0:
        fail(f"keys B and A: pb +{b} answered, m +{macs} bad_mac, pa +{refused} bad_mac "
             "(want pb > 0, m 0, pa > 0)")
    write("m.key", KEY_B + "\n")
    reload_m(notify, "reload: done")
    time.sleep(0.5)

    # 4. A bad key file, an invalid configuration: refused, nothing changes.
    write("m.key", "not a key\n")
    reload_m(notify, f"reload refused, running on as before: bad config {config}:6: probe_key_file")
    a, b = growth(pa + 1), growth(pb + 1)
    log(f"4. bad key file refused: pa +{a} answered, pb +{b}")
    if a != 0 or b == 0:
        fail(f"after a bad key file: pa +{a}, pb +{b} answered (want pa 0, pb > 0)")
    write("m.key", KEY_A + "\n")  # Valid, but the configuration is not:
    write("m.conf", m_config(extra='probe_interval: "0s"\n'), 0o644)
    reload_m(notify, f"reload refused, running on as before: bad config {config}:8: probe_interval")
    a, b = growth(pa + 1), growth(pb + 1)
    log(f"4. bad configuration refused: pa +{a} answered, pb +{b}")
    if a != 0 or b == 0:
        fail(f"after a bad configuration: pa +{a}, pb +{b} answered (want pa 0, pb > 0)")
    write("m.key", KEY_B + "\n")

    # 5. A restart key and a live key.
    write("m.conf", m_config(node_id="m2", log_interval="2s"), 0o644)
    reload_m(notify, "reload: done")
    text = m_log()
    for line in ['node_id changed ("m" -> "m2"): needs a restart, keeping "m"',
                 'log_interval changed ("1s" -> "2s"): applied']:
        if line not in text:
            fail(f"m's log lacks: {line}")
    if status(M_GRPC).get("node_id") != "m":
        fail("node_id changed without a restart")
    if growth(pb + 1) == 0:
        fail("pb no longer answered after the last reload")
    log("5. restart and live keys told apart; m still runs as m")

    # 6. The child's side: pa reloads key B and is answered again.
    write("pa.key", KEY_B + "\n")
    procs["pa"].send_signal(signal.SIGHUP)
    wait_for("pa's reload", lambda: "authenticated with the keys now in" in log_of("pa"))
    time.sleep(0.3)
    a = growth(pa + 1)
    log(f"6. pa reloaded with key B: pa +{a} answered")
    if a == 0:
        fail("pa not answered after reloading key B")
    for p in procs.values():
        p.terminate()
    for p in procs.values():
        try:
            p.wait(timeout=15)
        except subprocess.TimeoutExpired:
            p.kill()
    notify.close()
    log("PASS")


try:
    main()
finally:
    for proc in procs.values():
        if proc.poll() is None:
            proc.kill()
