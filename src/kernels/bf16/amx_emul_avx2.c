/* amx_emul_avx2 — the arithmetic of the emulated TDPBF16PS (amx_emul.c) eight columns
 * at a time with AVX2 and FMA, for CPUs without AVX-512 (amx_emul_avx512.c is the
 * faster twin where they have it): the same operations in the same order as the
 * model's scalar loop, so the same bits.
 *
 * Why it exists: on an AVX2 CPU the scalar loop left the AMX path's emulated twin at
 * minutes a step, which made its tests the slowest part of `make check` there and
 * `make bench` skip its prediction of the tile path. Why the bits match: as in
 * amx_emul_avx512.c, each step is one IEEE operation rounded once to nearest even (a
 * fused multiply-add per element, an add), the same in a lane as in fmaf, and DAZ/FTZ
 * use the same test (a zero exponent field gives a zero of x's sign); an operand
 * holding a NaN makes this loop decline, so the scalar one runs (NaN payloads may
 * depend on operand order). tests/test_amx_emul compares it with the scalar loop. */
#include "amx_emul.h"
#include "simd.h" /* GT_SIMD_X86 */

#if GT_SIMD_X86
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma")
#endif

#include <immintrin.h>

/* DAZ / FTZ: a lane whose exponent field is zero (a denormal or a zero) keeps only its
 * sign bit */
static inline __m256 flush8(__m256 x)
{
    const __m256i bits = _mm256_castps_si256(x);
    const __m256i tiny = _mm256_cmpeq_epi32(
        _mm256_and_si256(bits, _mm256_set1_epi32(0x7f800000)), _mm256_setzero_si256());
    const __m256i sign = _mm256_and_si256(bits, _mm256_set1_epi32(INT32_MIN));
    return _mm256_castsi256_ps(_mm256_blendv_epi8(bits, sign, tiny));
}

/* lanes below n set (n <= 8; n <= 0: none) */
static inline __m256i lanes_below(int n)
{
    const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), idx);
}

/* eight BF16 pairs of a row as two flushed FP32 vectors, even (low element of each
 * pair) and odd, zeros in the lanes not in `use`; returns whether a used lane is NaN */
static inline int split8(const uint8_t *row, __m256i use, __m256 *even, __m256 *odd)
{
    const __m256i p = _mm256_and_si256(_mm256_loadu_si256((const __m256i *)row), use);
    *even = flush8(_mm256_castsi256_ps(_mm256_slli_epi32(p, 16)));
    *odd = flush8(_mm256_castsi256_ps(_mm256_and_si256(p, _mm256_set1_epi32(-65536))));
    const __m256 un = _mm256_or_ps(_mm256_cmp_ps(*even, *even, _CMP_UNORD_Q),
                                   _mm256_cmp_ps(*odd, *odd, _CMP_UNORD_Q));
    return _mm256_movemask_ps(un) != 0;
}

int amx_emul_dp_avx2(uint8_t (*d)[AMX_MAX_COLSB], const uint8_t (*a)[AMX_MAX_COLSB],
                     const uint8_t (*b)[AMX_MAX_COLSB], int M, int N, int K)
{
    /* A's pairs as FP32 by row; B's rows as halves of eight columns (the second only
     * where N > 8) */
    float ae[AMX_MAX_ROWS][16], ao[AMX_MAX_ROWS][16];
    __m256 be[AMX_MAX_ROWS][2], bo[AMX_MAX_ROWS][2];
    const __m256i cols[2] = {lanes_below(N), lanes_below(N - 8)};
    const int halves = N > 8 ? 2 : 1;
    int nan = 0;
    for (int k = 0; k < K; k++)
        for (int h = 0; h < halves; h++)
            nan |= split8(b[k] + 32 * h, cols[h], &be[k][h], &bo[k][h]);
    const __m256i pairs[2] = {lanes_below(K), lanes_below(K - 8)};
    for (int m = 0; m < M; m++) {
        for (int h = 0; h < 2; h++) {
            __m256 e, o;
            nan |= split8(a[m] + 32 * h, pairs[h], &e, &o);
            _mm256_storeu_ps(&ae[m][8 * h], e);
            _mm256_storeu_ps(&ao[m][8 * h], o);
            const __m256i c = _mm256_and_si256(
                _mm256_loadu_si256((const __m256i *)(d[m] + 32 * h)), cols[h]);
            const __m256 cf = _mm256_castsi256_ps(c);
            nan |= _mm256_movemask_ps(_mm256_cmp_ps(cf, cf, _CMP_UNORD_Q)) != 0;
        }
    }
    if (nan) return 0;
    /* four rows at a time, both halves: up to sixteen independent chains */
    enum { R = 4 };
    for (int m0 = 0; m0 < M; m0 += R) {
        const int rows = M - m0 < R ? M - m0 : R;
        for (int h = 0; h < halves; h++) {
            __m256 e[R], o[R];
            for (int j = 0; j < R; j++) e[j] = o[j] = _mm256_setzero_ps();
            for (int k = 0; k < K; k++)
                for (int j = 0; j < rows; j++) {
                    const __m256 x = _mm256_set1_ps(ae[m0 + j][k]);
                    const __m256 y = _mm256_set1_ps(ao[m0 + j][k]);
                    e[j] = flush8(_mm256_fmadd_ps(x, be[k][h], e[j]));
                    o[j] = flush8(_mm256_fmadd_ps(y, bo[k][h], o[j]));
                }
            for (int j = 0; j < rows; j++) {
                uint8_t *row = d[m0 + j] + 32 * h;
                const __m256 c = flush8(_mm256_castsi256_ps(
                    _mm256_and_si256(_mm256_loadu_si256((const __m256i *)row), cols[h])));
                const __m256 s = flush8(_mm256_add_ps(c, flush8(_mm256_add_ps(e[j], o[j]))));
                /* zeros past N, as the scalar loop leaves them */
                _mm256_storeu_si256((__m256i *)row,
                                    _mm256_and_si256(_mm256_castps_si256(s), cols[h]));
            }
        }
        if (halves == 1) /* the second half is all past N: zeros */
            for (int j = 0; j < rows; j++)
                _mm256_storeu_si256((__m256i *)(d[m0 + j] + 32), _mm256_setzero_si256());
    }
    return 1;
}

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#endif /* GT_SIMD_X86 */
