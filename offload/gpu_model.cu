// gpu_model — see gpu_model.h. The C API's entry points of a made model: the parameter
// upload, the tokens and the residual stream between host and device, the steps, which
// queue the passes of gpu_model_passes.cu (the forward and backward of src/model/model.c,
// layer by layer on the FP16 kernels of ops.cuh, every activation of the batch kept on
// the device), the gradients' way down, and the profiler. Making and freeing a model (its
// layout, the carving of the activation area) is gpu_model_make.cu's. The struct, the
// device coordinates and the stream conventions: gpu_model_impl.cuh.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_model_impl.cuh"
#include "attention_plan.h"
#include "ops.cuh"

using namespace gpu_model_detail;

int gpu_model_detail::prof_mark(gpu_model *g, int phase, char *why, size_t cap)
{
    profiler *p = g->prof;
    if (p->n == kProfEvents) {
        p->dropped++;
        return 0;
    }
    CU(cudaEventRecord(p->ev[p->n], g->compute));
    p->phase[p->n++] = phase;
    return 0;
}

void gpu_model_detail::free_profiler(gpu_model *g)
{
    if (!g->prof) return;
    for (cudaEvent_t ev : g->prof->ev)
        if (ev) cudaEventDestroy(ev);
    free(g->prof);
    g->prof = nullptr;
}

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

// Whether g was made for what the caller asks (blocks: the blocks or stage entry
// points).
int check_kind(const gpu_model *g, int blocks, char *why, size_t cap)
{
    if (g->blocks == blocks) return 0;
    say(why, cap, blocks ? "GPU: the model was made by gpu_model_create; the blocks entry "
                           "points need one made by gpu_model_create_blocks"
                         : "GPU: the model was made by gpu_model_create_blocks (no "
                           "embedding or head on the device); use the blocks entry points");
    return -1;
}

