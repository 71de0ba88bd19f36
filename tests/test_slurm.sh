#!/usr/bin/env bash
# scripts/slurm/train.sbatch under a real Slurm: a one-node cluster (munged, slurmctld,
# slurmd, all root, every file in this test's temp folder, TCP ports chosen here) runs
# the script with 2 tasks; once its first checkpoint exists the batch shell gets
# SIGUSR1 (`scancel --batch --signal=USR1`, what `--signal=B:USR1@N` does before the
# time limit); the script forwards it to the ranks, which checkpoint and exit 75, and
# requeues the job. While it waits, the job is changed to 1 task (`scontrol update
# NumTasks=1 TasksPerNode=1`: a requeue onto a smaller allocation); the requeued job
# resumes from the checkpoint on 1 rank, keeping the global batch of 16 in 2
# micro-steps of 8 (it says so), and finishes. Its final parameters must be exactly
# (largest difference 0) those of a 1-process resume from the same checkpoint, and its
# losses of the 5 steps after the resume within 1e-4 relative of the same run done
# straight on 2 ranks under mpirun (other sums, rounded differently: about 1e-7 at lr
# 1e-3; at 3e-3 a loss spike at step 16 took them to 3.5e-4 within 5 steps, so the
# check failed when the signal landed just before it; over the ~230 steps to the end
# they grow to percents, as any change of summation order does, so the final
# parameters are not compared with it; samples read out of order would
# differ by 1e-2 and more at once).
# Skips (exit 77) when Slurm or munge is not installed, there is no mpirun, or the
# cluster does not come up within 30 s. The daemons are stopped by their pid files
# when the script exits, whatever happened. Every wait is bounded.
#
# Environment: GENTRAIN, CMPMODEL (tests/cmpmodel), top_srcdir, MPIEXEC; Open MPI's
# run-as-root variables when run as root.
set -u
: "${GENTRAIN:?GENTRAIN must point at the gentrain binary}"
: "${CMPMODEL:?CMPMODEL must point at the tests/cmpmodel tool}"
: "${top_srcdir:?top_srcdir must point at the source tree}"

skip() { echo "skip: $*"; exit 77; }
for p in munged slurmctld slurmd sbatch scontrol scancel sinfo squeue srun; do
    command -v "$p" > /dev/null 2>&1 || PATH=$PATH:/usr/sbin:/sbin
    command -v "$p" > /dev/null 2>&1 || skip "$p is not installed (apt-get install slurm-wlm munge)"
done
[ -n "${MPIEXEC:-}" ] || skip "no mpirun for the reference run"
[ "$(id -u)" = 0 ] || skip "the one-node cluster of this test runs as root"

. "$top_srcdir/tests/lib.sh"
test_tmpdir slurm

# Stops every daemon this test started (by its pid file), then removes the folder.
stop_daemons() {
    local f pid i
    if [ -n "${SLURM_CONF:-}" ] && [ -f "$SLURM_CONF" ]; then
        timeout 10 scancel --full --quiet -u root > /dev/null 2>&1
        for ((i = 0; i < 100; i++)); do  # until the job steps are gone
            [ -z "$(timeout 5 squeue -h -o %i 2> /dev/null)" ] && break
            sleep 0.1
        done
    fi
    for f in "$tmp/run/slurmd.pid" "$tmp/run/slurmctld.pid" "$tmp/munge/munged.pid"; do
        [ -s "$f" ] || continue
        pid=$(cat "$f")
        kill -TERM "$pid" 2> /dev/null || continue
        for ((i = 0; i < 100; i++)); do
            kill -0 "$pid" 2> /dev/null || break
            sleep 0.05
        done
        kill -KILL "$pid" 2> /dev/null
    done
    test_cleanup
}
trap stop_daemons EXIT

