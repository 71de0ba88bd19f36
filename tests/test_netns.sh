#!/usr/bin/env bash
# Two hosts, for real, on one machine (scripts/netns-hosts.sh): two network namespaces
# joined by veth links through a bridge, each a host with its own hostname; mpirun runs
# on the first and starts the ranks through the namespace agent, over Open MPI's TCP
# transport alone (btl tcp,self: no shared memory between the ranks).
#  1. The hosts: `mpirun -np 2 hostname` names both hosts, one rank on each.
#  2. Data parallel across the hosts: 2 ranks x batch_size 4 against one plain process
#     with batch_size 8: losses and val_losses within 1e-4 relative, final parameters
#     within 1e-5 (tests/cmpmodel), identical on both ranks; and the gradients crossed
#     the link: the second host's eth0 carried at least what the log says a rank reduced.
#  3. Stop and resume across the hosts: SIGUSR1 to mpirun on the first host once 5
#     steps are logged: exit status 75 and a checkpoint at the step it stopped at; the
#     run resumed there (resume = auto, on the two hosts again) logs the same losses and
#     ends with the same parameters, bit for bit, as the same run done straight.
# Skips (77) when not root, without iproute2 or unshare, without mpirun, or where a
# namespace or a veth cannot be made. The namespaces (with their veths and bridge) are
# deleted when the test ends, whatever happened. Every run is under a time limit.
#
# Environment: GENTRAIN, CMPMODEL (tests/cmpmodel), MPIEXEC, top_srcdir; Open MPI's
# run-as-root variables when run as root (Makefile.am sets them).
set -u
: "${GENTRAIN:?GENTRAIN must point at the gentrain binary}"
: "${CMPMODEL:?CMPMODEL must point at the tests/cmpmodel tool}"
: "${top_srcdir:?top_srcdir must point at the source tree}"
skip() { echo "skip: $*"; exit 77; }
[ -n "${MPIEXEC:-}" ] || skip "no mpirun (configure did not find one)"

. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/scripts/netns-hosts.sh"
NH_HOSTS=2
nh_usable || skip "$NH_WHY"
test_tmpdir netns
trap 'nh_down; test_cleanup' EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM

if ! nh_up "$tmp/hosts"; then
    fail "setup: the two hosts"
    exit 1
fi
nh_describe | sed -e 's/^/    /'
H0=${NH_NAMES[0]} H1=${NH_NAMES[1]}
nh_on "$H0"  # mpirun on the first host: "${MPI[@]:2}" is the mpirun process itself
MPI=(timeout 120 "${NH_ON[@]}" "$MPIEXEC" "${NH_MPI_OPTS[@]}" --bind-to none)

# ------------------------------------------------------------- 1. the hosts
run_ok hostname "${MPI[@]}" -np 2 hostname
check "mpirun -np 2 hostname: one rank on each host" \
    test "$(sort "$tmp/hostname.out" | tr '\n' ' ')" = "$H0 $H1 "
[ -s "$tmp/hostname.out" ] && sed -e 's/^/    rank on /' "$tmp/hostname.out"

# ------------------------------------------------------------- 2. data parallel
prepare_slice
ARGS=(--data "$tmp/d.h5" --n_layer 2 --n_head 2 --n_embd 32 --block_size 32 --steps 20
      --warmup_steps 5 --lr 3e-3 --eval_every 10 --eval_batches 2 --threads 1 --seed 11)
run_ok np1 timeout 120 "$GENTRAIN" train "${ARGS[@]}" --batch_size 8 --out "$tmp/np1"
before=$(nh_bytes "$H1")
run_ok dp2 "${MPI[@]}" -np 2 "$GENTRAIN" train "${ARGS[@]}" --batch_size 4 --out "$tmp/dp2"
moved=$(($(nh_bytes "$H1") - before))
check "dp2: losses and val_losses match np=1 batch 8 within 1e-4" \
    compare_logs "$tmp/np1/log.jsonl" "$tmp/dp2/log.jsonl" 1e-4
