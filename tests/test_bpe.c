/* test_bpe — the byte-level BPE tokenizer (io/bpe_*.c) on small tokenizers built
 * here: the GPT-2 split on hand-checked cases, merges, added tokens, round trips of
 * arbitrary bytes, cut points and threads giving the ids of the whole text, and
 * malformed tokenizer files refused with a clear message. (The comparison with the
 * Hugging Face tokenizers package is tests/test_bpe_ref.sh.) */
#define GT_TOKENIZER_MODULE /* may include bpe_internal.h */
#include <stdint.h>

#include "bpe.h"
#include "bpe_internal.h"
#include "testutil.h"

/* A tokenizer.json text: the 256 byte tokens (id = byte), the merges given as
 * "a b" strings (ids from 256 in order) and <|endoftext|> after them. extra_model and
 * extra_root are spliced into the model and root objects (each "" or ending in ','). */
static char *make_json(const char *const *merges, int n_merges, int prefix_space,
                       const char *extra_model, const char *extra_root)
{
    size_t cap = 1 << 16, o = 0;
    char *j = malloc(cap);
    if (!j) exit(99);
    o += (size_t)snprintf(j + o, cap - o, "{%s\"version\": \"1.0\", \"added_tokens\": "
                          "[{\"id\": %d, \"content\": \"<|endoftext|>\", \"special\": true, "
                          "\"normalized\": false}], \"normalizer\": null, "
                          "\"pre_tokenizer\": {\"type\": \"ByteLevel\", \"add_prefix_space\": "
                          "%s, \"use_regex\": true}, \"decoder\": {\"type\": \"ByteLevel\"}, "
                          "\"model\": {%s\"type\": \"BPE\", \"vocab\": {",
                          extra_root, 256 + n_merges, prefix_space ? "true" : "false",
                          extra_model);
    for (unsigned b = 0; b < 256; b++) {
        char ch[4];
        size_t n = bpe_bytes_to_chars((const unsigned char *)&b, 1, ch);
        o += (size_t)snprintf(j + o, cap - o, "%s\"", b ? ", " : "");
        for (size_t i = 0; i < n; i++) {
            if (ch[i] == '"' || ch[i] == '\\') j[o++] = '\\';
            j[o++] = ch[i];
        }
        o += (size_t)snprintf(j + o, cap - o, "\": %u", b);
    }
    for (int m = 0; m < n_merges; m++) {
        o += (size_t)snprintf(j + o, cap - o, ", \"");
        for (const char *c = merges[m]; *c; c++)
            if (*c != ' ') j[o++] = *c;
        o += (size_t)snprintf(j + o, cap - o, "\": %d", 256 + m);
    }
    o += (size_t)snprintf(j + o, cap - o, "}, \"merges\": [");
    for (int m = 0; m < n_merges; m++)
        o += (size_t)snprintf(j + o, cap - o, "%s\"%s\"", m ? ", " : "", merges[m]);
    snprintf(j + o, cap - o, "]}}");
    return j;
}

static const char *const MERGES[] = {"Ġ t", "h e", "Ġt he", "l l", "e ll", "h ell", "o r",
                                     "Ġ w", "Ġw or", "l d", "Ġwor ld", "1 2", "Ġ 1", "' s"};
#define N_MERGES ((int)(sizeof MERGES / sizeof MERGES[0]))

static bpe *load_or_die(const char *json)
{
    char err[300];
    bpe *t = bpe_load(json, strlen(json), err, sizeof err);
    if (!t) {
        printf("FAIL cannot load the test tokenizer: %s\n", err);
        exit(1);
    }
    return t;
}

/* The split of text as "|"-joined pieces. */
static const char *split(const char *text)
{
    static char out[1024];
    size_t o = 0, len = strlen(text);
    for (size_t pos = 0; pos < len;) {
        size_t end = bpe_pretok_next((const unsigned char *)text, len, pos);
        if (pos) out[o++] = '|';
        memcpy(out + o, text + pos, end - pos);
        o += end - pos;
        pos = end;
    }
    out[o] = '\0';
    return out;
}

