#!/usr/bin/env python3
"""Integration test: standby masters, with real daemons, against the truth.

Every daemon reads the same CLOCK_MONOTONIC_RAW; the master's published
mapping is one line on it (its raw clock anchored to Unix time once), so a
copy of its segment taken while it runs extrapolates its timescale exactly:
that is the truth every node is measured against, before and after the
master is gone (tools/cluster_monitor, every 0.25 s: error, bound, whether
the bound contains the truth).

Scenarios (the first argument):
  takeover   13 daemons (a master, n1..n12; n1 and n2 candidates, priority
             1 and 2), max 3 children each. At 30 s the master is killed
             (SIGKILL): n1 is master within 5 s, every node synchronized
             under it within 10 s, no bound violation, no mapping step.
             Then n1 is killed: n2 takes over under the next term, the same
             checks. Then the first master restarts (--master with the
             candidates as --join): it joins as a node under n2, no node's
             mapping steps, no violation.
  handover   9 daemons, n1 and n2 candidates. SIGTERM on the master: it
             hands mastership to n1 (term 2) and exits; no node enters
             holdover at any time (status files read every 50 ms), no
             violation, no step.
  partition  7 daemons in two network namespaces joined by a veth pair
             (side A: master, n1, n3, n5; side B: n2, n4, n6). The master
             is killed and n1 takes over; then the sides are cut apart
             (iptables DROP both ways): n2 takes over on side B, never more
             than one master per side; after the cut heals n1 (the lower
             term) yields to n2 and joins it, one master for all, every
             node in bounds throughout.
Figures are printed as "FIGURE standby_<scenario>_<name> <value> <unit>".

Usage: standby_test.py SCENARIO BIN_DIR CLUSTER_SCRIPT WORK_DIR
"""

import json
import os
import random
import signal
import struct
import subprocess
import sys
import time

SCENARIO, BIN, CLUSTER, WORK = sys.argv[1:5]
# Each scenario a port block of its own (tests/BUILD.bazel).
PORT = {"takeover": 29100, "handover": 29800, "partition": 30500}.get(SCENARIO, 29100) + \
    random.randrange(0, 400, 10)
T0 = time.time()
DAEMON = os.path.join(BIN, "clocksyncd/clocksyncd")
MONITOR = os.path.join(BIN, "tools/cluster_monitor/cluster_monitor")
CTL = os.path.join(BIN, "tools/clocksyncctl/clocksyncctl")
TAKEOVER_LIMIT_S = 5.0
ALL_SYNCED_LIMIT_S = 10.0


def log(*args):
    print(f"[{SCENARIO} {time.time() - T0:6.1f}s]", *args, flush=True)


def fail(message):
    log("FAILED: " + message)
    for name in sorted(pids()):
        path = f"{WORK}/{name}.log"
        if os.path.exists(path):
            with open(path) as f:
                tail = f.readlines()[-12:]
            log(f"--- {name}.log (last lines)\n" + "".join(tail))
    sys.exit(1)


def figure(name, value, unit):
    print(f"FIGURE standby_{SCENARIO}_{name} {value} {unit}", flush=True)


def pids():
    out = {}
    try:
        with open(os.path.join(WORK, "pids")) as f:
            for line in f:
                name, pid = line.split()
                out[name] = int(pid)
    except FileNotFoundError:
        pass
    return out


def add_pid(name, pid):
    with open(os.path.join(WORK, "pids"), "a") as f:
        f.write(f"{name} {pid}\n")


def status(name):
    """The daemon's status file as a dict ({} while absent)."""
    try:
        with open(f"{WORK}/{name}.status") as f:
            return dict(kv.split("=", 1) for kv in f.read().split())
    except (FileNotFoundError, ValueError):
        return {}


def copy_truth(shm="master.shm"):
    """A consistent copy of the master's segment: both seqlocks even and
    the bytes unchanged between two reads."""
    for _ in range(100):
        with open(f"{WORK}/{shm}", "rb") as f:
            a = f.read()
        with open(f"{WORK}/{shm}", "rb") as f:
            b = f.read()
        if a == b and len(a) >= 136:
            seq_mapping, = struct.unpack_from("<Q", a, 64)
            seq_tsc, = struct.unpack_from("<Q", a, 128)
            if seq_mapping % 2 == 0 and seq_tsc % 2 == 0:
                with open(f"{WORK}/truth.shm", "wb") as f:
                    f.write(a)
                return
        time.sleep(0.01)
    fail("no consistent copy of the master's segment")


