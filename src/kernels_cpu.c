/* kernels_cpu — see kernels_cpu.h for the contract.
 *
 * Layout of this file: SIMD path selection; AVX2+FMA helpers (vector exp, horizontal
 * reductions); then each layer: its per-row/per-chunk inner loops in a portable and an
 * AVX2 flavour, and the public kernel that splits the work over OpenMP threads.
 *
 * Determinism. Work is split with schedule(static) and every output element is
 * written by exactly one thread. Reductions across rows (LayerNorm dweight/dbias,
 * matmul dbias, encoder dwte/dwpe) are split over COLUMNS, each column summed over the
 * rows in ascending order, so they do not even depend on the thread count. Matrix
 * products are OpenBLAS sgemm, which does not split the inner dimension over threads.
 *
 * BLAS threading. The attention kernels call sgemm from inside their own parallel
 * region (one (batch, head) per iteration). The OpenMP build of OpenBLAS runs a call
 * made inside an active parallel region on the calling thread only, and a call made
 * outside one on all OpenMP threads, which is what we want. Any other OpenBLAS build
 * (pthreads) would start its own threads from every caller, so for those the
 * attention kernels pin BLAS to one thread around their parallel region. */
#include "kernels_cpu.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h> /* defines: cblas_sgemm (+ openblas_* with OpenBLAS) */

#include "backend.h"
#include "util.h" /* defines: gt_warn */

#ifdef _OPENMP
#include <omp.h>
#else
static int omp_get_max_threads(void) { return 1; }
static int omp_get_thread_num(void) { return 0; }
#endif

#if (defined(__GNUC__) || defined(__clang__)) && (defined(__x86_64__) || defined(__i386__))
#define GT_HAVE_AVX2 1
#include <immintrin.h>
#define GT_AVX2 __attribute__((target("avx2,fma")))
#else
#define GT_HAVE_AVX2 0
#endif

/* Below this many floats of work a kernel stays on one thread (fork/join costs more). */
#define PAR_MIN_WORK 16384
/* Elementwise kernels hand out chunks of this many floats (a multiple of 8). */
#define ELEM_CHUNK 8192
/* Column reductions work on blocks of this many columns (a multiple of 8). */
#define COL_BLOCK 64
/* Attention works on blocks of this many query rows, so the products skip the
 * all-masked upper-right blocks of the T x T score matrix. */
#ifndef ATT_ROW_BLOCK
#define ATT_ROW_BLOCK 64
#endif

static const float LN_EPS = 1e-5f;
static const float GELU_K0 = 0.7978845608028654f; /* sqrt(2/pi) */
static const float GELU_K1 = 0.044715f;

/* ------------------------------------------------------------------------------------ */
/* SIMD path selection */

static atomic_int g_simd = -1; /* enum kernels_simd once chosen; -1 before */

static int cpu_has_avx2(void)
{
#if GT_HAVE_AVX2
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
    return 0;
#endif
}

static enum kernels_simd resolve(enum kernels_simd want, int warn)
{
    if (want == KERNELS_SIMD_PORTABLE) return KERNELS_SIMD_PORTABLE;
    if (cpu_has_avx2()) return KERNELS_SIMD_AVX2;
    if (want == KERNELS_SIMD_AVX2 && warn)
        gt_warn("AVX2+FMA requested but this CPU (or build) lacks it; using portable "
                "kernels");
    return KERNELS_SIMD_PORTABLE;
}

static enum kernels_simd initial_simd(void)
{
    const char *env = getenv("GENTRAIN_SIMD");
    if (!env || !*env || strcmp(env, "auto") == 0) return resolve(KERNELS_SIMD_AUTO, 0);
    if (strcmp(env, "portable") == 0) return KERNELS_SIMD_PORTABLE;
    if (strcmp(env, "avx2") == 0) return resolve(KERNELS_SIMD_AVX2, 1);
    gt_warn("GENTRAIN_SIMD=%s not understood (portable|avx2|auto); choosing automatically",
            env);
    return resolve(KERNELS_SIMD_AUTO, 0);
}

static enum kernels_simd current_simd(void)
{
    int s = atomic_load_explicit(&g_simd, memory_order_relaxed);
    if (s < 0) {
        s = (int)initial_simd();
        atomic_store_explicit(&g_simd, s, memory_order_relaxed);
    }
    return (enum kernels_simd)s;
}

static int use_avx2(void) { return current_simd() == KERNELS_SIMD_AVX2; }

enum kernels_simd kernels_set_simd(enum kernels_simd want)
{
    enum kernels_simd s = resolve(want, 1);
    atomic_store_explicit(&g_simd, (int)s, memory_order_relaxed);
    return s;
}

const char *kernels_simd_name(void)
{
    return current_simd() == KERNELS_SIMD_AVX2 ? "avx2+fma" : "portable";
}

/* ------------------------------------------------------------------------------------ */
/* BLAS threading (see the header comment) */

#ifdef OPENBLAS_VERSION
/* Returns the BLAS thread count to restore, or 0 when nothing was changed. */
static int blas_single_begin(void)
{
    if (openblas_get_parallel() == OPENBLAS_OPENMP) return 0;
    int n = openblas_get_num_threads();
    if (n > 1) openblas_set_num_threads(1);
    return n > 1 ? n : 0;
}
static void blas_single_end(int saved)
{
    if (saved > 0) openblas_set_num_threads(saved);
}
#else
static int blas_single_begin(void) { return 0; }
static void blas_single_end(int saved) { (void)saved; }
#endif

/* ------------------------------------------------------------------------------------ */
/* AVX2 helpers */

