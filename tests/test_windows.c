/* test_windows — the window order is a bijection per epoch, windows stay inside their
 * rows for every shift, epochs and seeds differ, eval windows are spread evenly, and
 * short rows are refused. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rng.h"
#include "windows.h"
#include "testutil.h"

static const uint64_t seeds[] = {0, 1, 2, 1234567, 0xFFFFFFFFFFFFFFFFull};
#define NSEEDS (sizeof seeds / sizeof seeds[0])

/* Window indices (row * per_row + k) of the samples of one epoch, in sample order, and
 * the epoch's shift (the smallest column: every row has a window k = 0). Returns the
 * number of samples that are out of their row or off the epoch's grid. */
static int64_t epoch_indices(const token_windows *w, uint64_t seed, int64_t e,
                             int64_t *idx, int64_t *shift_out)
{
    int64_t count = w->count, shift = INT64_MAX, bad = 0;
    for (int64_t i = 0; i < count; i++) {
        int64_t row, col;
        windows_sample(w, seed, e * count + i, &row, &col);
        if (row < 0 || row >= w->rows || col < 0 || col + w->T + 1 > w->row_len) {
            bad++;
            idx[i] = -1;
            continue;
        }
        idx[i] = row * w->row_len + col; /* position for now */
        if (col < shift) shift = col;
    }
    if (shift > w->slack) bad++;
    for (int64_t i = 0; i < count; i++) {
        if (idx[i] < 0) continue;
        int64_t row = idx[i] / w->row_len, col = idx[i] % w->row_len;
        int64_t k = (col - shift) / w->T;
        if ((col - shift) % w->T != 0 || k >= w->per_row) {
            bad++;
            idx[i] = -1;
            continue;
        }
        idx[i] = row * w->per_row + k;
    }
    *shift_out = shift;
    return bad;
}

/* Every sample of epochs 0..2 lies inside its row, all samples of one epoch share one
 * shift, and each window index is hit exactly once per epoch. */
static void check_epochs(const token_windows *w, uint64_t seed, const char *label)
{
    int64_t count = w->count;
    unsigned char *hit = calloc((size_t)count, 1);
    int64_t *idx = malloc((size_t)count * sizeof *idx);
    if (!hit || !idx) {
        TU_CHECK(0, "out of memory");
        free(hit);
        free(idx);
        return;
    }
    for (int64_t e = 0; e < 3; e++) {
        memset(hit, 0, (size_t)count);
        int64_t shift, dup = 0, missing = 0;
        int64_t bad = epoch_indices(w, seed, e, idx, &shift);
        for (int64_t i = 0; i < count; i++) {
            if (idx[i] < 0) continue;
            dup += hit[idx[i]];
            hit[idx[i]] = 1;
        }
        for (int64_t j = 0; j < count; j++) missing += !hit[j];
        TU_CHECK(bad == 0 && dup == 0 && missing == 0,
                 "%s seed %llu epoch %lld: count %lld shift %lld, bad %lld, "
                 "duplicates %lld, missing %lld",
                 label, (unsigned long long)seed, (long long)e, (long long)count,
                 (long long)shift, (long long)bad, (long long)dup, (long long)missing);
    }
    free(hit);
    free(idx);
}

/* Simpler and stricter: within an epoch all windows are distinct starts, their columns
 * are congruent mod T, and the set of (row, (col - c0) / T) covers every index. */
static void check_disjoint(const token_windows *w, uint64_t seed, int64_t epoch,
                           const char *label)
{
    int64_t count = w->count;
    int64_t *starts = malloc((size_t)count * sizeof *starts);
    if (!starts) {
        TU_CHECK(0, "out of memory");
        return;
    }
    int64_t base = -1, incongruent = 0;
    for (int64_t i = 0; i < count; i++) {
        int64_t row, col;
        windows_sample(w, seed, epoch * count + i, &row, &col);
        starts[i] = row * w->row_len + col;
        int64_t c0 = col % w->T;
        if (base < 0) base = c0;
        if (c0 != base) incongruent++;
    }
    int64_t dup = 0;
    /* count is small here; sort and look for neighbours that coincide or overlap by more
     * than the one shared boundary token. */
    for (int64_t a = 1; a < count; a++) {
        int64_t v = starts[a], b = a - 1;
        while (b >= 0 && starts[b] > v) {
            starts[b + 1] = starts[b];
            b--;
        }
        starts[b + 1] = v;
    }
    for (int64_t a = 1; a < count; a++) {
        if (starts[a] - starts[a - 1] < w->T) dup++;
    }
    TU_CHECK(dup == 0 && incongruent == 0,
             "%s seed %llu epoch %lld: windows disjoint (overlapping %lld, off-grid %lld)",
             label, (unsigned long long)seed, (long long)epoch, (long long)dup,
             (long long)incongruent);
    free(starts);
}

