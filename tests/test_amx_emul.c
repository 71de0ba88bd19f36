/* test_amx_emul — the software model of the AMX tiles (src/kernels/bf16/amx_emul.h) that the AMX
 * matrix product's emulated twin runs on:
 *   (a) TDPBF16PS sums as the SDM's pseudo-code says: an even and an odd chain from
 *       zero, then their sum, then into the destination (values chosen so the naive
 *       order, pair after pair into the destination, gives another answer);
 *   (b) denormal BF16 inputs count as zero and denormal results are flushed (DAZ, FTZ);
 *   (d) the vector loops of TDPBF16PS (amx_emul_avx512.c where the CPU has AVX-512,
 *       amx_emul_avx2.c where it has AVX2) leave the same bits as the scalar model, on
 *       tiles of every shape with normals, denormals, zeros of both signs, infinities,
 *       ties and NaNs;
 *   (e) the counts: each instruction once, in the slot of the thread that ran it;
 *   (c) what the hardware faults on aborts here with the exception it would raise:
 *       bad configurations (#GP) and tile use without a configuration, on an
 *       unconfigured tile, with repeated or mismatched tiles, after release, and on a
 *       thread that did not load a configuration itself (#UD). Each runs in a child
 *       process; its stderr is checked for the message. */
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <sys/wait.h>
#include <unistd.h>

#include "amx_emul.h"
#include "amx_emul_counts.h"
#include "cpu_features.h"
#include "testutil.h"

static uint16_t bf16_of(float x) /* exact for the values used here */
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return (uint16_t)(u >> 16);
}

/* dst (tile 0: 1 x 1 FP32, starting at c0) += a (tile 1: 1 row, 2 pairs) @ b (tile 2:
 * 2 pair rows, 1 column pair) */
static float dp_1x1(float c0, const float a[4], const float b[4])
{
    amx_tilecfg cfg;
    amx_tilecfg_uniform(&cfg, 0, 0, 0);
    const int shape[3][2] = {{1, 4}, {1, 8}, {2, 4}}; /* rows, bytes a row */
    for (int t = 0; t < 3; t++) {
        cfg.rows[t] = (uint8_t)shape[t][0];
        cfg.colsb[t] = (uint16_t)shape[t][1];
    }
    uint16_t at[4], bt[4];
    for (int i = 0; i < 4; i++) {
        at[i] = bf16_of(a[i]);
        bt[i] = bf16_of(b[i]);
    }
    float c = c0;
    amx_emul_loadconfig(&cfg);
    amx_emul_loadd(0, &c, 4);
    amx_emul_loadd(1, at, 8);
    amx_emul_loadd(2, bt, 4);
    amx_emul_dpbf16ps(0, 1, 2);
    amx_emul_stored(0, &c, 4);
    amx_emul_release();
    return c;
}

static void check_arithmetic(void)
{
    /* pairs (a0 b0 + a1 b1) + (a2 b2 + a3 b3) = (2^24 + 1) + (-2^24 + 1). SDM: even
     * chain 2^24 - 2^24 = 0, odd chain 1 + 1 = 2, so 2; pair after pair into one sum
     * gives 2^24 + 1 = 2^24 (ties to even), then 0, then 1. */
    const float a[4] = {0x1p12f, 1.0f, -0x1p12f, 1.0f}, b[4] = {0x1p12f, 1.0f, 0x1p12f, 1.0f};
    float c = dp_1x1(0.0f, a, b);
    TU_CHECK(c == 2.0f, "TDPBF16PS sums the even and odd chains apart (SDM): %g (naive "
             "order: 1)", (double)c);
    c = dp_1x1(5.0f, a, b);
    TU_CHECK(c == 7.0f, "TDPBF16PS adds to the destination: 5 + 2 = %g", (double)c);

    /* DAZ: BF16 0x0001 is denormal; times 2^126 it would be 2^-7 */
    float den;
    const uint32_t den_bits = 0x00010000u;
    memcpy(&den, &den_bits, sizeof den);
    const float a2[4] = {den, 0, 0, 0}, b2[4] = {0x1p126f, 0, 0, 0};
    c = dp_1x1(0.0f, a2, b2);
    TU_CHECK(c == 0.0f, "a denormal BF16 input counts as zero (DAZ): %g", (double)c);
    /* FTZ: 2^-70 x 2^-70 = 2^-140 is denormal in FP32 */
    const float a3[4] = {-0x1p-70f, 0, 0, 0}, b3[4] = {0x1p-70f, 0, 0, 0};
    c = dp_1x1(0.0f, a3, b3);
    TU_CHECK(c == 0.0f, "a denormal product is flushed to zero (FTZ): %g", (double)c);
}

