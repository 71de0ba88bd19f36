#!/usr/bin/env python3
"""bench_torch — the PyTorch baseline for gentrain's throughput target.

Trains the same GPT-2 shaped decoder as gentrain (learned token + position
embeddings, pre-LayerNorm blocks, one fused qkv Linear, tanh-GELU MLP, final
LayerNorm, output tied to the token embedding, no dropout, FP32, AdamW with
weight decay on 2-D weights only, gradient clipping) in plain PyTorch on the
CPU, and times whole training steps: zero_grad, forward, loss, backward,
clip_grad_norm_, AdamW step. The batch is drawn before the clock starts.

Prints one human line and one JSON line {"impl":"pytorch",...} with the median
step time over the timed steps (after the warm-up steps), tokens/s, the model
GFLOP/s, the parameter count and how torch and its BLAS are configured.

With --variants it instead reruns itself once per environment variant (the
thread settings have to be in place before torch and its BLAS load), prints a
table of all of them and, last, a JSON line for the best one, carrying all
variants under "variants". That best figure is the baseline gentrain is held
to, so every variant here is a legitimate way to run the stock package:
  default       as installed
  openblas1     OPENBLAS_NUM_THREADS=1 (BLAS single-threaded, torch's OpenMP owns the cores)
  omp           OMP_NUM_THREADS=<threads> (OpenBLAS's pthread pool also reads it)
  passive       OMP_WAIT_POLICY=PASSIVE (torch's idle OpenMP threads sleep instead of spinning)
  blas-openmp   the OpenMP build of OpenBLAS first on LD_LIBRARY_PATH (the same as
                pointing Debian's libblas.so.3 alternative at it), when the loaded
                BLAS sits in an openblas-pthread folder with an openblas-openmp
                sibling; its threads are then torch's own OpenMP threads

Written for torch 1.13 (no scaled_dot_product_attention there): attention is
matmul + masked_fill + softmax + matmul over the full T x T scores.
Run it with the Python that sees torch ($PYTHON in bench.sh; on Debian /usr/bin/python3).
"""

import argparse
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import time


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n_layer", type=int, default=6)
    p.add_argument("--n_head", type=int, default=6)
    p.add_argument("--n_embd", type=int, default=384)
    p.add_argument("--block_size", type=int, default=256)
    p.add_argument("--batch_size", type=int, default=8)
    p.add_argument("--vocab_size", type=int, default=256)
    p.add_argument("--steps", type=int, default=10, help="timed steps (default 10)")
    p.add_argument("--warmup-steps", "--warmup_steps", dest="warmup_steps", type=int,
                   default=3, help="untimed steps first (default 3)")
    p.add_argument("--threads", type=int, default=2, help="torch.set_num_threads (default 2)")
    p.add_argument("--data", default=None,
                   help="raw text file whose bytes are the tokens (default: random bytes)")
    p.add_argument("--lr", type=float, default=6e-4)
    p.add_argument("--seed", type=int, default=1337)
    p.add_argument("--foreach", choices=["on", "off"], default="on",
                   help="AdamW foreach (multi-tensor) implementation (default on)")
    p.add_argument("--precision", choices=["fp32", "bf16"], default="fp32",
                   help="fp32, or bf16 = the forward and loss under "
                        "torch.autocast('cpu', torch.bfloat16) (default fp32)")
    p.add_argument("--attention", choices=["auto", "sdpa", "manual"], default="auto",
                   help="sdpa = F.scaled_dot_product_attention(is_causal=True), as PyTorch "
                        "2.x users write it; manual = matmul + mask + softmax + matmul; "
                        "auto = sdpa where torch has it (default)")
    p.add_argument("--label", default="single", help="variant name put in the JSON line")
    p.add_argument("--variants", default=None, metavar="LIST",
                   help="comma-separated variants to run as subprocesses, or 'all'")
    p.add_argument("--timeout", type=float, default=600.0,
                   help="seconds allowed per variant subprocess (default 600)")
    p.add_argument("--wait-idle", "--wait_idle", dest="wait_idle", type=float, default=60.0,
                   help="with --variants: wait up to this many seconds for a >= 90%% idle "
                        "machine before each run (default 60, 0 = do not wait)")
    p.add_argument("--retries", type=int, default=2,
                   help="with --variants: reruns of a variant that other processes "
                        "disturbed (default 2)")
    a = p.parse_args(argv)
    if a.n_embd % a.n_head:
        p.error("n_embd (%d) must be a multiple of n_head (%d)" % (a.n_embd, a.n_head))
    if a.steps < 1 or a.warmup_steps < 0 or a.threads < 1:
        p.error("need steps >= 1, warmup-steps >= 0, threads >= 1")
    return a


