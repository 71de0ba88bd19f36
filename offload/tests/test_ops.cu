// test_ops — the FP16 CUDA kernels of offload/ops.cu against an FP32 reference computed
// here on the CPU (from the same half-rounded inputs), forward and backward, on random
// inputs. Needs only nvcc and a GPU: no MPI, HDF5 or BLAS (scripts/gpu-check.sh builds
// it with `nvcc -O2 offload/tests/test_ops.cu offload/ops.cu -lcublas`).
//
// Each output buffer is poisoned (half NaN) before the kernel runs, so an element a
// kernel forgets to write fails the comparison. Tolerance: relative error (norm-wise per
// output, ||gpu - ref|| / ||ref||) below 1e-2 for FP16 storage.
// Exit status: 0 all passed, 1 a check failed (or a driver is there and CUDA cannot
// start), 77 no GPU: no NVIDIA driver or device (skipped).
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <string>
#include <vector>

#include "../attention_plan.h"
#include "../ops.cuh"
#include "cuda_ok.h"

static int failures = 0, checks = 0;


static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static float urand(float lo, float hi)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return lo + (hi - lo) * (float)((rng_state >> 11) * (1.0 / 9007199254740992.0));
}

// Random values rounded through half, so the reference sees what the GPU sees.
static std::vector<float> rnd(size_t n, float lo, float hi)
{
    std::vector<float> v(n);
    for (auto &x : v) x = __half2float(__float2half(urand(lo, hi)));
    return v;
}

template <typename T> static T *dev(size_t n)
{
    T *p = nullptr;
    CUDA_OK(cudaMalloc(&p, n * sizeof(T) + 1));
    return p;
}

static __half *to_dev(const std::vector<float> &v)
{
    std::vector<__half> h(v.size());
    for (size_t i = 0; i < v.size(); i++) h[i] = __float2half(v[i]);
    __half *d = dev<__half>(v.size());
    CUDA_OK(cudaMemcpy(d, h.data(), h.size() * sizeof(__half), cudaMemcpyHostToDevice));
    return d;
}

static void poison(__half *d, size_t n) { CUDA_OK(cudaMemset(d, 0x7e, n * sizeof(__half))); }
static void poisonf(float *d, size_t n) { CUDA_OK(cudaMemset(d, 0xff, n * sizeof(float))); }

static std::vector<float> from_dev(const __half *d, size_t n)
{
    std::vector<__half> h(n);
    CUDA_OK(cudaMemcpy(h.data(), d, n * sizeof(__half), cudaMemcpyDeviceToHost));
    std::vector<float> v(n);
    for (size_t i = 0; i < n; i++) v[i] = __half2float(h[i]);
    return v;
}

static std::vector<float> from_devf(const float *d, size_t n)
{
    std::vector<float> v(n);
    CUDA_OK(cudaMemcpy(v.data(), d, n * sizeof(float), cudaMemcpyDeviceToHost));
    return v;
}

static void compare(const char *what, const std::vector<float> &got,
                    const std::vector<double> &ref, double tol)
{
    double dd = 0, rr = 0;
    int bad = 0;
    for (size_t i = 0; i < ref.size(); i++) {
        if (!isfinite(got[i])) bad = 1;
        dd += (got[i] - ref[i]) * (got[i] - ref[i]);
        rr += ref[i] * ref[i];
    }
    const double rel = rr > 0 ? sqrt(dd / rr) : sqrt(dd);
    checks++;
    if (bad || !(rel <= tol)) {
        failures++;
        printf("FAIL %s: relative error %.3e (tolerance %.1e)%s\n", what, rel, tol,
               bad ? ", non-finite output (an element not written?)" : "");
    } else {
        printf("ok   %s: relative error %.3e\n", what, rel);
    }
}

