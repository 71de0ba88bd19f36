/* bpe_load — a tokenizer.json (parsed by json.c) into the tables of bpe_internal.h,
 * checking every field that matters (bpe.h says which are read and what is refused). */
#define GT_TOKENIZER_MODULE /* may include bpe_internal.h */
#include "bpe_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"

/* What loading needs besides the tokenizer: the parsed text, the error buffer and,
 * per id, its token string (for the decoding table). */
typedef struct {
    bpe *t;
    char *err;
    size_t cap;
    const char **id_str;
    uint32_t *id_len;
    int64_t n_ids; /* entries of id_str */
} loader;

static int fail(loader *L, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(L->err, L->cap, fmt, ap);
    va_end(ap);
    return -1;
}

/* A token string for a message: at most 40 bytes, controls and quotes escaped. */
static const char *shown(const char *s, size_t n, char out[200])
{
    size_t o = 0;
    for (size_t i = 0; i < n && o < 160; i++) {
        unsigned char c = (unsigned char)s[i];
        if (i == 40) {
            o += (size_t)snprintf(out + o, 200 - o, "...");
            break;
        }
        if (c < 0x20 || c == 0x7F || c == '\'' || c == '\\')
            o += (size_t)snprintf(out + o, 200 - o, "\\x%02X", c);
        else
            out[o++] = (char)c;
    }
    out[o] = '\0';
    return out;
}

/* A boolean member (absent or null: dflt). */
static int get_bool(loader *L, const json_value *obj, const char *where, const char *key,
                    int dflt, int *out)
{
    const json_value *v = json_get(obj, key);
    *out = dflt;
    if (!v || v->type == JSON_NULL) return 0;
    if (v->type != JSON_BOOL)
        return fail(L, "%s.%s must be true or false, not %s", where, key,
                    json_type_name(v->type));
    *out = v->u.boolean;
    return 0;
}

/* The "type" string of a component, or NULL when v is null or absent. */
static int type_of(loader *L, const json_value *v, const char *where, const char **type)
{
    *type = NULL;
    if (!v || v->type == JSON_NULL) return 0;
    const json_value *ty = json_get(v, "type");
    if (v->type != JSON_OBJECT || !ty || ty->type != JSON_STRING)
        return fail(L, "%s must be an object with a \"type\" string", where);
    *type = ty->u.str;
    return 0;
}

static int check_parts(loader *L, const json_value *root)
{
    const char *type;
    char s[200];
    const json_value *ver = json_get(root, "version");
    if (ver && !(ver->type == JSON_STRING && strcmp(ver->u.str, "1.0") == 0))
        return fail(L, "version must be \"1.0\"");
    if (type_of(L, json_get(root, "normalizer"), "normalizer", &type) != 0) return -1;
    if (type)
        return fail(L, "normalizer '%s' is not supported (only null)",
                    shown(type, strlen(type), s));
    const json_value *pre = json_get(root, "pre_tokenizer");
    if (type_of(L, pre, "pre_tokenizer", &type) != 0) return -1;
    if (!type || strcmp(type, "ByteLevel") != 0)
        return fail(L, "pre_tokenizer '%s' is not supported (only ByteLevel: a byte-level BPE "
                    "of the GPT-2 kind)", type ? shown(type, strlen(type), s) : "null");
    if (get_bool(L, pre, "pre_tokenizer", "add_prefix_space", 1, &L->t->add_prefix_space) ||
        get_bool(L, pre, "pre_tokenizer", "use_regex", 1, &L->t->use_regex))
        return -1;
    if (type_of(L, json_get(root, "decoder"), "decoder", &type) != 0) return -1;
    if (type && strcmp(type, "ByteLevel") != 0)
        return fail(L, "decoder '%s' is not supported (only ByteLevel)",
                    shown(type, strlen(type), s));
    return 0;
}