class Monitor:
    """cluster_monitor against the truth, every 0.25 s."""

    def __init__(self, names, duration_s, netns=None):
        specs = ",".join(f"{n}:1:{WORK}/{n}.shm:{WORK}/{n}.status" for n in names)
        self.proc = subprocess.Popen(
            [MONITOR, f"--master={WORK}/truth.shm", f"--nodes={specs}",
             f"--duration_s={duration_s}", "--warmup_s=0", "--interval_s=0.25",
             "--json"], stdout=subprocess.PIPE, text=True)

    def result(self):
        out, _ = self.proc.communicate(timeout=600)
        return json.loads(out)["nodes"]


def check_bounds(result, phase):
    """Fails on any violation or unsynchronized check; returns the largest
    error and the largest median bound seen."""
    bad = []
    for n in result:
        if n["bound_violations"]:
            bad.append(f'{n["id"]}: {n["bound_violations"]} bound violations '
                       f'of {n["checks"]} checks (max error {n["max_abs_error_ns"]} ns)')
        if n["unsynced_checks"]:
            bad.append(f'{n["id"]}: {n["unsynced_checks"]} unsynchronized checks')
        if n["checks"] < 8:
            bad.append(f'{n["id"]}: only {n["checks"]} checks')
    if bad:
        fail(f"{phase}:\n  " + "\n  ".join(bad))
    worst = max(result, key=lambda n: n["max_abs_error_ns"])
    checks = sum(n["checks"] for n in result)
    log(f"{phase}: {checks} checks, 0 violations; largest error "
        f"{worst['max_abs_error_ns']} ns ({worst['id']}), median bounds up to "
        f"{max(n['median_bound_ns'] for n in result)} ns")
    return worst["max_abs_error_ns"], max(n["median_bound_ns"] for n in result), checks


def wait_for(predicate, timeout_s, what, step_s=0.1):
    deadline = time.time() + timeout_s
    last = None
    while time.time() < deadline:
        ok, last = predicate()
        if ok:
            return last
        time.sleep(step_s)
    fail(f"{what} within {timeout_s} s; last: {last}")


def synced_under(names, master, term):
    def check():
        off = [n for n in names
               if status(n).get("state") != "synced" or status(n).get("master") != master
               or status(n).get("term") != str(term)]
        return not off, {n: {k: status(n).get(k) for k in ("state", "master", "term", "parent")}
                         for n in off}
    return check


def logged_at(name, text, after):
    """When `name`'s log first says `text` after the instant `after` (from
    spdlog's local-time stamp, to the millisecond); None if it has not."""
    try:
        with open(f"{WORK}/{name}.log") as f:
            for line in f:
                if text not in line or not line.startswith("[20"):
                    continue
                stamp = time.mktime(time.strptime(line[1:20], "%Y-%m-%d %H:%M:%S"))
                stamp += int(line[21:24]) / 1000
                if stamp >= after - 0.002:
                    return stamp
    except FileNotFoundError:
        pass
    return None


def steps(names):
    return {n: status(n).get("steps") for n in names}


