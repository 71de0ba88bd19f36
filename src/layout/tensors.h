/* tensors — a table of named tensors laid out in one flat float buffer.
 *
 * What the file formats (io/h5/h5model.h, io/ckpt/ckpt.h) take instead of a model: each
 * tensor's name, shape and place in the buffer. The model describes its parameters as
 * such a table (gpt_tensor_table, model.h), so only the model (src/model/, with
 * src/layout/) knows its layout.
 *
 * The contract of a table (gt_tensor_table_add keeps it; nothing else writes one):
 *  - the tensors tile the buffer in table order: tensor 0 starts at offset 0, each
 *    next one where the one before ends, and total is the sum of their numel. "A
 *    buffer of the table" is total floats, tensor i at [offset, offset + numel);
 *  - a tensor's elements are row-major (C order: the last dimension varies fastest);
 *  - ndim is 1 to GT_TENSOR_MAX_DIMS, every dims[k] >= 1 for k < ndim and 0 after;
 *    numel is their product;
 *  - names are non-empty, shorter than GT_TENSOR_NAME_CAP and hold no '/' (a file
 *    stores a tensor under its name). They should be unique: the builder's duty, not
 *    checked (find returns the first).
 *
 * Ownership: a gt_tensor_table owns its array of entries (gt_tensor_table_free) and
 * describes a buffer without holding or pointing to one. Functions that take a
 * `const gt_tensor_table *` only read it, during the call, and keep no pointer to it:
 * it is a read-only view. All-zero ({0}) is a valid empty table. */
#ifndef GT_TENSORS_H
#define GT_TENSORS_H

#include <stddef.h>
#include <stdint.h>

#define GT_TENSOR_NAME_CAP 64 /* bytes of a name, its terminating NUL included */
#define GT_TENSOR_MAX_DIMS 4

typedef struct gt_tensor {
    char name[GT_TENSOR_NAME_CAP]; /* e.g. "transformer.h.0.attn.c_attn.weight" */
    int ndim;
    int64_t dims[GT_TENSOR_MAX_DIMS];
    size_t numel;                  /* product of dims[0..ndim) */
    size_t offset;                 /* into the flat buffer, in floats */
} gt_tensor;

typedef struct gt_tensor_table {
    gt_tensor *tensors; /* [count], owned */
    int count;
    int cap;            /* entries allocated */
    size_t total;       /* floats of a buffer of the table: the sum of every numel */
} gt_tensor_table;

/* An empty table with room for `cap` tensors (it grows past that as needed). 0, or -1
 * (reported: out of memory; tab is then empty). */
int gt_tensor_table_init(gt_tensor_table *tab, int cap);

/* Appends a tensor `name` of ndim dimensions dims[0..ndim) at offset tab->total.
 * 0, or -1 (reported, naming the tensor: a name that is empty, too long or holds '/',
 * ndim out of range, a dimension < 1, a size past SIZE_MAX, out of memory); the table
 * is unchanged after a failure. */
int gt_tensor_table_add(gt_tensor_table *tab, const char *name, int ndim,
                        const int64_t *dims);

/* Index of the first tensor named `name`, or -1. */
int gt_tensor_table_find(const gt_tensor_table *tab, const char *name);

/* Frees the entries; tab is then empty (freeing an empty table does nothing). */
void gt_tensor_table_free(gt_tensor_table *tab);

#endif
