#!/bin/bash
# tokenizers-venv.sh — makes sure the Python virtual environment the BPE reference test
# (tests/test_bpe_ref.sh) uses has the Hugging Face `tokenizers` package, as `make
# bench` does for PyTorch: TORCH_VENV (default ${XDG_CACHE_HOME:-$HOME/.cache}/gentrain/
# torch-venv) is created with python3 -m venv when missing, and `pip install tokenizers`
# run when it cannot import it. Prints the environment's python on success.
# Exit status: 0 ready, 1 it could not be made (no python3 venv support, no network).
set -u
TORCH_VENV=${TORCH_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/gentrain/torch-venv}
PY=$TORCH_VENV/bin/python
if [ -x "$PY" ] && "$PY" -c 'import tokenizers' > /dev/null 2>&1; then
    echo "$PY"
    exit 0
fi
if [ ! -x "$PY" ]; then
    mkdir -p "$(dirname "$TORCH_VENV")" || exit 1
    if ! python3 -m venv "$TORCH_VENV" > /dev/null 2>&1; then
        # Debian keeps ensurepip apart; root may add it
        if [ "$(id -u)" = 0 ] && command -v apt-get > /dev/null 2>&1; then
            DEBIAN_FRONTEND=noninteractive apt-get install -y -q python3-venv > /dev/null 2>&1 ||
                { apt-get update -q > /dev/null 2>&1 &&
                  DEBIAN_FRONTEND=noninteractive apt-get install -y -q python3-venv > /dev/null 2>&1; }
        fi
        rm -rf "$TORCH_VENV"
        python3 -m venv "$TORCH_VENV" > /dev/null 2>&1 ||
            { echo "tokenizers-venv: cannot create $TORCH_VENV (python3 -m venv)" >&2; exit 1; }
    fi
fi
if ! "$PY" -m pip install -q tokenizers > /dev/null 2>&1; then
    echo "tokenizers-venv: pip install tokenizers failed in $TORCH_VENV" >&2
    exit 1
fi
"$PY" -c 'import tokenizers' > /dev/null 2>&1 || exit 1
echo "$PY"
