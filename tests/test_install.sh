#!/usr/bin/env bash
# make install into a scratch DESTDIR, then make installcheck there (a few training
# steps with the installed files only); the man pages against the program: a page for
# every verb of `gentrain --help`, every option of a verb's --help in its page, and
# gentrain.cfg(5) listing exactly the keys of the config table
# (src/config/config_keys.c); the job scripts carry the installed program's path; make
# uninstall leaves no file behind.
set -u
: "${GENTRAIN:?}" "${top_srcdir:?}" "${top_builddir:?}" "${VERSION:?}"
. "$top_srcdir/tests/lib.sh"
test_tmpdir install
dest=$tmp/dest prefix=/opt/gentrain-test
mk() { env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL "${MAKE:-make}" -C "$top_builddir" "$@"; }

run_ok install mk install DESTDIR="$dest" prefix="$prefix"
root=$dest$prefix
man1=$root/share/man/man1 man5=$root/share/man/man5 data=$root/share/gentrain
check "bin/gentrain installed and runs" test "$("$root/bin/gentrain" --version)" = "gentrain $VERSION"

# A manual page for each verb the program lists (and no page for a verb it lacks).
verbs=$("$GENTRAIN" --help | sed -n '/^verbs:/,/^$/s/^  \([a-z][a-z]*\) .*/\1/p')
check "gentrain --help lists verbs ($(echo $verbs))" test "$(wc -w <<< "$verbs")" -ge 6
pages=$(cd "$man1" && ls gentrain-*.1 | sed 's/^gentrain-//; s/\.1$//' | sort)
check "one page per verb (pages: $(echo $pages))" test "$pages" = "$(sort <<< "$verbs")"
check "gentrain(1) installed" test -s "$man1/gentrain.1"
for v in $verbs; do
    # every --option the verb's help names appears in its page (troff writes - as \-)
    opts=$("$GENTRAIN" "$v" --help 2>/dev/null | grep -o -- '--[a-z][a-z0-9-]*' | sort -u)
    page=$(sed 's/\\-/-/g; s/\\f[BIRP]//g' "$man1/gentrain-$v.1")
    missing=
    for o in $opts; do grep -q -- "$o" <<< "$page" || missing="$missing $o"; done
    check "gentrain-$v(1) has every option of '$v --help'${missing:+ (missing:$missing)}" \
        test -z "$missing"
    check "gentrain(1) names gentrain-$v(1)" grep -q "gentrain\\\\-$v (1)" "$man1/gentrain.1"
done

# gentrain.cfg(5): exactly the keys of the table in src/config/config_keys.c.
table=$(sed -n '/^const key_def config_keys\[\] = {/,/^};/p' "$top_srcdir/src/config/config_keys.c" |
    grep -o 'KEY_[A-Z0-9]*([a-z_0-9]*' | sed 's/.*(//' | sort)
inpage=$(sed -n '/^\.SH KEYS/,/^\.SH /p' "$man5/gentrain.cfg.5" |
    sed -n 's/^\.BR \([^ ]*\) .*/\1/p' | sed 's/\\//g' | sort)
check "the config table has keys ($(wc -l <<< "$table"))" test "$(wc -l <<< "$table")" -ge 30
d=$(diff <(echo "$table") <(echo "$inpage"))
check "gentrain.cfg(5) lists exactly the table's keys${d:+ (diff: $(echo $d))}" test -z "$d"
check "gentrain.cfg(5) names the version" grep -q "gentrain $VERSION" "$man5/gentrain.cfg.5"
if command -v man > /dev/null 2>&1; then
    for p in 1/gentrain 1/gentrain-train 5/gentrain.cfg; do
        check "man -l renders ${p#*/}(${p%/*})" \
            bash -c "MANWIDTH=80 man -l '$root/share/man/man${p%/*}/${p#*/}.${p%/*}' 2>&1 | grep -q NAME"
    done
fi

# Job scripts: the installed program's path written in, executable.
for js in slurm/train.sbatch pbs/train.pbs; do
    check "$js installed executable" test -x "$data/$js"
    check "$js names $prefix/bin/gentrain" \
        grep -q "^GT_INSTALLED_GENTRAIN='$prefix/bin/gentrain'\$" "$data/$js"
done
check "examples installed" test -s "$data/examples/shakespeare-cpu.cfg"
check "docs installed (README.md, docs/ beside it)" test -s "$root/share/doc/gentrain/README.md" -a \
    -s "$root/share/doc/gentrain/docs/parallelism.md"
check "module file installed with the prefix" \
    grep -q "prepend_path(\"PATH\", \"$prefix/bin\")" "$root/share/modulefiles/gentrain/$VERSION.lua"

# installcheck against this DESTDIR: trains with the installed files only.
run_ok installcheck mk installcheck DESTDIR="$dest" prefix="$prefix"
check "installcheck said all passed" grep -q "installcheck: all passed" "$tmp/installcheck.out"

run_ok uninstall mk uninstall DESTDIR="$dest" prefix="$prefix"
left=$(find "$dest" -type f)
check "make uninstall leaves no file${left:+ (left: $(echo $left))}" test -z "$left"

[ "$fails" -eq 0 ] || exit 1
