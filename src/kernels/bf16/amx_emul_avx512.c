/* amx_emul_avx512 — the arithmetic of the emulated TDPBF16PS (amx_emul.c) sixteen
 * columns at a time with AVX-512: the same operations in the same order as the model's
 * scalar loop, so the same bits.
 *
 * Why it exists: the scalar loop takes about 45 us a TDPBF16PS (8192 fmaf calls), so
 * one training step of the bench's model (about 9 million of them) took minutes on the
 * emulated path and its tile time swamped the rest of the step; this loop takes a few
 * hundredths of that, which lets `make bench` run that path and measure the step
 * around the tiles.
 *
 * Why the bits match: every operation of the SDM's pseudo-code (a fused multiply-add
 * per element, an add, DAZ on inputs and FTZ on results) is an IEEE operation rounded
 * once, to nearest even, the same in a vector lane as in fmaf; the flushes are done
 * by the same test (|x| < FLT_MIN gives a zero of x's sign). Only NaN payloads could
 * differ (which NaN operand an FMA passes on depends on the instruction's operand
 * order), so where an operand holds a NaN this loop declines and the scalar one runs;
 * without NaN inputs the only NaN that arises is the default one, whose bits are the
 * same whichever operand carries it. tests/test_amx_emul compares the two. */
#include "amx_emul.h"
#include "simd.h" /* GT_SIMD_X86 */

#if GT_SIMD_X86
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f")
#endif

#include <immintrin.h>

static inline __mmask16 first(int n) { return n >= 16 ? 0xffff : (__mmask16)((1u << n) - 1u); }

/* DAZ / FTZ: a lane with |x| < FLT_MIN, that is with a zero exponent field (a denormal
 * or a zero), becomes a zero of its sign. Two instructions, on the FMA chain's path. */
static inline __m512 flush16(__m512 x)
{
    const __m512i bits = _mm512_castps_si512(x);
    const __mmask16 tiny = _mm512_testn_epi32_mask(bits, _mm512_set1_epi32(0x7f800000));
    return _mm512_castsi512_ps(
        _mm512_mask_and_epi32(bits, tiny, bits, _mm512_set1_epi32(INT32_MIN)));
}

/* The 16 BF16 pairs of a tile row as two FP32 vectors, flushed: even (the low element
 * of each pair) and odd; nan: the lanes (of `use`) that hold a NaN, or-ed in. */
static inline void split(const uint8_t *row, __mmask16 use, __m512 *even, __m512 *odd,
                         __mmask16 *nan)
{
    const __m512i p = _mm512_loadu_si512(row);
    *even = flush16(_mm512_castsi512_ps(_mm512_slli_epi32(p, 16)));
    *odd = flush16(_mm512_castsi512_ps(_mm512_and_si512(p, _mm512_set1_epi32(-65536))));
    *nan |= _mm512_mask_cmp_ps_mask(use, *even, *even, _CMP_UNORD_Q) |
            _mm512_mask_cmp_ps_mask(use, *odd, *odd, _CMP_UNORD_Q);
}

int amx_emul_dp_avx512(uint8_t (*d)[AMX_MAX_COLSB], const uint8_t (*a)[AMX_MAX_COLSB],
                       const uint8_t (*b)[AMX_MAX_COLSB], int M, int N, int K)
{
    /* A's pairs as FP32, by row (rows past M up to a multiple of R are zeros, computed
     * and never stored); B's rows as vectors */
    enum { R = 8 };
    float ae[AMX_MAX_ROWS][16], ao[AMX_MAX_ROWS][16];
    __m512 be[AMX_MAX_ROWS], bo[AMX_MAX_ROWS];
    const __mmask16 ncols = first(N);
    __mmask16 nan = 0;
    for (int k = 0; k < K; k++) split(b[k], ncols, &be[k], &bo[k], &nan);
    for (int m = 0; m < AMX_MAX_ROWS; m++) {
        __m512 e = _mm512_setzero_ps(), o = e;
        if (m < M) split(a[m], first(K), &e, &o, &nan);
        _mm512_storeu_ps(ae[m], e);
        _mm512_storeu_ps(ao[m], o);
        if (m < M) {
            const __m512 c = _mm512_maskz_loadu_ps(ncols, d[m]);
            nan |= _mm512_cmp_ps_mask(c, c, _CMP_UNORD_Q);
        }
    }
    if (nan) return 0;
    /* eight rows at a time: sixteen independent chains hide the latency of each
     * chain's multiply-add and flush */
    for (int m0 = 0; m0 < M; m0 += R) {
        __m512 e[R], o[R];
        for (int j = 0; j < R; j++) e[j] = o[j] = _mm512_setzero_ps();
        for (int k = 0; k < K; k++)
            for (int j = 0; j < R; j++) {
                e[j] = flush16(_mm512_fmadd_ps(_mm512_set1_ps(ae[m0 + j][k]), be[k], e[j]));
                o[j] = flush16(_mm512_fmadd_ps(_mm512_set1_ps(ao[m0 + j][k]), bo[k], o[j]));
            }
        for (int j = 0; j < R && m0 + j < M; j++) {
            const __m512 c = flush16(_mm512_maskz_loadu_ps(ncols, d[m0 + j]));
            const __m512 s = flush16(_mm512_add_ps(c, flush16(_mm512_add_ps(e[j], o[j]))));
            _mm512_storeu_ps(d[m0 + j], _mm512_maskz_mov_ps(ncols, s)); /* zeros past N */
        }
    }
    return 1;
}

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#endif /* GT_SIMD_X86 */
