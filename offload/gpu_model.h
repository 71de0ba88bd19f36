/* gpu_model — one GPT-2 shaped model trained on this process's GPU in FP16: the
 * training step of offload = all (gpu_model_create, gpu_model_step); a pipeline stage
 * or a tensor-parallel shard, every layer it has (gpu_model_create_stage, below: what
 * gentrain's offload = blocks, pp > 1 and tp > 1 run); or the transformer blocks
 * alone (gpu_model_create_blocks).
 * C interface, no CUDA types (src/ and the standalone GPU driver
 * offload/tests/gpu_train.cu both use it).
 *
 * What lives on the device: FP16 copies of the parameters, every activation of one
 * batch (resident from the embedding to the loss and back: no host round trip between
 * layers), FP32 parameter-gradient accumulators, and the scratch of the kernels in
 * ops.cuh. What stays on the host (the caller's): the FP32 master weights, AdamW and
 * the loss scale.
 *
 * Parameter layout: exactly the flat layout of src/model/model.h (whole model, tp = 1):
 *   wte[V,C] wpe[maxT,C] | per layer: ln_1.w ln_1.b attn.c_attn.w[3C,C] .b[3C]
 *   attn.c_proj.w[C,C] .b[C] ln_2.w ln_2.b mlp.c_fc.w[4C,C] .b[4C] mlp.c_proj.w[C,4C]
 *   .b[C] | ln_f.w ln_f.b
 * so the host converts its master buffer to FP16 in one pass and the gradients come
 * back in the same order. The layout's owner is the host's table (src/layout/), which
 * offload/ may not include (a peer layer): the trainer hands it over once, tensor by
 * tensor, to gpu_model_check_layout, which refuses any tensor whose name, shape or
 * offset differs from what the kernels here are written for.
 *
 * Streams: the kernels run on one compute stream; a second stream copies. Parameters
 * go up from a pinned staging buffer; during backward each layer's gradients, as soon
 * as they are final, are converted to FP16 on the device and copied down into a pinned
 * host buffer while the layers below are still computing.
 *
 * Loss scaling: gpu_model_step multiplies d(mean loss)/d(logits) by loss_scale, so
 * every gradient that comes back is scaled by it (and may be inf or NaN when FP16
 * overflowed; the caller checks, see src/engine/lossscale.h).
 *
 * Errors: every function returning int gives 0, or -1 with a one-line reason in `why`
 * (a CUDA or cuBLAS error, out of device memory, a bad argument). After an error the
 * model may only be freed. */
#ifndef GT_OFFLOAD_GPU_MODEL_H
#define GT_OFFLOAD_GPU_MODEL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gpu_model gpu_model;

typedef struct gpu_model_shape {
    int vocab_size; /* V (pad it to a multiple of 128 for fast products) */
    int block_size; /* maxT, rows of wpe */
    int n_layer;    /* L */
    int n_head;     /* NH, divides n_embd */
    int n_embd;     /* C */
} gpu_model_shape;

/* Parameters of the layout above (floats on the host, halves on the device). */
size_t gpu_model_param_count(const gpu_model_shape *s);

/* One parameter tensor of the caller's flat layout (the host's table, src/layout/). */
typedef struct gpu_model_tensor {
    const char *name; /* GPT-2 style, e.g. "transformer.h.0.ln_1.weight" */
    int ndim;         /* 1 or 2 */
    int64_t dims[2];  /* dims[0..ndim) (a shard's shape for a shard model) */
    size_t offset;    /* into the flat buffer (staging, gradients), in elements */
} gpu_model_tensor;

/* Checks the caller's layout t[n], in table order, against the one the kernels of g
 * compute with: the same count, and tensor by tensor the same name, shape and offset
 * (a model made by gpu_model_create_shard_blocks: its shard's layout, the layers named
 * from 0; a blocks model: the whole layout, though only the blocks live on the device).
 * Two tensors of one size in another order are refused like any other difference.
 * Call it once after create, before the first upload: the totals alone would agree on
 * such a swap and every step would train the wrong tensors. 0, or -1 with `why`
 * naming the first tensor that differs. */
int gpu_model_check_layout(gpu_model *g, const gpu_model_tensor *t, int n, char *why,
                           size_t cap);

/* Device bytes gpu_model_create allocates for batches of B x T (parameters, gradient
 * accumulators, activations, scratch, cuBLAS's workspace): what a
 * caller compares with the free memory to pick the largest batch that fits. */
