// gpu_train — gentrain's GPU training step (offload/gpu_model.h) driven on its own:
// FP32 master weights, AdamW and the dynamic loss scale on the host, forward and
// backward in FP16 on the GPU. Needs only nvcc, cuBLAS and a GPU: no MPI, HDF5 or BLAS
// (scripts/gpu-check.sh and `make check` build it from gpu_model.cu,
// gpu_model_passes.cu, ops.cu and the plain C src/engine/lossscale.c and src/kernels/simd/half.c).
//
//   gpu_train [test]       the step against a CPU reference in double (no argument:
//                          test, as `make check` runs it)
//   gpu_train grads        one whole training step at the GPT-2 124M shape (B = 1,
//                          T = 1024): every parameter tensor's gradient and the loss
//                          against the same step in double on the CPU (ref_grads.h),
//                          within stated tolerances (run_grads)
//   gpu_train bench        throughput at the GPT-2 124M shape: tokens/s and MFU of the
//                          GPU step alone, of the full step, and of the full step with
//                          4 micro-batches per update (gradient accumulation)
//   gpu_train shakespeare  a short character-level run on data/tinyshakespeare.txt
// Options: --data FILE (shakespeare), --steps N (shakespeare: 600; bench: timed steps,
// 10), --peak-tflops X (bench: the peak MFU is measured against, 989.4 = H200 dense
// FP16), --seed N, --small (grads, bench and shakespeare: the same code at a 2-layer,
// 64-wide shape with T = 64, a smoke run of the modes and of scripts/gpu-check.sh that
// the CPU emulation, offload/tests/emu, finishes in seconds; its figures mean nothing,
// shakespeare then asks only that the val loss fall by more than 0.5, and grads also
// checks its reference against finite differences).
//
// The test mode checks gradient accumulation (several micro-batches per update), the
// blocks-only engine (gpu_model_create_blocks) between an embedding and a head
// computed here in double, and a stage model with both ends (gpu_model_create_stage,
// what gentrain's offload = blocks runs) against gpu_model_step.
//
// Files: host_trainer.h (the host side of the training step: layout, init, AdamW,
// train_step, batches), ref_model.h (the CPU reference forward in double, and the
// embedding and head, forward and backward, the blocks test runs on the host),
// ref_grads.h (the whole step's forward and backward in double, with OpenMP, for
// grads), driver_util.h (failure reporting, clocks, random numbers); this file holds
// the four modes and main.
//
// Exit status: 0 passed, 1 a check or a call failed (or a driver is there and CUDA
// cannot start), 77 no GPU: no NVIDIA driver or device (skipped).
#include <cuda_runtime.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <string>
#include <vector>

#include "attention_plan.h"
#include "ops.cuh" // defines: ol_check_launches
#include "cuda_ok.h"
#include "driver_util.h"
#include "host_trainer.h"
#include "ref_grads.h"
#include "ref_model.h"

// ------------------------------------------------------------------ test mode

static double rel_diff(double a, double b) { return fabs(a - b) / fmax(fabs(b), 1e-30); }

// A step whose gradient buffer was poisoned (0xFF bytes: NaN halves) before it ran,
// so any gradient the engine does not write stays NaN. The buffer handed back is
// poisoned before each try until the step hands back one that was (the engine may
// keep more than one). The gradients come back unscaled into tr.gr; returns the
// overflow flag of unscale_half_grads.
static int poisoned_step(Trainer &tr, const int32_t *in, const int32_t *tg, int B, int T,
                         float scale, float *loss, const uint16_t **grads)
{
    std::vector<const uint16_t *> seen;
    for (int attempt = 0; attempt < 4; attempt++) {
        for (const uint16_t *p : seen) memset((void *)p, 0xFF, tr.L.n * sizeof(uint16_t));
        eng(gpu_model_step(tr.g, in, tg, B, T, scale, loss, why, sizeof why), "gpu_model_step");
        const uint16_t *gh = gpu_model_grads(tr.g, why, sizeof why);
        if (!gh) die("gpu_model_grads");
        for (const uint16_t *p : seen)
            if (p == gh) {
                *grads = gh;
                return unscale_half_grads(tr.gr.data(), gh, tr.L.n, 1.0f / scale, 0,
                                          tr.threads);
            }
        seen.push_back(gh);
    }
    printf("FAIL gpu_model_grads hands back a new buffer every step: cannot poison it\n");
    exit(1);
}

// Which tensors hold non-finite gradients, for the failure message.
static std::string nonfinite_tensors(const Layout &L, const uint16_t *gh)
{
    std::string s;
    for (const Tensor &t : L.t) {
        size_t bad = 0;
        for (size_t i = 0; i < t.n; i++) bad += (gh[t.off + i] & 0x7C00) == 0x7C00;
        if (bad) s += " " + t.name + "(" + std::to_string(bad) + "/" + std::to_string(t.n) + ")";
    }
    return s;
}

// Gradient check along K random unit directions d restricted to [off, off+n): a
// gradient's g.d (the GPU's floats, or ref_grads.h's doubles) against the central difference (L(w + eps d) - L(w - eps d)) / (2 eps) of
// the double reference. Returns the norm-wise relative error over the K directions,
// ||g.d - fd|| / ||fd|| (one direction alone would make it a ratio of two random
// numbers of which the second can be near 0 by chance); *fd_rms gets the size of fd.
template <typename G>
static double direction_check(const Layout &L, const std::vector<double> &w, const G *g,
                              size_t off, size_t n, int K, Rng &rng, const int32_t *in,
                              const int32_t *tg, int B, int T, double *fd_rms)
{
    const double eps = 1e-3;
    std::vector<double> wp(w), d(n);
    double se = 0.0, sr = 0.0;
    for (int k = 0; k < K; k++) {
        double nn = 0.0;
        for (double &u : d) {
            u = rng.normal();
            nn += u * u;
        }
        nn = sqrt(nn);
        double gd = 0.0;
        for (size_t i = 0; i < n; i++) {
            d[i] /= nn;
            gd += (double)g[off + i] * d[i];
        }
        for (size_t i = 0; i < n; i++) wp[off + i] = w[off + i] + eps * d[i];
        const double lp = ref_loss(L, wp.data(), in, tg, B, T);
        for (size_t i = 0; i < n; i++) wp[off + i] = w[off + i] - eps * d[i];
        const double lm = ref_loss(L, wp.data(), in, tg, B, T);
        for (size_t i = 0; i < n; i++) wp[off + i] = w[off + i];
        const double fd = (lp - lm) / (2.0 * eps);
        se += (gd - fd) * (gd - fd);
        sr += fd * fd;
    }
    *fd_rms = sqrt(sr / K);
    return sr > 0.0 ? sqrt(se / sr) : sqrt(se);
}

static void check_loss(const char *what, double got, double ref, double tol)
{
    const double r = rel_diff(got, ref);
    report(isfinite(got) && r < tol, "%s: GPU %.6f, CPU reference %.6f, relative %.2e (< %.0e)",
           what, got, ref, r, tol);
}

// Gradients of one step (poisoned buffer, loss scale 1024) checked tensor by tensor.
static void check_gradients(Trainer &tr, const char *tag, const int32_t *in, const int32_t *tg,
                            int B, int T, bool every_tensor, Rng &rng)
{
    const float scale = 1024.0f;
    const std::vector<double> w = rounded_params(tr);
    const double ref = ref_loss(tr.L, w.data(), in, tg, B, T);
    float loss = 0.0f;
    const uint16_t *gh = nullptr;
    const int bad = poisoned_step(tr, in, tg, B, T, scale, &loss, &gh);
    char what[160];
    snprintf(what, sizeof what, "%s: loss of gpu_model_step", tag);
    check_loss(what, loss, ref, 1e-2);
    if (bad) {
        report(false, "%s: gradients are finite (scale %.0f): inf/NaN in%s", tag, scale,
               nonfinite_tensors(tr.L, gh).c_str());
        return;
    }
    // Every tensor written (finite, above) and not all zero (wpe rows >= T get none).
    std::string zero;
    for (const Tensor &t : tr.L.t) {
        size_t nz = 0;
        const size_t len = t.off == tr.L.wpe ? (size_t)T * tr.L.s.n_embd : t.n;
        for (size_t i = 0; i < len; i++) nz += tr.gr[t.off + i] != 0.0f;
        if (!nz) zero += " " + t.name;
    }
    report(zero.empty(), "%s: gradients finite (poisoned buffer, scale %.0f) and nonzero in "
           "every tensor%s%s", tag, scale, zero.empty() ? "" : "; all zero:", zero.c_str());
    if (T < tr.L.s.block_size) { // wpe rows the batch never reaches: exactly zero
        size_t nz = 0;
        const size_t C = (size_t)tr.L.s.n_embd, maxT = (size_t)tr.L.s.block_size;
        for (size_t i = (size_t)T * C; i < maxT * C; i++) nz += tr.gr[tr.L.wpe + i] != 0.0f;
        report(nz == 0, "%s: wpe rows %d..%zu (beyond T) have zero gradient (%zu nonzero)", tag,
               T, maxT - 1, nz);
    }
    struct Set {
        std::string name;
        size_t off, n;
    };
    std::vector<Set> sets;
    sets.push_back({"all parameters", 0, tr.L.n});
    for (const Tensor &t : tr.L.t)
        if (every_tensor) sets.push_back({t.name, t.off, t.n});
    const double tol = 3e-2;
    for (const Set &s : sets) {
        double fd_rms = 0.0;
        const int K = 3;
        const double r = direction_check(tr.L, w, tr.gr.data(), s.off, s.n, K, rng, in, tg, B,
                                         T, &fd_rms);
        report(r < tol, "%s: gradient . d vs central difference, %s (%zu, %d random "
               "directions): relative %.2e (< %.0e), |fd| %.2e", tag, s.name.c_str(), s.n, K,
               r, tol, fd_rms);
    }
}

