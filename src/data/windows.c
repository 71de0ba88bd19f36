/* windows — see windows.h.
 *
 * Layout of one row of n tokens: per_row windows of T+1 tokens starting at
 * shift, shift + T, shift + 2T, ... (consecutive windows share one token, the last
 * target of one being the first input of the next, so no token is wasted as a target).
 * The last window ends at shift + per_row*T, so any shift in [0, slack] with
 * slack = (n-1) - per_row*T keeps every window inside the row. When the row is long
 * enough we give up one window so that slack >= T-1 and every token position can be a
 * window start in some epoch; otherwise (T+1 <= n < 2T) the one window slides over what
 * slack there is.
 *
 * Order: a keyed Feistel network permutes [0, 4^h) with 4^h >= count; cycle walking
 * (re-applying the permutation until the value lands below count) restricts it to a
 * bijection of [0, count). Since 4^h < 4*count, the expected number of walks is < 4. */
#include "windows.h"

#include <stdint.h>
#include <stdlib.h>

#include "rng.h"
#include "util.h"

#define FEISTEL_ROUNDS 6

/* Domain-separation constants so the order key and the shift of an epoch are
 * unrelated functions of (seed, epoch). */
#define KEY_ORDER 0x243F6A8885A308D3ull
#define KEY_SHIFT 0x13198A2E03707344ull
#define KEY_ROUND 0xA4093822299F31D0ull
#define KEY_RANDOM 0x082EFA98EC4E6C89ull

/* Windows per row and slack of rows of n >= T+1 tokens (see the top of the file). */
static void row_layout(int64_t n, int T, int64_t *per_row, int64_t *slack)
{
    int64_t p = (n - 1 - (T - 1)) / T;
    if (p < 1) p = (n - 1) / T; /* T+1 <= n < 2T: exactly one window */
    *per_row = p;
    *slack = (n - 1) - p * (int64_t)T;
}

int windows_init(token_windows *w, int64_t rows, int64_t row_len, int T, const char *what)
{
    if (!what) what = "dataset";
    if (T < 1) {
        gt_error("%s: block_size must be >= 1 (got %d)", what, T);
        return -1;
    }
    if (rows < 1 || row_len < 0) {
        gt_error("%s: has no rows to train on", what);
        return -1;
    }
    if (row_len < (int64_t)T + 1) {
        if (rows == 1)
            gt_error("%s has %lld tokens; block_size %d needs at least %lld", what,
                     (long long)row_len, T, (long long)T + 1);
        else
            gt_error("%s: rows of %lld tokens are too short for block_size %d "
                     "(need at least %lld)",
                     what, (long long)row_len, T, (long long)T + 1);
        return -1;
    }
    int64_t per_row, slack;
    row_layout(row_len, T, &per_row, &slack);
    if (per_row > INT64_MAX / rows) {
        gt_error("%s: %lld rows x %lld windows per row is too many windows", what,
                 (long long)rows, (long long)per_row);
        return -1;
    }
    w->rows = rows;
    w->row_len = row_len;
    w->T = T;
    w->per_row = per_row;
    w->count = rows * per_row;
    w->slack = slack;
    w->random = 0;
    w->files = 1;
    w->file = NULL;
    if ((uint64_t)rows > UINT64_MAX / (uint64_t)(row_len - T)) {
        gt_error("%s: %lld rows x %lld start positions is too many", what, (long long)rows,
                 (long long)(row_len - T));
        return -1;
    }
    w->starts = (uint64_t)rows * (uint64_t)(row_len - T);
    return 0;
}

/* Lays file f out after the files before it; 0, or -1 when a count overflows. */
static int lay_file(windows_file *f, int T, int64_t *count, uint64_t *starts)
{
    f->first = *count;
    f->first_start = *starts;
    f->per_row = f->slack = 0;
    if (f->rows < 1 || f->row_len < (int64_t)T + 1) return 0; /* holds no window */
    row_layout(f->row_len, T, &f->per_row, &f->slack);
    if (f->per_row > (INT64_MAX - *count) / f->rows) return -1;
    *count += f->rows * f->per_row;
    const uint64_t n = (uint64_t)(f->row_len - T);
    if ((uint64_t)f->rows > (UINT64_MAX - *starts) / n) return -1;
    *starts += (uint64_t)f->rows * n;
    return 0;
}

int windows_init_files(token_windows *w, int n, const int64_t *rows,
                       const int64_t *row_len, int T, const char *what)
{
    if (!what) what = "dataset";
    if (n == 1) return windows_init(w, rows[0], row_len[0], T, what);
    if (n < 1 || T < 1) {
        gt_error("%s: %s", what, n < 1 ? "no files to train on" : "block_size must be >= 1");
        return -1;
    }
    windows_file *f = gt_malloc((size_t)n * sizeof *f, "window layout of the files");
    if (!f) return -1;
    int64_t count = 0;
    uint64_t starts = 0;
    for (int i = 0; i < n; i++) {
        f[i].rows = rows[i];
        f[i].row_len = row_len[i];
        if (lay_file(&f[i], T, &count, &starts) != 0) {
            gt_error("%s: %d files hold too many windows to number", what, n);
            free(f);
            return -1;
        }
    }
    if (count == 0) {
        gt_error("%s: no file has a row of %lld tokens that block_size %d needs", what,
                 (long long)T + 1, T);
        free(f);
        return -1;
    }
    *w = (token_windows){f[0].rows, f[0].row_len, T, f[0].per_row, count, f[0].slack, 0,
                         n, f, starts};
    return 0;
}

