/* simd_avx2 — simd_x86.h compiled for 8 lanes: AVX2, FMA and F16C (CPU_ISA_AVX2). */
#define GT_SIMD_MODULE /* may include simd_x86.h */
#include "simd.h"

#if GT_SIMD_X86
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#endif

#include <immintrin.h>
#include <math.h>
#include <string.h>

typedef __m256 vf;
typedef __m256i vi;
typedef __m256d vd;
typedef __m256i vmask; /* all ones in the lanes that are true */
#define VL 8
#define SIMD_FN(name) name##_avx2
#define SIMD_TABLE simd_kernels_avx2
#define SIMD_NAME "avx2"

#define vload(p) _mm256_loadu_ps(p)
#define vstore(p, v) _mm256_storeu_ps(p, v)
#define vset1(x) _mm256_set1_ps(x)
#define vzero() _mm256_setzero_ps()
#define vadd _mm256_add_ps
#define vsub _mm256_sub_ps
#define vmul _mm256_mul_ps
#define vdiv _mm256_div_ps
#define vmin _mm256_min_ps
#define vmax _mm256_max_ps
#define vsqrt _mm256_sqrt_ps
#define vfmadd _mm256_fmadd_ps
#define vfnmadd _mm256_fnmadd_ps
#define vround(x) _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
#define vpow2i(n)                                                                       \
    _mm256_castsi256_ps(_mm256_slli_epi32(                                              \
        _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23))
#define vkeep_ge(x, lo, y) _mm256_andnot_ps(_mm256_cmp_ps(x, lo, _CMP_LT_OQ), y)
#define vkeep_le(x, hi, y) _mm256_andnot_ps(_mm256_cmp_ps(x, _mm256_set1_ps(hi), _CMP_GT_OQ), y)
#define vcast_i _mm256_castps_si256
#define vcast_f _mm256_castsi256_ps
#define vi_set1 _mm256_set1_epi32
#define vi_add _mm256_add_epi32
#define vi_and _mm256_and_si256
#define vi_or _mm256_or_si256
#define vi_srli _mm256_srli_epi32
#define vi_gt _mm256_cmpgt_epi32
#define vi_blend(m, a, b) _mm256_blendv_epi8(a, b, m)
#define vdzero() _mm256_setzero_pd()

/* The tails' masked loads and stores (simd_x86.h); as in simd_avx512.c, not through a
 * buffer on the stack. VMASKMOVPS suppresses faults in the lanes it leaves alone. */
static inline __m256i first_lanes(size_t n)
{
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

static inline vf vload_part(const float *p, size_t n, float fill)
{
    const __m256i m = first_lanes(n);
    return _mm256_blendv_ps(_mm256_set1_ps(fill), _mm256_maskload_ps(p, m), _mm256_castsi256_ps(m));
}

static inline void vstore_part(float *p, size_t n, vf v) { _mm256_maskstore_ps(p, first_lanes(n), v); }

static inline float vhsum(vf v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static inline float vhmax(vf v)
{
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static inline int vnonfinite(vf v)
{
    const __m256i e = _mm256_set1_epi32(0x7f800000);
    __m256i m = _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_castps_si256(v), e), e);
    return !_mm256_testz_si256(m, m);
}

static inline double vdhsum(vd v)
{
    __m128d s = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
    return _mm_cvtsd_f64(_mm_add_sd(s, _mm_unpackhi_pd(s, s)));
}

static inline void vsumsq_acc(vd *a0, vd *a1, vf v)
{
    vd lo = _mm256_cvtps_pd(_mm256_castps256_ps128(v));
    vd hi = _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));
    *a0 = _mm256_fmadd_pd(lo, lo, *a0);
    *a1 = _mm256_fmadd_pd(hi, hi, *a1);
}

static inline vf vcvt_half_load(const uint16_t *p)
{
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
}

static inline void vcvt_half_store(uint16_t *p, vf v)
{
    _mm_storeu_si128((__m128i *)p, _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
}

/* the low 16 bits of 8 lanes (each <= 0xffff, so the unsigned saturating pack keeps
 * them as they are) */
static inline void vbf16_store(uint16_t *p, vi u)
{
    __m128i packed = _mm_packus_epi32(_mm256_castsi256_si128(u), _mm256_extracti128_si256(u, 1));
    _mm_storeu_si128((__m128i *)p, packed);
}

static inline vf vbf16_load(const uint16_t *p)
{
    __m256i u = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(u, 16));
}

#define TILE_MR 6
#define TILE_NV 2
typedef __m256i vlanes; /* all ones in the lanes to load or store */
#define vlanes_first(n)                                                                 \
    _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7))
#define vload_lanes(p, m) _mm256_maskload_ps(p, m)
#define vstore_lanes(p, m, v) _mm256_maskstore_ps(p, m, v)

#include "simd_x86.h"

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#endif /* GT_SIMD_X86 */
