#!/usr/bin/env bash
# Hostile and damaged inputs a user can hit, each with one clear error line, exit 1 or 2
# and no hang (every run under `timeout`), and no user file changed:
#  - a FIFO given as --data, --config, inspect's file, sample --model, --resume or a
#    prepare input: one "gentrain: error:" line naming it as a named pipe, exit 1 or 2,
#    and no hang (every run under `timeout`, so a blocked open fails the test);
#  - prepare -o onto a FIFO or a device node, and --log onto a FIFO nobody reads:
#    refused, the node is still what it was (--log /dev/stdout works);
#  - prepare a.txt -o a.txt, and -o a link to an input: refused, the input unchanged
#    (checksum) and the link still a link; an input that is the output's (or the saved
#    tokenizer's) temporary file, prepare x.h5.tmp -o x.h5: refused, the input intact;
#    -o naming the --tokenizer read or the --save-tokenizer file: refused, the
#    tokenizer intact;
#  - an HDF5 file (a prepared data set) given to prepare as text: refused; so is one
#    input given twice (by a link the second time);
#  - --log naming the data file or the config (any file that is not a JSON Lines log):
#    refused, the file intact (it was truncated);
#  - a model saved where a FIFO stands (out/model.h5): the save fails clearly, the FIFO
#    stays;
#  - resume = auto with only damaged checkpoints: refused, the files unchanged; a fresh
#    run (resume = none) into a run folder that holds checkpoints, or one resumed by
#    path from a step below the folder's newest: refused, the checkpoints unchanged (it
#    would overwrite and prune them, and the next resume = auto would mix the runs);
#    resume = auto continues there, and a fresh run starts once they are moved away;
#    a fresh run there refused for its input keeps the earlier run's log whole;
#    a fresh run into a folder holding an earlier run's model.h5 (no checkpoints), with
#    resume = none or auto: refused, the model and log unchanged; overwrite = yes
#    replaces them (a resumed run, ck-auto below, continues its own model unasked);
#    another folder's checkpoint resumed into it: refused too; a damaged checkpoint
#    above the resumed one does not make keep_ckpts delete what the run saves; a bad
#    GENTRAIN_* value on rank 1 alone is rank 1's one line, a bad config value on every
#    rank is rank 0's one line (rank 1's where only it has it), and so is another file at
#    the data's path on rank 1 (not called a change in time); sample of a run folder
#    with checkpoints and no model.h5 yet says where they are;
#  - the Slurm and PBS job scripts outside a job, or with GT_CKPT_EVERY=abc: refused;
#  - a second run into a run folder while one is training there: refused, naming the
#    first's pid; a killed run leaves no lock behind;
#  - an out so long that its checkpoints' names would not fit: refused before step 1;
#  - plan --from-log and sample --tokenizer given a FIFO (or /dev/zero): one line, no
#    hang; inspect whose output pipe is closed says so, not that the file is damaged;
#    inspect whose output cannot be written (> /dev/full) fails with one line;
#    sample --tokens 2147483647 runs in 1 GB of address space (it asked for 8 GB);
#  - inspect of a file whose dataset name and attribute hold escape sequences and
#    control characters prints them as \xNN, never raw (valid UTF-8 stays as it is);
#  - plan with huge or fractional counts, or an infinite noise scale: exit 2, one line,
#    no table;
#  - sizes from input: n_layer 357913942 (which overflowed the tensor table) or a batch
#    whose activations cannot exist are one error line; 1024 layers (the most) build in
#    seconds (a quadratic name lookup took minutes); a batch_size past the training
#    data is said before the validation windows are read (that took minutes); a model
#    whose weights and optimizer state pass the machine's memory is refused before they
#    are touched (the kernel killed the rank);
#  - a token dataset declaring more than 2^62 tokens (counts of them overflowed);
#  - token datasets declaring storage they never wrote (2^40 tokens in a 2.5 KB file,
#    or chunks past the first never written): refused at once, not trained on as zeros;
#  - an external-storage dataset whose raw file is short, and a virtual dataset whose
#    source file is missing: refused at open (HDF5 would read zeros / fill values);
#  - a chunk index recording a chunk's stored size as 100 bytes or 4 GB (unfiltered and
#    deflated), or its address past the file's end: train and inspect name the chunk
#    and both sizes (no 4 GB allocation), at open or, for datasets too large to check
#    there, when a read first touches it; a deflated chunk recorded too small, or one
#    placed past the end, is named when its read fails;
#  - a file on which HDF5 1.10.8 itself loops (tests/fuzz/hdf5-known): inspect and
#    sample read it in a child first and end with one error line; so does train (before
#    MPI starts) given it as data, as a checkpoint to resume or found by resume = auto,
#    and under mpirun -np 2 still one line; one on which HDF5 crashes: one line from
#    inspect and from a resume (under the sanitizers too, whose report ends the child);
#  - the data file truncated while training: the run stops with one error line instead
#    of training on the zeros read past the new end;
#  - a resume on a data file replaced since the checkpoint (same path, other tokens):
#    refused, naming what differs;
#  - a full disk while saving (a file size limit, and where root may mount one, a 1 MB
#    tmpfs): exit 1 after the one error line (HDF5's own clean-up used to crash with
#    exit 139 after it), no partial file left, an older file of the same name intact.
set -u
: "${GENTRAIN:?GENTRAIN must point at the gentrain binary}"
: "${top_srcdir:?top_srcdir must point at the source tree}"
. "$top_srcdir/tests/lib.sh"
test_tmpdir hardening
prepare_slice
mkfifo "$tmp/fifo" || { echo "SKIP: mkfifo failed"; exit 77; }

# refused NAME WANT CMD...: CMD exits 1 or 2 within 20 s with one error line matching WANT
refused() {
    local name=$1 want=$2 rc
    shift 2
    timeout 20 "$@" > "$tmp/$name.out" 2> "$tmp/$name.err" < /dev/null
    rc=$?
    check "$name: exit 1 or 2, no hang (rc $rc)" test $rc -eq 1 -o $rc -eq 2
    check "$name: one error line naming the problem" \
        test "$(grep -c '^gentrain: error:' "$tmp/$name.err")" -eq 1 -a \
        -n "$(grep -E -e "$want" "$tmp/$name.err")"
    sed -e 's/^/    | /' "$tmp/$name.err" | head -n 3
}
FIFO_RE="named pipe \\(FIFO\\)"
SMALL=(--n_layer 1 --n_head 1 --n_embd 8 --block_size 8 --batch_size 2 --steps 1
       --eval_every 0 --threads 1)

