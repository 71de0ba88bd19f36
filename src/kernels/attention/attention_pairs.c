/* attention_pairs — see attention_pairs.h. The products, as attention_cpu.c has them,
 * with their operands' pair layouts (a word = BF16 of depth 2p low, 2p + 1 high):
 *
 *   forward, per tile of query rows:  S = scale Q K^T   A: Q along hs    B: K^T (kt)
 *                                     O = P V           A: P along keys  B: V across keys
 *   backward, per tile of rows:       S again, dP = dO V^T (B: V^T, vt)
 *                                     dQ += scale dS K  A: dS along keys B: K across keys
 *   backward, per key tile j0:        dV += P^T dO      A: P^T (pairs across queries,
 *                                     dK += scale dS^T Q   read strided) B: dO, Q across
 *
 * "along" = pairs of a row's consecutive values, row-major; "across" = pairs of two
 * consecutive rows, the other index contiguous (16-word padded rows); K^T and V^T are
 * along-pairs stored transposed (word p of key j at p * Tp + j). An odd depth is paired
 * with zero. A key tile j0 and a block of PAIR_ROWS queries start at even rows, so the
 * pairs across queries of P^T and of dO / Q line up. */
#include "attention_pairs.h"

#include "simd.h" /* GT_SIMD_X86_BF16, simd_get_path, simd_kernels_get */

#if GT_SIMD_X86_BF16
#include "cpu_features.h"
#include "gemm_bf16.h"

#include "bf16_target_begin.h" /* AVX512_BF16 from here on */

#include <immintrin.h>
#include <math.h>
#include <stdint.h>

#include "bf16_store.h" /* bf16_store_rows: a stored output */
#include "bf16_x86.h" /* lanes, bf16_pairs_along_k, bf16_pairs_across_k (and _stored) */
#include "dot_counts.h" /* the bench's count of VDPBF16PS and kernel time */

/* PMR rows of C per micro-tile (even: the key tiles start at even rows), PNV vectors
 * of 16 columns; PAIR_ROWS queries per backward block, a multiple of PMR */
enum { PMR = 6, PNV = 4, VL = 16, PAIR_ROWS = 48 };
_Static_assert(PMR % 2 == 0 && PAIR_ROWS % PMR == 0, "tiles and blocks start at even rows");

static int round16(int n) { return (n + 15) / 16 * 16; }

/* A pair's word where it may be read from BF16 storage (uint16_t) in place */
typedef uint32_t __attribute__((may_alias)) pair_word;

/* C[i, j] = alpha sum_p dot2(A(i, p), B(p, j)) (+ C when accumulate), i < m, j < n,
 * p < k2, A(i, p) = a[i a_rs + p a_cs], B(p, j) = b[p ldb + j]; nv (1 .. PNV) constant
 * at each call, so the accumulators stay in registers. Rows past m repeat row m - 1 and
 * are not stored; columns past n are masked. */
static inline __attribute__((always_inline)) void
tile_nv(const int nv, int m, int n, int k2, float alpha, const pair_word *a, ptrdiff_t a_rs,
        ptrdiff_t a_cs, const uint32_t *b, size_t ldb, float *c, size_t ldc, int accumulate,
        const int fma_twin)
{
    __m512 s[PMR][PNV];
    const pair_word *ar[PMR];
#pragma GCC unroll 6
    for (int i = 0; i < PMR; i++) {
        ar[i] = a + (i < m ? i : m - 1) * a_rs;
#pragma GCC unroll 4
        for (int v = 0; v < PNV; v++) s[i][v] = _mm512_setzero_ps();
    }
    const __mmask16 last = lanes(n - (nv - 1) * VL);
    for (int p = 0; p < k2; p++) {
        const uint32_t *bp = b + (size_t)p * ldb;
        const ptrdiff_t ap = p * a_cs;
        __m512bh bv[PNV];
#pragma GCC unroll 4
        for (int v = 0; v < PNV; v++)
            bv[v] = v < nv - 1 ? (__m512bh)_mm512_loadu_si512(bp + v * VL)
                               : (__m512bh)_mm512_maskz_loadu_epi32(v == nv - 1 ? last : 0,
                                                                    bp + v * VL);
#pragma GCC unroll 6
        for (int i = 0; i < PMR; i++) {
            const __m512bh av = (__m512bh)_mm512_set1_epi32((int)ar[i][ap]);
#pragma GCC unroll 4
            for (int v = 0; v < PNV; v++)
                if (v < nv) /* fma_twin: dot_counts_timing_only, the bench's twin */
                    s[i][v] = fma_twin ? _mm512_fmadd_ps((__m512)av, (__m512)bv[v], s[i][v])
                                       : _mm512_dpbf16_ps(s[i][v], av, bv[v]);
        }
    }
    const __m512 al = _mm512_set1_ps(alpha);
#pragma GCC unroll 6
    for (int i = 0; i < PMR; i++) {
        if (i >= m) break;
        float *cr = c + (size_t)i * ldc;
#pragma GCC unroll 4
        for (int v = 0; v < PNV; v++) {
            if (v >= nv) break;
            const __mmask16 mk = v < nv - 1 ? 0xffff : last;
            __m512 r = _mm512_mul_ps(al, s[i][v]);
            if (accumulate) r = _mm512_add_ps(r, _mm512_maskz_loadu_ps(mk, cr + v * VL));
            _mm512_mask_storeu_ps(cr + v * VL, mk, r);
        }
    }
}

