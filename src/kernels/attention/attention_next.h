/* attention_next — the hint a head's kernels (attention_pairs.h, attention_tiles.h) get
 * about the head their thread will likely run next in the same pass: its rows are asked
 * into L2 a few at a time while this head's products run, so that its packing finds
 * them there. In the step a head's rows come from memory (a layer's q|k|v is 4.7 MB at
 * L6 C384, 256 rows a head, each 4.6 KB from the last), and unasked for, the packing
 * waited on them. Only a hint: no result depends on it.
 *
 * Header only. */
#ifndef GT_ATTENTION_NEXT_H
#define GT_ATTENTION_NEXT_H

#include <stddef.h>
#include <stdint.h>

#include "prefetch.h"

typedef struct {
    const uint16_t *q16; /* its q in BF16 storage (k, v at + C, + 2 C), rows 3 C apart */
    const float *dout;   /* a backward's output gradient, rows C apart */
} attention_next;

static inline attention_next attention_next_none(void)
{
    return (attention_next){NULL, NULL};
}

/* Rows r .. r + n of the next head's q|k|v (hs values each) and dout: called as this
 * head's kernels reach their own rows r .. r + n, so the lines come spread over it */
static inline void attention_next_rows(attention_next nx, int r, int n, int C, int hs)
{
    for (int t = r; t < r + n; t++) {
        if (nx.q16)
            for (int part = 0; part < 3; part++)
                gt_prefetch_l2(nx.q16 + (size_t)t * 3 * C + (size_t)part * C, (size_t)hs * 2);
        if (nx.dout) gt_prefetch_l2(nx.dout + (size_t)t * C, (size_t)hs * 4);
    }
}

#endif
