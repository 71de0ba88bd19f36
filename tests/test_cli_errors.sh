#!/usr/bin/env bash
# Bad input to the `gentrain` command: every case must fail with a non-zero exit status
# and exactly one "gentrain: error: ..." line on stderr that names the problem, without
# a crash and within a minute. Then the user-file cases that must work: token datasets
# of every integer type and rank under a custom path, with the vocabulary size from a
# dataset attribute, the root group or the command line. Last, the one vocabulary of
# the verbs' options: new and old spellings give the same result, the old with a note.
#
# Environment: GENTRAIN (the gentrain binary), MKDATA (the tests/mkdata tool),
# top_srcdir. One line per case (ok / FAIL); exit 1 if any failed.
set -u
: "${GENTRAIN:?GENTRAIN must point at the gentrain binary}"
: "${MKDATA:?MKDATA must point at the tests/mkdata tool}"
: "${top_srcdir:?top_srcdir must point at the source tree}"

# A launcher's variables in the environment make `train` start MPI; this test runs plain
# single processes (tests/test_data_parallel.sh covers mpirun).
unset OMPI_COMM_WORLD_SIZE PMIX_RANK PMI_RANK PMI_SIZE PMIX_SIZE MV2_COMM_WORLD_SIZE \
    SLURM_STEP_NUM_TASKS

. "$top_srcdir/tests/lib.sh"
test_tmpdir cli_errors
mkdir -p "$tmp/work" # working folder of every run: relative outputs and cores land here
n=0

# Step lines of `train` on stdout ("step     1/3 | loss ... ").
STEP_RE='^step .*| loss '

# run CMD...: runs in $tmp/work without core files, under a 60 s timeout; sets rc,
# out and err (files).
run() {
    n=$((n + 1))
    out="$tmp/out.$n"
    err="$tmp/err.$n"
    (cd "$tmp/work" && ulimit -c 0 && exec timeout 60 "$@") > "$out" 2> "$err"
    rc=$?
}

show_err() { sed -e 's/^/    | /' "$err" | head -n 8; }

# expect_error NAME WORD CMD...: the command must fail cleanly; WORD (an extended regex)
# must appear in its one error line.
expect_error() {
    local name=$1 word=$2
    shift 2
    run "$@"
    local problems="" lines
    lines=$(wc -l < "$err")
    if [ "$rc" -eq 0 ]; then problems+="exit status 0; "; fi
    if [ "$rc" -eq 124 ]; then problems+="timed out; "; fi
    if [ "$rc" -gt 128 ] && [ "$rc" -ne 124 ]; then
        problems+="killed by signal $((rc - 128)); "
    fi
    if compgen -G "$tmp/work/core*" > /dev/null; then
        problems+="left a core file; "
        rm -f "$tmp"/work/core*
    fi
    if [ "$lines" -ne 1 ]; then problems+="$lines lines on stderr, want 1; "; fi
    if ! head -n 1 "$err" | grep -q '^gentrain: error: '; then
        problems+="no 'gentrain: error:' line; "
    fi
    if ! grep -qiE -- "$word" "$err"; then problems+="error does not mention '$word'; "; fi
    if [ -z "$problems" ]; then
        ok "$name (exit $rc): $(head -n 1 "$err")"
    else
        fail "$name: $problems"
        show_err
    fi
}

# expect_train_ok NAME CMD...: exit 0 and exactly 3 step lines.
expect_train_ok() {
    local name=$1
    shift
    run "$@"
    local steps
    steps=$(grep -c -- "$STEP_RE" "$out")
    if [ "$rc" -eq 0 ] && [ "$steps" -eq 3 ]; then
        ok "$name"
    else
        fail "$name: exit $rc, $steps step lines (want 0 and 3)"
        show_err
        tail -n 5 "$out" | sed -e 's/^/    > /'
    fi
}

# mkfile NAME ARGS...: makes $tmp/NAME with mkdata or records a failure.
mkfile() {
    local name=$1
    shift
    if ! "$MKDATA" "$tmp/$name" "$@" > "$tmp/mkdata.log" 2>&1; then
        fail "setup: mkdata $name $*"
        sed -e 's/^/    | /' "$tmp/mkdata.log" | head -n 5
    fi
}

# A tiny model: every case below runs in seconds.
TINY=(--n_layer 1 --n_head 2 --n_embd 16 --block_size 8 --batch_size 2 --steps 3)

