#!/bin/bash
# bench.sh — gentrain against PyTorch on the throughput target, side by side.
#
# Target: gentrain's tokens/s >= PyTorch's (CPU, FP32) on the GPT config
# n_layer=6 n_head=6 n_embd=384 block_size=256 batch_size=8, vocab 256, THREADS threads.
#
#   (a) bench_sgemm on that config's GEMM shapes: what the BLAS delivers here;
#   (b) gentrain: prepare tinyshakespeare as bytes, train STEPS steps, read the
#       JSON Lines log, median over the steps after the first two;
#   (c) scripts/bench_torch.py, once per thread-setting variant; the best is the baseline;
#   (d) a table (impl, ms/step, tokens/s, GFLOP/s, tokens/s vs PyTorch, GFLOP/s as a
#       fraction of the sgemm step average) and one JSON line with every figure.
#
# Environment:
#   GENTRAIN      path to the gentrain binary (part b skipped when unset)
#   BENCH_SGEMM   path to the built bench_sgemm (part a skipped when unset)
#   PYTHON        Python with torch 1.13 (default /usr/bin/python3, Debian's, which sees
#                 python3-torch); also does the JSON arithmetic, so it is required
#   top_srcdir    source tree (default: the parent of this script's folder)
#   THREADS       threads for every implementation (default 2)
#   STEPS         gentrain training steps (default 12, at least 3)
#   TORCH_STEPS / TORCH_WARMUP   timed / untimed PyTorch steps per variant (10 / 3)
#   TORCH_VARIANTS  comma list or "all" (default all; see bench_torch.py --help)
#   SGEMM_REPS    repetitions per GEMM shape (default 10)
#   BENCH_WAIT_IDLE  seconds to wait, before each measurement, for a >= 90% idle
#                 machine (default 60; 0 = do not wait). Each figure also carries how
#                 much CPU other processes took meanwhile (column "other", in cores)
#   BENCH_RETRIES reruns of a gentrain run or PyTorch variant that other processes
#                 disturbed (default 2)
#   BENCH_STRICT  1: exit 1 when gentrain is slower than the PyTorch baseline
#   BENCH_KEEP    1: keep the scratch folder and say where it is
#
# Exit status: 0 when every part that could run ran; 1 when one failed (or, with
# BENCH_STRICT=1, when the target is missed).
set -u

here=$(cd "$(dirname "$0")" && pwd)
top_srcdir=${top_srcdir:-$(dirname "$here")}
PYTHON=${PYTHON:-/usr/bin/python3}
THREADS=${THREADS:-2}
STEPS=${STEPS:-12}
TORCH_STEPS=${TORCH_STEPS:-10}
TORCH_WARMUP=${TORCH_WARMUP:-3}
TORCH_VARIANTS=${TORCH_VARIANTS:-all}
SGEMM_REPS=${SGEMM_REPS:-10}
BENCH_WAIT_IDLE=${BENCH_WAIT_IDLE:-60}
BENCH_RETRIES=${BENCH_RETRIES:-2}
GENTRAIN=${GENTRAIN:-}
BENCH_SGEMM=${BENCH_SGEMM:-}

# the target config
N_LAYER=6 N_HEAD=6 N_EMBD=384 BLOCK_SIZE=256 BATCH_SIZE=8 VOCAB=256
TEXT=$top_srcdir/data/tinyshakespeare.txt

fail=0
say() { printf '%s\n' "$*"; }
section() { printf '\n=== %s\n' "$*"; }

# wait_idle: waits (at most BENCH_WAIT_IDLE s) until other processes leave the CPUs alone
wait_idle() {
    [ "$BENCH_WAIT_IDLE" -gt 0 ] || return 0
    "$PYTHON" - "$here" "$BENCH_WAIT_IDLE" <<'EOF'
import sys
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, sys.argv[1])
from bench_torch import wait_idle
w = wait_idle(float(sys.argv[2]))
if w:
    print("(waited %.0f s for an idle machine)" % w)
EOF
    return 0
}

# disturbed LOADFILE: true when run_measured recorded other processes using >= 0.2 cores
disturbed() {
    [ -r "$1" ] && awk '{ exit !($1 >= 0.2) }' "$1"
}