# A TCP port nobody listens on (nor has an open connection on), from /proc.
used_ports() {
    local h
    for h in $(awk 'FNR > 1 { n = split($2, a, ":"); print a[n] }' \
                   /proc/net/tcp /proc/net/tcp6 2> /dev/null); do
        echo $((16#$h))
    done
}
pick_ports() { # prints two free ports, P and P+1
    local used p i
    used=" $(used_ports | sort -u | tr '\n' ' ') "
    for ((i = 0; i < 200; i++)); do
        p=$((20000 + (RANDOM * 32768 + RANDOM) % 40000))
        case "$used" in *" $p "* | *" $((p + 1)) "*) continue ;; esac
        echo "$p $((p + 1))"
        return 0
    done
    return 1
}

# ------------------------------------------------------------- munge
mkdir -p "$tmp/munge" "$tmp/munge-sock" "$tmp/run" "$tmp/state" "$tmp/spool" "$tmp/log" \
    "$tmp/pmix" "$tmp/work"
chmod 755 "$tmp"  # munged wants every folder above its socket searchable
chmod 700 "$tmp/munge"
chmod 755 "$tmp/munge-sock"
SOCK=$tmp/munge-sock/munge.socket
dd if=/dev/urandom of="$tmp/munge/munge.key" bs=1024 count=1 2> /dev/null
chmod 600 "$tmp/munge/munge.key"
if ! timeout 20 munged --socket="$SOCK" --key-file="$tmp/munge/munge.key" \
        --pid-file="$tmp/munge/munged.pid" --log-file="$tmp/munge/munged.log" \
        --seed-file="$tmp/munge/munged.seed" > "$tmp/munge/start.out" 2>&1; then
    show "$tmp/munge/start.out"
    show "$tmp/munge/munged.log"
    skip "munged does not start"
fi

# ------------------------------------------------------------- slurm.conf
read -r CTLD_PORT SLURMD_PORT <<< "$(pick_ports)" || skip "no free TCP port found"
hw=$(timeout 20 slurmd -C 2> /dev/null | head -n 1)
CPUS=$(sed -n 's/.* CPUs=\([0-9]*\).*/\1/p' <<< "$hw")
MEM=$(sed -n 's/.* RealMemory=\([0-9]*\).*/\1/p' <<< "$hw")
[ -n "$CPUS" ] && [ -n "$MEM" ] || skip "slurmd -C says nothing usable: $hw"
[ "$CPUS" -ge 2 ] || skip "the node has $CPUS CPU; the job needs 2"

export SLURM_CONF=$tmp/slurm.conf
cat > "$SLURM_CONF" << EOF
ClusterName=gentraintest
SlurmctldHost=localhost
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$SOCK
StateSaveLocation=$tmp/state
SlurmdSpoolDir=$tmp/spool
SlurmctldPidFile=$tmp/run/slurmctld.pid
SlurmdPidFile=$tmp/run/slurmd.pid
SlurmctldLogFile=$tmp/log/slurmctld.log
SlurmdLogFile=$tmp/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
MpiDefault=pmix
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$tmp/log/jobcomp.txt
MailProg=/bin/true
ReturnToService=2
SchedulerType=sched/backfill
NodeName=localhost CPUs=$CPUS RealMemory=$MEM State=UNKNOWN
PartitionName=test Nodes=localhost Default=YES MaxTime=INFINITE State=UP
EOF
echo "PMIxCliTmpDirBase=$tmp/pmix" > "$tmp/mpi.conf"

# ------------------------------------------------------------- daemons
timeout 20 slurmctld -c -f "$SLURM_CONF" > "$tmp/log/slurmctld.start" 2>&1 ||
    { show "$tmp/log/slurmctld.start"; show "$tmp/log/slurmctld.log"; skip "slurmctld does not start"; }
timeout 20 slurmd -N localhost -f "$SLURM_CONF" > "$tmp/log/slurmd.start" 2>&1 ||
    { show "$tmp/log/slurmd.start"; show "$tmp/log/slurmd.log"; skip "slurmd does not start"; }
up=0
for ((i = 0; i < 300; i++)); do
    state=$(timeout 5 sinfo -h -n localhost -o %T 2> /dev/null)
    case "$state" in idle*) up=1; break ;; esac
    sleep 0.1
done
if [ $up = 0 ]; then
    echo "node state: ${state:-none}"
    tail -n 40 "$tmp/log/slurmctld.log" | sed "s/^/    | /"
    show "$tmp/log/slurmd.log"
    skip "the one-node cluster did not come up within 30 s"
fi
ok "one-node cluster up (ports $CTLD_PORT/$SLURMD_PORT, $CPUS CPUs)"

# ------------------------------------------------------------- data, reference
head -c 100000 "$top_srcdir/data/tinyshakespeare.txt" > "$tmp/slice.txt"
if ! timeout 60 "$GENTRAIN" prepare "$tmp/slice.txt" -o "$tmp/d.h5" > "$tmp/prep.txt" 2>&1; then
    fail "setup: prepare"
    show "$tmp/prep.txt"
    exit 1
