#!/usr/bin/env python3
"""tests/lttng_merge_test.py: LTTng traces of two processes on two
clocksyncd nodes with modeled clocks, merged with babeltrace2, with
libclocksync-lttng.so as LTTng's clock and with LTTng's default clock.

Run by lttng_merge_test.sh (root). The cluster: a master m0 and two nodes
joined to it, `a` on a modeled clock of offset 0 and +25 ppm, `b` of
offset +2 s and -40 ppm. Each node is also an LTTng "host": a mount
namespace with its own /run/lttng and /dev/shm, so its own lttng-sessiond
and consumer daemon reading its own node's segment (CLOCKSYNC_SHM), and its
own trace, as on separate machines. examples/lttng_ping_pong's pong runs on
host a, its ping on host b, in a time namespace whose CLOCK_MONOTONIC
(LTTng's default clock) is 2 s ahead, as b's clock is (a time namespace
shifts a clock; it cannot make it run fast or slow, so only the offsets
are reproduced there). babeltrace2 merges the two hosts' traces.

  1. plugin   both session daemons (and their consumers) and both programs
              load the plugin. Every message must be received after it was sent in
              babeltrace2's merged output (0 receive-before-send), every
              event's timestamp must be the global time the program read
              just before it (clocksync_ns: median within 20 us, 95 % within
              0.5 ms, all within 0.1 s), the
              metadata's clock must be ours in both hosts' traces (name, the
              tree's uuid, 1 GHz) with the offset the plugin's bias
              (+- 10 us), and neither
              program may have fallen back.
  2. default  the same run without the plugin: the ping -> pong messages
              (half of them) are received before they were sent, and
              ping's events read 2 s late.
Prints one RESULT line per run. Exit 0 when all holds, 1 otherwise.
Usage: lttng_merge_test.py ROOT WORK_DIR
"""

import os
import random
import re
import statistics
import struct
import subprocess
import shutil
import sys
import tempfile
import time

ROOT, WORK = sys.argv[1:3]
DAEMON = os.path.join(ROOT, "clocksyncd/clocksyncd")
PING_PONG = os.path.join(ROOT, "examples/lttng_ping_pong")
PLUGIN = os.path.join(ROOT, "lttng/libclocksync-lttng.so")
MESSAGES = 200  # ping sends 200, pong answers each: 400 messages
MODEL_OFFSET_S = 2
# The uuid every node of a tree whose master is "m0" writes
# (lttng/clock_plugin_test.cc holds the same golden value).
TREE_UUID = "82f11712-15a9-862c-9f31-a5b7fc20dd0c"
BIAS_NS = 1_000_000  # lttng/clock_plugin.h: kValueBiasNs
PORT = 25600 + random.randrange(0, 400, 10)
procs = []
SOCKET_DIR = tempfile.mkdtemp(prefix="cs-lttng-")


def log(*args):
    print(*args, flush=True)


def fail(message):
    log("FAILED: " + message)
    sys.exit(1)


def spawn(args, log_name, env=None):
    out = open(os.path.join(WORK, log_name), "w")
    p = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, env=env)
    procs.append(p)
    return p


def tail(log_name, lines=15):
    try:
        with open(os.path.join(WORK, log_name)) as f:
            return "".join(f.readlines()[-lines:])
    except OSError:
        return ""


def segment_state(path):
    """The mapping's state byte (shm/shm_layout.h: status at 64 + 44)."""
    try:
        with open(path, "rb") as f:
            data = f.read(128)
        return struct.unpack_from("<H", data, 108)[0] & 0xFF
    except (OSError, struct.error):
        return 0


def start_cluster():
    shm = {n: os.path.join(WORK, f"{n}.shm") for n in ("m0", "a", "b")}
    spawn([DAEMON, "--master", "--node_id=m0", f"--listen=127.0.0.1:{PORT}",
           f"--grpc_listen=127.0.0.1:{PORT + 1}", f"--shm_path={shm['m0']}"], "m0.log")
    models = {"a": "offset=0s,frequency_ppm=25,wander=1,seed=1",
              "b": f"offset={MODEL_OFFSET_S}s,frequency_ppm=-40,wander=1,seed=2"}
    for i, n in enumerate(("a", "b")):
        p = PORT + 10 * (i + 1)
        spawn([DAEMON, f"--node_id={n}", f"--join=127.0.0.1:{PORT + 1}",
               f"--listen=127.0.0.1:{p}", f"--grpc_listen=127.0.0.1:{p + 1}",
               f"--shm_path={shm[n]}", "--probe_interval=50ms",
               "--enable_test_features", f"--clock_model={models[n]}"], f"{n}.log")
    deadline = time.time() + 60
    while time.time() < deadline:
        if all(segment_state(shm[n]) == 2 for n in ("a", "b")):
            break
        time.sleep(0.2)
    else:
        fail("nodes a and b not synchronized within 60 s:\n" + tail("a.log") + tail("b.log"))
    time.sleep(3)  # a few more samples behind each estimate
    return shm


