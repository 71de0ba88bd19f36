/* prepare — text files to a token dataset: bytes (vocab 256) or BPE tokens.
 *
 * The inputs are read as one byte stream, in order, in bounded blocks (inputs larger
 * than memory are fine). The first (1 - val_fraction) of the bytes go to /train/tokens,
 * the rest to /val/tokens: both 1-D uint8, chunked, extendable. Root attributes:
 * vocab_size = 256 (int64), tokenizer = "bytes". The file is written to "<out>.tmp" and
 * renamed when complete. Progress goes to stdout. */
#ifndef GT_PREPARE_H
#define GT_PREPARE_H

#include <stdint.h>

/* Deflate level 1-9 (with HDF5's shuffle filter, in chunks of 16 Ki tokens) for the
 * token datasets prepare_bytes and prepare_bpe write from now on; 0 (the default): no
 * compression, 1 MiB chunks. */
void prepare_set_compress(int level);

int prepare_bytes(const char *const *inputs, int n_inputs, const char *out,
                  double val_fraction);

/* prepare_bpe — the same split, encoded with a byte-level BPE tokenizer (io/tokenizer/bpe.h):
 * read from a Hugging Face tokenizer.json (tokenizer) or trained on the inputs
 * (train_vocab > 0 tokens, io/tokenizer/bpe_train.h), and saved to save_tokenizer when given.
 * The ids go to /train/tokens and /val/tokens as uint16 when the vocabulary has at
 * most 65536 tokens, else int32; each split is encoded as one text (the ids equal
 * those of encoding it whole). Root attributes: vocab_size = the tokenizer's (its
 * largest id + 1), tokenizer = "bpe"; the tokenizer's text is stored in the file
 * (io/h5/h5tok.h), so the data says how it decodes. Encoding uses `threads` threads
 * (0: OMP_NUM_THREADS, else all cores). */
typedef struct prepare_options {
    const char *tokenizer;      /* a tokenizer.json, or NULL when training */
    int64_t train_vocab;        /* > 0: train a tokenizer of this many tokens */
    const char *save_tokenizer; /* NULL, or where to write the tokenizer.json too */
    int threads;
} prepare_options;

int prepare_bpe(const char *const *inputs, int n_inputs, const char *out, double val_fraction,
                const prepare_options *o);

#endif