size_t gpu_model_device_bytes(const gpu_model_shape *s, int B, int T);

/* Allocates everything for batches up to B x T (T <= block_size) on the current
 * device (offload_use_device) and returns the model, or NULL with `why` set. The
 * parameters are undefined until gpu_model_upload_params. */
gpu_model *gpu_model_create(const gpu_model_shape *s, int B, int T, char *why, size_t cap);
void gpu_model_free(gpu_model *g);

/* The pinned host buffer of gpu_model_param_count FP16 values (IEEE binary16 bits) the
 * caller fills from its master weights (src/kernels/simd/half.h), then uploads. */
uint16_t *gpu_model_param_staging(gpu_model *g);
/* Copies the staging buffer to the device (asynchronously: the next step waits for it,
 * and the staging buffer must not change until gpu_model_sync or the next step). */
int gpu_model_upload_params(gpu_model *g, char *why, size_t cap);

/* One training step's forward and backward on inputs and targets [B,T] (host arrays of
 * token ids < V; B x T within the size given at create). Sets *loss to the mean
 * cross-entropy (unscaled, FP32 reductions). The gradients (scaled by loss_scale) are
 * ready in gpu_model_grads afterwards. */
int gpu_model_step(gpu_model *g, const int32_t *inputs, const int32_t *targets, int B,
                   int T, float loss_scale, float *loss, char *why, size_t cap);

/* One micro-batch of a step made of several (gradient accumulation): as
 * gpu_model_step, but the micro-batches from one with first = 1 to one with last = 1
 * add their gradients up on the device (FP32) and send the sum down once, at the last,
 * multiplied by sum_scale on its way to FP16 (1/accum makes it loss_scale x the mean
 * gradient, as large as one batch's, while each micro-batch's FP16 backward keeps the
 * whole loss scale against underflow): no transfer and no host work per micro-batch.
 * Each may have its own loss_scale (the sum is of loss_scale x gradient); the last's
 * sum_scale counts. gpu_model_step(...) is first = last = 1, sum_scale = 1. Until the
 * last, gpu_model_grads refuses (the sum is not down yet); a micro-batch with first = 0
 * needs an unfinished one before it. An overflow in any micro-batch leaves inf or NaN
 * in the sum. */
int gpu_model_step_micro(gpu_model *g, const int32_t *inputs, const int32_t *targets, int B,
                         int T, float loss_scale, int first, int last, float sum_scale,
                         float *loss, char *why, size_t cap);

/* Forward only (evaluation): *loss = mean cross-entropy. */
int gpu_model_loss(gpu_model *g, const int32_t *inputs, const int32_t *targets, int B,
                   int T, float *loss, char *why, size_t cap);

/* Waits for the last step's (or blocks backward's) gradient copies and returns the
 * pinned host buffer of gpu_model_param_count FP16 gradients (scaled by that step's
 * loss_scale), valid until the next step; NULL with `why` set on an error. */
const uint16_t *gpu_model_grads(gpu_model *g, char *why, size_t cap);

/* The gradients part by part, in the order the backward finishes them (ln_f, the
 * blocks from the last to the first, then wte and wpe; a blocks model: its blocks), so
 * the host can unscale each part while the backward still runs below it. Part k of
 * gpu_model_grad_parts(g) covers the layout range [*lo, *hi) (empty, lo == hi, for a
 * part the last backward did not send); gpu_model_grads_part waits until that part is
 * down and returns the buffer gpu_model_grads returns, valid in [*lo, *hi). Refused,
 * as gpu_model_grads is, before the last micro-batch of a step. */
int gpu_model_grad_parts(const gpu_model *g);
const uint16_t *gpu_model_grads_part(gpu_model *g, int k, size_t *lo, size_t *hi, char *why,
                                     size_t cap);

/* ---- the transformer blocks alone on the device ----
 *
 * The caller computes the token + position embedding and the final LayerNorm, the tied
 * head and the loss itself (offload/tests/gpu_train.cu: in double on the host; the
 * trainer's parts run them on the device, gpu_model_create_stage) and hands the
 * residual stream over once each way per forward and once each way per backward: as
 * FP32 through a pinned host buffer on the copy stream, converted from and to FP16 on
 * the device, where it stays FP16 through every block.
 *
 * A blocks model keeps the same flat layout and the same full-size staging and
 * gradient buffers (gpu_model_param_staging, gpu_model_grads), but only the blocks'
 * range [end of wpe, start of ln_f) exists on the device: gpu_model_upload_params
 * sends that range alone, and neither tokens nor logits are allocated. gpu_model_step
 * and gpu_model_loss refuse a blocks model; the two functions below refuse one made by
 * gpu_model_create. */

