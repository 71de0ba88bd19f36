/* bpe_count — the word counts BPE training starts from (bpe_train.h): the distinct
 * pieces of the GPT-2 split with their counts, in a hash table bounded in words and
 * bytes (the least frequent words are dropped when it is full). */
#define GT_TOKENIZER_MODULE /* may include bpe_internal.h */
#include "bpe_train.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bpe_internal.h"
#include "unicode_tables.h"

typedef struct {
    uint64_t hash;
    int64_t count;
    uint32_t off, len;
} word;

struct bpe_counter {
    uint32_t *slot; /* index + 1 into words; 0 = empty */
    size_t mask;
    word *words;
    size_t n, cap;
    unsigned char *pool;
    size_t pool_n, pool_cap;
    int64_t dropped_below; /* > 0: words of a count below this were dropped */
};

bpe_counter *bpe_counter_new(void)
{
    bpe_counter *c = calloc(1, sizeof *c);
    if (!c || !(c->slot = calloc((size_t)1 << 16, sizeof *c->slot))) {
        free(c);
        return NULL;
    }
    c->mask = ((size_t)1 << 16) - 1;
    return c;
}

void bpe_counter_free(bpe_counter *c)
{
    if (!c) return;
    free(c->slot);
    free(c->words);
    free(c->pool);
    free(c);
}

int64_t bpe_counter_words(const bpe_counter *c) { return (int64_t)c->n; }

/* Rebuilds the slots (twice as many when grow) from the word list. */
static int rehash(bpe_counter *c, int grow)
{
    size_t slots = (c->mask + 1) * (grow ? 2 : 1);
    uint32_t *s = calloc(slots, sizeof *s);
    if (!s) return -1;
    free(c->slot);
    c->slot = s;
    c->mask = slots - 1;
    for (size_t i = 0; i < c->n; i++) {
        size_t k = (size_t)c->words[i].hash & c->mask;
        while (c->slot[k]) k = (k + 1) & c->mask;
        c->slot[k] = (uint32_t)i + 1;
    }
    return 0;
}

/* Drops the words of the smallest counts until the table is at most half full. */
static int prune(bpe_counter *c)
{
    int64_t below = c->dropped_below > 0 ? c->dropped_below : 2;
    for (;; below++) {
        size_t keep = 0, bytes = 0;
        for (size_t i = 0; i < c->n; i++) {
            if (c->words[i].count < below) continue;
            word w = c->words[i];
            memmove(c->pool + bytes, c->pool + w.off, w.len);
            w.off = (uint32_t)bytes;
            bytes += w.len;
            c->words[keep++] = w;
        }
        c->n = keep;
        c->pool_n = bytes;
        if (keep <= BPE_TRAIN_MAX_WORDS / 2 && bytes <= BPE_TRAIN_MAX_BYTES / 2) break;
    }
    if (c->dropped_below == 0)
        printf("  tokenizer training: more than %zu distinct words; the rarest are dropped "
               "from the counts\n", (size_t)BPE_TRAIN_MAX_WORDS);
    c->dropped_below = below + 1;
    return rehash(c, 0);
}

static int add_word(bpe_counter *c, const unsigned char *s, size_t len)
{
    uint64_t h = bpe_hash(s, len);
    size_t k = (size_t)h & c->mask;
    for (; c->slot[k]; k = (k + 1) & c->mask) {
        word *w = &c->words[c->slot[k] - 1];
        if (w->hash == h && w->len == len && memcmp(c->pool + w->off, s, len) == 0) {
            w->count++;
            return 0;
        }
    }
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 4096;
        word *g = realloc(c->words, cap * sizeof *g);
        if (!g) return -1;
        c->words = g;
        c->cap = cap;
    }
    if (c->pool_n + len > c->pool_cap) {
        size_t cap = c->pool_cap ? c->pool_cap * 2 : 1 << 16;
        while (cap < c->pool_n + len) cap *= 2;
        unsigned char *g = realloc(c->pool, cap);
        if (!g) return -1;
        c->pool = g;
        c->pool_cap = cap;
    }
    memcpy(c->pool + c->pool_n, s, len);
    c->words[c->n] = (word){h, 1, (uint32_t)c->pool_n, (uint32_t)len};
    c->pool_n += len;
    c->slot[k] = (uint32_t)++c->n;
    if (c->n >= BPE_TRAIN_MAX_WORDS || c->pool_n >= BPE_TRAIN_MAX_BYTES) return prune(c);
    if (c->n * 2 > c->mask + 1) return rehash(c, 1);
    return 0;
}

int bpe_counter_add(bpe_counter *c, const char *text, size_t len)
{
    const unsigned char *s = (const unsigned char *)text;
    const size_t sl = strlen(BPE_SPECIAL_TOKEN);
    size_t pos = 0;
    while (pos < len) {
        /* the next special token ends this stretch of text */
        const unsigned char *sp = NULL;
        for (const unsigned char *q = s + pos; q && q < s + len;) {
            q = memchr(q, '<', (size_t)(s + len - q));
            if (q && (size_t)(s + len - q) >= sl && memcmp(q, BPE_SPECIAL_TOKEN, sl) == 0) {
                sp = q;
                break;
            }
            if (q) q++;
        }
        size_t end = sp ? (size_t)(sp - s) : len;
        while (pos < end) {
            size_t e = bpe_pretok_next(s, end, pos);
            if (e - pos <= BPE_TRAIN_MAX_WORD && add_word(c, s + pos, e - pos) != 0) return -1;
            pos = e;
        }
        if (sp) pos = end + sl;
    }
    return 0;
}

size_t bpe_train_cut(const char *text, size_t len, size_t lo, size_t hi)
{
    const unsigned char *s = (const unsigned char *)text;
    if (hi >= len) return 0;
    for (size_t p = hi; p > lo && p > 0; p--) {
        if (s[p - 1] != '\n') continue;
        size_t n;
        if (bpe_char_class(bpe_utf8_next(s + p, len - p, &n)) != UC_SPACE) return p;
    }
    return 0;
}

/* For the trainer: the words, their bytes and counts. */
size_t bpe_counter_get(const bpe_counter *c, size_t i, const unsigned char **s, uint32_t *len,
                       int64_t *count)
{
    *s = c->pool + c->words[i].off;
    *len = c->words[i].len;
    *count = c->words[i].count;
    return c->n;
}
