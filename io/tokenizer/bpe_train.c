/* bpe_train — BPE merges from word counts (bpe_train.h).
 *
 * State: every word as its current symbol ids; per pair (left, right) its count (over
 * words times their counts) and the list of words it has occurred in (appended to,
 * never shrunk: a word listed twice or no longer holding the pair is skipped); a
 * max-heap of (count, left, right) whose entries may be stale: one is checked against
 * the pair's count when it comes to the top, and pushed again with the current count
 * when they differ. */
#define GT_TOKENIZER_MODULE /* may include bpe_internal.h */
#include "bpe_train.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bpe_internal.h"
#include "util.h"

typedef struct {
    int64_t count;
    int32_t a, b;
    int32_t *where;
    uint32_t nw, cw;
    int64_t touched; /* the merge that last raised its count */
} pair_t;

typedef struct {
    int64_t count;
    int32_t a, b;
} heap_t;

typedef struct {
    /* words */
    int32_t *sym;
    size_t *off;
    uint32_t *len;
    int64_t *cnt;
    int64_t *stamp;
    size_t n_words;
    /* pairs */
    pair_t *pair;
    size_t n_pairs, cap_pairs;
    uint32_t *slot; /* pair index + 1 */
    size_t mask;
    heap_t *heap;
    size_t n_heap, cap_heap;
    size_t *touched; /* pairs whose count rose in this merge (indices) */
    size_t n_touched, cap_touched;
    int64_t merge_no;
    int failed;
} trainer;


/* ---- the heap: highest count on top; ties the smaller (a, b) */
static int above(const heap_t *x, const heap_t *y)
{
    if (x->count != y->count) return x->count > y->count;
    return x->a != y->a ? x->a < y->a : x->b < y->b;
}