/* Device bytes gpu_model_create_blocks allocates for batches of B x T (the blocks'
 * parameters and gradients, their activations, the residual stream in FP32 and FP16,
 * scratch, cuBLAS's workspace). */
size_t gpu_model_blocks_device_bytes(const gpu_model_shape *s, int B, int T);

/* As gpu_model_create, for the blocks alone (see above). */
gpu_model *gpu_model_create_blocks(const gpu_model_shape *s, int B, int T, char *why,
                                   size_t cap);

/* Forward through the n_layer blocks: x0 [B,T,C] (host FP32: the embedding's output)
 * in, xL [B,T,C] (host FP32: the last block's output, rounded through FP16) out; x0
 * and xL may be the same buffer. Returns once xL is written. Every block's activations
 * stay on the device for gpu_model_blocks_backward (until the next forward). */
int gpu_model_blocks_forward(gpu_model *g, const float *x0, float *xL, int B, int T,
                             char *why, size_t cap);

/* Backward through the blocks of the last gpu_model_blocks_forward (the same B x T):
 * dxL [B,T,C] (host FP32) is the gradient of the loss with respect to xL, ALREADY
 * multiplied by the loss scale (it goes to FP16 as it is); dx0 [B,T,C] (host FP32)
 * gets the gradient with respect to x0, scaled the same (rounded through FP16; inf or
 * NaN where FP16 overflowed). dxL and dx0 may be the same buffer. Returns once dx0 is
 * written; gpu_model_grads then waits for the blocks' FP16 gradients (scaled the
 * same): the block ranges are this backward's, the ranges of wte, wpe and ln_f are
 * zero (a blocks model never writes them). */
int gpu_model_blocks_backward(gpu_model *g, const float *dxL, float *dx0, int B, int T,
                              char *why, size_t cap);

/* ---- a pipeline stage: the blocks with the ends it has, all on the device ----
 *
 * A stage model (gpu_model_create_stage) is a blocks model (a shard's, with tp; below)
 * whose first or last stage also runs its end on the device: the token + position
 * embedding (embed: the first stage, which reads tokens instead of a residual stream)
 * and the final LayerNorm, the tied head and the cross-entropy (head: the last stage,
 * which ends in the loss instead of a residual stream), with the kernels of
 * offload = all. A stage with either end holds the whole layout (its shard's) on the
 * device (wte, wpe and ln_f are a small part beside the blocks; the last stage's wte
 * is its head's copy); one with both (pp = 1, tp = 1) computes what gpu_model_step
 * computes. embed = head = 0 is gpu_model_create_blocks (_shard_blocks). The residual
 * stream crosses the bus only where a stage has no end: in from the previous stage,
 * out to the next.
 *
 * With tp > 1 the ends are vocabulary-parallel, as src/model/model.c's (Megatron's):
 * the shard holds wte's rows [rank V/tp, (rank + 1) V/tp); its embedding adds the rows
 * of the tokens it holds (tp rank 0 the positions too) and the shards' parts are
 * summed (the blocks' sum hook, B x T x C); its head computes its V/tp columns of the
 * logits, and the cross-entropy combines the shards' rows on the host through
 * host_max and host_sum (each row's maximum, then its sum of exponentials and its
 * target's logit: 3 x B x T floats down and up, whatever the blocks' hook); the head's
 * input gradient is summed like the blocks' (B x T x C). wpe and ln_f are whole on
 * every shard, their gradients computed from identical values (a GPU's atomics may
 * still order the sums differently: the caller makes them agree, as it does the
 * blocks' whole tensors). */

struct gpu_model_tp;

/* Device bytes gpu_model_create_stage allocates for batches of B x T (the logits,
 * B x T x V/tp FP16, with a head). tp may be NULL (tp = 1). */
size_t gpu_model_stage_device_bytes(const gpu_model_shape *s, int B, int T,
                                    const struct gpu_model_tp *tp, int embed, int head);

/* As gpu_model_create_shard_blocks (tp NULL: gpu_model_create_blocks), with the
 * embedding (embed = 1) and/or the head (head = 1) on the device too (see above). With
 * tp.size > 1 and an end, host_sum and host_max must be set. */