/* null or "" (the only values of the prefix/suffix options that change nothing). */
static int empty_or_null(const json_value *v)
{
    return !v || v->type == JSON_NULL || (v->type == JSON_STRING && v->n == 0);
}

static int model_options(loader *L, const json_value *m)
{
    bpe *t = L->t;
    const json_value *ty = json_get(m, "type"), *v;
    if (!ty || ty->type != JSON_STRING || strcmp(ty->u.str, "BPE") != 0)
        return fail(L, "model.type must be \"BPE\"");
    v = json_get(m, "dropout");
    if (v && v->type != JSON_NULL && !(v->type == JSON_NUMBER && v->u.number == 0.0))
        return fail(L, "model.dropout must be null or 0 (dropout makes encoding random)");
    if (!empty_or_null(json_get(m, "continuing_subword_prefix")) ||
        !empty_or_null(json_get(m, "end_of_word_suffix")))
        return fail(L, "model.continuing_subword_prefix and model.end_of_word_suffix must be "
                    "null or \"\" in a byte-level BPE");
    if (get_bool(L, m, "model", "fuse_unk", 0, &t->fuse_unk) ||
        get_bool(L, m, "model", "byte_fallback", 0, &t->byte_fallback) ||
        get_bool(L, m, "model", "ignore_merges", 0, &t->ignore_merges))
        return -1;
    if (t->byte_fallback)
        return fail(L, "model.byte_fallback must be false (it is for BPEs that are not "
                    "byte-level)");
    return 0;
}

/* model.vocab: token -> id. Ids below BPE_MAX_VOCAB, each used once. */
static int load_vocab(loader *L, const json_value *vocab)
{
    bpe *t = L->t;
    char s[200], s2[200];
    if (!vocab || vocab->type != JSON_OBJECT) return fail(L, "model.vocab must be an object");
    if (bpe_strmap_init(&t->vocab, vocab->n) != 0) return fail(L, "out of memory");
    for (uint32_t i = 0; i < vocab->n; i++) {
        const json_value *k = &vocab->u.items[2 * i], *v = &vocab->u.items[2 * i + 1];
        int64_t id;
        if (!json_int(v, 0, BPE_MAX_VOCAB - 1, &id))
            return fail(L, "model.vocab['%s']: the id must be a whole number from 0 to %d",
                        shown(k->u.str, k->n, s), BPE_MAX_VOCAB - 1);
        if (k->n == 0 || k->n > BPE_MAX_TOKEN_BYTES)
            return fail(L, "model.vocab: a token of %u bytes (1 to %d allowed)", k->n,
                        BPE_MAX_TOKEN_BYTES);
        if (bpe_strmap_put(&t->vocab, k->u.str, k->n, (int32_t)id) != 0)
            return fail(L, "out of memory");
        if (id >= t->vocab_size) t->vocab_size = id + 1;
    }
    /* a later duplicate key replaced the earlier id: check ids on the final map */
    L->n_ids = t->vocab_size;
    L->id_str = calloc((size_t)L->n_ids + 1, sizeof *L->id_str);
    L->id_len = calloc((size_t)L->n_ids + 1, sizeof *L->id_len);
    if (!L->id_str || !L->id_len) return fail(L, "out of memory");
    for (size_t i = 0; i < t->vocab.n; i++) {
        int32_t id = t->vocab.keys[i].id;
        const char *str = t->vocab.pool + t->vocab.keys[i].off;
        if (L->id_str[id])
            return fail(L, "model.vocab: id %d is given to both '%s' and '%s'", id,
                        shown(L->id_str[id], L->id_len[id], s),
                        shown(str, t->vocab.keys[i].len, s2));
        L->id_str[id] = str;
        L->id_len[id] = t->vocab.keys[i].len;
    }
    return 0;
}

