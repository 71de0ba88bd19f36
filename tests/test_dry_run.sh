#!/usr/bin/env bash
# `gentrain train --dry-run`: the run set up as it would start, what it would train
# said, and no step:
#  - a fresh run: exit 0, the three "dry run:" lines (steps 1 to N from scratch), no
#    step line, and no model file, checkpoint or log line written;
#  - after a real run with checkpoints: a dry resume (--resume auto, more steps) names
#    the checkpoint and the steps it would train; every file of the run folder (log,
#    checkpoints, model) keeps its bytes;
#  - the errors a run meets before its first step are the dry run's, word for word and
#    with the same exit status: a folder holding an earlier model.h5, earlier
#    checkpoints under a fresh run, a model file given as the data;
#  - overwrite = yes over an earlier run's folder: the dry run empties no log and keeps
#    the model, which the real run would replace;
#  - two ranks under mpirun: exit 0, the report once (rank 0);
#  - --dry-run=VALUE: a usage error (exit 2), one line.
set -u
: "${GENTRAIN:?GENTRAIN must point at the gentrain binary}"
: "${top_srcdir:?top_srcdir must point at the source tree}"
. "$top_srcdir/tests/lib.sh"
test_tmpdir dry_run

prepare_slice
tiny_gpt_args
ARGS=("${TINY[@]}" "${CONST[@]}" --val_dataset none)

# dry NAME ARGS...: a dry run, stdout and stderr to $tmp/NAME.out/.err, status in $rc
dry() {
    local name=$1
    shift
    timeout 120 "$GENTRAIN" train "${ARGS[@]}" "$@" --dry-run > "$tmp/$name.out" \
        2> "$tmp/$name.err"
    rc=$?
}
# real NAME ARGS...: the same run for real
real() {
    local name=$1
    shift
    timeout 120 "$GENTRAIN" train "${ARGS[@]}" "$@" > "$tmp/$name.out" 2> "$tmp/$name.err"
    rc=$?
}
sums() { (cd "$1" && find . -type f ! -name .gentrain.lock | sort | xargs md5sum); }

# ---------------------------------------------------------------- a fresh run
dry fresh --steps 4 --out "$tmp/fresh"
check "fresh: exit 0 (rc $rc)" test $rc -eq 0
[ $rc -eq 0 ] || show "$tmp/fresh.err"
check "fresh: three 'dry run:' lines" test "$(grep -c '^dry run: ' "$tmp/fresh.out")" -eq 3
check "fresh: it would train steps 1 to 4 from scratch" \
    grep -q '^dry run: it would train steps 1 to 4 from scratch, 4 sequences of 16 tokens a step$' \
    "$tmp/fresh.out"
check "fresh: no step line" test "$(grep -c '^step ' "$tmp/fresh.out")" -eq 0
check "fresh: no model.h5" test ! -e "$tmp/fresh/model.h5"
check "fresh: no checkpoint" test -z "$(ls "$tmp/fresh/checkpoints" 2> /dev/null)"
check "fresh: the log holds no line" test ! -s "$tmp/fresh/log.jsonl"

# ---------------------------------------------------------------- resume
real first --steps 4 --ckpt_every 2 --out "$tmp/run"
check "a real run of 4 steps with checkpoints: exit 0 (rc $rc)" test $rc -eq 0
sums "$tmp/run" > "$tmp/run.sums"
dry resume --steps 8 --ckpt_every 2 --resume auto --out "$tmp/run"
check "dry resume: exit 0 (rc $rc)" test $rc -eq 0
[ $rc -eq 0 ] || show "$tmp/resume.err"
check "dry resume: names the checkpoint of step 4" \
    grep -q '^resuming from .*ckpt_00000004.h5 at step 4$' "$tmp/resume.out"
check "dry resume: it would train steps 5 to 8" \
    grep -q '^dry run: it would train steps 5 to 8 on from its checkpoint' "$tmp/resume.out"
check "dry resume: no step line" test "$(grep -c '^step ' "$tmp/resume.out")" -eq 0
check "dry resume: every file of the run folder keeps its bytes" \
    cmp -s "$tmp/run.sums" <(sums "$tmp/run")

# ---------------------------------------------------------------- the run's own errors
# same_error NAME ARGS...: the dry run and the real run fail alike
same_error() {
    local name=$1 drc
    shift
    dry "$name-dry" "$@"
    drc=$rc
    real "$name-real" "$@"
    check "$name: the dry run fails as the run does (rc $drc and $rc)" \
        test $drc -ne 0 -a $drc -eq $rc
    check "$name: with the run's error line" \
        cmp -s <(grep '^gentrain: error: ' "$tmp/$name-dry.err") \
        <(grep '^gentrain: error: ' "$tmp/$name-real.err")
    check "$name: one error line" test "$(grep -c '^gentrain: error: ' "$tmp/$name-dry.err")" -eq 1
}
mkdir -p "$tmp/held"
cp "$tmp/run/model.h5" "$tmp/held/model.h5"
same_error earlier-model --steps 4 --out "$tmp/held"
same_error earlier-checkpoints --steps 4 --out "$tmp/run"
check "after them the run folder keeps its bytes" cmp -s "$tmp/run.sums" <(sums "$tmp/run")
# a model file where the data should be (the last --data wins)
same_error wrong-data --steps 4 --out "$tmp/wrong" --data "$tmp/run/model.h5"

# ---------------------------------------------------------------- overwrite = yes
real plain --steps 2 --out "$tmp/over"
check "a run without checkpoints: exit 0 (rc $rc)" test $rc -eq 0
check "  its log has lines" test -s "$tmp/over/log.jsonl"
sums "$tmp/over" > "$tmp/over.sums"
dry over --steps 2 --out "$tmp/over" --overwrite yes
check "dry run with overwrite = yes over it: exit 0 (rc $rc)" test $rc -eq 0
check "  the log and the model keep their bytes" cmp -s "$tmp/over.sums" <(sums "$tmp/over")

# ---------------------------------------------------------------- two ranks
if [ -n "${MPIEXEC:-}" ]; then
    timeout 120 "$MPIEXEC" --oversubscribe --bind-to none -np 2 "$GENTRAIN" train \
        "${ARGS[@]}" --steps 4 --out "$tmp/two" --dry-run > "$tmp/two.out" 2> "$tmp/two.err"
    rc=$?
    check "2 ranks: exit 0 (rc $rc)" test $rc -eq 0
    [ $rc -eq 0 ] || show "$tmp/two.err"
    check "2 ranks: the report once, for dp 2" \
        test "$(grep -c '^dry run: set up without a step: .*(2 ranks: dp 2 x tp 1 x pp 1)' \
                "$tmp/two.out")" -eq 1
    check "2 ranks: no checkpoint, no model" \
        test -z "$(ls "$tmp/two/checkpoints" 2> /dev/null)" -a ! -e "$tmp/two/model.h5"
else
    echo "note: no mpirun; the 2-rank dry run is not tried"
fi

# ---------------------------------------------------------------- usage
timeout 60 "$GENTRAIN" train "${ARGS[@]}" --out "$tmp/u" --dry-run=yes > "$tmp/u.out" 2> "$tmp/u.err"
rc=$?
check "--dry-run=yes: exit 2 (rc $rc)" test $rc -eq 2
check "--dry-run=yes: one error line" test "$(grep -c '^gentrain: error: ' "$tmp/u.err")" -eq 1
check "--dry-run=yes: no run folder made" test ! -e "$tmp/u"

[ "$fails" -eq 0 ]
