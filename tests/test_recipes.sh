#!/usr/bin/env bash
# The Spack recipe and the EasyBuild easyconfig (packaging/) against what configure
# really accepts: their version is configure's, every configure option they pass is
# one `configure --help` lists, the Spack recipe names the cuda and nccl variants and
# depends on mpi, openblas and hdf5+mpi; packaging/set-checksums.sh writes a tarball's
# sha256 into both. Then EasyBuild's own contribution check (style and checksums) on
# the easyconfig; that part skips (77) without EasyBuild in TORCH_VENV or without Lmod,
# which EasyBuild needs (scripts/install-test-deps.sh installs both).
set -u
: "${top_srcdir:?}" "${VERSION:?}"
. "$top_srcdir/tests/lib.sh"
test_tmpdir recipes
spack=$top_srcdir/packaging/spack/gentrain/package.py
eb=$top_srcdir/packaging/easybuild/gentrain-$VERSION-gompi-2023a.eb
check "a Spack recipe" test -s "$spack"
check "an easyconfig of version $VERSION" test -s "$eb"
"$top_srcdir/configure" --help > "$tmp/configure-help.txt" 2>&1
check "configure --help" grep -q -- '--with-cuda' "$tmp/configure-help.txt"

# configure's options and variables the recipes pass, each in configure --help.
accepted() {
    local o=$1
    case "$o" in
        --with-*|--without-*) o=${o%%=*}; o=${o#--without-}; o=${o#--with-}
            grep -q -- "--with\(out\)\?-$o\b" "$tmp/configure-help.txt" ;;
        --enable-*|--disable-*) o=${o%%=*}; o=${o#--disable-}; o=${o#--enable-}
            grep -q -- "--\(en\|dis\)able-$o\b" "$tmp/configure-help.txt" ;;
        *) grep -q "^  $o " "$tmp/configure-help.txt" ;;
    esac
}
opts=$(grep -o '"--[a-z-]*' "$spack" | tr -d '"' | sort -u)
vars=$(grep -o '"[A-Z0-9_]*FLAGS=\|"[A-Z0-9_]*LIBS=' "$spack" | tr -d '"=' | sort -u)
check "the Spack recipe passes configure options ($(echo $opts))" test -n "$opts"
for o in $opts $vars; do
    [ "$o" = LDFLAGS ] && continue   # autoconf's own, always accepted
    check "Spack: configure accepts $o" accepted "$o"
done
for o in $(sed -n "s/^configopts = '\(.*\)'/\1/p" "$eb"); do
    check "EasyBuild: configure accepts $o" accepted "$o"
done

check "Spack: version $VERSION" grep -q "^    version(\"$VERSION\", sha256=\"[0-9a-f]\{64\}\")" "$spack"
check "EasyBuild: version $VERSION" grep -q "^version = '$VERSION'\$" "$eb"
check "Spack: cuda variant" grep -q '^    variant("cuda",' "$spack"
check "Spack: nccl variant" grep -q '^        "nccl",$' "$spack"
check "Spack: nccl variant only with +cuda" grep -q 'when="+cuda",' "$spack"
for d in '"mpi"' '"openblas threads=openmp"' '"hdf5+mpi"' '"cuda@12:", when="+cuda"' \
         '"nccl", when="+nccl"'; do
    check "Spack: depends_on($d)" grep -q "^    depends_on($d" "$spack"
done
check "the Spack recipe is Python" python3 -c \
    "import ast, sys; ast.parse(open(sys.argv[1]).read())" "$spack"

# set-checksums.sh on copies, with a stand-in tarball of this version.
mkdir -p "$tmp/p/spack/gentrain" "$tmp/p/easybuild"
cp "$top_srcdir/packaging/set-checksums.sh" "$tmp/p/"
cp "$spack" "$tmp/p/spack/gentrain/" && cp "$eb" "$tmp/p/easybuild/"
head -c 4096 /dev/urandom > "$tmp/gentrain-$VERSION.tar.gz"
want=$(sha256sum "$tmp/gentrain-$VERSION.tar.gz" | cut -d' ' -f1)
run_ok setsums bash "$tmp/p/set-checksums.sh" "$tmp/gentrain-$VERSION.tar.gz"
check "set-checksums: Spack recipe has the tarball's sha256" \
    grep -q "sha256=\"$want\"" "$tmp/p/spack/gentrain/package.py"
check "set-checksums: easyconfig has the tarball's sha256" \
    grep -q "^checksums = \['$want'\]" "$tmp/p/easybuild/$(basename "$eb")"
cp "$tmp/gentrain-$VERSION.tar.gz" "$tmp/gentrain-9.9.tar.gz"
bash "$tmp/p/set-checksums.sh" "$tmp/gentrain-9.9.tar.gz" > /dev/null 2> "$tmp/wrong.err"
check "set-checksums: another version is refused" test $? -eq 1 -a -s "$tmp/wrong.err"

# EasyBuild's own check.
TORCH_VENV=${TORCH_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/gentrain/torch-venv}
PY=$TORCH_VENV/bin/python
lmod_cmd=${LMOD_CMD:-}
for f in /usr/share/lmod/lmod/libexec/lmod /usr/share/lmod/libexec/lmod; do
    [ -z "$lmod_cmd" ] && [ -x "$f" ] && lmod_cmd=$f
done
skip=
if ! "$PY" -c 'import easybuild.main, easybuild.easyblocks' > /dev/null 2>&1; then
    skip="EasyBuild does not import in $TORCH_VENV (pip install easybuild-framework easybuild-easyblocks there)"
elif [ -z "$lmod_cmd" ]; then
    skip="Lmod is not installed, EasyBuild needs it (apt-get install lmod)"
fi
if [ -n "$skip" ]; then
    [ "$fails" -eq 0 ] || exit 1
    echo "SKIP: EasyBuild's check of the easyconfig: $skip"
    exit 77
fi
( cd "$tmp" && LMOD_CMD=$lmod_cmd HOME=$tmp timeout 300 "$PY" -m easybuild.main \
    --allow-use-as-root-and-accept-consequences --check-contrib "$eb" ) > "$tmp/eb.out" 2>&1
rc=$?
check "eb --check-contrib passes (rc $rc)" grep -q "All contribution checks PASSed" "$tmp/eb.out"
check "eb --check-contrib: style PASS" grep -q "All style checks PASSed" "$tmp/eb.out"
[ "$fails" -eq 0 ] || { show "$tmp/eb.out"; exit 1; }
