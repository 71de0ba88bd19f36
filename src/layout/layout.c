/* layout — see layout.h. The order of the tensors here is the order of the flat
 * buffer, of the model files and of the checkpoints: change it and they all change. */
#include "layout.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h" /* defines: gt_calloc, gt_error */

int gpt_shape_check(gpt_shape s, char *why, size_t cap)
{
    if (s.vocab_size < 1 || s.block_size < 1 || s.n_layer < 1 || s.n_head < 1 ||
        s.n_embd < 1) {
        snprintf(why, cap, "model shape must be positive (vocab_size %d, block_size %d, "
                 "n_layer %d, n_head %d, n_embd %d)", s.vocab_size, s.block_size, s.n_layer,
                 s.n_head, s.n_embd);
        return -1;
    }
    if (s.n_layer > GPT_MAX_LAYERS || s.n_head > GPT_MAX_HEADS || s.n_embd > GPT_MAX_EMBD ||
        s.block_size > GPT_MAX_BLOCK || s.vocab_size > GPT_MAX_VOCAB) {
        snprintf(why, cap, "model shape too large (vocab_size %d, block_size %d, n_layer %d, "
                 "n_head %d, n_embd %d; at most %d, %d, %d, %d, %d)", s.vocab_size,
                 s.block_size, s.n_layer, s.n_head, s.n_embd, GPT_MAX_VOCAB, GPT_MAX_BLOCK,
                 GPT_MAX_LAYERS, GPT_MAX_HEADS, GPT_MAX_EMBD);
        return -1;
    }
    if (s.n_embd % s.n_head != 0) {
        snprintf(why, cap, "n_embd %d is not divisible by n_head %d", s.n_embd, s.n_head);
        return -1;
    }
    return 0;
}

static void add_info(gpt_layout *lay, size_t *off, const char *name, int64_t d0,
                     int64_t d1, gpt_split split)
{
    gpt_param_info *p = &lay->info[lay->n_info++];
    snprintf(p->name, sizeof p->name, "%s", name);
    p->split = split;
    p->ndim = d1 > 0 ? 2 : 1;
    p->shape[0] = d0;
    p->shape[1] = d1 > 0 ? d1 : 0;
    p->numel = (size_t)d0 * (size_t)(d1 > 0 ? d1 : 1);
    p->offset = *off;
    p->decay = p->ndim == 2;
    *off += p->numel;
}

