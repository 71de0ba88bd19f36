/* config — see config.h.
 *
 * Everything a key needs (field, type, default, allowed range, help) is one row of
 * `keys` below; parsing, range checks, printing and --help all walk that table. */
#include "config.h"
#include "layout.h" /* defines: GPT_MAX_*, the largest shapes */

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util.h"

/* ---------------------------------------------------------------- the key table */

/* T_ENUM: an int-sized enum field whose value is the index of its word in choices. */
typedef enum { T_INT, T_I64, T_U64, T_DBL, T_STR, T_ENUM } key_type;

enum { G_DATA, G_MODEL, G_OPTIM, G_RUN, G_PAR, G_CKPT, G_COUNT };
static const char *const group_title[G_COUNT] = {
    "data", "model", "optimisation", "evaluation, output and machine",
    "data parallel (MPI ranks)", "checkpoints (in <out>/checkpoints/)"};

/* Range flags: which bounds apply and whether they are strict. Integer keys always
 * have a lower bound (imin); their upper bound is imax (the field type's limit unless
 * R_MAX says the table states one on purpose). */
#define R_MIN 1u      /* double: value >= dmin (or > with R_MIN_X) */
#define R_MIN_X 2u
#define R_MAX 4u      /* double: value <= dmax (or < with R_MAX_X); int: imax is a rule */
#define R_MAX_X 8u
#define R_AUTO 16u    /* int: the word "auto" is accepted and stored as GT_BATCH_AUTO */
/* string: names an object inside the data file ("/train/tokens"): two spellings of one
 * object ("train/tokens", "/train//tokens/") are one value to config_values_same */
#define K_H5NAME 32u

typedef struct key_def {
    const char *name;
    key_type type;
    size_t off;       /* offsetof(gt_config, field) */
    size_t cap;       /* strings: size of the char array */
    int group;
    config_resume resume; /* what changing it on resume does (config.h) */
    const char *def;  /* default, as text: parsed by the same code as user values */
    int64_t imin, imax;
    double dmin, dmax;
    unsigned flags;
    const char *help;
    const char *choices; /* strings: the allowed values, '|'-separated; NULL = any */
} key_def;

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

