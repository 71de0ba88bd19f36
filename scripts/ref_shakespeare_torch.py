#!/usr/bin/env python3
"""ref_shakespeare_torch — a plain-PyTorch yardstick for gentrain's Shakespeare result.

gentrain publishes a validation loss for data/shakespeare-cpu.cfg (byte-level
tinyshakespeare, 4 layers x 4 heads x 128 wide, context 64, batch 12, 2000 steps).
This script trains the same network (the model of bench_torch.build_model) with
stock torch.optim.AdamW on the same bytes, split the way `gentrain prepare` splits
them, and scores it on the same fixed validation windows gentrain's evaluation
reads, over several seeds. The spread over seeds says how far apart two correct
implementations can land by chance, so gentrain's figure can be judged against it.

Recipe (nanoGPT's shakespeare_char CPU settings): AdamW lr 1e-3, betas (0.9, 0.99),
eps 1e-8, weight decay 0.1 on 2-D parameters only, global grad-norm clip 1.0, no
dropout, FP32 (or --precision bf16: forward and loss under bf16 autocast);
lr = lr*(it+1)/(warmup+1) for the first 100 steps, then cosine to
min_lr 1e-4 at step `--steps` (nanoGPT's get_lr with lr_decay_iters = steps).
Training batches: random offsets with replacement each step from the global torch
RNG seeded with torch.manual_seed(seed) (which also seeds the initialisation).

Split: n_val = round(n * 0.1) (llround in src/cli/prepare.c), n_train = n - n_val.
Evaluation (src/data/windows.c windows_init + windows_eval, src/train/train.c setup_data): the
val split is one row of n_val tokens; windows of T+1 = 65 tokens start at multiples
of T = 64 (neighbours share one token), per_row = (n_val - 1 - (T - 1)) // T of them;
window k of K = eval_batches * batch_size = 1680 starts at 64 * floor(k * count / K).
The loss reported is the mean over all evaluated target tokens (equal to gentrain's
mean of batch means, every batch being 12 x 64 tokens).

Run with a Python that sees torch: /usr/bin/python3 (Debian's 1.13), or the virtual
environment `make bench` makes for PyTorch 2.x.
"""

import argparse
import json
import math
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_torch  # noqa: E402  (build_model)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seeds", default="1337,1,2,3,4", help="comma list (default 1337,1,2,3,4)")
    p.add_argument("--steps", type=int, default=2000)
    p.add_argument("--out", default=None, help="append JSON lines here")
    p.add_argument("--data", default=os.path.join(ROOT, "data", "tinyshakespeare.txt"))
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--eval_every", type=int, default=250)
    p.add_argument("--eval_batches", type=int, default=140)
    p.add_argument("--precision", choices=["fp32", "bf16"], default="fp32",
                   help="bf16: forward and loss under torch.autocast('cpu', bfloat16)")
    p.add_argument("--attention", choices=["auto", "sdpa", "manual"], default="auto",
                   help="as bench_torch.py (auto: SDPA where torch has it)")
    a = p.parse_args()
    a.seeds = [int(s) for s in a.seeds.split(",") if s.strip()]
    # the recipe (data/shakespeare-cpu.cfg)
    a.n_layer, a.n_head, a.n_embd, a.block_size, a.batch_size = 4, 4, 128, 64, 12
    a.vocab_size = 256
    a.lr, a.min_lr, a.warmup = 1e-3, 1e-4, 100
    a.betas, a.eps, a.weight_decay, a.grad_clip = (0.9, 0.99), 1e-8, 0.1, 1.0
    return a


def get_lr(it, a):
    """nanoGPT's get_lr with lr_decay_iters = a.steps."""
    if it < a.warmup:
        return a.lr * (it + 1) / (a.warmup + 1)
    if it > a.steps:
        return a.min_lr
    ratio = (it - a.warmup) / (a.steps - a.warmup)
    coeff = 0.5 * (1.0 + math.cos(math.pi * ratio))
    return a.min_lr + coeff * (a.lr - a.min_lr)


def eval_starts(n_val, T, K):
    """Start offsets of gentrain's K fixed evaluation windows in a 1-row val split."""
    per_row = (n_val - 1 - (T - 1)) // T
    if per_row < 1:
        per_row = (n_val - 1) // T
    count = per_row  # one row
    starts = []
    for k in range(K):
        j = (k * count) // K if K <= count else k % count
        starts.append((j % per_row) * T)
    return starts, count