def kill_master_and_time(victim, live, new_master, term, phase):
    """SIGKILL `victim`; the time until `new_master` is master under `term`
    and until every live node is synchronized under it; the monitor over
    the live nodes throughout."""
    before = steps(live)
    monitor = Monitor(sorted(live), 15)
    time.sleep(0.5)
    os.kill(pids()[victim], signal.SIGKILL)
    killed = time.time()
    log(f"{phase}: killed {victim}")

    def promoted():
        masters = [n for n in live if status(n).get("role") == "master"]
        return bool(masters), masters
    masters = wait_for(promoted, TAKEOVER_LIMIT_S + 2, f"{phase}: a candidate master", 0.05)
    seen = time.time() - killed
    if masters != [new_master]:
        fail(f"{phase}: {masters} took over, not {new_master}")
    if status(new_master).get("term") != str(term):
        fail(f"{phase}: {new_master} is master under term {status(new_master).get('term')}, "
             f"not {term}")
    wait_for(synced_under(live, new_master, term), ALL_SYNCED_LIMIT_S + 2,
             f"{phase}: every node synchronized under {new_master}")
    synced = time.time() - killed
    # The status files are rewritten once a second: the log says the instant.
    stamp = logged_at(new_master, "took over as master", killed)
    if stamp is None:
        fail(f"{phase}: {new_master}'s log does not say it took over")
    took = stamp - killed
    log(f"{phase}: {new_master} master (term {term}) after {took:.2f} s (its log; "
        f"{seen:.2f} s by the status files), every node synchronized under it "
        f"after {synced:.2f} s (status files)")
    if took > TAKEOVER_LIMIT_S:
        fail(f"{phase}: takeover took {took:.2f} s > {TAKEOVER_LIMIT_S} s")
    if synced > ALL_SYNCED_LIMIT_S:
        fail(f"{phase}: all synchronized after {synced:.2f} s > {ALL_SYNCED_LIMIT_S} s")
    error, bound, checks = check_bounds(monitor.result(), phase)
    after = steps(live)
    stepped = [n for n in live if before[n] != after[n]]
    if stepped:
        fail(f"{phase}: mapping stepped on {stepped}: {before} -> {after}")
    # The new master's bound: from its log at the takeover, and now.
    at_takeover = None
    with open(f"{WORK}/{new_master}.log") as f:
        for line in f:
            if "master now" in line and "bound ±" in line:
                at_takeover = int(line.split("bound ±")[1].split()[0])
    now_bound = int(status(new_master).get("bound_ns", "0"))
    growth = (now_bound - at_takeover) / (time.time() - stamp) if at_takeover else 0
    log(f"{phase}: {new_master}'s bound {at_takeover} ns at the takeover, {now_bound} ns "
        f"{time.time() - stamp:.1f} s later ({growth:.0f} ns/s)")
    figure(f"{phase.split()[0]}_master_bound_at_takeover_ns", at_takeover, "ns")
    figure(f"{phase.split()[0]}_master_bound_growth_ns_per_s", f"{growth:.0f}", "ns/s")
    return took, synced, error, bound, checks


def start_cluster(nodes, standby):
    subprocess.run([CLUSTER, "--no_build", f"--bin_dir={BIN}", f"--work_dir={WORK}",
                    "--detach", f"--base_port={PORT}", f"--nodes={nodes}",
                    "--max_children=3", f"--standby={standby}"], check=True)
    live = {f"n{i}" for i in range(1, nodes)}
    wait_for(synced_under(live, "master", 1), 45, "every node synchronized under the master")
    copy_truth()
    return live


def takeover():
    live = start_cluster(13, 2)
    log("tree formed")
    subprocess.run([CTL, f"--target=127.0.0.1:{PORT + 100}", "tree"])
    # The kill comes at 30 s, as the issue asks (windows of 20+ s).
    time.sleep(max(0.0, 29.5 - (time.time() - T0)))
    took1, synced1, err1, bound1, checks1 = kill_master_and_time(
        "master", live, "n1", 2, "first loss")
    subprocess.run([CTL, f"--target=127.0.0.1:{PORT + 101}", "status"])
    live.discard("n1")
    took2, synced2, err2, bound2, checks2 = kill_master_and_time(
        "n1", live, "n2", 3, "second loss")

    log("== the first master restarts, with the candidates as seeds")
    before = steps(live)
    with open(f"{WORK}/master-2.log", "w") as out:
        proc = subprocess.Popen(
            [DAEMON, "--master", "--node_id=master", "--max_children=3",
             f"--join=127.0.0.1:{PORT + 101},127.0.0.1:{PORT + 102}",
             f"--listen=127.0.0.1:{PORT}", f"--grpc_listen=127.0.0.1:{PORT + 100}",
             f"--shm_path={WORK}/master-2.shm", f"--status_file={WORK}/master-2.status"],
            stdout=out, stderr=subprocess.STDOUT)
    add_pid("master-2", proc.pid)
    wait_for(lambda: (status("master-2").get("role") == "node", status("master-2")), 5,
             "the restarted master runs as a node")
    monitor = Monitor(sorted(live), 12)
    wait_for(synced_under(["master-2"], "n2", 3), 12,
             "the restarted master synchronized under n2")
    err3, _, _ = check_bounds(monitor.result(), "restart")
    after = steps(live)
    if before != after:
        fail(f"restart: mapping steps changed: {before} -> {after}")
    with open(f"{WORK}/master-2.log") as f:
        if "joining the tree as a node" not in f.read():
            fail("restart: the master did not say it joins as a node")
    masters = [n for n in live | {"master-2"} if status(n).get("role") == "master"]
    if masters != ["n2"]:
        fail(f"restart: masters {masters}")
    subprocess.run([CTL, f"--target=127.0.0.1:{PORT + 102}", "tree"])
    figure("first_takeover_s", f"{took1:.2f}", "s")
    figure("first_all_synced_s", f"{synced1:.2f}", "s")
    figure("first_max_error_ns", err1, "ns")
    figure("first_median_bound_ns", bound1, "ns")
    figure("second_takeover_s", f"{took2:.2f}", "s")
    figure("second_all_synced_s", f"{synced2:.2f}", "s")
    figure("second_max_error_ns", err2, "ns")
    figure("second_median_bound_ns", bound2, "ns")
    figure("restart_max_error_ns", err3, "ns")
    figure("bound_violations", 0, f"violations_in_{checks1 + checks2}_checks")