/* One merge's two parts, from "a b" or ["a", "b"]. */
static int merge_parts(loader *L, const json_value *m, int64_t i, const char **a, size_t *an,
                       const char **b, size_t *bn)
{
    if (m->type == JSON_ARRAY && m->n == 2 && m->u.items[0].type == JSON_STRING &&
        m->u.items[1].type == JSON_STRING) {
        *a = m->u.items[0].u.str;
        *an = m->u.items[0].n;
        *b = m->u.items[1].u.str;
        *bn = m->u.items[1].n;
        return 0;
    }
    if (m->type == JSON_STRING) {
        const char *sp = memchr(m->u.str, ' ', m->n);
        if (sp && !memchr(sp + 1, ' ', m->n - (size_t)(sp + 1 - m->u.str))) {
            *a = m->u.str;
            *an = (size_t)(sp - m->u.str);
            *b = sp + 1;
            *bn = m->n - *an - 1;
            return 0;
        }
    }
    return fail(L, "model.merges[%lld] must be \"a b\" (one space) or [\"a\", \"b\"]",
                (long long)i);
}

static int load_merges(loader *L, const json_value *merges)
{
    bpe *t = L->t;
    char s[200], buf[2 * BPE_MAX_TOKEN_BYTES];
    if (!merges || merges->type != JSON_ARRAY) return fail(L, "model.merges must be an array");
    if (bpe_mergemap_init(&t->merges, merges->n) != 0) return fail(L, "out of memory");
    uint32_t rank = 0;
    for (uint32_t i = 0; i < merges->n; i++) {
        const json_value *m = &merges->u.items[i];
        if (m->type == JSON_STRING && m->n >= 8 && memcmp(m->u.str, "#version", 8) == 0)
            continue;
        const char *a = NULL, *b = NULL;
        size_t an = 0, bn = 0;
        if (merge_parts(L, m, i, &a, &an, &b, &bn) != 0) return -1;
        int32_t ia = bpe_strmap_get(&t->vocab, a, an), ib = bpe_strmap_get(&t->vocab, b, bn);
        if (ia < 0 || ib < 0)
            return fail(L, "model.merges[%u]: '%s' is not in the vocabulary", i,
                        ia < 0 ? shown(a, an, s) : shown(b, bn, s));
        memcpy(buf, a, an); /* each part is a vocabulary token: at most 4096 bytes */
        memcpy(buf + an, b, bn);
        int32_t ic = bpe_strmap_get(&t->vocab, buf, an + bn);
        if (ic < 0)
            return fail(L, "model.merges[%u]: the merged token '%s' is not in the vocabulary",
                        i, shown(buf, an + bn, s));
        bpe_mergemap_put(&t->merges, ia, ib, rank++, ic);
    }
    t->n_merges = (int64_t)t->merges.n;
    return 0;
}

/* One added token: its options, and the id the tokenizers library would give it. */
static int load_one_added(loader *L, const json_value *a, uint32_t i, int32_t *next_id)
{
    bpe *t = L->t;
    char where[48], s[200];
    snprintf(where, sizeof where, "added_tokens[%u]", i);
    const json_value *content = json_get(a, "content");
    int64_t id;
    if (a->type != JSON_OBJECT || !content || content->type != JSON_STRING)
        return fail(L, "%s must be an object with a \"content\" string", where);
    if (!json_int(json_get(a, "id"), 0, BPE_MAX_VOCAB - 1, &id))
        return fail(L, "%s.id must be a whole number from 0 to %d", where, BPE_MAX_VOCAB - 1);
    if (content->n == 0) return 0; /* ignored, as the tokenizers library does */
    if (content->n > BPE_MAX_TOKEN_BYTES)
        return fail(L, "%s.content is longer than %d bytes", where, BPE_MAX_TOKEN_BYTES);
    bpe_added *d = &t->added[t->n_added];
    if (get_bool(L, a, where, "special", 0, &d->special) ||
        get_bool(L, a, where, "normalized", !d->special, &d->normalized) ||
        get_bool(L, a, where, "lstrip", 0, &d->lstrip) ||
        get_bool(L, a, where, "rstrip", 0, &d->rstrip) ||
        get_bool(L, a, where, "single_word", 0, &d->single_word))
        return -1;
    int32_t expect = bpe_strmap_get(&t->vocab, content->u.str, content->n);
    for (int k = 0; k < t->n_added && expect < 0; k++)
        if (t->added[k].len == content->n &&
            memcmp(t->added_pool + t->added[k].off, content->u.str, content->n) == 0)
            expect = t->added[k].id;
    if (expect < 0) expect = (*next_id)++;
    if (id != expect)
        return fail(L, "%s '%s' has id %lld, but the tokenizers library gives it id %d",
                    where, shown(content->u.str, content->n, s), (long long)id, expect);
    d->id = expect;
    d->len = content->n;
    return 0;
}