// ------------------------------------------------------------------ test mode: blocks

// The layout range a blocks engine holds: from the first block to ln_f.
static size_t blocks_lo(const Layout &L) { return L.wpe + (size_t)L.s.block_size * L.s.n_embd; }
static size_t blocks_hi(const Layout &L) { return L.lnfw; }

// What offload = blocks computes with (src/engine/gpu_stage.c): the blocks' weights rounded
// through FP16 (on the device), the embedding's and the head's the FP32 master weights
// (on the host), in double.
static std::vector<double> blocks_params(const Trainer &tr)
{
    std::vector<double> w(tr.p.begin(), tr.p.end());
    const std::vector<double> r = rounded_params(tr);
    for (size_t i = blocks_lo(tr.L); i < blocks_hi(tr.L); i++) w[i] = r[i];
    return w;
}

// One step of offload = blocks on weights w: the embedding in double here, the blocks on
// the engine, the head in double here (forward; with grad also its backward with
// d(mean loss)/d(logits) x scale, the blocks' backward on the engine and the
// embedding's here). Returns the mean loss; with grad, tr.gr gets the unscaled
// gradients (the engine's FP16 ones in the blocks' range, the host's elsewhere), *gh
// the engine's gradient buffer, and the result of the inf/NaN check goes to *bad.
static double blocks_step(Trainer &tr, const std::vector<double> &w, const int32_t *in,
                          const int32_t *tg, int B, int T, bool grad, float scale,
                          const uint16_t **gh, int *bad)
{
    const Layout &L = tr.L;
    const int C = L.s.n_embd;
    const size_t N = (size_t)B * T, RC = (size_t)T * C;
    std::vector<double> x(N * C), dx(N * C), hg(grad ? L.n : 0, 0.0);
    std::vector<float> f(N * C);
    for (int b = 0; b < B; b++) ref_embed(L, w.data(), in + b * T, T, &x[b * RC]);
    for (size_t i = 0; i < N * C; i++) f[i] = (float)x[i];
    eng(gpu_model_blocks_forward(tr.g, f.data(), f.data(), B, T, why, sizeof why),
        "gpu_model_blocks_forward");
    for (size_t i = 0; i < N * C; i++) x[i] = f[i];
    double loss = 0.0;
    for (int b = 0; b < B; b++)
        loss += ref_head(L, w.data(), &x[b * RC], tg + b * T, T, scale / (double)N,
                         grad ? &dx[b * RC] : nullptr, grad ? hg.data() : nullptr);
    if (!grad) return loss / (double)N;
    for (size_t i = 0; i < N * C; i++) f[i] = (float)dx[i];
    eng(gpu_model_blocks_backward(tr.g, f.data(), f.data(), B, T, why, sizeof why),
        "gpu_model_blocks_backward");
    for (size_t i = 0; i < N * C; i++) dx[i] = f[i];
    for (int b = 0; b < B; b++) ref_embed_backward(L, in + b * T, T, &dx[b * RC], hg.data());
    *gh = gpu_model_grads(tr.g, why, sizeof why);
    if (!*gh) die("gpu_model_grads");
    const size_t lo = blocks_lo(L), hi = blocks_hi(L);
    *bad = unscale_half_grads(tr.gr.data() + lo, *gh + lo, hi - lo, 1.0f / scale, 0,
                              tr.threads);
    for (size_t i = 0; i < L.n; i++)
        if (i < lo || i >= hi) {
            const double v = hg[i] / scale;
            *bad |= !isfinite(v);
            tr.gr[i] = (float)v;
        }
    return loss / (double)N;
}

// 9. offload = blocks: the blocks-only engine between the host's embedding and head.
static void test_blocks(const gpu_model_shape &s, int B, int T, uint64_t seed)
{
    gpu_model *g = gpu_model_create_blocks(&s, B, T, why, sizeof why);
    if (!g) die("gpu_model_create_blocks");
    Trainer tr;
    trainer_open(tr, s, g, seed);
    const Layout &L = tr.L;
    Rng rng(seed + 11);
    std::vector<int32_t> in, tg;
    random_batch(rng, s.vocab_size, B, T, in, tg);
    {
        float loss = 0.0f;
        const bool step = gpu_model_step(g, in.data(), tg.data(), B, T, 1024.0f, &loss, why,
                                         sizeof why) != 0;
        const bool bwd = gpu_model_blocks_backward(g, nullptr, nullptr, B, T, why,
                                                   sizeof why) != 0;
        report(step && bwd, "blocks: the engine refuses gpu_model_step (%s) and a backward "
               "before any forward (%s)", step ? "refused" : "ACCEPTED",
               bwd ? "refused" : "ACCEPTED");
    }
    upload_params(tr);
    const std::vector<double> w = blocks_params(tr);
    const double ref = ref_loss(L, w.data(), in.data(), tg.data(), B, T);
    check_loss("blocks 4x32: loss (host embedding and head, GPU blocks)",
               blocks_step(tr, w, in.data(), tg.data(), B, T, false, 0.0f, nullptr, nullptr),
               ref, 1e-2);
    // Gradients at scale 1024: one step, then the blocks' range of the buffer it handed
    // back poisoned (NaN halves) and a second step, which must write all of it.
    const float scale = 1024.0f;
    const uint16_t *gh0 = nullptr, *gh = nullptr;
    int bad = 0;
    blocks_step(tr, w, in.data(), tg.data(), B, T, true, scale, &gh0, &bad);
    const size_t lo = blocks_lo(L), hi = blocks_hi(L);
    memset((void *)(gh0 + lo), 0xFF, (hi - lo) * sizeof(uint16_t));
    const double loss = blocks_step(tr, w, in.data(), tg.data(), B, T, true, scale, &gh, &bad);
    check_loss("blocks 4x32: loss of the training pass", loss, ref, 1e-2);
    size_t outside = 0;
    for (size_t i = 0; i < L.n; i++) outside += (i < lo || i >= hi) && gh[i] != 0;
    report(gh == gh0 && outside == 0, "blocks: one gradient buffer (%s), zero outside the "
           "blocks' range (%zu nonzero)", gh == gh0 ? "the same twice" : "A NEW ONE", outside);
    if (bad) {
        report(false, "blocks: gradients are finite (scale %.0f): inf/NaN in%s", scale,
               nonfinite_tensors(L, gh).c_str());
    } else {
        std::string zero;
        for (const Tensor &t : L.t) {
            size_t nz = 0;
            const size_t len = t.off == L.wpe ? (size_t)T * s.n_embd : t.n;
            for (size_t i = 0; i < len; i++) nz += tr.gr[t.off + i] != 0.0f;
            if (!nz) zero += " " + t.name;
        }
        report(zero.empty(), "blocks: gradients finite (poisoned blocks' range, scale %.0f) "
               "and nonzero in every tensor%s%s", scale, zero.empty() ? "" : "; all zero:",
               zero.c_str());
        const double tol = 3e-2;
        std::vector<Tensor> sets(1, Tensor{"all parameters", 0, L.n, 0, 0});
        sets.insert(sets.end(), L.t.begin(), L.t.end());
        for (const Tensor &t : sets) {
            double fd_rms = 0.0;
            const int K = 3;
            const double r = direction_check(L, w, tr.gr.data(), t.off, t.n, K, rng,
                                             in.data(), tg.data(), B, T, &fd_rms);
            report(r < tol, "blocks: gradient . d vs central difference, %s (%zu, %d random "
                   "directions): relative %.2e (< %.0e), |fd| %.2e", t.name.c_str(), t.n, K,
                   r, tol, fd_rms);
        }
    }
    // A smaller batch than the engine was made for.
    {
        const int B2 = 2, T2 = 16;
        std::vector<int32_t> in2, tg2;
        random_batch(rng, s.vocab_size, B2, T2, in2, tg2);
        check_loss("blocks, smaller batch 2x16: loss",
                   blocks_step(tr, w, in2.data(), tg2.data(), B2, T2, false, 0.0f, nullptr,
                               nullptr),
                   ref_loss(L, w.data(), in2.data(), tg2.data(), B2, T2), 1e-2);
    }
    gpu_model_free(tr.g);
}

