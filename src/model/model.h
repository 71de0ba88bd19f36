/* model — a GPT-2 shaped decoder: parameter layout, initialisation, forward, backward.
 *
 * Architecture: token + learned position embeddings; n_layer pre-LayerNorm blocks
 * (x += attn(ln_1(x)); x += mlp(ln_2(x))) with causal multi-head attention and a GELU
 * MLP of width 4C; final LayerNorm; output projection tied to the token embedding.
 *
 * Memory: all parameters live in ONE flat FP32 buffer (and the gradients in a second
 * of the same layout), so zeroing, reducing, clipping, updating and saving are single
 * loops; the layout is layout.h's.
 * The parameter table (m->info) lists every tensor with its GPT-2 style name
 * ("transformer.h.3.attn.c_attn.weight"), shape, offset and whether weight decay
 * applies (matrices only). The file formats never see it: they take a table of named
 * tensors (tensors.h) from gpt_tensor_table or gpt_shape_tensor_table (layout.h). */
#ifndef GT_MODEL_H
#define GT_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "layout.h" /* defines: gpt_shape, gpt_param_info, GPT_MAX_* */
#include "tensors.h"

typedef struct gpt_acts gpt_acts; /* activation buffers for one (B,T): model_internal.h */

typedef struct gpt_model {
    gpt_shape shape;
    const gt_backend *be;
    /* be->bf16_acts, unless GENTRAIN_BF16_ACTS=0 (tests): the activations that only
     * products read kept in BF16 storage (backend.h), NULL: as floats */
    const gt_bf16_acts *acts16;
    /* with acts16: the MLP's pre-activation kept in BF16 too, as GELU's slope there
     * (not exact: GELU's backward then sees the BF16 slope), with every layer's GELU
     * output, unless GENTRAIN_BF16_ACTS=exact */
    int gelu_slope_kept;
    size_t n_params;
    float *params;           /* [n_params] */
    float *grads;            /* [n_params], allocated by gpt_alloc_grads */
    gpt_param_info *info;    /* [n_info] */
    int n_info;
    gpt_acts *acts;          /* the slot in use, for the largest (B,T) asked so far */
    gpt_acts **act_slots;    /* [n_act_slots] (gpt_alloc_act_slots) */
    int n_act_slots;
    int act_B, act_T;        /* capacity of acts */
    int threads;             /* OpenMP threads the kernels use (scratch sizing) */
    /* Multiplies d(loss)/d(logits), so every gradient (1 after gpt_create): 1/n to
     * accumulate the mean gradient of n micro-batches. */
    float loss_grad_scale;
    /* Tensor parallelism (Megatron-style): of tp_size ranks, this one holds heads
     * [tp_rank*NH/tp, ...) of each attention and the same share of each MLP's hidden
     * units: c_attn and mlp.c_fc cut by output rows (column-parallel), attn.c_proj and
     * mlp.c_proj by input columns (row-parallel, their bias added by tp rank 0 only);
     * the vocabulary too: wte's rows [tp_rank*V/tp, ...) for the embedding and the
     * tied head, whose softmax combines the shards' row maxima and sums; LayerNorms and
     * wpe whole. tp_allreduce (required when tp_size > 1) sums a buffer over the tp
     * peers: twice per block forward (after each row-parallel product) and twice
     * backward (the input gradients of c_fc and c_attn), plus the embedding, the
     * loss's sums and the head's input gradient; tp_allreduce_max takes the row
     * maxima. */
    int tp_size, tp_rank;
    void (*tp_allreduce)(void *ctx, float *buf, size_t n);
    void (*tp_allreduce_max)(void *ctx, float *buf, size_t n); /* the same with max */
    void *tp_ctx;
    /* Pipeline parallelism: this model is one stage, blocks [layer0, layer0 +
     * n_layers) of shape.n_layer; the first stage has the embeddings (has_embed), the
     * last the final LayerNorm and the head (has_head), with its own copy of the tied
     * wte when it is not also the first (the two copies' gradients must be added
     * before each update: the trainer's job). One stage of one: the whole model. */
    int layer0, n_layers, has_embed, has_head;
    int i_wte, i_wpe, i_first, i_lnf; /* table indices (-1: not on this stage) */
    size_t n_whole;                   /* floats of the whole model (tp 1, 1 stage) */
    /* Optional (NULL = none): told during gpt_backward, on the calling thread, that
     * grads[offset, offset+count) is final for this backward, so it can be reduced
     * while backward goes on. The ranges tile the buffer from its end to its start,
     * each ending where the previous one began: ln_f right after the head; in each
     * block (last block first) the tensors of each operation as soon as its backward
     * is done (mlp.c_proj, mlp.c_fc, ln_2, attn.c_proj, attn.c_attn, ln_1: backward
     * runs in reverse layout order); then wte and wpe at the very end (wte gets
     * gradient both from the head and from the encoder). Each call is also a chance
     * for the trainer to let MPI progress. */
    void (*on_grads_ready)(void *ctx, size_t offset, size_t count);
    void *grads_ready_ctx;
    /* gpt_bind: the buffers forward and backward use instead of params and grads
     * (NULL: the model's own). The model never frees them. */
    const float *bound_params;
    float *bound_grads;
} gpt_model;

/* Checks the shape (gpt_shape_check) and allocates parameters (not initialised) and
 * the parameter table. Returns 0 or -1 (reported). */
int gpt_create(gpt_model *m, gpt_shape shape, const gt_backend *be, int threads);
/* The same for shard tp_rank of tp_size: n_head and 4 x n_embd must divide by tp_size.
 * Set tp_allreduce before the first forward. */
