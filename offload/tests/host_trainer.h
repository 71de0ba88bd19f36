// host_trainer — the host side of the standalone GPU driver's training step: the
// flat parameter layout, GPT-2 initialisation, AdamW with the learning-rate schedule,
// the one mixed-precision train_step every mode of gpu_train.cu runs, and random
// token batches. The device side is the engine of offload/gpu_model.h.
//
// One training step (train_step): the master weights go to FP16 into the engine's
// pinned staging buffer and up, once; forward + backward on each of `accum`
// micro-batches (1 by default) with the loss scale, their gradients adding up on the
// GPU; the sum times 1/accum (scale x the mean gradient) comes down once as FP16, part
// by part as the backward finishes them, each part unscaled into FP32 while the GPU
// works on the next (gpu_model_grads_part); an inf or NaN skips the update and halves the scale
// (src/engine/lossscale.h), else AdamW (the formulas of src/model/optim.c) updates the master
// weights with the gradients clipped by their global norm. Neither the norm nor the
// clip is a pass over the gradients of its own: the unscale also sums the squares (the
// norm), and AdamW multiplies each gradient by the clip factor as it reads it
// (src/model/optim.c's way).
//
// Header-only, for one translation unit (gpu_train.cu): everything is `static`.
// Conventions:
//  - parameters are one flat FP32 buffer in the order of src/model/model.h (Layout: one
//    Tensor per parameter tensor, with its offset, size, weight decay and init);
//  - a Trainer owns the master weights, the gradients and the AdamW moments (FP32, on
//    the host), the loss scaler and the engine model (made by the caller, freed by it
//    with gpu_model_free(tr.g));
//  - a failed engine call ends the program (driver_util.h's eng/die: exit 1);
//  - OpenMP parallelises the loops; results do not depend on the thread count except
//    for the summation order of the gradient norm (fixed for a thread count).
#ifndef GT_OFFLOAD_TESTS_HOST_TRAINER_H
#define GT_OFFLOAD_TESTS_HOST_TRAINER_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <algorithm>
#include <string>
#include <vector>

#include "driver_util.h"
#include "gpu_model.h"
// half.h and lossscale.h are C headers (with C99 `restrict`).
#define restrict __restrict__
extern "C" {
#include "half.h"
#include "lossscale.h"
}
#undef restrict

// ------------------------------------------------------------------ parameter layout

// The flat layout of src/model/model.h (gpu_model.h): one entry per tensor.
enum { INIT_NORMAL, INIT_PROJ, INIT_ZERO, INIT_ONE };
struct Tensor {
    std::string name;
    size_t off, n;
    int decay; // AdamW weight decay: 2-D matrices only
    int init;
};
struct LayerOff {
    size_t ln1w, ln1b, qkvw, qkvb, projw, projb, ln2w, ln2b, fcw, fcb, fcpw, fcpb;
};
struct Layout {
    gpu_model_shape s;
    size_t n = 0, wte = 0, wpe = 0, lnfw = 0, lnfb = 0;
    std::vector<LayerOff> layer;
    std::vector<Tensor> t;
};

static inline Layout make_layout(const gpu_model_shape &s)
{
    Layout L;
    L.s = s;
    const size_t C = (size_t)s.n_embd;
    auto add = [&](const std::string &name, size_t n, int decay, int init) {
        L.t.push_back(Tensor{name, L.n, n, decay, init});
        L.n += n;
        return L.t.back().off;
    };
    L.wte = add("wte", (size_t)s.vocab_size * C, 1, INIT_NORMAL);
    L.wpe = add("wpe", (size_t)s.block_size * C, 1, INIT_NORMAL);
    for (int l = 0; l < s.n_layer; l++) {
        const std::string p = "h." + std::to_string(l) + ".";
        LayerOff o;
        o.ln1w = add(p + "ln_1.weight", C, 0, INIT_ONE);
        o.ln1b = add(p + "ln_1.bias", C, 0, INIT_ZERO);
        o.qkvw = add(p + "attn.c_attn.weight", 3 * C * C, 1, INIT_NORMAL);
        o.qkvb = add(p + "attn.c_attn.bias", 3 * C, 0, INIT_ZERO);
        o.projw = add(p + "attn.c_proj.weight", C * C, 1, INIT_PROJ);
        o.projb = add(p + "attn.c_proj.bias", C, 0, INIT_ZERO);
        o.ln2w = add(p + "ln_2.weight", C, 0, INIT_ONE);
        o.ln2b = add(p + "ln_2.bias", C, 0, INIT_ZERO);
        o.fcw = add(p + "mlp.c_fc.weight", 4 * C * C, 1, INIT_NORMAL);
        o.fcb = add(p + "mlp.c_fc.bias", 4 * C, 0, INIT_ZERO);
        o.fcpw = add(p + "mlp.c_proj.weight", 4 * C * C, 1, INIT_PROJ);
        o.fcpb = add(p + "mlp.c_proj.bias", C, 0, INIT_ZERO);
        L.layer.push_back(o);
    }
    L.lnfw = add("ln_f.weight", C, 0, INIT_ONE);
    L.lnfb = add("ln_f.bias", C, 0, INIT_ZERO);
    return L;
}

