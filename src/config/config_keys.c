/* config_keys — see config_keys.h: the table of every key, and lookups by name. */
#include "config_keys.h"
#include "layout.h" /* defines: GPT_MAX_*, the largest shapes */

#include <ctype.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "util.h" /* defines: GT_MAX_THREADS */

const char *const config_group_title[G_COUNT] = {
    "data", "model", "optimisation", "evaluation, output and machine",
    "data parallel (MPI ranks)", "checkpoints (in <out>/checkpoints/)"};

#define FSIZE(f) sizeof(((gt_config *)0)->f)
/* r: the key's resume policy, MATH, HARMLESS, GRID or PLACE (config_resume, config.h). */
#define KEY_(f, t, g, r, d, h) \
    .name = #f, .type = t, .off = offsetof(gt_config, f), .cap = FSIZE(f), .group = g, \
    .resume = CONFIG_RESUME_##r, .def = d, .help = h
#define KEY_INT(f, g, r, d, lo, hi, fl, h) \
    {KEY_(f, T_INT, g, r, d, h), .imin = lo, .imax = hi, .flags = fl}
#define KEY_I64(f, g, r, d, lo, fl, h) \
    {KEY_(f, T_I64, g, r, d, h), .imin = lo, .imax = INT64_MAX, .flags = fl}
#define KEY_U64(f, g, r, d, h) {KEY_(f, T_U64, g, r, d, h)}
#define KEY_DBL(f, g, r, d, lo, hi, fl, h) \
    {KEY_(f, T_DBL, g, r, d, h), .dmin = lo, .dmax = hi, .flags = fl}
#define KEY_STR(f, g, r, d, h) {KEY_(f, T_STR, g, r, d, h)}
#define KEY_H5NAME(f, g, r, d, h) {KEY_(f, T_STR, g, r, d, h), .flags = K_H5NAME}
#define KEY_CHOICE(f, g, r, d, ch, h) {KEY_(f, T_ENUM, g, r, d, h), .choices = ch}

