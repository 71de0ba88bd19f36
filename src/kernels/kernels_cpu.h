/* kernels_cpu — the layers of a GPT-2 decoder on the CPU in FP32: forward and backward,
 * OpenMP over rows/heads, the inner loops of the widest SIMD path the CPU has (simd.h:
 * AVX-512, AVX2+FMA or portable, chosen at run time), OpenBLAS sgemm for every matrix
 * product.
 *
 * Conventions (shared with every backend):
 *  - Row-major. N = B*T rows. Weights of a linear layer are [OC, C] (out, in), as in
 *    PyTorch's nn.Linear: out = inp @ w^T + bias.
 *  - Every backward ACCUMULATES (+=) into its d-outputs (dinp, dweight, dbias), so
 *    callers zero gradients once per step and residual branches simply add up; but
 *    attention's backward writes dqkv (attention_cpu.h).
 *  - Results are deterministic for a given thread count: no atomics on floats, every
 *    reduction has a fixed order.
 *  - Kernels cannot fail; they never allocate. Scratch is passed in.
 *  - Every SIMD path gives the portable path's results within float rounding;
 *    kernels_set_simd() forces one of them (tests compare each with the portable one). */
#ifndef GT_KERNELS_CPU_H
#define GT_KERNELS_CPU_H

#include <stddef.h>
#include <stdint.h>

/* SIMD path selection (the values of simd.h's enum simd_path). */
enum kernels_simd {
    KERNELS_SIMD_AUTO = 0,
    KERNELS_SIMD_PORTABLE = 1,
    KERNELS_SIMD_AVX2 = 2,
    KERNELS_SIMD_AVX512 = 3
};
/* Forces a path (AUTO: the widest the CPU has). Returns the path now in use; asking
 * for one the CPU lacks gives the widest it has. The environment variable
 * GENTRAIN_SIMD=portable|avx2|avx512|auto sets the initial choice. */
enum kernels_simd kernels_set_simd(enum kernels_simd want);
/* "avx512", "avx2" or "portable". */
const char *kernels_simd_name(void);

/* out[B,T,C] = wte[inp[b,t], :] + wpe[t, :]; inp holds token ids < V (checked by caller). */
void encoder_forward(float *out, const int32_t *inp, const float *wte, const float *wpe,
                     int B, int T, int C);
/* dwte[V,C] += scatter of dout rows by token; dwpe[T,C] += sum over b of dout[b,t,:]. */
void encoder_backward(float *dwte, float *dwpe, const float *dout, const int32_t *inp,
                      int B, int T, int C);

/* out[N,C] = (inp - mean) * rstd * w + b over each row; saves mean[N], rstd[N].
 * eps = 1e-5. */
void layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
                       const float *w, const float *b, size_t N, int C);
/* dinp[N,C] += ..., dw[C] += ..., db[C] += ...; scratch: the caller's
 * layernorm_backward_scratch_floats(N, C) floats (the partial sums of dw and db) */
void layernorm_backward(float *dinp, float *dw, float *db, const float *dout,
                        const float *inp, const float *w, const float *mean,
                        const float *rstd, float *scratch, size_t N, int C);
size_t layernorm_backward_scratch_floats(size_t N, int C);

/* out[N,OC] = inp[N,C] @ w[OC,C]^T + bias[OC] (bias may be NULL). */
void matmul_forward(float *out, const float *inp, const float *w, const float *bias,
                    size_t N, int C, int OC);
/* dinp[N,C] = dout @ w (written, not added to: no zeroing pass before it);
 * dw[OC,C] += dout^T @ inp; dbias[OC] += column sums of dout. dinp or dbias may be NULL
 * (not needed). */
void matmul_backward(float *dinp, float *dw, float *dbias, const float *dout,
                     const float *inp, const float *w, size_t N, int C, int OC);
/* matmul_backward on inp = gelu(pre), which it writes first (the bits of gelu_forward,
 * from the sigmoid GELU's backward takes), then dpre[N,C] = gelu'(pre) * dinp (written):
 * the MLP projection's backward with GELU's, dinp's rows taken while they are in cache */
void matmul_backward_gelu(float *dpre, float *dinp, float *dw, float *dbias,
                          const float *dout, float *inp, const float *w, const float *pre,
                          size_t N, int C, int OC);

/* Causal multi-head self-attention: attention_cpu.h (both precisions; no T x T matrix
 * stored). */

/* GELU, tanh approximation (as GPT-2): out[N] = gelu(inp[N]). */
void gelu_forward(float *out, const float *inp, size_t N);
/* dinp[N] += gelu'(inp) * dout. */
void gelu_backward(float *dinp, const float *inp, const float *dout, size_t N);

/* out[N] = a[N] + b[N]. */
void residual_forward(float *out, const float *a, const float *b, size_t N);
/* da[N] += dout; db[N] += dout. */
void residual_backward(float *da, float *db, const float *dout, size_t N);

/* losses[N] = -log softmax(logits[n,:])[targets[n]], with logits [N,V] (FP32 math,
 * max-subtracted). Targets are < V. */
void crossentropy_forward(float *losses, const float *logits, const int32_t *targets,
                          size_t N, int V);
/* Same losses, and logits is overwritten IN PLACE by
 * dloss_scale * (softmax(logits) - onehot(target)), the gradient of
 * dloss_scale * sum(losses) with respect to the logits. */
void crossentropy_forward_backward(float *losses, float *logits, const int32_t *targets,
                                   size_t N, int V, float dloss_scale);

/* Vocabulary-parallel variants (kernels_vocab.c): this rank holds rows [v0, v0 + Vl) of
 * wte and the matching Vl columns of the logits.
 * encoder_forward_shard: out = (wte row of the token if this rank holds it, else 0) +
 *   (wpe row of t, when wpe is not NULL); the ranks' outputs add up to encoder_forward.
 * encoder_backward_shard: dwte rows this rank holds, and all of dwpe, as
 *   encoder_backward. */
void encoder_forward_shard(float *out, const int32_t *inp, const float *wte,
                           const float *wpe, int B, int T, int C, int v0, int Vl);
void encoder_backward_shard(float *dwte, float *dwpe, const float *dout,
                            const int32_t *inp, int B, int T, int C, int v0, int Vl);
/* Softmax cross-entropy over logits cut by columns, in three steps with the ranks'
 * results combined between them: rowmax[N] = this shard's row max (combine: max);
 * sums[2N] = sum of exp(logit - rowmax) and the target's logit when this shard holds
 * it, else 0 (combine: sum); then losses[N] (the same on every rank) and, with
 * want_grad, the shard's logits overwritten by their gradient as in
 * crossentropy_forward_backward. */
void xent_shard_max(float *rowmax, const float *logits, size_t N, int Vl);
void xent_shard_sums(float *sums, const float *logits, const int32_t *targets,
                     const float *rowmax, size_t N, int Vl, int v0);
void xent_shard_finish(float *losses, float *logits, const int32_t *targets,
                       const float *rowmax, const float *sums, size_t N, int Vl, int v0,
                       float dloss_scale, int want_grad);

#endif
