/* bpe_internal — what the bpe_*.c files share (not an API for the rest of gentrain):
 * the tokenizer's tables, the GPT-2 byte <-> character map, the pre-tokenizer split and
 * the added-token matcher. */
#ifndef GT_BPE_INTERNAL_H
#define GT_BPE_INTERNAL_H


#ifndef GT_TOKENIZER_MODULE
#error "bpe_internal.h is internal to io/tokenizer/ and its tests (elsewhere: bpe.h)"
#endif
#include <stddef.h>
#include <stdint.h>

#include "bpe.h"

/* ---- strings -> ids: open addressing over (offset, length) keys in a pool */
typedef struct bpe_strmap {
    uint32_t *slot; /* index + 1 into keys, 0 = empty */
    size_t mask;
    struct { uint32_t off, len; int32_t id; } *keys;
    size_t n, cap;
    char *pool;
    size_t pool_n, pool_cap;
} bpe_strmap;

int bpe_strmap_init(bpe_strmap *m, size_t expect);
void bpe_strmap_free(bpe_strmap *m);
/* Sets key -> id (replacing an existing key's id). 0, or -1 out of memory. */
int bpe_strmap_put(bpe_strmap *m, const char *key, size_t len, int32_t id);
int32_t bpe_strmap_get(const bpe_strmap *m, const char *key, size_t len); /* -1: absent */
uint64_t bpe_hash(const void *p, size_t n);

/* ---- (left id, right id) -> (rank, merged id) */
typedef struct bpe_merge_slot {
    uint64_t key; /* (a << 32 | b) + 1; 0 = empty */
    uint32_t rank;
    int32_t id;
} bpe_merge_slot;

typedef struct bpe_mergemap {
    bpe_merge_slot *slot;
    size_t mask, n;
} bpe_mergemap;

int bpe_mergemap_init(bpe_mergemap *m, size_t expect);
void bpe_mergemap_free(bpe_mergemap *m);
/* Sets the pair's rank and result (a later duplicate replaces the earlier one). */
void bpe_mergemap_put(bpe_mergemap *m, int32_t a, int32_t b, uint32_t rank, int32_t id);
static inline const bpe_merge_slot *bpe_mergemap_get(const bpe_mergemap *m, int32_t a,
                                                     int32_t b)
{
    uint64_t key = (((uint64_t)(uint32_t)a << 32) | (uint32_t)b) + 1;
    uint64_t h = key * 0x9E3779B97F4A7C15ull;
    for (size_t i = (size_t)(h >> 20) & m->mask;; i = (i + 1) & m->mask) {
        if (m->slot[i].key == key) return &m->slot[i];
        if (m->slot[i].key == 0) return NULL;
    }
}

/* ---- added tokens and the byte trie that finds them */
typedef struct bpe_added {
    int32_t id;
    uint32_t off, len; /* content in bpe.added_pool */
    int special, normalized, lstrip, rstrip, single_word;
} bpe_added;

typedef struct bpe_trie_node {
    int32_t child;   /* first child, -1 none */
    int32_t sibling; /* next sibling, -1 none */
    int32_t added;   /* index into bpe.added of the token ending here, -1 none */
    unsigned char byte;
} bpe_trie_node;

typedef struct bpe_trie {
    bpe_trie_node *node; /* node 0 is the root */
    int32_t n, cap;
    unsigned char first[256]; /* 1: some token starts with this byte */
} bpe_trie;

/* ---- the tokenizer */
struct bpe {
    int64_t vocab_size;        /* largest id + 1 */
    int64_t n_merges;
    bpe_strmap vocab;          /* the model's vocabulary */
    bpe_mergemap merges;
    int32_t byte_id[256];      /* id of each byte's character, -1 when missing */
    int32_t unk_id;            /* -1: none */
    int fuse_unk, byte_fallback, ignore_merges;
    int add_prefix_space, use_regex;
    bpe_added *added;
    int n_added;
    char *added_pool;
    bpe_trie trie[2];          /* [0]: normalized false, [1]: normalized true */
    int max_added_len;
    /* decoding: the bytes of id i are dec_pool[dec_off[i] .. dec_off[i + 1]) when
     * dec_has[i] */
    unsigned char *dec_pool;
    uint32_t *dec_off;
    unsigned char *dec_has;
};

/* ---- the GPT-2 byte map: byte b is shown as character bpe_byte_char(b) */
uint32_t bpe_byte_char(unsigned b);
int bpe_char_byte(uint32_t cp); /* the byte, or -1 for a character outside the map */
/* Writes the UTF-8 of the characters of bytes s[0..n) into out (at least 2n bytes);
 * returns its length. */
size_t bpe_bytes_to_chars(const unsigned char *s, size_t n, char *out);
/* Decodes one UTF-8 character at s[0..n) (n >= 1): its code point and length; an
 * invalid sequence gives its first byte alone, as code point 0xFFFFFFFF. */
uint32_t bpe_utf8_next(const unsigned char *s, size_t n, size_t *len);

/* The tokenizer an encoder encodes with. */
const bpe *bpe_encoder_tokenizer(const bpe_encoder *e);

/* ---- the pre-tokenizer: the end of the GPT-2 split piece that starts at pos < len */
size_t bpe_pretok_next(const unsigned char *s, size_t len, size_t pos);
int bpe_char_class(uint32_t cp); /* UC_LETTER, UC_NUMBER, UC_SPACE, UC_OTHER */

/* ---- added tokens */
int bpe_trie_add(bpe_trie *t, const unsigned char *s, size_t n, int32_t added);
void bpe_trie_free(bpe_trie *t);
/* The longest token of the trie at s[0..n): its index into bpe.added, or -1; *len its
 * length. */
int32_t bpe_trie_match(const bpe_trie *t, const unsigned char *s, size_t n, size_t *len);

/* One piece of text after the added tokens are split out: bytes [start, end), and the
 * id of the added token it is, or -1 for text. */
typedef struct bpe_piece {
    size_t start, end;
    int32_t id;
} bpe_piece;

/* Splits text[0..len) as Hugging Face's added vocabulary does into *pieces (malloc'd,
 * grown as needed; *cap its capacity). Returns the count, or -1 out of memory. */
long bpe_split_added(const bpe *t, const unsigned char *text, size_t len, bpe_piece **pieces,
                     size_t *cap);

#endif
