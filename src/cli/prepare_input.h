/* prepare_input — what the prepare verbs share (src/cli/prepare.c, src/cli/prepare_bpe.c): the
 * checks of the input and output paths, and the inputs read as one byte stream. */
#ifndef GT_PREPARE_INPUT_H
#define GT_PREPARE_INPUT_H

#include <stdint.h>
#include <stdio.h>

#include <hdf5.h>

/* The inputs seen as one byte stream. */
typedef struct {
    const char *const *paths;
    const int64_t *sizes;
    int n, cur;
    FILE *f;
    int64_t done_in_cur; /* bytes read from inputs[cur] */
} prep_stream;

/* Every input must be a readable regular file and none the output (nor a link to it);
 * the output must not be a special file. Fills sizes[i] and *total. 0, or -1 after one
 * error line. */
int prep_check_paths(const char *const *inputs, int n_inputs, const char *out, int64_t *sizes,
                     int64_t *total);

/* path (a file prepare writes; what names it: "output", "--save-tokenizer") is neither
 * one of the inputs nor, as <path>.tmp, where one of them is. 0, or -1 after one error
 * line. */
int prep_check_writable(const char *const *inputs, int n_inputs, const char *path,
                        const char *what);

/* The same for one file, `keep` (what it is: keep_what, "tokenizer"), that must survive
 * the writing of path: path is not keep (nor a link to it) and <path>.tmp is not keep;
 * two names of which neither exists yet are the same file when they name the same
 * folder and file. 0, or -1 after one error line. */
int prep_check_apart(const char *keep, const char *keep_what, const char *path,
                     const char *what);

/* The folder `path` is to be written in exists and is a folder: 0, or -1 (reported,
 * naming `what` and path). For outputs written only after work that takes minutes (the
 * tokenizer saved after its training), which the write itself would find out too late. */
int prep_check_folder(const char *path, const char *what);

/* Reads exactly want bytes from the stream into buf (moving to the next input as each
 * one ends). Reports and returns -1 on a read error or an input that changed size. */
int prep_fill(prep_stream *s, unsigned char *buf, int64_t want);

/* Closes the input being read, if any. */
void prep_stream_close(prep_stream *s);

/* The output file, written as <out>.tmp and renamed over <out> only when complete
 * (h5io_finish), so a failed prepare leaves <out> as it was. Calls under h5lock. */
typedef struct {
    char *tmp;  /* "<out>.tmp" (malloc'd) */
    hid_t file; /* open for writing, or -1 */
    int made;   /* tmp exists and is ours to delete */
} prep_output;

/* Creates <out>.tmp. 0, or -1 after one error line. */
int prep_output_create(prep_output *o, const char *out);
/* Closes the file (bad: something failed writing it) and renames it over out. 0, or
 * -1 after one error line (prep_output_abandon then deletes the tmp file). */
int prep_output_commit(prep_output *o, int bad, const char *out);
/* Frees o; a file not committed is closed and its tmp file deleted. */
void prep_output_abandon(prep_output *o);

/* One output dataset being filled: 1-D, chunked, extendable. */
typedef struct {
    hid_t dset, fspace;
    const char *name;
} prep_set;

/* Elements per chunk of a compressed dataset: a window read inflates whole chunks, so
 * they are kept small (16 Ki tokens: 16 or 32 KiB of uint8 or uint16; 64 Ki made
 * the loader 4x slower for 5% less disk on skewed uint16 tokens). */
#define PREP_COMPRESS_CHUNK ((int64_t)1 << 14)

/* Creates the dataset `name` of n elements of file_type, in chunks of chunk elements
 * (n of them when 0 < n < chunk; at most PREP_COMPRESS_CHUNK, shuffled and deflated,
 * after prepare_set_compress(level > 0)). 0 or -1 (not printed). */
int prep_create_set(hid_t file, hid_t lcpl, const char *name, int64_t n, hid_t file_type,
                    int64_t chunk, prep_set *o);
/* Writes n elements of buf (mem_type) at element off. 0 or -1. */
int prep_write_at(prep_set *o, int64_t off, int64_t n, hid_t mem_type, const void *buf);
/* Grows the dataset from *len to *len + n elements and writes buf there. 0 or -1. */
int prep_append(prep_set *o, int64_t *len, int64_t n, hid_t mem_type, const void *buf);
int prep_close_set(prep_set *o);

#endif
