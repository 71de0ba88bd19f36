/* pipeline — see pipeline.h. */
#include "pipeline.h"

#include <stdlib.h>
#include <string.h>

#include "grid.h"
#include "util.h"

struct pipeline {
    gpt_model *m;
    stage_passes passes; /* the model's CPU passes, or the caller's */
    int stage, stages, micro, Bm, T, slots;
    size_t n;          /* floats of one micro-batch's boundary activations [Bm,T,C] */
    float *recv;       /* [n] what the neighbour sent */
    float *send;       /* [2 * micro * n]: outputs, then input gradients, per micro-batch */
    void (*ready)(void *ctx, size_t offset, size_t count); /* the trainer's callback */
};

/* Tags: micro-batch j's activations 2j, their gradient 2j+1. */
static int tag_fwd(int j) { return 2 * j; }
static int tag_bwd(int j) { return 2 * j + 1; }

int pipeline_slots(int stage, int stages, int micro)
{
    /* 1F1B keeps at most stages - stage micro-batches in flight on a stage. */
    return stages - stage < micro ? stages - stage : micro;
}

/* The model's own CPU passes (gpt_stage_forward / backward on its activation slots). */
static const float *cpu_forward(void *ctx, int slot, const int32_t *inputs, const float *x_in,
                                const int32_t *targets, int want_grad, float *loss)
{
    pipeline *p = ctx;
    gpt_use_act_slot(p->m, slot);
    return gpt_stage_forward(p->m, inputs, x_in, targets, p->Bm, p->T, want_grad, loss);
}

static const float *cpu_backward(void *ctx, int slot, const float *dout)
{
    pipeline *p = ctx;
    gpt_use_act_slot(p->m, slot);
    return gpt_stage_backward(p->m, dout);
}

pipeline *pipeline_create(gpt_model *m, int micro, int B, int T, const stage_passes *passes)
{
    if (micro < 1 || B % micro != 0) {
        gt_error("micro_batches = %d must divide batch_size = %d", micro, B);
        return NULL;
    }
    pipeline *p = gt_calloc(sizeof *p, "pipeline");
    if (!p) return NULL;
    p->m = m;
    p->stage = grid_pp_rank();
    p->stages = grid_pp_size();
    p->micro = micro;
    p->Bm = B / micro;
    p->T = T;
    p->slots = pipeline_slots(p->stage, p->stages, micro);
    const stage_passes cpu = {.forward = cpu_forward, .backward = cpu_backward, .ctx = p};
    p->passes = passes ? *passes : cpu;
    p->n = (size_t)p->Bm * (size_t)T * (size_t)m->shape.n_embd;
    p->recv = gt_malloc(p->n * sizeof(float), "pipeline receive buffer");
    p->send = gt_malloc(2 * (size_t)micro * p->n * sizeof(float), "pipeline send buffers");
    if (!p->recv || !p->send ||
        (!passes && gpt_alloc_act_slots(m, p->Bm, T, p->slots) != 0)) {
        pipeline_free(p);
        return NULL;
    }
    return p;
}

void pipeline_free(pipeline *p)
{
    if (!p) return;
    grid_pp_wait_sends(); /* nothing may still read the buffers */
    free(p->recv);
    free(p->send);
    free(p);
}

/* Forward of micro-batch j on this stage: from the previous stage's activations (or
 * the tokens), on to the next stage (or the loss). */
static float forward(pipeline *p, int j, const int32_t *in, const int32_t *tg, int train)
{
    const size_t off = (size_t)j * (size_t)p->Bm * (size_t)p->T;
    const int first = p->stage == 0, last = p->stage == p->stages - 1;
    if (!first) grid_pp_recv(p->recv, p->n, p->stage - 1, tag_fwd(j));
    float loss = 0.0f;
    const float *out = p->passes.forward(p->passes.ctx, train ? j % p->slots : 0,
                                         first ? in + off : NULL, first ? NULL : p->recv,
                                         last ? tg + off : NULL, train, &loss);
    if (!last) {
        float *buf = p->send + (size_t)j * p->n;
        memcpy(buf, out, p->n * sizeof(float));
        grid_pp_send(buf, p->n, p->stage + 1, tag_fwd(j));
    }
    return loss;
}

/* Backward of micro-batch j: from the next stage's gradient (or the loss) back to the
 * previous stage. */
static void backward(pipeline *p, int j)
{
    gpt_model *m = p->m;
    const int first = p->stage == 0, last = p->stage == p->stages - 1;
    if (!last) grid_pp_recv(p->recv, p->n, p->stage + 1, tag_bwd(j));
    m->on_grads_ready = j == p->micro - 1 ? p->ready : NULL;
    const float *din = p->passes.backward(p->passes.ctx, j % p->slots, last ? NULL : p->recv);
    m->on_grads_ready = p->ready;
    if (!first) {
        float *buf = p->send + ((size_t)p->micro + (size_t)j) * p->n;
        memcpy(buf, din, p->n * sizeof(float));
        grid_pp_send(buf, p->n, p->stage - 1, tag_bwd(j));
    }
}

double pipeline_train(pipeline *p, const int32_t *inputs, const int32_t *targets,
                      float grad_scale)
{
    gpt_model *m = p->m;
    p->ready = m->on_grads_ready;
    m->loss_grad_scale = grad_scale / (float)p->micro;
    const int warm = p->stages - 1 - p->stage < p->micro ? p->stages - 1 - p->stage : p->micro;
    double loss = 0.0;
    int f = 0, b = 0;
    for (; f < warm; f++) loss += forward(p, f, inputs, targets, 1);
    while (f < p->micro) {
        loss += forward(p, f++, inputs, targets, 1);
        backward(p, b++);
    }
    while (b < p->micro) backward(p, b++);
    grid_pp_wait_sends();
    return p->stage == p->stages - 1 ? loss / p->micro : 0.0;
}

double pipeline_eval(pipeline *p, const int32_t *inputs, const int32_t *targets)
{
    double loss = 0.0;
    for (int j = 0; j < p->micro; j++) loss += forward(p, j, inputs, targets, 0);
    grid_pp_wait_sends();
    return p->stage == p->stages - 1 ? loss / p->micro : 0.0;
}
