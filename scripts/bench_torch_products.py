#!/usr/bin/env python3
"""The BF16 matrix products of bench_sgemm's table, timed in PyTorch 2.x (oneDNN).

Reads the product rows that `bench_sgemm --precision bf16` printed (name, op, M, N, K,
count per step, gentrain's median ms) and times torch.matmul on BF16 tensors of the
same shapes and orientations, so that gentrain's products can be set beside what the
vendor's library reaches on the same CPU:

  NT  C[M,N] = A[M,K] @ B[N,K]^T   (a Linear layer's forward)
  NN  C[M,N] = A[M,K] @ B[K,N]     (its input gradient)
  TN  C[M,N] = A[K,M]^T @ B[K,N]   (its weight gradient)

PyTorch writes C in BF16 where gentrain writes FP32 (half of C's memory traffic), and
reorders B for oneDNN on every call where gentrain reads a copy packed once per update:
the figures are what a PyTorch user's autocast products cost, not the same work.

Prints one row per product (PyTorch's median and best of --reps after two untimed
calls, gentrain's median from the table, and PyTorch's time over gentrain's), the
step's totals (counts per step as the table's), with --peak their share of that
peak (the measured tile peak), then one JSON line.
"""
import argparse
import json
import re
import statistics
import sys
import time

ROW = re.compile(r"^(?P<name>[a-zA-Z][a-zA-Z ]*?)\s+(?P<op>NT|NN|TN)\s+(?P<m>\d+)\s+(?P<n>\d+)"
                 r"\s+(?P<k>\d+)\s+(?P<count>\d+)\s+(?P<med>[0-9.]+)\s")


def product_rows(path):
    """bench_sgemm's product rows: [(name, op, M, N, K, count, gentrain's median ms)]"""
    rows = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            m = ROW.match(line)
            if m:
                rows.append((m["name"], m["op"], int(m["m"]), int(m["n"]), int(m["k"]),
                             int(m["count"]), float(m["med"])))
    return rows


def operands(torch, op, M, N, K):
    """The two BF16 operands and the call that multiplies them in orientation op"""
    g = torch.Generator().manual_seed(M * 7 + N * 13 + K)

    def rand(*shape):
        return torch.randn(*shape, generator=g).to(torch.bfloat16)

    if op == "NT":
        a, b = rand(M, K), rand(N, K)
        return lambda: torch.matmul(a, b.t())
    if op == "NN":
        a, b = rand(M, K), rand(K, N)
        return lambda: torch.matmul(a, b)
    a, b = rand(K, M), rand(K, N)
    return lambda: torch.matmul(a.t(), b)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("table", help="bench_sgemm --precision bf16 output")
    p.add_argument("--threads", type=int, default=2, help="torch.set_num_threads (default 2)")
    p.add_argument("--reps", type=int, default=5, help="timed calls per product (default 5)")
    p.add_argument("--peak", type=float, default=0.0, metavar="GFLOPS",
                   help="the peak to state the totals against (the measured tile peak)")
    a = p.parse_args(argv)
    if a.threads < 1 or a.reps < 1 or a.peak < 0:
        p.error("--threads and --reps must be at least 1, --peak not negative")
    rows = product_rows(a.table)
    if not rows:
        print(f"bench_torch_products: no product rows in {a.table}", file=sys.stderr)
        return 1
    try:
        import torch
    except ImportError as e:
        print(f"bench_torch_products: cannot import torch ({e})", file=sys.stderr)
        return 1
    torch.set_num_threads(a.threads)
    print(f"PyTorch {torch.__version__} BF16 matmuls, {a.threads} threads, best and median "
          f"of {a.reps} calls (BF16 C)")
    print(f"{'product':16s} {'op':3s} {'M':>6s} {'N':>6s} {'K':>6s} {'x/step':>6s} "
          f"{'med ms':>9s} {'best ms':>9s} {'GFLOP/s':>9s} {'gentrain':>9s} {'ratio':>6s}")
    shapes, step_flop, step_ms, ours_ms = [], 0.0, 0.0, 0.0
    for name, op, M, N, K, count, ours in rows:
        call = operands(torch, op, M, N, K)
        for _ in range(2):  # oneDNN's primitive made and cached, the output's pages mapped
            call()
        times = []
        for _ in range(a.reps):
            t = time.perf_counter()
            call()
            times.append((time.perf_counter() - t) * 1e3)
        med, best = statistics.median(times), min(times)
        flop = 2.0 * M * N * K
        print(f"{name:16s} {op:3s} {M:6d} {N:6d} {K:6d} {count:6d} {med:9.3f} {best:9.3f} "
              f"{flop / med / 1e6:9.1f} {ours:9.3f} {med / ours if ours > 0 else 0:5.2f}x",
              flush=True)
        shapes.append({"name": name, "op": op, "m": M, "n": N, "k": K, "count": count,
                       "ms": med, "best_ms": best, "gentrain_ms": ours})
        step_flop += count * flop
        step_ms += count * med
        ours_ms += count * ours
    print("(ms: PyTorch's; gentrain: its median ms from the table; ratio: PyTorch's time "
          "over gentrain's, above 1 where gentrain is faster)")
    if step_ms > 0 and ours_ms > 0:
        for who, ms in (("PyTorch", step_ms), ("gentrain", ours_ms)):
            share = (f", {step_flop / ms / 1e6 / a.peak:.1%} of the {a.peak:.0f} GFLOP/s peak"
                     if a.peak > 0 else "")
            print(f"step GEMMs, {who}: {step_flop / 1e9:.2f} GFLOP in {ms:.1f} ms -> "
                  f"{step_flop / ms / 1e6:.1f} GFLOP/s{share}")
        print(f"gentrain's step products take {ours_ms / step_ms:.2f}x PyTorch's time")
    print(json.dumps({"impl": "torch.matmul", "torch": torch.__version__,
                      "threads": a.threads, "reps": a.reps, "shapes": shapes,
                      "step_gflop": step_flop / 1e9, "step_gemm_ms": step_ms,
                      "gentrain_step_gemm_ms": ours_ms, "peak_gflops": a.peak}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
