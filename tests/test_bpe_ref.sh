#!/usr/bin/env bash
# The BPE tokenizer against the Hugging Face `tokenizers` package (scripts/bpe_ref.py):
# the same ids, on data/tinyshakespeare.txt, tests/bpe_unicode.txt (accents, CJK, emoji,
# digits, white space runs, contractions) and 3000 random strings of mixed classes,
# for tokenizers trained by `tokenizers` (vocab 1000, with and without
# add_prefix_space) and by `gentrain prepare --train-tokenizer` (which `tokenizers`
# then loads); prepare's datasets hold those ids; decode gives the text back. Prints
# the encoding speeds of both. Skipped (77) when `tokenizers` does not import in
# TORCH_VENV (scripts/tokenizers-venv.sh installs it).
set -u
: "${GENTRAIN:?}" "${BPETOOL:?}" "${top_srcdir:?}"
. "$top_srcdir/tests/lib.sh"
TORCH_VENV=${TORCH_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/gentrain/torch-venv}
PY=$TORCH_VENV/bin/python
if ! [ -x "$PY" ] || ! "$PY" -c 'import tokenizers' > /dev/null 2>&1; then
    echo "SKIP: the tokenizers package does not import in $TORCH_VENV (run scripts/tokenizers-venv.sh)"
    exit 77
fi
test_tmpdir bperef
REF=$top_srcdir/scripts/bpe_ref.py
SHAKE=$top_srcdir/data/tinyshakespeare.txt
UNI=$top_srcdir/tests/bpe_unicode.txt
"$PY" "$REF" mixed "$tmp/mixed.txt" 7 3000 || exit 99
texts="$SHAKE $UNI $tmp/mixed.txt"

# same_ids NAME TOKENIZER TEXT: tokenizers' ids == bpetool's, on 1 and 2 threads
same_ids() {
    local name=$1 tok=$2 text=$3
    "$PY" "$REF" encode "$tok" "$text" "$tmp/$name.ref" 2> "$tmp/$name.ref.err" ||
        { fail "$name: tokenizers encodes"; show "$tmp/$name.ref.err"; return; }
    "$BPETOOL" encode "$tok" "$text" 1 > "$tmp/$name.c1" 2> "$tmp/$name.c1.err" &&
        "$BPETOOL" encode "$tok" "$text" 2 > "$tmp/$name.c2" 2> "$tmp/$name.c2.err" ||
        { fail "$name: bpetool encodes"; show "$tmp/$name.c1.err"; return; }
    check "$name: the ids of tokenizers ($(wc -w < "$tmp/$name.ref") ids)" cmp -s "$tmp/$name.ref" "$tmp/$name.c1"
    check "$name: the same on 2 threads" cmp -s "$tmp/$name.c1" "$tmp/$name.c2"
}

"$PY" "$REF" train "$tmp/hf.json" 1000 0 "$SHAKE" "$UNI" || { fail "tokenizers trains"; exit 1; }
"$PY" "$REF" train "$tmp/hfp.json" 1200 1 "$SHAKE" "$UNI" || { fail "tokenizers trains"; exit 1; }
for tok in hf hfp; do
    for text in $texts; do
        same_ids "$tok-$(basename "$text" .txt)" "$tmp/$tok.json" "$text"
    done
done
sed -n 's/^/    /p' "$tmp/hf-tinyshakespeare.ref.err" "$tmp/hf-tinyshakespeare.c1.err" "$tmp/hf-tinyshakespeare.c2.err"

# prepare with the tokenizers-trained file: the dataset holds those ids
run_ok prepare-hf "$GENTRAIN" prepare "$SHAKE" -o "$tmp/hf.h5" --tokenizer "$tmp/hf.json" --val-fraction 0
"$BPETOOL" dump "$tmp/hf.h5" /train/tokens > "$tmp/hf.dump"
check "prepare --tokenizer: /train/tokens holds the ids of tokenizers" cmp -s "$tmp/hf.dump" "$tmp/hf-tinyshakespeare.ref"
grep -q 'vocab 1000, uint16' "$tmp/prepare-hf.out" && ok "prepare: uint16 for vocab 1000" || fail "prepare: uint16 for vocab 1000"

# gentrain's own trained tokenizer, loaded by tokenizers
cat "$SHAKE" "$UNI" > "$tmp/both.txt"
run_ok prepare-train "$GENTRAIN" prepare "$tmp/both.txt" -o "$tmp/g.h5" --train-tokenizer 1000 \
    --save-tokenizer "$tmp/g.json" --val-fraction 0
for text in $texts; do
    same_ids "gentrain-$(basename "$text" .txt)" "$tmp/g.json" "$text"
done
same_ids gentrain-both "$tmp/g.json" "$tmp/both.txt"
"$BPETOOL" dump "$tmp/g.h5" /train/tokens > "$tmp/g.dump"
check "prepare --train-tokenizer: the dataset holds the ids tokenizers gives with the saved file" \
    cmp -s "$tmp/g.dump" "$tmp/gentrain-both.ref"
check "tokenizers decodes the ids to the text" "$PY" "$REF" decode "$tmp/g.json" "$tmp/gentrain-bpe_unicode.ref" "$UNI"
for text in $texts; do
    check "decode(encode(x)) == x: $(basename "$text")" "$BPETOOL" roundtrip "$tmp/g.json" "$text"
done
[ "$fails" -eq 0 ]
