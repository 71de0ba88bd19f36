/* attention_tiles — attention's six products on the AMX tiles (TDPBF16PS), for
 * precision = bf16 where gemm_bf16 runs its AMX path, and on that path's emulated twin
 * (amx-emulated), which runs the same code over the software tiles on any CPU.
 *
 * Same saved state and online softmax as attention_cpu.c (no T x T matrix kept, softmax
 * and every sum outside the products in FP32), blocked by 32 query rows, the height of
 * two tiles: per (batch, head) Q, K^T, V (and, backward, V^T, dO, K, Q and dO as the
 * other operand) are packed into tiles once; per block of rows the scores, the
 * probabilities P and the score gradients dS are packed as they are made. Operands are
 * rounded to BF16 as every BF16 path rounds them, and q|k|v may be read from BF16
 * storage (bf16_store.h) as they are. A head runs on one thread, so the results do not
 * depend on the thread count; against the other paths they differ in the order of the
 * FP32 sums. */
#ifndef GT_ATTENTION_TILES_H
#define GT_ATTENTION_TILES_H

#include <stddef.h>
#include <stdint.h>

#include "attention_next.h"

/* 1 when gemm_bf16 runs the AMX path or its emulated twin (and the head fits one
 * depth block of the tiles: hs <= 512) */
int attention_tiles_ready(int hs);
/* Floats of scratch one head needs, forward or backward */
size_t attention_tiles_scratch_floats(int T, int hs);
/* One (batch, head), as attention_pairs.h's: q|k|v rows 3C apart (FP32 q, or q16 in
 * BF16 storage: one of the two), out rows C apart (FP32 out, or out16 in BF16 storage),
 * lse[T]; the backward writes dq in the layout attention_pairs.h's _stored backward
 * describes (rows 3 dq_C apart, dk, dv at + dq_C, + 2 dq_C). next: attention_next.h. */
void attention_tiles_fwd_head(float *out, uint16_t *out16, float *lse, const float *q,
                              const uint16_t *q16, float *scratch, int T, int C, int hs,
                              attention_next next);
void attention_tiles_bwd_head(float *dq, int dq_C, const float *dout, const float *q,
                              const uint16_t *q16, const float *lse, float *scratch, int T,
                              int C, int hs, attention_next next);
/* The emulated twin's accounting (amx_emul_counts.h) around one pass over the heads, so
 * the bench's prediction takes its tile time out as for a product; nothing on the
 * real path */
void attention_tiles_pass_begin(void);
void attention_tiles_pass_end(void);

#endif
