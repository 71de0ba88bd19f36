/* safetensors — reading and writing the safetensors tensor file (the format Hugging Face
 * models ship their weights in).
 *
 * Layout: an unsigned 64-bit little-endian N, then N bytes of JSON (UTF-8): an object
 * whose members are tensors, `"name": {"dtype": "F32", "shape": [d0, d1],
 * "data_offsets": [begin, end]}`, and optionally `"__metadata__"`, an object of string
 * values; then the data: each tensor's elements little-endian in C order at [begin,
 * end) counted from the end of the JSON, end - begin = product(shape) x element size.
 *
 * Reading treats the file as untrusted: the header is at most ST_MAX_HEADER bytes and
 * parsed by the bounded JSON reader (json.h); every entry is checked (a known dtype, a
 * shape of at most 8 non-negative dimensions whose product fits, offsets inside the
 * file and matching the shape) before any tensor is read, and errors are one line
 * naming the file and the tensor. Dtypes read: F32, F16 and BF16 (converted to float).
 * Writing: F32 only, to <path>.tmp, flushed, fsync'ed and renamed over path. */
#ifndef GT_SAFETENSORS_H
#define GT_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#define ST_MAX_HEADER ((uint64_t)100 << 20)
#define ST_MAX_DIMS 8

typedef struct st_file st_file;

/* Opens and checks path. NULL on failure (reported). */
st_file *st_open(const char *path);
void st_close(st_file *f);
/* Tensor `name`: 1 with its shape (ndim, dims[ST_MAX_DIMS]) and dtype ("F32", ...),
 * or 0 when the file has no such tensor. Any output may be NULL. */
int st_find(const st_file *f, const char *name, int *ndim, int64_t *dims, const char **dtype);
/* The index (file order) of tensor `name`, or -1 when the file has none. */
int st_index(const st_file *f, const char *name);
/* The number of tensors and the name of tensor i (file order). */
int st_count(const st_file *f);
const char *st_name(const st_file *f, int i);
/* Reads tensor `name` (n elements: its whole size) converted to float into out.
 * 0, or -1 (reported). */
int st_read_float(st_file *f, const char *name, float *out, size_t n);

/* One tensor to write: its name, shape and n floats. */
typedef struct st_tensor {
    const char *name;
    int ndim;
    int64_t dims[ST_MAX_DIMS];
    const float *data;
} st_tensor;

/* Writes the tensors (F32) with "__metadata__": {"format": "pt"} to path. 0, or -1
 * (reported; no partial file left). */
int st_write(const char *path, const st_tensor *tensors, int n);

/* st_write up to the commit: writes and closes <path>.tmp (its name into tmp, cap >=
 * strlen(path) + 5) and leaves path as it is, for file_commit (file_commit.h) once the
 * files that go with it are written too. 0, or -1 (reported; no .tmp left). */
int st_write_tmp(const char *path, const st_tensor *tensors, int n, char *tmp, size_t cap);

#endif
