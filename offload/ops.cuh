// ops — the FP16 layer kernels of the CUDA backend (offload/), for the op table of
// src/kernels/backend.h once it is wired in. Internal to offload/ (CUDA types are fine here;
// src/ sees only offload.h).
//
// Conventions, as the CPU kernels (src/kernels/kernels_cpu.h) with FP16 storage:
//  - activations and weights are __half on the device; every reduction and every
//    elementwise formula is computed in float;
//  - parameter gradients are float (accumulated with atomics: summation order is not
//    fixed, so results vary in the last bits between runs);
//  - input gradients are __half; the LayerNorm's are ACCUMULATED (+=), as on the CPU
//    (the residual stream's gradient gathers there), the others accumulate or
//    overwrite as the call's `accumulate` says (overwriting spares zeroing the buffer);
//  - every function launches on `stream` and returns without waiting.
// Status: compiled in CI; run only by offload/tests on a GPU (scripts/gpu-check.sh).
#ifndef GT_OFFLOAD_OPS_CUH
#define GT_OFFLOAD_OPS_CUH

#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

// out[B,T,C] = wte[inp[b,t]] + wpe[t].
void ol_encoder_forward(__half *out, const int32_t *inp, const __half *wte,
                        const __half *wpe, int B, int T, int C, cudaStream_t stream);
// dwte[tok] += dout[b,t]; dwpe[t] += dout[b,t] (float, atomics).
void ol_encoder_backward(float *dwte, float *dwpe, const __half *dout, const int32_t *inp,
                         int B, int T, int C, cudaStream_t stream);
// A vocabulary shard's (src/model/model.c): wte holds the rows [v0, v0 + Vl), and a
// token outside them adds 0 (forward) or nothing (backward's dwte); wpe NULL (forward)
// adds no positions.
void ol_encoder_forward_shard(__half *out, const int32_t *inp, const __half *wte,
                              const __half *wpe, int B, int T, int C, int v0, int Vl,
                              cudaStream_t stream);
void ol_encoder_backward_shard(float *dwte, float *dwpe, const __half *dout,
                               const int32_t *inp, int B, int T, int C, int v0, int Vl,
                               cudaStream_t stream);

// The int the functions below return for a failed kernel launch is OL_CUDA_ERROR plus
// the cudaError_t, so it cannot be mistaken for a cuBLAS status (both start at 1).
#define OL_CUDA_ERROR 100000

// Every kernel launch of offload/ is followed by ol_launched(its name, its stream):
// a launch error is printed at once with the kernel's name (and left for the caller's
// own check to return), so it is not blamed on the next call. In check mode (the test
// programs turn it on with ol_check_launches(1); gentrain under GENTRAIN_CUDA_CHECK=1)
// the stream is also waited for, so a fault while the kernel runs is caught there too,
// and either ends the process with exit status 1: slow, for finding a fault.
void ol_launched(const char *kernel, cudaStream_t stream);
void ol_check_launches(int on);

// The numerics every cuBLAS handle of offload/ is given (make_blas, the tests): FP32
// accumulation throughout, with CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION so that
// a product with FP16 output and a long K (the head's input gradient, K = 50304) never
// sums its split-K partials in FP16. Returns the cuBLAS status.
cublasStatus_t ol_blas_numerics(cublasHandle_t h);

// out = (x - mean) * rstd * w + b per row of C; mean, rstd [N] float. eps 1e-5.
void ol_layernorm_forward(__half *out, float *mean, float *rstd, const __half *inp,
                          const __half *w, const __half *b, int N, int C,
                          cudaStream_t stream);
// dinp += ..., dw, db += ... (float, atomics over rows).
void ol_layernorm_backward(__half *dinp, float *dw, float *db, const __half *dout,
                           const __half *inp, const __half *w, const float *mean,
                           const float *rstd, int N, int C, cudaStream_t stream);

// GELU, tanh approximation (as the CPU backend).
void ol_gelu_forward(__half *out, const __half *inp, size_t n, cudaStream_t stream);
// dinp (+)= gelu'(inp) * dout.
void ol_gelu_backward(__half *dinp, const __half *inp, const __half *dout, size_t n,
                      int accumulate, cudaStream_t stream);

// Matrix products on tensor cores through cuBLAS (FP16 operands, FP32 accumulation;
// the handle's stream is used). Row-major, as the CPU backend:
// out[N,OC] = inp[N,C] @ w[OC,C]^T + bias[OC] (bias may be NULL).
// Returns 0, the failing cuBLAS status, or OL_CUDA_ERROR + the cudaError_t of a failed
// kernel launch.
int ol_matmul_forward(cublasHandle_t h, __half *out, const __half *inp, const __half *w,
                      const __half *bias, int N, int C, int OC);