def flops_per_step(L, C, V, B, T):
    """Floating point operations of one training step, the count every impl in
    bench.sh is compared with: each weight matrix costs 2 flops per multiply-add
    forward and 4 backward (input and weight gradients), i.e. 6 * tokens *
    (L*12*C*C + V*C) for the qkv, proj, fc, fc-proj and tied logits matrices;
    attention's QK^T and AV products are counted in full (T x T, no causal
    saving): 4*B*T*T*C per layer forward, twice that backward."""
    return 6.0 * B * T * (L * 12.0 * C * C + V * C) + 12.0 * L * B * T * T * C


# --------------------------------------------------------------------------------------
# BLAS discovery: which library torch really loaded, and how it threads.

def loaded_blas_paths():
    """Paths of the BLAS shared objects mapped into this process (Linux only)."""
    found = []
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                parts = line.split()
                if len(parts) < 6:
                    continue
                path = parts[5]
                base = os.path.basename(path)
                if ("blas" in base or "lapack" in base) and path not in found:
                    found.append(path)
    except OSError:
        pass
    return found


def openblas_info(paths):
    """Asks a loaded OpenBLAS for its config, thread model and thread count."""
    import ctypes
    names = {0: "sequential", 1: "pthread", 2: "openmp"}
    for path in paths:
        if "openblas" not in os.path.basename(path):
            continue
        try:
            lib = ctypes.CDLL(path)
            lib.openblas_get_config.restype = ctypes.c_char_p
            return {
                "lib": os.path.realpath(path),
                "config": lib.openblas_get_config().decode().strip(),
                "parallel": names.get(lib.openblas_get_parallel(), "unknown"),
                "threads": lib.openblas_get_num_threads(),
            }
        except (OSError, AttributeError):
            continue
    return None


def cpu_busy_s():
    """(seconds all CPUs were busy, seconds this process ran) so far; the first is
    None where /proc/stat is unreadable. Their difference over a run is the CPU time
    something else took: on a shared 2-core machine that decides whether a number
    can be trusted."""
    own = os.times()
    own_s = own.user + own.system
    try:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None, own_s
    # user nice system idle iowait irq softirq steal ...; busy = all but idle, iowait
    busy = sum(v[:8]) - v[3] - v[4]
    return busy / os.sysconf("SC_CLK_TCK"), own_s


def torch_config(torch):
    show = torch.__config__.show()
    blas_info = "unknown"
    for tok in show.replace(",", " ").split():
        if tok.startswith("BLAS_INFO="):
            blas_info = tok.split("=", 1)[1]
    paths = loaded_blas_paths()
    return {
        "torch": torch.__version__,
        "blas_info": blas_info,
        "blas_libs": paths,
        "openblas": openblas_info(paths),
        "threads": torch.get_num_threads(),
        "interop_threads": torch.get_num_interop_threads(),
        "mkldnn": bool(torch.backends.mkldnn.is_available()),
        "env": {k: os.environ[k] for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                                           "OMP_WAIT_POLICY", "GOMP_SPINCOUNT",
                                           "LD_LIBRARY_PATH") if k in os.environ},
    }


# --------------------------------------------------------------------------------------
# The model.

def attention_kind(torch, a):
    have = hasattr(torch.nn.functional, "scaled_dot_product_attention")
    want = getattr(a, "attention", "auto")
    if want == "sdpa" and not have:
        sys.exit("bench_torch: --attention sdpa needs PyTorch 2.x (torch %s)" %
                 torch.__version__)
    return "sdpa" if (want != "manual" and have) else "manual"


def autocast_context(torch, a):
    """The context the forward and loss run in: bf16 autocast, or nothing."""
    import contextlib
    if getattr(a, "precision", "fp32") == "bf16":
        return torch.autocast("cpu", dtype=torch.bfloat16)
    return contextlib.nullcontext()


