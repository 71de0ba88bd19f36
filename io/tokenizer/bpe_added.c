/* bpe_added — finding added tokens (such as <|endoftext|>) in text, as Hugging Face's
 * added vocabulary does (bpe_internal.h):
 *   1. the tokens with normalized = false are found in the whole text, leftmost first
 *      and, of those starting at one place, the longest;
 *   2. then those with normalized = true, the same way, in each piece of text between
 *      the tokens found in 1 (each piece seen on its own: a token never spans two).
 * A match of a single_word token with a word character (letter, number or '_') right
 * before or after it is skipped (the text it covered stays text); lstrip takes the
 * white space before the token into it (not past the previous token), rstrip the white
 * space after. */
#define GT_TOKENIZER_MODULE /* may include bpe_internal.h */
#include "bpe_internal.h"

#include <stdlib.h>
#include <string.h>

#include "unicode_tables.h"

int bpe_trie_add(bpe_trie *t, const unsigned char *s, size_t n, int32_t added)
{
    if (t->n == 0) {
        t->cap = 64;
        if (!(t->node = malloc((size_t)t->cap * sizeof *t->node))) return -1;
        t->node[0] = (bpe_trie_node){-1, -1, -1, 0};
        t->n = 1;
    }
    int32_t cur = 0;
    for (size_t i = 0; i < n; i++) {
        int32_t c = t->node[cur].child;
        while (c >= 0 && t->node[c].byte != s[i]) c = t->node[c].sibling;
        if (c < 0) {
            if (t->n == t->cap) {
                if (t->cap > INT32_MAX / 2) return -1;
                bpe_trie_node *g = realloc(t->node, (size_t)t->cap * 2 * sizeof *g);
                if (!g) return -1;
                t->node = g;
                t->cap *= 2;
            }
            c = t->n++;
            t->node[c] = (bpe_trie_node){-1, t->node[cur].child, -1, s[i]};
            t->node[cur].child = c;
        }
        cur = c;
    }
    if (t->node[cur].added < 0) t->node[cur].added = added; /* the first of duplicates */
    t->first[s[0]] = 1;
    return 0;
}

void bpe_trie_free(bpe_trie *t)
{
    free(t->node);
    memset(t, 0, sizeof *t);
}

int32_t bpe_trie_match(const bpe_trie *t, const unsigned char *s, size_t n, size_t *len)
{
    int32_t best = -1, cur = 0;
    if (t->n == 0 || !t->first[s[0]]) return -1;
    for (size_t i = 0; i < n; i++) {
        int32_t c = t->node[cur].child;
        while (c >= 0 && t->node[c].byte != s[i]) c = t->node[c].sibling;
        if (c < 0) break;
        cur = c;
        if (t->node[cur].added >= 0) {
            best = t->node[cur].added;
            *len = i + 1;
        }
    }
    return best;
}

/* The class of the character ending at s[end) (before end), or UC_OTHER at 0. */
static int class_before(const unsigned char *s, size_t start, size_t end, size_t *clen)
{
    size_t i = end;
    *clen = 0;
    if (end == start) return -1;
    do i--; while (i > start && end - i < 4 && (s[i] & 0xC0) == 0x80);
    size_t n;
    uint32_t cp = bpe_utf8_next(s + i, end - i, &n);
    if (i + n != end) { /* not a whole character: the last byte alone */
        *clen = 1;
        return UC_OTHER;
    }
    *clen = n;
    return bpe_char_class(cp);
}

static int is_word_char(const unsigned char *s, size_t n, int cls)
{
    return cls == UC_LETTER || cls == UC_NUMBER || (n == 1 && s[0] == '_');
}

/* Appends a piece. */
static int add_piece(bpe_piece **p, size_t *cap, long *n, size_t start, size_t end, int32_t id)
{
    if ((size_t)*n == *cap) {
        size_t c = *cap ? *cap * 2 : 64;
        bpe_piece *g = realloc(*p, c * sizeof *g);
        if (!g) return -1;
        *p = g;
        *cap = c;
    }
    (*p)[(*n)++] = (bpe_piece){start, end, id};
    return 0;
}

/* Whether a single_word match [a, b) of text [start, end) stands alone. */
static int single_word_ok(const unsigned char *s, size_t start, size_t end, size_t a, size_t b)
{
    size_t n;
    int before = class_before(s, start, a, &n);
    if (before >= 0 && is_word_char(s + a - n, n, before)) return 0;
    if (b < end) {
        uint32_t cp = bpe_utf8_next(s + b, end - b, &n);
        if (is_word_char(s + b, n, bpe_char_class(cp))) return 0;
    }
    return 1;
}

/* One pass of trie over text [start, end): appends text pieces (id -1) and token
 * pieces to *p. */
static int find_in(const bpe *t, const bpe_trie *trie, const unsigned char *s, size_t start,
                   size_t end, bpe_piece **p, size_t *cap, long *n)
{
    size_t done = start, pos = start, len = 0, clen;
    while (pos < end) {
        int32_t k = trie->first[s[pos]] ? bpe_trie_match(trie, s + pos, end - pos, &len) : -1;
        if (k < 0) {
            pos++;
            continue;
        }
        const bpe_added *a = &t->added[k];
        size_t ms = pos, me = pos + len;
        pos = me;
        if (a->single_word && !single_word_ok(s, start, end, ms, me)) continue;
        if (a->lstrip)
            while (ms > done && class_before(s, done, ms, &clen) == UC_SPACE) ms -= clen;
        if (a->rstrip) {
            while (me < end) {
                uint32_t cp = bpe_utf8_next(s + me, end - me, &clen);
                if (bpe_char_class(cp) != UC_SPACE) break;
                me += clen;
            }
            if (me > pos) pos = me;
        }
        if (ms > done && add_piece(p, cap, n, done, ms, -1) != 0) return -1;
        if (add_piece(p, cap, n, ms, me, a->id) != 0) return -1;
        done = me;
    }
    if (done < end && add_piece(p, cap, n, done, end, -1) != 0) return -1;
    return 0;
}

long bpe_split_added(const bpe *t, const unsigned char *text, size_t len, bpe_piece **pieces,
                     size_t *cap)
{
    long n = 0;
    if (len == 0) return 0;
    if (t->trie[0].n == 0 && t->trie[1].n == 0) {
        if (add_piece(pieces, cap, &n, 0, len, -1) != 0) return -1;
        return n;
    }
    if (find_in(t, &t->trie[0], text, 0, len, pieces, cap, &n) != 0) return -1;
    if (t->trie[1].n == 0) return n;
    /* pass 2 over the text pieces of pass 1: rebuild the list in place from a copy */
    long n1 = n;
    bpe_piece *first = malloc((size_t)n1 * sizeof *first);
    if (!first) return -1;
    memcpy(first, *pieces, (size_t)n1 * sizeof *first);
    n = 0;
    int rc = 0;
    for (long i = 0; i < n1 && rc == 0; i++) {
        if (first[i].id >= 0)
            rc = add_piece(pieces, cap, &n, first[i].start, first[i].end, first[i].id);
        else
            rc = find_in(t, &t->trie[1], text, first[i].start, first[i].end, pieces, cap, &n);
    }
    free(first);
    return rc == 0 ? n : -1;
}
