#!/usr/bin/python3
"""tools/simulate_cluster/plot_scale.py: the pictures of docs/SCALE.md
from simulate_cluster's JSON reports (run_scale.sh writes them).

  scale_depth.png  RMS error and median bound half-width against depth, one
                   line per (nodes, fan-out) run (depth_n*_f*.json)
  scale_churn.png  RMS and largest error and the median half-width over
                   time through the churn run's events (churn_*.json)
  scale_takeover.png  the same through a master takeover (takeover_*.json)

Usage: plot_scale.py --in=DIR --out=DIR   (Debian's python3-matplotlib)
"""
import argparse
import glob
import json
import os
import re
import sys

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402


def load(pattern):
    runs = []
    for path in sorted(glob.glob(pattern)):
        with open(path) as f:
            runs.append((os.path.basename(path), json.load(f)))
    return runs


def plot_depth(runs, out):
    fig, (ax_err, ax_bound) = plt.subplots(1, 2, figsize=(11, 4.5))
    styles = {4: "o-", 16: "s-", 64: "^-"}
    for name, r in sorted(runs, key=lambda x: (x[1]["options"]["nodes"], x[1]["options"]["fanout"])):
        n, f = r["options"]["nodes"], r["options"]["fanout"]
        depths = [d["depth"] for d in r["depths"] if d["samples"] > 0]
        rms = [d["rms_ns"] for d in r["depths"] if d["samples"] > 0]
        half = [d["median_half_width_ns"] for d in r["depths"] if d["samples"] > 0]
        label = f"{n:,} nodes, fan-out {f}"
        ax_err.plot(depths, rms, styles.get(f, "x-"), label=label)
        ax_bound.plot(depths, half, styles.get(f, "x-"), label=label)
    for ax, title in ((ax_err, "RMS error vs the truth"), (ax_bound, "median bound half-width")):
        ax.set_yscale("log")
        ax.set_xlabel("depth in the tree")
        ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
        ax.set_ylabel("ns")
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
    ax_err.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print("wrote", out)


def plot_churn(name, r, out, what="churn",
               xlabel="simulated time, s (grey: 1 % of nodes killed; red: rack failure, partition)"):
    series = r["series"]
    t = [p[0] for p in series]
    fig, ax = plt.subplots(figsize=(11, 4.5))
    ax.plot(t, [p[1] for p in series], label="RMS error, all nodes")
    ax.plot(t, [p[2] for p in series], label="largest error", alpha=0.7)
    ax.plot(t, [p[3] for p in series], label="median bound half-width", alpha=0.7)
    for e in r["events"]:
        if e["kind"] == "kill":
            ax.axvline(e["at_s"], color="grey", alpha=0.15)
        else:
            ax.axvline(e["at_s"], color="red", alpha=0.6)
            ax.annotate(" " + e["kind"], (e["at_s"], 0.02), xycoords=("data", "axes fraction"),
                        color="red", rotation=90, va="bottom", fontsize=8)
    ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("ns")
    o = r["options"]
    ax.set_title(f"{what}: {o['nodes']:,} nodes, fan-out {o['fanout']}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print("wrote", out)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--in", dest="inp", required=True)
    p.add_argument("--out", required=True)
    a = p.parse_args()
    depth = load(os.path.join(a.inp, "depth_n*_f*.json"))
    churn = load(os.path.join(a.inp, "churn_*.json"))
    takeover = load(os.path.join(a.inp, "takeover_*.json"))
    if not depth and not churn and not takeover:
        sys.exit(f"plot_scale.py: no depth_*, churn_* or takeover_*.json in {a.inp}")
    if depth:
        plot_depth(depth, os.path.join(a.out, "scale_depth.png"))
    if churn:
        name, r = max(churn, key=lambda x: x[1]["options"]["nodes"])
        plot_churn(name, r, os.path.join(a.out, "scale_churn.png"))
    if takeover:
        name, r = max(takeover, key=lambda x: x[1]["options"]["nodes"])
        plot_churn(name, r, os.path.join(a.out, "scale_takeover.png"), "master takeover",
                   "simulated time, s (red: the master dies; a standby takes over)")


if __name__ == "__main__":
    main()
