/* gpu_stage — see gpu_stage.h. */
#include "gpu_stage.h"

#include <stdlib.h>
#include <string.h>

#include "device_step.h" /* defines: device_step_check_layout, device_step_upload */
#include "gpu_model.h"
#include "tp_comm.h"
#include "grid.h"
#include "lossscale.h"
#include "util.h"

struct gpu_stage {
    gpu_model *g;
    tp_comm *comm;        /* NCCL for the tp all-reduces, or NULL (host path) */
    const gpt_model *m;
    int Bm, T, C, slots, micro, threads;
    int has_embed, has_head, tp;
    size_t N, NC;
    size_t b0, nblk;      /* the blocks' range in the stage's layout */
    size_t gpu_lo;        /* the same blocks in the device model's layout */
    device_range up[5];   /* what the device computes with: the blocks, and its ends'
                           * wte, wpe, ln_f.weight and ln_f.bias */
    int n_up;
    int holds;            /* the slot whose activations the device holds; -1: none */
    float *mem;           /* one allocation for the host buffers below */
    float *x_in;          /* [slots, N, C] each slot's block input */
    const int32_t **tokens;  /* [slots] the first stage's input tokens per slot */
    const int32_t **targets; /* [slots] the last stage's targets per slot */
    float *x_out;         /* [N, C] the stage's output (without the head) */
    float *dx;            /* [N, C] the gradient of its input (without the embedding) */
    /* tp > 1: the tensors every shard holds whole (table indices), and room for
     * their gradients (gpu_stage_end) */
    int *rep;
    int n_rep;
    float *rep_buf;
    /* the schedule in progress (gpu_stage_begin) */
    float *grads;
    float scale, inv;     /* S, and grad_scale / (micro x S) */
    int overflow, failed;
};

static void fail(gpu_stage *s, const char *what, const char *why)
{
    if (!s->failed) gt_error("offload: %s: %s: %s", s->tp > 1 ? "tensor-parallel shard" :
                             "pipeline stage", what, why);
    s->failed = 1;
}

/* The host buffers, in one allocation. */
static int alloc_host(gpu_stage *s)
{
    const size_t NC = s->NC, total = (size_t)s->slots * NC + 2 * NC;
    s->mem = gt_malloc(total * sizeof(float), "GPU pipeline stage host buffers");
    s->tokens = gt_calloc((size_t)s->slots * sizeof *s->tokens, "GPU pipeline stage");
    s->targets = gt_calloc((size_t)s->slots * sizeof *s->targets, "GPU pipeline stage");
    if (!s->mem || !s->tokens || !s->targets) return -1;
    float *p = s->mem;
    s->x_in = p, p += (size_t)s->slots * NC;
    s->x_out = p, p += NC;
    s->dx = p;
    return 0;
}

/* tp > 1: the tensors every shard holds whole, and room for their gradients. */
static int find_replicated(gpu_stage *s)
{
    const gpt_model *m = s->m;
    size_t floats = 0;
    s->rep = gt_malloc(sizeof *s->rep * (size_t)m->n_info, "GPU shard tensor list");
    if (!s->rep) return -1;
    /* every tensor the stage holds whole: the blocks' LayerNorms and row-parallel
     * biases, and its ends' wpe and ln_f, all computed on the device */
    for (int i = 0; i < m->n_info; i++)
        if (m->info[i].split == GPT_SPLIT_NONE) {
            s->rep[s->n_rep++] = i;
            floats += m->info[i].numel;
        }
    s->rep_buf = gt_malloc((floats ? floats : 1) * sizeof(float), "GPU shard gradients");
    return s->rep_buf ? 0 : -1;
}

/* tp > 1 over NCCL: tp rank 0 draws the communicator's id and hands it to its peers
 * over the tp communicator (with whether it could), then every peer joins. */
