# lib.sh — what the shell tests share. Source it after checking the environment:
#   . "$top_srcdir/tests/lib.sh"; test_tmpdir NAME
# Each check prints one line (ok/FAIL), so a failing log says which one.

# Makes $tmp (removed when the script exits) under TEST_TMPDIR (the build's test
# folder, so `make distcheck` finds nothing left in the source tree).
test_tmpdir() {
    tmp=$(mktemp -d "${TEST_TMPDIR:-${TMPDIR:-/tmp}}/$1.XXXXXX") || exit 99
    trap 'rm -rf "$tmp"' EXIT
}

fails=0
ok()   { echo "ok   $*"; }
fail() { echo "FAIL $*"; fails=$((fails + 1)); }
# check DESCRIPTION COMMAND...: ok when the command succeeds.
check() { local what=$1; shift; if "$@"; then ok "$what"; else fail "$what"; fi; }
# The last lines of a file, indented, for a failure's context.
show() { sed -e 's/^/    | /' "$1" | tail -n 15; }

# run_ok NAME CMD...: runs CMD, stdout to $tmp/NAME.out and stderr to $tmp/NAME.err,
# and checks that it exits 0 (showing the end of its errors when not).
run_ok() {
    local name=$1 rc
    shift
    "$@" > "$tmp/$name.out" 2> "$tmp/$name.err"
    rc=$?
    check "$name: exits 0 (rc $rc)" test $rc -eq 0
    [ $rc -eq 0 ] || show "$tmp/$name.err"
}

# prepare_slice: $tmp/d.h5 from the first 100 kB of the shipped corpus ($GENTRAIN
# prepare); a failure ends the test.
prepare_slice() {
    head -c 100000 "$top_srcdir/data/tinyshakespeare.txt" > "$tmp/slice.txt"
    if ! timeout 120 "$GENTRAIN" prepare "$tmp/slice.txt" -o "$tmp/d.h5" \
        > "$tmp/prep.txt" 2>&1; then
        fail "setup: prepare"
        show "$tmp/prep.txt"
        exit 1
    fi
}

# compare_logs A B [TOL [STEPS]]: the JSON Lines logs A and B have the same STEPS (20)
# steps, and each step's loss and val_loss agree within TOL (1e-5) relative.
compare_logs() {
    awk -v tol="${3:-1e-5}" -v steps="${4:-20}" '
        function val(line, key,   s) {
            if (!match(line, "\"" key "\":[-+0-9.eEnaif]+")) return ""
            s = substr(line, RSTART, RLENGTH)
            sub(/^[^:]*:/, "", s)
            return s
        }
        function rel(a, b,   d, m) {
            d = a - b; if (d < 0) d = -d
            m = (a < 0 ? -a : a); if ((b < 0 ? -b : b) > m) m = (b < 0 ? -b : b)
            return m > 0 ? d / m : d
        }
        FNR == NR { loss[val($0, "step")] = val($0, "loss"); vl[val($0, "step")] = val($0, "val_loss"); n1++; next }
        {
            s = val($0, "step"); n2++
            if (!(s in loss)) { print "step " s " missing in the reference"; bad = 1; next }
            r = rel(loss[s] + 0, val($0, "loss") + 0); if (r > worst) worst = r
            if ((vl[s] == "") != (val($0, "val_loss") == "")) { print "val_loss on step " s " in one log only"; bad = 1 }
            else if (vl[s] != "") { r = rel(vl[s] + 0, val($0, "val_loss") + 0); if (r > worst) worst = r }
        }
        END {
            printf "    %d and %d steps, largest relative loss difference %.3g\n", n1, n2, worst
            exit !(bad == 0 && n1 == steps && n1 == n2 && worst <= tol)
        }' "$1" "$2"
}

# The GPU-path tests' tiny model on prepare_slice's data (sets the arrays TINY and
# CONST). CONST is a constant learning rate (lr = min_lr, no warmup): a step's update
# does not depend on `steps`, so runs of different lengths compare step for step.
tiny_gpt_args() {
    TINY=(--data "$tmp/d.h5" --n_layer 2 --n_head 2 --n_embd 32 --block_size 16
          --batch_size 4 --eval_batches 2 --threads 1 --seed 5)
    CONST=(--warmup_steps 0 --lr 1e-3 --min_lr 1e-3 --eval_every 0)
}

# check_final_val WHAT OUT REF: the final val_loss of run output OUT is within 2% of
# REF's (the `done:` lines).
check_final_val() {
    local what=$1 a b
    a=$(sed -n 's/^done: .*final val_loss \([0-9.]*\).*/\1/p' "$2")
    b=$(sed -n 's/^done: .*final val_loss \([0-9.]*\).*/\1/p' "$3")
    check "$what: final val_loss ${a:-none} within 2% of ${b:-none}" awk -v a="${a:-0}" \
        -v b="${b:-1}" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a > 0 && d <= 0.02 * b) }'
}

# check_resumed STRAIGHT RESUMED: the run folder RESUMED (resumed from STRAIGHT's
# step-3 checkpoint of 5 steps) logs STRAIGHT's losses for steps 4 and 5 and ends with
# its parameters, bit for bit.
check_resumed() {
    local rc
    check "resume: steps 4 and 5 log the same losses as the straight run" \
        test "$(sed -n 's/^{"step":\([45]\),"loss":\([^,]*\),.*/\1 \2/p' "$1/log.jsonl")" = \
        "$(sed -n 's/^{"step":\([45]\),"loss":\([^,]*\),.*/\1 \2/p' "$2/log.jsonl")"
    "$CMPMODEL" "$1/model.h5" "$2/model.h5" 0 > "$2.cmp" 2>&1
    rc=$?
    check "resume: final parameters identical to the straight run's" test $rc -eq 0
    [ $rc -eq 0 ] || sed -e 's/^/    /' "$2.cmp"
}
