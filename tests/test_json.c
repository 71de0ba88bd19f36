/* test_json — the JSON reader (io/tokenizer/json.c): valid documents read as they should be;
 * malformed and hostile ones fail with one message that names the place and the
 * problem. */
#include <stdint.h>

#include "json.h"
#include "testutil.h"

/* Parses text; on failure err holds the message. */
static int parse(const char *text, json_doc *doc, char *err, size_t cap)
{
    return json_parse(text, strlen(text), doc, err, cap);
}

/* Checks that text fails with a message containing want. */
static void refused(const char *text, size_t len, const char *want)
{
    json_doc doc;
    char err[256];
    int rc = json_parse(text, len, &doc, err, sizeof err);
    TU_CHECK(rc == -1 && strstr(err, want) != NULL, "refused %.30s...: \"%s\" (want \"%s\")",
             text, rc == -1 ? err : "(accepted)", want);
    json_free(&doc);
}

static void test_values(void)
{
    json_doc doc;
    char err[256];
    const char *text = " {\"a\": [1, -2.5e3, true, false, null, \"x\\u00e9\\ud83d\\ude00\\n\"],"
                       " \"b\": {}, \"c\": [], \"a\": 7, \"nul\": \"x\\u0000y\"} ";
    TU_CHECK(parse(text, &doc, err, sizeof err) == 0, "a document with every kind parses (%s)",
             err);
    const json_value *r = &doc.root;
    TU_CHECK(r->type == JSON_OBJECT && r->n == 5, "the root is an object of 5 members");
    const json_value *a = &r->u.items[1];
    TU_CHECK(a->type == JSON_ARRAY && a->n == 6, "the first a is an array of 6");
    TU_CHECK(a->u.items[0].u.number == 1.0 && a->u.items[1].u.number == -2500.0,
             "numbers read");
    TU_CHECK(a->u.items[2].type == JSON_BOOL && a->u.items[2].u.boolean == 1 &&
                 a->u.items[3].u.boolean == 0 && a->u.items[4].type == JSON_NULL,
             "true, false, null");
    const json_value *s = &a->u.items[5];
    TU_CHECK(s->type == JSON_STRING && s->n == 8 &&
                 memcmp(s->u.str, "x\xc3\xa9\xf0\x9f\x98\x80\n", 8) == 0,
             "escapes, \\u and a surrogate pair decode to UTF-8");
    int64_t v;
    TU_CHECK(json_int(json_get(r, "a"), 0, 10, &v) && v == 7, "json_get gives the last of "
             "duplicate keys");
    const json_value *nul = json_get(r, "nul");
    TU_CHECK(nul && nul->n == 3 && nul->u.str[1] == '\0' && nul->u.str[2] == 'y',
             "\\u0000 is kept inside a string");
    TU_CHECK(json_get(r, "missing") == NULL && json_get(a, "a") == NULL,
             "json_get: absent key, not an object");
    TU_CHECK(!json_int(&a->u.items[1], -10000, 10000, &v) || v == -2500,
             "json_int on -2.5e3");
    json_value half = {JSON_NUMBER, 0, {.number = 0.5}};
    TU_CHECK(!json_int(&half, 0, 10, &v), "0.5 is not an integer");
    json_free(&doc);

    TU_CHECK(parse("\xEF\xBB\xBF[1]", &doc, err, sizeof err) == 0 && doc.root.n == 1,
             "a leading byte order mark is skipped");
    json_free(&doc);
    TU_CHECK(parse("\"\xe4\xb8\xad\"", &doc, err, sizeof err) == 0 && doc.root.n == 3,
             "raw UTF-8 in a string");
    json_free(&doc);
}