// 10. A stage model with both ends (gentrain's offload = blocks: the pipeline's stage
// engine at pp = tp = 1) against gpu_model_step on the same FP16 weights: the same
// kernels, so the same loss and gradients, up to the order a GPU's atomics add in (the
// emulation: bit for bit); and the stage entry points' refusals.
static void test_stage(const gpu_model_shape &s, int B, int T, uint64_t seed)
{
    gpu_model *ga = gpu_model_create(&s, B, T, why, sizeof why);
    if (!ga) die("gpu_model_create");
    gpu_model *gs = gpu_model_create_stage(&s, B, T, nullptr, 1, 1, why, sizeof why);
    if (!gs) die("gpu_model_create_stage");
    Trainer tr;
    trainer_open(tr, s, ga, seed);
    const size_t n = tr.L.n;
    upload_params(tr);
    memcpy(gpu_model_param_staging(gs), gpu_model_param_staging(ga), n * sizeof(uint16_t));
    eng(gpu_model_upload_params(gs, why, sizeof why), "gpu_model_upload_params (stage)");
    Rng rng(seed + 13);
    std::vector<int32_t> in, tg;
    random_batch(rng, s.vocab_size, B, T, in, tg);
    {
        float l = 0.0f;
        const bool blk = gpu_model_blocks_forward(gs, nullptr, nullptr, B, T, why,
                                                  sizeof why) != 0;
        eng(gpu_model_stage_forward(gs, in.data(), nullptr, tg.data(), 0.0f, nullptr, &l, B, T,
                                    why, sizeof why),
            "gpu_model_stage_forward (evaluation)");
        const bool bwd = gpu_model_stage_backward(gs, nullptr, nullptr, B, T, why,
                                                  sizeof why) != 0;
        report(blk && bwd, "stage: the blocks entry points refuse a model with its ends (%s), "
               "a backward after an evaluation is refused (%s)", blk ? "refused" : "ACCEPTED",
               bwd ? "refused" : "ACCEPTED");
    }
    const float scale = 1024.0f;
    float la = 0.0f, ls = 0.0f;
    eng(gpu_model_step(ga, in.data(), tg.data(), B, T, scale, &la, why, sizeof why),
        "gpu_model_step");
    const uint16_t *g16 = gpu_model_grads(ga, why, sizeof why);
    if (!g16) die("gpu_model_grads");
    std::vector<float> ref(n), got(n);
    half_to_float(ref.data(), g16, n);
    eng(gpu_model_stage_forward(gs, in.data(), nullptr, tg.data(), scale, nullptr, &ls, B, T,
                                why, sizeof why),
        "gpu_model_stage_forward");
    eng(gpu_model_stage_backward(gs, nullptr, nullptr, B, T, why, sizeof why),
        "gpu_model_stage_backward");
    const uint16_t *s16 = gpu_model_grads(gs, why, sizeof why);
    if (!s16) die("gpu_model_grads (stage)");
    half_to_float(got.data(), s16, n);
    double dd = 0.0, rr = 0.0;
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        bad += !isfinite(got[i]);
        dd += ((double)got[i] - ref[i]) * ((double)got[i] - ref[i]);
        rr += (double)ref[i] * ref[i];
    }
    const double rel = sqrt(dd / fmax(rr, 1e-30));
    report(rel_diff(ls, la) < 1e-5 && bad == 0 && rel < 1e-3 && rr > 0,
           "stage with both ends vs gpu_model_step 4x32: loss %.6f vs %.6f, gradients "
           "||g_stage - g_step|| / ||g_step|| = %.2e (< 1e-3), %zu non-finite", ls, la, rel,
           bad);
    gpu_model_free(gs);
    gpu_model_free(ga);
}

