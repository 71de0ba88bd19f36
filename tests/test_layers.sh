#!/usr/bin/env bash
# The layer order of the sources (src/layers.txt), checked by scripts/check-layers.sh:
#  - the tree as it is: every include within its own layer or below;
#  - on a scratch copy, each kind of wrong include is caught and named: one that goes
#    up a layer (util.c, at the bottom, including the model), one between peers (the
#    attention kernel including the BF16 products), a folder no layer names.
set -u
: "${top_srcdir:?top_srcdir must point at the source tree}"
. "$top_srcdir/tests/lib.sh"
test_tmpdir layers
LAYERS=(bash "$top_srcdir/scripts/check-layers.sh")

run_ok tree "${LAYERS[@]}" "$top_srcdir" && show "$tmp/tree.out"

# A scratch copy of what the check reads, to break on purpose.
copy() {
    rm -rf "$tmp/t" && mkdir -p "$tmp/t" &&
        cp -R "$top_srcdir/src" "$top_srcdir/io" "$tmp/t/" &&
        mkdir "$tmp/t/offload" && cp "$top_srcdir"/offload/*.[ch] "$tmp/t/offload/"
}
# expect_bad NAME PATTERN: the check on the copy exits 1 and prints PATTERN.
expect_bad() {
    "${LAYERS[@]}" "$tmp/t" > "$tmp/$1.out" 2>&1
    local rc=$?
    show "$tmp/$1.out"
    check "$1: refused (exit $rc)" test "$rc" -eq 1
    check "$1: the line names it" grep -q -- "$2" "$tmp/$1.out"
}

copy || exit 1
printf '#include "model.h"\n' >> "$tmp/t/src/base/util.c"
expect_bad up 'src/base/util.c:[0-9]*: includes "model.h" of src/model (layer [0-9]*), above src/base (layer 1)'

copy || exit 1
printf '#include "backend.h"\n' >> "$tmp/t/src/layout/layout.c"
expect_bad peer 'layout.c:[0-9]*: includes "backend.h" of src/kernels, a peer of src/layout'

copy || exit 1
mkdir "$tmp/t/src/newfolder" && printf '#include "util.h"\n' > "$tmp/t/src/newfolder/x.c"
expect_bad folder 'src/newfolder/x.c: folder src/newfolder is in no layer'

[ "$fails" -eq 0 ]
