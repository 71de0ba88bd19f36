// gpu_model_passes — the forward and backward of src/model/model.c for gpu_model.cu, layer by
// layer on the FP16 kernels of ops.cuh, with every activation of the batch kept on the
// device, and the small kernels they use. Internal to offload/ (gpu_model_impl.cuh);
// everything here only queues work on the compute stream (and gradient copies on the
// copy stream behind events).
//
// Pieces: the forward is embed_forward, blocks_forward, head_forward and the backward
// head_backward, blocks_backward, embed_backward; offload = all runs all six (forward,
// backward), a stage model (gpu_model_create_stage) the block pieces and those of the
// ends it has, a blocks model only the two block pieces; where an end is missing, the
// residual stream comes up (put_stream) or goes down (queue_stream, take_stream) in
// gpu_model.cu instead.
//
// Residual gradients: every residual add passes its output gradient unchanged to both
// inputs, so one buffer (dres) carries d(residual stream) down through the blocks; each
// LayerNorm's backward adds its input gradient into it.
//
// Tensor parallelism (a shard blocks model): the products and attention run on the
// shard's Cl = C/tp columns and NHl = NH/tp heads; the two row-parallel products' outputs
// and, backward, the input gradients of the two column-parallel ones are summed over the
// tp peers (tp_sum) before anything whole reads them, the row-parallel biases are added
// by tp rank 0 alone, as src/model/model.c does.
//
// Gradient copies: backward finishes the parameter gradients in the reverse order of
// the layout (ln_f, the last block, ..., the first block, then wte and wpe, which get
// gradient from both the head and the embedding). As each of those ranges is final it
// is converted to FP16 on the compute stream, an event marks it, and the copy stream
// brings it down to the pinned host buffer while backward goes on below it
// (send_grads).
#include <math.h>
#include <string.h>

#include "gpu_model_impl.cuh"
#include "ops.cuh"

