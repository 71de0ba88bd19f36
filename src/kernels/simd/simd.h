/* simd — the inner loops of gentrain's own CPU kernels, in one portable C version and
 * its AVX2 and AVX-512 twins, picked once at run time for the CPU found (as DeepSpeed's
 * CPU Adam and ggml do).
 *
 * What is here: the per-row and per-chunk loops that kernels_cpu.c (LayerNorm, GELU,
 * cross-entropy, residual adds, bias sums), attention_cpu.c (softmax rows, small
 * products, transposes), optim.c (AdamW), lossscale.c (unscale, inf/NaN check, squared
 * norm) and half.c (FP16 and BF16 conversion) split over OpenMP threads. Each path is
 * a table of function pointers;
 * simd_kernels_get() returns the one in use. Threading stays with the callers.
 *
 * Files: simd_portable.c (plain C, every CPU); simd_x86.h, one source for the vector
 * paths written against a few vector macros (with simd_tile_x86.h, the small-product
 * micro-kernel), compiled for 8 lanes by simd_avx2.c (AVX2 + FMA + F16C) and for 16
 * lanes by simd_avx512.c (AVX-512 F/BW/DQ/VL), which also holds the BF16 products'
 * one-pass epilogues (simd_epilogues_bf16, for a CPU with AVX512_BF16 too).
 *
 * Contract:
 *  - Every path computes the same function. Exactly the same bits for the elementwise
 *    products and quotients (adds, AdamW, unscale, FP16/BF16 conversion: IEEE
 *    operations in the same order); within a few float ulps where a path sums in
 *    another order or uses its own exp (LayerNorm, softmax, GELU, cross-entropy).
 *    Tests compare every path the CPU can run with the portable one.
 *  - simd_set_path() forces a path (tests, GENTRAIN_SIMD=portable|avx2|avx512|auto);
 *    asking for one the CPU lacks gives the widest one it has, with a warning.
 *  - No function allocates or fails. */
#ifndef GT_SIMD_H
#define GT_SIMD_H

#include <stddef.h>
#include <stdint.h>

enum simd_path { SIMD_AUTO = 0, SIMD_PORTABLE = 1, SIMD_AVX2 = 2, SIMD_AVX512 = 3 };

/* Constants of one AdamW update (optim.c): with gi = g * grad_scale,
 *   m = b1 m + omb1 gi;  v = b2 v + omb2 gi gi;
 *   p = p - (step_size m / (sqrt(v) inv_sqrt_c2 + eps) + decay p). */
typedef struct {
    float b1, b2, omb1, omb2, step_size, inv_sqrt_c2, eps, decay, grad_scale;
} simd_adamw_consts;

/* Columns a column-sum call covers at most (ln_wb_cols, colsum): a multiple of 16. */
#define SIMD_COL_BLOCK 64