const key_def config_keys[] = {
    KEY_STR(data, G_DATA, PLACE, "",
            "HDF5 token file (required; 'gentrain prepare' makes one from text), or "
            "several as one dataset: a folder (its *.h5), a glob (shard_*.h5) or a "
            "comma-separated list"),
    KEY_INT(data_max_open, G_DATA, HARMLESS, "16", 1, 65536, R_MAX,
            "data files each rank keeps open at once per dataset (the least recently "
            "used is closed)"),
    KEY_H5NAME(train_dataset, G_DATA, MATH, "/train/tokens",
            "dataset inside the file holding the training tokens"),
    KEY_H5NAME(val_dataset, G_DATA, HARMLESS, "/val/tokens",
            "validation dataset; 'none' (or empty) = no evaluation"),
    KEY_CHOICE(data_io, G_DATA, HARMLESS, "auto", "auto|mpi-io|posix",
               "how ranks read the data: mpi-io = parallel HDF5's MPI-IO driver "
               "(independent reads), posix = HDF5's default driver; auto = mpi-io when "
               "HDF5 is parallel and the run is under mpirun/srun"),
    KEY_CHOICE(sampling, G_DATA, MATH, "epoch", "epoch|random",
               "training windows: epoch = every window once per epoch in a shuffled "
               "order at a fresh offset; random = uniform start positions drawn with "
               "replacement (the recipe of the common PyTorch reference trainers)"),

    KEY_INT(n_layer, G_MODEL, MATH, "4", 1, GPT_MAX_LAYERS, 0, "transformer blocks"),
    KEY_INT(n_head, G_MODEL, MATH, "4", 1, GPT_MAX_HEADS, 0,
            "attention heads (must divide n_embd)"),
    KEY_INT(n_embd, G_MODEL, MATH, "128", 1, GPT_MAX_EMBD, 0, "embedding width"),
    KEY_INT(block_size, G_MODEL, MATH, "64", 1, GPT_MAX_BLOCK, 0,
            "context length in tokens"),
    KEY_INT(vocab_size, G_MODEL, MATH, "0", 0, GPT_MAX_VOCAB, R_MAX,
            "vocabulary size; 0 = the dataset's vocab_size attribute"),

    KEY_INT(batch_size, G_OPTIM, GRID, "12", 1, INT_MAX, 0,
            "sequences each rank computes at once (per step, or per micro-step when "
            "global_batch_size asks for more)"),
    KEY_INT(global_batch_size, G_OPTIM, GRID, "0", 0, INT_MAX, R_AUTO,
            "sequences per optimizer step over all ranks; 0 = batch_size x ranks (a "
            "resumed run: its checkpoint's); a multiple k of it accumulates gradients "
            "over k micro-steps; auto = start at global_batch_min and follow the "
            "gradient noise scale for the most progress per second (docs/adaptive-batch.md)"),
    KEY_INT(global_batch_min, G_OPTIM, MATH, "0", 0, INT_MAX, 0,
            "auto: the smallest global batch and the step of its changes (sequences, a "
            "multiple of batch_size x replicas); lr, warmup_steps and steps are stated "
            "for it (a run trains steps x global_batch_min sequences); 0 = the least "
            "multiple of batch_size x replicas of at least 2 x batch_size"),
    KEY_INT(global_batch_max, G_OPTIM, MATH, "0", 0, INT_MAX, 0,
            "auto: the largest global batch (a multiple of global_batch_min); "
            "0 = 16 x global_batch_min"),
    KEY_CHOICE(lr_rule, G_OPTIM, MATH, "adascale", "adascale|sqrt|linear",
               "auto: how the lr follows the global batch b against global_batch_min "
               "b0: adascale = AdaScale's gain (1 + B_noise/b0) / (1 + B_noise/b), "
               "sqrt = sqrt(b/b0), linear = b/b0"),
    KEY_DBL(batch_overhead, G_OPTIM, MATH, "0", 0, 0, R_MIN,
            "auto: the time of a step that does not grow with the batch (optimizer, "
            "communication not hidden), in sequences' worth of compute; 0 = measured "
            "on this run (a number makes the batch sequence a function of the data "
            "alone)"),
    KEY_I64(steps, G_OPTIM, HARMLESS, "2000", 1, 0, "optimizer steps"),
    KEY_DBL(lr, G_OPTIM, MATH, "1e-3", 0, 0, R_MIN | R_MIN_X,
            "peak learning rate: linear warmup, then cosine decay to min_lr"),
    KEY_DBL(min_lr, G_OPTIM, MATH, "1e-4", 0, 0, R_MIN,
            "final learning rate, <= lr (if not given and lr is smaller: lr/10)"),
    KEY_I64(warmup_steps, G_OPTIM, MATH, "100", 0, 0,
            "warmup steps, <= steps (if not given and steps is smaller: steps/10)"),
    KEY_DBL(beta1, G_OPTIM, MATH, "0.9", 0, 1, R_MIN | R_MAX | R_MAX_X, "AdamW beta1"),
    KEY_DBL(beta2, G_OPTIM, MATH, "0.99", 0, 1, R_MIN | R_MAX | R_MAX_X, "AdamW beta2"),
    KEY_DBL(weight_decay, G_OPTIM, MATH, "0.1", 0, 0, R_MIN,
            "AdamW decoupled weight decay (matrices only)"),
    KEY_DBL(grad_clip, G_OPTIM, MATH, "1.0", 0, 0, R_MIN,
            "clip the global gradient norm to this; 0 = off"),

    KEY_I64(eval_every, G_RUN, HARMLESS, "250", 0, 0,
            "steps between evaluations (there is always one at the end); "
            "0 = only at the end"),
    KEY_INT(eval_batches, G_RUN, HARMLESS, "20", 1, INT_MAX, 0, "global batches per evaluation"),
    KEY_DBL(target_val_loss, G_RUN, HARMLESS, "0", 0, 0, R_MIN,
            "stop after the first evaluation whose validation loss is at or below "
            "this, and save as at the last step (model, and a checkpoint where they are "
            "periodic); 0 = train every step"),
    KEY_I64(noise_every, G_RUN, MATH, "10", 0, 0,
            "steps between estimates of the gradient noise scale (also at every "
            "evaluation; from the micro-batches of a step, or the replicas' gradients); "
            "0 = only at evaluations"),
    KEY_I64(log_every, G_RUN, HARMLESS, "0", 0, 0,
            "steps between the step lines on stdout (each with the tokens so far, the "
            "time elapsed and the ETA; the first, the last, evaluation and skipped steps "
            "always have one); 0 = about 100 lines a run (every steps/100 steps, at "
            "least 1). The JSON Lines log keeps a record of every step"),
    KEY_U64(seed, G_RUN, MATH, "1337", "random seed (initial weights, data order)"),
    KEY_INT(threads, G_RUN, HARMLESS, "0", 0, GT_MAX_THREADS, R_MAX,
            "OpenMP threads; 0 = OMP_NUM_THREADS if set, else all cores"),
    KEY_CHOICE(thread_team, G_RUN, HARMLESS, "adaptive", "adaptive|fixed",
               "adaptive: while another process shares one of the cores, steps run on "
               "fewer threads (a shared core makes every barrier wait for it), and on all "
               "again once it is free; results are the same bits either way. fixed: "
               "always all the threads"),
    KEY_STR(out, G_RUN, HARMLESS, "runs/gentrain",
            "run folder (model.h5 goes there); empty or 'none' = do not save"),
    KEY_STR(log, G_RUN, HARMLESS, "",
            "JSON Lines metrics file; if not given: <out>/log.jsonl when out is "
            "set; empty = none"),
    KEY_DBL(peak_gflops, G_RUN, HARMLESS, "0", 0, 0, R_MIN,
            "peak GFLOP/s of the machine, for MFU; 0 = estimate from the CPU"),
    KEY_CHOICE(precision, G_RUN, MATH, "fp32", "fp32|bf16",
               "CPU matrix products (attention's too): fp32, or bf16 = BF16 operands with "
               "FP32 accumulation (AVX512_BF16 dot products where the CPU has them, a "
               "portable path elsewhere); weights, AdamW, LayerNorm, softmax and the loss "
               "stay FP32, no loss scaling. A GPU trains in FP16 whatever this says"),
    KEY_CHOICE(offload, G_RUN, HARMLESS, "all", "all|blocks|none|required",
               "layers on the GPU: all (FP16 forward and backward on the rank's GPU, "
               "FP32 master weights and AdamW on the host, dynamic loss scaling), blocks "
               "(every layer on the GPU too, through the pipeline's stage engine as one "
               "stage: each micro-batch's gradients come down after its backward) or "
               "none; with no GPU the CPU trains, said in one line; required: as all, "
               "but that is an error instead"),

    KEY_DBL(bucket_mb, G_PAR, HARMLESS, "25", 0.001, 4096, R_MIN | R_MAX,
            "gradient bucket size in MiB: each bucket is reduced as soon as backward "
            "has finished it, overlapping the rest of backward"),
    KEY_CHOICE(sync, G_PAR, MATH, "sync", "sync|async",
               "sync: each step applies its own averaged gradient; async: the one of "
               "staleness steps before, so reductions overlap the next step(s)"),
    KEY_INT(staleness, G_PAR, MATH, "1", 1, 8, R_MAX,
            "steps by which sync = async delays each gradient"),
    KEY_CHOICE(async_predict, G_PAR, MATH, "on", "on|off",
               "async: take each gradient at the weights it will be applied to, "
               "predicted by repeating the last update staleness times"),
    KEY_INT(tp, G_PAR, GRID, "1", 1, 65536, R_MAX,
            "tensor parallel: ranks that split each layer's heads and MLP units between "
            "them (must divide n_head and the number of ranks)"),
    KEY_INT(pp, G_PAR, GRID, "1", 1, 65536, R_MAX,
            "pipeline parallel: stages of contiguous layers each replica is cut into "
            "(at most n_layer; tp x pp must divide the number of ranks)"),
    KEY_INT(micro_batches, G_PAR, GRID, "0", 0, INT_MAX, 0,
            "pipeline: micro-batches each step's batch_size is cut into (must divide "
            "it); 0 = pp"),
    KEY_CHOICE(grad_comm, G_PAR, MATH, "fp32", "fp32|fp16",
               "number format of the gradients on the wire (fp16: IEEE half, summed "
               "in float)"),

    KEY_I64(ckpt_every, G_CKPT, HARMLESS, "0", 0, 0,
            "steps between checkpoints (and one at the end); 0 = none periodic (a stop "
            "signal still writes one)"),
    KEY_DBL(ckpt_minutes, G_CKPT, HARMLESS, "0", 0, 0, R_MIN,
            "also write a checkpoint when this many minutes passed since the last one "
            "(and one at the end); 0 = off"),
    KEY_INT(keep_ckpts, G_CKPT, HARMLESS, "3", 1, INT_MAX, 0, "newest checkpoints kept"),
    KEY_STR(resume, G_CKPT, HARMLESS, "none",
            "none = start fresh; auto = from the newest valid checkpoint of "
            "<out>/checkpoints if there is one; or the path of a checkpoint file (on any "
            "number of ranks that keeps its global batch)"),
    KEY_CHOICE(overwrite, G_CKPT, HARMLESS, "no", "no|yes",
               "yes = a fresh run into a folder that holds an earlier run's model.h5 "
               "replaces it (and empties its log); no = such a run is refused"),
    KEY_STR(init_from, G_MODEL, HARMLESS, "",
            "a Hugging Face GPT-2 folder (config.json, model.safetensors) a fresh run "
            "starts from; n_layer, n_head and n_embd must be its own, block_size at most "
            "its n_positions; any vocab_size (extra rows start random). A resume ignores it"),
};