static void test_malformed(void)
{
    refused("", 0, "unexpected end of input");
    refused("   ", 3, "line 1, column 4: unexpected end of input");
    refused("{\"a\" 1}", 7, "expected ':'");
    refused("{\"a\": 1,}", 9, "expected a string key");
    refused("[1 2]", 5, "expected ',' or ']'");
    refused("{\"a\": 1 \"b\": 2}", 15, "expected ',' or '}'");
    refused("[1,\n 2,\n x]", 11, "line 3, column 2: expected a value, found 'x'");
    refused("[tru]", 5, "expected a value");
    refused("[01]", 4, "leading zero");
    refused("[1.]", 4, "no digit after '.'");
    refused("[1e]", 4, "no digit in the exponent");
    refused("[+1]", 4, "expected a value");
    refused("[.5]", 4, "expected a value");
    refused("[NaN]", 5, "expected a value");
    refused("[1e999]", 7, "number out of range");
    refused("[\"abc]", 6, "unterminated string");
    refused("[\"a\tb\"]", 7, "control character U+0009");
    refused("[\"\\x\"]", 6, "invalid escape");
    refused("[\"\\u12\"]", 8, "4 hexadecimal digits");
    refused("[\"\\ud800\"]", 10, "not followed by a low surrogate");
    refused("[\"\\udc00\"]", 10, "lone low surrogate");
    refused("[\"\\ud800\\u0041\"]", 16, "not followed by a low surrogate");
    refused("[\"\xff\"]", 5, "invalid UTF-8 byte 0xFF");
    refused("[\"\xc0\xaf\"]", 6, "invalid UTF-8");          /* overlong '/' */
    refused("[\"\xed\xa0\x80\"]", 7, "invalid UTF-8");      /* a surrogate in UTF-8 */
    refused("[\"\xf4\x90\x80\x80\"]", 8, "invalid UTF-8");  /* past U+10FFFF */
    refused("[\"\xe4\xb8\"]", 6, "invalid UTF-8");          /* cut short */
    refused("[1] [2]", 7, "unexpected text after");
    refused("{} x", 4, "unexpected text after");
    refused("[1]\0", 4, "unexpected text after");
    refused("\x01", 1, "found byte 0x01");
    refused("{1: 2}", 6, "expected a string key");
}

static void test_limits(void)
{
    /* nesting: JSON_MAX_DEPTH levels parse, one more does not */
    char deep[2 * JSON_MAX_DEPTH + 8];
    for (int d = JSON_MAX_DEPTH; d <= JSON_MAX_DEPTH + 1; d++) {
        memset(deep, '[', (size_t)d);
        memset(deep + d, ']', (size_t)d);
        json_doc doc;
        char err[256];
        int rc = json_parse(deep, (size_t)(2 * d), &doc, err, sizeof err);
        TU_CHECK(d == JSON_MAX_DEPTH ? rc == 0 : rc == -1 && strstr(err, "nesting deeper"),
                 "%d levels of nesting: %s", d, rc == 0 ? "parsed" : err);
        json_free(&doc);
    }
    /* a long number */
    char num[600];
    memset(num, '1', sizeof num);
    refused(num, sizeof num, "longer than 511");
    /* over the size limit: refused before anything is read (no memory is touched) */
    json_doc doc;
    char err[256];
    TU_CHECK(json_parse("[]", JSON_MAX_BYTES + 1, &doc, err, sizeof err) == -1 &&
                 strstr(err, "at most"),
             "text over JSON_MAX_BYTES: %s", err);
    /* many values: a flat array of 200000 items */
    size_t n = 200000, len = 2 * n + 1;
    char *big = malloc(len + 1);
    if (!big) exit(99);
    big[0] = '[';
    for (size_t i = 0; i < n; i++) {
        big[1 + 2 * i] = '0';
        big[2 + 2 * i] = i + 1 < n ? ',' : ']';
    }
    TU_CHECK(json_parse(big, len, &doc, err, sizeof err) == 0 && doc.root.n == n,
             "an array of %zu items", n);
    json_free(&doc);
    /* every cut of a valid document is refused cleanly (no crash, a message) */
    const char *full = "{\"model\": {\"vocab\": {\"a\": 0, \"\\u00e9\": 1}, \"merges\": [[\"a\", "
                       "\"b\"]]}, \"x\": [true, null, -1.5e-3]}";
    int all = 1;
    for (size_t cut = 0; cut < strlen(full); cut++) {
        int rc = json_parse(full, cut, &doc, err, sizeof err);
        if (rc != -1 || err[0] == '\0') all = 0;
        json_free(&doc);
    }
    TU_CHECK(all, "each of the %zu prefixes of a document is refused with a message",
             strlen(full));
    free(big);
}

int main(void)
{
    test_values();
    test_malformed();
    test_limits();
    printf("%d checks, %d failed\n", tu_checks, tu_failures);
    return tu_failures ? 1 : 0;
}