static void test_bijection_counts(void)
{
    /* 1-D streams: rows = 1, row_len chosen so that count comes out as wanted. With
     * T = 1, n tokens give per_row = n - 1 (n >= 2), so n = count + 1. */
    static const int64_t counts[] = {1, 2, 3, 7, 64, 1000, 4099};
    for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
        token_windows w;
        int rc = windows_init(&w, counts[c], 2, 1, "bijection");
        /* rows = count, row_len = 2, T = 1: exactly one window per row, slack 0. */
        TU_CHECK(rc == 0 && w.count == counts[c] && w.per_row == 1 && w.slack == 0,
                 "count %lld: init rc %d count %lld per_row %lld slack %lld",
                 (long long)counts[c], rc, (long long)w.count, (long long)w.per_row,
                 (long long)w.slack);
        if (rc != 0) continue;
        for (size_t s = 0; s < NSEEDS; s++) {
            unsigned char *hit = calloc((size_t)w.count, 1);
            int64_t bad = 0, dup = 0, missing = 0;
            for (int64_t i = 0; i < w.count; i++) {
                int64_t row, col;
                windows_sample(&w, seeds[s], 5 * w.count + i, &row, &col);
                if (row < 0 || row >= w.rows || col != 0) {
                    bad++;
                    continue;
                }
                dup += hit[row];
                hit[row] = 1;
            }
            for (int64_t i = 0; i < w.count; i++) missing += !hit[i];
            TU_CHECK(bad == 0 && dup == 0 && missing == 0,
                     "count %lld seed %llu: every index once (bad %lld dup %lld missing "
                     "%lld)",
                     (long long)w.count, (unsigned long long)seeds[s], (long long)bad,
                     (long long)dup, (long long)missing);
            free(hit);
        }
    }
}

static void test_shapes(void)
{
    static const int Ts[] = {1, 2, 3, 5, 8, 64};
    for (size_t t = 0; t < sizeof Ts / sizeof Ts[0]; t++) {
        int T = Ts[t];
        /* Edge lengths around the thresholds T+1 and 2T, and a few longer rows. */
        int64_t lens[] = {T + 1, T + 2, 2 * T - 1, 2 * T, 2 * T + 1, 3 * T, 3 * T + 1,
                          5 * T + 3, 17 * T + 7};
        for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++) {
            int64_t n = lens[k];
            if (n < T + 1) continue;
            for (int64_t rows = 1; rows <= 5; rows += 4) {
                token_windows w;
                char label[96];
                snprintf(label, sizeof label, "T %d rows %lld len %lld", T,
                         (long long)rows, (long long)n);
                int rc = windows_init(&w, rows, n, T, label);
                TU_CHECK(rc == 0, "%s: init", label);
                if (rc != 0) continue;
                /* Layout invariants: per_row windows fit at the largest shift, one more
                 * would not fit at shift 0 unless we gave it up on purpose, and long
                 * rows keep slack >= T-1 so every start position is reachable. */
                int64_t last_end = w.slack + w.per_row * T + 1;
                TU_CHECK(w.per_row >= 1 && w.slack >= 0 && last_end == n &&
                             w.count == rows * w.per_row,
                         "%s: per_row %lld slack %lld (last window ends at %lld)", label,
                         (long long)w.per_row, (long long)w.slack, (long long)last_end);
                if (n >= 2 * T)
                    TU_CHECK(w.slack >= T - 1 && w.per_row == (n - T) / T,
                             "%s: long row keeps slack >= T-1 (slack %lld)", label,
                             (long long)w.slack);
                else
                    TU_CHECK(w.per_row == 1 && w.slack == n - 1 - T,
                             "%s: short row has one sliding window (slack %lld)", label,
                             (long long)w.slack);
                /* Every shift in [0, slack] keeps all windows inside the row. */
                int64_t outside = 0;
                for (int64_t s = 0; s <= w.slack; s++)
                    for (int64_t k2 = 0; k2 < w.per_row; k2++)
                        if (s + k2 * T + T + 1 > n) outside++;
                TU_CHECK(outside == 0, "%s: all shifts stay inside the row", label);
                check_epochs(&w, 42, label);
                check_disjoint(&w, 7, 1, label);
            }
        }
    }
}