static int make_comm(gpu_stage *s)
{
    unsigned char msg[1 + TP_COMM_ID_BYTES] = {0};
    char why[512] = "";
    if (s->m->tp_rank == 0) msg[0] = tp_comm_id(msg + 1, why, sizeof why) == 0;
    grid_tp_bcast(msg, sizeof msg, 0);
    if (!msg[0]) {
        if (s->m->tp_rank == 0) gt_error("offload: %s", why);
        else gt_error("offload: tp rank 0 could not make the NCCL communicator's id");
        return -1;
    }
    s->comm = tp_comm_create(msg + 1, s->tp, s->m->tp_rank, why, sizeof why);
    if (!s->comm) {
        gt_error("offload: %s", why);
        return -1;
    }
    return 0;
}

/* Where the stage's ends' wte, wpe and ln_f sit in the device model's layout dev (up[]
 * gets them beside the blocks), each checked for the same size. */
static int map_ends(gpu_stage *s, const gpt_layout *dev)
{
    const gpt_model *m = s->m;
    const struct {
        int want, host, dev;
    } t[] = {{s->has_embed || s->has_head, m->i_wte, dev->i_wte},
             {s->has_embed, m->i_wpe, dev->i_wpe},
             {s->has_head, m->i_lnf, dev->i_lnf},
             {s->has_head, m->i_lnf + 1, dev->i_lnf + 1}};
    for (size_t k = 0; k < sizeof t / sizeof t[0]; k++) {
        if (!t[k].want) continue;
        const gpt_param_info *a = &m->info[t[k].host], *b = &dev->info[t[k].dev];
        if (a->numel != b->numel) {
            gt_error("internal: offload: the stage's %s has %zu parameters, the GPU model's "
                     "%zu", a->name, a->numel, b->numel);
            return -1;
        }
        s->up[s->n_up++] = (device_range){a->offset, b->offset, a->numel};
    }
    return 0;
}

/* The device model: the stage's blocks (this shard's) and the ends it has, in the
 * layout of a whole model with that many layers (wte and wpe first, ln_f last; a stage
 * without either end never allocates them on the device). */
static int make_device_model(gpu_stage *s, int nccl)
{
    const gpt_model *m = s->m;
    const gpu_model_shape gs = {m->shape.vocab_size, m->shape.block_size, m->n_layers,
                                m->shape.n_head, s->C};
    /* The device model's layout, from the one owner (src/layout/): a model of the
     * stage's n_layers blocks, this shard's shapes, layers named from 0. */
    const gpt_shape ds = {m->shape.vocab_size, m->shape.block_size, m->n_layers,
                          m->shape.n_head, s->C};
    const gpt_part dp = {.tp_size = s->tp, .layer0 = 0, .n_layers = m->n_layers,
                         .has_embed = 1, .has_head = 1};
    gpt_layout dev;
    if (gpt_layout_make(ds, dp, &dev) != 0) return -1;
    s->gpu_lo = dev.info[dev.i_first].offset;
    int same = dev.info[dev.i_lnf].offset == s->gpu_lo + s->nblk;
    /* The stage's blocks, tensor by tensor, where the device's are (shifted by
     * gpu_lo - b0): the host copies the one range into the other. */
    for (int j = 0; same && j < GPT_PER_LAYER * m->n_layers; j++) {
        const gpt_param_info *a = &m->info[m->i_first + j], *b = &dev.info[dev.i_first + j];
        same = a->ndim == b->ndim && a->shape[0] == b->shape[0] &&
               a->shape[1] == b->shape[1] && a->offset - s->b0 == b->offset - s->gpu_lo;
    }
    if (!same) {
        gt_error("internal: offload: the stage's blocks are not laid out as the GPU "
                 "model's (%zu parameters from %zu)", s->nblk, s->b0);
        free(dev.info);
        return -1;
    }
    s->up[s->n_up++] = (device_range){s->b0, s->gpu_lo, s->nblk};
    if (map_ends(s, &dev) != 0) {
        free(dev.info);
        return -1;
    }
    if (s->tp > 1 && nccl && make_comm(s) != 0) {
        free(dev.info);
        return -1;
    }
    const gpu_model_tp tp = {s->tp, m->tp_rank, s->comm ? tp_comm_sum_half : NULL, s->comm,
                             m->tp_allreduce, m->tp_ctx, m->tp_allreduce_max};
    char why[512] = "";
    const int embed = s->has_embed, head = s->has_head;
    s->g = gpu_model_create_stage(&gs, s->Bm, s->T, &tp, embed, head, why, sizeof why);
    if (s->g && device_step_check_layout(s->g, dev.info, dev.n_info) != 0) {
        free(dev.info);
        return -1; /* reported; gpu_stage_free frees s->g */
    }
    free(dev.info);
    if (!s->g) {
        const size_t bytes = gpu_model_stage_device_bytes(&gs, s->Bm, s->T, &tp, embed, head);
        gt_error("offload: %s (the %s%d blocks%s and a micro-batch of %d x %d need %.2f GiB "
                 "on the GPU)", why, s->tp > 1 ? "shard of the stage's " : "stage's ",
                 m->n_layers, embed && head ? ", embedding and head" : embed ? " and embedding"
                 : head ? " and head" : "", s->Bm, s->T, (double)bytes / 1073741824.0);
        return -1;
    }
    return 0;
}

