/* json — a small, bounded JSON reader (RFC 8259) for untrusted input such as a
 * tokenizer.json.
 *
 * json_parse reads the whole text into a tree of json_value. It accepts exactly JSON:
 * one value, surrounded by optional white space (a leading UTF-8 byte order mark is
 * skipped). Refused, each with one message naming the line and column (bytes, from 1):
 * text over JSON_MAX_BYTES, nesting deeper than JSON_MAX_DEPTH, invalid UTF-8 (overlong
 * forms, surrogates, code points past U+10FFFF), control characters inside strings,
 * unknown escapes, lone or misordered \u surrogates, numbers outside the double range
 * or not in JSON's grammar (leading zeros, "+1", ".5", NaN, Infinity), trailing text,
 * and running out of memory. Memory: the tree takes at most about 24 bytes per input
 * byte (each value costs at least one byte of text), so the limit on the input bounds
 * it; recursion depth is bounded by JSON_MAX_DEPTH.
 *
 * Strings are decoded (escapes resolved) into UTF-8, NUL-terminated, with their byte
 * length in n (a "\u0000" inside is kept: use n, not strlen). Objects keep their
 * members in input order, duplicates included; json_get returns the last one, as most
 * readers do. Nothing in the tree is modified after parsing; json_free releases it all. */
#ifndef GT_JSON_H
#define GT_JSON_H

#include <stddef.h>
#include <stdint.h>

#define JSON_MAX_BYTES ((size_t)128 << 20)
#define JSON_MAX_DEPTH 64

typedef enum {
    JSON_NULL,
    JSON_BOOL,
    JSON_NUMBER,
    JSON_STRING,
    JSON_ARRAY,
    JSON_OBJECT
} json_type;

typedef struct json_value json_value;
struct json_value {
    json_type type;
    uint32_t n; /* STRING: bytes; ARRAY: items; OBJECT: members */
    union {
        int boolean;
        double number;
        const char *str;   /* STRING: n bytes and a NUL */
        json_value *items; /* ARRAY: n values; OBJECT: 2n, key (a STRING) then value */
    } u;
};

typedef struct json_doc {
    json_value root;
    void *blocks; /* the memory the tree lives in (internal) */
} json_doc;

/* Parses text[0..len). 0 on success (doc filled; json_free it), or -1 with a message
 * ("line 3, column 17: expected ',' or '}' after an object member") in err, and doc
 * left empty (json_free on it is harmless). */
int json_parse(const char *text, size_t len, json_doc *doc, char *err, size_t cap);
void json_free(json_doc *doc);

/* The value of the last member named key of an object, or NULL (also when obj is not
 * an object). */
const json_value *json_get(const json_value *obj, const char *key);
/* The number of obj's member key (json_get), or NAN when it is absent or not a number
 * (the JSON Lines logs' fields). */
double json_number(const json_value *obj, const char *key);
/* 1 when v is a number holding an integer in [lo, hi] (stored in *out), else 0. */
int json_int(const json_value *v, int64_t lo, int64_t hi, int64_t *out);
/* "null", "a boolean", "a number", "a string", "an array", "an object". */
const char *json_type_name(json_type t);

#endif
