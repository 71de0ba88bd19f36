// gpu_model — see gpu_model.h. The forward and backward of src/model.c, layer by layer
// on the FP16 kernels of ops.cuh, with every activation of the batch kept on the device.
//
// Pieces: the forward is embed_forward, blocks_forward, head_forward and the backward
// head_backward, blocks_backward, embed_backward; offload = all runs all six, a blocks
// model (gpu_model_create_blocks) only the two block pieces, between the residual
// stream coming up (put_stream) and going down (queue_stream, take_stream).
//
// Device coordinates: a blocks model holds only the blocks' range [dev_lo, dev_hi) of
// the flat layout on the device (params, grads, grads_half), so the tensor offsets of
// layer_offsets are relative to dev_lo (0 for offload = all); the host buffers
// (staging, grad_host) keep the whole layout.
//
// Residual gradients: every residual add passes its output gradient unchanged to both
// inputs, so one buffer (dres) carries d(residual stream) down through the blocks; each
// LayerNorm's backward adds its input gradient into it.
//
// Gradient copies: backward finishes the parameter gradients in the reverse order of
// the layout (ln_f, the last block, ..., the first block, then wte and wpe, which get
// gradient from both the head and the embedding). As each of those ranges is final it
// is converted to FP16 on the compute stream, an event marks it, and the copy stream
// brings it down to the pinned host buffer while backward goes on below it.
#include "gpu_model.h"

#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops.cuh"

namespace {

// Offsets (in elements) of one block's tensors: device coordinates (from dev_lo).
struct layer_offsets {
    size_t ln1w, ln1b, qkvw, qkvb, attprojw, attprojb, ln2w, ln2b, fcw, fcb, fcprojw, fcprojb;
    size_t begin, end; // the block's range in the whole layout (host coordinates)
};

// Activations one block keeps for its backward.
struct layer_acts {
    __half *ln1, *qkvr, *att, *atty, *res2, *ln2, *fch, *fch_gelu, *res3;
    float *ln1_mean, *ln1_rstd, *ln2_mean, *ln2_rstd;
};

void say(char *why, size_t cap, const char *fmt, ...)
{
    if (!why || cap == 0) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, cap, fmt, ap);
    va_end(ap);
}

__global__ void float_to_half(__half *dst, const float *src, size_t n)
{
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i] = __float2half(src[i]);
}

__global__ void half_to_float(float *dst, const __half *src, size_t n)
{
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i] = __half2float(src[i]);
}

unsigned blocks_for(size_t n) { return (unsigned)((n + 255) / 256); }

// One block: the mean of n floats, summed in a fixed order.
__global__ void mean_of(float *out, const float *x, int n)
{
    __shared__ float part[1024];
    float s = 0.0f;
    for (int i = threadIdx.x; i < n; i += blockDim.x) s += x[i];
    part[threadIdx.x] = s;
    __syncthreads();
    for (int w = blockDim.x / 2; w > 0; w >>= 1) {
        if ((int)threadIdx.x < w) part[threadIdx.x] += part[threadIdx.x + w];
        __syncthreads();
    }
    if (threadIdx.x == 0) *out = part[0] / (float)n;
}

} // namespace

struct gpu_model {
    gpu_model_shape s;
    int maxB, maxT;
    int blocks;                  // made by gpu_model_create_blocks
    int fwd_B, fwd_T;            // blocks: the last forward's batch (0: none yet)
    size_t n_params;
    size_t wte, wpe, lnfw, lnfb; // offsets (device = layout coordinates: offload = all)
    size_t dev_lo, dev_hi;       // the layout range on the device: all, or the blocks'
    layer_offsets *lo;           // [L]

    cudaStream_t compute, copy;
    cublasHandle_t blas;
    cudaEvent_t uploaded, tokens_in, loss_ready, copies_done, compute_mark;
    cudaEvent_t stream_up, stream_conv, stream_down; // the residual stream (blocks)
    cudaEvent_t *grads_ready; // [L + 2]: ln_f, blocks L-1..0, embeddings

    // Device memory: one allocation each for the big families, so a failure names one.
    __half *params;      // [dev_hi - dev_lo]
    float *grads;        // [dev_hi - dev_lo], scaled, accumulated by the kernels
    __half *grads_half;  // [dev_hi - dev_lo], what goes down
    int32_t *tokens;     // [2][maxB*maxT]: inputs, targets (offload = all)
    void *acts_mem;      // every activation and scratch buffer below
    __half *x0, *lnf, *logits, *proj, *qkv; // qkv: one layer's, the backward uses qkvr
    float *lnf_mean, *lnf_rstd, *losses, *loss; // lnf .. loss: offload = all only
    float *stream_f32;   // [maxB*maxT*C] the residual stream in FP32 (blocks only)
    layer_acts *la;      // [L]
    __half *dres, *dln, *datty, *dqkv, *d4a, *d4b, *att_fwd_scratch, *att_bwd_scratch;