static int load_added(loader *L, const json_value *list)
{
    bpe *t = L->t;
    if (!list || list->type == JSON_NULL) return 0;
    if (list->type != JSON_ARRAY) return fail(L, "added_tokens must be an array");
    size_t pool = 0;
    for (uint32_t i = 0; i < list->n; i++) {
        const json_value *c = json_get(&list->u.items[i], "content");
        if (c && c->type == JSON_STRING) pool += c->n;
    }
    t->added = calloc(list->n + 1, sizeof *t->added);
    t->added_pool = malloc(pool + 1);
    if (!t->added || !t->added_pool) return fail(L, "out of memory");
    int32_t next_id = (int32_t)t->vocab.n;
    uint32_t off = 0;
    for (uint32_t i = 0; i < list->n; i++) {
        const json_value *a = &list->u.items[i];
        int before = t->n_added;
        if (load_one_added(L, a, i, &next_id) != 0) return -1;
        const json_value *c = json_get(a, "content");
        if (c->n == 0) continue;
        bpe_added *d = &t->added[before];
        d->off = off;
        memcpy(t->added_pool + off, c->u.str, c->n);
        off += c->n;
        t->n_added++;
        if (d->id >= t->vocab_size) t->vocab_size = d->id + 1;
        if ((int)d->len > t->max_added_len) t->max_added_len = (int)d->len;
        if (bpe_trie_add(&t->trie[d->normalized ? 1 : 0], (const unsigned char *)c->u.str,
                         c->n, before) != 0)
            return fail(L, "out of memory");
    }
    if (next_id > BPE_MAX_VOCAB) return fail(L, "added_tokens: ids past %d", BPE_MAX_VOCAB);
    return 0;
}

/* The id of each byte's character, the unk and byte-fallback ids. */
static int byte_ids(loader *L, const json_value *model)
{
    bpe *t = L->t;
    char ch[4], s[200];
    for (unsigned b = 0; b < 256; b++) {
        size_t n = bpe_bytes_to_chars((const unsigned char *)&b, 1, ch);
        t->byte_id[b] = bpe_strmap_get(&t->vocab, ch, n);
    }
    const json_value *unk = json_get(model, "unk_token");
    t->unk_id = -1;
    if (unk && unk->type != JSON_NULL) {
        if (unk->type != JSON_STRING) return fail(L, "model.unk_token must be a string or null");
        t->unk_id = bpe_strmap_get(&t->vocab, unk->u.str, unk->n);
        if (t->unk_id < 0)
            return fail(L, "model.unk_token '%s' is not in the vocabulary",
                        shown(unk->u.str, unk->n, s));
    }
    return 0;
}

/* The bytes each id decodes to (bpe.h): the token's characters mapped back through
 * the byte table, or its own UTF-8 when a character is outside the table. */