def build_model(torch, a):
    nn = torch.nn
    F = torch.nn.functional
    use_sdpa = attention_kind(torch, a) == "sdpa"

    class Attention(nn.Module):
        # x (B,T,C) -> qkv (B,T,3C) -> per head (B,nh,T,hs) -> att (B,nh,T,T) -> (B,T,C)
        def __init__(self):
            super().__init__()
            self.nh = a.n_head
            self.c_attn = nn.Linear(a.n_embd, 3 * a.n_embd)
            self.c_proj = nn.Linear(a.n_embd, a.n_embd)
            mask = torch.tril(torch.ones(a.block_size, a.block_size, dtype=torch.bool))
            self.register_buffer("mask", mask.view(1, 1, a.block_size, a.block_size),
                                 persistent=False)

        def forward(self, x):
            B, T, C = x.shape
            hs = C // self.nh
            q, k, v = self.c_attn(x).split(C, dim=2)
            q = q.view(B, T, self.nh, hs).transpose(1, 2)
            k = k.view(B, T, self.nh, hs).transpose(1, 2)
            v = v.view(B, T, self.nh, hs).transpose(1, 2)
            if use_sdpa:
                y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
                return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))
            att = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))
            att = att.masked_fill(~self.mask[:, :, :T, :T], float("-inf"))
            att = F.softmax(att, dim=-1)
            y = torch.matmul(att, v).transpose(1, 2).contiguous().view(B, T, C)
            return self.c_proj(y)

    class MLP(nn.Module):
        # x (B,T,C) -> (B,T,4C) -> GELU(tanh) -> (B,T,C)
        def __init__(self):
            super().__init__()
            self.c_fc = nn.Linear(a.n_embd, 4 * a.n_embd)
            self.c_proj = nn.Linear(4 * a.n_embd, a.n_embd)

        def forward(self, x):
            return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1 = nn.LayerNorm(a.n_embd)
            self.attn = Attention()
            self.ln_2 = nn.LayerNorm(a.n_embd)
            self.mlp = MLP()

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(a.vocab_size, a.n_embd)
            self.wpe = nn.Embedding(a.block_size, a.n_embd)
            self.h = nn.ModuleList([Block() for _ in range(a.n_layer)])
            self.ln_f = nn.LayerNorm(a.n_embd)
            self.lm_head = nn.Linear(a.n_embd, a.vocab_size, bias=False)
            self.lm_head.weight = self.wte.weight  # tied
            for name, p in self.named_parameters():
                if name.endswith("bias"):
                    nn.init.zeros_(p)
                elif p.dim() == 2:
                    std = 0.02
                    if name.endswith("c_proj.weight"):
                        std /= math.sqrt(2 * a.n_layer)
                    nn.init.normal_(p, mean=0.0, std=std)

        def forward(self, idx, targets):
            B, T = idx.shape
            pos = torch.arange(T, dtype=torch.long)
            x = self.wte(idx) + self.wpe(pos)
            for blk in self.h:
                x = blk(x)
            logits = self.lm_head(self.ln_f(x))
            return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))

    return GPT()


def make_batcher(torch, a):
    """Returns next() -> (inputs, targets), both (B,T) int64."""
    B, T = a.batch_size, a.block_size
    gen = torch.Generator().manual_seed(a.seed)
    if a.data is None:
        def next_random():
            xy = torch.randint(0, a.vocab_size, (B, T + 1), generator=gen)
            return xy[:, :T].contiguous(), xy[:, 1:].contiguous()
        return next_random
    with open(a.data, "rb") as f:
        raw = f.read()
    if len(raw) < T + 2:
        sys.exit("bench_torch: %s: %d bytes, need at least %d" % (a.data, len(raw), T + 2))
    data = torch.frombuffer(bytearray(raw), dtype=torch.uint8).long() % a.vocab_size

    def next_file():
        starts = torch.randint(0, len(raw) - T - 1, (B,), generator=gen)
        xy = torch.stack([data[s:s + T + 1] for s in starts.tolist()])
        return xy[:, :T].contiguous(), xy[:, 1:].contiguous()
    return next_file