    // Pinned host memory.
    uint16_t *param_staging, *grad_host; // [n_params] each: the whole layout
    int32_t *token_staging;              // offload = all
    float *loss_host;                    // offload = all
    float *stream_host;                  // [maxB*maxT*C] blocks only
};

extern "C" {

size_t gpu_model_param_count(const gpu_model_shape *s)
{
    const size_t C = (size_t)s->n_embd, L = (size_t)s->n_layer;
    return ((size_t)s->vocab_size + (size_t)s->block_size) * C + L * (12 * C * C + 13 * C) +
           2 * C;
}

} // extern "C"

namespace {

size_t align256(size_t n) { return (n + 255) & ~(size_t)255; }

// Walks the activation area: with base == NULL only sums the sizes. A blocks model
// (blocks != 0) has no final LayerNorm, logits or losses, but the residual stream in
// FP32.
size_t carve_acts(gpu_model *g, const gpu_model_shape *s, int B, int T, int blocks,
                  char *base)
{
    const size_t C = s->n_embd, NH = s->n_head, V = s->vocab_size, L = s->n_layer;
    const size_t N = (size_t)B * T, BTC = N * C;
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
    float *stream_f32 = nullptr;
    if (blocks) {
        stream_f32 = F(BTC);
    } else {
        lnf = H(BTC), logits = H(N * V);
        lnf_mean = F(N), lnf_rstd = F(N), losses = F(N), loss = F(1);
    }
    __half *proj = H(BTC), *qkv = H(3 * BTC);
    for (size_t l = 0; l < L; l++) {
        layer_acts a;
        a.ln1 = H(BTC);
        a.qkvr = H(3 * BTC);
        a.att = H((size_t)B * NH * T * T);
        a.atty = H(BTC);
        a.res2 = H(BTC);
        a.ln2 = H(BTC);
        a.fch = H(4 * BTC);
        a.fch_gelu = H(4 * BTC);
        a.res3 = H(BTC);
        a.ln1_mean = F(N);
        a.ln1_rstd = F(N);
        a.ln2_mean = F(N);
        a.ln2_rstd = F(N);
        if (g) g->la[l] = a;
    }
    __half *dres = H(BTC), *dln = H(BTC), *datty = H(BTC), *dqkv = H(3 * BTC);
    __half *d4a = H(4 * BTC), *d4b = H(4 * BTC);
    __half *fs = H(ol_attention_fwd_scratch_halves(B, T, (int)C, (int)NH));
    __half *bs = H(ol_attention_bwd_scratch_halves(B, T, (int)C, (int)NH));
    if (g) {
        g->x0 = x0, g->lnf = lnf, g->logits = logits, g->proj = proj, g->qkv = qkv;
        g->lnf_mean = lnf_mean, g->lnf_rstd = lnf_rstd, g->losses = losses, g->loss = loss;
        g->stream_f32 = stream_f32;
        g->dres = dres, g->dln = dln, g->datty = datty, g->dqkv = dqkv;
        g->d4a = d4a, g->d4b = d4b, g->att_fwd_scratch = fs, g->att_bwd_scratch = bs;
    }
    return off;
}

// The layout (g->blocks set first): layer tensors in device coordinates.
void set_layout(gpu_model *g)
{
    const size_t C = g->s.n_embd, V = g->s.vocab_size, maxT = g->s.block_size;
    g->wte = 0;
    g->wpe = V * C;
    size_t o = (V + maxT) * C;
    g->dev_lo = g->blocks ? o : 0;
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
        lo.qkvw = at(3 * C * C);
        lo.qkvb = at(3 * C);
        lo.attprojw = at(C * C);
        lo.attprojb = at(C);
        lo.ln2w = at(C);
        lo.ln2b = at(C);
        lo.fcw = at(4 * C * C);
        lo.fcb = at(4 * C);
        lo.fcprojw = at(4 * C * C);
        lo.fcprojb = at(C);
        lo.end = o;
    }
    g->lnfw = o, o += C;
    g->lnfb = o, o += C;
    g->n_params = o;
    g->dev_hi = g->blocks ? g->lnfw : g->n_params;
}

