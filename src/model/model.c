/* model — the passes of model.h: forward and backward read top to bottom as the
 * architecture, every layer one call into the backend op table. Making a model is
 * model_build.c's, its activation buffers model_acts.c's. */
#define GT_MODEL_MODULE /* may include model_internal.h */
#include <stdlib.h>
#include <string.h>

#include "model_internal.h"
#include "util.h"

/* The embedding and the head, for the first and the last stage (gpt_stage_forward,
 * gpt_stage_backward), with m's backend and, for a tensor-parallel shard
 * (vocabulary-parallel: wte's rows v0 = tp_rank x V/tp on), m's tp hooks: every peer
 * makes the same calls in the same order.
 *
 * gpt_embed_forward: out [B,T,C] = wte[inputs] + wpe (the sum over the shards, each
 * adding the rows it holds and tp rank 0 the positions). */
static void gpt_embed_forward(const gpt_model *m, float *out, const int32_t *inputs,
                              const float *wte, const float *wpe, int B, int T);
/* dwte [V/tp,C] += and dwpe [maxT,C] += the embedding's gradients from dout [B,T,C] (this
 * shard's rows; every shard the same dwpe). */
static void gpt_embed_backward(const gpt_model *m, float *dwte, float *dwpe,
                               const float *dout, const int32_t *inputs, int B, int T);
/* The cross-entropy of a->logits [BT, V/tp] (this shard's vocabulary columns: lnf @
 * wte^T) against targets [BT] over the whole vocabulary: a->losses [BT], and the mean
 * returned (summed in a fixed order); with want_grad, logits is overwritten by dscale x
 * d(sum of losses)/d(logits) (dscale = scale / BT: scale x the mean's gradient), in BF16
 * storage with a->head16. a->xmax [BT] and a->xsums [2 BT]: scratch for tp > 1. */
static float gpt_head_loss(const gpt_model *m, gpt_acts *a, const int32_t *targets, size_t BT,
                           float dscale, int want_grad);
/* The tied head's backward from gpt_head_loss's dlogits: dwte += its gradient, dlnf
 * [BT,C] = the gradient of the head's input lnf (overwritten; summed over the shards). */
static void gpt_head_backward(const gpt_model *m, const gpt_acts *a, float *dlnf, float *dwte,
                              const float *wte, size_t BT);

/* The buffers the passes use: the bound ones (gpt_bind), else the model's own. */
static const float *param(const gpt_model *m, int idx)
{
    return (m->bound_params ? m->bound_params : m->params) + m->info[idx].offset;
}
static float *grad(const gpt_model *m, int idx)
{
    return (m->bound_grads ? m->bound_grads : m->grads) + m->info[idx].offset;
}

void gpt_bind(gpt_model *m, const float *params, float *grads)
{
    m->bound_params = params;
    m->bound_grads = grads;
}

/* An activation that only products and attention read, one layer's: FP32 (f), or BF16
 * storage (h, when m->acts16). */
typedef struct {
    float *f;
    uint16_t *h;
} act;

/* Layer l's part (`per` values a layer) of an activation kept as floats or as BF16 */
static act layer_act(float *f, uint16_t *h, size_t l, size_t per)
{
    return h ? (act){NULL, h + l * per} : (act){f + l * per, NULL};
}

/* GELU's output in BF16 (c_proj's input) for layer l: each layer's own where the forward
 * keeps it with GELU's slope (m->gelu_slope_kept), else the one array every layer's
 * forward reuses */
static uint16_t *gelu16_of(const gpt_model *m, const gpt_acts *a, size_t l, size_t BTCl)
{
    return a->gelu16 + (m->gelu_slope_kept ? l * 4 * BTCl : 0);
}

/* The ops on such an activation: the FP32 backend op, or its BF16-storage twin
 * (backend.h's gt_bf16_acts), with the same bits. */
static void ln_forward(const gpt_model *m, act out, float *scratch, float *mean, float *rstd,
                       const float *inp, const float *w, const float *b, size_t N, int C)
{
    if (out.h) m->acts16->layernorm_forward(out.h, scratch, mean, rstd, inp, w, b, N, C);
    else m->be->layernorm_forward(out.f, mean, rstd, inp, w, b, N, C);
}