static const key_def keys[] = {
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

#define N_KEYS ((int)(sizeof keys / sizeof keys[0]))

/* Which keys a sequence of sources has set, and on which line (for duplicates). */
typedef struct given_set {
    unsigned char given[N_KEYS];
} given_set;

/* ---------------------------------------------------------------- helpers */

static void *field(gt_config *c, const key_def *k) { return (char *)c + k->off; }
static const void *cfield(const gt_config *c, const key_def *k)
{
    return (const char *)c + k->off;
}

/* Key names are matched with '-' and '_' treated alike (--n-layer == --n_layer). */
static int key_equal(const char *a, const char *b)
{
    for (;; a++, b++) {
        char x = (*a == '-') ? '_' : *a, y = (*b == '-') ? '_' : *b;
        if (x != y) return 0;
        if (!x) return 1;
    }
}

static int find_key(const char *name)
{
    for (int i = 0; i < N_KEYS; i++)
        if (key_equal(keys[i].name, name)) return i;
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

/* The known key closest to an unknown one, or NULL if none is close. */
static const char *suggest_key(const char *name)
{
    char lower[64], sw[64], kw[64];
    size_t i = 0;
    for (; i < sizeof lower - 1 && name[i]; i++)
        lower[i] = (name[i] == '-') ? '_' : (char)tolower((unsigned char)name[i]);
    lower[i] = '\0';
    sorted_words(lower, sw, sizeof sw);
    const char *best = NULL;
    int best_d = INT_MAX;
    for (int k = 0; k < N_KEYS; k++) {
        int d = edit_distance(lower, keys[k].name);
        sorted_words(keys[k].name, kw, sizeof kw);
        int d2 = edit_distance(sw, kw);
        if (d2 < d) d = d2;
        if (d < best_d) {
            best_d = d;
            best = keys[k].name;
        }
    }
    size_t len = strlen(lower);
    int limit = (len <= 4) ? 1 : (len <= 8 ? 2 : 3);
    return (best && best_d <= limit) ? best : NULL;
}

/* Text such as ">= 1", "> 0", ">= 0 and < 1" or ">= 0 and <= 2147483647". */
static void describe_range(const key_def *k, char *buf, size_t cap)
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

/* Integer parsing: optional sign and decimal digits, the whole text, no overflow.
 * Returns 0, -1 (not an integer) or -2 (does not fit). */
static int parse_i64(const char *s, int64_t *out)
{
    if (!*s || isspace((unsigned char)*s)) return -1;
    errno = 0;
    char *end = NULL;
    long long v = strtoll(s, &end, 10);
    if (end == s || *end != '\0') return -1;
    if (errno == ERANGE) return -2;
    *out = (int64_t)v;
    return 0;
}

static int parse_u64(const char *s, uint64_t *out)
{
    if (!*s || isspace((unsigned char)*s)) return -1;
    const char *p = (*s == '+') ? s + 1 : s;
    if (!isdigit((unsigned char)*p)) return -1; /* also refuses "-1", which strtoull wraps */
    errno = 0;
    char *end = NULL;
    unsigned long long v = strtoull(p, &end, 10);
    if (*end != '\0') return -1;
    if (errno == ERANGE) return -2;
    *out = (uint64_t)v;
    return 0;
}

/* Returns 0, -1 (not a number), -2 (overflows), -3 (nan or inf). */
static int parse_double(const char *s, double *out)
{
    if (!*s || isspace((unsigned char)*s)) return -1;
    errno = 0;
    char *end = NULL;
    double v = gt_strtod_decimal(s, &end);
    if (end == s || *end != '\0') return -1;
    if (isnan(v) || isinf(v)) return errno == ERANGE ? -2 : -3;
    *out = v; /* ERANGE with a finite result is underflow: keep the tiny value */
    return 0;
}

/* A string value must survive being written as `key = value` and read back. */
static const char *string_problem(const char *v)
{
    size_t n = strlen(v);
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)v[i];
        if (ch < 0x20 || ch == 0x7f) return "contains a control character";
        if (ch == '#' && (i == 0 || v[i - 1] == ' '))
            return "a '#' at the start or after a space would start a comment";
    }
    if (n > 0 && (v[0] == ' ' || v[n - 1] == ' '))
        return "has leading or trailing spaces";
    return NULL;
}

/* Word i of choices into buf (cap > 0); "?" when there is none. */
static const char *choice_word(const char *choices, int i, char *buf, size_t cap)
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

static int report_unknown(const char *key, const char *origin)
{
    char shown[72];
    const char *s = suggest_key(key);
    if (s)
        gt_error("%s: unknown key '%s'; did you mean '%s'?", origin, gt_printable(key, shown),
                 s);
    else
        gt_error("%s: unknown key '%s' (see 'gentrain train --help' for the keys)", origin,
                 gt_printable(key, shown));
    return -1;
}

/* The setters of each key type: raw is the user's text, shown its printable form for
 * error lines, range the allowed values in words. 0, or -1 after one error line. */
static int set_integer(gt_config *c, const key_def *k, const char *raw, const char *shown,
                       const char *origin, const char *range)
{
    if ((k->flags & R_AUTO) && strcmp(raw, "auto") == 0) {
        *(int *)field(c, k) = GT_BATCH_AUTO;
        return 0;
    }
    int64_t v = 0;
    int rc = parse_i64(raw, &v);
    if (rc == -1) {
        gt_error("%s: %s = '%.64s': not an integer%s", origin, k->name, shown,
                 (k->flags & R_AUTO) ? " or auto" : "");
        return -1;
    }
    if (rc == -2 && raw[0] == '-') v = INT64_MIN;
    if ((rc == -2 && raw[0] != '-') || v > k->imax) {
        if (k->flags & R_MAX)
            gt_error("%s: %s = %.64s: must be %s", origin, k->name, shown, range);
        else
            gt_error("%s: %s = %.64s: too large (at most %" PRId64 ")", origin, k->name,
                     shown, k->imax);
        return -1;
    }
    if (v < k->imin) {
        gt_error("%s: %s = %.64s: must be %s", origin, k->name, shown, range);
        return -1;
    }
    if (k->type == T_INT)
        *(int *)field(c, k) = (int)v;
    else
        *(int64_t *)field(c, k) = v;
    return 0;
}

