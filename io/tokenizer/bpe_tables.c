/* bpe_tables — the hash tables of the tokenizer (bpe_internal.h): token strings to
 * ids, and merge pairs to their rank and result. Open addressing, linear probing,
 * power-of-two sizes kept at most half full. */
#define GT_TOKENIZER_MODULE /* may include bpe_internal.h */
#include "bpe_internal.h"

#include "util.h"

#include <stdlib.h>
#include <string.h>

uint64_t bpe_hash(const void *p, size_t n)
{
    const unsigned char *s = p;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) {
        h ^= s[i];
        h *= 0x100000001b3ull;
    }
    return h ^ (h >> 29);
}

static size_t pow2_at_least(size_t n)
{
    size_t c = 16;
    while (c < n) c *= 2;
    return c;
}

int bpe_strmap_init(bpe_strmap *m, size_t expect)
{
    memset(m, 0, sizeof *m);
    size_t slots = pow2_at_least(expect * 2 + 1);
    m->slot = calloc(slots, sizeof *m->slot);
    if (!m->slot) return -1;
    m->mask = slots - 1;
    return 0;
}

void bpe_strmap_free(bpe_strmap *m)
{
    free(m->slot);
    free(m->keys);
    free(m->pool);
    memset(m, 0, sizeof *m);
}

static size_t find_slot(const bpe_strmap *m, const char *key, size_t len)
{
    size_t i = (size_t)bpe_hash(key, len) & m->mask;
    for (;; i = (i + 1) & m->mask) {
        uint32_t k = m->slot[i];
        if (k == 0) return i;
        const char *s = m->pool + m->keys[k - 1].off;
        if (m->keys[k - 1].len == len && memcmp(s, key, len) == 0) return i;
    }
}

static int grow_slots(bpe_strmap *m)
{
    size_t slots = (m->mask + 1) * 2;
    uint32_t *old = m->slot;
    size_t old_n = m->mask + 1;
    if (!(m->slot = calloc(slots, sizeof *m->slot))) {
        m->slot = old;
        return -1;
    }
    m->mask = slots - 1;
    for (size_t i = 0; i < old_n; i++) {
        if (!old[i]) continue;
        const char *s = m->pool + m->keys[old[i] - 1].off;
        m->slot[find_slot(m, s, m->keys[old[i] - 1].len)] = old[i];
    }
    free(old);
    return 0;
}


int bpe_strmap_put(bpe_strmap *m, const char *key, size_t len, int32_t id)
{
    if (len > UINT32_MAX || m->pool_n + len + 1 > UINT32_MAX) return -1;
    size_t i = find_slot(m, key, len);
    if (m->slot[i]) {
        m->keys[m->slot[i] - 1].id = id;
        return 0;
    }
    if (gt_grow((void **)&m->keys, &m->cap, m->n + 1, sizeof *m->keys) != 0 ||
        gt_grow((void **)&m->pool, &m->pool_cap, m->pool_n + len + 1, 1) != 0)
        return -1;
    memcpy(m->pool + m->pool_n, key, len);
    m->pool[m->pool_n + len] = '\0';
    m->keys[m->n].off = (uint32_t)m->pool_n;
    m->keys[m->n].len = (uint32_t)len;
    m->keys[m->n].id = id;
    m->pool_n += len + 1;
    m->slot[i] = (uint32_t)++m->n;
    if (m->n * 2 > m->mask + 1) return grow_slots(m);
    return 0;
}

int32_t bpe_strmap_get(const bpe_strmap *m, const char *key, size_t len)
{
    if (!m->slot) return -1;
    uint32_t k = m->slot[find_slot(m, key, len)];
    return k ? m->keys[k - 1].id : -1;
}

int bpe_mergemap_init(bpe_mergemap *m, size_t expect)
{
    size_t slots = pow2_at_least(expect * 2 + 1);
    m->slot = calloc(slots, sizeof *m->slot);
    m->mask = slots - 1;
    m->n = 0;
    return m->slot ? 0 : -1;
}

void bpe_mergemap_free(bpe_mergemap *m)
{
    free(m->slot);
    memset(m, 0, sizeof *m);
}

/* The table is sized for every merge at init, so it never grows. */
void bpe_mergemap_put(bpe_mergemap *m, int32_t a, int32_t b, uint32_t rank, int32_t id)
{
    uint64_t key = (((uint64_t)(uint32_t)a << 32) | (uint32_t)b) + 1;
    uint64_t h = key * 0x9E3779B97F4A7C15ull;
    size_t i = (size_t)(h >> 20) & m->mask;
    while (m->slot[i].key != 0 && m->slot[i].key != key) i = (i + 1) & m->mask;
    if (m->slot[i].key == 0) m->n++;
    m->slot[i].key = key;
    m->slot[i].rank = rank;
    m->slot[i].id = id;
}