/* out = inp @ w^T + bias into `out` (an FP32 activation), or with BF16 storage into
 * scratch and out's stored copy */
static void product_to(const gpt_model *m, act out, float *scratch, act inp, const float *w,
                       const float *bias, size_t N, int C, int OC)
{
    if (inp.h) m->acts16->matmul_forward(out.h ? scratch : out.f, out.h, inp.h, w, bias, N, C, OC);
    else m->be->matmul_forward(out.f, inp.f, w, bias, N, C, OC);
}

/* dinp = dout @ w (written), dw, dbias += (backend.h); from dout16 instead (NULL: none),
 * dout's copy in BF16 storage (OC apart), where inp is in BF16 storage too: both
 * products then read it as stored */
static void product_backward(const gpt_model *m, float *dinp, float *dw, float *dbias,
                             const float *dout, const uint16_t *dout16, act inp, const float *w,
                             size_t N, int C, int OC)
{
    if (dout16 && inp.h)
        m->acts16->matmul_backward_dout16(dinp, dw, dbias, dout16, (size_t)OC, inp.h, w, N, C,
                                          OC);
    else if (inp.h) m->acts16->matmul_backward(dinp, dw, dbias, dout, inp.h, w, N, C, OC);
    else m->be->matmul_backward(dinp, dw, dbias, dout, inp.f, w, N, C, OC);
}

/* Sums a partial result over the tensor-parallel shards (nothing to do alone). */
static void tp_sum(const gpt_model *m, float *buf, size_t n)
{
    if (m->tp_size > 1) m->tp_allreduce(m->tp_ctx, buf, n);
}

/* out = res + inp @ w^T + bias (a block's projection back into the residual stream):
 * fused into the product's write-back where the backend can and the product is whole
 * (tp = 1); else the product into proj, its sum over the shards, then the add. */
static void project_add(const gpt_model *m, float *out, float *proj, const float *res, act inp,
                        const float *w, const float *bias, size_t N, int C, int OC)
{
    const gt_backend *be = m->be;
    if (be->matmul_forward_residual && m->tp_size == 1) {
        if (inp.h) m->acts16->matmul_forward_residual(out, res, inp.h, w, bias, N, C, OC);
        else be->matmul_forward_residual(out, res, inp.f, w, bias, N, C, OC);
        return;
    }
    product_to(m, (act){proj, NULL}, NULL, inp, w, bias, N, C, OC);
    tp_sum(m, proj, N * (size_t)OC);
    be->residual_forward(out, res, proj, N * (size_t)OC);
}

/* Tells the trainer that the gradients of tensors first..last (table order) are final. */
static void grads_ready(const gpt_model *m, int first, int last)
{
    if (!m->on_grads_ready) return;
    const gpt_param_info *a = &m->info[first], *b = &m->info[last];
    m->on_grads_ready(m->grads_ready_ctx, a->offset, b->offset + b->numel - a->offset);
}

float gpt_forward(gpt_model *m, const int32_t *inputs, const int32_t *targets, int B,
                  int T, int want_grad)
{
    float loss = 0.0f;
    gpt_stage_forward(m, inputs, NULL, targets, B, T, want_grad, &loss);
    return loss;
}

