#!/bin/bash
# Installs what the optional tests need, so that a newcomer's `make check` runs (and
# skips) the same tests as CI: Slurm and munge (tests/test_slurm.sh), matplotlib
# (tests/test_plot_log.sh), Lmod and man (tests/test_lmod.sh), and in the Python virtual
# environment TORCH_VENV (scripts/tokenizers-venv.sh) the tokenizers package
# (tests/test_bpe_ref.sh), h5py (tests/test_h5py_vds.sh) and EasyBuild
# (tests/test_recipes.sh). Each is optional: one that cannot be installed is named and
# its test skips, saying why. Debian / Ubuntu; the apt part needs root (or sudo).
# Exit status: 0, also when some could not be installed (they are listed).
set -u
cd "$(dirname "$0")/.." || exit 1
missing_opt=

if [ "$(id -u)" -eq 0 ]; then SUDO=; elif command -v sudo > /dev/null 2>&1; then SUDO=sudo
else SUDO=none; fi
apt_get() {
    # shellcheck disable=SC2086
    timeout 900 $SUDO env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=900 \
        -o Dpkg::Use-Pty=0 "$@"
}
have_pkg() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }

# Debian packages: one apt-get call for all that are missing (an update first only
# when the install fails on a stale package list).
# slurm-wlm munge: test_slurm.sh; python3-matplotlib: test_plot_log.sh; lmod man-db:
# test_lmod.sh; python3-venv: the virtual environment below.
APT_OPTIONAL="slurm-wlm munge python3-matplotlib lmod man-db python3-venv"
want=
for p in $APT_OPTIONAL; do have_pkg "$p" || want="$want $p"; done
if [ -n "$want" ]; then
    if [ "$SUDO" = none ] || ! command -v apt-get > /dev/null 2>&1; then
        echo "install-test-deps: cannot install$want (no apt-get, or not root and no sudo)" >&2
        missing_opt="$missing_opt$want"
    else
        echo "install-test-deps: installing$want"
        # shellcheck disable=SC2086
        if ! apt_get install -y -q $want > /dev/null 2>&1 &&
           ! { apt_get update -q > /dev/null 2>&1 && apt_get install -y -q $want > /dev/null 2>&1; }; then
            # one at a time, so one that is unavailable does not keep the others out
            for p in $want; do
                apt_get install -y -q "$p" > /dev/null 2>&1 || missing_opt="$missing_opt $p"
            done
        fi
    fi
fi

# Python packages in the test environment (pip; needs the network the first time).
if PY=$(scripts/tokenizers-venv.sh); then
    for mod in h5py:h5py easybuild.main:easybuild-framework \
               easybuild.easyblocks:easybuild-easyblocks pycodestyle:pycodestyle; do
        if ! "$PY" -c "import ${mod%%:*}" > /dev/null 2>&1 &&
           ! timeout 900 "$PY" -m pip install -q "${mod#*:}" > /dev/null 2>&1; then
            missing_opt="$missing_opt ${mod#*:}(pip)"
        fi
    done
else
    missing_opt="$missing_opt tokenizers(pip) h5py(pip) easybuild(pip)"
fi

if [ -n "$missing_opt" ]; then
    echo "install-test-deps: not installed:$missing_opt; their tests will skip, saying why" >&2
else
    echo "install-test-deps: all optional test dependencies are installed"
fi
exit 0