static int set_unsigned(gt_config *c, const key_def *k, const char *raw, const char *shown,
                        const char *origin)
{
    uint64_t v = 0;
    int rc = parse_u64(raw, &v);
    if (rc == -1) {
        gt_error("%s: %s = '%.64s': not a non-negative integer", origin, k->name, shown);
        return -1;
    }
    if (rc == -2) {
        gt_error("%s: %s = %.64s: too large (at most %" PRIu64 ")", origin, k->name, shown,
                 UINT64_MAX);
        return -1;
    }
    *(uint64_t *)field(c, k) = v;
    return 0;
}

static int set_real(gt_config *c, const key_def *k, const char *raw, const char *shown,
                    const char *origin, const char *range)
{
    double v = 0;
    int rc = parse_double(raw, &v);
    if (rc != 0) {
        gt_error("%s: %s = %s%.64s%s: %s", origin, k->name, rc == -1 ? "'" : "", shown,
                 rc == -1 ? "'" : "",
                 rc == -1 ? "not a number" : rc == -2 ? "out of range of a double"
                                                      : "must be a finite number");
        return -1;
    }
    int bad = 0;
    if (k->flags & R_MIN) bad |= (k->flags & R_MIN_X) ? !(v > k->dmin) : !(v >= k->dmin);
    if (k->flags & R_MAX) bad |= (k->flags & R_MAX_X) ? !(v < k->dmax) : !(v <= k->dmax);
    if (bad) {
        gt_error("%s: %s = %.64s: must be %s", origin, k->name, shown, range);
        return -1;
    }
    *(double *)field(c, k) = v;
    return 0;
}

static int set_enum(gt_config *c, const key_def *k, const char *raw, const char *shown,
                    const char *origin)
{
    const int v = gt_word_index(k->choices, raw);
    if (v < 0) {
        gt_error("%s: %s = '%s': must be one of: %s", origin, k->name, shown, k->choices);
        return -1;
    }
    *(int *)field(c, k) = v;
    return 0;
}

static int set_string(gt_config *c, const key_def *k, const char *raw, const char *shown,
                      const char *origin)
{
    size_t n = strlen(raw);
    if (n >= k->cap) {
        gt_error("%s: %s = '%.48s...': too long (%zu characters, at most %zu)", origin,
                 k->name, shown, n, k->cap - 1);
        return -1;
    }
    const char *why = string_problem(raw);
    if (why) {
        gt_error("%s: %s = '%s': %s", origin, k->name, shown, why);
        return -1;
    }
    /* Clear the whole array so that equal configs are equal byte for byte. */
    memset(field(c, k), 0, k->cap);
    memcpy(field(c, k), raw, n);
    return 0;
}

/* Applies one key; `given` (may be NULL) records that the key was set. */
static int set_key(gt_config *c, const char *key, const char *value, const char *origin,
                   given_set *given)
{
    int ki = find_key(key);
    if (ki < 0) return report_unknown(key, origin);
    const key_def *k = &keys[ki];
    char range[96];
    describe_range(k, range, sizeof range);
    /* The value as it is echoed in errors: control characters would break the line. */
    char shown[72];
    const char *printable = gt_printable(value, shown);
    int rc = -1;
    switch (k->type) {
    case T_INT:
    case T_I64: rc = set_integer(c, k, value, printable, origin, range); break;
    case T_U64: rc = set_unsigned(c, k, value, printable, origin); break;
    case T_DBL: rc = set_real(c, k, value, printable, origin, range); break;
    case T_ENUM: rc = set_enum(c, k, value, printable, origin); break;
    case T_STR: rc = set_string(c, k, value, printable, origin); break;
    }
    if (rc == 0 && given) given->given[ki] = 1;
    return rc;
}

/* global_batch_size = auto: the limits, and what it cannot be combined with (what
 * depends on the replica count is the trainer's to check: train_settle_batch). */
