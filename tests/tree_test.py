#!/usr/bin/env python3
"""Integration test: a self-arranging tree of real clocksyncd daemons.

A master and 20 nodes on loopback, every node started with only
--join=<master> and --max_children=3, each on its own modeled clock.
  1. The tree forms: every node is listed exactly once by
     `clocksyncctl tree --json`, depth <= 4, every node synchronized, and
     for 15 s every node's bound contains the master's time.
  2. A node with children is killed (SIGKILL): its children re-attach within
     5 s, and every surviving node's bound contains the master's time
     throughout (checked every 0.25 s).
  3. A node with children leaves cleanly (SIGTERM): it exits, its children
     re-attach without going into holdover, bounds hold.
  4. The killed node is restarted under the same id: it rejoins and
     synchronizes.
  5. `clocksyncctl tree --json` lists every live node exactly once, and
     none unreachable.
Usage: tree_test.py BIN_DIR CLUSTER_SCRIPT WORK_DIR
"""

import json
import os
import random
import signal
import subprocess
import sys
import time

BIN, CLUSTER, WORK = sys.argv[1:4]
NODES = 21  # The master and 20 nodes.
MAX_CHILDREN = 3
PORT = 28400 + random.randrange(0, 400, 10)
MASTER_GRPC = f"127.0.0.1:{PORT + 100}"
REJOIN_LIMIT_S = 5.0


def log(*args):
    print(*args, flush=True)


def fail(message):
    log("FAILED: " + message)
    sys.exit(1)


def pids():
    out = {}
    with open(os.path.join(WORK, "pids")) as f:
        for line in f:
            name, pid = line.split()
            out[name] = int(pid)
    return out


def topology():
    """{id: (parent_id, depth, state, unreachable)} and the raw id list."""
    r = subprocess.run([os.path.join(BIN, "tools/clocksyncctl/clocksyncctl"), f"--target={MASTER_GRPC}",
                        "--json", "tree"], capture_output=True, text=True, timeout=20)
    if r.returncode not in (0, 1):  # 1: some node not synchronized.
        raise RuntimeError(f"clocksyncctl tree: exit {r.returncode}: {r.stderr}")
    nodes = json.loads(r.stdout)["nodes"]
    ids = [n["status"]["node_id"] for n in nodes]
    info = {}
    for n in nodes:
        s = n["status"]
        info[s["node_id"]] = (n.get("parent_id", ""), s.get("depth", 0),
                              s.get("state", ""), n.get("unreachable", False))
    return info, ids


class Monitor:
    """cluster_monitor over a set of nodes, checking bounds every 0.25 s."""

    def __init__(self, names, duration_s):
        specs = ",".join(f"{n}:1:{WORK}/{n}.shm:{WORK}/{n}.status" for n in names)
        self.proc = subprocess.Popen(
            [os.path.join(BIN, "tools/cluster_monitor/cluster_monitor"), f"--master={WORK}/master.shm",
             f"--nodes={specs}", f"--duration_s={duration_s}", "--warmup_s=0",
             "--interval_s=0.25", "--json"], stdout=subprocess.PIPE, text=True)

    def result(self):
        out, _ = self.proc.communicate(timeout=300)
        return json.loads(out)["nodes"]


def check_bounds(result, phase, allow_unsynced=()):
    bad = []
    for n in result:
        if n["bound_violations"]:
            bad.append(f'{n["id"]}: {n["bound_violations"]} bound violations '
                       f'of {n["checks"]} checks (max error {n["max_abs_error_ns"]} ns)')
        if n["unsynced_checks"] and n["id"] not in allow_unsynced:
            bad.append(f'{n["id"]}: {n["unsynced_checks"]} unsynchronized checks')
    if bad:
        fail(f"{phase}:\n  " + "\n  ".join(bad))


def wait_for(predicate, timeout_s, what):
    deadline = time.time() + timeout_s
    last = None
    while time.time() < deadline:
        try:
            ok, last = predicate()
            if ok:
                return last
        except (RuntimeError, json.JSONDecodeError, subprocess.TimeoutExpired) as e:
            last = str(e)
        time.sleep(0.25)
    fail(f"{what} within {timeout_s} s; last: {last}")


def state_of(name):
    try:
        with open(f"{WORK}/{name}.status") as f:
            return dict(kv.split("=", 1) for kv in f.read().split())
    except (FileNotFoundError, ValueError):
        return {}


