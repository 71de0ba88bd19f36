/* backend — the op table the model calls for every layer, so model.c holds the
 * architecture only and never an #ifdef for a device. A backend provides the layer
 * kernels with the signatures and conventions of kernels_cpu.h (accumulating
 * backwards, deterministic reductions, no allocation inside a kernel).
 *
 * The CPU backend (FP32, OpenMP + SIMD + OpenBLAS) is always present; the CUDA backend
 * (offload/) plugs in behind the same table. */
#ifndef GT_BACKEND_H
#define GT_BACKEND_H

#include <stddef.h>
#include <stdint.h>

typedef struct gt_backend {
    const char *name;
    void (*encoder_forward)(float *out, const int32_t *inp, const float *wte,
                            const float *wpe, int B, int T, int C);
    void (*encoder_backward)(float *dwte, float *dwpe, const float *dout,
                             const int32_t *inp, int B, int T, int C);
    void (*layernorm_forward)(float *out, float *mean, float *rstd, const float *inp,
                              const float *w, const float *b, size_t N, int C);
    void (*layernorm_backward)(float *dinp, float *dw, float *db, const float *dout,
                               const float *inp, const float *w, const float *mean,
                               const float *rstd, size_t N, int C);
    void (*matmul_forward)(float *out, const float *inp, const float *w,
                           const float *bias, size_t N, int C, int OC);
    void (*matmul_backward)(float *dinp, float *dw, float *dbias, const float *dout,
                            const float *inp, const float *w, size_t N, int C, int OC);
    void (*attention_forward)(float *out, float *att, const float *qkv, int B, int T,
                              int C, int NH);
    size_t (*attention_scratch_floats)(int T, int threads);
    void (*attention_backward)(float *dqkv, const float *dout, const float *qkv,
                               const float *att, float *scratch, int B, int T, int C,
                               int NH);
    void (*gelu_forward)(float *out, const float *inp, size_t N);
    void (*gelu_backward)(float *dinp, const float *inp, const float *dout, size_t N);
    void (*residual_forward)(float *out, const float *a, const float *b, size_t N);
    void (*residual_backward)(float *da, float *db, const float *dout, size_t N);
    void (*crossentropy_forward)(float *losses, const float *logits,
                                 const int32_t *targets, size_t N, int V);
    void (*crossentropy_forward_backward)(float *losses, float *logits,
                                          const int32_t *targets, size_t N, int V,
                                          float dloss_scale);
} gt_backend;

/* The FP32 CPU backend (kernels_cpu.c). */
extern const gt_backend backend_cpu;

#endif
