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

void bf16_scale_pow2(uint16_t *h, size_t n, int shift)
{
#pragma omp simd /* branch-free, so it vectorizes */
    for (size_t i = 0; i < n; i++) {
        const int v = h[i], e = (v >> 7) & 0xff, ne = e + shift;
        const int moved = ne > 0 ? (v & 0x807f) | (ne << 7) : v & 0x8000;
        h[i] = (uint16_t)(e == 0 || e == 0xff ? v : moved);
    }
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
#include "bf16_target_end.h"

/* 1 when the vector loops may run (cpu_isa_level is cached) */
static int vector_ok(void) { return cpu_isa_level() >= CPU_ISA_AVX512_BF16; }
#endif

void bf16_store(uint16_t *dst, const float *src, size_t n)
{
    size_t i = 0;
#if GT_SIMD_X86_BF16
    if (vector_ok()) i = store_avx512(dst, src, n);
#endif
    for (; i < n; i++) dst[i] = bf16_store_one(src[i]);
}

void bf16_widen(float *dst, const uint16_t *src, size_t n)
{
    size_t i = 0;
#if GT_SIMD_X86_BF16
    if (vector_ok()) i = widen_avx512(dst, src, n);
#endif
    for (; i < n; i++) dst[i] = bf16_widen_one(src[i]);
}
