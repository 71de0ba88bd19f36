/* device_step — see device_step.h. */
#include "device_step.h"

#include <stdlib.h>
#include <string.h>

#include "gpu_model.h"
#include "offload.h"
#include "half.h"
#include "util.h"

enum { CONVERT_CHUNK = 1 << 16 };

/* offload = blocks: the host buffers of the embedding and the head for B x T. */
static int alloc_host_part(device_step *d, const gpt_model *m, int B, int T)
{
    const size_t C = (size_t)m->shape.n_embd, V = (size_t)m->shape.vocab_size;
    const size_t N = (size_t)B * (size_t)T;
    d->shape = m->shape;
    d->be = m->be;
    d->maxB = B;
    d->maxT = T;
    d->wte = m->info[m->i_wte].offset;
    d->wpe = m->info[m->i_wpe].offset;
    d->lnf = m->info[m->i_lnf].offset;
    float **bufs[] = {&d->x,   &d->lnf_out, &d->lnf_mean, &d->lnf_rstd, &d->logits,
                      &d->losses, &d->dln, &d->dx,       &d->grad_embed, &d->grad_lnf};
    const size_t sizes[] = {N * C, N * C, N, N, N * V, N, N * C, N * C, d->dev_lo, 2 * C};
    size_t total = 0;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        total += (sizes[i] + 15) & ~(size_t)15; /* 64-byte aligned each */
    d->host_mem = gt_malloc(total * sizeof(float), "offload = blocks: host activations of "
                                                   "the embedding and the head");
    if (!d->host_mem) return -1;
    float *p = d->host_mem;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        *bufs[i] = p;
        p += (sizes[i] + 15) & ~(size_t)15;
    }
    return 0;
}

int device_step_check_layout(gpu_model *g, const gpt_param_info *info, int n)
{
    gpu_model_tensor *t = gt_malloc((size_t)(n > 0 ? n : 1) * sizeof *t, "GPU layout");
    if (!t) return -1;
    for (int i = 0; i < n; i++) {
        t[i].name = info[i].name;
        t[i].ndim = info[i].ndim;
        t[i].dims[0] = info[i].shape[0];
        t[i].dims[1] = info[i].shape[1];
        t[i].offset = info[i].offset;
    }
    char why[512] = "";
    const int rc = gpu_model_check_layout(g, t, n, why, sizeof why);
    free(t);
    if (rc != 0) gt_error("internal: offload: %s", why);
    return rc;
}

int device_step_init(device_step *d, const gpt_model *m, int B, int T, int threads,
                     int blocks)
{
    memset(d, 0, sizeof *d);
    const gpu_model_shape s = {m->shape.vocab_size, m->shape.block_size, m->shape.n_layer,
                               m->shape.n_head, m->shape.n_embd};
    if (m->tp_size != 1 || !m->has_embed || !m->has_head) {
        gt_error("internal: offload: the GPU step takes a whole model (tp 1, one stage)");
        return -1;
    }
    char why[512] = "";
    d->g = blocks ? gpu_model_create_blocks(&s, B, T, why, sizeof why)
                  : gpu_model_create(&s, B, T, why, sizeof why);
    if (!d->g) {
        gt_error("offload: %s (the %s and a batch of %d x %d need %.2f GiB on the GPU)", why,
                 blocks ? "blocks" : "model", B, T,
                 (double)(blocks ? gpu_model_blocks_device_bytes(&s, B, T)
                                 : gpu_model_device_bytes(&s, B, T)) / 1073741824.0);
        return -1;
    }
    /* The two sides must agree on every tensor's place, not just on the total: two
     * tensors of one size swapped would train the wrong weights without a sign. */
    if (device_step_check_layout(d->g, m->info, m->n_info) != 0) {
        device_step_free(d);
        return -1;
    }
    d->n_params = m->n_params;
    d->threads = threads;
    d->blocks = blocks;
    /* The GPU's range: everything, or from the first block to ln_f. */
    d->dev_lo = blocks ? m->info[m->i_wpe].offset + m->info[m->i_wpe].numel : 0;
    d->dev_hi = blocks ? m->info[m->i_lnf].offset : m->n_params;
    if (blocks && alloc_host_part(d, m, B, T) != 0) {
        device_step_free(d);
        return -1;
    }
    loss_scaler_init(&d->scaler, LOSS_SCALE_INIT, LOSS_SCALE_GROWTH_INTERVAL);
    return 0;
}

