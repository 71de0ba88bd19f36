#!/usr/bin/env bash
# `gentrain inspect RUN_FOLDER`: where a run stands, read from its folder:
#  - a finished run with checkpoints: exit 0; not running, the last run's pid and host;
#    the checkpoints' steps; resume = auto's checkpoint and that it has all the steps;
#    the log's record count, the last step's loss and lr as the log has them; the
#    model's step and shape; the same after the folder is moved (the log found under
#    its new place, also a log the config put in a subfolder of out);
#  - a run in progress: running, its own pid and this host, the time left; stopped by
#    SIGUSR1, not running again; inspecting it did not disturb it (exit 75, the
#    checkpoint of the step it stopped at); its lock then held by another process,
#    running as the lock file names it; a log's numbers no run writes (1e300 tokens,
#    a clock at 1e300 s): shown as they are, nothing overflows;
#  - --verify reads the checkpoints whole, as a resume: with it, exit 0 and "it
#    verifies"; without it, a damaged tensor passes (the metadata reads), a checkpoint
#    cut short does not (exit 1, the one before taken);
#  - damage, each exit 1 with the rest still shown: the newest checkpoint damaged
#    (--verify: resume falls back to the one before, named in a warning), all damaged,
#    a log line that is not a record (its line number named), a model file that is
#    not one; a last log line without its newline is a note, exit 0;
#  - a folder that holds no run, and one named with an escape character: one error
#    line, and the name escaped on stdout;
#  - inspect on a file still lists the file; with --verify a model or checkpoint is
#    read whole against its checksum (a damaged one: exit 1, one error line), anything
#    else refused; --verify=VALUE: a usage error.
set -u
: "${GENTRAIN:?GENTRAIN must point at the gentrain binary}"
: "${top_srcdir:?top_srcdir must point at the source tree}"
. "$top_srcdir/tests/lib.sh"
test_tmpdir inspect_run

prepare_slice
tiny_gpt_args
ARGS=("${TINY[@]}" "${CONST[@]}" --val_dataset none)

# inspect NAME [--verify] DIR: stdout and stderr to $tmp/NAME.out/.err, status in $rc
inspect() {
    local name=$1
    shift
    timeout 120 "$GENTRAIN" inspect "$@" > "$tmp/$name.out" 2> "$tmp/$name.err"
    rc=$?
}
# inspect_ok NAME [--verify] DIR: the same, checked to exit 0 (its errors shown if not)
inspect_ok() {
    inspect "$@"
    check "$1: exit 0 (rc $rc)" test $rc -eq 0
    [ $rc -eq 0 ] || show "$tmp/$1.err"
}
# has NAME REGEX: a line of NAME.out matches
has() { grep -Eq -- "$2" "$tmp/$1.out"; }
# the last record's member KEY of log LOG, as %.4f or %.2e (FMT)
last_member() {
    sed -n '$s/.*"'"$2"'":\([^,}]*\).*/\1/p' "$1" | xargs printf "$3"
}

# ---------------------------------------------------------------- a finished run
timeout 120 "$GENTRAIN" train "${ARGS[@]}" --steps 6 --ckpt_every 2 --out "$tmp/run" \
    > "$tmp/run.train" 2>&1
rc=$?
check "a run of 6 steps with checkpoints: exit 0 (rc $rc)" test $rc -eq 0
[ $rc -eq 0 ] || show "$tmp/run.train"
inspect_ok done "$tmp/run"
check "finished: nothing on stderr" test ! -s "$tmp/done.err"
check "finished: not running, the last run's pid on this host" \
    has done "^state: not running \(no process holds the folder's lock; the last run here: pid [0-9]+ on $(hostname), started "
check "finished: three checkpoints, steps 2, 4 and 6" \
    has done '^checkpoints: 3 in checkpoints/ \(steps 2, 4, 6\); the newest [0-9.]+ (bytes|KiB|MiB), written '
check "finished: resume = auto would take step 6 (its metadata read)" \
    has done '^resume: resume = auto would continue at step 6 from checkpoints/ckpt_00000006.h5 \(its metadata reads; '
check "finished: that checkpoint has all 6 steps" \
    has done '^resume: that checkpoint has all 6 steps of its run'
check "finished: the log's 6 records" has done '^log: log.jsonl: 6 step records, written '
loss=$(last_member "$tmp/run/log.jsonl" loss %.4f)
lr=$(last_member "$tmp/run/log.jsonl" lr %.2e)
check "finished: the last step's loss ($loss) and lr ($lr) as logged" \
    has done "^last step: 6 of 6: loss $loss, lr $lr, [0-9,]+ tokens/s, 384 tokens trained on$"