/* ------------------------------------------------------------------------------------ */
/* (d) vector and scalar TDPBF16PS */

static uint32_t rng_state = 12345u;
static uint32_t next_u32(void) /* xorshift32 */
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 17;
    rng_state ^= rng_state << 5;
    return rng_state;
}

/* The tiles of palette 1, all 16 x 64 bytes */
static amx_tilecfg full_config(void)
{
    amx_tilecfg cfg;
    amx_tilecfg_uniform(&cfg, AMX_TILES, AMX_MAX_ROWS, AMX_MAX_COLSB);
    return cfg;
}

/* A BF16 of a kind the arithmetic treats apart; nan: whether NaNs may be drawn. Most
 * are the smallest normals (exponents 1-2) or near 1, so that sums of their products
 * cancel into the denormal range, where the flushes decide the bits; infinities and
 * NaNs are rare, or every chain would end in one. */
static uint16_t some_bf16(int nan)
{
    const uint32_t r = next_u32(), sign = (r >> 31) << 15, low = (r >> 8) & 0x7f;
    const uint32_t kind = r % 64;
    if (kind < 6) return (uint16_t)(sign | low);                 /* denormal or zero */
    if (kind == 6) return (uint16_t)(sign | 0x7f80);             /* infinity */
    if (kind == 7) return nan ? (uint16_t)(sign | 0x7fc0 | (r & 7)) : 0; /* NaN */
    if (kind < 36) return (uint16_t)(sign | (1u + (r >> 20) % 2) << 7 | low); /* tiny */
    return (uint16_t)(sign | (0x3f00 + ((r >> 20) % 4) * 0x80) | low); /* near 1 */
}

/* dst = tile 0 (M x N FP32), A = tile 4 (M x K pairs), B = tile 6 (K x N pairs), filled
 * at random, then TDPBF16PS twice (the second adds to the first's sums); the bytes of
 * tile 0 after it into out */
static void dp_once(int M, int N, int K, int nan, uint32_t seed, int loop,
                    uint8_t out[AMX_MAX_ROWS * AMX_MAX_COLSB])
{
    static uint16_t a[AMX_MAX_ROWS * 32], b[AMX_MAX_ROWS * 32];
    static float c[AMX_MAX_ROWS * 16];
    rng_state = seed;
    for (int i = 0; i < AMX_MAX_ROWS * 32; i++) {
        a[i] = some_bf16(nan);
        b[i] = some_bf16(nan);
    }
    for (int i = 0; i < AMX_MAX_ROWS * 16; i++) {
        const uint32_t u = (uint32_t)some_bf16(nan) << 16 | (next_u32() & 0xffff);
        memcpy(&c[i], &u, sizeof u);
    }
    amx_tilecfg cfg;
    amx_tilecfg_uniform(&cfg, 0, 0, 0);
    cfg.rows[0] = (uint8_t)M;
    cfg.colsb[0] = (uint16_t)(4 * N);
    cfg.rows[4] = (uint8_t)M;
    cfg.colsb[4] = (uint16_t)(4 * K);
    cfg.rows[6] = (uint8_t)K;
    cfg.colsb[6] = (uint16_t)(4 * N);
    const int was = amx_emul_vector(loop);
    amx_emul_loadconfig(&cfg);
    amx_emul_loadd(0, c, 64);
    amx_emul_loadd(4, a, 64);
    amx_emul_loadd(6, b, 64);
    amx_emul_dpbf16ps(0, 4, 6);
    amx_emul_loadd(4, b, 64);
    amx_emul_dpbf16ps(0, 4, 6);
    memset(out, 0xa5, AMX_MAX_ROWS * AMX_MAX_COLSB);
    amx_emul_stored(0, out, 64); /* M rows of 4N bytes */
    amx_emul_release();
    (void)amx_emul_vector(was);
}

