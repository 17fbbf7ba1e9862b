#!/usr/bin/env python3
"""Integration test: clocksyncd --metrics_listen, scraped as Prometheus does.

A master and a node (joined to it) on loopback, each serving GET /metrics.
  1. The node synchronizes; both answer 200 with the exposition format's
     Content-Type, their own node label, and a body `promtool check metrics`
     finds nothing to lint in.
  2. The node's page has the same series as `clocksyncctl metrics` asking
     the node over gRPC (one definition of the metrics, metrics/exposition).
  3. HEAD: the headers without a body; / is 404; POST is 405 with Allow.
  4. Hostile clients (slow heads, silent connections, garbage, a megabyte
     without a line end, 50 bad requests) do not keep a scrape waiting,
     are cut off at the read timeout (408), are logged once, and the node
     stays synchronized.
  5. SIGTERM: the daemon exits 0 and the port is closed.
Usage: metrics_endpoint_test.py RUNFILES_ROOT WORK_DIR
"""

import os
import random
import re
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

ROOT, WORK = sys.argv[1:3]
DAEMON = os.path.join(ROOT, "clocksyncd/clocksyncd")
CTL = os.path.join(ROOT, "tools/clocksyncctl/clocksyncctl")
PORT = 26300 + random.randrange(0, 400, 10)
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
SAMPLE = re.compile(r'^([a-z_]+)\{([^}]*)\} (\S+)$')


def log(*args):
    print(*args, flush=True)


def fail(message):
    log("FAILED: " + message)
    for name in ("m", "n1"):
        path = os.path.join(WORK, name + ".log")
        if os.path.exists(path):
            log(f"--- {name}.log:\n" + open(path).read())
    sys.exit(1)


def start(name, *args):
    out = open(os.path.join(WORK, name + ".log"), "w")
    proc = subprocess.Popen([DAEMON, f"--node_id={name}", f"--shm_path={WORK}/{name}.shm",
                             "--probe_interval=20ms", *args],
                            stdout=out, stderr=subprocess.STDOUT)
    with open(os.path.join(WORK, "pids"), "a") as f:
        f.write(f"{proc.pid}\n")
    return proc


def fetch(address, method="GET", path="/metrics"):
    """(status, headers, body) of one request."""
    request = urllib.request.Request(f"http://{address}{path}", method=method)
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, response.headers, response.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read().decode()


def samples(text):
    """{(name, labels): value} of an exposition text."""
    out = {}
    for line in text.splitlines():
        if line.startswith("#") or not line:
            continue
        m = SAMPLE.match(line)
        if not m:
            fail(f"not a sample line: {line!r}")
        out[(m.group(1), m.group(2))] = float(m.group(3))
    return out


def promtool(text, what):
    r = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True,
                       text=True, timeout=30)
    if r.returncode != 0 or r.stdout or r.stderr:
        fail(f"promtool check metrics on {what}: exit {r.returncode}\n{r.stdout}{r.stderr}")
    log(f"ok: promtool check metrics finds nothing to lint in {what}")


def raw(address, data, read=True):
    """Sends bytes on a new connection; the answer until the server closes."""
    host, port = address.rsplit(":", 1)
    s = socket.create_connection((host, int(port)), timeout=10)
    try:
        s.sendall(data)
        if not read:
            return s
        answer = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                return answer
            answer += chunk
    except (ConnectionResetError, BrokenPipeError):
        return b"reset"
    finally:
        if read:
            s.close()


