/* bpe_decode — ids back to bytes, and what a loaded tokenizer is (bpe.h). The table of
 * each id's bytes is built at load (bpe_load.c). */
#define GT_TOKENIZER_MODULE /* may include bpe_internal.h */
#include "bpe_internal.h"

#include <string.h>

const unsigned char *bpe_token_bytes(const bpe *t, int32_t id, size_t *n)
{
    if (id < 0 || id >= t->vocab_size || !t->dec_has[id]) {
        *n = 0;
        return NULL;
    }
    *n = t->dec_off[id + 1] - t->dec_off[id];
    return t->dec_pool + t->dec_off[id];
}

int32_t bpe_token_id(const bpe *t, const char *token, size_t n)
{
    for (int k = 0; k < t->n_added; k++)
        if (t->added[k].len == n && memcmp(t->added_pool + t->added[k].off, token, n) == 0)
            return t->added[k].id;
    return bpe_strmap_get(&t->vocab, token, n);
}

int64_t bpe_vocab_size(const bpe *t) { return t->vocab_size; }
int64_t bpe_n_merges(const bpe *t) { return t->n_merges; }
int bpe_add_prefix_space(const bpe *t) { return t->add_prefix_space; }

int bpe_full_alphabet(const bpe *t)
{
    for (int b = 0; b < 256; b++)
        if (t->byte_id[b] < 0) return 0;
    return 1;
}