# run_measured LOADFILE CMD...: waits for an idle machine, runs CMD and writes to
# LOADFILE how many cores' worth of CPU other processes used meanwhile (on a shared
# machine that decides whether the figures are clean); returns CMD's exit status.
run_measured() {
    wait_idle
    "$PYTHON" - "$@" <<'EOF'
import os, resource, subprocess, sys, time
def busy():
    try:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:9]]
        return (sum(v) - v[3] - v[4]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError):
        return None
b0, t0 = busy(), time.time()
rc = subprocess.call(sys.argv[2:])
b1, wall = busy(), time.time() - t0
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
if b0 is not None and b1 is not None and wall > 0:
    with open(sys.argv[1], "w") as f:
        f.write("%.2f\n" % max(0.0, (b1 - b0 - ru.ru_utime - ru.ru_stime) / wall))
sys.exit(rc if rc >= 0 else 128 - rc)
EOF
}

if ! "$PYTHON" -c 'import json, statistics' 2>/dev/null; then
    say "bench.sh: PYTHON=$PYTHON is not a working Python (needed for the JSON figures)" >&2
    exit 1
fi
for v in THREADS STEPS TORCH_STEPS TORCH_WARMUP SGEMM_REPS BENCH_WAIT_IDLE BENCH_RETRIES; do
    eval "val=\$$v"
    case $val in
    ''|*[!0-9]*) say "bench.sh: $v=$val is not a whole number" >&2; exit 1;;
    esac
done
if [ "$STEPS" -lt 3 ]; then
    say "bench.sh: STEPS=$STEPS: need at least 3 (the first 2 are not timed)" >&2
    exit 1
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/gentrain-bench.XXXXXX") || exit 1
if [ "${BENCH_KEEP:-0}" = 1 ]; then
    trap 'say "bench.sh: scratch kept in $tmp"' EXIT
else
    trap 'rm -rf "$tmp"' EXIT
fi
: >"$tmp/sgemm.json"
: >"$tmp/torch.json"
run=run0   # the gentrain attempt whose log the summary reads

say "gentrain bench: n_layer=$N_LAYER n_head=$N_HEAD n_embd=$N_EMBD" \
    "block_size=$BLOCK_SIZE batch_size=$BATCH_SIZE vocab=$VOCAB threads=$THREADS"

# ---- (a) sgemm ceiling ------------------------------------------------------------------
section "sgemm on the step's GEMM shapes ($THREADS threads)"
if [ -z "$BENCH_SGEMM" ]; then
    say "skipped: BENCH_SGEMM is not set"
elif [ ! -x "$BENCH_SGEMM" ]; then
    say "failed: BENCH_SGEMM=$BENCH_SGEMM is not an executable"; fail=1
elif wait_idle; "$BENCH_SGEMM" --n_embd $N_EMBD --block_size $BLOCK_SIZE --batch_size $BATCH_SIZE \
        --vocab $VOCAB --n_layer $N_LAYER --threads "$THREADS" --reps "$SGEMM_REPS" \
        >"$tmp/sgemm.out" 2>&1; then
    grep -v '^{"impl"' "$tmp/sgemm.out"
    grep '^{"impl"' "$tmp/sgemm.out" | tail -n 1 >"$tmp/sgemm.json"
else
    cat "$tmp/sgemm.out"; say "failed: bench_sgemm exited with an error"; fail=1
fi

# ---- (b) gentrain -----------------------------------------------------------------------
section "gentrain ($STEPS steps, $THREADS threads)"
if [ -z "$GENTRAIN" ]; then
    say "skipped: GENTRAIN is not set"
elif [ ! -x "$GENTRAIN" ]; then
    say "failed: GENTRAIN=$GENTRAIN is not an executable"; fail=1
elif [ ! -r "$TEXT" ]; then
    say "failed: cannot read $TEXT"; fail=1
elif ! "$GENTRAIN" prepare "$TEXT" -o "$tmp/shakespeare.h5" >"$tmp/prepare.out" 2>&1; then
    cat "$tmp/prepare.out"; say "failed: gentrain prepare"; fail=1