static void heap_push(trainer *T, int64_t count, int32_t a, int32_t b)
{
    if (gt_grow((void **)&T->heap, &T->cap_heap, T->n_heap + 1, sizeof *T->heap) != 0) {
        T->failed = 1;
        return;
    }
    heap_t it = {count, a, b};
    size_t i = T->n_heap++;
    while (i > 0 && above(&it, &T->heap[(i - 1) / 2])) {
        T->heap[i] = T->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    T->heap[i] = it;
}

static heap_t heap_pop(trainer *T)
{
    heap_t top = T->heap[0], last = T->heap[--T->n_heap];
    size_t i = 0, n = T->n_heap;
    for (size_t c; (c = 2 * i + 1) < n; i = c) {
        if (c + 1 < n && above(&T->heap[c + 1], &T->heap[c])) c++;
        if (!above(&T->heap[c], &last)) break;
        T->heap[i] = T->heap[c];
    }
    if (n) T->heap[i] = last;
    return top;
}

/* ---- pairs */
static size_t pair_slot(const trainer *T, int32_t a, int32_t b)
{
    uint64_t key = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
    size_t k = (size_t)((key * 0x9E3779B97F4A7C15ull) >> 16) & T->mask;
    while (T->slot[k] && (T->pair[T->slot[k] - 1].a != a || T->pair[T->slot[k] - 1].b != b))
        k = (k + 1) & T->mask;
    return k;
}

static pair_t *pair_get(trainer *T, int32_t a, int32_t b, int create)
{
    size_t k = pair_slot(T, a, b);
    if (T->slot[k]) return &T->pair[T->slot[k] - 1];
    if (!create) return NULL;
    if (gt_grow((void **)&T->pair, &T->cap_pairs, T->n_pairs + 1, sizeof *T->pair) != 0)
        return NULL;
    T->pair[T->n_pairs] = (pair_t){0, a, b, NULL, 0, 0, -1};
    T->slot[k] = (uint32_t)++T->n_pairs;
    if (T->n_pairs * 2 > T->mask + 1) { /* rehash into twice the slots */
        size_t slots = (T->mask + 1) * 2;
        uint32_t *s = calloc(slots, sizeof *s);
        if (!s) return NULL;
        free(T->slot);
        T->slot = s;
        T->mask = slots - 1;
        for (size_t i = 0; i < T->n_pairs; i++)
            T->slot[pair_slot(T, T->pair[i].a, T->pair[i].b)] = (uint32_t)i + 1;
        return pair_get(T, a, b, 0);
    }
    return &T->pair[T->n_pairs - 1];
}

/* Adds delta occurrences of (a, b) in word w (listing w when delta > 0). */
static void pair_add(trainer *T, int32_t a, int32_t b, int64_t delta, size_t w)
{
    pair_t *p = pair_get(T, a, b, delta > 0);
    if (!p) {
        if (delta > 0) T->failed = 1;
        return;
    }
    p->count += delta;
    if (delta <= 0) return;
    if (p->nw == p->cw) {
        size_t cap = p->cw;
        if (gt_grow((void **)&p->where, &cap, (size_t)p->nw + 1, sizeof *p->where) != 0 ||
            cap > UINT32_MAX) {
            T->failed = 1;
            return;
        }
        p->cw = (uint32_t)cap;
    }
    p->where[p->nw++] = (int32_t)w;
    if (p->touched != T->merge_no) { /* its heap entry is pushed after the merge */
        p->touched = T->merge_no;
        if (gt_grow((void **)&T->touched, &T->cap_touched, T->n_touched + 1,
                 sizeof *T->touched) != 0)
            T->failed = 1;
        else
            T->touched[T->n_touched++] = (size_t)(p - T->pair);
    }
}

/* Replaces each (a, b) in word w by c, left to right, updating the pair counts. */
static void merge_in_word(trainer *T, size_t w, int32_t a, int32_t b, int32_t c)
{
    int32_t *s = T->sym + T->off[w];
    size_t n = T->len[w], i = 0, j = 0;
    int64_t k = T->cnt[w];
    while (i < n) {
        if (i + 1 < n && s[i] == a && s[i + 1] == b) {
            pair_add(T, a, b, -k, w);
            if (j > 0) {
                pair_add(T, s[j - 1], a, -k, w);
                pair_add(T, s[j - 1], c, k, w);
            }
            if (i + 2 < n) {
                pair_add(T, b, s[i + 2], -k, w);
                pair_add(T, c, s[i + 2], k, w);
            }
            s[j++] = c;
            i += 2;
        } else {
            s[j++] = s[i++];
        }
    }
    T->len[w] = (uint32_t)j;
}

/* One merge: (a, b) -> c in every word that holds it; then the pairs it raised go on
 * the heap with their counts. */
static void merge(trainer *T, size_t pi, int32_t c)
{
    const int32_t a = T->pair[pi].a, b = T->pair[pi].b;
    T->merge_no++;
    T->n_touched = 0;
    int32_t *where = T->pair[pi].where;
    uint32_t nw = T->pair[pi].nw;
    T->pair[pi].where = NULL; /* the list is read here; the pair will not come back */
    T->pair[pi].nw = T->pair[pi].cw = 0;
    for (uint32_t i = 0; i < nw && !T->failed; i++) {
        size_t w = (size_t)where[i];
        if (T->stamp[w] == T->merge_no) continue;
        T->stamp[w] = T->merge_no;
        merge_in_word(T, w, a, b, c);
    }
    free(where);
    for (size_t i = 0; i < T->n_touched; i++) {
        const pair_t *p = &T->pair[T->touched[i]];
        if (p->count > 0) heap_push(T, p->count, p->a, p->b);
    }
}

/* The words of the counter as byte-token ids, and every adjacent pair counted. */
static int setup(trainer *T, const bpe_counter *c, const int32_t byte_id[256])
{
    const unsigned char *s;
    uint32_t len;
    int64_t cnt;
    size_t n = (size_t)bpe_counter_words(c), total = 0;
    T->n_words = n;
    T->off = malloc((n + 1) * sizeof *T->off);
    T->len = malloc((n + 1) * sizeof *T->len);
    T->cnt = malloc((n + 1) * sizeof *T->cnt);
    T->stamp = calloc(n + 1, sizeof *T->stamp);
    T->mask = ((size_t)1 << 16) - 1;
    T->slot = calloc(T->mask + 1, sizeof *T->slot);
    if (!T->off || !T->len || !T->cnt || !T->stamp || !T->slot) return -1;
    for (size_t w = 0; w < n; w++) {
        bpe_counter_get(c, w, &s, &len, &cnt);
        T->off[w] = total;
        T->len[w] = len;
        T->cnt[w] = cnt;
        total += len;
    }
    if (!(T->sym = malloc((total + 1) * sizeof *T->sym))) return -1;
    T->merge_no = 0;
    for (size_t w = 0; w < n; w++) {
        bpe_counter_get(c, w, &s, &len, &cnt);
        int32_t *d = T->sym + T->off[w];
        for (uint32_t i = 0; i < len; i++) d[i] = byte_id[s[i]];
        for (uint32_t i = 0; i + 1 < len; i++) pair_add(T, d[i], d[i + 1], cnt, w);
        if (T->failed) return -1;
    }
    for (size_t i = 0; i < T->n_touched; i++) {
        const pair_t *p = &T->pair[T->touched[i]];
        heap_push(T, p->count, p->a, p->b);
    }
    return T->failed ? -1 : 0;
}

static void trainer_free(trainer *T)
{
    for (size_t i = 0; i < T->n_pairs; i++) free(T->pair[i].where);
    free(T->pair);
    free(T->slot);
    free(T->heap);
    free(T->touched);
    free(T->sym);
    free(T->off);
    free(T->len);
    free(T->cnt);
    free(T->stamp);
}

/* The next pair to merge: the heap's top once it is current, or -1 when no pair
 * occurs twice. */
static long best_pair(trainer *T)
{
    while (T->n_heap > 0) {
        heap_t top = heap_pop(T);
        pair_t *p = pair_get(T, top.a, top.b, 0);
        if (!p || p->count < 2) continue;
        if (p->count != top.count) { /* stale: back with its count */
            heap_push(T, p->count, p->a, p->b);
            continue;
        }
        return (long)(p - T->pair);
    }
    return -1;
}

/* The byte token ids in GPT-2's order, and each token's bytes. */
static int byte_tokens(int32_t byte_id[256], unsigned char **tok, uint32_t *tok_len)
{
    for (int b = 0; b < 256; b++) {
        uint32_t cp = bpe_byte_char((unsigned)b);
        int id = 0;
        for (int o = 0; o < 256; o++) id += bpe_byte_char((unsigned)o) < cp;
        byte_id[b] = id;
        if (!(tok[id] = malloc(1))) return -1;
        tok[id][0] = (unsigned char)b;
        tok_len[id] = 1;
    }
    return 0;
}

char *bpe_train_json(bpe_counter *c, int64_t vocab_size, int verbose, size_t *len, char *err,
                     size_t cap)
{
    if (vocab_size < BPE_TRAIN_MIN_VOCAB || vocab_size > BPE_MAX_VOCAB) {
        snprintf(err, cap, "the vocabulary size must be from %d to %d", BPE_TRAIN_MIN_VOCAB,
                 BPE_MAX_VOCAB);
        return NULL;
    }
    const int64_t want = vocab_size - BPE_TRAIN_MIN_VOCAB; /* merges */
    trainer T;
    memset(&T, 0, sizeof T);
    int32_t byte_id[256];
    unsigned char **tok = calloc((size_t)vocab_size, sizeof *tok);
    uint32_t *tok_len = calloc((size_t)vocab_size, sizeof *tok_len);
    int32_t *merges = malloc(((size_t)want + 1) * 2 * sizeof *merges);
    char *json = NULL;
    int64_t m = 0;
    if (!tok || !tok_len || !merges || byte_tokens(byte_id, tok, tok_len) != 0 ||
        setup(&T, c, byte_id) != 0)
        goto oom;
    for (; m < want; m++) {
        long pi = best_pair(&T);
        if (pi < 0) break;
        int32_t a = T.pair[pi].a, b = T.pair[pi].b, id = (int32_t)(256 + m);
        if (!(tok[id] = malloc(tok_len[a] + tok_len[b]))) goto oom;
        memcpy(tok[id], tok[a], tok_len[a]);
        memcpy(tok[id] + tok_len[a], tok[b], tok_len[b]);
        tok_len[id] = tok_len[a] + tok_len[b];
        merges[2 * m] = a;
        merges[2 * m + 1] = b;
        merge(&T, (size_t)pi, id);
        if (T.failed) goto oom;
        if (verbose && want >= 1000 && (m + 1) % (want / 10) == 0)
            printf("  tokenizer training: %lld of %lld merges\n", (long long)(m + 1),
                   (long long)want);
    }
    if (verbose && m < want)
        printf("  tokenizer training: stopped at %lld merges (%lld tokens): no pair of "
               "tokens occurs twice more\n", (long long)m, (long long)(m + 257));
    json = bpe_json_write((const unsigned char *const *)tok, tok_len, 256 + m, merges, m, len);
    if (!json) goto oom;
    goto done;
oom:
    snprintf(err, cap, "out of memory training the tokenizer");
    free(json);
    json = NULL;
done:
    if (tok)
        for (int64_t i = 0; i < vocab_size; i++) free(tok[i]);
    free(tok);
    free(tok_len);
    free(merges);
    trainer_free(&T);
    return json;
}