const float *gpt_stage_forward(gpt_model *m, const int32_t *inputs, const float *x_in,
                               const int32_t *targets, int B, int T, int want_grad,
                               float *loss)
{
    gpt_acts *a = m->acts;
    const gt_backend *be = m->be;
    const int C = m->shape.n_embd, NH = m->shape.n_head;
    const size_t BT = (size_t)B * (size_t)T, BTC = BT * (size_t)C;
    const int Cl = C / m->tp_size, NHl = NH / m->tp_size; /* this shard's part */
    const int Vl = m->shape.vocab_size / m->tp_size;        /* its vocabulary rows */
    const size_t BTCl = BT * (size_t)Cl;
    const size_t att_per_layer = be->attention_saved_floats(B, NHl, T);
    /* Row-parallel products: each shard adds its part; the bias once (tp rank 0). */
    const int add_bias = m->tp_rank == 0;

    a->B = B;
    a->T = T;
    a->have_grad = 0;
    if (loss) *loss = 0.0f;

    if (m->has_embed) {
        memcpy(a->inputs, inputs, BT * sizeof(int32_t));
        gpt_embed_forward(m, a->encoded, inputs, param(m, m->i_wte), param(m, m->i_wpe), B, T);
    } else {
        memcpy(a->encoded, x_in, BTC * sizeof(float)); /* kept for backward */
    }
    const float *x = a->encoded; /* the residual stream entering each block */
    for (int l = 0; l < m->n_layers; l++) {
        const act ln1 = layer_act(a->ln1, a->ln1_16, l, BTC),
                  qkv = layer_act(a->qkv, a->qkv16, l, 3 * BTCl),
                  atty = layer_act(a->atty, a->atty16, l, BTCl),
                  ln2 = layer_act(a->ln2, a->ln2_16, l, BTC);
        float *ln1_mean = a->ln1_mean + l * BT, *ln1_rstd = a->ln1_rstd + l * BT,
              *att = a->att + l * att_per_layer, *attproj = a->attproj,
              *res2 = a->residual2 + l * BTC, *ln2_mean = a->ln2_mean + l * BT,
              *ln2_rstd = a->ln2_rstd + l * BT, *fch = a->fch ? a->fch + l * 4 * BTCl : a->dfch,
              *fch_gelu = a->fch_gelu, *fcproj = a->fcproj,
              *res3 = a->residual3 + l * BTC;
        /* with m->gelu_slope_kept, GELU's slope and output are this layer's to keep (fch:
         * scratch) */
        uint16_t *slope16 = a->gelu_slope16 ? a->gelu_slope16 + l * 4 * BTCl : NULL;
        /* x = x + attn(ln_1(x)) */
        ln_forward(m, ln1, a->dln, ln1_mean, ln1_rstd, x, param(m, layer_idx(m, l, GPT_LN1_W)),
                   param(m, layer_idx(m, l, GPT_LN1_B)), BT, C);
        product_to(m, qkv, a->dqkv, ln1, param(m, layer_idx(m, l, GPT_QKV_W)),
                   param(m, layer_idx(m, l, GPT_QKV_B)), BT, C, 3 * Cl);
        if (qkv.h)
            m->acts16->attention_forward(atty.h, att, qkv.h, a->att_scratch, m->threads, B, T,
                                         Cl, NHl);
        else
            be->attention_forward(atty.f, att, qkv.f, a->att_scratch, m->threads, B, T, Cl, NHl);
        project_add(m, res2, attproj, x, atty, param(m, layer_idx(m, l, GPT_ATTPROJ_W)),
                    add_bias ? param(m, layer_idx(m, l, GPT_ATTPROJ_B)) : NULL, BT, Cl, C);
        /* x = x + mlp(ln_2(x)) */
        ln_forward(m, ln2, a->dln, ln2_mean, ln2_rstd, res2, param(m, layer_idx(m, l, GPT_LN2_W)),
                   param(m, layer_idx(m, l, GPT_LN2_B)), BT, C);
        act gelu = {fch_gelu, NULL}; /* c_proj's input */
        if (ln2.h) {
            gelu = (act){NULL, gelu16_of(m, a, l, BTCl)};
            m->acts16->matmul_forward_gelu(fch, slope16, gelu.h, ln2.h,
                                           param(m, layer_idx(m, l, GPT_FC_W)),
                                           param(m, layer_idx(m, l, GPT_FC_B)), BT, C, 4 * Cl);
        } else if (be->matmul_forward_gelu) {
            be->matmul_forward_gelu(fch, fch_gelu, ln2.f, param(m, layer_idx(m, l, GPT_FC_W)),
                                    param(m, layer_idx(m, l, GPT_FC_B)), BT, C, 4 * Cl);
        } else {
            be->matmul_forward(fch, ln2.f, param(m, layer_idx(m, l, GPT_FC_W)),
                               param(m, layer_idx(m, l, GPT_FC_B)), BT, C, 4 * Cl);
            be->gelu_forward(fch_gelu, fch, 4 * BTCl);
        }
        project_add(m, res3, fcproj, res2, gelu,
                    param(m, layer_idx(m, l, GPT_FCPROJ_W)),
                    add_bias ? param(m, layer_idx(m, l, GPT_FCPROJ_B)) : NULL, BT, 4 * Cl, C);
        x = res3;
    }
    if (!m->has_head) {
        a->have_grad = want_grad;
        return x;
    }
    const int lnf = m->i_lnf;
    /* Output head tied to the token embedding: logits = lnf @ wte^T (this shard's
     * columns with tp > 1), from lnf in BF16 storage with a->head16 (the product's bits:
     * the forward reads it in place, the backward's weight gradient as stored) */
    const act lnf_out = a->head16 ? (act){NULL, a->lnf16} : (act){a->lnf, NULL};
    ln_forward(m, lnf_out, a->lnf, a->lnf_mean, a->lnf_rstd, x, param(m, lnf), param(m, lnf + 1),
               BT, C);
    product_to(m, (act){a->logits, NULL}, NULL, lnf_out, param(m, m->i_wte), NULL, BT, C, Vl);
    if (!targets) return NULL;
    const float l = gpt_head_loss(m, a, targets, BT, m->loss_grad_scale / (float)BT, want_grad);
    a->have_grad = want_grad;
    if (loss) *loss = l;
    return NULL;
}

