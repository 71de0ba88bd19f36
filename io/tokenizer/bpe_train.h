/* bpe_train — training a byte-level BPE on text (`gentrain prepare --train-tokenizer N`).
 *
 * Counting: the text goes in by blocks (bpe_counter_add); each block is split as the
 * tokenizer will split it (the added token <|endoftext|> taken out, then the GPT-2
 * split of bpe_pretok.c) and the counter keeps each distinct piece ("word") with its
 * count, never the text. Memory is bounded: when the table passes
 * BPE_TRAIN_MAX_WORDS words or BPE_TRAIN_MAX_BYTES bytes of them, the words seen least
 * are dropped (all of count 1, then 2, ...) and a note is printed once; pieces longer
 * than BPE_TRAIN_MAX_WORD bytes are not counted (they still encode, as bytes and the
 * merges that apply).
 *
 * Training: standard BPE over the word counts. Start from the 256 byte tokens (ids
 * 0..255 in GPT-2's order: '!'..'~', 0xA1..0xAC, 0xAE..0xFF, then the rest); repeatedly
 * merge the adjacent pair that occurs most often (counted over words times their
 * counts; ties: the smaller left id, then the smaller right id) into a new token with
 * the next id, until the vocabulary has N tokens with <|endoftext|> as the last (id
 * N-1, as in GPT-2), or no pair occurs twice (then fewer). Pair counts and where each
 * pair occurs are kept up to date, so a merge costs the words it touches.
 *
 * The result is a tokenizer.json (bpe_train_json) that bpe_load and the Hugging Face
 * tokenizers library read alike: ByteLevel pre-tokenizer and decoder, add_prefix_space
 * false, merges as [a, b] pairs. Deterministic: the same text gives the same file,
 * whatever the block sizes. */
#ifndef GT_BPE_TRAIN_H
#define GT_BPE_TRAIN_H

#include <stddef.h>
#include <stdint.h>

#define BPE_TRAIN_MAX_WORDS ((size_t)1 << 23)
#define BPE_TRAIN_MAX_BYTES ((size_t)256 << 20)
#define BPE_TRAIN_MAX_WORD 256
#define BPE_TRAIN_MIN_VOCAB 257 /* the 256 bytes and <|endoftext|> */
#define BPE_SPECIAL_TOKEN "<|endoftext|>"

typedef struct bpe_counter bpe_counter;

bpe_counter *bpe_counter_new(void);
void bpe_counter_free(bpe_counter *c);
/* Counts the words of text[0..len). Blocks must be cut where a word ends
 * (bpe_train_cut). 0, or -1 when out of memory. */
int bpe_counter_add(bpe_counter *c, const char *text, size_t len);
int64_t bpe_counter_words(const bpe_counter *c); /* distinct words kept */

/* For bpe_train.c: word i's bytes and count; returns the number of words. */
size_t bpe_counter_get(const bpe_counter *c, size_t i, const unsigned char **s, uint32_t *len,
                       int64_t *count);

/* A cut point for counting in (lo, hi] (searching back from hi; hi < len), or 0:
 * after a newline, before a character that is not white space. */
size_t bpe_train_cut(const char *text, size_t len, size_t lo, size_t hi);

/* Trains a vocabulary of at most vocab_size tokens (>= BPE_TRAIN_MIN_VOCAB, <=
 * BPE_MAX_VOCAB) and returns its tokenizer.json (malloc'd, NUL-terminated, *len
 * bytes), or NULL with a message in err. Progress lines go to stdout when verbose. */
char *bpe_train_json(bpe_counter *c, int64_t vocab_size, int verbose, size_t *len, char *err,
                     size_t cap);

/* The tokenizer.json text of a byte-level BPE whose token t is tok[t] (tok_len[t]
 * bytes; the first 256 being the single bytes) for t < n_tokens, with the merges
 * (left id, right id) in rank order and the special token after them (id
 * n_tokens). malloc'd, NUL-terminated; NULL when out of memory. */
char *bpe_json_write(const unsigned char *const *tok, const uint32_t *tok_len, int64_t n_tokens,
                     const int32_t *merges, int64_t n_merges, size_t *len);

#endif
