/* model_build — a model, a tensor-parallel shard or a pipeline stage made from its
 * shape (model.h): the parameter table (layout.c's layout) with each tensor's place in
 * the whole model, GPT-2's initial weights (a part takes its share of the whole
 * model's), copies between a shard and the whole, and the counts that the planner and
 * the optimizer read. */
#define GT_MODEL_MODULE /* may include model_internal.h */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model_internal.h"
#include "rng.h"
#include "util.h"

int gpt_create(gpt_model *m, gpt_shape s, const gt_backend *be, int threads)
{
    return gpt_create_tp(m, s, be, threads, 1, 0);
}

int gpt_create_tp(gpt_model *m, gpt_shape s, const gt_backend *be, int threads,
                  int tp_size, int tp_rank)
{
    return gpt_create_stage(m, s, be, threads, tp_size, tp_rank, 0, 1);
}

/* Fills m->info (allocated here), m->n_params and the table indices from m's shape,
 * tp and stage: the layout is layout.c's. */
static int build_info(gpt_model *m)
{
    const gpt_part part = {.tp_size = m->tp_size, .layer0 = m->layer0,
                           .n_layers = m->n_layers, .has_embed = m->has_embed,
                           .has_head = m->has_head};
    gpt_layout lay;
    if (gpt_layout_make(m->shape, part, &lay) != 0) return -1;
    m->info = lay.info;
    m->n_info = lay.n_info;
    m->n_params = lay.n_params;
    m->i_wte = lay.i_wte;
    m->i_wpe = lay.i_wpe;
    m->i_first = lay.i_first;
    m->i_lnf = lay.i_lnf;
    return 0;
}

/* The parameter table (info, n_info, n_params) of the whole model of shape s (tp = 1,
 * every layer) in a bare *whole: nothing else of it is made (free whole->info). */
static int whole_info(gpt_model *whole, gpt_shape s)
{
    memset(whole, 0, sizeof *whole);
    whole->shape = s;
    whole->tp_size = 1;
    whole->n_layers = s.n_layer;
    whole->has_embed = whole->has_head = 1;
    return build_info(whole);
}

int gpt_create_stage(gpt_model *m, gpt_shape s, const gt_backend *be, int threads,
                     int tp_size, int tp_rank, int stage, int n_stages)
{
    memset(m, 0, sizeof *m);
    char why[256];
    if (gpt_shape_check(s, why, sizeof why) != 0) {
        gt_error("%s", why);
        return -1;
    }
    if (tp_size < 1 || tp_rank < 0 || tp_rank >= tp_size || s.n_head % tp_size != 0) {
        gt_error("tp = %d must divide n_head = %d (each rank takes whole heads)", tp_size,
                 s.n_head);
        return -1;
    }
    if (s.vocab_size % tp_size != 0) {
        gt_error("tp = %d must divide vocab_size = %d (each rank takes a share of the "
                 "vocabulary; pad it, e.g. to a multiple of 128)", tp_size, s.vocab_size);
        return -1;
    }
    if (n_stages < 1 || n_stages > s.n_layer || stage < 0 || stage >= n_stages) {
        gt_error("pipeline stage %d of %d is impossible with n_layer = %d (each stage "
                 "needs a layer)", stage, n_stages, s.n_layer);
        return -1;
    }
    m->tp_size = tp_size;
    m->tp_rank = tp_rank;
    /* Contiguous layers, the first n_layer % n_stages stages one more. */
    const int base = s.n_layer / n_stages, extra = s.n_layer % n_stages;
    m->layer0 = stage * base + (stage < extra ? stage : extra);
    m->n_layers = base + (stage < extra ? 1 : 0);
    m->has_embed = stage == 0;
    m->has_head = stage == n_stages - 1;
    m->shape = s;
    m->be = be;
    /* GENTRAIN_BF16_ACTS (tests, measurements): "0" every activation FP32, "exact" the
     * exact set only (no fch, and so no BF16 dfch), else all */
    const char *keep = getenv("GENTRAIN_BF16_ACTS");
    m->acts16 = !be || (keep && strcmp(keep, "0") == 0) ? NULL : be->bf16_acts;
    m->gelu_slope_kept = m->acts16 && !(keep && strcmp(keep, "exact") == 0);
    m->threads = threads > 0 ? threads : 1;
    m->loss_grad_scale = 1.0f;
    if (build_info(m) != 0) return -1;

    /* Where each tensor sits in the whole model's buffer (tp = 1, every layer). */
    gpt_model whole;
    if (whole_info(&whole, s) != 0) {
        gpt_free(m);
        return -1;
    }
    /* The part's tensors come in the whole model's order (but for a last stage's own
     * wte copy, at its end): one forward walk finds them, a full search only when the
     * walk misses (a quadratic search took minutes at thousands of layers). */
    for (int i = 0, j = 0; i < m->n_info; i++) {
        int k = j;
        while (k < whole.n_info && strcmp(m->info[i].name, whole.info[k].name) != 0) k++;
        if (k == whole.n_info)
            for (k = 0; k < whole.n_info && strcmp(m->info[i].name, whole.info[k].name); k++)
                ;
        if (k < whole.n_info) {
            m->info[i].whole_offset = whole.info[k].offset;
            j = k + 1;
        }
    }
    m->n_whole = whole.n_params;
    free(whole.info);

    m->params = gt_malloc(m->n_params * sizeof(float), "model parameters");
    if (!m->params) {
        gpt_free(m);
        return -1;
    }
    return 0;
}

