/* json — see json.h.
 *
 * Recursive descent, depth-bounded. Finished values wait on a stack until their array
 * or object closes; then they are copied into one contiguous run of the arena (a list
 * of blocks that json_free releases at once). Strings are checked in one pass (end,
 * UTF-8, control characters) and decoded in a second into the arena. */
#include "json.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BLOCK_BYTES ((size_t)1 << 20)
#define NUMBER_MAX 511 /* characters of one number */

typedef struct block {
    struct block *next;
    size_t used, cap;
    double data[]; /* aligned for json_value */
} block;

typedef struct {
    const unsigned char *s;
    size_t len, pos;
    json_value *stack;
    size_t sn, scap;
    block *blocks;
    char *err;
    size_t errcap;
} parser;

/* Reports a failure at byte offset at, with its line and column. Returns -1. */
static int fail(parser *p, size_t at, const char *fmt, ...)
{
    size_t line = 1, col = 1;
    for (size_t i = 0; i < at && i < p->len; i++) {
        if (p->s[i] == '\n') {
            line++;
            col = 1;
        } else {
            col++;
        }
    }
    int n = snprintf(p->err, p->errcap, "line %zu, column %zu: ", line, col);
    if (n >= 0 && (size_t)n < p->errcap) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(p->err + n, p->errcap - (size_t)n, fmt, ap);
        va_end(ap);
    }
    return -1;
}

static void *arena_alloc(parser *p, size_t bytes)
{
    bytes = (bytes + 7) & ~(size_t)7;
    block *b = p->blocks;
    if (!b || b->cap - b->used < bytes) {
        size_t cap = bytes > BLOCK_BYTES ? bytes : BLOCK_BYTES;
        b = malloc(sizeof *b + cap);
        if (!b) return NULL;
        b->next = p->blocks;
        b->used = 0;
        b->cap = cap;
        p->blocks = b;
    }
    void *r = (char *)b->data + b->used;
    b->used += bytes;
    return r;
}

static int push(parser *p, const json_value *v)
{
    if (p->sn == p->scap) {
        size_t cap = p->scap ? p->scap * 2 : 256;
        json_value *s = realloc(p->stack, cap * sizeof *s);
        if (!s) return fail(p, p->pos, "out of memory");
        p->stack = s;
        p->scap = cap;
    }
    p->stack[p->sn++] = *v;
    return 0;
}

static void skip_ws(parser *p)
{
    while (p->pos < p->len) {
        unsigned char c = p->s[p->pos];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
        p->pos++;
    }
}

/* Length of the valid UTF-8 sequence at s[0..avail) (lead byte >= 0x80), or 0. */
static size_t utf8_len(const unsigned char *s, size_t avail)
{
    unsigned c = s[0];
    size_t n;
    uint32_t cp;
    if (c >= 0xC2 && c <= 0xDF) { n = 2; cp = c & 0x1F; }
    else if (c >= 0xE0 && c <= 0xEF) { n = 3; cp = c & 0x0F; }
    else if (c >= 0xF0 && c <= 0xF4) { n = 4; cp = c & 0x07; }
    else return 0;
    if (avail < n) return 0;
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
        (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return n;
}

static int hex4(const unsigned char *s, uint32_t *out)
{
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) {
        unsigned c = s[i];
        v <<= 4;
        if (c >= '0' && c <= '9') v |= c - '0';
        else if (c >= 'a' && c <= 'f') v |= c - 'a' + 10;
        else if (c >= 'A' && c <= 'F') v |= c - 'A' + 10;
        else return -1;
    }
    *out = v;
    return 0;
}