static int build_decoder(loader *L)
{
    bpe *t = L->t;
    size_t total = 0;
    for (int k = 0; k < t->n_added; k++)
        if (t->added[k].id < L->n_ids && !L->id_str[t->added[k].id]) {
            L->id_str[t->added[k].id] = t->added_pool + t->added[k].off;
            L->id_len[t->added[k].id] = t->added[k].len;
        }
    for (int64_t i = 0; i < L->n_ids; i++) total += L->id_len[i];
    t->dec_pool = malloc(total + 1);
    t->dec_off = calloc((size_t)t->vocab_size + 1, sizeof *t->dec_off);
    t->dec_has = calloc((size_t)t->vocab_size + 1, 1);
    if (!t->dec_pool || !t->dec_off || !t->dec_has || total > UINT32_MAX)
        return fail(L, "out of memory");
    uint32_t o = 0;
    for (int64_t i = 0; i < t->vocab_size; i++) {
        t->dec_off[i] = o;
        const unsigned char *s = (const unsigned char *)(i < L->n_ids ? L->id_str[i] : NULL);
        if (!s) continue;
        size_t n = L->id_len[i], p = 0, start = o, clen;
        t->dec_has[i] = 1;
        for (; p < n; p += clen) {
            int b = bpe_char_byte(bpe_utf8_next(s + p, n - p, &clen));
            if (b < 0) break;
            t->dec_pool[o++] = (unsigned char)b;
        }
        if (p < n) { /* a character outside the table: the token as it is */
            memcpy(t->dec_pool + start, s, n);
            o = (uint32_t)(start + n);
        }
    }
    t->dec_off[t->vocab_size] = o;
    return 0;
}

static int load_all(loader *L, const json_value *root)
{
    if (root->type != JSON_OBJECT) return fail(L, "the top level must be an object");
    const json_value *model = json_get(root, "model");
    if (!model || model->type != JSON_OBJECT) return fail(L, "no \"model\" object");
    if (check_parts(L, root) != 0 || model_options(L, model) != 0 ||
        load_vocab(L, json_get(model, "vocab")) != 0 ||
        load_merges(L, json_get(model, "merges")) != 0)
        return -1;
    /* ids past the vocabulary's: grow the per-id arrays for the added tokens */
    if (load_added(L, json_get(root, "added_tokens")) != 0 || byte_ids(L, model) != 0)
        return -1;
    if (L->t->vocab_size == 0) return fail(L, "the vocabulary is empty");
    if (L->t->vocab_size > L->n_ids) {
        const char **s = realloc(L->id_str, ((size_t)L->t->vocab_size + 1) * sizeof *s);
        if (s) L->id_str = s;
        uint32_t *n = s ? realloc(L->id_len, ((size_t)L->t->vocab_size + 1) * sizeof *n) : NULL;
        if (!s || !n) return fail(L, "out of memory");
        L->id_len = n;
        for (int64_t i = L->n_ids; i < L->t->vocab_size; i++) {
            L->id_str[i] = NULL;
            L->id_len[i] = 0;
        }
        L->n_ids = L->t->vocab_size;
    }
    return build_decoder(L);
}

bpe *bpe_load(const char *json, size_t len, char *err, size_t cap)
{
    json_doc doc;
    char jerr[200];
    if (json_parse(json, len, &doc, jerr, sizeof jerr) != 0) {
        snprintf(err, cap, "not valid JSON: %s", jerr);
        return NULL;
    }
    bpe *t = calloc(1, sizeof *t);
    loader L = {t, err, cap, NULL, NULL, 0};
    int rc = t ? load_all(&L, &doc.root) : (snprintf(err, cap, "out of memory"), -1);
    free(L.id_str);
    free(L.id_len);
    json_free(&doc);
    if (rc != 0) {
        bpe_free(t);
        return NULL;
    }
    return t;
}

void bpe_free(bpe *t)
{
    if (!t) return;
    bpe_strmap_free(&t->vocab);
    bpe_mergemap_free(&t->merges);
    free(t->added);
    free(t->added_pool);
    bpe_trie_free(&t->trie[0]);
    bpe_trie_free(&t->trie[1]);
    free(t->dec_pool);
    free(t->dec_off);
    free(t->dec_has);
    free(t);
}