refused data-fifo "$FIFO_RE" "$GENTRAIN" train --data "$tmp/fifo" "${SMALL[@]}" --out ""
refused config-fifo "$FIFO_RE" "$GENTRAIN" train --config "$tmp/fifo"
refused inspect-fifo "$FIFO_RE" "$GENTRAIN" inspect "$tmp/fifo"
refused sample-fifo "$FIFO_RE" "$GENTRAIN" sample --model "$tmp/fifo" --tokens 4
refused prepare-in-fifo "$FIFO_RE" "$GENTRAIN" prepare "$tmp/fifo" -o "$tmp/x.h5"
refused resume-fifo "$FIFO_RE" "$GENTRAIN" train --data "$tmp/d.h5" "${SMALL[@]}" \
    --out "$tmp/r" --resume "$tmp/fifo"
check "resume-fifo: nothing trained" test ! -e "$tmp/r/model.h5"

refused prepare-out-fifo "$FIFO_RE" "$GENTRAIN" prepare "$tmp/slice.txt" -o "$tmp/fifo"
check "prepare-out-fifo: the FIFO is still a FIFO" test -p "$tmp/fifo"
refused prepare-out-dev "a device" "$GENTRAIN" prepare "$tmp/slice.txt" -o /dev/null
check "prepare-out-dev: /dev/null is still a device" test -c /dev/null
refused log-fifo "named pipe \\(FIFO\\) with no reader" "$GENTRAIN" train --data "$tmp/d.h5" "${SMALL[@]}" \
    --out "$tmp/l" --log "$tmp/fifo"
check "log-fifo: the FIFO is still a FIFO" test -p "$tmp/fifo"
run_ok log-stdout timeout 60 "$GENTRAIN" train --data "$tmp/d.h5" "${SMALL[@]}" --out "" \
    --log /dev/stdout
check "log-stdout: the JSON lines reach standard output" \
    grep -q '^{"step":1,"loss":' "$tmp/log-stdout.out"

sum_before=$(cksum < "$tmp/slice.txt")
refused prepare-self "is the input" "$GENTRAIN" prepare "$tmp/slice.txt" -o "$tmp/slice.txt"
check "prepare-self: the input is unchanged" test "$(cksum < "$tmp/slice.txt")" = "$sum_before"
ln -s slice.txt "$tmp/link.txt"
refused prepare-link "is the input" "$GENTRAIN" prepare "$tmp/slice.txt" -o "$tmp/link.txt"
check "prepare-link: the input is unchanged" test "$(cksum < "$tmp/slice.txt")" = "$sum_before"
check "prepare-link: the link is still a link" test -L "$tmp/link.txt"
cp "$tmp/slice.txt" "$tmp/second.txt"
refused prepare-second "is the input" "$GENTRAIN" prepare "$tmp/slice.txt" \
    "$tmp/second.txt" -o "$tmp/second.txt"
# one input given twice (a link to it counts): its text would be in the data set twice,
# its copies split between training and validation; nothing is written
refused prepare-twice "inputs 2 \(.*\) and 3 \(.*\) are the same file" \
    "$GENTRAIN" prepare "$tmp/second.txt" "$tmp/link.txt" "$tmp/slice.txt" -o "$tmp/twice.h5"
check "prepare-twice: no output" test ! -e "$tmp/twice.h5" -a ! -e "$tmp/twice.h5.tmp"
# --log naming the data file (or the config) by mistake: refused before it is opened
# for writing (it was truncated), the file intact
cp "$tmp/d.h5" "$tmp/dlog.h5"
data_sum=$(cksum < "$tmp/dlog.h5")
refused log-is-data "log file .*dlog\.h5 exists and is not a JSON Lines log" "$GENTRAIN" \
    train --data "$tmp/dlog.h5" "${SMALL[@]}" --out none --log "$tmp/dlog.h5"
check "log-is-data: the data file is unchanged" test "$(cksum < "$tmp/dlog.h5")" = "$data_sum"
printf 'n_layer = 1\n' > "$tmp/log.cfg"
refused log-is-config "is not a JSON Lines log" "$GENTRAIN" train --config "$tmp/log.cfg" \
    --data "$tmp/d.h5" "${SMALL[@]}" --out none --log "$tmp/log.cfg"
check "log-is-config: the config is unchanged" grep -qx 'n_layer = 1' "$tmp/log.cfg"
# the input is the output's temporary file (<out>.tmp, written first and deleted on
# failure): refused before anything is written, the input intact
cp "$tmp/slice.txt" "$tmp/x.h5.tmp"
refused prepare-tmp "the temporary file of output" "$GENTRAIN" prepare "$tmp/x.h5.tmp" \
    -o "$tmp/x.h5"
check "prepare-tmp: the input is unchanged" test "$(cksum < "$tmp/x.h5.tmp")" = "$sum_before"
check "prepare-tmp: no output" test ! -e "$tmp/x.h5"
cp "$tmp/slice.txt" "$tmp/tok.json.tmp"
refused prepare-tok-tmp "the temporary file of --save-tokenizer" "$GENTRAIN" prepare \
    "$tmp/tok.json.tmp" -o "$tmp/y.h5" --train-tokenizer 300 --save-tokenizer "$tmp/tok.json"
check "prepare-tok-tmp: the input is unchanged" \
    test "$(cksum < "$tmp/tok.json.tmp")" = "$sum_before"
# the tokenizer read (--tokenizer) is an input too, and the one saved (--save-tokenizer)
# is written before the output: -o naming either is refused before anything is written
# (the tokenizer was overwritten by the data set; the saved one lost, with exit 0)
run_ok tok-save timeout 60 "$GENTRAIN" prepare "$tmp/slice.txt" -o "$tmp/tok.h5" \
    --train-tokenizer 300 --save-tokenizer "$tmp/tok.json"