static void test_split(void)
{
    static const char *const cases[][2] = {
        {"Hello world", "Hello| world"},
        {"don't stop", "don|'t| stop"},
        {"they're here'll", "they|'re| here|'ll"},
        {"'sa 'S", "'s|a| '|S"},
        {"a   b", "a|  | b"},
        {"a\n\nb", "a|\n|\n|b"},
        {"a  ", "a|  "},
        {"x 123 !! ?", "x| 123| !!| ?"},
        {"abc123def", "abc|123|def"},
        {"\n b", "\n| b"},
        {" \n", " \n"},
        {"caf\xc3\xa9 \xe4\xb8\xad\xe6\x96\x87", "caf\xc3\xa9| \xe4\xb8\xad\xe6\x96\x87"},
        /* U+3000 is \s, but only U+0020 joins the word after it */
        {"a\xe3\x80\x80\xe3\x80\x80" "b", "a|\xe3\x80\x80|\xe3\x80\x80|b"},
        {"\xd9\xa3\xd9\xa4 x", "\xd9\xa3\xd9\xa4| x"},                      /* Arabic digits */
        {"e\xcc\x81", "e|\xcc\x81"},          /* a combining mark is none of L, N, \s */
        {"a\xff\xfe b", "a|\xff\xfe| b"},     /* invalid UTF-8: "other" characters */
        {"x''s", "x|''|s"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *got = split(cases[i][0]);
        TU_CHECK(strcmp(got, cases[i][1]) == 0, "split case %zu: got [%s]", i, got);
    }
}

/* The ids of text as a space-separated string. */
static const char *ids_of(const bpe *t, const char *text, size_t len, int at_start)
{
    static char out[4096];
    bpe_encoder *e = bpe_encoder_new(t);
    bpe_ids ids = {0};
    size_t o = 0;
    out[0] = '\0';
    if (!e || bpe_encode(e, text, len, at_start, &ids) != 0) strcpy(out, "(failed)");
    for (size_t i = 0; i < ids.n && o < sizeof out - 16; i++)
        o += (size_t)snprintf(out + o, sizeof out - o, i ? " %d" : "%d", ids.v[i]);
    bpe_ids_free(&ids);
    bpe_encoder_free(e);
    return out;
}

static void test_encode(void)
{
    char *json = make_json(MERGES, N_MERGES, 0, "", "");
    bpe *t = load_or_die(json);
    TU_CHECK(bpe_vocab_size(t) == 256 + N_MERGES + 1 && bpe_n_merges(t) == N_MERGES &&
                 bpe_full_alphabet(t),
             "vocab %lld, merges %lld", (long long)bpe_vocab_size(t), (long long)bpe_n_merges(t));
    /* " the" -> Ġthe (258); " world" -> Ġworld (266); "hello" -> h ell o ... */
    const char *got = ids_of(t, " the world", 10, 1);
    TU_CHECK(strcmp(got, "258 266") == 0, "\" the world\" -> %s", got);
    got = ids_of(t, "hello", 5, 1);
    TU_CHECK(strcmp(got, "257 259 111") == 0, "\"hello\" -> %s (he ll o: rank order)", got);
    got = ids_of(t, "it's 12", 7, 1);
    TU_CHECK(strcmp(got, "105 116 269 32 267") == 0, "\"it's 12\" -> %s", got);
    got = ids_of(t, "a<|endoftext|>the", 17, 1);
    TU_CHECK(strcmp(got, "97 270 116 257") == 0, "an added token splits the text: %s", got);
    TU_CHECK(bpe_token_id(t, "<|endoftext|>", 13) == 270 && bpe_token_id(t, "Ġthe", 5) == 258 &&
                 bpe_token_id(t, "nope", 4) == -1,
             "token ids by name");
    size_t n;
    const unsigned char *b = bpe_token_bytes(t, 258, &n);
    TU_CHECK(b && n == 4 && memcmp(b, " the", 4) == 0, "id 258 decodes to \" the\"");
    TU_CHECK(bpe_token_bytes(t, 271, &n) == NULL && bpe_token_bytes(t, -1, &n) == NULL,
             "ids outside the vocabulary decode to nothing");
    bpe_free(t);
    free(json);

    json = make_json(MERGES, N_MERGES, 1, "", "");
    t = load_or_die(json);
    got = ids_of(t, "the", 3, 1);
    TU_CHECK(strcmp(got, "258") == 0, "add_prefix_space: \"the\" at the start -> %s", got);
    got = ids_of(t, "the", 3, 0);
    TU_CHECK(strcmp(got, "116 257") == 0, "... but not in a continuation: %s", got);
    got = ids_of(t, "a<|endoftext|>the", 17, 0);
    TU_CHECK(strcmp(got, "97 270 258") == 0, "... and after an added token: %s", got);
    bpe_free(t);
    free(json);
}

/* A pseudo-random text of mixed words, spaces, newlines, UTF-8, invalid bytes and the
 * special token. */
static size_t random_text(char *buf, size_t len, uint64_t seed)
{
    static const char *const parts[] = {"the", " the", " world", "hello", "  ", "\n", "\n\n",
                                        "'s", " 12", "caf\xc3\xa9", "\xe4\xb8\xad", "\xff",
                                        "<|endoftext|>", "\t", "!!", " ", "\xf0\x9f\x98\x80",
                                        "\xe3\x80\x80", "x"};
    size_t o = 0;
    while (o < len) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        const char *p = parts[(seed >> 33) % (sizeof parts / sizeof parts[0])];
        size_t n = strlen(p);
        if (o + n > len) break;
        memcpy(buf + o, p, n);
        o += n;
    }
    return o;
}