#if GT_HAVE_AVX2
GT_AVX2 static inline float hsum8(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

GT_AVX2 static inline float hmax8(__m256 v)
{
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* e^x for 8 floats, within about 2 ulp of expf: x = n ln2 + r with |r| <= ln2/2,
 * e^r by its degree-7 Taylor polynomial (truncation < 1e-8 relative), 2^n through the
 * exponent bits. Inputs below -87 give 0 (expf gives at most 1.6e-38 there), inputs
 * above 88 are clamped (e^88 = 1.65e38), NaN stays NaN. */
GT_AVX2 static inline __m256 exp8(__m256 x)
{
    const __m256 lo = _mm256_set1_ps(-87.0f), hi = _mm256_set1_ps(88.0f);
    __m256 underflow = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
    __m256 xc = _mm256_min_ps(hi, _mm256_max_ps(lo, x)); /* NaN passes through */
    __m256 n = _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(1.4426950408889634f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    /* r = x - n*ln2, with ln2 split in a part exact in float and the rest */
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693145751953125f), xc);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(1.428606765330187e-06f), r);
    __m256 p = _mm256_set1_ps(1.0f / 5040.0f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 720.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n),
                                                   _mm256_set1_epi32(127)), 23);
    __m256 y = _mm256_mul_ps(p, _mm256_castsi256_ps(e));
    return _mm256_andnot_ps(underflow, y);
}

/* Scalar e^x with the same conventions as exp8, for the tails of vector loops. */
GT_AVX2 static inline float exp1(float x)
{
    return _mm256_cvtss_f32(exp8(_mm256_set1_ps(x)));
}
#endif

/* ------------------------------------------------------------------------------------ */
/* Work splitting helpers */

static inline int par_ok(size_t work) { return work >= PAR_MIN_WORK; }

/* ------------------------------------------------------------------------------------ */
/* Vector add: out[n] = a[n] + b[n] (residual, encoder) and acc[n] += x[n] */

static void add_portable(float *restrict out, const float *a, const float *b, size_t n)
{
    for (size_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}

static void acc_portable(float *restrict acc, const float *restrict x, size_t n)
{
    for (size_t i = 0; i < n; i++) acc[i] += x[i];
}

#if GT_HAVE_AVX2
GT_AVX2 static void add_avx2(float *restrict out, const float *a, const float *b, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(out + i, _mm256_add_ps(_mm256_loadu_ps(a + i),
                                                _mm256_loadu_ps(b + i)));
    for (; i < n; i++) out[i] = a[i] + b[i];
}

GT_AVX2 static void acc_avx2(float *restrict acc, const float *restrict x, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(acc + i, _mm256_add_ps(_mm256_loadu_ps(acc + i),
                                                _mm256_loadu_ps(x + i)));
    for (; i < n; i++) acc[i] += x[i];
}
#endif

static void vec_add(int avx, float *out, const float *a, const float *b, size_t n)
{
#if GT_HAVE_AVX2
    if (avx) {
        add_avx2(out, a, b, n);
        return;
    }
#endif
    (void)avx;
    add_portable(out, a, b, n);
}

static void vec_acc(int avx, float *acc, const float *x, size_t n)
{
#if GT_HAVE_AVX2
    if (avx) {
        acc_avx2(acc, x, n);
        return;
    }
#endif
    (void)avx;
    acc_portable(acc, x, n);
}

/* ------------------------------------------------------------------------------------ */
/* Encoder */

void encoder_forward(float *out, const int32_t *inp, const float *wte, const float *wpe,
                     int B, int T, int C)
{
    const int avx = use_avx2();
    const long rows = (long)B * T;
#pragma omp parallel for schedule(static) if (par_ok((size_t)rows * (size_t)C))
    for (long r = 0; r < rows; r++) {
        int t = (int)(r % T);
        vec_add(avx, out + (size_t)r * C, wte + (size_t)inp[r] * C, wpe + (size_t)t * C,
                (size_t)C);
    }
}

void encoder_backward(float *dwte, float *dwpe, const float *dout, const int32_t *inp,
                      int B, int T, int C)
{
    /* Split over column blocks: each thread owns columns [c0, c1) of dwte and dwpe
     * and walks every (b, t) in order, so the sums have one fixed order. */
    const int avx = use_avx2();
    const int nblk = (C + COL_BLOCK - 1) / COL_BLOCK;
#pragma omp parallel for schedule(static) if (par_ok((size_t)B * T * C))
    for (int blk = 0; blk < nblk; blk++) {
        int c0 = blk * COL_BLOCK, w = C - c0 < COL_BLOCK ? C - c0 : COL_BLOCK;
        for (int t = 0; t < T; t++) {
            float *dp = dwpe + (size_t)t * C + c0;
            for (int b = 0; b < B; b++) {
                size_t r = (size_t)b * T + t;
                const float *d = dout + r * C + c0;
                vec_acc(avx, dwte + (size_t)inp[r] * C + c0, d, (size_t)w);
                vec_acc(avx, dp, d, (size_t)w);
            }
        }
    }
}

/* ------------------------------------------------------------------------------------ */
/* LayerNorm */

static void ln_fwd_row_portable(float *restrict out, float *mean, float *rstd,
                                const float *restrict x, const float *restrict w,
                                const float *restrict b, int C)
{
    float s = 0.0f;
    for (int i = 0; i < C; i++) s += x[i];
    float m = s / (float)C;
    float v = 0.0f;
    for (int i = 0; i < C; i++) {
        float d = x[i] - m;
        v += d * d;
    }
    float rs = 1.0f / sqrtf(v / (float)C + LN_EPS);
    for (int i = 0; i < C; i++) out[i] = (x[i] - m) * rs * w[i] + b[i];
    *mean = m;
    *rstd = rs;
}

/* dinp[C] += rstd * (dout*w - mean(dout*w) - xhat * mean(dout*w*xhat)) */
static void ln_bwd_row_portable(float *restrict dinp, const float *restrict dout,
                                const float *restrict x, const float *restrict w, float m,
                                float rs, int C)
{
    float a = 0.0f, bb = 0.0f;
    for (int i = 0; i < C; i++) {
        float dn = dout[i] * w[i];
        a += dn;
        bb += dn * (x[i] - m) * rs;
    }
    a /= (float)C;
    bb /= (float)C;
    for (int i = 0; i < C; i++) {
        float xh = (x[i] - m) * rs;
        dinp[i] += rs * (dout[i] * w[i] - a - xh * bb);
    }
}

#if GT_HAVE_AVX2
GT_AVX2 static void ln_fwd_row_avx2(float *restrict out, float *mean, float *rstd,
                                    const float *restrict x, const float *restrict w,
                                    const float *restrict b, int C)
{
    __m256 s8 = _mm256_setzero_ps();
    int i = 0;
    for (; i + 8 <= C; i += 8) s8 = _mm256_add_ps(s8, _mm256_loadu_ps(x + i));
    float s = hsum8(s8);
    for (; i < C; i++) s += x[i];
    float m = s / (float)C;
    __m256 m8 = _mm256_set1_ps(m), v8 = _mm256_setzero_ps();
    for (i = 0; i + 8 <= C; i += 8) {
        __m256 d = _mm256_sub_ps(_mm256_loadu_ps(x + i), m8);
        v8 = _mm256_fmadd_ps(d, d, v8);
    }
    float v = hsum8(v8);
    for (; i < C; i++) v += (x[i] - m) * (x[i] - m);
    float rs = 1.0f / sqrtf(v / (float)C + LN_EPS);
    __m256 rs8 = _mm256_set1_ps(rs);
    for (i = 0; i + 8 <= C; i += 8) {
        __m256 xh = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), m8), rs8);
        _mm256_storeu_ps(out + i, _mm256_fmadd_ps(xh, _mm256_loadu_ps(w + i),
                                                  _mm256_loadu_ps(b + i)));
    }
    for (; i < C; i++) out[i] = (x[i] - m) * rs * w[i] + b[i];
    *mean = m;
    *rstd = rs;
}

