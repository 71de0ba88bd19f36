// ref_model — the CPU reference of the standalone GPU driver: the whole GPT-2
// forward in double, to check the engine's loss (and, by finite differences of it,
// its gradients) in gpu_train.cu's test mode; and the pieces a blocks-only engine
// (gpu_model_create_blocks) needs around it on the host: the embedding and the head
// (ln_f, tied logits, cross-entropy), forward and backward in double.
//
// Header-only, for one translation unit (gpu_train.cu): everything is `static`.
// Conventions:
//  - the weights are one flat buffer of doubles in host_trainer.h's Layout (the order
//    of src/model/model.h); to compare with the GPU, pass the master weights rounded
//    through FP16 (host_trainer.h's rounded_params);
//  - the math of src/kernels/kernels_cpu.c: LayerNorm eps 1e-5 (biased variance), GELU tanh
//    approximation, causal attention with scale 1/sqrt(hs), head tied to wte;
//  - ref_row gives one row's SUMMED cross-entropy, ref_loss the MEAN over B x T
//    tokens (rows in parallel with OpenMP, summed in a fixed order: the same result
//    for any thread count).
#ifndef GT_OFFLOAD_TESTS_REF_MODEL_H
#define GT_OFFLOAD_TESTS_REF_MODEL_H

#include <math.h>
#include <stdint.h>

#include <vector>

#include "host_trainer.h"

// ------------------------------------------------------------------ CPU reference

// One row of C: xhat = (x - mean) * rstd (eps 1e-5); returns rstd.
static inline double ref_normalize(double *xhat, const double *x, int C)
{
    double mean = 0.0, var = 0.0;
    for (int i = 0; i < C; i++) mean += x[i];
    mean /= C;
    for (int i = 0; i < C; i++) var += (x[i] - mean) * (x[i] - mean);
    const double rs = 1.0 / sqrt(var / C + 1e-5);
    for (int i = 0; i < C; i++) xhat[i] = (x[i] - mean) * rs;
    return rs;
}

static inline void ref_layernorm(double *out, const double *x, const double *w,
                                 const double *b, int T, int C)
{
    for (int t = 0; t < T; t++) {
        double *ot = out + (size_t)t * C;
        ref_normalize(ot, x + (size_t)t * C, C);
        for (int i = 0; i < C; i++) ot[i] = ot[i] * w[i] + b[i];
    }
}

// out[T,OC] = in[T,IC] @ W[OC,IC]^T + b
static inline void ref_linear(double *out, const double *in, const double *W,
                              const double *b, int T, int IC, int OC)
{
    for (int t = 0; t < T; t++)
        for (int o = 0; o < OC; o++) {
            const double *wr = W + (size_t)o * IC, *x = in + (size_t)t * IC;
            double s = b ? b[o] : 0.0;
            for (int i = 0; i < IC; i++) s += x[i] * wr[i];
            out[(size_t)t * OC + o] = s;
        }
}

// The embedding of one row: x[T,C] = wte[in[t]] + wpe[t].
static inline void ref_embed(const Layout &L, const double *w, const int32_t *in, int T,
                             double *x)
{
    const int C = L.s.n_embd;
    for (int t = 0; t < T; t++)
        for (int i = 0; i < C; i++)
            x[(size_t)t * C + i] = w[L.wte + (size_t)in[t] * C + i] + w[L.wpe + (size_t)t * C + i];
}

// Its backward: g (the layout's size) += dx into the rows of wte and wpe it read.
static inline void ref_embed_backward(const Layout &L, const int32_t *in, int T,
                                      const double *dx, double *g)
{
    const int C = L.s.n_embd;
    for (int t = 0; t < T; t++)
        for (int i = 0; i < C; i++) {
            g[L.wte + (size_t)in[t] * C + i] += dx[(size_t)t * C + i];
            g[L.wpe + (size_t)t * C + i] += dx[(size_t)t * C + i];
        }
}