check "finished: the model's step and shape" \
    has done '^model: model.h5: step 6, n_layer 2, n_head 2, n_embd 32, block_size 16, vocab_size [0-9]+; written '
check "finished: no time left shown" test "$(grep -c '^time left' "$tmp/done.out")" -eq 0
inspect verified --verify "$tmp/run"
check "finished, --verify: exit 0, resume = auto takes step 6, it verifies (rc $rc)" \
    eval '[ $rc -eq 0 ] && has verified "^resume: resume = auto continues at step 6 from checkpoints/ckpt_00000006.h5 \(it verifies\)$"'

# the folder moved: the log found where the folder is now
mv "$tmp/run" "$tmp/moved"
inspect moved "$tmp/moved"
check "moved: exit 0 and the log's 6 records (rc $rc)" \
    eval '[ $rc -eq 0 ] && has moved "^log: log.jsonl: 6 step records"'
# a log in a subfolder of out, the folder moved
timeout 120 "$GENTRAIN" train "${ARGS[@]}" --steps 3 --out "$tmp/sub" \
    --log "$tmp/sub/metrics/train.jsonl" > "$tmp/sub.train" 2>&1 || show "$tmp/sub.train"
mv "$tmp/sub" "$tmp/sub2"
inspect sub "$tmp/sub2"
check "log in a subfolder, folder moved: found, 3 records (rc $rc)" \
    eval '[ $rc -eq 0 ] && has sub "^log: metrics/train.jsonl: 3 step records"'
check "no checkpoints: said so" \
    eval 'has sub "^checkpoints: none$" && has sub "^resume: nothing to resume from$"'

# ---------------------------------------------------------------- a run in progress
"$GENTRAIN" train "${ARGS[@]}" --steps 1000000 --ckpt_every 20 --out "$tmp/live" \
    > "$tmp/live.train" 2>&1 &
pid=$!
# a watchdog, never a hung test; its sleep ends with it and holds no output open
(
    sleep 300 &
    trap 'kill $! 2> /dev/null; exit 0' TERM
    wait $! && kill -KILL $pid
) > /dev/null 2>&1 &
watchdog=$!
for ((i = 0; i < 3000; i++)); do
    [ "$(grep -c '"step"' "$tmp/live/log.jsonl" 2> /dev/null)" -ge 60 ] 2> /dev/null && break
    kill -0 $pid 2> /dev/null || break
    sleep 0.02
done
inspect_ok live "$tmp/live"
check "running: its own pid on this host holds the lock" \
    has live "^state: running: pid $pid on $(hostname) holds the folder's lock \(started "
check "running: the time left to step 1000000" \
    has live '^time left: about [0-9]+:[0-9]{2}:[0-9]{2} to step 1000000 at the pace of the last [0-9]+ steps'
check "running: the last step of 1000000" has live '^last step: [0-9]+ of 1000000: loss '
kill -USR1 $pid
wait $pid
stop_rc=$?
kill $watchdog 2> /dev/null
wait $watchdog 2> /dev/null
check "running: stopped by SIGUSR1 as usual (exit 75, rc $stop_rc)" test $stop_rc -eq 75
step=$(stopped_step "$tmp/live.train")
inspect stopped "$tmp/live"
check "stopped: not running, pid $pid was the last" \
    has stopped "^state: not running \(no process holds the folder's lock; the last run here: pid $pid on "
check "stopped: resume takes the checkpoint of step ${step:-?}" \
    has stopped "^resume: resume = auto would continue at step ${step:-x} from "
check "stopped: no time left shown (it is not running)" \
    test "$(grep -c '^time left' "$tmp/stopped.out")" -eq 0

# ------------------------------------------- another process holds the lock; odd numbers
# the stopped run's folder, its lock taken by a process that is not gentrain (as a run
# on another node would hold it over NFS), its log ending in records with numbers no
# run writes: shown as they are, nothing overflows
cp -r "$tmp/live" "$tmp/held"
printf 'pid 12345 on elsewhere\n' > "$tmp/held/.gentrain.lock"
printf '%s\n' '{"step":100000,"loss":1e308,"lr":-1,"tokens":5,"tokens_per_s":5,"elapsed_s":10000,"val_loss":-5}' \
    '{"step":100001,"loss":2,"lr":0,"tokens":1e300,"tokens_per_s":-1e300,"elapsed_s":1e300}' \
    >> "$tmp/held/log.jsonl"
