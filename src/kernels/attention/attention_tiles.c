/* attention_tiles — see attention_tiles.h. The products, as attention_pairs.c has
 * them, on gemm_bf16_amx_panel (tiles of 16 rows x 32 depth, 32 x 32 blocks of C):
 *
 *   forward, per block of 32 query rows:  S = scale Q K^T    A: Q        B: K^T
 *                                         O = P V            A: P        B: V
 *   backward, per block of 32 rows:       S again, dP = dO V^T           B: V^T
 *                                         dQ += scale dS K   A: dS       B: K
 *                                         dK += scale dS^T Q A: dS^T     B: Q (the block's
 *                                         dV += P^T dO       A: P^T      B: dO  32 of depth)
 *
 * Q, K^T and V^T as operands of depth hs, K, Q, V and dO as operands of depth T (of which
 * a block reads the chunks it needs) are packed once per head. */
#include "attention_tiles.h"

#include <math.h>

#include "amx_emul_counts.h" /* amx_emul_product_begin / end */
#include "bf16_store.h"      /* bf16_store: a stored output */
#include "gemm_bf16.h"       /* gemm_bf16_path, GEMM_BF16_STORED(_T) */
#include "gemm_bf16_amx.h"   /* the packing and gemm_bf16_amx_panel(_emulated) */
#include "simd.h"            /* GT_SIMD_X86_AMX, simd_kernels_get: the softmax rows */

enum {
    TW = GEMM_BF16_AMX_TILE, /* 32-bit words in a tile */
    RB = 32,                 /* query rows per block: two tiles high */
    WORK_WORDS = (GEMM_BF16_AMX_PANEL_WORK + 3) / 4
};

typedef void (*panel_fn)(const uint32_t *ap, size_t a_run, const uint32_t *bp, size_t b_run,
                         int m, int n, int nq, float alpha, int accumulate, float *C, int ldc,
                         void *work);

/* The panel product of the path in use, and its tile configuration and release (once
 * a head: gemm_bf16_amx.h says why) */
typedef struct {
    panel_fn panel;
    void (*begin)(void *work);
    void (*end)(void);
} tiles_fns;

static tiles_fns tiles_of_path(void)
{
    switch (gemm_bf16_path()) {
#if GT_SIMD_X86_AMX
    case GEMM_BF16_AMX:
        return (tiles_fns){gemm_bf16_amx_panel, gemm_bf16_amx_panel_begin,
                           gemm_bf16_amx_panel_end};
#endif
    case GEMM_BF16_AMX_EMULATED:
        return (tiles_fns){gemm_bf16_amx_panel_emulated, gemm_bf16_amx_panel_begin_emulated,
                           gemm_bf16_amx_panel_end_emulated};
    default: return (tiles_fns){NULL, NULL, NULL};
    }
}

int attention_tiles_ready(int hs) { return hs > 0 && tiles_of_path().panel != NULL; }

static int up32(int n) { return (n + 31) / 32; }

/* Words of each kind of packed operand: mtT 16-row (or 16-column) tiles over T of depth
 * hs, and 2 up32(hs) tiles over hs of depth T */
static size_t over_t(int T, int hs) { return (size_t)2 * up32(T) * up32(hs) * TW; }

static size_t fwd_words(int T, int hs)
{
    return 3 * over_t(T, hs) + (size_t)2 * up32(T) * TW + (size_t)RB * T + (size_t)RB * hs +
           WORK_WORDS + 8 * 16;
}

static size_t bwd_words(int T, int hs)
{
    return 7 * over_t(T, hs) + (size_t)2 * up32(T) * TW + (size_t)2 * up32(T) * TW +
           2 * (size_t)RB * T + WORK_WORDS + 12 * 16;
}

size_t attention_tiles_scratch_floats(int T, int hs)
{
    const size_t f = fwd_words(T, hs), b = bwd_words(T, hs);
    return f > b ? f : b;
}

/* The next `words` of the scratch, 64-byte aligned from its start */
static void *take(float **p, size_t words)
{
    void *at = *p;
    *p += (words + 15) & ~(size_t)15;
    return at;
}

/* q, k or v of a head: FP32 or BF16 storage, with the packing's codes for it as stored
 * and transposed */
typedef struct {
    const float *p;
    int plain, transposed;
} operand;

static operand part(const float *q, const uint16_t *q16, size_t at)
{
    if (q16)
        return (operand){(const float *)(const void *)(q16 + at), GEMM_BF16_STORED,
                         GEMM_BF16_STORED_T};
    return (operand){q + at, 0, 1};
}

/* A head's shape in tiles, and what both passes start from: Q as A and K^T as B, both
 * of depth hs, packed into the scratch at *p; the tiles configured (work: the panels'
 * work area) until head_end */
typedef struct {
    panel_fn panel;
    void (*end)(void); /* the tiles' release, when the head is done */
    int ld, nqh, nqT, mtT, nth; /* row stride; chunks over hs, T; tiles over T, hs */
    size_t hrun, trun;          /* words of a tile's chunks over hs, over T */
    float scale, s_alpha; /* s_alpha: S's alpha (1 where Q's packing took the scale) */
    int pow2, shift;      /* whether scale = 2^shift (then packed operands take it) */
    operand Q, K, V;
    uint32_t *qa, *kb;
} head;

