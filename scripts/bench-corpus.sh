#!/usr/bin/env bash
# bench-corpus.sh — gentrain on a large synthetic sharded corpus (not part of make
# check). Run from the build folder after `make scripts/bench_loader`:
#   ../scripts/bench-corpus.sh [GB (default 20)] [COMPRESSED_GB (default 2)] [DIR]
# Builds GB gigabytes of uint16 tokens in 8 shards (raw) and COMPRESSED_GB in 4 shards
# (shuffle + deflate 4; deflate writes at tens of MB/s, so it is smaller by default)
# under DIR (default ${TMPDIR:-/tmp}/gentrain-corpus), after checking the free disk
# space (scaling GB down to what fits, and saying so). Prints:
#  - gentrain's max RSS for 3 steps on a 1 GB corpus and on the whole one (flat in size),
#  - its start-up: opening the files and checking every token (1 rank, then 2),
#  - the loader's tokens/s (bench_loader read) on each corpus,
#  - a short training run under mpirun -np 2 (step times and `wait`).
set -eu
GB=${1:-20}
ZGB=${2:-2}
DIR=${3:-${TMPDIR:-/tmp}/gentrain-corpus}
B=${BENCH_LOADER:-./scripts/bench_loader}
G=${GENTRAIN:-./gentrain}
MPIEXEC=${MPIEXEC:-mpirun}
if [ "$(id -u)" = 0 ]; then # Open MPI refuses root otherwise
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
mkdir -p "$DIR"
free_gb=$(df -P -BG "$DIR" | awk 'NR == 2 { sub("G", "", $4); print $4 }')
need=$((GB + ZGB + 2))
if [ "$need" -gt $((free_gb - 5)) ]; then
    GB=$((free_gb - 5 - ZGB - 2))
    echo "disk: $free_gb GB free in $DIR; scaled the raw corpus down to $GB GB"
fi
[ "$GB" -ge 2 ] || { echo "disk: not enough space for a corpus"; exit 1; }
echo "disk: $free_gb GB free; raw corpus $GB GB in 8 shards, compressed $ZGB GB of tokens in 4"

# make NAME GB SHARDS LEVEL: DIR/NAME/shard_*.h5, GB gigabytes of tokens in all
make_corpus() {
    local name=$1 gb=$2 n=$3 level=$4 per i t0 t1
    rm -rf "${DIR:?}/$name"
    mkdir -p "$DIR/$name"
    per=$((gb * 1000000000 / 2 / n))
    t0=$(date +%s.%N)
    for i in $(seq 0 $((n - 1))); do
        # unequal shards: the last is half the others
        local tokens=$per
        [ "$i" -eq $((n - 1)) ] && tokens=$((per / 2))
        "$B" gen "$DIR/$name/shard_$(printf %03d "$i").h5" $tokens "$level" $((i + 1))
    done
    t1=$(date +%s.%N)
    echo "$name: $(du -sb "$DIR/$name" | cut -f1) bytes in $n files, written in $(echo "$t1 - $t0" | bc) s"
}
make_corpus small 1 2 0
make_corpus raw "$GB" 8 0
make_corpus deflate "$ZGB" 4 4

ARGS=(--n_layer 2 --n_head 4 --n_embd 128 --block_size 256 --batch_size 8 --steps 3
      --eval_every 0 --val_dataset none --threads 1 --out "")
for c in small raw deflate; do
    /usr/bin/time -v "$G" train "${ARGS[@]}" --data "$DIR/$c" > "$DIR/$c.out" 2> "$DIR/$c.time"
    rss=$(awk -F: '/Maximum resident set size/ { gsub(/ /, "", $2); print $2 }' "$DIR/$c.time")
    wall=$(awk '/Elapsed \(wall clock\)/ { print $NF }' "$DIR/$c.time")
    echo "$c: 1 rank: max RSS $rss KiB, whole run $wall (m:ss)"
    grep '^data: .*/train/tokens' "$DIR/$c.out" | sed "s/^/$c: /"
    "$B" read "$DIR/$c" 10 256 8 | grep -E 'loader_tokens_per_s|tokens|files_opened|peak' |
        sed "s/^/$c: loader: /"
done

# a short run under mpirun -np 2 on the whole raw corpus
"$MPIEXEC" --oversubscribe --bind-to none -np 2 "$G" train "${ARGS[@]}" --steps 10 \
    --batch_size 4 --data "$DIR/raw" > "$DIR/np2.out" 2>&1
grep -E '^data: .*/train/tokens|^step ' "$DIR/np2.out" | sed 's/^/np2: /'
echo "(corpus left in $DIR: rm -rf it when done)"