// accumulate = 0: dinp starts poisoned and must be overwritten; 1: it accumulates.
static void test_matmul(cublasHandle_t h, int N, int C, int OC, int with_bias, int accumulate)
{
    auto x = rnd((size_t)N * C, -1, 1), w = rnd((size_t)OC * C, -0.5f, 0.5f),
         b = rnd(OC, -1, 1), dy = rnd((size_t)N * OC, -1, 1),
         din0 = rnd((size_t)N * C, -0.1f, 0.1f);
    __half *dx = to_dev(x), *dwt = to_dev(w), *db = to_dev(b), *ddy = to_dev(dy),
           *out = dev<__half>((size_t)N * OC), *dinp = to_dev(din0);
    float *gw = dev<float>((size_t)OC * C), *gb = dev<float>(OC);
    poison(out, (size_t)N * OC);
    if (!accumulate) poison(dinp, (size_t)N * C);
    CUDA_OK(cudaMemset(gw, 0, (size_t)OC * C * 4));
    CUDA_OK(cudaMemset(gb, 0, OC * 4));
    int s1 = ol_matmul_forward(h, out, dx, dwt, with_bias ? db : nullptr, N, C, OC);
    int s2 = ol_matmul_backward(h, dinp, gw, with_bias ? gb : nullptr, ddy, dx, dwt, N, C, OC,
                                accumulate);
    CUDA_OK(cudaDeviceSynchronize());
    checks++;
    if (s1 != 0 || s2 != 0) {
        failures++;
        printf("FAIL matmul N=%d C=%d OC=%d: cuBLAS status %d / %d\n", N, C, OC, s1, s2);
        return;
    }
    std::vector<double> ro((size_t)N * OC), rd((size_t)N * C), rw((size_t)OC * C), rb(OC);
    for (int r = 0; r < N; r++)
        for (int o = 0; o < OC; o++) {
            double s = with_bias ? b[o] : 0.0;
            for (int c = 0; c < C; c++) s += (double)x[(size_t)r * C + c] * w[(size_t)o * C + c];
            ro[(size_t)r * OC + o] = s;
        }
    // The two gradients sum over o and over r in ascending order, as written, with the
    // element being summed innermost-but-one: its row stays in cache while the other
    // operand streams (the textbook loop order strides both operands by a row per term).
    for (int r = 0; r < N; r++) {
        double *d = &rd[(size_t)r * C];
        for (int c = 0; c < C; c++) d[c] = accumulate ? din0[(size_t)r * C + c] : 0.0;
        for (int o = 0; o < OC; o++) {
            const double g = dy[(size_t)r * OC + o];
            const float *wo = &w[(size_t)o * C];
            for (int c = 0; c < C; c++) d[c] += g * wo[c];
        }
    }
    for (int o = 0; o < OC; o++) {
        double *gw_o = &rw[(size_t)o * C];
        for (int r = 0; r < N; r++) {
            const double g = dy[(size_t)r * OC + o];
            const float *xr = &x[(size_t)r * C];
            for (int c = 0; c < C; c++) gw_o[c] += g * xr[c];
            rb[o] += g;
        }
    }
    char name[96];
    snprintf(name, sizeof name, "matmul N=%d C=%d OC=%d%s", N, C, OC, with_bias ? " +bias" : "");
    std::string n(name);
    compare((n + " forward").c_str(), from_dev(out, ro.size()), ro, 1e-2);
    compare((n + (accumulate ? " dinp (accumulated)" : " dinp (overwritten)")).c_str(),
            from_dev(dinp, rd.size()), rd, 1e-2);
    compare((n + " dw").c_str(), from_devf(gw, rw.size()), rw, 1e-2);
    if (with_bias) compare((n + " dbias").c_str(), from_devf(gb, OC), rb, 1e-2);
    cudaFree(dx), cudaFree(dwt), cudaFree(db), cudaFree(ddy), cudaFree(out), cudaFree(dinp);
    cudaFree(gw), cudaFree(gb);
}

// An FP16-output product with a long inner dimension, as the head's input gradient
// (dinp[N,C] = dlogits[N,V] . wte[V,C], K = V = 50304), against a reference in double
// on the same FP16-rounded inputs. With FP32 accumulation to the end (the handle's
// ol_blas_numerics) the only error left is the output's rounding to FP16, half an FP16
// ulp, so every element must lie within one ulp of the reference (plus 1e-5 of the rms,
// for elements that cancel to near zero, where FP32's own rounding shows); split-K
// partials summed in FP16 add errors of the order of an ulp each. The worst error is
// reported in ulps over the elements above 1% of the rms.
static void test_long_k(cublasHandle_t h, int N, int C, int K)
{
    auto x = rnd((size_t)N * C, -1, 1), w = rnd((size_t)K * C, -0.5f, 0.5f),
         dy = rnd((size_t)N * K, -1, 1);
    __half *dx = to_dev(x), *dwt = to_dev(w), *ddy = to_dev(dy), *dinp = dev<__half>((size_t)N * C);
    float *gw = dev<float>((size_t)K * C);
    poison(dinp, (size_t)N * C);
    CUDA_OK(cudaMemset(gw, 0, (size_t)K * C * 4));
    const int st = ol_matmul_backward(h, dinp, gw, nullptr, ddy, dx, dwt, N, C, K, 0);
    CUDA_OK(cudaDeviceSynchronize());
    checks++;
    if (st != 0) {
        failures++;
        printf("FAIL long-K product N=%d C=%d K=%d: status %d\n", N, C, K, st);
    } else {
        const std::vector<float> got = from_dev(dinp, (size_t)N * C);
        std::vector<double> ref((size_t)N * C);
        double rms = 0.0;
        for (int r = 0; r < N; r++)
            for (int c = 0; c < C; c++) {
                double s = 0.0;
                for (int o = 0; o < K; o++)
                    s += (double)dy[(size_t)r * K + o] * w[(size_t)o * C + c];
                ref[(size_t)r * C + c] = s;
                rms += s * s;
            }
        rms = sqrt(rms / (double)ref.size());
        size_t over = 0;
        double worst = 0.0; // in FP16 ulps of the reference
        for (size_t i = 0; i < ref.size(); i++) {
            const double a = fabs(ref[i]);
            const double ulp = a < 6.103515625e-05 ? 5.960464477539063e-08
                                                    : ldexp(1.0, ilogb(a) - 10);
            const double err = fabs((double)got[i] - ref[i]);
            if (!isfinite(got[i]) || err > ulp + 1e-5 * rms) over++;
            if (a >= 1e-2 * rms && err / ulp > worst) worst = err / ulp;
        }
        if (over) {
            failures++;
            printf("FAIL long-K product N=%d C=%d K=%d, FP16 out: %zu of %zu elements beyond "
                   "one FP16 ulp of the FP32 reference (worst %.2f ulp)\n", N, C, K, over,
                   ref.size(), worst);
        } else {
            printf("ok   long-K product N=%d C=%d K=%d, FP16 out: every element within one "
                   "FP16 ulp of the reference (worst %.2f ulp)\n", N, C, K, worst);
        }
    }
    cudaFree(dx), cudaFree(dwt), cudaFree(ddy), cudaFree(dinp), cudaFree(gw);
}

