#!/bin/bash
# fuzz.sh — builds gentrain's libFuzzer targets (tests/fuzz/*.c) with clang and
# AddressSanitizer + UndefinedBehaviorSanitizer, makes their seed corpora, and runs each
# for FUZZ_SECONDS. `make fuzz` runs it with the configured flags; CI runs a short smoke.
#
#   fuzz_config   the config parser: load, validate, print, and re-read the print
#   fuzz_tokens   the token-dataset reader, on an HDF5 file image in memory
#   fuzz_model    the model-file reader (metadata, shape, tensors, checksum)
#   fuzz_ckpt     the checkpoint reader (everything, before anything is taken)
#   fuzz_tokenizer the tokenizer.json loader (JSON and BPE), then encoding and decoding
#   fuzz_safetensors the Hugging Face GPT-2 import of a model.safetensors file
#   fuzz_runlog   a run's log.jsonl, read by `inspect RUN_FOLDER` and `plan --from-log`
#
# Per target it prints the executions, their rate and the coverage libFuzzer reports
# (edges "cov" and features "ft"), and keeps the grown corpus in FUZZ_DIR/corpus/NAME.
# A crash or a sanitizer report fails the run; the input that caused it is saved in
# FUZZ_DIR/crashes/ (make it a regression input under tests/fuzz/regress/NAME/).
# Every regression input there is run first: each must pass.
#
# Environment (make fuzz sets the first five from configure):
#   FUZZ_SOURCES   the library's C sources (relative to top_srcdir)
#   FUZZ_CFLAGS    include and define flags (HDF5, OpenBLAS, MPI)
#   FUZZ_LIBS      libraries (HDF5 with MPI, OpenBLAS)
#   GENTRAIN, MKDATA   the built gentrain and tests/mkdata (they make the seeds)
#   top_srcdir     the source tree
#   FUZZ_CC        the compiler (default clang)
#   FUZZ_SECONDS   seconds per target (default 60)
#   FUZZ_DIR       build and work folder (default ./fuzz)
#   FUZZ_TARGETS   which targets (default all seven)
#   FUZZ_SMOKE     1: the quick check CI runs (tests/test_fuzz_smoke.sh): fuzz_config,
#                  fuzz_tokenizer, fuzz_safetensors and fuzz_runlog fuzz for FUZZ_SECONDS;
#                  the HDF5 targets only run their seeds and regression inputs, since
#                  mutated HDF5 files reach known crashes and hangs inside HDF5 1.10
#                  itself (tests/fuzz/README.md); built at -O0,
#                  which builds in a quarter of -O1's time and still runs thousands of
#                  inputs a target (fuzzing proper stays at -O1: more inputs a second)
# The HDF5 targets (fuzz_tokens, fuzz_model, fuzz_ckpt) fuzz in libFuzzer's fork mode
# and go on after a crash, a hang or a memory blow-up: HDF5 1.10.8 has those of its own
# and they would end the run in its first minute. Afterwards every input that stopped a
# job is run again and sorted by where it stopped: with the top frame of its stack
# inside the HDF5 library it is counted (by function) as HDF5's; anywhere else it fails
# the run as gentrain's.
# Exit status: 0 when every target built and ran clean; 1 otherwise; 77 when clang with
# libFuzzer is not there (install clang).
set -u
: "${FUZZ_SOURCES:?FUZZ_SOURCES must list the library sources (run through make fuzz)}"
: "${GENTRAIN:?GENTRAIN must point at the gentrain binary}"
: "${MKDATA:?MKDATA must point at tests/mkdata}"
top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
FUZZ_CC=${FUZZ_CC:-clang}
FUZZ_SECONDS=${FUZZ_SECONDS:-60}
FUZZ_DIR=${FUZZ_DIR:-fuzz}
FUZZ_TARGETS=${FUZZ_TARGETS:-fuzz_config fuzz_tokens fuzz_model fuzz_ckpt fuzz_tokenizer fuzz_safetensors fuzz_runlog}
FUZZ_SMOKE=${FUZZ_SMOKE:-0}
FUZZ_CFLAGS=${FUZZ_CFLAGS:-}
FUZZ_LIBS=${FUZZ_LIBS:-}
case $FUZZ_SECONDS in ''|*[!0-9]*) echo "fuzz: FUZZ_SECONDS=$FUZZ_SECONDS is not a whole number" >&2; exit 1;; esac

if ! command -v "$FUZZ_CC" > /dev/null 2>&1 ||
   ! echo 'int LLVMFuzzerTestOneInput(const char *d, long n) { (void)d; (void)n; return 0; }' |
        "$FUZZ_CC" -x c -fsanitize=fuzzer - -o /dev/null > /dev/null 2>&1; then
    echo "fuzz: SKIP: $FUZZ_CC with libFuzzer (-fsanitize=fuzzer) is not available; install clang"
    exit 77
