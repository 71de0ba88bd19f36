#!/usr/bin/env bash
# One dataset made of several files (io/h5/h5set.h), and compressed data:
#  - a sharded corpus: the first 100 kB of the shipped text cut into 5 pieces of unequal
#    length, each prepared into its own file (train and val in each);
#  - the folder, a glob and a comma-separated list of its files give the same run, bit
#    for bit; so does a cap of 2 open files per dataset (data_max_open 2, 5 files);
#  - 2 ranks with batch_size 4 log the losses of 1 process with batch_size 8 (1e-5);
#  - a run stopped at its step-10 checkpoint and resumed logs the straight run's losses
#    for steps 11..20 and ends with its parameters, bit for bit; a resume on the folder
#    missing one of its files is refused, naming the field that differs;
#  - a missing file, and a file of another type, are each refused with one error line
#    naming the file (the latter also under mpirun -np 2: rank 0 says it);
#  - an HDF5 virtual dataset (made with the C API by tests/mkdata) trains like the file
#    it maps;
#  - data prepared with --compress (deflate + shuffle) trains to the same losses as the
#    same data uncompressed, bit for bit.
# Environment: GENTRAIN, MKDATA, CMPMODEL, MPIEXEC (the 2-rank part is skipped without),
# top_srcdir.
set -u
: "${GENTRAIN:?GENTRAIN must point at the gentrain binary}"
: "${MKDATA:?MKDATA must point at the tests/mkdata tool}"
: "${CMPMODEL:?CMPMODEL must point at the tests/cmpmodel tool}"
: "${top_srcdir:?top_srcdir must point at the source tree}"

. "$top_srcdir/tests/lib.sh"
test_tmpdir shards

# 5 pieces of 30, 25, 20, 15 and 10 kB of the corpus, each a file of its own.
mkdir -p "$tmp/s"
off=0
i=0
for kb in 30 25 20 15 10; do
    tail -c +$((off + 1)) "$top_srcdir/data/tinyshakespeare.txt" | head -c $((kb * 1000)) \
        > "$tmp/p$i.txt"
    if ! "$GENTRAIN" prepare "$tmp/p$i.txt" -o "$tmp/s/shard_$i.h5" > "$tmp/prep$i.out" 2>&1
    then
        fail "setup: prepare shard $i"
        show "$tmp/prep$i.out"
        exit 1
    fi
    off=$((off + kb * 1000))
    i=$((i + 1))
done

ARGS=(--n_layer 2 --n_head 2 --n_embd 32 --block_size 32 --steps 20 --warmup_steps 5
      --lr 3e-3 --eval_every 10 --eval_batches 2 --threads 1 --seed 11)

run_ok folder timeout 120 "$GENTRAIN" train "${ARGS[@]}" --data "$tmp/s" --batch_size 8 \
    --ckpt_every 10 --keep_ckpts 5 --out "$tmp/folder"
check "folder: reports 5 files" grep -q "/train/tokens: 5 files, streams" "$tmp/folder.out"
run_ok glob timeout 120 "$GENTRAIN" train "${ARGS[@]}" --data "$tmp/s/shard_*.h5" \
    --batch_size 8 --out "$tmp/glob"
list="$tmp/s/shard_0.h5,$tmp/s/shard_1.h5,$tmp/s/shard_2.h5,$tmp/s/shard_3.h5,$tmp/s/shard_4.h5"
run_ok list timeout 120 "$GENTRAIN" train "${ARGS[@]}" --data "$list" --batch_size 8 \
    --out "$tmp/list"
run_ok cap2 timeout 120 "$GENTRAIN" train "${ARGS[@]}" --data "$tmp/s" --batch_size 8 \
    --data_max_open 2 --out "$tmp/cap2"
for run in glob list cap2; do
    check "$run: the same losses as the folder, bit for bit" \
        compare_logs "$tmp/folder/log.jsonl" "$tmp/$run/log.jsonl" 0
    check "$run: the same final parameters" \
        "$CMPMODEL" "$tmp/folder/model.h5" "$tmp/$run/model.h5" 0