// nb: the row blocks (0: the default for T); accumulate as in test_matmul.
static void test_attention(cublasHandle_t h, int B, int T, int C, int NH, int nb,
                           int accumulate)
{
    const int rb = nb ? nb : att_row_blocks(T); // what the kernels will use
    const int hs = C / NH;
    const size_t nq = (size_t)B * T * 3 * C, no = (size_t)B * T * C, na = (size_t)B * NH * T * T;
    const size_t nfs = ol_attention_fwd_scratch_halves(B, T, C, NH),
                 nbs = ol_attention_bwd_scratch_halves(B, T, C, NH);
    auto qkv = rnd(nq, -1, 1), dy = rnd(no, -1, 1), d0 = rnd(nq, -0.1f, 0.1f);
    __half *dq = to_dev(qkv), *ddy = to_dev(dy), *out = dev<__half>(no), *dqkv = to_dev(d0),
           *qkvr = dev<__half>(nq), *att = dev<__half>(na), *fs = dev<__half>(nfs),
           *bs = dev<__half>(nbs);
    poison(out, no);
    poison(qkvr, nq);
    poison(att, na);
    poison(fs, nfs);
    poison(bs, nbs);
    if (!accumulate) poison(dqkv, nq);
    const int s1 = ol_attention_forward(h, out, qkvr, att, fs, dq, B, T, C, NH, nb);
    const int s2 = ol_attention_backward(h, dqkv, bs, ddy, qkvr, att, B, T, C, NH, nb,
                                         accumulate);
    CUDA_OK(cudaDeviceSynchronize());
    checks++;
    if (s1 != 0 || s2 != 0) {
        failures++;
        printf("FAIL attention B=%d T=%d C=%d NH=%d nb=%d: status %d / %d\n", B, T, C, NH, rb,
               s1, s2);
        cudaFree(dq), cudaFree(ddy), cudaFree(out), cudaFree(dqkv), cudaFree(qkvr);
        cudaFree(att), cudaFree(fs), cudaFree(bs);
        return;
    }
    // Reference in double: per (b, h) the T x T probabilities, then the gradients.
    std::vector<double> ro(no), rg(nq), ratt(na), P((size_t)T * T), dP((size_t)T * T);
    for (size_t i = 0; i < nq; i++) rg[i] = accumulate ? d0[i] : 0.0;
    const double sc = 1.0 / sqrt((double)hs);
    // q, k, v of (b, t, head h, dimension d): the three thirds of a qkv row.
    auto at = [&](int part, int b, int t, int h, int d) {
        return (double)qkv[((size_t)b * T + t) * 3 * C + (size_t)part * C + h * hs + d];
    };
    auto Q = [&](int b, int t, int h, int d) { return at(0, b, t, h, d); };
    auto K = [&](int b, int t, int h, int d) { return at(1, b, t, h, d); };
    auto Vv = [&](int b, int t, int h, int d) { return at(2, b, t, h, d); };
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            for (int t = 0; t < T; t++) {
                double mx = -1e300, sum = 0;
                for (int t2 = 0; t2 <= t; t2++) {
                    double s = 0;
                    for (int d = 0; d < hs; d++) s += Q(b, t, h, d) * K(b, t2, h, d);
                    P[(size_t)t * T + t2] = s * sc;
                    mx = fmax(mx, s * sc);
                }
                for (int t2 = 0; t2 <= t; t2++) {
                    P[(size_t)t * T + t2] = exp(P[(size_t)t * T + t2] - mx);
                    sum += P[(size_t)t * T + t2];
                }
                for (int t2 = 0; t2 <= t; t2++) {
                    P[(size_t)t * T + t2] /= sum;
                    ratt[(((size_t)b * NH + h) * T + t) * T + t2] = P[(size_t)t * T + t2];
                }
                for (int d = 0; d < hs; d++) {
                    double s = 0;
                    for (int t2 = 0; t2 <= t; t2++) s += P[(size_t)t * T + t2] * Vv(b, t2, h, d);
                    ro[((size_t)b * T + t) * C + h * hs + d] = s;
                }
            }
            for (int t = 0; t < T; t++) {
                double dot = 0;
                for (int t2 = 0; t2 <= t; t2++) {
                    double s = 0;
                    for (int d = 0; d < hs; d++)
                        s += dy[((size_t)b * T + t) * C + h * hs + d] * Vv(b, t2, h, d);
                    dP[(size_t)t * T + t2] = s;
                    dot += P[(size_t)t * T + t2] * s;
                }
                for (int t2 = 0; t2 <= t; t2++) {
                    const double g = P[(size_t)t * T + t2] * (dP[(size_t)t * T + t2] - dot) * sc;
                    for (int d = 0; d < hs; d++) {
                        rg[((size_t)b * T + t) * 3 * C + h * hs + d] += g * K(b, t2, h, d);
                        rg[((size_t)b * T + t2) * 3 * C + C + h * hs + d] += g * Q(b, t, h, d);
                        rg[((size_t)b * T + t2) * 3 * C + 2 * C + h * hs + d] +=
                            P[(size_t)t * T + t2] * dy[((size_t)b * T + t) * C + h * hs + d];
                    }
                }
            }
        }
    char name[96];
    snprintf(name, sizeof name, "attention B=%d T=%d C=%d NH=%d nb=%d", B, T, C, NH, rb);
    std::string n(name);
    // att, row t: exactly 0 from the diagonal to the row block's end, and past that end
    // still the poison (neither written nor needed; compared as 0 below).
    auto gatt = from_dev(att, na);
    std::vector<__half> raw(na);
    CUDA_OK(cudaMemcpy(raw.data(), att, na * sizeof(__half), cudaMemcpyDeviceToHost));
    size_t above = 0, past = 0;
    for (size_t r = 0; r < (size_t)B * NH * T; r++) {
        const int t = (int)(r % T), end = att_row_end(t, T, rb);
        for (int t2 = t + 1; t2 < end; t2++) above += gatt[r * T + t2] != 0.0f;
        for (int t2 = end; t2 < T; t2++) {
            uint16_t bits;
            memcpy(&bits, &raw[r * T + t2], sizeof bits);
            past += bits != 0x7e7e;
            gatt[r * T + t2] = 0.0f;
        }
    }
    checks++;
    if (above || past) {
        failures++;
        printf("FAIL %s att: %zu entries between the diagonal and the row block's end are not "
               "0, %zu past the end were written\n", name, above, past);
    } else {
        printf("ok   %s att: 0 above the diagonal, nothing written past the row blocks\n",
               name);
    }
    compare((n + " att").c_str(), gatt, ratt, 1e-2);
    compare((n + " forward").c_str(), from_dev(out, no), ro, 1e-2);
    compare((n + (accumulate ? " dqkv (accumulated)" : " dqkv (overwritten)")).c_str(),
            from_dev(dqkv, nq), rg, 1e-2);
    cudaFree(dq), cudaFree(ddy), cudaFree(out), cudaFree(dqkv), cudaFree(qkvr);
    cudaFree(att), cudaFree(fs), cudaFree(bs);
}