namespace gpu_model_detail {

namespace {

// dst = FP16(mul x src).
__global__ void float_to_half(__half *dst, const float *src, size_t n, float mul)
{
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i] = __float2half(src[i] * mul);
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

void launch_float_to_half(__half *dst, const float *src, size_t n, cudaStream_t stream)
{
    float_to_half<<<blocks_for(n), 256, 0, stream>>>(dst, src, n, 1.0f);
    ol_launched("float_to_half", stream);
}

void launch_half_to_float(float *dst, const __half *src, size_t n, cudaStream_t stream)
{
    half_to_float<<<blocks_for(n), 256, 0, stream>>>(dst, src, n);
    ol_launched("half_to_float", stream);
}

// The last block's output (x0 with no blocks).
const __half *blocks_out(const gpu_model *g)
{
    return g->s.n_layer > 0 ? g->la[g->s.n_layer - 1].res3 : g->x0;
}

namespace {

// buf [n] (this shard's partial sum) summed over the tp peers in place: the device
// hook (NCCL) on the compute stream, or the host path (gpu_model.h): to FP32 on the
// device, down into the pinned buffer, wait, the host's sum, up, back to FP16. Nothing
// to do for a whole model.
int tp_sum(gpu_model *g, __half *buf, size_t n, char *why, size_t cap)
{
    if (g->tp.size == 1) return 0;
    PROF(GPU_PHASE_TP_COMM);
    if (g->tp.device_sum)
        return g->tp.device_sum(g->tp.device_ctx, buf, n, (void *)g->compute, why, cap);
    launch_half_to_float(g->tp_f32, buf, n, g->compute);
    CU(cudaGetLastError());
    CU(cudaMemcpyAsync(g->tp_host, g->tp_f32, n * sizeof(float), cudaMemcpyDeviceToHost,
                       g->compute));
    CU(cudaStreamSynchronize(g->compute));
    g->tp.host_sum(g->tp.host_ctx, g->tp_host, n);
    // The next tp_sum writes tp_host only after its own wait, so this copy is done.
    CU(cudaMemcpyAsync(g->tp_f32, g->tp_host, n * sizeof(float), cudaMemcpyHostToDevice,
                       g->compute));
    launch_float_to_half(buf, g->tp_f32, n, g->compute);
    CU(cudaGetLastError());
    return 0;
}

} // namespace

namespace {

// The shard's vocabulary: its wte rows [v0, v0 + Vl) (all of them with tp = 1).
int vocab_rows(const gpu_model *g) { return shard_of(g, g->s.vocab_size); }
int vocab_first(const gpu_model *g) { return g->tp.rank * vocab_rows(g); }

// x0 = wte[inputs] + wpe (with the embedding); a shard adds the rows it holds (tp rank
// 0 the positions too) and the shards' parts are summed.
int embed_forward(gpu_model *g, int B, int T, char *why, size_t cap)
{
    const __half *P = g->params;
    const int C = g->s.n_embd;
    PROF(GPU_PHASE_EMBED);
    ol_encoder_forward_shard(g->x0, g->tokens, P + g->wte, g->tp.rank == 0 ? P + g->wpe : nullptr,
                             B, T, C, vocab_first(g), vocab_rows(g), g->compute);
    return tp_sum(g, g->x0, (size_t)B * T * C, why, cap);
}

// A shard's loss rows combined over the tp peers on the host (host_max, host_sum):
// xent_stats [3N] holds this shard's (row maxima, sums of exp, target logits) on entry
// and the whole rows' on return, the sums rescaled to the common maximum first.
int xent_combine(gpu_model *g, int N, char *why, size_t cap)
{
    float *m = g->xent_host, *sums = m + N, *mine = m + 3 * N;
    PROF(GPU_PHASE_TP_COMM);
    CU(cudaMemcpyAsync(m, g->xent_stats, 3 * (size_t)N * sizeof(float), cudaMemcpyDeviceToHost,
                       g->compute));
    CU(cudaStreamSynchronize(g->compute));
    memcpy(mine, m, (size_t)N * sizeof(float));
    g->tp.host_max(g->tp.host_ctx, m, (size_t)N);
    for (int n = 0; n < N; n++) sums[n] *= expf(mine[n] - m[n]);
    g->tp.host_sum(g->tp.host_ctx, sums, 2 * (size_t)N); // the sums and the target logits
    CU(cudaMemcpyAsync(g->xent_stats, m, 3 * (size_t)N * sizeof(float), cudaMemcpyHostToDevice,
                       g->compute));
    return 0;
}

} // namespace

// Every block, from x0 to blocks_out(g), keeping what the backward needs.
int blocks_forward(gpu_model *g, int B, int T, char *why, size_t cap)
{
    const int C = g->s.n_embd, L = g->s.n_layer;
    const int Cl = shard_of(g, C), NHl = shard_of(g, g->s.n_head); // this shard's part
    const int N = B * T;
    const size_t BTC = (size_t)N * C;
    const __half *P = g->params;
    const bool bias = g->tp.rank == 0; // of the row-parallel products (tp rank 0 alone)
    cudaStream_t st = g->compute;
    const __half *x = g->x0;
    // The backward must cut attention as this forward did (att is defined only up to
    // each row block's end), even if gpu_model_set_attention_row_blocks comes between.
    g->fwd_row_blocks = g->att_row_blocks;
    for (int l = 0; l < L; l++) {
        const layer_offsets &o = g->lo[l];
        layer_acts &a = g->la[l];
        PROF(GPU_PHASE_LAYERNORM);
        ol_layernorm_forward(a.ln1, a.ln1_mean, a.ln1_rstd, x, P + o.ln1w, P + o.ln1b, N, C,
                             st);
        PROF(GPU_PHASE_MATMUL);
        BL(ol_matmul_forward(g->blas, g->qkv, a.ln1, P + o.qkvw, P + o.qkvb, N, C, 3 * Cl));
        PROF(GPU_PHASE_ATTENTION);
        BL(ol_attention_forward(g->blas, a.atty, a.qkvr, a.att, g->att_fwd_scratch, g->qkv, B,
                                T, Cl, NHl, g->att_row_blocks));
        PROF(GPU_PHASE_MATMUL);
        BL(ol_matmul_forward(g->blas, g->proj, a.atty, P + o.attprojw,
                             bias ? P + o.attprojb : nullptr, N, Cl, C));
        if (tp_sum(g, g->proj, BTC, why, cap) != 0) return -1;
        PROF(GPU_PHASE_GELU_RESIDUAL);
        ol_residual_forward(a.res2, x, g->proj, BTC, st);
        PROF(GPU_PHASE_LAYERNORM);
        ol_layernorm_forward(a.ln2, a.ln2_mean, a.ln2_rstd, a.res2, P + o.ln2w, P + o.ln2b, N,
                             C, st);
        PROF(GPU_PHASE_MATMUL);
        BL(ol_matmul_forward(g->blas, a.fch, a.ln2, P + o.fcw, P + o.fcb, N, C, 4 * Cl));
        PROF(GPU_PHASE_GELU_RESIDUAL);
        ol_gelu_forward(a.fch_gelu, a.fch, 4 * (size_t)N * Cl, st);
        PROF(GPU_PHASE_MATMUL);
        BL(ol_matmul_forward(g->blas, g->proj, a.fch_gelu, P + o.fcprojw,
                             bias ? P + o.fcprojb : nullptr, N, 4 * Cl, C));
        if (tp_sum(g, g->proj, BTC, why, cap) != 0) return -1;
        PROF(GPU_PHASE_GELU_RESIDUAL);
        ol_residual_forward(a.res3, a.res2, g->proj, BTC, st);
        x = a.res3;
    }
    return 0;
}

namespace {

// ln_f, the tied head and the loss (with the head). dlogits_scale > 0 also leaves
// scale * d(mean loss) / d(logits) in place of the logits, for the backward.
int head_forward(gpu_model *g, int B, int T, float dlogits_scale, char *why, size_t cap)
{
    const int C = g->s.n_embd, Vl = vocab_rows(g), v0 = vocab_first(g), N = B * T;
    const __half *P = g->params;
    cudaStream_t st = g->compute;
    const int32_t *targets = g->tokens + (size_t)g->maxB * g->maxT;
    __half *dlogits = dlogits_scale > 0.0f ? g->logits : nullptr;
    PROF(GPU_PHASE_LAYERNORM);
    ol_layernorm_forward(g->lnf, g->lnf_mean, g->lnf_rstd, blocks_out(g), P + g->lnfw,
                         P + g->lnfb, N, C, st);
    PROF(GPU_PHASE_HEAD);
    BL(ol_matmul_forward(g->blas, g->logits, g->lnf, P + g->wte, nullptr, N, C, Vl));
    PROF(GPU_PHASE_LOSS);
    if (g->tp.size == 1) {
        ol_crossentropy(g->losses, dlogits, g->logits, targets, N, Vl, dlogits_scale, st);
    } else { // vocabulary-parallel: the shards' row stats combined, then the loss
        ol_xent_shard_stats(g->xent_stats, g->logits, targets, N, Vl, v0, st);
        CU(cudaGetLastError());
        if (xent_combine(g, N, why, cap) != 0) return -1;
        PROF(GPU_PHASE_LOSS);
        ol_xent_shard_finish(g->losses, dlogits, g->logits, targets, g->xent_stats, N, Vl, v0,
                             dlogits_scale, st);
    }
    mean_of<<<1, 1024, 0, st>>>(g->loss, g->losses, N);
    ol_launched("mean_of", st);
    CU(cudaGetLastError());
    CU(cudaMemcpyAsync(g->loss_host, g->loss, sizeof(float), cudaMemcpyDeviceToHost, st));
    CU(cudaEventRecord(g->loss_ready, st));
    return 0;
}

} // namespace

// The forward of g's ends and blocks (gpu_model_impl.cuh).
int forward(gpu_model *g, int B, int T, float dlogits_scale, char *why, size_t cap)
{
    if ((g->ends & kEndEmbed) && embed_forward(g, B, T, why, cap) != 0) return -1;
    if (blocks_forward(g, B, T, why, cap) != 0) return -1;
    return g->ends & kEndHead ? head_forward(g, B, T, dlogits_scale, why, cap) : 0;
}

namespace {

// Converts grads[begin, end) (layout coordinates), the backward's part k (see
// gpu_model_impl.cuh), times g->sum_scale to FP16 and queues its copy to the host
// behind grads_ready[k], marked down by grads_down[k]; nothing when this backward keeps
// its gradients on the device (a micro-batch before the last: g->send = 0).
int send_grads(gpu_model *g, size_t begin, size_t end, int k, char *why, size_t cap)
{
    if (!g->send) return 0;
    const size_t n = end - begin, d = begin - g->dev_lo;
    PROF(GPU_PHASE_OTHER);
    float_to_half<<<blocks_for(n), 256, 0, g->compute>>>(g->grads_half + d, g->grads + d, n,
                                                         g->sum_scale);
    ol_launched("float_to_half", g->compute);
    CU(cudaGetLastError());
    CU(cudaEventRecord(g->grads_ready[k], g->compute));
    CU(cudaStreamWaitEvent(g->copy, g->grads_ready[k], 0));
    CU(cudaMemcpyAsync(g->grad_host + begin, g->grads_half + d, n * sizeof(__half),
                       cudaMemcpyDeviceToHost, g->copy));
    CU(cudaEventRecord(g->grads_down[k], g->copy));
    g->part_lo[k] = begin;
    g->part_hi[k] = end;
    return 0;
}

// The head's backward (with the head): leaves d(scaled loss)/d(last block's output)
// in dres and sends ln_f's gradients down.
int head_backward(gpu_model *g, int B, int T, char *why, size_t cap)
{
    const int C = g->s.n_embd, Vl = vocab_rows(g), N = B * T;
    const size_t BTC = (size_t)N * C;
    const __half *P = g->params;
    float *G = g->grads;
    cudaStream_t st = g->compute;
    // logits = lnf @ wte^T (a shard's columns), its gradient already in place of the
    // logits; a shard's d lnf is its columns' part, summed over the peers.
    PROF(GPU_PHASE_HEAD);
    BL(ol_matmul_backward(g->blas, g->dln, G + g->wte, nullptr, g->logits, g->lnf,
                          P + g->wte, N, C, Vl, 0));
    if (tp_sum(g, g->dln, BTC, why, cap) != 0) return -1;
    PROF(GPU_PHASE_OTHER);
    CU(cudaMemsetAsync(g->dres, 0, BTC * sizeof(__half), st));
    PROF(GPU_PHASE_LAYERNORM);
    ol_layernorm_backward(g->dres, G + g->lnfw, G + g->lnfb, g->dln, blocks_out(g),
                          P + g->lnfw, g->lnf_mean, g->lnf_rstd, N, C, st);
    return send_grads(g, g->lnfw, g->n_params, 0, why, cap);
}

} // namespace

// Every block's backward, last first: dres holds d(scaled loss)/d(blocks_out) on entry
// and d(scaled loss)/d(x0) on return; each block's gradients go down as soon as they
// are final.
int blocks_backward(gpu_model *g, int B, int T, char *why, size_t cap)
{
    const int C = g->s.n_embd, L = g->s.n_layer;
    const int Cl = shard_of(g, C), NHl = shard_of(g, g->s.n_head); // this shard's part
    const int N = B * T;
    const __half *P = g->params;
    float *G = g->grads;
    cudaStream_t st = g->compute;
    for (int l = L - 1; l >= 0; l--) {
        const layer_offsets &o = g->lo[l];
        layer_acts &a = g->la[l];
        const __half *x = l > 0 ? g->la[l - 1].res3 : g->x0;
        // MLP: res3 = res2 + c_proj(gelu(c_fc(ln_2(res2)))). The input gradients
        // below overwrite their buffers (accumulate = 0): no zeroing pass. A shard's
        // dres is whole (so is the row-parallel c_proj's bias gradient); the
        // column-parallel c_fc's input gradient is a partial sum.
        PROF(GPU_PHASE_MATMUL);
        BL(ol_matmul_backward(g->blas, g->d4a, G + o.fcprojw, G + o.fcprojb, g->dres,
                              a.fch_gelu, P + o.fcprojw, N, 4 * Cl, C, 0));
        PROF(GPU_PHASE_GELU_RESIDUAL);
        ol_gelu_backward(g->d4b, a.fch, g->d4a, 4 * (size_t)N * Cl, 0, st);
        PROF(GPU_PHASE_MATMUL);
        BL(ol_matmul_backward(g->blas, g->dln, G + o.fcw, G + o.fcb, g->d4b, a.ln2,
                              P + o.fcw, N, C, 4 * Cl, 0));
        if (tp_sum(g, g->dln, (size_t)N * C, why, cap) != 0) return -1;
        PROF(GPU_PHASE_LAYERNORM);
        ol_layernorm_backward(g->dres, G + o.ln2w, G + o.ln2b, g->dln, a.res2, P + o.ln2w,
                              a.ln2_mean, a.ln2_rstd, N, C, st);
        // Attention: res2 = x + c_proj(attn(c_attn(ln_1(x)))).
        PROF(GPU_PHASE_MATMUL);
        BL(ol_matmul_backward(g->blas, g->datty, G + o.attprojw, G + o.attprojb, g->dres,
                              a.atty, P + o.attprojw, N, Cl, C, 0));
        PROF(GPU_PHASE_ATTENTION);
        BL(ol_attention_backward(g->blas, g->dqkv, g->att_bwd_scratch, g->datty, a.qkvr, a.att,
                                 B, T, Cl, NHl, g->fwd_row_blocks, 0));
        PROF(GPU_PHASE_MATMUL);
        BL(ol_matmul_backward(g->blas, g->dln, G + o.qkvw, G + o.qkvb, g->dqkv, a.ln1,
                              P + o.qkvw, N, C, 3 * Cl, 0));
        // The key bias's gradient is exactly 0 (softmax ignores what a row shares): drop
        // the rounding left there, as src/model/model.c does (a shard's keys: its middle Cl).
        CU(cudaMemsetAsync(G + o.qkvb + Cl, 0, (size_t)Cl * sizeof(float), st));
        if (tp_sum(g, g->dln, (size_t)N * C, why, cap) != 0) return -1;
        PROF(GPU_PHASE_LAYERNORM);
        ol_layernorm_backward(g->dres, G + o.ln1w, G + o.ln1b, g->dln, x, P + o.ln1w,
                              a.ln1_mean, a.ln1_rstd, N, C, st);
        if (send_grads(g, o.begin, o.end, L - l, why, cap) != 0) return -1;
    }
    return 0;
}

namespace {

// The embedding's backward (with the embedding): wte (which already has the head's
// part when the head is here too) and wpe, then their copy down.
int embed_backward(gpu_model *g, int B, int T, char *why, size_t cap)
{
    const int L = g->s.n_layer;
    PROF(GPU_PHASE_EMBED);
    ol_encoder_backward_shard(g->grads + g->wte, g->grads + g->wpe, g->dres, g->tokens, B, T,
                              g->s.n_embd, vocab_first(g), vocab_rows(g), g->compute);
    return send_grads(g, g->wte, L > 0 ? g->lo[0].begin : g->lnfw, L + 1, why, cap);
}

} // namespace

// The backward of g's ends and blocks (gpu_model_impl.cuh). A last stage without the
// embedding still sends the head's part of wte, as the last part.
int backward(gpu_model *g, int B, int T, char *why, size_t cap)
{
    if ((g->ends & kEndHead) && head_backward(g, B, T, why, cap) != 0) return -1;
    if (blocks_backward(g, B, T, why, cap) != 0) return -1;
    if (g->ends & kEndEmbed) {
        if (embed_backward(g, B, T, why, cap) != 0) return -1;
    } else if ((g->ends & kEndHead) &&
               send_grads(g, g->wte, g->wpe, g->s.n_layer + 1, why, cap) != 0) {
        return -1;
    }
    CU(cudaGetLastError());
    return 0;
}

} // namespace gpu_model_detail
