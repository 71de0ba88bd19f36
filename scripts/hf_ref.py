#!/usr/bin/env python3
"""hf_ref.py - the Hugging Face transformers side of gentrain's GPT-2 interop test
(tests/test_hf.sh). Subcommands:

  make DIR VOCAB POSITIONS N_EMBD N_LAYER N_HEAD SEED
      a randomly initialised GPT2LMHeadModel of that shape (gelu_new, no dropout),
      saved with save_pretrained (config.json + model.safetensors)
  logits DIR TOKENS.txt OUT.bin
      loads DIR with GPT2LMHeadModel.from_pretrained and writes the logits of the
      whitespace-separated token ids as float32 [T, V]
  compare A.bin B.bin TOL
      max |a - b| / max |a|; exit 1 when above TOL (prints it either way)
"""
import sys

import numpy as np


def make(d, vocab, positions, n_embd, n_layer, n_head, seed):
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel
    torch.manual_seed(int(seed))
    cfg = GPT2Config(vocab_size=int(vocab), n_positions=int(positions), n_embd=int(n_embd),
                     n_layer=int(n_layer), n_head=int(n_head),
                     activation_function="gelu_new", layer_norm_epsilon=1e-5,
                     resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                     bos_token_id=0, eos_token_id=0)
    model = GPT2LMHeadModel(cfg)
    # Biases and LayerNorms start at 0 and 1: randomise them too, so every tensor's
    # placement and orientation shows in the logits.
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(".bias") or ".ln_" in name:
                p.add_(0.1 * torch.randn_like(p))
    model.save_pretrained(d, safe_serialization=True)


def logits(d, tokens, out):
    import torch
    from transformers import GPT2LMHeadModel
    model = GPT2LMHeadModel.from_pretrained(d)
    model.eval()
    ids = [int(t) for t in open(tokens).read().split()]
    with torch.no_grad():
        y = model(torch.tensor([ids])).logits[0].float().numpy()
    y.astype("<f4").tofile(out)


def compare(a, b, tol):
    x = np.fromfile(a, dtype="<f4")
    y = np.fromfile(b, dtype="<f4")
    if x.shape != y.shape:
        print(f"compare: {a} has {x.size} values, {b} {y.size}")
        return 1
    rel = float(np.max(np.abs(x - y)) / max(float(np.max(np.abs(x))), 1e-30))
    print(f"compare: max |difference| / max |value| = {rel:.3e} (tolerance {tol})")
    return 0 if rel <= float(tol) else 1


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "make":
        make(*args)
        return 0
    if cmd == "logits":
        logits(*args)
        return 0
    if cmd == "compare":
        return compare(*args)
    print(f"hf_ref.py: unknown command {cmd}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
