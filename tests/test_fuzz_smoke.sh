#!/usr/bin/env bash
# A short run of the fuzz targets (scripts/fuzz.sh, FUZZ_SMOKE=1): they build with clang
# and the sanitizers, fuzz_config, fuzz_tokenizer, fuzz_safetensors and fuzz_runlog fuzz for 12 s each, the HDF5 targets run their seed
# corpora and regression inputs (tests/fuzz/README.md says why not more). The targets'
# own folders under TMPDIR are gone afterwards. Skipped (77) where clang with libFuzzer
# is missing.
set -u
: "${FUZZ_SOURCES:?FUZZ_SOURCES must list the library sources (Makefile.am sets it)}"
: "${top_srcdir:?top_srcdir must point at the source tree}"
. "$top_srcdir/tests/lib.sh"
test_tmpdir fuzz
mkdir -p "$tmp/tmpdir" || exit 1
TMPDIR="$tmp/tmpdir" FUZZ_SMOKE=1 FUZZ_SECONDS=${FUZZ_SMOKE_SECONDS:-12} FUZZ_DIR="$tmp/fuzz" \
    timeout 900 bash "$top_srcdir/scripts/fuzz.sh" > "$tmp/fuzz.out" 2>&1
rc=$?
cat "$tmp/fuzz.out"
[ $rc -eq 77 ] && exit 77
check "fuzz smoke: every target builds and runs clean (rc $rc)" test $rc -eq 0
for t in fuzz_config fuzz_tokenizer fuzz_safetensors fuzz_runlog; do
    check "fuzz smoke: $t ran thousands of inputs" \
        grep -qE "^fuzz: $t: [0-9]{4,} executions" "$tmp/fuzz.out"
done
for t in fuzz_tokens fuzz_model fuzz_ckpt; do
    check "fuzz smoke: $t ran its seeds" grep -q "^fuzz: $t: its [0-9]* seed inputs run clean" "$tmp/fuzz.out"
done
left=$(find "$tmp/tmpdir" -maxdepth 1 -name 'fuzz_*' | wc -l)
check "fuzz smoke: no folder of a fuzz target left under TMPDIR ($left)" test "$left" -eq 0
[ "$fails" -eq 0 ]
