/* h5tok — a tokenizer stored in an HDF5 file, so that token data and models say how
 * their ids decode.
 *
 * Layout: the dataset /tokenizer.json, 1-D uint8, the UTF-8 text of a Hugging Face
 * tokenizer.json (io/tokenizer/bpe.h), with the attribute checksum = "fnv1a64:<16 hex digits>"
 * over those bytes. Readable with h5py: bytes(f["tokenizer.json"][()]).decode().
 * A file without the dataset holds byte-level tokens (ids 0..255 are the bytes).
 * Token datasets written with one also carry the root attribute tokenizer = "bpe"
 * (byte-level ones: "bytes"). */
#ifndef GT_H5TOK_H
#define GT_H5TOK_H

#include <stddef.h>

#include <hdf5.h>

#define H5TOK_DATASET "tokenizer.json"

/* Writes the dataset into an open file (caller holds h5lock). 0 or -1 (not printed). */
int h5tok_write(hid_t file, const char *json, size_t len);

/* Reads it from an open file (caller holds h5lock): 1 with *json (malloc'd,
 * NUL-terminated) and *len, 0 when the file has none, -1 with why set (not a 1-D
 * uint8 dataset, larger than JSON_MAX_BYTES, a checksum that does not match, ...). */
int h5tok_read(hid_t file, char **json, size_t *len, char *why, size_t cap);

/* The same by path (opens read-only, takes h5lock): 1, 0, or -1 after printing one
 * error line naming the file. */
int h5tok_read_path(const char *path, char **json, size_t *len);

#endif