GT_AVX2 static void ln_bwd_row_avx2(float *restrict dinp, const float *restrict dout,
                                    const float *restrict x, const float *restrict w,
                                    float m, float rs, int C)
{
    const __m256 m8 = _mm256_set1_ps(m), rs8 = _mm256_set1_ps(rs);
    __m256 a8 = _mm256_setzero_ps(), b8 = _mm256_setzero_ps();
    int i = 0;
    for (; i + 8 <= C; i += 8) {
        __m256 dn = _mm256_mul_ps(_mm256_loadu_ps(dout + i), _mm256_loadu_ps(w + i));
        __m256 xh = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), m8), rs8);
        a8 = _mm256_add_ps(a8, dn);
        b8 = _mm256_fmadd_ps(dn, xh, b8);
    }
    float a = hsum8(a8), bb = hsum8(b8);
    for (; i < C; i++) {
        float dn = dout[i] * w[i];
        a += dn;
        bb += dn * (x[i] - m) * rs;
    }
    a /= (float)C;
    bb /= (float)C;
    const __m256 na8 = _mm256_set1_ps(-a), bb8 = _mm256_set1_ps(bb);
    for (i = 0; i + 8 <= C; i += 8) {
        __m256 dn = _mm256_mul_ps(_mm256_loadu_ps(dout + i), _mm256_loadu_ps(w + i));
        __m256 xh = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), m8), rs8);
        __m256 g = _mm256_fnmadd_ps(xh, bb8, _mm256_add_ps(dn, na8));
        _mm256_storeu_ps(dinp + i, _mm256_fmadd_ps(g, rs8, _mm256_loadu_ps(dinp + i)));
    }
    for (; i < C; i++) {
        float xh = (x[i] - m) * rs;
        dinp[i] += rs * (dout[i] * w[i] - a - xh * bb);
    }
}
#endif

/* dw[c0:c0+w] += sum_n dout[n,c]*xhat[n,c]; db[...] += sum_n dout[n,c], rows in order. */
static void ln_wb_cols_portable(float *restrict dw, float *restrict db,
                                const float *restrict dout, const float *restrict inp,
                                const float *mean, const float *rstd, size_t N, int C,
                                int c0, int w)
{
    float aw[COL_BLOCK], ab[COL_BLOCK];
    for (int j = 0; j < w; j++) aw[j] = ab[j] = 0.0f;
    for (size_t n = 0; n < N; n++) {
        const float *d = dout + n * C + c0, *x = inp + n * C + c0;
        float m = mean[n], rs = rstd[n];
        for (int j = 0; j < w; j++) {
            aw[j] += d[j] * ((x[j] - m) * rs);
            ab[j] += d[j];
        }
    }
    for (int j = 0; j < w; j++) {
        dw[c0 + j] += aw[j];
        db[c0 + j] += ab[j];
    }
}