def run_seed(torch, a, train, val_x, val_y, seed, out):
    torch.manual_seed(seed)
    model = bench_torch.build_model(torch, a)
    params = list(model.parameters())
    decay = [p for p in params if p.dim() >= 2]
    no_decay = [p for p in params if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": a.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=a.lr, betas=a.betas, eps=a.eps)
    B, T = a.batch_size, a.block_size
    offs = torch.arange(T + 1)

    def evaluate():
        model.eval()
        total, n = 0.0, 0
        with torch.no_grad():
            for i in range(0, val_x.shape[0], B):
                x, y = val_x[i:i + B], val_y[i:i + B]
                with bench_torch.autocast_context(torch, a):
                    total += model(x, y).item() * y.numel()
                n += y.numel()
        model.train()
        return total / n

    curve = []
    t0 = time.time()
    model.train()
    for it in range(a.steps):
        lr = get_lr(it, a)
        for g in opt.param_groups:
            g["lr"] = lr
        ix = torch.randint(len(train) - T - 1, (B,))
        xy = train[ix[:, None] + offs]
        x, y = xy[:, :T].contiguous(), xy[:, 1:].contiguous()
        with bench_torch.autocast_context(torch, a):
            loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, a.grad_clip)
        opt.step()
        step = it + 1
        if (a.eval_every > 0 and step % a.eval_every == 0) or step == a.steps:
            vl = evaluate()
            el = time.time() - t0
            curve.append((step, vl))
            rec = {"seed": seed, "step": step, "train_loss": round(loss.item(), 4),
                   "val_loss": round(vl, 4), "lr": lr, "elapsed_s": round(el, 1)}
            print("seed %5d step %5d  train %.4f  val %.4f  (%.0f s)" %
                  (seed, step, loss.item(), vl, el), flush=True)
            if out:
                out.write(json.dumps(rec) + "\n")
                out.flush()
    return curve, time.time() - t0


def main():
    a = parse_args()
    import torch
    torch.set_num_threads(a.threads)
    with open(a.data, "rb") as f:
        raw = f.read()
    n = len(raw)
    n_val = int(math.floor(n * 0.1 + 0.5))  # llround(n * 0.1), as src/cli/prepare.c
    n_train = n - n_val
    data = torch.frombuffer(bytearray(raw), dtype=torch.uint8).long()
    train, val = data[:n_train], data[n_train:]
    T, K = a.block_size, a.eval_batches * a.batch_size
    starts, count = eval_starts(n_val, T, K)
    idx = torch.tensor(starts)[:, None] + torch.arange(T + 1)
    win = val[idx]
    val_x, val_y = win[:, :T].contiguous(), win[:, 1:].contiguous()
    print("data: %d bytes, train %d, val %d; eval %d of %d windows of %d tokens "
          "(starts %d..%d); torch %s, %d thread(s)" %
          (n, n_train, n_val, K, count, T + 1, starts[0], starts[-1], torch.__version__,
           torch.get_num_threads()), flush=True)

    out = open(a.out, "a") if a.out else None
    results = []
    for seed in a.seeds:
        curve, wall = run_seed(torch, a, train, val_x, val_y, seed, out)
        results.append((seed, curve[-1][1], wall))
        if out:
            out.write(json.dumps({"seed": seed, "final_val_loss": round(curve[-1][1], 4),
                                  "wall_s": round(wall, 1),
                                  "curve": [[s, round(v, 4)] for s, v in curve]}) + "\n")
            out.flush()
    print()
    print("%6s %14s %9s" % ("seed", "final val loss", "wall s"))
    for seed, vl, wall in results:
        print("%6d %14.4f %9.1f" % (seed, vl, wall))
    vals = [r[1] for r in results]
    sd = statistics.stdev(vals) if len(vals) > 1 else float("nan")
    print("mean %.4f  sd %.4f  (n = %d)" % (statistics.mean(vals), sd, len(vals)))
    if out:
        out.write(json.dumps({"summary": True, "seeds": a.seeds,
                              "mean": round(statistics.mean(vals), 4),
                              "sd": round(sd, 4) if len(vals) > 1 else None}) + "\n")
        out.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
