// ops — the FP16 layer kernels of the CUDA backend (offload/), for the op table of
// src/backend.h once it is wired in. Internal to offload/ (CUDA types are fine here;
// src/ sees only offload.h).
//
// Conventions, as the CPU kernels (src/kernels_cpu.h) with FP16 storage:
//  - activations and weights are __half on the device; every reduction and every
//    elementwise formula is computed in float;
//  - parameter gradients are float (accumulated with atomics: summation order is not
//    fixed, so results vary in the last bits between runs);
//  - input gradients are __half and ACCUMULATED (+=), as on the CPU;
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
// dinp += gelu'(inp) * dout.
void ol_gelu_backward(__half *dinp, const __half *inp, const __half *dout, size_t n,
                      cudaStream_t stream);

// Matrix products on tensor cores through cuBLAS (FP16 operands, FP32 accumulation;
// the handle's stream is used). Row-major, as the CPU backend:
// out[N,OC] = inp[N,C] @ w[OC,C]^T + bias[OC] (bias may be NULL).
// Returns the cuBLAS status (CUBLAS_STATUS_SUCCESS = 0).
int ol_matmul_forward(cublasHandle_t h, __half *out, const __half *inp, const __half *w,
                      const __half *bias, int N, int C, int OC);
// dinp[N,C] += dout @ w; dw[OC,C] += dout^T @ inp (float); dbias[OC] += column sums of
// dout (float; may be NULL).
int ol_matmul_backward(cublasHandle_t h, __half *dinp, float *dw, float *dbias,
                       const __half *dout, const __half *inp, const __half *w, int N,
                       int C, int OC);

// Causal multi-head attention on qkv [B,T,3C] (q, k, v stacked; NH heads of C/NH):
// att [B,NH,T,T] (float) = softmax of q.k / sqrt(hs) over t2 <= t (0 above), out
// [B,T,C] = att @ v. Plain kernels, no tiling yet: correct, not yet fast.
void ol_attention_forward(__half *out, float *att, const __half *qkv, int B, int T, int C,
                          int NH, cudaStream_t stream);
// dqkv [B,T,3C] += the gradient; scratch: B*NH*T*T floats.
void ol_attention_backward(__half *dqkv, float *scratch, const __half *dout,
                           const __half *qkv, const float *att, int B, int T, int C, int NH,
                           cudaStream_t stream);

// out = a + b.
void ol_residual_forward(__half *out, const __half *a, const __half *b, size_t n,
                         cudaStream_t stream);

// losses[N] (float) = -log softmax(logits[n])[target[n]]; with dlogits != NULL also
// dlogits = scale * (softmax - onehot) (__half; may alias logits).
void ol_crossentropy(float *losses, __half *dlogits, const __half *logits,
                     const int32_t *targets, int N, int V, float scale,
                     cudaStream_t stream);

#endif
