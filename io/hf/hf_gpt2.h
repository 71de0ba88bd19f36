/* hf_gpt2 — Hugging Face GPT-2 model folders in and out: `config.json` (a
 * transformers GPT2Config) and `model.safetensors` (safetensors.h), the layout
 * transformers.GPT2LMHeadModel.from_pretrained loads and save_pretrained writes.
 *
 * The model is the same network as gentrain's (model.h): pre-LayerNorm blocks with
 * eps 1e-5, tanh GELU ("gelu_new"), a 4 x n_embd MLP, learned positions, and the head
 * tied to wte. Tensor names are the same GPT-2 names; the one difference in layout is
 * that transformers' Conv1D stores the weights of attn.c_attn, attn.c_proj, mlp.c_fc
 * and mlp.c_proj as [in, out], the transpose of gentrain's [out, in]: they are
 * transposed on the way in and out. A file saved from GPT2Model (names without the
 * "transformer." prefix, as the published gpt2 checkpoints are) reads the same; its
 * attention-mask buffers (attn.bias, attn.masked_bias) are skipped, and a stored
 * lm_head.weight must equal wte (gentrain's head is tied).
 *
 * Import fits the weights to the run: n_layer, n_head and n_embd must be the folder's
 * (an error names the keys to set otherwise); block_size may be at most n_positions
 * (the first block_size rows of wpe are taken); vocab_size may differ: the first
 * min(V_run, V_model) rows of wte are taken and any others keep the run's own
 * initialisation. */
#ifndef GT_HF_GPT2_H
#define GT_HF_GPT2_H

#include <stdint.h>

#include "layout.h" /* defines: gpt_shape, GPT_MAX_*, gpt_shape_tensor_table */
#include "tensors.h"

typedef struct hf_gpt2_config {
    int n_layer, n_head, n_embd, n_positions, vocab_size;
} hf_gpt2_config;

/* Reads and checks DIR/config.json. 0, or -1 (reported). */
int hf_gpt2_read_config(const char *dir, hf_gpt2_config *cfg);

/* Loads DIR's weights into params (a buffer of tab, the whole model of `shape`,
 * already initialised: rows the folder lacks keep their values); found (may be NULL)
 * gets the folder's config, with vocab_size the rows its wte holds. 0, or -1
 * (reported; params may be partly written). */
int hf_gpt2_load(const char *dir, gpt_shape shape, const gt_tensor_table *tab, float *params,
                 hf_gpt2_config *found);

/* Writes DIR (created if needed) with config.json and model.safetensors (F32) of the
 * whole model `shape` whose parameters are params (a buffer of tab). eos_id: the id of
 * the tokenizer's end-of-text token, config.json's bos_token_id and eos_token_id (as
 * GPT-2's <|endoftext|> is both); -1 when the vocabulary has none (byte-level data):
 * both null, so transformers does not fall back to GPT-2's 50256. 0, or -1 (reported;
 * both files are written whole before either replaces the one in DIR, so a failed
 * export leaves an earlier export there as it was). */
int hf_gpt2_export(const char *dir, gpt_shape shape, const gt_tensor_table *tab,
                   const float *params, int64_t step, int64_t eos_id);

#endif