void windows_free(token_windows *w)
{
    if (!w) return;
    free(w->file);
    w->file = NULL;
}

/* File i's record; for a single file, made from the scalar fields. */
static windows_file file_at(const token_windows *w, int i)
{
    if (w->file) return w->file[i];
    return (windows_file){w->rows, w->row_len, w->per_row, w->slack, 0, 0};
}

/* The file holding window j (by window index) or start position p (by_start). */
static int find_file(const token_windows *w, uint64_t x, int by_start)
{
    if (!w->file) return 0;
    int lo = 0, hi = w->files - 1; /* the last file whose first <= x */
    while (lo < hi) {
        const int mid = lo + (hi - lo + 1) / 2;
        const uint64_t first = by_start ? w->file[mid].first_start
                                        : (uint64_t)w->file[mid].first;
        if (first <= x) lo = mid; else hi = mid - 1;
    }
    return lo;
}

/* Keyed bijection of [0, 2^(2h)) for 1 <= h <= 32: a balanced Feistel network with
 * h-bit halves. */
static uint64_t feistel(uint64_t x, int h, uint64_t key)
{
    uint64_t mask = (h >= 32) ? 0xFFFFFFFFull : ((1ull << h) - 1);
    uint64_t left = (x >> h) & mask, right = x & mask;
    for (int r = 0; r < FEISTEL_ROUNDS; r++) {
        uint64_t f = rng_hash(right, key ^ (KEY_ROUND * (uint64_t)(r + 1))) & mask;
        uint64_t next = left ^ f;
        left = right;
        right = next;
    }
    return (left << h) | right;
}

/* Keyed bijection of [0, count), count >= 1. */
static uint64_t permute(uint64_t i, uint64_t count, uint64_t key)
{
    int h = 1;
    while (h < 32 && (1ull << (2 * h)) < count) h++;
    /* i < count <= 4^h, and i lies on a cycle of the Feistel permutation that contains
     * i itself, so walking along it reaches a value < count in finitely many steps. */
    uint64_t x = i;
    do {
        x = feistel(x, h, key);
    } while (x >= count);
    return x;
}

void windows_locate(const token_windows *w, uint64_t seed, int64_t g, int *file,
                    int64_t *row, int64_t *col)
{
    uint64_t ug = (uint64_t)g;
    if (w->random) {
        /* row_len - T start positions per row; the modulo bias of a 64-bit hash over
         * fewer than 2^40 positions is below 1e-7 and is ignored. */
        uint64_t p = rng_hash(ug, seed ^ KEY_RANDOM) % w->starts;
        const int f = find_file(w, p, 1);
        const windows_file fi = file_at(w, f);
        const uint64_t per = (uint64_t)(fi.row_len - w->T), q = p - fi.first_start;
        *file = f;
        *row = (int64_t)(q / per);
        *col = (int64_t)(q % per);
        return;
    }
    uint64_t count = (uint64_t)w->count;
    uint64_t epoch = ug / count, i = ug % count;
    uint64_t key = rng_hash(epoch, seed ^ KEY_ORDER);
    uint64_t j = permute(i, count, key);
    const int f = find_file(w, j, 0);
    const windows_file fi = file_at(w, f);
    uint64_t shift = rng_hash(epoch, seed ^ KEY_SHIFT) % ((uint64_t)fi.slack + 1);
    uint64_t per_row = (uint64_t)fi.per_row, k = j - (uint64_t)fi.first;
    *file = f;
    *row = (int64_t)(k / per_row);
    *col = (int64_t)(shift + (k % per_row) * (uint64_t)w->T);
}

void windows_sample(const token_windows *w, uint64_t seed, int64_t g, int64_t *row,
                    int64_t *col)
{
    int file;
    windows_locate(w, seed, g, &file, row, col);
}

/* floor(a * b / c) for a < c without overflowing 64 bits. */
static uint64_t muldiv(uint64_t a, uint64_t b, uint64_t c)
{
#if defined(__SIZEOF_INT128__)
    return (uint64_t)(((unsigned __int128)a * b) / c);
#else
    /* a*b/c = a*(b/c) + a*(b%c)/c; the second product is below c*c. */
    uint64_t q = b / c, r = b % c;
    if (c <= 0xFFFFFFFFull) return a * q + (a * r) / c;
    return a * q + (uint64_t)((long double)a * (long double)r / (long double)c);
#endif
}

void windows_eval_at(const token_windows *w, int64_t k, int64_t K, int *file,
                     int64_t *row, int64_t *col)
{
    uint64_t count = (uint64_t)w->count;
    uint64_t j;
    if ((uint64_t)K <= count)
        j = muldiv((uint64_t)k, count, (uint64_t)K);
    else
        j = (uint64_t)k % count;
    const int f = find_file(w, j, 0);
    const windows_file fi = file_at(w, f);
    uint64_t per_row = (uint64_t)fi.per_row, i = j - (uint64_t)fi.first;
    *file = f;
    *row = (int64_t)(i / per_row);
    *col = (int64_t)((i % per_row) * (uint64_t)w->T);
}

void windows_eval(const token_windows *w, int64_t k, int64_t K, int64_t *row,
                  int64_t *col)
{
    int file;
    windows_eval_at(w, k, K, &file, row, col);
}