const int config_key_count = (int)(sizeof config_keys / sizeof config_keys[0]);
_Static_assert(sizeof config_keys / sizeof config_keys[0] <= CONFIG_KEY_MAX,
               "CONFIG_KEY_MAX (config_keys.h) must hold every key");

/* Every enumerated field is stored through an int (set_key, format_value). */
_Static_assert(sizeof(gt_precision) == sizeof(int) && sizeof(gt_offload) == sizeof(int) &&
                   sizeof(gt_data_io) == sizeof(int) && sizeof(gt_sampling) == sizeof(int) &&
                   sizeof(gt_sync) == sizeof(int) && sizeof(gt_predict) == sizeof(int) &&
                   sizeof(gt_grad_comm) == sizeof(int) &&
                   sizeof(gt_thread_team) == sizeof(int),
               "enumerated config fields must be int-sized");

/* Key names are matched with '-' and '_' treated alike (--n-layer == --n_layer). */
static int key_equal(const char *a, const char *b)
{
    for (;; a++, b++) {
        char x = (*a == '-') ? '_' : *a, y = (*b == '-') ? '_' : *b;
        if (x != y) return 0;
        if (!x) return 1;
    }
}

int config_key_index(const char *name)
{
    for (int i = 0; i < config_key_count; i++)
        if (key_equal(config_keys[i].name, name)) return i;
    return -1;
}

