#!/bin/bash
# bench.sh — gentrain against the PyTorch our users pick, side by side.
#
# Config: GPT n_layer=6 n_head=6 n_embd=384 block_size=256 batch_size=8, vocab 256
# (override with N_LAYER N_HEAD N_EMBD BLOCK_SIZE BATCH_SIZE VOCAB, e.g. the GPT-2 124M
# shape 12 12 768 1024 4 50304), THREADS threads. Targets, judged on the measured
# rows: gentrain fp32 >= 1.0x PyTorch 2.x fp32 tokens/s on every CPU; gentrain bf16
# against PyTorch 2.x under torch.autocast("cpu", torch.bfloat16) >= 2.0x on a CPU with
# AMX tiles, >= 1.6x on one with AVX512_BF16 and no AMX, none on other CPUs (nor under
# BENCH_ISA=avx2). PREDICTED rows are never judged: their ratio needs the modelled
# CPU's own PyTorch (docs/cpu-speed.md carries them over).
#
#   (a) the CPU: model name, vector ISA, the OpenBLAS core gentrain runs, and the
#       measured peaks (FP32 multiply-add, BF16 dot products) of THREADS threads;
#   (b) bench_sgemm on the config's GEMM shapes: what OpenBLAS sgemm (and, for bf16,
#       gentrain's BF16 products) deliver here;
#   (c) gentrain: prepare tinyshakespeare as bytes, train STEPS steps in each of
#       PRECISIONS (default "fp32 bf16"), median over the steps after the first two;
#   (d) PyTorch 2.x from PyPI in its own virtual environment (TORCH_VENV; made with pip
#       when missing, unless BENCH_TORCH_INSTALL=0), fp32 and bf16 autocast, with
#       scaled_dot_product_attention; and Debian's PyTorch ($PYTHON, 1.13) in fp32
#       when it imports torch. Each over its thread-setting variants; the best counts.
#       (c) and (d) alternate in BENCH_ROUNDS rounds (gentrain, then PyTorch 2.x), and
#       each ratio is taken within its round; Debian's PyTorch runs once, after them;
#   (b') with PyTorch 2.x and bf16: (b)'s BF16 products timed in torch.matmul on BF16
#       tensors (oneDNN; bench_torch_products.py) beside gentrain's, product by
#       product, and both step totals as shares of the tile peak that gentrain's first
#       bf16 run measured: what the vendor's library reaches on this CPU;
#   (e) a table: ms/step, tokens/s, GFLOP/s, peak memory, the ratio to PyTorch 2.x in
#       the same precision, and the fraction of the measured peak; one JSON line. Where
#       bf16 ran the avx512-bf16 path, whose micro-kernels count their VDPBF16PS and
#       time themselves, a line per run splits its step (of median time) into the
#       busiest thread's micro-kernels, at their share of the measured dot-product peak
#       a thread, and the rest: whether the products' arithmetic or what surrounds it
#       sets the step on this CPU. Where such a bf16 target is missed, a "ceiling"
#       line bounds it: each round's step with those instructions all at the peak and
#       the rest as measured, its ratio to the round's PyTorch, and the rest that the
#       target would then leave room for (a bound from the run's figures, no run).
#   On a CPU without AMX tiles, each round's bf16 run is followed by a short run of the
#   AMX path's emulated twin (GENTRAIN_BF16=amx-emulated, BENCH_AMX_STEPS steps) and
#   the table gets a row PREDICTED for the real AMX path beside the measured ones:
#       predicted step = emulated step - emulated tile time + tile time on a tile unit
#   where both tile times are the busiest thread's (per product for the emulated one),
#   and a tile unit per core runs a TDPBF16PS (16 x 16 x 32) per 16 cycles, a
#   TILELOADD per 8, a TILESTORED per 16, a TILEZERO at no cost, one after the other,
#   at the core's clock (see AMX_CYCLES below). Also printed: the tile instructions per
#   step, the measured rest split into the products' packing and write-back and the
#   kernels outside the products, and how busy the products keep the tile unit (their
#   TDPBF16PS at its rate over their predicted time: the Linear layers' products, which
#   bench_sgemm times, attention's, and all).
#   A second PREDICTED row, "timing twin", takes the rest from a run of the twin with
#   GENTRAIN_AMX_TIMING=1, whose tile products are counted but not computed (its
#   losses mean nothing): there the tile spans are as short as the tile unit's, where
#   in the computing twin they are a thousand times longer, and the code around them
#   measures 8-15% slower for it (the host refills this core's caches meanwhile;
#   docs/cpu-speed.md). Both rows are models; a real AMX run checks them.
#   On a CPU with AVX512_BF16 whose dot products gentrain passed over (they run at
#   under 1x its FMA flops, as on the Xeons that have AMX), each round also runs the
#   avx512-bf16 path (GENTRAIN_BF16=avx512, STEPS steps), which counts its VDPBF16PS
#   and times its micro-kernels, and the table gets a row PREDICTED for that path on a
#   CPU whose dot products run at DOT_MODEL_RATIO (2) times its FMA flops, as AMD Zen 4
#   and 5 measure (this CPU's ratio r is measured at start-up, about 0.5 on the Xeons):
#       predicted step = measured step - micro-kernel time + micro-kernel time x r / 2
#   (the busiest thread's), everything else as measured here. Printed with it: the
#   predicted speed-up over gentrain fp32 of the same round, and PyTorch's autocast
#   under the same model (all its model flops taken as dot products at the rate of
#   gentrain's micro-kernels in the step, the most the model can take off it).
#   A second such row, "timing twin", is the step of that path run whole with
#   GENTRAIN_DOT_TIMING=1: each VDPBF16PS replaced by one FP32 multiply-add of the same
#   registers (its losses mean nothing), so the dot products run at this CPU's FMA
#   instruction rate, 2x its FMA flops, and the code around them with them: where the
#   first row takes the micro-kernels as bound by their dot products at any rate, the
#   twin shows what their loads and stores cost at the faster one.
#
# Environment:
#   GENTRAIN      path to the gentrain binary (part c skipped when unset)
#   BENCH_SGEMM   path to the built bench_sgemm (part b skipped when unset)
#   BENCH_TILES   path to the built bench_tiles (part b'' skipped when unset, and where
#                 the BF16 products did not take the AMX path)
#   PYTHON        Python for the JSON arithmetic and Debian's torch (default /usr/bin/python3)
#   TORCH_VENV    virtual environment with PyTorch 2.x (default
#                 ${XDG_CACHE_HOME:-$HOME/.cache}/gentrain/torch-venv)
#   BENCH_TORCH_INSTALL  0: never create TORCH_VENV (part d then runs what exists)
#   top_srcdir    source tree (default: the parent of this script's folder)
#   THREADS       threads for every implementation (default 2)
#   PRECISIONS    gentrain and PyTorch 2.x precisions (default "fp32 bf16")
#   STEPS         gentrain training steps (default 12, at least 3)
#   TORCH_STEPS / TORCH_WARMUP   timed / untimed PyTorch steps per variant (10 / 3)
#   TORCH_VARIANTS  variants for Debian's PyTorch (default all; see bench_torch.py --help)
#   TORCH2_VARIANTS variants for PyTorch 2.x (default "default,passive")
#   SGEMM_REPS    repetitions per GEMM shape (default 10)
#   BENCH_WAIT_IDLE  seconds to wait, before each measurement, for a >= 90% idle
#                 machine (default 60; 0 = do not wait). Each figure also carries how
#                 much CPU other processes took meanwhile (column "other", in cores)
#   BENCH_RETRIES reruns of a gentrain run or PyTorch variant that other processes
#                 disturbed (default 2)
#   BENCH_ROUNDS  rounds of (gentrain, then PyTorch 2.x) runs (default 1): each ratio
#                 is taken within a round; the targets are judged on the median ratio
#   BENCH_STRICT  1: exit 1 when a target is missed
#   BENCH_KEEP    1: keep the scratch folder and say where it is
#   BENCH_AMX_PREDICT  0: no prediction of the AMX path (default 1: on a CPU with
#                 AVX-512 and without AMX tiles, with bf16 in PRECISIONS and
#                 BENCH_ISA=native; on an AVX2 CPU the twin packs with the portable twin
#                 of the AMX path's AVX-512 packing, so its rest models no AMX CPU, and
#                 its tiles take about 6 s a step at the default config on a Zen 3 with
#                 AVX2 (145 s in scalar code)); always: on a CPU with AMX tiles too, the
#                 prediction beside the real run of the same round, which checks the
#                 model (and on an AVX2 CPU too)
#   BENCH_AMX_STEPS  steps of the emulated run; the first is not timed (default 4)
#   BENCH_DOT_PREDICT  0: no prediction of the avx512-bf16 path on a faster dot-product
#                 CPU (default 1: where the CPU has AVX512_BF16 and gentrain passed its
#                 dot products over); always: on every CPU with AVX512_BF16, an AMX
#                 Xeon's too (its bf16 runs the tiles), so that the Zen rows can be
#                 predicted from the release measured there
#   BENCH_AMX_GHZ the clock the tiles are predicted at (default: the clock the
#                 emulated run's measured FMA peak gives, peak / THREADS / 64 flop a
#                 cycle (two 16-lane FMA units a core): the cores' clock under
#                 AVX-512 load, which the real AMX Xeon's tile peak matched (3.75 GHz
#                 against 3.82 from its FMA peak); "cpu MHz" of /proc/cpuinfo where
#                 that is higher, or where no peak was printed. In a virtual machine
#                 "cpu MHz" is often the nominal clock, below what the core runs at)
#   BENCH_ISA     native (default) or avx2: every implementation held to AVX2 and FMA
#                 on an AVX-512 CPU, as a stand-in for an AVX2-only one (AMD Zen 2/3).
#                 gentrain: GENTRAIN_SIMD=avx2, GENTRAIN_BF16=portable,
#                 OPENBLAS_CORETYPE=Haswell (the kernels OpenBLAS runs on Zen 2/3);
#                 PyTorch: ATEN_CPU_CAPABILITY=avx2, ONEDNN_MAX_CPU_ISA=AVX2,
#                 MKL_ENABLE_INSTRUCTIONS=AVX2. PRECISIONS defaults to fp32 (the bf16
#                 target is for CPUs with BF16 instructions). The core's width, caches
#                 and clock stay this CPU's: a prediction, not a measurement of Zen 3
#
# Exit status: 0 when every part that could run ran; 1 when one failed (or, with
# BENCH_STRICT=1, when a target is missed).
set -u

