/* prepare — text files to a byte-level token dataset (vocab 256).
 *
 * The inputs are read as one byte stream, in order, in bounded blocks (inputs larger
 * than memory are fine). The first (1 - val_fraction) of the bytes go to /train/tokens,
 * the rest to /val/tokens: both 1-D uint8, chunked, extendable. Root attributes:
 * vocab_size = 256 (int64), tokenizer = "bytes". The file is written to "<out>.tmp" and
 * renamed when complete. Progress goes to stdout. */
#ifndef GT_PREPARE_H
#define GT_PREPARE_H

int prepare_bytes(const char *const *inputs, int n_inputs, const char *out,
                  double val_fraction);

#endif
