/* tensors — see tensors.h. */
#include "tensors.h"

#include <stdlib.h>
#include <string.h>

#include "util.h"

int gt_tensor_table_init(gt_tensor_table *tab, int cap)
{
    memset(tab, 0, sizeof *tab);
    if (cap <= 0) return 0;
    tab->tensors = gt_malloc((size_t)cap * sizeof *tab->tensors, "tensor table");
    if (!tab->tensors) return -1;
    tab->cap = cap;
    return 0;
}

/* Room for one more entry. 0, or -1 (reported). */
static int grow(gt_tensor_table *tab)
{
    if (tab->count < tab->cap) return 0;
    if (tab->cap > (int)(((size_t)1 << 30) / sizeof *tab->tensors)) {
        gt_error("tensor table: more than %d tensors", tab->cap);
        return -1;
    }
    const int cap = tab->cap ? 2 * tab->cap : 16;
    gt_tensor *t = gt_malloc((size_t)cap * sizeof *t, "tensor table");
    if (!t) return -1;
    if (tab->count) memcpy(t, tab->tensors, (size_t)tab->count * sizeof *t);
    free(tab->tensors);
    tab->tensors = t;
    tab->cap = cap;
    return 0;
}

int gt_tensor_table_add(gt_tensor_table *tab, const char *name, int ndim,
                        const int64_t *dims)
{
    const size_t len = strlen(name);
    if (len == 0 || len >= GT_TENSOR_NAME_CAP || strchr(name, '/')) {
        gt_error("tensor table: bad tensor name \"%.*s\" (1 to %d characters, no '/')",
                 GT_TENSOR_NAME_CAP, name, GT_TENSOR_NAME_CAP - 1);
        return -1;
    }
    if (ndim < 1 || ndim > GT_TENSOR_MAX_DIMS) {
        gt_error("tensor table: tensor %s has %d dimensions (1 to %d)", name, ndim,
                 GT_TENSOR_MAX_DIMS);
        return -1;
    }
    size_t numel = 1;
    for (int k = 0; k < ndim; k++) {
        if (dims[k] < 1 || (uint64_t)dims[k] > SIZE_MAX / numel) {
            gt_error("tensor table: tensor %s: dimension %d is %lld (%s)", name, k,
                     (long long)dims[k], dims[k] < 1 ? "must be >= 1" : "too large");
            return -1;
        }
        numel *= (size_t)dims[k];
    }
    if (numel > SIZE_MAX - tab->total) {
        gt_error("tensor table: tensor %s does not fit in a buffer's size", name);
        return -1;
    }
    if (grow(tab) != 0) return -1;
    gt_tensor *t = &tab->tensors[tab->count++];
    memset(t, 0, sizeof *t);
    memcpy(t->name, name, len + 1);
    t->ndim = ndim;
    for (int k = 0; k < ndim; k++) t->dims[k] = dims[k];
    t->numel = numel;
    t->offset = tab->total;
    tab->total += numel;
    return 0;
}

int gt_tensor_table_find(const gt_tensor_table *tab, const char *name)
{
    for (int i = 0; i < tab->count; i++)
        if (strcmp(tab->tensors[i].name, name) == 0) return i;
    return -1;
}

void gt_tensor_table_free(gt_tensor_table *tab)
{
    free(tab->tensors);
    memset(tab, 0, sizeof *tab);
}
