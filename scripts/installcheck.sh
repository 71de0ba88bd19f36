#!/bin/bash
# `make installcheck`: uses only what `make install` put in place (the program, its
# manual pages, the example config and text, the job scripts) to prepare the example
# data, train a few steps, sample, and dry-run the Slurm and PBS scripts; all in a
# fresh folder, with the installed bin folder first on PATH.
# Environment (from the Makefile, DESTDIR included): GT_BINDIR, GT_PKGDATADIR,
# GT_MANDIR, GT_DOCDIR, GT_VERSION; TMPDIR for the scratch folder.
set -u
: "${GT_BINDIR:?}" "${GT_PKGDATADIR:?}" "${GT_MANDIR:?}" "${GT_DOCDIR:?}" "${GT_VERSION:?}"

fail() { echo "installcheck: FAIL: $*" >&2; exit 1; }
ok() { echo "installcheck: ok: $*"; }

prog=$GT_BINDIR/gentrain
[ -x "$prog" ] || fail "no installed program at $prog"
work=$(mktemp -d "${TMPDIR:-/tmp}/gentrain-installcheck.XXXXXX") || fail "mktemp"
trap 'rm -rf "$work"' EXIT
cd "$work" || fail "cd $work"
export PATH="$GT_BINDIR:$PATH"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
[ "$(command -v gentrain)" = "$prog" ] || fail "gentrain on PATH is not $prog"

v=$(gentrain --version) || fail "gentrain --version failed"
[ "$v" = "gentrain $GT_VERSION" ] || fail "gentrain --version says '$v', not 'gentrain $GT_VERSION'"
ok "$v"

# The manual pages, as man finds them (the files, where man is not installed).
for page in gentrain.1 gentrain-train.1 gentrain-sample.1 gentrain-prepare.1 gentrain.cfg.5; do
    name=${page%.*} sec=${page##*.}
    [ -s "$GT_MANDIR/man$sec/$page" ] || fail "no $GT_MANDIR/man$sec/$page"
    if command -v man >/dev/null 2>&1; then
        found=$(MANPATH=$GT_MANDIR man -w "$sec" "$name" 2>&1) ||
            fail "man -w $sec $name with MANPATH=$GT_MANDIR: $found"
        [ "$found" -ef "$GT_MANDIR/man$sec/$page" ] || fail "man found $found for $page"
    fi
done
ok "manual pages"
[ -s "$GT_DOCDIR/README.md" ] || fail "no README.md in $GT_DOCDIR"

ex=$GT_PKGDATADIR/examples
[ -s "$ex/shakespeare-cpu.cfg" ] && [ -s "$ex/tinyshakespeare.txt" ] ||
    fail "the examples are not in $ex"

# A few steps of the installed example config, on its installed text.
gentrain prepare "$ex/tinyshakespeare.txt" -o data.h5 > prepare.out 2>&1 ||
    fail "prepare: $(tail -n 3 prepare.out)"
gentrain train --config "$ex/shakespeare-cpu.cfg" --data data.h5 --steps 4 \
    --warmup_steps 1 --eval_every 0 --eval_batches 2 --threads 2 --out run \
    > train.out 2>&1 || fail "train: $(tail -n 5 train.out)"
[ -s run/model.h5 ] || fail "train wrote no run/model.h5"
n=$(wc -l < run/log.jsonl)
[ "$n" -ge 4 ] || fail "run/log.jsonl has $n lines, expected a line per step (4)"
gentrain sample --checkpoint run --prompt "ROMEO:" --tokens 16 --threads 1 > sample.out \
    2> sample.err || fail "sample: $(tail -n 3 sample.err)"
head -c 6 sample.out | grep -q '^ROMEO:' || fail "sample does not start with its prompt"
[ "$(wc -c < sample.out)" -gt 16 ] || fail "sample printed $(wc -c < sample.out) bytes"
ok "prepare, train 4 steps, sample with the installed example"

# The job scripts: --help names the installed program, --dry-run checks and prints.
for js in slurm/train.sbatch pbs/train.pbs; do
    s=$GT_PKGDATADIR/$js
    [ -x "$s" ] || fail "no executable $s"
    h=$(env -u GENTRAIN "$s" --help) || fail "$js --help failed"
    used=$(sed -n 's/^program: \([^ ]*\).*/\1/p' <<< "$h")
    [ -n "$used" ] && [ "$used" -ef "$prog" ] ||
        fail "$js --help runs '$used', not the installed $prog"
    grep -q "^example configs: .*examples" <<< "$h" || fail "$js --help names no examples"
done
d=$(env -u GENTRAIN "$GT_PKGDATADIR/slurm/train.sbatch" --dry-run "$ex/shakespeare-cpu.cfg" \
    --steps 10) || fail "train.sbatch --dry-run failed: $d"
grep -q "^srun .* train --config $ex/shakespeare-cpu.cfg .* --steps 10" <<< "$d" ||
    fail "train.sbatch --dry-run printed: $d"
d=$(env -u GENTRAIN GT_CONFIG="$ex/shakespeare-cpu.cfg" "$GT_PKGDATADIR/pbs/train.pbs" \
    --dry-run) || fail "train.pbs --dry-run failed: $d"
grep -q "^mpirun .* train --config $ex/shakespeare-cpu.cfg" <<< "$d" ||
    fail "train.pbs --dry-run printed: $d"
ok "job scripts (--help, --dry-run)"
echo "installcheck: all passed"