/* pairs_tile's micro-tiles, with VDPBF16PS or (fma_twin) the timing twin's FMAs */
static inline __attribute__((always_inline)) void
tiles_on(int m, int n, int k2, float alpha, const pair_word *a, ptrdiff_t a_rs, ptrdiff_t a_cs,
         const uint32_t *b, size_t ldb, float *c, size_t ldc, int accumulate, const int fma_twin)
{
    for (int i = 0; i < m; i += PMR)
        for (int j = 0; j < n; j += PNV * VL) {
            const int mm = m - i < PMR ? m - i : PMR;
            const int nn = n - j < PNV * VL ? n - j : PNV * VL, nv = (nn + VL - 1) / VL;
            const pair_word *ai = a + i * a_rs;
            float *cij = c + (size_t)i * ldc + j;
            const uint32_t *bj = b + j;
            switch (nv) {
            case 1: tile_nv(1, mm, nn, k2, alpha, ai, a_rs, a_cs, bj, ldb, cij, ldc, accumulate, fma_twin); break;
            case 2: tile_nv(2, mm, nn, k2, alpha, ai, a_rs, a_cs, bj, ldb, cij, ldc, accumulate, fma_twin); break;
            case 3: tile_nv(3, mm, nn, k2, alpha, ai, a_rs, a_cs, bj, ldb, cij, ldc, accumulate, fma_twin); break;
            default: tile_nv(4, mm, nn, k2, alpha, ai, a_rs, a_cs, bj, ldb, cij, ldc, accumulate, fma_twin); break;
            }
        }
}

/* The micro-tiles of one product, returning the VDPBF16PS they ran (a micro-tile runs
 * PMR rows, the last repeated, and its nv vectors) for the caller's span
 * (dot_counts.h): a span a call cost about 0.4% of a bench step (two time-stamp reads
 * each, 80,000 calls a thread), so two products run back to back share one. */
static uint64_t pairs_tile_run(int m, int n, int k2, float alpha, const pair_word *a,
                               ptrdiff_t a_rs, ptrdiff_t a_cs, const uint32_t *b, size_t ldb,
                               float *c, size_t ldc, int accumulate)
{
    if (dot_timing_on)
        tiles_on(m, n, k2, alpha, a, a_rs, a_cs, b, ldb, c, ldc, accumulate, 1);
    else
        tiles_on(m, n, k2, alpha, a, a_rs, a_cs, b, ldb, c, ldc, accumulate, 0);
    return (uint64_t)((m + PMR - 1) / PMR) * PMR * ((n + VL - 1) / VL) * k2;
}

/* One product in a span of its own */
static void pairs_tile(int m, int n, int k2, float alpha, const pair_word *a, ptrdiff_t a_rs,
                       ptrdiff_t a_cs, const uint32_t *b, size_t ldb, float *c, size_t ldc,
                       int accumulate)
{
    const uint64_t t0 = dot_counts_span_begin();
    dot_counts_span_end(t0, pairs_tile_run(m, n, k2, alpha, a, a_rs, a_cs, b, ldb, c, ldc,
                                           accumulate));
}

/* rows r < rows of src (lds apart), cols values each -> (cols + 1) / 2 words at
 * dst + r ldd: pairs along the row */