# ------------------------------------------------------------------ inputs
mkfile good.h5 --dataset /train/tokens --dtype uint8 --rank 1 --len 4096 --vocab 256 \
    --max-token 255
mkfile float.h5 --dataset /train/tokens --dtype float32 --rank 1 --len 4096 --vocab 256
mkfile badtok.h5 --dataset /train/tokens --dtype uint16 --rank 1 --len 4096 --vocab 256 \
    --max-token 255 --bad-index 1234 --bad-value 300
mkfile short.h5 --dataset /train/tokens --dtype uint16 --rank 1 --len 5 --vocab 256 \
    --max-token 255
mkfile novocab.h5 --dataset /my/tokens --dtype uint16 --rank 1 --len 4096 --max-token 499
printf 'lr = 1e-3\nn_layer 4\n' > "$tmp/bad.cfg"
printf '# tuned\n\nlr_max = 3e-3\n' > "$tmp/unknown.cfg"
printf 'some text to prepare\n' > "$tmp/input.txt"

# ------------------------------------------------------------------ failures
G=$GENTRAIN
expect_error "missing data file" "nope\.h5" \
    "$G" train --data "$tmp/nope.h5" --val_dataset none "${TINY[@]}"
expect_error "missing dataset" "/nope" \
    "$G" train --data "$tmp/good.h5" --train_dataset /nope --val_dataset none "${TINY[@]}"
expect_error "float dataset" "float" \
    "$G" train --data "$tmp/float.h5" --val_dataset none "${TINY[@]}"
expect_error "token out of range" "300|1234" \
    "$G" train --data "$tmp/badtok.h5" --val_dataset none "${TINY[@]}"
expect_error "dataset shorter than block_size" "short|block_size|token" \
    "$G" train --data "$tmp/short.h5" --val_dataset none "${TINY[@]}"
# a team of tens of thousands of threads overflowed the stack OpenMP starts it on
expect_error "threads past the most (4096)" "threads.*4096" \
    "$G" train --data "$tmp/good.h5" --val_dataset none "${TINY[@]}" --threads 5000
expect_error "OMP_NUM_THREADS past the most" "OMP_NUM_THREADS=70000.*1 to 4096" \
    env OMP_NUM_THREADS=70000 "$G" train --data "$tmp/good.h5" --val_dataset none "${TINY[@]}"
# the GENTRAIN_* variables: a value their reader does not take is one line at start
expect_error "GENTRAIN_BF16 not a path" "GENTRAIN_BF16=nonsense: .*amx-emulated" \
    env GENTRAIN_BF16=nonsense "$G" train --data "$tmp/good.h5" --val_dataset none \
    "${TINY[@]}" --precision bf16
expect_error "GENTRAIN_PROBE_SECONDS not a number" "GENTRAIN_PROBE_SECONDS=abc" \
    env GENTRAIN_PROBE_SECONDS=abc "$G" inspect "$tmp/good.h5"
expect_error "unknown key on the command line" "unknown key 'lr_max'.*min_lr" \
    "$G" train --data "$tmp/good.h5" --lr_max 3e-3
expect_error "unknown key in a config file" "unknown\.cfg:3: unknown key 'lr_max'" \
    "$G" train --data "$tmp/good.h5" --config "$tmp/unknown.cfg"
# A key or a value with bytes that are not UTF-8 (and an escape sequence that would
# colour the terminal) is echoed escaped as inspect shows such text (\xNN), never raw;
# valid UTF-8 stays as it is.
printf 'n_layer = 2\n\xff\x1b[31m = 3\n' > "$tmp/bytes.cfg"
no_raw_bytes() { ! LC_ALL=C grep -q "$(printf '[\x1b\x80-\xff]')" "$err"; }
expect_error "a key of non-UTF-8 bytes on the command line" \
    'unknown key .n_\\xffx\\x1b\[31m.' \
    "$G" train --data "$tmp/good.h5" "--n_$(printf '\xff')x$(printf '\x1b')[31m" 3
check "  ... no raw byte of it on stderr" no_raw_bytes
expect_error "a key of non-UTF-8 bytes in a config file" \
    'bytes\.cfg:2: unknown key .\\xff\\x1b\[31m.' \
    "$G" train --data "$tmp/good.h5" --config "$tmp/bytes.cfg"
