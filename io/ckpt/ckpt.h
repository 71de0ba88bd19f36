/* ckpt — training checkpoints: everything a run needs to continue exactly where it
 * stopped, one HDF5 file per save, <dir>/ckpt_<step, 8 digits or more>.h5. The format
 * (format_version 4; versions 1 to 3 still read), its checksum, the data cursor and
 * the write protocol are specified in docs/checkpoint-format.md, the one place that
 * says them; this header gives the functions.
 *
 * The functions take a table of named tensors (tensors.h) and flat buffers of it
 * (ckpt_state), not a model. All print their own one-line errors ("gentrain: error:
 * ...") and return -1; HDF5 calls hold h5lock. Call them from one rank (rank 0 saves
 * and prunes); every rank may load. */
#ifndef GT_CKPT_H
#define GT_CKPT_H

#include <stddef.h>
#include <stdint.h>

#include "layout.h" /* defines: gpt_shape, GPT_MAX_*, gpt_shape_tensor_table */
#include "tensors.h"

#define CKPT_FORMAT_NAME "gentrain-checkpoint"
#define CKPT_FORMAT_VERSION 4

enum { CKPT_MAX_IN_FLIGHT = 8 }; /* the largest staleness */
enum { CKPT_SCHED_N = 6 };       /* float64s of /schedule (version 4) */

typedef struct ckpt_meta {
    int version;         /* format_version of the file (1 to 3) */
    int64_t step;        /* optimizer steps done: training continues at this step */
    int64_t adam_t;      /* AdamW updates applied */
    int world_size;      /* data-parallel replicas (ranks / (tp x pp)) of the run that
                          * saved it */
    uint64_t seed;
    double loss_scale;
    int64_t loss_scale_clean; /* clean steps since the loss scale last changed */
    int64_t global_batch; /* sequences per optimizer step (derived for versions 1, 2) */
    int64_t samples;     /* the global sample index the next step starts at */
    int in_flight;       /* async gradients not yet applied (0: sync) */
    int predict;         /* 1: the file holds async's before_update */
    double schedule[CKPT_SCHED_N]; /* /schedule (version 4; zeros before) */
    gpt_shape shape;
    char *config_text;   /* malloc'd; ckpt_meta_free */
    char *data;          /* h5data_fingerprint of the training data it was trained on;
                          * malloc'd, NULL in files written before it existed */
    char path[4096];     /* the file it was read from */
} ckpt_meta;

void ckpt_meta_free(ckpt_meta *meta);

/* An async run's gradients in flight at a step boundary (the /async group), in the
 * layout of the parameter buffer. */
typedef struct ckpt_async {
    int n;                                /* gradients in flight; 0: none (sync) */
    float *grads[CKPT_MAX_IN_FLIGHT];     /* [n_params] each: the reduced gradient of
                                           * step `step` - n + i, oldest first */
    int overflow[CKPT_MAX_IN_FLIGHT];     /* 1: that gradient overflowed FP16 */
    double sumsq[CKPT_MAX_IN_FLIGHT];     /* its per-replica squared norm, averaged */
    float *before_update;                 /* [n_params] or NULL (no weight prediction) */
} ckpt_async;

/* Frees what ckpt_load allocated into a (the struct itself is the caller's). */
void ckpt_async_free(ckpt_async *a);

/* What a checkpoint holds besides its metadata, in the caller's memory: the table of
 * the parameters and three buffers of it (table->total floats each). Save reads them;
 * load writes them (and adam_t) only once the whole file has verified. */
typedef struct ckpt_state {
    gpt_shape shape;              /* the model's shape: stored (save), required (load) */
    const gt_tensor_table *table; /* the parameters' names, shapes and layout */
    float *params;                /* the parameters */
    float *m, *v;                 /* the AdamW moments, in the same layout */
    int64_t adam_t;               /* AdamW updates applied */
    int64_t global_batch;         /* save: sequences per optimizer step (>= 1) */
    int64_t samples;              /* save: the data cursor (the next step's first sample) */
    const double *schedule;       /* save: CKPT_SCHED_N values for /schedule, or NULL
                                   * (zeros); load: see meta->schedule */
    ckpt_async *async;            /* save: the gradients in flight, or NULL (none); load:
                                   * when not NULL, gets the file's (buffers malloc'd,
                                   * ckpt_async_free; n = 0 when it has none) */
} ckpt_state;

/* The room for a checkpoint's path when it is saved: a run checks its longest one fits
 * before it trains (ckpt_path into this many bytes), not after its first steps. */
#define CKPT_PATH_CAP 4096

/* "<dir>/ckpt_<step %08>.h5" into buf. 0, or -1 (reported) when it does not fit. */
int ckpt_path(const char *dir, int64_t step, char *buf, size_t cap);

/* Saves a checkpoint of step `step` (steps done) into dir (which must exist): st (the
 * shape, the tensors of st->table from st->params, the moments m and v, adam_t, the
 * global batch and data cursor, the gradients in flight of st->async), the
 * effective config text, world size, seed, loss scale and its count of clean steps
 * (lossscale.h), and `data` (may be NULL): what the training data is
 * (h5data_fingerprint), for a resume to compare (attribute "data", outside the
 * checksum: a damaged one only refuses a resume). Removes stale ckpt_*.h5.tmp files of
 * dir first. Returns 0, or -1 after one error line (nothing but the earlier files is
 * left). out_path (may be NULL) gets the file written. */
