/* bench_loader — the data side alone, for scripts/bench-loader.sh and bench-corpus.sh.
 *
 *   bench_loader gen OUT.h5 TOKENS [LEVEL [SEED]]
 *       writes a synthetic uint16 token file (vocab_size 50257): /train/tokens of TOKENS
 *       tokens and /val/tokens of TOKENS/1000 (at least 4096), in 1 Mi-token chunks, or
 *       16 Ki-token chunks with shuffle + deflate LEVEL (1-9) when LEVEL > 0. Tokens are
 *       skewed like text (small ids far more often: about 11 bits each), so deflate
 *       shrinks them about as it shrinks real token files.
 *   bench_loader read SPEC SECONDS [BLOCK [BATCH [MAX_OPEN]]]
 *       opens SPEC (a file, folder, glob or list: io/h5/h5set.h) as train does, starts the
 *       loader thread (src/data/loader.h) and takes batches for SECONDS: prints the open
 *       time, loader tokens/s, the seconds the taker waited for batches (with no step
 *       between takes, about all of SECONDS when the loader is the limit), the files
 *       opened and the most open at once.
 * Prints one "key value" per line. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "h5lock.h"
#include "h5set.h"
#include "h5util.h"
#include "loader.h"
#include "util.h"
#include "windows.h"

#define GEN_BLOCK ((int64_t)1 << 20)

static uint64_t next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* One dataset of n skewed tokens: the product of three uniform numbers leans to 0. */
static int gen_set(hid_t file, const char *name, int64_t n, int level, uint64_t *seed,
                   uint16_t *buf)
{
    hsize_t dims = (hsize_t)n, ch = (hsize_t)(level > 0 ? 1 << 14 : 1 << 20);
    if (ch > dims) ch = dims;
    hid_t space = H5Screate_simple(1, &dims, NULL), dcpl = H5Pcreate(H5P_DATASET_CREATE);
    hid_t lcpl = H5Pcreate(H5P_LINK_CREATE), d = -1;
    int rc = -1;
    if (space < 0 || dcpl < 0 || lcpl < 0 || H5Pset_create_intermediate_group(lcpl, 1) < 0 ||
        H5Pset_chunk(dcpl, 1, &ch) < 0 ||
        (level > 0 && (H5Pset_shuffle(dcpl) < 0 || H5Pset_deflate(dcpl, (unsigned)level) < 0)) ||
        (d = H5Dcreate2(file, name, H5T_STD_U16LE, space, lcpl, dcpl, H5P_DEFAULT)) < 0)
        goto done;
    for (int64_t at = 0; at < n; at += GEN_BLOCK) {
        const hsize_t start = (hsize_t)at, cnt = (hsize_t)(n - at < GEN_BLOCK ? n - at : GEN_BLOCK);
        for (hsize_t i = 0; i < cnt; i++) {
            const uint64_t r = next(seed);
            const uint64_t ab = (r & 0xFFFF) * ((r >> 16) & 0xFFFF) >> 16;
            buf[i] = (uint16_t)((ab * ((r >> 32) & 0xFFFF) >> 16) % 50257);
        }
        hid_t ms = H5Screate_simple(1, &cnt, NULL);
        const int bad = ms < 0 ||
                        H5Sselect_hyperslab(space, H5S_SELECT_SET, &start, NULL, &cnt, NULL) < 0 ||
                        H5Dwrite(d, H5T_NATIVE_UINT16, ms, space, H5P_DEFAULT, buf) < 0;
        if (ms >= 0) H5Sclose(ms);
        if (bad) goto done;
    }
    rc = 0;
done:
    if (d >= 0 && H5Dclose(d) < 0) rc = -1;
    if (lcpl >= 0) H5Pclose(lcpl);
    if (dcpl >= 0) H5Pclose(dcpl);
    if (space >= 0) H5Sclose(space);
    return rc;
}

