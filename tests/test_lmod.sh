#!/usr/bin/env bash
# The installed Lmod module file, with the real Lmod: make install into a scratch
# prefix, `module use` its modulefiles folder, `module load gentrain`, then from the
# module's environment alone: gentrain --version, man -w gentrain and gentrain-train
# (MANPATH), and the installed Slurm script's --help and --dry-run (GENTRAIN_DATA).
# `module unload` takes the paths away again. Skipped (77) without Lmod.
set -u
: "${top_srcdir:?}" "${top_builddir:?}" "${VERSION:?}"
. "$top_srcdir/tests/lib.sh"
init=
for f in "${LMOD_PKG:-/nonexistent}/init/bash" /usr/share/lmod/lmod/init/bash \
         /usr/share/lmod/init/bash /opt/lmod/lmod/init/bash; do
    [ -r "$f" ] && { init=$f; break; }
done
if [ -z "$init" ]; then
    echo "SKIP: Lmod is not installed (apt-get install lmod)"
    exit 77
fi
if ! command -v man > /dev/null 2>&1; then
    echo "SKIP: man is not installed (apt-get install man-db)"
    exit 77
fi
test_tmpdir lmod
prefix=$tmp/prefix
mk() { env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL "${MAKE:-make}" -C "$top_builddir" "$@"; }
run_ok install mk install prefix="$prefix"

# A clean environment: no gentrain on PATH before the load, Lmod's own state fresh.
cat > "$tmp/use.sh" <<SCRIPT
set -u
unset MODULEPATH LOADEDMODULES _LMFILES_ GENTRAIN GENTRAIN_DATA MANPATH
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
. "$init" || { echo "cannot source $init"; exit 1; }
command -v gentrain && { echo "gentrain on PATH before module load"; exit 1; }
module use "$prefix/share/modulefiles" || exit 1
module load gentrain || exit 1
module list 2>&1
echo "which=\$(command -v gentrain)"
echo "version=\$(gentrain --version)"
echo "man=\$(man -w gentrain)"
echo "mantrain=\$(man -w gentrain-train)"
echo "mancfg=\$(man -w 5 gentrain.cfg)"
echo "data=\$GENTRAIN_DATA"
"\$GENTRAIN_DATA/slurm/train.sbatch" --help | sed 's/^/help: /'
"\$GENTRAIN_DATA/slurm/train.sbatch" --dry-run "\$GENTRAIN_DATA/examples/shakespeare-cpu.cfg" \
    --steps 7 | sed 's/^/dry: /'
module unload gentrain || exit 1
echo "after=\$(command -v gentrain || echo none)"
SCRIPT
run_ok module bash "$tmp/use.sh"
out=$tmp/module.out
val() { sed -n "s/^$1=//p" "$out" | head -n 1; }
check "module load: gentrain on PATH is the installed one ($(val which))" \
    test "$(val which)" = "$prefix/bin/gentrain"
check "gentrain --version: $(val version)" test "$(val version)" = "gentrain $VERSION"
check "man -w gentrain: $(val man)" test "$(val man)" = "$prefix/share/man/man1/gentrain.1"
check "man -w gentrain-train: $(val mantrain)" \
    test "$(val mantrain)" = "$prefix/share/man/man1/gentrain-train.1"
check "man -w 5 gentrain.cfg: $(val mancfg)" \
    test "$(val mancfg)" = "$prefix/share/man/man5/gentrain.cfg.5"
check "GENTRAIN_DATA is the installed data folder" test "$(val data)" = "$prefix/share/gentrain"
check "train.sbatch --help runs the installed gentrain" \
    grep -q "^help: program: $prefix/bin/gentrain " "$out"
check "train.sbatch --dry-run prints the srun line" grep -q \
    "^dry: srun .* $prefix/bin/gentrain train --config $prefix/share/gentrain/examples/shakespeare-cpu.cfg .* --steps 7" \
    "$out"
check "module unload takes gentrain off PATH" test "$(val after)" = none
[ "$fails" -eq 0 ] || { show "$out"; exit 1; }