def handover():
    live = start_cluster(9, 2)
    before = steps(live)
    monitor = Monitor(sorted(live), 12)
    time.sleep(0.5)
    master_pid = pids()["master"]
    os.kill(master_pid, signal.SIGTERM)
    sent = time.time()
    log("SIGTERM to the master")
    holdover = set()
    took = None
    exited = None
    while time.time() - sent < 10:
        for n in live:
            if status(n).get("state") == "holdover":
                holdover.add(n)
        if took is None and status("n1").get("role") == "master":
            took = time.time() - sent
        if exited is None:
            try:
                os.kill(master_pid, 0)
            except ProcessLookupError:
                exited = time.time() - sent
        ok, _ = synced_under(live, "n1", 2)()
        if ok and exited is not None:
            break
        time.sleep(0.05)
    if took is None:
        fail(f"n1 did not take over: {status('n1')}")
    stamp = logged_at("n1", "took over as master", sent)
    if stamp is None:
        fail("n1's log does not say it took over")
    took = stamp - sent
    if exited is None:
        fail("the master did not exit")
    wait_for(synced_under(live, "n1", 2), 2, "every node synchronized under n1")
    moved = time.time() - sent
    if holdover:
        fail(f"nodes went into holdover: {sorted(holdover)}")
    error, bound, checks = check_bounds(monitor.result(), "handover")
    after = steps(live)
    if before != after:
        fail(f"mapping steps changed: {before} -> {after}")
    with open(f"{WORK}/master.log") as f:
        if "handed mastership to n1 under term 2" not in f.read():
            fail("the master's log does not say it handed over")
    log(f"n1 master after {took:.2f} s, the master gone after {exited:.2f} s, "
        f"every node under n1 after {moved:.2f} s, no holdover")
    figure("takeover_s", f"{took:.2f}", "s")
    figure("all_moved_s", f"{moved:.2f}", "s")
    figure("max_error_ns", error, "ns")
    figure("holdover_nodes", 0, "nodes")
    figure("bound_violations", 0, f"violations_in_{checks}_checks")


# --- partition: two network namespaces --------------------------------------

NET = 10 + random.randrange(0, 200)
SIDES = {"A": f"10.{NET}.0.1", "B": f"10.{NET}.0.2"}
NS = {side: f"cssb-{os.getpid()}-{side}" for side in SIDES}
SIDE_OF = {"master": "A", "n1": "A", "n3": "A", "n5": "A", "n2": "B", "n4": "B", "n6": "B"}


def sh(*args):
    subprocess.run(list(args), check=True)


def make_namespaces():
    for side, ns in NS.items():
        sh("ip", "netns", "add", ns)
        sh("ip", "-n", ns, "link", "set", "lo", "up")
    sh("ip", "link", "add", f"csa{os.getpid() % 100000}", "netns", NS["A"], "type", "veth",
       "peer", "name", f"csb{os.getpid() % 100000}", "netns", NS["B"])
    for side, dev in (("A", f"csa{os.getpid() % 100000}"), ("B", f"csb{os.getpid() % 100000}")):
        sh("ip", "-n", NS[side], "addr", "add", f"{SIDES[side]}/24", "dev", dev)
        sh("ip", "-n", NS[side], "link", "set", dev, "up")


def remove_namespaces():
    for ns in NS.values():
        subprocess.run(["ip", "netns", "delete", ns], stderr=subprocess.DEVNULL)


def cut(on):
    """Drops everything between the sides (both ways, on both sides)."""
    op = "-I" if on else "-D"
    for side, ns in NS.items():
        other = SIDES["B" if side == "A" else "A"]
        for chain, flag in (("INPUT", "-s"), ("OUTPUT", "-d")):
            sh("ip", "netns", "exec", ns, "iptables", op, chain, flag, other, "-j", "DROP")