here=$(cd "$(dirname "$0")" && pwd)
top_srcdir=${top_srcdir:-$(dirname "$here")}
PYTHON=${PYTHON:-/usr/bin/python3}
THREADS=${THREADS:-2}
STEPS=${STEPS:-12}
TORCH_STEPS=${TORCH_STEPS:-10}
TORCH_WARMUP=${TORCH_WARMUP:-3}
TORCH_VARIANTS=${TORCH_VARIANTS:-all}
TORCH2_VARIANTS=${TORCH2_VARIANTS:-default,passive}
BENCH_ISA=${BENCH_ISA:-native}
export BENCH_ISA # for the summary's JSON line
case $BENCH_ISA in
native) PRECISIONS=${PRECISIONS:-fp32 bf16} ;;
avx2)
    PRECISIONS=${PRECISIONS:-fp32}
    export GENTRAIN_SIMD=avx2 GENTRAIN_BF16=portable OPENBLAS_CORETYPE=Haswell \
        ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 MKL_ENABLE_INSTRUCTIONS=AVX2
    ;;
*) printf 'bench.sh: BENCH_ISA=%s is not native or avx2\n' "$BENCH_ISA" >&2; exit 1 ;;
esac
TORCH_VENV=${TORCH_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/gentrain/torch-venv}
BENCH_TORCH_INSTALL=${BENCH_TORCH_INSTALL:-1}
SGEMM_REPS=${SGEMM_REPS:-10}
BENCH_WAIT_IDLE=${BENCH_WAIT_IDLE:-60}
BENCH_RETRIES=${BENCH_RETRIES:-2}
BENCH_ROUNDS=${BENCH_ROUNDS:-1}
BENCH_AMX_PREDICT=${BENCH_AMX_PREDICT:-1}
BENCH_AMX_STEPS=${BENCH_AMX_STEPS:-4}
BENCH_DOT_PREDICT=${BENCH_DOT_PREDICT:-1}
BENCH_AMX_GHZ_SET=0 # 1: the user's clock, taken as it is
if [ -n "${BENCH_AMX_GHZ:-}" ]; then
    BENCH_AMX_GHZ_SET=1
else
    BENCH_AMX_GHZ=$(awk -F: '/^cpu MHz/ { printf "%.3f", $2 / 1000; exit }' /proc/cpuinfo 2>/dev/null)
fi
GENTRAIN=${GENTRAIN:-}
BENCH_SGEMM=${BENCH_SGEMM:-}
BENCH_TILES=${BENCH_TILES:-}

# the config (the targets' unless overridden)
N_LAYER=${N_LAYER:-6} N_HEAD=${N_HEAD:-6} N_EMBD=${N_EMBD:-384}
BLOCK_SIZE=${BLOCK_SIZE:-256} BATCH_SIZE=${BATCH_SIZE:-8} VOCAB=${VOCAB:-256}
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
    with open(sys.argv[1], "w") as f:  # other processes' cores, then our peak RSS in MB
        f.write("%.2f %.0f\n" % (max(0.0, (b1 - b0 - ru.ru_utime - ru.ru_stime) / wall),
                                 ru.ru_maxrss / 1024.0))
sys.exit(rc if rc >= 0 else 128 - rc)
EOF
}

if ! "$PYTHON" -c 'import json, statistics' 2>/dev/null; then
    say "bench.sh: PYTHON=$PYTHON is not a working Python (needed for the JSON figures)" >&2
    exit 1
fi
for v in THREADS STEPS TORCH_STEPS TORCH_WARMUP SGEMM_REPS BENCH_WAIT_IDLE BENCH_RETRIES BENCH_ROUNDS \
         N_LAYER N_HEAD N_EMBD BLOCK_SIZE BATCH_SIZE VOCAB BENCH_AMX_STEPS; do
    eval "val=\$$v"
    case $val in
    ''|*[!0-9]*) say "bench.sh: $v=$val is not a whole number" >&2; exit 1;;
    esac
done
for p in $PRECISIONS; do
    case $p in fp32|bf16) ;; *) say "bench.sh: PRECISIONS: '$p' is not fp32 or bf16" >&2; exit 1;; esac
done
# what would only fail (or mislabel its figures) once the runs have started
for v in THREADS N_LAYER N_HEAD N_EMBD BLOCK_SIZE BATCH_SIZE VOCAB TORCH_STEPS SGEMM_REPS; do
    eval "val=\$$v"
    if [ "$val" -lt 1 ]; then
        say "bench.sh: $v=$val: need at least 1" >&2
        exit 1
    fi
done
if [ $((N_EMBD % N_HEAD)) -ne 0 ]; then
    say "bench.sh: N_EMBD=$N_EMBD is not a multiple of N_HEAD=$N_HEAD" >&2
    exit 1
fi
if [ "$BENCH_ROUNDS" -lt 1 ]; then
    say "bench.sh: BENCH_ROUNDS=$BENCH_ROUNDS: need at least 1" >&2
    exit 1
fi
if [ "$STEPS" -lt 3 ]; then
    say "bench.sh: STEPS=$STEPS: need at least 3 (the first 2 are not timed)" >&2
    exit 1
fi
case $BENCH_DOT_PREDICT in
0 | 1 | always) ;;
*) say "bench.sh: BENCH_DOT_PREDICT='$BENCH_DOT_PREDICT': need 0, 1 or always" >&2; exit 1 ;;
esac
# The AMX prediction: where there is no real AMX figure to take and bf16 runs, or
# (always) beside the real one
case $BENCH_AMX_PREDICT in
0 | 1 | always) ;;
*) say "bench.sh: BENCH_AMX_PREDICT='$BENCH_AMX_PREDICT': need 0, 1 or always" >&2; exit 1 ;;
esac
amx_predict=0
if [ "$BENCH_AMX_PREDICT" = 1 ] && [ "$BENCH_ISA" = native ] &&
        case " $PRECISIONS " in *" bf16 "*) true;; *) false;; esac &&
        ! grep -qw avx512f /proc/cpuinfo 2>/dev/null; then
    say "no PREDICTED amx-bf16 row: this CPU has no AVX-512, so the AMX path's twin would" \
        "pack without the AMX path's AVX-512 code and model no AMX CPU" \
        "(BENCH_AMX_PREDICT=always runs it anyway)"