static int gen(const char *out, int64_t tokens, int level, uint64_t seed)
{
    char why[160];
    uint16_t *buf = malloc((size_t)GEN_BLOCK * sizeof *buf);
    if (!buf) return 1;
    seed = seed * 0x9E3779B97F4A7C15ull + 1;
    hid_t f = h5io_create(out, why, sizeof why);
    int64_t nval = tokens / 1000 < 4096 ? 4096 : tokens / 1000;
    int bad = f < 0 || gen_set(f, "/train/tokens", tokens, level, &seed, buf) != 0 ||
              gen_set(f, "/val/tokens", nval, level, &seed, buf) != 0 ||
              h5io_write_attr_int(f, "vocab_size", 50257) != 0;
    if (f >= 0 && H5Fclose(f) < 0) bad = 1;
    free(buf);
    if (bad) fprintf(stderr, "bench_loader: cannot write %s %s\n", out, f < 0 ? why : "");
    return bad;
}

static int bench_read(const char *spec, double seconds, int T, int B, int max_open)
{
    h5data_set_read_hint((int64_t)T + 1, (int64_t)B * 5);
    double t0 = gt_now();
    h5set *s = h5set_create(spec, "/train/tokens", 0, max_open);
    int ok = s != NULL;
    for (int i = 0; ok && i < h5set_files(s); i++) ok = h5set_probe(s, i) == 0;
    ok = ok && h5set_settle(s) == 0;
    const double t_open = gt_now() - t0;
    t0 = gt_now();
    ok = ok && h5set_check_range_part(s, 50257, 0, 1) == 0;
    const double t_check = gt_now() - t0;
    token_windows w;
    int64_t *shape = ok ? malloc(2 * (size_t)h5set_files(s) * sizeof *shape) : NULL;
    ok = ok && shape;
    for (int i = 0; ok && i < h5set_files(s); i++) {
        shape[i] = h5set_rows(s, i);
        shape[h5set_files(s) + i] = h5set_row_len(s, i);
    }
    ok = ok && windows_init_files(&w, h5set_files(s), shape, shape + h5set_files(s), T,
                                  spec) == 0;
    free(shape);
    loader *l = ok ? loader_start(s, &w, 1, B, T, 50257, 0, 4, 0, 1) : NULL;
    if (!l) {
        h5set_close(s);
        return 1;
    }
    int64_t batches = 0;
    double wait = 0, w1;
    t0 = gt_now();
    while (gt_now() - t0 < seconds && loader_next(l, NULL, NULL, &w1) == 0) {
        batches++;
        wait += w1;
    }
    const double dt = gt_now() - t0;
    loader_stop(l);
    printf("files %d\ntokens %lld\nopen_s %.3f\ncheck_s %.3f\nbatches %lld\n"
           "loader_tokens_per_s %.0f\nwait_s %.3f\nfiles_opened %lld\npeak_open %d\n",
           h5set_files(s), (long long)h5set_total_tokens(s), t_open, t_check,
           (long long)batches, (double)batches * B * T / dt, wait, (long long)h5set_opens(s),
           h5set_peak_open(s));
    windows_free(&w);
    h5set_close(s);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 4 && strcmp(argv[1], "gen") == 0)
        return gen(argv[2], atoll(argv[3]), argc > 4 ? atoi(argv[4]) : 0,
                   argc > 5 ? strtoull(argv[5], NULL, 10) : 1);
    if (argc >= 4 && strcmp(argv[1], "read") == 0)
        return bench_read(argv[2], atof(argv[3]), argc > 4 ? atoi(argv[4]) : 1024,
                          argc > 5 ? atoi(argv[5]) : 16, argc > 6 ? atoi(argv[6]) : 16);
    fprintf(stderr, "usage: bench_loader gen OUT.h5 TOKENS [LEVEL [SEED]]\n"
                    "       bench_loader read SPEC SECONDS [BLOCK [BATCH [MAX_OPEN]]]\n");
    return 2;
}
