// ref_grads — the CPU reference of one whole training step for gpu_train.cu's grads
// mode: the forward of ref_model.h, keeping what the backward needs, then the backward,
// in double: the mean cross-entropy and its gradient with respect to every parameter.
// It must finish a GPT-2 124M step within about a minute on a GPU machine's host, so
// the matrix products are blocked and the work is spread with OpenMP (tiles of each
// product, (row, head, query) triples of attention's forward, (row, head) pairs of its
// backward); the loops are otherwise the plain formulas, and the math is ref_model.h's
// (LayerNorm eps 1e-5, GELU tanh approximation, causal attention scaled by 1/sqrt(hs),
// head tied to wte). `gpu_train grads --small` checks its loss against ref_model.h's
// forward and its gradient against central differences of that.
//
// Header-only, for one translation unit (gpu_train.cu): everything is `static`.
// Conventions: weights and gradients are flat buffers of doubles in host_trainer.h's
// Layout; every product and sum is in double, each in an order fixed by its shape (the
// same result for any thread count); sizes are size_t.
#ifndef GT_OFFLOAD_TESTS_REF_GRADS_H
#define GT_OFFLOAD_TESTS_REF_GRADS_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include <vector>

#include "host_trainer.h" // defines: Layout, LayerOff
#include "ref_model.h"    // defines: ref_normalize, ref_embed, ref_embed_backward,
                          // ref_causal_weights

// ------------------------------------------------------------------ products

// dst[N,M] = src[M,N]^T, in 32 x 32 tiles (both sides stay in cache).
static inline void ref_transpose(double *dst, const double *src, size_t M, size_t N)
{
    const long tiles_m = (long)((M + 31) / 32), tiles_n = (long)((N + 31) / 32);
#pragma omp parallel for collapse(2) schedule(static)
    for (long bm = 0; bm < tiles_m; bm++)
        for (long bn = 0; bn < tiles_n; bn++) {
            const size_t m1 = (size_t)bm * 32 + 32 < M ? (size_t)bm * 32 + 32 : M;
            const size_t n1 = (size_t)bn * 32 + 32 < N ? (size_t)bn * 32 + 32 : N;
            for (size_t m = (size_t)bm * 32; m < m1; m++)
                for (size_t n = (size_t)bn * 32; n < n1; n++) dst[n * M + m] = src[m * N + n];
        }
}

// out[M,N] (+)= A[M,K] @ Bm[K,N], all row-major; accumulate = 0 overwrites out. Every
// output is its sum over k taken in order (the same bits for any thread count or
// tiling). Tiles of 4 rows x 4 columns keep their 16 sums in registers through a chunk
// of 256 k (each A and Bm value loaded serves 4 products: a plain loop is bound by its
// loads and stores), over a 256 x 256 slice of Bm that stays in cache for the 4 rows;
// the few rows and columns past the last whole tile are summed one by one.
static inline void ref_matmul(double *out, const double *A, const double *Bm, size_t M,
                              size_t K, size_t N, int accumulate)
{
    const size_t RB = 4, NB = 256, KB = 256;
    const long row_blocks = (long)((M + RB - 1) / RB), col_blocks = (long)((N + NB - 1) / NB);
#pragma omp parallel for collapse(2) schedule(static)
    for (long rb = 0; rb < row_blocks; rb++)
        for (long cb = 0; cb < col_blocks; cb++) {
            const size_t m0 = (size_t)rb * RB, m1 = m0 + RB < M ? m0 + RB : M;
            const size_t n0 = (size_t)cb * NB, n1 = n0 + NB < N ? n0 + NB : N;
            const bool whole = m1 - m0 == RB;
            if (!accumulate)
                for (size_t m = m0; m < m1; m++)
                    memset(out + m * N + n0, 0, (n1 - n0) * sizeof(double));
            for (size_t k0 = 0; k0 < K; k0 += KB) {
                const size_t k1 = k0 + KB < K ? k0 + KB : K;
                size_t j = n0;
                for (; whole && j + 4 <= n1; j += 4) {
                    double c[4][4];
                    for (int r = 0; r < 4; r++)
                        for (int q = 0; q < 4; q++) c[r][q] = out[(m0 + r) * N + j + q];
                    const double *a0 = A + m0 * K, *a1 = a0 + K, *a2 = a1 + K, *a3 = a2 + K;
                    for (size_t k = k0; k < k1; k++) {
                        const double *b = Bm + k * N + j;
                        const double b0 = b[0], b1 = b[1], b2 = b[2], b3 = b[3];
                        c[0][0] += a0[k] * b0, c[0][1] += a0[k] * b1;
                        c[0][2] += a0[k] * b2, c[0][3] += a0[k] * b3;
                        c[1][0] += a1[k] * b0, c[1][1] += a1[k] * b1;
                        c[1][2] += a1[k] * b2, c[1][3] += a1[k] * b3;
                        c[2][0] += a2[k] * b0, c[2][1] += a2[k] * b1;
                        c[2][2] += a2[k] * b2, c[2][3] += a2[k] * b3;
                        c[3][0] += a3[k] * b0, c[3][1] += a3[k] * b1;
                        c[3][2] += a3[k] * b2, c[3][3] += a3[k] * b3;
                    }
                    for (int r = 0; r < 4; r++)
                        for (int q = 0; q < 4; q++) out[(m0 + r) * N + j + q] = c[r][q];
                }
                for (size_t m = m0; m < m1; m++)
                    for (size_t jj = whole ? j : n0; jj < n1; jj++) {
                        double s = out[m * N + jj];
                        for (size_t k = k0; k < k1; k++) s += A[m * K + k] * Bm[k * N + jj];
                        out[m * N + jj] = s;
                    }
            }
        }
}

