# lib.sh — what the shell tests share. Source it after checking the environment:
#   . "$top_srcdir/tests/lib.sh"; test_tmpdir NAME
# Each check prints one line (ok/FAIL), so a failing log says which one.

# Makes $tmp (removed when the script exits) under TEST_TMPDIR (the build's test
# folder, so `make distcheck` finds nothing left in the source tree).
test_tmpdir() {
    tmp=$(mktemp -d "${TEST_TMPDIR:-${TMPDIR:-/tmp}}/$1.XXXXXX") || exit 99
    trap 'rm -rf "$tmp"' EXIT
}

fails=0
ok()   { echo "ok   $*"; }
fail() { echo "FAIL $*"; fails=$((fails + 1)); }
# check DESCRIPTION COMMAND...: ok when the command succeeds.
check() { local what=$1; shift; if "$@"; then ok "$what"; else fail "$what"; fi; }
# The last lines of a file, indented, for a failure's context.
show() { sed -e 's/^/    | /' "$1" | tail -n 15; }
