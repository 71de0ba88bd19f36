/* ckpt — training checkpoints: everything a run needs to continue exactly where it
 * stopped, one HDF5 file per save, readable with h5py/h5dump.
 *
 * Layout (format_version 4, the version written; versions 1 to 3 are still read: see
 * "Older versions" below) of <dir>/ckpt_<step, 8 digits or more>.h5:
 *   the model file layout (h5model.h), with format = "gentrain-checkpoint":
 *   /                 attributes: format, format_version = 4, step (int64: optimizer
 *                     steps done, i.e. the index of the next step), config (the
 *                     effective `key = value` text), vocab_size, block_size, n_layer,
 *                     n_head, n_embd, and
 *                       adam_t      int64   AdamW updates applied (ckpt_state.adam_t)
 *                       world_size  int64   data-parallel replicas of the run that
 *                                   saved it (its ranks / (tp x pp))
 *                       seed        uint64  the data order / initialisation seed
 *                       loss_scale  float64 the mixed-precision loss scale (1.0 on CPU)
 *                       loss_scale_clean int64 clean steps since the scale last
 *                                   changed (when it next doubles; 0 on CPU)
 *                       global_batch int64  sequences per optimizer step, over all
 *                                   replicas and micro-steps (the effective number,
 *                                   whatever global_batch_size said)
 *                       samples     int64   training samples read before the next step:
 *                                   the global sample index that step starts at (the
 *                                   data cursor; step x global_batch unless the global
 *                                   batch was changed on a resume)
 *                       in_flight   int64   gradients computed but not yet applied (an
 *                                   async run's staleness; 0 for sync runs)
 *                       predict     int64   1 when /async/before_update is stored (async
 *                                   weight prediction), else 0
 *                       n_params    int64   floats in /model, /optim/m and /optim/v
 *                       checksum    string  "fnv1a64:<16 hex digits>"
 *                       data        string  what the training data is (h5data_fingerprint;
 *                                   optional: older files lack it; not in the checksum)
 *   /model/<name>     float32 parameters, one dataset per tensor of the table (h5model.h;
 *                     a gentrain run's whole-model table: GPT-2 names)
 *   /optim/m, /optim/v  float32 [n_params]: the AdamW moments, flat, in the layout of
 *                     the parameter buffer (the table's: tensor after tensor)
 *   /schedule         float64 [6]: the state of the gradient noise scale and of
 *                     global_batch_size = auto (src/train_batch.c), in order: the EMAs
 *                     of |G|^2 and tr(Sigma) and their weight (noise_scale.h), the
 *                     EMAs of the step time outside the micro-steps and of the time per
 *                     micro-step (seconds) and their weight; zeros when not measured
 *   /async            only when in_flight > 0 (F = in_flight):
 *     grad_<i>        float32 [n_params], i = 0 .. F-1: the reduced (averaged over the
 *                     replicas) gradient of step `step` - F + i, oldest first, in the
 *                     parameter buffer's layout, due at step `step` + i; all zeros for a
 *                     step before the first (async warm-up)
 *     overflow        int8 [F]: 1 when that gradient overflowed FP16 (its update is
 *                     skipped when it comes due)
 *     sumsq           float64 [F]: its squared norm on each replica before averaging,
 *                     averaged over the replicas (the gradient noise scale); 0 when
 *                     not measured
 *     before_update   float32 [n_params], only when predict = 1: the parameters before
 *                     the last update (weight prediction, grad_ring.h)
 *
 * Checksum: 64-bit FNV-1a over, in this order, the text
 *   "gentrain-checkpoint 4 step=S adam_t=A world_size=W seed=D loss_scale=L
 *    loss_scale_clean=K global_batch=G samples=N in_flight=F predict=P[ overflow=O
 *    sumsq=Q] schedule=X vocab_size=.. block_size=.. n_layer=.. n_head=.. n_embd=..
 *    n_params=N\n"
 * (one line, single spaces, integers in decimal, L as printf "%a"; the overflow and
 * sumsq fields only when F > 0: O the F flags as digits "0"/"1" without separators, Q
 * the F sums as printf "%a" separated by commas; X the 6 values of /schedule as printf
 * "%a" separated by commas), the config text with its terminating
 * NUL, then the little-endian bytes of every float of the flat parameter buffer, of m,
 * of v, of grad_0 .. grad_<F-1> and, with predict = 1, of before_update. A flipped bit
 * in any dataset or in these attributes makes the file fail verification: it is never
 * loaded.
 *
 * Older versions. Version 3 had no /schedule (read as zeros: a resumed run starts its
 * noise scale and step costs afresh) and its checksum line no schedule field. Version 2
 * wrote neither global_batch, samples, in_flight, predict nor
 * /async (and no async run could checkpoint); its checksum line stops after
 * loss_scale_clean. Version 1 has no loss_scale_clean either (read as 0; its line
 * stops after loss_scale). For both, global_batch is derived from the stored config:
 * its global_batch_size when above 0, else batch_size x world_size; samples = step x
 * global_batch; in_flight = predict = 0.
 *
 * The functions take a table of named tensors (tensors.h) and flat buffers of it
 * (ckpt_state), not a model: the table says which tensors /model holds and where each
 * lies in the buffers; the shape is the file's metadata, which the caller makes agree
 * with the table (gpt_tensor_table of a whole model does).
 *
 * Data cursor: the window order is a pure function of (seed, global sample index)
 * (windows.h) and a step reads the next global_batch samples of it, however it is split
 * into replicas and micro-steps, so `samples` (= step x global_batch) IS the data
 * cursor: a run resumed from a checkpoint reads exactly the samples an uninterrupted
 * run reads from that step on, on any number of replicas that keeps the global batch.
 * There is no other RNG state in a training step.
 *
 * Writes: <path>.tmp first, flushed, fsync'ed, renamed over <path>, folder synced. A
 * crash mid-write leaves only a .tmp: ckpt_find_latest ignores it, ckpt_save and
 * ckpt_prune delete it. A failed save (folder not writable, disk full) prints one error
 * line, removes its .tmp and leaves every earlier checkpoint as it was.
 * (Test hook: GENTRAIN_TEST_CRASH_IN_CKPT=N makes the N-th save of a process kill
 * itself with SIGKILL just before the rename; tests/test_resume.sh uses it.)
 *
 * All functions print their own one-line errors ("gentrain: error: ...") and return -1;
 * HDF5 calls hold h5lock. Call them from one rank (rank 0 saves and prunes); every rank
 * may load. */
