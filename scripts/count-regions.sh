#!/usr/bin/env bash
# count-regions.sh — OpenMP parallel regions and barriers per training step, the figure
# that decides how hard a step falls when another process takes a core (each barrier
# waits for the slowest thread). Run from the build folder after `make count-regions`
# (which builds scripts/omp_regions.so and runs this):
#   ../scripts/count-regions.sh [gentrain train options...]
# Trains the same model twice, for STEPS_A and STEPS_B steps (default 4 and 12, no
# evaluation), with scripts/omp_regions.so preloaded, and prints the difference divided
# by the steps between: set-up, the first step's warm-up and the end are left out.
# Default model: the bench's (L6 H6 C384 T256 B8, vocab 256, 2 threads); options given
# replace those (e.g. --precision bf16, --n_layer 4 ...). The thread team is fixed, so
# every step runs on all its threads (an adaptive team under load would change the count),
# and peak_gflops is given (its measurement runs for a time, not a count).
# Environment: GENTRAIN (default ./gentrain), OMP_REGIONS (default
# ./scripts/omp_regions.so), STEPS_A, STEPS_B.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
G=${GENTRAIN:-./gentrain}
SO=${OMP_REGIONS:-./scripts/omp_regions.so}
A=${STEPS_A:-4}
B=${STEPS_B:-12}
case $A:$B in
*[!0-9:]*|:*|*:) echo "count-regions: STEPS_A=$A STEPS_B=$B: want whole numbers" >&2; exit 1 ;;
esac
if [ "$A" -lt 1 ] || [ "$B" -le "$A" ]; then
    echo "count-regions: STEPS_A=$A STEPS_B=$B: want 1 <= STEPS_A < STEPS_B (the counts" \
         "per step are their difference)" >&2
    exit 1
fi
[ -x "$G" ] || { echo "count-regions: no gentrain at $G (set GENTRAIN)" >&2; exit 1; }
[ -r "$SO" ] || { echo "count-regions: no $SO (make count-regions builds it)" >&2; exit 1; }
case $SO in /*) ;; *) SO=$(pwd)/$SO ;; esac
dir=$(mktemp -d "${TMPDIR:-/tmp}/count-regions.XXXXXX")
trap 'rm -rf "$dir"' EXIT
"$G" prepare "$here/../data/tinyshakespeare.txt" -o "$dir/d.h5" >/dev/null 2>&1 ||
    { echo "count-regions: gentrain prepare failed" >&2; exit 1; }
# counts STEPS: "P B" of a run of STEPS steps
counts() {
    local steps=$1
    shift
    OMP_REGIONS_OUT="$dir/c.txt" LD_PRELOAD="$SO" "$G" train --data "$dir/d.h5" \
        --n_layer 6 --n_head 6 --n_embd 384 --block_size 256 --batch_size 8 --threads 2 \
        --eval_every 0 --thread_team fixed --peak_gflops 1 --out "" "$@" --steps "$steps" >"$dir/run.out" 2>&1 ||
        { cat "$dir/run.out" >&2; return 1; }
    sed -n 's/^omp_regions: parallel \([0-9]*\) barrier \([0-9]*\)$/\1 \2/p' "$dir/c.txt"
}
opts=("$@")
read -r pa ba < <(counts "$A" ${opts[@]+"${opts[@]}"})
read -r pb bb < <(counts "$B" ${opts[@]+"${opts[@]}"})
[ -n "${pa:-}" ] && [ -n "${pb:-}" ] || { echo "count-regions: no counts (is the build OpenMP?)" >&2; exit 1; }
n=$((B - A))
awk -v pa="$pa" -v pb="$pb" -v ba="$ba" -v bb="$bb" -v n="$n" -v opts="${opts[*]:-}" 'BEGIN {
    p = (pb - pa) / n; b = (bb - ba) / n
    printf "per step (%s): %.1f parallel regions, %.1f barriers inside them, %.1f barriers in all\n",
           opts == "" ? "bench model, fp32" : opts, p, b, p + b }'
