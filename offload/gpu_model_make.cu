// gpu_model_make — making and freeing a gpu_model (gpu_model.h): the parameter counts,
// the layout of the FP16 parameters (set_layout), the carving of the activation area,
// the device memory a model will need, create for each kind (whole, blocks, stage,
// shard), free, and the check that the host's table of tensors matches the layout. The
// struct and the device coordinates: gpu_model_impl.cuh.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <initializer_list>

#include "gpu_model_impl.cuh"
#include "attention_plan.h"
#include "ops.cuh"

using namespace gpu_model_detail;

extern "C" {

size_t gpu_model_param_count(const gpu_model_shape *s)
{
    return gpu_model_shard_param_count(s, 1);
}

size_t gpu_model_shard_param_count(const gpu_model_shape *s, int tp)
{
    if (tp < 1 || s->n_head % tp != 0 || s->vocab_size % tp != 0) return 0;
    const size_t C = (size_t)s->n_embd, L = (size_t)s->n_layer, Cl = C / (size_t)tp;
    // Per block: the split tensors' 12 C Cl + 7 Cl, the whole ones' (LayerNorms, the
    // row-parallel biases) 6 C.
    return ((size_t)s->vocab_size / (size_t)tp + (size_t)s->block_size) * C +
           L * (12 * C * Cl + 7 * Cl + 6 * C) + 2 * C;
}

} // extern "C"

