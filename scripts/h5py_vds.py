#!/usr/bin/env python3
"""h5py_vds.py - makes, with h5py, what tests/test_h5py_vds.sh trains on: a corpus
split into N source files joined by one HDF5 virtual dataset (the way h5py users
concatenate shards), and the same tokens as one plain file.

usage: h5py_vds.py TEXT OUTDIR N
  OUTDIR/src<i>.h5   /tokens, uint16: the i-th of N parts of the first 90% of TEXT
  OUTDIR/vds.h5      /train/tokens: a virtual dataset over them; /val/tokens the rest
  OUTDIR/plain.h5    the same two datasets stored plainly
Both root groups carry vocab_size = 256 (the text's bytes are the tokens).
"""
import os
import sys

import h5py
import numpy as np


def main(text, outdir, n):
    data = np.frombuffer(open(text, "rb").read(), dtype=np.uint8).astype(np.uint16)
    cut = len(data) * 9 // 10
    train, val = data[:cut], data[cut:]
    parts = np.array_split(train, int(n))
    layout = h5py.VirtualLayout(shape=(len(train),), dtype=np.uint16)
    at = 0
    for i, p in enumerate(parts):
        name = f"src{i}.h5"
        with h5py.File(os.path.join(outdir, name), "w") as f:
            f.create_dataset("tokens", data=p)
        # relative source names: the virtual dataset moves with its folder
        layout[at:at + len(p)] = h5py.VirtualSource(name, "tokens", shape=(len(p),))
        at += len(p)
    with h5py.File(os.path.join(outdir, "vds.h5"), "w") as f:
        f.create_group("train").create_virtual_dataset("tokens", layout, fillvalue=0)
        f.create_group("val").create_dataset("tokens", data=val)
        f.attrs["vocab_size"] = 256
    with h5py.File(os.path.join(outdir, "plain.h5"), "w") as f:
        f.create_group("train").create_dataset("tokens", data=train)
        f.create_group("val").create_dataset("tokens", data=val)
        f.attrs["vocab_size"] = 256
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 4:
        print(__doc__.strip(), file=sys.stderr)
        sys.exit(2)
    sys.exit(main(*sys.argv[1:]))
