/* bf16_x86 — small AVX-512 helpers shared by the packing code of the BF16 products
 * (gemm_bf16_avx512.c, gemm_bf16_amx_pack_avx512.c, attention_pairs.c): masks for a
 * partial vector, pairs of rows rounded to BF16 (VCVTNEPS2BF16: nearest even; denormal
 * inputs become zero), a 16 x 16 transpose of 32-bit elements, and the two pair
 * layouts of VDPBF16PS's operands. Static inline; include it only where the target
 * avx512f,avx512bw,avx512bf16 is on (after the including file's pragma). */
#ifndef GT_BF16_X86_H
#define GT_BF16_X86_H

#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>

static inline __mmask16 lanes(int n) { return n >= 16 ? 0xffff : (__mmask16)((1u << n) - 1u); }

/* 16 pairs from two vectors: element i of x0 (row k) low, of x1 (row k + 1) high */
static inline __m512i pairs_of(__m512 x0, __m512 x1)
{
    __m512i lo = _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(x0));
    __m512i hi = _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(x1));
    return _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16));
}

/* Transposes 16 x 16 32-bit elements in place: v[c] lane r = old v[r] lane c. Two
 * rounds of unpacks within 128-bit lanes, then a 4 x 4 transpose of the lanes. */
static inline void transpose16(__m512i v[16])
{
    __m512i t[16], u[16];
    for (int i = 0; i < 16; i += 4) {
        t[i] = _mm512_unpacklo_epi32(v[i], v[i + 1]);
        t[i + 1] = _mm512_unpackhi_epi32(v[i], v[i + 1]);
        t[i + 2] = _mm512_unpacklo_epi32(v[i + 2], v[i + 3]);
        t[i + 3] = _mm512_unpackhi_epi32(v[i + 2], v[i + 3]);
        u[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
        u[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
        u[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
        u[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
    }
    /* u[4i + c], 128-bit lane L: rows 4i..4i+3 of column 4L + c */
    for (int c = 0; c < 4; c++) {
        __m512i b0 = _mm512_shuffle_i32x4(u[c], u[4 + c], 0x44);
        __m512i b1 = _mm512_shuffle_i32x4(u[c], u[4 + c], 0xee);
        __m512i b2 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0x44);
        __m512i b3 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0xee);
        v[c] = _mm512_shuffle_i32x4(b0, b2, 0x88);
        v[4 + c] = _mm512_shuffle_i32x4(b0, b2, 0xdd);
        v[8 + c] = _mm512_shuffle_i32x4(b1, b3, 0x88);
        v[12 + c] = _mm512_shuffle_i32x4(b1, b3, 0xdd);
    }
}

/* 16 words to out under mask m; stream: a whole vector to a 64-byte aligned out goes
 * past the caches (a weight copy read a step later: no read for ownership), anything
 * else is stored as usual. The caller fences (_mm_sfence) before others read it. */
static inline void bf16_store_words(uint32_t *out, __mmask16 m, __m512i v, int stream)
{
    if (stream && m == 0xffff && ((uintptr_t)out & 63) == 0)
        _mm512_stream_si512((void *)out, v);
    else
        _mm512_mask_storeu_epi32(out, m, v);
}

/* Pairs along rows stored with k contiguous: row r < nrows is x + r * ld, and its kc
 * values become kc2 pairs; pair j of row r goes to out[j * stride + r] for r < width
 * (rows from nrows on as zeros). 16 rows x 16 pairs at a time, turned by transpose16
 * so each store writes one j. stream: bf16_store_words'. */
static inline void bf16_pairs_along_k_to(uint32_t *out, int stride, int width, const float *x,
                                         size_t ld, int nrows, int kc, int stream)
{
    __m512i v[16];
    for (int kk = 0; kk < kc; kk += 32) {
        const int n = kc - kk < 32 ? kc - kk : 32;
        const __mmask16 m0 = lanes(n), m1 = lanes(n - 16 > 0 ? n - 16 : 0);
        for (int r = 0; r < 16; r++) {
            if (r < nrows) {
                const float *row = x + (size_t)r * ld + kk;
                v[r] = (__m512i)_mm512_cvtne2ps_pbh(_mm512_maskz_loadu_ps(m1, row + 16),
                                                    _mm512_maskz_loadu_ps(m0, row));
            } else {
                v[r] = _mm512_setzero_si512();
            }
        }
        transpose16(v);
        const int npairs = (n + 1) / 2;
        for (int j = 0; j < npairs; j++)
            bf16_store_words(out + (size_t)(kk / 2 + j) * stride, lanes(width), v[j], stream);
    }
}

static inline void bf16_pairs_along_k(uint32_t *out, int stride, int width, const float *x,
                                      size_t ld, int nrows, int kc)
{
    bf16_pairs_along_k_to(out, stride, width, x, ld, nrows, kc, 0);
}

/* Pairs across rows k, k+1 stored with the other index contiguous: `width` values of
 * each (the rest zero) to out[0 .. 16 * nvec). stream: bf16_store_words'. */
static inline void bf16_pairs_across_k_to(uint32_t *out, int nvec, const float *r0,
                                          const float *r1, int width, int stream)
{
    for (int v = 0; v < nvec; v++) {
        const int n = width - 16 * v;
        const __mmask16 m = lanes(n > 0 ? n : 0);
        __m512 x0 = _mm512_maskz_loadu_ps(m, r0 + 16 * v);
        __m512 x1 = r1 ? _mm512_maskz_loadu_ps(m, r1 + 16 * v) : _mm512_setzero_ps();
        bf16_store_words(out + 16 * v, 0xffff, pairs_of(x0, x1), stream);
    }
}

static inline void bf16_pairs_across_k(uint32_t *out, int nvec, const float *r0,
                                       const float *r1, int width)
{
    bf16_pairs_across_k_to(out, nvec, r0, r1, width, 0);
}

/* The same two layouts from BF16 storage (bf16_store.h: uint16_t values, already
 * rounded), the very words the FP32 loaders above make from the values they were
 * rounded from: a pair is two stored values side by side, so nothing is converted. */
static inline __mmask32 lanes32(int n) { return n >= 32 ? 0xffffffffu : (__mmask32)((1u << n) - 1u); }

static inline void bf16_pairs_along_k_stored(uint32_t *out, int stride, int width,
                                             const uint16_t *x, size_t ld, int nrows, int kc)
{
    __m512i v[16];
    for (int kk = 0; kk < kc; kk += 32) {
        const int n = kc - kk < 32 ? kc - kk : 32;
        for (int r = 0; r < 16; r++)
            v[r] = r < nrows ? _mm512_maskz_loadu_epi16(lanes32(n), x + (size_t)r * ld + kk)
                             : _mm512_setzero_si512();
        transpose16(v);
        const int npairs = (n + 1) / 2;
        for (int j = 0; j < npairs; j++)
            _mm512_mask_storeu_epi32(out + (size_t)(kk / 2 + j) * stride, lanes(width), v[j]);
    }
}

/* 16 pairs from two rows of stored values: element i of r0 low, of r1 high (r1 NULL:
 * zeros), `n` (<= 16) of each, the rest zero */
static inline __m512i bf16_pairs_of_stored(const uint16_t *r0, const uint16_t *r1, int n)
{
    const __mmask16 m = lanes(n > 0 ? n : 0);
    const __m512i lo = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, r0));
    if (!r1) return lo;
    const __m512i hi = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, r1));
    return _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16));
}

static inline void bf16_pairs_across_k_stored(uint32_t *out, int nvec, const uint16_t *r0,
                                              const uint16_t *r1, int width)
{
    for (int v = 0; v < nvec; v++)
        _mm512_storeu_si512(out + 16 * v,
                            bf16_pairs_of_stored(r0 + 16 * v, r1 ? r1 + 16 * v : NULL,
                                                 width - 16 * v));
}

#endif
