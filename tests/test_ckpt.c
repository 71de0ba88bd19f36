/* test_ckpt — training checkpoints (io/ckpt/ckpt.c) and the resume check (ckpt_compat.c).
 *
 * Save and load back bit for bit (parameters, moments, metadata: the global batch and
 * the data cursor too); an async checkpoint's gradients in flight, flags, sums and
 * weights before the update, bit for bit, with ckpt.h's checksum, and a flipped byte in
 * a gradient refused; the schedule state (/schedule) round trip and covered by the
 * checksum; versions 1 and 2 (no global batch: derived from their config and world
 * size) and 3 (no /schedule: zeros) still load; refuse a model of another shape; prune to the newest N; find
 * the newest checkpoint that verifies, skipping a truncated file and a file with one
 * flipped byte, one warning each;
 * compatible and incompatible config pairs; failed saves (missing folder, a folder in
 * the way, a read-only folder, a file size limit standing in for a full disk) leave the
 * previous checkpoint as it was and no .tmp behind. */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <hdf5.h>

#include "config.h" /* config_values_same */
#include "ckpt.h"
#include "h5model.h"
#include "h5util.h"
#include "optim.h"
#include "util.h"
#include "testutil.h"

/* a data fingerprint as h5data_fingerprint writes them */
#define DATA_ID "bytes=5 shape=[1 x 5] type=uint8 sample=fnv1a64:0123456789abcdef"

static char dir[512];

static uint64_t rs = 0x243f6a8885a308d3ull;
static float rndf(void)
{
    rs ^= rs << 13;
    rs ^= rs >> 7;
    rs ^= rs << 17;
    return (float)(rs >> 40) / 16777216.0f - 0.5f;
}

typedef struct run_state {
    gpt_model m;
    adamw_state opt;
    gt_tensor_table tab; /* of m */
    ckpt_state st;       /* what ckpt_save and ckpt_load take (state()) */
} run_state;

/* The global batch and data cursor the tests save (cfg's batch_size 12 x 1 rank, at
 * step 1234 with the global batch once changed from 12: not step x global batch). */
enum { GLOBAL_BATCH = 12, SAMPLES = 14000 };
/* the schedule state saved (ckpt.h /schedule), values a %a round trip must keep */
static const double SCHED[CKPT_SCHED_N] = {1.5, -2.25, 0.75, 1e-3, 0.02, 0x1.8p-3};

/* The ckpt_state of s: its model's table and buffers, its optimizer's moments and t. */
static ckpt_state *state(run_state *s)
{
    s->st = (ckpt_state){.shape = s->m.shape, .table = &s->tab, .params = s->m.params,
                         .m = s->opt.m, .v = s->opt.v, .adam_t = s->opt.t,
                         .global_batch = GLOBAL_BATCH, .samples = SAMPLES,
                         .schedule = SCHED};
    return &s->st;
}

/* ckpt_load into s (its optimizer's t included). */
static int load(const char *path, run_state *s, ckpt_meta *meta)
{
    const int rc = ckpt_load(path, state(s), meta);
    s->opt.t = s->st.adam_t;
    return rc;
}

static void make_state(run_state *s, int C, int random)
{
    gpt_shape sh = {64, 16, 2, 2, C};
    if (gpt_create(&s->m, sh, NULL, 1) != 0 || adamw_init(&s->opt, s->m.n_params) != 0 ||
        gpt_tensor_table(&s->m, &s->tab) != 0) {
        printf("cannot make a model\n");
        exit(99);
    }
    for (size_t i = 0; i < s->m.n_params; i++) {
        s->m.params[i] = random ? rndf() : 0.0f;
        s->opt.m[i] = random ? rndf() * 1e-3f : 0.0f;
        s->opt.v[i] = random ? rndf() * rndf() * 1e-6f : 0.0f;
    }
    if (random) {
        s->m.params[0] = -0.0f;
        s->m.params[1] = 1e-40f; /* subnormal */
        s->opt.v[0] = 3.0e38f;
    }
    s->opt.t = random ? 77 : 0;
}

static void free_state(run_state *s)
{
    gpt_free(&s->m);
    adamw_free(&s->opt);
    gt_tensor_table_free(&s->tab);
}

static int exists(const char *p) { return access(p, F_OK) == 0; }

static long file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

static char *slurp(const char *path, long *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    *n = ftell(f);
    rewind(f);
    char *b = malloc((size_t)*n + 1);
    if (fread(b, 1, (size_t)*n, f) != (size_t)*n) *n = 0;
    b[*n] = '\0';
    fclose(f);
    return b;
}

static void copy_file(const char *from, const char *to)
{
    long n = 0;
    char *b = slurp(from, &n);
    FILE *f = fopen(to, "wb");
    if (b && f) fwrite(b, 1, (size_t)n, f);
    if (f) fclose(f);
    free(b);
}

/* Flips one byte in the middle of a dataset's stored data. */
static int flip_byte_in(const char *path, const char *dataset)
{
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    hid_t d = H5Dopen2(f, dataset, H5P_DEFAULT);
    haddr_t off = H5Dget_offset(d);
    hsize_t sz = H5Dget_storage_size(d);
    H5Dclose(d);
    H5Fclose(f);
    if (off == HADDR_UNDEF || sz == 0) return -1;
    FILE *fp = fopen(path, "r+b");
    if (!fp) return -1;
    long at = (long)(off + sz / 2);
    fseek(fp, at, SEEK_SET);
    int c = fgetc(fp);
    fseek(fp, at, SEEK_SET);
    fputc(c ^ 0x10, fp);
    fclose(fp);
    return 0;
}

