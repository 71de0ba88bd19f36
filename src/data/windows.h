/* windows — which training windows a step reads.
 *
 * A window is T+1 consecutive tokens of one row (inputs = first T, targets = last T).
 * The data is a list of files (io/h5/h5set.h), file f holding rows[f] rows of row_len[f]
 * tokens (a 1-D stream is one row); windows never cross a row or a file. A single file
 * (windows_init) is the list of one. Each epoch the windows are laid at a random shift
 * (per file, in [0, slack of that file]) and visited in a random order given by a keyed
 * bijection on [0, count) (a Feistel network with cycle walking), so
 *  - memory is O(files) whatever the number of tokens (a few numbers per file),
 *  - sample g of the whole run (epoch = g / count) is a pure function of (seed, g): a
 *    resumed run, or rank r of R taking samples g = step*B*R + r*B + b, reads exactly
 *    what an uninterrupted or single-process run would, and samples of one epoch are
 *    disjoint.
 * With `random` set, sample g instead starts at a uniformly random token position of
 * the set (any file, row, and column that leaves T+1 tokens), drawn with replacement
 * from (seed, g) alone: the recipe of the common PyTorch reference trainers. The same
 * pure-function property holds; only the per-epoch disjointness is given up.
 * Evaluation uses K fixed windows spread evenly over the set (the same each eval).
 * A file whose rows are shorter than T+1 tokens holds no window (only an error when no
 * file has one). With one file the order is the same as it always was. */
#ifndef GT_WINDOWS_H
#define GT_WINDOWS_H

#include <stdint.h>

/* One file of a list (windows_init_files): its shape and where its windows and start
 * positions begin in the set's numbering. */
typedef struct windows_file {
    int64_t rows, row_len, per_row, slack;
    int64_t first;         /* index of its first window */
    uint64_t first_start;  /* index of its first start position (random mode) */
} windows_file;

typedef struct token_windows {
    /* File 0 (the only one for windows_init): its shape. */
    int64_t rows, row_len;   /* dataset shape (1-D: rows = 1) */
    int T;                   /* block_size */
    int64_t per_row;         /* windows per row at any shift */
    int64_t count;           /* windows of the whole set */
    int64_t slack;           /* largest shift that keeps per_row windows in a row */
    int random;              /* 1: sample uniform start positions with replacement */
    int files;               /* number of files (1 for windows_init) */
    windows_file *file;      /* [files] when files > 1 (windows_free), else NULL */
    uint64_t starts;         /* start positions of the whole set (random mode) */
} token_windows;

/* Fails (reporting `what`, e.g. "data.h5:/train/tokens") when a row is shorter than
 * T+1 tokens. Starts in epoch mode (random = 0). Allocates nothing. */
int windows_init(token_windows *w, int64_t rows, int64_t row_len, int T,
                 const char *what);
/* n files of rows[f] x row_len[f] tokens. Fails (reported) when no file holds a window
 * or the numbers overflow. Allocates an array of n records when n > 1: windows_free. */
int windows_init_files(token_windows *w, int n, const int64_t *rows,
                       const int64_t *row_len, int T, const char *what);
void windows_free(token_windows *w);

/* File, row and column of the first token of sample g of a run seeded with seed. */
void windows_locate(const token_windows *w, uint64_t seed, int64_t g, int *file,
                    int64_t *row, int64_t *col);
/* The same for a single file (file 0). */
void windows_sample(const token_windows *w, uint64_t seed, int64_t g, int64_t *row,
                    int64_t *col);

/* File, row and column of fixed evaluation window k of K (k < K). */
void windows_eval_at(const token_windows *w, int64_t k, int64_t K, int *file,
                     int64_t *row, int64_t *col);
void windows_eval(const token_windows *w, int64_t k, int64_t K, int64_t *row,
                  int64_t *col);

#endif
