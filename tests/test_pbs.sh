#!/usr/bin/env bash
# scripts/pbs/train.pbs inside a PBS job made of stand-ins: PBS_NODEFILE (one line,
# this host), PBS_JOBID, and on PATH a qstat that reports an hour of walltime, a qrerun
# that is refused (many sites allow it to managers only) and a qsub that records what
# it was given. The job runs gentrain under mpirun on one rank, with GT_ARGS naming
# its data as a comma-separated list of two files. Once its first checkpoint exists the
# job shell gets SIGUSR1 (what the walltime timer sends); the script forwards it, the
# rank checkpoints and exits 75, qrerun is refused, and the script submits itself again:
#  - qsub gets the settings by name (-v GT_CONFIG,GT_ARGS,...), so the next job sees
#    GT_ARGS whole, commas and all (with -v GT_ARGS=value a comma ended the value), and
#    GT_CKPT_EVERY, GT_MARGIN, GT_SCRIPT and GENTRAIN as this job had them;
#  - the next job, run with the environment qsub would give it, resumes the same run
#    folder from that checkpoint on the same two files;
#  - GT_ARGS is split into words as xargs splits them (quotes honoured, every line,
#    nothing expanded); a quote left open stops the job with exit 2.
# Every wait is bounded.
#
# Environment: GENTRAIN, top_srcdir, MPIEXEC (skipped without it: the script runs
# mpirun); Open MPI's run-as-root variables when run as root.
set -u
: "${GENTRAIN:?GENTRAIN must point at the gentrain binary}"
: "${top_srcdir:?top_srcdir must point at the source tree}"

. "$top_srcdir/tests/lib.sh"
require_mpiexec
command -v mpirun > /dev/null 2>&1 || { echo "skip: the job script runs mpirun, not on PATH"; exit 77; }
test_tmpdir pbs

# two data files, given as one comma-separated list
head -c 60000 "$top_srcdir/data/tinyshakespeare.txt" > "$tmp/a.txt"
tail -c 60000 "$top_srcdir/data/tinyshakespeare.txt" > "$tmp/b.txt"
for f in a b; do
    if ! timeout 120 "$GENTRAIN" prepare "$tmp/$f.txt" -o "$tmp/$f.h5" > "$tmp/prep.txt" 2>&1; then
        fail "setup: prepare $f"
        show "$tmp/prep.txt"
        exit 1
    fi
done
cat > "$tmp/job.cfg" <<EOF
n_layer = 1
n_head = 2
n_embd = 32
block_size = 32
batch_size = 4
steps = 100000
warmup_steps = 5
val_dataset = none
log = $tmp/run/log.jsonl
out = $tmp/run
EOF

# the stand-ins for PBS's commands
mkdir -p "$tmp/bin"
cat > "$tmp/bin/qstat" <<'EOF'
#!/bin/sh
echo "    Resource_List.walltime = 01:00:00"
EOF
cat > "$tmp/bin/qrerun" <<'EOF'
#!/bin/sh
echo "qrerun: Unauthorized Request" >&2
exit 1
EOF
# qsub: its arguments one a line, and for each name of its -v list NAME=<value> as
# its environment holds it (a NAME=VALUE item is recorded as given)
cat > "$tmp/bin/qsub" <<EOF
#!/bin/bash
printf '%s\n' "\$@" > "$tmp/qsub.args"
: > "$tmp/qsub.env"
while [ \$# -gt 0 ]; do
    if [ "\$1" = -v ]; then
        IFS=, read -r -a items <<< "\$2"
        for it in "\${items[@]}"; do
            case \$it in
                *=*) printf '%s\n' "\$it" ;;
                *) printf '%s=%s\n' "\$it" "\${!it-(unset)}" ;;
            esac >> "$tmp/qsub.env"
        done
        shift
    fi
    shift
done
echo 2.fake
EOF
chmod 755 "$tmp/bin/qstat" "$tmp/bin/qrerun" "$tmp/bin/qsub"
hostname > "$tmp/nodefile"

ARGS="--data $tmp/a.h5,$tmp/b.h5 --seed 3"
(
    cd "$tmp" &&
        exec env PATH="$tmp/bin:$PATH" PBS_NODEFILE="$tmp/nodefile" PBS_JOBID=1.fake \
            PBS_O_WORKDIR="$tmp" OMP_NUM_THREADS=1 GENTRAIN="$GENTRAIN" \
            GT_CONFIG="$tmp/job.cfg" GT_ARGS="$ARGS" GT_CKPT_EVERY=3 GT_MARGIN=60 \
            GT_SCRIPT="$top_srcdir/scripts/pbs/train.pbs" \
            bash "$top_srcdir/scripts/pbs/train.pbs"
) > "$tmp/job1.out" 2>&1 &
job=$!
for _ in $(seq 600); do # up to 60 s for the first checkpoint
    ls "$tmp/run/checkpoints/"ckpt_*.h5 > /dev/null 2>&1 && break
    kill -0 "$job" 2> /dev/null || break
    sleep 0.1
