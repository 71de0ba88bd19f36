/* test_h5data — token datasets (io/h5/h5data.c) and `prepare` (src/cli/prepare.c).
 *
 * Files are made here with the HDF5 API in a fresh temporary folder: every accepted
 * integer type at rank 1 and 2 is read back exactly; every refused input fails with
 * its one-line message (stderr is captured and searched); prepare's output is compared
 * byte for byte with its inputs. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <hdf5.h>

#include "h5data.h"
#include "inspect.h"
#include "prepare.h"
#include "testutil.h"

static char dir[512];
static int use_gzip; /* make_file: deflate the chunks */

static void path_in(char *buf, size_t cap, const char *name)
{
    snprintf(buf, cap, "%s/%s", dir, name);
}


/* ---- making files ---------------------------------------------------------------- */

static int write_attr_i64(hid_t obj, const char *name, int64_t v)
{
    hid_t sp = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(obj, name, H5T_STD_I64LE, sp, H5P_DEFAULT, H5P_DEFAULT);
    herr_t w = H5Awrite(a, H5T_NATIVE_INT64, &v);
    H5Aclose(a);
    H5Sclose(sp);
    return w < 0 ? -1 : 0;
}

/* Writes values (as int64 in memory, converted by HDF5 to `type`) to a new file.
 * dset_vocab / root_vocab > 0 add vocab_size attributes; chunk > 0 makes it chunked. */
static int make_file(const char *path, const char *name, hid_t type, int rank,
                     const hsize_t *dims, const int64_t *values, int64_t dset_vocab,
                     int64_t root_vocab, hsize_t chunk)
{
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hid_t sp = H5Screate_simple(rank, dims, NULL);
    hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_create_intermediate_group(lcpl, 1);
    if (chunk > 0) {
        hsize_t c[3] = {1, 1, 1};
        c[rank - 1] = chunk;
        H5Pset_chunk(dcpl, rank, c);
        if (use_gzip) H5Pset_deflate(dcpl, 4);
    }
    hid_t d = H5Dcreate2(f, name, type, sp, lcpl, dcpl, H5P_DEFAULT);
    int rc = (f < 0 || d < 0) ? -1 : 0;
    if (rc == 0 && values &&
        H5Dwrite(d, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, values) < 0)
        rc = -1;
    if (rc == 0 && dset_vocab > 0) rc = write_attr_i64(d, "vocab_size", dset_vocab);
    if (rc == 0 && root_vocab > 0) rc = write_attr_i64(f, "vocab_size", root_vocab);
    H5Dclose(d);
    H5Pclose(dcpl);
    H5Pclose(lcpl);
    H5Sclose(sp);
    if (H5Fclose(f) < 0) rc = -1;
    return rc;
}

/* ---- accepted types -------------------------------------------------------------- */

static int64_t pattern(int64_t i, int64_t vocab)
{
    return (i * 37 + i / 7 + 5) % vocab;
}

