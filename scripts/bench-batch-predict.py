#!/usr/bin/env python3
"""bench-batch-predict.py: what a sweep of scripts/bench-batch.sh would measure, predicted
from one fixed-batch run's log, for this link or another.

The model is the one `global_batch_size = auto` steers by (docs/adaptive-batch.md):
  - a step of B sequences makes 1 / (1 + B_noise / B) of the progress of a step with an
    infinite batch (McCandlish et al. 2018: S(B) = S_min (1 + B_noise / B));
  - the noise scale depends on how far training is, not on the batch that got it there,
    so the run's own estimates, placed on its progress, serve every batch;
  - a step costs B x (compute a sequence) + (a fixed part: the all-reduce and whatever
    does not grow with the batch), both medians of the log's steps (`ms`, `comm_ms`).
Each fixed batch then needs the progress the logged run had made at its first
evaluation at or below the target; auto takes, step by step, the multiple of the logged
batch (up to 16x) with the most progress per second. Printed per batch: steps, tokens
and seconds to the target (evaluations left out), and auto's ratios.

What it leaves out: a fixed run's token budget (with the same lr and a fixed budget a
large batch may never reach the target, however the model counts) and the lr it trains
at; the noise of single estimates (it reads the smoothed ones); the machine's drift.

Usage:
  bench-batch-predict.py LOG [--target LOSS] [--batches "48 96 192 384"]
                         [--comm-ms MS] [--compute-ms MS]
LOG is a fixed-batch run's log.jsonl with noise scale estimates (noise_every) and
evaluations. --comm-ms / --compute-ms replace the measured fixed and per-step compute
parts (another link, another machine). Default target: the last evaluation's loss.
Exit status 0, 2 on a bad argument or a log it cannot use.
"""
import argparse
import bisect
import json
import statistics
import sys


def die(msg):
    print("bench-batch-predict.py: " + msg, file=sys.stderr)
    sys.exit(2)


def read_log(path):
    try:
        with open(path) as f:
            recs = [json.loads(line) for line in f if line.strip()]
    except (OSError, ValueError) as e:
        die("cannot read %s: %s" % (path, e))
    recs = [r for r in recs if isinstance(r, dict) and "step" in r]
    if not recs:
        die("%s has no step records" % path)
    batches = {r.get("global_batch_size") for r in recs}
    if len(batches) != 1 or not isinstance(next(iter(batches)), int):
        die("%s is not a fixed-batch run (global_batch_size %s)" % (path, sorted(map(str, batches))))
    return recs, next(iter(batches))


def main():
    ap = argparse.ArgumentParser(add_help=True)
    ap.add_argument("log")
    ap.add_argument("--target", type=float)
    ap.add_argument("--batches")
    ap.add_argument("--comm-ms", type=float)
    ap.add_argument("--compute-ms", type=float)
    a = ap.parse_args()
    recs, g0 = read_log(a.log)
    last = recs[-1]
    seq_len = last["tokens"] / (last["step"] * g0)  # tokens = steps x batch x block_size
    noise = [(r["step"], r["noise_scale"] / seq_len) for r in recs if "noise_scale" in r]
    evals = [(r["step"], r["val_loss"]) for r in recs if "val_loss" in r]
    if len(noise) < 2 or not evals:
        die("%s needs noise scale estimates and evaluations" % a.log)
    target = a.target if a.target is not None else evals[-1][1]
    hit = next((s for s, v in evals if v <= target), None)
    if hit is None:
        die("the run never reached val_loss %g (best %.4f)" % (target, min(v for _, v in evals)))
    comm = a.comm_ms if a.comm_ms is not None else statistics.median(r["comm_ms"] for r in recs)
    compute = (a.compute_ms if a.compute_ms is not None
               else statistics.median(r["ms"] - r["comm_ms"] for r in recs))
    if comm < 0 or compute <= 0:
        die("the step costs must be compute > 0 and comm >= 0 ms")
    per_seq = compute / g0
    try:
        batches = [int(b) for b in (a.batches or " ".join(str(g0 * k) for k in (1, 2, 4, 8))).split()]
    except ValueError:
        die("--batches must be whole numbers of sequences")
    if not batches or min(batches) <= 0:
        die("--batches must be positive")

    # B_noise (sequences) at each step of the logged run: the latest estimate (the log's
    # are smoothed); before the first, the first.
    steps = [s for s, _ in noise]

    def bn_at_step(s):
        i = bisect.bisect_right(steps, s) - 1
        return max(noise[max(i, 0)][1], 1e-9)

    progress = [0.0]  # progress after each logged step
    for s in range(1, hit + 1):
        progress.append(progress[-1] + 1 / (1 + bn_at_step(s) / g0))
    need = progress[-1]

    def bn_at(x):  # the noise scale once progress x is made
        return bn_at_step(max(1, bisect.bisect_left(progress, x)))

    def run(choose):
        x = t = seqs = n = 0
        seq_of = []
        while x < need:
            bn = bn_at(x)
            b = choose(bn)
            x += 1 / (1 + bn / b)
            t += (b * per_seq + comm) / 1000
            seqs += b
            n += 1
            if seq_of and seq_of[-1][1] == b:
                seq_of[-1][0] += 1
            else:
                seq_of.append([1, b])
        return n, seqs, t, " ".join("%dx%d" % (c, b) for c, b in seq_of)

    choices = [g0 * k for k in range(1, 17)]

    def goodput(bn):
        return max(choices, key=lambda b: (1 / (1 + bn / b)) / (b * per_seq + comm))

    print("predicted from %s: batch %d, %.0f-token sequences, target val_loss %g (its step %d)"
          % (a.log, g0, seq_len, target, hit))
    print("step cost: %.2f ms a sequence + %.1f ms a step (%s); the model of "
          "docs/adaptive-batch.md, not a measurement" % (
              per_seq, comm, "given" if a.comm_ms is not None else "the log's all-reduce"))
    print("%-8s %7s %12s %10s" % ("batch", "steps", "tokens", "seconds"))
    fixed = {}
    for b in batches:
        n, seqs, t, _ = run(lambda bn, b=b: b)
        fixed[b] = t
        print("%-8d %7d %12.0f %10.1f" % (b, n, seqs * seq_len, t))
    n, seqs, t, sequence = run(goodput)
    print("%-8s %7d %12.0f %10.1f  %s" % ("auto", n, seqs * seq_len, t, sequence))
    best = min(fixed, key=fixed.get)
    print("auto / %d (logged): %.3f" % (g0, t / fixed[g0]) if g0 in fixed else
          "auto / %d (logged): -" % g0)
    print("auto / best fixed (%d): %.3f" % (best, t / fixed[best]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