"$CMPMODEL" "$tmp/np1/model.h5" "$tmp/dp2/model.h5" 1e-5 > "$tmp/dp2.cmp" 2>&1
rc=$?
sed -e 's/^/    /' "$tmp/dp2.cmp"
check "dp2: final parameters match np=1 batch 8 (tolerance 1e-5)" test $rc -eq 0
check "dp2: parameters identical on both ranks at the end" \
    grep -q "parameters are identical on all 2 ranks" "$tmp/dp2.out"
reduced=$(sed -n 's/.*"comm_bytes":\([0-9]*\).*/\1/p' "$tmp/dp2/log.jsonl" |
          awk '{ s += $1 } END { printf "%d", s }')
echo "    a rank reduced ${reduced:-?} bytes of gradients; $H1's eth0 carried $moved bytes"
check "dp2: the gradients crossed the link ($moved >= ${reduced:-?} bytes)" \
    test "${reduced:-0}" -gt 0 -a "$moved" -ge "${reduced:-0}"

# ------------------------------------------------------------- 3. stop and resume
# About 10-30 ms a step, so the stop lands well before step 40.
RARGS=(--data "$tmp/d.h5" --n_layer 2 --n_head 2 --n_embd 96 --block_size 64
       --batch_size 8 --steps 40 --warmup_steps 5 --lr 3e-3 --val_dataset none
       --threads 1 --seed 7 --ckpt_every 20)
run_ok straight "${MPI[@]}" -np 2 "$GENTRAIN" train "${RARGS[@]}" --out "$tmp/ref"

"${MPI[@]:2}" -np 2 "$GENTRAIN" train "${RARGS[@]}" --out "$tmp/u" > "$tmp/u.out" 2>&1 &
pid=$!
stop_after 5 "$tmp/u/log.jsonl" 120 "$pid"
rc=$stop_rc
check "SIGUSR1 to mpirun: exit status 75 (rc $rc)" test $rc -eq 75
[ $rc -eq 75 ] || show "$tmp/u.out"
n=$(stopped_step "$tmp/u.out")
check "SIGUSR1: says where it stopped (step ${n:-?} of 40)" test -n "$n"
n=${n:-0}
check "SIGUSR1: a checkpoint at that step" \
    test -f "$tmp/u/checkpoints/$(printf 'ckpt_%08d.h5' "$n")"
check "SIGUSR1: no model.h5 (not finished)" test ! -f "$tmp/u/model.h5"
run_ok resume "${MPI[@]}" -np 2 "$GENTRAIN" train "${RARGS[@]}" --out "$tmp/u" --resume auto
check "resume: starts at the step it stopped at" \
    grep -q "resuming from .*$(printf 'ckpt_%08d.h5' "$n") at step $n" "$tmp/resume.out"
check "resume: the same losses as the straight run after step $n" test \
    "$(sed -n 's/^{"step":\([0-9]*\),"loss":\([^,]*\),.*/\1 \2/p' "$tmp/ref/log.jsonl" |
       awk -v n="$n" '$1 > n')" = \
    "$(sed -n 's/^{"step":\([0-9]*\),"loss":\([^,]*\),.*/\1 \2/p' "$tmp/u/log.jsonl" |
       awk -v n="$n" '$1 > n { l[$1] = $2 } END { for (s = n + 1; s <= 40; s++) print s, l[s] }')"
"$CMPMODEL" "$tmp/ref/model.h5" "$tmp/u/model.h5" 0 > "$tmp/u.cmp" 2>&1
rc=$?
check "resume: final parameters identical to the straight run's" test $rc -eq 0
[ $rc -eq 0 ] || sed -e 's/^/    /' "$tmp/u.cmp"

[ $fails -eq 0 ] || exit 1
exit 0