fi

# LLVM's OpenMP runtime (the targets are built with -fopenmp) registers each process in
# /dev/shm/__KMP_REGISTERED_LIB_<pid>_<uid> and removes that file when the process
# exits normally; the children that crash, leak or time out (libFuzzer's fork mode
# runs many) leave theirs. At the end, the files made during this run by processes
# that are gone are removed.
kmp_mark=$(mktemp "${TMPDIR:-/tmp}/fuzz-start.XXXXXX") || exit 1
remove_stale_kmp() {
    local f pid
    for f in /dev/shm/__KMP_REGISTERED_LIB_*_"$(id -u)"; do
        [ -f "$f" ] && [ "$f" -nt "$kmp_mark" ] || continue
        pid=${f#/dev/shm/__KMP_REGISTERED_LIB_}
        pid=${pid%_*}
        kill -0 "$pid" 2> /dev/null || rm -f "$f"
    done
    rm -f "$kmp_mark"
}
trap remove_stale_kmp EXIT

OPT=-O1
[ "$FUZZ_SMOKE" = 1 ] && OPT=-O0
OBJ_DIR=$FUZZ_DIR/obj$OPT # one per level: a smoke never leaves -O0 objects to fuzzing
mkdir -p "$OBJ_DIR" "$FUZZ_DIR/crashes" || exit 1
SAN=(-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer)
COMMON=(-std=c11 -g "$OPT" -fopenmp -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE -w)

# ---- build: the library objects once (instrumented for coverage), then each target
echo "fuzz: building with $FUZZ_CC"
objs=()
for src in $FUZZ_SOURCES; do
    obj="$OBJ_DIR/$(echo "$src" | tr '/' '_' | sed 's/\.c$/.o/')"
    if [ ! -f "$obj" ] || [ "$top_srcdir/$src" -nt "$obj" ]; then
        # shellcheck disable=SC2086
        "$FUZZ_CC" "${COMMON[@]}" "${SAN[@]}" -fsanitize=fuzzer-no-link $FUZZ_CFLAGS \
            -c "$top_srcdir/$src" -o "$obj" || { echo "fuzz: cannot compile $src"; exit 1; }
    fi
    objs+=("$obj")
done
for t in $FUZZ_TARGETS; do
    # shellcheck disable=SC2086
    "$FUZZ_CC" "${COMMON[@]}" "${SAN[@]}" -fsanitize=fuzzer $FUZZ_CFLAGS \
        "$top_srcdir/tests/fuzz/$t.c" "${objs[@]}" $FUZZ_LIBS -lm -lpthread \
        -o "$FUZZ_DIR/$t" || { echo "fuzz: cannot build $t"; exit 1; }
done

# ---- seeds: small valid files of each kind, made by the real tools
seeds=$FUZZ_DIR/seeds
rm -rf "$seeds" && mkdir -p "$seeds"/{fuzz_config,fuzz_tokens,fuzz_model,fuzz_ckpt,fuzz_tokenizer,fuzz_safetensors,fuzz_runlog} || exit 1
cp "$top_srcdir"/data/*.cfg "$seeds/fuzz_config/"
printf 'n_layer = 2\nn_head = 2\nlr = 3e-4 # a comment\nsync = async\nstaleness = 2\n' \
    > "$seeds/fuzz_config/small.cfg"
i=0
for spec in "uint8 1 4000" "uint16 1 3000" "int32 2 200 --rows 4" "uint16 1 5000 --chunk 512 --gzip 4"; do
    set -- $spec
    "$MKDATA" "$seeds/fuzz_tokens/t$i.h5" --dataset /train/tokens --dtype "$1" --rank "$2" \
        --len "$3" --vocab 256 "${@:4}" > /dev/null || { echo "fuzz: mkdata failed"; exit 1; }
    i=$((i + 1))
done
head -c 20000 "$top_srcdir/data/tinyshakespeare.txt" > "$seeds/text.txt"
"$GENTRAIN" prepare "$seeds/text.txt" -o "$seeds/fuzz_tokens/prepared.h5" > /dev/null || exit 1
# the shape fuzz_ckpt loads into: vocab 256, block 8, 1 layer, 1 head, n_embd 8
OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "$GENTRAIN" train \
    --data "$seeds/fuzz_tokens/prepared.h5" --n_layer 1 --n_head 1 --n_embd 8 \
    --block_size 8 --batch_size 2 --steps 2 --ckpt_every 1 --eval_every 0 --threads 1 \
    --out "$seeds/run" > /dev/null || { echo "fuzz: cannot train the seed model"; exit 1; }
cp "$seeds/run/model.h5" "$seeds/fuzz_model/"
# tokenizers: one trained by prepare (a few hundred tokens), a tiny one with an added token
"$GENTRAIN" prepare "$seeds/text.txt" -o "$seeds/bpe.h5" --train-tokenizer 300 \
    --save-tokenizer "$seeds/fuzz_tokenizer/trained.json" > /dev/null || exit 1
printf '%s' '{"added_tokens": [{"id": 3, "content": "<x>", "special": true, "lstrip": true}],
 "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": true}, "decoder": null,
 "model": {"type": "BPE", "unk_token": "a", "fuse_unk": true, "ignore_merges": true,
 "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["#version: 0.2", "a b"]}}' \
    > "$seeds/fuzz_tokenizer/tiny.json"
cp "$seeds/run/checkpoints/"*.h5 "$seeds/fuzz_ckpt/"
"$GENTRAIN" export --format hf --model "$seeds/run" -o "$seeds/hf" > /dev/null || exit 1
cp "$seeds/hf/model.safetensors" "$seeds/fuzz_safetensors/"
# logs: the seed run's own, and records as a run with 2 micro-steps writes them (with
# the gradient noise scale that plan --from-log reads), one of them by steps alone
cp "$seeds/run/log.jsonl" "$seeds/fuzz_runlog/run.jsonl"
printf '%s\n' \
    '{"step":1,"loss":5.5,"lr":1e-3,"ms":12.5,"tokens_per_s":8000,"tokens":1024,"elapsed_s":0.1}' \
    '{"step":2,"loss":5.1,"lr":1e-3,"ms":12.0,"tokens_per_s":8100,"tokens":2048,"noise_scale":310.5,"elapsed_s":0.2}' \
    '{"step":2,"val_loss":5.0,"tokens":2048}' \
    '{"step":4,"loss":4.8,"lr":9e-4,"ms":11.9,"tokens_per_s":8200,"tokens":4096,"noise_scale":402.0,"elapsed_s":0.3}' \
    > "$seeds/fuzz_runlog/noise.jsonl"
printf '%s\n' '{"step":10,"noise_scale":12.5}' '{"step":20,"noise_scale":30}' \
    > "$seeds/fuzz_runlog/by-steps.jsonl"

# ---- regression inputs first, then fuzzing
fail=0

is_hdf5_target() { case $1 in fuzz_tokens|fuzz_model|fuzz_ckpt) return 0;; esac; return 1; }

# Frames that say nothing about who is at fault: the fuzzer's, the sanitizers', the C
# library's, and the allocation and copy functions everyone calls
NOT_THE_CAUSE='libclang_rt|compiler-rt|/fuzzer/|fuzzer::|sanitizer|asan_|__interceptor|libc\.so|libpthread|libstdc\+\+|sysdeps/|libio/|stdio-common/|string/| in (malloc|calloc|realloc|free|strdup|strndup|memcpy|memmove|memset|v?s?n?printf|main) '

# first_cause_frame < REPORT: the report's first stack frame that is none of the above
first_cause_frame() {
    grep -E '^ +#[0-9]+ 0x' | grep -v -E "$NOT_THE_CAUSE" | head -n 1
}

# where_stopped INPUT TARGET: "hdf5 FUNCTION" when the first frame of the report's
# stack (a leak's: where it was allocated) that is none of the above is inside libhdf5;
# "gentrain FRAME" when it is elsewhere; "clean" when the input runs clean again.
# An out-of-memory stop with no stack is run once more with the RSS watch raised: when
# one huge malloc comes just as the RSS passes the limit, libFuzzer's RSS thread ends
# the run before its malloc hook prints where the malloc was; alone, the hook does.
where_stopped() {
    local report frame
    report=$(ASAN_OPTIONS=symbolize=1 UBSAN_OPTIONS=print_stacktrace=1 \
        timeout 60 "$FUZZ_DIR/$2" -timeout=10 \
        -rss_limit_mb=2048 -close_fd_mask=2 "$1" 2>&1)
    if ! echo "$report" | grep -q -E 'ERROR: |SUMMARY: |runtime error'; then
        echo clean
        return
    fi
    frame=$(echo "$report" | first_cause_frame)
    if [ -z "$frame" ] && echo "$report" | grep -q 'out-of-memory (malloc('; then
        report=$(ASAN_OPTIONS=symbolize=1 timeout 60 "$FUZZ_DIR/$2" -timeout=10 \
            -rss_limit_mb=8192 -malloc_limit_mb=2048 -close_fd_mask=2 "$1" 2>&1)
        frame=$(echo "$report" | first_cause_frame)
    fi
    if echo "$frame" | grep -q -E 'libhdf5|in H5[A-Za-z0-9_]+'; then
        frame=$(echo "$frame" | sed -n 's/.* in \([A-Za-z0-9_]*\) .*/\1/p')
        echo "hdf5 ${frame:-(unnamed)}"
    else
        echo "gentrain ${frame:-no stack}"
    fi
}