static int config_validate_auto_batch(const gt_config *c)
{
    if (c->global_batch_size != GT_BATCH_AUTO) return 0;
    if (c->sync == SYNC_ASYNC) {
        gt_error("global_batch_size = auto needs sync = sync (an async step applies a "
                 "gradient of another step's batch)");
        return -1;
    }
    if (c->global_batch_min > 0 && c->global_batch_min % c->batch_size != 0) {
        gt_error("global_batch_min %d is not a multiple of batch_size %d",
                 c->global_batch_min, c->batch_size);
        return -1;
    }
    if (c->global_batch_max > 0 && c->global_batch_min > 0 &&
        (c->global_batch_max < c->global_batch_min ||
         c->global_batch_max % c->global_batch_min != 0)) {
        gt_error("global_batch_max %d is not a multiple of global_batch_min %d of at "
                 "least it", c->global_batch_max, c->global_batch_min);
        return -1;
    }
    return 0;
}

/* ---------------------------------------------------------------- public API */

void config_defaults(gt_config *c)
{
    memset(c, 0, sizeof *c);
    for (int i = 0; i < N_KEYS; i++) {
        /* The defaults are checked by the same code as user values; a failure here is
         * a bug in the table, reported by set_key. */
        if (set_key(c, keys[i].name, keys[i].def, "built-in default", NULL) != 0) abort();
    }
}

int config_set(gt_config *c, const char *key, const char *value, const char *origin)
{
    return set_key(c, key, value, origin ? origin : "command line", NULL);
}

static int is_blank(char ch) { return ch == ' ' || ch == '\t' || ch == '\r'; }

/* Splits one line of a config text in place: a comment ('#' at the start of the line
 * or after a space or tab) and surrounding blanks dropped, then `key = value`. 1 with
 * *key and *value set, 0 for a blank or comment line, -1 when it is not `key = value`
 * (*key then points at the trimmed line, empty when only the key is missing). */
static int split_line(char *line, char **key, char **value)
{
    const size_t len = strlen(line);
    for (size_t i = 0; i < len; i++) {
        if (line[i] == '#' && (i == 0 || is_blank(line[i - 1]))) {
            line[i] = '\0';
            break;
        }
    }
    char *s = line;
    while (is_blank(*s)) s++;
    char *e = s + strlen(s);
    while (e > s && is_blank(e[-1])) *--e = '\0';
    *key = s;
    if (!*s) return 0;
    char *eq = strchr(s, '=');
    if (!eq) return -1;
    char *ke = eq;
    while (ke > s && is_blank(ke[-1])) ke--;
    *ke = '\0';
    char *v = eq + 1;
    while (is_blank(*v)) v++;
    *value = v;
    return *s ? 1 : -1;
}

/* Past a UTF-8 byte order mark, as some editors write one. */
static const char *skip_bom(const char *p)
{
    if ((unsigned char)p[0] == 0xEF && (unsigned char)p[1] == 0xBB &&
        (unsigned char)p[2] == 0xBF)
        return p + 3;
    return p;
}

/* Parses `text` line by line; origin names it in errors ("file.cfg" -> "file.cfg:7"). */
static int load_text(gt_config *c, const char *text, const char *origin, given_set *given)
{
    int line_of[N_KEYS];
    memset(line_of, 0, sizeof line_of);
    char where[GT_PATH_MAX + 32];
    char line[2 * GT_PATH_MAX];
    const char *p = skip_bom(text);
    for (int lineno = 1; *p; lineno++) {
        const char *eol = strchr(p, '\n');
        size_t len = eol ? (size_t)(eol - p) : strlen(p);
        snprintf(where, sizeof where, "%s:%d", origin, lineno);
        if (len >= sizeof line) {
            gt_error("%s: line too long (%zu characters)", where, len);
            return -1;
        }
        memcpy(line, p, len);
        line[len] = '\0';
        p = eol ? eol + 1 : p + len;

        char *s = NULL, *v = NULL;
        const int kind = split_line(line, &s, &v);
        if (kind == 0) continue;
        if (kind < 0) {
            if (*s)
                gt_error("%s: expected 'key = value', got '%.64s'", where, s);
            else
                gt_error("%s: missing key before '='", where);
            return -1;
        }
        if (set_key(c, s, v, where, given) != 0) return -1;
        int ki = find_key(s);
        if (line_of[ki])
            gt_warn("%s: %s was already set on line %d; the later value wins", where,
                    keys[ki].name, line_of[ki]);
        line_of[ki] = lineno;
    }
    return 0;
}