elif [ "$BENCH_AMX_PREDICT" != 0 ] && [ "$BENCH_ISA" = native ] &&
        case " $PRECISIONS " in *" bf16 "*) true;; *) false;; esac &&
        { [ "$BENCH_AMX_PREDICT" = always ] || ! grep -qw amx_bf16 /proc/cpuinfo 2>/dev/null; }; then
    amx_predict=1
    if [ "$BENCH_AMX_STEPS" -lt 2 ]; then
        say "bench.sh: BENCH_AMX_STEPS=$BENCH_AMX_STEPS: need at least 2 (the first is" \
            "not timed)" >&2
        exit 1
    fi
    if ! awk -v g="$BENCH_AMX_GHZ" 'BEGIN { exit !(g + 0 > 0) }'; then
        say "bench.sh: BENCH_AMX_GHZ='$BENCH_AMX_GHZ': need the clock in GHz (no" \
            "\"cpu MHz\" in /proc/cpuinfo)" >&2
        exit 1
    fi
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/gentrain-bench.XXXXXX") || exit 1
if [ "${BENCH_KEEP:-0}" = 1 ]; then
    trap 'say "bench.sh: scratch kept in $tmp"' EXIT
else
    trap 'rm -rf "$tmp"' EXIT
fi
# The CPU, the BLAS core and the peaks, as gentrain sees them (a 1-step run prints them)
section "the CPU"
say "CPU: $(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | sed 's/.*: //')"
say "vector flags: $(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | tr ' ' '\n' |
    grep -E '^(avx2|fma|avx512f|avx512_bf16|amx_bf16|amx_tile)$' | tr '\n' ' ')"
say "OPENBLAS_CORETYPE: ${OPENBLAS_CORETYPE:-(not set)}"
# which bf16 target applies (the issue's CPU kinds): amx, avx512_bf16 or none
cpu_flags=" $(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | sed 's/.*: //') "
case "$BENCH_ISA:$cpu_flags" in
native:*" amx_tile "*) cpu_bf16_kind=amx ;;
native:*" avx512_bf16 "*) cpu_bf16_kind=avx512_bf16 ;;
*) cpu_bf16_kind=none ;;
esac
if [ "$BENCH_ISA" = avx2 ]; then
    say "BENCH_ISA=avx2: every implementation held to AVX2 + FMA (GENTRAIN_SIMD=avx2," \
        "GENTRAIN_BF16=portable, OPENBLAS_CORETYPE=Haswell; ATEN_CPU_CAPABILITY=avx2," \
        "ONEDNN_MAX_CPU_ISA=AVX2, MKL_ENABLE_INSTRUCTIONS=AVX2): a stand-in for an" \
        "AVX2-only CPU, on this CPU's cores"
fi
: >"$tmp/sgemm.json"
: >"$tmp/runs.txt" # one line per measured run: label kind precision json-or-log load-file

say "gentrain bench: n_layer=$N_LAYER n_head=$N_HEAD n_embd=$N_EMBD" \
    "block_size=$BLOCK_SIZE batch_size=$BATCH_SIZE vocab=$VOCAB threads=$THREADS"

# ---- (b) matrix-product ceiling ---------------------------------------------------------
for prec in $PRECISIONS; do
    what="OpenBLAS sgemm" operands=""
    if [ "$prec" = bf16 ]; then # weights packed once, activations in BF16: as in a step
        what="gentrain's BF16 products (gemm_bf16, operands as a step has them)"
        operands="--operands step"
    fi
    section "$what on the step's GEMM shapes ($THREADS threads)"
    if [ -z "$BENCH_SGEMM" ]; then
        say "skipped: BENCH_SGEMM is not set"
    elif [ ! -f "$BENCH_SGEMM" ] || [ ! -x "$BENCH_SGEMM" ]; then
        say "failed: BENCH_SGEMM=$BENCH_SGEMM is not an executable"; fail=1
    elif wait_idle; "$BENCH_SGEMM" --n_embd $N_EMBD --block_size $BLOCK_SIZE \
            --batch_size $BATCH_SIZE --vocab $VOCAB --n_layer $N_LAYER --threads "$THREADS" \
            --reps "$SGEMM_REPS" --precision "$prec" $operands >"$tmp/gemm-$prec.out" 2>&1; then
        grep -v '^{"impl"' "$tmp/gemm-$prec.out"
        [ "$prec" = fp32 ] && grep '^{"impl"' "$tmp/gemm-$prec.out" | tail -n 1 >"$tmp/sgemm.json"
    else
        cat "$tmp/gemm-$prec.out"; say "failed: bench_sgemm --precision $prec"; fail=1
    fi
done

# ---- (b'') the tile unit's ceilings: (b)'s BF16 products against the tile step fed from
# L1, L2, L3 and memory (scripts/bench_tiles.c) ------------------------------------------
if [ -n "$BENCH_TILES" ] && [ -s "$tmp/gemm-bf16.out" ] &&
        grep -q '"blas":"amx-bf16"' "$tmp/gemm-bf16.out"; then
    section "the AMX tile step fed from each cache level (bench_tiles, $THREADS threads)"
    if wait_idle; "$BENCH_TILES" --threads "$THREADS" >"$tmp/tiles.out" 2>&1; then
        grep -v '^{"threads"' "$tmp/tiles.out"
        # the step's products as a share of each ceiling
        "$PYTHON" - "$tmp/gemm-bf16.out" "$tmp/tiles.out" <<'EOF'
import json, sys
def last_json(path, key):
    rows = [l for l in open(path) if l.startswith("{") and key in l]
    return json.loads(rows[-1]) if rows else None
g, t = last_json(sys.argv[1], '"impl"'), last_json(sys.argv[2], '"feeds"')
if g and t:
    avg = g["step_avg_gflops"]
    print("the step's BF16 products (b): %.0f GFLOP/s = %s" % (avg, ", ".join(
        "%.0f%% of %s" % (100 * avg / f["gflops"], f["name"]) for f in t["feeds"]
        if f["gflops"] > 0 and f["name"] in ("registers (tile peak)", "L1", "A, B L2", "A, B L3"))))
EOF
    else
        cat "$tmp/tiles.out"; say "failed: bench_tiles"; fail=1
    fi
fi

# ---- (c, d) gentrain and PyTorch 2.x, in rounds -----------------------------------------
# This machine's speed can drift by 10-20% over minutes (other guests of the host), so
# each ratio pairs runs made one after the other: round r runs gentrain, then PyTorch
# 2.x, in every precision, and the summary divides within the round.

# gentrain_train RUN STEPS PRECISION: trains on the config, measured (run_measured):
# output in $tmp/RUN.out, log in $tmp/RUN/log.jsonl, other processes' load in
# $tmp/RUN.load; returns gentrain's exit status
gentrain_train() {
    local run=$1 steps=$2 prec=$3
    mkdir -p "$tmp/$run"
    run_measured "$tmp/$run.load" "$GENTRAIN" train --data "$tmp/shakespeare.h5" \
        --n_layer $N_LAYER --n_head $N_HEAD --n_embd $N_EMBD \
        --block_size $BLOCK_SIZE --batch_size $BATCH_SIZE --vocab_size $VOCAB \
        --steps "$steps" --eval_every 0 --val_dataset none --threads "$THREADS" \
        --precision "$prec" --out "" --log "$tmp/$run/log.jsonl" >"$tmp/$run.out" 2>&1
}