static void check_type(const char *tname, hid_t type, int rank, int64_t vocab,
                       int attr_on_root)
{
    char path[700];
    char fname[128];
    snprintf(fname, sizeof fname, "ok_%s_r%d.h5", tname, rank);
    path_in(path, sizeof path, fname);
    const int64_t rows = rank == 1 ? 1 : 7, len = rank == 1 ? 5003 : 613;
    hsize_t dims[2] = {(hsize_t)(rank == 1 ? len : rows), (hsize_t)len};
    int64_t n = rows * len;
    int64_t *vals = malloc((size_t)n * sizeof *vals);
    for (int64_t i = 0; i < n; i++) vals[i] = pattern(i, vocab - 1);
    vals[n - 1] = vocab - 1; /* the largest legal token, and the only one that large */
    int made = make_file(path, "/data/tokens", type, rank, dims, vals,
                         attr_on_root ? 0 : vocab, attr_on_root ? vocab : 0,
                         rank == 2 ? 100 : 0);
    TU_CHECK(made == 0, "%s rank %d: file written", tname, rank);

    h5data *d = h5data_open(path, "data/tokens"); /* no leading slash: still found */
    TU_CHECK(d != NULL, "%s rank %d: opens", tname, rank);
    if (!d) {
        free(vals);
        return;
    }
    TU_CHECK(h5data_rank(d) == rank, "%s rank %d: rank %d", tname, rank, h5data_rank(d));
    TU_CHECK(h5data_rows(d) == rows && h5data_row_len(d) == len,
             "%s rank %d: shape %lld x %lld", tname, rank, (long long)h5data_rows(d),
             (long long)h5data_row_len(d));
    TU_CHECK(h5data_vocab_attr(d) == vocab, "%s rank %d: vocab attr %lld (on %s)", tname,
             rank, (long long)h5data_vocab_attr(d), attr_on_root ? "root" : "dataset");
    TU_CHECK(strcmp(h5data_type_name(d), tname) == 0, "%s rank %d: type name %s", tname,
             rank, h5data_type_name(d));
    TU_CHECK(strcmp(h5data_path(d), path) == 0 && strcmp(h5data_name(d), "/data/tokens") == 0,
             "%s rank %d: path and name kept (%s)", tname, rank, h5data_name(d));

    /* Several windows: start, middle, the end, and empty. */
    const int64_t wins[][3] = {
        {0, 0, len}, {rows / 2, 17, 100}, {rows - 1, len - 10, 10}, {rows - 1, 3, 0}};
    int32_t *buf = malloc((size_t)len * sizeof *buf);
    for (size_t w = 0; w < sizeof wins / sizeof wins[0]; w++) {
        int64_t r = wins[w][0], c = wins[w][1], cnt = wins[w][2];
        int rc = h5data_read(d, r, c, cnt, buf, vocab);
        int same = rc == 0;
        for (int64_t k = 0; same && k < cnt; k++) same = buf[k] == vals[r * len + c + k];
        TU_CHECK(same, "%s rank %d: read row %lld cols [%lld, %lld) exact", tname, rank,
                 (long long)r, (long long)c, (long long)(c + cnt));
    }
    TU_CHECK(h5data_read(d, 0, 0, 1, buf, 0) == 0 && buf[0] == vals[0],
             "%s rank %d: read without vocab check", tname, rank);
    TU_CHECK(h5data_check_range(d, vocab) == 0, "%s rank %d: range check passes", tname, rank);

    tu_capture_begin();
    int rc = h5data_check_range(d, vocab - 1);
    const char *msg = tu_capture_end();
    char want[128];
    if (rank == 1)
        snprintf(want, sizeof want, "tokens[%lld] = %lld is >= vocab_size %lld",
                 (long long)(n - 1), (long long)(vocab - 1), (long long)(vocab - 1));
    else
        snprintf(want, sizeof want, "tokens[%lld, %lld] = %lld is >= vocab_size %lld",
                 (long long)(rows - 1), (long long)(len - 1), (long long)(vocab - 1),
                 (long long)(vocab - 1));
    TU_CHECK(rc != 0 && strstr(msg, want) && tu_count_lines(msg) == 1,
             "%s rank %d: a smaller vocab fails naming the last token (%s)", tname, rank,
             want);
    free(buf);
    free(vals);
    h5data_close(d);
}

/* ---- refused inputs -------------------------------------------------------------- */

/* Opens (and, if that works, range-checks against vocab) and expects failure with a
 * message containing want. */
static void expect_fail(const char *what, const char *path, const char *name, int64_t vocab,
                        const char *want)
{
    tu_capture_begin();
    h5data *d = h5data_open(path, name);
    int rc = d ? h5data_check_range(d, vocab) : -1;
    h5data_close(d);
    const char *msg = tu_capture_end();
    TU_CHECK(rc != 0 && strstr(msg, want) != NULL && tu_count_lines(msg) == 1 &&
                 strncmp(msg, "gentrain: error: ", 17) == 0,
             "%s: fails with one line containing \"%s\"", what, want);
}