def start_in_namespace(name, index, flags):
    side = SIDE_OF[name]
    host = SIDES[side]
    with open(f"{WORK}/{name}.log", "w") as out:
        proc = subprocess.Popen(
            ["ip", "netns", "exec", NS[side], DAEMON, f"--node_id={name}",
             f"--listen={host}:{PORT + index}", f"--grpc_listen={host}:{PORT + 100 + index}",
             f"--shm_path={WORK}/{name}.shm", f"--status_file={WORK}/{name}.status",
             "--max_children=3"] + flags, stdout=out, stderr=subprocess.STDOUT)
    add_pid(name, proc.pid)


def masters_by_side(names):
    out = {"A": [], "B": []}
    for n in names:
        if status(n).get("role") == "master":
            out[SIDE_OF[n]].append(n)
    return out


def partition():
    make_namespaces()
    try:
        run_partition()
    finally:
        for pid in pids().values():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        remove_namespaces()


def run_partition():
    master_grpc = f"{SIDES['A']}:{PORT + 100}"
    start_in_namespace("master", 0, ["--master"])
    time.sleep(0.3)
    nodes = ["n1", "n2", "n3", "n4", "n5", "n6"]
    for i, n in enumerate(nodes, start=1):
        flags = [f"--join={master_grpc}", "--enable_test_features",
                 f"--clock_model=offset={i * 370 - 1000}ms,frequency_ppm={i * 29 - 90},"
                 f"wander=1,seed={i}"]
        if n in ("n1", "n2"):
            flags.append(f"--master_priority={1 if n == 'n1' else 2}")
        start_in_namespace(n, i, flags)
        time.sleep(0.05)
    live = set(nodes)
    wait_for(synced_under(live, "master", 1), 45, "every node synchronized under the master")
    copy_truth()
    log("tree formed across the two namespaces")
    monitor = Monitor(sorted(live), 32)
    os.kill(pids()["master"], signal.SIGKILL)
    killed = time.time()
    wait_for(synced_under(live, "n1", 2), ALL_SYNCED_LIMIT_S, "every node under n1")
    log(f"master killed: every node under n1 (term 2) after {time.time() - killed:.2f} s")

    cut(True)
    cut_at = time.time()
    log("sides cut apart")
    most = {"A": 0, "B": 0}
    took = None
    while time.time() - cut_at < 14:
        per_side = masters_by_side(live)
        for side in most:
            most[side] = max(most[side], len(per_side[side]))
        if took is None and per_side["B"] == ["n2"]:
            took = time.time() - cut_at
        time.sleep(0.1)
    if most["A"] > 1 or most["B"] > 1:
        fail(f"more than one master on a side: {most}")
    if took is None:
        fail(f"n2 did not take over on side B: {status('n2')}")
    final = masters_by_side(live)
    if final != {"A": ["n1"], "B": ["n2"]}:
        fail(f"masters per side at the end of the cut: {final}")
    if status("n2").get("term") != "3":
        fail(f"n2 took over under term {status('n2').get('term')}, not 3")
    for n in ("n4", "n6"):
        if status(n).get("master") != "n2":
            fail(f"{n} (side B) follows {status(n).get('master')}, not n2")
    stamp = logged_at("n2", "took over as master", cut_at)
    if stamp is None:
        fail("n2's log does not say it took over")
    took = stamp - cut_at
    log(f"n2 master on side B (term 3) after {took:.2f} s (its log); one master per side")

    cut(False)
    healed = time.time()
    log("cut healed")
    wait_for(synced_under(live, "n2", 3), 20, "every node under n2 after the heal")
    settled = time.time() - healed
    masters = [n for n in live if status(n).get("role") == "master"]
    if masters != ["n2"]:
        fail(f"masters after the heal: {masters}")
    with open(f"{WORK}/n1.log") as f:
        if "no longer master" not in f.read():
            fail("n1's log does not say it yielded")
    log(f"one master (n2) for all {settled:.2f} s after the heal")
    # Run the monitor out, then the whole run in bounds.
    error, bound, checks = check_bounds(monitor.result(), "partition")
    figure("side_b_takeover_s", f"{took:.2f}", "s")
    figure("one_master_after_heal_s", f"{settled:.2f}", "s")
    figure("max_masters_per_side", max(most.values()), "masters")
    figure("max_error_ns", error, "ns")
    figure("bound_violations", 0, f"violations_in_{checks}_checks")


def main():
    os.makedirs(WORK, exist_ok=True)
    {"takeover": takeover, "handover": handover, "partition": partition}[SCENARIO]()
    log("ok")


if __name__ == "__main__":
    main()
