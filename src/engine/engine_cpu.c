/* engine_cpu — the step engine (engine.h) on the CPU: the model's own passes
 * (model.c through its backend), or with pp > 1 the 1F1B schedule of pipeline.c over
 * them. The parameters and gradients of a call are bound to the model for that call
 * only (gpt_bind), so the model's own buffers never change hands. */
#include <stdlib.h>

#include "engine.h"
#include "grid.h"
#include "pipeline.h"
#include "util.h"

typedef struct cpu_engine {
    pipeline *pipe; /* pp > 1; NULL: the model's whole batch at once */
} cpu_engine;

static int cpu_grad(step_engine *e, const float *params, float *grads,
                    const int32_t *inputs, const int32_t *targets, int accumulate, int last,
                    float grad_scale, double *loss, int *overflow)
{
    cpu_engine *c = e->impl;
    gpt_model *m = e->model;
    gpt_bind(m, params, grads);
    if (!accumulate) gpt_zero_grad(m);
    /* Only the last micro-batch's backward makes gradients final. */
    m->on_grads_ready = last ? e->grads_ready : NULL;
    m->grads_ready_ctx = e->grads_ready_ctx;
    if (c->pipe) {
        *loss = pipeline_train(c->pipe, inputs, targets, grad_scale);
    } else {
        m->loss_grad_scale = grad_scale;
        *loss = gpt_forward(m, inputs, targets, e->B, e->T, 1);
        gpt_backward(m);
    }
    m->on_grads_ready = NULL;
    gpt_bind(m, NULL, NULL);
    *overflow = 0; /* FP32 gradients: nothing to skip */
    return 0;
}

static int cpu_loss(step_engine *e, const float *params, int first, const int32_t *inputs,
                    const int32_t *targets, double *loss)
{
    (void)first; /* the CPU reads params directly: nothing to send anywhere */
    cpu_engine *c = e->impl;
    gpt_bind(e->model, params, NULL);
    *loss = c->pipe ? pipeline_eval(c->pipe, inputs, targets)
                    : gpt_forward(e->model, inputs, targets, e->B, e->T, 0);
    gpt_bind(e->model, NULL, NULL);
    return 0;
}

static void cpu_destroy(step_engine *e)
{
    cpu_engine *c = e->impl;
    if (c) pipeline_free(c->pipe);
    free(c);
}

static const engine_ops cpu_ops = {
    .grad = cpu_grad, .loss = cpu_loss, .destroy = cpu_destroy};

step_engine *engine_cpu_create(gpt_model *model, int B, int T, int micro)
{
    step_engine *e = gt_calloc(sizeof *e, "step engine");
    cpu_engine *c = gt_calloc(sizeof *c, "step engine");
    if (!e || !c) goto fail;
    e->ops = &cpu_ops;
    e->impl = c;
    e->model = model;
    e->B = B;
    e->T = T;
    /* Activations: the pipeline's slots for its micro-batches, or one for the batch. */
    if (grid_pp_size() > 1) {
        e->name = "cpu pipeline";
        if (!(c->pipe = pipeline_create(model, micro, B, T, NULL))) goto fail;
    } else {
        e->name = "cpu";
        if (gpt_alloc_acts(model, B, T) != 0) goto fail;
    }
    return e;
fail:
    free(e);
    if (c) pipeline_free(c->pipe);
    free(c);
    return NULL;
}