// The blocks entry points: a model with no end on the device.
int check_ends(const gpu_model *g, char *why, size_t cap)
{
    if (!g->ends) return 0;
    say(why, cap, "GPU: the model holds an end (embedding or head) on the device; use the "
        "stage entry points");
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
// compute stream waits for them. inputs or targets may be NULL (not sent).
int put_tokens(gpu_model *g, const int32_t *inputs, const int32_t *targets, size_t n,
               char *why, size_t cap)
{
    if (copy_after_compute(g, why, cap) != 0) return -1;
    const size_t cap_n = (size_t)g->maxB * g->maxT;
    if (inputs) memcpy(g->token_staging, inputs, n * sizeof(int32_t));
    if (targets) memcpy(g->token_staging + cap_n, targets, n * sizeof(int32_t));
    if (inputs)
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
    launch_float_to_half(dst, g->stream_f32, n, g->compute);
    CU(cudaGetLastError());
    return 0;
}

// The residual stream down (blocks), queued: src [n] FP16 converted into stream_f32 on
// the compute stream, then down into the pinned buffer on the copy stream (behind any
// gradient copies queued there); take_stream waits for it.
int queue_stream(gpu_model *g, const __half *src, size_t n, char *why, size_t cap)
{
    launch_half_to_float(g->stream_f32, src, n, g->compute);
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

} // namespace

extern "C" {

const char *gpu_model_phase_name(int phase)
{
    static const char *const names[GPU_PHASE_COUNT] = {
        "matmul", "attention", "layernorm", "gelu+residual", "embedding", "head", "loss",
        "other", "tp-allreduce"};
    return phase >= 0 && phase < GPU_PHASE_COUNT ? names[phase] : "?";
}

int gpu_model_profile(gpu_model *g, int on, char *why, size_t cap)
{
    if (!on) {
        CU(cudaStreamSynchronize(g->compute)); // no mark may still be pending
        free_profiler(g);
        return 0;
    }
    if (g->prof) return 0;
    g->prof = (profiler *)calloc(1, sizeof *g->prof);
    if (!g->prof) {
        say(why, cap, "GPU: out of host memory for the profiler");
        return -1;
    }
    for (cudaEvent_t &ev : g->prof->ev) {
        const cudaError_t e = cudaEventCreate(&ev);
        if (e != cudaSuccess) {
            ev = nullptr;
            free_profiler(g);
            say(why, cap, "GPU: creating the profiler's events: %s", cudaGetErrorString(e));
            return -1;
        }
    }
    return 0;
}

int gpu_model_profile_read(gpu_model *g, double *ms, char *why, size_t cap)
{
    profiler *p = g->prof;
    if (!p) {
        say(why, cap, "GPU: profiling is off");
        return -1;
    }
    CU(cudaStreamSynchronize(g->compute));
    const int n = p->n, dropped = p->dropped;
    p->n = p->dropped = 0;
    if (dropped) {
        say(why, cap, "GPU: %d profiling marks found the pool of %d full (read after each "
            "step)", dropped, kProfEvents);
        return -1;
    }
    for (int i = 0; i + 1 < n; i++) {
        if (p->phase[i] == kProfIdle) continue;
        float t = 0.0f;
        CU(cudaEventElapsedTime(&t, p->ev[i], p->ev[i + 1]));
        ms[p->phase[i]] += t;
    }
    return 0;
}

int gpu_model_set_attention_row_blocks(gpu_model *g, int nb, char *why, size_t cap)
{
    if (nb < 0 || nb > ATT_MAX_ROW_BLOCKS || (nb > 0 && g->maxT % nb != 0)) {
        say(why, cap, "GPU: attention row blocks %d: not 0 (automatic) or a divisor of the "
            "sequence length %d up to %d", nb, g->maxT, ATT_MAX_ROW_BLOCKS);
        return -1;
    }
    g->att_row_blocks = nb;
    return 0;
}

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
    return gpu_model_step_micro(g, inputs, targets, B, T, loss_scale, 1, 1, 1.0f, loss, why,
                                cap);
}

int gpu_model_step_micro(gpu_model *g, const int32_t *inputs, const int32_t *targets, int B,
                         int T, float loss_scale, int first, int last, float sum_scale,
                         float *loss, char *why, size_t cap)
{
    if (check_kind(g, 0, why, cap) != 0 || check_batch(g, B, T, why, cap) != 0) return -1;
    if (!targets || !(loss_scale > 0.0f) || !(sum_scale > 0.0f)) {
        say(why, cap, "GPU: a training step needs targets, a loss scale > 0 and a sum "
            "scale > 0");
        return -1;
    }
    if (!first && !g->accumulating) {
        say(why, cap, "GPU: a micro-batch that continues a step (first = 0) needs one that "
            "began it and was not the last");
        return -1;
    }
    PROF(GPU_PHASE_OTHER);
    // The last step's gradients must be down before this one's overwrite them.
    CU(cudaStreamWaitEvent(g->compute, g->copies_done, 0));
    if (put_tokens(g, inputs, targets, (size_t)B * T, why, cap) != 0) return -1;
    g->accumulating = 0; // until this micro-batch has run whole
    if (first) CU(cudaMemsetAsync(g->grads, 0, g->n_params * sizeof(float), g->compute));
    g->send = last;
    g->sum_scale = sum_scale;
    if (last) { // the parts this backward sends, none yet (gpu_model_grads_part)
        memset(g->part_lo, 0, ((size_t)g->s.n_layer + 2) * sizeof(size_t));
        memset(g->part_hi, 0, ((size_t)g->s.n_layer + 2) * sizeof(size_t));
    }
    if (forward(g, B, T, loss_scale / (float)(B * T), why, cap) != 0) return -1;
    if (backward(g, B, T, why, cap) != 0) return -1;
    CU(cudaEventRecord(g->copies_done, g->copy));
    PROF(kProfIdle);
    // The loss is ready long before the backward ends: return with the backward queued.
    CU(cudaEventSynchronize(g->loss_ready));
    *loss = *g->loss_host;
    g->accumulating = !last;
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
    PROF(GPU_PHASE_OTHER);
    if (put_tokens(g, inputs, targets, (size_t)B * T, why, cap) != 0) return -1;
    if (forward(g, B, T, 0.0f, why, cap) != 0) return -1;
    PROF(kProfIdle);
    CU(cudaEventSynchronize(g->loss_ready));
    *loss = *g->loss_host;
    return 0;
}

int gpu_model_blocks_forward(gpu_model *g, const float *x0, float *xL, int B, int T,
                             char *why, size_t cap)
{
    if (check_kind(g, 1, why, cap) != 0 || check_ends(g, why, cap) != 0) return -1;
    return gpu_model_stage_forward(g, nullptr, x0, nullptr, 0.0f, xL, nullptr, B, T, why, cap);
}

int gpu_model_blocks_backward(gpu_model *g, const float *dxL, float *dx0, int B, int T,
                              char *why, size_t cap)
{
    if (check_kind(g, 1, why, cap) != 0 || check_ends(g, why, cap) != 0) return -1;
    return gpu_model_stage_backward(g, dxL, dx0, B, T, why, cap);
}

int gpu_model_stage_forward(gpu_model *g, const int32_t *inputs, const float *x0,
                            const int32_t *targets, float loss_scale, float *xL, float *loss,
                            int B, int T, char *why, size_t cap)
{
    if (check_kind(g, 1, why, cap) != 0 || check_batch(g, B, T, why, cap) != 0) return -1;
    const bool embed = g->ends & kEndEmbed, head = g->ends & kEndHead;
    if ((embed ? !inputs : !x0) || (head ? !targets || !loss || !(loss_scale >= 0.0f) : !xL)) {
        say(why, cap, "GPU: a stage's forward needs %s and %s", embed ? "tokens" : "x0",
            head ? "targets, a loss and a loss scale >= 0" : "xL");
        return -1;
    }
    const size_t n = (size_t)B * T * g->s.n_embd;
    g->fwd_B = g->fwd_T = 0; // until this forward is queued whole
    PROF(GPU_PHASE_OTHER);
    if ((embed || head) &&
        put_tokens(g, embed ? inputs : nullptr, head ? targets : nullptr, (size_t)B * T, why,
                   cap) != 0)
        return -1;
    if (!embed && put_stream(g, x0, g->x0, n, why, cap) != 0) return -1;
    if (forward(g, B, T, head ? loss_scale / (float)(B * T) : 0.0f, why, cap) != 0) return -1;
    PROF(GPU_PHASE_OTHER);
    if (!head && queue_stream(g, blocks_out(g), n, why, cap) != 0) return -1;
    PROF(kProfIdle);
    if (head) {
        CU(cudaEventSynchronize(g->loss_ready));
        *loss = *g->loss_host;
    } else if (take_stream(g, xL, n, why, cap) != 0) {
        return -1;
    }
    g->fwd_B = B, g->fwd_T = T;
    g->fwd_grad = !head || loss_scale > 0.0f;
    return 0;
}

int gpu_model_stage_backward(gpu_model *g, const float *dxL, float *dx0, int B, int T,
                             char *why, size_t cap)
{
    if (check_kind(g, 1, why, cap) != 0) return -1;
    const bool embed = g->ends & kEndEmbed, head = g->ends & kEndHead;
    if (B != g->fwd_B || T != g->fwd_T || !g->fwd_grad) {
        say(why, cap, "GPU: a backward of %d x %d needs a training forward of that batch "
            "first (the last one was %d x %d%s)", B, T, g->fwd_B, g->fwd_T,
            g->fwd_grad ? "" : ", an evaluation");
        return -1;
    }
    if ((!head && !dxL) || (!embed && !dx0)) {
        say(why, cap, "GPU: a stage's backward needs %s", !head ? "dxL" : "dx0");
        return -1;
    }
    const size_t n = (size_t)B * T * g->s.n_embd;
    // The last backward's gradients must be down before this one's overwrite them.
    PROF(GPU_PHASE_OTHER);
    CU(cudaStreamWaitEvent(g->compute, g->copies_done, 0));
    CU(cudaMemsetAsync(g->grads, 0, (g->dev_hi - g->dev_lo) * sizeof(float), g->compute));
    g->send = 1;
    g->sum_scale = 1.0f;
    if (!head && put_stream(g, dxL, g->dres, n, why, cap) != 0) return -1;
    if (backward(g, B, T, why, cap) != 0) return -1;
    PROF(GPU_PHASE_OTHER);
    if (!embed && queue_stream(g, g->dres, n, why, cap) != 0) return -1;
    PROF(kProfIdle);
    // Behind every gradient copy of this backward on the copy stream (and dx0's).
    CU(cudaEventRecord(g->copies_done, g->copy));
    return embed ? 0 : take_stream(g, dx0, n, why, cap);
}

const uint16_t *gpu_model_grads(gpu_model *g, char *why, size_t cap)
{
    if (g->accumulating) {
        say(why, cap, "GPU: the gradients are still adding up on the device (the last "
            "micro-batch has not run)");
        return nullptr;
    }
    cudaError_t e = cudaStreamSynchronize(g->copy);
    if (e == cudaSuccess) e = cudaStreamSynchronize(g->compute);
    if (e != cudaSuccess) {
        say(why, cap, "GPU: %s (waiting for the gradients)", cudaGetErrorString(e));
        return nullptr;
    }
    return g->grad_host;
}

int gpu_model_grad_parts(const gpu_model *g) { return g->s.n_layer + 2; }

const uint16_t *gpu_model_grads_part(gpu_model *g, int k, size_t *lo, size_t *hi, char *why,
                                     size_t cap)
{
    if (g->accumulating) {
        say(why, cap, "GPU: the gradients are still adding up on the device (the last "
            "micro-batch has not run)");
        return nullptr;
    }
    if (k < 0 || k >= g->s.n_layer + 2) {
        say(why, cap, "GPU: gradient part %d of %d", k, g->s.n_layer + 2);
        return nullptr;
    }
    *lo = g->part_lo[k];
    *hi = g->part_hi[k];
    if (*lo == *hi) return g->grad_host;
    // A failed copy (or kernel before it) shows here as the event's error.
    const cudaError_t e = cudaEventSynchronize(g->grads_down[k]);
    if (e != cudaSuccess) {
        say(why, cap, "GPU: %s (waiting for gradient part %d)", cudaGetErrorString(e), k);
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
