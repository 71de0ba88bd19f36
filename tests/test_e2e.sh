#!/usr/bin/env bash
# End to end on a slice of the shipped corpus: prepare -> inspect -> train (with log and
# eval) -> inspect the model -> sample (deterministic per seed), and a second training
# run with the same seed must log the same losses.
set -u
: "${GENTRAIN:?GENTRAIN must point at the gentrain binary}"
: "${top_srcdir:?top_srcdir must point at the source tree}"
. "$top_srcdir/tests/lib.sh"
test_tmpdir e2e

head -c 200000 "$top_srcdir/data/tinyshakespeare.txt" > "$tmp/slice.txt"
check "prepare exits 0" timeout 120 "$GENTRAIN" prepare "$tmp/slice.txt" -o "$tmp/d.h5" --val-fraction 0.1
check "no temporary file left by prepare" test ! -e "$tmp/d.h5.tmp"
timeout 60 "$GENTRAIN" inspect "$tmp/d.h5" > "$tmp/inspect.txt" 2>&1
check "inspect lists /train/tokens" grep -q "/train/tokens" "$tmp/inspect.txt"
check "inspect lists /val/tokens" grep -q "/val/tokens" "$tmp/inspect.txt"
check "inspect shows vocab_size 256" grep -q "vocab_size.*256" "$tmp/inspect.txt"

train() { # $1 = run folder
    timeout 300 "$GENTRAIN" train --data "$tmp/d.h5" --n_layer 2 --n_head 2 --n_embd 32 \
        --block_size 32 --batch_size 8 --steps 60 --warmup_steps 5 --lr 3e-3 \
        --eval_every 20 --eval_batches 4 --threads 2 --seed 7 --out "$1" --log "$1/log.jsonl"
}
train "$tmp/run1" > "$tmp/train1.txt" 2>&1
rc=$?
check "train exits 0 (rc $rc)" test $rc -eq 0
check "train prints the effective config" grep -q "n_embd" "$tmp/train1.txt"
check "train prints 60 step lines" test "$(grep -c '^step .*| loss ' "$tmp/train1.txt")" -eq 60
check "train prints 3 validation losses" test "$(grep -c '^step .*| val_loss' "$tmp/train1.txt")" -eq 3
check "log has 60 JSON lines" test "$(wc -l < "$tmp/run1/log.jsonl")" -eq 60
check "log lines carry step, loss, lr, tokens_per_s" grep -q '"step":60,"loss":.*"lr":.*"tokens_per_s"' "$tmp/run1/log.jsonl"
check "log carries val_loss on eval steps" test "$(grep -c '"val_loss"' "$tmp/run1/log.jsonl")" -eq 3
first=$(sed -n 's/.*"step":1,"loss":\([0-9.]*\).*/\1/p' "$tmp/run1/log.jsonl")
last=$(sed -n 's/.*"step":60,"loss":\([0-9.]*\).*/\1/p' "$tmp/run1/log.jsonl")
check "loss falls (step 1: $first, step 60: $last)" awk -v a="$first" -v b="$last" 'BEGIN{exit !(a > 5.0 && b < a - 1.5)}'
check "model file saved" test -f "$tmp/run1/model.h5"

timeout 60 "$GENTRAIN" inspect "$tmp/run1/model.h5" > "$tmp/inspect_model.txt" 2>&1
check "inspect shows the model's step" grep -qi "step.*60" "$tmp/inspect_model.txt"
check "inspect shows GPT-2 names" grep -q "transformer.h.1.mlp.c_fc.weight" "$tmp/inspect_model.txt"

timeout 120 "$GENTRAIN" sample --model "$tmp/run1" --prompt "ROMEO:" --tokens 40 --seed 3 --threads 2 > "$tmp/s1.txt" 2> "$tmp/s1.err"
check "sample exits 0" test $? -eq 0
timeout 120 "$GENTRAIN" sample --model "$tmp/run1/model.h5" --prompt "ROMEO:" --tokens 40 --seed 3 --threads 2 > "$tmp/s2.txt" 2>/dev/null
timeout 120 "$GENTRAIN" sample --model "$tmp/run1" --prompt "ROMEO:" --tokens 40 --seed 4 --threads 2 > "$tmp/s3.txt" 2>/dev/null
check "sample starts with the prompt" grep -q "^ROMEO:" "$tmp/s1.txt"
check "sample prints prompt + 40 tokens + newline ($(wc -c < "$tmp/s1.txt") bytes)" test "$(wc -c < "$tmp/s1.txt")" -eq 47
check "same seed, same text (folder and file paths)" cmp -s "$tmp/s1.txt" "$tmp/s2.txt"
differ() { ! cmp -s "$1" "$2"; }
check "another seed, another text" differ "$tmp/s1.txt" "$tmp/s3.txt"

train "$tmp/run2" > "$tmp/train2.txt" 2>&1
losses() { sed -e 's/,"lr".*"val_loss"/,"val_loss"/' -e 's/,"lr".*//' "$1"; }
check "same seed and threads: identical losses in a second run" cmp -s <(losses "$tmp/run1/log.jsonl") <(losses "$tmp/run2/log.jsonl")

# h5py users can load the model (only where h5py is installed).
py=${PYTHON:-/usr/bin/python3}
if "$py" -c "import h5py" 2>/dev/null; then
    check "h5py reads the model under GPT-2 names" "$py" - "$tmp/run1/model.h5" <<'PY'
import sys, h5py
f = h5py.File(sys.argv[1], "r")
m = f["model"]
assert f.attrs["format"] in (b"gentrain-model", "gentrain-model"), f.attrs["format"]
assert int(f.attrs["step"]) == 60
assert m["transformer.wte.weight"].shape == (256, 32)
assert m["transformer.wpe.weight"].shape == (32, 32)
assert m["transformer.h.0.attn.c_attn.weight"].shape == (96, 32)
assert m["transformer.h.1.mlp.c_proj.weight"].shape == (32, 128)
assert str(m["transformer.ln_f.bias"].dtype) == "float32"
PY
else
    echo "skip h5py check (no h5py)"
fi

echo "$fails failed"
exit $((fails > 0))
