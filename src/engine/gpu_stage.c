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
    tp_comm *comm;        /* NCCL for the blocks' tp all-reduces, or NULL (host path) */
    const gpt_model *m;
    const gt_backend *be;
    int Bm, T, C, Vl, slots, micro, threads; /* Vl: the shard's vocabulary rows */
    int has_embed, has_head, tp;
    int dev_ends;         /* tp = 1: the stage's embedding and head run on the device */
    int host_embed, host_head; /* tp > 1: the stage's embedding, head on the host */
    size_t N, NC;
    size_t b0, nblk;      /* the blocks' range in the stage's layout */
    size_t gpu_lo;        /* the same blocks in the device model's layout */
    size_t wte, wpe, lnf; /* offsets in the stage's layout (when the stage has them) */
    size_t embed_n;       /* wte and wpe: floats of the first stage's embedding */
    device_range up[5];   /* what the device computes with: the blocks, and its ends'
                           * wte, wpe, ln_f.weight and ln_f.bias */
    int n_up;
    int holds;            /* the slot whose activations the device holds; -1: none */
    float *mem;           /* one allocation for the host buffers below */
    float *x_in;          /* [slots, N, C] each slot's block input */
    const int32_t **tokens;  /* [slots] the first stage's input tokens per slot */
    const int32_t **targets; /* [slots] the last stage's targets per slot */
    float *x_out;         /* [N, C] the blocks' output */
    float *dx;            /* [N, C] the gradient of the blocks' input */
    float *lnf_out, *lnf_mean, *lnf_rstd, *logits, *losses, *dln, *dxl; /* the head */
    float *xmax, *xsums;  /* [N], [2N]: the vocabulary-parallel loss's (tp > 1) */
    float *grad_head;     /* [Vl*C + 2C] scaled gradients of the head's wte and ln_f */
    float *grad_embed;    /* [embed_n] scaled gradients of wte and wpe */
    /* tp > 1: the blocks' tensors every shard holds whole (table indices), and room for
     * their gradients (gpu_stage_end) */
    int *rep;
    int n_rep;
    float *rep_buf;
    /* the schedule in progress (gpu_stage_begin) */
    const float *params;
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
    const size_t NC = s->NC, N = s->N, VC = (size_t)s->Vl * s->C;
    size_t total = (size_t)s->slots * NC + 2 * NC;
    if (s->host_head)
        total += 4 * NC + 6 * N + N * (size_t)s->Vl + VC + 2 * (size_t)s->C;
    if (s->host_embed) total += s->embed_n;
    s->mem = gt_malloc(total * sizeof(float), "GPU pipeline stage host buffers");
    s->tokens = gt_calloc((size_t)s->slots * sizeof *s->tokens, "GPU pipeline stage");
    s->targets = gt_calloc((size_t)s->slots * sizeof *s->targets, "GPU pipeline stage");
    if (!s->mem || !s->tokens || !s->targets) return -1;
    float *p = s->mem;
    s->x_in = p, p += (size_t)s->slots * NC;
    s->x_out = p, p += NC;
    s->dx = p, p += NC;
    if (s->host_head) {
        s->lnf_out = p, p += NC;
        s->dln = p, p += NC;
        s->dxl = p, p += NC;
        p += NC; /* spare: keeps the head's buffers apart from the blocks' */
        s->lnf_mean = p, p += N;
        s->lnf_rstd = p, p += N;
        s->losses = p, p += N;
        s->xmax = p, p += N;
        s->xsums = p, p += 2 * N;
        s->logits = p, p += N * (size_t)s->Vl;
        s->grad_head = p, p += VC + 2 * (size_t)s->C;
    }
    if (s->host_embed) s->grad_embed = p;
    return 0;
}