static void test_shift_coverage(void)
{
    /* Over many epochs the shift takes every value in [0, slack]. */
    token_windows w;
    int rc = windows_init(&w, 1, 1000, 8, "coverage");
    TU_CHECK(rc == 0 && w.slack >= 7, "coverage: init (slack %lld)", (long long)w.slack);
    if (rc != 0) return;
    int seen[64] = {0};
    for (int64_t e = 0; e < 400; e++) {
        int64_t row, col;
        windows_sample(&w, 3, e * w.count, &row, &col);
        seen[col % w.T] = 1;
    }
    int all = 1;
    for (int s = 0; s < w.T; s++) all &= seen[s];
    TU_CHECK(all, "coverage: every start offset mod T occurs across epochs");
}

static void order_of(const token_windows *w, uint64_t seed, int64_t epoch, int64_t *out)
{
    for (int64_t i = 0; i < w->count; i++) {
        int64_t row, col;
        windows_sample(w, seed, epoch * w->count + i, &row, &col);
        out[i] = row * w->row_len + col;
    }
}

static void test_orders_differ(void)
{
    token_windows w;
    int rc = windows_init(&w, 8, 64, 4, "orders");
    TU_CHECK(rc == 0, "orders: init (count %lld)", (long long)w.count);
    if (rc != 0) return;
    int64_t n = w.count;
    int64_t *a = malloc((size_t)n * sizeof *a), *b = malloc((size_t)n * sizeof *b),
            *c = malloc((size_t)n * sizeof *c);
    order_of(&w, 1, 0, a);
    order_of(&w, 2, 0, b);
    order_of(&w, 1, 1, c);
    int64_t same_ab = 0, same_ac = 0, identity = 0;
    for (int64_t i = 0; i < n; i++) {
        same_ab += a[i] == b[i];
        same_ac += a[i] == c[i];
    }
    /* Compare the seed-1 epoch-0 order with the identity order by window index. */
    int64_t shift;
    int64_t *idx = malloc((size_t)n * sizeof *idx);
    int64_t bad = epoch_indices(&w, 1, 0, idx, &shift);
    for (int64_t i = 0; i < n; i++) identity += idx[i] == i;
    free(idx);
    TU_CHECK(bad == 0, "orders: all windows on the grid");
    TU_CHECK(same_ab < n / 4, "different seeds give different orders (%lld of %lld equal)",
             (long long)same_ab, (long long)n);
    TU_CHECK(same_ac < n / 4, "different epochs give different orders (%lld of %lld equal)",
             (long long)same_ac, (long long)n);
    TU_CHECK(identity < n / 4, "the order is shuffled (%lld of %lld in place)",
             (long long)identity, (long long)n);

    /* Determinism: the same (seed, g) always maps to the same window. */
    order_of(&w, 1, 0, b);
    int same = memcmp(a, b, (size_t)n * sizeof *a) == 0;
    TU_CHECK(same, "the same seed and epoch give the same order");
    free(a);
    free(b);
    free(c);
}