int config_load_text(gt_config *c, const char *text, const char *origin)
{
    return load_text(c, text, origin ? origin : "config text", NULL);
}

static int load_file(gt_config *c, const char *path, given_set *given)
{
    enum { MAX_BYTES = 1 << 20 };
    int fd = gt_open_regular(path, "config file", 0, NULL);
    FILE *f = fd >= 0 ? fdopen(fd, "rb") : NULL;
    if (!f) {
        if (fd >= 0) {
            gt_error("cannot open config file %s: %s", path, strerror(errno));
            close(fd);
        }
        return -1;
    }
    char *buf = malloc(MAX_BYTES + 1);
    if (!buf) {
        fclose(f);
        gt_error("out of memory reading config file %s", path);
        return -1;
    }
    size_t n = fread(buf, 1, MAX_BYTES + 1, f);
    int rd_err = ferror(f);
    fclose(f);
    int rc = -1;
    if (rd_err) {
        gt_error("cannot read config file %s (is it a folder?)", path);
    } else if (n > MAX_BYTES) {
        gt_error("config file %s is larger than %d bytes; is it really a config file?",
                 path, MAX_BYTES);
    } else if (memchr(buf, '\0', n)) {
        gt_error("config file %s contains NUL bytes; is it really a config file?", path);
    } else {
        buf[n] = '\0';
        rc = load_text(c, buf, path, given);
    }
    free(buf);
    return rc;
}

int config_load_file(gt_config *c, const char *path)
{
    return load_file(c, path, NULL);
}

/* Values that follow from others when the user did not give them (see the help). */
static int derive_defaults(gt_config *c, const given_set *g)
{
    if (!g->given[find_key("warmup_steps")] && c->warmup_steps > c->steps)
        c->warmup_steps = c->steps / 10;
    if (!g->given[find_key("min_lr")] && c->min_lr > c->lr) c->min_lr = c->lr / 10;
    if (!g->given[find_key("log")] && c->out[0] && strcmp(c->out, "none") != 0) {
        char buf[sizeof c->log];
        int n = snprintf(buf, sizeof buf, "%s/log.jsonl", c->out);
        if (n < 0 || (size_t)n >= sizeof buf) {
            gt_error("out = '%.48s...': too long to hold log.jsonl; set log explicitly",
                     c->out);
            return -1;
        }
        memset(c->log, 0, sizeof c->log);
        memcpy(c->log, buf, (size_t)n);
    }
    return 0;
}

int config_parse_args(gt_config *c, int argc, char **argv, int first)
{
    given_set given;
    memset(&given, 0, sizeof given);
    /* Pass 1: every --config FILE, in order, before any --key value. */
    for (int i = first; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--config") == 0) {
            if (i + 1 >= argc) {
                gt_error("command line: --config needs a file name");
                return -1;
            }
            if (load_file(c, argv[++i], &given) != 0) return -1;
        } else if (strncmp(a, "--config=", 9) == 0) {
            if (load_file(c, a + 9, &given) != 0) return -1;
        } else if ((strcmp(a, "-o") == 0 || (strncmp(a, "--", 2) == 0 && !strchr(a, '='))) &&
                   i + 1 < argc && strncmp(argv[i + 1], "--", 2) != 0) {
            i++; /* skip the value of --key value (pass 2 checks it) */
        }
    }
    /* Pass 2: the --key value / --key=value pairs, later ones winning. */
    for (int i = first; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--config") == 0) {
            i++;
            continue;
        }
        if (strncmp(a, "--config=", 9) == 0) continue;
        if (strcmp(a, "-o") == 0) { /* -o DIR: --out DIR, as in every verb */
            if (i + 1 >= argc || strncmp(argv[i + 1], "--", 2) == 0) {
                gt_error("command line: -o needs a value (the run folder)");
                return -1;
            }
            if (set_key(c, "out", argv[++i], "command line", &given) != 0) return -1;
            continue;
        }
        if (strncmp(a, "--", 2) != 0 || a[2] == '\0' || a[2] == '=') {
            char shown[72];
            gt_error("command line: unexpected argument '%s' (options are --key VALUE "
                     "or --key=VALUE; see 'gentrain train --help')",
                     gt_printable(a, shown));
            return -1;
        }
        char key[GT_NAME_MAX];
        const char *value;
        const char *eq = strchr(a + 2, '=');
        size_t klen = eq ? (size_t)(eq - (a + 2)) : strlen(a + 2);
        if (klen >= sizeof key) return report_unknown(a + 2, "command line");
        memcpy(key, a + 2, klen);
        key[klen] = '\0';
        if (eq) {
            value = eq + 1;
        } else {
            if (find_key(key) < 0) return report_unknown(key, "command line");
            if (i + 1 >= argc || strncmp(argv[i + 1], "--", 2) == 0) {
                gt_error("command line: --%s needs a value (write --%s=VALUE for a value "
                         "that starts with --)",
                         key, key);
                return -1;
            }
            value = argv[++i];
        }
        if (set_key(c, key, value, "command line", &given) != 0) return -1;
    }
    return derive_defaults(c, &given);
}

