/* device_step — see device_step.h. */
#include "device_step.h"

#include <stdlib.h>
#include <string.h>

#include "gpu_model.h"
#include "offload.h"
#include "half.h"
#include "util.h"

enum { CONVERT_CHUNK = 1 << 16 };

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

int device_step_init(device_step *d, const gpt_model *m, int B, int T, int threads)
{
    memset(d, 0, sizeof *d);
    const gpu_model_shape s = {m->shape.vocab_size, m->shape.block_size, m->shape.n_layer,
                               m->shape.n_head, m->shape.n_embd};
    if (m->tp_size != 1 || !m->has_embed || !m->has_head) {
        gt_error("internal: offload: the GPU step takes a whole model (tp 1, one stage)");
        return -1;
    }
    char why[512] = "";
    d->g = gpu_model_create(&s, B, T, why, sizeof why);
    if (!d->g) {
        gt_error("offload: %s (the model and a batch of %d x %d need %.2f GiB on the GPU)",
                 why, B, T, (double)gpu_model_device_bytes(&s, B, T) / 1073741824.0);
        return -1;
    }
    /* The two sides must agree on every tensor's place, not just on the total: two
     * tensors of one size swapped would train the wrong weights without a sign. */
    if (device_step_check_layout(d->g, m->info, m->n_info) != 0) {
        device_step_free(d);
        return -1;
    }
    d->n_params = m->n_params;
    d->all = (device_range){0, 0, m->n_params};
    d->threads = threads;
    loss_scaler_init(&d->scaler, LOSS_SCALE_INIT, LOSS_SCALE_GROWTH_INTERVAL);
    return 0;
}

void device_step_free(device_step *d)
{
    if (!d) return;
    gpu_model_free(d->g);
    d->g = NULL;
}

int device_step_upload(gpu_model *g, const float *params, const device_range *r, int nr,
                       int threads)
{
    for (int i = 0; i < nr; i++) {
        uint16_t *staging = gpu_model_param_staging(g) + r[i].dev;
        const float *src = params + r[i].host;
        const size_t n = r[i].n, chunks = (n + CONVERT_CHUNK - 1) / CONVERT_CHUNK;
#pragma omp parallel for num_threads(threads) schedule(static)
        for (size_t k = 0; k < chunks; k++) {
            const size_t lo = k * CONVERT_CHUNK, left = n - lo;
            half_from_float(staging + lo, src + lo, left < CONVERT_CHUNK ? left : CONVERT_CHUNK);
        }
    }
    char why[512] = "";
    if (gpu_model_upload_params(g, why, sizeof why) != 0) {
        gt_error("offload: sending the parameters: %s", why);
        return -1;
    }
    return 0;
}

/* One micro-batch: the micro-batches' gradients add up on the GPU; only the last
 * brings the sum down, multiplied by grad_scale on the way to FP16 (1/accum:
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

int device_step_grad(device_step *d, const float *params, float *grads,
                     const int32_t *inputs, const int32_t *targets, int B, int T,
                     int accumulate, int last, float grad_scale, float *loss,
                     int *overflow)
{
    *overflow = 0;
    /* The parameters do not change between the micro-batches of one step. */
    if (!accumulate && device_step_upload(d->g, params, &d->all, 1, d->threads) != 0) return -1;
    return all_grad(d, grads, inputs, targets, B, T, !accumulate, last, grad_scale, loss,
                    overflow);
}

int device_step_loss(device_step *d, const float *params, int upload_params,
                     const int32_t *inputs, const int32_t *targets, int B, int T,
                     float *loss)
{
    char why[512] = "";
    if (upload_params && device_step_upload(d->g, params, &d->all, 1, d->threads) != 0) return -1;
    if (gpu_model_loss(d->g, inputs, targets, B, T, loss, why, sizeof why) != 0) {
        gt_error("offload: evaluation: %s", why);
        return -1;
    }
    return 0;
}
