/* backend — the op table the model calls for every layer, so model.c holds the
 * architecture only and never an #ifdef for a device. A backend provides the layer
 * kernels with the signatures and conventions of kernels_cpu.h (accumulating
 * backwards, deterministic reductions, no allocation inside a kernel).
 *
 * The CPU backends (FP32, or BF16 matrix products with BF16 activation storage; OpenMP +
 * SIMD + OpenBLAS) are always present. */
#ifndef GT_BACKEND_H
#define GT_BACKEND_H

#include <stddef.h>
#include <stdint.h>

/* The ops of gt_backend that write or read the activations a backend keeps in BF16
 * storage (bf16_store.h: uint16_t), where every product rounds its operands to BF16
 * anyway: ln_1's and ln_2's outputs, q|k|v and attention's output. Each is the op of the
 * same name with those arrays in BF16 (the `16` arguments), the same bits as the FP32
 * op run on the stored values, in half the memory. Optionally (the GELU ops' out16 and
 * pre16) the MLP's pre-activation too, which is not exact: it then goes through GELU,
 * forward and backward, as its BF16 value (as PyTorch's autocast keeps a Linear's
 * output); and with it the backward's inexact set: the gradients that products read
 * (the residual stream's after each LayerNorm's backward, d q|k|v) copied into BF16
 * storage as they are made (the `dinp16`, `dqkv16` and `dout16` arguments), which the
 * products read as stored instead of packing them from FP32: the same bits for their
 * results, but the bias gradients then sum the BF16 values. Every member is required. */
typedef struct gt_bf16_acts {
    /* layernorm_forward into out16, the FP32 rows passing through out (N x C scratch;
     * its values afterwards are not the output) */
    void (*layernorm_forward)(uint16_t *out16, float *out, float *mean, float *rstd,
                              const float *inp, const float *w, const float *b, size_t N,
                              int C);
    /* layernorm_backward, and dinp16 (NULL: none) the BF16 copy of dinp as summed: the
     * residual stream's gradient for the products that read it next (the backward's
     * inexact set, below) */
    void (*layernorm_backward)(float *dinp, uint16_t *dinp16, float *dw, float *db,
                               const float *dout, const float *inp, const float *w,
                               const float *mean, const float *rstd, float *scratch,
                               size_t N, int C);
    /* matmul_forward from inp16; out16 (NULL: none) receives out's BF16 copy instead,
     * out then being scratch whose values afterwards are not the output */
    void (*matmul_forward)(float *out, uint16_t *out16, const uint16_t *inp16,
                           const float *w, const float *bias, size_t N, int C, int OC);
    /* The GELU output into gelu16, in BF16 (the next product reads nothing else), and
     * slope16 (NULL: none) GELU's slope at out in BF16, all its backward needs: out is
     * then scratch, what it holds afterwards unspecified (the AMX and AVX512_BF16 paths
     * keep the product in cache and never write it); without slope16, out receives the
     * pre-activation */
    void (*matmul_forward_gelu)(float *out, uint16_t *slope16, uint16_t *gelu16,
                                const uint16_t *inp16, const float *w, const float *bias,
                                size_t N, int C, int OC);
    /* matmul_backward_gelu from the forward's GELU output inp16 (the weight gradient's
     * operand) and slope16: dpre = slope dinp, into BF16 storage (dpre16: all its
     * consumer, matmul_backward_dout16, reads); dinp is scratch, as out of
     * matmul_forward_gelu with slope16; dout16 (NULL: none): dout in BF16 storage, which
     * both products then read instead of dout (as matmul_backward_dout16, dbias summing
     * its BF16 values) */
    void (*matmul_backward_gelu)(uint16_t *dpre16, float *dinp, float *dw, float *dbias,
                                 const float *dout, const uint16_t *dout16,
                                 const uint16_t *inp16, const float *w,
                                 const uint16_t *slope16, size_t N, int C, int OC);
    void (*matmul_forward_residual)(float *out, const float *res, const uint16_t *inp16,
                                    const float *w, const float *bias, size_t N, int C,
                                    int OC);
    void (*matmul_backward)(float *dinp, float *dw, float *dbias, const float *dout,
                            const uint16_t *inp16, const float *w, size_t N, int C, int OC);
    /* the same with dout in BF16 storage too, rows ld_dout16 values apart: the products
     * read the bits they would have packed; dbias (may be NULL) sums dout's BF16 values */
    void (*matmul_backward_dout16)(float *dinp, float *dw, float *dbias, const uint16_t *dout16,
                                   size_t ld_dout16, const uint16_t *inp16, const float *w,
                                   size_t N, int C, int OC);
    /* crossentropy_forward_backward with d loss / d logits left in BF16 storage, in
     * place: row n's V values from (uint16_t *)(logits + n V), so 2V apart (the BF16
     * products of the head's backward read nothing else of it, and its FP32 rows are
     * never written back); scratch: V floats for each of `nscratch` threads, which the
     * rows are split over */
    void (*crossentropy_forward_backward16)(float *losses, float *logits, float *scratch,
                                            int nscratch, const int32_t *targets, size_t N,
                                            int V, float dloss_scale);
    void (*attention_forward)(uint16_t *out16, float *saved, const uint16_t *qkv16,
                              float *scratch, int threads, int B, int T, int C, int NH);
    /* dqkv16 (NULL: none): the gradient in BF16 storage instead, dqkv left unwritten
     * (attention_cpu.h) */
    void (*attention_backward)(float *dqkv, uint16_t *dqkv16, const float *dout,
                               const uint16_t *qkv16, const float *saved, float *scratch,
                               int threads, int B, int T, int C, int NH);
} gt_bf16_acts;

