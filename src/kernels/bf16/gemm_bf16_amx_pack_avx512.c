/* gemm_bf16_amx_pack_avx512 — the tile packing of gemm_bf16_amx_pack.c with AVX512_BF16
 * conversions, which every CPU with AMX-BF16 has, and its write-back of the accumulator
 * tiles into C a tile row (16 values) at a time. The portable packing converts one
 * value at a time (1-2 ns a value), about as long as a tile unit takes for the
 * products of a packed value at the model's smaller widths; here a tile of 16 lines x
 * 16 pairs is converted a vector at a time, turned by one 16 x 16 transpose where the
 * memory order is not the tile's.
 *
 * Writes the same bits as the portable packing (tests/test_gemm_bf16 compares them on
 * every CPU with AVX512_BF16), including ties, NaNs and denormals (made zero in both). */
#include "gemm_bf16_amx.h"
#include "simd.h" /* GT_SIMD_X86_BF16 */

#if GT_SIMD_X86_BF16
#include "bf16_target_begin.h" /* AVX512_BF16 from here on */

#include <immintrin.h>
#include <string.h>

#include "bf16_x86.h" /* lanes, pairs_of, transpose16 */

enum { T = GEMM_BF16_AMX_TILE };

/* v[l] = the 16 pairs of line l (nl real lines) from a source with the depth
 * contiguous: x is line 0 at the chunk's first depth, kr (<= 32) depth values there */
static void lines_of_pairs(__m512i v[16], const float *x, size_t ld, int nl, int kr)
{
    const __mmask16 m0 = lanes(kr), m1 = lanes(kr > 16 ? kr - 16 : 0);
    for (int l = 0; l < 16; l++) {
        const float *r = x + (size_t)l * ld;
        v[l] = l < nl ? (__m512i)_mm512_cvtne2ps_pbh(_mm512_maskz_loadu_ps(m1, r + 16),
                                                     _mm512_maskz_loadu_ps(m0, r))
                      : _mm512_setzero_si512();
    }
}

/* v[p] = pair p of the 16 lines (nl real) from a source with the lines contiguous: x
 * is depth 0 of the chunk at line 0, kr (<= 32) depth values; sum (or NULL) += each
 * depth value of a line in depth order, one rounded add each (the row sums) */
static void pairs_of_lines(__m512i v[16], const float *x, size_t ld, int nl, int kr,
                           __m512 *sum)
{
    const __mmask16 m = lanes(nl);
    const __m512 zero = _mm512_setzero_ps();
    for (int p = 0; p < 16; p++) {
        const int k = 2 * p;
        const __m512 x0 = k < kr ? _mm512_maskz_loadu_ps(m, x + (size_t)k * ld) : zero;
        const __m512 x1 = k + 1 < kr ? _mm512_maskz_loadu_ps(m, x + (size_t)(k + 1) * ld) : zero;
        if (sum && k < kr) *sum = _mm512_add_ps(*sum, x0);
        if (sum && k + 1 < kr) *sum = _mm512_add_ps(*sum, x1);
        v[p] = pairs_of(x0, x1);
    }
}

/* The same two from BF16 storage (bf16_store.h): the stored values are the bits */
static void lines_of_pairs_stored(__m512i v[16], const uint16_t *x, size_t ld, int nl, int kr)
{
    for (int l = 0; l < 16; l++)
        v[l] = l < nl ? _mm512_maskz_loadu_epi16(lanes32(kr), x + (size_t)l * ld)
                      : _mm512_setzero_si512();
}

static void pairs_of_lines_stored(__m512i v[16], const uint16_t *x, size_t ld, int nl, int kr,
                                  __m512 *sum)
{
    const __m512i high = _mm512_set1_epi32((int)0xffff0000u);
    for (int p = 0; p < 16; p++) {
        const int k = 2 * p;
        v[p] = k < kr ? bf16_pairs_of_stored(x + (size_t)k * ld,
                                             k + 1 < kr ? x + (size_t)(k + 1) * ld : NULL, nl)
                      : _mm512_setzero_si512();
        if (sum && k < kr) { /* the pair's halves widened: line values k, then k + 1 */
            *sum = _mm512_add_ps(*sum, _mm512_castsi512_ps(_mm512_slli_epi32(v[p], 16)));
            if (k + 1 < kr)
                *sum = _mm512_add_ps(*sum, _mm512_castsi512_ps(_mm512_and_si512(v[p], high)));
        }
    }
}

