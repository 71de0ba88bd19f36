/* engine_gpu — the step engine (engine.h) on the rank's GPU: device_step.h does the
 * work (FP16 on the device, the host's FP32 master weights sent up per step, the
 * gradients unscaled back into the caller's buffer); this file adapts it to the seam
 * and owns its loss scale. */
#include <stdlib.h>

#include "device_step.h"
#include "engine.h"
#include "util.h"

static int gpu_grad(step_engine *e, const float *params, float *grads,
                    const int32_t *inputs, const int32_t *targets, int accumulate, int last,
                    float grad_scale, double *loss, int *overflow)
{
    device_step *d = e->impl;
    float l = 0.0f;
    if (device_step_grad(d, params, grads, inputs, targets, e->B, e->T, accumulate, last,
                         grad_scale, &l, overflow) != 0)
        return -1;
    *loss = l;
    /* The whole gradient reaches the host at once: every range is final now. */
    if (last && e->grads_ready) e->grads_ready(e->grads_ready_ctx, 0, e->model->n_params);
    return 0;
}

static int gpu_loss(step_engine *e, const float *params, int first, const int32_t *inputs,
                    const int32_t *targets, double *loss)
{
    float l = 0.0f;
    if (device_step_loss(e->impl, params, first, inputs, targets, e->B, e->T, &l) != 0)
        return -1;
    *loss = l;
    return 0;
}

static void gpu_destroy(step_engine *e)
{
    device_step *d = e->impl;
    if (d) device_step_free(d);
    free(d);
}

static const engine_ops gpu_ops = {gpu_grad, gpu_loss, gpu_destroy};

step_engine *engine_gpu_create(gpt_model *model, int B, int T, int threads, int blocks)
{
    step_engine *e = gt_calloc(sizeof *e, "step engine");
    device_step *d = gt_calloc(sizeof *d, "GPU step");
    if (!e || !d || device_step_init(d, model, B, T, threads, blocks) != 0) {
        free(d);
        free(e);
        return NULL;
    }
    e->ops = &gpu_ops;
    e->name = blocks ? "gpu blocks" : "gpu";
    e->impl = d;
    e->model = model;
    e->B = B;
    e->T = T;
    e->scaler = &d->scaler;
    return e;
}