/* Shortest %g text that reads back as exactly v. */
static void format_double(double v, char *buf, size_t cap)
{
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, cap, "%.*g", prec, v);
        if (strtod(buf, NULL) == v) return;
    }
    snprintf(buf, cap, "%.17g", v);
}

int config_validate(const gt_config *c)
{
    if (!c->data[0]) {
        gt_error("no data file: set data = FILE.h5 in the config file or give "
                 "--data FILE.h5 ('gentrain prepare' makes one from text)");
        return -1;
    }
    if (!c->train_dataset[0]) {
        gt_error("train_dataset is empty: name the dataset of training tokens, "
                 "e.g. /train/tokens");
        return -1;
    }
    if (c->n_embd % c->n_head != 0) {
        gt_error("n_embd %d is not divisible by n_head %d", c->n_embd, c->n_head);
        return -1;
    }
    /* The grid (grid.h); its product with the number of ranks is checked at start. */
    if (c->n_head % c->tp != 0) {
        gt_error("tp = %d does not divide n_head = %d (each tensor-parallel rank takes "
                 "whole attention heads)", c->tp, c->n_head);
        return -1;
    }
    if (c->vocab_size > 0 && c->vocab_size % c->tp != 0) {
        gt_error("tp = %d does not divide vocab_size = %d (each tensor-parallel rank takes "
                 "a share of the vocabulary; pad it)", c->tp, c->vocab_size);
        return -1;
    }
    if (c->pp > c->n_layer) {
        gt_error("pp = %d is larger than n_layer = %d (each pipeline stage needs a layer)",
                 c->pp, c->n_layer);
        return -1;
    }
    if (c->micro_batches > 0 && c->batch_size % c->micro_batches != 0) {
        gt_error("micro_batches = %d does not divide batch_size = %d", c->micro_batches,
                 c->batch_size);
        return -1;
    }
    if (c->peak_gflops > 0 && c->peak_gflops < 0.001) {
        char a[40];
        format_double(c->peak_gflops, a, sizeof a);
        gt_error("peak_gflops = %s is not a machine's peak: give 0 (measure it) or at "
                 "least 0.001", a);
        return -1;
    }
    if (c->min_lr > c->lr) {
        char a[40], b[40];
        format_double(c->min_lr, a, sizeof a);
        format_double(c->lr, b, sizeof b);
        gt_error("min_lr %s is larger than lr %s", a, b);
        return -1;
    }
    if (c->warmup_steps > c->steps) {
        gt_error("warmup_steps %" PRId64 " is larger than steps %" PRId64, c->warmup_steps,
                 c->steps);
        return -1;
    }
    if (config_validate_auto_batch(c) != 0) return -1;
    const int resuming = c->resume[0] && strcmp(c->resume, "none") != 0;
    const char *ckpt_key = c->ckpt_every > 0 ? "ckpt_every"
                           : c->ckpt_minutes > 0 ? "ckpt_minutes"
                           : resuming ? "resume" : NULL;
    if (ckpt_key && (!c->out[0] || strcmp(c->out, "none") == 0)) {
        gt_error("%s needs a run folder (checkpoints live in <out>/checkpoints/); set out",
                 ckpt_key);
        return -1;
    }
    return 0;
}