# One "host": a mount namespace of its own (its own /run/lttng and
# /dev/shm, so its own lttng-sessiond and consumer, as on a separate node),
# a session with per-process buffers enabling clocksync_pingpong:*, then
# the program given, then stop and destroy. Exit 98: lttng-sessiond did not
# start (the test skips); 97, 99: mounts, lttng commands.
HOST_SCRIPT = r"""
set -u
mount -t tmpfs -o mode=0755 cs-lttng-host /run/lttng || exit 97
mount -t tmpfs -o mode=1777 cs-lttng-host /dev/shm || exit 97
sessiond_log=$1 trace=$2
shift 2
lttng-sessiond --no-kernel >"$sessiond_log" 2>&1 &
sessiond=$!
for _ in $(seq 200); do
  lttng --no-sessiond list >/dev/null 2>&1 && break
  kill -0 $sessiond 2>/dev/null || exit 98
  sleep 0.1
done
lttng --no-sessiond list >/dev/null 2>&1 || exit 98
lttng --no-sessiond create s --output="$trace" >/dev/null &&
  lttng --no-sessiond enable-channel --userspace --buffers-pid ch >/dev/null &&
  lttng --no-sessiond enable-event --userspace --channel=ch 'clocksync_pingpong:*' >/dev/null &&
  lttng --no-sessiond start >/dev/null || exit 99
"$@"
status=$?
lttng --no-sessiond stop >/dev/null || status=99
lttng --no-sessiond destroy >/dev/null || status=99
kill $sessiond
wait $sessiond
exit $status
"""


def traced_run(name, shm, plugin):
    """One traced ping-pong across two hosts, pong on a and ping on b;
    returns (babeltrace2's merged text, the metadata texts, the hosts' logs)."""
    # Short: a socket path has at most 107 bytes (WORK's may be longer).
    sock = os.path.join(SOCKET_DIR, f"pp_{name}.sock")
    # A consumer daemon stamps the end of a process's packets when the
    # process exits, with its own clock: with LTTng's default clock b's lies
    # 2 s behind ping's, so the processes linger that long after their last
    # event (else babeltrace2 refuses packets that end before their events).
    linger = f"--linger_ms={MODEL_OFFSET_S * 1000 + 500}"
    programs = {
        "a": [PING_PONG, "--role=pong", f"--socket={sock}", linger],
        "b": ["unshare", "--time", f"--monotonic={MODEL_OFFSET_S}",
              f"--boottime={MODEL_OFFSET_S}", PING_PONG, "--role=ping", f"--socket={sock}",
              f"--messages={MESSAGES}", "--interval_us=2000", linger],
    }
    hosts, traces = {}, []
    for h, program in programs.items():
        env = dict(os.environ, LTTNG_HOME=os.path.join(WORK, f"home_{h}"),
                   CLOCKSYNC_SHM=shm[h])
        os.makedirs(env["LTTNG_HOME"], exist_ok=True)
        env.pop("LTTNG_UST_CLOCK_PLUGIN", None)
        if plugin:  # in the session daemon, its consumer and the program
            env["LTTNG_UST_CLOCK_PLUGIN"] = PLUGIN
        trace = os.path.join(WORK, f"trace_{name}_{h}")
        traces.append(trace)
        hosts[h] = spawn(["unshare", "--mount", "--propagation", "private", "bash", "-c",
                          HOST_SCRIPT, "host", os.path.join(WORK, f"sessiond_{name}_{h}.log"),
                          trace, *program], f"host_{name}_{h}.log", env=env)
    for h, p in hosts.items():
        status = p.wait(timeout=180)
        if status == 98:
            log(f"SKIPPED: lttng-sessiond does not run here:\n"
                + tail(f"sessiond_{name}_{h}.log"))
            sys.exit(0)
        if status != 0:
            fail(f"{name}: host {h} exited {status}:\n" + tail(f"host_{name}_{h}.log")
                 + tail(f"sessiond_{name}_{h}.log"))
    r = subprocess.run(["babeltrace2", "--clock-seconds", *traces], capture_output=True,
                       text=True, timeout=120)
    if r.returncode != 0:
        fail(f"{name}: babeltrace2 could not merge the traces:\n{r.stderr[-3000:]}")
    metadata = []
    for trace in traces:
        for dirpath, _, files in os.walk(trace):
            if "metadata" in files:
                with open(os.path.join(dirpath, "metadata"), "rb") as f:
                    metadata.append(f.read().decode("latin-1"))
    logs = tail(f"host_{name}_a.log", 50) + tail(f"host_{name}_b.log", 50)
    return r.stdout, metadata, logs


LINE = re.compile(r"^\[(\d+)\.(\d{9})\] \S+ \S+:(\S+):\(\d+\) clocksync_pingpong:(send|recv): "
                  r".*msg_id = (\d+), clocksync_ns = (-?\d+)")


