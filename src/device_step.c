/* device_step — see device_step.h. */
#include "device_step.h"

#include <string.h>

#include "../offload/gpu_model.h"
#include "../offload/offload.h"
#include "half.h"
#include "util.h"

enum { CONVERT_CHUNK = 1 << 16 };

int device_step_init(device_step *d, const gpt_model *m, int B, int T, int threads)
{
    memset(d, 0, sizeof *d);
    const gpu_model_shape s = {m->shape.vocab_size, m->shape.block_size, m->shape.n_layer,
                               m->shape.n_head, m->shape.n_embd};
    char why[512] = "";
    d->g = gpu_model_create(&s, B, T, why, sizeof why);
    if (!d->g) {
        gt_error("offload: %s (the model and a batch of %d x %d need %.2f GiB on the GPU)",
                 why, B, T, (double)gpu_model_device_bytes(&s, B, T) / 1073741824.0);
        return -1;
    }
    /* The two sides must agree on the flat layout, or every tensor would be wrong. */
    if (gpu_model_param_count(&s) != m->n_params) {
        gt_error("internal: the GPU model has %zu parameters, the host model %zu",
                 gpu_model_param_count(&s), m->n_params);
        device_step_free(d);
        return -1;
    }
    d->n_params = m->n_params;
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

static int upload(device_step *d, const float *params)
{
    uint16_t *staging = gpu_model_param_staging(d->g);
    const size_t n = d->n_params, chunks = (n + CONVERT_CHUNK - 1) / CONVERT_CHUNK;
#pragma omp parallel for num_threads(d->threads) schedule(static)
    for (size_t k = 0; k < chunks; k++) {
        const size_t lo = k * CONVERT_CHUNK;
        half_from_float(staging + lo, params + lo, n - lo < CONVERT_CHUNK ? n - lo : CONVERT_CHUNK);
    }
    char why[512] = "";
    if (gpu_model_upload_params(d->g, why, sizeof why) != 0) {
        gt_error("offload: sending the parameters: %s", why);
        return -1;
    }
    return 0;
}

int device_step_grad(device_step *d, const float *params, float *grads,
                     const int32_t *inputs, const int32_t *targets, int B, int T,
                     int accumulate, float grad_scale, float *loss, int *overflow)
{
    char why[512] = "";
    /* The parameters do not change between the micro-batches of one step. */
    if (!accumulate && upload(d, params) != 0) return -1;
    if (gpu_model_step(d->g, inputs, targets, B, T, d->scaler.scale, loss, why,
                       sizeof why) != 0) {
        gt_error("offload: training step: %s", why);
        return -1;
    }
    const uint16_t *g16 = gpu_model_grads(d->g, why, sizeof why);
    if (!g16) {
        gt_error("offload: %s", why);
        return -1;
    }
    *overflow = unscale_half_grads(grads, g16, d->n_params, grad_scale / d->scaler.scale,
                                   accumulate, d->threads);
    return 0;
}

int device_step_loss(device_step *d, const float *params, int upload_params,
                     const int32_t *inputs, const int32_t *targets, int B, int T,
                     float *loss)
{
    char why[512] = "";
    if (upload_params && upload(d, params) != 0) return -1;
    if (gpu_model_loss(d->g, inputs, targets, B, T, loss, why, sizeof why) != 0) {
        gt_error("offload: evaluation: %s", why);
        return -1;
    }
    return 0;
}