static int same_ids(const bpe_ids *a, const bpe_ids *b)
{
    return a->n == b->n && (a->n == 0 || memcmp(a->v, b->v, a->n * sizeof *a->v) == 0);
}

static void test_round_trip_and_cuts(void)
{
    char *json = make_json(MERGES, N_MERGES, 0, "", "");
    bpe *t = load_or_die(json);
    bpe_encoder *enc[3] = {bpe_encoder_new(t), bpe_encoder_new(t), bpe_encoder_new(t)};
    size_t cap = 400000;
    char *text = malloc(cap);
    if (!enc[0] || !enc[1] || !enc[2] || !text) exit(99);
    /* every byte value, in a random order, round trips */
    for (size_t i = 0; i < 5000; i++) text[i] = (char)((i * 7919u + i / 256) & 0xFF);
    bpe_ids whole = {0}, parts = {0}, par = {0};
    int ok = bpe_encode(enc[0], text, 5000, 1, &whole) == 0;
    size_t o = 0;
    for (size_t i = 0; ok && i < whole.n; i++) {
        size_t n;
        const unsigned char *b = bpe_token_bytes(t, whole.v[i], &n);
        ok = b && o + n <= 5000 && memcmp(text + o, b, n) == 0;
        o += n;
    }
    TU_CHECK(ok && o == 5000, "5000 arbitrary bytes (invalid UTF-8 too) decode back exactly");

    size_t len = random_text(text, cap, 42);
    whole.n = 0;
    TU_CHECK(bpe_encode(enc[0], text, len, 1, &whole) == 0, "a %zu-byte text encodes", len);
    int cuts = 0, all_same = 1;
    for (size_t at = 1000; at < len; at += 7777) {
        size_t p = bpe_cut_point(t, text, len, at - 1000, at);
        if (!p) continue;
        cuts++;
        parts.n = 0;
        if (bpe_encode(enc[1], text, p, 1, &parts) != 0 ||
            bpe_encode(enc[1], text + p, len - p, 0, &parts) != 0 || !same_ids(&parts, &whole))
            all_same = 0;
    }
    TU_CHECK(cuts > 10 && all_same, "%d cut points: the two parts give the ids of the whole",
             cuts);
    TU_CHECK(bpe_encode_parallel(enc, 3, text, len, 1, &par) == 0 && same_ids(&par, &whole),
             "3 threads give the ids of one (%zu ids)", par.n);
    bpe_ids_free(&whole);
    bpe_ids_free(&parts);
    bpe_ids_free(&par);
    for (int k = 0; k < 3; k++) bpe_encoder_free(enc[k]);
    free(text);
    bpe_free(t);
    free(json);
}

/* A tokenizer made by make_json with text replaced, which must fail with want. */
static void refused(const char *what, const char *json, const char *want)
{
    char err[300];
    bpe *t = bpe_load(json, strlen(json), err, sizeof err);
    TU_CHECK(!t && strstr(err, want), "%s: refused with \"%s\"", what, t ? "(loaded)" : err);
    bpe_free(t);
}