gpu_model *gpu_model_create_stage(const gpu_model_shape *s, int B, int T,
                                  const struct gpu_model_tp *tp, int embed, int head,
                                  char *why, size_t cap);

/* A stage's forward (any blocks model: a stage, the blocks, a shard's blocks; the same
 * B x T rules as gpu_model_blocks_forward): from tokens inputs [B,T] (host) with an
 * embedding, else from x0 [B,T,C] (host FP32); to the loss with a head (targets [B,T]
 * needed; *loss = the mean cross-entropy; loss_scale > 0 also leaves loss_scale x
 * d(mean loss)/d(logits) for the backward, 0 is an evaluation, which no backward may
 * follow), else to xL [B,T,C] (host FP32). What a stage does not read or write may be
 * NULL. Every activation stays on the device for gpu_model_stage_backward. */
int gpu_model_stage_forward(gpu_model *g, const int32_t *inputs, const float *x0,
                            const int32_t *targets, float loss_scale, float *xL, float *loss,
                            int B, int T, char *why, size_t cap);

/* The backward of the last gpu_model_stage_forward (the same B x T): from that forward's
 * loss with a head (dxL unread), else from dxL [B,T,C] (host FP32, ALREADY multiplied
 * by the loss scale); with an embedding the gradient ends in wte's and wpe's (dx0
 * unwritten), else dx0 [B,T,C] (host FP32) gets d(scaled loss)/d(x0), rounded through
 * FP16. gpu_model_grads then waits for this backward's FP16 gradients, scaled: the
 * blocks', ln_f's with a head, wte's (the head's and the embedding's summed) and wpe's
 * with an embedding, wte's alone with a head only; the ranges a stage never computes
 * read as zero. */
int gpu_model_stage_backward(gpu_model *g, const float *dxL, float *dx0, int B, int T,
                             char *why, size_t cap);

/* ---- tensor parallelism: one shard's blocks (tp > 1, offload = all or blocks) ----
 *
 * A shard blocks model is a blocks model (above: the residual stream up and down, the
 * same entry points, gpu_model_blocks_forward and _backward) of shard tp.rank of
 * tp.size, cut as src/model/model.h cuts a shard (Megatron-style): NH/tp of the heads of each
 * attention and 4C/tp of the units of each MLP; attn.c_attn and mlp.c_fc by output rows
 * (column-parallel: within each of c_attn's q, k and v thirds, this shard's heads),
 * attn.c_proj and mlp.c_proj by input columns (row-parallel), whose biases are added by
 * tp rank 0 alone; LayerNorms whole. Its layout is src/model/model.c's of that shard with
 * every layer (gpt_create_tp): wte[V/tp,C] wpe[maxT,C] | per layer ln_1.w ln_1.b
 * attn.c_attn.w[3C/tp,C] .b[3C/tp] attn.c_proj.w[C,C/tp] .b[C] ln_2.w ln_2.b
 * mlp.c_fc.w[4C/tp,C] .b[4C/tp] mlp.c_proj.w[C,4C/tp] .b[C] | ln_f.w ln_f.b, of which
 * only the blocks' range exists on the device (gpu_model_shard_param_count floats in
 * the staging and gradient buffers). tp.size = 1 is gpu_model_create_blocks.
 *
 * The row-parallel products leave partial sums: each block's attn.c_proj and mlp.c_proj
 * outputs are summed over the tp peers before the residual adds, and in the backward
 * the input gradients of mlp.c_fc and attn.c_attn before the LayerNorms' backward:
 * two all-reduces of B x T x C per block forward, two per block backward, every peer
 * getting the same bits (so what the peers compute from the sums, the residual stream
 * and the whole LayerNorms, stays identical). The sum is one of two hooks:
 *  - device_sum (when set): sums n FP16 values of the device buffer buf in place,
 *    queued on `stream`, the model's compute stream (a cudaStream_t, opaque here);
 *    offload/tp_comm.h's tp_comm_sum_half is NCCL's all-reduce;
 *  - host_sum (else): sums n FP32 values of host memory in place (src/: MPI_Allreduce
 *    on the tp communicator). The model converts the partial sum to FP32 on the device,
 *    copies it down into a pinned buffer, waits for it, calls host_sum, and copies the
 *    sum up and back to FP16: the host path waits for the device at every all-reduce.
 * host_max (a stage's vocabulary-parallel loss only; with host_ctx) takes the
 * elementwise maximum of n FP32 values of host memory in place over the tp peers.
 * Every peer must make the same calls in the same order (each all-reduce is a
 * collective of the tp group). */
