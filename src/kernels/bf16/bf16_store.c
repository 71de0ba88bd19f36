/* bf16_store — see bf16_store.h. The vector loops where the CPU has AVX512_BF16, the
 * scalar rounding elsewhere and for the tails; both the same bits. */
#include "bf16_store.h"

#include <string.h>

#include "cpu_features.h" /* cpu_isa_level */
#include "simd.h"         /* GT_SIMD_X86_BF16 */

uint16_t bf16_store_one(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
    if ((u & 0x7f800000u) == 0) return (uint16_t)((u >> 16) & 0x8000u);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

uint16_t bf16_scale_pow2_one(uint16_t h, int shift)
{
    const int e = (h >> 7) & 0xff, ne = e + shift;
    if (e == 0 || e == 0xff) return h;
    return (uint16_t)(ne > 0 ? h + shift * 128 : h & 0x8000); /* the exponent moved, or a zero */
}

#if GT_SIMD_X86_BF16
#include "bf16_target_begin.h"
#include <immintrin.h>

static size_t store_avx512(uint16_t *dst, const float *src, size_t n)
{
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm256_storeu_si256((__m256i *)(dst + i),
                            (__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(src + i)));
    return i;
}

static size_t widen_avx512(float *dst, const uint16_t *src, size_t n)
{
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512i h = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(src + i)));
        _mm512_storeu_si512(dst + i, _mm512_slli_epi32(h, 16));
    }
    return i;
}
/* bf16_scale_pow2_one on 32 values a vector: the exponent field moved down by an add
 * (it stays above zero, so no borrow reaches the sign), else the sign alone; zeros,
 * denormals, infinities and NaNs as they are */
static size_t scale_pow2_avx512(uint16_t *h, size_t n, int shift)
{
    const __m512i sh = _mm512_set1_epi16((short)shift), low8 = _mm512_set1_epi16(0xff),
                  sign = _mm512_set1_epi16((short)0x8000), zero = _mm512_setzero_si512(),
                  step = _mm512_set1_epi16((short)(shift * 128));
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        const __m512i v = _mm512_loadu_si512(h + i),
                      e = _mm512_and_si512(_mm512_srli_epi16(v, 7), low8);
        const __mmask32 moved = _mm512_cmpgt_epi16_mask(_mm512_add_epi16(e, sh), zero),
                        kept = _mm512_cmpeq_epi16_mask(e, zero) | _mm512_cmpeq_epi16_mask(e, low8);
        __m512i r = _mm512_mask_add_epi16(_mm512_and_si512(v, sign), moved, v, step);
        r = _mm512_mask_mov_epi16(r, kept, v);
        _mm512_storeu_si512(h + i, r);
    }
    return i;
}
#include "bf16_target_end.h"

/* 1 when the vector loops may run (cpu_isa_level is cached) */
static int vector_ok(void) { return cpu_isa_level() >= CPU_ISA_AVX512_BF16; }
#endif

void bf16_store_rows(uint16_t *dst, size_t ldd, const float *src, size_t lds, size_t rows,
                     size_t cols)
{
#if GT_SIMD_X86_BF16
    const int vector = vector_ok();
#endif
    for (size_t r = 0; r < rows; r++) {
        uint16_t *const d = dst + r * ldd;
        const float *const x = src + r * lds;
        size_t i = 0;
#if GT_SIMD_X86_BF16
        if (vector) i = store_avx512(d, x, cols);
#endif
        for (; i < cols; i++) d[i] = bf16_store_one(x[i]);
    }
}

void bf16_store(uint16_t *dst, const float *src, size_t n)
{
    bf16_store_rows(dst, n, src, n, 1, n);
}

void bf16_scale_pow2(uint16_t *h, size_t n, int shift)
{
    size_t i = 0;
#if GT_SIMD_X86_BF16
    if (vector_ok()) i = scale_pow2_avx512(h, n, shift);
#endif
    for (; i < n; i++) h[i] = bf16_scale_pow2_one(h[i], shift);
}

void bf16_widen(float *dst, const uint16_t *src, size_t n)
{
    size_t i = 0;
#if GT_SIMD_X86_BF16
    if (vector_ok()) i = widen_avx512(dst, src, n);
#endif
    for (; i < n; i++) dst[i] = bf16_widen_one(src[i]);
}