// out[N,OC] = in[N,IC] @ W[OC,IC]^T + b (b may be null).
static inline void ref_linear_fwd(double *out, const double *in, const double *W,
                                  const double *b, size_t N, size_t IC, size_t OC)
{
    std::vector<double> wt(IC * OC);
    ref_transpose(wt.data(), W, OC, IC);
    ref_matmul(out, in, wt.data(), N, IC, OC, 0);
    if (!b) return;
#pragma omp parallel for schedule(static)
    for (long n = 0; n < (long)N; n++)
        for (size_t o = 0; o < OC; o++) out[(size_t)n * OC + o] += b[o];
}

// The backward of ref_linear_fwd: dW[OC,IC] += dout^T @ in, db[OC] += the column sums
// of dout (db may be null), din[N,IC] = dout[N,OC] @ W (din may be null).
static inline void ref_linear_bwd(double *din, double *dW, double *db, const double *dout,
                                  const double *in, const double *W, size_t N, size_t IC,
                                  size_t OC)
{
    std::vector<double> dt(OC * N);
    ref_transpose(dt.data(), dout, N, OC);
    ref_matmul(dW, dt.data(), in, OC, N, IC, 1);
    if (db) {
#pragma omp parallel for schedule(static)
        for (long o = 0; o < (long)OC; o++) {
            double s = 0.0;
            for (size_t n = 0; n < N; n++) s += dt[(size_t)o * N + n];
            db[o] += s;
        }
    }
    if (din) ref_matmul(din, dout, W, N, OC, IC, 0);
}

// ------------------------------------------------------------------ pointwise layers

// LayerNorm of N rows of C: xhat and rstd kept for the backward, out = xhat * w + b.
static inline void ref_ln_fwd(double *out, double *xhat, double *rstd, const double *x,
                              const double *w, const double *b, size_t N, int C)
{
#pragma omp parallel for schedule(static)
    for (long n = 0; n < (long)N; n++) {
        double *xh = xhat + (size_t)n * C, *o = out + (size_t)n * C;
        rstd[n] = ref_normalize(xh, x + (size_t)n * C, C);
        for (int i = 0; i < C; i++) o[i] = xh[i] * w[i] + b[i];
    }
}