else
    # a run other processes disturbed is rerun, as bench_torch.py does for PyTorch
    for attempt in $(seq 0 "$BENCH_RETRIES"); do
        run=run$attempt
        mkdir -p "$tmp/$run"
        if ! run_measured "$tmp/$run.load" "$GENTRAIN" train --data "$tmp/shakespeare.h5" \
                --n_layer $N_LAYER --n_head $N_HEAD --n_embd $N_EMBD \
                --block_size $BLOCK_SIZE --batch_size $BATCH_SIZE --steps "$STEPS" \
                --eval_every 0 --val_dataset none --threads "$THREADS" \
                --out "$tmp/$run" --log "$tmp/$run/log.jsonl" >"$tmp/$run.out" 2>&1; then
            tail -n 20 "$tmp/$run.out"; say "failed: gentrain train"; fail=1
            break
        fi
        tail -n 5 "$tmp/$run.out"
        disturbed "$tmp/$run.load" || break
        [ "$attempt" -lt "$BENCH_RETRIES" ] &&
            say "(other processes used $(cat "$tmp/$run.load") cores meanwhile; rerunning)"
    done
fi

# ---- (c) PyTorch ------------------------------------------------------------------------
section "PyTorch (variants: $TORCH_VARIANTS; $TORCH_WARMUP warm-up + $TORCH_STEPS timed steps each)"
if ! "$PYTHON" -c 'import torch' 2>/dev/null; then
    say "skipped: $PYTHON cannot import torch"
elif "$PYTHON" "$here/bench_torch.py" --n_layer $N_LAYER --n_head $N_HEAD \
        --n_embd $N_EMBD --block_size $BLOCK_SIZE --batch_size $BATCH_SIZE \
        --vocab_size $VOCAB --threads "$THREADS" --steps "$TORCH_STEPS" \
        --warmup-steps "$TORCH_WARMUP" --data "$TEXT" --variants "$TORCH_VARIANTS" \
        --wait-idle "$BENCH_WAIT_IDLE" --retries "$BENCH_RETRIES" \
        >"$tmp/torch.out" 2>&1; then
    grep -v '^{"impl"' "$tmp/torch.out"
    grep '^{"impl"' "$tmp/torch.out" | tail -n 1 >"$tmp/torch.json"
else
    cat "$tmp/torch.out"; say "failed: bench_torch.py"; fail=1
fi

# ---- (d) summary ------------------------------------------------------------------------
section "summary"
"$PYTHON" - "$here" "$tmp/sgemm.json" "$tmp/$run/log.jsonl" "$tmp/torch.json" "$tmp/$run.load" \
    "$THREADS" "$STEPS" "$N_LAYER" "$N_HEAD" "$N_EMBD" "$BLOCK_SIZE" "$BATCH_SIZE" \
    "$VOCAB" "${BENCH_STRICT:-0}" <<'EOF'
import json, os, statistics, sys

here, sgemm_f, log_f, torch_f, load_f = sys.argv[1:6]
threads, steps, L, nh, C, T, B, V, strict = (int(x) for x in sys.argv[6:15])
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, here)
from bench_torch import flops_per_step  # one flop count for every impl

flops = flops_per_step(L, C, V, B, T)


def load_line(path):
    try:
        with open(path) as f:
            text = f.read().strip()
        return json.loads(text) if text else None
    except (OSError, ValueError) as e:
        print("bench.sh: cannot read %s: %s" % (path, e))
        return None


sgemm = load_line(sgemm_f)
torch = load_line(torch_f)

other_load = None
try:
    with open(load_f) as f:
        other_load = float(f.read())
except (OSError, ValueError):
    pass

gentrain = None
if os.path.exists(log_f):
    rows = []
    with open(log_f) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                r = json.loads(line)
            except ValueError:
                print("bench.sh: %s:%d: not JSON" % (log_f, n))
                continue
            if "step" in r and "tokens_per_s" in r:
                rows.append(r)
    rows.sort(key=lambda r: r["step"])
    timed = rows[2:]
    if timed:
        def med(key):
            vals = [r[key] for r in timed if isinstance(r.get(key), (int, float))]
            return statistics.median(vals) if vals else None
        tps = med("tokens_per_s")
        ms = med("ms")
        if ms is None and tps:
            ms = B * T / tps * 1e3
        gentrain = {"impl": "gentrain", "steps_logged": len(rows), "steps_timed": len(timed),
                    "ms": ms, "tokens_per_s": tps, "gflops_logged": med("gflops"),
                    "load_wait_ms": med("load_wait_ms"), "other_load_cores": other_load,
                    "gflops": round(flops * tps / (B * T) / 1e9, 2) if tps else None}
    else:
        print("bench.sh: %s has %d step lines, need 3 or more" % (log_f, len(rows)))