# clean_run NAME STEPS PREC IMPL KEY ROUND MUST_SAY: gentrain_train until a run that
# other processes did not disturb (BENCH_RETRIES reruns, as bench_torch.py does for
# PyTorch), the environment as the caller set it; the run's output must contain
# MUST_SAY; one runs.txt line "IMPL KEY PREC ..." for the run kept. 1 on a failure.
clean_run() {
    local name=$1 steps=$2 prec=$3 impl=$4 key=$5 round=$6 must=$7 attempt run
    for attempt in $(seq 0 "$BENCH_RETRIES"); do
        run=$name-r$round-$attempt
        if ! gentrain_train "$run" "$steps" "$prec" || ! grep -q -- "$must" "$tmp/$run.out"; then
            tail -n 20 "$tmp/$run.out"; say "failed: gentrain train ($name)"
            fail=1
            return 1
        fi
        grep -E '^(threads|BLAS|precision):' "$tmp/$run.out"
        tail -n 2 "$tmp/$run.out"
        if ! disturbed "$tmp/$run.load" || [ "$attempt" -ge "$BENCH_RETRIES" ]; then
            echo "$impl $key $prec $tmp/$run/log.jsonl $tmp/$run.load" \
                "$tmp/$run.out $round" >>"$tmp/runs.txt"
            return 0
        fi
        say "(other processes used $(cut -d' ' -f1 "$tmp/$run.load") cores meanwhile; rerunning)"
    done
}

# gentrain_round R: trains STEPS steps in each precision; one runs.txt line per run
gentrain_round() {
    local prec
    for prec in $PRECISIONS; do
        clean_run "$prec" "$STEPS" "$prec" gentrain gentrain "$1" '^done: ' || break
    done
}

# dot_predict_round R: where the round's bf16 run passed this CPU's BF16 dot products
# over (the line saying so), or (BENCH_DOT_PREDICT=always) wherever the CPU has
# AVX512_BF16, the avx512-bf16 path for STEPS steps, whose log counts its VDPBF16PS;
# one runs.txt line. Returns 0 when there was nothing to run.
dot_predict_round() {
    local out
    out=$(awk -v r="$1" '$1 == "gentrain" && $3 == "bf16" && $7 == r { print $6 }' \
        "$tmp/runs.txt" | tail -n 1)
    if [ "$BENCH_DOT_PREDICT" = always ]; then
        [ -n "$out" ] && grep -qw avx512_bf16 /proc/cpuinfo 2>/dev/null || return 0
    else
        [ -n "$out" ] && grep -q '^precision: BF16 dot products measure.*so FP32' "$out" ||
            return 0
    fi
    section "round $1 of $BENCH_ROUNDS: the avx512-bf16 path ($STEPS steps) for the" \
        "PREDICTED row of a CPU with faster dot products"
    GENTRAIN_BF16=avx512 clean_run avx512-bf16 "$STEPS" bf16 dot-predicted dotpred "$1" \
        '(avx512-bf16 path)' || return 1
    GENTRAIN_BF16=avx512 GENTRAIN_DOT_TIMING=1 clean_run avx512-timing "$STEPS" bf16 \
        dot-predicted dottime "$1" 'GENTRAIN_DOT_TIMING=1: each'
}

# amx_predict_round R: the AMX path's emulated twin for BENCH_AMX_STEPS steps (the AMX
# kernel, its packing and write-back as on the real path, the tile instructions in
# software, counted and timed), from which the summary predicts the real path; one
# runs.txt line
amx_predict_round() {
    GENTRAIN_BF16=amx-emulated clean_run amx-emulated "$BENCH_AMX_STEPS" bf16 \
        amx-predicted amxpred "$1" '(amx-emulated path)' || return 1
    GENTRAIN_BF16=amx-emulated GENTRAIN_AMX_TIMING=1 clean_run amx-timing \
        "$BENCH_AMX_STEPS" bf16 amx-predicted amxtime "$1" 'GENTRAIN_AMX_TIMING=1: the'
}

# torch_run LABEL PY PRECISION VARIANTS ROUND: bench_torch.py on the config; the best
# variant's JSON line goes to $tmp/LABEL.json
torch_run() {
    local label=$1 py=$2 prec=$3 variants=$4 round=$5
    if "$py" "$here/bench_torch.py" --n_layer $N_LAYER --n_head $N_HEAD \
            --n_embd $N_EMBD --block_size $BLOCK_SIZE --batch_size $BATCH_SIZE \
            --vocab_size $VOCAB --threads "$THREADS" --steps "$TORCH_STEPS" \
            --warmup-steps "$TORCH_WARMUP" --data "$TEXT" --variants "$variants" \
            --precision "$prec" --wait-idle "$BENCH_WAIT_IDLE" --retries "$BENCH_RETRIES" \
            >"$tmp/$label.out" 2>&1; then
        grep -v '^{"impl"' "$tmp/$label.out"
        grep '^{"impl"' "$tmp/$label.out" | tail -n 1 >"$tmp/$label.json"
        echo "$label pytorch $prec $tmp/$label.json - - $round" >>"$tmp/runs.txt"
    else
        cat "$tmp/$label.out"; say "failed: bench_torch.py ($label)"; fail=1
    fi
}

have_gentrain=0
if [ -z "$GENTRAIN" ]; then
    say "gentrain skipped: GENTRAIN is not set"
elif [ ! -f "$GENTRAIN" ] || [ ! -x "$GENTRAIN" ]; then
    say "failed: GENTRAIN=$GENTRAIN is not an executable"; fail=1
elif [ ! -r "$TEXT" ]; then
    say "failed: cannot read $TEXT"; fail=1
elif ! "$GENTRAIN" prepare "$TEXT" -o "$tmp/shakespeare.h5" >"$tmp/prepare.out" 2>&1; then
    cat "$tmp/prepare.out"; say "failed: gentrain prepare"; fail=1
else
    have_gentrain=1
fi

TPY=$TORCH_VENV/bin/python
if ! "$TPY" -c 'import torch' 2>/dev/null && [ "$BENCH_TORCH_INSTALL" = 1 ]; then
    say "installing PyTorch and numpy from PyPI into $TORCH_VENV (about 3 GB, once)"
    mkdir -p "$(dirname "$TORCH_VENV")" &&
        python3 -m venv "$TORCH_VENV" >"$tmp/venv.out" 2>&1 &&
        "$TPY" -m pip install -q torch numpy >>"$tmp/venv.out" 2>&1 ||
        { tail -n 5 "$tmp/venv.out"; say "failed: cannot install PyTorch into $TORCH_VENV"; }
fi
have_torch2=0
if "$TPY" -c 'import torch' 2>/dev/null; then
    have_torch2=1
    say "PyTorch 2.x: torch $("$TPY" -c 'import torch; print(torch.__version__, "cpu capability", torch.backends.cpu.get_cpu_capability())' 2>/dev/null)"
else
    say "PyTorch 2.x skipped: $TPY cannot import torch"
fi

for round in $(seq 1 "$BENCH_ROUNDS"); do
    if [ "$have_gentrain" = 1 ]; then
        section "round $round of $BENCH_ROUNDS: gentrain ($STEPS steps, $THREADS threads; precisions: $PRECISIONS)"
        gentrain_round "$round"
        if [ "$amx_predict" = 1 ]; then
            section "round $round of $BENCH_ROUNDS: the AMX path's emulated twin" \
                "($BENCH_AMX_STEPS steps, the first untimed) for the PREDICTED amx-bf16 row"
            amx_predict_round "$round"
        fi
        if [ "$BENCH_DOT_PREDICT" != 0 ] && [ "$BENCH_ISA" = native ]; then
            dot_predict_round "$round"
        fi
    fi
    if [ "$have_torch2" = 1 ]; then
        section "round $round of $BENCH_ROUNDS: PyTorch 2.x (virtual environment $TORCH_VENV; variants $TORCH2_VARIANTS)"
        for prec in $PRECISIONS; do
            torch_run "torch2-$prec-r$round" "$TPY" "$prec" "$TORCH2_VARIANTS" "$round"
        done
    fi
done