/* nlines lines of kc depth into `tiles` tile rows of nq tiles each (the tiles past
 * the lines are zeros). depth_contiguous: where the source keeps the depth;
 * rows_are_lines: A tiles (a tile row is a line) rather than B tiles (a row is a pair).
 * sums (FP32 lines contiguous only, else NULL): sums[l] += line l's values in depth
 * order, while they are loaded for the packing. */
static void pack_tiles(uint32_t *out, int tiles, int nq, const void *src, size_t ld,
                       int nlines, int kc, int depth_contiguous, int rows_are_lines,
                       int stored, float *sums, int stream)
{
    const float *x = src;
    const uint16_t *h = src; /* stored: the source holds BF16 values */
    __m512i v[16];
    const int groups = (nlines + 15) / 16;
    for (int g = 0; g < groups; g++) {
        const int nl = nlines - 16 * g < 16 ? nlines - 16 * g : 16;
        __m512 sum = sums ? _mm512_maskz_loadu_ps(lanes(nl), sums + 16 * g) : _mm512_setzero_ps();
        for (int q = 0; q < nq; q++) {
            const int kr = kc - 32 * q < 32 ? kc - 32 * q : 32;
            const size_t at = depth_contiguous ? (size_t)(16 * g) * ld + 32 * q
                                               : (size_t)(32 * q) * ld + 16 * g;
            if (stored && depth_contiguous)
                lines_of_pairs_stored(v, h + at, ld, nl, kr);
            else if (stored)
                pairs_of_lines_stored(v, h + at, ld, nl, kr, sums ? &sum : NULL);
            else if (depth_contiguous)
                lines_of_pairs(v, x + at, ld, nl, kr);
            else
                pairs_of_lines(v, x + at, ld, nl, kr, sums ? &sum : NULL);
            if (depth_contiguous != rows_are_lines) transpose16(v);
            uint32_t *tile = out + ((size_t)g * nq + q) * T;
            if (stream) /* a copy read a step later: no read for ownership, no eviction */
                for (int r = 0; r < 16; r++) _mm512_stream_si512((void *)(tile + 16 * r), v[r]);
            else
                for (int r = 0; r < 16; r++) _mm512_storeu_si512(tile + 16 * r, v[r]);
        }
        if (sums) _mm512_mask_storeu_ps(sums + 16 * g, lanes(nl), sum);
    }
    if (tiles > groups)
        memset(out + (size_t)groups * nq * T, 0, (size_t)(tiles - groups) * nq * T * sizeof *out);
}

/* element `off` of an operand in BF16 storage, passed as the float pointer */
static const void *stored_at(const float *x, size_t off)
{
    return (const uint16_t *)(const void *)x + off;
}

void gemm_bf16_amx_pack_a_avx512(uint32_t *ap, int transa, const float *A, int lda, int m0,
                                 int mc, int mtiles, int k0, int kc, float *sums)
{
    const int nq = (kc + 31) / 32;
    if (transa == GEMM_BF16_STORED)
        pack_tiles(ap, mtiles, nq, stored_at(A, (size_t)m0 * lda + k0), (size_t)lda, mc, kc, 1,
                   1, 1, NULL, 0);
    else if (transa == GEMM_BF16_STORED_T)
        pack_tiles(ap, mtiles, nq, stored_at(A, (size_t)k0 * lda + m0), (size_t)lda, mc, kc, 0,
                   1, 1, sums ? sums + m0 : NULL, 0);
    else if (!transa)
        pack_tiles(ap, mtiles, nq, A + (size_t)m0 * lda + k0, (size_t)lda, mc, kc, 1, 1, 0, NULL,
                   0);
    else
        pack_tiles(ap, mtiles, nq, A + (size_t)k0 * lda + m0, (size_t)lda, mc, kc, 0, 1, 0,
                   sums ? sums + m0 : NULL, 0);
}

static void pack_b(uint32_t *bp, int transb, const float *B, int ldb, int n0, int nc,
                   int ntiles, int k0, int kc, int stream)
{
    const int nq = (kc + 31) / 32;
    if (transb == GEMM_BF16_STORED)
        pack_tiles(bp, ntiles, nq, stored_at(B, (size_t)k0 * ldb + n0), (size_t)ldb, nc, kc, 0,
                   0, 1, NULL, stream);
    else if (transb == GEMM_BF16_STORED_T)
        pack_tiles(bp, ntiles, nq, stored_at(B, (size_t)n0 * ldb + k0), (size_t)ldb, nc, kc, 1,
                   0, 1, NULL, stream);
    else if (transb)
        pack_tiles(bp, ntiles, nq, B + (size_t)n0 * ldb + k0, (size_t)ldb, nc, kc, 1, 0, 0, NULL,
                   stream);
    else
        pack_tiles(bp, ntiles, nq, B + (size_t)k0 * ldb + n0, (size_t)ldb, nc, kc, 0, 0, 0, NULL,
                   stream);
}

