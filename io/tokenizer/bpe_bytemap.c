/* bpe_bytemap — GPT-2's byte <-> character map and a UTF-8 decoder (bpe_internal.h).
 *
 * The map: the printable bytes '!'..'~', 0xA1..0xAC and 0xAE..0xFF stand for the
 * characters of the same code point; the other 68 bytes (controls, space, 0x7F..0xA0,
 * 0xAD) take U+0100, U+0101, ... in byte order. So every byte is a printable character
 * and a token string never holds a space. */
#define GT_TOKENIZER_MODULE /* may include bpe_internal.h */
#include "bpe_internal.h"

#include <pthread.h>

static int printable(unsigned b)
{
    return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

uint32_t bpe_byte_char(unsigned b)
{
    b &= 0xFF;
    if (printable(b)) return b;
    uint32_t n = 0;
    for (unsigned c = 0; c < b; c++)
        if (!printable(c)) n++;
    return 256 + n;
}

int bpe_char_byte(uint32_t cp)
{
    if (cp < 256) return printable(cp) ? (int)cp : -1;
    if (cp >= 256 + 68) return -1;
    uint32_t n = cp - 256;
    for (unsigned c = 0; c < 256; c++) {
        if (printable(c)) continue;
        if (n == 0) return (int)c;
        n--;
    }
    return -1;
}

static uint16_t map[256];
static pthread_once_t map_once = PTHREAD_ONCE_INIT;

static void fill_map(void)
{
    for (unsigned b = 0; b < 256; b++) map[b] = (uint16_t)bpe_byte_char(b);
}

size_t bpe_bytes_to_chars(const unsigned char *s, size_t n, char *out)
{
    pthread_once(&map_once, fill_map);
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t cp = map[s[i]];
        if (cp < 0x80) {
            out[o++] = (char)cp;
        } else {
            out[o++] = (char)(0xC0 | (cp >> 6));
            out[o++] = (char)(0x80 | (cp & 0x3F));
        }
    }
    return o;
}

uint32_t bpe_utf8_next(const unsigned char *s, size_t n, size_t *len)
{
    unsigned c = s[0];
    if (c < 0x80) {
        *len = 1;
        return c;
    }
    size_t k;
    uint32_t cp;
    if (c >= 0xC2 && c <= 0xDF) { k = 2; cp = c & 0x1F; }
    else if (c >= 0xE0 && c <= 0xEF) { k = 3; cp = c & 0x0F; }
    else if (c >= 0xF0 && c <= 0xF4) { k = 4; cp = c & 0x07; }
    else goto bad;
    if (n < k) goto bad;
    for (size_t i = 1; i < k; i++) {
        if ((s[i] & 0xC0) != 0x80) goto bad;
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    if ((k == 3 && cp < 0x800) || (k == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
        (cp >= 0xD800 && cp <= 0xDFFF))
        goto bad;
    *len = k;
    return cp;
bad:
    *len = 1;
    return 0xFFFFFFFFu;
}