static void along(uint32_t *dst, size_t ldd, const float *src, size_t lds, int rows, int cols)
{
    for (int r = 0; r < rows; r++) {
        const float *x = src + (size_t)r * lds;
        uint32_t *o = dst + (size_t)r * ldd;
        for (int kk = 0; kk < cols; kk += 32) {
            const int n = cols - kk < 32 ? cols - kk : 32;
            const __m512 lo = _mm512_maskz_loadu_ps(lanes(n), x + kk);
            const __m512 hi = _mm512_maskz_loadu_ps(lanes(n > 16 ? n - 16 : 0), x + kk + 16);
            _mm512_mask_storeu_epi32(o + kk / 2, lanes((n + 1) / 2),
                                     (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
        }
    }
}

/* the same pairs stored transposed: word p of row r at dst[p ldd + r] */
static void along_transposed(uint32_t *dst, int ldd, const float *src, size_t lds, int rows,
                             int cols)
{
    for (int r0 = 0; r0 < rows; r0 += 16)
        bf16_pairs_along_k(dst + r0, ldd, rows - r0 < 16 ? rows - r0 : 16,
                           src + (size_t)r0 * lds, lds, rows - r0, cols);
}

/* rows 2 r2 and 2 r2 + 1 of src (the latter zero past `rows`), cols values each, paired
 * -> round16(cols) words at dst + r2 ldd */
static void across(uint32_t *dst, size_t ldd, const float *src, size_t lds, int rows, int cols)
{
    for (int r = 0; r < rows; r += 2)
        bf16_pairs_across_k(dst + (size_t)(r / 2) * ldd, round16(cols) / 16,
                            src + (size_t)r * lds, r + 1 < rows ? src + (size_t)(r + 1) * lds : NULL,
                            cols);
}

/* A head's q|k|v: FP32 (f) or BF16 storage (h, bf16_store.h), one of the two; element
 * `at` on. The stored values are already the pairs' bits, so their loaders convert
 * nothing. */
typedef struct {
    const float *f;
    const uint16_t *h;
} qkv_src;

static qkv_src src_at(qkv_src s, size_t at)
{
    return s.h ? (qkv_src){NULL, s.h + at} : (qkv_src){s.f + at, NULL};
}

static void along_src(uint32_t *dst, size_t ldd, qkv_src src, size_t lds, int rows, int cols)
{
    if (!src.h) {
        along(dst, ldd, src.f, lds, rows, cols);
        return;
    }
    for (int r = 0; r < rows; r++)
        for (int kk = 0; kk < cols; kk += 32) {
            const int n = cols - kk < 32 ? cols - kk : 32;
            _mm512_mask_storeu_epi32(dst + (size_t)r * ldd + kk / 2, lanes((n + 1) / 2),
                                     _mm512_maskz_loadu_epi16(lanes32(n), src.h + (size_t)r * lds + kk));
        }
}

static void along_transposed_src(uint32_t *dst, int ldd, qkv_src src, size_t lds, int rows,
                                 int cols)
{
    if (!src.h) {
        along_transposed(dst, ldd, src.f, lds, rows, cols);
        return;
    }
    for (int r0 = 0; r0 < rows; r0 += 16)
        bf16_pairs_along_k_stored(dst + r0, ldd, rows - r0 < 16 ? rows - r0 : 16,
                                  src.h + (size_t)r0 * lds, lds, rows - r0, cols);
}

static void across_src(uint32_t *dst, size_t ldd, qkv_src src, size_t lds, int rows, int cols)
{
    if (!src.h) {
        across(dst, ldd, src.f, lds, rows, cols);
        return;
    }
    for (int r = 0; r < rows; r += 2)
        bf16_pairs_across_k_stored(dst + (size_t)(r / 2) * ldd, round16(cols) / 16,
                                   src.h + (size_t)r * lds,
                                   r + 1 < rows ? src.h + (size_t)(r + 1) * lds : NULL, cols);
}

/* Q's pairs as the products' A, rows *rs words apart: in BF16 storage with an even hs
 * (the head's rows then start at a word) read where they are stored, as the linear
 * products read theirs; otherwise copied into qp, T rows of hs2 words. Zen 4, the
 * bench's shape (one layer, alternated passes of one run): the forward 0.01-0.05 ms
 * less than with the copy, the backward within 0.03. */
static const pair_word *q_pairs(uint32_t *qp, int hs2, qkv_src q, size_t ld, int T, int hs,
                                ptrdiff_t *rs)
{
    if (q.h && hs % 2 == 0 && ld % 2 == 0 && (uintptr_t)(const void *)q.h % 4 == 0) {
        *rs = (ptrdiff_t)(ld / 2);
        return (const pair_word *)(const void *)q.h;
    }
    along_src(qp, (size_t)hs2, q, ld, T, hs);
    *rs = hs2;
    return qp;
}

/* The scratch's parts, in words (the FP32 rows of S / P and dS in floats) */
typedef struct {
    int hs2, hsp, Tp, T2;
} dims;

static dims dims_of(int T, int hs)
{
    return (dims){(hs + 1) / 2, round16(hs), round16(T), (T + 1) / 2};
}

static size_t fwd_words(int T, int hs)
{
    const dims d = dims_of(T, hs);
    return (size_t)T * d.hs2 + (size_t)d.hs2 * d.Tp + (size_t)d.T2 * d.hsp +
           (size_t)PMR * d.T2 + (size_t)PMR * T + (size_t)PMR * hs;
}

static size_t bwd_words(int T, int hs)
{
    const dims d = dims_of(T, hs);
    return 2 * (size_t)T * d.hs2 + 2 * (size_t)d.hs2 * d.Tp + 3 * (size_t)d.T2 * d.hsp +
           (size_t)PAIR_ROWS * d.Tp + (size_t)PMR * d.T2 + 2 * (size_t)PAIR_ROWS * T;
}

size_t attention_pairs_scratch_floats(int T, int hs)
{
    const size_t f = fwd_words(T, hs), b = bwd_words(T, hs);
    return f > b ? f : b;
}

int attention_pairs_ready(void)
{
    const enum gemm_bf16_path g = gemm_bf16_path();
    return simd_get_path() == SIMD_AVX512 && cpu_isa_level() >= CPU_ISA_AVX512_BF16 &&
           (g == GEMM_BF16_AVX512 || g == GEMM_BF16_AMX);
}

/* The forward of one head from q|k|v in FP32 or BF16 storage, into out (FP32) or out16
 * (BF16 storage: each tile of rows stored through the scratch's last PMR x hs floats) */
static void fwd_head(float *out, uint16_t *out16, float *lse, qkv_src q, float *scratch,
                     int T, int C, int hs, attention_next next)
{
    const simd_kernels *kr = simd_kernels_get();
    const qkv_src k = src_at(q, (size_t)C), v = src_at(q, 2 * (size_t)C);
    const size_t ld = 3 * (size_t)C;
    const dims d = dims_of(T, hs);
    const float scale = 1.0f / sqrtf((float)hs);
    uint32_t *qp = (uint32_t *)scratch, *kt = qp + (size_t)T * d.hs2,
             *va = kt + (size_t)d.hs2 * d.Tp, *pp = va + (size_t)d.T2 * d.hsp;
    float *s = (float *)(pp + (size_t)PMR * d.T2), *ot = s + (size_t)PMR * T;
    ptrdiff_t q_rs;
    const pair_word *qa = q_pairs(qp, d.hs2, q, ld, T, hs, &q_rs);
    along_transposed_src(kt, d.Tp, k, ld, T, hs);
    across_src(va, d.hsp, v, ld, T, hs);
    for (int i0 = 0; i0 < T; i0 += PMR) {
        const int m = T - i0 < PMR ? T - i0 : PMR, keys = i0 + m;
        attention_next_rows(next, i0, m, C, hs);
        pairs_tile(m, keys, d.hs2, scale, qa + i0 * q_rs, q_rs, 1, kt, d.Tp, s,
                   (size_t)T, 0);
        for (int i = 0; i < m; i++)
            lse[i0 + i] = kr->softmax_row(s + (size_t)i * T, i0 + i + 1, keys);
        along(pp, d.T2, s, (size_t)T, m, keys);
        if (out) {
            pairs_tile(m, hs, (keys + 1) / 2, 1.0f, pp, d.T2, 1, va, d.hsp,
                       out + (size_t)i0 * C, (size_t)C, 0);
            continue;
        }
        pairs_tile(m, hs, (keys + 1) / 2, 1.0f, pp, d.T2, 1, va, d.hsp, ot, (size_t)hs, 0);
        bf16_store_rows(out16 + (size_t)i0 * C, (size_t)C, ot, (size_t)hs, (size_t)m,
                        (size_t)hs);
    }
}

void attention_pairs_fwd_head(float *out, float *lse, const float *q, float *scratch, int T,
                              int C, int hs)
{
    fwd_head(out, NULL, lse, (qkv_src){q, NULL}, scratch, T, C, hs,
             attention_next_none());
}

void attention_pairs_fwd_head_stored(uint16_t *out, float *lse, const uint16_t *q,
                                     float *scratch, int T, int C, int hs,
                                     attention_next next)
{
    fwd_head(NULL, out, lse, (qkv_src){NULL, q}, scratch, T, C, hs, next);
}

/* The backward's per-head operands in pairs (bwd_words' layout) */
typedef struct {
    uint32_t *qp, *op, *kt, *vt, *ka, *qa, *oa, *xp, *xd, *dsp;
    float *p, *d;
} bwd_parts;

static bwd_parts bwd_layout(float *scratch, int T, dims d)
{
    bwd_parts b;
    b.qp = (uint32_t *)scratch;
    b.op = b.qp + (size_t)T * d.hs2;
    b.kt = b.op + (size_t)T * d.hs2;
    b.vt = b.kt + (size_t)d.hs2 * d.Tp;
    b.ka = b.vt + (size_t)d.hs2 * d.Tp;
    b.qa = b.ka + (size_t)d.T2 * d.hsp;
    b.oa = b.qa + (size_t)d.T2 * d.hsp;
    b.xp = b.oa + (size_t)d.T2 * d.hsp;
    b.xd = b.xp + (size_t)(PAIR_ROWS / 2) * d.Tp;
    b.dsp = b.xd + (size_t)(PAIR_ROWS / 2) * d.Tp;
    b.p = (float *)(b.dsp + (size_t)PMR * d.T2);
    b.d = b.p + (size_t)PAIR_ROWS * T;
    return b;
}

/* The backward of one head from q|k|v in FP32 or BF16 storage */
static void bwd_head(float *dq, int dq_C, const float *dout, qkv_src q, const float *lse,
                     float *scratch, int T, int C, int hs, attention_next next)
{
    const simd_kernels *kr = simd_kernels_get();
    const qkv_src k = src_at(q, (size_t)C), v = src_at(q, 2 * (size_t)C);
    float *dk = dq + dq_C, *dv = dq + 2 * dq_C;
    const size_t ld = 3 * (size_t)C, ldd = 3 * (size_t)dq_C;
    const dims d = dims_of(T, hs);
    const float scale = 1.0f / sqrtf((float)hs);
    const bwd_parts b = bwd_layout(scratch, T, d);
    ptrdiff_t q_rs;
    const pair_word *qa = q_pairs(b.qp, d.hs2, q, ld, T, hs, &q_rs);
    along(b.op, d.hs2, dout, (size_t)C, T, hs);
    along_transposed_src(b.kt, d.Tp, k, ld, T, hs);
    along_transposed_src(b.vt, d.Tp, v, ld, T, hs);
    across_src(b.ka, d.hsp, k, ld, T, hs);
    across_src(b.qa, d.hsp, q, ld, T, hs);
    across(b.oa, d.hsp, dout, (size_t)C, T, hs);
    for (int r0 = 0; r0 < T; r0 += PAIR_ROWS) {
        const int r1 = r0 + PAIR_ROWS < T ? r0 + PAIR_ROWS : T;
        for (int i0 = r0; i0 < r1; i0 += PMR) {
            const int m = r1 - i0 < PMR ? r1 - i0 : PMR, keys = i0 + m;
            float *pb = b.p + (size_t)(i0 - r0) * T, *db = b.d + (size_t)(i0 - r0) * T;
            attention_next_rows(next, i0, m, C, hs);
            const uint64_t t0 = dot_counts_span_begin(); /* S and dP: one span */
            uint64_t dots = pairs_tile_run(m, keys, d.hs2, scale, qa + i0 * q_rs, q_rs, 1,
                                           b.kt, d.Tp, pb, (size_t)T, 0);
            dots += pairs_tile_run(m, keys, d.hs2, 1.0f, b.op + (size_t)i0 * d.hs2, d.hs2, 1,
                                   b.vt, d.Tp, db, (size_t)T, 0);
            dot_counts_span_end(t0, dots);
            for (int i = 0; i < m; i++) { /* rows zeroed up to r1, as attention_cpu.c */
                float *pr = pb + (size_t)i * T, *dr = db + (size_t)i * T;
                kr->softmax_row_lse(pr, i0 + i + 1, r1, lse[i0 + i]);
                kr->softmax_bwd_row(dr, pr, i0 + i + 1, r1);
            }
            along(b.dsp, d.T2, db, (size_t)T, m, keys);
            pairs_tile(m, hs, (keys + 1) / 2, scale, b.dsp, d.T2, 1, b.ka, d.hsp,
                       dq + (size_t)i0 * ldd, ldd, 0);
        }
        /* the block's P and dS, paired across its queries: P^T and dS^T as A */
        across(b.xp, d.Tp, b.p, (size_t)T, r1 - r0, r1);
        across(b.xd, d.Tp, b.d, (size_t)T, r1 - r0, r1);
        /* dV and dK of every key tile: one span for the block (nothing but the
         * micro-tiles runs in it; a span a tile was 2 x 43 time-stamp reads a block) */
        const uint64_t t0 = dot_counts_span_begin();
        uint64_t dots = 0;
        for (int j0 = 0; j0 < r1; j0 += PMR) {
            const int m = r1 - j0 < PMR ? r1 - j0 : PMR, q0 = j0 > r0 ? j0 : r0;
            const int pairs = (r1 - q0 + 1) / 2;
            const size_t at = (size_t)((q0 - r0) / 2) * d.Tp + (size_t)j0;
            const int add = j0 < r0; /* keys from r0 on meet their first queries here */
            dots += pairs_tile_run(m, hs, pairs, 1.0f, b.xp + at, 1, d.Tp,
                                   b.oa + (size_t)(q0 / 2) * d.hsp, d.hsp,
                                   dv + (size_t)j0 * ldd, ldd, add);
            dots += pairs_tile_run(m, hs, pairs, scale, b.xd + at, 1, d.Tp,
                                   b.qa + (size_t)(q0 / 2) * d.hsp, d.hsp,
                                   dk + (size_t)j0 * ldd, ldd, add);
        }
        dot_counts_span_end(t0, dots);
    }
}

void attention_pairs_bwd_head(float *dq, const float *dout, const float *q,
                              const float *lse, float *scratch, int T, int C, int hs)
{
    bwd_head(dq, C, dout, (qkv_src){q, NULL}, lse, scratch, T, C, hs,
             attention_next_none());
}

void attention_pairs_bwd_head_stored(float *dq, int dq_C, const float *dout,
                                     const uint16_t *q, const float *lse, float *scratch, int T,
                                     int C, int hs, attention_next next)
{
    bwd_head(dq, dq_C, dout, (qkv_src){NULL, q}, lse, scratch, T, C, hs, next);
}

#include "bf16_target_end.h"

#else /* no AVX512_BF16 in this build: attention_pairs_ready says 0, so never called */
#include <stdlib.h>

#include "util.h"

int attention_pairs_ready(void) { return 0; }
size_t attention_pairs_scratch_floats(int T, int hs)
{
    (void)T, (void)hs;
    return 0;
}
static void not_built(void)
{
    gt_error("internal: attention on BF16 pairs called in a build without AVX512_BF16");
    abort();
}
void attention_pairs_fwd_head(float *out, float *lse, const float *q, float *scratch, int T,
                              int C, int hs)
{
    (void)out, (void)lse, (void)q, (void)scratch, (void)T, (void)C, (void)hs;
    not_built();
}
void attention_pairs_bwd_head(float *dq, const float *dout, const float *q,
                              const float *lse, float *scratch, int T, int C, int hs)
{
    (void)dq, (void)dout, (void)q, (void)lse, (void)scratch, (void)T, (void)C, (void)hs;
    not_built();
}
void attention_pairs_fwd_head_stored(uint16_t *out, float *lse, const uint16_t *q,
                                     float *scratch, int T, int C, int hs,
                                     attention_next next)
{
    (void)out, (void)lse, (void)q, (void)scratch, (void)T, (void)C, (void)hs, (void)next;
    not_built();
}
void attention_pairs_bwd_head_stored(float *dq, int dq_C, const float *dout,
                                     const uint16_t *q, const float *lse, float *scratch, int T,
                                     int C, int hs, attention_next next)
{
    (void)dq, (void)dq_C, (void)dout, (void)q, (void)lse, (void)scratch, (void)T, (void)C;
    (void)hs, (void)next;
    not_built();
}
#endif