#if GT_HAVE_AVX2
GT_AVX2 static void ln_wb_cols_avx2(float *restrict dw, float *restrict db,
                                    const float *restrict dout, const float *restrict inp,
                                    const float *mean, const float *rstd, size_t N, int C,
                                    int c0, int w)
{
    if (w != COL_BLOCK) { /* the last, narrow block */
        ln_wb_cols_portable(dw, db, dout, inp, mean, rstd, N, C, c0, w);
        return;
    }
    __m256 aw[COL_BLOCK / 8], ab[COL_BLOCK / 8];
    for (int k = 0; k < COL_BLOCK / 8; k++) aw[k] = ab[k] = _mm256_setzero_ps();
    for (size_t n = 0; n < N; n++) {
        const float *d = dout + n * C + c0, *x = inp + n * C + c0;
        __m256 m8 = _mm256_set1_ps(mean[n]), rs8 = _mm256_set1_ps(rstd[n]);
        for (int k = 0; k < COL_BLOCK / 8; k++) {
            __m256 dv = _mm256_loadu_ps(d + 8 * k);
            __m256 xh = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x + 8 * k), m8), rs8);
            aw[k] = _mm256_fmadd_ps(dv, xh, aw[k]);
            ab[k] = _mm256_add_ps(ab[k], dv);
        }
    }
    for (int k = 0; k < COL_BLOCK / 8; k++) {
        _mm256_storeu_ps(dw + c0 + 8 * k, _mm256_add_ps(_mm256_loadu_ps(dw + c0 + 8 * k), aw[k]));
        _mm256_storeu_ps(db + c0 + 8 * k, _mm256_add_ps(_mm256_loadu_ps(db + c0 + 8 * k), ab[k]));
    }
}
#endif

void layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
                       const float *w, const float *b, size_t N, int C)
{
    const int avx = use_avx2();
    (void)avx;
#pragma omp parallel for schedule(static) if (par_ok(N * (size_t)C))
    for (size_t n = 0; n < N; n++) {
#if GT_HAVE_AVX2
        if (avx)
            ln_fwd_row_avx2(out + n * C, mean + n, rstd + n, inp + n * C, w, b, C);
        else
#endif
            ln_fwd_row_portable(out + n * C, mean + n, rstd + n, inp + n * C, w, b, C);
    }
}

void layernorm_backward(float *dinp, float *dw, float *db, const float *dout,
                        const float *inp, const float *w, const float *mean,
                        const float *rstd, size_t N, int C)
{
    const int avx = use_avx2();
    (void)avx;
    const int nblk = (C + COL_BLOCK - 1) / COL_BLOCK;
#pragma omp parallel if (par_ok(N * (size_t)C))
    {
        /* rows: dinp */
#pragma omp for schedule(static) nowait
        for (size_t n = 0; n < N; n++) {
#if GT_HAVE_AVX2
            if (avx)
                ln_bwd_row_avx2(dinp + n * C, dout + n * C, inp + n * C, w, mean[n],
                                rstd[n], C);
            else
#endif
                ln_bwd_row_portable(dinp + n * C, dout + n * C, inp + n * C, w, mean[n],
                                    rstd[n], C);
        }
        /* columns: dw, db (reads only, so no barrier is needed between the loops) */
#pragma omp for schedule(static)
        for (int blk = 0; blk < nblk; blk++) {
            int c0 = blk * COL_BLOCK, wd = C - c0 < COL_BLOCK ? C - c0 : COL_BLOCK;
#if GT_HAVE_AVX2
            if (avx)
                ln_wb_cols_avx2(dw, db, dout, inp, mean, rstd, N, C, c0, wd);
            else
#endif
                ln_wb_cols_portable(dw, db, dout, inp, mean, rstd, N, C, c0, wd);
        }
    }
}

/* ------------------------------------------------------------------------------------ */
/* Matmul */

void matmul_forward(float *out, const float *inp, const float *w, const float *bias,
                    size_t N, int C, int OC)
{
    /* out = bias (broadcast), then out += inp @ w^T in one sgemm with beta = 1: one
     * pass over out fewer than adding the bias afterwards. */
    float beta = 0.0f;
    if (bias) {
#pragma omp parallel for schedule(static) if (par_ok(N * (size_t)OC))
        for (size_t n = 0; n < N; n++) memcpy(out + n * OC, bias, (size_t)OC * sizeof *out);
        beta = 1.0f;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)N, OC, C, 1.0f, inp, C, w, C,
                beta, out, OC);
}

static void colsum_portable(float *restrict acc, const float *restrict x, size_t N,
                            size_t ld, int c0, int w)
{
    float a[COL_BLOCK];
    for (int j = 0; j < w; j++) a[j] = 0.0f;
    for (size_t n = 0; n < N; n++) {
        const float *r = x + n * ld + c0;
        for (int j = 0; j < w; j++) a[j] += r[j];
    }
    for (int j = 0; j < w; j++) acc[c0 + j] += a[j];
}

#if GT_HAVE_AVX2
GT_AVX2 static void colsum_avx2(float *restrict acc, const float *restrict x, size_t N,
                                size_t ld, int c0, int w)
{
    if (w != COL_BLOCK) {
        colsum_portable(acc, x, N, ld, c0, w);
        return;
    }
    __m256 a[COL_BLOCK / 8];
    for (int k = 0; k < COL_BLOCK / 8; k++) a[k] = _mm256_setzero_ps();
    for (size_t n = 0; n < N; n++) {
        const float *r = x + n * ld + c0;
        for (int k = 0; k < COL_BLOCK / 8; k++)
            a[k] = _mm256_add_ps(a[k], _mm256_loadu_ps(r + 8 * k));
    }
    for (int k = 0; k < COL_BLOCK / 8; k++)
        _mm256_storeu_ps(acc + c0 + 8 * k, _mm256_add_ps(_mm256_loadu_ps(acc + c0 + 8 * k), a[k]));
}
#endif