// The embedding of tokens tok [B,T] in double: out = wte[token] + wpe[t], and the
// gradients of wte [V,C] and wpe [T,C] from dout, the reference of the kernels below
static void encoder_reference(const std::vector<float> &wte, const std::vector<float> &wpe,
                              const std::vector<float> &dout, const std::vector<int32_t> &tok,
                              int B, int T, int C, int V, std::vector<double> &ref,
                              std::vector<double> &rwte, std::vector<double> &rwpe)
{
    ref.assign((size_t)B * T * C, 0.0);
    rwte.assign((size_t)V * C, 0.0);
    rwpe.assign((size_t)T * C, 0.0);
    for (size_t r = 0; r < (size_t)B * T; r++)
        for (int c = 0; c < C; c++) {
            const int t = (int)(r % T);
            ref[r * C + c] = wte[(size_t)tok[r] * C + c] + wpe[(size_t)t * C + c];
            rwte[(size_t)tok[r] * C + c] += dout[r * C + c];
            rwpe[(size_t)t * C + c] += dout[r * C + c];
        }
}

static void test_encoder(int B, int T, int C, int V)
{
    const size_t n = (size_t)B * T * C;
    auto wte = rnd((size_t)V * C, -1, 1), wpe = rnd((size_t)T * C, -1, 1), dout = rnd(n, -1, 1);
    std::vector<int32_t> tok((size_t)B * T);
    for (auto &t : tok) t = (int32_t)(urand(0, 1) * V) % V;
    int32_t *dtok = dev<int32_t>(tok.size());
    CUDA_OK(cudaMemcpy(dtok, tok.data(), tok.size() * 4, cudaMemcpyHostToDevice));
    __half *dwte = to_dev(wte), *dwpe = to_dev(wpe), *ddout = to_dev(dout), *out = dev<__half>(n);
    float *gwte = dev<float>((size_t)V * C), *gwpe = dev<float>((size_t)T * C);
    poison(out, n);
    CUDA_OK(cudaMemset(gwte, 0, (size_t)V * C * 4));
    CUDA_OK(cudaMemset(gwpe, 0, (size_t)T * C * 4));
    ol_encoder_forward(out, dtok, dwte, dwpe, B, T, C, 0);
    ol_encoder_backward(gwte, gwpe, ddout, dtok, B, T, C, 0);
    CUDA_OK(cudaDeviceSynchronize());
    std::vector<double> ref, rwte, rwpe;
    encoder_reference(wte, wpe, dout, tok, B, T, C, V, ref, rwte, rwpe);
    compare("encoder forward", from_dev(out, n), ref, 1e-2);
    compare("encoder backward dwte", from_devf(gwte, rwte.size()), rwte, 1e-2);
    compare("encoder backward dwpe", from_devf(gwpe, rwpe.size()), rwpe, 1e-2);
    cudaFree(dtok), cudaFree(dwte), cudaFree(dwpe), cudaFree(ddout), cudaFree(out);
    cudaFree(gwte), cudaFree(gwpe);
}

