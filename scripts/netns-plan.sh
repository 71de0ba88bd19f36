#!/bin/bash
# netns-plan.sh — `gentrain plan --measure` on a slow link between two hosts, and the
# planner's choice against pure synchronous data parallelism, measured for real.
#
# Two hosts of scripts/netns-hosts.sh (network namespaces on this machine, one rank
# each, Open MPI over TCP only) whose links are capped at RATE with DELAY of one-way
# latency. Then:
#  1. the link: an MPI ping-pong (scripts/bench_allreduce --pingpong, at
#     MPI_THREAD_MULTIPLE as gentrain runs) of 1 kB and 4 MB, and `mpirun -np 2 gentrain
#     plan --measure --json` across the hosts: the figures it measured (point to point:
#     ping-pong of a small and a large message; all-reduce: its ring-model fit), all
#     beside what tc and the switch set;
#  2. every grid the planner costs for this machine (1 rank with THREADS threads on
#     one host; 2 ranks of THREADS/2 threads on two hosts: dp 2, tp 2, pp 2 with the
#     micro-batches it chose) trained for STEPS steps (the median step time of steps 3
#     on), beside its prediction; dp 2 with `sync = async` too (measured only: the
#     planner has no model of async);
#  3. the headline: the grid the planner prefers against dp 2 (synchronous): predicted
#     speed-up, measured speed-up, and their ratio (the brief asked for within 25%).
# Model: n_layer 4, n_head 4, n_embd 256, block_size 128, vocab 256 (the corpus as
# bytes), batch_size 8 per replica: 3.2 M parameters, 12.8 MB of gradients a step.
# The two hosts share this machine's cores: the planner is told one node of THREADS
# cores (`--cores-per-node`), which is what the ranks really share; its links are the
# measured veth link.
#
# Environment:
#   GENTRAIN   the gentrain binary (required)
#   NETWIRE    scripts/netwire (needed for DELAY where the kernel has no netem)
#   BENCH_ALLREDUCE  scripts/bench_allreduce (the ping-pong; skipped without it)
#   RATE       tc rate of each host's link (default 100mbit)
#   DELAY      one-way latency host to host (default 2ms; empty: none)
#   THREADS    cores in all (default 2)
#   STEPS      training steps per grid (default 6, at least 4)
#   REPS       the planner's timing repetitions (default 9)
#   MPIEXEC    mpirun (default mpirun); as root OMPI_ALLOW_RUN_AS_ROOT=1 and
#              OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
#   top_srcdir source tree (default: the parent of this script's folder)
# About 4 minutes at the defaults (the planner's link measurement alone moves
# 11 x 32 MB of all-reduce and 11 x 16 MB each way of ping-pong over the slow link).
# Exit status: 0 when every run worked; 77 when the hosts cannot be made here; 1
# otherwise. A table, then one JSON line with every figure.
set -u
: "${GENTRAIN:?GENTRAIN must point at the gentrain binary}"
RATE=${RATE-100mbit}
DELAY=${DELAY-2ms}
THREADS=${THREADS:-2}
STEPS=${STEPS:-6}
top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
MPIEXEC=${MPIEXEC:-mpirun}
[ "$STEPS" -ge 4 ] || { echo "netns-plan: STEPS must be at least 4" >&2; exit 1; }
half=$((THREADS / 2))
[ "$half" -ge 1 ] || { echo "netns-plan: THREADS must be at least 2" >&2; exit 1; }

. "$top_srcdir/scripts/netns-hosts.sh"
NH_HOSTS=2 NH_RATE=$RATE NH_DELAY=$DELAY
if ! nh_usable; then
    echo "netns-plan: cannot make the hosts here: $NH_WHY" >&2
    exit 77
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/netns-plan.XXXXXX") || exit 1
trap 'nh_down; rm -rf "$tmp"' EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM
nh_up "$tmp/hosts" || exit 1
nh_describe
H0=${NH_NAMES[0]}

head -c 300000 "$top_srcdir/data/tinyshakespeare.txt" > "$tmp/slice.txt"
"$GENTRAIN" prepare "$tmp/slice.txt" -o "$tmp/d.h5" > /dev/null || exit 1
MODEL=(--data "$tmp/d.h5" --n_layer 4 --n_head 4 --n_embd 256 --block_size 128
       --batch_size 8 --val_dataset none --out none)
MPI=("${NH_MPI_OPTS[@]}" --bind-to none)
status=0

field() { sed -n "s/.*\"$2\":\([-0-9.e+]*\).*/\1/p" <<< "$1"; }

# ------------------------------------------------------------- 1. the link, the planner
pp_json=
if [ -n "${BENCH_ALLREDUCE:-}" ]; then
    echo
    if nh_exec "$H0" "$MPIEXEC" "${MPI[@]}" -np 2 "$BENCH_ALLREDUCE" --pingpong \
        --thread-multiple --mb 4 --reps 5 < /dev/null > "$tmp/pingpong.txt" 2>&1; then
        grep '^ping-pong' "$tmp/pingpong.txt"
        pp_json=$(grep '^{"bench":"pingpong"' "$tmp/pingpong.txt")
    else
        echo "netns-plan: the ping-pong failed:" >&2
        tail -n 5 "$tmp/pingpong.txt" >&2
        status=1
    fi
