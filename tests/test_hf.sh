#!/usr/bin/env bash
# Hugging Face GPT-2 folders in and out (io/hf/hf_gpt2.h, io/hf/safetensors.h): `gentrain
# export --format hf` and `init_from`. Tiny models, a slice of the shipped corpus.
#  1. A trained model exported and imported again (tests/hflogits, gentrain's own
#     forward on both) gives the same logits bit for bit; the folder holds config.json
#     and model.safetensors; re-exporting the import gives the same tensors.
#     config.json's bos_token_id and eos_token_id: null for a byte-level model, the id
#     of <|endoftext|> for a BPE one (transformers loads both without a warning, 4.)
#  2. init_from the export: one line says what was taken; fine-tuning lowers the loss.
#     A run with a larger vocabulary keeps its own rows past the folder's, a smaller
#     one takes the first rows (one line each).
#  3. What is refused, each with one error line and exit 1: another n_embd (the line
#     says what to set), block_size past n_positions, a truncated or garbled
#     safetensors file, a tensor of the wrong shape or of a dtype gentrain does not read
#     (the line names the tensor), a NaN, an activation or epsilon
#     gentrain does not have, an untied head, a missing folder; export without
#     --format hf or an output folder is a usage error (2); an export that fails
#     (config.json cannot be replaced) leaves the folder's earlier export unchanged.
#  4. With transformers (and torch) in TORCH_VENV (scripts/hf-venv.sh installs them;
#     skipped without): a model made by transformers, imported, gives transformers'
#     logits within 1e-4; fine-tuned and exported, transformers loads it and gives
#     gentrain's logits within 1e-4.
# Environment: GENTRAIN, HFLOGITS, top_srcdir; TORCH_VENV (optional).
set -u
: "${GENTRAIN:?}" "${HFLOGITS:?}" "${top_srcdir:?}"
. "$top_srcdir/tests/lib.sh"
test_tmpdir hf
prepare_slice
G=(timeout 120 "$GENTRAIN")
SHAPE=(--n_layer 2 --n_head 2 --n_embd 32 --block_size 32)
TRAIN=(--data "$tmp/d.h5" "${SHAPE[@]}" --batch_size 8 --eval_batches 4 --threads 1
       --lr 3e-3 --warmup_steps 1)
python3 -c 'import random; random.seed(3); print(" ".join(str(random.randrange(256)) for _ in range(30)))' \
    > "$tmp/tokens.txt" || exit 99

# ------------------------------------------------------------- 1. round trip
run_ok base "${G[@]}" train "${TRAIN[@]}" --steps 10 --eval_every 0 --out "$tmp/base"
run_ok export "${G[@]}" export --format hf --model "$tmp/base" -o "$tmp/hf1"
check "export: config.json and model.safetensors" \
    test -s "$tmp/hf1/config.json" -a -s "$tmp/hf1/model.safetensors"
check "export: one line naming the step" grep -q "^exported .* (step 10) to $tmp/hf1" \
    "$tmp/export.out"
# A byte-level model has no end-of-text token: bos and eos are null, not GPT-2's 50256
# (which transformers would take, warning that it lies outside a vocabulary of 256).
check "export of a byte-level model: bos_token_id and eos_token_id null" \
    python3 -c 'import json, sys; c = json.load(open(sys.argv[1]));
sys.exit(not (c["vocab_size"] == 256 and "bos_token_id" in c and "eos_token_id" in c and
              c["bos_token_id"] is None and c["eos_token_id"] is None))' "$tmp/hf1/config.json"
check "export of a byte-level model: the line says there is no end-of-text token" \
    grep -q "no end-of-text token in the vocabulary: bos and eos null" "$tmp/export.out"
# A BPE model: both are the id its tokenizer gives <|endoftext|>.
run_ok bpeprep "${G[@]}" prepare "$tmp/slice.txt" -o "$tmp/bpe.h5" --train-tokenizer 300 \
    --save-tokenizer "$tmp/bpe.json"