// The vocabulary-parallel embedding of tp shards (wte rows [r V/tp, (r+1) V/tp) each,
// the positions added by shard 0): the shards' outputs summed against the whole
// embedding, each shard's dwte against its rows of the whole one, every dwpe whole.
static void test_encoder_shard(int B, int T, int C, int V, int tp)
{
    const size_t n = (size_t)B * T * C;
    const int Vl = V / tp;
    auto wte = rnd((size_t)V * C, -1, 1), wpe = rnd((size_t)T * C, -1, 1), dout = rnd(n, -1, 1);
    std::vector<int32_t> tok((size_t)B * T);
    for (auto &t : tok) t = (int32_t)(urand(0, 1) * V) % V;
    int32_t *dtok = dev<int32_t>(tok.size());
    CUDA_OK(cudaMemcpy(dtok, tok.data(), tok.size() * 4, cudaMemcpyHostToDevice));
    __half *dwpe = to_dev(wpe), *ddout = to_dev(dout), *out = dev<__half>(n);
    float *gwte = dev<float>((size_t)Vl * C), *gwpe = dev<float>((size_t)T * C);
    std::vector<double> sum(n, 0.0), ref, rwte, rwpe;
    encoder_reference(wte, wpe, dout, tok, B, T, C, V, ref, rwte, rwpe);
    for (int k = 0; k < tp; k++) {
        const std::vector<float> rows(wte.begin() + (size_t)k * Vl * C,
                                      wte.begin() + (size_t)(k + 1) * Vl * C);
        __half *dwte = to_dev(rows);
        poison(out, n);
        CUDA_OK(cudaMemset(gwte, 0, (size_t)Vl * C * 4));
        CUDA_OK(cudaMemset(gwpe, 0, (size_t)T * C * 4));
        ol_encoder_forward_shard(out, dtok, dwte, k == 0 ? dwpe : nullptr, B, T, C, k * Vl, Vl,
                                 0);
        ol_encoder_backward_shard(gwte, gwpe, ddout, dtok, B, T, C, k * Vl, Vl, 0);
        CUDA_OK(cudaDeviceSynchronize());
        const auto part = from_dev(out, n);
        for (size_t i = 0; i < n; i++) sum[i] += part[i];
        const std::vector<double> mine(rwte.begin() + (size_t)k * Vl * C,
                                       rwte.begin() + (size_t)(k + 1) * Vl * C);
        compare("encoder shard backward dwte (its rows)", from_devf(gwte, mine.size()), mine,
                1e-2);
        compare("encoder shard backward dwpe (whole)", from_devf(gwpe, rwpe.size()), rwpe, 1e-2);
        cudaFree(dwte);
    }
    std::vector<float> got(sum.begin(), sum.end());
    compare("encoder shards' forward, summed", got, ref, 1e-2);
    cudaFree(dtok), cudaFree(dwpe), cudaFree(ddout), cudaFree(out);
    cudaFree(gwte), cudaFree(gwpe);
}

