/* gemm_split — how the BF16 products (gemm_bf16_avx512.c, gemm_bf16_amx_kernel.h) deal
 * the grid of one product's row strips x column strips out to their threads.
 *
 * The rows are cut into row blocks of at most `per_block` strips (the packed A buffer
 * of a thread holds one block); when the rows alone give fewer than two strips per
 * thread, the columns are cut too, into `groups` column groups. The work items are the
 * (row block, column group) pairs, rblocks x groups of them, a multiple of the thread
 * count, assigned statically: every thread gets the same share of the grid, give or
 * take one row strip per item. Two threads on a model's products keep groups = 1 (its
 * products have 19 row strips or more); many threads on few rows split the columns
 * instead of leaving threads idle (56 threads, 384 rows: 28 strips of 14 rows).
 *
 * Header only: static inline functions. */
#ifndef GT_GEMM_SPLIT_H
#define GT_GEMM_SPLIT_H

typedef struct {
    int rblocks; /* row blocks (some empty where there are fewer strips than blocks) */
    int groups;  /* column groups, 1 .. the column strips */
} gemm_split;

static inline gemm_split gemm_split_for(int mstrips, int per_block, int nstrips, int nthreads)
{
    gemm_split s = {1, 1};
    if (nthreads < 1) nthreads = 1;
    if (mstrips < 2 * nthreads && mstrips > 0) {
        s.groups = (2 * nthreads + mstrips - 1) / mstrips;
        if (s.groups > nstrips) s.groups = nstrips > 0 ? nstrips : 1;
    }
    s.rblocks = (mstrips + per_block - 1) / per_block;
    if (s.rblocks < 1) s.rblocks = 1;
    while ((s.rblocks * s.groups) % nthreads != 0) s.rblocks++; /* fewer than nthreads steps */
    return s;
}

/* Part i of `parts` near-equal parts of 0 .. total: [*lo, *hi) */
static inline void gemm_split_part(int i, int parts, int total, int *lo, int *hi)
{
    *lo = (int)((long long)i * total / parts);
    *hi = (int)((long long)(i + 1) * total / parts);
}

/* Item `it` of split s over mstrips x nstrips: its row block (*rb), its row strips
 * [*s0, *s1) and column strips [*c0, *c1); returns 0 when the item is empty. */
static inline int gemm_split_item(gemm_split s, int it, int mstrips, int nstrips, int *rb,
                                  int *s0, int *s1, int *c0, int *c1)
{
    *rb = it / s.groups;
    gemm_split_part(*rb, s.rblocks, mstrips, s0, s1);
    gemm_split_part(it % s.groups, s.groups, nstrips, c0, c1);
    return *s0 < *s1 && *c0 < *c1;
}

/* The avx512-bf16 path's split, in rows rather than strips: where the rows give every
 * thread two strips or more, they are first cut into one near-equal part a thread, and
 * each part into row blocks of up to `per_block` strips from its own first row, so
 * every part ends in its own short strip instead of one thread taking all of M's. With
 * a micro-kernel that runs only the rows a short strip has (gemm_bf16_avx512.c), the
 * threads then get the same rows give or take one: at M = 2048 on 2 threads, 73 strips
 * of 14 and one of 2 each, where strips alone gave one thread 74 strips' work and the
 * other 73. Where the rows are few, the strips are split as gemm_split_for does (one
 * part) and the columns too. The items are (part, row block, column group), thread t
 * taking part t's under `omp for schedule(static)`; or, for the avx512-bf16 path's
 * products on a packed weight, handed out as they run (gemm_steal.h). */
typedef struct {
    int parts;  /* near-equal parts of the rows: the thread count, or 1 */
    int blocks; /* row blocks a part (some empty in the shorter parts) */
    int groups; /* column groups, 1 .. the column strips */
} gemm_row_split;

static inline gemm_row_split gemm_row_split_for(int M, int mr, int per_block, int nstrips,
                                                int nthreads)
{
    if (nthreads < 1) nthreads = 1;
    const int mstrips = (M + mr - 1) / mr;
    if (mstrips < 2 * nthreads) {
        const gemm_split s = gemm_split_for(mstrips, per_block, nstrips, nthreads);
        return (gemm_row_split){1, s.rblocks, s.groups};
    }
    const int part_rows = (M + nthreads - 1) / nthreads; /* the longest part */
    const int part_strips = (part_rows + mr - 1) / mr;
    return (gemm_row_split){nthreads, (part_strips + per_block - 1) / per_block, 1};
}

/* The items of split s: parts x blocks x groups */
static inline int gemm_row_split_items(gemm_row_split s)
{
    return s.parts * s.blocks * s.groups;
}

/* Item `it` of split s over M rows (strips of mr) x nstrips column strips: a number for
 * its row block (*rb, the same for the items of one block), its rows [*m0, *m1) and
 * column strips [*c0, *c1); returns 0 when the item is empty. */
static inline int gemm_row_split_item(gemm_row_split s, int it, int M, int mr, int nstrips,
                                      int *rb, int *m0, int *m1, int *c0, int *c1)
{
    const int per_part = s.blocks * s.groups, part = it / per_part;
    const int block = it % per_part / s.groups;
    int lo, hi, s0, s1;
    *rb = it / s.groups;
    gemm_split_part(part, s.parts, M, &lo, &hi);
    gemm_split_part(block, s.blocks, (hi - lo + mr - 1) / mr, &s0, &s1);
    *m0 = lo + s0 * mr;
    *m1 = lo + s1 * mr < hi ? lo + s1 * mr : hi;
    gemm_split_part(it % s.groups, s.groups, nstrips, c0, c1);
    return *m0 < *m1 && *c0 < *c1;
}

#endif