void matmul_backward(float *dinp, float *dw, float *dbias, const float *dout,
                     const float *inp, const float *w, size_t N, int C, int OC)
{
    /* dinp[N,C] += dout[N,OC] @ w[OC,C] */
    if (dinp)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)N, C, OC, 1.0f, dout,
                    OC, w, C, 1.0f, dinp, C);
    /* dw[OC,C] += dout^T @ inp[N,C] */
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, OC, C, (int)N, 1.0f, dout, OC,
                inp, C, 1.0f, dw, C);
    if (dbias) {
        const int avx = use_avx2();
        (void)avx;
        const int nblk = (OC + COL_BLOCK - 1) / COL_BLOCK;
#pragma omp parallel for schedule(static) if (par_ok(N * (size_t)OC))
        for (int blk = 0; blk < nblk; blk++) {
            int c0 = blk * COL_BLOCK, wd = OC - c0 < COL_BLOCK ? OC - c0 : COL_BLOCK;
#if GT_HAVE_AVX2
            if (avx)
                colsum_avx2(dbias, dout, N, (size_t)OC, c0, wd);
            else
#endif
                colsum_portable(dbias, dout, N, (size_t)OC, c0, wd);
        }
    }
}

/* ------------------------------------------------------------------------------------ */
/* Attention */

/* Row i of the scores, s[0..i] (already scaled), becomes its softmax; s[i+1..T) = 0. */
static void att_softmax_row_portable(float *s, int len, int T)
{
    float mx = s[0];
    for (int j = 1; j < len; j++) mx = s[j] > mx ? s[j] : mx;
    float sum = 0.0f;
    for (int j = 0; j < len; j++) {
        s[j] = expf(s[j] - mx);
        sum += s[j];
    }
    float inv = 1.0f / sum;
    for (int j = 0; j < len; j++) s[j] *= inv;
    for (int j = len; j < T; j++) s[j] = 0.0f;
}

/* d[j] = a[j] * (d[j] - sum_k a[k] d[k]) for j < len; d[len..width) = 0. */
static void att_softmax_bwd_row_portable(float *d, const float *a, int len, int width)
{
    float s = 0.0f;
    for (int j = 0; j < len; j++) s += a[j] * d[j];
    for (int j = 0; j < len; j++) d[j] = a[j] * (d[j] - s);
    for (int j = len; j < width; j++) d[j] = 0.0f;
}

#if GT_HAVE_AVX2
GT_AVX2 static void att_softmax_row_avx2(float *s, int len, int T)
{
    int j = 0;
    __m256 mx8 = _mm256_set1_ps(s[0]);
    for (; j + 8 <= len; j += 8) mx8 = _mm256_max_ps(mx8, _mm256_loadu_ps(s + j));
    float mx = hmax8(mx8);
    for (; j < len; j++) mx = s[j] > mx ? s[j] : mx;
    const __m256 m8 = _mm256_set1_ps(mx);
    __m256 sum8 = _mm256_setzero_ps();
    for (j = 0; j + 8 <= len; j += 8) {
        __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(s + j), m8));
        _mm256_storeu_ps(s + j, e);
        sum8 = _mm256_add_ps(sum8, e);
    }
    float sum = hsum8(sum8);
    for (; j < len; j++) {
        s[j] = exp1(s[j] - mx);
        sum += s[j];
    }
    const float inv = 1.0f / sum;
    const __m256 inv8 = _mm256_set1_ps(inv);
    for (j = 0; j + 8 <= len; j += 8)
        _mm256_storeu_ps(s + j, _mm256_mul_ps(_mm256_loadu_ps(s + j), inv8));
    for (; j < len; j++) s[j] *= inv;
    for (j = len; j < T; j++) s[j] = 0.0f;
}

GT_AVX2 static void att_softmax_bwd_row_avx2(float *d, const float *a, int len, int width)
{
    __m256 s8 = _mm256_setzero_ps();
    int j = 0;
    for (; j + 8 <= len; j += 8)
        s8 = _mm256_fmadd_ps(_mm256_loadu_ps(a + j), _mm256_loadu_ps(d + j), s8);
    float s = hsum8(s8);
    for (; j < len; j++) s += a[j] * d[j];
    const __m256 ss = _mm256_set1_ps(s);
    for (j = 0; j + 8 <= len; j += 8)
        _mm256_storeu_ps(d + j, _mm256_mul_ps(_mm256_loadu_ps(a + j),
                                              _mm256_sub_ps(_mm256_loadu_ps(d + j), ss)));
    for (; j < len; j++) d[j] = a[j] * (d[j] - s);
    for (j = len; j < width; j++) d[j] = 0.0f;
}
#endif

/* One (batch, head): rows of q/k/v have stride 3C, rows of out stride C. */
static void att_fwd_head(int avx, float *out, float *a, const float *q, int T, int C,
                         int hs)
{
    const float *k = q + C, *v = q + 2 * C;
    const int ld = 3 * C;
    const float scale = 1.0f / sqrtf((float)hs);
    for (int r0 = 0; r0 < T; r0 += ATT_ROW_BLOCK) {
        int r1 = r0 + ATT_ROW_BLOCK < T ? r0 + ATT_ROW_BLOCK : T, m = r1 - r0;
        /* a[r0:r1, 0:r1] = scale * q[r0:r1] @ k[0:r1]^T */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, r1, hs, scale,
                    q + (size_t)r0 * ld, ld, k, ld, 0.0f, a + (size_t)r0 * T, T);
        for (int i = r0; i < r1; i++) {
#if GT_HAVE_AVX2
            if (avx)
                att_softmax_row_avx2(a + (size_t)i * T, i + 1, T);
            else
#endif
                att_softmax_row_portable(a + (size_t)i * T, i + 1, T);
        }
        /* out[r0:r1] = a[r0:r1, 0:r1] @ v[0:r1] */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, hs, r1, 1.0f,
                    a + (size_t)r0 * T, T, v, ld, 0.0f, out + (size_t)r0 * C, C);
    }
    (void)avx;
}

