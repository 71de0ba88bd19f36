/* test_loader — the loader thread delivers exactly the batches windows_sample predicts,
 * in order, for several ring depths and start steps; a bad token in the file surfaces
 * as -1 from loader_next with a message naming the index; loader_stop returns promptly
 * while the thread is blocked on a full ring. Data parallel: R loaders (ranks 0..R-1,
 * batch B each) together deliver at every step exactly the batch of one loader with
 * batch B*R, rank r holding its slice r*B..r*B+B-1; fewer windows than B*R is refused.
 *
 * The test files hold token value (position mod V), so the expected contents of every
 * window follow from its (row, col). */
#include <fcntl.h>
#include <hdf5.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "h5set.h"
#include "loader.h"
#include "util.h"
#include "windows.h"
#include "testutil.h"

#define V 50    /* vocabulary size */
#define B 3     /* batch size */
#define T 5     /* block size */
#define N1 200  /* tokens of the 1-D stream */
#define R2 4    /* rows of the 2-D set */
#define L2 23   /* tokens per row of the 2-D set */
#define BAD_AT 123

/* Writes an int32 dataset "/tokens" of the given shape holding position mod V, with
 * the value at flat position bad_at (if >= 0) replaced by V (out of range). */
static int write_tokens(const char *path, int rank, const hsize_t *dims, int64_t bad_at)
{
    int64_t n = (int64_t)dims[0] * (rank == 2 ? (int64_t)dims[1] : 1);
    int32_t *buf = malloc((size_t)n * sizeof *buf);
    if (!buf) return -1;
    for (int64_t i = 0; i < n; i++) buf[i] = (int32_t)(i % V);
    if (bad_at >= 0) buf[bad_at] = V;

    int rc = -1;
    hid_t f = -1, space = -1, dset = -1, aspace = -1, attr = -1;
    f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    if (f < 0) goto done;
    space = H5Screate_simple(rank, dims, NULL);
    if (space < 0) goto done;
    dset = H5Dcreate2(f, "tokens", H5T_STD_I32LE, space, H5P_DEFAULT, H5P_DEFAULT,
                      H5P_DEFAULT);
    if (dset < 0) goto done;
    if (H5Dwrite(dset, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0) goto done;
    aspace = H5Screate(H5S_SCALAR);
    if (aspace < 0) goto done;
    attr = H5Acreate2(dset, "vocab_size", H5T_STD_I64LE, aspace, H5P_DEFAULT, H5P_DEFAULT);
    if (attr < 0) goto done;
    int64_t vocab = V;
    if (H5Awrite(attr, H5T_NATIVE_INT64, &vocab) < 0) goto done;
    rc = 0;
done:
    if (attr >= 0) H5Aclose(attr);
    if (aspace >= 0) H5Sclose(aspace);
    if (dset >= 0) H5Dclose(dset);
    if (space >= 0) H5Sclose(space);
    if (f >= 0) H5Fclose(f);
    free(buf);
    return rc;
}

/* One file as a settled set (io/h5/h5set.h), the way train opens its data. */
static h5set *open_set(const char *path)
{
    h5set *s = h5set_create(path, "/tokens", 0, 4);
    if (s && (h5set_probe(s, 0) != 0 || h5set_settle(s) != 0)) {
        h5set_close(s);
        s = NULL;
    }
    return s;
}

/* Checks one delivered batch against the prediction for the batch that starts at
 * global sample g0. Returns the number of wrong tokens. */
static int64_t check_batch(const token_windows *w, uint64_t seed, int64_t g0,
                           const int32_t *inputs, const int32_t *targets)
{
    int64_t wrong = 0;
    for (int b = 0; b < B; b++) {
        int64_t row, col;
        windows_sample(w, seed, g0 + b, &row, &col);
        for (int t = 0; t < T; t++) {
            int64_t pos = row * w->row_len + col + t;
            if (inputs[b * T + t] != (int32_t)(pos % V)) wrong++;
            if (targets[b * T + t] != (int32_t)((pos + 1) % V)) wrong++;
        }
    }
    return wrong;
}

/* Runs `steps` batches from global sample first (any index, not only a multiple of
 * B: a run resumed after its global batch changed) through a loader of the given
 * depth. */
static void run_and_check(h5set *d, const token_windows *w, uint64_t seed, int depth,
                          int64_t first, int64_t steps, const char *label)
{
    loader *l = loader_start(d, w, seed, B, T, V, first, depth, 0, 1);
    TU_CHECK(l != NULL, "%s depth %d first sample %lld: started", label, depth,
             (long long)first);
    if (!l) return;
    int64_t wrong = 0, failed = 0;
    double wait_total = 0, min_wait = 0;
    const int32_t *prev = NULL;
    int distinct_ok = 1;
    for (int64_t s = 0; s < steps; s++) {
        const int32_t *in = NULL, *tg = NULL;
        double wait = -1;
        if (loader_next(l, &in, &tg, &wait) != 0) {
            failed++;
            break;
        }
        wrong += check_batch(w, seed, first + s * B, in, tg);
        if (wait < min_wait) min_wait = wait;
        wait_total += wait;
        /* With depth > 1 consecutive batches live in different slots. */
        if (depth > 1 && prev == in) distinct_ok = 0;
        prev = in;
    }
    loader_stop(l);
    TU_CHECK(failed == 0 && wrong == 0 && distinct_ok && min_wait >= 0,
             "%s depth %d first sample %lld: %lld batches as predicted (wrong tokens %lld, "
             "wait %.4f s)",
             label, depth, (long long)first, (long long)steps, (long long)wrong,
             wait_total);
}

/* Redirects stderr to a file while the bad-token run happens, so its message can be
 * checked. */
static int stderr_to(const char *path)
{
    fflush(stderr);
    int saved = dup(2);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (saved < 0 || fd < 0) return -1;
    dup2(fd, 2);
    close(fd);
    return saved;
}

static void stderr_back(int saved)
{
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
}

static void test_bad_token(const char *path, const char *logpath)
{
    hsize_t dims[1] = {N1};
    TU_CHECK(write_tokens(path, 1, dims, BAD_AT) == 0, "bad file written");
    h5set *d = open_set(path);
    TU_CHECK(d != NULL, "bad file opened");
    if (!d) return;
    token_windows w;
    if (windows_init(&w, h5set_rows(d, 0), h5set_row_len(d, 0), T, "bad") != 0) {
        TU_CHECK(0, "bad file: windows");
        h5set_close(d);
        return;
    }
    uint64_t seed = 77;
    /* The first step whose batch contains the bad position. */
    int64_t bad_step = -1;
    for (int64_t g = 0; bad_step < 0; g++) {
        int64_t row, col;
        windows_sample(&w, seed, g, &row, &col);
        if (col <= BAD_AT && BAD_AT <= col + T) bad_step = g / B;
    }
    for (int depth = 1; depth <= 4; depth *= 2) {
        int saved = stderr_to(logpath);
        loader *l = loader_start(d, &w, seed, B, T, V, 0, depth, 0, 1);
        int64_t s, good_wrong = 0;
        int rc = 0, rc_again = 0;
        const int32_t *in, *tg;
        double wait;
        for (s = 0; l && s <= bad_step; s++) {
            rc = loader_next(l, &in, &tg, &wait);
            if (rc != 0) break;
            good_wrong += check_batch(&w, seed, s * B, in, tg);
        }
        if (l && rc != 0) rc_again = loader_next(l, &in, &tg, &wait);
        loader_stop(l); /* after an error */
        if (saved >= 0) stderr_back(saved);

        char msg[4096] = "";
        FILE *f = fopen(logpath, "r");
        if (f) {
            size_t n = fread(msg, 1, sizeof msg - 1, f);
            msg[n] = '\0';
            fclose(f);
        }
        /* Keep only the first line, and blank out the file name so that digits of the
         * process id in it cannot match the index. */
        msg[strcspn(msg, "\n")] = '\0';
        for (char *p = strstr(msg, path); p; p = strstr(p, path)) memset(p, '_', strlen(path));
        char idx[32];
        snprintf(idx, sizeof idx, "%d", BAD_AT);
        TU_CHECK(l && rc == -1 && s == bad_step && good_wrong == 0 && rc_again == -1,
                 "bad token depth %d: batches before step %lld fine, then -1 (at step "
                 "%lld, again %d)",
                 depth, (long long)bad_step, (long long)s, rc_again);
        TU_CHECK(strstr(msg, "gentrain: error:") && strstr(msg, idx),
                 "bad token depth %d: message names index %d: %.200s", depth, BAD_AT, msg);
    }
    h5set_close(d);
}

/* Ranks 0..R-1 with batch B (R = 2, 3) against one loader with batch B*R: rank r's
 * batch at step s is rows r*B .. r*B+B-1 of the big batch, for 15 steps (several
 * epochs of the 1-D set), from step 0 and resumed at step 4. */
static void test_shards(h5set *d, const token_windows *w)
{
    enum { RMAX = 3, STEPS = 15 };
    for (int R = 2; R <= RMAX; R++) {
        for (int64_t first = 0; first <= 4; first += 4) {
            loader *big = loader_start(d, w, 21, B * R, T, V, first * B * R, 2, 0, 1);
            loader *ranks[RMAX] = {NULL};
            int started = big != NULL;
            for (int r = 0; r < R; r++) {
                ranks[r] = loader_start(d, w, 21, B, T, V, first * B * R, 1 + r, r, R);
                started &= ranks[r] != NULL;
            }
            int64_t mismatch = 0, failed = 0;
            for (int s = 0; started && s < STEPS; s++) {
                const int32_t *bi, *bt, *ri, *rt;
                double wait;
                if (loader_next(big, &bi, &bt, &wait) != 0) {
                    failed++;
                    break;
                }
                for (int r = 0; r < R; r++) {
                    if (loader_next(ranks[r], &ri, &rt, &wait) != 0) {
                        failed++;
                        break;
                    }
                    size_t off = (size_t)r * B * T, len = sizeof(int32_t) * B * T;
                    mismatch += memcmp(bi + off, ri, len) != 0;
                    mismatch += memcmp(bt + off, rt, len) != 0;
                }
            }
            loader_stop(big);
            for (int r = 0; r < R; r++) loader_stop(ranks[r]);
            TU_CHECK(started && failed == 0 && mismatch == 0,
                     "shards: %d ranks x batch %d from step %lld = one batch of %d "
                     "(mismatched slices %lld)",
                     R, B, (long long)first, B * R, (long long)mismatch);
        }
    }

    /* Rank out of range, and a set with fewer windows than batch_size x ranks. */
    tu_capture_begin();
    loader *bad_rank = loader_start(d, w, 1, B, T, V, 0, 1, 2, 2);
    const char *err = tu_capture_end();
    TU_CHECK(bad_rank == NULL && strstr(err, "rank 2 of 2"), "shards: rank 2 of 2 refused");
    loader_stop(bad_rank);
    int R = (int)(w->count / B) + 1; /* B*R > count */
    tu_capture_begin();
    loader *small = loader_start(d, w, 1, B, T, V, 0, 1, 0, R);
    err = tu_capture_end();
    char want[96];
    snprintf(want, sizeof want, "has %lld windows; batch_size x ranks = %d x %d",
             (long long)w->count, B, R);
    TU_CHECK(small == NULL && strstr(err, want) && tu_count_lines(err) == 1,
             "shards: %lld windows for %d x %d refused in one line", (long long)w->count,
             B, R);
    loader_stop(small);
}

static void test_stop_blocked(h5set *d, const token_windows *w)
{
    for (int depth = 1; depth <= 4; depth *= 2) {
        loader *l = loader_start(d, w, 5, B, T, V, 0, depth, 0, 1);
        TU_CHECK(l != NULL, "stop: depth %d started", depth);
        if (!l) continue;
        /* Let the thread fill the ring and block on it. */
        struct timespec nap = {0, 100 * 1000 * 1000};
        nanosleep(&nap, NULL);
        double t0 = gt_now();
        loader_stop(l);
        double dt = gt_now() - t0;
        TU_CHECK(dt < 1.0, "stop: depth %d never consumed, stopped in %.4f s", depth, dt);

        /* Stop while holding a batch, with the thread blocked on the rest. */
        l = loader_start(d, w, 5, B, T, V, 3 * B, depth, 0, 1);
        const int32_t *in, *tg;
        double wait;
        int rc = l ? loader_next(l, &in, &tg, &wait) : -1;
        nanosleep(&nap, NULL);
        t0 = gt_now();
        loader_stop(l);
        dt = gt_now() - t0;
        TU_CHECK(rc == 0 && dt < 1.0, "stop: depth %d holding one batch, stopped in %.4f s",
                 depth, dt);
    }
    loader_stop(NULL);
    TU_CHECK(1, "stop: NULL is a no-op");
}

int main(void)
{
    char path1[64], path2[64], pathbad[64], logpath[64];
    long pid = (long)getpid();
    snprintf(path1, sizeof path1, "test_loader_%ld_1d.h5", pid);
    snprintf(path2, sizeof path2, "test_loader_%ld_2d.h5", pid);
    snprintf(pathbad, sizeof pathbad, "test_loader_%ld_bad.h5", pid);
    snprintf(logpath, sizeof logpath, "test_loader_%ld.log", pid);

    hsize_t dims1[1] = {N1}, dims2[2] = {R2, L2};
    int ok1 = write_tokens(path1, 1, dims1, -1) == 0;
    int ok2 = write_tokens(path2, 2, dims2, -1) == 0;
    TU_CHECK(ok1 && ok2, "test files written");
    if (!ok1 || !ok2) goto out;

    h5set *d1 = open_set(path1);
    h5set *d2 = open_set(path2);
    TU_CHECK(d1 && d2, "test files opened");
    if (d1 && d2) {
        token_windows w1, w2;
        int rc1 = windows_init(&w1, h5set_rows(d1, 0), h5set_row_len(d1, 0), T, path1);
        int rc2 = windows_init(&w2, h5set_rows(d2, 0), h5set_row_len(d2, 0), T, path2);
        TU_CHECK(rc1 == 0 && rc2 == 0 && w1.rows == 1 && w2.rows == R2,
                 "windows: 1-D count %lld, 2-D count %lld", (long long)w1.count,
                 (long long)w2.count);
        if (rc1 == 0 && rc2 == 0) {
            /* 40 steps of 3 = 120 samples cross epochs of 39 (1-D) and 12 (2-D). */
            for (int depth = 1; depth <= 4; depth *= 2) {
                run_and_check(d1, &w1, 1234, depth, 0, 40, "1-D");
                run_and_check(d1, &w1, 1234, depth, 17 * B, 20, "1-D resumed");
                run_and_check(d1, &w1, 1234, depth, 17 * B + 1, 20, "1-D mid-batch");
                run_and_check(d2, &w2, 9, depth, 0, 40, "2-D");
            }
            /* A resumed run sees exactly the tail of an uninterrupted one. */
            loader *a = loader_start(d1, &w1, 3, B, T, V, 0, 2, 0, 1);
            loader *b = a ? loader_start(d1, &w1, 3, B, T, V, 10 * B, 3, 0, 1) : NULL;
            int64_t mismatch = (a && b) ? 0 : 1;
            const int32_t *ai, *at, *bi, *bt;
            double wait;
            for (int s = 0; a && b && s < 30; s++) {
                if (loader_next(a, &ai, &at, &wait) != 0) {
                    mismatch++;
                    break;
                }
                if (s < 10) continue;
                if (loader_next(b, &bi, &bt, &wait) != 0) {
                    mismatch++;
                    break;
                }
                mismatch += memcmp(ai, bi, sizeof(int32_t) * B * T) != 0;
                mismatch += memcmp(at, bt, sizeof(int32_t) * B * T) != 0;
            }
            loader_stop(a);
            loader_stop(b);
            TU_CHECK(mismatch == 0, "resume at step 10 matches the uninterrupted run");

            test_shards(d1, &w1);
            test_shards(d2, &w2);
            test_stop_blocked(d1, &w1);
        }
    }
    if (d1) h5set_close(d1);
    if (d2) h5set_close(d2);

    test_bad_token(pathbad, logpath);

out:
    remove(path1);
    remove(path2);
    remove(pathbad);
    remove(logpath);
    return tu_finish();
}
