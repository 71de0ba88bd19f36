/* model_internal — what the files of the model give each other (internal to
 * src/model/; model.h is the public contract):
 *   model.c        the passes: forward and backward, the embedding and the head
 *   model_build.c  a model, shard or stage made from its shape: the parameter table,
 *                  the initial weights, shard copies, the counts the planner reads
 *   model_acts.c   the activation slots: per (B,T), one allocation carved in parts */
#ifndef GT_MODEL_INTERNAL_H
#define GT_MODEL_INTERNAL_H

#ifndef GT_MODEL_MODULE
#error "model_internal.h is internal to src/model/ (elsewhere: model.h)"
#endif
#include <stddef.h>
#include <stdint.h>

#include "model.h"

/* Activations of one (B,T), all carved out of one allocation. Shapes in comments. */
struct gpt_acts {
    float *block;           /* the allocation */
    int32_t *inputs;        /* [B,T] copy of the last forward's tokens */
    float *encoded;         /* [B,T,C] */
    float *ln1, *ln1_mean, *ln1_rstd;   /* [L,B,T,C] [L,B,T] [L,B,T] */
    /* Cl = C / tp, NHl = NH / tp: this tensor-parallel shard's part (model.h). */
    float *qkv;             /* [L,B,T,3Cl] */
    float *atty;            /* [L,B,T,Cl] attention output before the projection */
    float *att;             /* [L, attention_saved_floats(B,NHl,T)]: what the backend's
                             * attention keeps for its backward (backend.h) */
    float *attproj;         /* [B,T,C] a projection before its residual add: the
                             * backward never reads it, so one for every layer (and
                             * unused where the backend fuses the add) */
    float *residual2;       /* [L,B,T,C] after the attention branch */
    float *ln2, *ln2_mean, *ln2_rstd;   /* [L,B,T,C] [L,B,T] [L,B,T] */
    float *fch;             /* [L,B,T,4Cl] */
    float *fch_gelu;        /* [B,T,4Cl] one layer's gelu(fch): the backward computes
                             * it again from fch (one elementwise pass) instead of
                             * keeping L of them, the largest activation there is
                             * (NULL with m->gelu_slope_kept: gelu16 below takes its
                             * place) */
    float *fcproj;          /* [B,T,C] the same for the MLP's projection */
    float *residual3;       /* [L,B,T,C] block outputs */
    /* With BF16 storage (m->acts16): ln1, ln2, qkv and atty kept here instead, in BF16,
     * and not as floats (the FP32 rows pass through dln and dqkv, free in a forward) */
    uint16_t *ln1_16, *ln2_16;  /* [L,B,T,C] */
    uint16_t *qkv16;            /* [L,B,T,3Cl] */
    uint16_t *atty16;           /* [L,B,T,Cl] */
    uint16_t *gelu_slope16;     /* [L,B,T,4Cl] instead of fch with m->gelu_slope_kept:
                                 * GELU's slope at the pre-activation, all its backward
                                 * needs of it (the FP32 rows pass through dfch) */
    uint16_t *gelu16;           /* fch_gelu's role, in BF16 (in the forward always): with
                                 * m->gelu_slope_kept [L,B,T,4Cl], each layer's kept for
                                 * c_proj's weight gradient, else [B,T,4Cl] */
    float *lnf, *lnf_mean, *lnf_rstd;   /* [B,T,C] [B,T] [B,T] */
    uint16_t *lnf16;        /* [B,T,C]: with head16, lnf in BF16 storage (lnf: scratch) */
    float *xent_scratch;    /* with head16: a row of V/tp floats per thread */
    float *logits;          /* [B,T,V/tp]; after a training forward: d loss / d logits
                             * (with head16 in BF16 storage, rows 2V/tp apart) */
    float *xmax, *xsums;    /* [B,T], [2,B,T]: vocabulary-parallel loss (tp > 1) */
    float *losses;          /* [B,T] */
    /* backward scratch, reused by every layer */
    float *dres;            /* [B,T,C] gradient of the residual stream */
    float *dln;             /* [B,T,C] gradient of a LayerNorm output / attention out */
    float *dqkv;            /* [B,T,3Cl] */
    float *dfch, *dfch_gelu;/* [B,T,4Cl] each (with m->gelu_slope_kept, dfch holds BF16:
                             * dfch16, and in the attention's backward d q|k|v's copy:
                             * dqkv16) */
    uint16_t *dres16;       /* [B,T,C] with m->gelu_slope_kept: dres's BF16 copy, made by
                             * each LayerNorm's backward for the products that read it
                             * next */
    float *att_scratch;     /* attention_scratch_floats(T, hs, threads), both passes */
    float *ln_scratch;      /* layernorm_scratch_floats(B T, C): each LayerNorm backward */
    int B, T;               /* shape of the last forward */
    int have_grad;          /* last forward left d loss / d logits in logits */
    int head16;             /* the head's products read lnf16, and a training forward
                             * leaves d loss / d logits in BF16 storage, in place
                             * (crossentropy_forward_backward16) */
};

/* Table index of tensor k of local block l (the stage's l-th block). */
static inline int layer_idx(const gpt_model *m, int l, int k)
{
    return m->i_first + GPT_PER_LAYER * l + k;
}

/* Frees every activation slot of m (none is in use afterwards). */
void gpt_free_act_slots(gpt_model *m);

#endif
