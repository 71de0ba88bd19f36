#!/usr/bin/env bash
# BPE tokens end to end, without Python: prepare --train-tokenizer / --tokenizer /
# --save-tokenizer, the tokenizer stored in the data file and copied into model.h5,
# sample decoding with it (or --tokenizer), int32 ids past 65536 tokens, and the errors:
# bad options, unreadable and malformed tokenizers, a damaged stored tokenizer, a
# tokenizer of more tokens than the model's vocabulary.
set -u
: "${GENTRAIN:?}" "${BPETOOL:?}" "${top_srcdir:?}"
. "$top_srcdir/tests/lib.sh"
test_tmpdir bpecli
head -c 200000 "$top_srcdir/data/tinyshakespeare.txt" > "$tmp/text.txt"

# expect_fail NAME RC PATTERN CMD...: exits RC with one error line matching PATTERN
expect_fail() {
    local name=$1 want=$2 pat=$3 rc
    shift 3
    "$@" > "$tmp/$name.out" 2> "$tmp/$name.err"
    rc=$?
    if [ $rc -eq "$want" ] && grep -q -- "$pat" "$tmp/$name.err" &&
       [ "$(grep -c 'gentrain: error' "$tmp/$name.err")" -eq 1 ]; then
        ok "$name: exit $rc, $(grep 'gentrain: error' "$tmp/$name.err" | head -c 150)"
    else
        fail "$name: exit $rc (want $want and '$pat')"
        show "$tmp/$name.err"
    fi
}

run_ok prepare-train "$GENTRAIN" prepare "$tmp/text.txt" -o "$tmp/d.h5" --train-tokenizer 400 \
    --save-tokenizer "$tmp/tok.json" --threads 2
check "the saved tokenizer loads" "$BPETOOL" check "$tmp/tok.json"
"$GENTRAIN" inspect "$tmp/d.h5" > "$tmp/inspect.txt" 2>&1
check "the data file holds /tokenizer.json" grep -q '^/tokenizer.json *dataset *uint8' "$tmp/inspect.txt"
check "tokenizer = bpe, vocab_size = 400" \
    bash -c "grep -q '@tokenizer = \"bpe\"' '$tmp/inspect.txt' && grep -q '@vocab_size = 400 ' '$tmp/inspect.txt'"
check "the tokens are uint16" grep -q '^/train/tokens *dataset *uint16' "$tmp/inspect.txt"
run_ok prepare-again "$GENTRAIN" prepare "$tmp/text.txt" -o "$tmp/d2.h5" --tokenizer "$tmp/tok.json" --threads 1
"$BPETOOL" dump "$tmp/d.h5" /train/tokens > "$tmp/a" && "$BPETOOL" dump "$tmp/d2.h5" /train/tokens > "$tmp/b"
check "--tokenizer with the saved file gives the same ids (1 thread vs 2)" cmp -s "$tmp/a" "$tmp/b"
check "decode(encode(text)) == text" "$BPETOOL" roundtrip "$tmp/tok.json" "$tmp/text.txt"

# train copies the tokenizer into the model; sample decodes with it
run_ok train "$GENTRAIN" train --data "$tmp/d.h5" --n_layer 1 --n_head 2 --n_embd 16 --block_size 16 \
    --batch_size 4 --steps 3 --eval_every 0 --threads 1 --out "$tmp/run"
check "train says it keeps the tokenizer" grep -q 'tokenizer: byte-level BPE of 400 tokens' "$tmp/train.out"
"$GENTRAIN" inspect "$tmp/run/model.h5" > "$tmp/minspect.txt" 2>&1
check "model.h5 holds /tokenizer.json" grep -q '^/tokenizer.json' "$tmp/minspect.txt"
run_ok sample "$GENTRAIN" sample --model "$tmp/run" --prompt 'ROMEO: what' --tokens 30 --threads 1
check "sample prints the prompt, then decoded text (no <id>)" \
    bash -c "head -c 11 '$tmp/sample.out' | grep -q 'ROMEO: what' && ! grep -q '<[0-9]*>' '$tmp/sample.out'"
run_ok sample-json "$GENTRAIN" sample --model "$tmp/run" --tokenizer "$tmp/tok.json" --tokens 30 --threads 1
run_ok sample-h5 "$GENTRAIN" sample --model "$tmp/run" --tokenizer "$tmp/d.h5" --tokens 30 --threads 1
check "the tokenizer by --tokenizer (json, data file) decodes the same" cmp -s "$tmp/sample-json.out" "$tmp/sample-h5.out"

# a vocabulary past 65536 ids: int32 tokens
awk 'BEGIN { printf "{\"pre_tokenizer\": {\"type\": \"ByteLevel\", \"add_prefix_space\": false}, \"model\": {\"type\": \"BPE\", \"merges\": [], \"vocab\": {";
             n = 0; for (c = 33; c < 127; c++) if (c != 34 && c != 92) printf "%s\"%c\": %d", n ? ", " : "", c, n++;
             for (; n < 70000; n++) printf ", \"<f%d>\": %d", n, n; print "}}}" }' > "$tmp/big.json"
