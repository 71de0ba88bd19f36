#!/usr/bin/env bash
# gentrain plan --from-log (src/plan/plan_log.c): the noise scale a run logged, as the
# planner's B_noise:
#  - a hand-written log with estimates 100 (at 1,000 tokens) and 400 (at 3,000): the
#    token-weighted mean (100 x 1000 + 400 x 2000) / 3000 = 300 tokens is said, and the
#    table is the one --noise-scale 300 gives; a 4x growth points to auto;
#  - a log written by a run (one rank, 2 micro-steps) plans too;
#  - errors, one line each: a missing file (exit 1), a log without noise_scale (1), a
#    malformed line named by its number (1), --from-log with --noise-scale (2), a noise
#    scale or a position past any run (1); a FIFO or a device as the log:
#    tests/test_hardening.sh.
set -u
: "${GENTRAIN:?GENTRAIN must point at the gentrain binary}"
: "${top_srcdir:?top_srcdir must point at the source tree}"
. "$top_srcdir/tests/lib.sh"
test_tmpdir plan_log

PLAN=(timeout 60 "$GENTRAIN" plan --core-gflops 20 --nodes 2 --cores-per-node 4
      --vocab_size 256 --n_layer 2 --n_head 2 --n_embd 64 --block_size 32 --batch_size 4)
cat > "$tmp/log.jsonl" << 'LOG'
{"step":10,"loss":3.1,"lr":1e-3,"global_batch_size":8,"tokens":1000,"noise_scale":100.0}
{"step":20,"loss":3.0,"lr":1e-3,"global_batch_size":8,"tokens":2000}

{"step":30,"loss":2.9,"lr":1e-3,"global_batch_size":8,"tokens":3000,"noise_scale":400.0}
LOG
run_ok fromlog "${PLAN[@]}" --from-log "$tmp/log.jsonl"
check "from-log: says the estimates and their token-weighted mean, 300 tokens" grep -q \
    "^plan: from $tmp/log.jsonl: 2 noise scale estimates over 3000 tokens, from 100 to 400 tokens (least 100, most 400); the planner takes their mean over the run, 300 tokens" \
    "$tmp/fromlog.out"
check "from-log: a 4x growth points to global_batch_size = auto" \
    grep -q "^plan: the noise scale grew 4.0x over the run: .*global_batch_size = auto" \
    "$tmp/fromlog.out"
run_ok given "${PLAN[@]}" --noise-scale 300
check "from-log: the table of --noise-scale 300" \
    test "$(grep -v '^plan:' "$tmp/fromlog.out")" = "$(grep -v '^plan:' "$tmp/given.out")"
check "from-log: the table depends on the noise scale (steps differ across batches)" \
    test "$(awk '$1 ~ /^[0-9]+$/ { print $16 }' "$tmp/given.out" | sort -u | wc -l)" -gt 1

# a log a run wrote (one rank, 2 micro-steps: the micro-batch estimate)
head -c 100000 "$top_srcdir/data/tinyshakespeare.txt" > "$tmp/slice.txt"
timeout 60 "$GENTRAIN" prepare "$tmp/slice.txt" -o "$tmp/d.h5" > /dev/null 2>&1
run_ok run timeout 120 "$GENTRAIN" train --data "$tmp/d.h5" --n_layer 2 --n_head 2 \
    --n_embd 64 --block_size 32 --batch_size 4 --global_batch_size 8 --steps 30 \
    --warmup_steps 3 --eval_every 0 --noise_every 5 --threads 1 --out "$tmp/run"
run_ok runplan "${PLAN[@]}" --from-log "$tmp/run/log.jsonl"
check "from-log of a run: 6 estimates over its 7680 tokens" grep -q \
    "^plan: from $tmp/run/log.jsonl: 6 noise scale estimates over 7680 tokens" "$tmp/runplan.out"

refused() { # NAME CODE PATTERN ARGS...
    local name=$1 code=$2 pattern=$3 rc
    shift 3
    "${PLAN[@]}" "$@" > "$tmp/$name.out" 2>&1
    rc=$?
    check "$name: exit $code (rc $rc), one error line: $pattern" test $rc -eq "$code" -a \
        "$(grep -c 'gentrain: error:' "$tmp/$name.out")" -eq 1 -a \
        "$(grep -c "gentrain: error: .*$pattern" "$tmp/$name.out")" -eq 1
}
refused missing 1 "cannot open plan: --from-log: the log $tmp/nope.jsonl: No such file" --from-log "$tmp/nope.jsonl"
grep -v noise_scale "$tmp/log.jsonl" > "$tmp/none.jsonl"
echo '{"step":40,"loss":2.8}' >> "$tmp/none.jsonl"
refused nonoise 1 "has no noise_scale in its 2 records" --from-log "$tmp/none.jsonl"
{ head -n 1 "$tmp/log.jsonl"; echo '{"step": 20, "loss":'; } > "$tmp/broken.jsonl"
refused malformed 1 "broken.jsonl:2: not JSON" --from-log "$tmp/broken.jsonl"
refused both 2 "--from-log and --noise-scale both" --from-log "$tmp/log.jsonl" \
    --noise-scale 50
# figures past any run (found by tests/fuzz/fuzz_runlog.c): a noise scale past the
# 1e18 tokens --noise-scale takes, a position past 1e19 tokens; they made the mean
# inf (1e300 x 1e300) and the planner took it
echo '{"step":1,"tokens":1000,"noise_scale":1e300}' > "$tmp/hugenoise.jsonl"
refused hugenoise 1 "hugenoise.jsonl:1: noise_scale is not a positive number up to 1e+18 tokens" \
    --from-log "$tmp/hugenoise.jsonl"
echo '{"step":1,"tokens":1e300,"noise_scale":100}' > "$tmp/hugetokens.jsonl"
refused hugetokens 1 "hugetokens.jsonl:1: tokens is not a number at or past the last record's, up to 1e+19" \
    --from-log "$tmp/hugetokens.jsonl"
[ "$fails" -eq 0 ] || { echo "$fails check(s) failed"; exit 1; }
echo "all checks passed"
