/* h5model_io — the model layout inside an open HDF5 file, shared by the model file
 * (h5model.c) and the training checkpoint (ckpt.c), which holds the same layout plus
 * the optimizer state. Internal to io/: callers hold h5lock.
 *
 * The layout: root attributes format, format_version, step, config, vocab_size,
 * block_size, n_layer, n_head, n_embd, and the group /model with one float32 dataset
 * per tensor of a table of named tensors (tensors.h; see h5model.h). */
#ifndef GT_H5MODEL_IO_H
#define GT_H5MODEL_IO_H


#ifndef GT_MODEL_FILE_MODULE
#error "h5model_io.h is internal to h5model.c and ckpt.c (elsewhere: h5model.h, ckpt.h)"
#endif
#include <stddef.h>
#include <stdint.h>

#include <hdf5.h>

#include "layout.h" /* defines: gpt_shape, GPT_MAX_*, gpt_shape_tensor_table */
#include "tensors.h"

/* Writes the layout into `file`: the attributes, then /model with each tensor of tab
 * taken from params (tab->total floats). `where` names the file in the one error line
 * printed on failure. Returns 0 or -1. */
int h5model_write_layout(hid_t file, const char *format, int64_t format_version,
                         gpt_shape shape, const gt_tensor_table *tab, const float *params,
                         const char *config_text, int64_t step, const char *where);

/* Checks that /model holds exactly the tensors of tab (names, float type, shapes) and
 * that the shape attributes equal `shape`, then reads the tensors into dst (a buffer of
 * the table, tab->total floats). Nothing is read before everything is checked. Prints
 * nothing: on failure `why` gets the whole message, naming `path`. Returns 0 or -1. */
int h5model_read_layout(hid_t file, const char *path, gpt_shape shape,
                        const gt_tensor_table *tab, float *dst, char *why, size_t cap);

#endif
