/* windows — which training windows a step reads.
 *
 * A window is T+1 consecutive tokens of one row (inputs = first T, targets = last T).
 * A 1-D stream is one row. Each epoch the windows are laid at a random shift in
 * [0, slack] and visited in a random order given by a keyed bijection on
 * [0, count) (a Feistel network with cycle walking), so
 *  - memory is O(1) whatever the dataset size,
 *  - sample g of the whole run (epoch = g / count) is a pure function of (seed, g): a
 *    resumed run, or rank r of R taking samples g = step*B*R + r*B + b, reads exactly
 *    what an uninterrupted or single-process run would, and samples of one epoch are
 *    disjoint.
 * With `random` set, sample g instead starts at a uniformly random token position of
 * the set (any row, any column that leaves T+1 tokens), drawn with replacement from
 * (seed, g) alone: the recipe of the common PyTorch reference trainers. The same
 * pure-function property holds; only the per-epoch disjointness is given up.
 * Evaluation uses K fixed windows spread evenly over the set (the same each eval). */
#ifndef GT_WINDOWS_H
#define GT_WINDOWS_H

#include <stdint.h>

typedef struct token_windows {
    int64_t rows, row_len;   /* dataset shape (1-D: rows = 1) */
    int T;                   /* block_size */
    int64_t per_row;         /* windows per row at any shift */
    int64_t count;           /* rows * per_row */
    int64_t slack;           /* largest shift that keeps per_row windows in a row */
    int random;              /* 1: sample uniform start positions with replacement */
} token_windows;

/* Fails (reporting `what`, e.g. "data.h5:/train/tokens") when a row is shorter than
 * T+1 tokens. Starts in epoch mode (random = 0). */
int windows_init(token_windows *w, int64_t rows, int64_t row_len, int T,
                 const char *what);

/* Row and column of the first token of sample g of a run seeded with seed. */
void windows_sample(const token_windows *w, uint64_t seed, int64_t g, int64_t *row,
                    int64_t *col);

/* Row and column of fixed evaluation window k of K (k < K). */
void windows_eval(const token_windows *w, int64_t k, int64_t K, int64_t *row,
                  int64_t *col);

#endif