static void test_eval(void)
{
    token_windows w;
    int rc = windows_init(&w, 10, 41, 4, "eval");
    /* per_row = (41-4)/4 = 9, count = 90 */
    TU_CHECK(rc == 0 && w.count == 90, "eval: init (count %lld)", (long long)w.count);
    if (rc != 0) return;
    int64_t K = 9, prev = -1, bad = 0;
    for (int64_t k = 0; k < K; k++) {
        int64_t row, col, row2, col2;
        windows_eval(&w, k, K, &row, &col);
        windows_eval(&w, k, K, &row2, &col2);
        int64_t j = row * w.per_row + col / w.T;
        if (row != row2 || col != col2) bad++;
        if (col % w.T != 0 || col + w.T + 1 > w.row_len) bad++;
        if (j != k * 10) bad++; /* evenly spread: 90 / 9 = every 10th window */
        if (j <= prev) bad++;
        prev = j;
    }
    TU_CHECK(bad == 0, "eval: 9 of 90 windows spread every 10th, deterministic, shift 0");

    /* More eval windows than there are windows: wrap around. */
    int64_t bad2 = 0;
    for (int64_t k = 0; k < 200; k++) {
        int64_t row, col;
        windows_eval(&w, k, 200, &row, &col);
        if (row * w.per_row + col / w.T != k % 90) bad2++;
    }
    TU_CHECK(bad2 == 0, "eval: K > count wraps around");

    /* K = count visits every window once, in order. */
    int64_t bad3 = 0;
    for (int64_t k = 0; k < 90; k++) {
        int64_t row, col;
        windows_eval(&w, k, 90, &row, &col);
        if (row * w.per_row + col / w.T != k) bad3++;
    }
    TU_CHECK(bad3 == 0, "eval: K = count visits every window in order");

    /* A large set: positions stay in range and increase. */
    token_windows big;
    rc = windows_init(&big, 1, (int64_t)1 << 42, 1024, "big eval");
    int64_t bad4 = 0, last = -1;
    for (int64_t k = 0; rc == 0 && k < 1000; k++) {
        int64_t row, col;
        windows_eval(&big, k, 1000, &row, &col);
        if (row != 0 || col < 0 || col + 1025 > big.row_len || col <= last) bad4++;
        last = col;
    }
    TU_CHECK(rc == 0 && bad4 == 0, "eval: 1000 windows of a 2^42-token stream in order");
}

static void test_too_short(void)
{
    token_windows w;
    printf("# two error lines expected next:\n");
    fflush(stdout);
    int rc1 = windows_init(&w, 1, 8, 8, "short.h5:/tokens");
    int rc2 = windows_init(&w, 4, 5, 8, "short.h5:/seqs");
    int rc3 = windows_init(&w, 1, 9, 8, "exact.h5:/tokens");
    TU_CHECK(rc1 == -1, "1-D stream of 8 tokens refused for block_size 8");
    TU_CHECK(rc2 == -1, "rows of 5 tokens refused for block_size 8");
    TU_CHECK(rc3 == 0 && w.count == 1 && w.slack == 0,
             "1-D stream of exactly T+1 tokens has one window");
}

static void test_huge(void)
{
    /* 2^40 windows: a 2-D set of 2^20 rows with 2^20 windows each. */
    int T = 4;
    int64_t per_row = (int64_t)1 << 20;
    int64_t row_len = (per_row + 1) * T; /* per_row = (n - T) / T */
    token_windows w;
    int rc = windows_init(&w, (int64_t)1 << 20, row_len, T, "huge");
    TU_CHECK(rc == 0 && w.count == (int64_t)1 << 40, "huge: count = 2^40 (%lld)",
             (long long)w.count);
    if (rc != 0) return;
    clock_t t0 = clock();
    int64_t bad = 0, n = 200000;
    uint64_t acc = 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t g = i * 5497558139ll + 3 * w.count; /* spread over epoch 3 */
        int64_t row, col;
        windows_sample(&w, 99, g, &row, &col);
        if (row < 0 || row >= w.rows || col < 0 || col + T + 1 > w.row_len) bad++;
        acc ^= (uint64_t)row * 31 + (uint64_t)col;
    }
    double secs = (double)(clock() - t0) / CLOCKS_PER_SEC;
    TU_CHECK(bad == 0, "huge: %lld samples in range", (long long)n);
    TU_CHECK(secs < 5.0, "huge: %lld samples in %.3f s (%.2f us each)", (long long)n, secs,
             1e6 * secs / (double)n);
    TU_CHECK(acc != 0, "huge: samples vary");

    /* Near the largest counts the domain is 2^64; the walk still lands in range. */
    token_windows w2;
    rc = windows_init(&w2, (int64_t)1 << 31, ((int64_t)1 << 31) + 1, 1, "huger");
    int64_t bad2 = 0;
    for (int64_t i = 0; rc == 0 && i < 1000; i++) {
        int64_t row, col;
        windows_sample(&w2, 5, i * 1234567891ll, &row, &col);
        if (row < 0 || row >= w2.rows || col < 0 || col + 2 > w2.row_len) bad2++;
    }
    TU_CHECK(rc == 0 && bad2 == 0, "huge: 2^62 windows map in range");
}