// dinp[N,C] (+)= dout @ w; dw[OC,C] += dout^T @ inp (float); dbias[OC] += column sums
// of dout (float; may be NULL).
int ol_matmul_backward(cublasHandle_t h, __half *dinp, float *dw, float *dbias,
                       const __half *dout, const __half *inp, const __half *w, int N,
                       int C, int OC, int accumulate);

// Causal multi-head attention, NH heads of hs = C/NH; scale = 1/sqrt(hs). The big
// products run on tensor cores (cuBLAS strided-batched GEMMs, FP16 operands, FP32
// accumulation; the handle's stream is used), cut into row blocks so that the masked
// part of the T x T scores is mostly skipped (offload/attention_plan.h); permutes and
// the softmax are small kernels (float math). Layouts, all row-major __half:
//   qkv  [B,T,3C]         per token q, k, v side by side, head h at columns h*hs..;
//   qkvr [3,B,NH,T,hs]    q, k, v permuted per head (q at qkvr, k at + B*T*C, v at
//                         + 2*B*T*C);
//   att  [B,NH,T,T]       row t: the softmax probabilities of q.k * scale over t2 <= t,
//                         exactly 0 for t < t2 < att_row_end(t, T, nb), and untouched
//                         (never written nor read) from there to T;
//   out, dout [B,T,C]     heads side by side, as in qkv.
// row_blocks: nb, the number of row blocks (0: att_row_blocks(T), the fast default; 1:
// the whole square); the backward must be given the forward's. Both return 0 on
// success, else the failing cuBLAS status or OL_CUDA_ERROR + the cudaError_t of a
// failed launch (CUBLAS_STATUS_INVALID_VALUE when nb does not divide T or exceeds
// ATT_MAX_ROW_BLOCKS).
// Halves of the scratch each call needs (caller allocates; contents not kept).
size_t ol_attention_fwd_scratch_halves(int B, int T, int C, int NH);   // B*T*C
size_t ol_attention_bwd_scratch_halves(int B, int T, int C, int NH);   // B*NH*T*T + 4*B*T*C
// Forward on qkv [B,T,3C] (q, k, v stacked per token; NH heads of hs = C/NH):
// qkvr [3,B,NH,T,hs] (q, k, v permuted per head) and att [B,NH,T,T] (softmax
// probabilities in FP16, as above) are written and must be kept for the backward;
// out [B,T,C] = att @ v with heads put back side by side.
int ol_attention_forward(cublasHandle_t h, __half *out, __half *qkvr, __half *att,
                         __half *scratch, const __half *qkv, int B, int T, int C, int NH,
                         int row_blocks);
// dqkv [B,T,3C] (+)= the gradient, given dout [B,T,C] and what the forward kept.
int ol_attention_backward(cublasHandle_t h, __half *dqkv, __half *scratch,
                          const __half *dout, const __half *qkvr, const __half *att,
                          int B, int T, int C, int NH, int row_blocks, int accumulate);

// out = a + b.
void ol_residual_forward(__half *out, const __half *a, const __half *b, size_t n,
                         cudaStream_t stream);

// losses[N] (float) = -log softmax(logits[n])[target[n]]; with dlogits != NULL also
// dlogits = scale * (softmax - onehot) (__half; may alias logits).
void ol_crossentropy(float *losses, __half *dlogits, const __half *logits,
                     const int32_t *targets, int N, int V, float scale,
                     cudaStream_t stream);
// The same over vocabulary shards (each holds the columns [v0, v0 + Vl) of the rows):
// stats [3N] (float) = each row's maximum over the shard's columns, its sum of
// exp(x - max), and its target's logit (0 where another shard holds the target); the
// caller combines the shards' stats into the whole rows' (the maximum, the sums
// rescaled to it and added, the target logits added), then ol_xent_shard_finish
// writes losses[N] and, with dlogits, the shard's columns of scale * (softmax -
// onehot) (may alias logits).
void ol_xent_shard_stats(float *stats, const __half *logits, const int32_t *targets, int N,
                         int Vl, int v0, cudaStream_t stream);
void ol_xent_shard_finish(float *losses, __half *dlogits, const __half *logits,
                          const int32_t *targets, const float *stats, int N, int Vl, int v0,
                          float scale, cudaStream_t stream);

#endif
