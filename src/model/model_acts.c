/* model_acts — the activation slots of a model (model.h: gpt_alloc_act_slots): for one
 * B x T on this part's blocks, every buffer the passes keep or use as scratch, carved
 * out of one allocation; their shapes are model_internal.h's. */
#define GT_MODEL_MODULE /* may include model_internal.h */
#include <stdlib.h>

#include "model_internal.h"
#include "util.h"

static void free_acts(gpt_acts *a)
{
    if (!a) return;
    free(a->block);
    free(a);
}

void gpt_free_act_slots(gpt_model *m)
{
    for (int i = 0; i < m->n_act_slots; i++) free_acts(m->act_slots[i]);
    free(m->act_slots);
    m->act_slots = NULL;
    m->n_act_slots = 0;
    m->acts = NULL;
}

/* One slot of activations for B x T on this stage's blocks; NULL (reported). */
static gpt_acts *make_acts(const gpt_model *m, int B, int T)
{
    /* Tensors inside the split layers hold this shard's heads / hidden units only. */
    const size_t L = (size_t)m->n_layers, C = (size_t)m->shape.n_embd,
                 NH = (size_t)m->shape.n_head / (size_t)m->tp_size,
                 V = (size_t)m->shape.vocab_size, Cl = C / (size_t)m->tp_size;
    const size_t BT = (size_t)B * (size_t)T;
    gpt_acts *a = gt_calloc(sizeof *a, "activation table");
    if (!a) return NULL;
    /* With BF16 storage, four activations are BF16 arrays (below) instead of floats
     * (five with the pre-activation, whose GELU then needs no FP32 copy) */
    const size_t f32 = m->acts16 ? 0 : 1, fch32 = m->gelu_slope_kept ? 0 : 1;
    /* The head on BF16 storage too (one shard: the vocabulary-parallel loss keeps FP32) */
    const int head16 = m->acts16 && m->has_head && m->tp_size == 1;
    a->head16 = head16;

    /* Two passes over the same list: count, then carve. */
    float **slots[] = {
        &a->encoded, &a->ln1, &a->ln1_mean, &a->ln1_rstd, &a->qkv, &a->atty, &a->att,
        &a->attproj, &a->residual2, &a->ln2, &a->ln2_mean, &a->ln2_rstd, &a->fch,
        &a->fch_gelu, &a->fcproj, &a->residual3, &a->lnf, &a->lnf_mean, &a->lnf_rstd,
        &a->logits, &a->losses, &a->dres, &a->dln, &a->dqkv, &a->dfch, &a->dfch_gelu,
        &a->att_scratch, &a->xmax, &a->xsums, &a->xent_scratch, &a->ln_scratch,
    };
    const size_t sizes[] = {
        BT * C, f32 * L * BT * C, L * BT, L * BT, f32 * L * BT * 3 * Cl, f32 * L * BT * Cl,
        L * m->be->attention_saved_floats(B, (int)NH, T), BT * C, L * BT * C, f32 * L * BT * C,
        L * BT, L * BT, fch32 * L * BT * 4 * Cl, fch32 * BT * 4 * Cl, BT * C, L * BT * C, BT * C,
        BT, BT, m->has_head ? BT * V / (size_t)m->tp_size : 0, BT, BT * C, BT * C,
        BT * 3 * Cl, BT * 4 * Cl, BT * 4 * Cl,
        m->be->attention_scratch_floats(T, (int)(C / (size_t)m->shape.n_head), m->threads),
        BT, 2 * BT, head16 ? (size_t)m->threads * V : 0,
        m->be->layernorm_scratch_floats(BT, (int)C),
    };
    const size_t nslots = sizeof sizes / sizeof sizes[0];
    uint16_t **halves[] = {&a->ln1_16, &a->ln2_16, &a->qkv16, &a->atty16, &a->gelu16,
                           &a->lnf16, &a->gelu_slope16, &a->dres16};
    const size_t nhalves = m->acts16 ? (m->gelu_slope_kept ? 8 : 6) : 0,
                 half_sizes[] = {L * BT * C, L * BT * C, L * BT * 3 * Cl, L * BT * Cl,
                                 (m->gelu_slope_kept ? L : 1) * BT * 4 * Cl, head16 ? BT * C : 0,
                                 L * BT * 4 * Cl, BT * C};
    /* The same sum in floating point first: batch_size and block_size come from the
     * user, and their products must not wrap around in size_t. */
    const double Ld = (double)L, BTd = (double)B * T;
    const double att_saved = (double)B * NH * (double)m->be->attention_saved_floats(1, 1, T);
    const double need = 4.0 * (Ld * BTd * (16.0 * C + 12.0 * Cl) + Ld * att_saved +
                               BTd * (V + 16.0 * C));
    if (!(need < 0x1p50)) {
        gt_error("activations for batch_size %d x block_size %d of this model would need "
                 "%.3g bytes: too large (lower batch_size, block_size or use pp)", B, T, need);
        free(a);
        return NULL;
    }
    size_t total = 0;
    for (size_t i = 0; i < nslots; i++) total += (sizes[i] + 15) & ~(size_t)15;
    for (size_t i = 0; i < nhalves; i++) total += (half_sizes[i] / 2 + 16) & ~(size_t)15;
    total += (BT * sizeof(int32_t) + 63) / sizeof(float);
    a->block = gt_malloc(total * sizeof(float), "activations");
    if (!a->block) {
        free(a);
        return NULL;
    }
    float *p = a->block;
    for (size_t i = 0; i < nslots; i++) {
        *slots[i] = sizes[i] ? p : NULL;
        p += (sizes[i] + 15) & ~(size_t)15; /* keep every buffer 64-byte aligned */
    }
    for (size_t i = 0; i < nhalves; i++) {
        *halves[i] = (uint16_t *)(void *)p;
        p += (half_sizes[i] / 2 + 16) & ~(size_t)15;
    }
    a->inputs = (int32_t *)p;
    return a;
}

int gpt_alloc_act_slots(gpt_model *m, int B, int T, int n)
{
    if (T > m->shape.block_size) {
        gt_error("sequence length %d exceeds block_size %d", T, m->shape.block_size);
        return -1;
    }
    if (n < 1) n = 1;
    if (m->act_slots && B <= m->act_B && T <= m->act_T && n <= m->n_act_slots) return 0;
    /* Size for the larger of the old and new request so alternating shapes settle. */
    if (B < m->act_B) B = m->act_B;
    if (T < m->act_T) T = m->act_T;
    if (n < m->n_act_slots) n = m->n_act_slots;
    gpt_free_act_slots(m);
    m->act_slots = gt_calloc(sizeof *m->act_slots * (size_t)n, "activation slots");
    if (!m->act_slots) return -1;
    m->n_act_slots = n;
    for (int i = 0; i < n; i++)
        if (!(m->act_slots[i] = make_acts(m, B, T))) {
            gpt_free_act_slots(m);
            return -1;
        }
    m->acts = m->act_slots[0];
    m->act_B = B;
    m->act_T = T;
    return 0;
}

int gpt_alloc_acts(gpt_model *m, int B, int T) { return gpt_alloc_act_slots(m, B, T, 1); }

void gpt_use_act_slot(gpt_model *m, int slot) { m->acts = m->act_slots[slot]; }