// GPT-2 initialisation (src/model/model_build.c's gpt_init_weights, with driver_util.h's Rng):
// N(0, 0.02), the residual projections N(0, 0.02/sqrt(2L)), biases 0, LayerNorm
// weights 1. Each 64 Ki-element chunk has its own stream: the same weights for any
// thread count.
static inline void init_params(const Layout &L, float *p, uint64_t seed)
{
    const size_t CH = (size_t)1 << 16;
    for (size_t k = 0; k < L.t.size(); k++) {
        const Tensor &t = L.t[k];
        float *w = p + t.off;
        if (t.init == INIT_ZERO || t.init == INIT_ONE) {
            const float v = t.init == INIT_ONE ? 1.0f : 0.0f;
            for (size_t i = 0; i < t.n; i++) w[i] = v;
            continue;
        }
        const double sd = t.init == INIT_PROJ ? 0.02 / sqrt(2.0 * L.s.n_layer) : 0.02;
        const long nch = (long)((t.n + CH - 1) / CH);
#pragma omp parallel for schedule(static)
        for (long c = 0; c < nch; c++) {
            Rng r(seed ^ splitmix64(((uint64_t)k << 32) + (uint64_t)c));
            const size_t lo = (size_t)c * CH, hi = lo + CH < t.n ? lo + CH : t.n;
            for (size_t i = lo; i < hi; i++) w[i] = (float)(sd * r.normal());
        }
    }
}

// ------------------------------------------------------------------ the trainer

struct Hyper {
    double beta1, beta2, eps, wd, clip;
};

struct Trainer {
    Layout L;
    gpu_model *g = nullptr;
    std::vector<float> p, gr, m, v; // master weights, gradients, AdamW moments (FP32)
    int64_t t = 0;                  // AdamW updates applied
    loss_scaler ls;
    Hyper h{0.9, 0.95, 1e-8, 0.1, 1.0};
    int threads = 1;
};

// The engine's model g (made by the caller) with freshly initialised master weights.
static inline void trainer_open(Trainer &tr, const gpu_model_shape &s, gpu_model *g, uint64_t seed)
{
    tr.L = make_layout(s);
    const size_t n = gpu_model_param_count(&s);
    if (n != tr.L.n) {
        printf("FAIL parameter count: the engine says %zu, the layout here %zu\n", n, tr.L.n);
        exit(1);
    }
    if (!gpu_model_param_staging(g)) {
        printf("FAIL gpu_model_param_staging returned NULL\n");
        exit(1);
    }
    tr.g = g;
    tr.p.assign(n, 0.0f);
    tr.gr.assign(n, 0.0f);
    tr.m.assign(n, 0.0f);
    tr.v.assign(n, 0.0f);
    tr.t = 0;
    tr.threads = nthreads();
    init_params(tr.L, tr.p.data(), seed);
    loss_scaler_init(&tr.ls, LOSS_SCALE_INIT, LOSS_SCALE_GROWTH_INTERVAL);
}

static inline void reset_optimizer(Trainer &tr)
{
    std::fill(tr.m.begin(), tr.m.end(), 0.0f);
    std::fill(tr.v.begin(), tr.v.end(), 0.0f);
    tr.t = 0;
}