/* loop: AMX_EMUL_BEST or AMX_EMUL_AVX2, against AMX_EMUL_SCALAR */
static void check_vector(int loop, const char *name, int runs)
{
    static const int shapes[][3] = {{16, 16, 16}, {1, 1, 1}, {3, 16, 5}, {16, 7, 16},
                                    {9, 13, 11}, {12, 2, 16}, {5, 16, 1}, {16, 8, 8},
                                    {7, 9, 9}, {4, 15, 16}};
    const int nshapes = (int)(sizeof shapes / sizeof shapes[0]);
    int same = 0, tried = 0;
    for (int nan = 0; nan < 2; nan++)
        for (int i = 0; i < nshapes; i++)
            for (uint32_t seed = 1; seed <= 50; seed++) {
                uint8_t vec[AMX_MAX_ROWS * AMX_MAX_COLSB], ref[AMX_MAX_ROWS * AMX_MAX_COLSB];
                const int M = shapes[i][0], N = shapes[i][1], K = shapes[i][2];
                dp_once(M, N, K, nan, seed * 7919u + (uint32_t)i, loop, vec);
                dp_once(M, N, K, nan, seed * 7919u + (uint32_t)i, AMX_EMUL_SCALAR, ref);
                tried++;
                same += memcmp(vec, ref, sizeof vec) == 0;
            }
    TU_CHECK(same == tried, "TDPBF16PS: the %s loop%s leaves the scalar model's bits: "
             "%d of %d tiles (%d shapes, denormals, infinities, NaNs)", name,
             runs ? "" : " (not on this CPU: scalar twice)", same, tried, nshapes);
}

/* (e) counts */
static void *count_on_thread(void *arg)
{
    (void)arg;
    amx_tilecfg c = full_config();
    amx_emul_loadconfig(&c);
    for (int i = 0; i < 3; i++) amx_emul_zero(1);
    amx_emul_release();
    return NULL;
}

static void check_counts(void)
{
    amx_emul_counts per[4];
    amx_emul_counts_reset();
    TU_CHECK(amx_emul_counts_read(per, 4) == 0, "no thread has counts after a reset");
    static uint8_t t[AMX_MAX_ROWS * AMX_MAX_COLSB];
    amx_tilecfg c = full_config();
    amx_emul_loadconfig(&c);
    amx_emul_span_begin();
    amx_emul_zero(0);
    for (int i = 0; i < 5; i++) {
        amx_emul_loadd(4, t, 64);
        amx_emul_loadd(6, t, 64);
        amx_emul_dpbf16ps(0, 4, 6);
    }
    amx_emul_stored(0, t, 64);
    amx_emul_span_end();
    amx_emul_release();
    pthread_t th;
    const int started = pthread_create(&th, NULL, count_on_thread, NULL) == 0;
    if (started) pthread_join(th, NULL);
    const int n = amx_emul_counts_read(per, 4);
    TU_CHECK(started && n == 2, "two threads ran tile instructions: %d counted", n);
    int mine = 0, other = 0;
    for (int i = 0; i < n && i < 4; i++) {
        const amx_emul_counts *p = &per[i];
        mine += p->dpbf16ps == 5 && p->loadd == 10 && p->stored == 1 && p->zero == 1 &&
                p->span_s > 0.0 && p->span_s < 1.0 && p->product_s == 0.0;
        other += p->dpbf16ps == 0 && p->loadd == 0 && p->stored == 0 && p->zero == 3 &&
                 p->span_s == 0.0 && p->product_s == 0.0;
    }
    TU_CHECK(mine == 1 && other == 1, "each thread's counts are its own: 5 TDPBF16PS, 10 "
             "loads, 1 store, 1 zero and a timed span here; 3 zeros on the other thread");
    /* an attention pass: counted as a product, and its instructions and times apart */
    amx_emul_counts_reset();
    amx_emul_loadconfig(&c);
    amx_emul_loadd(4, t, 64);
    amx_emul_loadd(6, t, 64);
    amx_emul_dpbf16ps(0, 4, 6); /* before the pass */
    amx_emul_attention_begin();
    amx_emul_span_begin();
    for (int i = 0; i < 3; i++) {
        amx_emul_loadd(4, t, 64);
        amx_emul_dpbf16ps(0, 4, 6);
    }
    amx_emul_stored(0, t, 64);
    amx_emul_span_end();
    amx_emul_attention_end();
    amx_emul_release();
    const int na = amx_emul_counts_read(per, 4);
    const amx_emul_counts *a = &per[0];
    TU_CHECK(na == 1 && a->dpbf16ps == 4 && a->loadd == 5 && a->stored == 1 &&
                 a->att_dpbf16ps == 3 && a->att_loadd == 3 && a->att_stored == 1 &&
                 a->att_zero == 0 && a->att_product_s > 0.0 &&
                 a->att_product_s == a->product_s && a->att_product_span_s > 0.0 &&
                 a->att_product_span_s <= a->att_product_s,
             "an attention pass counts as a product, and apart: its 3 TDPBF16PS, 3 loads "
             "and 1 store (of 4, 5, 1), its wall time and its tile spans");
    amx_emul_counts_reset();
    TU_CHECK(amx_emul_counts_read(per, 4) == 0, "a reset zeroes every thread's counts");
}