fi
echo
echo "predicting: mpirun -np 2 (one rank a host) gentrain plan ... --cores-per-node $THREADS --measure"
t0=$(date +%s)
if ! nh_exec "$H0" "$MPIEXEC" "${MPI[@]}" -np 2 "$GENTRAIN" plan "${MODEL[@]}" \
    --cores-per-node "$THREADS" --measure --reps "${REPS:-9}" --json \
    < /dev/null > "$tmp/plan.txt" 2> "$tmp/plan.err"; then
    cat "$tmp/plan.err" >&2
    exit 1
fi
echo "($(($(date +%s) - t0)) s)"
grep -v '^{' "$tmp/plan.txt"

# The planner's link figures: "links A GB/s inside a node, B GB/s between, L us; point
# to point P GB/s, Q us".
links=$(grep '^plan: .* links ' "$tmp/plan.txt")
ar_gbs=$(sed -n 's/.* links \([0-9.e+-]*\) GB\/s inside.*/\1/p' <<< "$links")
ar_us=$(sed -n 's/.* GB\/s between, \([0-9.]*\) us.*/\1/p' <<< "$links")
pp_gbs=$(sed -n 's/.*point to point \([0-9.e+-]*\) GB\/s.*/\1/p' <<< "$links")
pp_us=$(sed -n 's/.*point to point [0-9.e+-]* GB\/s, \([0-9.]*\) us.*/\1/p' <<< "$links")
rate_mbs=uncapped
[ -n "$RATE" ] && rate_mbs=$(awk -v b="$(nh_rate_bytes "$RATE")" 'BEGIN { printf "%.2f", b / 1e6 }')
delay_ms=$(awk -v d="$(nh_delay_us "${DELAY:-0us}")" 'BEGIN { printf "%.3f", d / 1e3 }')
echo
printf '%-42s %-12s %s\n' "link, host to host" set measured
# row WHAT SET MEASURED [NOTE]
row() { printf '%-42s %-12s %s\n' "$1" "$2" "$3${4:+  ($4)}"; }
if [ -n "$pp_json" ]; then
    row "bandwidth, MPI ping-pong of 4 MB" "${RATE:+$rate_mbs MB/s}" \
        "$(awk -v g="$(field "$pp_json" bw_gbs)" 'BEGIN { printf "%.2f MB/s", g * 1e3 }')" \
        "$([ -n "$RATE" ] && awk -v g="$(field "$pp_json" bw_gbs)" -v r="$rate_mbs" 'BEGIN { printf "%.1f%% of the rate; TCP payload in the frames tbf counts: 95.6%%", 100 * g * 1e3 / r }')"
fi
row "bandwidth, planner's point to point" "${RATE:+$rate_mbs MB/s}" \
    "$(awk -v g="$pp_gbs" 'BEGIN { printf "%.2f MB/s", g * 1e3 }')"
row "bandwidth, planner's all-reduce fit" "-" \
    "$(awk -v g="$ar_gbs" 'BEGIN { printf "%.2f MB/s", g * 1e3 }')" \
    "the ring model's bw: Open MPI's all-reduce of 2 ranks uses one direction at a time"
if [ -n "$pp_json" ]; then
    row "latency one way, MPI ping-pong of 1 kB" "$delay_ms ms" \
        "$(awk -v m="$(field "$pp_json" small_oneway_ms)" -v b="$(field "$pp_json" small_best_ms)" \
            'BEGIN { printf "%.3f ms median, %.3f ms fastest", m, b }')"
fi
row "latency one way, planner's point to point" "$delay_ms ms" \
    "$(awk -v u="$pp_us" 'BEGIN { printf "%.3f ms", u / 1e3 }')"
row "latency, planner's all-reduce fit" "-" \
    "$(awk -v u="$ar_us" 'BEGIN { printf "%.3f ms", u / 1e3 }')" \
    "the ring model's term per message step: a small all-reduce of 2 ranks / 2"
echo "(a median above the fastest is ranks waiting for a core: MPI polls while it waits;" \
     "load average $(cut -d' ' -f1-3 /proc/loadavg 2> /dev/null) on $(nproc 2> /dev/null) cores)"