sg_avg = sgemm.get("step_avg_gflops") if sgemm else None
base_tps = torch.get("tokens_per_s") if torch else None

table = []
if gentrain:
    # gentrain's achieved rate: its own count when it logs one, else the common count
    achieved = gentrain["gflops_logged"] or gentrain["gflops"]
    table.append(("gentrain", gentrain["ms"], gentrain["tokens_per_s"], gentrain["gflops"],
                  achieved, other_load))
if torch:
    table.append(("pytorch (%s)" % torch["variant"], torch["ms"], torch["tokens_per_s"],
                  torch["gflops"], torch["gflops"], torch.get("other_load_cores")))
    for v in torch.get("variants", []):
        if v["variant"] != torch["variant"]:
            table.append(("  pytorch %s" % v["variant"], v["ms"], v["tokens_per_s"],
                          v["gflops"], v["gflops"], v.get("other_load_cores")))


def fmt(x, spec):
    return format(x, spec) if isinstance(x, (int, float)) else "-"


print("model: %.2f GFLOP per step (6 x tokens x matrix params + full T x T attention)"
      % (flops / 1e9))
row = "%-22s %10s %10s %9s %11s %9s %6s"
print(row % ("impl", "ms/step", "tokens/s", "GFLOP/s", "vs pytorch", "of sgemm", "other"))
for name, ms, tps, gf, achieved, other in table:
    ratio = tps / base_tps if (tps and base_tps) else None
    frac = achieved / sg_avg if (achieved and sg_avg) else None
    print(row % (name, fmt(ms, ".1f"), fmt(tps, ".1f"), fmt(gf, ".1f"),
                 fmt(ratio, ".3f") + "x" if ratio else "-",
                 fmt(frac, ".1%") if frac else "-", fmt(other, ".2f")))
if sgemm:
    print(row % ("sgemm step average", fmt(sgemm["step_gemm_ms"], ".1f"), "-",
                 fmt(sg_avg, ".1f"), "-", "100.0%", fmt(sgemm.get("other_load_cores"), ".2f")))
    if sgemm.get("square_gflops"):
        print(row % ("sgemm 2048^3", "-", "-", fmt(sgemm["square_gflops"], ".1f"), "-", "-",
                     ""))
others = [t[5] for t in table] + [sgemm.get("other_load_cores") if sgemm else None]
if any(isinstance(o, float) and o >= 0.2 for o in others):
    print("warning: other processes took CPU during the runs (column 'other', in cores);"
          " those figures are not clean, rerun on an idle machine")

out = {"bench": "gentrain-vs-pytorch", "n_layer": L, "n_head": nh, "n_embd": C,
       "block_size": T, "batch_size": B, "vocab": V, "threads": threads,
       "gflop_per_step": round(flops / 1e9, 4)}
verdict = None
if gentrain:
    out["gentrain"] = gentrain
    if gentrain["gflops_logged"] is not None:
        print("gentrain's own count: %.1f GFLOP/s (log key gflops)" % gentrain["gflops_logged"])
    if sg_avg:
        out["gentrain_frac_of_sgemm"] = round((gentrain["gflops_logged"] or gentrain["gflops"])
                                              / sg_avg, 4)
if torch:
    out["pytorch"] = {k: torch.get(k) for k in ("variant", "ms", "tokens_per_s", "gflops",
                                                "params", "blas", "variants")}
    out["pytorch"]["torch"] = torch.get("config", {}).get("torch")
if sgemm:
    out["sgemm"] = {k: sgemm.get(k) for k in ("blas", "blas_parallel", "threads",
                                              "step_avg_gflops", "step_gemm_ms",
                                              "square_gflops", "other_load_cores",
                                              "shapes")}
if gentrain and torch and gentrain["tokens_per_s"]:
    ratio = gentrain["tokens_per_s"] / torch["tokens_per_s"]
    out["ratio_vs_pytorch"] = round(ratio, 4)
    verdict = ratio >= 1.0
    out["target_met"] = verdict
    print("target (gentrain tokens/s >= pytorch best): %s (%.3fx)"
          % ("met" if verdict else "NOT met", ratio))
print(json.dumps(out))
sys.exit(1 if (strict and verdict is False) else 0)
EOF
rc=$?
[ $rc -ne 0 ] && fail=1
exit $fail