static void test_layernorm(int N, int C)
{
    const size_t n = (size_t)N * C;
    auto x = rnd(n, -2, 2), w = rnd(C, 0.5f, 1.5f), b = rnd(C, -0.5f, 0.5f), dy = rnd(n, -1, 1);
    auto din0 = rnd(n, -0.1f, 0.1f); // dinp accumulates onto this
    __half *dx = to_dev(x), *dw = to_dev(w), *db = to_dev(b), *ddy = to_dev(dy),
           *out = dev<__half>(n), *dinp = to_dev(din0);
    float *mean = dev<float>(N), *rstd = dev<float>(N), *gw = dev<float>(C), *gb = dev<float>(C);
    poison(out, n);
    poisonf(mean, N);
    poisonf(rstd, N);
    CUDA_OK(cudaMemset(gw, 0, C * 4));
    CUDA_OK(cudaMemset(gb, 0, C * 4));
    ol_layernorm_forward(out, mean, rstd, dx, dw, db, N, C, 0);
    ol_layernorm_backward(dinp, gw, gb, ddy, dx, dw, mean, rstd, N, C, 0);
    CUDA_OK(cudaDeviceSynchronize());
    std::vector<double> ref(n), rdin(n), rgw(C), rgb(C);
    for (int r = 0; r < N; r++) {
        double m = 0, v = 0;
        for (int c = 0; c < C; c++) m += x[(size_t)r * C + c];
        m /= C;
        for (int c = 0; c < C; c++) v += pow(x[(size_t)r * C + c] - m, 2);
        const double rs = 1.0 / sqrt(v / C + 1e-5);
        double s1 = 0, s2 = 0;
        for (int c = 0; c < C; c++) {
            const size_t i = (size_t)r * C + c;
            const double xh = (x[i] - m) * rs;
            ref[i] = xh * w[c] + b[c];
            s1 += dy[i] * w[c];
            s2 += dy[i] * w[c] * xh;
            rgw[c] += dy[i] * xh;
            rgb[c] += dy[i];
        }
        s1 /= C;
        s2 /= C;
        for (int c = 0; c < C; c++) {
            const size_t i = (size_t)r * C + c;
            const double xh = (x[i] - m) * rs;
            rdin[i] = din0[i] + rs * (dy[i] * w[c] - s1 - xh * s2);
        }
    }
    compare("layernorm forward", from_dev(out, n), ref, 1e-2);
    compare("layernorm backward dinp (accumulated)", from_dev(dinp, n), rdin, 1e-2);
    compare("layernorm backward dw", from_devf(gw, C), rgw, 1e-2);
    compare("layernorm backward db", from_devf(gb, C), rgb, 1e-2);
    cudaFree(dx), cudaFree(dw), cudaFree(db), cudaFree(ddy), cudaFree(out), cudaFree(dinp);
    cudaFree(mean), cudaFree(rstd), cudaFree(gw), cudaFree(gb);
}

// misalign = 1 starts every buffer one half past a 16-byte boundary, so the kernels
// take their element-by-element form instead of 16-byte accesses.
static void test_gelu_residual(size_t n, int accumulate, int misalign)
{
    const size_t m = n + (size_t)misalign;
    auto x = rnd(m, -4, 4), y = rnd(m, -1, 1), dy = rnd(m, -1, 1), din0 = rnd(m, -0.1f, 0.1f);
    __half *bx = to_dev(x), *bdy = to_dev(dy), *by = to_dev(y), *bout = dev<__half>(m),
           *bsum = dev<__half>(m), *bdinp = to_dev(din0);
    __half *dx = bx + misalign, *ddy = bdy + misalign, *dyy = by + misalign,
           *out = bout + misalign, *sum = bsum + misalign, *dinp = bdinp + misalign;
    poison(out, n);
    poison(sum, n);
    if (!accumulate) poison(dinp, n);
    ol_gelu_forward(out, dx, n, 0);
    ol_gelu_backward(dinp, dx, ddy, n, accumulate, 0);
    ol_residual_forward(sum, dx, dyy, n, 0);
    CUDA_OK(cudaDeviceSynchronize());
    std::vector<double> rg(n), rd(n), rs(n);
    const double k = sqrt(2.0 / M_PI);
    for (size_t i = 0; i < n; i++) {
        const size_t j = i + (size_t)misalign;
        const double v = x[j], u = k * (v + 0.044715 * v * v * v), th = tanh(u);
        rg[i] = 0.5 * v * (1 + th);
        const double grad =
            0.5 * (1 + th) + 0.5 * v * (1 - th * th) * k * (1 + 3 * 0.044715 * v * v);
        rd[i] = (accumulate ? din0[j] : 0.0) + grad * dy[j];
        rs[i] = (double)x[j] + y[j];
    }
    const std::string tag = misalign ? " (misaligned: element by element)" : "";
    compare(("gelu forward" + tag).c_str(), from_dev(out, n), rg, 1e-2);
    compare(((accumulate ? "gelu backward (accumulated)" : "gelu backward (overwritten)") + tag)
                .c_str(),
            from_dev(dinp, n), rd, 1e-2);
    compare(("residual forward" + tag).c_str(), from_dev(sum, n), rs, 1e-2);
    cudaFree(bx), cudaFree(bdy), cudaFree(by), cudaFree(bout), cudaFree(bsum), cudaFree(bdinp);
}