static void test_random_sampling(void)
{
    /* sampling = random: uniform start positions with replacement, a pure function of
     * (seed, g), over every row and every column that leaves T+1 tokens. */
    enum { ROWS = 3, N = 20, T = 4, STARTS = N - T };
    token_windows w;
    int rc = windows_init(&w, ROWS, N, T, "random");
    TU_CHECK(rc == 0 && w.random == 0, "random: init starts in epoch mode");
    if (rc != 0) return;
    w.random = 1;
    int64_t hits[ROWS * STARTS] = {0};
    int64_t bad = 0, repeat_differs = 0;
    const int64_t n = 48000;
    for (int64_t g = 0; g < n; g++) {
        int64_t row, col, row2, col2;
        windows_sample(&w, 7, g, &row, &col);
        windows_sample(&w, 7, g, &row2, &col2);
        repeat_differs += row != row2 || col != col2;
        if (row < 0 || row >= ROWS || col < 0 || col + T + 1 > N) {
            bad++;
            continue;
        }
        hits[row * STARTS + col]++;
    }
    TU_CHECK(bad == 0, "random: %lld samples inside the rows", (long long)n);
    TU_CHECK(repeat_differs == 0, "random: sample g is a pure function of (seed, g)");
    /* 48000 draws over 48 positions: 1000 expected each, sd ~31; 6 sd either side. */
    int64_t lo = n, hi = 0;
    for (int i = 0; i < ROWS * STARTS; i++) {
        if (hits[i] < lo) lo = hits[i];
        if (hits[i] > hi) hi = hits[i];
    }
    TU_CHECK(lo > 810 && hi < 1190, "random: every start position drawn about equally "
             "(%lld..%lld of 1000 expected)", (long long)lo, (long long)hi);
    int64_t same = 0;
    for (int64_t g = 0; g < 1000; g++) {
        int64_t r1, c1, r2, c2;
        windows_sample(&w, 7, g, &r1, &c1);
        windows_sample(&w, 8, g, &r2, &c2);
        same += r1 == r2 && c1 == c2;
    }
    TU_CHECK(same < 100, "random: another seed draws other positions (%lld of 1000 equal)",
             (long long)same);
}

static void test_rng(void)
{
    /* Sanity for the generator the order depends on: determinism, range, moments. */
    rng a, b;
    rng_seed(&a, 11);
    rng_seed(&b, 11);
    int same = 1;
    for (int i = 0; i < 100; i++) same &= rng_u64(&a) == rng_u64(&b);
    TU_CHECK(same, "rng: same seed, same stream");
    rng_seed(&b, 12);
    int differ = 0;
    for (int i = 0; i < 100; i++) differ += rng_u64(&a) != rng_u64(&b);
    TU_CHECK(differ > 95, "rng: neighbouring seeds give different streams");

    double sum = 0, sum2 = 0, usum = 0;
    float umin = 1, umax = 0;
    int n = 200000;
    for (int i = 0; i < n; i++) {
        double z = rng_normal(&a);
        sum += z;
        sum2 += z * z;
        float u = rng_uniform(&a);
        usum += u;
        if (u < umin) umin = u;
        if (u > umax) umax = u;
    }
    double mean = sum / n, var = sum2 / n - mean * mean;
    TU_CHECK(fabs(mean) < 0.02 && fabs(var - 1) < 0.02, "rng: normal mean %.4f var %.4f",
             mean, var);
    TU_CHECK(umin >= 0 && umax < 1 && fabs(usum / n - 0.5) < 0.01,
             "rng: uniform in [0,1) (min %g max %g mean %.4f)", umin, umax, usum / n);

    /* rng_hash: flipping one input bit flips about half the output bits. */
    long flips = 0, trials = 0;
    for (uint64_t x = 0; x < 64; x++)
        for (int bit = 0; bit < 64; bit++) {
            uint64_t d = rng_hash(x * 0x9E3779B97F4A7C15ull, 5) ^
                         rng_hash((x * 0x9E3779B97F4A7C15ull) ^ (1ull << bit), 5);
            flips += __builtin_popcountll(d);
            trials++;
        }
    double avg = (double)flips / (double)trials;
    TU_CHECK(fabs(avg - 32) < 1.0, "rng_hash: avalanche %.2f bits of 64", avg);
    TU_CHECK(rng_hash(1, 2) != rng_hash(1, 3) && rng_hash(1, 2) != rng_hash(2, 2),
             "rng_hash: depends on both x and key");
}

/* A list of files of unequal shapes (one too short to hold a window): every sample of
 * an epoch lies inside its file's row, all windows are hit once per epoch, eval and
 * random samples stay inside, and a list of one file is windows_init. */