static int run_test(uint64_t seed)
{
    const gpu_model_shape s = {256, 32, 2, 4, 64};
    const int B = 4, T = 32;
    printf("# test: V=%d maxT=%d L=%d NH=%d C=%d, batch %d x %d, %d host threads\n",
           s.vocab_size, s.block_size, s.n_layer, s.n_head, s.n_embd, B, T, nthreads());
    gpu_model *g = gpu_model_create(&s, B, T, why, sizeof why);
    if (!g) die("gpu_model_create");
    Trainer tr;
    trainer_open(tr, s, g, seed);
    Rng rng(seed + 1);
    std::vector<int32_t> in, tg;
    random_batch(rng, s.vocab_size, B, T, in, tg);

    // 1. Forward: the loss against the CPU reference on the FP16-rounded weights.
    upload_params(tr);
    std::vector<double> w = rounded_params(tr);
    double ref = ref_loss(tr.L, w.data(), in.data(), tg.data(), B, T);
    float loss = 0.0f;
    eng(gpu_model_loss(tr.g, in.data(), tg.data(), B, T, &loss, why, sizeof why),
        "gpu_model_loss");
    check_loss("forward 4x32: gpu_model_loss", loss, ref, 1e-2);
    report(fabs(ref - log((double)s.vocab_size)) < 0.5,
           "forward 4x32: initial loss %.4f is near ln V = %.4f", ref, log((double)s.vocab_size));

    // 2. Gradients: directional derivatives against central differences.
    check_gradients(tr, "gradient 4x32", in.data(), tg.data(), B, T, true, rng);

    // 3. Attention's row blocks (offload/attention_plan.h): T = 32 is one block by
    // default; 2 and 4 blocks (16 and 8 rows, the 16-byte softmax path) must give the
    // same loss and gradients, and the whole square (1) too.
    {
        const int bad3 = gpu_model_set_attention_row_blocks(tr.g, 3, why, sizeof why);
        const int bad9 = gpu_model_set_attention_row_blocks(tr.g, 9, why, sizeof why);
        report(bad3 != 0 && bad9 != 0, "row blocks: 3 (does not divide T = 32) and 9 (over "
               "8) refused (%s)", why);
        for (int nb : {2, 4, 1}) {
            eng(gpu_model_set_attention_row_blocks(tr.g, nb, why, sizeof why),
                "gpu_model_set_attention_row_blocks");
            char tag[64];
            snprintf(tag, sizeof tag, "row blocks %d, 4x32", nb);
            eng(gpu_model_loss(tr.g, in.data(), tg.data(), B, T, &loss, why, sizeof why),
                "gpu_model_loss");
            check_loss((std::string(tag) + ": gpu_model_loss").c_str(), loss, ref, 1e-2);
            check_gradients(tr, tag, in.data(), tg.data(), B, T, false, rng);
        }
        eng(gpu_model_set_attention_row_blocks(tr.g, 0, why, sizeof why),
            "gpu_model_set_attention_row_blocks");
    }

    // 4. A smaller batch than the model was made for: 2 x 16 on the 4 x 32 model.
    {
        const int B2 = 2, T2 = 16;
        std::vector<int32_t> in2, tg2;
        random_batch(rng, s.vocab_size, B2, T2, in2, tg2);
        const double ref2 = ref_loss(tr.L, w.data(), in2.data(), tg2.data(), B2, T2);
        eng(gpu_model_loss(tr.g, in2.data(), tg2.data(), B2, T2, &loss, why, sizeof why),
            "gpu_model_loss");
        check_loss("smaller batch 2x16: gpu_model_loss", loss, ref2, 1e-2);
        check_gradients(tr, "smaller batch 2x16", in2.data(), tg2.data(), B2, T2, false, rng);
        // And back to the full size.
        eng(gpu_model_loss(tr.g, in.data(), tg.data(), B, T, &loss, why, sizeof why),
            "gpu_model_loss");
        check_loss("back to 4x32: gpu_model_loss", loss, ref, 1e-2);
    }

    // 5. Five full mixed-precision steps on the fixed batch: the loss the GPU reports
    // is the reference's at the current master weights (FP16-rounded) each time.
    {
        reset_optimizer(tr);
        loss_scaler_init(&tr.ls, 1024.0f, 1000);
        const std::vector<float> p0 = tr.p;
        double worst = 0.0;
        int applied = 0;
        std::string losses;
        for (int i = 0; i < 5; i++) {
            w = rounded_params(tr);
            ref = ref_loss(tr.L, w.data(), in.data(), tg.data(), B, T);
            StepOut o;
            train_step(tr, in.data(), tg.data(), B, T, 1e-3, &o);
            const double r = isfinite(o.loss) ? rel_diff(o.loss, ref) : 1.0;
            worst = fmax(worst, r);
            applied += !o.overflow;
            char buf[64];
            snprintf(buf, sizeof buf, "%s%.4f/%.4f", i ? " " : "", o.loss, ref);
            losses += buf;
        }
        size_t changed = 0;
        for (size_t i = 0; i < tr.L.n; i++) changed += tr.p[i] != p0[i];
        report(worst < 1e-2 && applied == 5 && changed > tr.L.n / 2,
               "5 training steps: GPU/reference loss %s; worst relative %.2e (< 1e-02); %d of "
               "5 applied, %zu of %zu weights changed", losses.c_str(), worst, applied, changed,
               tr.L.n);
    }

    // 6. Loss scaling: overflow skips the step and halves the scale; clean steps grow it.
    {
        const float huge = 1073741824.0f; // 2^30
        loss_scaler_init(&tr.ls, huge, 2);
        const std::vector<float> p0 = tr.p, m0 = tr.m, v0 = tr.v;
        const int64_t t0 = tr.t, skipped0 = tr.ls.skipped;
        StepOut o;
        train_step(tr, in.data(), tg.data(), B, T, 1e-3, &o);
        const bool same = memcmp(p0.data(), tr.p.data(), tr.L.n * sizeof(float)) == 0 &&
                          memcmp(m0.data(), tr.m.data(), tr.L.n * sizeof(float)) == 0 &&
                          memcmp(v0.data(), tr.v.data(), tr.L.n * sizeof(float)) == 0 &&
                          tr.t == t0;
        report(o.overflow == 1 && o.ev == LOSS_SCALE_SKIPPED && tr.ls.scale == huge * 0.5f &&
                   tr.ls.skipped == skipped0 + 1 && same && isfinite(o.loss),
               "loss scale 2^30: overflow %s, event %s, scale now 2^%.0f (2^29 expected), "
               "weights and moments %s, loss %.4f",
               o.overflow ? "detected" : "NOT detected",
               o.ev == LOSS_SCALE_SKIPPED ? "skipped" : "NOT skipped", log2(tr.ls.scale),
               same ? "unchanged" : "CHANGED", o.loss);
        loss_scaler_init(&tr.ls, 1024.0f, 2);
        StepOut a, b;
        train_step(tr, in.data(), tg.data(), B, T, 1e-3, &a);
        train_step(tr, in.data(), tg.data(), B, T, 1e-3, &b);
        report(!a.overflow && !b.overflow && a.ev == LOSS_SCALE_KEPT &&
                   b.ev == LOSS_SCALE_GREW && tr.ls.scale == 2048.0f,
               "loss scale growth (interval 2): events %d, %d (0 kept, 1 grew), scale 1024 -> "
               "%.0f (2048 expected)", (int)a.ev, (int)b.ev, tr.ls.scale);
    }

    // 7. Gradient accumulation on the device (gpu_model_step_micro): two micro-batches
    // make one update of their mean gradient (against the two gradients taken one step
    // each and averaged here), an overflow in a micro-batch reaches the sum and skips
    // the update, and the engine refuses what would mix up the sum.
    {
        loss_scaler_init(&tr.ls, 1024.0f, 1000);
        std::vector<int32_t> in2, tg2;
        random_batch(rng, s.vocab_size, B, T, in2, tg2);
        std::vector<int32_t> in_ab(in), tg_ab(tg); // batch `in`, then in2
        in_ab.insert(in_ab.end(), in2.begin(), in2.end());
        tg_ab.insert(tg_ab.end(), tg2.begin(), tg2.end());
        upload_params(tr);
        std::vector<double> want(tr.L.n, 0.0);
        double want_loss = 0.0;
        for (int k = 0; k < 2; k++) {
            float lk = 0.0f;
            eng(gpu_model_step(tr.g, in_ab.data() + (size_t)k * B * T,
                               tg_ab.data() + (size_t)k * B * T, B, T, tr.ls.scale, &lk, why,
                               sizeof why),
                "gpu_model_step");
            const uint16_t *gh = gpu_model_grads(tr.g, why, sizeof why);
            if (!gh) die("gpu_model_grads");
            if (unscale_half_grads(tr.gr.data(), gh, tr.L.n, 1.0f / tr.ls.scale, 0, tr.threads))
                die("accumulation test: a single step overflowed at scale 1024");
            for (size_t i = 0; i < tr.L.n; i++) want[i] += 0.5 * tr.gr[i];
            want_loss += 0.5 * lk;
        }
        double wsq = 0.0;
        for (double x : want) wsq += x * x;
        const int64_t t_before = tr.t;
        StepOut o;
        train_step(tr, in_ab.data(), tg_ab.data(), B, T, 1e-3, &o, 2);
        double dsq = 0.0;
        for (size_t i = 0; i < tr.L.n; i++) dsq += (tr.gr[i] - want[i]) * (tr.gr[i] - want[i]);
        const double gerr = sqrt(dsq / wsq), nerr = rel_diff(o.norm, sqrt(wsq));
        // The tolerances leave room for a GPU whose reductions are not bitwise
        // repeatable (FP16 gradients a unit in the last place apart); a missing 1/accum
        // or a second micro-batch overwriting the first is off by tens of percent.
        report(!o.overflow && o.micro == 2 && tr.t == t_before + 1 && gerr < 1e-2 &&
                   nerr < 1e-2 && rel_diff(o.loss, want_loss) < 1e-4,
               "accumulation, 2 micro-batches: %d run, %lld update(s); gradient vs the mean "
               "of two single steps: relative %.2e, norm %.6f vs %.6f (relative %.2e, both "
               "< 1e-2); loss %.5f vs %.5f", o.micro, (long long)(tr.t - t_before), gerr,
               o.norm, sqrt(wsq), nerr, o.loss, want_loss);

        const float huge = 1073741824.0f; // 2^30: the first micro-batch overflows
        loss_scaler_init(&tr.ls, huge, 1000);
        const std::vector<float> p0 = tr.p, m0 = tr.m, v0 = tr.v;
        const int64_t t0 = tr.t;
        StepOut q;
        train_step(tr, in_ab.data(), tg_ab.data(), B, T, 1e-3, &q, 2);
        const bool same = memcmp(p0.data(), tr.p.data(), tr.L.n * sizeof(float)) == 0 &&
                          memcmp(m0.data(), tr.m.data(), tr.L.n * sizeof(float)) == 0 &&
                          memcmp(v0.data(), tr.v.data(), tr.L.n * sizeof(float)) == 0 &&
                          tr.t == t0;
        report(q.overflow == 1 && q.micro == 2 && q.ev == LOSS_SCALE_SKIPPED &&
                   tr.ls.scale == huge * 0.5f && same,
               "accumulation at scale 2^30: overflow %s in the sum of %d micro-batches, "
               "scale now 2^%.0f (2^29 expected), weights and moments %s",
               q.overflow ? "detected" : "NOT detected", q.micro, log2(tr.ls.scale),
               same ? "unchanged" : "CHANGED");

        float l = 0.0f;
        const bool orphan = gpu_model_step_micro(tr.g, in.data(), tg.data(), B, T, 1024.0f, 0,
                                                 1, 1.0f, &l, why, sizeof why) != 0;
        eng(gpu_model_step_micro(tr.g, in.data(), tg.data(), B, T, 1024.0f, 1, 0, 1.0f, &l, why,
                                 sizeof why),
            "gpu_model_step_micro");
        const bool early = gpu_model_grads(tr.g, why, sizeof why) == nullptr;
        eng(gpu_model_step_micro(tr.g, in.data(), tg.data(), B, T, 1024.0f, 0, 1, 1.0f, &l, why,
                                 sizeof why),
            "gpu_model_step_micro");
        const bool after = gpu_model_grads(tr.g, why, sizeof why) != nullptr;
        report(orphan && early && after, "accumulation: a micro-batch continuing nothing %s, "
               "gpu_model_grads before the last micro-batch %s, after it %s",
               orphan ? "refused" : "ACCEPTED", early ? "refused" : "ACCEPTED",
               after ? "given" : "REFUSED");
        // The parts come in the backward's order and tile the layout from the end down:
        // ln_f first, then each block from the last, then the embeddings ending at 0.
        const int parts = gpu_model_grad_parts(tr.g);
        size_t next_hi = tr.L.n;
        bool tiled = parts == s.n_layer + 2;
        for (int k = 0; k < parts && tiled; k++) {
            size_t lo = 1, hi = 0;
            tiled = gpu_model_grads_part(tr.g, k, &lo, &hi, why, sizeof why) != nullptr &&
                    hi == next_hi && lo < hi;
            next_hi = lo;
        }
        report(tiled && next_hi == 0 && gpu_model_grads_part(tr.g, parts, nullptr, nullptr, why,
                                                             sizeof why) == nullptr,
               "gradient parts: %d, from the end of the layout down to 0 without a gap, "
               "part %d refused", parts, parts);
    }

    // 8. Overfit one fixed batch.
    {
        init_params(tr.L, tr.p.data(), seed);
        reset_optimizer(tr);
        loss_scaler_init(&tr.ls, LOSS_SCALE_INIT, LOSS_SCALE_GROWTH_INTERVAL);
        const int steps = 60;
        float first = 0.0f;
        int skipped = 0;
        const double t0 = now_ms();
        for (int i = 0; i < steps; i++) {
            StepOut o;
            train_step(tr, in.data(), tg.data(), B, T, 3e-3, &o);
            if (i == 0) first = o.loss;
            skipped += o.overflow;
        }
        const double ms = (now_ms() - t0) / steps;
        upload_params(tr);
        eng(gpu_model_loss(tr.g, in.data(), tg.data(), B, T, &loss, why, sizeof why),
            "gpu_model_loss");
        report(isfinite(loss) && loss < 0.3f * first,
               "overfit one batch, %d steps at lr 3e-3: loss %.4f -> %.4f (%.1f%%, < 30%% "
               "wanted), %d skipped for overflow, %.2f ms/step", steps, first, loss,
               100.0 * loss / first, skipped, ms);
    }

    gpu_model_free(tr.g);

    // 9. offload = blocks.
    test_blocks(s, B, T, seed);
    // 10. The stage engine's model with both ends.
    test_stage(s, B, T, seed);

    printf("%d checks, %d failed\n", checks, failures);
    return failures ? 1 : 0;
}