int gpt_layout_make(gpt_shape s, gpt_part part, gpt_layout *lay)
{
    memset(lay, 0, sizeof *lay);
    const int n_info = (part.has_embed ? 2 : 0) + GPT_PER_LAYER * part.n_layers +
                       (part.has_head ? (part.has_embed ? 2 : 3) : 0);
    lay->info = gt_calloc(sizeof(gpt_param_info) * (size_t)n_info, "parameter table");
    if (!lay->info) return -1;

    const int64_t C = s.n_embd, Cl = C / part.tp_size; /* Cl: this shard's share of C */
    size_t off = 0;
    char name[64];
    lay->i_wte = lay->i_wpe = lay->i_lnf = -1;
    /* Tensor parallelism cuts the vocabulary too: wte's rows (and the head's logits). */
    const gpt_split wte_split = part.tp_size > 1 ? GPT_SPLIT_ROWS : GPT_SPLIT_NONE;
    if (part.has_embed) {
        lay->i_wte = lay->n_info;
        add_info(lay, &off, "transformer.wte.weight", s.vocab_size / part.tp_size, C,
                 wte_split);
        lay->i_wpe = lay->n_info;
        add_info(lay, &off, "transformer.wpe.weight", s.block_size, C, GPT_SPLIT_NONE);
    }
    /* Shapes as multiples of C (rows, cols; cols 0 = a vector), the split dimension's
     * multiple taken of Cl instead; in the order of the GPT_LN1_W... enum. */
    static const struct {
        const char *suffix;
        int rows_mult, cols_mult;
        gpt_split split;
    } block[GPT_PER_LAYER] = {
        [GPT_LN1_W] = {"ln_1.weight", 1, 0, GPT_SPLIT_NONE},
        [GPT_LN1_B] = {"ln_1.bias", 1, 0, GPT_SPLIT_NONE},
        [GPT_QKV_W] = {"attn.c_attn.weight", 3, 1, GPT_SPLIT_QKV_ROWS},
        [GPT_QKV_B] = {"attn.c_attn.bias", 3, 0, GPT_SPLIT_QKV_ROWS},
        [GPT_ATTPROJ_W] = {"attn.c_proj.weight", 1, 1, GPT_SPLIT_COLS},
        [GPT_ATTPROJ_B] = {"attn.c_proj.bias", 1, 0, GPT_SPLIT_NONE},
        [GPT_LN2_W] = {"ln_2.weight", 1, 0, GPT_SPLIT_NONE},
        [GPT_LN2_B] = {"ln_2.bias", 1, 0, GPT_SPLIT_NONE},
        [GPT_FC_W] = {"mlp.c_fc.weight", 4, 1, GPT_SPLIT_ROWS},
        [GPT_FC_B] = {"mlp.c_fc.bias", 4, 0, GPT_SPLIT_ROWS},
        [GPT_FCPROJ_W] = {"mlp.c_proj.weight", 1, 4, GPT_SPLIT_COLS},
        [GPT_FCPROJ_B] = {"mlp.c_proj.bias", 1, 0, GPT_SPLIT_NONE},
    };
    lay->i_first = lay->n_info;
    for (int l = part.layer0; l < part.layer0 + part.n_layers; l++)
        for (int k = 0; k < GPT_PER_LAYER; k++) {
            const gpt_split sp = block[k].split;
            const int rows_split = sp == GPT_SPLIT_ROWS || sp == GPT_SPLIT_QKV_ROWS;
            snprintf(name, sizeof name, "transformer.h.%d.%s", l, block[k].suffix);
            add_info(lay, &off, name, block[k].rows_mult * (rows_split ? Cl : C),
                     block[k].cols_mult * (sp == GPT_SPLIT_COLS ? Cl : C), sp);
        }
    if (part.has_head) {
        lay->i_lnf = lay->n_info;
        add_info(lay, &off, "transformer.ln_f.weight", C, 0, GPT_SPLIT_NONE);
        add_info(lay, &off, "transformer.ln_f.bias", C, 0, GPT_SPLIT_NONE);
        /* A last stage without the embedding keeps its own copy of the tied wte for
         * the head, last in its layout: backward finishes its gradient first. */
        if (!part.has_embed) {
            lay->i_wte = lay->n_info;
            add_info(lay, &off, "transformer.wte.weight", s.vocab_size / part.tp_size, C,
                     wte_split);
        }
    }
    lay->n_params = off;
    return 0;
}

int gpt_layout_table(const gpt_param_info *info, int n, gt_tensor_table *out)
{
    if (gt_tensor_table_init(out, n) != 0) return -1;
    for (int i = 0; i < n; i++) {
        const gpt_param_info *p = &info[i];
        if (gt_tensor_table_add(out, p->name, p->ndim, p->shape) != 0) {
            gt_tensor_table_free(out);
            return -1;
        }
        if (out->tensors[i].offset != p->offset || out->tensors[i].numel != p->numel) {
            gt_error("parameter table: tensor %s is not where the layout puts it", p->name);
            gt_tensor_table_free(out);
            return -1;
        }
    }
    return 0;
}

int gpt_shape_tensor_table(gpt_shape s, gt_tensor_table *out)
{
    char why[256];
    memset(out, 0, sizeof *out);
    if (gpt_shape_check(s, why, sizeof why) != 0) {
        gt_error("%s", why);
        return -1;
    }
    const gpt_part whole = {.tp_size = 1, .layer0 = 0, .n_layers = s.n_layer,
                            .has_embed = 1, .has_head = 1};
    gpt_layout lay;
    if (gpt_layout_make(s, whole, &lay) != 0) return -1;
    const int rc = gpt_layout_table(lay.info, lay.n_info, out);
    free(lay.info);
    return rc;
}