int ckpt_save(const char *dir, int64_t step, const ckpt_state *st, const char *config_text,
              int world_size, uint64_t seed, double loss_scale, int64_t loss_scale_clean,
              const char *data, char *out_path, size_t cap);

/* Deletes all but the `keep` (>= 1) highest-step checkpoint files ckpt_<N>.h5 of dir
 * among those of steps <= upto (the step just saved; INT64_MAX: all), and every stale
 * ckpt_*.h5.tmp. A file of a higher step (a damaged checkpoint that resume = auto
 * skipped) stays, and does not take the place of one of the `keep` newest. Returns the
 * number of files deleted, or -1 (reported) when the folder cannot be read or a file
 * cannot be deleted. It does not open the files: a file is complete when its name is
 * final (writes are renamed into place). */
int ckpt_prune(const char *dir, int keep, int64_t upto);

/* The highest step among dir's checkpoint file names (ckpt_<N>.h5), the files not
 * opened: -1 when there is none (or dir does not exist), -2 when dir cannot be read
 * (reported). What a run about to write its checkpoints there would overwrite or prune. */
int64_t ckpt_newest_step(const char *dir);

/* The steps of dir's checkpoint file names (ckpt_<N>.h5), highest first, the files not
 * opened, into *steps (malloc'd, free it; NULL when none) and *n. 0; 1 when dir does
 * not exist; -1 when it cannot be read (reported). */
int ckpt_list_steps(const char *dir, int64_t **steps, size_t *n);
/* Finds the highest-step checkpoint of dir that opens and verifies (format, version,
 * shapes, checksum; whole = 1: the whole file is read, each by the whole-model table
 * of its own shape, gpt_shape_tensor_table, as a resume needs; whole = 0: its metadata
 * alone, a quick look that a damaged tensor passes). Each file that does not is
 * skipped with one warning line, "gentrain: warning: skipping checkpoint <file>: <why>".
 * Returns 1 with out set; 0 when dir holds no checkpoint file (or does not exist: a
 * fresh run); 2 when it holds checkpoint files and none of them verifies (each named
 * in a warning; a run must not start fresh over them); -1 on an error (reported: dir
 * unreadable, out too small). */
int ckpt_find_latest(const char *dir, int whole, char *out, size_t cap);

/* Reads the whole checkpoint at path and verifies it (format, version, shapes, every
 * tensor and the metadata against the checksum), as resume = auto does each file it
 * tries: 0 with meta filled (ckpt_meta_free it), or -1 after one error line naming the
 * file and why. */
int ckpt_verify_file(const char *path, ckpt_meta *meta);

/* Loads a checkpoint into st's buffers (params, m, v: st->table->total floats each):
 * checks format, version, that the file's shape equals st->shape (naming the first
 * differing key), that /model holds exactly the tensors of st->table (each name, type
 * and shape), n_params, and the checksum, all before anything of st changes. Fills meta
 * (ckpt_meta_free it), sets st->adam_t = meta->adam_t, st->global_batch and
 * st->samples, and, when st->async is not NULL, the gradients in flight into it.
 * Returns 0 or -1 (one error line; st untouched). */
int ckpt_load(const char *path, ckpt_state *st, ckpt_meta *meta);

/* Reads the attributes of a checkpoint into meta (ckpt_meta_free it) without reading
 * or verifying its tensors: what a run must know before it can load one (the global
 * batch and the data cursor decide the micro-steps and the loader's start). ckpt_load
 * verifies them with the rest. Returns 0 or -1 (one error line). */
int ckpt_read_meta(const char *path, ckpt_meta *meta);

/* May a run with config text `config_text` (config_to_text) and `world_size` replicas
 * resume from meta? Compares the two configs key by key, each key by the resume policy
 * the config table gives it (config_resume_policy, config.h):
 *  - refused (-1, one error line naming the key, both values and why): a key that
 *    changes the math, global_batch_size changed between auto and a number, a key
 *    unknown here whose value changed, steps <= the checkpoint's step (nothing left
 *    to train), or the data's path where meta records no fingerprint of its data;
 *  - allowed and listed in `changes` ("key old -> new, ..."; "" when none): harmless
 *    keys (steps: later steps follow the new schedule end; threads: last bits may
 *    differ), the grid and batch keys and the number of replicas ("replicas 2 -> 4"),
 *    keys the checkpoint's gentrain did not know, the data's path where meta->data
 *    records what the data held (the caller compares that with the data it opened).
 *    The grid and the batch keys are the caller's to settle: a resumed run keeps
 *    meta->global_batch sequences a step (ckpt.h's data cursor) unless
 *    global_batch_size is set to another number.
 * changes may be NULL. Returns 0 or -1. */
int ckpt_check_compatible(const ckpt_meta *meta, const char *config_text, int world_size,
                          char *changes, size_t cap);

#endif