// Softmax cross-entropy of rows x [N,V] against targets tg in double: the losses rl[N]
// and scale * (softmax - onehot) rg[N,V], the reference of the kernels below
static void xent_reference(const std::vector<float> &x, const std::vector<int32_t> &tg, int N,
                           int V, float scale, std::vector<double> &rl, std::vector<double> &rg)
{
    rl.assign(N, 0.0);
    rg.assign((size_t)N * V, 0.0);
    for (int r = 0; r < N; r++) {
        double m = -1e30, s = 0;
        for (int j = 0; j < V; j++) m = fmax(m, x[(size_t)r * V + j]);
        for (int j = 0; j < V; j++) s += exp(x[(size_t)r * V + j] - m);
        rl[r] = log(s) + m - x[(size_t)r * V + tg[r]];
        for (int j = 0; j < V; j++)
            rg[(size_t)r * V + j] = scale * (exp(x[(size_t)r * V + j] - m) / s - (j == tg[r]));
    }
}

static void test_crossentropy(int N, int V, float scale)
{
    const size_t n = (size_t)N * V;
    auto x = rnd(n, -4, 4);
    std::vector<int32_t> tg(N);
    for (auto &t : tg) t = (int32_t)(urand(0, 1) * V) % V;
    tg[N - 1] = V - 1;
    int32_t *dtg = dev<int32_t>(N);
    CUDA_OK(cudaMemcpy(dtg, tg.data(), N * 4, cudaMemcpyHostToDevice));
    __half *dx = to_dev(x), *g = dev<__half>(n);
    float *loss = dev<float>(N), *loss2 = dev<float>(N);
    poison(g, n);
    poisonf(loss, N);
    poisonf(loss2, N);
    ol_crossentropy(loss, g, dx, dtg, N, V, scale, 0);
    ol_crossentropy(loss2, dx, dx, dtg, N, V, scale, 0); // in place, as the model uses it
    CUDA_OK(cudaDeviceSynchronize());
    std::vector<double> rl, rg;
    xent_reference(x, tg, N, V, scale, rl, rg);
    compare("cross-entropy losses", from_devf(loss, N), rl, 1e-3);
    compare("cross-entropy dlogits", from_dev(g, n), rg, 1e-2);
    compare("cross-entropy in place: losses", from_devf(loss2, N), rl, 1e-3);
    compare("cross-entropy in place: dlogits", from_dev(dx, n), rg, 1e-2);
    cudaFree(dtg), cudaFree(dx), cudaFree(g), cudaFree(loss), cudaFree(loss2);
}

// Vocabulary-parallel cross-entropy over tp shards of the columns: each shard's row
// stats, combined on the host as gpu_model_passes.cu does (the maximum, the sums
// rescaled to it and added, the target logits added), then each shard's losses and
// dlogits against softmax cross-entropy of the whole rows in double.
static void test_xent_shard(int N, int V, int tp, float scale)
{
    const int Vl = V / tp;
    auto x = rnd((size_t)N * V, -4, 4);
    std::vector<int32_t> tg(N);
    for (auto &t : tg) t = (int32_t)(urand(0, 1) * V) % V;
    tg[N - 1] = V - 1;
    int32_t *dtg = dev<int32_t>(N);
    CUDA_OK(cudaMemcpy(dtg, tg.data(), N * 4, cudaMemcpyHostToDevice));
    std::vector<double> rl, rg;
    xent_reference(x, tg, N, V, scale, rl, rg);
    std::vector<__half *> dx(tp);
    std::vector<std::vector<float>> st(tp);
    float *stats = dev<float>(3 * (size_t)N), *loss = dev<float>(N);
    for (int k = 0; k < tp; k++) { // each shard's columns, and its row stats
        std::vector<float> cols((size_t)N * Vl);
        for (int r = 0; r < N; r++)
            for (int j = 0; j < Vl; j++) cols[(size_t)r * Vl + j] = x[(size_t)r * V + k * Vl + j];
        dx[k] = to_dev(cols);
        poisonf(stats, 3 * (size_t)N);
        ol_xent_shard_stats(stats, dx[k], dtg, N, Vl, k * Vl, 0);
        CUDA_OK(cudaDeviceSynchronize());
        st[k] = from_devf(stats, 3 * (size_t)N);
    }
    std::vector<float> all(3 * (size_t)N, 0.0f); // max, sum of exp, target logit
    for (int r = 0; r < N; r++) {
        float m = st[0][r];
        for (int k = 1; k < tp; k++) m = fmaxf(m, st[k][r]);
        all[r] = m;
        for (int k = 0; k < tp; k++) {
            all[N + r] += st[k][N + r] * expf(st[k][r] - m);
            all[2 * N + r] += st[k][2 * N + r];
        }
    }
    CUDA_OK(cudaMemcpy(stats, all.data(), all.size() * 4, cudaMemcpyHostToDevice));
    for (int k = 0; k < tp; k++) {
        poisonf(loss, N);
        ol_xent_shard_finish(loss, dx[k], dx[k], dtg, stats, N, Vl, k * Vl, scale, 0);
        CUDA_OK(cudaDeviceSynchronize());
        std::vector<double> mine((size_t)N * Vl);
        for (int r = 0; r < N; r++)
            for (int j = 0; j < Vl; j++) mine[(size_t)r * Vl + j] = rg[(size_t)r * V + k * Vl + j];
        compare("cross-entropy shards: losses", from_devf(loss, N), rl, 1e-3);
        compare("cross-entropy shards: dlogits (in place)", from_dev(dx[k], mine.size()), mine,
                1e-2);
        cudaFree(dx[k]);
    }
    cudaFree(dtg), cudaFree(stats), cudaFree(loss);
}

