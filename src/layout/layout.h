/* layout — the shape of a GPT-2 model and where each of its tensors lives.
 *
 * The one place that knows the parameter layout: the model (model.h) builds its
 * parameter table from it, the file formats (io/) get the tensors of a shape from it
 * without ever seeing a model. All parameters live in one flat FP32 buffer, per layer
 * and contiguous, so a pipeline stage is one slice:
 *   wte[V,C] wpe[maxT,C] | per layer: ln_1.w ln_1.b attn.c_attn.w[3C,C] .b[3C]
 *   attn.c_proj.w[C,C] .b[C] ln_2.w ln_2.b mlp.c_fc.w[4C,C] .b[4C] mlp.c_proj.w[C,4C]
 *   .b[C] | ln_f.w ln_f.b
 * A part of the model (a tensor-parallel shard, a pipeline stage) is laid out the same
 * way with its own tensors and the shard's shapes. */
#ifndef GT_LAYOUT_H
#define GT_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

#include "tensors.h" /* defines: gt_tensor_table */

/* The largest shapes gentrain takes (from a config, a model file or a checkpoint):
 * past them the sizes computed from the shape could overflow, and no real model comes
 * near them (GPT-3: 96 layers, n_embd 12288, 96 heads). */
#define GPT_MAX_LAYERS 1024
#define GPT_MAX_HEADS 4096
#define GPT_MAX_EMBD 65536
#define GPT_MAX_BLOCK 131072
#define GPT_MAX_VOCAB (1 << 27)

typedef struct gpt_shape {
    int vocab_size;  /* V */
    int block_size;  /* maxT */
    int n_layer;     /* L */
    int n_head;      /* NH */
    int n_embd;      /* C */
} gpt_shape;

/* How a tensor is cut over tp tensor-parallel ranks (shapes below are the shard's). */
typedef enum gpt_split {
    GPT_SPLIT_NONE,     /* every rank holds it whole */
    GPT_SPLIT_ROWS,     /* rank r holds rows [r*R, (r+1)*R) of the full [R*tp, ...] */
    GPT_SPLIT_QKV_ROWS, /* the same within each of the q, k and v thirds (its heads) */
    GPT_SPLIT_COLS,     /* rank r holds columns [r*K, (r+1)*K) of the full [R, K*tp] */
} gpt_split;

typedef struct gpt_param_info {
    char name[64];      /* GPT-2 style name, e.g. "transformer.h.0.ln_1.weight" */
    int ndim;           /* 1 or 2 */
    gpt_split split;    /* how tensor parallelism cuts it */
    int64_t shape[2];   /* of this rank's shard */
    size_t offset;      /* into the flat buffer, in floats */
    size_t whole_offset; /* of the whole tensor in the whole model's buffer (tp = 1,
                          * one stage) */
    size_t numel;
    int decay;          /* 1: AdamW weight decay applies (2-D matrices) */
} gpt_param_info;

/* The tensors of one block, in layout order: tensor k of a part's l-th block is entry
 * i_first + GPT_PER_LAYER * l + k of its table. */
enum {
    GPT_LN1_W, GPT_LN1_B, GPT_QKV_W, GPT_QKV_B, GPT_ATTPROJ_W, GPT_ATTPROJ_B,
    GPT_LN2_W, GPT_LN2_B, GPT_FC_W, GPT_FC_B, GPT_FCPROJ_W, GPT_FCPROJ_B, GPT_PER_LAYER
};

/* Which part of the model a layout describes. The whole model: tp_size 1, layer0 0,
 * n_layers = n_layer, has_embed = has_head = 1. */
typedef struct gpt_part {
    int tp_size;             /* tensor-parallel shards (the shapes are one shard's) */
    int layer0, n_layers;    /* blocks [layer0, layer0 + n_layers) */
    int has_embed, has_head; /* first stage: wte, wpe; last: ln_f (and a copy of wte
                              * after it when it is not also the first) */
} gpt_part;

/* A part's parameter table: info[n_info] (allocated here; free(info)) tiles a buffer
 * of n_params floats in table order; whole_offset is left 0. i_wte, i_wpe, i_first
 * (the first block tensor) and i_lnf index info, -1 where the part lacks them. */
typedef struct gpt_layout {
    gpt_param_info *info;
    int n_info;
    size_t n_params;
    int i_wte, i_wpe, i_first, i_lnf;
} gpt_layout;

/* Checks a shape: every size positive, within the GPT_MAX_* limits, n_embd % n_head ==
 * 0. 0, or -1 with the reason in why (nothing printed). */
int gpt_shape_check(gpt_shape s, char *why, size_t cap);

/* Lays out part p of shape s (taken as checked: gpt_shape_check; p.tp_size must divide
 * n_head and vocab_size). 0, or -1 (reported: out of memory; out is then empty). */
int gpt_layout_make(gpt_shape s, gpt_part p, gpt_layout *out);

/* The n entries of info as a table of named tensors (tensors.h); the offsets are
 * checked against the table's own. out is made here (gt_tensor_table_free it; empty
 * after a failure). 0, or -1 (reported). */
int gpt_layout_table(const gpt_param_info *info, int n, gt_tensor_table *out);

/* The table of the whole model of shape s (tp 1, one stage): the tensors a file of
 * that shape holds (io/h5/h5model.h, io/ckpt/ckpt.h). Checks s (gpt_shape_check). out as
 * above. 0, or -1 (reported). */
int gpt_shape_tensor_table(gpt_shape s, gt_tensor_table *out);

#endif
