/* simd_portable — the plain C version of every loop in simd.h: the reference the
 * vector twins are tested against, and the path of a CPU without AVX2. Written for
 * clarity first; the compiler vectorises what it can for the baseline ISA. */
#include <math.h>
#include <string.h>

#include "half.h" /* defines: half_from_float_scalar, half_to_float_scalar */
#include "simd.h"

static const float LN_EPS = 1e-5f;
static const float GELU_K0 = 0.7978845608028654f; /* sqrt(2/pi) */
static const float GELU_K1 = 0.044715f;
/* GELU: where -2u(x) > GELU_CUT the sigmoid is set to exactly 0 (see simd_x86.h) */
#define GELU_CUT 40.0f

static void add_p(float *restrict out, const float *a, const float *b, size_t n)
{
    for (size_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}

static void acc_p(float *restrict acc, const float *restrict x, size_t n)
{
    for (size_t i = 0; i < n; i++) acc[i] += x[i];
}

static void ln_fwd_row_p(float *restrict out, float *mean, float *rstd,
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

static void ln_bwd_row_p(float *restrict dinp, const float *restrict dout,
                         const float *restrict x, const float *restrict w, float m, float rs,
                         int C)
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

static void ln_wb_cols_p(float *restrict dw, float *restrict db, const float *restrict dout,
                         const float *restrict inp, const float *mean, const float *rstd,
                         size_t N, int C, int c0, int w)
{
    float aw[SIMD_COL_BLOCK], ab[SIMD_COL_BLOCK];
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

static void colsum_p(float *restrict acc, const float *restrict x, size_t N, size_t ld,
                     int c0, int w)
{
    float a[SIMD_COL_BLOCK];
    for (int j = 0; j < w; j++) a[j] = 0.0f;
    for (size_t n = 0; n < N; n++) {
        const float *r = x + n * ld + c0;
        for (int j = 0; j < w; j++) a[j] += r[j];
    }
    for (int j = 0; j < w; j++) acc[c0 + j] += a[j];
}

static float softmax_row_p(float *s, int len, int T)
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
    return mx + logf(sum);
}

static void softmax_row_lse_p(float *s, int len, int width, float lse)
{
    for (int j = 0; j < len; j++) s[j] = expf(s[j] - lse);
    for (int j = len; j < width; j++) s[j] = 0.0f;
}

/* TILE_ROWS rows at a time, over chunks of TILE_COLS columns held in a local block, so
 * the inner loop (over columns) is one the compiler can vectorize */
enum { TILE_ROWS = 4, TILE_COLS = 64 };

/* m <= TILE_ROWS rows of gemm_tile_p, acc the caller's block */
static void gemm_tile_rows(int m, int n, int k, float alpha, const float *a,
                           ptrdiff_t a_rs, ptrdiff_t a_cs, const float *b, size_t ldb,
                           float *c, size_t ldc, int accumulate,
                           float acc[TILE_ROWS][TILE_COLS])
{
    for (int j0 = 0; j0 < n; j0 += TILE_COLS) {
        const int nn = n - j0 < TILE_COLS ? n - j0 : TILE_COLS;
        for (int i = 0; i < m; i++)
            for (int j = 0; j < nn; j++) acc[i][j] = 0.0f;
        for (int p = 0; p < k; p++) {
            const float *bp = b + (size_t)p * ldb + j0;
            for (int i = 0; i < m; i++) {
                const float ai = a[i * a_rs + p * a_cs];
                for (int j = 0; j < nn; j++) acc[i][j] += ai * bp[j];
            }
        }
        for (int i = 0; i < m; i++) {
            float *cr = c + (size_t)i * ldc + j0;
            for (int j = 0; j < nn; j++)
                cr[j] = accumulate ? alpha * acc[i][j] + cr[j] : alpha * acc[i][j];
        }
    }
}

static void transpose_p(float *dst, size_t ldd, const float *src, size_t lds, int rows,
                        int cols)
{
    for (int r0 = 0; r0 < rows; r0 += 16) /* 16 x 16 blocks: both sides stay in cache */
        for (int c0 = 0; c0 < cols; c0 += 16) {
            const int r1 = r0 + 16 < rows ? r0 + 16 : rows, c1 = c0 + 16 < cols ? c0 + 16 : cols;
            for (int c = c0; c < c1; c++)
                for (int r = r0; r < r1; r++) dst[(size_t)c * ldd + r] = src[(size_t)r * lds + c];
        }
}

static void gemm_tile_p(int m, int n, int k, float alpha, const float *a, ptrdiff_t a_rs,
                        ptrdiff_t a_cs, const float *b, size_t ldb, float *c, size_t ldc,
                        int accumulate)
{
    float acc[TILE_ROWS][TILE_COLS];
    for (int i0 = 0; i0 < m; i0 += TILE_ROWS)
        gemm_tile_rows(m - i0 < TILE_ROWS ? m - i0 : TILE_ROWS, n, k, alpha, a + i0 * a_rs,
                       a_rs, a_cs, b, ldb, c + (size_t)i0 * ldc, ldc, accumulate, acc);
}

static void softmax_bwd_row_p(float *d, const float *a, int len, int width)
{
    float s = 0.0f;
    for (int j = 0; j < len; j++) s += a[j] * d[j];
    for (int j = 0; j < len; j++) d[j] = a[j] * (d[j] - s);
    for (int j = len; j < width; j++) d[j] = 0.0f;
}

/* gelu(x) = x s with s = sigmoid(2u), u = K0 (x + K1 x^3); expf kept away from its
 * slow underflow branch (t >= -80, where 1 + e^t is 1 in float anyway) */
static void gelu_fwd_p(float *restrict out, const float *restrict x, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float xi = x[i];
        float t = -2.0f * GELU_K0 * xi * (1.0f + GELU_K1 * xi * xi);
        float s = 1.0f / (1.0f + expf(fmaxf(fminf(t, GELU_CUT), -80.0f)));
        out[i] = t > GELU_CUT ? 0.0f : xi * s;
    }
}

static void gelu_bwd_p(float *restrict dinp, const float *restrict x,
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

/* The two calls (the vector paths share the sigmoid; here each keeps its own
 * expression, and so its bits) */
static void gelu_bwd_fwd_p(float *restrict dinp, float *restrict out, const float *restrict x,
                           const float *restrict dout, size_t n)
{
    gelu_bwd_p(dinp, x, dout, n);
    gelu_fwd_p(out, x, n);
}

static float xent_row_p(float *g, const float *x, int target, int V, float scale)
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

static void adamw_p(float *restrict p, float *restrict m, float *restrict v,
                    const float *restrict g, size_t n, const simd_adamw_consts *k)
{
    const float b1 = k->b1, b2 = k->b2, omb1 = k->omb1, omb2 = k->omb2;
    const float step = k->step_size, ic2 = k->inv_sqrt_c2, eps = k->eps, decay = k->decay,
                gs = k->grad_scale;
    for (size_t i = 0; i < n; i++) {
        float gi = g[i] * gs;
        float mi = b1 * m[i] + omb1 * gi;
        float vi = b2 * v[i] + omb2 * gi * gi;
        m[i] = mi;
        v[i] = vi;
        p[i] -= step * mi / (sqrtf(vi) * ic2 + eps) + decay * p[i];
    }
}

/* An inf or NaN is a float whose exponent bits are all set: an integer OR over that
 * test vectorises, where a float sum used as the probe would be one long chain. */
static int unscale_p(float *restrict dst, const float *restrict src, size_t n,
                     float inv_scale, int accumulate)
{
    uint32_t nonfinite = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t bits;
        memcpy(&bits, &src[i], sizeof bits);
        nonfinite |= (bits & 0x7F800000u) == 0x7F800000u;
    }
    if (accumulate)
        for (size_t i = 0; i < n; i++) dst[i] += src[i] * inv_scale;
    else
        for (size_t i = 0; i < n; i++) dst[i] = src[i] * inv_scale;
    return nonfinite != 0;
}

/* Eight independent sums (named, so GCC keeps them in registers), combined in a fixed
 * order: one long sum would be a chain of dependent additions. */
static double sumsq_p(const float *d, size_t n)
{
    double a0 = 0.0, a1 = 0.0, a2 = 0.0, a3 = 0.0, a4 = 0.0, a5 = 0.0, a6 = 0.0, a7 = 0.0;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        a0 += (double)d[i] * (double)d[i];
        a1 += (double)d[i + 1] * (double)d[i + 1];
        a2 += (double)d[i + 2] * (double)d[i + 2];
        a3 += (double)d[i + 3] * (double)d[i + 3];
        a4 += (double)d[i + 4] * (double)d[i + 4];
        a5 += (double)d[i + 5] * (double)d[i + 5];
        a6 += (double)d[i + 6] * (double)d[i + 6];
        a7 += (double)d[i + 7] * (double)d[i + 7];
    }
    for (; i < n; i++) a0 += (double)d[i] * (double)d[i];
    return ((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7));
}

