/* gpu_stage — one part of the model, a pipeline stage (pp >= 1) or a tensor-parallel
 * shard of one (tp >= 1), a whole model with offload = blocks included (pp = tp = 1),
 * trained with the rank's GPU in FP16: every layer of the part on the device
 * (offload/gpu_model.h, a stage model of its n_layers blocks, a shard's with tp > 1),
 * the first stage's embedding and the last stage's final LayerNorm, tied head and loss
 * included, vocabulary-parallel with tp > 1 as src/model/model.c's. Its passes
 * (pipeline.h stage_passes) run in the 1F1B schedule, of one stage when pp = 1.
 * Activations: the device holds one micro-batch's; the host keeps each in-flight
 * slot's block input (its tokens on a first stage), and a backward whose micro-batch
 * left the device runs that forward again (never with a head: the last stage keeps
 * one micro-batch in flight). */
#ifndef GT_GPU_STAGE_H
#define GT_GPU_STAGE_H

#include <stdint.h>

#include "model.h"
#include "pipeline.h"

typedef struct gpu_stage gpu_stage;

/* Tensor parallelism: the per-block all-reduces (after the row-parallel products, and
 * backward the column-parallel ones' input gradients) and the ends' (the embedding's
 * output, the head's input gradient) run inside the device model: over NCCL on the
 * GPUs (offload/tp_comm.h: a communicator per tp group, its id drawn by tp rank 0 and
 * broadcast over the tp communicator) when nccl is set, else through host memory with
 * the model's tp hook (m->tp_allreduce: MPI on the tp communicator); the loss's row
 * statistics (3 x Bm x T floats) always go through the host with the model's hooks
 * (m->tp_allreduce, m->tp_allreduce_max). Activation recomputation costs one more
 * forward for the micro-batches that left the device (1F1B keeps up to stages - stage
 * in flight; the last stage, one slot, never recomputes).
 *
 * For part m (gpt_create_stage: a stage, a shard of one; with tp > 1 its tp hooks set)
 * and micro-batches of Bm x T, `slots` of them in flight. nccl: the blocks' tp
 * all-reduces over NCCL (tp_comm_built(), one GPU per rank; every tp peer must ask the
 * same), else through host memory. A collective of the tp group with tp > 1. NULL on
 * failure (reported: e.g. the device memory it needs). */
gpu_stage *gpu_stage_create(const gpt_model *m, int Bm, int T, int slots, int micro,
                            int threads, int nccl);
void gpu_stage_free(gpu_stage *s);
/* The stage's passes for pipeline_create. */
stage_passes gpu_stage_passes(gpu_stage *s);
/* Before a schedule: the parameters to compute at (sent to the device when upload is
 * set), the gradient buffer to add into, the loss scale and the step's gradient scale.
 * Clears the overflow flag when accumulate is 0. 0, or -1 (reported).
 * Loss scaling: the last stage multiplies d(loss)/d(logits) by the loss scale S, so
 * the activation gradients that travel between stages are scaled by S, and every
 * stage unscales its parameters' gradients by grad_scale / (micro x S) as it adds them
 * into grads, checking them for inf/NaN (lossscale.h). Every rank must use the same S
 * (the trainer agrees on overflow over all ranks). */
int gpu_stage_begin(gpu_stage *s, const float *params, float *grads, int upload,
                    float loss_scale, float grad_scale, int accumulate);
/* After a schedule: with a gradient buffer and tp > 1, the tensors every shard holds
 * whole (LayerNorms, the row-parallel biases, wpe) get tp rank 0's gradients (a
 * collective of the tp group): every tp peer computes the same residual stream, and
 * this keeps their copies of those tensors identical although a GPU's gradients sum in
 * no fixed order. Then -1 when a pass
 * failed (reported), else whether any gradient added since the last begin with
 * accumulate 0 overflowed (1) or not (0). */
int gpu_stage_end(gpu_stage *s);

#endif
