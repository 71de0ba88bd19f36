#!/usr/bin/env bash
# bench-loader.sh — raw against compressed token data, the data side alone and in a
# short training run. Run from the build folder after `make scripts/bench_loader`:
#   ../scripts/bench-loader.sh [TOKENS (default 50000000)] [SECONDS (default 5)]
# Writes two synthetic uint16 files of TOKENS tokens (raw; shuffle + deflate 4 in
# 16 Ki-token chunks) under ${TMPDIR:-/tmp}, prints the loader's tokens/s on each
# (bench_loader read: block 1024, batch 16) and the mean `wait` share of the step in a
# 20-step training run on each (a small model, 1 thread).
set -eu
TOKENS=${1:-50000000}
SECONDS_READ=${2:-5}
B=${BENCH_LOADER:-./scripts/bench_loader}
G=${GENTRAIN:-./gentrain}
dir=$(mktemp -d "${TMPDIR:-/tmp}/bench-loader.XXXXXX")
trap 'rm -rf "$dir"' EXIT
for kind in raw deflate; do
    level=0
    [ $kind = deflate ] && level=4
    t0=$(date +%s.%N)
    "$B" gen "$dir/$kind.h5" "$TOKENS" $level
    t1=$(date +%s.%N)
    echo "$kind: $(stat -c %s "$dir/$kind.h5") bytes, written in $(echo "$t1 - $t0" | bc) s"
    "$B" read "$dir/$kind.h5" "$SECONDS_READ" 1024 16 | sed "s/^/$kind: /"
    "$G" train --data "$dir/$kind.h5" --n_layer 2 --n_head 4 --n_embd 128 --block_size 256 \
        --batch_size 8 --steps 20 --eval_every 0 --threads 1 --out "" \
        --log "$dir/$kind.jsonl" > "$dir/$kind.out" 2>&1
    awk -v k=$kind '{ if (match($0, /"ms":[0-9.]+/)) ms += substr($0, RSTART + 5, RLENGTH - 5);
                      if (match($0, /"load_wait_ms":[0-9.]+/)) w += substr($0, RSTART + 15, RLENGTH - 15) }
                    END { printf "%s: training wait %.3f ms of %.1f ms over 20 steps (%.4f%%)\n",
                          k, w, ms, 100 * w / ms }' "$dir/$kind.jsonl"
done