static void half_from_float_p(uint16_t *restrict dst, const float *restrict src, size_t n)
{
    for (size_t i = 0; i < n; i++) dst[i] = half_from_float_scalar(src[i]);
}

static void half_to_float_p(float *restrict dst, const uint16_t *restrict src, size_t n)
{
    for (size_t i = 0; i < n; i++) dst[i] = half_to_float_scalar(src[i]);
}

/* bfloat16 is the top half of a float: add half an ulp of it plus the tie-to-even bit
 * and cut; a NaN keeps its sign and top payload, made quiet (the cut alone could turn
 * a NaN with only low payload bits into inf). */
static void bf16_from_float_p(uint16_t *restrict dst, const float *restrict src, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &src[i], sizeof u);
        if ((u & 0x7fffffffu) > 0x7f800000u)
            dst[i] = (uint16_t)((u >> 16) | 0x0040u);
        else
            dst[i] = (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
    }
}

static void bf16_to_float_p(float *restrict dst, const uint16_t *restrict src, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t u = (uint32_t)src[i] << 16;
        memcpy(&dst[i], &u, sizeof u);
    }
}

static void bf16_round_to_p(float *dst, const float *src, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint16_t h;
        bf16_from_float_p(&h, &src[i], 1);
        bf16_to_float_p(&dst[i], &h, 1);
    }
}