typedef struct simd_kernels {
    const char *name; /* "portable", "avx2", "avx512" */
    /* out[n] = a[n] + b[n];  acc[n] += x[n] */
    void (*add)(float *out, const float *a, const float *b, size_t n);
    void (*acc)(float *acc, const float *x, size_t n);
    /* LayerNorm of one row x[C]: out = (x - mean) * rstd * w + b, eps 1e-5 */
    void (*ln_fwd_row)(float *out, float *mean, float *rstd, const float *x, const float *w,
                       const float *b, int C);
    /* dinp[C] += rstd * (dout*w - mean(dout*w) - xhat * mean(dout*w*xhat)) */
    void (*ln_bwd_row)(float *dinp, const float *dout, const float *x, const float *w,
                       float mean, float rstd, int C);
    /* dw[c0:c0+w] += sum_n dout[n,c] xhat[n,c]; db[...] += sum_n dout[n,c]; w <= 64;
     * rows summed in order (so the result does not depend on the thread count) */
    void (*ln_wb_cols)(float *dw, float *db, const float *dout, const float *inp,
                       const float *mean, const float *rstd, size_t N, int C, int c0, int w);
    /* acc[c0:c0+w] += sum over n of x[n*ld + c], rows in order; w <= 64 */
    void (*colsum)(float *acc, const float *x, size_t N, size_t ld, int c0, int w);
    /* s[0..len) becomes its softmax, s[len..T) = 0; returns the row's log-sum-exp,
     * max + log(sum of exp(s - max)), all attention's backward keeps of the row */
    float (*softmax_row)(float *s, int len, int T);
    /* d[j] = a[j] (d[j] - sum_k a[k] d[k]) for j < len; d[len..width) = 0 */
    void (*softmax_bwd_row)(float *d, const float *a, int len, int width);
    /* The softmax row rebuilt from its scores and log-sum-exp: s[j] = exp(s[j] - lse)
     * for j < len, s[len..width) = 0 */
    void (*softmax_row_lse)(float *s, int len, int width, float lse);
    /* A small product without packing, for operands already in cache (attention's, a
     * few KB per head): C[i, j] = alpha sum_p A(i, p) B(p, j) (+ C[i, j] when
     * accumulate) for i < m, j < n, p < k, tile_rows rows at a time, with
     * A(i, p) = a[i a_rs + p a_cs] (either layout) and B(p, j) = b[p ldb + j] (rows
     * contiguous). Each element's products are summed in order p = 0, 1, ... (one
     * fused multiply-add each on the vector paths), then multiplied by alpha, then
     * added to C. */
    int tile_rows;
    void (*gemm_tile)(int m, int n, int k, float alpha, const float *a, ptrdiff_t a_rs,
                      ptrdiff_t a_cs, const float *b, size_t ldb, float *c, size_t ldc,
                      int accumulate);
    /* dst[c ldd + r] = src[r lds + c] for r < rows, c < cols (gemm_tile's B operands
     * that are stored the other way round) */
    void (*transpose)(float *dst, size_t ldd, const float *src, size_t lds, int rows,
                      int cols);
    /* GELU (tanh form): out = gelu(x);  dinp += gelu'(x) dout */
    void (*gelu_fwd)(float *out, const float *x, size_t n);
    void (*gelu_bwd)(float *dinp, const float *x, const float *dout, size_t n);
    /* both of x at once, sharing the sigmoid: gelu_bwd's dinp and gelu_fwd's out (the
     * bits of the two calls): the MLP backward's one pass over its pre-activation */
    void (*gelu_bwd_fwd)(float *dinp, float *out, const float *x, const float *dout,
                         size_t n);
    /* -log softmax(x)[target] of one row x[V]; with g != NULL (may alias x) also
     * g = scale * (softmax(x) - onehot(target)) */
    float (*xent_row)(float *g, const float *x, int target, int V, float scale);
    /* AdamW on n elements (see simd_adamw_consts) */
    void (*adamw)(float *p, float *m, float *v, const float *g, size_t n,
                  const simd_adamw_consts *k);
    /* dst (+)= src * inv_scale; returns 1 when some src value is inf or NaN */
    int (*unscale)(float *dst, const float *src, size_t n, float inv_scale, int accumulate);
    /* sum of d[i]^2 in double (a fixed order for a given path and n) */
    double (*sumsq)(const float *d, size_t n);
    /* IEEE binary16 <-> float, round to nearest even (as F16C) */
    void (*half_from_float)(uint16_t *dst, const float *src, size_t n);
    void (*half_to_float)(float *dst, const uint16_t *src, size_t n);
    /* bfloat16 <-> float: round to nearest even, NaN stays a (quiet) NaN */
    void (*bf16_from_float)(uint16_t *dst, const float *src, size_t n);
    void (*bf16_to_float)(float *dst, const uint16_t *src, size_t n);
    /* x[i] = bf16_to_float(bf16_from_float(x[i])), in place */
    void (*bf16_round)(float *x, size_t n);
    /* the same from src into dst (a copy and its rounding in one pass; dst == src is
     * bf16_round) */
    void (*bf16_round_to)(float *dst, const float *src, size_t n);
} simd_kernels;

