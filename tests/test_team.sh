#!/usr/bin/env bash
# The thread team (src/base/team.c), end to end:
#  - a team whose size changes between steps (GENTRAIN_TEAM_SCHEDULE) trains the very
#    same model as a fixed team: every loss and every parameter bit-identical, so a
#    team leaving a shared core never changes a result;
#  - the log's "threads" field and the step line follow the team's size;
#  - a malformed schedule (exit 2, at start), one past the team's size (exit 1) and a
#    bad thread_team value (exit 2, as every config error) are one clear error line;
#  - under a real load (a busy loop pinned to one of the run's 2 CPUs) the adaptive
#    team leaves the shared core and says so once; a fixed team never changes; with
#    OpenMP binding on and the loop on the first CPU, the thread left is let off it.
# Whether the team grows back once the core is free depends on what else the machine
# runs (another test beside this one keeps a core busy too), so it is measured by
# scripts/bench-load.sh, not asserted here.
set -u
: "${GENTRAIN:?GENTRAIN must point at the gentrain binary}"
: "${CMPMODEL:?CMPMODEL must point at tests/cmpmodel}"
: "${top_srcdir:?top_srcdir must point at the source tree}"
. "$top_srcdir/tests/lib.sh"
test_tmpdir team

prepare_slice
args=(train --data "$tmp/d.h5" --n_layer 2 --n_head 2 --n_embd 64 --block_size 32
      --batch_size 4 --steps 8 --eval_every 4 --eval_batches 2 --seed 5 --threads 2)

run_ok fixed "$GENTRAIN" "${args[@]}" --thread_team fixed \
    --out "$tmp/fixed" --log "$tmp/fixed.jsonl"
run_ok changing env GENTRAIN_TEAM_SCHEDULE=2,1,1,2,1 "$GENTRAIN" "${args[@]}" \
    --out "$tmp/changing" --log "$tmp/changing.jsonl"
check "a team of 2,1,1,2,1,... threads: every loss the fixed team's, bit for bit" \
    compare_logs "$tmp/fixed.jsonl" "$tmp/changing.jsonl" 0 8
check "a team of 2,1,1,2,1,... threads: every parameter the fixed team's, bit for bit" \
    "$CMPMODEL" "$tmp/fixed/model.h5" "$tmp/changing/model.h5" 0
threads=$(sed -n 's/.*"threads":\([0-9]*\).*/\1/p' "$tmp/changing.jsonl" | tr '\n' ,)
check "the log's threads follow the schedule (got $threads)" \
    test "$threads" = "2,1,1,2,1,2,1,1,"
check "the step line says when the team is smaller" \
    grep -q '^step *2/8 .*| threads 1 of 2' "$tmp/changing.out"
check "the step line says nothing while the team is whole" \
    bash -c "! grep -q '^step *1/8 .*threads' '$tmp/changing.out'"