/* The value of key k as config text. buf must hold GT_PATH_MAX + 32 bytes. */
static void format_value(const gt_config *c, const key_def *k, char *buf, size_t cap)
{
    const void *p = cfield(c, k);
    switch (k->type) {
    case T_INT:
        if ((k->flags & R_AUTO) && *(const int *)p == GT_BATCH_AUTO)
            snprintf(buf, cap, "auto");
        else
            snprintf(buf, cap, "%d", *(const int *)p);
        break;
    case T_I64: snprintf(buf, cap, "%" PRId64, *(const int64_t *)p); break;
    case T_U64: snprintf(buf, cap, "%" PRIu64, *(const uint64_t *)p); break;
    case T_DBL: format_double(*(const double *)p, buf, cap); break;
    case T_STR: snprintf(buf, cap, "%s", (const char *)p); break;
    case T_ENUM: {
        char w[32];
        snprintf(buf, cap, "%s", choice_word(k->choices, *(const int *)p, w, sizeof w));
        break;
    }
    }
}

static int name_width(void)
{
    int w = 0;
    for (int i = 0; i < N_KEYS; i++)
        if ((int)strlen(keys[i].name) > w) w = (int)strlen(keys[i].name);
    return w;
}

/* "key = value\n" (or "key =\n" for an empty string) into buf; returns its length. */
static int format_line(const gt_config *c, const key_def *k, int width, char *buf,
                       size_t cap)
{
    char v[GT_PATH_MAX + 32];
    format_value(c, k, v, sizeof v);
    return snprintf(buf, cap, "%-*s =%s%s\n", width, k->name, v[0] ? " " : "", v);
}

void config_print(const gt_config *c, FILE *f)
{
    char line[GT_PATH_MAX + 128];
    int w = name_width();
    for (int i = 0; i < N_KEYS; i++) {
        format_line(c, &keys[i], w, line, sizeof line);
        fputs(line, f);
    }
}

char *config_to_text(const gt_config *c)
{
    char line[GT_PATH_MAX + 128];
    int w = name_width();
    size_t total = 1;
    for (int i = 0; i < N_KEYS; i++)
        total += (size_t)format_line(c, &keys[i], w, line, sizeof line);
    char *text = malloc(total);
    if (!text) {
        gt_error("out of memory formatting the run config (%zu bytes)", total);
        return NULL;
    }
    size_t used = 0;
    for (int i = 0; i < N_KEYS; i++) {
        int n = format_line(c, &keys[i], w, line, sizeof line);
        memcpy(text + used, line, (size_t)n);
        used += (size_t)n;
    }
    text[used] = '\0';
    return text;
}

/* Writes text word-wrapped to 88 columns, continuation lines indented by `indent`;
 * `col` is the column the first line starts at. */
static void print_wrapped(FILE *f, const char *text, int col, int indent)
{
    enum { WIDTH = 88 };
    const char *p = text;
    while (*p) {
        int room = WIDTH - col;
        int n = (int)strlen(p);
        if (n > room) { /* break at the last space that fits, if any */
            int cut = room;
            while (cut > 0 && p[cut] != ' ') cut--;
            if (cut > 0) n = cut;
        }
        fprintf(f, "%.*s\n", n, p);
        p += n;
        while (*p == ' ') p++;
        if (*p) fprintf(f, "%*s", indent, "");
        col = indent;
    }
}

void config_print_help(FILE *f)
{
    gt_config d;
    config_defaults(&d);
    fprintf(f, "Keys: 'key = value' lines in a --config file ('#' starts a comment), or\n"
               "--key VALUE / --key=VALUE on the command line, which wins over the file.\n");
    for (int g = 0; g < G_COUNT; g++) {
        fprintf(f, "\n%s:\n", group_title[g]);
        for (int i = 0; i < N_KEYS; i++) {
            const key_def *k = &keys[i];
            if (k->group != g) continue;
            char v[GT_PATH_MAX + 32], range[96], text[512];
            format_value(&d, k, v, sizeof v);
            describe_range(k, range, sizeof range);
            snprintf(text, sizeof text, "%s%s%s%s", k->help, range[0] ? " [" : "", range,
                     range[0] ? "]" : "");
            fprintf(f, "  %-14s %-14s ", k->name, v[0] ? v : "''");
            print_wrapped(f, text, 32, 32);
        }
    }
}