void device_step_free(device_step *d)
{
    if (!d) return;
    gpu_model_free(d->g);
    d->g = NULL;
    free(d->host_mem);
    d->host_mem = NULL;
}

/* The GPU's range of params to FP16 in the staging buffer, and up. */
static int upload(device_step *d, const float *params)
{
    uint16_t *staging = gpu_model_param_staging(d->g);
    const size_t lo = d->dev_lo, n = d->dev_hi - d->dev_lo;
    const size_t chunks = (n + CONVERT_CHUNK - 1) / CONVERT_CHUNK;
#pragma omp parallel for num_threads(d->threads) schedule(static)
    for (size_t k = 0; k < chunks; k++) {
        const size_t at = lo + k * CONVERT_CHUNK, left = n - k * CONVERT_CHUNK;
        half_from_float(staging + at, params + at, left < CONVERT_CHUNK ? left : CONVERT_CHUNK);
    }
    char why[512] = "";
    if (gpu_model_upload_params(d->g, why, sizeof why) != 0) {
        gt_error("offload: sending the parameters: %s", why);
        return -1;
    }
    return 0;
}

/* offload = blocks, the forward: the embedding here, the blocks on the GPU, ln_f, the
 * head and the loss here. dlogits_scale > 0 leaves dlogits_scale x d(mean loss) /
 * d(logits) in d->logits for host_backward. */
static int host_forward(device_step *d, const float *params, const int32_t *inputs,
                        const int32_t *targets, int B, int T, float dlogits_scale,
                        float *loss)
{
    const gt_backend *be = d->be;
    const int C = d->shape.n_embd, V = d->shape.vocab_size;
    const size_t N = (size_t)B * (size_t)T;
    if (B > d->maxB || T > d->maxT) {
        gt_error("internal: offload = blocks: batch %d x %d beyond the %d x %d of init", B, T,
                 d->maxB, d->maxT);
        return -1;
    }
    be->encoder_forward(d->x, inputs, params + d->wte, params + d->wpe, B, T, C);
    char why[512] = "";
    if (gpu_model_blocks_forward(d->g, d->x, d->x, B, T, why, sizeof why) != 0) {
        gt_error("offload: the blocks' forward: %s", why);
        return -1;
    }
    be->layernorm_forward(d->lnf_out, d->lnf_mean, d->lnf_rstd, d->x, params + d->lnf,
                          params + d->lnf + C, N, C);
    be->matmul_forward(d->logits, d->lnf_out, params + d->wte, NULL, N, C, V);
    if (dlogits_scale > 0.0f)
        be->crossentropy_forward_backward(d->losses, d->logits, targets, N, V, dlogits_scale);
    else
        be->crossentropy_forward(d->losses, d->logits, targets, N, V);
    double sum = 0.0; /* fixed order, as model.c */
    for (size_t i = 0; i < N; i++) sum += d->losses[i];
    *loss = (float)(sum / (double)N);
    return 0;
}

/* offload = blocks, the backward of host_forward: the head here (wte's and ln_f's
 * gradients), the blocks on the GPU, the embedding here (wte's and wpe's), all scaled
 * as d->logits is. */
static int host_backward(device_step *d, const float *params, const int32_t *inputs, int B,
                         int T)
{
    const gt_backend *be = d->be;
    const int C = d->shape.n_embd, V = d->shape.vocab_size;
    const size_t N = (size_t)B * (size_t)T, NC = N * (size_t)C;
    memset(d->grad_embed, 0, d->dev_lo * sizeof(float));
    memset(d->grad_lnf, 0, 2 * (size_t)C * sizeof(float));
    memset(d->dln, 0, NC * sizeof(float));
    be->matmul_backward(d->dln, d->grad_embed + d->wte, NULL, d->logits, d->lnf_out,
                        params + d->wte, N, C, V);
    memset(d->dx, 0, NC * sizeof(float));
    be->layernorm_backward(d->dx, d->grad_lnf, d->grad_lnf + C, d->dln, d->x, params + d->lnf,
                           d->lnf_mean, d->lnf_rstd, N, C);
    char why[512] = "";
    if (gpu_model_blocks_backward(d->g, d->dx, d->dx, B, T, why, sizeof why) != 0) {
        gt_error("offload: the blocks' backward: %s", why);
        return -1;
    }
    be->encoder_backward(d->grad_embed + d->wte, d->grad_embed + d->wpe, d->dx, inputs, B, T,
                         C);
    return 0;
}

