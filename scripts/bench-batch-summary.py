#!/usr/bin/env python3
"""bench-batch-summary.py: what a scripts/bench-batch.sh sweep says, over its seeds.

    scripts/bench-batch-summary.py OUT [--target LOSS] [--default LABEL]

OUT is bench-batch.sh's folder (its results.jsonl and one folder of logs per run).
For every batch (a fixed global batch or `auto`) it prints, over the seeds, how many
runs reached the target, the median tokens and wall seconds to it, and for auto the
ratio of its wall time to the best fixed batch's (the fixed batch with the least
median wall time) and to the default batch's, seed by seed and of the medians.

--target LOSS   read the target from the logs again at this loss (the first
                evaluation at or below it) instead of the one the sweep was run with
--default LABEL the batch the config trains at without `auto` (its batch_size x the
                replicas), for the "auto against the default" line

A run that never reached the target counts as infinitely slow: a batch with such a
seed has no median unless most seeds reached it.
Exit status 0; 2 on a missing or unreadable OUT.
"""
import json
import math
import os
import statistics
import sys


def usage(msg):
    sys.stderr.write("bench-batch-summary.py: %s\n" % msg)
    sys.exit(2)


def read_runs(out, target):
    path = os.path.join(out, "results.jsonl")
    try:
        runs = [json.loads(l) for l in open(path) if l.strip()]
    except OSError as e:
        usage("cannot read %s: %s" % (path, e.strerror))
    if target is None:
        return runs
    for r in runs:
        log = os.path.join(out, r["run"], "log.jsonl")
        recs = [json.loads(l) for l in open(log) if l.strip()]
        hit = next((x for x in recs if "val_loss" in x and x["val_loss"] <= target), None)
        r["target"] = target
        r["tokens_to_target"] = hit["tokens"] if hit else None
        r["wall_s_to_target"] = hit["elapsed_s"] if hit else None
    return runs


def median_or_inf(values):
    # None = not reached = infinitely slow; the median is finite only when more than
    # half of the seeds reached the target.
    return statistics.median([math.inf if v is None else v for v in values])


def fmt(v, digits=1):
    return "not reached" if v is None or math.isinf(v) else "%.*f" % (digits, v)


def main():
    args = sys.argv[1:]
    target = default = None
    out = None
    while args:
        a = args.pop(0)
        if a == "--target" and args:
            target = float(args.pop(0))
        elif a == "--default" and args:
            default = args.pop(0)
        elif out is None and not a.startswith("--"):
            out = a
        else:
            usage("usage: bench-batch-summary.py OUT [--target LOSS] [--default LABEL]")
    if out is None:
        usage("usage: bench-batch-summary.py OUT [--target LOSS] [--default LABEL]")
    runs = read_runs(out, target)
    if not runs:
        usage("no runs in %s" % out)
    labels = []
    for r in runs:
        if r["batch"] not in labels:
            labels.append(r["batch"])
    by = {b: sorted((r for r in runs if r["batch"] == b), key=lambda r: r["seed"])
          for b in labels}
    seeds = sorted({r["seed"] for r in runs})
    print("target val_loss %g, seeds %s" % (runs[0]["target"], " ".join(map(str, seeds))))
    print("%-8s %7s %16s %14s  %s" % ("batch", "reached", "median tokens", "median wall s",
                                       "wall s, seed by seed"))
    med = {}
    for b in labels:
        rs = by[b]
        med[b] = median_or_inf([r["wall_s_to_target"] for r in rs])
        print("%-8s %4d/%-2d %16s %14s  %s" % (
            b, sum(r["wall_s_to_target"] is not None for r in rs), len(rs),
            fmt(median_or_inf([r["tokens_to_target"] for r in rs]), 0), fmt(med[b]),
            " ".join(fmt(r["wall_s_to_target"]) for r in rs)))
    fixed = [b for b in labels if b != "auto"]
    if "auto" not in by or not fixed:
        return
    best = min(fixed, key=lambda b: med[b])
    for name, ref in (("best fixed", best), ("default", default)):
        if ref is None or ref not in by:
            continue
        per_seed = []
        for s in seeds:
            a = next((r["wall_s_to_target"] for r in by["auto"] if r["seed"] == s), None)
            f = next((r["wall_s_to_target"] for r in by[ref] if r["seed"] == s), None)
            per_seed.append("%s" % ("-" if a is None or f is None else "%.3f" % (a / f)))
        ratio = med["auto"] / med[ref] if math.isfinite(med[ref]) and med[ref] > 0 else math.nan
        print("auto / %s (%s): %s of the medians; seed by seed %s" % (
            name, ref, "%.3f" % ratio if math.isfinite(ratio) else "-", " ".join(per_seed)))
    for r in by["auto"]:
        print("auto, seed %d: %s" % (r["seed"], r["batch_sequence"]))


if __name__ == "__main__":
    main()
