/* half — see half.h. */
#include "half.h"

#include <string.h>

#include "simd.h" /* defines: the array conversions of each SIMD path */

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define HALF_X86 1
#endif

static uint32_t float_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float bits_float(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

uint16_t half_from_float_scalar(float f)
{
    const uint32_t u = float_bits(f);
    const uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    const uint32_t exp = (u >> 23) & 0xffu, mant = u & 0x7fffffu;
    if (exp == 0xff) /* inf stays inf; NaN keeps its top payload bits, made quiet */
        return mant ? (uint16_t)(sign | 0x7e00u | (mant >> 13)) : (uint16_t)(sign | 0x7c00u);
    const int e = (int)exp - 127 + 15; /* the half exponent field, if normal */
    if (e >= 31) return (uint16_t)(sign | 0x7c00u);
    if (e <= 0) {
        /* Subnormal half (or zero): value = m * 2^-24 with m = full mantissa >> shift. */
        if (e < -10) return sign; /* below half the smallest subnormal: rounds to 0 */
        const uint32_t full = mant | 0x800000u;
        const int shift = 14 - e; /* 14..24 */
        uint32_t m = full >> shift;
        const uint32_t rest = full & ((1u << shift) - 1u), halfway = 1u << (shift - 1);
        if (rest > halfway || (rest == halfway && (m & 1u))) m++;
        return (uint16_t)(sign | m); /* m may carry into the exponent: still right */
    }
    uint32_t h = ((uint32_t)e << 10) | (mant >> 13);
    const uint32_t rest = mant & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) h++; /* may carry to inf: right */
    return (uint16_t)(sign | h);
}

float half_to_float_scalar(uint16_t h)
{
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    const uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
    if (exp == 0x1f) /* inf; NaN made quiet, as the F16C instruction does */
        return bits_float(sign | 0x7f800000u | (mant << 13) | (mant ? 0x400000u : 0));
    if (exp == 0) {
        /* zero or subnormal: mant * 2^-24, exact in float */
        float v = (float)mant * bits_float(0x33800000u); /* 2^-24 */
        return sign ? -v : v;
    }
    return bits_float(sign | ((exp - 15 + 127) << 23) | (mant << 13));
}

#ifdef HALF_X86
__attribute__((target("avx,f16c"))) static void add_f16c(uint16_t *restrict inout,
                                                         const uint16_t *restrict in, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 a = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(in + i)));
        __m256 b = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(inout + i)));
        _mm_storeu_si128((__m128i *)(inout + i),
                         _mm256_cvtps_ph(_mm256_add_ps(a, b), _MM_FROUND_TO_NEAREST_INT));
    }
    for (; i < n; i++)
        inout[i] = half_from_float_scalar(half_to_float_scalar(in[i]) +
                                          half_to_float_scalar(inout[i]));
}
#endif

static int allow_simd = 1;

void half_allow_simd(int allow) { allow_simd = allow != 0; }

static int use_f16c(void)
{
#ifdef HALF_X86
    return allow_simd && simd_get_path() != SIMD_PORTABLE;
#else
    return 0;
#endif
}

/* The array conversions: simd.h's loops (F16C 8 or 16 at a time), or its portable
 * ones, which call the scalar conversions above. */
static const simd_kernels *conv(void)
{
    return allow_simd ? simd_kernels_get() : &simd_kernels_portable;
}

const char *half_path_name(void) { return allow_simd ? conv()->name : "scalar"; }

void half_from_float(uint16_t *restrict dst, const float *restrict src, size_t n)
{
    conv()->half_from_float(dst, src, n);
}

void half_to_float(float *restrict dst, const uint16_t *restrict src, size_t n)
{
    conv()->half_to_float(dst, src, n);
}

void half_add(uint16_t *restrict inout, const uint16_t *restrict in, size_t n)
{
#ifdef HALF_X86
    if (use_f16c()) {
        add_f16c(inout, in, n);
        return;
    }
#endif
    for (size_t i = 0; i < n; i++)
        inout[i] = half_from_float_scalar(half_to_float_scalar(in[i]) +
                                          half_to_float_scalar(inout[i]));
}