static void bf16_round_p(float *x, size_t n) { bf16_round_to_p(x, x, n); }

const simd_kernels simd_kernels_portable = {
    .name = "portable",
    .add = add_p,
    .acc = acc_p,
    .ln_fwd_row = ln_fwd_row_p,
    .ln_bwd_row = ln_bwd_row_p,
    .ln_wb_cols = ln_wb_cols_p,
    .colsum = colsum_p,
    .softmax_row = softmax_row_p,
    .softmax_bwd_row = softmax_bwd_row_p,
    .softmax_row_lse = softmax_row_lse_p,
    .tile_rows = TILE_ROWS,
    .transpose = transpose_p,
    .gemm_tile = gemm_tile_p,
    .gelu_fwd = gelu_fwd_p,
    .gelu_bwd = gelu_bwd_p,
    .gelu_bwd_fwd = gelu_bwd_fwd_p,
    .xent_row = xent_row_p,
    .adamw = adamw_p,
    .unscale = unscale_p,
    .sumsq = sumsq_p,
    .half_from_float = half_from_float_p,
    .half_to_float = half_to_float_p,
    .bf16_from_float = bf16_from_float_p,
    .bf16_to_float = bf16_to_float_p,
    .bf16_round = bf16_round_p,
    .bf16_round_to = bf16_round_to_p,
};
