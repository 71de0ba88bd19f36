/* config — the run configuration of `gentrain train`: parse, validate, print.
 *
 * Sources, later ones winning: built-in defaults, `--config FILE` (lines `key = value`,
 * `#` starts a comment, blank lines ignored), then `--key value` / `--key=value` on the
 * command line. Every key is declared once in the key table in config_keys.c (name,
 * type, default, allowed range, one-line help); parsing, validation, --help and
 * printing are all driven by that table, so a new key is one table row.
 *
 * Errors: an unknown key, a value that does not parse or is out of range, or an
 * inconsistent combination (n_embd % n_head != 0, min_lr > lr, ...) is reported as one
 * line naming the key and where it came from ("file.cfg:12", "command line"), and the
 * function returns -1. */
#ifndef GT_CONFIG_H
#define GT_CONFIG_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define GT_PATH_MAX 4096
#define GT_NAME_MAX 256

/* The enumerated keys, parsed once from their words (the order of each list is the
 * order of the words in the key table of config_keys.c; config_enum_word names a
 * value). */
typedef enum { PRECISION_FP32, PRECISION_BF16 } gt_precision;
typedef enum { THREAD_TEAM_ADAPTIVE, THREAD_TEAM_FIXED } gt_thread_team;
typedef enum { OFFLOAD_ALL, OFFLOAD_BLOCKS, OFFLOAD_NONE, OFFLOAD_REQUIRED } gt_offload;
typedef enum { DATA_IO_AUTO, DATA_IO_MPI_IO, DATA_IO_POSIX } gt_data_io;
typedef enum { SAMPLING_EPOCH, SAMPLING_RANDOM } gt_sampling;
typedef enum { SYNC_SYNC, SYNC_ASYNC } gt_sync;
typedef enum { PREDICT_ON, PREDICT_OFF } gt_predict;
typedef enum { GRAD_COMM_FP32, GRAD_COMM_FP16 } gt_grad_comm;
typedef enum { LR_RULE_ADASCALE, LR_RULE_SQRT, LR_RULE_LINEAR } gt_lr_rule;
typedef enum { OVERWRITE_NO, OVERWRITE_YES } gt_overwrite;

/* global_batch_size = auto (the batch follows the gradient noise scale: batch_rule.h) */
#define GT_BATCH_AUTO (-1)

typedef struct gt_config {
    /* data */
    char data[GT_PATH_MAX];          /* HDF5 token file(s): file, folder, glob, a,b,c */
    int data_max_open;               /* open data files per dataset and rank (h5set) */
    char train_dataset[GT_NAME_MAX]; /* dataset path inside it, default /train/tokens */
    char val_dataset[GT_NAME_MAX];   /* default /val/tokens; "" or "none" = no eval */
    /* model */
    int n_layer, n_head, n_embd, block_size;
    int vocab_size;                  /* 0 = take the dataset's vocab_size attribute */
    /* optimisation */
    int batch_size;                  /* sequences per rank per (micro-)step */
    int global_batch_size;           /* per optimizer step over all ranks; 0 = B x ranks;
                                      * GT_BATCH_AUTO: chosen as the run goes */
    int global_batch_min, global_batch_max; /* auto: the limits; 0 = derived */
    gt_lr_rule lr_rule;              /* auto: how the lr follows the batch */
    double batch_overhead;           /* auto: t_fixed / t_seq in sequences; 0 = measured */
    int64_t steps, warmup_steps;
    double lr, min_lr, beta1, beta2, weight_decay, grad_clip;
    /* evaluation, logging, output */
    int64_t eval_every;              /* 0 = only at the end */
    double target_val_loss;          /* stop at the first evaluation <= it; 0 = off */
    int64_t log_every;               /* steps between step lines; 0 = about 100 a run */
    int64_t noise_every;             /* steps between noise scale estimates; 0 = at evals */
    int eval_batches;
    uint64_t seed;
    int threads;                     /* 0 = OMP_NUM_THREADS if set, else all cores */
    gt_thread_team thread_team;      /* shrink the team while a core is shared */
    char out[GT_PATH_MAX];           /* run folder; "" = do not save */
    char log[GT_PATH_MAX];           /* JSON Lines metrics file; "" = none */
    double peak_gflops;              /* for MFU; 0 = estimate from the CPU */
    gt_precision precision;          /* CPU matrix products in FP32 or BF16 */
    gt_offload offload;              /* which layers the GPU trains, if one is there */
    gt_data_io data_io;              /* how ranks read the data */
    gt_sampling sampling;            /* epoch or random windows (see windows.h) */
    /* data parallel */
    double bucket_mb;                /* gradient bucket size, MiB */
    gt_sync sync;                    /* synchronous or bounded-staleness updates */
    int staleness;                   /* async: steps by which a gradient is applied late */
    gt_predict async_predict;        /* on: async gradients taken at predicted weights */
    gt_grad_comm grad_comm;          /* gradients on the wire in FP32 or FP16 */
    /* model parallel: world = dp x tp x pp ranks (grid.h) */
    int tp;                          /* tensor-parallel ranks per replica */
    int pp;                          /* pipeline stages */
    int micro_batches;               /* per step with pp > 1; 0 = pp */
    /* checkpoints (in <out>/checkpoints/, io/ckpt/ckpt.h) */
    int64_t ckpt_every;              /* steps between checkpoints; 0 = none periodic */
    double ckpt_minutes;             /* also after this much wall time; 0 = off */
    int keep_ckpts;                  /* newest checkpoints kept, >= 1 */
    char resume[GT_PATH_MAX];        /* "none", "auto" or a checkpoint file */
    gt_overwrite overwrite;          /* yes: a fresh run may replace <out>/model.h5 */
    char init_from[GT_PATH_MAX];     /* a Hugging Face GPT-2 folder; "" = random init */
} gt_config;