/* tp > 1: the blocks' tensors every shard holds whole, and room for their gradients. */
static int find_replicated(gpu_stage *s)
{
    const gpt_model *m = s->m;
    size_t floats = 0;
    s->rep = gt_malloc(sizeof *s->rep * (size_t)m->n_info, "GPU shard tensor list");
    if (!s->rep) return -1;
    for (int i = 0; i < m->n_info; i++)
        if (m->info[i].offset >= s->b0 && m->info[i].offset < s->b0 + s->nblk &&
            m->info[i].split == GPT_SPLIT_NONE) {
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

/* dev_ends: where the stage's wte, wpe and ln_f sit in the device model's layout dev
 * (up[] gets them beside the blocks), each checked for the same size. */
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

/* The device model: the stage's blocks (this shard's), in the layout of a model with
 * that many layers (wte and wpe first), with the stage's embedding and head when they
 * run on the device (tp = 1), else without them (never allocated on the device). */
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
    if (s->dev_ends && map_ends(s, &dev) != 0) {
        free(dev.info);
        return -1;
    }
    if (s->tp > 1 && nccl && make_comm(s) != 0) {
        free(dev.info);
        return -1;
    }
    const gpu_model_tp tp = {s->tp, m->tp_rank, s->comm ? tp_comm_sum_half : NULL, s->comm,
                             m->tp_allreduce, m->tp_ctx};
    char why[512] = "";
    const int embed = s->dev_ends && s->has_embed, head = s->dev_ends && s->has_head;
    s->g = s->tp > 1 ? gpu_model_create_shard_blocks(&gs, s->Bm, s->T, &tp, why, sizeof why)
                     : gpu_model_create_stage(&gs, s->Bm, s->T, embed, head, why, sizeof why);
    if (s->g && device_step_check_layout(s->g, dev.info, dev.n_info) != 0) {
        free(dev.info);
        return -1; /* reported; gpu_stage_free frees s->g */
    }
    free(dev.info);
    if (!s->g) {
        const size_t bytes = s->tp > 1
                                 ? gpu_model_shard_blocks_device_bytes(&gs, s->Bm, s->T, &tp)
                                 : gpu_model_stage_device_bytes(&gs, s->Bm, s->T, embed, head);
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
    s->be = m->be;
    s->tp = m->tp_size;
    s->Bm = Bm, s->T = T, s->C = m->shape.n_embd, s->Vl = m->shape.vocab_size / m->tp_size;
    s->slots = slots, s->micro = micro, s->threads = threads;
    s->has_embed = m->has_embed, s->has_head = m->has_head;
    /* The vocabulary-parallel embedding and head (tp > 1) are the host's for now. */
    s->dev_ends = s->tp == 1;
    s->host_embed = s->has_embed && !s->dev_ends;
    s->host_head = s->has_head && !s->dev_ends;
    s->N = (size_t)Bm * T;
    s->NC = s->N * (size_t)s->C;
    s->holds = -1;
    s->b0 = m->info[m->i_first].offset;
    s->nblk = (m->has_head ? m->info[m->i_lnf].offset : m->n_params) - s->b0;
    if (m->has_embed) {
        s->wte = m->info[m->i_wte].offset;
        s->wpe = m->info[m->i_wpe].offset;
        s->embed_n = s->wpe + m->info[m->i_wpe].numel;
    }
    if (m->has_head) {
        s->lnf = m->info[m->i_lnf].offset;
        s->wte = m->info[m->i_wte].offset; /* the head's copy on a last stage */
    }
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
    s->params = params;
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

/* The last stage's head: ln_f, the tied head (this shard's vocabulary columns) and the
 * loss on the blocks' output; with want_grad, S x d(micro-batch mean loss)/d(logits)
 * left in logits. */
static float head_forward(gpu_stage *s, const int32_t *targets, int want_grad)
{
    const gt_backend *be = s->be;
    const float *P = s->params;
    be->layernorm_forward(s->lnf_out, s->lnf_mean, s->lnf_rstd, s->x_out, P + s->lnf,
                          P + s->lnf + s->C, s->N, s->C);
    be->matmul_forward(s->logits, s->lnf_out, P + s->wte, NULL, s->N, s->C, s->Vl);
    return gpt_head_loss(s->m, s->losses, s->logits, s->xmax, s->xsums, targets, s->N,
                         s->scale / (float)s->N, want_grad);
}

/* The device's forward of slot's micro-batch (what gpu_stage_forward put in place: its
 * tokens, or its block input x_in[slot]): to x_out, or with the head on the device to
 * *loss (loss_scale > 0: a training forward, S x d(mean loss)/d(logits) kept there). */
static int device_forward(gpu_stage *s, int slot, float loss_scale, float *loss)
{
    char why[512] = "";
    const int embed = s->dev_ends && s->has_embed, head = s->dev_ends && s->has_head;
    float l = 0.0f;
    if (gpu_model_stage_forward(s->g, embed ? s->tokens[slot] : NULL,
                                s->x_in + (size_t)slot * s->NC, head ? s->targets[slot] : NULL,
                                loss_scale, s->x_out, &l, s->Bm, s->T, why, sizeof why) != 0) {
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
    if (s->host_embed)
        gpt_embed_forward(s->m, x, inputs, s->params + s->wte, s->params + s->wpe, s->Bm,
                          s->T);
    else if (!s->has_embed)
        memcpy(x, x_in, s->NC * sizeof(float));
    float l = 0.0f;
    if (device_forward(s, slot, want_grad ? s->scale : 0.0f, &l) != 0 || !s->has_head)
        return s->has_head ? NULL : s->x_out;
    *loss = s->host_head ? head_forward(s, targets, want_grad) : l;
    return NULL;
}

/* The head's backward from the logits' gradient: the head's wte and ln_f gradients
 * into grad_head, the gradient of the blocks' output into dxl (all scaled by S). */
static void head_backward(gpu_stage *s)
{
    const gt_backend *be = s->be;
    const float *P = s->params;
    const size_t VC = (size_t)s->Vl * s->C;
    memset(s->grad_head, 0, (VC + 2 * (size_t)s->C) * sizeof(float));
    gpt_head_backward(s->m, s->dln, s->grad_head, s->logits, s->lnf_out, P + s->wte, s->N);
    memset(s->dxl, 0, s->NC * sizeof(float));
    be->layernorm_backward(s->dxl, s->grad_head + VC, s->grad_head + VC + s->C, s->dln,
                           s->x_out, P + s->lnf, s->lnf_mean, s->lnf_rstd, s->N, s->C);
}

/* The parameters' gradients of this backward, unscaled and added into the caller's:
 * the device's ranges (up[]), then what the host computed (tp > 1: the ends). */
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
    if (s->host_head) {
        const size_t VC = (size_t)s->Vl * s->C;
        s->overflow |= unscale_float_grads(s->grads + s->wte, s->grad_head, VC, s->inv, 1,
                                           s->threads);
        s->overflow |= unscale_float_grads(s->grads + s->lnf, s->grad_head + VC,
                                           2 * (size_t)s->C, s->inv, 1, s->threads);
    }
    if (s->host_embed) { /* with the head, wte's is in grad_head (stage_backward) */
        const size_t lo = s->host_head ? s->wpe : 0;
        s->overflow |= unscale_float_grads(s->grads + lo, s->grad_embed + lo,
                                           s->embed_n - lo, s->inv, 1, s->threads);
    }
}

static const float *stage_backward(void *ctx, int slot, const float *dout)
{
    gpu_stage *s = ctx;
    /* The last stage keeps one slot: its head's activations are this micro-batch's (and
     * the device never recomputes a forward with the head). */
    if (s->host_head) head_backward(s);
    const float *dxl = s->host_head ? s->dxl : dout; /* NULL with the device's head */
    char why[512] = "";
    if (s->holds != slot && device_forward(s, slot, s->scale, NULL) != 0)
        return s->has_embed ? NULL : s->dx;
    if (gpu_model_stage_backward(s->g, dxl, s->dx, s->Bm, s->T, why, sizeof why) != 0) {
        fail(s, "the backward", why);
        return s->has_embed ? NULL : s->dx;
    }
    if (s->host_embed) {
        /* One stage with both ends (pp = 1) holds the tied wte once: the embedding's
         * gradient adds into the head's, and the sum is unscaled once (add_grads), as
         * the CPU model sums the two. */
        float *dwte = s->host_head ? s->grad_head : s->grad_embed + s->wte;
        const size_t lo = s->host_head ? s->wpe : 0;
        memset(s->grad_embed + lo, 0, (s->embed_n - lo) * sizeof(float));
        gpt_embed_backward(s->m, dwte, s->grad_embed + s->wpe, s->dx, s->tokens[slot], s->Bm,
                           s->T);
    }
    add_grads(s);
    return s->has_embed ? NULL : s->dx;
}

stage_passes gpu_stage_passes(gpu_stage *s)
{
    return (stage_passes){.forward = stage_forward, .backward = stage_backward, .ctx = s};
}