// Its backward: dx[N,C] += rstd (dxhat - mean(dxhat) - xhat mean(dxhat xhat)) with
// dxhat = dout * w; dw[C] += sum_n dout xhat, db[C] += sum_n dout (by columns, so no
// two threads write one sum).
static inline void ref_ln_bwd(double *dx, double *dw, double *db, const double *dout,
                              const double *xhat, const double *rstd, const double *w,
                              size_t N, int C)
{
#pragma omp parallel for schedule(static)
    for (long n = 0; n < (long)N; n++) {
        const double *d = dout + (size_t)n * C, *xh = xhat + (size_t)n * C;
        double m1 = 0.0, m2 = 0.0;
        for (int i = 0; i < C; i++) {
            m1 += d[i] * w[i];
            m2 += d[i] * w[i] * xh[i];
        }
        m1 /= C, m2 /= C;
        double *o = dx + (size_t)n * C;
        for (int i = 0; i < C; i++) o[i] += rstd[n] * (d[i] * w[i] - m1 - xh[i] * m2);
    }
#pragma omp parallel for schedule(static)
    for (int i = 0; i < C; i++) {
        double sw = 0.0, sb = 0.0;
        for (size_t n = 0; n < N; n++) {
            sw += dout[n * C + i] * xhat[n * C + i];
            sb += dout[n * C + i];
        }
        dw[i] += sw;
        db[i] += sb;
    }
}

static const double REF_GELU_A = 0.7978845608028654; // sqrt(2/pi)

// GELU (tanh approximation) and its derivative.
static inline double ref_gelu(double u)
{
    return 0.5 * u * (1.0 + tanh(REF_GELU_A * (u + 0.044715 * u * u * u)));
}
static inline double ref_gelu_grad(double u)
{
    const double th = tanh(REF_GELU_A * (u + 0.044715 * u * u * u));
    return 0.5 * (1.0 + th) + 0.5 * u * (1.0 - th * th) * REF_GELU_A * (1.0 + 3.0 * 0.044715 * u * u);
}

// ------------------------------------------------------------------ attention

// Causal attention of B rows of T tokens: qkv[B*T,3C] (q | k | v, each NH heads of hs)
// -> y[B*T,C]. Each (row, head, query) pair is one task.
static inline void ref_attn_fwd(double *y, const double *qkv, int B, int T, int C, int NH)
{
    const int hs = C / NH;
    const double scale = 1.0 / sqrt((double)hs);
    const long tasks = (long)B * NH * T;
#pragma omp parallel
    {
        std::vector<double> p(T);
#pragma omp for schedule(dynamic, 16)
        for (long task = 0; task < tasks; task++) {
            const int t = (int)(task % T), h = (int)(task / T % NH), b = (int)(task / T / NH);
            const double *row = qkv + (size_t)b * T * 3 * C;
            const double *q = row + (size_t)t * 3 * C + (size_t)h * hs;
            const double sum = ref_causal_weights(p.data(), q, row, t, C, h * hs, hs, scale);
            double *yt = y + ((size_t)b * T + t) * C + (size_t)h * hs;
            for (int j = 0; j < hs; j++) yt[j] = 0.0;
            for (int s = 0; s <= t; s++) {
                const double *v = row + (size_t)s * 3 * C + 2 * C + (size_t)h * hs;
                const double pw = p[s] / sum;
                for (int j = 0; j < hs; j++) yt[j] += pw * v[j];
            }
        }
    }
}