/* Optimal string alignment distance (Levenshtein plus adjacent swaps), capped inputs. */
static int edit_distance(const char *a, const char *b)
{
    enum { M = 64 };
    int la = (int)strnlen(a, M - 1), lb = (int)strnlen(b, M - 1);
    int d[M][M];
    for (int i = 0; i <= la; i++) d[i][0] = i;
    for (int j = 0; j <= lb; j++) d[0][j] = j;
    for (int i = 1; i <= la; i++) {
        for (int j = 1; j <= lb; j++) {
            int cost = (a[i - 1] == b[j - 1]) ? 0 : 1;
            int v = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < v) v = d[i][j - 1] + 1;
            if (d[i - 1][j - 1] + cost < v) v = d[i - 1][j - 1] + cost;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                d[i - 2][j - 2] + 1 < v)
                v = d[i - 2][j - 2] + 1;
            d[i][j] = v;
        }
    }
    return d[la][lb];
}

/* The '_'-separated words of s, lower-cased and sorted, so that "lr_min" and "min_lr"
 * compare equal. */
static void sorted_words(const char *s, char *out, size_t cap)
{
    char words[8][64];
    int n = 0;
    size_t len = 0;
    for (const char *p = s;; p++) {
        char ch = (*p == '-') ? '_' : (char)tolower((unsigned char)*p);
        if (ch == '_' || ch == '\0') {
            if (len > 0 && n < 8) {
                words[n][len] = '\0';
                n++;
            }
            len = 0;
            if (ch == '\0') break;
        } else if (n < 8 && len < 63) {
            words[n][len++] = ch;
        }
    }
    for (int i = 1; i < n; i++) /* insertion sort, n <= 8 */
        for (int j = i; j > 0 && strcmp(words[j - 1], words[j]) > 0; j--) {
            char t[64];
            memcpy(t, words[j], sizeof t);
            memcpy(words[j], words[j - 1], sizeof t);
            memcpy(words[j - 1], t, sizeof t);
        }
    out[0] = '\0';
    size_t used = 0;
    for (int i = 0; i < n; i++) {
        int w = snprintf(out + used, cap - used, "%s%s", i ? "_" : "", words[i]);
        if (w < 0 || (size_t)w >= cap - used) break;
        used += (size_t)w;
    }
}