static void refused_inputs(void)
{
    char path[600], want[800];
    int64_t vals[64];
    for (int i = 0; i < 64; i++) vals[i] = i % 10;

    path_in(path, sizeof path, "nope.h5");
    snprintf(want, sizeof want, "cannot open %s: no such file", path);
    expect_fail("missing file", path, "/x", 0, want);

    path_in(path, sizeof path, "text.h5");
    FILE *f = fopen(path, "w");
    fputs("this is not HDF5 at all, just some text\n", f);
    fclose(f);
    snprintf(want, sizeof want, "cannot open %s: not an HDF5 file", path);
    expect_fail("text file", path, "/x", 0, want);

    expect_fail("a folder", dir, "/x", 0, "it is a folder");

    hsize_t d1[1] = {64};
    path_in(path, sizeof path, "two.h5");
    make_file(path, "/a/b", H5T_STD_U8LE, 1, d1, vals, 0, 0, 0);
    hid_t fh = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    hid_t sp = H5Screate_simple(1, d1, NULL);
    hid_t ds = H5Dcreate2(fh, "/c", H5T_STD_I32LE, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Dclose(ds);
    H5Sclose(sp);
    H5Fclose(fh);
    snprintf(want, sizeof want, "%s: no dataset /train/tokens (datasets in the file: /a/b, /c)",
             path);
    expect_fail("missing dataset", path, "/train/tokens", 0, want);
    expect_fail("missing dataset under a missing group", path, "/x/y/z", 0,
                "no dataset /x/y/z (datasets in the file: /a/b, /c)");
    expect_fail("group instead of dataset", path, "/a", 0, "/a is a group, not a dataset (datasets in the file: /a/b, /c)");

    path_in(path, sizeof path, "float.h5");
    make_file(path, "/x", H5T_IEEE_F32LE, 1, d1, vals, 0, 0, 0);
    snprintf(want, sizeof want,
             "%s:/x has type float32; token datasets must be integers (uint8, uint16, "
             "int32, int64)", path);
    expect_fail("float dataset", path, "/x", 0, want);

    hsize_t d3[3] = {2, 3, 4};
    path_in(path, sizeof path, "rank3.h5");
    make_file(path, "/x", H5T_STD_I32LE, 3, d3, vals, 0, 0, 0);
    expect_fail("rank 3", path, "/x", 0, "/x has rank 3 (shape [2, 3, 4]); token datasets "
                                         "must be 1-D [tokens] or 2-D [sequences, length]");

    hsize_t d0[1] = {0};
    path_in(path, sizeof path, "empty.h5");
    make_file(path, "/x", H5T_STD_U16LE, 1, d0, NULL, 0, 0, 0);
    expect_fail("empty rank 1", path, "/x", 0, "/x is empty (shape [0])");
    hsize_t d20[2] = {5, 0};
    path_in(path, sizeof path, "empty2.h5");
    make_file(path, "/x", H5T_STD_U16LE, 2, d20, NULL, 0, 0, 0);
    expect_fail("empty rank 2", path, "/x", 0, "/x is empty (shape [5, 0])");

    /* A bad token deep in a stream: the exact message of the design notes. */
    const int64_t n = 20000;
    int64_t *big = malloc((size_t)n * sizeof *big);
    for (int64_t i = 0; i < n; i++) big[i] = i % 256;
    big[12345] = 300;
    hsize_t dn[1] = {(hsize_t)n};
    path_in(path, sizeof path, "data.h5");
    make_file(path, "/train/tokens", H5T_STD_U16LE, 1, dn, big, 256, 0, 1000);
    snprintf(want, sizeof want, "%s:/train/tokens[12345] = 300 is >= vocab_size 256", path);
    expect_fail("out-of-range token", path, "/train/tokens", 256, want);
    {
        /* ... and a window read across it reports the same index; one beside it passes. */
        h5data *d = h5data_open(path, "/train/tokens");
        int32_t w[100];
        tu_capture_begin();
        int rc = d ? h5data_read(d, 0, 12300, 100, w, 256) : 0;
        const char *msg = tu_capture_end();
        TU_CHECK(rc != 0 && strstr(msg, want), "window read over the bad token names it");
        TU_CHECK(d && h5data_read(d, 0, 12346, 100, w, 256) == 0 && w[0] == 12346 % 256,
                 "window read after the bad token works");
        tu_capture_begin();
        rc = d ? h5data_read(d, 0, n - 5, 10, w, 256) : 0;
        msg = tu_capture_end();
        TU_CHECK(rc != 0 && strstr(msg, "outside the dataset"), "read past the end fails");
        h5data_close(d);
    }
    free(big);

    int64_t neg[64];
    for (int i = 0; i < 64; i++) neg[i] = i;
    neg[5] = -3;
    path_in(path, sizeof path, "neg.h5");
    make_file(path, "/x", H5T_STD_I32LE, 1, d1, neg, 0, 100, 0);
    expect_fail("negative token (int32)", path, "/x", 100, "/x[5] = -3 is negative");
    hsize_t d2[2] = {8, 8};
    path_in(path, sizeof path, "neg64.h5");
    make_file(path, "/x", H5T_STD_I64LE, 2, d2, neg, 0, 0, 0);
    expect_fail("negative token (int64, rank 2)", path, "/x", 0, "/x[0, 5] = -3 is negative");

    /* vocab_size attribute of a wrong type. */
    path_in(path, sizeof path, "badattr.h5");
    make_file(path, "/x", H5T_STD_U8LE, 1, d1, vals, 0, 0, 0);
    fh = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    ds = H5Dopen2(fh, "/x", H5P_DEFAULT);
    sp = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(ds, "vocab_size", H5T_IEEE_F64LE, sp, H5P_DEFAULT, H5P_DEFAULT);
    double dv = 256.0;
    H5Awrite(a, H5T_NATIVE_DOUBLE, &dv);
    H5Aclose(a);
    H5Sclose(sp);
    H5Dclose(ds);
    H5Fclose(fh);
    expect_fail("float vocab_size attribute", path, "/x", 0,
                "/x: attribute vocab_size has type float64; it must be an integer");
}

/* Long datasets: the streamed range check crosses its 1M-element blocks and still
 * reports the right index. */
static void block_boundaries(void)
{
    char path[600];
    const int64_t n = 2500000;
    int64_t *v = malloc((size_t)n * sizeof *v);
    for (int64_t i = 0; i < n; i++) v[i] = i % 200;
    v[2200001] = 250;
    hsize_t d1[1] = {(hsize_t)n};
    path_in(path, sizeof path, "long1.h5");
    make_file(path, "/t", H5T_STD_U8LE, 1, d1, v, 0, 0, 65536);
    expect_fail("bad token past two blocks (rank 1)", path, "/t", 200, "/t[2200001] = 250");
    h5data *d = h5data_open(path, "/t");
    TU_CHECK(d && h5data_check_range(d, 251) == 0, "long rank 1 passes with vocab 251");
    /* Shared scans (one part per rank): 3 blocks of 1M; the bad token is in the last.
     * Only the part holding that block fails, with the same line; parts beyond the
     * number of blocks check nothing and pass. */
    for (int parts = 1; parts <= 5 && d; parts++)
        for (int part = 0; part < parts; part++) {
            const int holds_it = parts == 1 || (parts == 2 && part == 1) ||
                                 (parts >= 3 && part == 2);
            tu_capture_begin();
            const int rc = h5data_check_range_part(d, 200, part, parts);
            const char *msg = tu_capture_end();
            TU_CHECK(holds_it ? rc != 0 && strstr(msg, "/t[2200001] = 250") != NULL
                              : rc == 0 && msg[0] == '\0',
                     "range check part %d of %d %s", part, parts,
                     holds_it ? "finds the bad token" : "passes");
        }
    if (d) {
        tu_capture_begin();
        const int rc = h5data_check_range_part(d, 200, 2, 2);
        const char *msg = tu_capture_end();
        TU_CHECK(rc != 0 && strstr(msg, "part 2 of 2 is invalid") != NULL,
                 "range check part 2 of 2 is refused");
    }
    h5data_close(d);

    hsize_t d2[2] = {2500, 1000};
    path_in(path, sizeof path, "long2.h5");
    make_file(path, "/t", H5T_STD_I32LE, 2, d2, v, 0, 0, 0);
    expect_fail("bad token past two blocks (rank 2)", path, "/t", 200, "/t[2200, 1] = 250");
    free(v);
}

/* Several threads open, read and close at once: h5lock keeps the (not thread-safe)
 * HDF5 library consistent, and every value read is right. */
struct reader_arg {
    const char *path;
    int id, bad;
};

static void *reader(void *p)
{
    struct reader_arg *a = p;
    int32_t w[64];
    for (int round = 0; round < 4; round++) {
        h5data *d = h5data_open(a->path, "/t");
        if (!d) {
            a->bad++;
            continue;
        }
        for (int k = 0; k < 300; k++) {
            int64_t col = (a->id * 7919 + k * 104729 + round) % (200000 - 64);
            if (h5data_read(d, 0, col, 64, w, 1000) != 0) a->bad++;
            for (int j = 0; j < 64; j++)
                if (w[j] != (col + j) % 1000) a->bad++;
        }
        if (h5data_check_range(d, 1000) != 0) a->bad++;
        h5data_close(d);
    }
    return NULL;
}

static void threads(void)
{
    char path[600];
    const int64_t n = 200000;
    int64_t *v = malloc((size_t)n * sizeof *v);
    for (int64_t i = 0; i < n; i++) v[i] = i % 1000;
    hsize_t d1[1] = {(hsize_t)n};
    path_in(path, sizeof path, "threads.h5");
    make_file(path, "/t", H5T_STD_U16LE, 1, d1, v, 1000, 0, 4096);
    free(v);
    pthread_t th[4];
    struct reader_arg args[4];
    for (int i = 0; i < 4; i++) {
        args[i] = (struct reader_arg){path, i, 0};
        pthread_create(&th[i], NULL, reader, &args[i]);
    }
    int bad = 0;
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        bad += args[i].bad;
    }
    TU_CHECK(bad == 0, "4 threads reading at once: %d wrong values or failures", bad);
}