def main():
    subprocess.run([CLUSTER, "--no_build", f"--bin_dir={BIN}", f"--work_dir={WORK}",
                    "--detach", f"--base_port={PORT}", f"--nodes={NODES}",
                    f"--max_children={MAX_CHILDREN}"], check=True)
    live = {f"n{i}" for i in range(1, NODES)}

    log("== 1: the tree forms")

    def formed():
        info, ids = topology()
        synced = [i for i in ids if info[i][2] == "SYNC_STATE_SYNCED"]
        return (sorted(ids) == sorted(live | {"master"}) and len(synced) == len(ids),
                f"{len(ids)} listed, {len(synced)} synced")
    wait_for(formed, 60, "all 21 daemons listed and synchronized")
    info, ids = topology()
    depth = max(info[i][1] for i in ids)
    log(f"tree of {len(ids)} nodes, depth {depth}")
    subprocess.run([os.path.join(BIN, "tools/clocksyncctl/clocksyncctl"), f"--target={MASTER_GRPC}", "tree"])
    if len(ids) != len(set(ids)):
        fail(f"a node is listed twice: {ids}")
    if depth > 4:
        fail(f"depth {depth} > 4 with max_children={MAX_CHILDREN}")
    for name, (_, _, _, unreachable) in info.items():
        if unreachable:
            fail(f"{name} unreachable")
    check_bounds(Monitor(sorted(live), 15).result(), "phase 1")
    log("phase 1 ok")

    log("== 2: kill a node with children")
    info, _ = topology()
    children = {}
    for name, (parent, *_rest) in info.items():
        children.setdefault(parent, []).append(name)
    # The node with the largest subtree below the master's level.
    victims = sorted((n for n in live if children.get(n)),
                     key=lambda n: -len(children[n]))
    if not victims:
        fail("no node has children")
    victim = victims[0]
    orphans = sorted(children[victim])
    log(f"killing {victim} (children {orphans})")
    monitor = Monitor(sorted(live - {victim}), 12)
    time.sleep(0.5)
    killed_at = time.time()
    os.kill(pids()[victim], signal.SIGKILL)
    live.discard(victim)

    def rejoined():
        info, _ = topology()
        moved = [o for o in orphans if o in info and info[o][0] not in ("", victim)]
        return len(moved) == len(orphans), f"re-attached: {moved}"
    wait_for(rejoined, REJOIN_LIMIT_S + 1, f"children of {victim} re-attached")
    took = time.time() - killed_at
    log(f"children of {victim} re-attached after {took:.2f} s")
    if took > REJOIN_LIMIT_S:
        fail(f"rejoin took {took:.2f} s > {REJOIN_LIMIT_S} s")
    check_bounds(monitor.result(), "phase 2")
    log("phase 2 ok")

    log("== 3: a node with children leaves cleanly")
    info, _ = topology()
    children = {}
    for name, (parent, *_rest) in info.items():
        children.setdefault(parent, []).append(name)
    leavers = sorted((n for n in live if children.get(n)),
                     key=lambda n: -len(children[n]))
    if not leavers:
        fail("no node left with children")
    leaver = leavers[0]
    kids = sorted(children[leaver])
    log(f"stopping {leaver} (children {kids}) with SIGTERM")
    monitor = Monitor(sorted(live - {leaver}), 10)
    time.sleep(0.5)
    leave_pid = pids()[leaver]
    os.kill(leave_pid, signal.SIGTERM)
    live.discard(leaver)
    holdover = set()

    def exited():
        for k in kids:
            if state_of(k).get("state") == "holdover":
                holdover.add(k)
        try:
            os.kill(leave_pid, 0)
            return False, "still running"
        except ProcessLookupError:
            return True, "exited"
    wait_for(exited, 10, f"{leaver} exits after its leave")

    def kids_moved():
        info, ids = topology()
        moved = [k for k in kids if k in info and info[k][0] not in ("", leaver)]
        return len(moved) == len(kids) and leaver not in ids, f"moved {moved}, listed {ids}"
    wait_for(kids_moved, 5, f"children of {leaver} re-attached")
    check_bounds(monitor.result(), "phase 3")
    if holdover:
        fail(f"children of {leaver} went into holdover: {sorted(holdover)}")
    log("phase 3 ok")

    log(f"== 4: restart {victim} under the same id")
    i = int(victim[1:])
    with open(f"{WORK}/{victim}.log", "a") as out:
        proc = subprocess.Popen(
            [os.path.join(BIN, "clocksyncd/clocksyncd"), f"--node_id={victim}",
             f"--join={MASTER_GRPC}", f"--max_children={MAX_CHILDREN}",
             f"--listen=127.0.0.1:{PORT + i}", f"--grpc_listen=127.0.0.1:{PORT + 100 + i}",
             f"--shm_path={WORK}/{victim}.shm", f"--status_file={WORK}/{victim}.status",
             "--enable_test_features", f"--clock_model=offset=1s,frequency_ppm=30,wander=1,seed={i}"],
            stdout=out, stderr=subprocess.STDOUT)
    with open(f"{WORK}/pids", "a") as f:
        f.write(f"{victim}-restarted {proc.pid}\n")
    live.add(victim)

    def back():
        info, _ = topology()
        return (victim in info and info[victim][2] == "SYNC_STATE_SYNCED",
                info.get(victim))
    wait_for(back, 20, f"{victim} rejoined and synchronized")
    log(f"{victim} rejoined")

    log("== 5: every live node listed exactly once")

    def settled():
        info, ids = topology()
        unreachable = [n for n in ids if info[n][3]]
        return (sorted(ids) == sorted(live | {"master"}) and not unreachable,
                f"listed {sorted(ids)}, unreachable {unreachable}")
    wait_for(settled, 10, "the topology lists each live node once")
    _, ids = topology()
    if len(ids) != len(set(ids)):
        fail(f"a node is listed twice: {ids}")
    subprocess.run([os.path.join(BIN, "tools/clocksyncctl/clocksyncctl"), f"--target={MASTER_GRPC}", "tree"])
    log("all phases ok")


if __name__ == "__main__":
    main()