int gpt_create_tp(gpt_model *m, gpt_shape shape, const gt_backend *be, int threads,
                  int tp_size, int tp_rank);
/* The same for stage `stage` of n_stages (n_stages <= n_layer): contiguous blocks, the
 * first n_layer % n_stages stages one more. */
int gpt_create_stage(gpt_model *m, gpt_shape shape, const gt_backend *be, int threads,
                     int tp_size, int tp_rank, int stage, int n_stages);
/* Copies between a full parameter buffer (the layout of the tp_size = 1 model, n_full
 * floats) and shard `tp_rank` of m's layout (m->n_params floats): to_full = 1 writes
 * the shard's parts of full, 0 fills the shard from full. */
void gpt_shard_copy(const gpt_model *m, int tp_rank, float *full, float *shard,
                    int to_full);
/* Floats of the full (tp_size = 1, one stage) parameter buffer. */
size_t gpt_full_params(const gpt_model *m);
/* GPT-2 initialisation from seed: N(0, 0.02) for matrices and embeddings, residual
 * projections (attn.c_proj, mlp.c_proj) scaled by 1/sqrt(2*n_layer), biases 0,
 * LayerNorm weights 1. Deterministic for a seed, whatever the thread count. */
int gpt_init_weights(gpt_model *m, uint64_t seed); /* 0, or -1 (reported) */
int gpt_alloc_grads(gpt_model *m);
/* Makes room for activations of batches up to B x T (T <= block_size). */
int gpt_alloc_acts(gpt_model *m, int B, int T);
void gpt_free(gpt_model *m);

/* Forward on inputs[B,T] (token ids < V, T <= block_size, acts allocated for it).
 * With targets[B,T]: returns the mean cross-entropy loss. Without (NULL): returns 0 and
 * leaves logits for gpt_logits().
 * With want_grad != 0 (targets required) it also leaves d(mean loss)/d(logits) ready
 * for gpt_backward (same call computes loss and logit gradient in place). */
float gpt_forward(gpt_model *m, const int32_t *inputs, const int32_t *targets, int B,
                  int T, int want_grad);
/* One stage's forward (gpt_forward is the whole model's): the first stage reads
 * tokens `inputs`, the others the previous stage's output activations x_in [B,T,C]
 * (copied). Returns this stage's output activations [B,T,C] (valid until the next
 * forward on the same activation slot) except on the last stage, which returns NULL
 * and sets *loss as gpt_forward returns it. */
const float *gpt_stage_forward(gpt_model *m, const int32_t *inputs, const float *x_in,
                               const int32_t *targets, int B, int T, int want_grad,
                               float *loss);
/* One stage's backward of its last training forward on the current slot: the last
 * stage starts from its loss (dout NULL), the others from dout [B,T,C], the gradient
 * of their output. grads += as gpt_backward. Returns the gradient of the stage's input
 * activations [B,T,C] (for the previous stage), NULL on the first stage. */
const float *gpt_stage_backward(gpt_model *m, const float *dout);
/* Activation slots: a pipeline keeps several micro-batches in flight, each with its
 * activations. gpt_alloc_act_slots makes n slots for B x T (slot 0 is what
 * gpt_alloc_acts makes); gpt_use_act_slot picks the one forward and backward use. */
int gpt_alloc_act_slots(gpt_model *m, int B, int T, int n);
void gpt_use_act_slot(gpt_model *m, int slot);

/* Logits [B,T,V] of the last forward without targets. */
const float *gpt_logits(const gpt_model *m);
/* Zeros the parameter gradients. */
void gpt_zero_grad(gpt_model *m);
/* Backward of the last gpt_forward(..., want_grad=1):
 * grads += loss_grad_scale * d(mean loss)/d(params).
 * Calls m->on_grads_ready, when set, as each range of grads becomes final. */
void gpt_backward(gpt_model *m);

/* Floating point operations of one training step (forward + backward) on B x T
 * tokens: the matrix products, and attention's over the full T x T, as MFU is usually
 * counted (model_build.c says how that differs from what the kernels compute). */
double gpt_flops_per_step(const gpt_shape *s, int B, int T);
/* The tensors this model (shard, stage) uses as matrices of its products, as table
 * indices: each layer's c_attn, attn.c_proj, mlp.c_fc and mlp.c_proj weights and, on
 * the stage with the head, wte. Writes at most cap; returns how many there are. */
int gpt_product_matrices(const gpt_model *m, int *idx, int cap);

/* Makes forward and backward read `params` and add into `grads` (each [n_params], in
 * the layout of m; NULL: the model's own buffer) until the next gpt_bind. For the step
 * engine (engine.h), whose callers keep several gradient buffers (async) or step at
 * predicted weights: the model's own buffers are never swapped out. */
void gpt_bind(gpt_model *m, const float *params, float *grads);

/* The parameters of m as a table of named tensors (tensors.h), in m's own layout: a
 * buffer of the table is m->params (or m->grads, or an optimizer moment of m); for a
 * tensor-parallel shard or a pipeline stage its own tensors, with the shard's shapes.
 * Of a whole model (tp 1, one stage) it is what the model file and the checkpoint hold
 * (io/h5/h5model.h, io/ckpt/ckpt.h). out is made here (gt_tensor_table_free it; empty after a
 * failure). 0, or -1 (reported). */
int gpt_tensor_table(const gpt_model *m, gt_tensor_table *out);
/* Index of the named tensor in m->info, or -1. */
int gpt_find_param(const gpt_model *m, const char *name);

#endif