// dst = FP16(src), in parallel chunks.
static inline void to_half(uint16_t *dst, const float *src, size_t n)
{
    const size_t CH = (size_t)1 << 16;
    const long nch = (long)((n + CH - 1) / CH);
#pragma omp parallel for schedule(static)
    for (long c = 0; c < nch; c++) {
        const size_t lo = (size_t)c * CH, len = n - lo < CH ? n - lo : CH;
        half_from_float(dst + lo, src + lo, len);
    }
}

// The master weights to the device (through the engine's pinned staging buffer).
static inline void upload_params(Trainer &tr)
{
    to_half(gpu_model_param_staging(tr.g), tr.p.data(), tr.L.n);
    eng(gpu_model_upload_params(tr.g, why, sizeof why), "gpu_model_upload_params");
}

// What the GPU computes with: the master weights rounded through FP16, in double.
static inline std::vector<double> rounded_params(const Trainer &tr)
{
    std::vector<uint16_t> h(tr.L.n);
    std::vector<float> f(tr.L.n);
    to_half(h.data(), tr.p.data(), tr.L.n);
    half_to_float(f.data(), h.data(), tr.L.n);
    return std::vector<double>(f.begin(), f.end());
}

// The learning rate of src/model/optim.c: linear warmup, then cosine down to min_lr at the
// last step.
static inline double lr_at_step(int64_t step, int64_t warmup, int64_t total, double lr,
                                double min_lr)
{
    if (step < warmup) return lr * (double)(step + 1) / (double)warmup;
    const int64_t span = total - 1 - warmup;
    if (span <= 0 || step >= total - 1) return min_lr;
    const double progress = (double)(step - warmup) / (double)span;
    return min_lr + 0.5 * (1.0 + cos(3.14159265358979323846 * progress)) * (lr - min_lr);
}

// The clip factor of src/model/optim.c's grad_clip_factor: (float)(clip / (norm + 1e-6)) when
// norm > clip > 0, else exactly 1.
static inline float clip_factor(double norm, double clip)
{
    if (!(clip > 0.0) || !(norm > clip)) return 1.0f;
    return (float)(clip / (norm + 1e-6));
}

// AdamW as src/model/optim.c, with the gradient g = gr * grad_scale (the clip factor, folded
// in so the clip costs no pass over the gradients of its own; gr is not written):
// m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
// p -= lr (mhat / (sqrt(vhat) + eps) + wd p), decay on 2-D matrices only.
static inline void adamw_update(Trainer &tr, double lr, float grad_scale)
{
    tr.t++;
    const Hyper &h = tr.h;
    const float b1 = (float)h.beta1, b2 = (float)h.beta2;
    const double c1 = 1.0 - pow(h.beta1, (double)tr.t), c2 = 1.0 - pow(h.beta2, (double)tr.t);
    const float step_size = (float)(lr / c1), inv_sqrt_c2 = (float)(1.0 / sqrt(c2));
    const float epsf = (float)h.eps;
    float *P = tr.p.data(), *M = tr.m.data(), *V = tr.v.data();
    const float *G = tr.gr.data();
    const int nt = (int)tr.L.t.size();
#pragma omp parallel
    for (int k = 0; k < nt; k++) {
        const Tensor &tn = tr.L.t[k];
        const float decay = tn.decay ? (float)(lr * h.wd) : 0.0f;
        const long lo = (long)tn.off, hi = (long)(tn.off + tn.n);
#pragma omp for schedule(static) nowait
        for (long i = lo; i < hi; i++) {
            const float gi = G[i] * grad_scale;
            const float mi = b1 * M[i] + (1.0f - b1) * gi;
            const float vi = b2 * V[i] + (1.0f - b2) * gi * gi;
            M[i] = mi;
            V[i] = vi;
            P[i] -= step_size * mi / (sqrtf(vi) * inv_sqrt_c2 + epsf) + decay * P[i];
        }
    }
}