static void test_malformed(void)
{
    static const char *const bad_form[] = {"a b c"};
    char *j = make_json(bad_form, 1, 0, "", "");
    refused("a merge with two spaces", j, "one space");
    free(j);
    j = make_json(MERGES, N_MERGES, 0, "\"dropout\": 0.1,", "");
    refused("dropout", j, "dropout");
    free(j);
    j = make_json(MERGES, N_MERGES, 0, "\"byte_fallback\": true,", "");
    refused("byte_fallback", j, "byte_fallback");
    free(j);
    j = make_json(MERGES, N_MERGES, 0, "\"continuing_subword_prefix\": \"##\",", "");
    refused("a subword prefix", j, "continuing_subword_prefix");
    free(j);
    j = make_json(MERGES, N_MERGES, 0, "", "\"normalizer\": {\"type\": \"NFC\"},");
    /* the later "normalizer": null wins (json_get takes the last): loads */
    char err[300];
    bpe *t = bpe_load(j, strlen(j), err, sizeof err);
    TU_CHECK(t != NULL, "a duplicate key: the last one counts");
    bpe_free(t);
    free(j);
    refused("not JSON", "{\"model\": ", "not valid JSON: line 1, column 11");
    refused("no model", "{}", "no \"model\" object");
    refused("a WordPiece model",
            "{\"pre_tokenizer\": {\"type\": \"ByteLevel\"}, \"model\": {\"type\": \"WordPiece\"}}",
            "model.type must be \"BPE\"");
    refused("a Metaspace pre-tokenizer",
            "{\"pre_tokenizer\": {\"type\": \"Metaspace\"}, \"model\": {\"type\": \"BPE\"}}",
            "pre_tokenizer 'Metaspace' is not supported");
    refused("no pre-tokenizer", "{\"model\": {\"type\": \"BPE\"}}", "pre_tokenizer 'null'");
    const char *pre = "{\"pre_tokenizer\": {\"type\": \"ByteLevel\"}, \"model\": {\"type\": "
                      "\"BPE\", ";
    char buf[512];
    snprintf(buf, sizeof buf, "%s\"vocab\": {\"a\": 1.5}, \"merges\": []}}", pre);
    refused("a fractional id", buf, "whole number");
    snprintf(buf, sizeof buf, "%s\"vocab\": {\"a\": 99999999999}, \"merges\": []}}", pre);
    refused("a huge id", buf, "whole number from 0 to");
    snprintf(buf, sizeof buf, "%s\"vocab\": {\"a\": 0, \"b\": 0}, \"merges\": []}}", pre);
    refused("an id used twice", buf, "id 0 is given to both");
    snprintf(buf, sizeof buf, "%s\"vocab\": {\"a\": 0}, \"merges\": [\"a b\"]}}", pre);
    refused("a merge of an unknown token", buf, "'b' is not in the vocabulary");
    snprintf(buf, sizeof buf, "%s\"vocab\": {\"a\": 0}, \"merges\": [[\"a\"]]}}", pre);
    refused("a merge pair of one", buf, "model.merges[0]");
    snprintf(buf, sizeof buf, "%s\"vocab\": {\"a\": 0}, \"merges\": {}}}", pre);
    refused("merges not an array", buf, "model.merges must be an array");
    snprintf(buf, sizeof buf, "%s\"vocab\": {}, \"merges\": []}}", pre);
    refused("an empty vocabulary", buf, "the vocabulary is empty");
    snprintf(buf, sizeof buf, "{\"added_tokens\": [{\"id\": 5, \"content\": \"<x>\"}], "
             "%s\"vocab\": {\"a\": 0}, \"merges\": []}}", pre + 1);
    refused("an added token with another id than the library gives", buf,
            "has id 5, but the tokenizers library gives it id 1");
    snprintf(buf, sizeof buf, "%s\"vocab\": {\"a\": 0}, \"merges\": [], \"unk_token\": "
             "\"<unk>\"}}", pre);
    refused("an unk_token outside the vocabulary", buf, "unk_token '<unk>'");
    snprintf(buf, sizeof buf, "{\"version\": \"2.0\", %s\"vocab\": {\"a\": 0}, \"merges\": "
             "[]}}", pre + 1);
    refused("another version", buf, "version must be \"1.0\"");
    /* a vocabulary without most bytes: loads, not a full alphabet, missing bytes dropped */
    snprintf(buf, sizeof buf, "%s\"vocab\": {\"a\": 0, \"b\": 1}, \"merges\": [\"a b\"]}}",
             pre);
    refused("a merged token missing", buf, "merged token 'ab'");
    snprintf(buf, sizeof buf, "%s\"vocab\": {\"a\": 0, \"b\": 1, \"ab\": 2}, \"merges\": "
             "[\"#version: 0.2\", \"a b\"]}}", pre);
    t = bpe_load(buf, strlen(buf), err, sizeof err);
    TU_CHECK(t && !bpe_full_alphabet(t) && bpe_n_merges(t) == 1,
             "a partial alphabet loads (#version line skipped)");
    if (t) {
        const char *got = ids_of(t, "xabx", 4, 1);
        TU_CHECK(strcmp(got, "2") == 0, "bytes without a token are dropped: %s", got);
    }
    bpe_free(t);
}

int main(void)
{
    test_split();
    test_encode();
    test_round_trip_and_cuts();
    test_malformed();
    printf("%d checks, %d failed\n", tu_checks, tu_failures);
    return tu_failures ? 1 : 0;
}
