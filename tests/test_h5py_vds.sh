#!/usr/bin/env bash
# A virtual dataset made by h5py over 3 source files (scripts/h5py_vds.py: the way
# h5py users join shards into one dataset) trains exactly like the same tokens stored
# plainly: the same losses and val_losses, bit for bit, on 1 rank and on 2; a missing
# source file is one error line. Skipped (77) when h5py does not import in TORCH_VENV
# (CI installs it next to tokenizers).
set -u
: "${GENTRAIN:?}" "${top_srcdir:?}"
. "$top_srcdir/tests/lib.sh"
TORCH_VENV=${TORCH_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/gentrain/torch-venv}
PY=$TORCH_VENV/bin/python
if ! [ -x "$PY" ] || ! "$PY" -c 'import h5py' > /dev/null 2>&1; then
    echo "SKIP: h5py does not import in $TORCH_VENV (pip install h5py there)"
    exit 77
fi
test_tmpdir h5pyvds
head -c 300000 "$top_srcdir/data/tinyshakespeare.txt" > "$tmp/t.txt"
"$PY" "$top_srcdir/scripts/h5py_vds.py" "$tmp/t.txt" "$tmp" 3 > "$tmp/make.log" 2>&1 ||
    { fail "h5py makes the virtual dataset"; show "$tmp/make.log"; exit 1; }
ARGS=(--n_layer 2 --n_head 2 --n_embd 32 --block_size 32 --batch_size 8 --steps 10
      --eval_every 5 --eval_batches 2 --threads 1 --warmup_steps 1)
run_ok plain timeout 120 "$GENTRAIN" train --data "$tmp/plain.h5" "${ARGS[@]}" --out "$tmp/plain"
run_ok vds timeout 120 "$GENTRAIN" train --data "$tmp/vds.h5" "${ARGS[@]}" --out "$tmp/vds"
check "h5py virtual dataset: the plain file's losses and val_losses, bit for bit" \
    compare_logs "$tmp/plain/log.jsonl" "$tmp/vds/log.jsonl" 0 10
if [ -n "${MPIEXEC:-}" ]; then
    run_ok vds2 timeout 120 "$MPIEXEC" --oversubscribe --bind-to none -np 2 "$GENTRAIN" train \
        --data "$tmp/vds.h5" "${ARGS[@]}" --batch_size 4 --out "$tmp/vds2"
    check "h5py virtual dataset on 2 ranks: within 1e-5 of 1 rank" \
        compare_logs "$tmp/plain/log.jsonl" "$tmp/vds2/log.jsonl" 1e-5 10
fi
mv "$tmp/src1.h5" "$tmp/src1.moved"
"$GENTRAIN" train --data "$tmp/vds.h5" "${ARGS[@]}" --out none > "$tmp/gone.out" 2> "$tmp/gone.err"
rc=$?
check "a missing source file: exit 1 (rc $rc), one error line" test $rc -eq 1 -a \
    "$(grep -c '^gentrain: error:' "$tmp/gone.err")" -eq 1
sed -e 's/^/    | /' "$tmp/gone.err" | head -n 2
echo "$fails failed"
[ $fails -eq 0 ]