fi
# 240 steps; the job's take 20 ms more each (below), so the signal, sent as soon as the
# step-10 checkpoint exists, arrives well before the end.
cat > "$tmp/run.cfg" << EOF
data = $tmp/d.h5
n_layer = 2
n_head = 2
n_embd = 96
block_size = 64
batch_size = 8
steps = 240
warmup_steps = 5
lr = 1e-3
val_dataset = none
seed = 7
EOF
timeout 300 "$MPIEXEC" --oversubscribe --bind-to none -np 2 "$GENTRAIN" train \
    --config "$tmp/run.cfg" --threads 1 --out "$tmp/ref" > "$tmp/ref.out" 2>&1
rc=$?
check "reference: straight 2-rank run exits 0 (rc $rc)" test $rc -eq 0
[ $rc -eq 0 ] || { show "$tmp/ref.out"; exit 1; }

# ------------------------------------------------------------- the job
OUT=$tmp/job
# 20 ms more a step (GENTRAIN_TEST_STEP_MS): the 230 steps after the step-10 checkpoint
# take 4.6 s or more however fast the build, so the signal arrives before the end.
export GENTRAIN GT_CKPT_EVERY=10 OMPI_MCA_rmaps_base_oversubscribe=1 GENTRAIN_TEST_STEP_MS=20
# The job's ranks talk over TCP (loopback): Open MPI 4.1's shared-memory transport
# (vader) crashed in mca_btl_vader_poll_handle_frag in about half of the srun-launched
# runs on a 2-core test machine (gentrain's code before and after the elastic resume
# alike; never under mpirun).
export OMPI_MCA_btl=self,tcp
job=$(timeout 20 sbatch --parsable --nodes=1 --ntasks=2 --ntasks-per-node=2 --cpus-per-task=1 \
    --time=10:00 --chdir="$tmp/work" --output="$tmp/work/job-%j.out" \
    "$top_srcdir/scripts/slurm/train.sbatch" "$tmp/run.cfg" --out "$OUT" 2> "$tmp/sbatch.err")
job=${job%%;*}
check "sbatch accepts the script (job ${job:-none})" test -n "$job"
[ -n "$job" ] || { show "$tmp/sbatch.err"; exit 1; }
joblog=$tmp/work/job-$job.out

# job_field FIELD: a field of `scontrol show job`, e.g. JobState, Restarts.
job_field() {
    timeout 5 scontrol -o show job "$job" 2> /dev/null |
        tr ' ' '\n' | sed -n "s/^$1=//p" | head -n 1
}

for ((i = 0; i < 1200; i++)); do
    [ -f "$OUT/checkpoints/ckpt_00000010.h5" ] && break
    case "$(job_field JobState)" in COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL) break ;; esac
    sleep 0.1
done
check "the job wrote its step-10 checkpoint" test -f "$OUT/checkpoints/ckpt_00000010.h5"
timeout 10 scancel --batch --signal=USR1 "$job"
rc=$?
check "scancel --batch --signal=USR1 (rc $rc)" test $rc -eq 0

# The script requeues the job; Slurm holds a requeued job back for about two minutes
# (BeginTime, so slurmd's record of the killed run's revoked credential, which has a
# one-second resolution, cannot reject the next launch) before it starts again. Once
# the node is idle and a few seconds passed, let it start now, as an administrator can.
requeued=0
for ((i = 0; i < 600; i++)); do
    if [ "$(job_field Restarts)" -ge 1 ] 2> /dev/null; then requeued=1; break; fi
    case "$(job_field JobState)" in COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL) break ;; esac
    sleep 0.1
done
check "the job requeued itself" test $requeued = 1
# The checkpoint it stopped with (later ones prune it), for the reference below; then
# 1 task instead of 2 for the requeued job.
stopck=$(ls "$OUT"/checkpoints/ckpt_*.h5 2> /dev/null | sort | tail -n 1)
mkdir -p "$tmp/stop"
[ -n "$stopck" ] && cp "$stopck" "$tmp/stop/"
timeout 5 scontrol update JobId="$job" NumTasks=1 TasksPerNode=1 > "$tmp/update.out" 2>&1
rc=$?
check "scontrol update: the requeued job asks for 1 task (rc $rc)" test $rc -eq 0
[ $rc -eq 0 ] || show "$tmp/update.out"
for ((i = 0; i < 300; i++)); do
    case "$(timeout 5 sinfo -h -n localhost -o %T 2> /dev/null)" in idle*) break ;; esac
    sleep 0.1