// Its backward: dqkv[B*T,3C] (overwritten) from dy[B*T,C]. The probabilities are
// computed again row by row (kept, they would take B*NH*T*T doubles: 1.2 GB for 12
// layers at T = 1024). One task per (row, head): a head's q, k and v columns are its
// own, so tasks never write the same element.
static inline void ref_attn_bwd(double *dqkv, const double *dy, const double *qkv, int B,
                                int T, int C, int NH)
{
    const int hs = C / NH;
    const double scale = 1.0 / sqrt((double)hs);
    memset(dqkv, 0, (size_t)B * T * 3 * C * sizeof(double));
#pragma omp parallel
    {
        std::vector<double> p(T), dp(T);
#pragma omp for collapse(2) schedule(dynamic)
        for (int b = 0; b < B; b++)
            for (int h = 0; h < NH; h++) {
                const double *row = qkv + (size_t)b * T * 3 * C;
                double *drow = dqkv + (size_t)b * T * 3 * C;
                for (int t = 0; t < T; t++) {
                    const double *q = row + (size_t)t * 3 * C + (size_t)h * hs;
                    const double *dyt = dy + ((size_t)b * T + t) * C + (size_t)h * hs;
                    const double sum =
                        ref_causal_weights(p.data(), q, row, t, C, h * hs, hs, scale);
                    // dp = dy . v; d(score) = p (dp - sum_s p dp); dv += p dy.
                    double pdp = 0.0;
                    for (int s = 0; s <= t; s++) {
                        p[s] /= sum;
                        const double *v = row + (size_t)s * 3 * C + 2 * C + (size_t)h * hs;
                        double *dv = drow + (size_t)s * 3 * C + 2 * C + (size_t)h * hs;
                        double d = 0.0;
                        for (int j = 0; j < hs; j++) {
                            d += dyt[j] * v[j];
                            dv[j] += p[s] * dyt[j];
                        }
                        dp[s] = d;
                        pdp += p[s] * d;
                    }
                    double *dq = drow + (size_t)t * 3 * C + (size_t)h * hs;
                    for (int s = 0; s <= t; s++) {
                        const double ds = p[s] * (dp[s] - pdp) * scale;
                        const double *k = row + (size_t)s * 3 * C + C + (size_t)h * hs;
                        double *dk = drow + (size_t)s * 3 * C + C + (size_t)h * hs;
                        for (int j = 0; j < hs; j++) {
                            dq[j] += ds * k[j];
                            dk[j] += ds * q[j];
                        }
                    }
                }
            }
    }
}

// ------------------------------------------------------------------ the whole step

// What one block's backward needs from its forward ([N = B*T] rows).
struct RefBlockActs {
    std::vector<double> xhat1, h1, rstd1; // ln_1: normalized input, output, 1/std
    std::vector<double> qkv, y;           // c_attn's output [N,3C]; attention's [N,C]
    std::vector<double> xhat2, h2, rstd2; // ln_2
    std::vector<double> pre, act;         // c_fc's output and GELU's [N,4C]
};

