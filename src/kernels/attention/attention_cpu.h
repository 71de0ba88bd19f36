/* attention_cpu — causal multi-head self-attention on the CPU, forward and backward,
 * without storing the T x T attention matrix: the forward keeps one log-sum-exp per
 * query row, from which the backward rebuilds the probabilities (as FlashAttention
 * does). The attention of both CPU backends (backend.h):
 *  - attention_forward / attention_backward: FP32 throughout;
 *  - the _bf16 twins (precision = bf16): every product's operands (q, k, v, the
 *    probabilities, dout and the score gradients) rounded to BF16, their products
 *    summed in FP32; the softmax, its log-sum-exp and its gradient stay FP32. The
 *    products run on the AMX tiles where gemm_bf16 runs its AMX path or the emulated
 *    twin (attention_tiles.h), else on VDPBF16PS where the CPU has AVX512_BF16
 *    (attention_pairs.h), else on the FP32 vector units on BF16-rounded operands, as
 *    gemm_bf16's portable path computes (docs/cpu-speed.md, "Attention");
 *  - the _stored twins: the _bf16 ones with qkv (and the forward's out) in BF16
 *    storage (bf16_store.h), the same bits as the _bf16 ones on the values stored.
 *
 * Layout (kernels_cpu.h's conventions):
 *  - qkv[B,T,3C] holds q | k | v, each [C] = NH heads of hs = C/NH;
 *    out[B,T,C] = softmax(q k^T / sqrt(hs), causal) v, heads concatenated.
 *  - lse[B,NH,T] (attention_saved_floats): the log-sum-exp of each row of scores,
 *    written by the forward, read by the backward.
 *  - scratch: attention_scratch_floats(T, hs, threads) floats, used by both passes,
 *    which then run on at most `threads` OpenMP threads (a caller sized for fewer than
 *    the runtime has gets fewer); nothing in it survives a call.
 *
 * Contract: the backward WRITES every value of dqkv (or of dqkv16, below), unlike the
 * other kernels' backwards, which accumulate: only attention's d q|k|v has a single
 * source, and writing it spares the model a pass that zeroes it. Results do not depend
 * on the thread count; every SIMD path (simd.h) gives the portable path's results within
 * float rounding. Kernels cannot fail and never allocate. */
#ifndef GT_ATTENTION_CPU_H
#define GT_ATTENTION_CPU_H

#include <stddef.h>
#include <stdint.h>

/* Floats of scratch for `threads` threads, and of saved state per layer. */
size_t attention_scratch_floats(int T, int hs, int threads);
size_t attention_saved_floats(int B, int NH, int T);

void attention_forward(float *out, float *lse, const float *qkv, float *scratch, int threads,
                       int B, int T, int C, int NH);
/* dqkv[B,T,3C] = gradient from dout[B,T,C]; qkv and lse as the forward had them. */
void attention_backward(float *dqkv, const float *dout, const float *qkv, const float *lse,
                        float *scratch, int threads, int B, int T, int C, int NH);
void attention_forward_bf16(float *out, float *lse, const float *qkv, float *scratch,
                            int threads, int B, int T, int C, int NH);
void attention_backward_bf16(float *dqkv, const float *dout, const float *qkv,
                             const float *lse, float *scratch, int threads, int B, int T,
                             int C, int NH);

void attention_forward_stored(uint16_t *out, float *lse, const uint16_t *qkv, float *scratch,
                              int threads, int B, int T, int C, int NH);
/* dqkv16 (NULL: none): the gradient in BF16 storage instead of dqkv, for products that
 * read it so: each head's gradient rounded into its columns as the head finishes, while
 * in cache; dqkv is then not written (not NULL all the same: it marks a backward).
 * dqkv16's values are those of dqkv, rounded to nearest even. */
void attention_backward_stored(float *dqkv, uint16_t *dqkv16, const float *dout,
                               const uint16_t *qkv, const float *lse, float *scratch,
                               int threads, int B, int T, int C, int NH);

#endif