done
sleep 3
for ((i = 0; i < 20; i++)); do
    [ "$(job_field JobState)" = PENDING ] || break
    timeout 5 scontrol update JobId="$job" StartTime=now > /dev/null 2>&1
    sleep 0.5
done

state=
for ((i = 0; i < 1500; i++)); do
    state=$(job_field JobState)
    case "$state" in COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL | OUT_OF_MEMORY) break ;; esac
    sleep 0.1
done
check "the requeued job completes (state ${state:-?})" test "$state" = COMPLETED
if [ "$state" != COMPLETED ]; then
    show "$joblog"
    timeout 5 scontrol show job "$job" | sed 's/^/    | /'
    show "$tmp/log/slurmd.log"
    tail -n 40 "$tmp/log/slurmctld.log" | sed "s/^/    | /"
fi

check "  its first run stopped on SIGUSR1 with a checkpoint" \
    grep -q "stopped by signal at step [0-9]*; checkpoint .*; exit 75 (requeue)" "$joblog"
check "  and requeued itself" grep -q "gentrain job: stopped after a checkpoint; requeueing" "$joblog"
check "  the second run resumed from it" grep -q "resuming from .*ckpt_[0-9]*.h5 at step" "$joblog"
check "  the first start on 2 ranks" grep -q "^gentrain job [0-9]*: 2 ranks on 1 nodes, .* restart 0," "$joblog"
check "  restart 1 logged, on 1 rank" grep -q "^gentrain job [0-9]*: 1 ranks on 1 nodes, .* restart 1," "$joblog"
check "  each start recorded the build (gentrain --build-info: 2 MPI lines)" \
    test "$(grep -c '^gentrain job: MPI: ' "$joblog")" -eq 2
check "  keeping the global batch in 2 micro-steps" grep -q \
    "^resume: global batch of 16 sequences per step kept (the checkpoint's run had 2 ranks): batch_size 8 x 1 rank x 2 micro-steps$" \
    "$joblog"
# The same resume by hand: one process, from the checkpoint the job stopped with.
stopck=$(ls "$tmp/stop"/ckpt_*.h5 2> /dev/null | head -n 1)
check "the checkpoint the job stopped with was kept (${stopck##*/})" test -n "$stopck"
timeout 300 "$GENTRAIN" train --config "$tmp/run.cfg" --threads 1 --out "$tmp/re" \
    --resume "${stopck:-none}" > "$tmp/re.out" 2>&1
rc=$?
check "reference: a 1-process resume from it exits 0 (rc $rc)" test $rc -eq 0
[ $rc -eq 0 ] || show "$tmp/re.out"
check "final parameters identical to that 1-process resume" \
    "$CMPMODEL" "$tmp/re/model.h5" "$OUT/model.h5" 0
n=$(sed -n 's/^stopped by signal at step \([0-9]*\);.*/\1/p' "$joblog" | head -n 1)
# loss_at LOG STEP: the loss logged last for STEP.
loss_at() { sed -n "s/^{\"step\":$2,\"loss\":\([^,]*\),.*/\1/p" "$1" | tail -n 1; }
for ((s = ${n:-0} + 1; s <= ${n:-0} + 5; s++)); do
    echo "$s $(loss_at "$tmp/ref/log.jsonl" $s) $(loss_at "$OUT/log.jsonl" $s)"
done > "$tmp/pairs"
sed -e 's/^/    step, straight, requeued: /' "$tmp/pairs"
worst=$(cut -d' ' -f2- "$tmp/pairs" | awk '{ d = $1 - $2; if (d < 0) d = -d; r = $1 ? d / $1 : 1; if (NF < 2) r = 1
                      if (r > w) w = r } END { printf "%.3g", w + 0 }')
check "losses of steps $((${n:-0} + 1))..$((${n:-0} + 5)) within 1e-4 of the straight 2-rank run's (largest relative difference $worst)" \
    awk -v w="$worst" 'BEGIN { exit !(w <= 1e-4) }'
grep -E "^(gentrain job|stopped|resuming|checkpoint:|done:)" "$joblog" | sed 's/^/    /'

echo "$fails failed"
[ $fails -eq 0 ]
