#!/usr/bin/env bash
# check-layers.sh [ROOT] — checks every `#include "x.h"` of the C, C++ and CUDA sources
# under ROOT (default: the source tree this script is in) against the layer order of
# ROOT/src/layers.txt: a file includes only headers of its own folder and of the
# layers below it. Also refused: a source folder that no layer names (a new folder
# must be placed), a quoted include that is in no layer folder, and two headers of the
# same name (includes name the header alone, Makefile.am's GT_INCLUDE_DIRS).
# Prints one line per violation, "FILE:LINE: ...", and exits 1 when there is one;
# otherwise one line of counts and exit 0 (2: the layer file cannot be read).
# Scanned: src/ and io/ (every folder), offload/ (its own folder; offload/tests are
# test programs, as tests/ and scripts/ are, and may include anything).
set -u
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
layers=$root/src/layers.txt
[ -r "$layers" ] || { echo "check-layers: cannot read $layers" >&2; exit 2; }
cd "$root" || exit 2

# Every source file: src/ and io/ at any depth, offload/ at its top.
files=$( { find src io -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' \
             -o -name '*.cuh' -o -name '*.cpp' \) 2> /dev/null
           find offload -maxdepth 1 -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' \
             -o -name '*.cuh' \) 2> /dev/null; } | LC_ALL=C sort)

# awk reads the layer file first, then the list of files (to learn each header's
# folder), then every file's own lines.
# shellcheck disable=SC2086
FILES_LIST=$files awk '
function folder(path,    d) { d = path; sub(/\/[^\/]*$/, "", d); return d }
function base(path,    b) { b = path; sub(/^.*\//, "", b); return b }
FNR == 1 { nfile++ }
nfile == 1 {                       # the layer file
    sub(/#.*/, "")
    if (NF == 0) next
    n_layers++
    for (i = 1; i <= NF; i++) {
        if ($i in layer) { printf "%s:%d: folder %s is named twice\n", FILENAME, FNR, $i; bad++ }
        layer[$i] = n_layers; names[n_layers] = names[n_layers] (i > 1 ? " " : "") $i
    }
    if (n_layers == 1) {           # learn the files once the first layer is read
        nf = split(ENVIRON["FILES_LIST"], list, "\n")
        for (k = 1; k <= nf; k++) {
            f = list[k]; if (f == "") continue
            h = base(f)
            if (h in home && home[h] != folder(f)) {
                printf "%s: a header of the same name is in %s (includes name the header alone)\n", f, home[h]; bad++
            }
            home[h] = folder(f)
        }
    }
    next
}
FNR == 1 {
    n_src++
    d = folder(FILENAME)
    if (!(d in layer) && !(d in told)) {
        printf "%s: folder %s is in no layer of src/layers.txt\n", FILENAME, d; told[d] = 1; bad++
    }
}
/^[ \t]*#[ \t]*include[ \t]*"/ {
    h = $0; sub(/^[^"]*"/, "", h); sub(/".*$/, "", h)
    d = folder(FILENAME)
    if (!(d in layer)) next
    b = base(h)
    if (!(b in home)) {
        printf "%s:%d: includes \"%s\", which is in no layer folder\n", FILENAME, FNR, h; bad++; next
    }
    hd = home[b]
    n_inc++
    if (hd == d) next
    if (!(hd in layer)) {
        printf "%s:%d: includes \"%s\" of %s, a folder in no layer\n", FILENAME, FNR, h, hd; bad++; next
    }
    if (layer[hd] < layer[d]) next
    if (layer[hd] == layer[d])
        printf "%s:%d: includes \"%s\" of %s, a peer of %s (layer %d: %s)\n", FILENAME, FNR, h, hd, d, layer[d], names[layer[d]]
    else
        printf "%s:%d: includes \"%s\" of %s (layer %d), above %s (layer %d)\n", FILENAME, FNR, h, hd, layer[hd], d, layer[d]
    bad++
}
END {
    if (bad) exit 1
    printf "check-layers: %d files, %d includes, %d layers: every include within its layer or below\n", n_src, n_inc, n_layers
}
' "$layers" $files