check "  ... no raw byte of it on stderr" no_raw_bytes
expect_error "a value of non-UTF-8 bytes" "precision = '\\\\xfe\\\\xc3': must be one of" \
    "$G" train --data "$tmp/good.h5" --precision "$(printf '\xfe\xc3')"
check "  ... no raw byte of it on stderr" no_raw_bytes
expect_error "a UTF-8 key is echoed as it is" "unknown key 'n_layér'; did you mean 'n_layer'" \
    "$G" train --data "$tmp/good.h5" --n_layér 3
expect_error "n_embd not divisible by n_head" "n_embd 130 is not divisible by n_head 4" \
    "$G" train --data "$tmp/good.h5" --n_embd 130 --n_head 4
expect_error "negative lr" "lr = -1: must be > 0" \
    "$G" train --data "$tmp/good.h5" --lr -1
expect_error "a hexadecimal lr (strtod would read 0x10 as 16)" "lr = '0x10': not a number" \
    "$G" train --data "$tmp/good.h5" --lr 0x10
expect_error "a denormal peak_gflops" "peak_gflops = 1e-320 is not a machine's peak" \
    "$G" train --data "$tmp/good.h5" --peak_gflops 1e-320
expect_error "missing config file" "nope\.cfg" \
    "$G" train --config "$tmp/nope.cfg"
expect_error "bad line in a config file" "bad\.cfg:2" \
    "$G" train --data "$tmp/good.h5" --config "$tmp/bad.cfg"
expect_error "no data file given" "data" \
    "$G" train "${TINY[@]}"
expect_error "unwritable out folder" "/proc/forbidden" \
    "$G" train --data "$tmp/good.h5" --val_dataset none "${TINY[@]}" --out /proc/forbidden
expect_error "no vocab_size anywhere" "vocab" \
    "$G" train --data "$tmp/novocab.h5" --train_dataset /my/tokens --val_dataset none \
    "${TINY[@]}" --out "$tmp/run_novocab_fail"
expect_error "sample: missing checkpoint" "nope" \
    "$G" sample --model "$tmp/nope" --tokens 5
expect_error "sample: bad temperature" "temperature" \
    "$G" sample --model "$tmp/good.h5" --temperature 0
expect_error "sample: a hexadecimal temperature" "temperature '0x1': not a number" \
    "$G" sample --model "$tmp/good.h5" --temperature 0x1
expect_error "inspect: missing file" "nope\.h5" \
    "$G" inspect "$tmp/nope.h5"
expect_error "unknown verb" "frobnicate.*gentrain --help" \
    "$G" frobnicate
# Standard output on a full disk: the run trains and saves its model, but its step lines
# were lost, so it must not exit 0; one error line says so (the same for inspect).
if [ -c /dev/full ]; then
    n=$((n + 1))
    err="$tmp/err.$n"
    (cd "$tmp/work" && exec timeout 60 "$G" train --data "$tmp/good.h5" --val_dataset none \
        "${TINY[@]}" --out "$tmp/run_full" --log "") > /dev/full 2> "$err"
    rc=$?
    check "train > /dev/full: exit 1, one error line about standard output, model saved" \
        test "$rc" -eq 1 -a "$(grep -c '^gentrain: error: ' "$err")" -eq 1 -a \
        -s "$tmp/run_full/model.h5" -a \
        "$(grep -c '^gentrain: error: .*standard output' "$err")" -eq 1
    [ "$(grep -c '^gentrain: error: ' "$err")" -eq 1 ] || show_err
    "$G" inspect "$tmp/good.h5" > /dev/full 2> "$err"
    rc=$?
    check "inspect > /dev/full: exit 1, one error line" test "$rc" -eq 1 -a \
        "$(wc -l < "$err")" -eq 1 -a "$(grep -c '^gentrain: error: ' "$err")" -eq 1
else
    ok "no /dev/full here: standard output on a full disk not tried"
fi
# offload: with no GPU (this machine, CI) the default and offload = blocks say so in one
# line and train on the CPU; offload = required is an error; offload = none says nothing
# about it. (Both GPU placements train through a fake GPU: tests/test_offload_fake.sh.)
expect_error "offload = required without a usable GPU" "offload = required" \
    "$G" train --data "$tmp/good.h5" --val_dataset none "${TINY[@]}" --out none \
    --offload required