static size_t put_utf8(char *d, uint32_t cp)
{
    if (cp < 0x80) { d[0] = (char)cp; return 1; }
    if (cp < 0x800) {
        d[0] = (char)(0xC0 | (cp >> 6));
        d[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        d[0] = (char)(0xE0 | (cp >> 12));
        d[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        d[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    d[0] = (char)(0xF0 | (cp >> 18));
    d[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    d[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    d[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* First pass over a string whose opening quote is at p->pos: finds the closing quote,
 * checking UTF-8 and control characters. */
static int string_end(parser *p, size_t *end)
{
    size_t i = p->pos + 1;
    while (i < p->len) {
        unsigned char c = p->s[i];
        if (c == '"') {
            *end = i;
            return 0;
        }
        if (c == '\\') {
            i += 2;
        } else if (c < 0x20) {
            return fail(p, i, "control character U+%04X inside a string (write it as an "
                        "escape)", c);
        } else if (c >= 0x80) {
            size_t n = utf8_len(p->s + i, p->len - i);
            if (!n) return fail(p, i, "invalid UTF-8 byte 0x%02X inside a string", c);
            i += n;
        } else {
            i++;
        }
    }
    return fail(p, p->pos, "unterminated string");
}

/* One escape at s[i] == '\\' into d; advances *i and *o. */
static int unescape(parser *p, size_t *i, char *d, size_t *o, size_t end)
{
    size_t at = *i;
    unsigned char e = at + 1 < end ? p->s[at + 1] : 0;
    const char *simple = strchr("\"\\/bfnrt", e);
    if (e && simple) {
        static const char to[] = "\"\\/\b\f\n\r\t";
        d[(*o)++] = to[simple - "\"\\/bfnrt"];
        *i = at + 2;
        return 0;
    }
    if (e != 'u')
        return fail(p, at, "invalid escape '\\%c' in a string", e >= 0x20 && e < 0x7F ? e : '?');
    uint32_t cp, lo;
    if (at + 6 > end || hex4(p->s + at + 2, &cp) != 0)
        return fail(p, at, "\\u must be followed by 4 hexadecimal digits");
    *i = at + 6;
    if (cp >= 0xDC00 && cp <= 0xDFFF)
        return fail(p, at, "lone low surrogate \\u%04X in a string", cp);
    if (cp >= 0xD800 && cp <= 0xDBFF) {
        if (at + 12 > end || p->s[at + 6] != '\\' || p->s[at + 7] != 'u' ||
            hex4(p->s + at + 8, &lo) != 0 || lo < 0xDC00 || lo > 0xDFFF)
            return fail(p, at, "high surrogate \\u%04X not followed by a low surrogate", cp);
        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
        *i = at + 12;
    }
    *o += put_utf8(d + *o, cp);
    return 0;
}

static int parse_string(parser *p, json_value *v)
{
    size_t end = 0;
    if (string_end(p, &end) != 0) return -1;
    size_t raw = end - p->pos - 1;
    char *d = arena_alloc(p, raw + 1); /* decoding never lengthens */
    if (!d) return fail(p, p->pos, "out of memory");
    size_t o = 0, i = p->pos + 1;
    while (i < end) {
        if (p->s[i] == '\\') {
            if (unescape(p, &i, d, &o, end) != 0) return -1;
        } else {
            d[o++] = (char)p->s[i++];
        }
    }
    d[o] = '\0';
    v->type = JSON_STRING;
    v->n = (uint32_t)o;
    v->u.str = d;
    p->pos = end + 1;
    return 0;
}

static size_t digits(const unsigned char *s, size_t i, size_t len)
{
    while (i < len && s[i] >= '0' && s[i] <= '9') i++;
    return i;
}

static int parse_number(parser *p, json_value *v)
{
    const unsigned char *s = p->s;
    size_t i = p->pos, start = i;
    if (i < p->len && s[i] == '-') i++;
    if (i >= p->len || s[i] < '0' || s[i] > '9') return fail(p, start, "invalid number");
    if (s[i] == '0' && i + 1 < p->len && s[i + 1] >= '0' && s[i + 1] <= '9')
        return fail(p, start, "invalid number (leading zero)");
    i = digits(s, i, p->len);
    if (i < p->len && s[i] == '.') {
        size_t j = digits(s, i + 1, p->len);
        if (j == i + 1) return fail(p, start, "invalid number (no digit after '.')");
        i = j;
    }
    if (i < p->len && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        if (i < p->len && (s[i] == '+' || s[i] == '-')) i++;
        size_t j = digits(s, i, p->len);
        if (j == i) return fail(p, start, "invalid number (no digit in the exponent)");
        i = j;
    }
    if (i - start > NUMBER_MAX)
        return fail(p, start, "number longer than %d characters", NUMBER_MAX);
    char buf[NUMBER_MAX + 1];
    memcpy(buf, s + start, i - start);
    buf[i - start] = '\0';
    double d = strtod(buf, NULL);
    if (!isfinite(d)) return fail(p, start, "number out of range");
    v->type = JSON_NUMBER;
    v->n = 0;
    v->u.number = d;
    p->pos = i;
    return 0;
}

static int parse_literal(parser *p, json_value *v)
{
    static const struct { const char *word; json_type t; int b; } lits[] = {
        {"null", JSON_NULL, 0}, {"true", JSON_BOOL, 1}, {"false", JSON_BOOL, 0}};
    for (int k = 0; k < 3; k++) {
        size_t n = strlen(lits[k].word);
        if (p->len - p->pos >= n && memcmp(p->s + p->pos, lits[k].word, n) == 0) {
            v->type = lits[k].t;
            v->n = 0;
            v->u.boolean = lits[k].b;
            p->pos += n;
            return 0;
        }
    }
    unsigned char c = p->s[p->pos];
    if (c >= 0x20 && c < 0x7F) return fail(p, p->pos, "expected a value, found '%c'", c);
    return fail(p, p->pos, "expected a value, found byte 0x%02X", c);
}

static int parse_value(parser *p, int depth, json_value *v);

/* Moves the top count values of the stack into the arena as v's items. */
static int collect(parser *p, size_t base, json_type t, json_value *v)
{
    size_t count = p->sn - base;
    v->type = t;
    v->n = (uint32_t)(t == JSON_OBJECT ? count / 2 : count);
    v->u.items = NULL;
    if (count) {
        v->u.items = arena_alloc(p, count * sizeof(json_value));
        if (!v->u.items) return fail(p, p->pos, "out of memory");
        memcpy(v->u.items, p->stack + base, count * sizeof(json_value));
    }
    p->sn = base;
    return 0;
}

/* An array or an object; the opening bracket is at p->pos. */
static int parse_container(parser *p, int depth, json_value *v)
{
    const int is_obj = p->s[p->pos] == '{';
    const char close = is_obj ? '}' : ']';
    if (depth >= JSON_MAX_DEPTH)
        return fail(p, p->pos, "nesting deeper than %d levels", JSON_MAX_DEPTH);
    size_t base = p->sn;
    p->pos++;
    skip_ws(p);
    if (p->pos < p->len && p->s[p->pos] == close) {
        p->pos++;
        return collect(p, base, is_obj ? JSON_OBJECT : JSON_ARRAY, v);
    }
    for (;;) {
        json_value item;
        skip_ws(p);
        if (is_obj) {
            if (p->pos >= p->len || p->s[p->pos] != '"')
                return fail(p, p->pos, "expected a string key in an object");
            if (parse_string(p, &item) != 0 || push(p, &item) != 0) return -1;
            skip_ws(p);
            if (p->pos >= p->len || p->s[p->pos] != ':')
                return fail(p, p->pos, "expected ':' after an object key");
            p->pos++;
        }
        if (parse_value(p, depth + 1, &item) != 0 || push(p, &item) != 0) return -1;
        skip_ws(p);
        if (p->pos < p->len && p->s[p->pos] == ',') {
            p->pos++;
            continue;
        }
        if (p->pos < p->len && p->s[p->pos] == close) {
            p->pos++;
            return collect(p, base, is_obj ? JSON_OBJECT : JSON_ARRAY, v);
        }
        return fail(p, p->pos, is_obj ? "expected ',' or '}' after an object member"
                                      : "expected ',' or ']' after an array item");
    }
}

static int parse_value(parser *p, int depth, json_value *v)
{
    skip_ws(p);
    if (p->pos >= p->len) return fail(p, p->pos, "unexpected end of input (expected a value)");
    unsigned char c = p->s[p->pos];
    if (c == '{' || c == '[') return parse_container(p, depth, v);
    if (c == '"') return parse_string(p, v);
    if (c == '-' || (c >= '0' && c <= '9')) return parse_number(p, v);
    return parse_literal(p, v);
}

static void free_blocks(block *b)
{
    while (b) {
        block *n = b->next;
        free(b);
        b = n;
    }
}

int json_parse(const char *text, size_t len, json_doc *doc, char *err, size_t cap)
{
    memset(doc, 0, sizeof *doc);
    parser p = {(const unsigned char *)text, len, 0, NULL, 0, 0, NULL, err, cap};
    if (cap) err[0] = '\0';
    if (len > JSON_MAX_BYTES) {
        snprintf(err, cap, "the text is %zu bytes; at most %zu are read", len,
                 (size_t)JSON_MAX_BYTES);
        return -1;
    }
    if (len >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0) p.pos = 3;
    json_value root;
    int rc = parse_value(&p, 0, &root);
    if (rc == 0) {
        skip_ws(&p);
        if (p.pos < p.len) rc = fail(&p, p.pos, "unexpected text after the JSON value");
    }
    free(p.stack);
    if (rc != 0) {
        free_blocks(p.blocks);
        return -1;
    }
    doc->root = root;
    doc->blocks = p.blocks;
    return 0;
}

void json_free(json_doc *doc)
{
    free_blocks(doc->blocks);
    memset(doc, 0, sizeof *doc);
}

const json_value *json_get(const json_value *obj, const char *key)
{
    if (!obj || obj->type != JSON_OBJECT) return NULL;
    size_t klen = strlen(key);
    for (uint32_t i = obj->n; i-- > 0;) {
        const json_value *k = &obj->u.items[2 * i];
        if (k->n == klen && memcmp(k->u.str, key, klen) == 0) return &obj->u.items[2 * i + 1];
    }
    return NULL;
}

double json_number(const json_value *obj, const char *key)
{
    const json_value *v = json_get(obj, key);
    return v && v->type == JSON_NUMBER ? v->u.number : NAN;
}

int json_int(const json_value *v, int64_t lo, int64_t hi, int64_t *out)
{
    if (!v || v->type != JSON_NUMBER) return 0;
    double d = v->u.number;
    if (!(d >= (double)lo && d <= (double)hi) || d != floor(d)) return 0;
    *out = (int64_t)d;
    return 1;
}

const char *json_type_name(json_type t)
{
    switch (t) {
    case JSON_NULL: return "null";
    case JSON_BOOL: return "a boolean";
    case JSON_NUMBER: return "a number";
    case JSON_STRING: return "a string";
    case JSON_ARRAY: return "an array";
    case JSON_OBJECT: return "an object";
    }
    return "?";
}