tok_sum=$(cksum < "$tmp/tok.json")
refused prepare-out-tokenizer "is the tokenizer" "$GENTRAIN" prepare "$tmp/slice.txt" \
    -o "$tmp/tok.json" --tokenizer "$tmp/tok.json"
check "prepare-out-tokenizer: the tokenizer is unchanged" \
    test "$(cksum < "$tmp/tok.json")" = "$tok_sum"
refused prepare-out-saved "is the --save-tokenizer file" "$GENTRAIN" prepare \
    "$tmp/slice.txt" -o "$tmp/both.h5" --train-tokenizer 300 --save-tokenizer "$tmp/both.h5"
check "prepare-out-saved: nothing written" test ! -e "$tmp/both.h5"
# an HDF5 file (a data set) given to prepare as text: refused (it became a data set of
# its bytes)
refused prepare-hdf5 "d\.h5: it is an HDF5 file" "$GENTRAIN" prepare "$tmp/d.h5" -o "$tmp/h.h5"
check "prepare-hdf5: nothing written" test ! -e "$tmp/h.h5"

mkdir -p "$tmp/m"
mkfifo "$tmp/m/model.h5"
refused fresh-over-fifo "holds model.h5 from an earlier run" "$GENTRAIN" train \
    --data "$tmp/d.h5" "${SMALL[@]}" --out "$tmp/m"
refused save-over-fifo "$FIFO_RE|only a regular file" "$GENTRAIN" train --data "$tmp/d.h5" \
    "${SMALL[@]}" --out "$tmp/m" --overwrite yes
check "save-over-fifo: the FIFO is still there" test -p "$tmp/m/model.h5"
check "save-over-fifo: no temporary file left" test ! -e "$tmp/m/model.h5.tmp"

mkdir -p "$tmp/dmg/checkpoints"
printf 'not a checkpoint' > "$tmp/dmg/checkpoints/ckpt_00000004.h5"
sum_ck=$(cksum < "$tmp/dmg/checkpoints/ckpt_00000004.h5")
refused resume-damaged "no checkpoint in .* verifies" "$GENTRAIN" train --data "$tmp/d.h5" \
    "${SMALL[@]}" --out "$tmp/dmg" --resume auto --ckpt_every 1
check "resume-damaged: the damaged checkpoint is unchanged" \
    test "$(cksum < "$tmp/dmg/checkpoints/ckpt_00000004.h5")" = "$sum_ck"
check "resume-damaged: nothing trained" test ! -e "$tmp/dmg/model.h5"
# a fresh run would overwrite and prune them (and a later resume = auto would mix the
# two runs): refused too, until they are moved away
refused resume-none "holds checkpoints up to step 4 .*fresh.*move them away" "$GENTRAIN" \
    train --data "$tmp/d.h5" "${SMALL[@]}" --out "$tmp/dmg" --resume none
check "resume-none: the damaged checkpoint is unchanged" \
    test "$(cksum < "$tmp/dmg/checkpoints/ckpt_00000004.h5")" = "$sum_ck"
mv "$tmp/dmg/checkpoints" "$tmp/dmg/old-checkpoints"
run_ok resume-none-moved timeout 60 "$GENTRAIN" train --data "$tmp/d.h5" "${SMALL[@]}" \
    --out "$tmp/dmg" --resume none
# that run's model.h5: a fresh run into the folder would replace it (and empty the
# log), with resume = none or with resume = auto and no checkpoint: refused, both whole
sum_log=$(cksum < "$tmp/dmg/log.jsonl")
sum_model=$(cksum < "$tmp/dmg/model.h5")
refused fresh-over-model "dmg holds model.h5 from an earlier run.*overwrite = yes" \
    "$GENTRAIN" train --data "$tmp/d.h5" "${SMALL[@]}" --out "$tmp/dmg" --seed 7
refused fresh-auto-over-model "dmg holds model.h5 from an earlier run.*found no checkpoint" \
    "$GENTRAIN" train \
    --data "$tmp/d.h5" "${SMALL[@]}" --out "$tmp/dmg" --seed 7 --resume auto
check "fresh-over-model: the earlier run's model and log are whole" \
    test "$(cksum < "$tmp/dmg/model.h5")" = "$sum_model" -a \
    "$(cksum < "$tmp/dmg/log.jsonl")" = "$sum_log"
# a fresh run into that folder refused for its input (here a vocab_size its tokens pass)
# keeps the earlier run's log as it was: the log is emptied only once a run starts
refused fresh-bad-input "is >= vocab_size 2" "$GENTRAIN" train --data "$tmp/d.h5" \
    "${SMALL[@]}" --out "$tmp/dmg" --vocab_size 2 --overwrite yes
check "fresh-bad-input: the earlier run's log is whole" \
    test -s "$tmp/dmg/log.jsonl" -a "$(cksum < "$tmp/dmg/log.jsonl")" = "$sum_log"
# overwrite = yes: the fresh run replaces them
run_ok fresh-overwrite timeout 60 "$GENTRAIN" train --data "$tmp/d.h5" "${SMALL[@]}" \
    --out "$tmp/dmg" --seed 7 --overwrite yes
check "fresh-overwrite: a new model.h5 and log" \
    test "$(cksum < "$tmp/dmg/model.h5")" != "$sum_model" -a \
    "$(cksum < "$tmp/dmg/log.jsonl")" != "$sum_log"
CK=(--n_layer 1 --n_head 1 --n_embd 8 --block_size 8 --batch_size 2 --eval_every 0
    --threads 1 --ckpt_every 1)
run_ok ck-run timeout 60 "$GENTRAIN" train --data "$tmp/d.h5" "${CK[@]}" --steps 3 \
    --out "$tmp/ck"
sums_ck() { cat "$tmp"/ck/checkpoints/ckpt_*.h5 | cksum; }
sum_cks=$(sums_ck)
refused ck-fresh "checkpoints up to step 3 .*resume = auto" "$GENTRAIN" train \
    --data "$tmp/d.h5" "${CK[@]}" --steps 2 --out "$tmp/ck"
refused ck-older "checkpoints up to step 3 .*from step 2" "$GENTRAIN" train \
    --data "$tmp/d.h5" "${CK[@]}" --steps 4 --out "$tmp/ck" \
    --resume "$tmp/ck/checkpoints/ckpt_00000002.h5"