printf 'hello\n' > "$tmp/small.txt"
run_ok prepare-int32 "$GENTRAIN" prepare "$tmp/small.txt" -o "$tmp/big.h5" --tokenizer "$tmp/big.json" --val-fraction 0
check "70000 tokens: int32 ids" bash -c "'$GENTRAIN' inspect '$tmp/big.h5' | grep -q '^/train/tokens *dataset *int32'"
check "a tokenizer without some bytes: a warning" grep -q 'lacks tokens for some bytes' "$tmp/prepare-int32.err"

# errors
expect_fail both 2 'not both' "$GENTRAIN" prepare "$tmp/text.txt" -o "$tmp/x.h5" --tokenizer "$tmp/tok.json" --train-tokenizer 300
expect_fail small-vocab 2 'must be >= 257' "$GENTRAIN" prepare "$tmp/text.txt" -o "$tmp/x.h5" --train-tokenizer 100
expect_fail save-alone 2 'needs --tokenizer' "$GENTRAIN" prepare "$tmp/text.txt" -o "$tmp/x.h5" --save-tokenizer "$tmp/y.json"
expect_fail missing 1 'tokenizer' "$GENTRAIN" prepare "$tmp/text.txt" -o "$tmp/x.h5" --tokenizer "$tmp/nope.json"
printf '{"model": {"type": "BPE", "vocab": {"a": 0,}}}' > "$tmp/bad.json"
expect_fail malformed 1 'not valid JSON: line 1, column 44: expected a string key' "$GENTRAIN" prepare "$tmp/text.txt" -o "$tmp/x.h5" --tokenizer "$tmp/bad.json"
printf '{"pre_tokenizer": {"type": "Metaspace"}, "model": {"type": "BPE"}}' > "$tmp/meta.json"
expect_fail not-bytelevel 1 "pre_tokenizer 'Metaspace' is not supported" "$GENTRAIN" prepare "$tmp/text.txt" -o "$tmp/x.h5" --tokenizer "$tmp/meta.json"
check "no output left behind" test ! -e "$tmp/x.h5" -a ! -e "$tmp/x.h5.tmp"
# the tokenizer's folder missing: said before the training (it failed only after it)
expect_fail save-no-folder 1 'cannot write the tokenizer to .*nodir/t.json: no such folder' \
    "$GENTRAIN" prepare "$tmp/text.txt" -o "$tmp/x.h5" --train-tokenizer 300 \
    --save-tokenizer "$tmp/nodir/t.json"
check "save-no-folder: refused before the tokenizer was trained, nothing written" \
    test -z "$(grep 'training a tokenizer' "$tmp/save-no-folder.out" "$tmp/save-no-folder.err")" \
    -a ! -e "$tmp/x.h5"
expect_fail save-over-input 1 'is the input' "$GENTRAIN" prepare "$tmp/text.txt" -o "$tmp/x.h5" --train-tokenizer 300 --save-tokenizer "$tmp/text.txt"
"$GENTRAIN" prepare "$tmp/small.txt" -o "$tmp/bytes.h5" > /dev/null 2>&1
expect_fail no-tokenizer 1 'holds no tokenizer' "$GENTRAIN" sample --model "$tmp/run" --tokenizer "$tmp/bytes.h5"
# a tokenizer of more tokens than the model's vocabulary is not the model's: refused (it
# decoded every token wrong, exit 0)
run_ok prepare-500 "$GENTRAIN" prepare "$tmp/text.txt" -o "$tmp/d500.h5" --val-fraction 0 \
    --train-tokenizer 500 --save-tokenizer "$tmp/tok500.json"
expect_fail tokenizer-larger 1 'has 500 tokens, more than the model.s vocabulary of 400' \
    "$GENTRAIN" sample --model "$tmp/run" --tokenizer "$tmp/tok500.json" --prompt 'ROMEO:' \
    --tokens 5 --threads 1

# a damaged stored tokenizer: one byte of its text changed
cp "$tmp/d.h5" "$tmp/bad.h5"
off=$(grep -obUa '"merges"' "$tmp/bad.h5" | head -n 1 | cut -d: -f1)
printf 'X' | dd of="$tmp/bad.h5" bs=1 seek="$((off + 1))" conv=notrunc 2> /dev/null
expect_fail damaged-train 1 'checksum mismatch' "$GENTRAIN" train --data "$tmp/bad.h5" --n_layer 1 --n_head 2 \
    --n_embd 16 --block_size 16 --batch_size 4 --steps 1 --eval_every 0 --threads 1 --out none
expect_fail damaged-sample 1 'checksum mismatch' "$GENTRAIN" sample --model "$tmp/run" --tokenizer "$tmp/bad.h5"
[ "$fails" -eq 0 ]