/* ---- damaged chunk indexes ------------------------------------------------------- */

/* A uint16 dataset /t of `chunks` chunks of 1024 tokens (deflated when gzip), whose
 * chunk `bad` is then rewritten through H5Dwrite_chunk as `bytes` bytes of junk: the
 * chunk index then records that size for it (when deflated: HDF5 records the nominal
 * size for an unfiltered chunk; tests/test_hardening.sh patches those). */
static int make_bad_chunk(const char *path, int gzip, hsize_t chunks, hsize_t bad,
                          size_t bytes)
{
    hsize_t n = chunks * 1024, off = bad * 1024;
    int64_t *v = malloc((size_t)n * sizeof *v);
    unsigned char *junk = malloc(bytes);
    int rc = -1;
    if (v && junk) {
        for (hsize_t i = 0; i < n; i++) v[i] = (int64_t)(i % 1000);
        for (size_t i = 0; i < bytes; i++) junk[i] = (unsigned char)(0xa5 ^ (i * 37));
        use_gzip = gzip;
        rc = make_file(path, "/t", H5T_STD_U16LE, 1, &n, v, 1000, 0, 1024);
        use_gzip = 0;
    }
    hid_t f = rc == 0 ? H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT) : -1;
    hid_t d = f >= 0 ? H5Dopen2(f, "/t", H5P_DEFAULT) : -1;
    if (d < 0 || H5Dwrite_chunk(d, H5P_DEFAULT, 0, &off, bytes, junk) < 0) rc = -1;
    if (d >= 0 && H5Dclose(d) < 0) rc = -1;
    if (f >= 0 && H5Fclose(f) < 0) rc = -1;
    free(junk);
    free(v);
    return rc;
}