// ------------------------------------------------------------------ grads mode

// One whole training step at the GPT-2 124M shape: every parameter tensor's gradient
// from the GPU (FP16 forward and backward, loss scale, gradients down part by part and
// unscaled by train_step, as a training run gets them) against the gradient of the
// same step in double on the CPU (ref_grads.h), on the same FP16-rounded weights and
// tokens: GPT-2's initialisation with random biases and LayerNorm weights
// (spread_params), so that every parameter takes part.
//
// B = 1, T = 1024: the whole context (attention in its 8 row blocks, weight-gradient
// products with K = 1024) at the whole width (C = 768, 12 layers, the head's products
// with K = V = 50304). The batch is one row because the reference's time grows with
// B x T and has to stay well inside gpu-check's time: 120 to 180 s of one core of the
// machine this was written on (the whole reference: 188 s on its 2 cores, shared with
// other work, 4 GB), so some 10 to 25 s on a 16-core GPU host; a second row would
// double that and exercise nothing the first does not.
//
// Tolerances. Every activation, activation gradient and (at the end) parameter
// gradient on the GPU is stored in FP16, each rounding a relative error of up to
// u = 2^-11 = 4.9e-4; products and reductions sum in FP32 (a far smaller error), so
// the norm-wise error of a gradient tensor is a few u, growing slowly with depth as
// the residual stream's gradient picks up each block's roundings. Measured on the CPU
// emulation (the same kernels; its products sum in FP32 as the tensor cores do) from
// the weights this mode uses, worst tensor / all parameters: at T = 64, V = 256, 64
// wide, 2 layers 8.6e-4 / 6.1e-4, 4 layers 9.0e-4 / 6.8e-4, 8 layers 1.1e-3 / 8.2e-4;
// 768 wide, 2 layers 1.1e-3 / 9.1e-4, 12 layers 1.5e-3 / 1.3e-3; 12 layers x 128
// wide, T = 128, V = 1024: 1.6e-3 / 1.0e-3; and with this mode's B = 1, T = 1024,
// V = 50304 (the same loss scale, so the same magnitudes of d(logits) as here): 12 x 64
// wide 1.5e-3 / 9.8e-4, 4 x 256 wide 1.1e-3 / 8.1e-4. Depth matters a little, width,
// T and V hardly. So GRADS_TOL = 10 u = 4.9e-3 on every tensor, three times the worst
// seen. Faults it catches there: the c_fc bias left out of the forward (1.5e-1), and
// GELU's derivative with 2 for the 3 of its cubic term (8.7e-3 at 768 wide: a
// tolerance of 1e-2 would have let that through). The loss: the GPU's is an FP32 mean
// of per-token cross-entropies from FP16 logits (random roundings of ~2.5e-4 of each
// logit, which average out over the tokens); measured within 5e-6 relative at every
// shape above, so GRADS_LOSS_TOL = 1e-4.
static const double GRADS_TOL = 10.0 / 2048.0, GRADS_LOSS_TOL = 1e-4;

// A tensor's name without its layer ("h.3.ln_1.weight" -> "ln_1.weight").
static std::string tensor_kind(const std::string &name)
{
    if (name.compare(0, 2, "h.") != 0) return name;
    const size_t dot = name.find('.', 2);
    return dot == std::string::npos ? name : name.substr(dot + 1);
}

// GPT-2's initialisation leaves every bias at 0 and every LayerNorm weight at 1, where
// a bias the GPU never added, or a LayerNorm weight applied to the wrong column,
// changes nothing. So before the step those get values of a trained model's size
// (seeded): biases N(0, 0.02), LayerNorm weights 1 + N(0, 0.1); the matrices keep
// their initialisation.
static void spread_params(Trainer &tr, uint64_t seed)
{
    Rng r(seed);
    for (const Tensor &t : tr.L.t)
        if (t.init == INIT_ZERO || t.init == INIT_ONE)
            for (size_t i = t.off; i < t.off + t.n; i++)
                tr.p[i] = t.init == INIT_ONE ? (float)(1.0 + 0.1 * r.normal())
                                             : (float)(0.02 * r.normal());
}

// Whether error r is worse than `than` (a NaN is worse than any number).
static bool worse(double r, double than)
{
    return isnan(r) ? !isnan(than) : !isnan(than) && r >= than;
}

// The GPU's step for grads: one step to find the gradient buffer, which is then
// poisoned (NaN halves), so a gradient the real step does not write stays NaN; then the
// step as train_step runs it, its unscaled gradients left in tr.gr. An overflow skips
// the update and halves the scale, as in a run, and the step is taken again at the
// lower scale (the weights are unchanged). Returns 0 when a step without overflow ran.
static int grads_gpu_step(Trainer &tr, const int32_t *in, const int32_t *tg, int B, int T,
                          StepOut *o)
{
    int skipped = 0;
    bool same_buffer = true;
    for (;;) {
        float l0 = 0.0f;
        eng(gpu_model_step(tr.g, in, tg, B, T, tr.ls.scale, &l0, why, sizeof why),
            "gpu_model_step");
        const uint16_t *gh = gpu_model_grads(tr.g, why, sizeof why);
        if (!gh) die("gpu_model_grads");
        memset((void *)gh, 0xFF, tr.L.n * sizeof(uint16_t));
        train_step(tr, in, tg, B, T, 6e-4, o);
        const uint16_t *gh2 = gpu_model_grads(tr.g, why, sizeof why);
        if (!gh2) die("gpu_model_grads");
        same_buffer = same_buffer && gh2 == gh;
        if (!o->overflow) break;
        printf("grads: FP16 overflow at loss scale %.0f (inf/NaN in%s): the step again at "
               "%.0f\n", o->scale, nonfinite_tensors(tr.L, gh2).c_str(), tr.ls.scale);
        if (++skipped == 8) break;
    }
    report(same_buffer, "grads: the step wrote its gradients into the buffer poisoned before it "
           "(%s)", same_buffer ? "the same buffer" : "A NEW ONE: the poison proves nothing");
    report(!o->overflow, "grads: GPU gradients finite at loss scale %.0f (%d step(s) skipped "
           "for overflow before it); train_step (weights up, GPU, gradients down and "
           "unscaled, AdamW) %.0f ms", o->scale, skipped, o->ms);
    return o->overflow ? -1 : 0;
}

// The reference against itself, where that is cheap (--small): its loss against
// ref_model.h's forward, its gradient against central differences of that loss (at
// 124M each direction would take two more full forwards of that slower code).
static void grads_check_reference(const Layout &L, const std::vector<double> &w,
                                  const std::vector<double> &gref, double ref,
                                  const int32_t *in, const int32_t *tg, int B, int T, Rng &rng)
{
    const double fwd = ref_loss(L, w.data(), in, tg, B, T);
    report(rel_diff(ref, fwd) < 1e-12, "grads: the reference's loss %.12f is ref_model.h's "
           "forward %.12f (relative %.1e < 1e-12)", ref, fwd, rel_diff(ref, fwd));
    double worst = 0.0;
    std::string worst_name;
    for (const Tensor &t : L.t) {
        double fd_rms = 0.0;
        const double r = direction_check(L, w, gref.data(), t.off, t.n, 3, rng, in, tg, B, T,
                                         &fd_rms);
        if (worse(r, worst)) worst = r, worst_name = t.name;
    }
    report(worst < 1e-4, "grads: the reference's gradient . d vs central differences, 3 "
           "random directions in each of the %zu tensors: worst relative %.2e (%s, < 1e-4)",
           L.t.size(), worst, worst_name.c_str());
}

// What grads_compare found over all tensors.
struct GradsSummary {
    double worst = 0.0, all_rel = 0.0;
    std::string worst_name;
};