check "ck-fresh, ck-older: the checkpoints are unchanged" test "$(sums_ck)" = "$sum_cks"
run_ok ck-auto timeout 60 "$GENTRAIN" train --data "$tmp/d.h5" "${CK[@]}" --steps 4 \
    --out "$tmp/ck" --resume auto
check "ck-auto: continued to step 4" test -s "$tmp/ck/checkpoints/ckpt_00000004.h5"
# another run's checkpoint resumed into a folder that holds checkpoints of its own:
# refused (its pruning would delete them, and leave a folder of two runs)
run_ok ck-other timeout 60 "$GENTRAIN" train --data "$tmp/d.h5" "${CK[@]}" --steps 2 \
    --out "$tmp/ck-other"
sum_cks=$(sums_ck)
refused ck-from-other "not of the folder of .*ck-other" "$GENTRAIN" train --data "$tmp/d.h5" \
    "${CK[@]}" --steps 6 --out "$tmp/ck" --resume "$tmp/ck-other/checkpoints/ckpt_00000002.h5"
check "ck-from-other: the folder's checkpoints are unchanged" test "$(sums_ck)" = "$sum_cks"
# a damaged checkpoint above the one resume = auto continues from is neither counted
# among the keep_ckpts kept nor a reason to delete what this run saves
mkdir -p "$tmp/ck-dmg/checkpoints"
cp "$tmp/ck-other/checkpoints/ckpt_00000002.h5" "$tmp/ck-dmg/checkpoints/"
printf 'damaged' > "$tmp/ck-dmg/checkpoints/ckpt_00000009.h5"
run_ok ck-dmg timeout 60 "$GENTRAIN" train --data "$tmp/d.h5" "${CK[@]}" --steps 4 \
    --out "$tmp/ck-dmg" --resume auto --keep_ckpts 1
check "ck-dmg: the checkpoint of step 4 is kept" \
    test -s "$tmp/ck-dmg/checkpoints/ckpt_00000004.h5"
# a run folder with checkpoints and no model.h5 yet (a run stopped by a signal): sample
# says where they are
mkdir -p "$tmp/onlyck"
cp -r "$tmp/ck-other/checkpoints" "$tmp/onlyck/"
refused sample-only-ckpt "no gentrain model file in .*onlyck.*holds its checkpoints" \
    "$GENTRAIN" sample --model "$tmp/onlyck" --tokens 2
if [ -n "${MPIEXEC:-}" ]; then
    # a GENTRAIN_* value bad on rank 1 only: rank 1 says so (rank 0 has nothing to say)
    refused env-rank1 "rank 1: GENTRAIN_BF16=bogus" "$MPIEXEC" -np 1 --bind-to none \
        "$GENTRAIN" train --data "$tmp/d.h5" "${CK[@]}" --steps 1 --out "" : -np 1 \
        --bind-to none env GENTRAIN_BF16=bogus "$GENTRAIN" train --data "$tmp/d.h5" \
        "${CK[@]}" --steps 1 --out ""
    # a bad value on the command line of every rank: said once, by rank 0 (each rank
    # said it: hundreds of the same line in a large job); on rank 1's alone: by rank 1
    refused config-np2 "rank 0: command line: lr = nan" "$MPIEXEC" -np 2 --bind-to none \
        "$GENTRAIN" train --data "$tmp/d.h5" "${SMALL[@]}" --out "" --lr nan
    refused config-rank1 "rank 1: command line: lr = nan" "$MPIEXEC" -np 1 --bind-to none \
        "$GENTRAIN" train --data "$tmp/d.h5" "${SMALL[@]}" --out "" : -np 1 --bind-to none \
        "$GENTRAIN" train --data "$tmp/d.h5" "${SMALL[@]}" --out "" --lr nan
    # rank 1 finds another file at the data's path (a node's own copy, staged apart):
    # said as such, not as a file that changed since the run started
    mkdir -p "$tmp/node1"
    tail -c 30000 "$top_srcdir/data/tinyshakespeare.txt" > "$tmp/node1/other.txt"
    timeout 60 "$GENTRAIN" prepare "$tmp/node1/other.txt" -o "$tmp/node1/d.h5" \
        > /dev/null 2>&1 || fail "setup: prepare node1's data"
    IN_DIR=(bash -c 'cd "$1" && shift && exec "$@"' in_dir)
    refused data-per-node "rank 1: d.h5:/(train|val)/tokens here is not the file another rank read" \
        "$MPIEXEC" -np 1 --bind-to none "${IN_DIR[@]}" "$tmp" "$GENTRAIN" train --data d.h5 \
        "${SMALL[@]}" --out "" : -np 1 --bind-to none "${IN_DIR[@]}" "$tmp/node1" \
        "$GENTRAIN" train --data d.h5 "${SMALL[@]}" --out ""
fi

# the job scripts outside a job: refused, nothing launched (srun outside a job would
# make an allocation of its own that nothing requeues)
# script_refused NAME WANT CMD...: exit 2 within 20 s, one line on stderr matching WANT
script_refused() {
    local name=$1 want=$2 rc
    shift 2
    timeout 20 "$@" > "$tmp/$name.out" 2> "$tmp/$name.err" < /dev/null
    rc=$?
    check "$name: exit 2, one line saying why (rc $rc)" test $rc -eq 2 -a \
        "$(wc -l < "$tmp/$name.err")" -eq 1 -a -n "$(grep -E -e "$want" "$tmp/$name.err")"
    sed -e 's/^/    | /' "$tmp/$name.err" | head -n 3
}
script_refused sbatch-outside "not inside a Slurm job" env -u SLURM_JOB_ID bash \
    "$top_srcdir/scripts/slurm/train.sbatch" "$tmp/d.h5"
script_refused pbs-outside "not inside a PBS job" env -u PBS_NODEFILE -u PBS_JOBID \
    GT_CONFIG="$tmp/d.h5" bash "$top_srcdir/scripts/pbs/train.pbs"
script_refused pbs-no-config "GT_CONFIG is not set" env -u GT_CONFIG PBS_NODEFILE=/dev/null \
    PBS_JOBID=1.x bash "$top_srcdir/scripts/pbs/train.pbs"