run_ok bpetrain "${G[@]}" train --data "$tmp/bpe.h5" "${SHAPE[@]}" --batch_size 4 \
    --threads 1 --steps 2 --eval_every 0 --out "$tmp/bpe"
run_ok bpeexport "${G[@]}" export --format hf --model "$tmp/bpe" -o "$tmp/hfbpe"
eot=$(python3 -c 'import json, sys
print([t["id"] for t in json.load(open(sys.argv[1]))["added_tokens"]
       if t["content"] == "<|endoftext|>"][0])' "$tmp/bpe.json")
check "export of a BPE model: bos_token_id = eos_token_id = <|endoftext|>'s id (${eot:-?})" \
    python3 -c 'import json, sys; c = json.load(open(sys.argv[1])); e = int(sys.argv[2]);
sys.exit(not (c["vocab_size"] == 300 and 0 <= e < 300 and c["bos_token_id"] == e and
              c["eos_token_id"] == e))' "$tmp/hfbpe/config.json" "${eot:--1}"
"$HFLOGITS" "$tmp/base/model.h5" "$tmp/tokens.txt" "$tmp/base.bin" &&
    "$HFLOGITS" "$tmp/hf1" "$tmp/tokens.txt" "$tmp/hf1.bin"
check "round trip: the imported export gives the model's logits bit for bit" \
    cmp -s "$tmp/base.bin" "$tmp/hf1.bin"

# ------------------------------------------------------------- 2. init_from
run_ok tune "${G[@]}" train "${TRAIN[@]}" --steps 20 --eval_every 10 --init_from "$tmp/hf1" \
    --out "$tmp/tune"
check "init_from: one line naming the folder and the run's vocabulary" \
    grep -q "^init_from: $tmp/hf1: GPT-2 n_layer 2 n_head 2 n_embd 32, 32 positions .*256 (the run's)" \
    "$tmp/tune.out"
first=$(sed -n 's/^step  *10\/20 | val_loss \([0-9.]*\).*/\1/p' "$tmp/tune.out")
last=$(sed -n 's/^step  *20\/20 | val_loss \([0-9.]*\).*/\1/p' "$tmp/tune.out")
base=$(sed -n 's/^done: .*final val_loss \([0-9.]*\).*/\1/p' "$tmp/base.out")
check "init_from: fine-tuning lowers the val_loss (${base:-?} -> ${first:-?} -> ${last:-?})" \
    awk -v a="${first:-9}" -v b="${last:-9}" 'BEGIN { exit !(b < a) }'
run_ok bigvocab "${G[@]}" train "${TRAIN[@]}" --steps 2 --eval_every 0 --vocab_size 300 \
    --init_from "$tmp/hf1" --out none
check "a larger vocabulary keeps its own rows past the folder's" \
    grep -q "a vocabulary of 256 (the run's other rows start from its own initialisation)" \
    "$tmp/bigvocab.out"
run_ok v300 "${G[@]}" train "${TRAIN[@]}" --steps 2 --eval_every 0 --vocab_size 300 \
    --out "$tmp/v300"
run_ok export300 "${G[@]}" export --format hf --model "$tmp/v300" -o "$tmp/hf300"
run_ok smallvocab "${G[@]}" train "${TRAIN[@]}" --steps 2 --eval_every 0 \
    --init_from "$tmp/hf300" --out none
check "a smaller vocabulary takes the folder's first rows" \
    grep -q "a vocabulary of 300 (the run uses its first rows)" "$tmp/smallvocab.out"

# ------------------------------------------------------------- 3. refusals
# refused NAME WANT ARGS...: gentrain ARGS exits 1 with one error line matching WANT.
refused() {
    local name=$1 want=$2 rc
    shift 2
    "${G[@]}" "$@" > "$tmp/$name.out" 2> "$tmp/$name.err"
    rc=$?
    check "$name: exit 1 (rc $rc), one error line: $want" test $rc -eq 1 -a \
        "$(grep -c '^gentrain: error:' "$tmp/$name.err")" -eq 1 -a \
        -n "$(grep -E -e "$want" "$tmp/$name.err")"
    sed -e 's/^/    | /' "$tmp/$name.err" | head -n 2
}
# bad NAME: a copy of the export to spoil
bad() { rm -rf "$tmp/$1"; cp -r "$tmp/hf1" "$tmp/$1"; }
ST="$tmp/hf1/model.safetensors"
tune_from() { echo "${TRAIN[@]}" --steps 1 --eval_every 0 --out none --init_from "$tmp/$1"; }

refused shape "set n_layer = 2, n_head = 2, n_embd = 32" train --data "$tmp/d.h5" \
    --n_layer 2 --n_head 2 --n_embd 64 --block_size 32 --steps 1 --out none \
    --init_from "$tmp/hf1"
refused positions "block_size <= 32" train --data "$tmp/d.h5" --n_layer 2 --n_head 2 \
    --n_embd 32 --block_size 48 --steps 1 --out none --init_from "$tmp/hf1"
bad trunc
head -c $(($(stat -c %s "$ST") - 100)) "$ST" > "$tmp/trunc/model.safetensors"
refused truncated "do not hold its .* elements within the file" train $(tune_from trunc)
bad garbled
printf '\x0f\x00\x00\x00\x00\x00\x00\x00{"a": [1, 2,,]}' > "$tmp/garbled/model.safetensors"
refused garbled "model.safetensors: header: line 1" train $(tune_from garbled)
bad huge
printf '\xff\xff\xff\xff\xff\xff\xff\x7f' > "$tmp/huge/model.safetensors"
refused huge-header "header of [0-9]* bytes is too large" train $(tune_from huge)
# A NaN in the first value of wte (the data starts after the 8 + N header bytes).
bad nan
python3 - "$tmp/nan/model.safetensors" <<'EOF' || exit 99
import json, struct, sys
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
at = 8 + n + h["transformer.wte.weight"]["data_offsets"][0]
b[at:at + 4] = struct.pack("<f", float("nan"))
open(p, "wb").write(bytes(b))
EOF
refused nan "tensor transformer.wte.weight holds a non-finite value" train $(tune_from nan)
# relabel NAME TENSOR FIELD JSON: the copy NAME of the export with one header field of
# TENSOR set to JSON, every byte of the tensors as it was
relabel() {
    bad "$1"
    python3 - "$tmp/$1/model.safetensors" "$2" "$3" "$4" <<'EOF' || exit 99
import json, struct, sys
p, name, field, value = sys.argv[1:5]
b = open(p, "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
h[name][field] = json.loads(value)
t = json.dumps(h).encode()
t += b" " * (-len(t) % 8)
open(p, "wb").write(struct.pack("<Q", len(t)) + t + b[8 + n:])
EOF
}
# c_attn's bytes re-labelled as another shape
relabel wrongshape transformer.h.0.attn.c_attn.weight shape '[96, 32]'
refused wrongshape "c_attn.weight has shape \\[96, 32\\], gentrain's model expects \\[32, 96\\]" \
    train $(tune_from wrongshape)
# a dtype gentrain does not read: the line names the tensor, then the dtype
relabel dtype transformer.h.0.attn.c_proj.weight dtype '"Q99"'
refused dtype "tensor 'transformer.h.0.attn.c_proj.weight' is Q99; gentrain reads F32" \
    train $(tune_from dtype)
bad relu
sed -i 's/"gelu_new"/"relu"/' "$tmp/relu/config.json"
refused activation "activation_function must be gelu_new" train $(tune_from relu)
bad eps
sed -i 's/1e-05/1e-06/' "$tmp/eps/config.json"
refused epsilon "layer_norm_epsilon must be 1e-05" train $(tune_from eps)
bad untied
sed -i 's/"tie_word_embeddings": true/"tie_word_embeddings": false/' "$tmp/untied/config.json"
refused untied "tie_word_embeddings must be true" train $(tune_from untied)
refused missing "nope/config.json" train "${TRAIN[@]}" --steps 1 --out none \
    --init_from "$tmp/nope"
"${G[@]}" export --model "$tmp/base" -o "$tmp/x" > /dev/null 2>&1
check "export without --format: usage error (exit 2)" test $? -eq 2
"${G[@]}" export --format onnx --model "$tmp/base" -o "$tmp/x" > /dev/null 2>&1
check "export --format onnx: usage error (exit 2)" test $? -eq 2
# A failed export into the folder of an earlier one leaves that export whole: here
# config.json cannot be replaced (a folder stands there), and model.safetensors, written
# first, must not have been replaced either (it was: a new model beside an old config).
bad keep
rm "$tmp/keep/config.json" && mkdir "$tmp/keep/config.json" || exit 99
st_sum=$(cksum < "$tmp/keep/model.safetensors")
refused keep "config.json: it is a folder" export --format hf --model "$tmp/bpe" \
    -o "$tmp/keep"
check "failed export: the earlier model.safetensors is unchanged" \
    test "$(cksum < "$tmp/keep/model.safetensors")" = "$st_sum"
check "failed export: no temporary file left" \
    test ! -e "$tmp/keep/model.safetensors.tmp" -a ! -e "$tmp/keep/config.json.tmp"

# ------------------------------------------------------------- 4. transformers
TORCH_VENV=${TORCH_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/gentrain/torch-venv}
PY=$TORCH_VENV/bin/python
REF=$top_srcdir/scripts/hf_ref.py
if [ -x "$PY" ] && "$PY" -c 'import torch, transformers, safetensors' > /dev/null 2>&1; then
    "$PY" "$REF" make "$tmp/made" 256 64 32 2 2 7 > "$tmp/made.log" 2>&1 ||
        { fail "transformers makes a model"; show "$tmp/made.log"; }
    "$HFLOGITS" "$tmp/made" "$tmp/tokens.txt" "$tmp/made_g.bin" &&
        "$PY" "$REF" logits "$tmp/made" "$tmp/tokens.txt" "$tmp/made_t.bin" 2> /dev/null
    check "a transformers model imported: transformers' logits within 1e-4" \
        "$PY" "$REF" compare "$tmp/made_t.bin" "$tmp/made_g.bin" 1e-4
    run_ok madetune "${G[@]}" train "${TRAIN[@]}" --steps 20 --eval_every 10 \
        --init_from "$tmp/made" --out "$tmp/madetune"
    run_ok madeexport "${G[@]}" export --format hf --model "$tmp/madetune" -o "$tmp/hf2"
    "$HFLOGITS" "$tmp/madetune/model.h5" "$tmp/tokens.txt" "$tmp/tuned_g.bin" &&
        "$PY" "$REF" logits "$tmp/hf2" "$tmp/tokens.txt" "$tmp/tuned_t.bin" \
            2> "$tmp/tuned_t.err"
    check "the fine-tuned export loads in transformers: gentrain's logits within 1e-4" \
        "$PY" "$REF" compare "$tmp/tuned_g.bin" "$tmp/tuned_t.bin" 1e-4
    # its config.json is valid for its vocabulary: no warning about bos or eos
    check "transformers loads the byte-level export without a bos/eos warning" \
        test "$(grep -c 'token_id' "$tmp/tuned_t.err")" -eq 0
    "$PY" "$REF" logits "$tmp/hfbpe" "$tmp/tokens.txt" "$tmp/bpe_t.bin" 2> "$tmp/bpe_t.err"
    check "transformers loads the BPE export without a bos/eos warning" \
        test $? -eq 0 -a "$(grep -c 'token_id' "$tmp/bpe_t.err")" -eq 0
else
    echo "skip: part 4 (transformers, torch and safetensors do not import in $TORCH_VENV;" \
         "scripts/hf-venv.sh installs them)"
fi

echo "$fails failed"
[ $fails -eq 0 ]