/* Built-in defaults (a small model that trains in minutes on a laptop). */
void config_defaults(gt_config *c);

/* Sets one key from its text value. origin names where it came from, for errors. */
int config_set(gt_config *c, const char *key, const char *value, const char *origin);

/* Applies every `key = value` line of a config file / of a text (origin names it). */
int config_load_file(gt_config *c, const char *path);
int config_load_text(gt_config *c, const char *text, const char *origin);

/* Parses argv[first..argc): `--config FILE` is applied first wherever it appears, then
 * every `--key value` / `--key=value` in order. Positional arguments are errors. */
int config_parse_args(gt_config *c, int argc, char **argv, int first);

/* Cross-key checks (ranges are checked by config_set). Returns 0 or -1. */
int config_validate(const gt_config *c);

/* Writes the effective config as `key = value` lines (re-readable by config_load_text). */
void config_print(const gt_config *c, FILE *f);
/* Same text into a malloc'd string (caller frees); NULL on failure (reported). */
char *config_to_text(const gt_config *c);

/* The word of value v of the enumerated key `key` ("sync", SYNC_ASYNC -> "async");
 * "?" for a key that is not enumerated or a value out of its range. The config text
 * (config_to_text, checkpoints, model files) holds the words, never the numbers. */
const char *config_enum_word(const char *key, int v); /* valid until the thread's next
                                                        * call for that key */

/* A path key left empty or set to "none" (val_dataset, resume, ...): 1, else 0. */
int config_is_none(const char *s);

/* What changing a key does to a run resumed from a checkpoint (io/ckpt/ckpt.h); every row
 * of the key table says which. */
typedef enum {
    CONFIG_RESUME_MATH,     /* changes the arithmetic of the steps still to come:
                             * a resume that changes it is refused */
    CONFIG_RESUME_HARMLESS, /* output, speed, schedules: allowed, listed as a change */
    CONFIG_RESUME_GRID,     /* the grid and the batch split: allowed, settled by the
                             * trainer, which keeps the checkpoint's global batch */
    CONFIG_RESUME_PLACE,    /* where the data lies (staged to node-local disk, another
                             * spelling): allowed where the checkpoint records what its
                             * data held, which the resume then compares */
} config_resume;

/* The resume policy of `key` (its exact name), or -1 for a key this gentrain does not
 * know (an older or newer one's). */
int config_resume_policy(const char *key);
/* 1 when a and b, values of `key` as config texts hold them, set it alike: the same
 * text, or for a key naming an object inside the data file (train_dataset,
 * val_dataset) the same object however its path is spelled ("train/tokens" and
 * "/train//tokens/"; HDF5 reads them from the file's root alike). 0 otherwise. */
int config_values_same(const char *key, const char *a, const char *b);
/* Why a key of that policy may or may not change on resume, as a phrase. */
const char *config_resume_reason(config_resume policy);

/* Calls fn(ctx, key, value) for each `key = value` line of text, in order, split as
 * config_load_text splits lines; nothing is checked (keys may be unknown, values out of
 * range) and lines that are not `key = value` are skipped: for comparing config texts
 * (a checkpoint's with a run's). Stops at the first non-zero return of fn and returns
 * it; 0 after the last line, -1 when out of memory (reported). */
int config_text_each(const char *text,
                     int (*fn)(void *ctx, const char *key, const char *value), void *ctx);
/* The value of the last line setting `key` in text (config_text_each), copied into
 * out[cap]: 1, or 0 when no line sets it, or -1 (out of memory, reported). */
int config_text_value(const char *text, const char *key, char *out, size_t cap);

/* Prints the key table (name, default, help) for `gentrain train --help`. */
void config_print_help(FILE *f);

#endif