/* Whether x is a power of two (then scaling by it is exact, short of the denormals),
 * and if so its log2 into *log2x (may be NULL) */
static int power_of_two(float x, int *log2x)
{
    int e;
    const int yes = frexpf(x, &e) == 0.5f;
    if (yes && log2x) *log2x = e - 1;
    return yes;
}

/* A packed operand of over_t(T, hs) words times the head's scale 2^h->shift, exactly */
static void scale_tiles(const head *h, uint32_t *tiles, int T, int hs)
{
    bf16_scale_pow2((uint16_t *)(void *)tiles, 2 * over_t(T, hs), h->shift);
}

static head head_begin(float **p, void *work, const float *q, const uint16_t *q16, int T,
                       int C, int hs)
{
    const tiles_fns f = tiles_of_path();
    f.begin(work);
    head h = {.panel = f.panel, .end = f.end, .ld = 3 * C, .nqh = up32(hs), .nqT = up32(T),
              .scale = 1.0f / sqrtf((float)hs), .Q = part(q, q16, 0),
              .K = part(q, q16, (size_t)C), .V = part(q, q16, 2 * (size_t)C)};
    h.mtT = 2 * h.nqT;
    h.nth = 2 * h.nqh;
    h.hrun = (size_t)h.nqh * TW;
    h.trun = (size_t)h.nqT * TW;
    h.qa = take(p, over_t(T, hs));
    h.kb = take(p, over_t(T, hs));
    gemm_bf16_amx_pack_a(h.qa, h.Q.plain, h.Q.p, h.ld, 0, T, h.mtT, 0, hs, NULL);
    gemm_bf16_amx_pack_b(h.kb, h.K.transposed, h.K.p, h.ld, 0, T, h.mtT, 0, hs);
    /* S = scale Q K^T: where the scale is a power of two (hs = 4, 16, 64, 256) the packed
     * Q takes it, exactly, and S's whole blocks go from the tiles straight into C
     * (alpha 1: gemm_bf16_amx_kernel.h) instead of through the write-back */
    h.pow2 = power_of_two(h.scale, &h.shift);
    h.s_alpha = h.pow2 ? 1.0f : h.scale;
    if (h.pow2) scale_tiles(&h, h.qa, T, hs);
    return h;
}

static void head_end(const head *h) { h->end(); }

void attention_tiles_fwd_head(float *out, uint16_t *out16, float *lse, const float *q,
                              const uint16_t *q16, float *scratch, int T, int C, int hs,
                              attention_next next)
{
    const simd_kernels *kr = simd_kernels_get();
    float *p = scratch;
    void *work = take(&p, WORK_WORDS);
    const head h = head_begin(&p, work, q, q16, T, C, hs);
    uint32_t *vb = take(&p, over_t(T, hs)), *pa = take(&p, (size_t)2 * h.trun);
    float *s = take(&p, (size_t)RB * T), *ot = take(&p, (size_t)RB * hs);
    gemm_bf16_amx_pack_b(vb, h.V.plain, h.V.p, h.ld, 0, hs, h.nth, 0, T);
    for (int i0 = 0; i0 < T; i0 += RB) {
        const int m = T - i0 < RB ? T - i0 : RB, keys = i0 + m, nqk = up32(keys);
        attention_next_rows(next, i0, m, C, hs);
        h.panel(h.qa + (size_t)(i0 / 16) * h.hrun, h.hrun, h.kb, h.hrun, m, keys, h.nqh,
                h.s_alpha, 0, s, T, work);
        for (int i = 0; i < m; i++)
            lse[i0 + i] = kr->softmax_row(s + (size_t)i * T, i0 + i + 1, keys);
        gemm_bf16_amx_pack_a(pa, 0, s, T, 0, m, 2, 0, keys, NULL);
        if (out) {
            h.panel(pa, (size_t)nqk * TW, vb, h.trun, m, hs, nqk, 1.0f, 0, out + (size_t)i0 * C,
                    C, work);
            continue;
        }
        h.panel(pa, (size_t)nqk * TW, vb, h.trun, m, hs, nqk, 1.0f, 0, ot, hs, work);
        bf16_store_rows(out16 + (size_t)i0 * C, (size_t)C, ot, (size_t)hs, (size_t)m,
                        (size_t)hs);
    }
    head_end(&h);
}

/* dK or dV rows 0 .. keys of a block of queries from r0 (a multiple of 32: whole row
 * tiles): the keys before r0 add the block's part to what the blocks before gave, the
 * keys from r0 on meet their first queries here, so the panel writes them (the
 * backward writes dqkv, attention_cpu.h, and a written tile starts from TILEZERO
 * rather than loading C) */
