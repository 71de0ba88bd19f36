#!/usr/bin/env bash
# scripts/plot-log: a short run's log drawn to a PNG; two runs overlaid (one with a
# loss-scale column, from the fake GPU, when the build has it) in one; the output
# names where it went; a run under global_batch_size = auto gets the global batch and
# noise scale panels, and with --x tokens its batches' steps line up with a fixed run's; a missing log, a malformed line and no log at all are one
# error line each (exit 1, 1, 2). Skipped (77) without matplotlib.
set -u
: "${GENTRAIN:?}" "${top_srcdir:?}"
. "$top_srcdir/tests/lib.sh"
PLOT=$top_srcdir/scripts/plot-log
if ! python3 -c 'import matplotlib' > /dev/null 2>&1 &&
   ! /usr/bin/python3 -c 'import matplotlib' > /dev/null 2>&1; then
    echo "SKIP: matplotlib is not installed (apt-get install python3-matplotlib)"
    exit 77
fi
test_tmpdir plotlog
prepare_slice
tiny_gpt_args
run_ok a timeout 120 "$GENTRAIN" train "${TINY[@]}" --steps 12 --eval_every 4 --out "$tmp/a"
if [ -x "${GENTRAIN_FAKEGPU:-}" ]; then
    run_ok b timeout 120 "$GENTRAIN_FAKEGPU" train "${TINY[@]}" --steps 12 --eval_every 4 \
        --out "$tmp/b"
else
    run_ok b timeout 120 "$GENTRAIN" train "${TINY[@]}" --steps 12 --eval_every 4 --lr 2e-3 \
        --out "$tmp/b"
fi
is_png() { [ "$(head -c 8 "$1" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ]; }
run_ok one timeout 120 "$PLOT" "$tmp/a/log.jsonl"
check "one run: plot.png next to the log" is_png "$tmp/a/plot.png"
run_ok two timeout 120 "$PLOT" -o "$tmp/ab.png" --title "a and b" "$tmp/a/log.jsonl" \
    "$tmp/b/log.jsonl"
check "two runs: one PNG" is_png "$tmp/ab.png"
check "two runs: says where it drew them" grep -q "^plot-log: 2 runs drawn to $tmp/ab.png" \
    "$tmp/two.out"
run_ok auto timeout 120 "$GENTRAIN" train "${TINY[@]}" --steps 40 --eval_every 10 \
    --global_batch_size auto --noise_every 5 --batch_overhead 200 --out "$tmp/auto"
run_ok autoplot timeout 120 "$PLOT" --x tokens -o "$tmp/auto.png" "$tmp/a/log.jsonl" \
    "$tmp/auto/log.jsonl"
check "auto: one PNG" is_png "$tmp/auto.png"
check "auto: global batch and noise scale panels, tokens on x" grep -q \
    "^plot-log: 2 runs drawn to $tmp/auto.png (panels: loss, lr, tokens/s, global batch (seq), noise scale (tokens).*; x: tokens)" \
    "$tmp/autoplot.out"
bad() {
    local name=$1 code=$2 want=$3 rc
    shift 3
    "$PLOT" "$@" > "$tmp/$name.out" 2> "$tmp/$name.err"
    rc=$?
    check "$name: exit $code (rc $rc), one error line: $want" test $rc -eq "$code" -a \
        "$(wc -l < "$tmp/$name.err")" -eq 1 -a -n "$(grep -e "$want" "$tmp/$name.err")"
}
bad missing 1 "cannot read $tmp/nope.jsonl" "$tmp/nope.jsonl"
{ head -n 3 "$tmp/a/log.jsonl"; echo '{"step": 4, "loss":'; } > "$tmp/broken.jsonl"
bad malformed 1 "broken.jsonl:4: not a JSON object" "$tmp/broken.jsonl"
bad nolog 2 "no log given"
bad badx 2 "--x steps: step or tokens" --x steps "$tmp/a/log.jsonl"
echo "$fails failed"
[ $fails -eq 0 ]
