/* engine_gpu — the step engine (engine.h) on the rank's GPU, FP16 with a dynamic loss
 * scale, the host's FP32 master weights sent up per step and the gradients unscaled
 * back into the caller's buffer:
 *  - offload = all on a whole model (tp = pp = 1): device_step.h, every layer on the GPU;
 *  - everything else, offload = blocks at tp = pp = 1 included: the 1F1B schedule of
 *    pipeline.h (of one stage when pp = 1) over the part's passes of gpu_stage.h (every
 *    layer of a stage, or of a tp > 1 shard, on the GPU); one path for every grid.
 * This file adapts them to the seam. */
#include <stdlib.h>
#include <string.h>

#include "device_step.h"
#include "engine.h"
#include "gpu_stage.h"
#include "grid.h"
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

static const engine_ops gpu_ops = {
    .grad = gpu_grad, .loss = gpu_loss, .destroy = gpu_destroy};

step_engine *engine_gpu_create(gpt_model *model, int B, int T, int threads)
{
    step_engine *e = gt_calloc(sizeof *e, "step engine");
    device_step *d = gt_calloc(sizeof *d, "GPU step");
    if (!e || !d || device_step_init(d, model, B, T, threads) != 0) {
        free(d);
        free(e);
        return NULL;
    }
    e->ops = &gpu_ops;
    e->name = "gpu";
    e->impl = d;
    e->model = model;
    e->B = B;
    e->T = T;
    e->scaler = &d->scaler;
    return e;
}

/* ---- a model part through the pipeline's schedule: a pipeline stage (pp > 1), a
 * tensor-parallel shard (tp > 1), or a whole model with offload = blocks (pp = 1: the
 * schedule runs one stage) ---- */

typedef struct gpu_pipe {
    gpu_stage *stage;
    pipeline *pipe;
    loss_scaler scaler;
} gpu_pipe;

static int pipe_grad(step_engine *e, const float *params, float *grads,
                     const int32_t *inputs, const int32_t *targets, int accumulate, int last,
                     float grad_scale, double *loss, int *overflow)
{
    gpu_pipe *p = e->impl;
    /* The parameters do not change between the micro-steps of one step. */
    if (gpu_stage_begin(p->stage, params, grads, !accumulate, p->scaler.scale, grad_scale,
                        accumulate) != 0)
        return -1;
    if (!accumulate) memset(grads, 0, e->model->n_params * sizeof(float));
    *loss = pipeline_train(p->pipe, inputs, targets, grad_scale);
    const int rc = gpu_stage_end(p->stage); /* tp > 1: the shards' whole tensors agree */
    if (rc < 0) return -1;
    *overflow = rc;
    if (last && e->grads_ready) e->grads_ready(e->grads_ready_ctx, 0, e->model->n_params);
    return 0;
}

static int pipe_loss(step_engine *e, const float *params, int first, const int32_t *inputs,
                     const int32_t *targets, double *loss)
{
    gpu_pipe *p = e->impl;
    if (gpu_stage_begin(p->stage, params, NULL, first, p->scaler.scale, 1.0f, 1) != 0)
        return -1;
    *loss = pipeline_eval(p->pipe, inputs, targets);
    return gpu_stage_end(p->stage) < 0 ? -1 : 0;
}

static void pipe_destroy(step_engine *e)
{
    gpu_pipe *p = e->impl;
    if (!p) return;
    pipeline_free(p->pipe);
    gpu_stage_free(p->stage);
    free(p);
}

static const engine_ops gpu_pipe_ops = {
    .grad = pipe_grad, .loss = pipe_loss, .destroy = pipe_destroy};

step_engine *engine_gpu_pipeline_create(gpt_model *model, int B, int T, int micro,
                                        int threads, int nccl)
{
    step_engine *e = gt_calloc(sizeof *e, "step engine");
    gpu_pipe *p = gt_calloc(sizeof *p, "GPU pipeline");
    if (!e || !p || micro < 1 || B % micro != 0) {
        if (e && p) gt_error("micro_batches = %d must divide batch_size = %d", micro, B);
        free(p);
        free(e);
        return NULL;
    }
    e->ops = &gpu_pipe_ops;
    e->name = grid_pp_size() > 1 ? "gpu pipeline" : model->tp_size > 1 ? "gpu shard"
                                                                        : "gpu blocks";
    e->impl = p;
    e->model = model;
    e->B = B;
    e->T = T;
    e->scaler = &p->scaler;
    loss_scaler_init(&p->scaler, LOSS_SCALE_INIT, LOSS_SCALE_GROWTH_INTERVAL);
    const int slots = pipeline_slots(grid_pp_rank(), grid_pp_size(), micro);
    p->stage = gpu_stage_create(model, B / micro, T, slots, micro, threads, nccl);
    if (p->stage) {
        const stage_passes passes = gpu_stage_passes(p->stage);
        p->pipe = pipeline_create(model, micro, B, T, &passes);
    }
    if (!p->pipe) {
        engine_destroy(e);
        return NULL;
    }
    return e;
}