done
kill -USR1 "$job" 2> /dev/null
for _ in $(seq 600); do kill -0 "$job" 2> /dev/null || break; sleep 0.1; done
if kill -0 "$job" 2> /dev/null; then
    kill -9 "$job"
    fail "the job ended within 60 s of SIGUSR1"
fi
wait "$job"
rc=$?
check "first job: stopped on SIGUSR1 with a checkpoint, resubmitted itself (rc $rc)" \
    test $rc -eq 0
check "  gentrain said it stopped after a checkpoint" \
    grep -q "stopped by signal at step [0-9]*; checkpoint .*; exit 75" "$tmp/job1.out"
check "  the job recorded the build first (gentrain --build-info)" \
    grep -q '^gentrain job: HDF5: [0-9]' "$tmp/job1.out"
check "  qsub got the settings by name, after this job" grep -qx \
    "GT_CONFIG,GT_ARGS,GT_CKPT_EVERY,GT_MARGIN,GT_SCRIPT,GENTRAIN" "$tmp/qsub.args"
check "  and the dependency on this job" grep -qx "depend=afterany:1.fake" "$tmp/qsub.args"
check "  GT_ARGS reaches the next job whole, commas and all" \
    grep -qxF "GT_ARGS=$ARGS" "$tmp/qsub.env"
check "  so do GT_CKPT_EVERY, GT_MARGIN and GENTRAIN" test -n "$(grep -x GT_CKPT_EVERY=3 "$tmp/qsub.env")" \
    -a -n "$(grep -x GT_MARGIN=60 "$tmp/qsub.env")" -a -n "$(grep -xF "GENTRAIN=$GENTRAIN" "$tmp/qsub.env")"
sed -e 's/^/    | /' "$tmp/qsub.env"

# the next job, with what qsub would give it: resumes that checkpoint on the same data
# (its dry run prints the line it would run; one step more shows the resume)
mapfile -t next_env < "$tmp/qsub.env"
(
    cd "$tmp" &&
        exec env PATH="$tmp/bin:$PATH" PBS_NODEFILE="$tmp/nodefile" PBS_JOBID=2.fake \
            PBS_O_WORKDIR="$tmp" OMP_NUM_THREADS=1 "${next_env[@]}" \
            bash "$top_srcdir/scripts/pbs/train.pbs" --dry-run
) > "$tmp/dry2.out" 2>&1
# (its printf %q writes the comma as \,)
check "next job's dry run: the data list whole in its gentrain line" \
    grep -qF -- "--data $tmp/a.h5\\,$tmp/b.h5 --seed 3" "$tmp/dry2.out"
# GT_ARGS is split into words as xargs splits them, nothing expanded: a quoted value
# with a space is one word, a glob reaches gentrain as written, a second line counts;
# a quote left open stops the job (2) in one line
dry() { # GT_ARGS
    (cd "$tmp" && env PBS_NODEFILE="$tmp/nodefile" OMP_NUM_THREADS=1 GENTRAIN="$GENTRAIN" \
        GT_CONFIG="$tmp/job.cfg" GT_ARGS="$1" bash "$top_srcdir/scripts/pbs/train.pbs" --dry-run)
}
dry $'--data "my data/x.h5",\'b c.h5\'\n--seed 3 s_*.h5' > "$tmp/dry3.out" 2>&1
words='--data my\ data/x.h5\,b\ c.h5 --seed 3 s_\*.h5' # (as printf %q writes them)
check "GT_ARGS with quotes, a glob and two lines: the words as a shell makes them" \
    grep -qF -- "$words" "$tmp/dry3.out"
grep -qF -- "$words" "$tmp/dry3.out" || show "$tmp/dry3.out"
dry '--data "x.h5' > "$tmp/dry4.out" 2>&1
rc=$?
check "GT_ARGS with a quote left open: refused (rc $rc), in one line" \
    test $rc -eq 2 -a "$(grep -c "GT_ARGS=.*a quote is not closed" "$tmp/dry4.out")" -eq 1
ck=$(ls "$tmp/run/checkpoints/"ckpt_*.h5 2> /dev/null | tail -n 1)
step=${ck##*ckpt_}
step=$((10#${step%.h5}))
timeout 120 "$GENTRAIN" train --config "$tmp/job.cfg" --threads 1 --resume auto \
    --ckpt_every 3 $ARGS --steps $((step + 1)) > "$tmp/next.out" 2>&1
rc=$?
check "next job's command: resumes from step $step and ends (rc $rc)" \
    test $rc -eq 0 -a -n "$(grep "resuming from .*ckpt_0*$step.h5 at step $step" "$tmp/next.out")"
[ $rc -eq 0 ] || show "$tmp/next.out"

echo "$fails failed"
[ "$fails" -eq 0 ]