gpu_stage *gpu_stage_create(const gpt_model *m, int Bm, int T, int slots, int micro,
                            int threads, int nccl)
{
    if (m->tp_size > 1 && (!m->tp_allreduce || !m->tp_allreduce_max)) {
        gt_error("internal: a GPU tensor-parallel shard needs the model's tp hooks");
        return NULL;
    }
    gpu_stage *s = gt_calloc(sizeof *s, "GPU pipeline stage");
    if (!s) return NULL;
    s->m = m;
    s->tp = m->tp_size;
    s->Bm = Bm, s->T = T, s->C = m->shape.n_embd;
    s->slots = slots, s->micro = micro, s->threads = threads;
    s->has_embed = m->has_embed, s->has_head = m->has_head;
    s->N = (size_t)Bm * T;
    s->NC = s->N * (size_t)s->C;
    s->holds = -1;
    s->b0 = m->info[m->i_first].offset;
    s->nblk = (m->has_head ? m->info[m->i_lnf].offset : m->n_params) - s->b0;
    if (make_device_model(s, nccl) != 0 || alloc_host(s) != 0 ||
        (s->tp > 1 && find_replicated(s) != 0)) {
        gpu_stage_free(s);
        return NULL;
    }
    return s;
}

void gpu_stage_free(gpu_stage *s)
{
    if (!s) return;
    gpu_model_free(s->g);
    tp_comm_free(s->comm);
    free(s->mem);
    free(s->tokens);
    free(s->targets);
    free(s->rep);
    free(s->rep_buf);
    free(s);
}

/* The FP32 parameters the device computes with to FP16 in the staging buffer, and up. */
static int upload(gpu_stage *s, const float *params)
{
    if (device_step_upload(s->g, params, s->up, s->n_up, s->threads) != 0) return -1;
    s->holds = -1;
    return 0;
}

int gpu_stage_begin(gpu_stage *s, const float *params, float *grads, int upload_params,
                    float loss_scale, float grad_scale, int accumulate)
{
    s->grads = grads;
    s->scale = loss_scale;
    s->inv = grad_scale / ((float)s->micro * loss_scale);
    if (!accumulate) s->overflow = 0;
    s->failed = 0;
    return upload_params ? upload(s, params) : 0;
}

/* tp > 1: every peer's gradients of the tensors all shards hold whole become tp rank
 * 0's (they were computed from the same values, but a GPU sums in no fixed order). */