struct lazy_read {
    h5data *d;
    int64_t col;
    int rc;
};

static void *lazy_reader(void *p)
{
    struct lazy_read *a = p;
    int32_t w[64];
    a->rc = h5data_read(a->d, 0, a->col, 64, w, 1000);
    return NULL;
}

/* h5data_read on another thread (as the loader's), its error captured. */
static int read_in_thread(h5data *d, int64_t col, const char **msg)
{
    struct lazy_read a = {d, col, -2};
    pthread_t th;
    tu_capture_begin();
    if (pthread_create(&th, NULL, lazy_reader, &a) == 0) pthread_join(th, NULL);
    *msg = tu_capture_end();
    return a.rc;
}

/* Compressed chunks recorded larger than they can be (h5chunk.h): refused at open when
 * there are few chunks, else on the first read that touches them, from any thread; a
 * chunk that does not decode is named. */
static void chunk_index(void)
{
    char big[600], junk[600];
    path_in(big, sizeof big, "chunk_big.h5");
    path_in(junk, sizeof junk, "chunk_junk.h5");
    TU_CHECK(make_bad_chunk(big, 1, 64, 5, 7000) == 0 &&
                 make_bad_chunk(junk, 1, 64, 9, 10) == 0,
             "damaged chunk files made");
    expect_fail("compressed chunk recorded too large", big, "/t", 1000,
                "the chunk index records 7000 bytes for chunk 5 of 64 ([5120..6144)); "
                "expected 1 to 6176");
    expect_fail("chunk that does not decode", junk, "/t", 1000,
                "chunk 9 of 64 ([9216..10240)) cannot be read or decoded (the chunk index "
                "records 10 bytes at byte ");

    setenv("GENTRAIN_CHUNK_CHECK_AT_OPEN", "0", 1);
    h5data *d = h5data_open(big, "/t");
    TU_CHECK(d != NULL, "checks left to the reads: the file opens");
    if (d) {
        const char *msg;
        int rc = read_in_thread(d, 100, &msg);
        TU_CHECK(rc == 0 && !msg[0], "a read of a sound chunk works (rc %d)", rc);
        rc = read_in_thread(d, 5 * 1024 + 1000, &msg);
        TU_CHECK(rc != 0 && tu_count_lines(msg) == 1 &&
                     strstr(msg, "records 7000 bytes for chunk 5 of 64"),
                 "a read that touches the bad chunk fails, naming it (rc %d)", rc);
        rc = read_in_thread(d, 5 * 1024 - 10, &msg);
        TU_CHECK(rc != 0 && strstr(msg, "chunk 5 of 64"), "and so does the next one");
        rc = read_in_thread(d, 4 * 1024, &msg);
        TU_CHECK(rc == 0 && !msg[0], "its neighbour still reads (rc %d)", rc);
        h5data_close(d);
    }
    unsetenv("GENTRAIN_CHUNK_CHECK_AT_OPEN");
}