// One training step's reference on weights w (the layout's size): returns the mean
// cross-entropy over the B x T tokens and sets g (the layout's size, overwritten) to its
// gradient with respect to every parameter.
static inline double ref_step_grads(const Layout &L, const double *w, const int32_t *in,
                                    const int32_t *tg, int B, int T, double *g)
{
    const int C = L.s.n_embd, NH = L.s.n_head, V = L.s.vocab_size;
    const size_t N = (size_t)B * T, NC = N * C;
    memset(g, 0, L.n * sizeof(double));

    // Forward.
    std::vector<double> x(NC), tmp(NC);
    for (int b = 0; b < B; b++) ref_embed(L, w, in + (size_t)b * T, T, &x[(size_t)b * T * C]);
    std::vector<RefBlockActs> acts(L.layer.size());
    for (size_t l = 0; l < L.layer.size(); l++) {
        const LayerOff &o = L.layer[l];
        RefBlockActs &a = acts[l];
        a.xhat1.resize(NC), a.h1.resize(NC), a.rstd1.resize(N), a.qkv.resize(3 * NC);
        a.y.resize(NC), a.xhat2.resize(NC), a.h2.resize(NC), a.rstd2.resize(N);
        a.pre.resize(4 * NC), a.act.resize(4 * NC);
        ref_ln_fwd(a.h1.data(), a.xhat1.data(), a.rstd1.data(), x.data(), w + o.ln1w,
                   w + o.ln1b, N, C);
        ref_linear_fwd(a.qkv.data(), a.h1.data(), w + o.qkvw, w + o.qkvb, N, C, 3 * C);
        ref_attn_fwd(a.y.data(), a.qkv.data(), B, T, C, NH);
        ref_linear_fwd(tmp.data(), a.y.data(), w + o.projw, w + o.projb, N, C, C);
        for (size_t i = 0; i < NC; i++) x[i] += tmp[i];
        ref_ln_fwd(a.h2.data(), a.xhat2.data(), a.rstd2.data(), x.data(), w + o.ln2w,
                   w + o.ln2b, N, C);
        ref_linear_fwd(a.pre.data(), a.h2.data(), w + o.fcw, w + o.fcb, N, C, 4 * C);
#pragma omp parallel for schedule(static)
        for (long i = 0; i < (long)(4 * NC); i++) a.act[i] = ref_gelu(a.pre[i]);
        ref_linear_fwd(tmp.data(), a.act.data(), w + o.fcpw, w + o.fcpb, N, 4 * C, C);
        for (size_t i = 0; i < NC; i++) x[i] += tmp[i];
    }

    // Head: ln_f, logits [N,V] = h @ wte^T, cross-entropy; d(mean loss)/d(logits) =
    // (softmax - onehot) / N replaces the logits.
    std::vector<double> xhatf(NC), hf(NC), rstdf(N), logits(N * V), rowloss(N);
    ref_ln_fwd(hf.data(), xhatf.data(), rstdf.data(), x.data(), w + L.lnfw, w + L.lnfb, N, C);
    ref_linear_fwd(logits.data(), hf.data(), w + L.wte, nullptr, N, C, V);
#pragma omp parallel for schedule(static)
    for (long n = 0; n < (long)N; n++) {
        double *lg = &logits[(size_t)n * V];
        double mx = -1e300, sum = 0.0;
        for (int v = 0; v < V; v++) mx = fmax(mx, lg[v]);
        for (int v = 0; v < V; v++) sum += exp(lg[v] - mx);
        rowloss[n] = log(sum) + mx - lg[tg[n]];
        for (int v = 0; v < V; v++) lg[v] = exp(lg[v] - mx) / sum / (double)N;
        lg[tg[n]] -= 1.0 / (double)N;
    }
    double loss = 0.0;
    for (size_t n = 0; n < N; n++) loss += rowloss[n];
    loss /= (double)N;

    // Backward: dres is d(mean loss)/d(residual stream), from the head down.
    std::vector<double> dres(NC, 0.0), dh(NC);
    ref_linear_bwd(dh.data(), g + L.wte, nullptr, logits.data(), hf.data(), w + L.wte, N, C, V);
    std::vector<double>().swap(logits);
    ref_ln_bwd(dres.data(), g + L.lnfw, g + L.lnfb, dh.data(), xhatf.data(), rstdf.data(),
               w + L.lnfw, N, C);
    std::vector<double> dbig(4 * NC), dqkv(3 * NC);
    for (size_t l = L.layer.size(); l-- > 0;) {
        const LayerOff &o = L.layer[l];
        RefBlockActs &a = acts[l];
        // MLP: x += c_proj(gelu(c_fc(ln_2(x)))).
        ref_linear_bwd(dbig.data(), g + o.fcpw, g + o.fcpb, dres.data(), a.act.data(),
                       w + o.fcpw, N, 4 * C, C);
#pragma omp parallel for schedule(static)
        for (long i = 0; i < (long)(4 * NC); i++) dbig[i] *= ref_gelu_grad(a.pre[i]);
        ref_linear_bwd(dh.data(), g + o.fcw, g + o.fcb, dbig.data(), a.h2.data(), w + o.fcw, N,
                       C, 4 * C);
        ref_ln_bwd(dres.data(), g + o.ln2w, g + o.ln2b, dh.data(), a.xhat2.data(),
                   a.rstd2.data(), w + o.ln2w, N, C);
        // Attention: x += c_proj(attn(c_attn(ln_1(x)))).
        ref_linear_bwd(tmp.data(), g + o.projw, g + o.projb, dres.data(), a.y.data(),
                       w + o.projw, N, C, C);
        ref_attn_bwd(dqkv.data(), tmp.data(), a.qkv.data(), B, T, C, NH);
        ref_linear_bwd(dh.data(), g + o.qkvw, g + o.qkvb, dqkv.data(), a.h1.data(), w + o.qkvw,
                       N, C, 3 * C);
        ref_ln_bwd(dres.data(), g + o.ln1w, g + o.ln1b, dh.data(), a.xhat1.data(),
                   a.rstd1.data(), w + o.ln1w, N, C);
        a = RefBlockActs(); // this block's activations are done with: free them
    }
    for (int b = 0; b < B; b++)
        ref_embed_backward(L, in + (size_t)b * T, T, &dres[(size_t)b * T * C], g);
    return loss;
}

#endif
