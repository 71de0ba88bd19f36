/* pipeline — one step of a pipeline-parallel stage: the batch in micro-batches through
 * the stages, forward and backward interleaved one-forward-one-backward (1F1B).
 *
 * Stage s of P with M micro-batches first runs min(P-1-s, M) forwards, then
 * alternates one forward and one backward until every forward is done, then runs the
 * remaining backwards. So stage s holds at most P-s micro-batches' activations at once
 * (activation slots, model.h), whatever M, and the bubble is (P-1)/(M+P-1) of the
 * step. Activations go to the next stage and their gradients back with non-blocking
 * sends (grid.h), each micro-batch from its own buffer, waited for at the end of the
 * step; receives block. Every stage of a replica must run the same steps in the same
 * order (the tags name the micro-batch and the direction).
 *
 * The model's gradients add up over the micro-batches (loss_grad_scale grad_scale/M:
 * the mean of the micro-batch losses, the whole batch's loss; passes of their own
 * scale theirs the same way). m->on_grads_ready, when set, is
 * only called during the last backward, when the gradients become final. */
#ifndef GT_PIPELINE_H
#define GT_PIPELINE_H

#include <stdint.h>

#include "model.h"

typedef struct pipeline pipeline;

/* The passes of one stage on one micro-batch [Bm,T], for a pipeline whose stage does
 * not run on the model's own CPU passes (the GPU engine: gpu_stage.h). forward reads
 * tokens `inputs` on the first stage, the previous stage's activations x_in [Bm,T,C]
 * elsewhere, into activation slot `slot` (< the slots the pipeline asked for); it
 * returns the stage's output activations [Bm,T,C] (read before the next call) or, on
 * the last stage, NULL with *loss set (with want_grad: ready for backward). backward
 * of the forward on `slot` from dout (the output's gradient; NULL on the last stage)
 * returns the gradient of the stage's input [Bm,T,C] (NULL on the first stage) and
 * adds the parameters' gradients up. A failure is the passes' own to record (the
 * schedule must go on: the other stages wait for this one). */
typedef struct stage_passes {
    const float *(*forward)(void *ctx, int slot, const int32_t *inputs, const float *x_in,
                            const int32_t *targets, int want_grad, float *loss);
    const float *(*backward)(void *ctx, int slot, const float *dout);
    void *ctx;
} stage_passes;

/* Activation slots a stage of the pipeline keeps: micro-batches in flight there. */
int pipeline_slots(int stage, int stages, int micro);

/* For stage m (gpt_create_stage) of grid_pp_size() stages, batches of B x T in
 * `micro` micro-batches (micro must divide B), its passes those of m on the CPU
 * (passes NULL: the model's activation slots are allocated here) or `passes`.
 * Allocates the send buffers. NULL on failure (reported). */
pipeline *pipeline_create(gpt_model *m, int micro, int B, int T, const stage_passes *passes);
void pipeline_free(pipeline *p);

/* One training step's forward and backward on inputs/targets [B,T] (read by the first
 * and the last stage): grads += grad_scale x d(batch mean loss)/d(params). Returns the
 * batch's mean loss on the last stage, 0 elsewhere. */
double pipeline_train(pipeline *p, const int32_t *inputs, const int32_t *targets,
                      float grad_scale);
/* Forward only (evaluation) of one batch: the mean loss on the last stage, 0 elsewhere. */
double pipeline_eval(pipeline *p, const int32_t *inputs, const int32_t *targets);

#endif
