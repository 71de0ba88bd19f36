/* bpe_parallel — cutting text where encoding the parts gives the ids of the whole, and
 * encoding those parts on several threads (bpe.h).
 *
 * A cut at p is safe when a piece of the GPT-2 split ends at p whatever came before,
 * and no added token can reach across it:
 *   - text[p-1] is a printable ASCII character other than space, text[p] a space and
 *     text[p+1] an ASCII letter: no piece holds a space after its first character, so
 *     the piece holding text[p-1] ends at p (and " x..." starts the next);
 *   - or text[p-1] is \t \n \v \f or \r and the character at p is not white space: a
 *     run of white space ends at p, and only a space (U+0020) joins the word after it.
 * Added tokens: no token may start within max_added_len bytes before p, nor at p or
 * p + 1 (an lstrip token there would take the space). */
#define GT_TOKENIZER_MODULE /* may include bpe_internal.h */
#include "bpe_internal.h"

#include <stdlib.h>
#include <string.h>

#include "unicode_tables.h"

static int ascii_letter(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
}

static int split_ends_at(const unsigned char *s, size_t len, size_t p)
{
    unsigned char prev = s[p - 1];
    if (prev > ' ' && prev < 0x7F && s[p] == ' ' && p + 1 < len && ascii_letter(s[p + 1]))
        return 1;
    if (prev == '\t' || prev == '\n' || prev == '\v' || prev == '\f' || prev == '\r') {
        size_t n;
        uint32_t cp = bpe_utf8_next(s + p, len - p, &n);
        return bpe_char_class(cp) != UC_SPACE;
    }
    return 0;
}

static int added_near(const bpe *t, const unsigned char *s, size_t len, size_t p)
{
    if (t->n_added == 0) return 0;
    size_t from = p > (size_t)t->max_added_len ? p - (size_t)t->max_added_len : 0;
    size_t to = p + 1 < len ? p + 1 : len - 1;
    for (size_t j = from; j <= to; j++) {
        size_t n;
        for (int k = 0; k < 2; k++)
            if (t->trie[k].first[s[j]] && bpe_trie_match(&t->trie[k], s + j, len - j, &n) >= 0)
                return 1;
    }
    return 0;
}

size_t bpe_cut_point(const bpe *t, const char *text, size_t len, size_t lo, size_t hi)
{
    const unsigned char *s = (const unsigned char *)text;
    if (!t->use_regex || hi >= len) return 0;
    for (size_t p = hi; p > lo && p > 0; p--)
        if (split_ends_at(s, len, p) && !added_near(t, s, len, p)) return p;
    return 0;
}

#define MIN_PART ((size_t)1 << 16) /* smaller texts are not worth a thread */

int bpe_encode_parallel(bpe_encoder **enc, int n_enc, const char *text, size_t len,
                        int at_start, bpe_ids *out)
{
    if (n_enc <= 1 || len < 2 * MIN_PART) return bpe_encode(enc[0], text, len, at_start, out);
    const bpe *t = bpe_encoder_tokenizer(enc[0]);
    int parts = n_enc;
    if ((size_t)parts > len / MIN_PART) parts = (int)(len / MIN_PART);
    size_t *cut = malloc(((size_t)parts + 1) * sizeof *cut);
    bpe_ids *res = calloc((size_t)parts, sizeof *res);
    int rc = -1;
    if (!cut || !res) goto done;
    cut[0] = 0;
    for (int k = 1; k < parts; k++) {
        size_t c = bpe_cut_point(t, text, len, cut[k - 1], len / (size_t)parts * (size_t)k);
        cut[k] = c ? c : cut[k - 1]; /* none: this part joins the next */
    }
    cut[parts] = len;
    int bad = 0;
#pragma omp parallel for num_threads(parts) schedule(static, 1) reduction(|| : bad)
    for (int k = 0; k < parts; k++) {
        if (cut[k + 1] > cut[k] &&
            bpe_encode(enc[k], text + cut[k], cut[k + 1] - cut[k], at_start && cut[k] == 0,
                       &res[k]) != 0)
            bad = 1;
    }
    if (bad) goto done;
    for (int k = 0; k < parts; k++)
        if (bpe_ids_append(out, res[k].v, res[k].n) != 0) goto done;
    rc = 0;
done:
    if (res)
        for (int k = 0; k < parts; k++) bpe_ids_free(&res[k]);
    free(res);
    free(cut);
    return rc;
}