namespace {

size_t align256(size_t n) { return (n + 255) & ~(size_t)255; }

// Walks the activation area: with base == NULL only sums the sizes. A blocks kind
// (blocks != 0) has the residual stream in FP32; only a model with the head (head != 0)
// has the final LayerNorm, logits and losses; a shard of tp (blocks) holds 1/tp of the
// tensors inside the split layers (and of the logits' columns, with the loss's row
// stats), and on the host path (host_tp) the all-reduce's FP32 scratch.
size_t carve_acts(gpu_model *g, const gpu_model_shape *s, int B, int T, int blocks, int head,
                  int tp, int host_tp, char *base)
{
    const size_t C = s->n_embd, V = (size_t)s->vocab_size / (size_t)tp, L = s->n_layer;
    const size_t Cl = C / (size_t)tp, NHl = (size_t)s->n_head / (size_t)tp;
    const size_t N = (size_t)B * T, BTC = N * C, BTCl = N * Cl;
    size_t off = 0;
    auto take = [&](size_t bytes) -> char * {
        char *p = base ? base + off : nullptr;
        off += align256(bytes);
        return p;
    };
    auto H = [&](size_t n) { return (__half *)take(n * sizeof(__half)); };
    auto F = [&](size_t n) { return (float *)take(n * sizeof(float)); };
    __half *x0 = H(BTC), *lnf = nullptr, *logits = nullptr;
    float *lnf_mean = nullptr, *lnf_rstd = nullptr, *losses = nullptr, *loss = nullptr;
    float *stream_f32 = nullptr, *tp_f32 = nullptr, *xent_stats = nullptr;
    if (blocks) {
        stream_f32 = F(BTC);
        if (host_tp) tp_f32 = F(BTC);
    }
    if (head) {
        lnf = H(BTC), logits = H(N * V);
        lnf_mean = F(N), lnf_rstd = F(N), losses = F(N), loss = F(1);
        if (tp > 1) xent_stats = F(3 * N);
    }
    __half *proj = H(BTC), *qkv = H(3 * BTCl);
    for (size_t l = 0; l < L; l++) {
        layer_acts a;
        a.ln1 = H(BTC);
        a.qkvr = H(3 * BTCl);
        a.att = H((size_t)B * NHl * T * T);
        a.atty = H(BTCl);
        a.res2 = H(BTC);
        a.ln2 = H(BTC);
        a.fch = H(4 * BTCl);
        a.fch_gelu = H(4 * BTCl);
        a.res3 = H(BTC);
        a.ln1_mean = F(N);
        a.ln1_rstd = F(N);
        a.ln2_mean = F(N);
        a.ln2_rstd = F(N);
        if (g) g->la[l] = a;
    }
    __half *dres = H(BTC), *dln = H(BTC), *datty = H(BTCl), *dqkv = H(3 * BTCl);
    __half *d4a = H(4 * BTCl), *d4b = H(4 * BTCl);
    __half *fs = H(ol_attention_fwd_scratch_halves(B, T, (int)Cl, (int)NHl));
    __half *bs = H(ol_attention_bwd_scratch_halves(B, T, (int)Cl, (int)NHl));
    if (g) {
        g->x0 = x0, g->lnf = lnf, g->logits = logits, g->proj = proj, g->qkv = qkv;
        g->lnf_mean = lnf_mean, g->lnf_rstd = lnf_rstd, g->losses = losses, g->loss = loss;
        g->stream_f32 = stream_f32, g->tp_f32 = tp_f32, g->xent_stats = xent_stats;
        g->dres = dres, g->dln = dln, g->datty = datty, g->dqkv = dqkv;
        g->d4a = d4a, g->d4b = d4b, g->att_fwd_scratch = fs, g->att_bwd_scratch = bs;
    }
    return off;
}

// The layout (g->blocks, g->ends and g->tp set first): layer tensors in device coordinates; a
// shard's is src/model/model.c's (gpu_model.h). Its owner is src/layout/, a peer layer
// offload/ may not include (and the standalone GPU programs link no host layout); so
// these offsets stay here as the kernels' side of the contract, and the trainer hands
// the owner's table to gpu_model_check_layout, which compares them tensor by tensor
// (name, shape, offset) before anything is uploaded.
void set_layout(gpu_model *g)
{
    const size_t C = g->s.n_embd, V = g->s.vocab_size / g->tp.size, maxT = g->s.block_size;
    const size_t Cl = (size_t)shard_of(g, g->s.n_embd);
    g->wte = 0;
    g->wpe = V * C;
    size_t o = (V + maxT) * C;
    const bool blocks_alone = g->blocks && !g->ends; // else the whole layout is there
    g->dev_lo = blocks_alone ? o : 0;
    auto at = [&](size_t n) {
        const size_t p = o - g->dev_lo;
        o += n;
        return p;
    };
    for (int l = 0; l < g->s.n_layer; l++) {
        layer_offsets &lo = g->lo[l];
        lo.begin = o;
        lo.ln1w = at(C);
        lo.ln1b = at(C);
        lo.qkvw = at(3 * Cl * C);
        lo.qkvb = at(3 * Cl);
        lo.attprojw = at(C * Cl);
        lo.attprojb = at(C);
        lo.ln2w = at(C);
        lo.ln2b = at(C);
        lo.fcw = at(4 * Cl * C);
        lo.fcb = at(4 * Cl);
        lo.fcprojw = at(4 * Cl * C);
        lo.fcprojb = at(C);
        lo.end = o;
    }
    g->lnfw = o, o += C;
    g->lnfb = o, o += C;
    g->n_params = o;
    g->dev_hi = blocks_alone ? g->lnfw : g->n_params;
}

// Parameters of the layout on the device: all of them (any end there), or the blocks'
// (a shard's).
size_t device_params(const gpu_model_shape *s, int blocks, int ends, int tp)
{
    const size_t C = (size_t)s->n_embd, Cl = C / (size_t)tp;
    return blocks && !ends ? (size_t)s->n_layer * (12 * C * Cl + 7 * Cl + 6 * C)
                           : gpu_model_shard_param_count(s, tp);
}

// cuBLAS's workspace, given to it rather than left to its default: 32 MiB is the size
// cuBLAS's documentation recommends for Hopper (4 MiB before it), where the fastest
// kernels of large products need it.
constexpr size_t kBlasWorkspace = (size_t)32 << 20;

size_t device_bytes(const gpu_model_shape *s, int B, int T, int blocks, int ends, int tp,
                    int host_tp)
{
    const size_t P = device_params(s, blocks, ends, tp);
    return align256(P * sizeof(__half)) + align256(P * sizeof(float)) +
           align256(P * sizeof(__half)) +
           (ends ? align256(2 * (size_t)B * T * sizeof(int32_t)) : 0) +
           carve_acts(nullptr, s, B, T, blocks, ends & kEndHead, tp, host_tp, nullptr) +
           kBlasWorkspace;
}

// The host path of a shard's all-reduces (no device hook).
bool host_tp(const gpu_model_tp *tp) { return tp->size > 1 && !tp->device_sum; }

// Whether tp describes a shard a model of shape s can be cut into, with a hook.
bool shard_ok(const gpu_model_shape *s, const gpu_model_tp *tp, char *why, size_t cap)
{
    if (tp->size < 1 || tp->rank < 0 || tp->rank >= tp->size ||
        s->n_head % tp->size != 0 || s->vocab_size % tp->size != 0) {
        say(why, cap, "GPU: shard %d of tp = %d: tp must divide n_head = %d and vocab_size "
            "= %d", tp->rank, tp->size, s->n_head, s->vocab_size);
        return false;
    }
    if (tp->size > 1 && !tp->device_sum && !tp->host_sum) {
        say(why, cap, "GPU: a shard of tp = %d needs a sum hook (device_sum or host_sum)",
            tp->size);
        return false;
    }
    return true;
}

// The cuBLAS handle on the compute stream with the model's workspace. 0, or -1 with
// `why` set (the caller frees the model).
int make_blas(gpu_model *g, char *why, size_t cap)
{
    cublasStatus_t bs = cublasCreate(&g->blas);
    if (bs != CUBLAS_STATUS_SUCCESS) {
        say(why, cap, "GPU: creating the cuBLAS handle: %s", blas_name((int)bs));
        g->blas = nullptr;
        return -1;
    }
    if ((bs = cublasSetStream(g->blas, g->compute)) != CUBLAS_STATUS_SUCCESS) {
        say(why, cap, "GPU: cublasSetStream: %s", blas_name((int)bs));
        return -1;
    }
    if ((bs = ol_blas_numerics(g->blas)) != CUBLAS_STATUS_SUCCESS) {
        say(why, cap, "GPU: cublasSetMathMode (no reduced-precision reductions): %s",
            blas_name((int)bs));
        return -1;
    }
    // After cublasSetStream, which resets the handle's workspace to its default.
    if ((bs = cublasSetWorkspace(g->blas, g->blas_workspace, kBlasWorkspace)) !=
        CUBLAS_STATUS_SUCCESS) {
        say(why, cap, "GPU: cublasSetWorkspace: %s", blas_name((int)bs));
        return -1;
    }
    return 0;
}

// A model of kind blocks (the residual stream's entry points) with `ends` (kEndEmbed,
// kEndHead) on the device, for the shard tp.
gpu_model *create(const gpu_model_shape *s, int B, int T, int blocks, int ends,
                  const gpu_model_tp *tp, char *why, size_t cap)
{
    if (!s || s->n_layer < 0 || s->n_head < 1 || s->n_embd < 1 || s->vocab_size < 1 ||
        s->block_size < 1 || s->n_embd % s->n_head != 0 || B < 1 || T < 1 ||
        T > s->block_size) {
        say(why, cap, "GPU: bad model shape or batch (n_embd %% n_head, T <= block_size)");
        return nullptr;
    }
    if (!shard_ok(s, tp, why, cap)) return nullptr;
    if (ends && tp->size > 1 && (!tp->host_sum || !tp->host_max)) {
        say(why, cap, "GPU: a shard of tp = %d with its embedding or head needs host_sum "
            "and host_max (the loss's row stats)", tp->size);
        return nullptr;
    }
    gpu_model *g = (gpu_model *)calloc(1, sizeof *g);
    if (!g) {
        say(why, cap, "GPU: out of host memory");
        return nullptr;
    }
    g->s = *s;
    g->maxB = B;
    g->maxT = T;
    g->blocks = blocks;
    g->ends = ends;
    g->tp = *tp;
    const int L = s->n_layer;
    g->lo = (layer_offsets *)calloc((size_t)L + 1, sizeof *g->lo);
    g->la = (layer_acts *)calloc((size_t)L + 1, sizeof *g->la);
    g->grads_ready = (cudaEvent_t *)calloc((size_t)L + 2, sizeof(cudaEvent_t));
    g->grads_down = (cudaEvent_t *)calloc((size_t)L + 2, sizeof(cudaEvent_t));
    g->part_lo = (size_t *)calloc((size_t)L + 2, sizeof(size_t));
    g->part_hi = (size_t *)calloc((size_t)L + 2, sizeof(size_t));
    if (!g->lo || !g->la || !g->grads_ready || !g->grads_down || !g->part_lo || !g->part_hi) {
        say(why, cap, "GPU: out of host memory");
        gpu_model_free(g);
        return nullptr;
    }
    set_layout(g);
    const size_t P = g->n_params, Pd = g->dev_hi - g->dev_lo, ntok = (size_t)B * T;
    const size_t BTC = ntok * (size_t)s->n_embd;
    const int head = ends & kEndHead;
    const size_t act_bytes =
        carve_acts(nullptr, s, B, T, blocks, head, tp->size, host_tp(tp), nullptr);
    // Any failure below: report, free what was made, return NULL.
    auto fail = [&](const char *what, cudaError_t e) -> gpu_model * {
        say(why, cap, "GPU: %s: %s", what, cudaGetErrorString(e));
        gpu_model_free(g);
        return nullptr;
    };
    cudaError_t e;
    if ((e = cudaStreamCreateWithFlags(&g->compute, cudaStreamNonBlocking)) != cudaSuccess ||
        (e = cudaStreamCreateWithFlags(&g->copy, cudaStreamNonBlocking)) != cudaSuccess)
        return fail("creating streams", e);
    cudaEvent_t *evs[] = {&g->uploaded, &g->tokens_in,  &g->loss_ready, &g->copies_done,
                          &g->compute_mark, &g->stream_up, &g->stream_conv, &g->stream_down};
    for (cudaEvent_t *ev : evs)
        if ((e = cudaEventCreateWithFlags(ev, cudaEventDisableTiming)) != cudaSuccess)
            return fail("creating events", e);
    for (int i = 0; i < L + 2; i++)
        if ((e = cudaEventCreateWithFlags(&g->grads_ready[i], cudaEventDisableTiming)) !=
                cudaSuccess ||
            (e = cudaEventCreateWithFlags(&g->grads_down[i], cudaEventDisableTiming)) !=
                cudaSuccess)
            return fail("creating events", e);
    char what[160];
    snprintf(what, sizeof what, "allocating %.2f GiB of parameters and gradients",
             (double)Pd * 8 / 1073741824.0);
    if ((e = cudaMalloc((void **)&g->params, Pd * sizeof(__half))) != cudaSuccess ||
        (e = cudaMalloc((void **)&g->grads, Pd * sizeof(float))) != cudaSuccess ||
        (e = cudaMalloc((void **)&g->grads_half, Pd * sizeof(__half))) != cudaSuccess ||
        (ends &&
         (e = cudaMalloc((void **)&g->tokens, 2 * ntok * sizeof(int32_t))) != cudaSuccess))
        return fail(what, e);
    snprintf(what, sizeof what, "allocating %.2f GiB of activations for batch %d x %d",
             (double)act_bytes / 1073741824.0, B, T);
    if ((e = cudaMalloc(&g->acts_mem, act_bytes)) != cudaSuccess) return fail(what, e);
    if ((e = cudaMalloc(&g->blas_workspace, kBlasWorkspace)) != cudaSuccess)
        return fail("allocating cuBLAS's workspace", e);
    carve_acts(g, s, B, T, blocks, head, tp->size, host_tp(tp), (char *)g->acts_mem);
    if ((e = cudaMallocHost((void **)&g->param_staging, P * sizeof(uint16_t))) != cudaSuccess ||
        (e = cudaMallocHost((void **)&g->grad_host, P * sizeof(uint16_t))) != cudaSuccess)
        return fail("allocating pinned host buffers", e);
    if (blocks) {
        const size_t bytes = BTC * sizeof(float);
        if ((e = cudaMallocHost((void **)&g->stream_host, bytes)) != cudaSuccess ||
            (host_tp(tp) && (e = cudaMallocHost((void **)&g->tp_host, bytes)) != cudaSuccess))
            return fail("allocating pinned host buffers", e);
        // The ranges a blocks model (or a stage) never writes read as zero
        // (gpu_model_blocks_backward, gpu_model_stage_backward), and those of the
        // staging buffer a stage's caller never fills (a last stage's wpe, a first
        // stage's ln_f) go up as zeros, not as whatever the pinned memory held.
        memset(g->grad_host, 0, P * sizeof(uint16_t));
        memset(g->param_staging, 0, P * sizeof(uint16_t));
    }
    if (ends && ((e = cudaMallocHost((void **)&g->token_staging,
                                     2 * ntok * sizeof(int32_t))) != cudaSuccess ||
                 (e = cudaMallocHost((void **)&g->loss_host, sizeof(float))) != cudaSuccess))
        return fail("allocating pinned host buffers", e);
    if (head && tp->size > 1 &&
        (e = cudaMallocHost((void **)&g->xent_host, 4 * ntok * sizeof(float))) != cudaSuccess)
        return fail("allocating pinned host buffers", e);
    if (make_blas(g, why, cap) != 0) {
        gpu_model_free(g);
        return nullptr;
    }
    return g;
}

// The whole model's "shard": tp = 1, no hook.
const gpu_model_tp kWhole = {1, 0, nullptr, nullptr, nullptr, nullptr, nullptr};

} // namespace

