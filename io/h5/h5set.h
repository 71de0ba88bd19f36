/* h5set — one token dataset made of several HDF5 files (shards), read through a bounded
 * number of open handles.
 *
 * The data spec names the files: one file (as before; it may be an HDF5 virtual
 * dataset), a folder (its *.h5 files, sorted by name), a glob such as
 * `/data/shard_*.h5` (expanded and sorted by name), or a comma-separated list of any of
 * these (in the order given), each file once. Each file holds the same dataset path (e.g.
 * /train/tokens); together they are one dataset of files x rows.
 *
 * Start-up without reading every file on every rank: h5set_create only resolves the
 * names. Each file's shape, type, vocab_size, size and sample hash (its "meta") are
 * learnt by h5set_probe (which opens it) and can be handed to other processes
 * (h5set_meta / h5set_set_meta: a caller shares the probing over MPI ranks);
 * h5set_settle then checks that the files agree (type, rank, vocab_size), naming the
 * first that does not. h5set_check_range_part checks a near-equal share of all tokens.
 *
 * Reads open a file when first needed and keep at most max_open files open, closing
 * the least recently used one (an LRU); a reopened file must still be what its meta
 * says (size, shape, type), else the read fails naming it. Memory: O(files) (names and
 * metas) plus the open files' handles. All functions report their own errors. An h5set
 * is used by one thread at a time (the loader's thread owns the training set). */
#ifndef GT_H5SET_H
#define GT_H5SET_H

#include <stddef.h>
#include <stdint.h>

#include "h5data.h"

typedef struct h5set h5set;

enum { H5SET_META = 9 }; /* int64 numbers per file that h5set_meta exchanges */
enum { H5SET_DEFAULT_OPEN = 16 };

/* Resolves spec into its files (none opened yet). mpi_io: open them through
 * h5data_open_mpi. max_open >= 1. NULL (reported) when a glob or folder names no file,
 * a listed name is empty, a file is named twice (compared as spelt, less "./" and
 * repeated slashes), or memory runs out. */
h5set *h5set_create(const char *spec, const char *dataset, int mpi_io, int max_open);
void h5set_close(h5set *s);

int h5set_files(const h5set *s);
const char *h5set_file(const h5set *s, int i); /* the name of file i */
const char *h5set_name(const h5set *s);        /* the dataset path, e.g. /train/tokens */
const char *h5set_spec(const h5set *s);        /* the spec as given */

/* Opens file i and records its meta (shape, type, vocab_size, size, sample hash).
 * 0, or -1 (reported: a missing or unreadable file is named). */
int h5set_probe(h5set *s, int i);
void h5set_meta(const h5set *s, int i, int64_t m[H5SET_META]);
void h5set_set_meta(h5set *s, int i, const int64_t m[H5SET_META]);
/* Every file's meta is known: they must agree in type, rank and vocab_size (the first
 * file that does not is named with both values). 0 or -1. */
int h5set_settle(h5set *s);

/* After h5set_settle: */
int h5set_rank(const h5set *s);              /* 1 or 2 (all files) */
const char *h5set_type_name(const h5set *s); /* e.g. "uint16" */
int64_t h5set_vocab_attr(const h5set *s);    /* the vocab_size attribute, 0 when none */
int64_t h5set_rows(const h5set *s, int i);
int64_t h5set_row_len(const h5set *s, int i);
int64_t h5set_total_rows(const h5set *s);
int64_t h5set_total_tokens(const h5set *s);

/* Checks part `part` of `parts` near-equal contiguous pieces of all the files' tokens
 * (h5data_check_range_part's blocks, numbered over the files in order); the parts
 * together check every token. */
int h5set_check_range_part(h5set *s, int64_t vocab_size, int part, int parts);

/* h5data_read of file `file`, opening it (and closing the least recently used file)
 * when it is not open. */
int h5set_read(h5set *s, int file, int64_t row, int64_t col, int64_t count, int32_t *dst,
               int64_t vocab_size);

/* Whether the files opened so far use the MPI-IO driver (h5data_uses_mpi_io of an
 * open one; the request when none is open). */
int h5set_uses_mpi_io(h5set *s);

/* What this data is (for checkpoints; compared on resume). One file: h5data_fingerprint's
 * text. Several: "files=N bytes=B tokens=T type=X sample=fnv1a64:H", H covering every
 * file's name (without its folder), size, shape and sample hash. */
void h5set_fingerprint(const h5set *s, char *buf, size_t cap);
/* Where two such texts differ, for an error line, into buf: "F then, G now" with F and
 * G the first field that differs, whole on both sides (shape=[R x L] holds spaces);
 * for several files whose sample hash differs, a note that it covers their names and
 * order too. */
void h5set_fingerprint_diff(const char *then, const char *now, char *buf, size_t cap);
/* A hash of the full names in order, for ranks to compare their lists. */
uint64_t h5set_names_hash(const h5set *s);

/* Files opened so far (reopens included) and the most open at once: for tests. */
int64_t h5set_opens(const h5set *s);
int h5set_peak_open(const h5set *s);

#endif