// Every tensor of the GPU's gradients gg against the reference's gref:
// ||g_gpu - g_ref|| / ||g_ref||, and the largest element difference against the
// tensor's largest reference element; reported by kind (ln_1.weight of every layer,
// ...), each kind failing on its worst tensor; then all parameters together, and the
// global norm train_step found (norm) against the reference's.
static GradsSummary grads_compare(const Layout &L, const float *gg,
                                  const std::vector<double> &gref, double norm)
{
    struct Err {
        double se = 0.0, sr = 0.0, maxd = 0.0, maxr = 0.0;
    };
    std::vector<Err> err(L.t.size());
    for (size_t k = 0; k < L.t.size(); k++) {
        const Tensor &t = L.t[k];
        Err &e = err[k];
        for (size_t i = t.off; i < t.off + t.n; i++) {
            const double d = (double)gg[i] - gref[i];
            e.se += d * d;
            e.sr += gref[i] * gref[i];
            e.maxd = fmax(e.maxd, fabs(d));
            e.maxr = fmax(e.maxr, fabs(gref[i]));
        }
    }
    auto rel = [](double se, double sr) { return sr > 0.0 ? sqrt(se / sr) : sqrt(se); };
    std::vector<std::string> kinds;
    for (const Tensor &t : L.t)
        if (std::find(kinds.begin(), kinds.end(), tensor_kind(t.name)) == kinds.end())
            kinds.push_back(tensor_kind(t.name));
    GradsSummary sum;
    double se_all = 0.0, sr_all = 0.0;
    for (const std::string &kind : kinds) {
        double se = 0.0, sr = 0.0, kworst = 0.0, kmax = 0.0;
        std::string kworst_name;
        int members = 0;
        size_t n = 0;
        for (size_t k = 0; k < L.t.size(); k++) {
            if (tensor_kind(L.t[k].name) != kind) continue;
            const Err &e = err[k];
            const double r = rel(e.se, e.sr);
            if (worse(r, kworst)) kworst = r, kworst_name = L.t[k].name;
            kmax = fmax(kmax, e.maxr > 0.0 ? e.maxd / e.maxr : e.maxd);
            se += e.se, sr += e.sr, members++, n = L.t[k].n;
        }
        se_all += se, sr_all += sr;
        if (worse(kworst, sum.worst)) sum.worst = kworst, sum.worst_name = kworst_name;
        report(kworst < GRADS_TOL, "grads: %-18s %2d x %8zu: ||g_gpu - g_ref|| / ||g_ref|| %.2e "
               "over %s, worst %.2e (%s, < %.1e); largest element difference %.2e of the "
               "largest |g_ref|", kind.c_str(), members, n, rel(se, sr),
               members > 1 ? "all layers" : "the tensor", kworst, kworst_name.c_str(), GRADS_TOL,
               kmax);
    }
    sum.all_rel = rel(se_all, sr_all);
    const double ref_norm = sqrt(sr_all), norm_rel = rel_diff(norm, ref_norm);
    report(sum.all_rel < GRADS_TOL && norm_rel < GRADS_TOL,
           "grads: all %zu parameters: ||g_gpu - g_ref|| / ||g_ref|| %.2e; the global norm "
           "train_step found %.6f, the reference's %.6f (relative %.2e) (both < %.1e)", L.n,
           sum.all_rel, norm, ref_norm, norm_rel, GRADS_TOL);
    return sum;
}

static int run_grads(uint64_t seed, bool small)
{
    const gpu_model_shape s =
        small ? gpu_model_shape{256, 64, 2, 2, 64} : gpu_model_shape{50304, 1024, 12, 12, 768};
    const int B = small ? 2 : 1, T = s.block_size, Vreal = small ? 250 : 50257;
    double t0 = now_ms();
    gpu_model *g = gpu_model_create(&s, B, T, why, sizeof why);
    if (!g) die("gpu_model_create");
    Trainer tr;
    trainer_open(tr, s, g, seed);
    spread_params(tr, seed + 17);
    const Layout &L = tr.L;
    printf("grads: %s shape V=%d (tokens < %d) L=%d NH=%d C=%d, %zu parameters; one step "
           "on B=%d x T=%d; host init %.1f s, %d threads\n",
           small ? "small (--small: the code path at a tiny shape)" : "GPT-2 124M", s.vocab_size,
           Vreal, s.n_layer, s.n_head, s.n_embd, L.n, B, T, (now_ms() - t0) / 1000.0,
           tr.threads);
    if (!small)
        printf("grads: why B=%d x T=%d: the whole context at the whole width, and one row "
               "because the CPU reference's time grows with B x T (one row: 120 to 180 s of one "
               "core, some 10 to 25 s on 16)\n", B, T);
    fflush(stdout);
    Rng rng(seed + 13);
    std::vector<int32_t> in, tg;
    random_batch(rng, Vreal, B, T, in, tg);
    upload_params(tr);
    const std::vector<double> w = rounded_params(tr); // what the GPU computes with

    StepOut o;
    if (grads_gpu_step(tr, in.data(), tg.data(), B, T, &o) != 0) {
        printf("grads: FAILED: no loss scale without overflow\n");
        gpu_model_free(tr.g);
        return 1;
    }

    t0 = now_ms();
    std::vector<double> gref(L.n);
    const double ref = ref_step_grads(L, w.data(), in.data(), tg.data(), B, T, gref.data());
    const double ref_s = (now_ms() - t0) / 1000.0;
    printf("grads: CPU reference (ref_grads.h, double) in %.1f s on %d threads\n", ref_s,
           tr.threads);
    const double loss_rel = rel_diff(o.loss, ref);
    report(isfinite(o.loss) && loss_rel < GRADS_LOSS_TOL,
           "grads: loss GPU %.6f, CPU reference %.6f, relative %.2e (< %.0e)", o.loss, ref,
           loss_rel, GRADS_LOSS_TOL);
    if (small)
        grads_check_reference(L, w, gref, ref, in.data(), tg.data(), B, T, rng);
    else
        printf("grads: note: the reference's backward is checked against finite differences "
               "by `gpu_train grads --small` (make check), not here\n");

    const GradsSummary sum = grads_compare(L, tr.gr.data(), gref, o.norm);
    printf("grads: %s: worst tensor %s at %.2e (tolerance %.1e), all parameters %.2e; loss "
           "%.6f vs %.6f (%.2e, tolerance %.0e); %d checks, %d failed\n",
           failures ? "FAILED" : "PASSED", sum.worst_name.c_str(), sum.worst, GRADS_TOL,
           sum.all_rel, o.loss, ref, loss_rel, GRADS_LOSS_TOL, checks, failures);
    printf("RESULT grads B=%d T=%d scale=%.0f loss_gpu=%.6f loss_ref=%.6f loss_rel=%.2e "
           "worst_rel=%.2e worst_tensor=%s all_rel=%.2e tol=%.1e step_ms=%.0f ref_s=%.1f "
           "threads=%d\n", B, T, o.scale, o.loss, ref, loss_rel, sum.worst,
           sum.worst_name.c_str(), sum.all_rel, GRADS_TOL, o.ms, ref_s, tr.threads);
    gpu_model_free(tr.g);
    return failures ? 1 : 0;
}

// ------------------------------------------------------------------ bench mode

// The mean wall time of n GPU steps alone (forward + backward and the overlapped
// gradient copies, each waited for); *ok stays true while every loss is finite.
static double time_gpu_steps(Trainer &tr, const int32_t *in, const int32_t *tg, int B, int T,
                             int n, bool *ok)
{
    const double t0 = now_ms();
    for (int i = 0; i < n; i++) {
        float loss = 0.0f;
        eng(gpu_model_step(tr.g, in, tg, B, T, tr.ls.scale, &loss, why, sizeof why),
            "gpu_model_step");
        eng(gpu_model_sync(tr.g, why, sizeof why), "gpu_model_sync");
        *ok = *ok && isfinite(loss);
    }
    return (now_ms() - t0) / n;
}