def analyse(text):
    """Per message id: the send and recv event (merged order, ts, process,
    clocksync_ns); and the merged order itself."""
    sends, recvs = {}, {}
    events = []
    for line in text.splitlines():
        m = LINE.match(line)
        if not m:
            continue
        ts = int(m.group(1)) * 1_000_000_000 + int(m.group(2))
        e = {"index": len(events), "ts": ts, "proc": m.group(3), "kind": m.group(4),
             "id": int(m.group(5)), "clocksync_ns": int(m.group(6))}
        events.append(e)
        (sends if e["kind"] == "send" else recvs)[e["id"]] = e
    ids = sorted(set(sends) & set(recvs))
    before = [i for i in ids if recvs[i]["index"] < sends[i]["index"]]
    return events, ids, before


def main():
    os.makedirs(WORK, exist_ok=True)
    shm = start_cluster()
    log(f"cluster: m0, a (offset 0, +25 ppm), b (offset +{MODEL_OFFSET_S} s, -40 ppm) synchronized")

    text, metadata, logs = traced_run("plugin", shm, plugin=True)
    events, ids, before = analyse(text)
    log(f"RESULT plugin: {len(before)}/{len(ids)} receive-before-send ({len(events)} events)")
    if len(ids) != 2 * MESSAGES:
        fail(f"plugin: {len(ids)} messages with both events, expected {2 * MESSAGES}:\n"
             + text[:2000])
    if before:
        fail(f"plugin: messages received before sent: {before[:10]}")
    if "clocksync-lttng:" in logs:
        fail("plugin: a program fell back or the plugin complained:\n" + logs)
    # Absolute times: LTTng's timestamp of each event against the global
    # time the program read just before it.
    # (A program preempted between the two reads makes a few large ones on
    # a busy machine; a wrong clock offset would make them all large.)
    diffs = sorted(abs(e["ts"] - e["clocksync_ns"]) for e in events)
    median, p95 = diffs[len(diffs) // 2], diffs[len(diffs) * 95 // 100]
    log(f"plugin: |timestamp - clocksync_ns|: median {median / 1e3:.1f} us, "
        f"95th percentile {p95 / 1e3:.1f} us, max {diffs[-1] / 1e3:.1f} us")
    if median > 20_000 or p95 > 500_000 or diffs[-1] > 100_000_000:
        fail("plugin: LTTng's timestamps are not the programs' global time")
    if len(metadata) != 2:
        fail(f"plugin: {len(metadata)} metadata files, expected 2 (one per process)")
    for md in metadata:
        clock = re.search(r"clock \{(.*?)\};", md, re.S)
        if not clock:
            fail("plugin: no clock in a metadata file")
        block = clock.group(1)
        offset = int(re.search(r"offset = (-?\d+);", block).group(1))
        log(f"plugin: metadata clock: {' '.join(block.split())}")
        if ('name = "clocksync"' not in block or f'uuid = "{TREE_UUID}"' not in block
                or "freq = 1000000000;" not in block or "global time of tree" not in block):
            fail("plugin: the metadata's clock is not the plugin's global clock")
        if abs(offset - BIAS_NS) > 10_000:
            fail(f"plugin: clock offset {offset} ns, expected {BIAS_NS} +- 10 us")

    text, _, _ = traced_run("default", shm, plugin=False)
    events, ids, before = analyse(text)
    # ping's events: sends of even ids, receives of odd ones.
    ping_late = statistics.median(e["ts"] - e["clocksync_ns"] for e in events if
                                  (e["kind"] == "send") == (e["id"] % 2 == 0))
    pong_late = statistics.median(e["ts"] - e["clocksync_ns"] for e in events if
                                  (e["kind"] == "send") != (e["id"] % 2 == 0))
    log(f"RESULT default: {len(before)}/{len(ids)} receive-before-send; "
        f"ping's events {ping_late / 1e9:+.3f} s, pong's {pong_late / 1e9:+.3f} s "
        "off global time")
    if len(ids) != 2 * MESSAGES:
        fail(f"default: {len(ids)} messages with both events, expected {2 * MESSAGES}")
    ping_to_pong = [i for i in ids if i % 2 == 0]
    if sorted(before) != ping_to_pong:
        fail(f"default: expected exactly the {len(ping_to_pong)} ping -> pong messages "
             f"received before sent, got {len(before)}")
    if abs(ping_late - pong_late - MODEL_OFFSET_S * 1e9) > 50e6:
        fail(f"default: ping's events are {(ping_late - pong_late) / 1e9:.3f} s later than "
             f"pong's, expected {MODEL_OFFSET_S} s")
    log("PASS")


try:
    main()
finally:
    shutil.rmtree(SOCKET_DIR, ignore_errors=True)
    for p in procs:
        if p.poll() is None:
            p.terminate()
    for p in procs:
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
