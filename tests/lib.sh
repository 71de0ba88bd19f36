# lib.sh — what the shell tests share. Source it after checking the environment:
#   . "$top_srcdir/tests/lib.sh"; test_tmpdir NAME
# Each check prints one line (ok/FAIL), so a failing log says which one.

# Makes $tmp (removed when the script exits) under TEST_TMPDIR (the build's test
# folder, so `make distcheck` finds nothing left in the source tree). Open MPI's own
# files of the test's runs go in folders of the test too, removed with it: a rank that
# a test kills on purpose cannot remove its shared-memory segment, and mpirun leaves
# such a job's session folder behind, so without them every `make check` left files in
# /dev/shm and TMPDIR. The segments go in $mpi_shm, in /dev/shm where they were (in
# memory); the session in $mpi_session, in TMPDIR where it was (its sockets' paths
# must stay short, which $tmp's need not be). Where a folder cannot be made, Open
# MPI's default place.
test_tmpdir() {
    tmp=$(mktemp -d "${TEST_TMPDIR:-${TMPDIR:-/tmp}}/$1.XXXXXX") || exit 99
    mpi_shm=$(mktemp -d "/dev/shm/gentrain-test.$1.XXXXXX" 2> /dev/null) || mpi_shm=""
    [ -z "$mpi_shm" ] || export OMPI_MCA_btl_vader_backing_directory=$mpi_shm
    mpi_session=$(mktemp -d "${TMPDIR:-/tmp}/gt-mpi.XXXXXX" 2> /dev/null) || mpi_session=""
    [ -z "$mpi_session" ] || export OMPI_MCA_orte_tmpdir_base=$mpi_session
    trap test_cleanup EXIT
}

# Removes what test_tmpdir made; a test that sets its own EXIT trap calls it last.
test_cleanup() {
    rm -rf "$tmp"
    [ -z "${mpi_shm:-}" ] || rm -rf "$mpi_shm"
    [ -z "${mpi_session:-}" ] || rm -rf "$mpi_session"
}