run "$G" train --data "$tmp/good.h5" --val_dataset none "${TINY[@]}" --out none --log ""
if [ "$rc" -eq 0 ] && [ "$(grep -c '^offload: ' "$out")" -eq 1 ] &&
    grep -q '^offload: .*every layer runs on the CPU' "$out"; then
    ok "offload default: one line saying the CPU trains ($(grep '^offload: ' "$out" | cut -c1-90))"
else
    fail "offload default (rc $rc)"
    show_err
fi
run "$G" train --data "$tmp/good.h5" --val_dataset none "${TINY[@]}" --out none --log "" \
    --offload blocks
check "offload blocks without a GPU: one line saying the CPU trains" test "$rc" -eq 0 -a \
    "$(grep -c '^offload: ' "$out")" -eq 1 -a \
    "$(grep -c '^offload: .*every layer runs on the CPU' "$out")" -eq 1
run "$G" train --data "$tmp/good.h5" --val_dataset none "${TINY[@]}" --out none --log "" \
    --offload none
check "offload none: no offload line" test "$rc" -eq 0 -a "$(grep -c '^offload: ' "$out")" -eq 0
PLAN=("$G" plan --n_layer 2 --n_head 2 --n_embd 32 --block_size 16 --vocab_size 64
      --batch_size 4)
expect_error "plan: neither --measure nor a machine" "--measure" "${PLAN[@]}"
expect_error "plan: GPUs without their speed" "--gpu-tflops" "${PLAN[@]}" --gpus-per-node 4
expect_error "plan: a bad number" "--nodes needs a number" "${PLAN[@]}" --nodes x --measure
expect_error "plan: a hexadecimal number" "--nodes needs a number.*got '0x2'" "${PLAN[@]}" \
    --nodes 0x2 --measure
expect_error "plan: no vocab_size and no data" "vocab_size" \
    "$G" plan --n_layer 2 --n_head 2 --n_embd 32 --block_size 16 --measure
# And two plans that work: a described GPU cluster, and one measured here (one rank).
run "${PLAN[@]}" --nodes 4 --gpus-per-node 4 --gpu-tflops 100 --noise-scale 1000
if [ "$rc" -eq 0 ] && grep -q '^recommended: dp [0-9]* x pp [0-9]* x tp [0-9]*' "$out" &&
    [ "$(grep -c '^ *16 ' "$out")" -ge 3 ]; then
    ok "plan: a described cluster gets a table of 16-rank grids and a recommendation"
else
    fail "plan: described cluster (rc $rc)"
    show_err
fi
# GPUs: the plan says how a GPU stage or shard runs (every layer of it on the GPU, the
# residual stream between stages over the host link, the shards' all-reduces over NCCL
# unless --tp-host), and no grid is said to train on the CPU (every dp x tp x pp runs
# on the GPUs). The estimate counts the embedding and the head at the GPU's rate, where
# they run: no note says otherwise.
check "plan: GPUs: one line on how stages and shards run, their all-reduces over NCCL" \
    test "$(grep -c '^plan: on the GPUs a stage or a shard .* all-reduces over NCCL' "$out")" -eq 1
check "plan: GPUs: no grid is sent to the CPU" test "$(grep -c 'on the CPU for now' "$out")" -eq 0
check "plan: GPUs: every layer of a stage or shard on its GPU, no note that the head runs elsewhere" \
    test "$(grep -c '^plan: on the GPUs a stage or a shard (pp > 1 or tp > 1) trains every layer of its part on its GPU' "$out")" -eq 1 -a \
    "$(grep -c '^note: ' "$out")" -eq 0
run "${PLAN[@]}" --nodes 4 --gpus-per-node 4 --gpu-tflops 100 --tp-host --pcie-gbs 10
check "plan: GPUs, --tp-host: the shards' all-reduces through host memory" \
    test "$rc" -eq 0 -a "$(grep -c '^plan: on the GPUs .* over 10.00 GB/s each way; the shards.* through host memory' "$out")" -eq 1
run "${PLAN[@]}" --measure --reps 1 --json
if [ "$rc" -eq 0 ] && grep -q '^{"dp":1,"pp":1,"tp":1,' "$out" && grep -q '^recommended:' "$out"; then
    ok "plan --measure on one rank: JSON lines and a recommendation"
else
    fail "plan --measure (rc $rc)"
    show_err
