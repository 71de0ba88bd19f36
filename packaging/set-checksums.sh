#!/bin/bash
# Writes the sha256 of a release tarball (gentrain-VERSION.tar.gz, from `make dist`)
# into the Spack recipe and the EasyBuild easyconfig of that VERSION in this folder:
#   packaging/set-checksums.sh gentrain-0.1.0.tar.gz
# A recipe of another version, or a tarball without one, is an error (exit 1).
set -u
if [ $# -ne 1 ] || [ ! -f "$1" ]; then
    echo "usage: $0 gentrain-VERSION.tar.gz" >&2
    exit 2
fi
here=$(cd "$(dirname "$0")" && pwd) || exit 1
base=$(basename "$1")
version=${base#gentrain-}
version=${version%.tar.gz}
if [ "$version" = "$base" ] || [ -z "$version" ]; then
    echo "set-checksums: $base is not named gentrain-VERSION.tar.gz" >&2
    exit 1
fi
sum=$(sha256sum "$1" | cut -d' ' -f1) || exit 1
spack=$here/spack/gentrain/package.py
eb=$(ls "$here"/easybuild/gentrain-"$version"-*.eb 2>/dev/null | head -n 1)
grep -q "^    version(\"$version\", sha256=\"[0-9a-f]\{64\}\")" "$spack" ||
    { echo "set-checksums: $spack has no version(\"$version\", sha256=...) line" >&2; exit 1; }
[ -n "$eb" ] && grep -q "^version = '$version'\$" "$eb" ||
    { echo "set-checksums: no easyconfig of version $version in $here/easybuild" >&2; exit 1; }
sed -i "s/^\(    version(\"$version\", sha256=\"\)[0-9a-f]\{64\}/\1$sum/" "$spack" || exit 1
sed -i "s/^checksums = \['[0-9a-f]\{64\}'\]\$/checksums = ['$sum']/" "$eb" || exit 1
grep -q "$sum" "$spack" && grep -q "$sum" "$eb" ||
    { echo "set-checksums: could not write the checksum" >&2; exit 1; }
echo "set-checksums: $sum written for $version into $spack and $eb"