# Skips the test (exit 77) when configure found no mpirun: for tests that are all MPI.
require_mpiexec() {
    if [ -z "${MPIEXEC:-}" ]; then
        echo "skip: no mpirun (configure did not find one)"
        exit 77
    fi
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

# gpu_pipeline_grids GPUBIN: pipeline stages trained by (test) GPUs under mpirun,
# against the same grid on the CPU (tiny_gpt_args' model, 6 steps): pp 2 with 4
# micro-batches (the first stage holds 2 in flight, so it recomputes its blocks'
# forward before a backward), dp 2 x pp 2 and pp 2 accumulating 2 micro-steps, each
# reading the same global batch: losses and val_losses within 1e-3 relative (FP16
# against FP32), the final parameters within 2e-2 per tensor; a checkpoint of the pp 2
# GPU run resumed on one rank's GPU (pp 1, every layer on it) logs the straight run's
# losses within 1e-3 and ends within 2e-2 of its parameters. Needs MPIEXEC, GENTRAIN,
# CMPMODEL, TINY (tiny_gpt_args).
gpu_pipeline_grids() {
    local bin=$1 name rc
    local mpi=(timeout 300 "$MPIEXEC" --oversubscribe --bind-to none)
    local args=("${TINY[@]}" --steps 6 --warmup_steps 2 --lr 3e-3 --eval_every 3)
    run_ok ppcpu "${mpi[@]}" -np 2 "$GENTRAIN" train "${args[@]}" --pp 2 --micro_batches 4 \
        --offload none --out "$tmp/ppcpu"
    run_ok ppgpu "${mpi[@]}" -np 2 "$bin" train "${args[@]}" --pp 2 --micro_batches 4 \
        --ckpt_every 3 --out "$tmp/ppgpu"
    check "pp 2: one line says each stage, its ends included, trains on its rank's GPU" test \
        "$(grep -c "^offload: pp = 2: each stage on its rank's GPU .* final LayerNorm, head and loss included; " \
           "$tmp/ppgpu.out")" -eq 1
    run_ok dp2pp2gpu "${mpi[@]}" -np 4 "$bin" train "${args[@]}" --pp 2 --batch_size 2 \
        --micro_batches 2 --out "$tmp/dp2pp2gpu"
    run_ok ppaccgpu "${mpi[@]}" -np 2 "$bin" train "${args[@]}" --pp 2 --batch_size 2 \
        --global_batch_size 4 --micro_batches 2 --out "$tmp/ppaccgpu"
    for name in ppgpu dp2pp2gpu ppaccgpu; do
        check "$name: losses and val_losses within 1e-3 relative of the CPU's pp 2" \
            compare_logs "$tmp/ppcpu/log.jsonl" "$tmp/$name/log.jsonl" 1e-3 6
        "$CMPMODEL" "$tmp/ppcpu/model.h5" "$tmp/$name/model.h5" 2e-2 > "$tmp/$name.cmp" 2>&1
        rc=$?
        sed -e 's/^/    /' "$tmp/$name.cmp"
        check "$name: final parameters within 2e-2 of the CPU's" test $rc -eq 0
    done
    run_ok ppresumed timeout 300 "$bin" train "${args[@]}" --out "$tmp/ppresumed" \
        --resume "$tmp/ppgpu/checkpoints/ckpt_00000003.h5"
    check_resumed_close "pp 2 -> 1 on GPUs" "$tmp/ppgpu" "$tmp/ppresumed"
}

# check_resumed_close WHAT STRAIGHT RESUMED: the run folder RESUMED (resumed on another
# grid from STRAIGHT's step-3 checkpoint of 6 steps) logs STRAIGHT's losses of steps
# 4-6 within 1e-3 relative and ends within 2e-2 of its parameters.
check_resumed_close() {
    local what=$1 rc
    check "$what: steps 4-6 log the straight run's losses within 1e-3" awk \
        'NR == FNR { if (FNR > 3) a[FNR - 3] = $0; next }
         { split(a[FNR], x, /"loss":/); split($0, y, /"loss":/);
           u = x[2] + 0; v = y[2] + 0; d = u - v; if (d < 0) d = -d;
           if (u == 0 || d / u > 1e-3) bad = 1; n++ }
         END { exit (bad || n != 3) }' "$2/log.jsonl" "$3/log.jsonl"
    "$CMPMODEL" "$2/model.h5" "$3/model.h5" 2e-2 > "$3.cmp" 2>&1
    rc=$?
    sed -e 's/^/    /' "$3.cmp"
    check "$what: final parameters within 2e-2 of the straight run's" test $rc -eq 0
}

# gpu_tp_grids GPUBIN PATH: tensor-parallel shards trained by (test) GPUs under mpirun
# (src/engine/gpu_stage.c: each rank's shard of the blocks and of the vocabulary-parallel
# embedding and head on its GPU) against the same grid on the CPU (tiny_gpt_args'
# model, 6 steps): tp 2, dp 2 x tp 2 and tp 2 x pp 2 with 4 micro-batches (the first
# stage recomputes its blocks' forward before a backward), each reading the same global
# batch: losses and val_losses within 1e-3 relative (FP16 against FP32), the final
# parameters within 2e-2 per tensor, every replica's parts identical; the offload line
# says how the shards' blocks all-reduce (PATH, a pattern: over NCCL or through host
# memory); a checkpoint of the tp 2 GPU run resumed on one rank's GPU (tp 1, every layer
# on it) logs the straight run's losses within 1e-3 and ends within 2e-2 of its
# parameters. Needs MPIEXEC, GENTRAIN, CMPMODEL, TINY (tiny_gpt_args).
gpu_tp_grids() {
    local bin=$1 path=$2 name rc
    local mpi=(timeout 300 "$MPIEXEC" --oversubscribe --bind-to none)
    local args=("${TINY[@]}" --steps 6 --warmup_steps 2 --lr 3e-3 --eval_every 3)
    local tp2=(-np 2 --tp 2) dptp=(-np 4 --tp 2 --batch_size 2)
    local tppp=(-np 4 --tp 2 --pp 2 --micro_batches 4)
    # tp_grid_pair NAME -np N OPTIONS...: the grid on the CPU (NAMEcpu) and on the GPUs
    # (NAMEgpu).
    tp_grid_pair() {
        local name=$1 np=$3
        shift 3
        run_ok "${name}cpu" "${mpi[@]}" -np "$np" "$GENTRAIN" train "${args[@]}" "$@" \
            --offload none --out "$tmp/${name}cpu"
        run_ok "${name}gpu" "${mpi[@]}" -np "$np" "$bin" train "${args[@]}" "$@" \
            --ckpt_every 3 --out "$tmp/${name}gpu"
    }
    tp_grid_pair tp "${tp2[@]}"
    tp_grid_pair dptp "${dptp[@]}"
    tp_grid_pair tppp "${tppp[@]}"
    check "tp 2: one line says each rank's shard of the blocks trains on its GPU, \
their all-reduces $path" test "$(grep -Ec "^offload: tp = 2: each rank's shard of the 2 \
transformer blocks .* and of the embeddings, final LayerNorm, head and loss \(1/2 of the \
vocabulary\) on its GPU .* in FP16, their tp all-reduces $path; " "$tmp/tpgpu.out")" -eq 1
    check "tp 2 x pp 2: one line says each rank's shard of its stage's blocks is on its GPU" \
        test "$(grep -c "^offload: tp = 2 x pp = 2: each rank's shard of its stage's blocks" \
                "$tmp/tpppgpu.out")" -eq 1
    for name in tp dptp tppp; do
        check "$name on GPUs: losses and val_losses within 1e-3 relative of the CPU's" \
            compare_logs "$tmp/${name}cpu/log.jsonl" "$tmp/${name}gpu/log.jsonl" 1e-3 6
        "$CMPMODEL" "$tmp/${name}cpu/model.h5" "$tmp/${name}gpu/model.h5" 2e-2 \
            > "$tmp/$name.cmp" 2>&1
        rc=$?
        sed -e 's/^/    /' "$tmp/$name.cmp"
        check "$name on GPUs: final parameters within 2e-2 of the CPU's" test $rc -eq 0
    done
    check "dp 2 x tp 2 on GPUs: each part identical in both replicas" grep -q \
        '^check: each of the 2 parts (pp x tp) is identical in all 2 replicas' \
        "$tmp/dptpgpu.out"
    run_ok tpresumed timeout 300 "$bin" train "${args[@]}" --out "$tmp/tpresumed" \
        --resume "$tmp/tpgpu/checkpoints/ckpt_00000003.h5"
    check_resumed_close "tp 2 -> 1 on GPUs" "$tmp/tpgpu" "$tmp/tpresumed"
}

# stop_after STEPS LOG LIMIT PID: once LOG (a JSON Lines log) holds STEPS steps (or the
# process PID ended), sends SIGUSR1 to PID and waits for it; a watchdog kills it after
# LIMIT seconds (not `timeout`, which would die of the signal itself). Sets stop_rc
# to its exit status.
stop_after() {
    local steps=$1 log=$2 limit=$3 pid=$4 watchdog i
    # the watchdog's sleep ends with it (else it would outlive the test by up to LIMIT)
    (
        sleep "$limit" &
        trap 'kill $! 2> /dev/null; exit 0' TERM
        wait $! && kill -KILL "$pid"
    ) 2> /dev/null &
    watchdog=$!
    for ((i = 0; i < 6000; i++)); do
        [ "$(grep -c '"step"' "$log" 2> /dev/null)" -ge "$steps" ] 2> /dev/null && break
        kill -0 "$pid" 2> /dev/null || break
        sleep 0.01
    done
    kill -USR1 "$pid"
    wait "$pid"
    stop_rc=$?
    kill "$watchdog" 2> /dev/null
    wait "$watchdog" 2> /dev/null
}
# stopped_step OUT: the step of OUT's "stopped by signal at step N; ..." line, or empty.
stopped_step() {
    sed -n 's/^stopped by signal at step \([0-9]*\); checkpoint .*; exit 75 (requeue)$/\1/p' "$1"
}