/* Every member is required but bf16_acts and the fused forward products; shapes as in
 * kernels_cpu.h, whose functions fill the CPU backends, and every backward accumulates
 * (+=) but the matrix products' dinp and attention's dqkv, which they write. */
typedef struct gt_backend {
    const char *name; /* "cpu", "cpu-bf16": for messages (tests print it) */
    /* out[B,T,C] = wte[token] + wpe[t]; backward: dwte[V,C], dwpe[T,C] += */
    void (*encoder_forward)(float *out, const int32_t *inp, const float *wte,
                            const float *wpe, int B, int T, int C);
    void (*encoder_backward)(float *dwte, float *dwpe, const float *dout,
                             const int32_t *inp, int B, int T, int C);
    /* out[N,C] = LayerNorm of each row (saves mean[N], rstd[N]); backward += */
    void (*layernorm_forward)(float *out, float *mean, float *rstd, const float *inp,
                              const float *w, const float *b, size_t N, int C);
    void (*layernorm_backward)(float *dinp, float *dw, float *db, const float *dout,
                               const float *inp, const float *w, const float *mean,
                               const float *rstd, float *scratch, size_t N, int C);
    /* the floats of scratch a layernorm_backward of N rows of C takes (both backward
     * members: the weight and bias gradients' partial sums), the caller's memory so
     * that a pass has nothing to allocate and nothing to fail */
    size_t (*layernorm_scratch_floats)(size_t N, int C);
    /* out[N,OC] = inp[N,C] @ w[OC,C]^T + bias[OC] (bias may be NULL); backward:
     * dinp[N,C] = (written: no zeroing pass before it), dw[OC,C], dbias[OC] += (dinp,
     * dbias may be NULL) */
    void (*matmul_forward)(float *out, const float *inp, const float *w,
                           const float *bias, size_t N, int C, int OC);
    void (*matmul_backward)(float *dinp, float *dw, float *dbias, const float *dout,
                            const float *inp, const float *w, size_t N, int C, int OC);
    /* Optional (NULL: the model runs the product, then the elementwise pass): the
     * product with its next pass fused into the write-back, with the bits of the two:
     * out = inp @ w^T + bias, out_gelu = gelu(out); and out = res + inp @ w^T + bias. */
    void (*matmul_forward_gelu)(float *out, float *out_gelu, const float *inp,
                                const float *w, const float *bias, size_t N, int C, int OC);
    void (*matmul_forward_residual)(float *out, const float *res, const float *inp,
                                    const float *w, const float *bias, size_t N, int C,
                                    int OC);
    /* Required: matmul_backward on inp = gelu(pre), which it writes first (the bits of
     * gelu_forward: the FP32 backend from the pass that takes GELU's backward), then
     * dpre = gelu'(pre) dinp (overwritten) while dinp's rows are in cache (the BF16
     * backend: in the product's write-back) */
    void (*matmul_backward_gelu)(float *dpre, float *dinp, float *dw, float *dbias,
                                 const float *dout, float *inp, const float *w,
                                 const float *pre, size_t N, int C, int OC);
    /* Attention (attention_cpu.h): the forward saves, per layer,
     * attention_saved_floats(B, NH, T) floats for the backward (the CPU backends: a
     * log-sum-exp per row, no T x T matrix), and both passes use
     * attention_scratch_floats(T, hs, threads) floats of scratch, on at most `threads`
     * OpenMP threads. */
    void (*attention_forward)(float *out, float *saved, const float *qkv, float *scratch,
                              int threads, int B, int T, int C, int NH);
    void (*attention_backward)(float *dqkv, const float *dout, const float *qkv,
                               const float *saved, float *scratch, int threads, int B,
                               int T, int C, int NH);
    size_t (*attention_saved_floats)(int B, int NH, int T);
    size_t (*attention_scratch_floats)(int T, int hs, int threads);
    /* out[N] = gelu(inp[N]) (tanh approximation); backward: dinp[N] += */
    void (*gelu_forward)(float *out, const float *inp, size_t N);
    void (*gelu_backward)(float *dinp, const float *inp, const float *dout, size_t N);
    /* out[N] = a[N] + b[N]; backward: da[N], db[N] += dout */
    void (*residual_forward)(float *out, const float *a, const float *b, size_t N);
    void (*residual_backward)(float *da, float *db, const float *dout, size_t N);
    /* losses[N] of logits[N,V] against targets[N]; the _backward variant also
     * overwrites logits by dloss_scale x d(sum of losses)/d(logits) */
    void (*crossentropy_forward)(float *losses, const float *logits,
                                 const int32_t *targets, size_t N, int V);
    void (*crossentropy_forward_backward)(float *losses, float *logits,
                                          const int32_t *targets, size_t N, int V,
                                          float dloss_scale);
    /* Optional (NULL: every activation FP32): the ops on activations in BF16 storage */
    const gt_bf16_acts *bf16_acts;
    /* Vocabulary-parallel (tensor-parallel) embedding and loss: kernels_cpu.h. */
    void (*encoder_forward_shard)(float *out, const int32_t *inp, const float *wte,
                                  const float *wpe, int B, int T, int C, int v0, int Vl);
    void (*encoder_backward_shard)(float *dwte, float *dwpe, const float *dout,
                                   const int32_t *inp, int B, int T, int C, int v0, int Vl);
    void (*xent_shard_max)(float *rowmax, const float *logits, size_t N, int Vl);
    void (*xent_shard_sums)(float *sums, const float *logits, const int32_t *targets,
                            const float *rowmax, size_t N, int Vl, int v0);
    void (*xent_shard_finish)(float *losses, float *logits, const int32_t *targets,
                              const float *rowmax, const float *sums, size_t N, int Vl,
                              int v0, float dloss_scale, int want_grad);
} gt_backend;

/* The FP32 CPU backend (kernels_cpu.c). */
extern const gt_backend backend_cpu;
/* The same with every matrix product in BF16 with FP32 accumulation (precision = bf16;
 * gemm_bf16.h): the rest (LayerNorm, softmax, GELU, the loss, the optimizer) stays FP32.
 * Call gemm_bf16_init for the thread count first. */
extern const gt_backend backend_cpu_bf16;

#endif