/* ------------------------------------------------------------------------------------ */
/* faults */

static uint8_t buf[AMX_MAX_ROWS * AMX_MAX_COLSB];

/* full_config with one change, loaded */
#define BAD_CONFIG(name, change)                                                          \
    static void name(void)                                                                \
    {                                                                                     \
        amx_tilecfg c = full_config();                                                    \
        change;                                                                           \
        amx_emul_loadconfig(&c);                                                          \
    }
BAD_CONFIG(rows17, c.rows[3] = 17)
BAD_CONFIG(colsb68, c.colsb[2] = 68)
BAD_CONFIG(palette2, c.palette = 2)
BAD_CONFIG(reserved, c.reserved[5] = 1)
BAD_CONFIG(no_bytes, c.colsb[1] = 0)
BAD_CONFIG(tile8, c.rows[8] = 16; c.colsb[8] = 64)

static void unconfigured(void)
{
    amx_emul_loadd(0, buf, 64);
}
static void empty_tile(void)
{
    amx_tilecfg c;
    amx_tilecfg_uniform(&c, 4, AMX_MAX_ROWS, AMX_MAX_COLSB);
    amx_emul_loadconfig(&c);
    amx_emul_loadd(5, buf, 64);
}
static void same_tiles(void)
{
    amx_tilecfg c = full_config();
    amx_emul_loadconfig(&c);
    amx_emul_dpbf16ps(0, 0, 6);
}
static void mismatch(void)
{
    amx_tilecfg c = full_config();
    c.rows[6] = 8; /* B with 8 pair rows against A's 16 pairs a row */
    amx_emul_loadconfig(&c);
    amx_emul_dpbf16ps(0, 4, 6);
}
static void after_release(void)
{
    amx_tilecfg c = full_config();
    amx_emul_loadconfig(&c);
    amx_emul_release();
    amx_emul_zero(0);
}
static void *use_tiles(void *arg)
{
    (void)arg;
    amx_emul_zero(0);
    return NULL;
}
static void other_thread(void) /* configured on this thread only */
{
    amx_tilecfg c = full_config();
    amx_emul_loadconfig(&c);
    pthread_t th;
    if (pthread_create(&th, NULL, use_tiles, NULL) == 0) pthread_join(th, NULL);
}

/* fn aborts in a child process with `want` in its message */
static void check_fault(const char *what, void (*fn)(void), const char *want)
{
    fflush(stdout);
    tu_capture_begin();
    pid_t pid = fork();
    if (pid == 0) {
        fn();
        _exit(0);
    }
    int status = 0;
    if (pid > 0) waitpid(pid, &status, 0);
    const char *text = tu_capture_end();
    const int aborted = pid > 0 && WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT;
    TU_CHECK(aborted && strstr(text, want), "%s: aborts with \"%s\"", what, want);
}

int main(void)
{
    check_arithmetic();
    check_vector(AMX_EMUL_BEST, cpu_isa_level() >= CPU_ISA_AVX512 ? "AVX-512" : "widest vector",
                 cpu_isa_level() >= CPU_ISA_AVX2);
    check_vector(AMX_EMUL_AVX2, "AVX2", cpu_isa_level() >= CPU_ISA_AVX2);
    check_counts();
    check_fault("16 x 64 tiles, one of 17 rows", rows17, "LDTILECFG would raise #GP");
    check_fault("a tile of 68 bytes a row", colsb68, "LDTILECFG would raise #GP");
    check_fault("palette 2", palette2, "LDTILECFG would raise #GP: palette 2");
    check_fault("a reserved byte set", reserved, "LDTILECFG would raise #GP: a reserved");
    check_fault("a tile with rows and no bytes", no_bytes, "LDTILECFG would raise #GP");
    check_fault("tile 8 configured", tile8, "LDTILECFG would raise #GP: tile 8");
    check_fault("a load with no configuration", unconfigured, "TILELOADD would raise #UD");
    check_fault("a load into an unconfigured tile", empty_tile, "TILELOADD would raise #UD");
    check_fault("dst = src1", same_tiles, "TDPBF16PS would raise #UD");
    check_fault("B rows != A pairs a row", mismatch, "TDPBF16PS would raise #UD");
    check_fault("tilezero after release", after_release, "TILEZERO would raise #UD");
    check_fault("tiles on a thread that loaded no configuration", other_thread,
                "TILEZERO would raise #UD: no tile configuration loaded on this thread");
    printf("%d checks, %d failed\n", tu_checks, tu_failures);
    return tu_failures ? 1 : 0;
}