static void att_bwd_head(int avx, float *dq, const float *dout, const float *q,
                         const float *a, float *d, int T, int C, int hs)
{
    const float *k = q + C, *v = q + 2 * C;
    float *dk = dq + C, *dv = dq + 2 * C;
    const int ld = 3 * C;
    const float scale = 1.0f / sqrtf((float)hs);
    for (int r0 = 0; r0 < T; r0 += ATT_ROW_BLOCK) {
        int r1 = r0 + ATT_ROW_BLOCK < T ? r0 + ATT_ROW_BLOCK : T, m = r1 - r0;
        const float *ab = a + (size_t)r0 * T, *dob = dout + (size_t)r0 * C;
        float *db = d + (size_t)r0 * T;
        /* datt[r0:r1, 0:r1] = dout[r0:r1] @ v[0:r1]^T */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, r1, hs, 1.0f, dob, C, v,
                    ld, 0.0f, db, T);
        /* dv[0:r1] += a[r0:r1, 0:r1]^T @ dout[r0:r1] */
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, r1, hs, m, 1.0f, ab, T, dob,
                    C, 1.0f, dv, ld);
        /* dpre = a * (datt - rowsum(a * datt)), in place */
        for (int i = r0; i < r1; i++) {
#if GT_HAVE_AVX2
            if (avx)
                att_softmax_bwd_row_avx2(d + (size_t)i * T, a + (size_t)i * T, i + 1, r1);
            else
#endif
                att_softmax_bwd_row_portable(d + (size_t)i * T, a + (size_t)i * T, i + 1,
                                             r1);
        }
        /* dq[r0:r1] += scale * dpre @ k[0:r1] */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, hs, r1, scale, db, T, k,
                    ld, 1.0f, dq + (size_t)r0 * ld, ld);
        /* dk[0:r1] += scale * dpre^T @ q[r0:r1] */
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, r1, hs, m, scale, db, T,
                    q + (size_t)r0 * ld, ld, 1.0f, dk, ld);
    }
    (void)avx;
}

void attention_forward(float *out, float *att, const float *qkv, int B, int T, int C,
                       int NH)
{
    const int avx = use_avx2();
    const int hs = C / NH, jobs = B * NH;
    /* With fewer heads than threads, stay serial and let sgemm use the threads. */
    const int par = jobs >= omp_get_max_threads() && jobs > 1;
    const int saved = par ? blas_single_begin() : 0;
#pragma omp parallel for schedule(static) if (par)
    for (int j = 0; j < jobs; j++) {
        int b = j / NH, h = j % NH;
        att_fwd_head(avx, out + (size_t)b * T * C + (size_t)h * hs,
                     att + (size_t)j * T * T, qkv + (size_t)b * T * 3 * C + (size_t)h * hs,
                     T, C, hs);
    }
    blas_single_end(saved);
}

size_t attention_scratch_floats(int T, int threads)
{
    return (size_t)(threads > 0 ? threads : 1) * (size_t)T * (size_t)T;
}

void attention_backward(float *dqkv, const float *dout, const float *qkv,
                        const float *att, float *scratch, int B, int T, int C, int NH)
{
    const int avx = use_avx2();
    const int hs = C / NH, jobs = B * NH;
    const int par = jobs >= omp_get_max_threads() && jobs > 1;
    const int saved = par ? blas_single_begin() : 0;
#pragma omp parallel for schedule(static) if (par)
    for (int j = 0; j < jobs; j++) {
        int b = j / NH, h = j % NH;
        size_t qoff = (size_t)b * T * 3 * C + (size_t)h * hs;
        float *d = scratch + (size_t)omp_get_thread_num() * T * T;
        att_bwd_head(avx, dqkv + qoff, dout + (size_t)b * T * C + (size_t)h * hs,
                     qkv + qoff, att + (size_t)j * T * T, d, T, C, hs);
    }
    blas_single_end(saved);
}

/* ------------------------------------------------------------------------------------ */
/* GELU: 0.5 x (1 + tanh(u)) with u = sqrt(2/pi) (x + 0.044715 x^3). Since
 * 0.5 (1 + tanh(u)) = sigmoid(2u), gelu(x) = x * s with s = 1 / (1 + e^(-2u)), and
 * gelu'(x) = s + 2 x s (1 - s) du/dx: one exp and one division per element, accurate
 * to float rounding everywhere (no cancellation near 0, saturates cleanly).
 * Where -2u > GELU_CUT (x < -7.35) s is set to exactly 0 (it is below 4e-18 there):
 * otherwise s and the products with it sink into denormal floats, which cost the CPU
 * a microcode assist each (measured 2.5x slower on pre-activations spread over
 * [-20, 20]). For the same reason the argument of exp is clamped before the division,
 * and the portable path keeps expf away from its slow underflow branch (t >= -80,
 * where 1 + e^t is 1 in float anyway). */
#define GELU_CUT 40.0f

static void gelu_fwd_portable(float *restrict out, const float *restrict x, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float xi = x[i];
        float t = -2.0f * GELU_K0 * xi * (1.0f + GELU_K1 * xi * xi);
        float s = 1.0f / (1.0f + expf(fmaxf(fminf(t, GELU_CUT), -80.0f)));
        out[i] = t > GELU_CUT ? 0.0f : xi * s;
    }
}