/* ---- prepare --------------------------------------------------------------------- */

static unsigned char *read_all(h5data *d, int64_t *n)
{
    *n = h5data_row_len(d);
    int32_t *t = malloc((size_t)*n * sizeof *t + 1);
    unsigned char *b = malloc((size_t)*n + 1);
    if (h5data_read(d, 0, 0, *n, t, 256) != 0) *n = -1;
    for (int64_t i = 0; i < *n; i++) b[i] = (unsigned char)t[i];
    free(t);
    return b;
}

static char *root_string_attr(const char *path, const char *name)
{
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    hid_t a = H5Aopen(f, name, H5P_DEFAULT);
    hid_t mem = H5Tcopy(H5T_C_S1);
    H5Tset_size(mem, H5T_VARIABLE);
    H5Tset_cset(mem, H5T_CSET_UTF8);
    char *s = NULL, *copy = NULL;
    if (a >= 0 && H5Aread(a, mem, &s) >= 0 && s) {
        copy = strdup(s);
        H5free_memory(s);
    }
    H5Tclose(mem);
    if (a >= 0) H5Aclose(a);
    if (f >= 0) H5Fclose(f);
    return copy;
}

static void prepare_round_trip(const char *tag, const int64_t *sizes, int n_in, double vf)
{
    char paths[4][600], out[600], tmp[620];
    const char *inputs[4];
    int64_t total = 0;
    for (int i = 0; i < n_in; i++) total += sizes[i];
    unsigned char *all = malloc((size_t)total + 1);
    int64_t pos = 0;
    for (int i = 0; i < n_in; i++) {
        char name[64];
        snprintf(name, sizeof name, "%s_in%d.txt", tag, i);
        path_in(paths[i], sizeof paths[i], name);
        inputs[i] = paths[i];
        FILE *f = fopen(paths[i], "wb");
        for (int64_t k = 0; k < sizes[i]; k++, pos++) {
            /* Text-like, with every byte value somewhere. */
            static const char text[] = "abc de\nfgh.ij ";
            all[pos] = k % 97 == 0 ? (unsigned char)((k / 97 + i * 31) % 256)
                                   : (unsigned char)text[(k * 7 + i) % 14];
            fputc(all[pos], f);
        }
        fclose(f);
    }
    char name[64];
    snprintf(name, sizeof name, "%s_out.h5", tag);
    path_in(out, sizeof out, name);
    snprintf(tmp, sizeof tmp, "%s.tmp", out);
    int rc = prepare_bytes(inputs, n_in, out, vf);
    TU_CHECK(rc == 0, "prepare %s: succeeds (%lld bytes, val_fraction %g)", tag,
             (long long)total, vf);
    TU_CHECK(access(tmp, F_OK) != 0, "prepare %s: no .tmp left", tag);
    int64_t n_train = total - (int64_t)llround((double)total * vf);
    h5data *tr = h5data_open(out, "/train/tokens");
    if (n_train == total) {
        /* No validation bytes: /val/tokens exists but is empty, and says so. */
        tu_capture_begin();
        h5data *va = h5data_open(out, "/val/tokens");
        const char *msg = tu_capture_end();
        TU_CHECK(tr && !va && strstr(msg, "/val/tokens is empty (shape [0])"),
                 "prepare %s: empty /val/tokens", tag);
        if (tr) {
            int64_t nt;
            unsigned char *bt = read_all(tr, &nt);
            TU_CHECK(nt == total && memcmp(bt, all, (size_t)total) == 0,
                     "prepare %s: train holds every byte", tag);
            free(bt);
        }
        h5data_close(tr);
        free(all);
        return;
    }
    h5data *va = h5data_open(out, "/val/tokens");
    TU_CHECK(tr && va, "prepare %s: both datasets open", tag);
    if (tr && va) {
        int64_t nt, nv;
        unsigned char *bt = read_all(tr, &nt), *bv = read_all(va, &nv);
        TU_CHECK(nt == n_train && nv == total - n_train, "prepare %s: split %lld + %lld", tag,
                 (long long)nt, (long long)nv);
        if (strcmp(tag, "ninety") == 0)
            TU_CHECK(nt == 10 && nv == 90, "prepare %s: 100 bytes at 0.9 give 10 + 90", tag);
        TU_CHECK(nt == n_train && memcmp(bt, all, (size_t)nt) == 0,
                 "prepare %s: train bytes equal the start of the inputs", tag);
        TU_CHECK(nv == total - n_train && memcmp(bv, all + n_train, (size_t)nv) == 0,
                 "prepare %s: val bytes equal the rest", tag);
        TU_CHECK(h5data_vocab_attr(tr) == 256 && strcmp(h5data_type_name(tr), "uint8") == 0,
                 "prepare %s: uint8 with root vocab_size 256", tag);
        free(bt);
        free(bv);
    }
    h5data_close(tr);
    h5data_close(va);
    if (strcmp(tag, "small") == 0) {
        char ipath[700], text[4096] = "";
        path_in(ipath, sizeof ipath, "inspect.txt");
        FILE *io = fopen(ipath, "w");
        int irc = inspect_file(out, io);
        fclose(io);
        io = fopen(ipath, "r");
        size_t n = fread(text, 1, sizeof text - 1, io);
        text[n] = '\0';
        fclose(io);
        printf("----- inspect output -----\n%s--------------------------\n", text);
        TU_CHECK(irc == 0 && strstr(text, "/train/tokens  dataset  uint8 [1980]") &&
                     strstr(text, "/val/tokens    dataset  uint8 [220]") &&
                     strstr(text, "    @tokenizer = \"bytes\"  (string)\n") &&
                     strstr(text, "    @vocab_size = 256  (int64)\n"),
                 "inspect lists the prepared file");
    }
    char *tok = root_string_attr(out, "tokenizer");
    TU_CHECK(tok && strcmp(tok, "bytes") == 0, "prepare %s: tokenizer = \"%s\"", tag,
             tok ? tok : "(none)");
    free(tok);
    free(all);
}