python3 -c 'import fcntl, sys, time
f = open(sys.argv[1], "r+")
fcntl.lockf(f, fcntl.LOCK_EX)
print("locked", flush=True)
time.sleep(60)' "$tmp/held/.gentrain.lock" > "$tmp/holder.out" 2>&1 &
holder=$!
for ((i = 0; i < 500; i++)); do
    grep -q locked "$tmp/holder.out" 2> /dev/null && break
    sleep 0.02
done
inspect_ok held "$tmp/held"
kill $holder 2> /dev/null
wait $holder 2> /dev/null
check "another holder: running, as its lock file names it" \
    has held "^state: running: pid 12345 on elsewhere holds the folder's lock"
check "odd numbers: the last step shown short, the tokens in %g" \
    has held '^last step: 100001 of 1000000: loss 2.0000, lr 0.00e\+00, -1e\+300 tokens/s, 1e\+300 tokens trained on$'
check "odd numbers: the validation as logged" \
    has held '^validation: val_loss -5.0000 at step 100000 \(the lowest: -5.0000 at step 100000\)$'
check "odd numbers: a time left past any run's, in seconds" \
    has held '^time left: about [0-9.]+e\+[0-9]+ s to step 1000000 '

# ---------------------------------------------------------------- damage
# past the first 64 kB: the tensors (the header alone would fail to open instead)
damage() { printf 'damage!' | dd of="$1" bs=1 seek=70000 conv=notrunc 2> /dev/null; }
cp -r "$tmp/moved" "$tmp/bad1"
damage "$tmp/bad1/checkpoints/ckpt_00000006.h5"
inspect quick "$tmp/bad1"
check "newest checkpoint's tensors damaged, no --verify: its metadata reads, exit 0 (rc $rc)" \
    eval '[ $rc -eq 0 ] && has quick "^resume: resume = auto would continue at step 6 "'
inspect bad1 --verify "$tmp/bad1"
check "newest checkpoint damaged: exit 1 (rc $rc)" test $rc -eq 1
check "newest checkpoint damaged: a warning names it" \
    grep -q '^gentrain: warning: skipping checkpoint .*ckpt_00000006.h5: ' "$tmp/bad1.err"
check "newest checkpoint damaged: resume falls back to step 4" \
    has bad1 '^resume: resume = auto continues at step 4 from checkpoints/ckpt_00000004.h5'
check "newest checkpoint damaged: the log and model still shown" \
    eval 'has bad1 "^last step: 6 of 6" && has bad1 "^model: model.h5: step 6"'
damage "$tmp/bad1/checkpoints/ckpt_00000004.h5"
damage "$tmp/bad1/checkpoints/ckpt_00000002.h5"
inspect bad2 --verify "$tmp/bad1"
check "every checkpoint damaged: exit 1 (rc $rc)" test $rc -eq 1
check "every checkpoint damaged: resume would refuse" \
    has bad2 '^resume: none of them verifies: resume = auto would refuse to start$'
check "every checkpoint damaged: one error line" \
    test "$(grep -c '^gentrain: error: ' "$tmp/bad2.err")" -eq 1

cp -r "$tmp/moved" "$tmp/cuthead"
truncate -s 1000 "$tmp/cuthead/checkpoints/ckpt_00000006.h5"
inspect cuthead "$tmp/cuthead"
check "newest checkpoint cut short, no --verify: exit 1, falls back to step 4 (rc $rc)" \
    eval '[ $rc -eq 1 ] && has cuthead "^resume: resume = auto would continue at step 4 " &&
          grep -q "^gentrain: warning: skipping checkpoint .*ckpt_00000006.h5: " "$tmp/cuthead.err"'

cp -r "$tmp/moved" "$tmp/badlog"
sed -i '3s/.*/{"step": oops/' "$tmp/badlog/log.jsonl"
inspect badlog "$tmp/badlog"
check "a log line not a record: exit 1 (rc $rc)" test $rc -eq 1
check "a log line not a record: its line number named" \
    grep -q '^gentrain: error: inspect: .*log.jsonl: 1 line is not a step record (the first: line 3)$' \
    "$tmp/badlog.err"
check "a log line not a record: the other 5 counted, the last step shown" \
    eval 'has badlog "^log: log.jsonl: 5 step records" && has badlog "^last step: 6 of 6"'

