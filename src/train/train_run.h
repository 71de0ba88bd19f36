/* train_run — what one `gentrain train` holds, shared by the files of the trainer
 * (internal to train*.c; train.h is the public entry point):
 *   train.c        set-up in order, the step loop as named phases, clean-up
 *   train_setup.c  the grid, the device, the batch split (a resumed run keeps its
 *                  checkpoint's global batch), the compute report
 *   train_data.c   the token datasets, the validation batches, evaluation
 *   train_outdir.c the run folder: its lock, the log, nothing of an earlier run lost
 *   train_files.c  checkpoints (save, load, find; async's gradients in flight with
 *                  them), the model file, init_from
 *   train_report.c the step line, the JSON Lines record, the summary
 *   train_noise.c  the gradient noise scale (noise_scale.h) every noise_every steps
 *   train_batch.c  each step's global batch and lr (global_batch_size = auto), the
 *                  data cursor
 * One `run` holds everything allocated, so one clean-up frees it whatever failed. */
#ifndef GT_TRAIN_RUN_H
#define GT_TRAIN_RUN_H


#ifndef GT_TRAIN_MODULE
#error "train_run.h is internal to src/train/ (elsewhere: train.h)"
#endif
#include <stdint.h>
#include <stdio.h>

#include "ckpt.h"
#include "h5data.h"
#include "h5set.h"
#include "amx_emul_counts.h" /* defines: amx_emul_counts */
#include "dot_counts.h"      /* defines: dot_count */
#include "config.h"
#include "engine.h"
#include "grad_ring.h"
#include "loader.h"
#include "lossscale.h"
#include "model.h"
#include "noise_scale.h" /* defines: gns_state */
#include "optim.h"
#include "par_reducer.h" /* defines: par_reducer */
#include "parallel.h"
#include "windows.h"

/* Batches the loader reads ahead of the step. */
enum { LOADER_DEPTH = 4 };

/* Where a step's small-batch gradients for the noise scale come from (train_noise.c). */
typedef enum { NOISE_NONE, NOISE_MICRO, NOISE_REPLICA } train_noise_mode;

/* Where the training runs (train_settle_device): the CPU; the GPU, a whole model in
 * one step (offload = all, tp = pp = 1: device_step.h); the GPU through the pipeline's
 * stage engine (gpu_stage.h: offload = blocks, or pp > 1, or tp > 1). */
typedef enum { DEVICE_CPU, DEVICE_GPU_ALL, DEVICE_GPU_STAGE } train_device;

typedef struct run {
    const gt_config *c;
    /* the grid and the batch: world = dp x tp x pp ranks (grid.h) */
    int world, dp, tp, pp;
    int accum;              /* micro-steps per optimizer step (global_batch_size) */
    int auto_batch;         /* global_batch_size = auto: accum changes between steps */
    int accum_max;          /* auto: the most micro-steps a step may take */
    int eval_accum;         /* evaluations: eval_batches x eval_accum micro-batches */
    /* train_batch.c: the data cursor (samples read before the current step) and the
     * current step's batch; under auto the limits, the budget and the step costs */
    int64_t samples, step_batch, step_samples_end, step_now;
    int64_t batch_unit, batch_hi, budget; /* global_batch_min, _max, steps x min */
    double cost_fixed, cost_micro, cost_w; /* EMAs (s) and their weight */
    int64_t end_step;       /* steps done when the loop ended */
    int64_t global_batch;   /* sequences per optimizer step: batch_size x dp x accum */
    int micro;              /* pp > 1: micro-batches per batch in the pipeline */
    int mpi_io;             /* data read through parallel HDF5's MPI-IO driver */
    train_device device;
    int tp_nccl;            /* tp > 1 on GPUs: the blocks' all-reduces over NCCL */
    int threads;            /* given; the team (team.h) may run a step on fewer */
    struct team *team;
    int packed_weights;     /* the BF16 products read weights packed once per update */
    double peak_gflops;     /* for MFU; 0 = none */
    double flops;           /* per micro-step of B x T on one rank */
    /* data */
    h5set *train, *val;     /* the files of each (io/h5/h5set.h) */
    token_windows train_w, val_w;
    int64_t vocab;
    int32_t *eval_tokens;   /* [eval_stored, T+1] this rank's distinct validation windows */
    int32_t *eval_in, *eval_tg; /* [B,T] */
    int64_t eval_windows;   /* this rank's evaluation windows; window k is stored at */
    int64_t eval_stored;    /* k % eval_stored (an eval set larger than the data repeats) */
    char data_id[256];      /* h5set_fingerprint of the training data */
    char *tokenizer;        /* the data's tokenizer.json (rank 0; NULL: bytes), saved */
    size_t tok_len;         /* with the model so that sample decodes its ids */
    loader *ld;
    /* model, engine, gradients, optimizer */
    gpt_model model;
    int have_model;
    step_engine *engine;
    grad_ring ring;
    adamw_state opt;
    par_reducer *red;       /* with more than one rank */
    /* files */
    int can_ckpt;           /* a run folder */
    char ckpt_dir[GT_PATH_MAX + 16];
    char resume_path[GT_PATH_MAX + 64];
    const char *from;       /* the checkpoint resumed from, or NULL */
    int resumed;
    int64_t first_step;     /* 0, or the step of that checkpoint */
    int64_t first_sample;   /* the data cursor at first_step (ckpt.h: samples) */
    int64_t resume_batch;   /* that checkpoint's global batch (0: a fresh run) */
    int resume_replicas;    /* and its data-parallel replicas */
    ckpt_meta meta;         /* of that checkpoint */
    ckpt_async inflight;    /* its async gradients in flight, this rank's layout, until
                             * make_gradients puts them into the ring */
    char *saved_text;       /* the effective config saved with checkpoints and the model */
    FILE *log;
    int log_to_empty;       /* a fresh run's log file, emptied once setup succeeded
                             * (train_start_log): a run that fails before keeps the
                             * earlier run's log as it was */
    int out_lock;           /* rank 0: the run folder's locked .gentrain.lock, or -1 */
    char ckpt_file[GT_PATH_MAX + 64]; /* the last checkpoint written */
    /* running totals */
    double t_start, t_compute, total_bytes, last_save, last_val;
    /* The gradient noise scale (train_noise.c): the smoothed state, where the small
     * batches come from, and this step's sums while noise_on. NOISE_MICRO: the sum of
     * the micro-batches' own squared norms (noise_small), the accumulator before the
     * last micro-batch (noise_prev) and its |.|^2, the last micro-batch's sums taken
     * as backward hands ranges to the reduction. NOISE_REPLICA with tp or pp > 1:
     * this step's share of the replica's own squared norm (noise_part) and the tied
     * wte's own gradient before it is reduced (pp > 1). */
    gns_state gns;
    train_noise_mode noise_mode;
    int noise_on;
    float *noise_grads;     /* this step's gradient slot */
    double noise_small, noise_prev_sq, noise_last_sq, noise_last_dot;
    float *noise_prev;
    double noise_part;
    float *noise_wte;
    double noise_seconds;   /* this rank's time in the noise scale's sums (the cost) */
    int64_t noise_estimates;
} run;