# ---- (b') the BF16 products beside PyTorch 2.x's on the same shapes ---------------------
# (only where the CPU has BF16 instructions: without, PyTorch's BF16 matmuls run about
# 30x slower than its FP32 ones, minutes for one pass over a step's shapes, to show
# nothing about a matrix unit)
if [ "$have_torch2" = 1 ] && [ -s "$tmp/gemm-bf16.out" ] &&
        ! grep -qw -e avx512_bf16 -e amx_bf16 /proc/cpuinfo 2>/dev/null; then
    section "PyTorch 2.x's BF16 matmuls on (b)'s product shapes: skipped, this CPU has no BF16 instructions"
elif [ "$have_torch2" = 1 ] && [ -s "$tmp/gemm-bf16.out" ]; then
    section "PyTorch 2.x's BF16 matmuls on (b)'s product shapes ($THREADS threads)"
    # the tile (or dot-product) peak gentrain's first bf16 run measured, if it said one
    peak_out=$(awk '$1 == "gentrain" && $3 == "bf16" { print $6; exit }' "$tmp/runs.txt")
    peak=0
    if [ -n "$peak_out" ]; then
        peak=$(sed -n 's/^threads:.* peak \([0-9.]*\) GFLOP\/s (measured.*/\1/p' "$peak_out" | head -n 1)
        peak=${peak:-0}
    fi
    if wait_idle; "$TPY" "$here/bench_torch_products.py" "$tmp/gemm-bf16.out" \
            --threads "$THREADS" --reps "$SGEMM_REPS" --peak "$peak" >"$tmp/torch-products.out" 2>&1; then
        grep -v '^{"impl"' "$tmp/torch-products.out"
    else
        cat "$tmp/torch-products.out"; say "failed: bench_torch_products.py"; fail=1
    fi
fi

section "Debian's PyTorch ($PYTHON; variants $TORCH_VARIANTS; fp32)"
if ! "$PYTHON" -c 'import torch' 2>/dev/null; then
    say "skipped: $PYTHON cannot import torch (apt-get install python3-torch)"
else
    torch_run torch-debian "$PYTHON" fp32 "$TORCH_VARIANTS" 1
fi

# ---- (e) summary ------------------------------------------------------------------------
section "summary"
"$PYTHON" - "$here" "$tmp/sgemm.json" "$tmp/runs.txt" "$THREADS" "$STEPS" "$N_LAYER" \
    "$N_HEAD" "$N_EMBD" "$BLOCK_SIZE" "$BATCH_SIZE" "$VOCAB" "${BENCH_STRICT:-0}" \
    "${BENCH_AMX_GHZ:-0}" "$BENCH_AMX_GHZ_SET" "$cpu_bf16_kind" <<'EOF'
import json, os, re, statistics, sys

here, sgemm_f, runs_f = sys.argv[1:4]
threads, steps, L, nh, C, T, B, V, strict = (int(x) for x in sys.argv[4:13])
amx_ghz = float(sys.argv[13] or 0)  # the user's clock, or cpu MHz's
amx_ghz_set = sys.argv[14] == "1"
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, here)
from bench_torch import flops_per_step  # one flop count for every impl

flops = flops_per_step(L, C, V, B, T)
# gentrain / PyTorch 2.x, same precision; bf16's by what the CPU has for BF16 products
# (None: no target there)
cpu_bf16_kind = sys.argv[15]
BF16_TARGETS = {"amx": (2.0, " (a CPU with AMX tiles)"),
                "avx512_bf16": (1.6, " (a CPU with AVX512_BF16, no AMX tiles)")}
bf16_want, bf16_kind = BF16_TARGETS.get(cpu_bf16_kind, (None, ""))
TARGETS = {"fp32": 1.0, "bf16": bf16_want}


def load_json(path):
    try:
        with open(path) as f:
            text = f.read().strip()
        return json.loads(text) if text else None
    except (OSError, ValueError) as e:
        print("bench.sh: cannot read %s: %s" % (path, e))
        return None


def step_records(log_f, key):
    """The step records of a gentrain JSON Lines log that carry `key` (a true value),
    in step order; None (said) when the log cannot be read."""
    rows = []
    try:
        with open(log_f) as f:
            for line in f:
                try:
                    r = json.loads(line)
                except ValueError:
                    continue
                if "step" in r and r.get(key):
                    rows.append(r)
    except OSError as e:
        print("bench.sh: %s: %s" % (log_f, e))
        return None
    return sorted(rows, key=lambda r: r["step"])


def gentrain_row(prec, log_f, load_f, out_f):
    rows = step_records(log_f, "tokens_per_s")
    if rows is None:
        return None
    timed = rows[2:]
    if not timed:
        print("bench.sh: %s has %d step lines, need 3 or more" % (log_f, len(rows)))
        return None
    tps = statistics.median(r["tokens_per_s"] for r in timed)
    other = rss = peak = None
    try:
        other, rss = (float(x) for x in open(load_f).read().split()[:2])
    except (OSError, ValueError):
        pass
    text = open(out_f).read() if os.path.exists(out_f) else ""
    m = re.search(r"peak ([0-9.]+) GFLOP/s \(measured ([^;]*) peak", text)
    if m:
        peak = float(m.group(1))
    kind = m.group(2) if m else None
    m = re.search(r"^precision: bf16 matrix products \(([^)]*) path\)", text, re.M)
    path = m.group(1) if m else None
    blas = re.search(r"^BLAS: (.*)$", text, re.M)
    return {"impl": "gentrain", "label": "gentrain " + prec, "precision": prec,
            "tokens_per_s": tps, "ms": B * T / tps * 1e3,
            "gflops": flops * tps / (B * T) / 1e9, "peak_gflops": peak,
            "max_rss_mb": rss, "other_load_cores": other,
            "blas": blas.group(1) if blas else None, "peak_kind": kind, "bf16_path": path,
            "dot_split": dot_split(timed, peak if kind == "BF16 dot-product" else None)}


