/* config_resume — see config.h: what changing a key on resume does (each row's
 * policy in config_keys.c), and when two values of a key are the same. */
#include "config_keys.h"

#include <string.h>

int config_resume_policy(const char *key)
{
    for (int i = 0; i < config_key_count; i++)
        if (strcmp(config_keys[i].name, key) == 0) return (int)config_keys[i].resume;
    return -1;
}

/* The next part of an HDF5 object path at *p: its length, *p moved to its start past
 * any '/' and "." parts (the root's own name and "this group"); 0 at the end. */
static size_t h5name_part(const char **p)
{
    for (;;) {
        while (**p == '/') (*p)++;
        size_t n = strcspn(*p, "/");
        if (n == 1 && **p == '.') {
            (*p)++;
            continue;
        }
        return n;
    }
}

static int same_h5name(const char *a, const char *b)
{
    for (;;) {
        const size_t na = h5name_part(&a), nb = h5name_part(&b);
        if (na != nb || strncmp(a, b, na) != 0) return 0;
        if (na == 0) return 1;
        a += na;
        b += nb;
    }
}

int config_values_same(const char *key, const char *a, const char *b)
{
    if (strcmp(a, b) == 0) return 1;
    const int ki = config_key_index(key);
    if (ki < 0 || !(config_keys[ki].flags & K_H5NAME)) return 0;
    /* "none" and "" turn evaluation off: they are words, not paths */
    if (config_is_none(a) || config_is_none(b)) return config_is_none(a) && config_is_none(b);
    return same_h5name(a, b);
}

const char *config_resume_reason(config_resume policy)
{
    switch (policy) {
    case CONFIG_RESUME_MATH: return "it changes the training math";
    case CONFIG_RESUME_HARMLESS: return "it changes no number of the steps to come";
    case CONFIG_RESUME_GRID: return "the grid and the batch split keep the global batch";
    case CONFIG_RESUME_PLACE: return "the data is compared by its fingerprint, not its path";
    }
    return "?";
}