void gemm_bf16_amx_pack_b_avx512(uint32_t *bp, int transb, const float *B, int ldb, int n0,
                                 int nc, int ntiles, int k0, int kc)
{
    pack_b(bp, transb, B, ldb, n0, nc, ntiles, k0, kc, 0);
}

void gemm_bf16_amx_pack_b_streamed_avx512(uint32_t *bp, int transb, const float *B, int ldb,
                                          int n0, int nc, int ntiles, int k0, int kc)
{
    pack_b(bp, transb, B, ldb, n0, nc, ntiles, k0, kc, 1);
}

void gemm_bf16_amx_pack_b_pairs_avx512(uint32_t *bp, int transb, const float *B, int ldb,
                                       int n0, int nc, int k0, int kc, int p0, int p1,
                                       int stream)
{
    const int nq = (kc + 31) / 32, ntiles = 2 * ((nc + 31) / 32);
    const __m512i zero = _mm512_setzero_si512();
    for (int p = p0; p < p1; p++) {
        const int k = 2 * p;
        const size_t r0 = (size_t)(k0 + k) * ldb + n0, r1 = r0 + (size_t)ldb;
        const int two = k + 1 < kc;
        uint32_t *row = bp + (size_t)(p >> 4) * T + (size_t)(p & 15) * 16; /* tile j = 0 */
        for (int j = 0; j < ntiles; j++) {
            const int n = nc - 16 * j;
            __m512i v = zero;
            if (n > 0 && k < kc) {
                if (transb == GEMM_BF16_STORED) {
                    const uint16_t *h = (const uint16_t *)(const void *)B;
                    v = bf16_pairs_of_stored(h + r0 + 16 * j, two ? h + r1 + 16 * j : NULL, n);
                } else {
                    const __mmask16 m = lanes(n);
                    v = pairs_of(_mm512_maskz_loadu_ps(m, B + r0 + 16 * j),
                                 two ? _mm512_maskz_loadu_ps(m, B + r1 + 16 * j)
                                     : _mm512_setzero_ps());
                }
            }
            if (stream) /* a copy read a step later (bp 64-byte aligned) */
                _mm512_stream_si512((void *)(row + (size_t)j * nq * T), v);
            else
                _mm512_storeu_si512(row + (size_t)j * nq * T, v);
        }
    }
}

void gemm_bf16_amx_stream_fence(void)
{
    _mm_sfence(); /* streamed stores are weakly ordered: they land before what follows */
}

void gemm_bf16_amx_write_c_avx512(const float *ct, float *c, int ldc, int mr, int nr,
                                  float alpha, float beta)
{
    const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
    for (int r = 0; r < mr; r++) {
        const float *s = ct + (size_t)(r >> 4) * 2 * T + (size_t)(r & 15) * 16;
        float *cr = c + (size_t)r * ldc;
        for (int h = 0; 16 * h < nr; h++) {
            const __mmask16 m = lanes(nr - 16 * h);
            __m512 v = _mm512_mul_ps(va, _mm512_loadu_ps(s + (size_t)h * T));
            if (beta != 0.0f) v = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m, cr + 16 * h), v);
            _mm512_mask_storeu_ps(cr + 16 * h, m, v);
        }
    }
}

void gemm_bf16_amx_stream_rows_avx512(const float *src, int lds, float *dst, int ldd, int rows,
                                      int cols)
{
    for (int r = 0; r < rows; r++) {
        const float *s = src + (size_t)r * lds;
        float *d = dst + (size_t)r * ldd;
        int j = 0;
        /* up to the first 64-byte boundary plainly, whole lines streamed, the rest plainly */
        for (; j < cols && ((uintptr_t)(d + j) & 63) != 0; j++) d[j] = s[j];
        for (; j + 16 <= cols; j += 16) _mm512_stream_ps(d + j, _mm512_loadu_ps(s + j));
        for (; j < cols; j++) d[j] = s[j];
    }
}

#include "bf16_target_end.h"
#endif /* GT_SIMD_X86_BF16 */