static void prepare_failures(void)
{
    char in[600], missing[600], out[700], tmp[720], want[1600];
    path_in(in, sizeof in, "small_in0.txt");
    const char *inputs[2] = {in, missing};
    path_in(missing, sizeof missing, "missing.txt");
    path_in(out, sizeof out, "never.h5");

    tu_capture_begin();
    int rc = prepare_bytes(inputs, 2, out, 0.1);
    const char *msg = tu_capture_end();
    snprintf(want, sizeof want, "cannot read %s: no such file", missing);
    TU_CHECK(rc != 0 && strstr(msg, want) && access(out, F_OK) != 0,
             "prepare: missing input fails naming it, writes nothing");

    tu_capture_begin();
    rc = prepare_bytes(inputs, 1, out, 1.0);
    msg = tu_capture_end();
    TU_CHECK(rc != 0 && strstr(msg, "val_fraction 1 is out of range [0, 1)"),
             "prepare: val_fraction 1 refused");

    path_in(out, sizeof out, "no/such/folder/out.h5");
    snprintf(tmp, sizeof tmp, "%s.tmp", out);
    tu_capture_begin();
    rc = prepare_bytes(inputs, 1, out, 0.1);
    msg = tu_capture_end();
    snprintf(want, sizeof want, "cannot create %s (for %s): no such folder", tmp, out);
    TU_CHECK(rc != 0 && strstr(msg, want), "prepare: output in a missing folder fails");

    /* The output path is a folder: the rename fails, the .tmp is removed. */
    path_in(out, sizeof out, "isdir.h5");
    snprintf(tmp, sizeof tmp, "%s.tmp", out);
    mkdir(out, 0755);
    tu_capture_begin();
    rc = prepare_bytes(inputs, 1, out, 0.1);
    msg = tu_capture_end();
    TU_CHECK(rc != 0 && strstr(msg, "it is a folder") && access(tmp, F_OK) != 0,
             "prepare: output path that is a folder fails, no .tmp left");
    rmdir(out);

    if (geteuid() != 0) {
        char ro[600];
        path_in(ro, sizeof ro, "readonly");
        mkdir(ro, 0555);
        snprintf(out, sizeof out, "%s/out.h5", ro);
        snprintf(tmp, sizeof tmp, "%s.tmp", out);
        tu_capture_begin();
        rc = prepare_bytes(inputs, 1, out, 0.1);
        msg = tu_capture_end();
        TU_CHECK(rc != 0 && strstr(msg, "permission denied") && access(tmp, F_OK) != 0,
                 "prepare: unwritable folder fails cleanly");
        rmdir(ro);
    } else {
        printf("     (running as root: the read-only folder case is skipped)\n");
    }
}