static void gpt_embed_forward(const gpt_model *m, float *out, const int32_t *inputs,
                              const float *wte, const float *wpe, int B, int T)
{
    const int C = m->shape.n_embd, Vl = m->shape.vocab_size / m->tp_size;
    if (m->tp_size > 1) {
        /* Vocabulary-parallel: each shard adds the rows it holds (and rank 0 the
         * positions); the sum over the shards is the embedding. */
        m->be->encoder_forward_shard(out, inputs, wte, m->tp_rank == 0 ? wpe : NULL, B, T, C,
                                     m->tp_rank * Vl, Vl);
        tp_sum(m, out, (size_t)B * (size_t)T * (size_t)C);
    } else {
        m->be->encoder_forward(out, inputs, wte, wpe, B, T, C);
    }
}

static void gpt_embed_backward(const gpt_model *m, float *dwte, float *dwpe,
                               const float *dout, const int32_t *inputs, int B, int T)
{
    const int C = m->shape.n_embd, Vl = m->shape.vocab_size / m->tp_size;
    if (m->tp_size > 1)
        m->be->encoder_backward_shard(dwte, dwpe, dout, inputs, B, T, C, m->tp_rank * Vl, Vl);
    else
        m->be->encoder_backward(dwte, dwpe, dout, inputs, B, T, C);
}

static float gpt_head_loss(const gpt_model *m, gpt_acts *a, const int32_t *targets,
                           size_t BT, float dscale, int want_grad)
{
    const gt_backend *be = m->be;
    const int V = m->shape.vocab_size, Vl = V / m->tp_size, v0 = m->tp_rank * Vl;
    float *losses = a->losses, *logits = a->logits, *xmax = a->xmax, *xsums = a->xsums;
    if (want_grad && a->head16) {
        m->acts16->crossentropy_forward_backward16(losses, logits, a->xent_scratch, m->threads,
                                                   targets, BT, V, dscale);
    } else if (m->tp_size > 1) {
        /* Softmax over the shards' columns: their row maxima, then the sums of
         * exponentials and the target logits, combined across the shards. */
        be->xent_shard_max(xmax, logits, BT, Vl);
        m->tp_allreduce_max(m->tp_ctx, xmax, BT);
        be->xent_shard_sums(xsums, logits, targets, xmax, BT, Vl, v0);
        tp_sum(m, xsums, 2 * BT);
        be->xent_shard_finish(losses, logits, targets, xmax, xsums, BT, Vl, v0, dscale,
                              want_grad);
    } else if (want_grad) {
        be->crossentropy_forward_backward(losses, logits, targets, BT, V, dscale);
    } else {
        be->crossentropy_forward(losses, logits, targets, BT, V);
    }
    double sum = 0.0; /* fixed order: the same bits for the same inputs */
    for (size_t i = 0; i < BT; i++) sum += losses[i];
    return (float)(sum / (double)BT);
}