const char *blas_name(int status)
{
    switch (status) {
    case CUBLAS_STATUS_NOT_INITIALIZED: return "cuBLAS not initialised";
    case CUBLAS_STATUS_ALLOC_FAILED: return "cuBLAS could not allocate";
    case CUBLAS_STATUS_INVALID_VALUE: return "cuBLAS: invalid value";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "cuBLAS: not supported on this GPU";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "cuBLAS: execution failed";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "cuBLAS: not supported";
    default: return "cuBLAS error";
    }
}

} // namespace

// Checks for the functions below (each has `why` and `cap` in scope).
#define CU(call)                                                                       \
    do {                                                                               \
        cudaError_t e_ = (call);                                                       \
        if (e_ != cudaSuccess) {                                                       \
            say(why, cap, "GPU: %s (%s)", cudaGetErrorString(e_), #call);              \
            return -1;                                                                 \
        }                                                                              \
    } while (0)
#define BL(call)                                                                       \
    do {                                                                               \
        int s_ = (call);                                                               \
        if (s_ != 0) {                                                                 \
            say(why, cap, "GPU: %s failed: %s (%d)", #call,                           \
                s_ < 100 ? cudaGetErrorString((cudaError_t)s_) : blas_name(s_), s_);     \
            return -1;                                                                 \
        }                                                                              \
    } while (0)

namespace {

int check_batch(const gpu_model *g, int B, int T, char *why, size_t cap)
{
    if (B < 1 || T < 1 || B > g->maxB || T > g->maxT) {
        say(why, cap, "GPU: batch %d x %d is outside the %d x %d the model was made for", B,
            T, g->maxB, g->maxT);
        return -1;
    }
    return 0;
}

// Whether g was made for what the caller asks (blocks: the blocks entry points).
int check_kind(const gpu_model *g, int blocks, char *why, size_t cap)
{
    if (g->blocks == blocks) return 0;
    say(why, cap, blocks ? "GPU: the model was made by gpu_model_create; the blocks entry "
                           "points need one made by gpu_model_create_blocks"
                         : "GPU: the model was made by gpu_model_create_blocks (no "
                           "embedding or head on the device); use the blocks entry points");
    return -1;
}

// The copy stream waits for everything queued on the compute stream so far (before it
// overwrites a buffer the queued kernels may still read).
int copy_after_compute(gpu_model *g, char *why, size_t cap)
{
    CU(cudaEventRecord(g->compute_mark, g->compute));
    CU(cudaStreamWaitEvent(g->copy, g->compute_mark, 0));
    return 0;
}

// Tokens to the device: through the pinned staging buffer on the copy stream; the
// compute stream waits for them.
int put_tokens(gpu_model *g, const int32_t *inputs, const int32_t *targets, size_t n,
               char *why, size_t cap)
{
    if (copy_after_compute(g, why, cap) != 0) return -1;
    const size_t cap_n = (size_t)g->maxB * g->maxT;
    memcpy(g->token_staging, inputs, n * sizeof(int32_t));
    if (targets) memcpy(g->token_staging + cap_n, targets, n * sizeof(int32_t));
    CU(cudaMemcpyAsync(g->tokens, g->token_staging, n * sizeof(int32_t),
                       cudaMemcpyHostToDevice, g->copy));
    if (targets)
        CU(cudaMemcpyAsync(g->tokens + cap_n, g->token_staging + cap_n, n * sizeof(int32_t),
                           cudaMemcpyHostToDevice, g->copy));
    CU(cudaEventRecord(g->tokens_in, g->copy));
    CU(cudaStreamWaitEvent(g->compute, g->tokens_in, 0));
    return 0;
}

// The residual stream up (blocks): x [n] FP32 from the caller into the pinned buffer,
// up on the copy stream into stream_f32, and converted into dst [n] FP16 on the compute
// stream once it is there. The pinned buffer is free: every earlier transfer through it
// was waited for (take_stream); the copy waits for the compute stream, which may still
// read stream_f32.
int put_stream(gpu_model *g, const float *x, __half *dst, size_t n, char *why, size_t cap)
{
    memcpy(g->stream_host, x, n * sizeof(float));
    if (copy_after_compute(g, why, cap) != 0) return -1;
    CU(cudaMemcpyAsync(g->stream_f32, g->stream_host, n * sizeof(float),
                       cudaMemcpyHostToDevice, g->copy));
    CU(cudaEventRecord(g->stream_up, g->copy));
    CU(cudaStreamWaitEvent(g->compute, g->stream_up, 0));
    float_to_half<<<blocks_for(n), 256, 0, g->compute>>>(dst, g->stream_f32, n);
    CU(cudaGetLastError());
    return 0;
}

// The residual stream down (blocks), queued: src [n] FP16 converted into stream_f32 on
// the compute stream, then down into the pinned buffer on the copy stream (behind any
// gradient copies queued there); take_stream waits for it.
int queue_stream(gpu_model *g, const __half *src, size_t n, char *why, size_t cap)
{
    half_to_float<<<blocks_for(n), 256, 0, g->compute>>>(g->stream_f32, src, n);
    CU(cudaGetLastError());
    CU(cudaEventRecord(g->stream_conv, g->compute));
    CU(cudaStreamWaitEvent(g->copy, g->stream_conv, 0));
    CU(cudaMemcpyAsync(g->stream_host, g->stream_f32, n * sizeof(float),
                       cudaMemcpyDeviceToHost, g->copy));
    CU(cudaEventRecord(g->stream_down, g->copy));
    return 0;
}

// Waits for what queue_stream queued and hands it to the caller's x [n].
int take_stream(gpu_model *g, float *x, size_t n, char *why, size_t cap)
{
    CU(cudaEventSynchronize(g->stream_down));
    memcpy(x, g->stream_host, n * sizeof(float));
    return 0;
}

// The last block's output (x0 with no blocks).
const __half *blocks_out(const gpu_model *g)
{
    return g->s.n_layer > 0 ? g->la[g->s.n_layer - 1].res3 : g->x0;
}

// x0 = wte[inputs] + wpe (offload = all).
void embed_forward(gpu_model *g, int B, int T)
{
    const __half *P = g->params;
    ol_encoder_forward(g->x0, g->tokens, P + g->wte, P + g->wpe, B, T, g->s.n_embd,
                       g->compute);
}

// Every block, from x0 to blocks_out(g), keeping what the backward needs.
int blocks_forward(gpu_model *g, int B, int T, char *why, size_t cap)
{
    const int C = g->s.n_embd, NH = g->s.n_head, L = g->s.n_layer;
    const int N = B * T;
    const size_t BTC = (size_t)N * C;
    const __half *P = g->params;
    cudaStream_t st = g->compute;
    const __half *x = g->x0;
    for (int l = 0; l < L; l++) {
        const layer_offsets &o = g->lo[l];
        layer_acts &a = g->la[l];
        ol_layernorm_forward(a.ln1, a.ln1_mean, a.ln1_rstd, x, P + o.ln1w, P + o.ln1b, N, C,
                             st);
        BL(ol_matmul_forward(g->blas, g->qkv, a.ln1, P + o.qkvw, P + o.qkvb, N, C, 3 * C));
        BL(ol_attention_forward(g->blas, a.atty, a.qkvr, a.att, g->att_fwd_scratch, g->qkv, B,
                                T, C, NH));
        BL(ol_matmul_forward(g->blas, g->proj, a.atty, P + o.attprojw, P + o.attprojb, N, C,
                             C));
        ol_residual_forward(a.res2, x, g->proj, BTC, st);
        ol_layernorm_forward(a.ln2, a.ln2_mean, a.ln2_rstd, a.res2, P + o.ln2w, P + o.ln2b, N,
                             C, st);
        BL(ol_matmul_forward(g->blas, a.fch, a.ln2, P + o.fcw, P + o.fcb, N, C, 4 * C));
        ol_gelu_forward(a.fch_gelu, a.fch, 4 * BTC, st);
        BL(ol_matmul_forward(g->blas, g->proj, a.fch_gelu, P + o.fcprojw, P + o.fcprojb, N,
                             4 * C, C));
        ol_residual_forward(a.res3, a.res2, g->proj, BTC, st);
        x = a.res3;
    }
    return 0;
}

// ln_f, the tied head and the loss (offload = all). dlogits_scale > 0 also leaves
// scale * d(mean loss) / d(logits) in place of the logits, for the backward.
int head_forward(gpu_model *g, int B, int T, float dlogits_scale, char *why, size_t cap)
{
    const int C = g->s.n_embd, V = g->s.vocab_size, N = B * T;
    const __half *P = g->params;
    cudaStream_t st = g->compute;
    const int32_t *targets = g->tokens + (size_t)g->maxB * g->maxT;
    ol_layernorm_forward(g->lnf, g->lnf_mean, g->lnf_rstd, blocks_out(g), P + g->lnfw,
                         P + g->lnfb, N, C, st);
    BL(ol_matmul_forward(g->blas, g->logits, g->lnf, P + g->wte, nullptr, N, C, V));
    ol_crossentropy(g->losses, dlogits_scale > 0.0f ? g->logits : nullptr, g->logits, targets,
                    N, V, dlogits_scale, st);
    mean_of<<<1, 1024, 0, st>>>(g->loss, g->losses, N);
    CU(cudaGetLastError());
    CU(cudaMemcpyAsync(g->loss_host, g->loss, sizeof(float), cudaMemcpyDeviceToHost, st));
    CU(cudaEventRecord(g->loss_ready, st));
    return 0;
}

// The forward through the loss (offload = all).
int forward(gpu_model *g, int B, int T, float dlogits_scale, char *why, size_t cap)
{
    embed_forward(g, B, T);
    if (blocks_forward(g, B, T, why, cap) != 0) return -1;
    return head_forward(g, B, T, dlogits_scale, why, cap);
}

// Converts grads[begin, end) (layout coordinates) to FP16 and queues its copy to the
// host behind `ev`.
int send_grads(gpu_model *g, size_t begin, size_t end, cudaEvent_t ev, char *why, size_t cap)
{
    const size_t n = end - begin, d = begin - g->dev_lo;
    float_to_half<<<blocks_for(n), 256, 0, g->compute>>>(g->grads_half + d, g->grads + d, n);
    CU(cudaGetLastError());
    CU(cudaEventRecord(ev, g->compute));
    CU(cudaStreamWaitEvent(g->copy, ev, 0));
    CU(cudaMemcpyAsync(g->grad_host + begin, g->grads_half + d, n * sizeof(__half),
                       cudaMemcpyDeviceToHost, g->copy));
    return 0;
}

// The head's backward (offload = all): leaves d(scaled loss)/d(last block's output)
// in dres and sends ln_f's gradients down.
int head_backward(gpu_model *g, int B, int T, char *why, size_t cap)
{
    const int C = g->s.n_embd, V = g->s.vocab_size, N = B * T;
    const size_t BTC = (size_t)N * C;
    const __half *P = g->params;
    float *G = g->grads;
    cudaStream_t st = g->compute;
    // logits = lnf @ wte^T, its gradient already in place of the logits.
    CU(cudaMemsetAsync(g->dln, 0, BTC * sizeof(__half), st));
    BL(ol_matmul_backward(g->blas, g->dln, G + g->wte, nullptr, g->logits, g->lnf,
                          P + g->wte, N, C, V));
    CU(cudaMemsetAsync(g->dres, 0, BTC * sizeof(__half), st));
    ol_layernorm_backward(g->dres, G + g->lnfw, G + g->lnfb, g->dln, blocks_out(g),
                          P + g->lnfw, g->lnf_mean, g->lnf_rstd, N, C, st);
    return send_grads(g, g->lnfw, g->n_params, g->grads_ready[0], why, cap);
}

// Every block's backward, last first: dres holds d(scaled loss)/d(blocks_out) on entry
// and d(scaled loss)/d(x0) on return; each block's gradients go down as soon as they
// are final.
int blocks_backward(gpu_model *g, int B, int T, char *why, size_t cap)
{
    const int C = g->s.n_embd, NH = g->s.n_head, L = g->s.n_layer;
    const int N = B * T;
    const size_t BTC = (size_t)N * C;
    const __half *P = g->params;
    float *G = g->grads;
    cudaStream_t st = g->compute;
    for (int l = L - 1; l >= 0; l--) {
        const layer_offsets &o = g->lo[l];
        layer_acts &a = g->la[l];
        const __half *x = l > 0 ? g->la[l - 1].res3 : g->x0;
        // MLP: res3 = res2 + c_proj(gelu(c_fc(ln_2(res2)))).
        CU(cudaMemsetAsync(g->d4a, 0, 4 * BTC * sizeof(__half), st));
        BL(ol_matmul_backward(g->blas, g->d4a, G + o.fcprojw, G + o.fcprojb, g->dres,
                              a.fch_gelu, P + o.fcprojw, N, 4 * C, C));
        CU(cudaMemsetAsync(g->d4b, 0, 4 * BTC * sizeof(__half), st));
        ol_gelu_backward(g->d4b, a.fch, g->d4a, 4 * BTC, st);
        CU(cudaMemsetAsync(g->dln, 0, BTC * sizeof(__half), st));
        BL(ol_matmul_backward(g->blas, g->dln, G + o.fcw, G + o.fcb, g->d4b, a.ln2,
                              P + o.fcw, N, C, 4 * C));
        ol_layernorm_backward(g->dres, G + o.ln2w, G + o.ln2b, g->dln, a.res2, P + o.ln2w,
                              a.ln2_mean, a.ln2_rstd, N, C, st);
        // Attention: res2 = x + c_proj(attn(c_attn(ln_1(x)))).
        CU(cudaMemsetAsync(g->datty, 0, BTC * sizeof(__half), st));
        BL(ol_matmul_backward(g->blas, g->datty, G + o.attprojw, G + o.attprojb, g->dres,
                              a.atty, P + o.attprojw, N, C, C));
        CU(cudaMemsetAsync(g->dqkv, 0, 3 * BTC * sizeof(__half), st));
        BL(ol_attention_backward(g->blas, g->dqkv, g->att_bwd_scratch, g->datty, a.qkvr, a.att,
                                 B, T, C, NH));
        CU(cudaMemsetAsync(g->dln, 0, BTC * sizeof(__half), st));
        BL(ol_matmul_backward(g->blas, g->dln, G + o.qkvw, G + o.qkvb, g->dqkv, a.ln1,
                              P + o.qkvw, N, C, 3 * C));
        // The key bias's gradient is exactly 0 (softmax ignores what a row shares): drop
        // the rounding left there, as src/model.c does.
        CU(cudaMemsetAsync(G + o.qkvb + C, 0, (size_t)C * sizeof(float), st));
        ol_layernorm_backward(g->dres, G + o.ln1w, G + o.ln1b, g->dln, x, P + o.ln1w,
                              a.ln1_mean, a.ln1_rstd, N, C, st);
        if (send_grads(g, o.begin, o.end, g->grads_ready[L - l], why, cap) != 0) return -1;
    }
    return 0;
}

// The embedding's backward (offload = all): wte (which already has the head's part)
// and wpe, then their copy down.
int embed_backward(gpu_model *g, int B, int T, char *why, size_t cap)
{
    const int L = g->s.n_layer;
    ol_encoder_backward(g->grads + g->wte, g->grads + g->wpe, g->dres, g->tokens, B, T,
                        g->s.n_embd, g->compute);
    return send_grads(g, g->wte, L > 0 ? g->lo[0].begin : g->lnfw, g->grads_ready[L + 1],
                      why, cap);
}

// The backward of the last training forward (offload = all).
int backward(gpu_model *g, int B, int T, char *why, size_t cap)
{
    if (head_backward(g, B, T, why, cap) != 0 || blocks_backward(g, B, T, why, cap) != 0 ||
        embed_backward(g, B, T, why, cap) != 0)
        return -1;
    CU(cudaGetLastError());
    CU(cudaEventRecord(g->copies_done, g->copy));
    return 0;
}

} // namespace

namespace {

// Parameters of the layout on the device: all of them, or the blocks'.
size_t device_params(const gpu_model_shape *s, int blocks)
{
    const size_t C = (size_t)s->n_embd;
    return blocks ? (size_t)s->n_layer * (12 * C * C + 13 * C) : gpu_model_param_count(s);
}

size_t device_bytes(const gpu_model_shape *s, int B, int T, int blocks)
{
    const size_t P = device_params(s, blocks);
    return align256(P * sizeof(__half)) + align256(P * sizeof(float)) +
           align256(P * sizeof(__half)) +
           (blocks ? 0 : align256(2 * (size_t)B * T * sizeof(int32_t))) +
           carve_acts(nullptr, s, B, T, blocks, nullptr);
}

gpu_model *create(const gpu_model_shape *s, int B, int T, int blocks, char *why, size_t cap)
{
    if (!s || s->n_layer < 0 || s->n_head < 1 || s->n_embd < 1 || s->vocab_size < 1 ||
        s->block_size < 1 || s->n_embd % s->n_head != 0 || B < 1 || T < 1 ||
        T > s->block_size) {
        say(why, cap, "GPU: bad model shape or batch (n_embd %% n_head, T <= block_size)");
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
    const int L = s->n_layer;
    g->lo = (layer_offsets *)calloc((size_t)L + 1, sizeof *g->lo);
    g->la = (layer_acts *)calloc((size_t)L + 1, sizeof *g->la);
    g->grads_ready = (cudaEvent_t *)calloc((size_t)L + 2, sizeof(cudaEvent_t));
    if (!g->lo || !g->la || !g->grads_ready) {
        say(why, cap, "GPU: out of host memory");
        gpu_model_free(g);
        return nullptr;
    }
    set_layout(g);
    const size_t P = g->n_params, Pd = g->dev_hi - g->dev_lo, ntok = (size_t)B * T;
    const size_t BTC = ntok * (size_t)s->n_embd;
    const size_t act_bytes = carve_acts(nullptr, s, B, T, blocks, nullptr);
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
            cudaSuccess)
            return fail("creating events", e);
    char what[160];
    snprintf(what, sizeof what, "allocating %.2f GiB of parameters and gradients",
             (double)Pd * 8 / 1073741824.0);
    if ((e = cudaMalloc((void **)&g->params, Pd * sizeof(__half))) != cudaSuccess ||
        (e = cudaMalloc((void **)&g->grads, Pd * sizeof(float))) != cudaSuccess ||
        (e = cudaMalloc((void **)&g->grads_half, Pd * sizeof(__half))) != cudaSuccess ||
        (!blocks &&
         (e = cudaMalloc((void **)&g->tokens, 2 * ntok * sizeof(int32_t))) != cudaSuccess))
        return fail(what, e);
    snprintf(what, sizeof what, "allocating %.2f GiB of activations for batch %d x %d",
             (double)act_bytes / 1073741824.0, B, T);
    if ((e = cudaMalloc(&g->acts_mem, act_bytes)) != cudaSuccess) return fail(what, e);
    carve_acts(g, s, B, T, blocks, (char *)g->acts_mem);
    if ((e = cudaMallocHost((void **)&g->param_staging, P * sizeof(uint16_t))) != cudaSuccess ||
        (e = cudaMallocHost((void **)&g->grad_host, P * sizeof(uint16_t))) != cudaSuccess)
        return fail("allocating pinned host buffers", e);
    if (blocks) {
        if ((e = cudaMallocHost((void **)&g->stream_host, BTC * sizeof(float))) != cudaSuccess)
            return fail("allocating pinned host buffers", e);
        // The ranges a blocks model never writes read as zero (gpu_model_blocks_backward).
        memset(g->grad_host, 0, P * sizeof(uint16_t));
    } else if ((e = cudaMallocHost((void **)&g->token_staging,
                                   2 * ntok * sizeof(int32_t))) != cudaSuccess ||
               (e = cudaMallocHost((void **)&g->loss_host, sizeof(float))) != cudaSuccess) {
        return fail("allocating pinned host buffers", e);
    }
    cublasStatus_t bs = cublasCreate(&g->blas);
    if (bs != CUBLAS_STATUS_SUCCESS) {
        say(why, cap, "GPU: creating the cuBLAS handle: %s", blas_name((int)bs));
        g->blas = nullptr;
        gpu_model_free(g);
        return nullptr;
    }
    if ((bs = cublasSetStream(g->blas, g->compute)) != CUBLAS_STATUS_SUCCESS) {
        say(why, cap, "GPU: cublasSetStream: %s", blas_name((int)bs));
        gpu_model_free(g);
        return nullptr;
    }
    return g;
}

} // namespace

extern "C" {

size_t gpu_model_device_bytes(const gpu_model_shape *s, int B, int T)
{
    return device_bytes(s, B, T, 0);
}

size_t gpu_model_blocks_device_bytes(const gpu_model_shape *s, int B, int T)
{
    return device_bytes(s, B, T, 1);
}

gpu_model *gpu_model_create(const gpu_model_shape *s, int B, int T, char *why, size_t cap)
{
    return create(s, B, T, 0, why, cap);
}

gpu_model *gpu_model_create_blocks(const gpu_model_shape *s, int B, int T, char *why,
                                   size_t cap)
{
    return create(s, B, T, 1, why, cap);
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
    cudaFreeHost(g->param_staging);
    cudaFreeHost(g->grad_host);
    cudaFreeHost(g->token_staging);
    cudaFreeHost(g->loss_host);
    cudaFreeHost(g->stream_host);
    cudaEvent_t evs[] = {g->uploaded,     g->tokens_in, g->loss_ready,  g->copies_done,
                         g->compute_mark, g->stream_up, g->stream_conv, g->stream_down};
    for (cudaEvent_t ev : evs)
        if (ev) cudaEventDestroy(ev);
    if (g->grads_ready)
        for (int i = 0; i < g->s.n_layer + 2; i++)
            if (g->grads_ready[i]) cudaEventDestroy(g->grads_ready[i]);
    if (g->compute) cudaStreamDestroy(g->compute);
    if (g->copy) cudaStreamDestroy(g->copy);
    free(g->grads_ready);
    free(g->lo);
    free(g->la);
    free(g);
}

uint16_t *gpu_model_param_staging(gpu_model *g) { return g->param_staging; }

int gpu_model_upload_params(gpu_model *g, char *why, size_t cap)
{
    if (copy_after_compute(g, why, cap) != 0) return -1;
    // The device's range of the layout (a blocks model: the blocks' alone).
    const size_t n = g->dev_hi - g->dev_lo;
    if (n > 0)
        CU(cudaMemcpyAsync(g->params, g->param_staging + g->dev_lo, n * sizeof(__half),
                           cudaMemcpyHostToDevice, g->copy));
    CU(cudaEventRecord(g->uploaded, g->copy));
    CU(cudaStreamWaitEvent(g->compute, g->uploaded, 0));
    return 0;
}

int gpu_model_step(gpu_model *g, const int32_t *inputs, const int32_t *targets, int B,
                   int T, float loss_scale, float *loss, char *why, size_t cap)
{
    if (check_kind(g, 0, why, cap) != 0 || check_batch(g, B, T, why, cap) != 0) return -1;
    if (!targets || !(loss_scale > 0.0f)) {
        say(why, cap, "GPU: a training step needs targets and a loss scale > 0");
        return -1;
    }
    // The last step's gradients must be down before this one's overwrite them.
    CU(cudaStreamWaitEvent(g->compute, g->copies_done, 0));
    if (put_tokens(g, inputs, targets, (size_t)B * T, why, cap) != 0) return -1;
    CU(cudaMemsetAsync(g->grads, 0, g->n_params * sizeof(float), g->compute));
    if (forward(g, B, T, loss_scale / (float)(B * T), why, cap) != 0) return -1;
    if (backward(g, B, T, why, cap) != 0) return -1;
    // The loss is ready long before the backward ends: return with the backward queued.
    CU(cudaEventSynchronize(g->loss_ready));
    *loss = *g->loss_host;
    return 0;
}

int gpu_model_loss(gpu_model *g, const int32_t *inputs, const int32_t *targets, int B,
                   int T, float *loss, char *why, size_t cap)
{
    if (check_kind(g, 0, why, cap) != 0 || check_batch(g, B, T, why, cap) != 0) return -1;
    if (!targets) {
        say(why, cap, "GPU: the loss needs targets");
        return -1;
    }
    if (put_tokens(g, inputs, targets, (size_t)B * T, why, cap) != 0) return -1;
    if (forward(g, B, T, 0.0f, why, cap) != 0) return -1;
    CU(cudaEventSynchronize(g->loss_ready));
    *loss = *g->loss_host;
    return 0;
}

int gpu_model_blocks_forward(gpu_model *g, const float *x0, float *xL, int B, int T,
                             char *why, size_t cap)
{
    if (check_kind(g, 1, why, cap) != 0 || check_batch(g, B, T, why, cap) != 0) return -1;
    const size_t n = (size_t)B * T * g->s.n_embd;
    g->fwd_B = g->fwd_T = 0; // until this forward is queued whole
    if (put_stream(g, x0, g->x0, n, why, cap) != 0 || blocks_forward(g, B, T, why, cap) != 0 ||
        queue_stream(g, blocks_out(g), n, why, cap) != 0 || take_stream(g, xL, n, why, cap) != 0)
        return -1;
    g->fwd_B = B, g->fwd_T = T;
    return 0;
}

int gpu_model_blocks_backward(gpu_model *g, const float *dxL, float *dx0, int B, int T,
                              char *why, size_t cap)
{
    if (check_kind(g, 1, why, cap) != 0) return -1;
    if (B != g->fwd_B || T != g->fwd_T) {
        say(why, cap, "GPU: a blocks backward of %d x %d needs a blocks forward of that batch "
            "first (the last one was %d x %d)", B, T, g->fwd_B, g->fwd_T);
        return -1;
    }
    const size_t n = (size_t)B * T * g->s.n_embd;
    // The last backward's gradients must be down before this one's overwrite them.
    CU(cudaStreamWaitEvent(g->compute, g->copies_done, 0));
    CU(cudaMemsetAsync(g->grads, 0, (g->dev_hi - g->dev_lo) * sizeof(float), g->compute));
    if (put_stream(g, dxL, g->dres, n, why, cap) != 0 || blocks_backward(g, B, T, why, cap) != 0 ||
        queue_stream(g, g->dres, n, why, cap) != 0)
        return -1;
    // dx0 comes down behind the last block's gradients on the copy stream: its event
    // also marks every gradient copy of this backward.
    CU(cudaEventRecord(g->copies_done, g->copy));
    return take_stream(g, dx0, n, why, cap);
}

const uint16_t *gpu_model_grads(gpu_model *g, char *why, size_t cap)
{
    cudaError_t e = cudaStreamSynchronize(g->copy);
    if (e == cudaSuccess) e = cudaStreamSynchronize(g->compute);
    if (e != cudaSuccess) {
        say(why, cap, "GPU: %s (waiting for the gradients)", cudaGetErrorString(e));
        return nullptr;
    }
    return g->grad_host;
}

int gpu_model_sync(gpu_model *g, char *why, size_t cap)
{
    CU(cudaStreamSynchronize(g->compute));
    CU(cudaStreamSynchronize(g->copy));
    return 0;
}

} // extern "C"
