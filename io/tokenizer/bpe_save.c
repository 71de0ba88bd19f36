/* bpe_save — writing a byte-level BPE as tokenizer.json text (bpe_train.h), in the
 * layout the Hugging Face tokenizers library saves: one vocabulary entry and one merge
 * per line. Token strings are the bytes shown through the GPT-2 byte map (printable
 * characters, never a space or a control), so only '"' and '\' need escapes. */
#define GT_TOKENIZER_MODULE /* may include bpe_internal.h */
#include "bpe_train.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bpe_internal.h"

typedef struct {
    char *s;
    size_t n, cap;
    int failed;
} strbuf;

static void put(strbuf *b, const char *s, size_t n)
{
    if (b->failed) return;
    if (b->n + n + 1 > b->cap) {
        size_t c = b->cap ? b->cap : 1 << 16;
        while (c < b->n + n + 1) c *= 2;
        char *g = realloc(b->s, c);
        if (!g) {
            b->failed = 1;
            return;
        }
        b->s = g;
        b->cap = c;
    }
    memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = '\0';
}

static void puts_(strbuf *b, const char *s) { put(b, s, strlen(s)); }

/* A token's bytes as a JSON string of their byte-map characters. */
static void put_token(strbuf *b, const unsigned char *tok, uint32_t len)
{
    char chars[2 * BPE_MAX_TOKEN_BYTES + 8], esc[4 * BPE_MAX_TOKEN_BYTES + 8];
    size_t n = bpe_bytes_to_chars(tok, len < BPE_MAX_TOKEN_BYTES ? len : BPE_MAX_TOKEN_BYTES,
                                  chars), o = 0;
    esc[o++] = '"';
    for (size_t i = 0; i < n; i++) {
        if (chars[i] == '"' || chars[i] == '\\') esc[o++] = '\\';
        esc[o++] = chars[i];
    }
    esc[o++] = '"';
    put(b, esc, o);
}

static const char head[] =
    "{\n  \"version\": \"1.0\",\n  \"truncation\": null,\n  \"padding\": null,\n"
    "  \"added_tokens\": [\n    {\n      \"id\": %lld,\n      \"content\": \"%s\",\n"
    "      \"single_word\": false,\n      \"lstrip\": false,\n      \"rstrip\": false,\n"
    "      \"normalized\": false,\n      \"special\": true\n    }\n  ],\n"
    "  \"normalizer\": null,\n"
    "  \"pre_tokenizer\": {\n    \"type\": \"ByteLevel\",\n    \"add_prefix_space\": false,\n"
    "    \"trim_offsets\": true,\n    \"use_regex\": true\n  },\n"
    "  \"post_processor\": null,\n"
    "  \"decoder\": {\n    \"type\": \"ByteLevel\",\n    \"add_prefix_space\": false,\n"
    "    \"trim_offsets\": true,\n    \"use_regex\": true\n  },\n"
    "  \"model\": {\n    \"type\": \"BPE\",\n    \"dropout\": null,\n    \"unk_token\": null,\n"
    "    \"continuing_subword_prefix\": null,\n    \"end_of_word_suffix\": null,\n"
    "    \"fuse_unk\": false,\n    \"byte_fallback\": false,\n    \"ignore_merges\": false,\n"
    "    \"vocab\": {";

char *bpe_json_write(const unsigned char *const *tok, const uint32_t *tok_len, int64_t n_tokens,
                     const int32_t *merges, int64_t n_merges, size_t *len)
{
    strbuf b = {0};
    char line[1024];
    snprintf(line, sizeof line, head, (long long)n_tokens, BPE_SPECIAL_TOKEN);
    puts_(&b, line);
    for (int64_t t = 0; t < n_tokens; t++) {
        puts_(&b, t ? ",\n      " : "\n      ");
        put_token(&b, tok[t], tok_len[t]);
        snprintf(line, sizeof line, ": %lld", (long long)t);
        puts_(&b, line);
    }
    puts_(&b, "\n    },\n    \"merges\": [");
    for (int64_t m = 0; m < n_merges; m++) {
        puts_(&b, m ? ",\n      [\n        " : "\n      [\n        ");
        put_token(&b, tok[merges[2 * m]], tok_len[merges[2 * m]]);
        puts_(&b, ",\n        ");
        put_token(&b, tok[merges[2 * m + 1]], tok_len[merges[2 * m + 1]]);
        puts_(&b, "\n      ]");
    }
    puts_(&b, "\n    ]\n  }\n}\n");
    if (b.failed) {
        free(b.s);
        return NULL;
    }
    *len = b.n;
    return b.s;
}
