#!/usr/bin/env python3
"""bpe_ref.py - the Hugging Face `tokenizers` package as the reference for gentrain's
byte-level BPE (tests/test_bpe_ref.sh). Needs `tokenizers` (scripts/tokenizers-venv.sh).

  bpe_ref.py train OUT.json VOCAB PREFIX TEXT...  train a ByteLevel BPE (PREFIX 1:
                                                   add_prefix_space) with <|endoftext|>
  bpe_ref.py encode TOKENIZER.json TEXT OUT       ids of TEXT (read as bytes, decoded as
                                                   UTF-8, no newline translation), one
                                                   line; speed on stderr
  bpe_ref.py decode TOKENIZER.json IDS TEXT       exit 0 when decoding IDS gives TEXT
  bpe_ref.py mixed OUT SEED N                      N random short strings of letters,
                                                   digits, marks, spaces and symbols
                                                   joined by <|endoftext|>
"""
import random
import sys
import time


def read_text(path):
    with open(path, "rb") as f:
        return f.read().decode("utf-8")


def train(out, vocab, prefix, files):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=prefix == "1")
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=int(vocab), special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train(files, trainer)
    tok.save(out)


def encode(tok_path, text_path, out):
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(tok_path)
    text = read_text(text_path)
    nbytes = len(text.encode("utf-8"))
    t0 = time.perf_counter()
    ids = tok.encode(text, add_special_tokens=False).ids
    whole = time.perf_counter() - t0
    lines = text.splitlines(keepends=True)
    t0 = time.perf_counter()
    tok.encode_batch(lines, add_special_tokens=False)
    batch = time.perf_counter() - t0
    sys.stderr.write("tokenizers: %d bytes, %d ids: %.1f MB/s as one text, %.1f MB/s as a "
                     "batch of %d lines\n" % (nbytes, len(ids), nbytes / whole / 1e6,
                                               nbytes / batch / 1e6, len(lines)))
    with open(out, "w") as f:
        f.write(" ".join(map(str, ids)) + "\n")


def decode(tok_path, ids_path, text_path):
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(tok_path)
    ids = [int(x) for x in open(ids_path).read().split()]
    got = tok.decode(ids, skip_special_tokens=False)
    return 0 if got == read_text(text_path) else 1


def mixed(out, seed, n):
    alpha = [" ", " ", " ", "\n", "\t", "\r", "a", "B", "\u00c9", "1", "\u0663", "!", "'", "'",
             "s", "t", "r", "e", "l", "d", "m", "v", "\u3000", "\u00a0", "\u4e2d",
             "\U0001f600", "\u0301", "_", "-", "\u2028", "\u0085", "\u216b", "\u00bd",
             "\u200b", "x", "y"]
    rnd = random.Random(int(seed))
    parts = ["".join(rnd.choice(alpha) for _ in range(rnd.randint(1, 16)))
             for _ in range(int(n))]
    with open(out, "wb") as f:
        f.write("<|endoftext|>".join(parts).encode("utf-8"))


def main(argv):
    cmd = argv[1] if len(argv) > 1 else ""
    if cmd == "train" and len(argv) >= 6:
        return train(argv[2], argv[3], argv[4], argv[5:]) or 0
    if cmd == "encode" and len(argv) == 5:
        return encode(argv[2], argv[3], argv[4]) or 0
    if cmd == "decode" and len(argv) == 5:
        return decode(argv[2], argv[3], argv[4])
    if cmd == "mixed" and len(argv) == 5:
        return mixed(argv[2], argv[3], argv[4]) or 0
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