static void gpt_head_backward(const gpt_model *m, const gpt_acts *a, float *dlnf, float *dwte,
                              const float *wte, size_t BT)
{
    const int C = m->shape.n_embd, Vl = m->shape.vocab_size / m->tp_size;
    const size_t BTC = BT * (size_t)C;
    if (a->head16) { /* dlogits' rows in BF16 at the start of the FP32 rows: 2 Vl apart */
        m->acts16->matmul_backward_dout16(dlnf, dwte, NULL, (const uint16_t *)(void *)a->logits,
                                          2 * (size_t)Vl, a->lnf16, wte, BT, C, Vl);
        return;
    }
    m->be->matmul_backward(dlnf, dwte, NULL, a->logits, a->lnf, wte, BT, C, Vl);
    tp_sum(m, dlnf, BTC); /* each shard's columns' part of d lnf */
}

const float *gpt_logits(const gpt_model *m) { return m->acts->logits; }

/* x[0..n) = 0, split over the threads past 16 MB: one core's memset is bound by what one
 * core can write (the 124M shape's 0.5 GB of gradients: 41 ms on one core, 21 on two);
 * below, a parallel region's barrier costs more than it saves (and one more barrier is
 * one more wait when another process takes a core). Past 16 MB the stores go past the
 * caches (gt_zero_streamed): such a buffer (the gradients) is not all read soon, and
 * its lines are then not read for ownership (L6 C384 on Zen 4: 1.6 -> 0.6 ms a step) */
static void zero_floats(float *x, size_t n)
{
    enum { CHUNK = 1 << 18, PAR_CHUNKS = 16 }; /* floats: 1 MB; 16 MB */
    const size_t chunks = (n + CHUNK - 1) / CHUNK;
    if (chunks <= PAR_CHUNKS) { /* no region at all (an if clause still makes one) */
        memset(x, 0, n * sizeof *x);
        return;
    }
#pragma omp parallel for schedule(static)
    for (size_t c = 0; c < chunks; c++)
        gt_zero_streamed(x + c * CHUNK, n - c * CHUNK < CHUNK ? n - c * CHUNK : CHUNK);
}

void gpt_zero_grad(gpt_model *m)
{
    zero_floats(m->bound_grads ? m->bound_grads : m->grads, m->n_params);
}

/* With GELU's slope in BF16 storage (m->gelu_slope_kept), the backward keeps dfch in BF16
 * storage too, in dfch's own memory (FP32 scratch of the forward, free in the
 * backward): the MLP's c_fc products read nothing else of it */
static uint16_t *dfch16(gpt_acts *a) { return (uint16_t *)(void *)a->dfch; }
/* The attention's backward leaves d q|k|v in BF16 storage (the backward's inexact set,
 * backend.h) in the same memory, free again between the MLP's c_fc backward and the
 * next layer's c_proj backward (BT x 3Cl BF16 values in BT x 4Cl floats) */
static uint16_t *dqkv16(gpt_acts *a) { return (uint16_t *)(void *)a->dfch; }

/* A LayerNorm's backward into dres (+=), and with the backward's inexact set (dres16)
 * dres's BF16 copy too, which the next products read: returns it, or NULL */
static const uint16_t *ln_backward(const gpt_model *m, gpt_acts *a, float *dw, float *db,
                                   const float *inp, const float *w, const float *mean,
                                   const float *rstd, size_t BT, int C)
{
    if (a->dres16) {
        m->acts16->layernorm_backward(a->dres, a->dres16, dw, db, a->dln, inp, w, mean, rstd,
                                      a->ln_scratch, BT, C);
        return a->dres16;
    }
    m->be->layernorm_backward(a->dres, dw, db, a->dln, inp, w, mean, rstd, a->ln_scratch, BT,
                              C);
    return NULL;
}

/* The MLP's c_proj backward with GELU's: dfch = gelu'(fch) (dres @ w) and c_proj's dw,
 * dbias. From the layer's GELU output and slope the forward kept in BF16
 * (m->gelu_slope_kept: one multiply a value); else from fch, c_proj's input gelu(fch)
 * computed again (the forward's bits) by the backend, where it can in the pass that
 * takes GELU's backward, one sigmoid for both. */