def main():
    master_metrics = f"127.0.0.1:{PORT + 2}"
    node_metrics = f"127.0.0.1:{PORT + 5}"
    master = start("m", "--master", f"--listen=127.0.0.1:{PORT}",
                   f"--grpc_listen=127.0.0.1:{PORT + 1}", f"--metrics_listen={master_metrics}")
    node = start("n1", f"--join=127.0.0.1:{PORT + 1}", f"--listen=127.0.0.1:{PORT + 3}",
                 f"--grpc_listen=127.0.0.1:{PORT + 4}", f"--metrics_listen={node_metrics}")

    # 1. Synchronized, and both pages well-formed.
    deadline = time.time() + 60
    while True:
        try:
            status, headers, body = fetch(node_metrics)
            if samples(body).get(("clocksync_synchronized", 'node="n1"')) == 1:
                break
        except (urllib.error.URLError, ConnectionError):
            pass
        if time.time() > deadline:
            fail("the node did not report synchronized within 60 s")
        if master.poll() is not None or node.poll() is not None:
            fail("a daemon exited")
        time.sleep(0.2)
    log("ok: the node reports clocksync_synchronized 1 over HTTP")
    for name, address in (("m", master_metrics), ("n1", node_metrics)):
        status, headers, body = fetch(address)
        if status != 200 or headers["Content-Type"] != CONTENT_TYPE:
            fail(f"{name}: status {status}, Content-Type {headers['Content-Type']!r}")
        if headers["Connection"] != "close" or int(headers["Content-Length"]) != len(body):
            fail(f"{name}: headers {dict(headers)}")
        s = samples(body)
        if s.get(("clocksync_up", f'node="{name}"')) != 1:
            fail(f"{name}: no clocksync_up 1 for itself:\n{body}")
        if any(f'node="{name}"' not in labels for _, labels in s):
            fail(f"{name}: a sample of another node:\n{body}")
        promtool(body, f"GET http://{address}/metrics ({name})")
    s = samples(fetch(master_metrics)[2])
    if s[("clocksync_children", 'node="m"')] != 1 or s[("clocksync_depth", 'node="m"')] != 0:
        fail("the master's page does not show its child")
    # Synchronized can come after the first few probes: wait for ten.
    deadline = time.time() + 30
    while True:
        s = samples(fetch(node_metrics)[2])
        if s[("clocksync_depth", 'node="n1"')] == 1 and \
                s.get(("clocksync_probes_total", 'node="n1",result="answered"'), 0) >= 10:
            break
        if time.time() > deadline:
            fail("the node's page does not show it probing at depth 1 "
                 "(10 probes answered) within 30 s")
        time.sleep(0.2)

    # 2. The same series as clocksyncctl metrics, asked just before and just
    # after (a new drop reason may add a series in between, none goes).
    def printed():
        r = subprocess.run([CTL, f"--target=127.0.0.1:{PORT + 4}", "metrics"],
                           capture_output=True, text=True, timeout=20)
        if r.returncode != 0:
            fail(f"clocksyncctl metrics: exit {r.returncode}: {r.stderr}")
        return set(samples(r.stdout))
    before = printed()
    served = set(samples(fetch(node_metrics)[2]))
    after = printed()
    if not before <= served <= after:
        fail(f"served and printed series differ: {sorted((before | after) ^ served)}")
    log(f"ok: /metrics and clocksyncctl metrics have the same {len(served)} series")

    # 3. HEAD, other paths, other methods.
    status, headers, body = fetch(node_metrics, "HEAD")
    if status != 200 or body != "" or int(headers["Content-Length"]) < 1000:
        fail(f"HEAD: status {status}, body {len(body)} bytes, headers {dict(headers)}")
    status, _, _ = fetch(node_metrics, path="/")
    if status != 404:
        fail(f"GET /: status {status}, want 404")
    status, headers, _ = fetch(node_metrics, "POST")
    if status != 405 or headers["Allow"] != "GET, HEAD":
        fail(f"POST: status {status}, Allow {headers['Allow']!r}")
    log("ok: HEAD has no body, / is 404, POST is 405 (Allow: GET, HEAD)")

    # 4. Hostile clients.
    slow = [raw(node_metrics, b"GET /metrics HTTP/1.1\r\nHost: a\r\n", read=False)
            for _ in range(4)]
    silent = [raw(node_metrics, b"", read=False) for _ in range(4)]
    start_s = time.time()
    for _ in range(5):
        if fetch(node_metrics)[0] != 200:
            fail("a scrape failed while slow clients were connected")
    if time.time() - start_s > 2:
        fail(f"5 scrapes took {time.time() - start_s:.1f} s beside slow clients")
    for garbage in (b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",
                    b"GET /metrics HTTP/9.9\r\n\r\n", b"\x00" * 100,
                    b"GET /" + b"a" * 100000, b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"):
        answer = raw(node_metrics, garbage)
        if not re.match(rb"HTTP/1\.1 (400|431|505) ", answer) and answer != b"reset":
            fail(f"garbage {garbage[:20]!r}: answer {answer[:80]!r}")
    for _ in range(50):
        raw(node_metrics, b"BAD\r\n\r\n")
    for s in slow + silent:
        s.settimeout(10)
        answer = b""
        try:
            while True:
                chunk = s.recv(4096)
                if not chunk:
                    break
                answer += chunk
        except ConnectionResetError:
            pass
        s.close()
        if not answer.startswith(b"HTTP/1.1 408 "):
            fail(f"a slow client got {answer[:60]!r}, want 408 at the read timeout")
    if time.time() - start_s > 9:
        fail(f"slow clients were cut off only after {time.time() - start_s:.1f} s")
    log("ok: slow and silent clients got 408 at the read timeout; garbage got 400/431/505")
    s = samples(fetch(node_metrics)[2])
    if s.get(("clocksync_synchronized", 'node="n1"')) != 1 or node.poll() is not None:
        fail("the node is no longer synchronized after the hostile clients")
    warnings = [line for line in open(os.path.join(WORK, "n1.log"))
                if "metrics endpoint" in line]
    if len(warnings) != 1:
        fail(f"{len(warnings)} log lines about the metrics endpoint, want 1 a minute:\n"
             + "".join(warnings))
    log(f"ok: one log line for all the problems above: {warnings[0].strip()}")

    # 5. Clean shutdown.
    for proc in (node, master):
        proc.terminate()
        try:
            code = proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            fail("a daemon did not stop within 15 s of SIGTERM")
        if code != 0:
            fail(f"a daemon exited {code} after SIGTERM")
    try:
        socket.create_connection(("127.0.0.1", PORT + 5), timeout=2).close()
        fail("the metrics port still accepts connections after the daemon stopped")
    except ConnectionRefusedError:
        pass
    log("ok: SIGTERM: exit 0, metrics port closed")
    log("PASS")


if __name__ == "__main__":
    main()