extern "C" {

size_t gpu_model_device_bytes(const gpu_model_shape *s, int B, int T)
{
    return device_bytes(s, B, T, 0, kEndEmbed | kEndHead, 1, 0);
}

size_t gpu_model_blocks_device_bytes(const gpu_model_shape *s, int B, int T)
{
    return device_bytes(s, B, T, 1, 0, 1, 0);
}

size_t gpu_model_stage_device_bytes(const gpu_model_shape *s, int B, int T,
                                    const gpu_model_tp *tp, int embed, int head)
{
    const gpu_model_tp *t = tp ? tp : &kWhole;
    if (t->size < 1 || s->n_head % t->size != 0 || s->vocab_size % t->size != 0) return 0;
    return device_bytes(s, B, T, 1, (embed ? kEndEmbed : 0) | (head ? kEndHead : 0), t->size,
                        host_tp(t));
}

size_t gpu_model_shard_blocks_device_bytes(const gpu_model_shape *s, int B, int T,
                                           const gpu_model_tp *tp)
{
    if (tp->size < 1 || s->n_head % tp->size != 0) return 0;
    return device_bytes(s, B, T, 1, 0, tp->size, host_tp(tp));
}

gpu_model *gpu_model_create(const gpu_model_shape *s, int B, int T, char *why, size_t cap)
{
    return create(s, B, T, 0, kEndEmbed | kEndHead, &kWhole, why, cap);
}

gpu_model *gpu_model_create_blocks(const gpu_model_shape *s, int B, int T, char *why,
                                   size_t cap)
{
    return create(s, B, T, 1, 0, &kWhole, why, cap);
}

gpu_model *gpu_model_create_stage(const gpu_model_shape *s, int B, int T,
                                  const gpu_model_tp *tp, int embed, int head, char *why,
                                  size_t cap)
{
    return create(s, B, T, 1, (embed ? kEndEmbed : 0) | (head ? kEndHead : 0),
                  tp ? tp : &kWhole, why, cap);
}

gpu_model *gpu_model_create_shard_blocks(const gpu_model_shape *s, int B, int T,
                                         const gpu_model_tp *tp, char *why, size_t cap)
{
    if (!tp) {
        say(why, cap, "GPU: a shard blocks model needs its shard (tp)");
        return nullptr;
    }
    return create(s, B, T, 1, 0, tp, why, cap);
}

void gpu_model_free(gpu_model *g)
{
    if (!g) return;
    if (g->compute) cudaStreamSynchronize(g->compute);
    if (g->copy) cudaStreamSynchronize(g->copy);
    if (g->blas) cublasDestroy(g->blas);
    cudaFree(g->params);
    cudaFree(g->grads);
    cudaFree(g->grads_half);
    cudaFree(g->tokens);
    cudaFree(g->acts_mem);
    cudaFree(g->blas_workspace);
    cudaFreeHost(g->param_staging);
    cudaFreeHost(g->grad_host);
    cudaFreeHost(g->token_staging);
    cudaFreeHost(g->loss_host);
    cudaFreeHost(g->stream_host);
    cudaFreeHost(g->tp_host);
    cudaFreeHost(g->xent_host);
    cudaEvent_t evs[] = {g->uploaded,     g->tokens_in, g->loss_ready,  g->copies_done,
                         g->compute_mark, g->stream_up, g->stream_conv, g->stream_down};
    for (cudaEvent_t ev : evs)
        if (ev) cudaEventDestroy(ev);
    for (cudaEvent_t *part_evs : {g->grads_ready, g->grads_down})
        if (part_evs)
            for (int i = 0; i < g->s.n_layer + 2; i++)
                if (part_evs[i]) cudaEventDestroy(part_evs[i]);
    free_profiler(g);
    if (g->compute) cudaStreamDestroy(g->compute);
    if (g->copy) cudaStreamDestroy(g->copy);
    free(g->grads_ready);
    free(g->grads_down);
    free(g->part_lo);
    free(g->part_hi);
    free(g->lo);
    free(g->la);
    free(g);
}

uint16_t *gpu_model_param_staging(gpu_model *g) { return g->param_staging; }

} // extern "C"