/* Every enumerated field is stored through an int (set_key, format_value). */
_Static_assert(sizeof(gt_precision) == sizeof(int) && sizeof(gt_offload) == sizeof(int) &&
                   sizeof(gt_data_io) == sizeof(int) && sizeof(gt_sampling) == sizeof(int) &&
                   sizeof(gt_sync) == sizeof(int) && sizeof(gt_predict) == sizeof(int) &&
                   sizeof(gt_grad_comm) == sizeof(int) &&
                   sizeof(gt_thread_team) == sizeof(int),
               "enumerated config fields must be int-sized");

int config_is_none(const char *s) { return s[0] == '\0' || strcmp(s, "none") == 0; }

const char *config_enum_word(const char *key, int v)
{
    static _Thread_local char words[N_KEYS][32]; /* per key, so two results can coexist */
    const int ki = find_key(key);
    if (ki < 0 || keys[ki].type != T_ENUM) return "?";
    return choice_word(keys[ki].choices, v, words[ki], sizeof words[ki]);
}

/* ---------------------------------------------------------------- resuming */

int config_resume_policy(const char *key)
{
    for (int i = 0; i < N_KEYS; i++)
        if (strcmp(keys[i].name, key) == 0) return (int)keys[i].resume;
    return -1;
}

/* The next part of an HDF5 object path at *p: its length, *p moved to its start past
 * any '/' and "." parts (the root's own name and "this group"); 0 at the end. */
static size_t h5name_part(const char **p)
{
    for (;;) {
        while (**p == '/') (*p)++;
        size_t n = strcspn(*p, "/");
        if (n == 1 && **p == '.') {
            (*p)++;
            continue;
        }
        return n;
    }
}

static int same_h5name(const char *a, const char *b)
{
    for (;;) {
        const size_t na = h5name_part(&a), nb = h5name_part(&b);
        if (na != nb || strncmp(a, b, na) != 0) return 0;
        if (na == 0) return 1;
        a += na;
        b += nb;
    }
}

int config_values_same(const char *key, const char *a, const char *b)
{
    if (strcmp(a, b) == 0) return 1;
    const int ki = find_key(key);
    if (ki < 0 || !(keys[ki].flags & K_H5NAME)) return 0;
    /* "none" and "" turn evaluation off: they are words, not paths */
    if (config_is_none(a) || config_is_none(b)) return config_is_none(a) && config_is_none(b);
    return same_h5name(a, b);
}

const char *config_resume_reason(config_resume policy)
{
    switch (policy) {
    case CONFIG_RESUME_MATH: return "it changes the training math";
    case CONFIG_RESUME_HARMLESS: return "it changes no number of the steps to come";
    case CONFIG_RESUME_GRID: return "the grid and the batch split keep the global batch";
    case CONFIG_RESUME_PLACE: return "the data is compared by its fingerprint, not its path";
    }
    return "?";
}

int config_text_each(const char *text,
                     int (*fn)(void *ctx, const char *key, const char *value), void *ctx)
{
    /* One copy, split line by line in place: unlike load_text, no line is too long. */
    char *copy = strdup(skip_bom(text ? text : ""));
    if (!copy) {
        gt_error("out of memory reading a config text");
        return -1;
    }
    int rc = 0;
    for (char *line = copy; line && *line && rc == 0;) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = '\0';
        char *key = NULL, *value = NULL;
        if (split_line(line, &key, &value) == 1) rc = fn(ctx, key, value);
        line = nl ? nl + 1 : NULL;
    }
    free(copy);
    return rc;
}

typedef struct text_lookup {
    const char *key;
    char *out;
    size_t cap;
    int found;
} text_lookup;

static int take_value(void *ctx, const char *key, const char *value)
{
    text_lookup *l = ctx;
    if (strcmp(key, l->key) == 0) {
        snprintf(l->out, l->cap, "%s", value);
        l->found = 1;
    }
    return 0;
}

int config_text_value(const char *text, const char *key, char *out, size_t cap)
{
    text_lookup l = {.key = key, .out = out, .cap = cap, .found = 0};
    if (cap) out[0] = '\0';
    if (config_text_each(text, take_value, &l) != 0) return -1;
    return l.found;
}