static void keys_panel(const head *h, const uint32_t *ta, const uint32_t *b, int r0, int keys,
                       int hs, float alpha, float *d, int ldd, void *work)
{
    if (r0 > 0) h->panel(ta, TW, b, h->trun, r0, hs, 1, alpha, 1, d, ldd, work);
    h->panel(ta + (size_t)(r0 / 16) * TW, TW, b, h->trun, keys - r0, hs, 1, alpha, 0,
             d + (size_t)r0 * ldd, ldd, work);
}

void attention_tiles_bwd_head(float *dq, int dq_C, const float *dout, const float *q,
                              const uint16_t *q16, const float *lse, float *scratch, int T,
                              int C, int hs, attention_next next)
{
    const simd_kernels *kr = simd_kernels_get();
    float *dk = dq + dq_C, *dv = dq + 2 * dq_C;
    const int ldd = 3 * dq_C;
    float *p = scratch;
    void *work = take(&p, WORK_WORDS);
    const head h = head_begin(&p, work, q, q16, T, C, hs);
    uint32_t *vtb = take(&p, over_t(T, hs)), *oa = take(&p, over_t(T, hs)),
             *kB = take(&p, over_t(T, hs)), *qB = take(&p, over_t(T, hs)),
             *oB = take(&p, over_t(T, hs)), *dsa = take(&p, (size_t)2 * h.trun),
             *ta = take(&p, (size_t)h.mtT * TW);
    float *pr = take(&p, (size_t)RB * T), *dr = take(&p, (size_t)RB * T);
    /* dQ = scale dS K and dK = scale dS^T Q take the scale in their packed K and Q where
     * that is exact (a power of two, as at hs = 4, 16, 64, 256: the BF16 products of
     * dS with them are those of scale dS, short of values near 2^-126), once a head
     * rather than on each block's dS; they add alpha 1 products and their whole blocks
     * accumulate in C's own tiles (gemm_bf16_amx_kernel.h), not through the write-back;
     * elsewhere alpha = scale */
    const float ds_alpha = h.s_alpha;
    gemm_bf16_amx_pack_b(vtb, h.V.transposed, h.V.p, h.ld, 0, T, h.mtT, 0, hs);
    gemm_bf16_amx_pack_a(oa, 0, dout, C, 0, T, h.mtT, 0, hs, NULL);
    gemm_bf16_amx_pack_b(kB, h.K.plain, h.K.p, h.ld, 0, hs, h.nth, 0, T);
    gemm_bf16_amx_pack_b(qB, h.Q.plain, h.Q.p, h.ld, 0, hs, h.nth, 0, T);
    if (h.pow2) {
        scale_tiles(&h, kB, T, hs);
        scale_tiles(&h, qB, T, hs);
    }
    gemm_bf16_amx_pack_b(oB, 0, dout, C, 0, hs, h.nth, 0, T);
    for (int r0 = 0; r0 < T; r0 += RB) {
        const int m = T - r0 < RB ? T - r0 : RB, keys = r0 + m, nqk = up32(keys);
        const size_t at = (size_t)(r0 / 16) * h.hrun;
        attention_next_rows(next, r0, m, C, hs);
        h.panel(h.qa + at, h.hrun, h.kb, h.hrun, m, keys, h.nqh, h.s_alpha, 0, pr, T, work);
        h.panel(oa + at, h.hrun, vtb, h.hrun, m, keys, h.nqh, 1.0f, 0, dr, T, work);
        for (int i = 0; i < m; i++) { /* P, then dS, on FP32 rows (zero past the diagonal) */
            float *prow = pr + (size_t)i * T, *drow = dr + (size_t)i * T;
            kr->softmax_row_lse(prow, r0 + i + 1, keys, lse[r0 + i]);
            kr->softmax_bwd_row(drow, prow, r0 + i + 1, keys);
        }
        gemm_bf16_amx_pack_a(dsa, 0, dr, T, 0, m, 2, 0, keys, NULL);
        h.panel(dsa, (size_t)nqk * TW, kB, h.trun, m, hs, nqk, ds_alpha, 0,
                dq + (size_t)r0 * ldd, ldd, work);
        /* the block's 32 queries as the depth: dS^T and P^T against its chunk of Q, dO */
        const int mtk = 2 * up32(keys);
        const size_t chunk = (size_t)(r0 / 32) * TW;
        gemm_bf16_amx_pack_a(ta, 1, dr, T, 0, keys, mtk, 0, m, NULL);
        keys_panel(&h, ta, qB + chunk, r0, keys, hs, ds_alpha, dk, ldd, work);
        gemm_bf16_amx_pack_a(ta, 1, pr, T, 0, keys, mtk, 0, m, NULL);
        keys_panel(&h, ta, oB + chunk, r0, keys, hs, 1.0f, dv, ldd, work);
    }
    head_end(&h);
}

void attention_tiles_pass_begin(void)
{
    if (gemm_bf16_path() == GEMM_BF16_AMX_EMULATED) amx_emul_attention_begin();
}

void attention_tiles_pass_end(void)
{
    if (gemm_bf16_path() == GEMM_BF16_AMX_EMULATED) amx_emul_attention_end();
}