namespace {

// One tensor as the kernels of g expect it: set_layout's offsets (host coordinates)
// with the names and shapes of gpu_model.h's layout. i runs over the table order:
// wte, wpe, L x 12 block tensors, ln_f.weight, ln_f.bias.
struct expected_tensor {
    char name[64];
    int ndim;
    int64_t dims[2];
    size_t offset;
};

expected_tensor expect(const gpu_model *g, int i)
{
    const int64_t C = g->s.n_embd, Cl = shard_of(g, g->s.n_embd);
    const int L = g->s.n_layer;
    expected_tensor e = {};
    auto set = [&](const char *name, size_t offset, int64_t d0, int64_t d1) {
        snprintf(e.name, sizeof e.name, "%s", name);
        e.ndim = d1 > 0 ? 2 : 1;
        e.dims[0] = d0;
        e.dims[1] = d1;
        e.offset = offset;
    };
    if (i == 0) {
        set("transformer.wte.weight", g->wte, shard_of(g, g->s.vocab_size), C);
    } else if (i == 1) {
        set("transformer.wpe.weight", g->wpe, g->s.block_size, C);
    } else if (i < 2 + 12 * L) {
        const int l = (i - 2) / 12;
        const layer_offsets &lo = g->lo[l];
        // In set_layout's order, so a table that swaps two of them differs in a name.
        const struct {
            const char *suffix;
            size_t at;
            int64_t d0, d1;
        } block[12] = {
            {"ln_1.weight", lo.ln1w, C, 0},        {"ln_1.bias", lo.ln1b, C, 0},
            {"attn.c_attn.weight", lo.qkvw, 3 * Cl, C}, {"attn.c_attn.bias", lo.qkvb, 3 * Cl, 0},
            {"attn.c_proj.weight", lo.attprojw, C, Cl}, {"attn.c_proj.bias", lo.attprojb, C, 0},
            {"ln_2.weight", lo.ln2w, C, 0},        {"ln_2.bias", lo.ln2b, C, 0},
            {"mlp.c_fc.weight", lo.fcw, 4 * Cl, C}, {"mlp.c_fc.bias", lo.fcb, 4 * Cl, 0},
            {"mlp.c_proj.weight", lo.fcprojw, C, 4 * Cl}, {"mlp.c_proj.bias", lo.fcprojb, C, 0},
        };
        const int k = (i - 2) % 12;
        char name[64];
        snprintf(name, sizeof name, "transformer.h.%d.%s", l, block[k].suffix);
        set(name, block[k].at + g->dev_lo, block[k].d0, block[k].d1);
    } else if (i == 2 + 12 * L) {
        set("transformer.ln_f.weight", g->lnfw, C, 0);
    } else {
        set("transformer.ln_f.bias", g->lnfb, C, 0);
    }
    return e;
}

// "[3072, 768]" or "[768]".
void shape_text(char *buf, size_t cap, int ndim, const int64_t *dims)
{
    if (ndim == 2)
        snprintf(buf, cap, "[%lld, %lld]", (long long)dims[0], (long long)dims[1]);
    else
        snprintf(buf, cap, "[%lld]", (long long)dims[0]);
}

} // namespace

