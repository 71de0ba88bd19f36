/* fuzz_tokenizer — the tokenizer.json loader (io/tokenizer/json.c, io/tokenizer/bpe_load.c) on arbitrary
 * text; a tokenizer that loads then encodes a fixed text and the input itself, and
 * each id must decode (or be an id without bytes). When the tokenizer has every byte's
 * token, no added tokens and no prefix space, decode(encode(x)) must give x back. */
#define GT_TOKENIZER_MODULE /* may include bpe_internal.h */
#include <stdlib.h>
#include <string.h>

#include "bpe.h"
#include "bpe_internal.h"
#include "fuzz_common.h"

static void encode_check(const bpe *t, bpe_encoder *e, const char *text, size_t len)
{
    bpe_ids ids = {0};
    if (bpe_encode(e, text, len, 1, &ids) != 0) {
        bpe_ids_free(&ids);
        return; /* out of memory */
    }
    const int exact = bpe_full_alphabet(t) && t->n_added == 0 && !t->add_prefix_space;
    size_t o = 0;
    for (size_t i = 0; i < ids.n; i++) {
        if (ids.v[i] < 0 || ids.v[i] >= bpe_vocab_size(t)) abort();
        size_t n;
        const unsigned char *b = bpe_token_bytes(t, ids.v[i], &n);
        if (exact && (!b || o + n > len || memcmp(text + o, b, n) != 0)) abort();
        o += n;
    }
    if (exact && o != len) abort();
    bpe_ids_free(&ids);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[300];
    bpe *t = bpe_load((const char *)data, size, err, sizeof err);
    if (!t) {
        if (!err[0]) abort(); /* a refusal always says why */
        return 0;
    }
    bpe_encoder *e = bpe_encoder_new(t);
    if (e) {
        static const char text[] = "Hello, world! It's caf\xc3\xa9 \xe4\xb8\xad\xe6\x96\x87 "
                                   "\xf0\x9f\x98\x80 123  \n\n x<|endoftext|>y\xff";
        encode_check(t, e, text, sizeof text - 1);
        encode_check(t, e, (const char *)data, size < 4096 ? size : 4096);
    }
    bpe_encoder_free(e);
    bpe_free(t);
    return 0;
}
