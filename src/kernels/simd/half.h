/* half — IEEE 754 binary16 ("half") conversion for gradients on the wire.
 *
 * float -> half rounds to nearest, ties to even; overflow gives +-inf; values below
 * the smallest subnormal half round to +-0 (or to the smallest subnormal by the same
 * rule); NaN stays NaN (the quiet bit set, the top payload bits kept). half -> float is
 * exact (a signalling NaN comes back quiet). The array functions run the SIMD path in
 * use (simd.h: F16C, 8 or 16 values at a time) or the scalar one; every path gives the
 * same bits for every input. */
#ifndef GT_HALF_H
#define GT_HALF_H

#include <stddef.h>
#include <stdint.h>

/* The portable scalar conversions (the reference for the array functions). */
uint16_t half_from_float_scalar(float f);
float half_to_float_scalar(uint16_t h);

/* dst[i] = half(src[i]) / float(src[i]) for n values. */
void half_from_float(uint16_t *restrict dst, const float *restrict src, size_t n);
void half_to_float(float *restrict dst, const uint16_t *restrict src, size_t n);

/* inout[i] = half(float(in[i]) + float(inout[i])): the sum an fp16 reduction uses. */
void half_add(uint16_t *restrict inout, const uint16_t *restrict in, size_t n);

/* "avx512", "avx2", "portable" (simd.h's path) or "scalar" (half_allow_simd(0)). */
const char *half_path_name(void);
/* Forces the scalar path (0) or lets the CPU check decide (1); for tests. */
void half_allow_simd(int allow);

#endif
