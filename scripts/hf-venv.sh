#!/bin/bash
# hf-venv.sh — makes sure the Python virtual environment tests/test_hf.sh uses has
# transformers, torch and safetensors (the reference of gentrain's GPT-2 export and
# import), as scripts/tokenizers-venv.sh does for tokenizers: TORCH_VENV (default
# ${XDG_CACHE_HOME:-$HOME/.cache}/gentrain/torch-venv) is created with python3 -m venv
# when missing, and pip installs what does not import. torch is large: CI does not
# run this (the test's transformers part then skips). Prints the python on success.
# Exit status: 0 ready, 1 it could not be made (no venv support, no network).
set -u
TORCH_VENV=${TORCH_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/gentrain/torch-venv}
PY=$TORCH_VENV/bin/python
want='import torch, transformers, safetensors'
if [ -x "$PY" ] && "$PY" -c "$want" > /dev/null 2>&1; then
    echo "$PY"
    exit 0
fi
if [ ! -x "$PY" ]; then
    mkdir -p "$(dirname "$TORCH_VENV")" && python3 -m venv "$TORCH_VENV" > /dev/null 2>&1 ||
        { echo "hf-venv: cannot create $TORCH_VENV (python3 -m venv; Debian: apt-get install python3-venv)" >&2; exit 1; }
fi
if ! "$PY" -m pip install -q torch transformers safetensors > /dev/null 2>&1; then
    echo "hf-venv: pip install torch transformers safetensors failed in $TORCH_VENV" >&2
    exit 1
fi
"$PY" -c "$want" > /dev/null 2>&1 || exit 1
echo "$PY"
