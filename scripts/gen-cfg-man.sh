#!/bin/bash
# Writes the gentrain.cfg(5) manual page to standard output: the page's text from
# TEMPLATE (man/gentrain.cfg.5.in) with its @KEYS@ line replaced by the key table
# of `GENTRAIN train --help` (group, name, default, meaning, range), and @VERSION@ by
# `GENTRAIN --version`. The program prints that table from the same rows its parser
# reads (src/config/config_keys.c), so the page cannot drift from the keys the program takes.
#
#   scripts/gen-cfg-man.sh path/to/gentrain man/gentrain.cfg.5.in > gentrain.cfg.5
set -u
if [ $# -ne 2 ]; then
    echo "usage: $0 GENTRAIN TEMPLATE" >&2
    exit 2
fi
prog=$1 template=$2

help=$("$prog" train --help) || { echo "$0: '$prog train --help' failed" >&2; exit 1; }
version=$("$prog" --version) || { echo "$0: '$prog --version' failed" >&2; exit 1; }

# The key section of the help: from the "Keys:" paragraph to "examples:". A group is
# a line "title:" at column 0, a key a line "  name  default  text", its text going on
# in lines indented past the default column.
keys=$(awk '
function esc(s) { gsub(/\\/, "\\e", s); gsub(/-/, "\\-", s); return s }
function flush() {
    if (name == "") return
    print ".TP"
    print ".BR " esc(name) " \" = " (def == "\x27\x27" ? "(empty)" : esc(def)) "\""
    t = esc(text)
    sub(/^[.\x27]/, "\\\\\\&&", t)
    print t
    name = ""
}
/^Keys:/ { inkeys = 1; next }
!inkeys { next }
/^examples:/ { flush(); exit }
/^[a-z].*:$/ { flush(); sub(/:$/, ""); print ".SS \"" esc($0) "\""; ngroups++; next }
/^  [a-z][a-z0-9_]* +[^ ]+ +/ {
    flush()
    name = $1; def = $2
    text = $0; sub(/^  [^ ]+ +[^ ]+ +/, "", text)
    nkeys++
    next
}
/^      +[^ ]/ && name != "" { line = $0; sub(/^ +/, "", line); text = text " " line; next }
/^$/ { flush(); next }
END { flush(); if (nkeys == 0 || ngroups == 0) exit 1 }
' <<< "$help") || { echo "$0: no key table in '$prog train --help'" >&2; exit 1; }

while IFS= read -r line || [ -n "$line" ]; do
    case "$line" in
        @KEYS@) printf '%s\n' "$keys" ;;
        *) printf '%s\n' "${line//@VERSION@/$version}" ;;
    esac
done < "$template" || exit 1
