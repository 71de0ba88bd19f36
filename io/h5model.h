/* h5model — the model file: FP32 parameters under GPT-2 style names plus the full run
 * config, readable with h5py/h5dump.
 *
 * Layout (format_version 1):
 *   /                      attributes: format = "gentrain-model", format_version = 1,
 *                          step (int64), config (string: the effective `key = value`
 *                          lines), vocab_size, block_size, n_layer, n_head, n_embd
 *   /model/<name>          one float32 dataset per tensor of gpt_params(), named as in
 *                          GPT-2 (e.g. "transformer.h.0.attn.c_attn.weight"), linear
 *                          weights stored [out, in] like PyTorch nn.Linear (Hugging
 *                          Face's GPT-2 Conv1D stores the transpose).
 *   /tokenizer.json        when the training data had a BPE tokenizer: its text
 *                          (io/h5tok.h); absent for byte-level models.
 * Files are written to "<path>.tmp", flushed and closed, then renamed over <path>, so a
 * crash never leaves a file that looks complete. */
#ifndef GT_H5MODEL_H
#define GT_H5MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "../src/model.h"

int h5model_save(const char *path, const gpt_model *m, const char *config_text,
                 int64_t step);
/* The same with the tokenizer of the training data (io/h5tok.h: the dataset
 * /tokenizer.json with its own checksum), so that `sample` decodes the model's ids;
 * tokenizer NULL: none (byte-level data). */
int h5model_save_tok(const char *path, const gpt_model *m, const char *config_text,
                     int64_t step, const char *tokenizer, size_t tok_len);

/* Reads the shape, step and config text (malloc'd, caller frees; may be NULL if not
 * wanted) of a model file. Refuses files that are not gentrain models. */
int h5model_read_meta(const char *path, gpt_shape *shape, int64_t *step,
                      char **config_text);

/* Loads every tensor of m (created with the file's shape) from the file, checking each
 * name, type and shape. */
int h5model_load_params(const char *path, gpt_model *m);

/* If `path` is a file, copies it to out; if it is a folder, picks the model file in it
 * with the highest step (ties: newest modification time). Error if none. */
int h5model_find_newest(const char *path, char *out, size_t cap);

#endif