size_t gpt_full_params(const gpt_model *m) { return m->n_whole; }

void gpt_shard_copy(const gpt_model *m, int tp_rank, float *full, float *shard, int to_full)
{
    const size_t tp = (size_t)m->tp_size, r = (size_t)tp_rank;
    for (int i = 0; i < m->n_info; i++) {
        const gpt_param_info *p = &m->info[i];
        float *f = full + p->whole_offset, *s = shard + p->offset;
        /* Runs of `len` floats: the k-th at s + k*len and f + k*stride + start. */
        size_t runs = 1, len = p->numel, stride = 0, start = 0;
        switch (p->split) {
        case GPT_SPLIT_NONE: break;
        case GPT_SPLIT_ROWS: start = r * p->numel; break;
        case GPT_SPLIT_QKV_ROWS: /* q, k, v thirds, each cut by rows */
            runs = 3;
            len = p->numel / 3;
            stride = len * tp;
            start = r * len;
            break;
        case GPT_SPLIT_COLS: /* every row cut by columns */
            runs = (size_t)p->shape[0];
            len = (size_t)p->shape[1];
            stride = len * tp;
            start = r * len;
            break;
        }
        for (size_t k = 0; k < runs; k++) {
            float *fk = f + k * stride + start, *sk = s + k * len;
            memcpy(to_full ? fk : sk, to_full ? sk : fk, len * sizeof(float));
        }
    }
}

int gpt_init_weights(gpt_model *m, uint64_t seed)
{
    if (m->tp_size > 1 || !m->has_embed || !m->has_head) {
        /* A shard or stage takes its part of the whole model's initialisation, so any
         * grid starts from the weights one process would (memory: one whole copy,
         * briefly). */
        gpt_model full;
        if (gpt_create(&full, m->shape, m->be, m->threads) != 0) return -1;
        gpt_init_weights(&full, seed);
        gpt_shard_copy(m, m->tp_rank, full.params, m->params, 0);
        gpt_free(&full);
        return 0;
    }
    rng r;
    rng_seed(&r, seed);
    const float std = 0.02f;
    const float proj_std = std / sqrtf(2.0f * (float)m->shape.n_layer);
    for (int i = 0; i < m->n_info; i++) {
        const gpt_param_info *p = &m->info[i];
        float *w = m->params + p->offset;
        const char *dot = strrchr(p->name, '.');
        int is_bias = dot && strcmp(dot, ".bias") == 0;
        int is_ln = strstr(p->name, "ln_") != NULL;
        if (is_bias) {
            memset(w, 0, p->numel * sizeof(float));
        } else if (is_ln) {
            for (size_t j = 0; j < p->numel; j++) w[j] = 1.0f;
        } else {
            /* Residual projections are scaled so the residual stream's variance does not
             * grow with depth (GPT-2). */
            int is_proj = strstr(p->name, "c_proj.weight") != NULL;
            float sd = is_proj ? proj_std : std;
            for (size_t j = 0; j < p->numel; j++) w[j] = sd * rng_normal(&r);
        }
    }
    return 0;
}

int gpt_alloc_grads(gpt_model *m)
{
    if (m->grads) return 0;
    m->grads = gt_calloc(m->n_params * sizeof(float), "parameter gradients");
    return m->grads ? 0 : -1;
}

void gpt_free(gpt_model *m)
{
    gpt_free_act_slots(m);
    free(m->params);
    free(m->grads);
    free(m->info);
    memset(m, 0, sizeof *m);
}

int gpt_product_matrices(const gpt_model *m, int *idx, int cap)
{
    static const int per_layer[] = {GPT_QKV_W, GPT_ATTPROJ_W, GPT_FC_W, GPT_FCPROJ_W};
    int n = 0;
    for (int l = 0; l < m->n_layers; l++)
        for (size_t k = 0; k < sizeof per_layer / sizeof per_layer[0]; k++, n++)
            if (n < cap) idx[n] = layer_idx(m, l, per_layer[k]);
    if (m->has_head && m->i_wte >= 0) {
        if (n < cap) idx[n] = m->i_wte;
        n++;
    }
    return n;
}

double gpt_flops_per_step(const gpt_shape *s, int B, int T)
{
    const double N = (double)B * T, C = s->n_embd, L = s->n_layer, V = s->vocab_size;
    /* Forward: 2 flops per multiply-add. Per block: qkv 3C^2, proj C^2, fc 4C^2,
     * fc proj 4C^2 per token, plus q k^T and att v over the full T x T, as MFU is
     * usually counted (PaLM, nanoGPT): the kernels skip the masked half and the CPU's
     * backward computes q k^T again, 7 T^2 / 2 products per head in all against 6 T^2
     * here, so the figure is the convention's, not the instructions run.
     * Backward costs twice the forward for both. */
    double matmul = 2.0 * N * (12.0 * C * C * L + C * V);
    double attention = 2.0 * 2.0 * (double)B * T * T * C * L;
    return 3.0 * (matmul + attention);
}

int gpt_tensor_table(const gpt_model *m, gt_tensor_table *out)
{
    if (gpt_layout_table(m->info, m->n_info, out) != 0) return -1;
    if (out->total != m->n_params) {
        gt_error("parameter table: %zu floats, the model has %zu", out->total, m->n_params);
        gt_tensor_table_free(out);
        return -1;
    }
    return 0;
}

int gpt_find_param(const gpt_model *m, const char *name)
{
    for (int i = 0; i < m->n_info; i++)
        if (strcmp(m->info[i].name, name) == 0) return i;
    return -1;
}