static void test_files(void)
{
    const int64_t rows[4] = {1, 3, 1, 2}, len[4] = {101, 37, 5, 64};
    const int T = 8;
    token_windows w;
    int rc = windows_init_files(&w, 4, rows, len, T, "files");
    int64_t want = 0;
    for (int f = 0; f < 4; f++)
        if (len[f] > T) want += rows[f] * ((len[f] - T) / T > 0 ? (len[f] - T) / T : 1);
    TU_CHECK(rc == 0 && w.count == want, "files: init (count %lld, want %lld)",
             (long long)w.count, (long long)want);
    if (rc != 0) return;
    unsigned char *hit = calloc((size_t)w.count, 1);
    int64_t *pos = malloc((size_t)w.count * 3 * sizeof *pos);
    int64_t bad = 0, missing = 0;
    for (int e = 0; e < 3 && hit && pos; e++) {
        int64_t shift[4] = {INT64_MAX, INT64_MAX, INT64_MAX, INT64_MAX};
        for (int64_t i = 0; i < w.count; i++) {
            int f;
            int64_t row, col;
            windows_locate(&w, 7, e * w.count + i, &f, &row, &col);
            pos[3 * i] = -1;
            if (f < 0 || f >= 4 || row < 0 || row >= rows[f] || col < 0 ||
                col + T + 1 > len[f]) {
                bad++;
                continue;
            }
            pos[3 * i] = f, pos[3 * i + 1] = row, pos[3 * i + 2] = col;
            if (col < shift[f]) shift[f] = col; /* every row has a window k = 0 */
        }
        for (int64_t i = 0; i < w.count; i++) hit[i] = 0;
        for (int64_t i = 0; i < w.count; i++) {
            if (pos[3 * i] < 0) continue;
            const windows_file *fi = &w.file[pos[3 * i]];
            const int64_t c = pos[3 * i + 2] - shift[pos[3 * i]];
            if (c % T != 0 || c / T >= fi->per_row || shift[pos[3 * i]] > fi->slack) {
                bad++;
                continue;
            }
            hit[fi->first + pos[3 * i + 1] * fi->per_row + c / T]++;
        }
        for (int64_t i = 0; i < w.count; i++) missing += hit[i] != 1;
    }
    TU_CHECK(hit && bad == 0 && missing == 0,
             "files: epochs stay inside their files and hit each window once (%lld bad, "
             "%lld missed or repeated)", (long long)bad, (long long)missing);
    free(hit);
    free(pos);
    int64_t bad_eval = 0, bad_random = 0;
    for (int64_t k = 0; k < 50; k++) {
        int f;
        int64_t row, col;
        windows_eval_at(&w, k, 50, &f, &row, &col);
        bad_eval += row >= rows[f] || col + T + 1 > len[f] || len[f] <= T;
    }
    w.random = 1;
    for (int64_t g = 0; g < 10000; g++) {
        int f;
        int64_t row, col;
        windows_locate(&w, 3, g, &f, &row, &col);
        bad_random += row < 0 || row >= rows[f] || col < 0 || col + T + 1 > len[f];
    }
    TU_CHECK(bad_eval == 0 && bad_random == 0, "files: eval (%lld) and random (%lld) "
             "windows outside their file", (long long)bad_eval, (long long)bad_random);
    windows_free(&w);

    token_windows one, list;
    rc = windows_init(&one, 3, 37, T, "one") | windows_init_files(&list, 1, &rows[1], &len[1], T, "one");
    int64_t diff = 0;
    for (int64_t g = 0; g < 200 && rc == 0; g++) {
        int f;
        int64_t r1, c1, r2, c2;
        windows_sample(&one, 11, g, &r1, &c1);
        windows_locate(&list, 11, g, &f, &r2, &c2);
        diff += r1 != r2 || c1 != c2 || f != 0;
    }
    TU_CHECK(rc == 0 && diff == 0, "files: a list of one file is windows_init (%lld differ)",
             (long long)diff);
    const int64_t shortr[2] = {1, 1}, shortl[2] = {5, 8};
    TU_CHECK(windows_init_files(&list, 2, shortr, shortl, T, "short") != 0,
             "files: no file long enough is refused");
}

int main(void)
{
    test_files();
    test_random_sampling();
    test_rng();
    test_bijection_counts();
    test_shapes();
    test_shift_coverage();
    test_orders_differ();
    test_eval();
    test_too_short();
    test_huge();
    return tu_finish();
}