extern "C" {

int gpu_model_check_layout(gpu_model *g, const gpu_model_tensor *t, int n, char *why,
                           size_t cap)
{
    const int want = 4 + 12 * g->s.n_layer;
    if (!t || n != want) {
        say(why, cap, "GPU: the host's layout has %d tensors, the GPU's %d", t ? n : 0, want);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        const expected_tensor e = expect(g, i);
        const bool same_shape = t[i].ndim == e.ndim && t[i].dims[0] == e.dims[0] &&
                                (e.ndim == 1 || t[i].dims[1] == e.dims[1]);
        if (t[i].name && strcmp(t[i].name, e.name) == 0 && same_shape &&
            t[i].offset == e.offset)
            continue;
        char got[48] = "[?]", exp[48];
        if (t[i].ndim == 1 || t[i].ndim == 2) shape_text(got, sizeof got, t[i].ndim, t[i].dims);
        shape_text(exp, sizeof exp, e.ndim, e.dims);
        say(why, cap, "GPU: the host's layout differs from the GPU's at tensor %d: %s %s at "
            "%zu on the host, %s %s at %zu on the GPU", i, t[i].name ? t[i].name : "(null)",
            got, t[i].offset, e.name, exp, e.offset);
        return -1;
    }
    return 0;
}

} // extern "C"
