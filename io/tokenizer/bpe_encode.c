/* bpe_encode — text to ids (bpe.h): added tokens split out (bpe_added.c), the rest
 * pre-tokenized (bpe_pretok.c), each piece ("word") merged as Hugging Face's BPE does.
 *
 * A word's merge: its bytes become their byte tokens; a min-heap holds every adjacent
 * pair that has a merge, by (rank, position); the top is applied when still current
 * (the pair at that position still makes that token), and the pairs it forms with
 * its neighbours are pushed. Same order, same result as the tokenizers library,
 * O(n log n) in the word's length.
 *
 * Each encoder caches the ids of the words it has seen (words up to CACHE_WORD bytes;
 * the cache starts over when full), so common words are merged once. */
#define GT_TOKENIZER_MODULE /* may include bpe_internal.h */
#include "bpe_internal.h"

#include "util.h"

#include <stdlib.h>
#include <string.h>

#define CACHE_SLOTS ((size_t)1 << 18) /* at most half of them used */
#define CACHE_WORD 128                /* longer words are not cached */
#define CACHE_KEY_BYTES ((size_t)8 << 20)
#define CACHE_IDS ((size_t)2 << 20)

typedef struct {
    uint64_t hash;
    uint32_t key_off, key_len; /* key_len 0: empty */
    uint32_t ids_off, ids_n;
} cache_slot;

typedef struct {
    int32_t id, prev, next;
    uint32_t len; /* bytes it covers; 0 once merged into its left neighbour */
} sym;

typedef struct {
    uint32_t rank, pos;
    int32_t id;
} heap_item;

struct bpe_encoder {
    const bpe *t;
    cache_slot *slot;
    size_t used;
    unsigned char *keys;
    size_t keys_n;
    int32_t *ids;
    size_t ids_n;
    sym *sym;
    heap_item *heap;
    size_t sym_cap, heap_cap;
    char *mapped;
    size_t mapped_cap;
    unsigned char *prefixed;
    size_t prefixed_cap;
    bpe_piece *pieces;
    size_t pieces_cap;
};


int bpe_ids_push(bpe_ids *a, int32_t id)
{
    if (a->n == a->cap && gt_grow((void **)&a->v, &a->cap, a->n + 1, sizeof *a->v) != 0)
        return -1;
    a->v[a->n++] = id;
    return 0;
}

int bpe_ids_append(bpe_ids *a, const int32_t *ids, size_t n)
{
    if (gt_grow((void **)&a->v, &a->cap, a->n + n, sizeof *a->v) != 0) return -1;
    if (n) memcpy(a->v + a->n, ids, n * sizeof *ids);
    a->n += n;
    return 0;
}

void bpe_ids_free(bpe_ids *a)
{
    free(a->v);
    memset(a, 0, sizeof *a);
}

/* ---- encoder */
bpe_encoder *bpe_encoder_new(const bpe *t)
{
    bpe_encoder *e = calloc(1, sizeof *e);
    if (!e) return NULL;
    e->t = t;
    e->slot = calloc(CACHE_SLOTS, sizeof *e->slot);
    e->keys = malloc(CACHE_KEY_BYTES);
    e->ids = malloc(CACHE_IDS * sizeof *e->ids);
    if (!e->slot || !e->keys || !e->ids) {
        bpe_encoder_free(e);
        return NULL;
    }
    return e;
}

const bpe *bpe_encoder_tokenizer(const bpe_encoder *e) { return e->t; }

void bpe_encoder_free(bpe_encoder *e)
{
    if (!e) return;
    free(e->slot);
    free(e->keys);
    free(e->ids);
    free(e->sym);
    free(e->heap);
    free(e->mapped);
    free(e->prefixed);
    free(e->pieces);
    free(e);
}

/* ---- the heap of candidate merges: smallest rank, then leftmost position, on top */
static int before(const heap_item *a, const heap_item *b)
{
    return a->rank != b->rank ? a->rank < b->rank : a->pos < b->pos;
}