static int run_bench(uint64_t seed, double peak_tflops, int timed, bool small)
{
    const gpu_model_shape s =
        small ? gpu_model_shape{256, 64, 2, 2, 64} : gpu_model_shape{50304, 1024, 12, 12, 768};
    const int T = s.block_size, Vreal = small ? 250 : 50257;
    const size_t GiB = (size_t)1 << 30;
    size_t free0 = 0, total = 0;
    CUDA_OK(cudaMemGetInfo(&free0, &total));
    // Small: one batch, and no 2 GiB of headroom asked (an emulated device is small).
    const std::vector<int> Bs = small ? std::vector<int>{4}
                                      : std::vector<int>{128, 96, 64, 48, 32, 24, 16, 8, 4, 2, 1};
    const size_t headroom = small ? 0 : 2 * GiB;
    gpu_model *g = nullptr;
    int B = 0;
    size_t engine_bytes = 0;
    for (int b : Bs) {
        const size_t need = gpu_model_device_bytes(&s, b, T);
        if (need + headroom > free0) continue;
        g = gpu_model_create(&s, b, T, why, sizeof why);
        if (g) {
            B = b;
            engine_bytes = need;
            break;
        }
        printf("# batch %d x %d: gpu_model_create failed (%s); trying a smaller one\n", b, T,
               why);
    }
    if (!g) {
        printf("FAIL bench: no batch fits in %.1f GiB free (batch %d needs %.1f GiB + %.0f "
               "GiB)\n", (double)free0 / GiB, Bs.back(),
               (double)gpu_model_device_bytes(&s, Bs.back(), T) / GiB, (double)headroom / GiB);
        return 1;
    }
    Trainer tr;
    double t0 = now_ms();
    trainer_open(tr, s, g, seed);
    const size_t n = tr.L.n, n_nowpe = n - (size_t)s.block_size * s.n_embd;
    printf("bench: %s shape V=%d (%d padded) maxT=%d L=%d NH=%d C=%d: %zu "
           "parameters, %zu without wpe; host init %.1f s, %d threads\n",
           small ? "small (--small: a smoke run, not a measurement)" : "GPT-2 124M",
           s.vocab_size, Vreal, s.block_size, s.n_layer, s.n_head, s.n_embd, n, n_nowpe,
           (now_ms() - t0) / 1000.0, tr.threads);
    printf("bench: batch B=%d x T=%d = %d tokens per step (largest of %d..%d with "
           "gpu_model_device_bytes + %.0f GiB <= %.1f GiB free)\n", B, T, B * T, Bs.front(),
           Bs.back(), (double)headroom / GiB, (double)free0 / GiB);
    Rng rng(seed + 7);
    std::vector<int32_t> in, tg;
    random_batch(rng, Vreal, B, T, in, tg);
    const double lr = 6e-4;

    // Warm-up (also the first touch of every host buffer).
    bool ok = true;
    float first = 0.0f;
    for (int i = 0; i < 3; i++) {
        StepOut o;
        train_step(tr, in.data(), tg.data(), B, T, lr, &o);
        if (i == 0) first = o.loss;
        ok = ok && isfinite(o.loss);
    }
    size_t free1 = 0;
    CUDA_OK(cudaMemGetInfo(&free1, &total));
    printf("bench: device memory: %.2f GiB for the model (gpu_model_device_bytes), %.2f GiB "
           "used by this process after the warm-up (free before - free now), %.1f GiB total\n",
           (double)engine_bytes / GiB, (double)(free0 - free1) / GiB, (double)total / GiB);
    report(isfinite(first) && fabs(first - log((double)s.vocab_size)) < 1.0,
           "bench: first loss %.4f is near ln V = %.4f", first, log((double)s.vocab_size));

    // The GPU alone: forward + backward (and its overlapped gradient copies).
    upload_params(tr);
    eng(gpu_model_sync(tr.g, why, sizeof why), "gpu_model_sync");
    const double gpu_ms = time_gpu_steps(tr, in.data(), tg.data(), B, T, timed, &ok);

    // Where the GPU's time goes: one profiled step (an event before each kernel).
    double phase_ms[GPU_PHASE_COUNT] = {0};
    eng(gpu_model_profile(tr.g, 1, why, sizeof why), "gpu_model_profile");
    {
        float loss = 0.0f;
        eng(gpu_model_step(tr.g, in.data(), tg.data(), B, T, tr.ls.scale, &loss, why,
                           sizeof why),
            "gpu_model_step");
        eng(gpu_model_profile_read(tr.g, phase_ms, why, sizeof why), "gpu_model_profile_read");
        ok = ok && isfinite(loss);
    }
    eng(gpu_model_profile(tr.g, 0, why, sizeof why), "gpu_model_profile");

    // The same GPU step with attention over the whole T x T square (no row blocks), to
    // see what the row blocks save.
    const int square_timed = timed < 5 ? timed : 5;
    eng(gpu_model_set_attention_row_blocks(tr.g, 1, why, sizeof why),
        "gpu_model_set_attention_row_blocks");
    const double square_ms = time_gpu_steps(tr, in.data(), tg.data(), B, T, square_timed, &ok);
    eng(gpu_model_set_attention_row_blocks(tr.g, 0, why, sizeof why),
        "gpu_model_set_attention_row_blocks");

    // The full step.
    StepOut sum;
    int skipped = 0;
    float last = 0.0f;
    t0 = now_ms();
    for (int i = 0; i < timed; i++) {
        StepOut o;
        train_step(tr, in.data(), tg.data(), B, T, lr, &o);
        sum.ms_up += o.ms_up, sum.ms_gpu += o.ms_gpu, sum.ms_unscale += o.ms_unscale;
        sum.ms_opt += o.ms_opt;
        skipped += o.overflow;
        last = o.loss;
        ok = ok && isfinite(o.loss);
    }
    const double step_ms = (now_ms() - t0) / timed;

    // The full step with gradient accumulation: ACC micro-batches of B x T per update
    // (at B = 128: 524288 tokens, GPT-2's batch), the gradients adding up on the GPU, so
    // the host's per-update work (FP16 convert + upload, gradients down, unscale, AdamW)
    // is paid once per ACC GPU steps. One untimed update first, then at most 3 (each is
    // ACC GPU steps).
    const int ACC = 4, acc_timed = timed < 3 ? timed : 3;
    std::vector<int32_t> in_acc, tg_acc;
    random_batch(rng, Vreal, ACC * B, T, in_acc, tg_acc); // ACC batches [B,T] in a row
    {
        StepOut o;
        train_step(tr, in_acc.data(), tg_acc.data(), B, T, lr, &o, ACC);
        ok = ok && isfinite(o.loss);
    }
    StepOut acc_sum;
    int acc_skipped = 0;
    t0 = now_ms();
    for (int i = 0; i < acc_timed; i++) {
        StepOut o;
        train_step(tr, in_acc.data(), tg_acc.data(), B, T, lr, &o, ACC);
        acc_sum.ms_up += o.ms_up, acc_sum.ms_gpu += o.ms_gpu;
        acc_sum.ms_unscale += o.ms_unscale, acc_sum.ms_opt += o.ms_opt;
        acc_skipped += o.overflow;
        ok = ok && isfinite(o.loss);
    }
    const double acc_ms = (now_ms() - t0) / acc_timed;

    const double tokens = (double)B * T;
    const double flops_tok = 6.0 * (double)n_nowpe + 12.0 * s.n_layer * s.n_embd * (double)T;
    const double peak = peak_tflops * 1e12;
    const double gpu_tps = tokens / (gpu_ms / 1000.0), step_tps = tokens / (step_ms / 1000.0);
    const double acc_tps = tokens * ACC / (acc_ms / 1000.0);
    const double gpu_mfu = 100.0 * gpu_tps * flops_tok / peak,
                 step_mfu = 100.0 * step_tps * flops_tok / peak,
                 acc_mfu = 100.0 * acc_tps * flops_tok / peak;
    printf("bench: FLOPs per token = 6*N + 12*L*C*T = 6*%zu + 12*%d*%d*%d = %.1f MFLOP (N: "
           "parameters without wpe); peak %.1f TFLOP/s\n",
           n_nowpe, s.n_layer, s.n_embd, T, flops_tok / 1e6, peak_tflops);
    printf("bench: GPU forward+backward (gpu_model_step + gpu_model_sync), mean of %d: "
           "%.1f ms/step, %.0f tokens/s, MFU %.1f%%\n", timed, gpu_ms, gpu_tps, gpu_mfu);
    double phase_total = 0.0;
    for (double v : phase_ms) phase_total += v;
    printf("bench: GPU time by phase (one profiled step, %.1f ms in all):", phase_total);
    for (int k = 0; k < GPU_PHASE_COUNT; k++)
        printf(" %s %.1f ms (%.0f%%)%s", gpu_model_phase_name(k), phase_ms[k],
               phase_total > 0 ? 100.0 * phase_ms[k] / phase_total : 0.0,
               k + 1 < GPU_PHASE_COUNT ? "," : "\n");
    printf("bench: attention over the whole T x T square instead of %d row blocks, mean of "
           "%d: %.1f ms/step (the row blocks save %.1f%%)\n", att_row_blocks(T),
           square_timed, square_ms, 100.0 * (square_ms - gpu_ms) / square_ms);
    printf("bench: full step (FP16 convert + upload, GPU, gradients down, unscale + norm, "
           "AdamW with the clip folded in, on %d threads), mean of %d: %.1f ms/step, %.0f "
           "tokens/s, MFU %.1f%%\n", tr.threads, timed, step_ms, step_tps, step_mfu);
    printf("bench: full step breakdown: convert+upload %.1f ms, GPU step until the last "
           "gradient part is unscaled %.1f ms (of which unscale + norm, overlapped with the "
           "backward: %.1f ms), clip + AdamW %.1f ms; loss %.4f -> %.4f, %d skipped\n",
           sum.ms_up / timed, sum.ms_gpu / timed, sum.ms_unscale / timed,
           sum.ms_opt / timed, first, last, skipped);
    printf("bench: full step with gradient accumulation, %d micro-batches of %d x %d per "
           "update (%d tokens per update, summed on the GPU; convert + upload, gradients "
           "down, unscale and AdamW once per update), mean of %d: %.1f ms/update, %.0f "
           "tokens/s, MFU %.1f%%\n", ACC, B, T, ACC * B * T, acc_timed, acc_ms, acc_tps, acc_mfu);
    printf("bench: accumulated update breakdown: convert+upload %.1f ms, %d GPU steps "
           "until the last gradient part is unscaled %.1f ms (of which unscale + norm, "
           "overlapped: %.1f ms), clip + AdamW %.1f ms; %d skipped\n",
           acc_sum.ms_up / acc_timed, ACC, acc_sum.ms_gpu / acc_timed,
           acc_sum.ms_unscale / acc_timed, acc_sum.ms_opt / acc_timed, acc_skipped);
    printf("RESULT bench B=%d T=%d tokens_per_step=%d gpu_ms=%.1f gpu_tok_s=%.0f gpu_mfu=%.1f%% "
           "step_ms=%.1f step_tok_s=%.0f step_mfu=%.1f%% accum4_ms=%.1f accum4_tok_s=%.0f "
           "accum4_mfu=%.1f%% square_gpu_ms=%.1f mem_gib=%.1f\n",
           B, T, B * T, gpu_ms, gpu_tps, gpu_mfu, step_ms, step_tps, step_mfu, acc_ms, acc_tps,
           acc_mfu, square_ms, (double)(free0 - free1) / GiB);
    printf("RESULT phases");
    for (int k = 0; k < GPU_PHASE_COUNT; k++)
        printf(" %s=%.1f", gpu_model_phase_name(k), phase_ms[k]);
    printf("\n");
    report(ok, "bench: every loss finite");
    gpu_model_free(tr.g);
    return failures ? 1 : 0;
}

