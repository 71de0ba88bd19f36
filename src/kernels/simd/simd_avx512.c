/* simd_avx512 — simd_x86.h compiled for 16 lanes: AVX-512 F, BW, DQ and VL
 * (CPU_ISA_AVX512); and at its end simd.h's one-pass epilogues of the BF16 products,
 * which take AVX512_BF16 too. */
#define GT_SIMD_MODULE /* may include simd_x86.h */
#include "simd.h"

#if GT_SIMD_X86
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512dq,avx512vl,fma,f16c")
#endif

#include <immintrin.h>
#include <math.h>
#include <string.h>

typedef __m512 vf;
typedef __m512i vi;
typedef __m512d vd;
typedef __mmask16 vmask; /* a bit per lane */
#define VL 16
#define SIMD_FN(name) name##_avx512
#define SIMD_TABLE simd_kernels_avx512
#define SIMD_NAME "avx512"

#define vload(p) _mm512_loadu_ps(p)
#define vstore(p, v) _mm512_storeu_ps(p, v)
#define vset1(x) _mm512_set1_ps(x)
#define vzero() _mm512_setzero_ps()
#define vadd _mm512_add_ps
#define vsub _mm512_sub_ps
#define vmul _mm512_mul_ps
#define vdiv _mm512_div_ps
#define vmin _mm512_min_ps
#define vmax _mm512_max_ps
#define vsqrt _mm512_sqrt_ps
#define vfmadd _mm512_fmadd_ps
#define vfnmadd _mm512_fnmadd_ps
#define vround(x) _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
#define vpow2i(n)                                                                       \
    _mm512_castsi512_ps(_mm512_slli_epi32(                                              \
        _mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23))
/* NLT / NGT unordered: a NaN compares true, so it is kept as in the AVX2 version */
#define vkeep_ge(x, lo, y) _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(x, lo, _CMP_NLT_UQ), y)
#define vkeep_le(x, hi, y)                                                              \
    _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(x, _mm512_set1_ps(hi), _CMP_NGT_UQ), y)
#define vcast_i _mm512_castps_si512
#define vcast_f _mm512_castsi512_ps
#define vi_set1 _mm512_set1_epi32
#define vi_add _mm512_add_epi32
#define vi_and _mm512_and_si512
#define vi_or _mm512_or_si512
#define vi_srli _mm512_srli_epi32
/* a mask register stands in for the all-ones lanes of AVX2 */
#define vi_gt(a, b) _mm512_cmpgt_epi32_mask(a, b)
#define vi_blend(m, a, b) _mm512_mask_blend_epi32(m, a, b)
#define vdzero() _mm512_setzero_pd()
#define vhsum _mm512_reduce_add_ps
#define vhmax _mm512_reduce_max_ps
#define vdhsum _mm512_reduce_add_pd

/* The tails' masked loads and stores (simd_x86.h). Masked, not through a buffer on the
 * stack: a vector load of 16 scalar stores waits for them to retire (no store
 * forwarding), and a softmax row's three tails cost it 70 ns that way. */
static inline vf vload_part(const float *p, size_t n, float fill)
{
    return _mm512_mask_loadu_ps(_mm512_set1_ps(fill), (__mmask16)((1u << n) - 1u), p);
}

static inline void vstore_part(float *p, size_t n, vf v)
{
    _mm512_mask_storeu_ps(p, (__mmask16)((1u << n) - 1u), v);
}

static inline int vnonfinite(vf v)
{
    const __m512i e = _mm512_set1_epi32(0x7f800000);
    return _mm512_cmpeq_epi32_mask(_mm512_and_si512(_mm512_castps_si512(v), e), e) != 0;
}

static inline void vsumsq_acc(vd *a0, vd *a1, vf v)
{
    vd lo = _mm512_cvtps_pd(_mm512_castps512_ps256(v));
    vd hi = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
    *a0 = _mm512_fmadd_pd(lo, lo, *a0);
    *a1 = _mm512_fmadd_pd(hi, hi, *a1);
}

static inline vf vcvt_half_load(const uint16_t *p)
{
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p));
}

static inline void vcvt_half_store(uint16_t *p, vf v)
{
    _mm256_storeu_si256((__m256i *)p, _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
}

static inline void vbf16_store(uint16_t *p, vi u)
{
    _mm256_storeu_si256((__m256i *)p, _mm512_cvtepi32_epi16(u));
}

static inline vf vbf16_load(const uint16_t *p)
{
    __m512i u = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(u, 16));
}

#define TILE_MR 6
#define TILE_NV 4
typedef __mmask16 vlanes;
#define vlanes_first(n) ((__mmask16)(0xffffu >> (16 - (n))))
#define vload_lanes(p, m) _mm512_maskz_loadu_ps(m, p)
#define vstore_lanes(p, m, v) _mm512_mask_storeu_ps(p, m, v)

#include "simd_x86.h"

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

/* simd.h's one-pass epilogues of the BF16 products: this path's GELU with
 * VCVTNEPS2BF16's rounding, so only for a CPU with AVX512_BF16 (simd_epilogues_bf16_get).
 * A piece's tail goes through one masked vector, its lanes computed as every other's.
 * Its own target region after the path's (clang does not add a nested region's target
 * to the outer one's). */