#ifndef GT_CKPT_H
#define GT_CKPT_H

#include <stddef.h>
#include <stdint.h>

#include "../src/model.h"
#include "../src/tensors.h"

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

/* Deletes all but the `keep` (>= 1) highest-step checkpoint files ckpt_<N>.h5 of dir,
 * and every stale ckpt_*.h5.tmp. Returns the number of files deleted, or -1 (reported)
 * when the folder cannot be read or a file cannot be deleted. It does not open the
 * files: a file is complete when its name is final (writes are renamed into place). */
int ckpt_prune(const char *dir, int keep);

/* Finds the highest-step checkpoint of dir that opens and verifies (format, version,
 * shapes, checksum; the whole file is read, each by the whole-model table of its own
 * shape, gpt_shape_tensor_table). Each file that does not is skipped with
 * one warning line, "gentrain: warning: skipping checkpoint <file>: <why>".
 * Returns 1 with out set; 0 when dir holds no checkpoint file (or does not exist: a
 * fresh run); 2 when it holds checkpoint files and none of them verifies (each named
 * in a warning; a run must not start fresh over them); -1 on an error (reported: dir
 * unreadable, out too small). */
int ckpt_find_latest(const char *dir, char *out, size_t cap);

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
 * resume from meta? Compares the two configs key by key:
 *  - refused (-1, one error line naming the key and both values): the model shape,
 *    the lr schedule and AdamW keys (lr, min_lr, warmup_steps, beta1, beta2,
 *    weight_decay, grad_clip), seed, data, train_dataset, sampling, sync, staleness,
 *    async_predict, noise_every, the keys of global_batch_size = auto
 *    (global_batch_min, global_batch_max, lr_rule, batch_overhead), global_batch_size
 *    changed between auto and a number, any key unknown here whose value changed, or
 *    steps <= the checkpoint's step (nothing left to train);
 *  - allowed and listed in `changes` ("key old -> new, ..."; "" when none): steps
 *    (later steps follow the new schedule end), eval_every, eval_batches, val_dataset,
 *    log, out, threads (last bits may differ), peak_gflops, the checkpoint keys
 *    (ckpt_every, ckpt_minutes, keep_ckpts, resume), the grid (tp, pp, micro_batches,
 *    and the number of replicas: "replicas 2 -> 4"), batch_size and global_batch_size;
 *    keys the checkpoint's gentrain did not know. The grid and the batch keys are the
 *    caller's to settle: a resumed run keeps meta->global_batch sequences a step
 *    (ckpt.h's data cursor) unless global_batch_size is set to another number.
 * changes may be NULL. Returns 0 or -1. */
int ckpt_check_compatible(const ckpt_meta *meta, const char *config_text, int world_size,
                          char *changes, size_t cap);

#endif