// ------------------------------------------------------------------ shakespeare mode

static int run_shakespeare(uint64_t seed, const char *path, int steps, bool small)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        printf("FAIL shakespeare: cannot open %s: %s\n", path, strerror(errno));
        return 1;
    }
    std::vector<unsigned char> text;
    unsigned char buf[1 << 16];
    size_t got;
    while ((got = fread(buf, 1, sizeof buf, f)) > 0) text.insert(text.end(), buf, buf + got);
    fclose(f);
    const gpu_model_shape s =
        small ? gpu_model_shape{256, 64, 2, 2, 64} : gpu_model_shape{256, 256, 6, 6, 384};
    const int B = small ? 8 : 64, T = s.block_size, NVAL = small ? 2 : 20;
    const size_t ntrain = text.size() * 9 / 10, nval = text.size() - ntrain;
    if (ntrain < (size_t)T + 2 || nval < (size_t)T + 2) {
        printf("FAIL shakespeare: %s is too short (%zu bytes)\n", path, text.size());
        return 1;
    }
    gpu_model *g = gpu_model_create(&s, B, T, why, sizeof why);
    if (!g) die("gpu_model_create");
    Trainer tr;
    trainer_open(tr, s, g, seed);
    tr.h = Hyper{0.9, 0.99, 1e-8, 0.1, 1.0};
    const double lr = 1e-3, min_lr = 1e-4;
    const int warmup = small ? 5 : 50;
    printf("shakespeare: %s, %zu bytes (train %zu, val %zu); V=%d L=%d NH=%d C=%d T=%d, "
           "%zu parameters; B=%d, %d steps, lr %.0e warmup %d cosine to %.0e, beta2 %.2f, "
           "wd %.1f, clip %.1f\n", path, text.size(), ntrain, nval, s.vocab_size, s.n_layer,
           s.n_head, s.n_embd, T, tr.L.n, B, steps, lr, warmup, min_lr, tr.h.beta2, tr.h.wd,
           tr.h.clip);
    auto window = [&](size_t start, int32_t *in, int32_t *tg) {
        for (int t = 0; t < T; t++) {
            in[t] = text[start + t];
            tg[t] = text[start + t + 1];
        }
    };
    // NVAL fixed validation batches: windows spread evenly over the val split.
    std::vector<int32_t> vin((size_t)NVAL * B * T), vtg((size_t)NVAL * B * T);
    for (int i = 0; i < NVAL * B; i++)
        window(ntrain + (size_t)i * (nval - T - 1) / ((size_t)NVAL * B - 1),
               &vin[(size_t)i * T], &vtg[(size_t)i * T]);
    auto val_loss = [&]() {
        upload_params(tr);
        double sum = 0.0;
        for (int j = 0; j < NVAL; j++) {
            float loss = 0.0f;
            eng(gpu_model_loss(tr.g, &vin[(size_t)j * B * T], &vtg[(size_t)j * B * T], B, T,
                               &loss, why, sizeof why),
                "gpu_model_loss");
            sum += loss;
        }
        return sum / NVAL;
    };
    const double start_all = now_ms();
    const double val0 = val_loss();
    printf("shakespeare: val loss at the start %.4f (mean of %d batches of %d x %d)\n", val0,
           NVAL, B, T);
    Rng rng(seed + 3);
    std::vector<int32_t> in((size_t)B * T), tg((size_t)B * T);
    double win_loss = 0.0, win_ms = 0.0, train_ms = 0.0;
    int win_n = 0, skipped = 0;
    bool finite = true;
    for (int step = 0; step < steps; step++) {
        for (int b = 0; b < B; b++)
            window(rng.below((uint32_t)(ntrain - T - 1)), &in[(size_t)b * T], &tg[(size_t)b * T]);
        StepOut o;
        train_step(tr, in.data(), tg.data(), B, T, lr_at_step(step, warmup, steps, lr, min_lr),
                   &o);
        finite = finite && isfinite(o.loss);
        if (o.overflow) {
            skipped++;
            printf("shakespeare: step %d: FP16 overflow at loss scale %.0f: update skipped, "
                   "scale now %.0f\n", step + 1, o.scale, tr.ls.scale);
        }
        win_loss += o.loss, win_ms += o.ms, train_ms += o.ms, win_n++;
        if ((step + 1) % 50 == 0 || step + 1 == steps) {
            printf("shakespeare: step %4d/%d  loss %.4f  scale %.0f  %.1f ms/step  %.0f "
                   "tokens/s\n", step + 1, steps, win_loss / win_n, tr.ls.scale, win_ms / win_n,
                   (double)B * T * win_n / (win_ms / 1000.0));
            fflush(stdout);
            win_loss = win_ms = 0.0;
            win_n = 0;
        }
    }
    const double val1 = val_loss();
    const double secs = (now_ms() - start_all) / 1000.0;
    printf("shakespeare: val loss %.4f -> %.4f in %d steps (%d skipped), %.1f s (%.1f ms per "
           "training step)\n", val0, val1, steps, skipped, secs, train_ms / steps);
    printf("RESULT shakespeare steps=%d val_start=%.4f val_end=%.4f seconds=%.1f "
           "step_ms=%.1f\n", steps, val0, val1, secs, train_ms / steps);
    if (small)
        report(finite && val0 - val1 > 0.5,
               "shakespeare --small: final val loss %.4f, %.4f below the start (> 0.5 wanted)",
               val1, val0 - val1);
    else
        report(finite && val1 < 2.0 && val0 - val1 > 2.5,
               "shakespeare: final val loss %.4f < 2.0 and %.4f below the start (> 2.5 wanted)",
               val1, val0 - val1);
    gpu_model_free(tr.g);
    return failures ? 1 : 0;
}

// ------------------------------------------------------------------ main

static int usage()
{
    printf("usage: gpu_train [test | grads | bench | shakespeare] [--data FILE] [--steps N] "
           "[--peak-tflops X] [--seed N] [--small]\n");
    return 1;
}

int main(int argc, char **argv)
{
    std::string mode = "test";
    const char *data = "data/tinyshakespeare.txt";
    int steps = -1;
    double peak = 989.4;
    uint64_t seed = 1337;
    bool small = false;
    int i = 1;
    if (i < argc && argv[i][0] != '-') mode = argv[i++];
    for (; i < argc; i++) {
        const std::string a = argv[i];
        if (a == "--small") {
            small = true;
            continue;
        }
        if (i + 1 >= argc) return usage();
        if (a == "--data") data = argv[++i];
        else if (a == "--steps") steps = atoi(argv[++i]);
        else if (a == "--peak-tflops") peak = atof(argv[++i]);
        else if (a == "--seed") seed = strtoull(argv[++i], nullptr, 10);
        else return usage();
    }
    if ((mode != "test" && mode != "grads" && mode != "bench" && mode != "shakespeare") ||
        (steps != -1 && steps < 1) || !(peak > 0.0))
        return usage();

    gpu_or_skip(); // exits: 77 without a GPU, 1 where CUDA cannot start
    ol_check_launches(1); // every launch waited for and checked, by kernel name
    CUDA_OK(cudaSetDevice(0));
    cudaDeviceProp p;
    CUDA_OK(cudaGetDeviceProperties(&p, 0));
    printf("# %s, sm_%d%d, %.1f GiB; %s mode; FP16 conversion on the host: %s\n", p.name,
           p.major, p.minor, (double)p.totalGlobalMem / (1 << 30), mode.c_str(),
           half_path_name());
    fflush(stdout);
    if (mode == "grads") return run_grads(seed, small);
    if (mode == "bench") return run_bench(seed, peak, steps > 0 ? steps : small ? 2 : 10, small);
    if (mode == "shakespeare")
        return run_shakespeare(seed, data, steps > 0 ? steps : small ? 30 : 600, small);
    return run_test(seed);
}
