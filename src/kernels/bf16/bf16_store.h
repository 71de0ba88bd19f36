/* bf16_store — FP32 values kept in memory as BF16 (uint16_t: the upper half of the
 * FP32 bits), for the activations that only BF16 products read (backend.h's
 * gt_bf16_act_ops): half the bytes, and the very bits every BF16 product path would
 * have packed from the FP32 value.
 *
 * Rounding is to nearest, ties to even; a NaN stays a NaN (made quiet); a denormal
 * becomes a zero of its sign. That is what VCVTNEPS2BF16 does, and so what the
 * AVX512_BF16 and AMX paths of gemm_bf16 pack; widening a stored value back is exact.
 * The vector and the scalar code write the same bits (tests/test_gemm_bf16 checks). */
#ifndef GT_BF16_STORE_H
#define GT_BF16_STORE_H

#include <stddef.h>
#include <stdint.h>

/* dst[i] = x rounded to BF16, i < n */
void bf16_store(uint16_t *dst, const float *src, size_t n);
/* The same on rows r < rows of cols values, src's lds and dst's ldd apart: one call for a
 * tile whose rows are short (attention's output, a head's width a row) */
void bf16_store_rows(uint16_t *dst, size_t ldd, const float *src, size_t lds, size_t rows,
                     size_t cols);
/* dst[i] = the FP32 value of src[i] (exact), i < n */
void bf16_widen(float *dst, const uint16_t *src, size_t n);
/* h[i] = h[i] x 2^shift for i < n (shift < 0), exactly: the exponent moved; zeros,
 * infinities, NaNs and denormals (which bf16_store never makes) as they are; a result
 * below the normal range a zero of its sign, as bf16_store makes one. Bit operations,
 * 32 values a vector where the CPU has AVX512_BF16 (an attention head's operands take
 * the softmax's power-of-two scale so: a plain loop over them cost 7% of the head's
 * time around its tiles); bf16_scale_pow2_one is one value, the same bits */
void bf16_scale_pow2(uint16_t *h, size_t n, int shift);
uint16_t bf16_scale_pow2_one(uint16_t h, int shift);
/* One value: the rounding of bf16_store, and its widening */
uint16_t bf16_store_one(float x);
static inline float bf16_widen_one(uint16_t h)
{
    union {
        uint32_t u;
        float f;
    } v = {.u = (uint32_t)h << 16};
    return v.f;
}

#endif