static void gelu_bwd_portable(float *restrict dinp, const float *restrict x,
                              const float *restrict dout, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float xi = x[i], x2 = xi * xi;
        float t = -2.0f * GELU_K0 * xi * (1.0f + GELU_K1 * x2);
        float s = 1.0f / (1.0f + expf(fmaxf(fminf(t, GELU_CUT), -80.0f)));
        s = t > GELU_CUT ? 0.0f : s;
        float du = GELU_K0 * (1.0f + 3.0f * GELU_K1 * x2);
        float g = s + 2.0f * xi * s * (1.0f - s) * du;
        dinp[i] += g * dout[i];
    }
}

#if GT_HAVE_AVX2
/* s = sigmoid(2u(x)) for 8 lanes (0 where -2u > GELU_CUT); also returns x^2 in *x2 */
GT_AVX2 static inline __m256 gelu_s8(__m256 x, __m256 *x2)
{
    const __m256 one = _mm256_set1_ps(1.0f);
    __m256 xx = _mm256_mul_ps(x, x);
    __m256 t = _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(-2.0f * GELU_K0), x),
                             _mm256_fmadd_ps(_mm256_set1_ps(GELU_K1), xx, one));
    __m256 cut = _mm256_cmp_ps(t, _mm256_set1_ps(GELU_CUT), _CMP_GT_OQ);
    *x2 = xx;
    /* clamped first: the division must not produce a denormal even in masked lanes */
    t = _mm256_min_ps(t, _mm256_set1_ps(GELU_CUT));
    __m256 s = _mm256_div_ps(one, _mm256_add_ps(one, exp8(t)));
    return _mm256_andnot_ps(cut, s);
}

GT_AVX2 static void gelu_fwd_avx2(float *restrict out, const float *restrict x, size_t n)
{
    size_t i = 0;
    __m256 x2;
    for (; i + 8 <= n; i += 8) {
        __m256 xv = _mm256_loadu_ps(x + i);
        _mm256_storeu_ps(out + i, _mm256_mul_ps(xv, gelu_s8(xv, &x2)));
    }
    if (i < n) { /* tail through one padded vector */
        float buf[8] = {0};
        memcpy(buf, x + i, (n - i) * sizeof *buf);
        __m256 xv = _mm256_loadu_ps(buf);
        _mm256_storeu_ps(buf, _mm256_mul_ps(xv, gelu_s8(xv, &x2)));
        memcpy(out + i, buf, (n - i) * sizeof *buf);
    }
}

GT_AVX2 static inline __m256 gelu_grad8(__m256 xv)
{
    const __m256 one = _mm256_set1_ps(1.0f);
    __m256 x2;
    __m256 s = gelu_s8(xv, &x2);
    __m256 du = _mm256_fmadd_ps(_mm256_set1_ps(3.0f * GELU_K0 * GELU_K1), x2,
                                _mm256_set1_ps(GELU_K0));
    __m256 t = _mm256_mul_ps(_mm256_mul_ps(_mm256_add_ps(xv, xv), s),
                             _mm256_mul_ps(_mm256_sub_ps(one, s), du));
    return _mm256_add_ps(s, t);
}

GT_AVX2 static void gelu_bwd_avx2(float *restrict dinp, const float *restrict x,
                                  const float *restrict dout, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 g = gelu_grad8(_mm256_loadu_ps(x + i));
        _mm256_storeu_ps(dinp + i, _mm256_fmadd_ps(g, _mm256_loadu_ps(dout + i),
                                                   _mm256_loadu_ps(dinp + i)));
    }
    if (i < n) {
        float bx[8] = {0}, bg[8];
        memcpy(bx, x + i, (n - i) * sizeof *bx);
        _mm256_storeu_ps(bg, gelu_grad8(_mm256_loadu_ps(bx)));
        for (size_t k = 0; i + k < n; k++) dinp[i + k] += bg[k] * dout[i + k];
    }
}
#endif

void gelu_forward(float *out, const float *inp, size_t N)
{
    const int avx = use_avx2();
    (void)avx;
    const size_t nch = (N + ELEM_CHUNK - 1) / ELEM_CHUNK;
#pragma omp parallel for schedule(static) if (par_ok(N))
    for (size_t c = 0; c < nch; c++) {
        size_t i0 = c * ELEM_CHUNK, n = N - i0 < ELEM_CHUNK ? N - i0 : ELEM_CHUNK;
#if GT_HAVE_AVX2
        if (avx)
            gelu_fwd_avx2(out + i0, inp + i0, n);
        else
#endif
            gelu_fwd_portable(out + i0, inp + i0, n);
    }
}

void gelu_backward(float *dinp, const float *inp, const float *dout, size_t N)
{
    const int avx = use_avx2();
    (void)avx;
    const size_t nch = (N + ELEM_CHUNK - 1) / ELEM_CHUNK;
#pragma omp parallel for schedule(static) if (par_ok(N))
    for (size_t c = 0; c < nch; c++) {
        size_t i0 = c * ELEM_CHUNK, n = N - i0 < ELEM_CHUNK ? N - i0 : ELEM_CHUNK;
#if GT_HAVE_AVX2
        if (avx)
            gelu_bwd_avx2(dinp + i0, inp + i0, dout + i0, n);
        else
#endif
            gelu_bwd_portable(dinp + i0, inp + i0, dout + i0, n);
    }
}

/* ------------------------------------------------------------------------------------ */
/* Residual */