# not thread counts: refused when the command starts (exit 2, as a usage error); a
# count past the team's 2 threads: when the team starts (exit 1)
for bad in 0:2 1,x:2 3:1; do
    code=${bad##*:} bad=${bad%:*}
    name="schedule_${bad//,/_}"
    GENTRAIN_TEAM_SCHEDULE=$bad "$GENTRAIN" "${args[@]}" --out "" \
        > "$tmp/$name.out" 2> "$tmp/$name.err"
    rc=$?
    check "GENTRAIN_TEAM_SCHEDULE=$bad: exit $code (rc $rc)" test $rc -eq "$code"
    want='want thread counts from 1 to 2'
    [ "$code" = 2 ] && want='want whole numbers, separated by commas, from 1 to 4096'
    check "GENTRAIN_TEAM_SCHEDULE=$bad: one line naming it" test \
        "$(grep -c "^gentrain: error: GENTRAIN_TEAM_SCHEDULE=$bad: $want" "$tmp/$name.err")" -eq 1 \
        -a "$(wc -l < "$tmp/$name.err")" -eq 1
done
"$GENTRAIN" "${args[@]}" --thread_team sometimes --out "" > "$tmp/badkey.out" 2> "$tmp/badkey.err"
rc=$?
check "thread_team sometimes: exit 2, as every config error (rc $rc)" test $rc -eq 2
check "thread_team sometimes: the error names the key and its values" \
    grep -q 'thread_team.*adaptive.*fixed' "$tmp/badkey.err"

# Real load: a busy loop on the second of two CPUs the run is pinned to.
cpus=$(python3 -c 'import os; print(",".join(map(str, sorted(os.sched_getaffinity(0))[:2])))' 2>/dev/null)
if command -v taskset >/dev/null 2>&1 && [ "$(echo "$cpus" | tr -cd , | wc -c)" = 1 ]; then
    busy_cpu=${cpus#*,}
    taskset -c "$busy_cpu" sh -c 'while :; do :; done' &
    busy=$!
    sleep 0.3
    long=(train --data "$tmp/d.h5" --n_layer 2 --n_head 2 --n_embd 64 --block_size 32
          --batch_size 4 --steps 40 --eval_every 0 --val_dataset none --threads 2)
    run_ok loaded_adaptive timeout 300 taskset -c "$cpus" "$GENTRAIN" "${long[@]}" \
        --out "" --log "$tmp/loaded_adaptive.jsonl"
    run_ok loaded_fixed timeout 300 taskset -c "$cpus" "$GENTRAIN" "${long[@]}" \
        --thread_team fixed --out "" --log "$tmp/loaded_fixed.jsonl"
    kill "$busy"
    wait "$busy" 2>/dev/null
    check "adaptive, a busy loop on CPU $busy_cpu: the team leaves it, said once" \
        grep -q 'note: threads: 1 of 2 from step [0-9]* (another process shares a core)' \
        "$tmp/loaded_adaptive.err"
    check "adaptive: the log records steps on 1 thread" \
        grep -q '"threads":1[,}]' "$tmp/loaded_adaptive.jsonl"
    check "fixed, the same busy loop: every step on 2 threads, no note" \
        bash -c "! grep -q '\"threads\":1[,}]' '$tmp/loaded_fixed.jsonl' &&
                 ! grep -q 'note: threads' '$tmp/loaded_fixed.err'"
    # OpenMP binding on (OMP_PROC_BIND=close: the first thread bound to the first CPU),
    # the busy loop on that first CPU: once the team is down to 1 thread, that thread may
    # run on both CPUs (bound, it stayed on the busy one: a step 2x slower than unbound)
    first_cpu=${cpus%,*}
    taskset -c "$first_cpu" sh -c 'while :; do :; done' &
    busy=$!
    sleep 0.3
    OMP_PROC_BIND=close taskset -c "$cpus" "$GENTRAIN" "${long[@]}" --steps 100000 \
        --out "" --log "$tmp/bound.jsonl" > "$tmp/bound.out" 2> "$tmp/bound.err" &
    run=$!
    allowed="" confined=""
    for _ in $(seq 600); do # up to 60 s for the team to shrink
        if grep -q '"threads":1[,}]' "$tmp/bound.jsonl" 2>/dev/null; then
            allowed=$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' "/proc/$run/status")
            # every thread of the run (the idle team members stay on their own places)
            confined=$(grep -lx "Cpus_allowed_list:[[:space:]]*$first_cpu" \
                "/proc/$run"/task/*/status 2>/dev/null | wc -l)
            break
        fi
        sleep 0.1
    done
    kill "$run" "$busy" 2>/dev/null
    wait "$run" "$busy" 2>/dev/null
    check "bound, a busy loop on CPU $first_cpu: the team of 1 may leave it (CPUs ${allowed:-none seen})" \
        test -n "$allowed" -a "$allowed" != "$first_cpu"
    check "bound: no thread of the run left on CPU $first_cpu alone (the loader's neither; ${confined:-?})" \
        test "$confined" = 0
else
    echo "    (fewer than 2 CPUs or no taskset: the part under load is skipped)"
fi
[ "$fails" -eq 0 ]