/* ---- main ------------------------------------------------------------------------ */

static void remove_dir(const char *path)
{
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", path);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", path);
}

int main(void)
{
    tu_make_tmpdir(dir, sizeof dir, "gt_h5data");
    /* The library's HDF5 silence does not cover our own calls made before it. */
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);

    /* Every accepted width and sign; uint16 is stored big-endian, so HDF5 converts
     * the byte order on read. The vocab attribute alternates dataset / root. */
    const struct {
        const char *name;
        hid_t type;
        int64_t vocab;
    } types[] = {{"uint8", H5T_STD_U8LE, 256},      {"uint16 big-endian", H5T_STD_U16BE, 60000},
                 {"int32", H5T_STD_I32LE, 70000},   {"int64", H5T_STD_I64LE, 100000},
                 {"int16", H5T_STD_I16LE, 30000},   {"uint32", H5T_STD_U32LE, 50257},
                 {"int8", H5T_STD_I8LE, 100},       {"uint64", H5T_STD_U64LE, 1000}};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        for (int rank = 1; rank <= 2; rank++) {
            use_gzip = i % 3 == 2; /* some are compressed (rank 2 is chunked) */
            check_type(types[i].name, types[i].type, rank, types[i].vocab,
                       (int)(i + (size_t)rank) % 2);
        }
    use_gzip = 0;
    refused_inputs();
    block_boundaries();
    threads();
    chunk_index();

    int64_t small[2] = {1500, 700};
    prepare_round_trip("small", small, 2, 0.1);
    int64_t big[3] = {3 * 1048576 + 17, 5, 1048576};
    prepare_round_trip("big", big, 3, 0.25);
    int64_t one[1] = {4096};
    prepare_round_trip("noval", one, 1, 0.0);
    int64_t hundred[1] = {100};
    prepare_round_trip("ninety", hundred, 1, 0.9); /* 10 + 90, not 9 + 91 */
    prepare_failures();

    remove_dir(dir);
    return tu_finish();
}