fi
# A model whose micro-batch cannot be allocated here: one line and exit 1, not a table
# of -1000 ms timings (each a failed timing's -1 s) and exit 0.
expect_error "plan --measure: a model that cannot be allocated here" \
    "cannot time this model here: a transformer block .* could not be allocated" \
    "$G" plan --n_layer 1 --n_head 1 --n_embd 64 --block_size 4096 --vocab_size 256 \
    --batch_size 100000 --measure --reps 1
check "  ... exit 1, no table, no recommendation" test "$rc" -eq 1 -a \
    "$(grep -c -e '^ *ranks ' -e '^recommended:' -e ' -1000' "$out")" -eq 0
expect_error "prepare: missing input" "nope\.txt" \
    "$G" prepare "$tmp/nope.txt" -o "$tmp/p.h5"
expect_error "prepare: unwritable output" "/proc/forbidden" \
    "$G" prepare "$tmp/input.txt" -o /proc/forbidden/p.h5
expect_error "prepare: bad --val-fraction" "val-fraction" \
    "$G" prepare "$tmp/input.txt" -o "$tmp/p.h5" --val-fraction 1.5

# ------------------------------------------------------------------ user files that work
declare -A VOCAB=([uint8]=256 [uint16]=1000 [int32]=50257 [int64]=50257)
for dtype in uint8 uint16 int32 int64; do
    v=${VOCAB[$dtype]}
    for rank in 1 2; do
        f="user_${dtype}_r$rank.h5"
        if [ "$rank" -eq 1 ]; then
            shape=(--rank 1 --len 4096)
        else
            shape=(--rank 2 --rows 32 --len 64)
        fi
        mkfile "$f" --dataset /my/tokens --dtype "$dtype" "${shape[@]}" --vocab "$v" \
            --max-token $((v - 1))
        expect_train_ok "train on $dtype rank $rank, /my/tokens, vocab $v" \
            "$G" train --data "$tmp/$f" --train_dataset /my/tokens --val_dataset none \
            "${TINY[@]}" --out "$tmp/run_${dtype}_$rank"
    done
done
mkfile rootvocab.h5 --dataset /my/tokens --dtype int32 --rank 1 --len 4096 \
    --root-vocab 300 --max-token 299
expect_train_ok "vocab_size from the root attribute" \
    "$G" train --data "$tmp/rootvocab.h5" --train_dataset /my/tokens --val_dataset none \
    "${TINY[@]}" --out "$tmp/run_rootvocab"
expect_train_ok "vocab_size only on the command line" \
    "$G" train --data "$tmp/novocab.h5" --train_dataset /my/tokens --val_dataset none \
    --vocab_size 500 "${TINY[@]}" --out "$tmp/run_cmdvocab"

# ------------------------------------------------------------------ one vocabulary
# Every verb names the same thing the same way (src/cli/cli_names.h): --model for the model
# a verb reads, -o/--out for what it writes; '-' and '_' alike; --name=VALUE. An old
# spelling still works, with exactly one "gentrain: note:" line naming the new one.
notes() { grep -c '^gentrain: note: ' "$err"; }
RUN=$tmp/run_uint8_1
SAMPLE=(sample --prompt 'ab' --tokens 12 --seed 5 --threads 1)
run "$G" "${SAMPLE[@]}" --model "$RUN"
cp "$out" "$tmp/sample_model.txt"
check "sample --model: exit 0, text, no note" test "$rc" -eq 0 -a -s "$out" -a "$(notes)" -eq 0
run "$G" "${SAMPLE[@]}" --checkpoint "$RUN"
check "sample --checkpoint (old): exit 0, one note naming --model" test "$rc" -eq 0 -a \
    "$(notes)" -eq 1 -a "$(grep -c 'sample: --checkpoint is spelt --model now' "$err")" -eq 1
check "sample --checkpoint (old): the same text as --model" cmp -s "$out" "$tmp/sample_model.txt"
run "$G" "${SAMPLE[@]}" --model="$RUN" --top_k=5
cp "$out" "$tmp/sample_k1.txt"
run "$G" "${SAMPLE[@]}" --model "$RUN" --top-k 5
check "sample: --top_k=5 and --top-k 5 are one option" test "$rc" -eq 0 -a "$(notes)" -eq 0
check "sample: ... and give the same text" cmp -s "$out" "$tmp/sample_k1.txt"
run "$G" export --format hf --model "$RUN" -o "$tmp/hf_new"
check "export --model RUN -o DIR: exit 0, no note" test "$rc" -eq 0 -a "$(notes)" -eq 0 -a \
    -s "$tmp/hf_new/model.safetensors"