static int heap_push(bpe_encoder *e, size_t *n, uint32_t rank, uint32_t pos, int32_t id)
{
    if (gt_grow((void **)&e->heap, &e->heap_cap, *n + 1, sizeof *e->heap) != 0) return -1;
    size_t i = (*n)++;
    heap_item it = {rank, pos, id};
    while (i > 0 && before(&it, &e->heap[(i - 1) / 2])) {
        e->heap[i] = e->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    e->heap[i] = it;
    return 0;
}

static heap_item heap_pop(bpe_encoder *e, size_t *n)
{
    heap_item top = e->heap[0], last = e->heap[--*n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *n) break;
        if (c + 1 < *n && before(&e->heap[c + 1], &e->heap[c])) c++;
        if (!before(&e->heap[c], &last)) break;
        e->heap[i] = e->heap[c];
        i = c;
    }
    if (*n) e->heap[i] = last;
    return top;
}

/* Pushes the merge of the pair at symbol pos and its next symbol, if there is one. */
static int push_pair(bpe_encoder *e, size_t *hn, int32_t pos)
{
    const sym *s = e->sym;
    if (pos < 0 || s[pos].next < 0) return 0;
    const bpe_merge_slot *m = bpe_mergemap_get(&e->t->merges, s[pos].id, s[s[pos].next].id);
    return m ? heap_push(e, hn, m->rank, (uint32_t)pos, m->id) : 0;
}

/* Appends a symbol (linked after the previous one). */
static void add_sym(bpe_encoder *e, size_t *n, int32_t id, uint32_t len)
{
    sym *s = e->sym;
    s[*n] = (sym){id, (int32_t)*n - 1, -1, len};
    if (*n > 0) s[*n - 1].next = (int32_t)*n;
    (*n)++;
}

/* The word's bytes as symbols: byte tokens, unk_token for a missing one (fused with
 * fuse_unk), nothing when there is no unk_token. Returns the count. */
static size_t initial_symbols(bpe_encoder *e, const unsigned char *w, size_t n)
{
    const bpe *t = e->t;
    size_t k = 0;
    uint32_t unk_len = 0;
    for (size_t i = 0; i < n; i++) {
        int32_t id = t->byte_id[w[i]];
        if (id >= 0) {
            if (unk_len) add_sym(e, &k, t->unk_id, unk_len);
            unk_len = 0;
            add_sym(e, &k, id, 1);
        } else if (t->unk_id >= 0) {
            if (unk_len && !t->fuse_unk) {
                add_sym(e, &k, t->unk_id, unk_len);
                unk_len = 0;
            }
            unk_len++;
        }
    }
    if (unk_len) add_sym(e, &k, t->unk_id, unk_len);
    return k;
}

/* The ids of one word, appended to out. */
static int merge_word(bpe_encoder *e, const unsigned char *w, size_t n, bpe_ids *out)
{
    const bpe *t = e->t;
    if (t->ignore_merges) {
        if (gt_grow((void **)&e->mapped, &e->mapped_cap, 2 * n, 1) != 0) return -1;
        size_t m = bpe_bytes_to_chars(w, n, e->mapped);
        int32_t id = bpe_strmap_get(&t->vocab, e->mapped, m);
        if (id >= 0) return bpe_ids_push(out, id);
    }
    if (gt_grow((void **)&e->sym, &e->sym_cap, n, sizeof *e->sym) != 0) return -1;
    size_t ns = initial_symbols(e, w, n), hn = 0;
    for (size_t i = 0; i + 1 < ns; i++)
        if (push_pair(e, &hn, (int32_t)i) != 0) return -1;
    sym *s = e->sym;
    while (hn > 0) {
        heap_item top = heap_pop(e, &hn);
        sym *a = &s[top.pos];
        if (a->len == 0 || a->next < 0) continue;
        sym *b = &s[a->next];
        const bpe_merge_slot *m = bpe_mergemap_get(&t->merges, a->id, b->id);
        if (!m || m->id != top.id) continue; /* expired */
        a->id = top.id;
        a->len += b->len;
        a->next = b->next;
        b->len = 0;
        if (a->next >= 0) s[a->next].prev = (int32_t)top.pos;
        if (push_pair(e, &hn, a->prev) != 0 || push_pair(e, &hn, (int32_t)top.pos) != 0)
            return -1;
    }
    for (size_t i = 0; i < ns; i++)
        if (s[i].len && bpe_ids_push(out, s[i].id) != 0) return -1;
    return 0;
}