typedef struct gpu_model_tp {
    int size, rank; /* tp_size, and this shard's tp_rank */
    int (*device_sum)(void *ctx, void *buf, size_t n, void *stream, char *why, size_t cap);
    void *device_ctx;
    void (*host_sum)(void *ctx, float *buf, size_t n);
    void *host_ctx;
    void (*host_max)(void *ctx, float *buf, size_t n);
} gpu_model_tp;

/* Floats of a shard's layout (above) for tp_size shards; tp_size = 1 is
 * gpu_model_param_count. 0 when tp_size does not divide n_head and vocab_size. */
size_t gpu_model_shard_param_count(const gpu_model_shape *s, int tp_size);

/* Device bytes gpu_model_create_shard_blocks allocates for batches of B x T (host path:
 * with the FP32 scratch of the all-reduces). */
size_t gpu_model_shard_blocks_device_bytes(const gpu_model_shape *s, int B, int T,
                                           const gpu_model_tp *tp);

/* As gpu_model_create_blocks, for the shard tp describes (copied: the hooks must stay
 * valid while the model lives). NULL with `why` set, e.g. when tp.size does not divide
 * n_head and vocab_size or no hook is given with tp.size > 1. */
gpu_model *gpu_model_create_shard_blocks(const gpu_model_shape *s, int B, int T,
                                         const gpu_model_tp *tp, char *why, size_t cap);

/* Causal attention's row blocks (offload/attention_plan.h): the queries are cut into
 * nb blocks so that the products and the softmax skip most of the masked half of each
 * T x T score matrix. 0, the default, picks nb from T (8 at T = 1024: 56% of the
 * square); 1 computes the whole square (for comparison). A blocks backward uses what
 * its forward used. Returns 0, or -1 when nb is not 0 or a divisor of the model's T up
 * to 8; a shorter T of a later call that nb does not divide fails that call (cuBLAS:
 * invalid value). */
int gpu_model_set_attention_row_blocks(gpu_model *g, int nb, char *why, size_t cap);

/* ---- profiling: where the device's time goes ----
 *
 * With profiling on, every entry point above puts a timing event on the compute stream
 * before each kernel or product it queues, and the time from one event to the next is
 * charged to the phase of the first. It costs an event per kernel (a few microseconds
 * each) and is meant for benchmarks: read after each step, since only the events of
 * one call's work are charged (the device's idle time between calls is not). */
typedef enum gpu_model_phase {
    GPU_PHASE_MATMUL,        /* the blocks' linear layers: products, bias, bias grads */
    GPU_PHASE_ATTENTION,     /* causal attention: permutes, score products, softmax */
    GPU_PHASE_LAYERNORM,     /* every LayerNorm, forward and backward */
    GPU_PHASE_GELU_RESIDUAL, /* GELU and the residual adds */
    GPU_PHASE_EMBED,         /* token + position embedding, forward and backward */
    GPU_PHASE_HEAD,          /* the tied head's products (logits and their gradient) */
    GPU_PHASE_LOSS,          /* cross-entropy and the mean loss */
    GPU_PHASE_OTHER,         /* tokens and residual stream in, zeroing, gradient
                                conversions (the parameter upload before a step is
                                not charged) */
    GPU_PHASE_TP_COMM,       /* a shard's all-reduces over the tp peers (the host path:
                                with the copies and the wait for the peers) */
    GPU_PHASE_COUNT
} gpu_model_phase;

/* A phase's name ("matmul", "attention", ...). */
const char *gpu_model_phase_name(int phase);

/* Turns profiling on (1) or off (0). Returns 0, or -1 with `why` set. */
int gpu_model_profile(gpu_model *g, int on, char *why, size_t cap);

/* Waits for the device, then adds to ms[GPU_PHASE_COUNT] the milliseconds charged to
 * each phase since the last read (or since profiling was turned on) and starts over.
 * Returns 0, or -1 with `why` set (profiling off; too many kernels between reads). */
int gpu_model_profile_read(gpu_model *g, double *ms, char *why, size_t cap);

/* Waits for everything queued on the device (for timing). */
int gpu_model_sync(gpu_model *g, char *why, size_t cap);

#ifdef __cplusplus
}
#endif

#endif