const char *config_key_suggest(const char *name)
{
    char lower[64], sw[64], kw[64];
    size_t i = 0;
    for (; i < sizeof lower - 1 && name[i]; i++)
        lower[i] = (name[i] == '-') ? '_' : (char)tolower((unsigned char)name[i]);
    lower[i] = '\0';
    sorted_words(lower, sw, sizeof sw);
    const char *best = NULL;
    int best_d = INT_MAX;
    for (int k = 0; k < config_key_count; k++) {
        int d = edit_distance(lower, config_keys[k].name);
        sorted_words(config_keys[k].name, kw, sizeof kw);
        int d2 = edit_distance(sw, kw);
        if (d2 < d) d = d2;
        if (d < best_d) {
            best_d = d;
            best = config_keys[k].name;
        }
    }
    size_t len = strlen(lower);
    int limit = (len <= 4) ? 1 : (len <= 8 ? 2 : 3);
    return (best && best_d <= limit) ? best : NULL;
}

void config_key_range(const key_def *k, char *buf, size_t cap)
{
    if (k->type == T_DBL) {
        char lo[64] = "", hi[64] = "";
        if (k->flags & R_MIN)
            snprintf(lo, sizeof lo, "%s %.17g", (k->flags & R_MIN_X) ? ">" : ">=", k->dmin);
        if (k->flags & R_MAX)
            snprintf(hi, sizeof hi, "%s %.17g", (k->flags & R_MAX_X) ? "<" : "<=", k->dmax);
        snprintf(buf, cap, "%s%s%s", lo, (lo[0] && hi[0]) ? " and " : "", hi);
    } else if (k->type == T_ENUM) {
        snprintf(buf, cap, "one of: %s", k->choices);
    } else if (k->type == T_U64 || k->type == T_STR) {
        buf[0] = '\0';
    } else if (k->flags & R_MAX) {
        snprintf(buf, cap, ">= %" PRId64 " and <= %" PRId64, k->imin, k->imax);
    } else {
        snprintf(buf, cap, ">= %" PRId64 "%s", k->imin, (k->flags & R_AUTO) ? " or auto" : "");
    }
}

const char *config_choice_word(const char *choices, int i, char *buf, size_t cap)
{
    const char *p = choices;
    for (int k = 0; k < i && p; k++) {
        p = strchr(p, '|');
        if (p) p++;
    }
    if (i < 0 || !p || !*p) return "?";
    size_t len = strcspn(p, "|");
    if (len >= cap) len = cap - 1;
    memcpy(buf, p, len);
    buf[len] = '\0';
    return buf;
}

const char *config_enum_word(const char *key, int v)
{
    /* per key, so that two results can coexist */
    static _Thread_local char words[CONFIG_KEY_MAX][32];
    const int ki = config_key_index(key);
    if (ki < 0 || config_keys[ki].type != T_ENUM) return "?";
    return config_choice_word(config_keys[ki].choices, v, words[ki], sizeof words[ki]);
}