# ------------------------------------------------------------- 2. the grids, trained
median_ms() {
    sed -n 's/.*"step":\([0-9]*\),.*"ms":\([0-9.]*\),.*/\1 \2/p' "$1" |
        awk '$1 >= 3 { print $2 }' | sort -g |
        awk '{ v[NR] = $1 } END { if (NR == 0) print "nan"; else print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'
}
rows=()
# run_grid NAME PREDICTED_MS DP PP TP MICRO [ARGS...]: trains it, adds a table row.
run_grid() {
    local name=$1 pred=$2 dp=$3 pp=$4 tp=$5 micro=$6 np meas
    shift 6
    np=$((dp * pp * tp))
    local extra=(--tp "$tp" --pp "$pp" "$@")
    [ "$pp" -gt 1 ] && extra+=(--micro_batches "$micro")
    if [ "$np" = 1 ]; then
        nh_exec "$H0" "$GENTRAIN" train "${MODEL[@]}" "${extra[@]}" --steps "$STEPS" \
            --warmup_steps 1 --threads "$THREADS" --log "$tmp/$name.jsonl" \
            < /dev/null > "$tmp/$name.out" 2>&1
    else
        nh_exec "$H0" "$MPIEXEC" "${MPI[@]}" -np "$np" "$GENTRAIN" train "${MODEL[@]}" \
            "${extra[@]}" --steps "$STEPS" --warmup_steps 1 --threads "$half" \
            --log "$tmp/$name.jsonl" < /dev/null > "$tmp/$name.out" 2>&1
    fi || {
        echo "netns-plan: $name failed:" >&2
        tail -n 5 "$tmp/$name.out" >&2
        status=1
        return 1
    }
    meas=$(median_ms "$tmp/$name.jsonl")
    rows+=("$name $np $micro $pred $meas")
    eval "meas_$name=\$meas"
}

echo
echo "training each grid for $STEPS steps across the hosts"
best_name='' dp2_pred=''
i=0
while IFS= read -r line; do
    dp=$(field "$line" dp); pp=$(field "$line" pp); tp=$(field "$line" tp)
    micro=$(field "$line" micro); pred=$(field "$line" step_ms)
    name=dp${dp}pp${pp}tp${tp}
    [ $i = 0 ] && best_name=$name
    [ "$name" = dp2pp1tp1 ] && dp2_pred=$pred
    eval "pred_$name=\$pred"
    run_grid "$name" "$pred" "$dp" "$pp" "$tp" "$micro"
    i=$((i + 1))
done < <(grep '^{"dp"' "$tmp/plan.txt")
run_grid dp2async - 2 1 1 1 --sync async

printf '\n%-14s %5s %6s %14s %13s %8s\n' grid ranks micro "predicted ms" "measured ms" error
json='{"bench":"netns_plan","rate":"'$RATE'","delay":"'$DELAY'"'
json+=",\"p2p_gbs\":${pp_gbs:-null},\"p2p_us\":${pp_us:-null},\"allreduce_gbs\":${ar_gbs:-null},\"allreduce_us\":${ar_us:-null},\"grids\":["
sep=
for r in "${rows[@]}"; do
    read -r name np micro pred meas <<< "$r"
    if [ "$pred" = - ]; then
        printf '%-14s %5d %6d %14s %13.1f %8s\n' "$name" "$np" "$micro" "(no model)" "$meas" ""
        json+="$sep{\"grid\":\"$name\",\"ranks\":$np,\"measured_ms\":$meas}"
    else
        err=$(awk -v p="$pred" -v m="$meas" 'BEGIN { printf "%+.1f%%", 100 * (p - m) / m }')
        printf '%-14s %5d %6d %14.1f %13.1f %8s\n' "$name" "$np" "$micro" "$pred" "$meas" "$err"
        json+="$sep{\"grid\":\"$name\",\"ranks\":$np,\"micro\":$micro,\"predicted_ms\":$pred,\"measured_ms\":$meas}"
    fi
    sep=,
done
json+="]"

# ------------------------------------------------------------- 3. the headline
if [ -n "$best_name" ] && [ -n "$dp2_pred" ] && [ "$best_name" != dp2pp1tp1 ]; then
    eval "bp=\$pred_$best_name bm=\${meas_$best_name:-nan}"
    dm=${meas_dp2pp1tp1:-nan}
    echo
    awk -v n="$best_name" -v bp="$bp" -v bm="$bm" -v dp="$dp2_pred" -v dm="$dm" 'BEGIN {
        ps = dp / bp; ms = dm / bm; q = ms / ps
        printf "the planner prefers %s: predicted %.2fx faster a step than dp 2 (%.0f against %.0f ms)\n", n, ps, bp, dp
        printf "measured: %.2fx (%.0f against %.0f ms); measured / predicted speed-up = %.2f (%s 25%%)\n", ms, bm, dm, q, (q >= 0.75 && q <= 1.25) ? "within" : "outside"
    }'
    json+=",\"preferred\":\"$best_name\",\"preferred_vs_dp2_predicted\":$(awk -v a="$dp2_pred" -v b="$bp" 'BEGIN { printf "%.4f", a / b }')"
    json+=",\"preferred_vs_dp2_measured\":$(awk -v a="$dm" -v b="$bm" 'BEGIN { printf "%.4f", a / b }')"
else
    echo
    echo "the planner prefers ${best_name:-nothing} here: no grid to set against dp 2"
fi
echo "${json}}"
nh_down  # netwire prints its counts when it stops
[ -s "$tmp/hosts/netwire.out" ] && cat "$tmp/hosts/netwire.out"
exit $status