# fuzz_forked TARGET: fork mode, going on after each stop; then the stops sorted
fuzz_forked() {
    local t=$1 stops=() f kind where hdf5=0 ours=0 clean=0
    rm -f "$FUZZ_DIR/crashes/$t-"*
    "$FUZZ_DIR/$t" "$FUZZ_DIR/corpus/$t" "$seeds/$t" -max_total_time="$FUZZ_SECONDS" \
        -fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1 \
        -max_len=65536 -rss_limit_mb=2048 -timeout=10 -close_fd_mask=2 \
        -artifact_prefix="$FUZZ_DIR/crashes/$t-" > "$FUZZ_DIR/$t.log" 2>&1
    local last execs cov
    last=$(grep -E '^#[0-9]+: cov: ' "$FUZZ_DIR/$t.log" | tail -n 1)
    execs=$(echo "$last" | sed -n 's/^#\([0-9]*\):.*/\1/p')
    cov=$(echo "$last" | sed -n 's/.*cov: \([0-9]*\) ft: \([0-9]*\) corp: \([0-9]*\).*/cov \1 ft \2 corpus \3/p')
    for f in "$FUZZ_DIR/crashes/$t-"*; do
        [ -e "$f" ] || continue
        kind=${f#"$FUZZ_DIR/crashes/$t-"}
        kind=${kind%%-*} # crash, leak, timeout, oom
        where=$(where_stopped "$f" "$t")
        case $where in
            hdf5*) hdf5=$((hdf5 + 1)); stops+=("$kind:${where#hdf5 }");;
            clean) clean=$((clean + 1));;
            *) ours=$((ours + 1))
               echo "fuzz: $t: $kind $f stopped in gentrain's code: ${where#gentrain }";;
        esac
    done
    local sorted=""
    [ $hdf5 -gt 0 ] && sorted=" ($(printf '%s\n' "${stops[@]}" | sort | uniq -c | sort -rn |
        awk '{print $2 " x" $1}' | paste -s -d, - | sed 's/,/, /g'))"
    echo "fuzz: $t: ${execs:-?} executions in ${FUZZ_SECONDS} s (fork mode), ${cov:-no coverage line}; stops inside HDF5: $hdf5$sorted; not reproduced: $clean; in gentrain: $ours"
    [ $ours -eq 0 ] || fail=1
}
for t in $FUZZ_TARGETS; do
    reg="$top_srcdir/tests/fuzz/regress/$t"
    if [ -d "$reg" ] && [ -n "$(ls -A "$reg")" ]; then
        if ! "$FUZZ_DIR/$t" -close_fd_mask=2 "$reg"/* > "$FUZZ_DIR/$t.regress.log" 2>&1; then
            echo "fuzz: $t: a regression input fails again:"; tail -n 30 "$FUZZ_DIR/$t.regress.log"
            fail=1
            continue
        fi
        echo "fuzz: $t: $(ls "$reg" | wc -l) regression inputs pass"
    fi
    mkdir -p "$FUZZ_DIR/corpus/$t"
    budget=(-max_total_time="$FUZZ_SECONDS")
    [ "$FUZZ_SMOKE" = 1 ] && is_hdf5_target "$t" && budget=(-runs=0)
    if is_hdf5_target "$t" && [ "${budget[0]}" != -runs=0 ]; then
        fuzz_forked "$t"
        continue
    fi
    "$FUZZ_DIR/$t" "$FUZZ_DIR/corpus/$t" "$seeds/$t" "${budget[@]}" \
        -max_len=65536 -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 -close_fd_mask=2 \
        -artifact_prefix="$FUZZ_DIR/crashes/$t-" > "$FUZZ_DIR/$t.log" 2>&1
    rc=$?
    done_line=$(grep -E '^#[0-9]+[[:space:]]+DONE' "$FUZZ_DIR/$t.log" | tail -n 1)
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$FUZZ_DIR/$t.log")
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$FUZZ_DIR/$t.log")
    cov=$(echo "$done_line" | sed -n 's/.*cov: \([0-9]*\).*ft: \([0-9]*\).*corp: \([0-9]*\).*/cov \1 ft \2 corpus \3/p')
    if [ $rc -ne 0 ]; then
        echo "fuzz: $t FAILED (exit $rc) after ${execs:-?} executions:"
        grep -E 'ERROR|SUMMARY|runtime error|Test unit written' "$FUZZ_DIR/$t.log" | head -n 10
        fail=1
    else
        if [ "${budget[0]}" = -runs=0 ]; then
            echo "fuzz: $t: its ${execs:-?} seed inputs run clean (smoke: no mutations), ${cov:-no coverage line}"
        else
            echo "fuzz: $t: ${execs:-?} executions in ${FUZZ_SECONDS} s (${rate:-?}/s), ${cov:-no coverage line}"
        fi
    fi
done
exit $fail