#if GT_SIMD_X86_BF16
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,fma,f16c,avx512bf16"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512dq,avx512vl,fma,f16c,avx512bf16")
#endif

static inline __m256i bf16_rne_avx512(vf v) { return (__m256i)_mm512_cvtneps_pbh(v); }

static inline vf bf16_exact_avx512(__m256i h)
{
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

/* GELU and its slope of x from one sigmoid: gelu_fwd's and (gelu_bwd_fwd on dout = 1
 * into zeros: fma(slope, 1, 0) is the slope, never -0) the slope's bits */
static inline __m256i gelu_slope_bf16_one(vf x, __m256i *g16)
{
    vf x2;
    const vf s = gelu_s_avx512(x, &x2);
    *g16 = bf16_rne_avx512(vmul(x, s));
    return bf16_rne_avx512(gelu_grad_s_avx512(x, s, x2));
}

static inline __m256i gelu_only_bf16_one(vf x)
{
    vf x2;
    return bf16_rne_avx512(vmul(x, gelu_s_avx512(x, &x2)));
}

static void gelu_fwd_bf16_avx512(uint16_t *gelu16, uint16_t *slope16, const float *c,
                                 const float *bias, size_t n)
{
    size_t i = 0;
    __m256i g;
    for (; i + VL <= n; i += VL) {
        vf v = vload(c + i);
        if (bias) v = vadd(v, vload(bias + i));
        if (slope16) {
            _mm256_storeu_si256((__m256i *)(slope16 + i), gelu_slope_bf16_one(v, &g));
            _mm256_storeu_si256((__m256i *)(gelu16 + i), g);
        } else {
            _mm256_storeu_si256((__m256i *)(gelu16 + i), gelu_only_bf16_one(v));
        }
    }
    if (i < n) {
        const vlanes m = vlanes_first(n - i);
        vf v = vload_lanes(c + i, m);
        if (bias) v = vadd(v, vload_lanes(bias + i, m));
        if (slope16) {
            _mm256_mask_storeu_epi16(slope16 + i, m, gelu_slope_bf16_one(v, &g));
            _mm256_mask_storeu_epi16(gelu16 + i, m, g);
        } else {
            _mm256_mask_storeu_epi16(gelu16 + i, m, gelu_only_bf16_one(v));
        }
    }
}

/* One multiply a value: the forward already paid for the sigmoid */
static void gelu_bwd_bf16_avx512(uint16_t *dpre16, const uint16_t *slope16, const float *dout,
                                 size_t n)
{
    size_t i = 0;
    for (; i + VL <= n; i += VL) {
        const vf s = bf16_exact_avx512(_mm256_loadu_si256((const __m256i *)(slope16 + i)));
        _mm256_storeu_si256((__m256i *)(dpre16 + i), bf16_rne_avx512(vmul(s, vload(dout + i))));
    }
    if (i < n) {
        const vlanes m = vlanes_first(n - i);
        const vf s = bf16_exact_avx512(_mm256_maskz_loadu_epi16(m, slope16 + i));
        _mm256_mask_storeu_epi16(dpre16 + i, m,
                                 bf16_rne_avx512(vmul(s, vload_lanes(dout + i, m))));
    }
}

static void bias_store_bf16_avx512(uint16_t *out16, const float *c, const float *bias,
                                   size_t n)
{
    size_t i = 0;
    for (; i + VL <= n; i += VL) {
        vf v = vload(c + i);
        if (bias) v = vadd(v, vload(bias + i));
        _mm256_storeu_si256((__m256i *)(out16 + i), bf16_rne_avx512(v));
    }
    if (i < n) {
        const vlanes m = vlanes_first(n - i);
        vf v = vload_lanes(c + i, m);
        if (bias) v = vadd(v, vload_lanes(bias + i, m));
        _mm256_mask_storeu_epi16(out16 + i, m, bf16_rne_avx512(v));
    }
}

static void bias_residual_avx512(float *c, const float *bias, const float *residual, size_t n)
{
    size_t i = 0;
    for (; i + VL <= n; i += VL) {
        vf v = vload(c + i);
        if (bias) v = vadd(v, vload(bias + i));
        vstore(c + i, vadd(v, vload(residual + i)));
    }
    if (i < n) {
        const vlanes m = vlanes_first(n - i);
        vf v = vload_lanes(c + i, m);
        if (bias) v = vadd(v, vload_lanes(bias + i, m));
        vstore_lanes(c + i, m, vadd(v, vload_lanes(residual + i, m)));
    }
}

const simd_epilogues_bf16 simd_epilogues_bf16_avx512 = {
    .gelu_fwd = gelu_fwd_bf16_avx512,
    .gelu_bwd = gelu_bwd_bf16_avx512,
    .bias_store = bias_store_bf16_avx512,
    .bias_residual = bias_residual_avx512,
};

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#endif /* GT_SIMD_X86_BF16 */
#endif /* GT_SIMD_X86 */