def dot_split(timed, peak):
    """Where a real avx512-bf16 step goes, from the counts its micro-kernels log: the
    timed step of median time, its busiest thread's micro-kernel time and VDPBF16PS, and
    their rate against the measured dot-product peak a thread (peak: all threads'
    GFLOP/s, or None). None where the log has no counts (other paths)"""
    counted = [r for r in timed if r.get("dot_kernel_ms") and r.get("vdpbf16ps")]
    if not counted:
        return None
    r = sorted(counted, key=lambda r: r["ms"])[(len(counted) - 1) // 2]
    kernel_s = max(r["dot_kernel_ms"]) / 1e3
    if kernel_s <= 0:
        return None
    busiest = max(r["vdpbf16ps"])
    gflops = 64 * busiest / kernel_s * 1e-9  # a thread, in its micro-kernels
    return {"step_s": r["ms"] / 1e3, "kernel_s": kernel_s, "busiest": busiest,
            "kernel_gflops": gflops,
            "of_thread_peak": gflops / (peak / threads) if peak else None}


# The tile unit of the AMX prediction, in cycles per instruction, run one after the
# other (loads and stores never overlapping the products: the upper end of the tile
# time; full overlap would leave the products' cycles alone):
#  - TDPBF16PS 16: one 16 x 16 x 32 product; the tile peak measured on 2 Sapphire
#    Rapids cores, 7,690 GFLOP/s, is 2 x 1024 flop a cycle at 3.75 GHz;
#  - TILELOADD 8: 16 rows of 64 bytes at two 64-byte loads a cycle from L1 (assumed);
#  - TILESTORED 16: one 64-byte row stored a cycle (assumed);
#  - TILEZERO 0: moves no data (assumed).
AMX_CYCLES = {"tdpbf16ps": 16, "tileloadd": 8, "tilestored": 16, "tilezero": 0}


def fma_peak_of_runs(lines):
    """The median FMA peak (GFLOP/s, THREADS threads) the gentrain runs printed (the fp32
    runs and the portable bf16 ones measure it; the emulated AMX run prints its dot-product
    peak instead); None when none did"""
    peaks = []
    for line in lines:
        f = line.split()
        if len(f) < 7 or not os.path.exists(f[5]):
            continue
        m = re.search(r"peak ([0-9.]+) GFLOP/s \(measured FMA peak", open(f[5]).read())
        if m:
            peaks.append(float(m.group(1)))
    return statistics.median(peaks) if peaks else None


def amx_clock():
    """The clock (GHz) the tiles are predicted at, and where it comes from: the user's
    BENCH_AMX_GHZ; else the clock the runs' measured FMA peak gives (two 16-lane FMA
    units a core: 64 flop a cycle), where that is above cpu MHz's"""
    if amx_ghz_set:
        return amx_ghz, "BENCH_AMX_GHZ"
    fma_ghz = fma_peak / threads / 64 if fma_peak else 0.0
    if fma_ghz > amx_ghz:
        return fma_ghz, ("the clock of the measured FMA peak, %.1f GFLOP/s / %d threads / 64"
                         " flop a cycle; %.3f GHz in cpu MHz" % (fma_peak, threads, amx_ghz))
    return amx_ghz, "cpu MHz"


def product_shares(r, b, hz, prod, emul):
    """How busy the predicted products keep the tile unit: per kind (the Linear layers'
    products, which bench_sgemm times, attention's passes, and all), the busiest thread's
    TDPBF16PS at AMX_CYCLES over the kind's predicted time (its tile instructions at
    AMX_CYCLES plus its measured time around them): the fraction of the tile peak its
    products run at. None for a log without the attention counts"""
    if "tdpbf16ps_attention" not in r:
        return None
    att_cyc = sum(c * r[k + "_attention"][b] for k, c in AMX_CYCLES.items())
    all_cyc = sum(c * r[k][b] for k, c in AMX_CYCLES.items())
    att_around = (max(r["amx_attention_ms"]) - max(r["amx_attention_tile_ms"])) / 1e3
    kinds = {"all": (r["tdpbf16ps"][b], all_cyc, prod - emul),
             "attention": (r["tdpbf16ps_attention"][b], att_cyc, att_around)}
    kinds["linear"] = (kinds["all"][0] - kinds["attention"][0], all_cyc - att_cyc,
                       prod - emul - att_around)
    out = {}
    for name, (dp, cyc, around) in kinds.items():
        dp_s, tile_s = AMX_CYCLES["tdpbf16ps"] * dp / hz, cyc / hz
        out[name] = {"tdpbf16ps_s": dp_s, "tile_s": tile_s, "around_s": around,
                     "of_peak": dp_s / (tile_s + around) if tile_s + around > 0 else None}
    return out


def other_load(load_f):
    """Cores' worth of CPU other processes took during a run (its load file); None"""
    try:
        return float(open(load_f).read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def median_prediction(steps_):
    """The step of median predicted time (the lower of the middle two), whole, so that
    its parts add up as printed"""
    return sorted(steps_, key=lambda st: st["pred_s"])[(len(steps_) - 1) // 2]


def amx_predicted_row(log_f, load_f, timing):
    """The real AMX path predicted from the emulated twin's log (timing: of its timing
    run, GENTRAIN_AMX_TIMING=1): per timed step,
    step - emulated tile time + tile time at AMX_CYCLES and amx_clock. A tile unit per
    core: the threads' shares run side by side, so the emulated time taken out is, per
    product, the thread's with the longest tile spans (the others waited for it), and
    the time put back the tile instructions of the thread with the most (the products
    deal every thread an equal share). The timed step (all but the first are) of median
    prediction"""
    rows = step_records(log_f, "tdpbf16ps")
    if rows is None:
        return None
    timed = rows[1:]
    ghz, ghz_src = amx_clock()
    if not timed or ghz <= 0:
        print("bench.sh: %s: no timed step with tile counts (or no clock)" % log_f)
        return None
    steps_ = []
    for r in timed:
        n = len(r["tdpbf16ps"])
        cyc = [sum(c * r[k][i] for k, c in AMX_CYCLES.items()) for i in range(n)]
        b = max(range(n), key=lambda i: cyc[i])  # the busiest thread
        hz = ghz * 1e9
        # per product, the thread with the longest tile spans, summed over the products
        emul = max(r["amx_product_tile_ms"]) / 1e3
        prod = max(r["amx_product_ms"]) / 1e3
        st = {"step_s": r["ms"] / 1e3, "emul_s": emul, "rest_s": r["ms"] / 1e3 - emul,
              "products_s": prod, "tile_s": cyc[b] / hz, "threads": r.get("threads", n)}
        for k, c in AMX_CYCLES.items():
            st[k] = sum(r[k])  # the step's, all threads
            st[k + "_s"] = c * r[k][b] / hz  # the busiest thread's, on the tile unit
        st["pred_s"] = st["rest_s"] + st["tile_s"]
        st["shares"] = product_shares(r, b, hz, prod, emul)
        steps_.append(st)
    med = dict(median_prediction(steps_))
    del med["threads"]
    other = other_load(load_f)
    pred = med["pred_s"]
    model = dict(med, ghz=ghz, ghz_src=ghz_src, cycles=AMX_CYCLES, timed_steps=len(steps_),
                 threads=min(st["threads"] for st in steps_), timing_only=timing)
    return {"impl": "prediction", "precision": "bf16",
            "label": "PREDICTED amx-bf16%s (%s)" % (
                ", %d thr" % model["threads"] if model["threads"] < threads else "",
                "timing twin" if timing else "model below"),
            "tokens_per_s": B * T / pred, "ms": pred * 1e3, "gflops": flops / pred / 1e9,
            "max_rss_mb": None, "other_load_cores": other, "amx_model": model}


# The CPU the avx512-bf16 prediction models: its BF16 dot products (VDPBF16PS, 64 flop
# each) at this many times its FMA flops, one thread's rate over one thread's, as AMD
# Zen 4 and 5 measure (cpu_bf16_dot_over_fma: about 2); everything else as this CPU's
DOT_MODEL_RATIO = 2.0


def dot_predicted_row(log_f, load_f, out_f):
    """The avx512-bf16 path on a CPU with DOT_MODEL_RATIO, from its run here: per timed
    step, step - the busiest thread's time in the dot-product micro-kernels + that time
    x this CPU's ratio / DOT_MODEL_RATIO (the micro-kernels bound by their VDPBF16PS,
    here and there). The timed step of median prediction"""
    rows = step_records(log_f, "dot_kernel_ms")
    text = open(out_f).read() if os.path.exists(out_f) else ""
    m = re.search(r"^precision: BF16 dot products measure ([0-9.]+)x", text, re.M)
    if rows is None or not m or float(m.group(1)) <= 0:
        print("bench.sh: %s: no dot-product counts, or no measured dot-product rate" % log_f)
        return None
    here = float(m.group(1))
    timed = rows[2:]
    if not timed:
        print("bench.sh: %s: no timed step with dot counts" % log_f)
        return None
    steps_ = []
    for r in timed:
        k = max(r["dot_kernel_ms"]) / 1e3
        st = {"step_s": r["ms"] / 1e3, "vdpbf16ps": sum(r["vdpbf16ps"]),
              "busiest": max(r["vdpbf16ps"]), "kernel_s": k,
              "kernel_model_s": k * here / DOT_MODEL_RATIO}
        st["pred_s"] = st["step_s"] - k + st["kernel_model_s"]
        steps_.append(st)
    med = median_prediction(steps_)
    other = other_load(load_f)
    pred = med["pred_s"]
    model = dict(med, here=here, ratio=DOT_MODEL_RATIO, timed_steps=len(steps_))
    return {"impl": "prediction", "precision": "bf16",
            "label": "PREDICTED avx512-bf16, dots at %gx FMA" % DOT_MODEL_RATIO,
            "tokens_per_s": B * T / pred, "ms": pred * 1e3, "gflops": flops / pred / 1e9,
            "max_rss_mb": None, "other_load_cores": other, "dot_model": model}


def dot_timing_row(log_f, load_f):
    """The avx512-bf16 path on a CPU with dots at 2x its FMA flops, measured whole: the
    timing twin's run (GENTRAIN_DOT_TIMING=1), whose micro-kernels run a multiply-add (32
    flop) where each dot product (64) was, at this CPU's FMA rate. The timed step of
    median time"""
    rows = step_records(log_f, "dot_kernel_ms")
    timed = rows[2:] if rows else []
    if not timed:
        print("bench.sh: %s: no timed step with dot counts" % log_f)
        return None
    steps_ = [{"step_s": r["ms"] / 1e3, "pred_s": r["ms"] / 1e3,
               "kernel_s": max(r["dot_kernel_ms"]) / 1e3, "busiest": max(r["vdpbf16ps"])}
              for r in timed]
    med = median_prediction(steps_)
    pred = med["pred_s"]
    return {"impl": "prediction", "precision": "bf16",
            "label": "PREDICTED avx512-bf16, dots at 2x FMA (timing twin)",
            "tokens_per_s": B * T / pred, "ms": pred * 1e3, "gflops": flops / pred / 1e9,
            "max_rss_mb": None, "other_load_cores": other_load(load_f),
            "dot_twin": dict(med, timed_steps=len(steps_))}


def torch_row(key, prec, json_f):
    t = load_json(json_f)
    if not t:
        return None
    version = (t.get("config") or {}).get("torch") or "?"
    return {"impl": "pytorch", "key": key, "precision": prec,
            "label": "pytorch %s %s (%s)" % (version.split("+")[0], prec, t.get("variant")),
            "tokens_per_s": t["tokens_per_s"], "ms": t["ms"],
            "gflops": flops * t["tokens_per_s"] / (B * T) / 1e9,
            "max_rss_mb": t.get("max_rss_mb"), "other_load_cores": t.get("other_load_cores"),
            "attention": t.get("attention"), "blas": t.get("blas"), "torch": version}


table = []
try:
    lines = open(runs_f).read().split("\n")
except OSError:
    lines = []
fma_peak = fma_peak_of_runs(lines)
for line in lines:
    f = line.split()
    if len(f) < 7:
        continue
    key, kind, prec, data = f[:4]
    if kind == "gentrain":
        r = gentrain_row(prec, data, f[4], f[5])
    elif kind in ("amxpred", "amxtime"):
        r = amx_predicted_row(data, f[4], kind == "amxtime")
    elif kind == "dotpred":
        r = dot_predicted_row(data, f[4], f[5])
    elif kind == "dottime":
        r = dot_timing_row(data, f[4])
    else:
        r = torch_row(key, prec, data)
    if r:
        r["round"] = int(f[6])
        table.append(r)
rounds = max((r["round"] for r in table), default=1)
sgemm = load_json(sgemm_f)


def fmt(x, spec):
    return format(x, spec) if isinstance(x, (int, float)) else "-"


def baseline(prec, rnd):
    """PyTorch 2.x in this precision, in the same round"""
    for r in table:
        if r["impl"] == "pytorch" and r.get("key") == "torch2-%s-r%d" % (prec, rnd):
            return r
    return None


print("model: %.2f GFLOP per step (6 x tokens x matrix params + full T x T attention)"
      % (flops / 1e9))
row = "%-40s %9s %9s %8s %8s %11s %8s %6s"
print(row % ("impl", "ms/step", "tokens/s", "GFLOP/s", "RSS MB", "vs torch2.x", "of peak",
             "other"))
table.sort(key=lambda r: (r["round"], {"gentrain": 0, "prediction": 1}.get(r["impl"], 2)))
for r in table:
    base = baseline(r["precision"], r["round"])
    # not for a prediction: its tiles against this CPU's autocast, which has none
    r["ratio_vs_torch2"] = (r["tokens_per_s"] / base["tokens_per_s"]
                            if base and r is not base and r["impl"] != "prediction" else None)
    r["frac_of_peak"] = r["gflops"] / r["peak_gflops"] if r.get("peak_gflops") else None
    if rounds > 1 and r.get("key") != "torch-debian":
        r["label"] += " r%d" % r["round"]
    print(row % (r["label"], fmt(r["ms"], ".1f"), fmt(r["tokens_per_s"], ".1f"),
                 fmt(r["gflops"], ".1f"), fmt(r.get("max_rss_mb"), ".0f"),
                 fmt(r["ratio_vs_torch2"], ".2f") + "x" if r["ratio_vs_torch2"] else "-",
                 fmt(r["frac_of_peak"], ".1%") if r["frac_of_peak"] else "-",
                 fmt(r.get("other_load_cores"), ".2f")))
if sgemm:
    print(row % ("sgemm step average", fmt(sgemm["step_gemm_ms"], ".1f"), "-",
                 fmt(sgemm.get("step_avg_gflops"), ".1f"), "-", "-", "-",
                 fmt(sgemm.get("other_load_cores"), ".2f")))
for r in table:
    if r["impl"] == "gentrain":
        if r.get("blas"):
            print("%s: BLAS %s" % (r["label"], r["blas"]))
        if r.get("peak_gflops"):
            print("%s: measured peak %.1f GFLOP/s (%s%s)" % (
                r["label"], r["peak_gflops"], r.get("peak_kind") or "?",
                "; %s path" % r["bf16_path"] if r.get("bf16_path") else ""))
        d = r.get("dot_split")
        if d:
            print("%s: the busiest thread's dot-product micro-kernels %.1f ms of a %.1f ms"
                  " step (%.3f G VDPBF16PS at %.1f GFLOP/s%s); the rest %.1f ms (packing,"
                  " epilogues, attention's softmax, LayerNorm, AdamW, waits)" % (
                      r["label"], d["kernel_s"] * 1e3, d["step_s"] * 1e3,
                      d["busiest"] * 1e-9, d["kernel_gflops"],
                      ", %.0f%% of the measured dot-product peak a thread"
                      % (100 * d["of_thread_peak"]) if d["of_thread_peak"] else "",
                      (d["step_s"] - d["kernel_s"]) * 1e3))
for r in table:
    m = r.get("amx_model")
    if not m:
        continue
    cy = m["cycles"]
    print("%s: a model, not a measurement. Predicted step = measured amx-emulated step"
          " - emulated tile time (per product, the longest thread's) + the tile"
          " instructions of the thread with the most"
          " at %d (TDPBF16PS), %d (TILELOADD), %d (TILESTORED), %d (TILEZERO) cycles each,"
          " one after the other, at %.3f GHz (%s); the median of %d timed steps,"
          " on %d thread(s)" % (r["label"], cy["tdpbf16ps"], cy["tileloadd"], cy["tilestored"],
                           cy["tilezero"], m["ghz"], m["ghz_src"], m["timed_steps"],
                           m["threads"]))
    print("  per step: %d TDPBF16PS, %d TILELOADD, %d TILESTORED, %d TILEZERO (all threads)"
          % (m["tdpbf16ps"], m["tileloadd"], m["tilestored"], m["tilezero"]))
    print("  measured: amx-emulated %sstep %.1f ms = emulated tiles %.1f ms + the rest %.1f ms:"
          " %.1f ms in the AMX products around the tiles (packing, write-back, waits for"
          " the team) and %.1f ms outside them (the longest thread's)" % (
              "timing run (GENTRAIN_AMX_TIMING=1: tile products counted, not computed) "
              if m["timing_only"] else "", m["step_s"] * 1e3, m["emul_s"] * 1e3,
              m["rest_s"] * 1e3,
              (m["products_s"] - m["emul_s"]) * 1e3, (m["step_s"] - m["products_s"]) * 1e3))
    print("  predicted: the rest %.1f ms + tiles %.1f ms (products %.1f, loads %.1f, stores"
          " %.1f) = %.1f ms/step, %.0f tokens/s" % (
              m["rest_s"] * 1e3, m["tile_s"] * 1e3, m["tdpbf16ps_s"] * 1e3,
              m["tileloadd_s"] * 1e3, m["tilestored_s"] * 1e3, r["ms"], r["tokens_per_s"]))
    sh = m.get("shares")
    if sh:
        print("  the products' share of the tile peak (TDPBF16PS at the tile unit's rate over"
              " their predicted time: tiles + around them): " + "; ".join(
                  "%s %.1f%% (%.1f of %.1f + %.1f ms)" % (
                      {"linear": "the Linear layers' (as bench_sgemm times them)",
                       "attention": "attention's", "all": "all"}[k], 100 * v["of_peak"],
                      v["tdpbf16ps_s"] * 1e3, v["tile_s"] * 1e3, v["around_s"] * 1e3)
                  for k, v in ((k, sh[k]) for k in ("linear", "attention", "all"))
                  if v["of_peak"] is not None))
for r in table:
    m = r.get("dot_model")
    if not m:
        continue
    print("%s: a model, not a measurement, of a CPU whose BF16 dot products run at %gx its"
          " FMA flops (AMD Zen 4 and 5 measure about 2), everything else as this one's."
          " Predicted step = measured avx512-bf16 step - the busiest thread's time in the"
          " dot-product micro-kernels + that time x %.2f (this CPU's measured ratio) / %g;"
          " the median of %d timed steps" % (
              r["label"], m["ratio"], m["here"], m["ratio"], m["timed_steps"]))
    print("  per step: %d VDPBF16PS (all threads; the busiest %d); measured step %.1f ms,"
          " of which the busiest thread's micro-kernels %.1f ms (%.1f GFLOP/s a thread);"
          " predicted: %.1f ms of the rest + %.1f ms of micro-kernels = %.1f ms/step,"
          " %.0f tokens/s" % (
              m["vdpbf16ps"], m["busiest"], m["step_s"] * 1e3, m["kernel_s"] * 1e3,
              64 * m["busiest"] / m["kernel_s"] * 1e-9, (m["step_s"] - m["kernel_s"]) * 1e3,
              m["kernel_model_s"] * 1e3, r["ms"], r["tokens_per_s"]))
    fp = [x for x in table if x["impl"] == "gentrain" and x["precision"] == "fp32"
          and x["round"] == r["round"]]
    if fp:  # as a ratio, so that the model CPU's own fp32 figure can carry it over
        m["speedup_over_fp32"] = fp[0]["ms"] / r["ms"]
        print("  predicted speed-up over gentrain fp32 of the same round: %.2fx (on the model"
              " CPU, fp32 runs as here)" % m["speedup_over_fp32"])
    tb = baseline("bf16", r["round"])
    if tb:  # autocast under the same model: every model flop a dot product, at the rate
        # gentrain's micro-kernels ran in the step (the most the model can take off it;
        # the same clock as ours, unlike a peak measured at start-up)
        rate = 64 * m["busiest"] / m["kernel_s"] * threads  # flop/s, all threads
        t_dots = flops / rate
        t_pred = tb["ms"] / 1e3 - t_dots + t_dots * m["here"] / m["ratio"]
        if t_pred > 0:
            m["torch_autocast_pred_s"] = t_pred
            m["vs_torch_autocast"] = t_pred / (r["ms"] / 1e3)
            print("  PyTorch autocast under the same model: measured %.1f ms; its %.2f GFLOP"
                  " as dot products at the rate of gentrain's micro-kernels (%.1f GFLOP/s)"
                  " %.1f ms, x %.2f / %g: predicted %.1f ms/step, the avx512-bf16 path"
                  " predicted at %.2fx it" % (tb["ms"], flops / 1e9, rate * 1e-9,
                                              t_dots * 1e3, m["here"], m["ratio"],
                                              t_pred * 1e3, m["vs_torch_autocast"]))
for r in table:
    m = r.get("dot_twin")
    if not m:
        continue
    model = [x for x in table if x.get("dot_model") and x["round"] == r["round"]]
    print("%s: a model, not a measurement: the avx512-bf16 path run whole with each"
          " VDPBF16PS replaced by one FP32 multiply-add of the same registers"
          " (GENTRAIN_DOT_TIMING=1; its losses mean nothing), so its dot products run at"
          " this CPU's FMA instruction rate, 2x its FMA flops, with the loads, stores and"
          " waits around them as they fall then; the median of %d timed steps" % (
              r["label"], m["timed_steps"]))
    print("  measured: step %.1f ms, of which the busiest thread's micro-kernels %.1f ms"
          " (%.1f GFLOP/s a thread as dot products)%s" % (
              m["step_s"] * 1e3, m["kernel_s"] * 1e3,
              64 * m["busiest"] / m["kernel_s"] * 1e-9,
              "; the row above modelled them at %.1f ms" % (
                  model[0]["dot_model"]["kernel_model_s"] * 1e3) if model else ""))
    fp = [x for x in table if x["impl"] == "gentrain" and x["precision"] == "fp32"
          and x["round"] == r["round"]]
    if fp:
        m["speedup_over_fp32"] = fp[0]["ms"] / r["ms"]
        print("  predicted speed-up over gentrain fp32 of the same round: %.2fx"
              % m["speedup_over_fp32"])
if any(isinstance(r.get("other_load_cores"), float) and r["other_load_cores"] >= 0.2
       for r in table):
    print("warning: other processes took CPU during the runs (column 'other', in cores);"
          " those figures are not clean, rerun on an idle machine")

def dot_ceiling(prec, want):
    """For a missed target on the avx512-bf16 path: how fast each round's step could be
    with its micro-kernels' VDPBF16PS (the busiest thread's) all at the measured
    dot-product peak a thread and the rest as measured, its ratio to that round's
    PyTorch, and the rest that the target would then leave room for: whether the
    target is in reach of faster micro-kernels alone at this shape"""
    rows = [r for r in table if r["impl"] == "gentrain" and r["precision"] == prec
            and r.get("dot_split") and r["dot_split"].get("of_thread_peak")
            and r.get("ratio_vs_torch2")]
    if not rows:
        return
    parts, best = [], []
    for r in rows:
        d = r["dot_split"]
        at_peak = d["kernel_s"] * d["of_thread_peak"]  # the same instructions at the peak
        rest = d["step_s"] - d["kernel_s"]
        torch_s = r["ratio_vs_torch2"] * r["ms"] / 1e3
        best.append(torch_s / (at_peak + rest))
        parts.append("r%s %.1f + %.1f ms = %.2fx (a rest of %.1f ms or less for %.1fx)"
                     % (r["round"], at_peak * 1e3, rest * 1e3, best[-1],
                        max(0.0, torch_s / want - at_peak) * 1e3, want))
    print("ceiling %s: the busiest thread's VDPBF16PS all at the measured dot-product peak"
          " a thread, plus the rest as measured: %s; median %.2fx PyTorch 2.x (a bound"
          " from this run's figures, not a measurement)"
          % (prec, "; ".join(parts), statistics.median(best)))


missed, ratios = [], {}
for r in table:
    if r["impl"] == "gentrain" and r["ratio_vs_torch2"]:
        ratios.setdefault(r["precision"], []).append(r["ratio_vs_torch2"])
for prec, rs in ratios.items():
    want, med = TARGETS.get(prec), statistics.median(rs)
    if want is None:
        isa = os.environ.get("BENCH_ISA", "native")
        print("target %s: none %s (the bf16 targets are for CPUs with AMX tiles or"
              " AVX512_BF16): median %.2fx PyTorch 2.x" % (
                  prec, "under BENCH_ISA=%s" % isa if isa != "native"
                  else "on this CPU (neither)", med))
        continue
    met = med >= want
    per_round = (" over %d rounds: %s" % (len(rs), " ".join("%.2f" % x for x in rs))
                 if len(rs) > 1 else "")
    print("target %s%s: gentrain >= %.1fx PyTorch 2.x: %s (%s%.2fx%s)"
          % (prec, bf16_kind if prec == "bf16" else "", want, "met" if met else "NOT met",
             "median " if len(rs) > 1 else "", med, per_round))
    if not met:
        missed.append(prec)
        dot_ceiling(prec, want)
out = {"bench": "gentrain-vs-pytorch", "isa": os.environ.get("BENCH_ISA", "native"),
       "n_layer": L, "n_head": nh, "n_embd": C,
       "block_size": T, "batch_size": B, "vocab": V, "threads": threads, "rounds": rounds,
       "median_ratio_vs_torch2": {p: statistics.median(rs) for p, rs in ratios.items()},
       "gflop_per_step": round(flops / 1e9, 4), "runs": table,
       "sgemm": {k: sgemm.get(k) for k in ("blas", "step_avg_gflops", "square_gflops")}
       if sgemm else None, "targets_missed": missed}
print(json.dumps(out))
sys.exit(1 if (strict and missed) else 0)
EOF
rc=$?
[ $rc -ne 0 ] && fail=1
exit $fail