static const char *cfg =
    "data          = data/x.h5\ntrain_dataset = /train/tokens\nn_layer = 2\n"
    "n_embd = 32\nbatch_size = 12\nsteps = 2000\nlr = 0.001\nseed = 1337\n"
    "eval_every = 250\nthreads = 0\n";

static const uint64_t SEED = 0xfedcba9876543210ull;

/* ---- round trip ---------------------------------------------------------------- */

/* The checksum ckpt.h defines for a version `version` file of s at step 1234 (world 1,
 * SEED, cfg, GLOBAL_BATCH, SAMPLES; as: the gradients in flight, or NULL), computed
 * here independently of io/ckpt/ckpt.c. */
static uint64_t checksum_of(const run_state *s, int version, double loss_scale,
                            long long clean, const ckpt_async *as)
{
    char head[1280], cl[48] = "", run[1024] = "";
    if (version >= 2) snprintf(cl, sizeof cl, " loss_scale_clean=%lld", clean);
    if (version >= 3) {
        const int n = as ? as->n : 0;
        int len = snprintf(run, sizeof run, " global_batch=%d samples=%d in_flight=%d "
                           "predict=%d", GLOBAL_BATCH, SAMPLES, n,
                           as && as->before_update ? 1 : 0);
        if (n > 0) len += snprintf(run + len, sizeof run - (size_t)len, " overflow=");
        for (int i = 0; i < n; i++)
            len += snprintf(run + len, sizeof run - (size_t)len, "%d", as->overflow[i]);
        for (int i = 0; i < n; i++)
            len += snprintf(run + len, sizeof run - (size_t)len, "%s%a", i ? "," : " sumsq=",
                            as->sumsq[i]);
        for (int i = 0; version >= 4 && i < CKPT_SCHED_N; i++)
            len += snprintf(run + len, sizeof run - (size_t)len, "%s%a",
                            i ? "," : " schedule=", SCHED[i]);
    }
    int len = snprintf(head, sizeof head,
                       "gentrain-checkpoint %d step=%d adam_t=%lld world_size=1 seed=%llu "
                       "loss_scale=%a%s%s vocab_size=%d block_size=%d n_layer=%d n_head=%d "
                       "n_embd=%d n_params=%zu\n",
                       version, 1234, (long long)s->opt.t, (unsigned long long)SEED,
                       loss_scale, cl, run, s->m.shape.vocab_size, s->m.shape.block_size,
                       s->m.shape.n_layer, s->m.shape.n_head, s->m.shape.n_embd,
                       s->m.n_params);
    uint64_t h = gt_fnv1a(GT_FNV_OFFSET, head, (size_t)len);
    h = gt_fnv1a(h, cfg, strlen(cfg) + 1);
    const size_t bytes = s->m.n_params * sizeof(float); /* little-endian */
    h = gt_fnv1a(h, s->m.params, bytes);
    h = gt_fnv1a(h, s->opt.m, bytes);
    h = gt_fnv1a(h, s->opt.v, bytes);
    for (int i = 0; as && i < as->n; i++) h = gt_fnv1a(h, as->grads[i], bytes);
    if (as && as->before_update) h = gt_fnv1a(h, as->before_update, bytes);
    return h;
}

/* Does the file's checksum attribute hold checksum_of(...)? */
static int stored_checksum_is(const char *path, const run_state *s, int version,
                              double loss_scale, long long clean, const ckpt_async *as)
{
    char want[40], w[160], *have = NULL;
    snprintf(want, sizeof want, "fnv1a64:%016llx",
             (unsigned long long)checksum_of(s, version, loss_scale, clean, as));
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    int same = f >= 0 && h5io_attr_str(f, "checksum", &have, w, sizeof w) == 1 &&
               strcmp(have, want) == 0;
    if (f >= 0) H5Fclose(f);
    free(have);
    return same;
}

