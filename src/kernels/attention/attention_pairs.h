/* attention_pairs — attention's six products on the BF16 dot-product unit
 * (VDPBF16PS, AVX512_BF16): for precision = bf16 on the AVX-512 kernels, where the BF16
 * matrix products run on AVX512_BF16 or AMX (attention_pairs_ready).
 *
 * Same blocking, online softmax and saved state as attention_cpu.c's FP32 products (no
 * T x T matrix kept, causal tiles skipped, softmax and every sum in FP32); only the
 * operands change: each head's Q, K, V, dO and each tile's P and dS are rounded to BF16
 * once and laid out as the instruction's pairs (two BF16 of consecutive depth in one
 * 32-bit word), so a product does half the instructions of FP32 fused multiply-adds.
 * Its portable twin is attention_cpu.c's BF16 mode on the other SIMD paths (operands
 * rounded to BF16 values, FP32 products): the same values, the sums in another order.
 * A head runs on one thread, so the results do not depend on the thread count. */
#ifndef GT_ATTENTION_PAIRS_H
#define GT_ATTENTION_PAIRS_H

#include <stddef.h>
#include <stdint.h>

#include "attention_next.h"

/* 1 when this build, CPU and the kernels' current choices run the pairs (SIMD path
 * AVX-512, the CPU with AVX512_BF16, gemm_bf16's path avx512-bf16 or amx-bf16) */
int attention_pairs_ready(void);
/* Floats of scratch one head needs (forward or backward), 0 where not built */
size_t attention_pairs_scratch_floats(int T, int hs);
/* One (batch, head), as attention_cpu.c's fwd_head / bwd_head: q at the head's first
 * query (rows 3C apart, K and V C and 2C on), out rows C apart, lse[T]; the backward
 * writes dq (with dk, dv at + C, + 2C). scratch: attention_pairs_scratch_floats. */
void attention_pairs_fwd_head(float *out, float *lse, const float *q, float *scratch, int T,
                              int C, int hs);
void attention_pairs_bwd_head(float *dq, const float *dout, const float *q,
                              const float *lse, float *scratch, int T, int C, int hs);

/* The same with q|k|v (and the forward's out) in BF16 storage (bf16_store.h): the
 * bits of the FP32 calls on the stored values. The backward's dq has its own layout:
 * rows 3 dq_C apart, dk and dv at + dq_C, + 2 dq_C (C: in dqkv itself; hs: a head's
 * gradient in a buffer of its own, its rows 3 hs floats). next: attention_next.h. */
void attention_pairs_fwd_head_stored(uint16_t *out, float *lse, const uint16_t *q,
                                     float *scratch, int T, int C, int hs,
                                     attention_next next);
void attention_pairs_bwd_head_stored(float *dq, int dq_C, const float *dout,
                                     const uint16_t *q, const float *lse, float *scratch, int T,
                                     int C, int hs, attention_next next);

#endif
