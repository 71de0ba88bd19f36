#!/usr/bin/env bash
# The OpenBLAS core check (src/kernels/blas_core.c) end to end:
#  - OpenBLAS made to run a generic core as if it had chosen it itself
#    (OPENBLAS_CORETYPE=Prescott marked as gentrain's own setting, which is how
#    gentrain sees its own earlier choice): gentrain restarts itself with the core for
#    this CPU, says so in one line, and trains to the same losses as a run that never
#    had the generic core (within float rounding of another kernel), on one process
#    and under mpirun with 2 ranks;
#  - a user's own OPENBLAS_CORETYPE=Prescott is kept, and the line says what the CPU
#    could run instead;
#  - a core this OpenBLAS does not know, asked for by gentrain, does not loop; one a
#    user asked for is named as not taken;
#  - started through the dynamic loader by hand (so /proc/self/exe is the loader, not
#    gentrain), the generic core is not "corrected" by executing the loader with
#    gentrain's arguments: one warning, and the run trains on the core it has.
# Skipped on a CPU without AVX (nothing to correct there).
set -u
: "${GENTRAIN:?GENTRAIN must point at the gentrain binary}"
: "${top_srcdir:?top_srcdir must point at the source tree}"
. "$top_srcdir/tests/lib.sh"
test_tmpdir blas_fixup

if ! grep -qw avx2 /proc/cpuinfo; then
    echo "SKIP: this CPU has no AVX2, OpenBLAS's generic core is the right one"
    exit 77
fi
prepare_slice
args=(train --data "$tmp/d.h5" --n_layer 2 --n_head 2 --n_embd 64 --block_size 32
      --batch_size 4 --steps 4 --eval_every 0 --val_dataset none --threads 1 --seed 3)

# run NAME ENV...: one training run with the environment changed as given
run() {
    local name=$1
    shift
    run_ok "$name" timeout 300 env -u OPENBLAS_CORETYPE -u GENTRAIN_BLAS_CORE_SET \
        -u GENTRAIN_BLAS_CORE_WAS "$@" "$GENTRAIN" "${args[@]}" --out "$tmp/$name" \
        --log "$tmp/$name.jsonl"
}
blas_line() { grep '^BLAS: ' "$tmp/$1.out"; }

run auto
auto_core=$(blas_line auto | sed -n 's/^BLAS: OpenBLAS core \([^ ]*\) .*/\1/p')
echo "    OpenBLAS's own choice: $(blas_line auto)"

run forced OPENBLAS_CORETYPE=Prescott GENTRAIN_BLAS_CORE_SET=Prescott
echo "    after the forced generic core: $(blas_line forced)"
check "generic core: corrected, the line names the core it replaced" \
    grep -q "^BLAS: OpenBLAS core .*set by gentrain (OpenBLAS had chosen Prescott" \
    "$tmp/forced.out"
fixed=$(blas_line forced | sed -n 's/^BLAS: OpenBLAS core \([^ ]*\) .*/\1/p')
check "the corrected core ($fixed) is not the generic one" test -n "$fixed" -a "$fixed" != Prescott
check "the corrected run trains as the uncorrected one (1e-4)" \
    compare_logs "$tmp/auto.jsonl" "$tmp/forced.jsonl" 1e-4 4

run user OPENBLAS_CORETYPE=Prescott
echo "    with the user's own setting: $(blas_line user)"
check "user's OPENBLAS_CORETYPE=Prescott kept and named as theirs" \
    grep -q "^BLAS: OpenBLAS core Prescott .*set by OPENBLAS_CORETYPE although this CPU could run" \
    "$tmp/user.out"

# gentrain asked for a core this library lacks (a name OpenBLAS ignores): no loop
# For a name it lacks, OpenBLAS picks a core by the CPU's features: on the Xeons the
# core it picks by itself, on AMD Zen 3 Haswell where its own choice is Zen. Either is
# of the level gentrain's line shows for the run that set nothing.
auto_level=$(blas_line auto | sed -n 's/^BLAS: OpenBLAS core [^ ]* (\([^)]*\)).*/\1/p')
run unknown OPENBLAS_CORETYPE=NoSuchCore GENTRAIN_BLAS_CORE_SET=NoSuchCore
check "a core the library lacks: the run goes on with the library's choice ($auto_level)" \
    grep -q "^BLAS: OpenBLAS core [^ ]* ($auto_level), set by gentrain" "$tmp/unknown.out"

run user_unknown OPENBLAS_CORETYPE=NoSuchCore
check "a user's core the library lacks: named as not taken" \
    grep -q "^BLAS: OpenBLAS core [^ ]* ($auto_level), chosen by OpenBLAS, which did not take \
OPENBLAS_CORETYPE=NoSuchCore" "$tmp/user_unknown.out"

loader=$(readelf -l "$GENTRAIN" 2>/dev/null |
    sed -n 's/.*Requesting program interpreter: \([^]]*\)].*/\1/p')
if [ -n "$loader" ] && [ -x "$loader" ]; then
    run loader OPENBLAS_CORETYPE=Prescott GENTRAIN_BLAS_CORE_SET=Prescott \
        "$loader"
    check "through $loader: no restart, one warning that says why" \
        grep -q "cannot restart with OPENBLAS_CORETYPE=.*started through another program" \
        "$tmp/loader.err"
    check "through $loader: the line says the generic core stays" \
        grep -q "^BLAS: OpenBLAS core Prescott .*restart with OPENBLAS_CORETYPE=.* failed" \
        "$tmp/loader.out"
    check "through $loader: trains as the corrected run (1e-4)" \
        compare_logs "$tmp/auto.jsonl" "$tmp/loader.jsonl" 1e-4 4
else
    echo "    (no program interpreter found for $GENTRAIN: the loader part is skipped)"
fi

if [ -n "${MPIEXEC:-}" ]; then
    run_ok mpi timeout 300 env -u GENTRAIN_BLAS_CORE_WAS OPENBLAS_CORETYPE=Prescott \
        GENTRAIN_BLAS_CORE_SET=Prescott "$MPIEXEC" -np 2 --bind-to none "$GENTRAIN" \
        "${args[@]}" --batch_size 2 --out "$tmp/mpi" --log "$tmp/mpi.jsonl"
    check "mpirun -np 2: both ranks restart and train (one BLAS line, corrected)" \
        grep -q "^BLAS: OpenBLAS core $fixed .*set by gentrain" "$tmp/mpi.out"
    check "mpirun -np 2 after the correction: same losses as one process (1e-4)" \
        compare_logs "$tmp/auto.jsonl" "$tmp/mpi.jsonl" 1e-4 4
else
    echo "    (no MPIEXEC: the mpirun part is skipped)"
fi
[ "$fails" -eq 0 ]