/* offload = all, one micro-batch: the micro-batches' gradients add up on the GPU; only
 * the last brings the sum down, multiplied by grad_scale on the way to FP16 (1/accum:
 * scale x the mean, as large as one batch's, while each micro-batch's backward keeps
 * the whole loss scale), part by part as the backward finishes them, each part
 * unscaled into grads (overwriting) while the GPU computes the parts below it; the
 * parts must tile the layout from its end down. */
static int all_grad(device_step *d, float *grads, const int32_t *inputs,
                    const int32_t *targets, int B, int T, int first, int last,
                    float grad_scale, float *loss, int *overflow)
{
    char why[512] = "";
    const float scale = d->scaler.scale;
    if (gpu_model_step_micro(d->g, inputs, targets, B, T, scale, first, last, grad_scale,
                             loss, why, sizeof why) != 0) {
        gt_error("offload: training step: %s", why);
        return -1;
    }
    if (!last) return 0;
    size_t next_hi = d->n_params; /* where the next part must end */
    for (int k = 0; k < gpu_model_grad_parts(d->g); k++) {
        size_t lo = 0, hi = 0;
        const uint16_t *g16 = gpu_model_grads_part(d->g, k, &lo, &hi, why, sizeof why);
        if (!g16) {
            gt_error("offload: %s", why);
            return -1;
        }
        if (hi != next_hi || lo > hi) break;
        *overflow |= unscale_half_grads(grads + lo, g16 + lo, hi - lo, 1.0f / scale, 0,
                                        d->threads);
        next_hi = lo;
    }
    if (next_hi != 0) {
        gt_error("internal: the GPU's gradient parts do not tile the layout (a gap or "
                 "overlap below parameter %zu)", next_hi);
        return -1;
    }
    return 0;
}

/* offload = blocks, one micro-batch: the host's part and the GPU's blocks, each
 * micro-batch's gradients brought down and added into grads here. */
static int blocks_grad(device_step *d, const float *params, float *grads,
                       const int32_t *inputs, const int32_t *targets, int B, int T,
                       int accumulate, float grad_scale, float *loss, int *overflow)
{
    char why[512] = "";
    const float scale = d->scaler.scale;
    if (host_forward(d, params, inputs, targets, B, T, scale / (float)((size_t)B * T), loss) !=
            0 ||
        host_backward(d, params, inputs, B, T) != 0)
        return -1;
    const uint16_t *g16 = gpu_model_grads(d->g, why, sizeof why);
    if (!g16) {
        gt_error("offload: %s", why);
        return -1;
    }
    const float inv = grad_scale / scale;
    const size_t lo = d->dev_lo, hi = d->dev_hi;
    *overflow = unscale_half_grads(grads + lo, g16 + lo, hi - lo, inv, accumulate, d->threads);
    /* The host's FP32 part, checked the same way. */
    *overflow |= unscale_float_grads(grads, d->grad_embed, lo, inv, accumulate, d->threads);
    *overflow |= unscale_float_grads(grads + d->lnf, d->grad_lnf, 2 * (size_t)d->shape.n_embd,
                                     inv, accumulate, d->threads);
    return 0;
}

int device_step_grad(device_step *d, const float *params, float *grads,
                     const int32_t *inputs, const int32_t *targets, int B, int T,
                     int accumulate, int last, float grad_scale, float *loss,
                     int *overflow)
{
    *overflow = 0;
    /* The parameters do not change between the micro-batches of one step. */
    if (!accumulate && upload(d, params) != 0) return -1;
    return d->blocks ? blocks_grad(d, params, grads, inputs, targets, B, T, accumulate,
                                   grad_scale, loss, overflow)
                     : all_grad(d, grads, inputs, targets, B, T, !accumulate, last,
                                grad_scale, loss, overflow);
}

int device_step_loss(device_step *d, const float *params, int upload_params,
                     const int32_t *inputs, const int32_t *targets, int B, int T,
                     float *loss)
{
    char why[512] = "";
    if (upload_params && upload(d, params) != 0) return -1;
    if (d->blocks) return host_forward(d, params, inputs, targets, B, T, 0.0f, loss);
    if (gpu_model_loss(d->g, inputs, targets, B, T, loss, why, sizeof why) != 0) {
        gt_error("offload: evaluation: %s", why);
        return -1;
    }
    return 0;
}
