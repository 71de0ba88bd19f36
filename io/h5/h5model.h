/* h5model — the model file: FP32 parameters under GPT-2 style names plus the full run
 * config, readable with h5py/h5dump.
 *
 * Layout (format_version 1, the only version written and read):
 *   /                      attributes: format = "gentrain-model", format_version = 1,
 *                          step (int64), config (string: the effective `key = value`
 *                          lines), vocab_size, block_size, n_layer, n_head, n_embd
 *                          (int64), checksum (string, below)
 *   /model/<name>          one float32 dataset per tensor of the table, under its name
 *                          and with its shape: for a gentrain model, the whole model's
 *                          table (gpt_tensor_table, model.h), GPT-2 names (e.g.
 *                          "transformer.h.0.attn.c_attn.weight"), linear weights stored
 *                          [out, in] like PyTorch nn.Linear (Hugging Face's GPT-2
 *                          Conv1D stores the transpose).
 *   /tokenizer.json        when the training data had a BPE tokenizer: its text
 *                          (io/h5/h5tok.h, with its own checksum); absent for byte-level
 *                          models.
 * Checksum: "fnv1a64:<16 hex digits>", 64-bit FNV-1a over the text
 *   "gentrain-model 1 step=S shape=V,T,L,NH,C\n"
 * (integers in decimal), the config text with its terminating NUL, then the
 * little-endian bytes of every float of the flat parameter buffer (the tensors in
 * table order). Files without it (older gentrain) load with a warning.
 *
 * The functions take a table of named tensors (tensors.h) and a flat buffer of it, not
 * a model: the table says which tensors the file holds and where each lies in the
 * buffer; the shape is the file's metadata (the five attributes), which the caller
 * makes agree with the table.
 *
 * Files are written to "<path>.tmp", flushed and closed, then renamed over <path>, so a
 * crash never leaves a file that looks complete. All functions print their own one-line
 * errors ("gentrain: error: ...") and return -1; HDF5 calls hold h5lock. */
#ifndef GT_H5MODEL_H
#define GT_H5MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "layout.h" /* defines: gpt_shape, GPT_MAX_*, gpt_shape_tensor_table */
#include "tensors.h"

#define H5MODEL_FORMAT_NAME "gentrain-model" /* the root attribute format */

/* Saves the tensors of tab from params (tab->total floats) with the shape, step and
 * config text (NULL: "") as the file's metadata. 0, or -1 (reported; an earlier file at
 * path is left as it was). */
int h5model_save(const char *path, gpt_shape shape, const gt_tensor_table *tab,
                 const float *params, const char *config_text, int64_t step);
/* The same with the tokenizer of the training data (io/h5/h5tok.h: the dataset
 * /tokenizer.json with its own checksum), so that `sample` decodes the model's ids;
 * tokenizer NULL: none (byte-level data). */
int h5model_save_tok(const char *path, gpt_shape shape, const gt_tensor_table *tab,
                     const float *params, const char *config_text, int64_t step,
                     const char *tokenizer, size_t tok_len);

/* Reads the shape, step and config text (malloc'd, caller frees; may be NULL if not
 * wanted) of a model file. Refuses files that are not gentrain models. */
int h5model_read_meta(const char *path, gpt_shape *shape, int64_t *step,
                      char **config_text);

/* Loads every tensor of tab into params (tab->total floats), checking first that the
 * file holds exactly the tensors of tab (each name, float type and shape) and the shape
 * attributes equal `shape`, then its checksum and that every value is finite. params
 * is written only when everything holds. 0, or -1 (reported, one line). */
int h5model_load_params(const char *path, gpt_shape shape, const gt_tensor_table *tab,
                        float *params);

/* The root attribute `format` of the HDF5 file at path ("gentrain-model",
 * "gentrain-checkpoint", ...), into fmt: 1; 0 when the file has none; -1 when the file
 * does not open as HDF5 or the attribute is not a string (reported). */
int h5model_format_of(const char *path, char *fmt, size_t cap);

/* If `path` is a file, copies it to out; if it is a folder, picks the model file in it
 * with the highest step (ties: newest modification time). Error if none. */
int h5model_find_newest(const char *path, char *out, size_t cap);

#endif