int main(void)
{
    gpu_or_skip(); // exits: 77 without a GPU, 1 where CUDA cannot start
    ol_check_launches(1); // every launch waited for and checked, by kernel name
    cudaDeviceProp p;
    CUDA_OK(cudaGetDeviceProperties(&p, 0));
    printf("# %s, sm_%d%d\n", p.name, p.major, p.minor);
    cublasHandle_t h;
    if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS || ol_blas_numerics(h) != CUBLAS_STATUS_SUCCESS) {
        printf("FAIL cublasCreate, or cublasSetMathMode through ol_blas_numerics\n");
        return 1;
    }
    test_matmul(h, 37, 72, 216, 1, 1);  // odd sizes: no tensor-core-friendly multiples
    test_matmul(h, 37, 72, 216, 1, 0);
    test_matmul(h, 512, 768, 2304, 1, 0); // the GPT-2 124M c_attn shape
    test_matmul(h, 256, 768, 3072, 0, 1);
    test_matmul(h, 64, 48, 100, 1, 0); // OC % 8 != 0: the bias added element by element
    test_long_k(h, 64, 64, 50304); // the head's input gradient: K = V of GPT-2
    // Attention: nb = 0 is the default row blocks (1 below T = 128, 8 at T >= 512).
    test_attention(h, 2, 33, 48, 3, 0, 1);
    test_attention(h, 2, 45, 64, 4, 0, 0);    // T not a multiple of 8: scalar softmax rows
    test_attention(h, 2, 96, 48, 4, 3, 1);    // 3 blocks of 32 rows; hs 12: heads one by one
    test_attention(h, 2, 90, 48, 4, 2, 0);    // 2 blocks of 45 rows: scalar rows again
    test_attention(h, 2, 128, 768, 12, 0, 1); // 2 blocks
    test_attention(h, 2, 128, 768, 12, 1, 0); // the whole square
    test_attention(h, 2, 256, 128, 4, 0, 0);  // 4 blocks
    test_attention(h, 1, 1024, 128, 2, 0, 1); // GPT-2's T = 1024, hs = 64: 8 blocks
    test_attention(h, 1, 1024, 128, 2, 1, 0); // and the whole square
    cublasDestroy(h);
    test_encoder(2, 33, 72, 97);  // C % 8 == 0: 8 channels per thread
    test_encoder(2, 5, 12, 7);    // C % 8 != 0: one channel per thread
    test_encoder(4, 128, 768, 50304);
    test_encoder_shard(2, 33, 72, 96, 2); // 48 rows a shard, positions on shard 0
    test_encoder_shard(2, 5, 12, 12, 4);  // one channel per thread
    test_encoder_shard(2, 64, 768, 50304, 4);
    test_layernorm(37, 72);
    test_layernorm(1024, 768);
    test_gelu_residual(100003, 1, 0); // 16-byte accesses and a ragged end of 3
    test_gelu_residual(100003, 0, 0);
    test_gelu_residual(1000, 1, 1);
    test_crossentropy(7, 65, 1.0f);
    test_crossentropy(64, 50304, 1.0f / 64);
    test_xent_shard(7, 66, 2, 1.0f);          // Vl = 33: one half per access
    test_xent_shard(64, 50304, 4, 1.0f / 64); // GPT-2's vocabulary over tp 4
    printf("%d checks, %d failed\n", checks, failures);
    return failures ? 1 : 0;
}
