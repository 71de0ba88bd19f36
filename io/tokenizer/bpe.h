/* bpe — byte-level BPE tokenizers in the Hugging Face tokenizer.json format (the GPT-2
 * kind), read from untrusted text; encoding, decoding and training.
 *
 * What is read (anything else is refused with a message naming the field):
 *   model          type "BPE"; vocab (token -> id); merges as "a b" strings (lines
 *                  starting "#version" skipped) or [a, b] pairs, rank = position (a
 *                  later duplicate wins); unk_token, fuse_unk, ignore_merges; dropout
 *                  only null or 0; byte_fallback only false; continuing_subword_prefix
 *                  and end_of_word_suffix only null or "".
 *   pre_tokenizer  ByteLevel: add_prefix_space (default true), use_regex (default true:
 *                  the GPT-2 split 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+|
 *                  ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ done by hand in bpe_pretok.c),
 *                  trim_offsets (ignored: offsets are not computed).
 *   normalizer     only null.   decoder: ByteLevel or null (bytes are decoded either way).
 *   post_processor ignored: gentrain encodes text as Hugging Face's
 *                  encode(text, add_special_tokens=False) does.
 *   added_tokens   id, content, special, normalized, lstrip, rstrip, single_word. They
 *                  are split out of the text before the rest is pre-tokenized (first
 *                  those with normalized false, then the others; leftmost, longest
 *                  first), as Hugging Face does. Each id must be the one the tokenizers
 *                  library gives it: the vocabulary's id for a content in the vocabulary,
 *                  else the next id after the vocabulary and the added tokens before.
 *   version        "1.0" when present.
 * Limits: the text at most JSON_MAX_BYTES (json.h), ids below BPE_MAX_VOCAB, tokens at
 * most BPE_MAX_TOKEN_BYTES bytes.
 *
 * Encoding is Hugging Face's for valid UTF-8 text (the same ids). Bytes that are not
 * valid UTF-8 are not text to Hugging Face; here each such byte counts as a character
 * of its own that is neither a letter, a number nor white space, and encodes as its
 * byte token, so every byte string encodes and decodes back. A byte whose token the
 * vocabulary lacks becomes unk_token (consecutive ones fused into one with fuse_unk), or
 * is dropped when there is none, as Hugging Face does; bpe_full_alphabet says whether
 * that can happen.
 *
 * Decoding: each token's characters map back to bytes through the GPT-2 byte table;
 * a token with a character outside that table decodes to its own UTF-8 (as Hugging
 * Face's ByteLevel decoder does). So decode(encode(x)) == x for any bytes x when the
 * alphabet is full and add_prefix_space is off (with it on, a leading space is added).
 *
 * Threads: a loaded bpe is read-only and may be shared; each thread encodes with its
 * own bpe_encoder (word cache and scratch). */
#ifndef GT_BPE_H
#define GT_BPE_H

#include <stddef.h>
#include <stdint.h>

#define BPE_MAX_VOCAB (1 << 24)
#define BPE_MAX_TOKEN_BYTES 4096

typedef struct bpe bpe;
typedef struct bpe_encoder bpe_encoder;

/* A growable array of token ids. */
typedef struct bpe_ids {
    int32_t *v;
    size_t n, cap;
} bpe_ids;

/* Loads a tokenizer from the text of a tokenizer.json. NULL with a message in err. */
bpe *bpe_load(const char *json, size_t len, char *err, size_t cap);
void bpe_free(bpe *t);

/* Reads a whole file (at most JSON_MAX_BYTES) into a malloc'd, NUL-terminated buffer.
 * 0, or -1 with a message in err. */
int bpe_read_file(const char *path, char **text, size_t *len, char *err, size_t cap);

int64_t bpe_vocab_size(const bpe *t); /* the largest id + 1 */
int64_t bpe_n_merges(const bpe *t);
int bpe_full_alphabet(const bpe *t);  /* every byte has a token of its own */
int bpe_add_prefix_space(const bpe *t);

/* ---- encoding */
bpe_encoder *bpe_encoder_new(const bpe *t);
void bpe_encoder_free(bpe_encoder *e);

/* Appends the ids of text[0..len) to out, as one text (at_start: it begins the text,
 * where add_prefix_space applies) or as the continuation of one cut at a point
 * bpe_cut_point chose. 0, or -1 when out of memory. */
int bpe_encode(bpe_encoder *e, const char *text, size_t len, int at_start, bpe_ids *out);

/* A point p in (lo, hi] (searching back from hi) where text can be cut so that
 * encoding text[0..p) and then text[p..len) gives the ids of encoding it whole; 0 when
 * the range has none. Needs one byte of text after hi (hi < len). */
size_t bpe_cut_point(const bpe *t, const char *text, size_t len, size_t lo, size_t hi);

/* bpe_encode with up to n_enc threads (OpenMP), one encoder each, the text split at cut
 * points. */
int bpe_encode_parallel(bpe_encoder **enc, int n_enc, const char *text, size_t len,
                        int at_start, bpe_ids *out);

/* ---- decoding */
/* The bytes token id decodes to (*n of them, not NUL-terminated); NULL for an id the
 * tokenizer does not have. */
const unsigned char *bpe_token_bytes(const bpe *t, int32_t id, size_t *n);
/* The id of a token string (vocabulary or added token), or -1. */
int32_t bpe_token_id(const bpe *t, const char *token, size_t n);

/* ---- ids */
int bpe_ids_push(bpe_ids *a, int32_t id);
int bpe_ids_append(bpe_ids *a, const int32_t *ids, size_t n);
void bpe_ids_free(bpe_ids *a);

#endif