static void cache_clear(bpe_encoder *e)
{
    memset(e->slot, 0, CACHE_SLOTS * sizeof *e->slot);
    e->used = e->keys_n = e->ids_n = 0;
}

/* Encodes one word through the cache. */
static int encode_word(bpe_encoder *e, const unsigned char *w, size_t n, bpe_ids *out)
{
    if (n > CACHE_WORD) return merge_word(e, w, n, out);
    uint64_t h = bpe_hash(w, n);
    size_t i = (size_t)h & (CACHE_SLOTS - 1);
    for (; e->slot[i].key_len; i = (i + 1) & (CACHE_SLOTS - 1)) {
        const cache_slot *c = &e->slot[i];
        if (c->hash == h && c->key_len == n && memcmp(e->keys + c->key_off, w, n) == 0)
            return bpe_ids_append(out, e->ids + c->ids_off, c->ids_n);
    }
    size_t first = out->n;
    if (merge_word(e, w, n, out) != 0) return -1;
    size_t k = out->n - first;
    if (e->used + 1 > CACHE_SLOTS / 2 || e->keys_n + n > CACHE_KEY_BYTES ||
        e->ids_n + k > CACHE_IDS) {
        cache_clear(e);
        i = (size_t)h & (CACHE_SLOTS - 1);
    }
    e->slot[i] = (cache_slot){h, (uint32_t)e->keys_n, (uint32_t)n, (uint32_t)e->ids_n,
                              (uint32_t)k};
    memcpy(e->keys + e->keys_n, w, n);
    if (k) memcpy(e->ids + e->ids_n, out->v + first, k * sizeof *out->v);
    e->keys_n += n;
    e->ids_n += k;
    e->used++;
    return 0;
}

/* A piece of text without added tokens: pre-tokenized, each word encoded. */
static int encode_text(bpe_encoder *e, const unsigned char *s, size_t n, int prefix,
                       bpe_ids *out)
{
    if (prefix && s[0] != ' ') {
        if (gt_grow((void **)&e->prefixed, &e->prefixed_cap, n + 1, 1) != 0) return -1;
        e->prefixed[0] = ' ';
        memcpy(e->prefixed + 1, s, n);
        s = e->prefixed;
        n++;
    }
    if (!e->t->use_regex) return encode_word(e, s, n, out);
    for (size_t pos = 0; pos < n;) {
        size_t end = bpe_pretok_next(s, n, pos);
        if (encode_word(e, s + pos, end - pos, out) != 0) return -1;
        pos = end;
    }
    return 0;
}

int bpe_encode(bpe_encoder *e, const char *text, size_t len, int at_start, bpe_ids *out)
{
    const unsigned char *s = (const unsigned char *)text;
    long n = bpe_split_added(e->t, s, len, &e->pieces, &e->pieces_cap);
    if (n < 0) return -1;
    for (long i = 0; i < n; i++) {
        const bpe_piece *p = &e->pieces[i];
        int rc = p->id >= 0 ? bpe_ids_push(out, p->id)
                            : encode_text(e, s + p->start, p->end - p->start,
                                          e->t->add_prefix_space && (i > 0 || at_start), out);
        if (rc != 0) return -1;
    }
    return 0;
}