struct StepOut {
    float loss = 0.0f, scale = 0.0f; // mean loss the GPU reported, the scale it ran with
    int overflow = 0;                // inf/NaN gradients: the update was skipped
    int micro = 0;                   // micro-batches run
    loss_scale_event ev = LOSS_SCALE_KEPT;
    double norm = 0.0; // global gradient norm before clipping (0 when skipped)
    // Wall clock: convert + upload, GPU steps until the last gradient part is unscaled,
    // the unscale calls within that (overlapped with the backward), AdamW, in all.
    double ms_up = 0, ms_gpu = 0, ms_unscale = 0, ms_opt = 0, ms = 0;
};

// One mixed-precision training step at learning rate lr (see the top of the file) over
// accum micro-batches: in and tg hold accum batches [B,T] one after the other. The
// micro-batches' gradients add up on the GPU (gpu_model_step_micro), each at the whole
// loss scale, and come down once, times 1/accum (scale x the mean gradient):
// one unscale per update, whatever accum is. An overflow in any micro-batch shows in
// the sum, so it is found after the last.
static inline void train_step(Trainer &tr, const int32_t *in, const int32_t *tg, int B,
                              int T, double lr, StepOut *o, int accum = 1)
{
    const size_t n = tr.L.n, bt = (size_t)B * T;
    if (accum < 1) {
        printf("FAIL train_step: %d micro-batches (at least 1)\n", accum);
        exit(1);
    }
    const double t0 = now_ms();
    upload_params(tr);
    const double t1 = now_ms();
    o->scale = tr.ls.scale;
    double loss_sum = 0.0;
    o->micro = 0;
    for (int k = 0; k < accum; k++) {
        float loss = 0.0f;
        eng(gpu_model_step_micro(tr.g, in + k * bt, tg + k * bt, B, T, o->scale, k == 0,
                                 k == accum - 1, 1.0f / (float)accum, &loss, why, sizeof why),
            "gpu_model_step_micro");
        loss_sum += loss;
        o->micro++;
    }
    // The gradients part by part as the backward finishes them: each part is unscaled
    // while the GPU computes the parts below it. The unscale also sums the squares, so
    // the norm needs no pass of its own.
    double sumsq = 0.0;
    o->overflow = 0;
    o->ms_unscale = 0.0;
    size_t covered = 0;
    for (int k = 0; k < gpu_model_grad_parts(tr.g); k++) {
        size_t lo = 0, hi = 0;
        const uint16_t *gh = gpu_model_grads_part(tr.g, k, &lo, &hi, why, sizeof why);
        if (!gh) die("gpu_model_grads_part");
        const double a = now_ms();
        double sq = 0.0;
        o->overflow |= unscale_half_grads_sumsq(tr.gr.data() + lo, gh + lo, hi - lo,
                                                1.0f / o->scale, 0, tr.threads, &sq);
        sumsq += sq;
        covered += hi - lo;
        o->ms_unscale += now_ms() - a;
    }
    if (covered != n) {
        printf("FAIL train_step: the gradient parts cover %zu of %zu parameters\n", covered, n);
        exit(1);
    }
    const double t2 = now_ms();
    o->loss = (float)(loss_sum / o->micro);
    o->ev = loss_scaler_update(&tr.ls, o->overflow);
    const double t3 = now_ms();
    o->norm = 0.0;
    if (!o->overflow) {
        o->norm = sqrt(sumsq);
        adamw_update(tr, lr, clip_factor(o->norm, tr.h.clip));
    }
    const double t4 = now_ms();
    o->ms_up = t1 - t0;
    o->ms_gpu = t2 - t1; // the GPU steps, with the unscale overlapped
    o->ms_opt = t4 - t3;
    o->ms = t4 - t0;
}

// Inputs and targets of B rows: windows of T+1 tokens, targets shifted by one.
static inline void random_batch(Rng &r, int V, int B, int T, std::vector<int32_t> &in,
                                std::vector<int32_t> &tg)
{
    in.resize((size_t)B * T);
    tg.resize((size_t)B * T);
    for (int b = 0; b < B; b++) {
        int32_t prev = (int32_t)r.below((uint32_t)V);
        for (int t = 0; t < T; t++) {
            const int32_t next = (int32_t)r.below((uint32_t)V);
            in[(size_t)b * T + t] = prev;
            tg[(size_t)b * T + t] = next;
            prev = next;
        }
    }
}

#endif