done
check "cap2: says at most 2 files open" grep -q "at most 2 files open" "$tmp/cap2.out"

# Windows never cross a file: the files hold fewer windows together than one file of
# all their tokens would, and training reads every file (a loss is logged each step).
check "folder: 20 steps logged" test "$(grep -c '"loss"' "$tmp/folder/log.jsonl")" -eq 20

if [ -n "${MPIEXEC:-}" ]; then
    timeout 120 "$MPIEXEC" --oversubscribe --bind-to none -np 2 "$GENTRAIN" train \
        "${ARGS[@]}" --data "$tmp/s" --batch_size 4 --data_max_open 2 --out "$tmp/np2" \
        > "$tmp/np2.out" 2> "$tmp/np2.err"
    rc=$?
    check "np=2: exits 0 (rc $rc)" test $rc -eq 0
    [ $rc -eq 0 ] || show "$tmp/np2.err"
    check "np=2 batch 4: the losses of np=1 batch 8 within 1e-5" \
        compare_logs "$tmp/folder/log.jsonl" "$tmp/np2/log.jsonl"
    check "np=2: each rank checked half of the tokens" \
        grep -q "checked in [0-9.]* s: each of 2 ranks 1/2" "$tmp/np2.out"
else
    echo "skip: np=2 (no mpirun)"
fi

# Resume across the files: the folder run's step-10 checkpoint, resumed to step 20.
ck10="$tmp/folder/checkpoints/ckpt_00000010.h5"
check "folder: wrote its step-10 checkpoint" test -f "$ck10"
run_ok resume timeout 120 "$GENTRAIN" train "${ARGS[@]}" --data "$tmp/s" --batch_size 8 \
    --out "$tmp/res" --resume "$ck10"
check "resume: starts at step 10" grep -q "resuming from .* at step 10" "$tmp/resume.out"
steps() { sed -n 's/^{"step":\(1[1-9]\|20\),"loss":\([^,]*\),.*/\1 \2/p' "$1"; }
check "resume: steps 11..20 log the straight run's losses, bit for bit" \
    test "$(steps "$tmp/folder/log.jsonl")" = "$(steps "$tmp/res/log.jsonl")"
check "resume: final parameters identical to the straight run's" \
    "$CMPMODEL" "$tmp/folder/model.h5" "$tmp/res/model.h5" 0
# The same folder missing one of its files: its fingerprint differs.
mv "$tmp/s/shard_4.h5" "$tmp/shard_4.away"
timeout 120 "$GENTRAIN" train "${ARGS[@]}" --data "$tmp/s" --batch_size 8 --out "$tmp/res4" \
    --resume "$ck10" > "$tmp/res4.out" 2> "$tmp/res4.err"
rc=$?
mv "$tmp/shard_4.away" "$tmp/s/shard_4.h5"
check "resume on 4 of the 5 files: refused (rc $rc)" test $rc -ne 0
check "resume on 4 of the 5 files: names what differs" \
    grep -q "is not what checkpoint .* was trained on (files=5 then, files=4 now)" \
    "$tmp/res4.err"
[ $rc -ne 0 ] || show "$tmp/res4.err"

# refused NAME TEXT ARGS...: gentrain train fails with exactly one error line holding TEXT.
refused() {
    local name=$1 text=$2 rc
    shift 2
    timeout 60 "$GENTRAIN" train "${ARGS[@]}" --batch_size 8 --out "" "$@" \
        > "$tmp/$name.out" 2> "$tmp/$name.err"
    rc=$?
    check "$name: refused (rc $rc)" test $rc -ne 0
    check "$name: one error line: $text" test "$(grep -c 'error' "$tmp/$name.err")" -eq 1
    check "$name: it says so" grep -q -- "$text" "$tmp/$name.err"
    [ $rc -ne 0 ] && grep -q -- "$text" "$tmp/$name.err" || show "$tmp/$name.err"
}
refused missing "cannot open data file $tmp/s/shard_9.h5" --data "$list,$tmp/s/shard_9.h5"
refused nomatch "matches no file" --data "$tmp/s/nope_*.h5"
# a file listed twice would be trained on twice as often as the others, silently
refused twice "is listed twice (.*; files 1 and 6 of 6)" --data "$list,$tmp/s/./shard_0.h5"
refused twice_glob "is listed twice (.*; files 2 and 6 of 6)" \
    --data "$tmp/s/shard_*.h5,$tmp/s//shard_1.h5"