/* Compatibility checks, from the meta of checkpoint `path` (round_trip's), loaded into b. */
static void compat_checks(const char *path, run_state *b)
{
    ckpt_meta meta;
    TU_CHECK(load(path, b, &meta) == 0, "load again for the config checks");
    char changes[1024];
    TU_CHECK(ckpt_check_compatible(&meta, cfg, 1, changes, sizeof changes) == 0 &&
                 changes[0] == '\0',
             "same config: compatible, no changes");

    char other[2048];
    snprintf(other, sizeof other, "%s", cfg);
    char *p = strstr(other, "steps = 2000");
    memcpy(p, "steps = 4000", 12);
    p = strstr(other, "eval_every = 250");
    memcpy(p, "eval_every = 500", 16);
    p = strstr(other, "threads = 0");
    memcpy(p, "threads = 4", 11);
    strcat(other, "ckpt_every = 100\n");
    tu_capture_begin();
    int rc = ckpt_check_compatible(&meta, other, 1, changes, sizeof changes);
    const char *msg = tu_capture_end();
    printf("     changes: %s\n", changes);
    TU_CHECK(rc == 0 && msg[0] == '\0' && strstr(changes, "steps 2000 -> 4000") &&
                 strstr(changes, "eval_every 250 -> 500") && strstr(changes, "threads 0 -> 4") &&
                 strstr(changes, "ckpt_every = 100 (not in the checkpoint)"),
             "harmless changes allowed and listed");

    struct { const char *from, *to, *want; } bad[] = {
        {"seed = 1337", "seed = 1337\nstaleness = 2",
         "staleness = (unset) in the checkpoint, 2 now (it changes the training math"},
        {"lr = 0.001", "lr = 0.002", "lr = 0.001 in the checkpoint, 0.002 now"},
        {"seed = 1337", "seed = 1338", "seed = 1337 in the checkpoint, 1338 now"},
        {"n_layer = 2", "n_layer = 3", "n_layer = 2 in the checkpoint, 3 now"},
        {"steps = 2000", "steps = 1000",
         "it is at step 1234, after steps = 1000: nothing left to train"},
        {"threads = 0", "threads = 0\nfancy_new_key = 2",
         NULL}, /* unknown key only in the new config: allowed */
        /* precision and grad_comm change the numbers of every step (once refused as
         * keys the check did not know) */
        {"seed = 1337", "seed = 1337\nprecision = bf16",
         "precision = (unset) in the checkpoint, bf16 now (it changes the training math"},
        {"seed = 1337", "seed = 1337\ngrad_comm = fp16",
         "grad_comm = (unset) in the checkpoint, fp16 now (it changes the training math"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(other, sizeof other, "%s", cfg);
        p = strstr(other, bad[i].from);
        char tail[2048];
        snprintf(tail, sizeof tail, "%s", p + strlen(bad[i].from));
        snprintf(p, sizeof other - (size_t)(p - other), "%s%s", bad[i].to, tail);
        tu_capture_begin();
        rc = ckpt_check_compatible(&meta, other, 1, changes, sizeof changes);
        msg = tu_capture_end();
        if (bad[i].want)
            TU_CHECK(rc != 0 && strstr(msg, bad[i].want) && strstr(msg, path) &&
                         tu_count_lines(msg) == 1,
                     "refused: %s -> %s", bad[i].from, bad[i].to);
        else
            TU_CHECK(rc == 0, "allowed: %s -> %s (%s)", bad[i].from, bad[i].to, changes);
    }
    /* The data's path changed (staged elsewhere): allowed and listed where the checkpoint
     * records what its data held (compared by the trainer); refused where it does not. */
    snprintf(other, sizeof other, "%s", cfg);
    p = strstr(other, "data/x.h5");
    memcpy(p, "data/y.h5", 9);
    tu_capture_begin();
    rc = ckpt_check_compatible(&meta, other, 1, changes, sizeof changes);
    msg = tu_capture_end();
    TU_CHECK(meta.data && rc == 0 && msg[0] == '\0' &&
                 strstr(changes, "data data/x.h5 -> data/y.h5 (its fingerprint compared)"),
             "data path changed, the checkpoint's data recorded: allowed and listed (%s)",
             changes);
    char *recorded = meta.data;
    meta.data = NULL;
    tu_capture_begin();
    rc = ckpt_check_compatible(&meta, other, 1, changes, sizeof changes);
    msg = tu_capture_end();
    meta.data = recorded;
    TU_CHECK(rc != 0 && strstr(msg, "data = data/x.h5 in the checkpoint, data/y.h5 now") &&
                 strstr(msg, "does not record what its data held") && tu_count_lines(msg) == 1,
             "data path changed, nothing recorded to compare: refused");
    /* Another spelling of the same dataset inside the file: the same value, not listed;
     * another dataset: refused (train_dataset) or listed (val_dataset). */
    struct { const char *to; int ok; } names[] = {
        {"train_dataset = train/tokens", 1},   {"train_dataset = //train/./tokens/", 1},
        {"train_dataset = /train/tokens2", 0}, {"train_dataset = /train", 0},
        {"train_dataset = /train/tokens/x", 0}, {"train_dataset = tokens/train", 0},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        snprintf(other, sizeof other, "%s", cfg);
        p = strstr(other, "train_dataset = /train/tokens");
        char tail[2048];
        snprintf(tail, sizeof tail, "%s", p + strlen("train_dataset = /train/tokens"));
        snprintf(p, sizeof other - (size_t)(p - other), "%s%s", names[i].to, tail);
        tu_capture_begin();
        rc = ckpt_check_compatible(&meta, other, 1, changes, sizeof changes);
        msg = tu_capture_end();
        if (names[i].ok)
            TU_CHECK(rc == 0 && msg[0] == '\0' && !strstr(changes, "train_dataset"),
                     "%s: the same dataset, allowed and not listed (%s)", names[i].to,
                     changes);
        else
            TU_CHECK(rc != 0 && strstr(msg, "train_dataset = /train/tokens in the checkpoint") &&
                         tu_count_lines(msg) == 1,
                     "%s: another dataset, refused", names[i].to);
    }
    TU_CHECK(config_values_same("val_dataset", "val/tokens", "/val/tokens") &&
                 config_values_same("val_dataset", "none", "") &&
                 !config_values_same("val_dataset", "none", "/none") &&
                 !config_values_same("val_dataset", "/val/tokens", "/val/token") &&
                 !config_values_same("data", "data/x.h5", "./data/x.h5") &&
                 !config_values_same("lr", "0.001", "1e-3"),
             "config_values_same: dataset names by their parts, other keys as text");
    /* A key this check does not know, changed on both sides: refused. */
    char *ck = malloc(strlen(cfg) + 32);
    sprintf(ck, "%sfancy_key = 1\n", cfg);
    free(meta.config_text);
    meta.config_text = ck;
    snprintf(other, sizeof other, "%sfancy_key = 2\n", cfg);
    tu_capture_begin();
    rc = ckpt_check_compatible(&meta, other, 1, changes, sizeof changes);
    msg = tu_capture_end();
    TU_CHECK(rc != 0 && strstr(msg, "fancy_key = 1 in the checkpoint, 2 now"),
             "unknown key changed: refused");
    /* Another number of replicas, batch_size and global_batch_size: the caller keeps
     * the global batch (elastic resume), so they are allowed and listed. */
    snprintf(other, sizeof other, "%s", ck);
    p = strstr(other, "batch_size = 12");
    memcpy(p, "batch_size = 06", 15);
    strcat(other, "global_batch_size = 12\n");
    tu_capture_begin();
    rc = ckpt_check_compatible(&meta, other, 2, changes, sizeof changes);
    msg = tu_capture_end();
    printf("     changes: %s\n", changes);
    TU_CHECK(rc == 0 && msg[0] == '\0' && strstr(changes, "replicas 1 -> 2") &&
                 strstr(changes, "batch_size 12 -> 06") &&
                 strstr(changes, "global_batch_size = 12 (not in the checkpoint)"),
             "other replicas and batch split: allowed and listed");
    /* The precision of the checkpoint's run, changed: refused, and for its math. */
    char *cp = malloc(strlen(ck) + 32);
    sprintf(cp, "%sprecision = fp32\n", ck);
    free(meta.config_text);
    meta.config_text = ck = cp;
    snprintf(other, sizeof other, "%s", ck);
    memcpy(strstr(other, "precision = fp32"), "precision = bf16", 16);
    tu_capture_begin();
    rc = ckpt_check_compatible(&meta, other, 1, changes, sizeof changes);
    msg = tu_capture_end();
    TU_CHECK(rc != 0 && strstr(msg, "precision = fp32 in the checkpoint, bf16 now (it changes "
                                    "the training math") && tu_count_lines(msg) == 1,
             "precision changed: refused because it changes the math");
    /* sync, staleness, async_predict change what the steps apply: refused. */
    snprintf(other, sizeof other, "%ssync = async\n", ck);
    tu_capture_begin();
    rc = ckpt_check_compatible(&meta, other, 1, changes, sizeof changes);
    msg = tu_capture_end();
    TU_CHECK(rc != 0 && strstr(msg, "sync = (unset) in the checkpoint, async now") &&
                 strstr(msg, "it changes the training math"),
             "sync changed: refused");
    ckpt_meta_free(&meta);
}

static void round_trip(void)
{
    char sub[700], path[900], want[900];
    snprintf(sub, sizeof sub, "%s/rt", dir);
    mkdir(sub, 0755);
    run_state a, b;
    make_state(&a, 32, 1);
    make_state(&b, 32, 0);
    TU_CHECK(ckpt_save(sub, 1234, state(&a), cfg, 1, SEED, 65536.5, 37, DATA_ID, path,
                       sizeof path) == 0,
             "save succeeds");
    snprintf(want, sizeof want, "%s/ckpt_00001234.h5", sub);
    TU_CHECK(strcmp(path, want) == 0, "file name ckpt_00001234.h5 (%s)", path);
    snprintf(want, sizeof want, "%s/ckpt_00001234.h5.tmp", sub);
    TU_CHECK(!exists(want), "no .tmp left after the save");
    TU_CHECK(stored_checksum_is(path, &a, 4, 65536.5, 37, NULL), "the checksum is ckpt.h's");

    ckpt_meta meta;
    TU_CHECK(load(path, &b, &meta) == 0, "load succeeds");
    TU_CHECK(memcmp(a.m.params, b.m.params, a.m.n_params * sizeof(float)) == 0,
             "parameters equal bit for bit (%zu floats)", a.m.n_params);
    TU_CHECK(memcmp(a.opt.m, b.opt.m, a.opt.n * sizeof(float)) == 0 &&
                 memcmp(a.opt.v, b.opt.v, a.opt.n * sizeof(float)) == 0,
             "AdamW moments equal bit for bit");
    TU_CHECK(b.opt.t == 77 && meta.adam_t == 77, "adam_t restored (%lld)", (long long)b.opt.t);
    TU_CHECK(meta.step == 1234 && meta.world_size == 1 && meta.seed == SEED &&
                 meta.loss_scale == 65536.5 && meta.loss_scale_clean == 37 &&
                 meta.version == CKPT_FORMAT_VERSION,
             "meta: step %lld, world %d, seed %llx, loss scale %g after %lld clean steps, "
             "version %d", (long long)meta.step, meta.world_size,
             (unsigned long long)meta.seed, meta.loss_scale, (long long)meta.loss_scale_clean,
             meta.version);
    TU_CHECK(meta.shape.n_embd == 32 && meta.shape.n_layer == 2 && meta.shape.vocab_size == 64,
             "meta shape");
    TU_CHECK(memcmp(meta.schedule, SCHED, sizeof SCHED) == 0,
             "schedule state equal bit for bit (%a ... %a)", meta.schedule[0],
             meta.schedule[CKPT_SCHED_N - 1]);
    TU_CHECK(meta.global_batch == GLOBAL_BATCH && meta.samples == SAMPLES &&
                 meta.in_flight == 0 && meta.predict == 0 && b.st.global_batch == GLOBAL_BATCH &&
                 b.st.samples == SAMPLES,
             "meta: global batch %lld, data cursor %lld, nothing in flight",
             (long long)meta.global_batch, (long long)meta.samples);
    TU_CHECK(meta.config_text && strcmp(meta.config_text, cfg) == 0, "config text equal");
    TU_CHECK(meta.data && strcmp(meta.data, DATA_ID) == 0, "what data it was trained on, "
             "read back (%s)", meta.data ? meta.data : "none");
    TU_CHECK(strcmp(meta.path, path) == 0, "meta names the file");
    ckpt_meta_free(&meta);

    /* The /model group is the model file's: h5py code for model files reads it. */
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    hid_t d = H5Dopen2(f, "/model/transformer.h.1.mlp.c_fc.weight", H5P_DEFAULT);
    hid_t o = H5Dopen2(f, "/optim/v", H5P_DEFAULT);
    TU_CHECK(d >= 0 && o >= 0, "/model/<GPT-2 names> and /optim/v present");
    H5Dclose(o);
    H5Dclose(d);
    H5Fclose(f);

    /* A model of another shape is refused, naming the key; nothing changes. */
    run_state c;
    make_state(&c, 48, 0);
    tu_capture_begin();
    int rc = load(path, &c, &meta);
    const char *msg = tu_capture_end();
    TU_CHECK(rc != 0 && strstr(msg, "was saved with n_embd = 32; the model has n_embd = 48") &&
                 tu_count_lines(msg) == 1,
             "other shape refused in one line");
    TU_CHECK(c.m.params[5] == 0.0f && c.opt.t == 0, "other shape: state untouched");
    free_state(&c);

    compat_checks(path, &b);
    free_state(&a);
    free_state(&b);
}

/* ---- prune and find_latest --------------------------------------------------------- */

/* Rewrites a version 4 checkpoint as version `version` (1 to 3) wrote it (no
 * /schedule; 1 and 2 no global_batch, samples, in_flight, predict; version 1 no
 * loss_scale_clean either; that version's checksum line), computing the checksum here
 * from ckpt.h's definition: an independent check of the format and of the reader's
 * older paths. */
static int make_older(const char *path, const run_state *s, int version, double loss_scale,
                      long long clean)
{
    const uint64_t h = checksum_of(s, version, loss_scale, clean, NULL);
    char sum[40];
    snprintf(sum, sizeof sum, "fnv1a64:%016llx", (unsigned long long)h);
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    if (f < 0) return -1;
    int bad = H5Ldelete(f, "schedule", H5P_DEFAULT) < 0 ||
              (version < 3 && (H5Adelete(f, "global_batch") < 0 || H5Adelete(f, "samples") < 0 ||
                               H5Adelete(f, "in_flight") < 0 || H5Adelete(f, "predict") < 0)) ||
              (version < 2 && H5Adelete(f, "loss_scale_clean") < 0) ||
              H5Adelete(f, "format_version") < 0 || H5Adelete(f, "checksum") < 0 ||
              h5io_write_attr_int(f, "format_version", version) != 0 ||
              h5io_write_attr_str(f, "checksum", sum) != 0;
    return H5Fclose(f) < 0 || bad ? -1 : 0;
}

static void versions(void)
{
    char sub[700], path[900];
    snprintf(sub, sizeof sub, "%s/ver", dir);
    mkdir(sub, 0755);
    run_state a, b;
    make_state(&a, 32, 1);
    make_state(&b, 32, 0);
    ckpt_meta meta;
    for (int version = 1; version <= 3; version++) {
        TU_CHECK(ckpt_save(sub, 1234, state(&a), cfg, 1, SEED, 8192.0, 12, NULL, path,
                           sizeof path) == 0, "versions: save");
        TU_CHECK(make_older(path, &a, version, 8192.0, 12) == 0,
                 "versions: rewritten as version %d", version);
        memset(b.m.params, 0, b.m.n_params * sizeof(float));
        int rc = load(path, &b, &meta);
        /* Versions 1, 2: no global batch stored: cfg's batch_size 12 x world 1, the
         * cursor step x 12; version 3 stores them; none has a schedule (zeros). */
        TU_CHECK(rc == 0 && meta.version == version && meta.loss_scale == 8192.0 &&
                     meta.loss_scale_clean == (version == 1 ? 0 : 12) &&
                     meta.global_batch == 12 &&
                     meta.samples == (version < 3 ? 1234 * 12 : SAMPLES) &&
                     meta.in_flight == 0 && meta.schedule[0] == 0.0 &&
                     meta.schedule[CKPT_SCHED_N - 1] == 0.0 &&
                     memcmp(a.m.params, b.m.params, a.m.n_params * sizeof(float)) == 0,
                 "a version %d checkpoint still loads (its checksum verified), loss scale "
                 "%g, clean steps %lld, global batch %lld, data cursor %lld, schedule "
                 "zeros", version, rc == 0 ? meta.loss_scale : 0.0,
                 rc == 0 ? (long long)meta.loss_scale_clean : -1LL,
                 rc == 0 ? (long long)meta.global_batch : -1LL,
                 rc == 0 ? (long long)meta.samples : -1LL);
        if (rc == 0) ckpt_meta_free(&meta);
    }
    /* ckpt_read_meta: the attributes alone (of a version 2 file). */
    TU_CHECK(ckpt_save(sub, 1234, state(&a), cfg, 1, SEED, 8192.0, 12, NULL, path,
                       sizeof path) == 0 && make_older(path, &a, 2, 8192.0, 12) == 0,
             "versions: a version 2 file again");
    int rc = ckpt_read_meta(path, &meta);
    TU_CHECK(rc == 0 && meta.step == 1234 && meta.global_batch == 12 && meta.version == 2,
             "ckpt_read_meta reads the attributes and derives the global batch");
    if (rc == 0) ckpt_meta_free(&meta);

    /* The count of clean steps, the global batch and the data cursor are covered by the
     * checksum: changing one is caught. */
    const char *edit[3] = {"loss_scale_clean", "global_batch", "samples"};
    for (int k = 0; k < 3; k++) {
        TU_CHECK(ckpt_save(sub, 1234, state(&a), cfg, 1, SEED, 8192.0, 12, NULL, path,
                           sizeof path) == 0, "versions: save again");
        hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
        int edited = f >= 0 && H5Adelete(f, edit[k]) >= 0 &&
                     h5io_write_attr_int(f, edit[k], 13) == 0;
        if (f >= 0) H5Fclose(f);
        tu_capture_begin();
        rc = load(path, &b, &meta);
        const char *msg = tu_capture_end();
        TU_CHECK(edited && rc != 0 && strstr(msg, "checksum mismatch") &&
                     tu_count_lines(msg) == 1,
                 "an edited %s fails the checksum, in one line", edit[k]);
    }
    /* and so is the schedule state */
    TU_CHECK(ckpt_save(sub, 1234, state(&a), cfg, 1, SEED, 8192.0, 12, NULL, path,
                       sizeof path) == 0, "versions: save again");
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    hid_t d = f >= 0 ? H5Dopen2(f, "schedule", H5P_DEFAULT) : -1;
    double edited_sched[CKPT_SCHED_N];
    memcpy(edited_sched, SCHED, sizeof SCHED);
    edited_sched[1] = 2.25;
    const int edited = d >= 0 && H5Dwrite(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL,
                                          H5P_DEFAULT, edited_sched) >= 0;
    if (d >= 0) H5Dclose(d);
    if (f >= 0) H5Fclose(f);
    tu_capture_begin();
    rc = load(path, &b, &meta);
    const char *msg = tu_capture_end();
    TU_CHECK(edited && rc != 0 && strstr(msg, "checksum mismatch") && tu_count_lines(msg) == 1,
             "an edited schedule fails the checksum, in one line");
    free_state(&a);
    free_state(&b);
}

/* A checkpoint whose loss scale is NaN, infinite, negative or zero (the checksum
 * matching: written so by ckpt_save) is refused in one line naming the attribute;
 * a CPU run's 1.0 loads. */
static void bad_loss_scale(void)
{
    char sub[700], path[900];
    snprintf(sub, sizeof sub, "%s/scale", dir);
    mkdir(sub, 0755);
    run_state a, b;
    make_state(&a, 32, 1);
    make_state(&b, 32, 0);
    const double scales[5] = {NAN, -2.0, 0.0, INFINITY, 1.0};
    for (int k = 0; k < 5; k++) {
        ckpt_meta meta;
        TU_CHECK(ckpt_save(sub, 1234, state(&a), cfg, 1, SEED, scales[k], 0, NULL, path,
                           sizeof path) == 0, "loss scale %g: saved", scales[k]);
        tu_capture_begin();
        const int rc = load(path, &b, &meta);
        const char *msg = tu_capture_end();
        if (k == 4) {
            TU_CHECK(rc == 0 && meta.loss_scale == 1.0, "loss scale 1: loads");
        } else {
            TU_CHECK(rc != 0 && strstr(msg, "loss_scale") &&
                         strstr(msg, "not a positive finite number") &&
                         tu_count_lines(msg) == 1,
                     "loss scale %g: refused in one line naming it (%s)", scales[k], msg);
        }
        if (rc == 0) ckpt_meta_free(&meta);
    }
    free_state(&a);
    free_state(&b);
}

/* An async run's checkpoint: two gradients in flight (the second overflowed), their
 * sums and the weights before the last update, saved and read back bit for bit with
 * ckpt.h's checksum; a flipped byte in a gradient in flight is refused. */
static void async_round_trip(void)
{
    char sub[700], path[900];
    snprintf(sub, sizeof sub, "%s/async", dir);
    mkdir(sub, 0755);
    run_state a, b;
    make_state(&a, 32, 1);
    make_state(&b, 32, 0);
    const size_t n = a.m.n_params;
    ckpt_async as = {.n = 2, .overflow = {0, 1}, .sumsq = {1.5, 0x1.234p-7}};
    for (int i = 0; i < 2; i++) {
        as.grads[i] = malloc(n * sizeof(float));
        for (size_t j = 0; j < n; j++) as.grads[i][j] = rndf() * (float)(i + 1);
    }
    as.before_update = malloc(n * sizeof(float));
    for (size_t j = 0; j < n; j++) as.before_update[j] = rndf();
    ckpt_state *st = state(&a);
    st->async = &as;
    TU_CHECK(ckpt_save(sub, 1234, st, cfg, 1, SEED, 1.0, 0, NULL, path, sizeof path) == 0,
             "async: save with 2 gradients in flight");
    TU_CHECK(stored_checksum_is(path, &a, 4, 1.0, 0, &as),
             "async: the checksum is ckpt.h's (gradients, flags, sums, before_update)");
    ckpt_async got = {0};
    ckpt_meta meta;
    st = state(&b);
    st->async = &got;
    int rc = ckpt_load(path, st, &meta);
    int same = rc == 0 && got.n == 2 && got.before_update &&
               memcmp(got.before_update, as.before_update, n * sizeof(float)) == 0;
    for (int i = 0; same && i < 2; i++)
        same = memcmp(got.grads[i], as.grads[i], n * sizeof(float)) == 0 &&
               got.overflow[i] == as.overflow[i] && got.sumsq[i] == as.sumsq[i];
    TU_CHECK(same && meta.in_flight == 2 && meta.predict == 1,
             "async: gradients in flight, flags, sums and before_update read back bit for "
             "bit");
    if (rc == 0) ckpt_meta_free(&meta);
    ckpt_async_free(&got);
    TU_CHECK(flip_byte_in(path, "/async/grad_1") == 0, "async: a byte flipped in grad_1");
    st->async = &got;
    tu_capture_begin();
    rc = ckpt_load(path, st, &meta);
    const char *msg = tu_capture_end();
    TU_CHECK(rc != 0 && strstr(msg, "checksum mismatch") && got.n == 0,
             "async: the damaged gradient fails the checksum; nothing handed over");
    ckpt_async_free(&as);
    free_state(&a);
    free_state(&b);
}

static void prune_and_find(void)
{
    char sub[700], p[900], out[1024], want[1200];
    snprintf(sub, sizeof sub, "%s/runs", dir);
    mkdir(sub, 0755);
    run_state a;
    make_state(&a, 32, 1);
    for (int s = 100; s <= 500; s += 100)
        ckpt_save(sub, s, state(&a), cfg, 1, 1, 1.0, 0, NULL, NULL, 0);
    snprintf(p, sizeof p, "%s/ckpt_00000600.h5.tmp", sub);
    FILE *f = fopen(p, "w");
    fputs("half-written", f);
    fclose(f);
    snprintf(p, sizeof p, "%s/notes.txt", sub);
    f = fopen(p, "w");
    fputs("keep me", f);
    fclose(f);

    int n = ckpt_prune(sub, 3, INT64_MAX);
    TU_CHECK(n == 3, "prune to 3 deletes 2 checkpoints and the stale .tmp (%d)", n);
    int left[6];
    for (int s = 100; s <= 600; s += 100) {
        snprintf(p, sizeof p, "%s/ckpt_%08d.h5", sub, s);
        left[s / 100 - 1] = exists(p);
    }
    TU_CHECK(!left[0] && !left[1] && left[2] && left[3] && left[4],
             "300, 400, 500 kept; 100, 200 deleted");
    snprintf(p, sizeof p, "%s/notes.txt", sub);
    TU_CHECK(exists(p), "other files untouched");

    /* Damage the two newest: 400 truncated, 500 with one flipped byte; a new .tmp. */
    snprintf(p, sizeof p, "%s/ckpt_00000400.h5", sub);
    TU_CHECK(truncate(p, file_size(p) / 2) == 0, "truncated ckpt_00000400.h5");
    snprintf(p, sizeof p, "%s/ckpt_00000500.h5", sub);
    TU_CHECK(flip_byte_in(p, "/model/transformer.h.0.mlp.c_fc.weight") == 0,
             "flipped one byte of a tensor in ckpt_00000500.h5");
    snprintf(p, sizeof p, "%s/ckpt_00000600.h5.tmp", sub);
    f = fopen(p, "w");
    fputs("half-written", f);
    fclose(f);

    tu_capture_begin();
    int rc = ckpt_find_latest(sub, 1, out, sizeof out);
    const char *msg = tu_capture_end();
    snprintf(want, sizeof want, "%s/ckpt_00000300.h5", sub);
    TU_CHECK(rc == 1 && strcmp(out, want) == 0, "find_latest picks ckpt_00000300.h5 (%s)",
             rc == 1 ? out : "none");
    snprintf(want, sizeof want,
             "gentrain: warning: skipping checkpoint %s/ckpt_00000500.h5: checksum mismatch",
             sub);
    TU_CHECK(strstr(msg, want) != NULL, "warning names the flipped file and the checksum");
    snprintf(want, sizeof want, "gentrain: warning: skipping checkpoint %s/ckpt_00000400.h5: ",
             sub);
    TU_CHECK(strstr(msg, want) && strstr(msg, "truncated"),
             "warning names the truncated file and why");
    TU_CHECK(tu_count_lines(msg) == 2, "exactly two warning lines");

    /* Loading the damaged file directly fails and leaves the state as it was. */
    run_state b;
    make_state(&b, 32, 0);
    ckpt_meta meta;
    snprintf(p, sizeof p, "%s/ckpt_00000500.h5", sub);
    tu_capture_begin();
    rc = load(p, &b, &meta);
    msg = tu_capture_end();
    TU_CHECK(rc != 0 && strstr(msg, "checksum mismatch") && tu_count_lines(msg) == 1 &&
                 b.m.params[3] == 0.0f && b.opt.t == 0,
             "load of the flipped file refused, state untouched");
    free_state(&b);

    snprintf(p, sizeof p, "%s/none_here", dir);
    tu_capture_begin();
    rc = ckpt_find_latest(p, 1, out, sizeof out);
    msg = tu_capture_end();
    TU_CHECK(rc == 0 && msg[0] == '\0', "missing folder: no checkpoint, no message");
    snprintf(p, sizeof p, "%s/empty", dir);
    mkdir(p, 0755);
    TU_CHECK(ckpt_find_latest(p, 1, out, sizeof out) == 0, "empty folder: no checkpoint");
    /* only damaged checkpoints: 2, so resume = auto stops instead of starting fresh */
    snprintf(p, sizeof p, "%s/empty/ckpt_00000007.h5", dir);
    f = fopen(p, "w");
    fputs("not a checkpoint", f);
    fclose(f);
    snprintf(p, sizeof p, "%s/empty", dir);
    tu_capture_begin();
    rc = ckpt_find_latest(p, 1, out, sizeof out);
    msg = tu_capture_end();
    TU_CHECK(rc == 2 && strstr(msg, "skipping checkpoint") && tu_count_lines(msg) == 1,
             "only a damaged checkpoint: 2, with one warning naming it");
    free_state(&a);
}

/* ---- failed saves ------------------------------------------------------------------ */

static int no_tmp_in(const char *sub)
{
    char cmd[900];
    snprintf(cmd, sizeof cmd, "ls '%s' | grep -q '\\.tmp$'", sub);
    return system(cmd) != 0;
}

static void failed_saves(void)
{
    char sub[700], prev[900], copy[900], p[900];
    snprintf(sub, sizeof sub, "%s/fail", dir);
    mkdir(sub, 0755);
    run_state a;
    make_state(&a, 32, 1);
    TU_CHECK(ckpt_save(sub, 10, state(&a), cfg, 1, 1, 1.0, 0, NULL, prev, sizeof prev) == 0,
             "first save");
    snprintf(copy, sizeof copy, "%s/prev_copy", dir);
    copy_file(prev, copy);

    snprintf(p, sizeof p, "%s/no/such", dir);
    tu_capture_begin();
    int rc = ckpt_save(p, 20, state(&a), cfg, 1, 1, 1.0, 0, NULL, NULL, 0);
    const char *msg = tu_capture_end();
    TU_CHECK(rc != 0 && strstr(msg, "no such folder") && tu_count_lines(msg) == 1,
             "save into a missing folder: one error line");

    /* The final name is taken by a folder: the rename fails after the whole write. */
    snprintf(p, sizeof p, "%s/ckpt_00000020.h5", sub);
    mkdir(p, 0755);
    tu_capture_begin();
    rc = ckpt_save(sub, 20, state(&a), cfg, 1, 1, 1.0, 0, NULL, NULL, 0);
    msg = tu_capture_end();
    TU_CHECK(rc != 0 && strstr(msg, "cannot save checkpoint") && tu_count_lines(msg) == 1,
             "save whose rename fails: one error line");
    TU_CHECK(no_tmp_in(sub) && tu_files_equal(prev, copy), "no .tmp left, previous intact");
    rmdir(p);

    /* A full disk, without a mount: a file size limit makes write() fail (EFBIG) part
     * way through the file, as ENOSPC would. In a child, so the limit does not stay. */
    long full = file_size(prev);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit rl = {(rlim_t)(full / 3), (rlim_t)(full / 3)};
        setrlimit(RLIMIT_FSIZE, &rl);
        char errf[900];
        snprintf(errf, sizeof errf, "%s/child_err", dir);
        if (!freopen(errf, "w", stderr)) _exit(98);
        int r = ckpt_save(sub, 30, state(&a), cfg, 1, 1, 1.0, 0, NULL, NULL, 0);
        fflush(stderr);
        _exit(r == 0 ? 1 : 0);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    snprintf(p, sizeof p, "%s/child_err", dir);
    long n = 0;
    char *text = slurp(p, &n);
    printf("     stderr: %s", text && text[0] ? text : "(nothing)\n");
    TU_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "save past the size limit fails");
    TU_CHECK(text && strstr(text, "ckpt_00000030.h5") && tu_count_lines(text) == 1,
             "one error line naming the file");
    free(text);
    snprintf(p, sizeof p, "%s/ckpt_00000030.h5", sub);
    TU_CHECK(!exists(p) && no_tmp_in(sub) && tu_files_equal(prev, copy),
             "out of space: no new file, no .tmp, previous intact");
    char out[1024];
    TU_CHECK(ckpt_find_latest(sub, 1, out, sizeof out) == 1 && strcmp(out, prev) == 0,
             "the previous checkpoint is still the latest");

    if (geteuid() != 0) {
        chmod(sub, 0555);
        tu_capture_begin();
        rc = ckpt_save(sub, 40, state(&a), cfg, 1, 1, 1.0, 0, NULL, NULL, 0);
        msg = tu_capture_end();
        chmod(sub, 0755);
        TU_CHECK(rc != 0 && strstr(msg, "permission denied") && tu_count_lines(msg) == 1 &&
                     tu_files_equal(prev, copy) && no_tmp_in(sub),
                 "read-only folder: one error line, previous intact");
    } else {
        printf("     (running as root: the read-only folder case is skipped)\n");
    }
    free_state(&a);
}

int main(void)
{
    tu_make_tmpdir(dir, sizeof dir, "gt_ckpt");
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    round_trip();
    versions();
    bad_loss_scale();
    async_round_trip();
    prune_and_find();
    failed_saves();
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) printf("could not remove %s\n", dir);
    return tu_finish();
}