static void sync_replicated(gpu_stage *s)
{
    const gpt_param_info *info = s->m->info;
    size_t at = 0;
    for (int k = 0; k < s->n_rep; k++) {
        const gpt_param_info *p = &info[s->rep[k]];
        memcpy(s->rep_buf + at, s->grads + p->offset, p->numel * sizeof(float));
        at += p->numel;
    }
    grid_tp_bcast(s->rep_buf, at * sizeof(float), 0);
    at = 0;
    for (int k = 0; k < s->n_rep; k++) {
        const gpt_param_info *p = &info[s->rep[k]];
        memcpy(s->grads + p->offset, s->rep_buf + at, p->numel * sizeof(float));
        at += p->numel;
    }
}

int gpu_stage_end(gpu_stage *s)
{
    /* Even after a failure: the peers are in the same collective. */
    if (s->tp > 1 && s->grads) sync_replicated(s);
    return s->failed ? -1 : s->overflow;
}

/* The device's forward of slot's micro-batch (what gpu_stage_forward put in place: its
 * tokens, or its block input x_in[slot]): to x_out, or with the head on the device to
 * *loss (loss_scale > 0: a training forward, S x d(mean loss)/d(logits) kept there). */
static int device_forward(gpu_stage *s, int slot, float loss_scale, float *loss)
{
    char why[512] = "";
    float l = 0.0f;
    if (gpu_model_stage_forward(s->g, s->has_embed ? s->tokens[slot] : NULL,
                                s->x_in + (size_t)slot * s->NC,
                                s->has_head ? s->targets[slot] : NULL, loss_scale, s->x_out, &l,
                                s->Bm, s->T, why, sizeof why) != 0) {
        fail(s, "the forward", why);
        return -1;
    }
    if (loss) *loss = l;
    s->holds = slot;
    return 0;
}

static const float *stage_forward(void *ctx, int slot, const int32_t *inputs,
                                  const float *x_in, const int32_t *targets, int want_grad,
                                  float *loss)
{
    gpu_stage *s = ctx;
    float *x = s->x_in + (size_t)slot * s->NC;
    *loss = 0.0f;
    s->tokens[slot] = inputs;
    s->targets[slot] = targets;
    if (!s->has_embed) memcpy(x, x_in, s->NC * sizeof(float));
    device_forward(s, slot, want_grad ? s->scale : 0.0f, loss); /* a failure: recorded */
    return s->has_head ? NULL : s->x_out;
}

/* The parameters' gradients of this backward, unscaled and added into the caller's:
 * the device's ranges (up[]). */
static void add_grads(gpu_stage *s)
{
    char why[512] = "";
    const uint16_t *g16 = gpu_model_grads(s->g, why, sizeof why);
    if (!g16) {
        fail(s, "the gradients", why);
        return;
    }
    for (int k = 0; k < s->n_up; k++)
        s->overflow |= unscale_half_grads(s->grads + s->up[k].host, g16 + s->up[k].dev,
                                          s->up[k].n, s->inv, 1, s->threads);
}

static const float *stage_backward(void *ctx, int slot, const float *dout)
{
    gpu_stage *s = ctx;
    /* The last stage keeps one slot (pipeline_slots), so a forward with the head is
     * never recomputed: its loss's gradient is this micro-batch's. */
    char why[512] = "";
    if (s->holds != slot && device_forward(s, slot, s->scale, NULL) != 0)
        return s->has_embed ? NULL : s->dx;
    if (gpu_model_stage_backward(s->g, dout, s->dx, s->Bm, s->T, why, sizeof why) != 0) {
        fail(s, "the backward", why);
        return s->has_embed ? NULL : s->dx;
    }
    add_grads(s);
    return s->has_embed ? NULL : s->dx;
}

stage_passes gpu_stage_passes(gpu_stage *s)
{
    return (stage_passes){.forward = stage_forward, .backward = stage_backward, .ctx = s};
}