def run_single(a):
    import torch
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    model = build_model(torch, a)
    model.train()
    params = list(model.parameters())  # the tied weight appears once
    n_params = sum(p.numel() for p in params)
    decay = [p for p in params if p.dim() >= 2]
    no_decay = [p for p in params if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=a.lr, betas=(0.9, 0.99), eps=1e-8,
                            foreach=(a.foreach == "on"))
    next_batch = make_batcher(torch, a)

    times, losses = [], []
    t_start = time.perf_counter()
    busy0 = None
    for step in range(a.warmup_steps + a.steps):
        x, y = next_batch()
        if step == a.warmup_steps:
            busy0 = cpu_busy_s()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with autocast_context(torch, a):
            loss = model(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        lv = loss.item()
        t1 = time.perf_counter()
        losses.append(lv)
        if step >= a.warmup_steps:
            times.append(t1 - t0)
    busy1 = cpu_busy_s()
    wall = time.perf_counter() - t_start
    other = None
    if busy0[0] is not None and busy1[0] is not None:
        # cores' worth of CPU used by other processes while the timed steps ran
        other = max(0.0, ((busy1[0] - busy0[0]) - (busy1[1] - busy0[1])) / sum(times))

    tokens = a.batch_size * a.block_size
    med = statistics.median(times)
    flops = flops_per_step(a.n_layer, a.n_embd, a.vocab_size, a.batch_size, a.block_size)
    cfg = torch_config(torch)
    ob = cfg["openblas"]
    blas_desc = cfg["blas_info"]
    if ob:
        blas_desc = "%s, %s, %d thr" % (" ".join(ob["config"].split()[:2]),
                                        ob["parallel"], ob["threads"])
    res = {
        "impl": "pytorch",
        "variant": a.label,
        "n_layer": a.n_layer, "n_head": a.n_head, "n_embd": a.n_embd,
        "block_size": a.block_size, "batch_size": a.batch_size,
        "vocab_size": a.vocab_size, "threads": a.threads,
        "params": n_params,
        "warmup_steps": a.warmup_steps, "steps": a.steps,
        "ms": round(med * 1e3, 3),
        "ms_min": round(min(times) * 1e3, 3),
        "ms_max": round(max(times) * 1e3, 3),
        "step_ms": [round(t * 1e3, 3) for t in times],
        "tokens_per_s": round(tokens / med, 1),
        "gflop_per_step": round(flops / 1e9, 4),
        "gflops": round(flops / med / 1e9, 2),
        "loss_first": round(losses[0], 4), "loss_last": round(losses[-1], 4),
        "wall_s": round(wall, 2),
        "other_load_cores": None if other is None else round(other, 2),
        "data": "random" if a.data is None else "file",
        "foreach": a.foreach == "on",
        "precision": a.precision,
        "max_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0),
        "attention": attention_kind(torch, a),
        "config": cfg,
        "blas": blas_desc,
    }
    print("pytorch %-12s %s %-6s %8.1f ms/step  %9.1f tokens/s  %7.2f GFLOP/s  params %d  "
          "torch %s, %d threads, BLAS %s%s" %
          (a.label, a.precision, res["attention"], res["ms"], res["tokens_per_s"], res["gflops"], n_params,
           cfg["torch"], cfg["threads"], blas_desc,
           "" if other is None or other < 0.2 else
           "  [other processes used %.1f cores]" % other))
    print(json.dumps(res, sort_keys=False))
    sys.stdout.flush()
    return res


# --------------------------------------------------------------------------------------
# Variants: each one is a fresh process, since the thread settings must precede loading.

def blas_openmp_dir():
    """The openblas-openmp sibling of the openblas-pthread folder torch's BLAS is
    loaded from, if there is one (Debian's layout); TORCH_BLAS_OPENMP_DIR overrides."""
    d = os.environ.get("TORCH_BLAS_OPENMP_DIR")
    if d:
        return d if os.path.isdir(d) else None
    probe = subprocess.run(
        [sys.executable, "-c",
         "import torch, json, os\n"
         "print(json.dumps([os.path.realpath(l.split()[5]) for l in open('/proc/self/maps')"
         " if len(l.split()) >= 6 and 'blas' in os.path.basename(l.split()[5])]))"],
        capture_output=True, text=True)
    try:
        paths = json.loads(probe.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return None
    for path in paths:
        folder = os.path.dirname(path)
        if os.path.basename(folder) == "openblas-pthread":
            sib = os.path.join(os.path.dirname(folder), "openblas-openmp")
            if os.path.exists(os.path.join(sib, "libblas.so.3")):
                return sib
    return None


def variant_envs(a, wanted):
    base = dict(os.environ)
    for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "OMP_WAIT_POLICY",
              "GOMP_SPINCOUNT"):
        base.pop(k, None)
    out = []
    for name in wanted:
        env = dict(base)
        if name == "default":
            pass
        elif name == "openblas1":
            env["OPENBLAS_NUM_THREADS"] = "1"
        elif name == "omp":
            env["OMP_NUM_THREADS"] = str(a.threads)
        elif name == "passive":
            env["OMP_WAIT_POLICY"] = "PASSIVE"
        elif name == "blas-openmp":
            d = blas_openmp_dir()
            if d is None:
                print("pytorch %-12s skipped: no OpenMP build of OpenBLAS next to the "
                      "loaded one" % name)
                continue
            env["LD_LIBRARY_PATH"] = d + (":" + env["LD_LIBRARY_PATH"]
                                          if env.get("LD_LIBRARY_PATH") else "")
            env["OMP_NUM_THREADS"] = str(a.threads)
        else:
            sys.exit("bench_torch: unknown variant '%s' (default, openblas1, omp, passive, "
                     "blas-openmp)" % name)
        out.append((name, env))
    return out


def disturbed(res, limit=0.2):
    o = res.get("other_load_cores")
    return o is not None and o >= limit


def idle_fraction(seconds=2.0):
    """Fraction of all CPU time spent idle over the next `seconds` (None off Linux)."""
    def sample():
        with open("/proc/stat") as f:
            return [int(x) for x in f.readline().split()[1:9]]
    try:
        v0 = sample()
        time.sleep(seconds)
        v1 = sample()
    except (OSError, ValueError):
        return None
    d = [y - x for x, y in zip(v0, v1)]
    return (d[3] + d[4]) / max(1, sum(d))


def wait_idle(limit_s):
    """Waits until the machine is at least 90% idle, at most limit_s seconds; returns
    the seconds waited beyond the first sample."""
    t0 = time.time()
    while limit_s > 0:
        f = idle_fraction()
        if f is None or f >= 0.9 or time.time() - t0 >= limit_s:
            break
    return max(0.0, time.time() - t0 - 2.0)


def run_child(name, cmd, env, timeout):
    """One variant in a fresh process; its parsed JSON line, or None on failure."""
    try:
        cp = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        print("pytorch %-12s failed: over %.0f s" % (name, timeout))
        return None
    res = None
    for line in cp.stdout.splitlines():
        if line.startswith('{"impl"'):
            res = json.loads(line)
        else:
            print(line)
    if cp.returncode != 0 or res is None:
        print("pytorch %-12s failed (exit %d): %s" %
              (name, cp.returncode, cp.stderr.strip().splitlines()[-1:]))
        return None
    return res


def run_variants(a, argv):
    all_names = ["default", "openblas1", "omp", "passive", "blas-openmp"]
    wanted = all_names if a.variants == "all" else [v for v in a.variants.split(",") if v]
    # the child gets our arguments minus --variants/--label
    child_args, skip = [], False
    for i, tok in enumerate(argv):
        if skip:
            skip = False
            continue
        if tok in ("--variants", "--label"):
            skip = True
            continue
        if tok.startswith("--variants=") or tok.startswith("--label="):
            continue
        child_args.append(tok)
    results = []
    for name, env in variant_envs(a, wanted):
        cmd = [sys.executable, os.path.abspath(__file__)] + child_args + ["--label", name]
        runs = []
        # Another process taking CPU only ever makes a variant look slower, which would
        # flatter gentrain: wait for a quiet machine first, and rerun a disturbed run.
        for attempt in range(1 + a.retries):
            waited = wait_idle(a.wait_idle)
            if waited >= 1:
                print("pytorch %-12s waited %.0f s for an idle machine" % (name, waited))
            res = run_child(name, cmd, env, a.timeout)
            if res is None:
                break
            runs.append(res)
            if not disturbed(res):
                break
        if not runs:
            continue
        clean = [r for r in runs if not disturbed(r)]
        results.append(min(clean or runs, key=lambda r: r["ms"]))
        sys.stdout.flush()
    if not results:
        sys.exit("bench_torch: no variant ran")
    clean = [r for r in results if not disturbed(r)]
    best = min(clean or results, key=lambda r: r["ms"])
    print()
    print("%-12s %10s %12s %9s %9s %6s  %s" % ("variant", "ms/step", "tokens/s", "GFLOP/s",
                                                "vs best", "other", "BLAS"))
    for r in results:
        other = r.get("other_load_cores")
        print("%-12s %10.1f %12.1f %9.2f %8.2fx %6s  %s%s" %
              (r["variant"], r["ms"], r["tokens_per_s"], r["gflops"],
               r["ms"] / best["ms"], "-" if other is None else "%.2f" % other,
               r["blas"], "   <- baseline" if r is best else ""))
    print("(other = cores' worth of CPU that other processes used during the timed "
          "steps; above 0.2 the figure is not clean)")
    if disturbed(best):
        print("warning: every variant was disturbed by other processes; the baseline is "
              "too slow, rerun on an idle machine")
    summary = dict(best)
    summary["best_of"] = [r["variant"] for r in results]
    summary["baseline_clean"] = not disturbed(best)
    summary["variants"] = [{k: r.get(k) for k in ("variant", "ms", "ms_min", "ms_max",
                                                  "tokens_per_s", "gflops", "blas",
                                                  "other_load_cores")}
                           for r in results]
    print(json.dumps(summary))
    return 0


def main():
    argv = sys.argv[1:]
    a = parse_args(argv)
    if a.variants:
        return run_variants(a, argv)
    run_single(a)
    return 0


if __name__ == "__main__":
    sys.exit(main())