void residual_forward(float *out, const float *a, const float *b, size_t N)
{
    const int avx = use_avx2();
    const size_t nch = (N + ELEM_CHUNK - 1) / ELEM_CHUNK;
#pragma omp parallel for schedule(static) if (par_ok(N))
    for (size_t c = 0; c < nch; c++) {
        size_t i0 = c * ELEM_CHUNK, n = N - i0 < ELEM_CHUNK ? N - i0 : ELEM_CHUNK;
        vec_add(avx, out + i0, a + i0, b + i0, n);
    }
}

void residual_backward(float *da, float *db, const float *dout, size_t N)
{
    const int avx = use_avx2();
    const size_t nch = (N + ELEM_CHUNK - 1) / ELEM_CHUNK;
#pragma omp parallel for schedule(static) if (par_ok(N))
    for (size_t c = 0; c < nch; c++) {
        size_t i0 = c * ELEM_CHUNK, n = N - i0 < ELEM_CHUNK ? N - i0 : ELEM_CHUNK;
        vec_acc(avx, da + i0, dout + i0, n);
        vec_acc(avx, db + i0, dout + i0, n);
    }
}

/* ------------------------------------------------------------------------------------ */
/* Cross-entropy */

/* Loss of one row; with g != NULL also writes g[V] = scale * (softmax - onehot).
 * g may alias x. */
static float xent_row_portable(float *g, const float *x, int target, int V, float scale)
{
    float mx = x[0];
    for (int j = 1; j < V; j++) mx = x[j] > mx ? x[j] : mx;
    const float xt = x[target];
    float sum = 0.0f;
    if (g) {
        for (int j = 0; j < V; j++) {
            g[j] = expf(x[j] - mx);
            sum += g[j];
        }
        float k = scale / sum;
        for (int j = 0; j < V; j++) g[j] *= k;
        g[target] -= scale;
    } else {
        for (int j = 0; j < V; j++) sum += expf(x[j] - mx);
    }
    return logf(sum) - (xt - mx);
}

#if GT_HAVE_AVX2
GT_AVX2 static float xent_row_avx2(float *g, const float *x, int target, int V, float scale)
{
    int j = 0;
    __m256 mx8 = _mm256_set1_ps(x[0]);
    for (; j + 8 <= V; j += 8) mx8 = _mm256_max_ps(mx8, _mm256_loadu_ps(x + j));
    float mx = hmax8(mx8);
    for (; j < V; j++) mx = x[j] > mx ? x[j] : mx;
    const float xt = x[target];
    const __m256 m8 = _mm256_set1_ps(mx);
    __m256 s8 = _mm256_setzero_ps();
    float sum;
    if (g) {
        for (j = 0; j + 8 <= V; j += 8) {
            __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(x + j), m8));
            _mm256_storeu_ps(g + j, e);
            s8 = _mm256_add_ps(s8, e);
        }
        sum = hsum8(s8);
        for (; j < V; j++) {
            g[j] = exp1(x[j] - mx);
            sum += g[j];
        }
        const float k = scale / sum;
        const __m256 k8 = _mm256_set1_ps(k);
        for (j = 0; j + 8 <= V; j += 8)
            _mm256_storeu_ps(g + j, _mm256_mul_ps(_mm256_loadu_ps(g + j), k8));
        for (; j < V; j++) g[j] *= k;
        g[target] -= scale;
    } else {
        for (j = 0; j + 8 <= V; j += 8)
            s8 = _mm256_add_ps(s8, exp8(_mm256_sub_ps(_mm256_loadu_ps(x + j), m8)));
        sum = hsum8(s8);
        for (; j < V; j++) sum += exp1(x[j] - mx);
    }
    return logf(sum) - (xt - mx);
}
#endif

static void xent(float *losses, float *g, const float *logits, const int32_t *targets,
                 size_t N, int V, float scale)
{
    const int avx = use_avx2();
    (void)avx;
#pragma omp parallel for schedule(static) if (par_ok(N * (size_t)V))
    for (size_t n = 0; n < N; n++) {
        float *gr = g ? g + n * V : NULL;
#if GT_HAVE_AVX2
        if (avx)
            losses[n] = xent_row_avx2(gr, logits + n * V, targets[n], V, scale);
        else
#endif
            losses[n] = xent_row_portable(gr, logits + n * V, targets[n], V, scale);
    }
}

void crossentropy_forward(float *losses, const float *logits, const int32_t *targets,
                          size_t N, int V)
{
    xent(losses, NULL, logits, targets, N, V, 0.0f);
}

void crossentropy_forward_backward(float *losses, float *logits, const int32_t *targets,
                                   size_t N, int V, float dloss_scale)
{
    xent(losses, logits, logits, targets, N, V, dloss_scale);
}

/* ------------------------------------------------------------------------------------ */

const gt_backend backend_cpu = {
    .name = "cpu",
    .encoder_forward = encoder_forward,
    .encoder_backward = encoder_backward,
    .layernorm_forward = layernorm_forward,
    .layernorm_backward = layernorm_backward,
    .matmul_forward = matmul_forward,
    .matmul_backward = matmul_backward,
    .attention_forward = attention_forward,
    .attention_scratch_floats = attention_scratch_floats,
    .attention_backward = attention_backward,
    .gelu_forward = gelu_forward,
    .gelu_backward = gelu_backward,
    .residual_forward = residual_forward,
    .residual_backward = residual_backward,
    .crossentropy_forward = crossentropy_forward,
    .crossentropy_forward_backward = crossentropy_forward_backward,
    .encoder_forward_shard = encoder_forward_shard,
    .encoder_backward_shard = encoder_backward_shard,
    .xent_shard_max = xent_shard_max,
    .xent_shard_sums = xent_shard_sums,
    .xent_shard_finish = xent_shard_finish,
};