cp -r "$tmp/moved" "$tmp/cut"
printf '{"step":7,"loss":1.2' >> "$tmp/cut/log.jsonl"
inspect cut "$tmp/cut"
check "a last log line without its newline: exit 0 (rc $rc)" test $rc -eq 0
check "a last log line without its newline: a note, step 6 still the last" \
    eval 'has cut "^log: its last line ends without a newline" && has cut "^last step: 6 of 6"'

cp -r "$tmp/moved" "$tmp/badmodel"
echo "not a model" > "$tmp/badmodel/model.h5"
inspect badmodel "$tmp/badmodel"
check "model.h5 not a model: exit 1 (rc $rc)" test $rc -eq 1
check "model.h5 not a model: said so, the rest shown" \
    eval 'has badmodel "^model: model.h5 does not read" && has badmodel "^last step: 6 of 6"'

# ---------------------------------------------------------------- not a run folder
mkdir -p "$tmp/empty"
inspect empty "$tmp/empty"
check "a folder with no run: exit 1, one error line, nothing on stdout (rc $rc)" \
    eval '[ $rc -eq 1 ] && [ ! -s "$tmp/empty.out" ] &&
          [ "$(grep -c "^gentrain: error: inspect: .* holds no gentrain run" "$tmp/empty.err")" -eq 1 ]'
odd="$tmp/odd$(printf '\033')[31mname"
cp -r "$tmp/moved" "$odd"
inspect odd "$odd"
check "a folder named with an escape: exit 0, the name escaped (rc $rc)" \
    eval '[ $rc -eq 0 ] && has odd "^run folder: .*odd\\\\x1b\\[31mname$" &&
          ! grep -q "$(printf "\033")" "$tmp/odd.out"'

# ---------------------------------------------------------------- a file; usage
inspect file "$tmp/moved/model.h5"
check "a file: listed as before (rc $rc)" \
    eval '[ $rc -eq 0 ] && has file "^gentrain model \(format_version [0-9]+\): step 6, "'
inspect vmodel --verify "$tmp/moved/model.h5"
check "--verify a model: listed, then verified (rc $rc)" \
    eval '[ $rc -eq 0 ] && has vmodel "^gentrain model " &&
          has vmodel "^verify: the model of step 6 verifies: its [0-9,]+ parameters match its checksum and are finite$"'
inspect vckpt --verify "$tmp/moved/checkpoints/ckpt_00000004.h5"
check "--verify a checkpoint: verified (rc $rc)" \
    eval '[ $rc -eq 0 ] && has vckpt "^verify: the checkpoint of step 4 verifies: "'
inspect vbadckpt --verify "$tmp/bad1/checkpoints/ckpt_00000006.h5"
check "--verify a damaged checkpoint: exit 1, one error line naming it (rc $rc)" \
    eval '[ $rc -eq 1 ] && [ "$(grep -c "^gentrain: error: checkpoint .*ckpt_00000006.h5 does not verify: " "$tmp/vbadckpt.err")" -eq 1 ] &&
          [ "$(grep -c "^gentrain: error: " "$tmp/vbadckpt.err")" -eq 1 ]'
cp "$tmp/moved/model.h5" "$tmp/badweights.h5"
damage "$tmp/badweights.h5"
inspect vbadmodel --verify "$tmp/badweights.h5"
check "--verify a model with a damaged tensor: exit 1, one error line (rc $rc)" \
    eval '[ $rc -eq 1 ] && [ "$(grep -c "^gentrain: error: " "$tmp/vbadmodel.err")" -eq 1 ] &&
          ! has vbadmodel "^verify: "'
inspect vtext --verify "$tmp/slice.txt"
check "--verify a text file: exit 1, one error line (rc $rc)" \
    eval '[ $rc -eq 1 ] && [ "$(grep -c "^gentrain: error: " "$tmp/vtext.err")" -eq 1 ]'
inspect vdata --verify "$tmp/d.h5"
check "--verify a token dataset: exit 1, neither a model nor a checkpoint (rc $rc)" \
    grep -q "^gentrain: error: inspect: --verify checks gentrain models and checkpoints; .* is neither" \
    "$tmp/vdata.err"
inspect vvalue --verify=yes "$tmp/moved"
check "--verify=yes: a usage error, one line (rc $rc)" \
    eval '[ $rc -eq 2 ] && [ "$(grep -c "^gentrain: error: " "$tmp/vvalue.err")" -eq 1 ]'

[ "$fails" -eq 0 ]