enum { STEP_TILE_THREADS = 64 };

/* What one optimizer step did, for the report. */
typedef struct step_result {
    int64_t step;           /* 0-based */
    double loss, lr, norm;  /* norm: NaN when nothing was applied */
    double local_sq;        /* this rank's own squared gradient norm (noise scale) */
    double dt, wait_s, comm_s;
    int reduced, apply, skipped;
    float scale_before;     /* the loss scale the step ran with */
    loss_scale_event scale_event;
    int do_eval;
    int reached_target;     /* this evaluation reached target_val_loss: the last step */
    double noise_tokens;    /* NaN when not estimated */
    double step_overhead;   /* auto, where the batch is decided: t_fixed / t_seq in
                               sequences (train_batch.c); NaN elsewhere */
    int64_t global_batch;   /* sequences this step trained on */
    double compute_s;       /* in the engine's micro-steps */
    int threads;            /* the step ran on this many threads */
    /* The emulated AMX path's tile instructions in the step (amx_emul_counts.h), one
     * record a thread; tiles_n threads ran some (0 on every other path), the first
     * STEP_TILE_THREADS of them are kept */
    int tiles_n;
    amx_emul_counts tiles[STEP_TILE_THREADS];
    /* The avx512-bf16 path's VDPBF16PS and micro-kernel time in the step
     * (dot_counts.h), likewise */
    int dots_n;
    dot_count dots[STEP_TILE_THREADS];
} step_result;

/* train_setup.c */
int train_settle_grid(run *r);
int train_settle_device(run *r);
int train_report_compute(run *r);
int train_settle_data_io(run *r);
int train_settle_batch(run *r);
int train_pack_weights(run *r);

/* train_data.c */
int train_open_data(run *r); /* a collective: every rank gets the same result */
int train_read_tokenizer(run *r);
int train_evaluate(run *r, double *val);
void train_dataset_identity(const run *r, char *buf, size_t cap);
int train_is_eval_step(const run *r, int64_t step);

/* train_outdir.c */
int train_lock_out(run *r);
void train_unlock_out(run *r);
int train_check_output_paths(run *r);
int train_start_log(run *r);

/* train_files.c */
/* <out>/model.h5, where a run saves its model (out fits GT_PATH_MAX, so path does) */
enum { TRAIN_MODEL_PATH_CAP = GT_PATH_MAX + 16 };
void train_model_path(const char *out, char path[TRAIN_MODEL_PATH_CAP]);
int train_find_resume(run *r);
int train_load_checkpoint(run *r);
int train_init_from(run *r);
int train_check_resume(run *r);
int train_save_checkpoint(run *r, int64_t step);
int train_save_model(run *r);

/* train_noise.c */
int train_is_noise_step(const run *r, int64_t step);
train_noise_mode train_noise_mode_of(const run *r); /* after the device and the batch */
int train_noise_setup(run *r); /* after the engine and the reducer; -1: reported */
int train_noise_wants_sumsq(const run *r, int64_t step);
void train_noise_begin(run *r, const step_result *s, float *grads);
void train_noise_after_micro(run *r, int micro, const float *grads);
void train_noise_replica_parts(run *r, step_result *s);
void train_noise_estimate(run *r, step_result *s); /* a collective on noise steps */

/* train_batch.c */
int train_settle_auto_batch(run *r);
int train_is_last_step(const run *r, int64_t step);
int train_done(const run *r, int64_t step);
void train_batch_plan_step(run *r, step_result *s);
double train_batch_lr(const run *r, const step_result *s);
/* After the step, before its report: auto's step costs, and the overhead its batch
 * decision will read (s->step_overhead) */
void train_batch_costs(run *r, step_result *s); /* a collective under auto */
void train_batch_after_step(run *r, const step_result *s);

/* train_report.c */
void train_report_setup(const run *r);
void train_report_step(const run *r, const step_result *s);
int train_log_step(const run *r, const step_result *s);
void train_report_eval(const run *r, const step_result *s, double seconds);
void train_report_done(const run *r);
void train_report_dry_run(const run *r);

#endif