script_refused sbatch-ckpt-every "GT_CKPT_EVERY=abc is not a whole number" env GT_CKPT_EVERY=abc \
    bash "$top_srcdir/scripts/slurm/train.sbatch" --dry-run "$tmp/d.h5"

# an out whose checkpoint names pass the 4096 bytes a save has room for: refused before
# any step, not at the first checkpoint
long_out="$tmp/$(printf 'd%.0s' $(seq 200))"
while [ ${#long_out} -lt 4080 ]; do long_out="$long_out/$(printf 'e%.0s' $(seq 200))"; done
long_out=${long_out:0:4080}
refused long-out "checkpoint path too long" "$GENTRAIN" train --data "$tmp/d.h5" \
    "${CK[@]}" --steps 2 --out "$long_out"
check "long-out: no step ran" test -z "$(grep '^step ' "$tmp/long-out.out")"

PLANF=("$GENTRAIN" plan --n_layer 1 --n_head 1 --n_embd 8 --block_size 8 --vocab_size 256
       --core-gflops 10)
refused plan-log-fifo "$FIFO_RE" "${PLANF[@]}" --from-log "$tmp/fifo"
refused plan-log-device "/dev/zero is a device, not a regular file" "${PLANF[@]}" \
    --from-log /dev/zero
refused sample-tokenizer-fifo "$FIFO_RE" "$GENTRAIN" sample --model "$tmp/dmg" --tokens 4 \
    --tokenizer "$tmp/fifo"
# inspect into a pipe whose reader has gone: every write fails (SIGPIPE)
python3 - "$GENTRAIN" "$tmp/dmg/model.h5" > "$tmp/inspect-closed.err" <<'EOF'
import os, subprocess, sys
r, w = os.pipe()
os.close(r)
p = subprocess.run([sys.argv[1], "inspect", sys.argv[2]], stdout=w,
                   stderr=subprocess.PIPE, timeout=30)
sys.stdout.write(p.stderr.decode("utf-8", "replace"))
print("rc %d" % p.returncode)
EOF
check "inspect into a closed pipe: says the output was closed, not that the file is damaged" \
    test -n "$(grep 'gentrain: error: .*output was closed' "$tmp/inspect-closed.err")" -a \
    -z "$(grep damaged "$tmp/inspect-closed.err")"
# inspect whose output cannot be written (a full disk): one error line, exit 1 (it was
# exit 0 with nothing written)
if [ -c /dev/full ]; then
    timeout 30 "$GENTRAIN" inspect "$tmp/dmg/model.h5" > /dev/full 2> "$tmp/inspect-full.err"
    rc=$?
    check "inspect > /dev/full: exit 1 (rc $rc), one error line: no space left" \
        test $rc -eq 1 -a "$(grep -c '^gentrain: error:' "$tmp/inspect-full.err")" -eq 1 -a \
        -n "$(grep 'writing the listing of .* failed: no space left' "$tmp/inspect-full.err")"
fi
# sample --tokens at its largest (2^31 - 1): memory for a window of the model's context,
# not for every token asked (8 GB, refused as out of memory under a 1 GB address-space
# limit); it generates until stopped. Skipped where the build cannot run under that
# limit at all (the sanitizers reserve terabytes of address space).
if (ulimit -v 1000000 && timeout 60 "$GENTRAIN" sample --model "$tmp/dmg" --tokens 2 \
        --threads 1) > /dev/null 2>&1; then
    (ulimit -v 1000000 && exec timeout 5 "$GENTRAIN" sample --model "$tmp/dmg" \
        --tokens 2147483647 --threads 1) > /dev/null 2> "$tmp/maxtok.err"
    rc=$?
    check "sample --tokens 2147483647 in 1 GB: generates until stopped (rc $rc, 124)" \
        test $rc -eq 124 -a -z "$(grep 'out of memory' "$tmp/maxtok.err")"
else
    echo "skip sample --tokens 2147483647 in 1 GB: this build does not run in 1 GB"
fi

: "${MKDATA:?MKDATA must point at tests/mkdata}"
"$MKDATA" "$tmp/evil.h5" --dataset $'/train/to\e[2Jkens' --dtype uint8 --rank 1 --len 100 \
    --vocab 256 --note $'red\e[31mRED\e[0m\abell \xc3\xa9 c1\xc2\x9b title\e]0;x\a\nline2' \
    > "$tmp/mk.out" 2>&1 || { fail "setup: mkdata"; show "$tmp/mk.out"; }
run_ok inspect-escapes timeout 30 "$GENTRAIN" inspect "$tmp/evil.h5"
check "inspect: no escape, bell or C1 byte reaches the terminal" \
    env LC_ALL=C awk '/\033|\007|\302\233/ { bad = 1 } END { exit bad }' "$tmp/inspect-escapes.out"
check "inspect: the escapes are shown as \\xNN" \
    grep -qF 'red\x1b[31mRED\x1b[0m\x07bell' "$tmp/inspect-escapes.out"
check "inspect: the dataset name too" grep -qF '/train/to\x1b[2Jkens' "$tmp/inspect-escapes.out"
check "inspect: valid UTF-8 stays as it is" grep -q $'bell \xc3\xa9 c1' "$tmp/inspect-escapes.out"

PLAN=("$GENTRAIN" plan --vocab_size 256 --core-gflops 10)
refused plan-nodes "--nodes needs a number from 1 to 1048576 \\(a whole one\\)" "${PLAN[@]}" --nodes 1e30
refused plan-fraction "--nodes needs a number from 1 to 1048576 \\(a whole one\\)" "${PLAN[@]}" --nodes 2.5
refused plan-gpus "more than 1048576 ranks" "${PLAN[@]}" --nodes 1000000 \
    --gpus-per-node 1024 --gpu-tflops 100
refused plan-noise-inf "--noise-scale needs a number" "${PLAN[@]}" --noise-scale inf
refused plan-nan "--core-gflops needs a number" "$GENTRAIN" plan --vocab_size 256 \
    --core-gflops nan
check "plan refusals print no table" \
    test -z "$(cat "$tmp"/plan-*.out)"
run_ok plan-ok timeout 60 "${PLAN[@]}" --nodes 4 --noise-scale 1e6
check "plan on a described machine still prints its table" \
    grep -q "^recommended: dp" "$tmp/plan-ok.out"

refused layers-huge "n_layer = 357913942: too large \\(at most 1024\\)" "$GENTRAIN" train \
    --data "$tmp/d.h5" --n_layer 357913942 --out ""
refused batch-huge "out of memory|too large|has [0-9]+ windows" "$GENTRAIN" train --data "$tmp/d.h5" \
    --batch_size 2000000000 --block_size 8 --n_layer 1 --n_embd 8 --n_head 1 --out ""
# a batch_size past the training data: said at once (it was said only after the
# validation windows of that batch, a hundred million of them, had been read: minutes)
refused batch-over-data "has [0-9]+ windows; batch_size x replicas = 100000000 x 1" \
    "$GENTRAIN" train --data "$tmp/d.h5" "${SMALL[@]}" --batch_size 100000000 --out ""
# a model whose weights, gradient and AdamW moments pass the machine's memory: one line
# before any of it is touched (the kernel killed the rank, with no line, at
# vocab_size 134217728); GENTRAIN_TEST_MEMORY stands for the machine's memory
GENTRAIN_TEST_MEMORY=20000 refused model-over-memory \
    "parameters on this rank need at least .* more than this machine's" \
    "$GENTRAIN" train --data "$tmp/d.h5" "${SMALL[@]}" --out ""
run_ok layers-1024 timeout 120 "$GENTRAIN" train --data "$tmp/d.h5" --n_layer 1024 \
    --n_embd 8 --n_head 1 --block_size 8 --batch_size 1 --steps 1 --eval_every 0 \
    --val_dataset none --threads 1 --out ""

"$MKDATA" "$tmp/unwritten.h5" --dataset /train/tokens --dtype uint16 --rank 1 \
    --len 1099511627776 --vocab 256 --chunk 65536 --written 0 > /dev/null 2>&1 ||
    fail "setup: mkdata unwritten"
refused unwritten "declares \\[1099511627776\\] tokens but none of its storage was ever written" \
    "$GENTRAIN" train --data "$tmp/unwritten.h5" --out ""
"$MKDATA" "$tmp/partial.h5" --dataset /train/tokens --dtype uint16 --rank 1 --len 200000 \
    --vocab 256 --chunk 4096 --written 50000 > /dev/null 2>&1 || fail "setup: mkdata partial"
refused partial "only part of its storage was ever written" "$GENTRAIN" train \
    --data "$tmp/partial.h5" --out ""

(cd "$tmp" && "$MKDATA" ext.h5 --dataset /train/tokens --dtype uint16 --rank 1 --len 5000 \
    --vocab 256 --external ext.raw > /dev/null 2>&1) || fail "setup: mkdata external"
truncate -s 4000 "$tmp/ext.raw"
# (the external file's name resolves from the working folder, as HDF5 does by default)
refused ext-short "external file ext.raw, which holds only 4000 bytes" \
    env -C "$tmp" "$GENTRAIN" train --data ext.h5 --val_dataset none --out ""
(cd "$tmp" && "$MKDATA" src.h5 --dataset /train/tokens --dtype uint16 --rank 1 --len 5000 \
    --vocab 256 > /dev/null 2>&1 && "$MKDATA" vds.h5 --dataset /train/tokens --dtype uint16 \
    --rank 1 --len 5000 --vocab 256 --virtual src.h5 > /dev/null 2>&1) ||
    fail "setup: mkdata virtual"
rm -f "$tmp/src.h5"
refused vds-missing "virtual dataset whose source file src.h5 is missing" "$GENTRAIN" train \
    --data "$tmp/vds.h5" --val_dataset none --out ""

# Chunk records that lie about a chunk's stored size or place (tests/chunkpatch rewrites
# a field of a chunk's record in the file's v1 B-tree chunk index).
: "${CHUNKPATCH:?CHUNKPATCH must point at tests/chunkpatch}"
# bad_chunk NAME CHUNK size|address VALUE MKDATA-ARGS...: $tmp/NAME.h5, a uint16
# /train/tokens in chunks of 4096 tokens, whose chunk CHUNK is then recorded with VALUE
# as its stored size or address
bad_chunk() {
    local name=$1 chunk=$2 field=$3 value=$4
    shift 4
    "$MKDATA" "$tmp/$name.h5" --dataset /train/tokens --dtype uint16 --vocab 256 \
        --chunk 4096 "$@" > "$tmp/$name.mk" 2>&1 &&
        "$CHUNKPATCH" "$tmp/$name.h5" /train/tokens "$chunk" "$field" "$value" \
        >> "$tmp/$name.mk" 2>&1 || { fail "setup: $name"; show "$tmp/$name.mk"; }
}
CHUNK3="chunk 3 of 49 \\(\\[12288\\.\\.16384\\)\\)"
bad_chunk chunk-small 3 size 100 --rank 1 --len 200000
bad_chunk chunk-huge 3 size 4000000000 --rank 1 --len 200000
bad_chunk chunk-gz-huge 3 size 4000000000 --rank 1 --len 200000 --gzip 6
bad_chunk chunk-gz-small 3 size 100 --rank 1 --len 200000 --gzip 6
bad_chunk chunk-far 3 address 1000000 --rank 1 --len 200000
# checked at open (49 chunks: every record), by train and by inspect
for f in small:100 huge:4000000000; do
    want="the chunk index records ${f#*:} bytes for $CHUNK3; expected exactly 8192"
    refused "chunk-${f%%:*}" "$want" "$GENTRAIN" train --data "$tmp/chunk-${f%%:*}.h5" \
        --val_dataset none --out ""
    refused "inspect-chunk-${f%%:*}" "$want" "$GENTRAIN" inspect "$tmp/chunk-${f%%:*}.h5"
done
want="the chunk index records 4000000000 bytes for $CHUNK3; expected 1 to 12416"
refused chunk-gz-huge "$want" "$GENTRAIN" train --data "$tmp/chunk-gz-huge.h5" \
    --val_dataset none --out ""
refused inspect-chunk-gz-huge "$want" "$GENTRAIN" inspect "$tmp/chunk-gz-huge.h5"
want="places $CHUNK3 at bytes \\[1000000\\.\\.1008192\\) of a file of [0-9]+ bytes"
refused chunk-far "$want" "$GENTRAIN" train --data "$tmp/chunk-far.h5" --val_dataset none \
    --out ""
refused inspect-chunk-far "$want" "$GENTRAIN" inspect "$tmp/chunk-far.h5"
# a compressed chunk recorded smaller than it is fails to decode: named when read
# (inspect reads no data, so it cannot tell)
want="$CHUNK3 cannot be read or decoded \\(the chunk index records 100 bytes at byte"
refused chunk-gz-small "$want" "$GENTRAIN" train --data "$tmp/chunk-gz-small.h5" \
    --val_dataset none --out ""
# checks left to the reads (as for large datasets: unfiltered ones of over 2048 chunks,
# compressed ones of over 65536): an unfiltered dataset is still refused at open, by the
# sum of its sizes; a compressed 2-D one when the range check first reads the chunk
refused chunk-huge-lazy "records 4000393216 bytes for its 49 chunks; expected 401408" \
    env GENTRAIN_CHUNK_CHECK_AT_OPEN=0 "$GENTRAIN" train --data "$tmp/chunk-huge.h5" \
    --val_dataset none --out ""
# a chunk placed past the end: HDF5 refuses the read, the error names the chunk
want="$CHUNK3 cannot be read \\(the chunk index records 8192 bytes at byte 1000000"
refused chunk-far-lazy "$want" env GENTRAIN_CHUNK_CHECK_AT_OPEN=0 "$GENTRAIN" train \
    --data "$tmp/chunk-far.h5" --val_dataset none --out ""
# (13000 bytes: the sum of the sizes stays below the file's size, so only the read can
# tell)
bad_chunk chunk-gz-2d 5 size 13000 --rank 2 --rows 400 --len 8192 --gzip 6
want="records 13000 bytes for chunk 5 of 800 \\(\\[2\\.\\.3, 4096\\.\\.8192\\)\\); expected"
want="$want 1 to 12416"
refused chunk-gz-2d-lazy "$want" env GENTRAIN_CHUNK_CHECK_AT_OPEN=0 "$GENTRAIN" train \
    --data "$tmp/chunk-gz-2d.h5" --val_dataset none --out ""
# a compressed dataset written only in part is no damage to inspect (its chunks are
# looked up, those never written have no record)
"$MKDATA" "$tmp/sparse-gz.h5" --dataset /t --dtype uint16 --rank 1 --len 1000000 \
    --chunk 128 --gzip 1 --written 500000 > /dev/null 2>&1 || fail "setup: sparse-gz"
run_ok inspect-sparse-gz timeout 60 "$GENTRAIN" inspect "$tmp/sparse-gz.h5"

known=$top_srcdir/tests/fuzz/hdf5-known
refused inspect-hdf5-hang "did not finish in 5 s" \
    env GENTRAIN_PROBE_SECONDS=5 "$GENTRAIN" inspect "$known/model-hang-H5HG_read.h5"
refused sample-hdf5-hang "did not finish in 5 s" \
    env GENTRAIN_PROBE_SECONDS=5 "$GENTRAIN" sample --model \
    "$known/model-hang-H5HG_read.h5" --tokens 4
# a checkpoint on which HDF5 1.10.8 crashes (a variable-length string read past its
# global heap): one line from inspect and from a resume, which trains nothing. Under
# AddressSanitizer the reading child ends by exit 1 instead of the signal: a crash too.
crash_re="reading it (crashed the HDF5 library \\(signal [0-9]+\\)|ended the reading process"
crash_re="$crash_re early)"
refused inspect-hdf5-crash "file .*ckpt-segv-H5HG_read.h5: $crash_re" \
    "$GENTRAIN" inspect "$known/ckpt-segv-H5HG_read.h5"
refused train-crash-resume "checkpoint .*ckpt-segv-H5HG_read.h5: $crash_re" \
    "$GENTRAIN" train --data "$tmp/d.h5" "${SMALL[@]}" --out "$tmp/crash" \
    --resume "$known/ckpt-segv-H5HG_read.h5"
check "train-crash-resume: nothing trained" test ! -e "$tmp/crash/model.h5"
refused train-shape-overflow "declares shape .* over 2\^62 tokens" "$GENTRAIN" train \
    --data "$top_srcdir/tests/fuzz/regress/fuzz_tokens/shape-past-2-62-tokens.h5" \
    --steps 1 --out ""
# train reads its HDF5 inputs in a child before MPI starts: a data file, a checkpoint
# named by resume and one found by resume = auto (each file here makes HDF5 loop)
hang_args=(--n_layer 1 --n_head 1 --n_embd 8 --block_size 8 --batch_size 2 --steps 2
    --eval_every 0 --threads 1)
refused train-hang-data "data file .*model-hang-H5HG_read.h5: reading it did not finish in 5 s" \
    env GENTRAIN_PROBE_SECONDS=5 "$GENTRAIN" train --data "$known/model-hang-H5HG_read.h5" \
    "${hang_args[@]}" --out ""
refused train-hang-resume "checkpoint .*: reading it did not finish in 5 s" \
    env GENTRAIN_PROBE_SECONDS=5 "$GENTRAIN" train --data "$tmp/d.h5" "${hang_args[@]}" \
    --out "$tmp/hang" --resume "$known/model-hang-H5HG_read.h5"
mkdir -p "$tmp/hangauto/checkpoints"
cp "$known/model-hang-H5HG_read.h5" "$tmp/hangauto/checkpoints/ckpt_00000001.h5"
refused train-hang-auto "checkpoint .*ckpt_00000001.h5: reading it did not finish in 5 s" \
    env GENTRAIN_PROBE_SECONDS=5 "$GENTRAIN" train --data "$tmp/d.h5" "${hang_args[@]}" \
    --out "$tmp/hangauto" --resume auto
check "train-hang-auto: the checkpoint is unchanged" \
    cmp -s "$known/model-hang-H5HG_read.h5" "$tmp/hangauto/checkpoints/ckpt_00000001.h5"
GENTRAIN_PROBE=off timeout 60 "$GENTRAIN" train --data "$tmp/d.h5" "${hang_args[@]}" \
    --out "" > "$tmp/probe-off.out" 2>&1
check "GENTRAIN_PROBE=off: the run trains and prints as usual" grep -q '^step ' "$tmp/probe-off.out"
if [ -n "${MPIEXEC:-}" ]; then
    refused train-hang-mpi "data file .*: reading it did not finish in 5 s" \
        env GENTRAIN_PROBE_SECONDS=5 "$MPIEXEC" -np 2 --bind-to none "$GENTRAIN" train \
        --data "$known/model-hang-H5HG_read.h5" "${hang_args[@]}" --out ""
fi

# two runs into one run folder at once: the second is refused (the first holds the
# folder's lock); once the first is killed, its lock is gone with it
timeout 120 "$GENTRAIN" train --data "$tmp/d.h5" --n_layer 1 --n_head 1 --n_embd 8 \
    --block_size 8 --batch_size 2 --steps 100000000 --eval_every 0 --val_dataset none \
    --threads 1 --out "$tmp/busy" > "$tmp/busy.out" 2> "$tmp/busy.err" &
busy=$!
for _ in $(seq 200); do grep -q '^step ' "$tmp/busy.out" 2> /dev/null && break; sleep 0.05; done
refused busy-second "another gentrain run is writing to .*busy \\(pid [0-9]+ on " \
    "$GENTRAIN" train --data "$tmp/d.h5" "${SMALL[@]}" --out "$tmp/busy"
read -r _ gpid _ < "$tmp/busy/.gentrain.lock" # "pid N on HOST": the first run's
kill -KILL "$gpid" 2> /dev/null
wait $busy 2> /dev/null
run_ok busy-after timeout 60 "$GENTRAIN" train --data "$tmp/d.h5" "${SMALL[@]}" \
    --out "$tmp/busy"

cp "$tmp/d.h5" "$tmp/moving.h5"
timeout 120 "$GENTRAIN" train --data "$tmp/moving.h5" --n_layer 1 --n_head 1 --n_embd 8 \
    --block_size 8 --batch_size 2 --steps 100000000 --eval_every 0 --val_dataset none \
    --threads 1 --out "" > "$tmp/moving.out" 2> "$tmp/moving.err" &
mover=$!
for _ in $(seq 200); do grep -q '^step ' "$tmp/moving.out" 2> /dev/null && break; sleep 0.05; done
truncate -s 4096 "$tmp/moving.h5"
wait $mover
rc=$?
check "data truncated mid-run: exit 1 (rc $rc), not trained on zeros" test $rc -eq 1
check "data truncated mid-run: the error says the file changed" \
    grep -q "gentrain: error: .*moving.h5: the data file changed while training" "$tmp/moving.err"

cp "$tmp/d.h5" "$tmp/swap.h5"
run_ok swap-first timeout 60 "$GENTRAIN" train --data "$tmp/swap.h5" "${SMALL[@]}" \
    --steps 2 --ckpt_every 1 --out "$tmp/swap"
tail -c 60000 "$top_srcdir/data/tinyshakespeare.txt" > "$tmp/other.txt"
timeout 60 "$GENTRAIN" prepare "$tmp/other.txt" -o "$tmp/swap.h5" > /dev/null 2>&1 ||
    fail "setup: prepare other data"
refused swap-resume "is not what checkpoint .* was trained on \\(bytes=[0-9]+ then, bytes=[0-9]+ now\\)" \
    "$GENTRAIN" train --data "$tmp/swap.h5" "${SMALL[@]}" --steps 4 --ckpt_every 1 \
    --out "$tmp/swap" --resume auto

# full disk, as a file size limit of 40 blocks (SIGXFSZ ignored: writes fail with EFBIG)
SMALL_FS=(bash -c 'trap "" XFSZ; ulimit -f 40; exec "$@"' small_fs)
TRAIN_ARGS=(--data "$tmp/d.h5" --n_layer 2 --n_head 2 --n_embd 64 --block_size 32
            --batch_size 4 --steps 2 --eval_every 0 --threads 1)
refused full-model "disk full" "${SMALL_FS[@]}" "$GENTRAIN" train "${TRAIN_ARGS[@]}" --out "$tmp/full"
check "full-model: no partial model file" test ! -e "$tmp/full/model.h5" -a ! -e "$tmp/full/model.h5.tmp"
refused full-ckpt "disk full" "${SMALL_FS[@]}" "$GENTRAIN" train "${TRAIN_ARGS[@]}" --out "$tmp/fullc" \
    --ckpt_every 1
check "full-ckpt: no partial checkpoint" test -z "$(ls "$tmp/fullc/checkpoints" 2> /dev/null)"
cp "$tmp/d.h5" "$tmp/old.h5"
sum_old=$(cksum < "$tmp/old.h5")
refused full-prepare "disk full" "${SMALL_FS[@]}" "$GENTRAIN" prepare \
    "$top_srcdir/data/tinyshakespeare.txt" -o "$tmp/old.h5"
check "full-prepare: the older file of that name is intact, no .tmp" \
    test "$(cksum < "$tmp/old.h5")" = "$sum_old" -a ! -e "$tmp/old.h5.tmp"
if [ "$(id -u)" = 0 ] && mkdir -p "$tmp/mnt" && mount -t tmpfs -o size=1m tmpfs "$tmp/mnt" 2> /dev/null; then
    trap 'umount "$tmp/mnt" 2> /dev/null; test_cleanup' EXIT
    refused tmpfs-full "disk full" "$GENTRAIN" train "${TRAIN_ARGS[@]}" --out "$tmp/mnt/run" \
        --ckpt_every 1
    check "tmpfs-full: no partial checkpoint" test -z "$(ls "$tmp/mnt/run/checkpoints")"
    if [ -n "${MPIEXEC:-}" ]; then
        timeout 120 "$MPIEXEC" -np 2 --bind-to none "$GENTRAIN" train "${TRAIN_ARGS[@]}" \
            --out "$tmp/mnt/mpi" --ckpt_every 1 > "$tmp/tmpfs-mpi.out" 2>&1
        rc=$?
        check "tmpfs-full under mpirun -np 2: exit 1 (rc $rc), the error line from rank 0" \
            test $rc -eq 1 -a -n "$(grep 'gentrain: error: rank 0: .*disk full' "$tmp/tmpfs-mpi.out")"
    fi
    umount "$tmp/mnt"
else
    echo "    (cannot mount a tmpfs here: the real full-disk runs are skipped)"
fi
[ "$fails" -eq 0 ]