// The head of one row on the last block's output x[T,C]: ln_f, logits = ln_f(x) @
// wte^T, and the SUMMED cross-entropy against tg, returned. With dx != nullptr also
// the backward of dscale x that sum: dx[T,C] = its gradient with respect to x, and g
// (the layout's size) += its gradients of wte (the head's part) and ln_f.
static inline double ref_head(const Layout &L, const double *w, const double *x,
                              const int32_t *tg, int T, double dscale, double *dx, double *g)
{
    const int C = L.s.n_embd, V = L.s.vocab_size;
    const double *lw = w + L.lnfw, *lb = w + L.lnfb, *wte = w + L.wte;
    std::vector<double> xhat(C), h(C), logit(V), dh(C), dxhat(C);
    double loss = 0.0;
    for (int t = 0; t < T; t++) {
        const double rs = ref_normalize(xhat.data(), x + (size_t)t * C, C);
        for (int i = 0; i < C; i++) h[i] = xhat[i] * lw[i] + lb[i];
        ref_linear(logit.data(), h.data(), wte, nullptr, 1, C, V);
        double mx = -1e300, sum = 0.0;
        for (int v = 0; v < V; v++) mx = fmax(mx, logit[v]);
        for (int v = 0; v < V; v++) sum += exp(logit[v] - mx);
        loss += log(sum) + mx - logit[tg[t]];
        if (!dx) continue;
        // d logits = dscale (softmax - onehot); through the tied head, then ln_f.
        for (int i = 0; i < C; i++) dh[i] = 0.0;
        for (int v = 0; v < V; v++) {
            const double d = dscale * (exp(logit[v] - mx) / sum - (v == tg[t] ? 1.0 : 0.0));
            for (int i = 0; i < C; i++) {
                dh[i] += d * wte[(size_t)v * C + i];
                g[L.wte + (size_t)v * C + i] += d * h[i];
            }
        }
        double m1 = 0.0, m2 = 0.0;
        for (int i = 0; i < C; i++) {
            g[L.lnfw + i] += dh[i] * xhat[i];
            g[L.lnfb + i] += dh[i];
            dxhat[i] = dh[i] * lw[i];
            m1 += dxhat[i];
            m2 += dxhat[i] * xhat[i];
        }
        m1 /= C, m2 /= C;
        for (int i = 0; i < C; i++) dx[(size_t)t * C + i] = rs * (dxhat[i] - m1 - xhat[i] * m2);
    }
    return loss;
}

// One head's causal attention weights for query q (its row's head columns) against
// the keys of rows 0..t of that head (key s at row0 + s * 3C + C + hoff): p[s] =
// exp(scale * q.k_s - max), unnormalised; returns their sum.
static inline double ref_causal_weights(double *p, const double *q, const double *row0,
                                        int t, int C, int hoff, int hs, double scale)
{
    double mx = -1e300;
    for (int s = 0; s <= t; s++) {
        const double *k = row0 + (size_t)s * 3 * C + C + hoff;
        double d = 0.0;
        for (int j = 0; j < hs; j++) d += q[j] * k[j];
        p[s] = d * scale;
        mx = fmax(mx, p[s]);
    }
    double sum = 0.0;
    for (int s = 0; s <= t; s++) sum += (p[s] = exp(p[s] - mx));
    return sum;
}

// The forward of one row of T tokens on weights w: the summed cross-entropy.
static inline double ref_row(const Layout &L, const double *w, const int32_t *in,
                             const int32_t *tg, int T)
{
    const int C = L.s.n_embd, NH = L.s.n_head, hs = C / NH;
    const size_t TC = (size_t)T * C;
    std::vector<double> x(TC), h(TC), qkv(3 * TC), y(TC), f(4 * TC), tmp(TC), p(T);
    ref_embed(L, w, in, T, x.data());
    const double scale = 1.0 / sqrt((double)hs);
    for (const LayerOff &o : L.layer) {
        ref_layernorm(h.data(), x.data(), w + o.ln1w, w + o.ln1b, T, C);
        ref_linear(qkv.data(), h.data(), w + o.qkvw, w + o.qkvb, T, C, 3 * C);
        for (int hh = 0; hh < NH; hh++)
            for (int t = 0; t < T; t++) {
                const double *q = &qkv[(size_t)t * 3 * C + (size_t)hh * hs];
                const double sum = ref_causal_weights(p.data(), q, qkv.data(), t, C,
                                                      hh * hs, hs, scale);
                double *yt = &y[(size_t)t * C + (size_t)hh * hs];
                for (int j = 0; j < hs; j++) yt[j] = 0.0;
                for (int s = 0; s <= t; s++) {
                    const double *vv = &qkv[(size_t)s * 3 * C + 2 * C + (size_t)hh * hs];
                    for (int j = 0; j < hs; j++) yt[j] += p[s] / sum * vv[j];
                }
            }
        ref_linear(tmp.data(), y.data(), w + o.projw, w + o.projb, T, C, C);
        for (size_t i = 0; i < TC; i++) x[i] += tmp[i];
        ref_layernorm(h.data(), x.data(), w + o.ln2w, w + o.ln2b, T, C);
        ref_linear(f.data(), h.data(), w + o.fcw, w + o.fcb, T, C, 4 * C);
        for (double &u : f)
            u = 0.5 * u * (1.0 + tanh(0.7978845608028654 * (u + 0.044715 * u * u * u)));
        ref_linear(tmp.data(), f.data(), w + o.fcpw, w + o.fcpb, T, 4 * C, C);
        for (size_t i = 0; i < TC; i++) x[i] += tmp[i];
    }
    return ref_head(L, w, x.data(), tg, T, 0.0, nullptr, nullptr);
}

// Mean cross-entropy over B rows (rows in parallel, summed in a fixed order).
static inline double ref_loss(const Layout &L, const double *w, const int32_t *in,
                              const int32_t *tg, int B, int T)
{
    std::vector<double> rows(B);
#pragma omp parallel for schedule(dynamic)
    for (int b = 0; b < B; b++)
        rows[b] = ref_row(L, w, in + (size_t)b * T, tg + (size_t)b * T, T);
    double s = 0.0;
    for (int b = 0; b < B; b++) s += rows[b];
    return s / ((double)B * T);
}

#endif
