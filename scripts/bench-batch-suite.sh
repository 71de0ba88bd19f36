#!/bin/bash
# bench-batch-suite.sh — the sweeps behind docs/adaptive-batch.md's "Measured" section:
# global_batch_size = auto against fixed global batches (scripts/bench-batch.sh), where a
# larger batch cannot pay (one node) and where it can (hosts joined by a capped link),
# on two corpora:
#   shakespeare  data/tinyshakespeare.txt as bytes (vocab 256)
#   kjv          the King James Bible (public domain; Debian's bible-kjv package prints
#                it), 4.1 MB of text in a byte-level BPE of 2,048 tokens trained on it
# Every run trains the model of data/shakespeare-cpu.cfg on 1,474,560 tokens with the
# config's lr (warmup over 1,152 sequences, the decay over the whole budget), evaluating
# every 1,152 sequences on the same 384 validation windows. Parts:
#   node-shakespeare node-kjv  one node, np 1 (2 threads) and np 2 (1 thread each):
#                              batch_size 6, fixed NODE_BATCHES (default 12 24 48 96),
#                              auto from 12
#   link-shakespeare link-kjv  4 hosts (scripts/netns-hosts.sh, one rank and one thread
#                              each) on links capped at RATE: batch_size 12, fixed
#                              LINK_BATCHES (default 48 96 192 384), auto from 48 (48 =
#                              the config's own batch there)
# Usage (root for the link parts; run from anywhere, on a quiet machine):
#   GENTRAIN=build/gentrain scripts/bench-batch-suite.sh [PART...]   (default: all four)
# Environment: SEEDS (default "1337 1 2"), RATE (default 1gbit), OUT (default a new
# folder under /tmp), GENTRAIN (required), STOP_AT_TARGET (bench-batch.sh's: 1 ends
# each run at the target, which saves the slow link's time), and the validation losses
# to reach: SHAKESPEARE_TARGET (one node, 2.0), LINK_SHAKESPEARE_TARGET (2.2), KJV_TARGET (4.8),
# LINK_KJV_TARGET (4.9): losses the config's own batch reaches after 40-65% of the
# budget (the link's larger batches train fewer steps, so its targets are higher).
# NODE_BATCHES / LINK_BATCHES narrow a sweep: a fixed run's losses do not depend on the
# link (the same bits at any RATE), so a slower link's sweep can time only the batches
# that reach the target and take the others' losses from a faster one.
# Each sweep's folder is OUT/PART-npN; its summary (scripts/bench-batch-summary.py) is
# printed and kept as summary.txt beside it. Exit status: 0, 1 when a sweep failed, 2 on a
# bad setting or missing data source.
set -u

here=$(cd "$(dirname "$0")" && pwd)
top_srcdir=$(dirname "$here")
: "${GENTRAIN:?GENTRAIN must point at the gentrain binary}"
GENTRAIN=$(cd "$(dirname "$GENTRAIN")" && pwd)/$(basename "$GENTRAIN")
SEEDS=${SEEDS:-1337 1 2}
RATE=${RATE:-1gbit}
OUT=${OUT:-$(mktemp -d /tmp/bench-batch-suite.XXXXXX)}
parts=${*:-node-shakespeare node-kjv link-shakespeare link-kjv}
die() { echo "bench-batch-suite.sh: $*" >&2; exit 2; }
mkdir -p "$OUT/data" || die "cannot make $OUT/data"
OUT=$(cd "$OUT" && pwd)
if [ "$(id -u)" = 0 ]; then # Open MPI refuses root otherwise
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi

# data CORPUS: prints the path of its token file, made on first use.
data() {
    local f=$OUT/data/$1.h5
    if [ ! -s "$f" ]; then
        case $1 in
        shakespeare)
            "$GENTRAIN" prepare "$top_srcdir/data/tinyshakespeare.txt" -o "$f" >&2 ;;
        kjv)
            command -v bible > /dev/null ||
                die "the kjv corpus needs the bible command (Debian: apt-get install bible-kjv)"
            # every verse, without its reference ("Ge1:1 "), one a line
            bible -f 'gen1:1-rev22:21' | sed 's/^[0-9A-Za-z]*[0-9]*:[0-9]* //' \
                > "$OUT/data/kjv.txt" || die "bible failed"
            "$GENTRAIN" prepare "$OUT/data/kjv.txt" -o "$f" --train-tokenizer 2048 >&2 ;;
        esac || die "cannot prepare the $1 corpus"
    fi
    echo "$f"
}

# sweep NAME TARGET DEFAULT LAUNCH KEYS...: one bench-batch.sh sweep into OUT/NAME.
sweep() {
    local name=$1 target=$2 default=$3 launch=$4
    shift 4
    echo "== $name: target $target, launch '${launch:-one process}', $*"
    env TARGET="$target" LAUNCH="$launch" EXTRA="$*" OUT="$OUT/$name" SEEDS="$SEEDS" \
        TOKENS=1474560 WARMUP_SEQ=1152 EVAL_SEQ=1152 VAL_SEQ=384 \
        CONFIG="$top_srcdir/data/shakespeare-cpu.cfg" GENTRAIN="$GENTRAIN" \
        BATCHES="$BATCHES" AUTO_MIN="$AUTO_MIN" "${NETNS[@]}" "$here/bench-batch.sh" \
        > "$OUT/$name.log" 2>&1 || status=1
    tail -n +2 "$OUT/$name.log" | grep -v '^{' | grep -v '^bench-batch.sh: .* steps of'
    "$here/bench-batch-summary.py" "$OUT/$name" --default "$default" | tee "$OUT/$name/summary.txt"
}

status=0
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores; $(uptime)"
for part in $parts; do
    corpus=${part#*-}
    case $corpus in
    shakespeare) node_target=${SHAKESPEARE_TARGET:-2.0}
                 link_target=${LINK_SHAKESPEARE_TARGET:-2.2} ;;
    kjv) node_target=${KJV_TARGET:-4.8}
         link_target=${LINK_KJV_TARGET:-4.9} ;;
    *) die "unknown part $part (node-shakespeare node-kjv link-shakespeare link-kjv)" ;;
    esac
    d=$(data "$corpus") || exit 2
    case $part in
    node-*)
        BATCHES=${NODE_BATCHES:-12 24 48 96} AUTO_MIN=12 NETNS=()
        sweep "$part-np1" "$node_target" 12 "" --threads 2 --batch_size 6 --data "$d"
        sweep "$part-np2" "$node_target" 24 "mpirun -np 2 --bind-to none" \
            --threads 1 --batch_size 6 --data "$d" ;;
    link-*)
        BATCHES=${LINK_BATCHES:-48 96 192 384} AUTO_MIN=48
        NETNS=("$here/netns-hosts.sh" --hosts 4 --rate "$RATE")
        sweep "$part-np4" "$link_target" 48 "mpirun -np 4 --bind-to none" \
            --threads 1 --batch_size 12 --data "$d" ;;
    *) die "unknown part $part (node-shakespeare node-kjv link-shakespeare link-kjv)" ;;
    esac
done
echo "sweeps in $OUT"
exit $status
