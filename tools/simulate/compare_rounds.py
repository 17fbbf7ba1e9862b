#!/usr/bin/env python3
"""Compares two directories of accuracy tables (measure_round.sh).

  compare_rounds.py BASE NEW [--threshold=0.01] [--column=adaptive|daemon]

For each table both directories hold (s0.txt, r3.txt, ...): how many
scenarios hold the target (the table's verdict for the adaptive
estimator; for the daemon, <= 1.05 x the best fixed window and <= the
300 s window), the geometric mean of the ratio to the
best fixed window, and every scenario whose ratio moved by more than the
threshold or whose verdict changed. Then the totals per kind of table
(s standard, v variants, k kinds, r random). Exits 1 on unreadable input.
"""

import argparse
import math
import os
import signal
import sys

# Columns of a table row (accuracy_table's layout), after the scenario.
_RATIO_TO_BEST = {"adaptive": 8, "daemon": 10}
_RATIO_TO_300 = {"adaptive": 9, "daemon": 11}
_TARGET = 0.05


def parse_table(path, column):
    """Rows of one table: scenario -> (ratio to best, ratio to 300 s, holds)."""
    rows = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            if not line.startswith("| ") or line.startswith("| scenario"):
                continue
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(cells) < 14:
                continue
            try:
                to_best = float(cells[_RATIO_TO_BEST[column]])
                to_300 = float(cells[_RATIO_TO_300[column]])
            except ValueError:
                continue
            if column == "adaptive":
                holds = cells[-1] == "holds"
            else:  # the row has no bound violations of the daemon's
                holds = to_best <= 1 + _TARGET and to_300 <= 1
            rows[cells[0]] = (to_best, to_300, holds)
    return rows


def load(directory, column):
    if not os.path.isdir(directory):
        raise OSError(f"not a directory: {directory}")
    tables = {}
    for name in sorted(os.listdir(directory)):
        if name.endswith(".txt"):
            rows = parse_table(os.path.join(directory, name), column)
            if rows:
                tables[name[:-4]] = rows
    if not tables:
        raise OSError(f"no accuracy tables (*.txt with table rows) in {directory}")
    return tables


def geometric_mean(values):
    return math.exp(sum(math.log(v) for v in values) / len(values))


def verdict(holds):
    return "holds" if holds else "MISSED"


def table_order(name):
    """s, v, k, r, then by number: s0 s10 v0 k0 k10 r1 r2 ..."""
    kinds = "svkr"
    head, number = name[:1], name[1:]
    return (kinds.index(head) if head in kinds else len(kinds),
            int(number) if number.isdigit() else 0, name)


def compare(base, new, threshold, out):
    totals = {}
    common = sorted(set(base) & set(new), key=table_order)
    for table in common:
        a, b = base[table], new[table]
        names = [n for n in a if n in b]
        if not names:
            continue
        held_a = sum(a[n][2] for n in names)
        held_b = sum(b[n][2] for n in names)
        gm_a = geometric_mean([a[n][0] for n in names])
        gm_b = geometric_mean([b[n][0] for n in names])
        out.write(f"{table:5s} holds {held_a:3d} -> {held_b:3d} of {len(names):3d}"
                  f"   geometric mean {gm_a:.4f} -> {gm_b:.4f}\n")
        for n in names:
            (ra, ta, ha), (rb, tb, hb) = a[n], b[n]
            if abs(ra - rb) > threshold or ha != hb:
                out.write(f"    {n:50s} {ra:.3f}/{ta:.3f} -> {rb:.3f}/{tb:.3f}"
                          f"  {verdict(ha)} -> {verdict(hb)}\n")
        t = totals.setdefault(table[:1], [0, 0, 0])
        t[0] += held_a
        t[1] += held_b
        t[2] += len(names)
    labels = {"s": "standard", "v": "variants", "k": "kinds", "r": "random"}
    out.write("totals:")
    for kind in sorted(totals, key=lambda k: "svkr".find(k)):
        held_a, held_b, count = totals[kind]
        out.write(f"  {labels.get(kind, kind)} {held_a} -> {held_b} of {count}")
    out.write("\n")
    only = sorted(set(base) ^ set(new), key=table_order)
    if only:
        out.write("in one directory only: " + " ".join(only) + "\n")


def main(argv):
    parser = argparse.ArgumentParser(
        description="Compares two directories of accuracy tables "
                    "(tools/simulate/measure_round.sh).")
    parser.add_argument("base", help="the directory measured before the change")
    parser.add_argument("new", help="the directory measured with it")
    parser.add_argument("--threshold", type=float, default=0.01,
                        help="list scenarios whose ratio to the best fixed "
                             "window moved by more than this (default 0.01)")
    parser.add_argument("--column", choices=sorted(_RATIO_TO_BEST),
                        default="adaptive",
                        help="the estimator compared (default adaptive)")
    args = parser.parse_args(argv)
    if args.threshold < 0:
        parser.error(f"--threshold must be >= 0, not {args.threshold}")
    try:
        base = load(args.base, args.column)
        new = load(args.new, args.column)
    except OSError as e:
        print(f"compare_rounds.py: {e}", file=sys.stderr)
        return 1
    if not set(base) & set(new):
        print(f"compare_rounds.py: {args.base} and {args.new} have no table "
              "in common", file=sys.stderr)
        return 1
    compare(base, new, args.threshold, sys.stdout)
    return 0


if __name__ == "__main__":
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # quiet under `| head`
    sys.exit(main(sys.argv[1:]))
