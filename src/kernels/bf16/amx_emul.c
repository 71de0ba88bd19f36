/* amx_emul — see amx_emul.h: the tiles of one thread and the instructions on them. */
#include "amx_emul.h"

#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "amx_emul_counts.h" /* defines: amx_emul_count */
#include "cpu_features.h"    /* defines: cpu_isa_level */
#include "simd.h"            /* defines: GT_SIMD_X86 */
#include "util.h"            /* defines: gt_error */

typedef struct {
    int configured; /* a palette-1 configuration is loaded (TILES_CONFIGURED) */
    amx_tilecfg cfg;
    uint8_t data[AMX_TILES][AMX_MAX_ROWS][AMX_MAX_COLSB];
} tile_state;

/* Tile registers are per thread; so is their model. */
static _Thread_local tile_state st;

/* Reports what the hardware would raise and why, then aborts. */
static _Noreturn void fault(const char *insn, const char *exc, const char *fmt, ...)
{
    char why[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    gt_error("internal: emulated AMX: %s would raise %s: %s", insn, exc, why);
    abort();
}

/* The LDTILECFG checks of palette 1; returns NULL or what is wrong. */
static const char *config_error(const amx_tilecfg *c, char *buf, size_t cap)
{
    for (int i = 0; i < (int)sizeof c->reserved; i++)
        if (c->reserved[i]) return "a reserved byte (2-15) is set";
    for (int t = 0; t < 16; t++) {
        const int rows = c->rows[t], colsb = c->colsb[t];
        if (t >= AMX_TILES && (rows || colsb)) {
            snprintf(buf, cap, "tile %d is past palette 1's 8 tiles", t);
            return buf;
        }
        if (rows > AMX_MAX_ROWS || colsb > AMX_MAX_COLSB) {
            snprintf(buf, cap, "tile %d is %d rows x %d bytes, past 16 x 64", t, rows, colsb);
            return buf;
        }
        if ((rows == 0) != (colsb == 0)) {
            snprintf(buf, cap, "tile %d has %d rows and %d bytes per row", t, rows, colsb);
            return buf;
        }
    }
    return NULL;
}

void amx_emul_loadconfig(const amx_tilecfg *cfg)
{
    char buf[96];
    if (cfg->palette == 0) { /* the init state: no tiles */
        amx_emul_release();
        return;
    }
    if (cfg->palette != 1) fault("LDTILECFG", "#GP", "palette %d (this CPU has 0 and 1)",
                                 cfg->palette);
    const char *err = config_error(cfg, buf, sizeof buf);
    if (err) fault("LDTILECFG", "#GP", "%s", err);
    if (cfg->start_row) {
        gt_error("internal: emulated AMX: LDTILECFG with start_row %d: restarts are not "
                 "modelled", cfg->start_row);
        abort();
    }
    st.cfg = *cfg;
    memset(st.data, 0, sizeof st.data);
    st.configured = 1;
}

void amx_emul_release(void)
{
    memset(&st, 0, sizeof st);
}

/* #UD unless tiles are configured and t is a valid tile of them */
static void need_tile(const char *insn, int t)
{
    if (!st.configured) fault(insn, "#UD", "no tile configuration loaded on this thread");
    if (t < 0 || t >= AMX_TILES) fault(insn, "#UD", "tile %d does not exist", t);
    if (st.cfg.rows[t] == 0) fault(insn, "#UD", "tile %d is not configured (0 rows)", t);
    if (st.cfg.colsb[t] % 4) fault(insn, "#UD", "tile %d is %d bytes wide, not a multiple "
                                   "of 4", t, st.cfg.colsb[t]);
}

void amx_emul_loadd(int t, const void *base, long stride)
{
    need_tile("TILELOADD", t);
    amx_emul_count(AMX_COUNT_TILELOADD);
    const int rows = st.cfg.rows[t], colsb = st.cfg.colsb[t];
    memset(st.data[t], 0, sizeof st.data[t]);
    for (int r = 0; r < rows; r++)
        memcpy(st.data[t][r], (const uint8_t *)base + (ptrdiff_t)r * stride, (size_t)colsb);
}

void amx_emul_stored(int t, void *base, long stride)
{
    need_tile("TILESTORED", t);
    amx_emul_count(AMX_COUNT_TILESTORED);
    const int rows = st.cfg.rows[t], colsb = st.cfg.colsb[t];
    for (int r = 0; r < rows; r++)
        memcpy((uint8_t *)base + (ptrdiff_t)r * stride, st.data[t][r], (size_t)colsb);
}

void amx_emul_zero(int t)
{
    need_tile("TILEZERO", t);
    amx_emul_count(AMX_COUNT_TILEZERO);
    memset(st.data[t], 0, sizeof st.data[t]);
}

/* DAZ and FTZ: a denormal is a zero of its sign */
static inline float flush(float x) { return fabsf(x) < FLT_MIN ? copysignf(0.0f, x) : x; }

/* BF16 element i of a tile row, as the FP32 with the same top 16 bits (then flushed) */
static inline float bf16_at(const uint8_t *row, int i)
{
    uint16_t h;
    memcpy(&h, row + 2 * i, sizeof h);
    const uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return flush(f);
}

/* #UD checks of TDPBF16PS (AMX-E4): three different valid tiles of matching shapes */
static void check_dp(int d, int a, int b)
{
    need_tile("TDPBF16PS", d);
    need_tile("TDPBF16PS", a);
    need_tile("TDPBF16PS", b);
    if (d == a || d == b || a == b)
        fault("TDPBF16PS", "#UD", "tiles %d, %d, %d are not all different", d, a, b);
    const amx_tilecfg *c = &st.cfg;
    if (c->rows[d] != c->rows[a])
        fault("TDPBF16PS", "#UD", "dst tile %d has %d rows, src1 tile %d has %d", d,
              c->rows[d], a, c->rows[a]);
    if (c->colsb[d] != c->colsb[b])
        fault("TDPBF16PS", "#UD", "dst tile %d is %d bytes wide, src2 tile %d is %d", d,
              c->colsb[d], b, c->colsb[b]);
    if (c->colsb[a] / 4 != c->rows[b])
        fault("TDPBF16PS", "#UD", "src1 tile %d has %d pairs a row, src2 tile %d has %d "
              "rows", a, c->colsb[a] / 4, b, c->rows[b]);
}

/* The SDM's arithmetic, one element at a time (the reference; amx_emul_avx512.c and
 * amx_emul_avx2.c compute the same bits 16 and 8 columns at a time) */
static void dp_scalar(int d, int a, int b, int M, int N, int K)
{
    for (int m = 0; m < M; m++) {
        float even[16] = {0}, odd[16] = {0};
        const uint8_t *arow = st.data[a][m];
        for (int k = 0; k < K; k++) {
            const float a0 = bf16_at(arow, 2 * k), a1 = bf16_at(arow, 2 * k + 1);
            const uint8_t *brow = st.data[b][k];
            for (int n = 0; n < N; n++) {
                even[n] = flush(fmaf(a0, bf16_at(brow, 2 * n), even[n]));
                odd[n] = flush(fmaf(a1, bf16_at(brow, 2 * n + 1), odd[n]));
            }
        }
        uint8_t *drow = st.data[d][m];
        for (int n = 0; n < N; n++) {
            float c;
            memcpy(&c, drow + 4 * n, sizeof c);
            c = flush(flush(c) + flush(even[n] + odd[n]));
            memcpy(drow + 4 * n, &c, sizeof c);
        }
        memset(drow + 4 * N, 0, (size_t)(AMX_MAX_COLSB - 4 * N));
    }
}

static atomic_int emul_loop = AMX_EMUL_BEST; /* amx_emul_vector's choice */

int amx_emul_vector(int loop)
{
    const int known = loop == AMX_EMUL_SCALAR || loop == AMX_EMUL_BEST || loop == AMX_EMUL_AVX2;
    return atomic_exchange(&emul_loop, known ? loop : AMX_EMUL_BEST);
}

static atomic_int timing_on;

int amx_emul_timing_only(int on) { return atomic_exchange(&timing_on, on != 0); }

/* 1 when the vector loop computed dst */
static int dp_vector(int d, int a, int b, int M, int N, int K)
{
#if GT_SIMD_X86
    typedef const uint8_t(*crows)[AMX_MAX_COLSB];
    const int loop = atomic_load_explicit(&emul_loop, memory_order_relaxed);
    if (loop == AMX_EMUL_BEST && cpu_isa_level() >= CPU_ISA_AVX512)
        return amx_emul_dp_avx512(st.data[d], (crows)st.data[a], (crows)st.data[b], M, N, K);
    if (loop != AMX_EMUL_SCALAR && cpu_isa_level() >= CPU_ISA_AVX2)
        return amx_emul_dp_avx2(st.data[d], (crows)st.data[a], (crows)st.data[b], M, N, K);
#else
    (void)d, (void)a, (void)b, (void)M, (void)N, (void)K;
#endif
    return 0;
}

void amx_emul_dpbf16ps(int d, int a, int b)
{
    check_dp(d, a, b);
    amx_emul_count(AMX_COUNT_TDPBF16PS);
    if (atomic_load_explicit(&timing_on, memory_order_relaxed)) return;
    const int M = st.cfg.rows[d], N = st.cfg.colsb[d] / 4, K = st.cfg.colsb[a] / 4;
    if (!dp_vector(d, a, b, M, N, K)) dp_scalar(d, a, b, M, N, K);
    memset(&st.data[d][0][0] + (size_t)M * AMX_MAX_COLSB, 0,
           (size_t)(AMX_MAX_ROWS - M) * AMX_MAX_COLSB);
}