mkdir -p "$tmp/mixed"
cp "$tmp/s/shard_0.h5" "$tmp/s/shard_1.h5" "$tmp/mixed/"
"$MKDATA" "$tmp/mixed/shard_2.h5" --dataset /train/tokens --dtype int32 --rank 1 \
    --len 5000 --vocab 256 > /dev/null 2>&1 &&
    "$MKDATA" "$tmp/mixed/shard_2.h5" --dataset /val/tokens --dtype int32 --rank 1 \
    --len 5000 --vocab 256 --append > /dev/null 2>&1 || fail "setup: mkdata int32 shard"
refused mixed "$tmp/mixed/shard_2.h5:/train/tokens is int32" --data "$tmp/mixed"
if [ -n "${MPIEXEC:-}" ]; then
    # every rank reaches the same verdict from the shared shapes: still one line
    timeout 120 "$MPIEXEC" --oversubscribe --bind-to none -np 2 "$GENTRAIN" train \
        "${ARGS[@]}" --batch_size 8 --out "" --data "$tmp/mixed" > "$tmp/mixed2.out" \
        2> "$tmp/mixed2.err"
    rc=$?
    check "mixed, 2 ranks: refused (rc $rc)" test $rc -ne 0
    check "mixed, 2 ranks: one error line" \
        test "$(grep -c 'gentrain: error:' "$tmp/mixed2.err")" -eq 1
fi

# A virtual dataset (the C API's H5Pset_virtual, as h5py's VirtualLayout writes it).
(cd "$tmp" && "$MKDATA" src.h5 --dataset /train/tokens --dtype uint16 --rank 1 --len 60000 \
    --vocab 256 > /dev/null 2>&1 && "$MKDATA" vds.h5 --dataset /train/tokens --dtype uint16 \
    --rank 1 --len 60000 --vocab 256 --virtual src.h5 > /dev/null 2>&1) ||
    fail "setup: mkdata virtual"
VARGS=("${ARGS[@]}" --val_dataset none --batch_size 8)
run_ok vds env -C "$tmp" timeout 120 "$GENTRAIN" train "${VARGS[@]}" --data vds.h5 --out vds
run_ok vsrc env -C "$tmp" timeout 120 "$GENTRAIN" train "${VARGS[@]}" --data src.h5 --out vsrc
check "vds: the losses of the file it maps, bit for bit" \
    compare_logs "$tmp/vsrc/log.jsonl" "$tmp/vds/log.jsonl" 0

# Compressed: the same text prepared with --compress trains to the same losses.
cat "$tmp"/p[0-4].txt > "$tmp/all.txt"
run_ok prep_raw "$GENTRAIN" prepare "$tmp/all.txt" -o "$tmp/raw.h5"
run_ok prep_z "$GENTRAIN" prepare "$tmp/all.txt" -o "$tmp/z.h5" --compress 6
check "compress: the file is smaller" test "$(stat -c %s "$tmp/z.h5")" -lt \
    "$(stat -c %s "$tmp/raw.h5")"
run_ok raw timeout 120 "$GENTRAIN" train "${ARGS[@]}" --data "$tmp/raw.h5" --batch_size 8 \
    --out "$tmp/raw"
run_ok z timeout 120 "$GENTRAIN" train "${ARGS[@]}" --data "$tmp/z.h5" --batch_size 8 \
    --out "$tmp/z"
check "compress: the losses of the raw data, bit for bit" \
    compare_logs "$tmp/raw/log.jsonl" "$tmp/z/log.jsonl" 0
check "compress: the same final parameters" "$CMPMODEL" "$tmp/raw/model.h5" "$tmp/z/model.h5" 0

echo "$fails failure(s)"
[ "$fails" -eq 0 ]