/* The vector twins exist where the compiler can target x86-64 vector extensions. */
#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__)
#define GT_SIMD_X86 1
#else
#define GT_SIMD_X86 0
#endif

/* ... and the AVX512_BF16 dot products (GCC 10, clang 9 and later know them) */
#if GT_SIMD_X86 && ((defined(__clang__) && __clang_major__ >= 9) || \
                    (!defined(__clang__) && __GNUC__ >= 10))
#define GT_SIMD_X86_BF16 1
#else
#define GT_SIMD_X86_BF16 0
#endif

/* ... and the AMX tile instructions (GCC 11, clang 12 and later know them) */
#if GT_SIMD_X86_BF16 && ((defined(__clang__) && __clang_major__ >= 12) || \
                         (!defined(__clang__) && __GNUC__ >= 11))
#define GT_SIMD_X86_AMX 1
#else
#define GT_SIMD_X86_AMX 0
#endif

/* The BF16 products' epilogues as a step runs them (gemm_bf16_epilogue.c), each in one
 * pass over a row piece where the passes of acc, bf16_store, bf16_widen, gelu_fwd and
 * gelu_bwd_fwd take two to five, each sending the row through memory again; the values
 * rounded to BF16 as bf16_store.h rounds (VCVTNEPS2BF16), GELU this path's, the sums in
 * the passes' order: the very bits of the passes. bias may be NULL (nothing added).
 *   gelu_fwd:      x = c + bias, gelu16 = bf16(gelu(x)), slope16 = bf16(gelu'(x)) (the
 *                  slope as gelu_bwd_fwd gives it on dout = 1 into zeros; slope16 may be
 *                  NULL: not wanted)
 *   gelu_bwd:      dpre16 = bf16(slope dout), slope = slope16 widened (exact)
 *   bias_store:    out16 = bf16(c + bias)
 *   bias_residual: c = (c + bias) + residual */
typedef struct simd_epilogues_bf16 {
    void (*gelu_fwd)(uint16_t *gelu16, uint16_t *slope16, const float *c, const float *bias,
                     size_t n);
    void (*gelu_bwd)(uint16_t *dpre16, const uint16_t *slope16, const float *dout, size_t n);
    void (*bias_store)(uint16_t *out16, const float *c, const float *bias, size_t n);
    void (*bias_residual)(float *c, const float *bias, const float *residual, size_t n);
} simd_epilogues_bf16;
extern const simd_kernels simd_kernels_portable;
#if GT_SIMD_X86
extern const simd_kernels simd_kernels_avx2;   /* needs CPU_ISA_AVX2 */
extern const simd_kernels simd_kernels_avx512; /* needs CPU_ISA_AVX512 */
#endif
#if GT_SIMD_X86_BF16
extern const simd_epilogues_bf16 simd_epilogues_bf16_avx512; /* needs CPU_ISA_AVX512_BF16 */
#endif

/* The one-pass epilogues where the path in use is avx512 and the CPU has AVX512_BF16
 * (its rounding instruction); NULL elsewhere, where the caller runs the passes. */
const simd_epilogues_bf16 *simd_epilogues_bf16_get(void);
/* The table in use (chosen at the first call: GENTRAIN_SIMD, else the widest). */
const simd_kernels *simd_kernels_get(void);
/* Forces a path; returns the one now in use. */
enum simd_path simd_set_path(enum simd_path want);
enum simd_path simd_get_path(void);
/* The widest path this CPU can run. */
enum simd_path simd_best_path(void);
/* The vector level (cpu_features.h's enum cpu_isa, as an int) a path's loops use:
 * CPU_ISA_AVX512, CPU_ISA_AVX2 or CPU_ISA_GENERIC (SIMD_AUTO: the path in use). */
int simd_path_level(enum simd_path path);
/* The table of a path (NULL for SIMD_AUTO), whether or not the CPU can run it (the
 * portable one for the vector paths of a build without them). */
const simd_kernels *simd_kernels_of(enum simd_path path);

#endif
