#!/bin/sh
# make_launchers.sh DIR [MPIEXEC]: writes DIR/mpirun, DIR/mpiexec and DIR/srun (each only
# where this machine has it) and DIR/<MPIEXEC's name> (configure's choice, written last
# so that it wins over a same-named one on PATH): small scripts that start the real
# launcher with AddressSanitizer's slow, full unwinding of allocation stacks
# (fast_unwind_on_malloc=0) for every process it starts. `make check` puts DIR first on
# the tests' PATH and points MPIEXEC at it.
#
# Why: Open MPI is built without frame pointers, so under the fast unwinder an
# allocation made in MPI_Init has no usable frame past the allocator, and
# tests/lsan.supp cannot tell Open MPI's start-up leaks from gentrain's. The full
# unwinder finds the library frames, but costs ~2 s of CPU per rank's MPI_Init and
# ~0.5 s per short gentrain run; only processes started by a launcher run MPI_Init
# (gentrain calls it only under one), so every other test process keeps the fast one.
set -eu
dir=${1:?usage: make_launchers.sh DIR [MPIEXEC]}
mpiexec=${2:-}
rm -rf "$dir"
mkdir -p "$dir"

write_launcher() { # write_launcher NAME REAL
    cat > "$dir/$1" <<EOF
#!/bin/sh
# Written by tests/make_launchers.sh for make check: $2 with the full unwinder.
ASAN_OPTIONS="\${ASAN_OPTIONS:+\$ASAN_OPTIONS:}fast_unwind_on_malloc=0"
export ASAN_OPTIONS
exec '$2' "\$@"
EOF
    chmod +x "$dir/$1"
}

for name in mpirun mpiexec srun; do
    real=$(command -v "$name" 2> /dev/null) || continue
    case $real in /*) write_launcher "$name" "$real" ;; esac
done
if [ -n "$mpiexec" ]; then
    real=$(command -v "$mpiexec" 2> /dev/null) || {
        echo "make_launchers.sh: MPIEXEC=$mpiexec: not found" >&2
        exit 1
    }
    write_launcher "${mpiexec##*/}" "$real"
fi
