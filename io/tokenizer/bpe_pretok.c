/* bpe_pretok — the GPT-2 pre-tokenizer split (bpe_internal.h), by hand:
 *
 *   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 *
 * At each position the alternatives are tried in order and the first that matches
 * wins, each as long as it can be:
 *   - an apostrophe (U+0027) followed by s, t, re, ve, m, ll or d (lower case);
 *   - an optional space (U+0020 only) and a run of letters, of numbers, or of
 *     characters that are none of letter, number, white space;
 *   - a run of white space: whole when it ends the text; otherwise \s+(?!\S) backs off
 *     one character, so the run without its last character (when that leaves at least
 *     one), else (a single character) \s+ takes it alone. The character left over then
 *     starts the next piece, and as a space it joins the word after it.
 * Invalid UTF-8 bytes are characters of their own of class "other" (bpe.h). */
#define GT_TOKENIZER_MODULE /* may include bpe_internal.h */
#include "bpe_internal.h"

#include <pthread.h>

#include "unicode_tables.h"

static unsigned char bmp_class[0x10000];
static pthread_once_t bmp_once = PTHREAD_ONCE_INIT;

static void fill_bmp(void)
{
    for (int i = 0; i < uc_n_ranges && uc_ranges[i].first < 0x10000; i++) {
        uint32_t last = uc_ranges[i].last < 0xFFFF ? uc_ranges[i].last : 0xFFFF;
        for (uint32_t cp = uc_ranges[i].first; cp <= last; cp++)
            bmp_class[cp] = (unsigned char)uc_ranges[i].cls;
    }
}

int bpe_char_class(uint32_t cp)
{
    if (cp < 0x10000) {
        pthread_once(&bmp_once, fill_bmp);
        return bmp_class[cp];
    }
    return uc_class_search(cp); /* 0xFFFFFFFF (an invalid byte) is UC_OTHER */
}

/* The class of the character at s[pos] and its length. */
static int class_at(const unsigned char *s, size_t len, size_t pos, size_t *clen)
{
    if (s[pos] < 0x80) {
        *clen = 1;
        return bmp_class[s[pos]];
    }
    uint32_t cp = bpe_utf8_next(s + pos, len - pos, clen);
    return bpe_char_class(cp);
}

/* The end of the run of characters of class cls starting at pos. */
static size_t run_of(const unsigned char *s, size_t len, size_t pos, int cls)
{
    size_t n;
    while (pos < len && class_at(s, len, pos, &n) == cls) pos += n;
    return pos;
}

/* 's 't 'm 'd (2 bytes), 're 've 'll (3), or 0. s[pos] is the apostrophe. */
static size_t contraction(const unsigned char *s, size_t len, size_t pos)
{
    if (pos + 1 >= len) return 0;
    unsigned char a = s[pos + 1];
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
    if (pos + 2 >= len) return 0;
    unsigned char b = s[pos + 2];
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
    return 0;
}

/* A run of white space starting at pos. */
static size_t space_piece(const unsigned char *s, size_t len, size_t pos)
{
    size_t last = pos, n, i = pos, count = 0;
    while (i < len && class_at(s, len, i, &n) == UC_SPACE) {
        last = i;
        i += n;
        count++;
    }
    if (i == len || count == 1) return i;
    return last; /* leave the last one to the next piece */
}

size_t bpe_pretok_next(const unsigned char *s, size_t len, size_t pos)
{
    pthread_once(&bmp_once, fill_bmp);
    size_t n;
    if (s[pos] == '\'') {
        size_t c = contraction(s, len, pos);
        if (c) return pos + c;
    }
    int cls = class_at(s, len, pos, &n);
    if (s[pos] == ' ' && pos + 1 < len) {
        size_t n1;
        int next = class_at(s, len, pos + 1, &n1);
        if (next != UC_SPACE) return run_of(s, len, pos + 1 + n1, next);
    }
    if (cls == UC_SPACE) return space_piece(s, len, pos);
    return run_of(s, len, pos + n, cls);
}