run "$G" export --format=hf --checkpoint "$RUN" "$tmp/hf_old"
check "export --checkpoint RUN DIR (old spellings): exit 0, one note for each" \
    test "$rc" -eq 0 -a "$(notes)" -eq 2 -a \
    "$(grep -c 'export: --checkpoint is spelt --model now' "$err")" -eq 1 -a \
    "$(grep -c 'export: the output folder given alone is spelt -o DIR or --out DIR' "$err")" -eq 1
check "export: both spellings write the same model" \
    cmp -s "$tmp/hf_new/model.safetensors" "$tmp/hf_old/model.safetensors"
run "$G" export --format hf --model "$RUN" --out="$tmp/hf_eq"
check "export --out=DIR: the same model" cmp -s "$tmp/hf_new/model.safetensors" \
    "$tmp/hf_eq/model.safetensors"
# (a short second folder: a long one is cut to its first 60 characters in the line)
expect_error "export: a second output folder" "unexpected argument 'second-b'" \
    "$G" export --format hf --model "$RUN" -o "$tmp/a" second-b
expect_error "prepare: an output file given twice" "given twice" \
    "$G" prepare "$tmp/input.txt" -o "$tmp/pa.h5" --out "$tmp/pb.h5"
expect_error "export: an output folder given twice" "given twice" \
    "$G" export --format hf --model "$RUN" -o "$tmp/a" --out "$tmp/b"
# empty names (an unset shell variable): a usage error naming the option, not "cannot
# open :" (prepare's after training the tokenizer)
expect_error "export: an empty output folder" "give the output folder" \
    "$G" export --format hf --model "$RUN" -o ""
expect_error "export: an empty --model" "--model is empty" \
    "$G" export --format hf --model "" -o "$tmp/a"
expect_error "prepare: an empty --save-tokenizer" "--save-tokenizer is empty" \
    "$G" prepare "$tmp/input.txt" -o "$tmp/pe.h5" --train-tokenizer 300 --save-tokenizer ""
expect_error "prepare: an empty --tokenizer" "--tokenizer is empty" \
    "$G" prepare "$tmp/input.txt" -o "$tmp/pe.h5" --tokenizer=
expect_error "prepare: --save-tokenizer in a missing folder: the reason said" \
    "cannot write the tokenizer to .*nodir/t.json: no such folder" \
    "$G" prepare "$tmp/input.txt" -o "$tmp/pe.h5" --train-tokenizer 300 \
    --save-tokenizer "$tmp/nodir/t.json"
run "$G" prepare "$tmp/input.txt" --out "$tmp/p_out.h5" --val_fraction 0.25
check "prepare --out, --val_fraction: exit 0, no note" test "$rc" -eq 0 -a "$(notes)" -eq 0 -a \
    -s "$tmp/p_out.h5"
run "$G" prepare "$tmp/input.txt" --output "$tmp/p_output.h5" --val-fraction=0.25
check "prepare --output (old): exit 0, one note naming --out" test "$rc" -eq 0 -a \
    "$(notes)" -eq 1 -a "$(grep -c 'prepare: --output is spelt --out now' "$err")" -eq 1
check "prepare: both spellings write the same tokens" \
    test "$("$G" inspect "$tmp/p_out.h5" | grep -c tokens)" -ge 2 -a \
    "$("$G" inspect "$tmp/p_out.h5" | grep tokens)" = "$("$G" inspect "$tmp/p_output.h5" | grep tokens)"
run "$G" train --data "$tmp/good.h5" --val_dataset none "${TINY[@]}" -o "$tmp/run_o" --log ""
check "train -o DIR is --out DIR" test "$rc" -eq 0 -a -s "$tmp/run_o/model.h5"
run "${PLAN[@]}" --core_gflops=10 --cores-per-node=2 --nodes 2 --json
check "plan: --core_gflops=10 --cores-per-node=2 (either separator, =VALUE)" \
    test "$rc" -eq 0 -a "$(grep -c '^{"dp":' "$out")" -ge 3

echo "$n cases, $fails failed"
[ "$fails" -eq 0 ]