static void gelu_proj_backward(const gpt_model *m, gpt_acts *a, const float *fch,
                               const uint16_t *gelu16, const uint16_t *slope16,
                               const uint16_t *dres16, float *dw, float *dbias, const float *w,
                               size_t BT, int H, int C)
{
    const gt_backend *be = m->be;
    if (slope16) {
        m->acts16->matmul_backward_gelu(dfch16(a), a->dfch_gelu, dw, dbias, a->dres, dres16,
                                        gelu16, w, slope16, BT, H, C);
        return;
    }
    be->matmul_backward_gelu(a->dfch, a->dfch_gelu, dw, dbias, a->dres, a->fch_gelu, w, fch, BT,
                             H, C);
}

void gpt_backward(gpt_model *m) { gpt_stage_backward(m, NULL); }

const float *gpt_stage_backward(gpt_model *m, const float *dout)
{
    gpt_acts *a = m->acts;
    const gt_backend *be = m->be;
    if (!a->have_grad) {
        /* A programming error, not a user error: be loud. */
        gt_error("internal: gpt_backward without a training forward");
        abort();
    }
    const int B = a->B, T = a->T, C = m->shape.n_embd, NH = m->shape.n_head,
              L = m->n_layers;
    const size_t BT = (size_t)B * (size_t)T, BTC = BT * (size_t)C;
    const int Cl = C / m->tp_size, NHl = NH / m->tp_size; /* this shard's part */
    const size_t BTCl = BT * (size_t)Cl;
    const size_t att_per_layer = be->attention_saved_floats(B, NHl, T);
    /* dres's BF16 copy where the last LayerNorm backward made one (NULL: none; the
     * products then read dres) */
    const uint16_t *dres16 = NULL;
    if (m->has_head) {
        /* Head: logits already hold d loss / d logits. */
        const int lnf = m->i_lnf;
        gpt_head_backward(m, a, a->dln, grad(m, m->i_wte), param(m, m->i_wte), BT);
        /* A last stage's own wte copy is final now (last in its layout). */
        if (!m->has_embed) grads_ready(m, m->i_wte, m->i_wte);
        zero_floats(a->dres, BTC);
        const float *last = a->residual3 + (size_t)(L - 1) * BTC;
        dres16 = ln_backward(m, a, grad(m, lnf), grad(m, lnf + 1), last, param(m, lnf),
                             a->lnf_mean, a->lnf_rstd, BT, C);
        grads_ready(m, lnf, lnf + 1);
    } else {
        memcpy(a->dres, dout, BTC * sizeof(float));
    }

    /* Blocks in reverse. dres always holds d loss / d (residual stream) at the point
     * being differentiated; the skip connections make it flow through unchanged while
     * each branch adds its contribution. */
    for (int l = L - 1; l >= 0; l--) {
        const float *x = l == 0 ? a->encoded : a->residual3 + (size_t)(l - 1) * BTC;
        const act ln1 = layer_act(a->ln1, a->ln1_16, l, BTC),
                  qkv = layer_act(a->qkv, a->qkv16, l, 3 * BTCl),
                  atty = layer_act(a->atty, a->atty16, l, BTCl),
                  ln2 = layer_act(a->ln2, a->ln2_16, l, BTC);
        float *ln1_mean = a->ln1_mean + l * BT, *ln1_rstd = a->ln1_rstd + l * BT,
              *att = a->att + l * att_per_layer, *res2 = a->residual2 + l * BTC,
              *ln2_mean = a->ln2_mean + l * BT, *ln2_rstd = a->ln2_rstd + l * BT,
              *fch = a->fch ? a->fch + l * 4 * BTCl : NULL;
        /* with m->gelu_slope_kept the layer's GELU slope and output (else fch) */
        const uint16_t *slope16 = a->gelu_slope16 ? a->gelu_slope16 + l * 4 * BTCl : NULL,
                       *gelu16 = slope16 ? gelu16_of(m, a, l, BTCl) : NULL;
        /* MLP branch: res3 = res2 + fcproj(gelu(fc(ln2(res2)))). With tensor
         * parallelism dres is whole on every shard, so the row-parallel c_proj's bias
         * gradient is too; the column-parallel c_fc's input gradient is a partial sum. */
        gelu_proj_backward(m, a, fch, gelu16, slope16, dres16,
                           grad(m, layer_idx(m, l, GPT_FCPROJ_W)),
                           grad(m, layer_idx(m, l, GPT_FCPROJ_B)),
                           param(m, layer_idx(m, l, GPT_FCPROJ_W)), BT, 4 * Cl, C);
        grads_ready(m, layer_idx(m, l, GPT_FCPROJ_W), layer_idx(m, l, GPT_FCPROJ_B));
        /* with slope16, gelu_proj_backward left dfch in BF16 storage only */
        product_backward(m, a->dln, grad(m, layer_idx(m, l, GPT_FC_W)),
                         grad(m, layer_idx(m, l, GPT_FC_B)), a->dfch, slope16 ? dfch16(a) : NULL,
                         ln2, param(m, layer_idx(m, l, GPT_FC_W)), BT, C, 4 * Cl);
        tp_sum(m, a->dln, BTC);
        grads_ready(m, layer_idx(m, l, GPT_FC_W), layer_idx(m, l, GPT_FC_B));
        dres16 = ln_backward(m, a, grad(m, layer_idx(m, l, GPT_LN2_W)),
                             grad(m, layer_idx(m, l, GPT_LN2_B)), res2,
                             param(m, layer_idx(m, l, GPT_LN2_W)), ln2_mean, ln2_rstd, BT, C);
        grads_ready(m, layer_idx(m, l, GPT_LN2_W), layer_idx(m, l, GPT_LN2_B));
        /* Attention branch: res2 = x + attproj(attn(qkv(ln1(x)))). dln doubles as the
         * gradient of the attention output. */
        product_backward(m, a->dln, grad(m, layer_idx(m, l, GPT_ATTPROJ_W)),
                         grad(m, layer_idx(m, l, GPT_ATTPROJ_B)), a->dres, dres16, atty,
                         param(m, layer_idx(m, l, GPT_ATTPROJ_W)), BT, Cl, C);
        grads_ready(m, layer_idx(m, l, GPT_ATTPROJ_W), layer_idx(m, l, GPT_ATTPROJ_B));
        /* with the inexact set, d q|k|v in BF16 storage alone (dqkv is then not
         * written), which the products below read as they read ln1 in BF16 storage */
        uint16_t *const dqkv_16 = a->dres16 && qkv.h && ln1.h ? dqkv16(a) : NULL;
        if (qkv.h)
            m->acts16->attention_backward(a->dqkv, dqkv_16, a->dln, qkv.h, att, a->att_scratch,
                                          m->threads, B, T, Cl, NHl);
        else
            be->attention_backward(a->dqkv, a->dln, qkv.f, att, a->att_scratch, m->threads, B,
                                   T, Cl, NHl);
        product_backward(m, a->dln, grad(m, layer_idx(m, l, GPT_QKV_W)),
                         grad(m, layer_idx(m, l, GPT_QKV_B)), a->dqkv, dqkv_16, ln1,
                         param(m, layer_idx(m, l, GPT_QKV_W)), BT, C, 3 * Cl);
        tp_sum(m, a->dln, BTC);
        /* The key bias adds q.b_k to every score of a query's row, and softmax ignores
         * what a row shares: its gradient is exactly zero, and what the sum above left
         * there is rounding alone, which AdamW would blow up into lr-sized steps (and
         * runs that differ only in summation order, e.g. over ranks, into different
         * models). */
        memset(grad(m, layer_idx(m, l, GPT_QKV_B)) + Cl, 0, Cl * sizeof(float));
        grads_ready(m, layer_idx(m, l, GPT_QKV_W), layer_idx(m, l, GPT_QKV_B));
        dres16 = ln_backward(m, a, grad(m, layer_idx(m, l, GPT_LN1_W)),
                             grad(m, layer_idx(m, l, GPT_LN1_B)), x,
                             param(m, layer_idx(m, l, GPT_LN1_W)), ln1_mean, ln1_rstd, BT, C);
        grads_ready(m, layer_idx(m, l, GPT_LN1_W), layer_idx(m, l, GPT_LN1_B));
    }
    if (!m->has_embed) return a->dres; /* d loss / d (this stage's input) */
    gpt_embed_backward(m, grad(m, m->i_wte), grad(m, m->i_wpe), a->dres, a->inputs, B, T);
    grads_ready(m, m->i_wte, m->i_wpe);
    return NULL;
}
