/* ckpt — see ckpt.h.
 *
 * The /model group is written and read by the model file's own code (h5model_io.h), so
 * a checkpoint's parameters are exactly a model file's. Loading reads the whole file
 * into scratch buffers and verifies the checksum before it copies anything into the
 * caller's buffers: a damaged file changes nothing. */
#include "ckpt.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <hdf5.h>

#include "../src/util.h"
#include "h5lock.h"
#include "h5model_io.h"
#include "h5util.h"

#define WHY_CAP 6000 /* room for a path of GT_PATH_MAX and the reason */

/* ---- checksum ------------------------------------------------------------------- */

/* The checksum of a file of mt->version (1: no loss_scale_clean in the line). */
static uint64_t checksum(const ckpt_meta *mt, size_t n_params, const char *config_text,
                         const float *params, const float *m, const float *v)
{
    char head[512], clean[48] = "";
    if (mt->version >= 2)
        snprintf(clean, sizeof clean, " loss_scale_clean=%" PRId64, mt->loss_scale_clean);
    int len = snprintf(head, sizeof head,
                       "%s %d step=%" PRId64 " adam_t=%" PRId64 " world_size=%d seed=%" PRIu64
                       " loss_scale=%a%s vocab_size=%d block_size=%d n_layer=%d n_head=%d "
                       "n_embd=%d n_params=%zu\n",
                       CKPT_FORMAT_NAME, mt->version, mt->step, mt->adam_t, mt->world_size,
                       mt->seed, mt->loss_scale, clean, mt->shape.vocab_size,
                       mt->shape.block_size, mt->shape.n_layer, mt->shape.n_head,
                       mt->shape.n_embd, n_params);
    uint64_t h = gt_fnv1a(GT_FNV_OFFSET, head, (size_t)len);
    const char *cfg = config_text ? config_text : "";
    h = gt_fnv1a(h, cfg, strlen(cfg) + 1);
    h = gt_fnv1a_floats(h, params, n_params);
    h = gt_fnv1a_floats(h, m, n_params);
    return gt_fnv1a_floats(h, v, n_params);
}

/* ---- small HDF5 helpers ----------------------------------------------------------- */

static int write_scalar(hid_t obj, const char *name, hid_t ftype, hid_t mtype,
                        const void *value)
{
    hid_t space = H5Screate(H5S_SCALAR), attr = -1;
    int rc = -1;
    if (space < 0) return -1;
    if ((attr = H5Acreate2(obj, name, ftype, space, H5P_DEFAULT, H5P_DEFAULT)) >= 0 &&
        H5Awrite(attr, mtype, value) >= 0)
        rc = 0;
    if (attr >= 0 && H5Aclose(attr) < 0) rc = -1;
    H5Sclose(space);
    return rc;
}

/* Reads a one-element numeric attribute, converted to mtype. 0, or -1 with why. */
static int read_scalar(hid_t obj, const char *name, hid_t mtype, H5T_class_t want,
                       void *out, char *why, size_t cap)
{
    htri_t e = H5Aexists(obj, name);
    if (e <= 0) {
        snprintf(why, cap, "no %s attribute", name);
        return -1;
    }
    hid_t attr = H5Aopen(obj, name, H5P_DEFAULT), type = -1, space = -1;
    int rc = -1;
    if (attr < 0 || (type = H5Aget_type(attr)) < 0 || (space = H5Aget_space(attr)) < 0) {
        snprintf(why, cap, "cannot read attribute %s", name);
        goto done;
    }
    if (H5Tget_class(type) != want || H5Sget_simple_extent_npoints(space) != 1) {
        snprintf(why, cap, "attribute %s is not a single %s", name,
                 want == H5T_FLOAT ? "number" : "integer");
        goto done;
    }
    if (H5Aread(attr, mtype, out) < 0) {
        snprintf(why, cap, "cannot read attribute %s", name);
        goto done;
    }
    rc = 0;
done:
    if (space >= 0) H5Sclose(space);
    if (type >= 0) H5Tclose(type);
    if (attr >= 0) H5Aclose(attr);
    return rc;
}

static int write_flat(hid_t group, const char *name, const float *data, size_t n)
{
    hsize_t dims[1] = {(hsize_t)n};
    hid_t space = H5Screate_simple(1, dims, NULL), dset = -1;
    int rc = -1;
    if (space < 0) return -1;
    if ((dset = H5Dcreate2(group, name, H5T_IEEE_F32LE, space, H5P_DEFAULT, H5P_DEFAULT,
                           H5P_DEFAULT)) >= 0 &&
        H5Dwrite(dset, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) >= 0)
        rc = 0;
    if (dset >= 0 && H5Dclose(dset) < 0) rc = -1;
    H5Sclose(space);
    return rc;
}

/* Reads the float32 [n] dataset `name` into out. 0, or -1 with why. */
static int read_flat(hid_t file, const char *name, float *out, size_t n, char *why,
                     size_t cap)
{
    if (h5io_object_kind(file, name) != H5I_DATASET) {
        snprintf(why, cap, "dataset %s is missing", name);
        return -1;
    }
    hid_t dset = H5Dopen2(file, name, H5P_DEFAULT), type = -1, space = -1;
    int rc = -1;
    hsize_t dims[H5S_MAX_RANK];
    if (dset < 0 || (type = H5Dget_type(dset)) < 0 || (space = H5Dget_space(dset)) < 0) {
        snprintf(why, cap, "cannot open dataset %s (damaged file?)", name);
        goto done;
    }
    int rank = H5Sget_simple_extent_ndims(space);
    if (H5Tget_class(type) != H5T_FLOAT || rank != 1 ||
        H5Sget_simple_extent_dims(space, dims, NULL) < 0 || dims[0] != (hsize_t)n) {
        snprintf(why, cap, "dataset %s is not float32 [%zu]", name, n);
        goto done;
    }
    if (H5Dread(dset, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, out) < 0) {
        snprintf(why, cap, "cannot read dataset %s (damaged or truncated file?)", name);
        goto done;
    }
    rc = 0;
done:
    if (space >= 0) H5Sclose(space);
    if (type >= 0) H5Tclose(type);
    if (dset >= 0) H5Dclose(dset);
    return rc;
}

/* ---- names in the folder ---------------------------------------------------------- */

/* Step of a name "ckpt_<digits>.h5" (suffix ".h5.tmp" when tmp): 0 with *step, or -1. */
static int parse_name(const char *name, int tmp, int64_t *step)
{
    if (strncmp(name, "ckpt_", 5) != 0) return -1;
    const char *p = name + 5, *q = p;
    int64_t v = 0;
    for (; *q >= '0' && *q <= '9'; q++) {
        if (v > (INT64_MAX - 9) / 10) return -1;
        v = v * 10 + (*q - '0');
    }
    if (q == p || strcmp(q, tmp ? ".h5.tmp" : ".h5") != 0) return -1;
    *step = v;
    return 0;
}

typedef struct entry {
    int64_t step;
    char *name;
} entry;

static int by_step_desc(const void *a, const void *b)
{
    const entry *x = a, *y = b;
    if (x->step != y->step) return x->step < y->step ? 1 : -1;
    return strcmp(y->name, x->name);
}

static void free_entries(entry *e, size_t n)
{
    for (size_t i = 0; i < n; i++) free(e[i].name);
    free(e);
}

/* The checkpoint files (tmp = 0) or stale temporaries (tmp = 1) of dir, highest step
 * first. Returns 0 (*out may be NULL when none), 1 when dir does not exist, -1
 * (reported). */
static int list_dir(const char *dir, int tmp, entry **out, size_t *count)
{
    *out = NULL;
    *count = 0;
    DIR *d = opendir(dir);
    if (!d) {
        if (errno == ENOENT) return 1;
        gt_error("cannot read checkpoint folder %s: %s", dir, h5io_errno_reason(errno));
        return -1;
    }
    entry *v = NULL;
    size_t n = 0, cap = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        int64_t step;
        if (parse_name(e->d_name, tmp, &step) != 0) continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 16;
            entry *nv = realloc(v, cap * sizeof *v);
            if (!nv) goto oom;
            v = nv;
        }
        if (!(v[n].name = strdup(e->d_name))) goto oom;
        v[n++].step = step;
    }
    closedir(d);
    if (n) qsort(v, n, sizeof *v, by_step_desc);
    *out = v;
    *count = n;
    return 0;
oom:
    closedir(d);
    free_entries(v, n);
    gt_error("out of memory listing %s", dir);
    return -1;
}

static char *join(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *s = malloc(n);
    if (s) snprintf(s, n, "%s%s%s", dir, dir[0] && dir[strlen(dir) - 1] == '/' ? "" : "/",
                    name);
    return s;
}

/* Deletes stale ckpt_*.h5.tmp files; returns how many, or -1 (reported). */
static int remove_stale_tmp(const char *dir)
{
    entry *e;
    size_t n;
    int r = list_dir(dir, 1, &e, &n);
    if (r != 0) return r < 0 ? -1 : 0;
    int removed = 0, rc = 0;
    for (size_t i = 0; i < n; i++) {
        char *p = join(dir, e[i].name);
        if (p && unlink(p) == 0) {
            removed++;
        } else if (p && errno != ENOENT) {
            gt_error("cannot delete the unfinished checkpoint %s: %s", p,
                     h5io_errno_reason(errno));
            rc = -1;
        }
        free(p);
    }
    free_entries(e, n);
    return rc ? -1 : removed;
}

int ckpt_path(const char *dir, int64_t step, char *buf, size_t cap)
{
    const char *sep = dir[0] && dir[strlen(dir) - 1] == '/' ? "" : "/";
    int n = snprintf(buf, cap, "%s%sckpt_%08" PRId64 ".h5", dir, sep, step);
    if (n < 0 || (size_t)n >= cap) {
        gt_error("checkpoint path too long in %s", dir);
        return -1;
    }
    return 0;
}

void ckpt_meta_free(ckpt_meta *meta)
{
    if (!meta) return;
    free(meta->config_text);
    meta->config_text = NULL;
    free(meta->data);
    meta->data = NULL;
}

/* ---- save ----------------------------------------------------------------------- */

/* Test hook, for tests/test_resume.sh only (a crash in the middle of a checkpoint
 * write, made deterministic): when GENTRAIN_TEST_CRASH_IN_CKPT=N is set, the N-th
 * checkpoint save of this process flushes what it wrote to its .tmp (model and
 * optimizer groups) and kills the process with SIGKILL before the rename. */
static void crash_hook(hid_t file)
{
    static long saves;
    saves++;
    const char *e = getenv("GENTRAIN_TEST_CRASH_IN_CKPT");
    if (!e || !*e) return;
    char *end;
    long n = strtol(e, &end, 10);
    if (*end != '\0' || n != saves) return;
    H5Fflush(file, H5F_SCOPE_LOCAL);
    fprintf(stderr, "gentrain: test hook GENTRAIN_TEST_CRASH_IN_CKPT=%ld: SIGKILL in the "
                    "middle of a checkpoint write\n", n);
    fflush(stderr);
    raise(SIGKILL);
}

int ckpt_save(const char *dir, int64_t step, const ckpt_state *st, const char *config_text,
              int world_size, uint64_t seed, double loss_scale, int64_t loss_scale_clean,
              const char *data, char *out_path, size_t cap)
{
    char path[4096], tmp[4200], why[160], sum[40];
    if (ckpt_path(dir, step, path, sizeof path) != 0) return -1;
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    if (step < 0 || !st->table || !st->params || !st->m || !st->v) {
        gt_error("cannot save checkpoint %s: %s", path,
                 step < 0 ? "negative step" : "parameters or optimizer state missing");
        return -1;
    }
    if (remove_stale_tmp(dir) < 0) return -1;

    const size_t n = st->table->total;
    ckpt_meta mt = {.version = CKPT_FORMAT_VERSION, .step = step, .adam_t = st->adam_t,
                    .world_size = world_size, .seed = seed, .loss_scale = loss_scale,
                    .loss_scale_clean = loss_scale_clean, .shape = st->shape};
    snprintf(sum, sizeof sum, "fnv1a64:%016" PRIx64,
             checksum(&mt, n, config_text, st->params, st->m, st->v));

    hid_t file = -1, group = -1;
    int rc = -1, made_tmp = 0;
    int64_t ws = world_size, np = (int64_t)n;
    h5lock_acquire();
    if ((file = h5io_create(tmp, why, sizeof why)) < 0) {
        gt_error("cannot save checkpoint %s: cannot create %s: %s", path, tmp, why);
        goto fail;
    }
    made_tmp = 1;
    if (h5model_write_layout(file, CKPT_FORMAT_NAME, CKPT_FORMAT_VERSION, st->shape,
                             st->table, st->params, config_text, step, tmp) != 0)
        goto fail;
    if (h5io_write_attr_int(file, "adam_t", st->adam_t) != 0 ||
        h5io_write_attr_int(file, "world_size", ws) != 0 ||
        write_scalar(file, "seed", H5T_STD_U64LE, H5T_NATIVE_UINT64, &seed) != 0 ||
        write_scalar(file, "loss_scale", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, &loss_scale) !=
            0 ||
        h5io_write_attr_int(file, "loss_scale_clean", loss_scale_clean) != 0 ||
        h5io_write_attr_int(file, "n_params", np) != 0 ||
        h5io_write_attr_str(file, "checksum", sum) != 0 ||
        (data && h5io_write_attr_str(file, "data", data) != 0)) {
        gt_error("cannot write the attributes of %s (disk full?)", tmp);
        goto fail;
    }
    if ((group = H5Gcreate2(file, "optim", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)) < 0 ||
        write_flat(group, "m", st->m, n) != 0 || write_flat(group, "v", st->v, n) != 0) {
        gt_error("cannot write the optimizer state to %s (disk full?)", tmp);
        goto fail;
    }
    int bad = H5Gclose(group) < 0;
    group = -1;
    crash_hook(file);
    hid_t written = file;
    file = -1;
    if (h5io_finish(written, bad, tmp, path, why, sizeof why) != 0) {
        gt_error("cannot save checkpoint %s: %s", path, why);
        goto fail;
    }
    made_tmp = 0;
    if (out_path && gt_strlcpy(out_path, path, cap) != 0) {
        gt_error("checkpoint path too long: %s", path);
        goto fail;
    }
    rc = 0;
fail:
    if (group >= 0) H5Gclose(group);
    h5io_close_write(file);
    if (made_tmp) unlink(tmp);
    h5lock_release();
    return rc;
}

int ckpt_prune(const char *dir, int keep)
{
    if (keep < 1) keep = 1;
    int removed = remove_stale_tmp(dir);
    if (removed < 0) return -1;
    entry *e;
    size_t n;
    int r = list_dir(dir, 0, &e, &n);
    if (r != 0) return r < 0 ? -1 : removed;
    int rc = 0;
    for (size_t i = (size_t)keep; i < n; i++) {
        char *p = join(dir, e[i].name);
        if (!p || unlink(p) != 0) {
            gt_error("cannot delete old checkpoint %s/%s: %s", dir, e[i].name,
                     p ? h5io_errno_reason(errno) : "out of memory");
            rc = -1;
        } else {
            removed++;
        }
        free(p);
    }
    free_entries(e, n);
    return rc ? -1 : removed;
}

/* ---- reading ---------------------------------------------------------------------- */

static const char *const shape_keys[5] = {"vocab_size", "block_size", "n_layer", "n_head",
                                          "n_embd"};

/* The format attributes: a gentrain checkpoint of a version this code reads. 0 with
 * *version set, or -1 with why. */
static int read_format(hid_t file, int *version, char *why, size_t cap)
{
    char w[256], *fmt = NULL;
    int r = h5io_attr_str(file, "format", &fmt, w, sizeof w);
    if (r != 1 || strcmp(fmt, CKPT_FORMAT_NAME) != 0) {
        if (r == 1)
            snprintf(why, cap, "not a gentrain checkpoint (format = \"%s\")", fmt);
        else
            snprintf(why, cap, "not a gentrain checkpoint (%s)",
                     r == 0 ? "no format attribute" : w);
        free(fmt);
        return -1;
    }
    free(fmt);
    int64_t ver = 0;
    r = h5io_attr_int(file, "format_version", &ver, w, sizeof w);
    /* Version 1 (no loss_scale_clean) is still read: nothing saved is lost. */
    if (r != 1 || ver < 1 || ver > CKPT_FORMAT_VERSION) {
        if (r == 1)
            snprintf(why, cap, "format_version %" PRId64 "; this gentrain reads versions 1 to %d",
                     ver, CKPT_FORMAT_VERSION);
        else
            snprintf(why, cap, "format_version: %s", r == 0 ? "missing" : w);
        return -1;
    }
    *version = (int)ver;
    return 0;
}

/* The integer attributes: step, adam_t, world_size, n_params (into *np) and the shape.
 * 0, or -1 with why. */
static int read_ints(hid_t file, ckpt_meta *meta, int64_t *np, char *why, size_t cap)
{
    char w[256];
    int64_t ws = 0, dims[5];
    const char *ikeys[4] = {"step", "adam_t", "world_size", "n_params"};
    int64_t *ivals[4] = {&meta->step, &meta->adam_t, &ws, np};
    for (int i = 0; i < 4; i++) {
        int r = h5io_attr_int(file, ikeys[i], ivals[i], w, sizeof w);
        if (r != 1) {
            snprintf(why, cap, "attribute %s: %s", ikeys[i], r == 0 ? "missing" : w);
            return -1;
        }
    }
    for (int i = 0; i < 5; i++) {
        int r = h5io_attr_int(file, shape_keys[i], &dims[i], w, sizeof w);
        if (r != 1 || dims[i] < 1 || dims[i] > INT_MAX) {
            snprintf(why, cap, "attribute %s: %s", shape_keys[i],
                     r == 0 ? "missing" : r < 0 ? w : "out of range");
            return -1;
        }
    }
    meta->shape = (gpt_shape){(int)dims[0], (int)dims[1], (int)dims[2], (int)dims[3],
                              (int)dims[4]};
    if (ws < 1 || ws > INT_MAX || meta->step < 0 || meta->adam_t < 0) {
        snprintf(why, cap, "attributes out of range (step, adam_t or world_size)");
        return -1;
    }
    meta->world_size = (int)ws;
    return 0;
}

/* Every attribute of the file into meta (meta->version first), n_params into *np and
 * the stored checksum into *sum (malloc'd). 0, or -1 with why. */
static int read_attrs(hid_t file, ckpt_meta *meta, int64_t *np, char **sum, char *why,
                      size_t cap)
{
    char w[256];
    if (read_format(file, &meta->version, why, cap) != 0 ||
        read_ints(file, meta, np, why, cap) != 0 ||
        read_scalar(file, "seed", H5T_NATIVE_UINT64, H5T_INTEGER, &meta->seed, why, cap) !=
            0 ||
        read_scalar(file, "loss_scale", H5T_NATIVE_DOUBLE, H5T_FLOAT, &meta->loss_scale, why,
                    cap) != 0)
        return -1;
    if (meta->version >= 2) {
        int r = h5io_attr_int(file, "loss_scale_clean", &meta->loss_scale_clean, w, sizeof w);
        if (r != 1 || meta->loss_scale_clean < 0) {
            snprintf(why, cap, "attribute loss_scale_clean: %s",
                     r == 0 ? "missing" : r < 0 ? w : "negative");
            return -1;
        }
    }
    int r = h5io_attr_str(file, "config", &meta->config_text, w, sizeof w);
    if (r != 1) {
        snprintf(why, cap, "attribute config: %s", r == 0 ? "missing" : w);
        return -1;
    }
    /* what data it was trained on: optional (older files lack it) */
    if (h5io_attr_str(file, "data", &meta->data, w, sizeof w) < 0) {
        snprintf(why, cap, "attribute data: %s", w);
        return -1;
    }
    r = h5io_attr_str(file, "checksum", sum, w, sizeof w);
    if (r != 1) {
        snprintf(why, cap, "attribute checksum: %s", r == 0 ? "missing" : w);
        return -1;
    }
    return 0;
}

/* The file's shape against the one the caller requires: 0, or -1 with why naming the
 * first key that differs. */
static int same_shape(const gpt_shape *file, const gpt_shape *want, char *why, size_t cap)
{
    const int fv[5] = {file->vocab_size, file->block_size, file->n_layer, file->n_head,
                       file->n_embd};
    const int mv[5] = {want->vocab_size, want->block_size, want->n_layer, want->n_head,
                       want->n_embd};
    for (int i = 0; i < 5; i++) {
        if (fv[i] != mv[i]) {
            snprintf(why, cap, "it was saved with %s = %d; the model has %s = %d",
                     shape_keys[i], fv[i], shape_keys[i], mv[i]);
            return -1;
        }
    }
    return 0;
}

/* The tensors of a file whose attributes are read (meta, the stored n_params np and
 * checksum sum), by table `tab`: into three malloc'd buffers of tab->total floats,
 * verified against the checksum. 0, or -1 with why (not naming the file). */
static int read_tensors(hid_t file, const char *path, const ckpt_meta *meta, int64_t np,
                        const char *sum, const gt_tensor_table *tab, float *out[3],
                        char *why, size_t cap)
{
    char lw[WHY_CAP];
    const size_t n = tab->total;
    if (np != (int64_t)n) {
        snprintf(why, cap, "n_params = %" PRId64 "; its shape has %zu", np, n);
        return -1;
    }
    const char *what[3] = {"checkpoint parameters", "checkpoint moments",
                           "checkpoint moments"};
    for (int k = 0; k < 3; k++)
        if (!(out[k] = gt_malloc((n ? n : 1) * sizeof(float), what[k]))) {
            snprintf(why, cap, "out of memory");
            return -1;
        }
    if (h5model_read_layout(file, path, meta->shape, tab, out[0], lw, sizeof lw) != 0) {
        /* The message names the file first: drop that, the caller names it. */
        size_t pl = strlen(path);
        const char *s = strncmp(lw, path, pl) == 0 ? lw + pl : lw;
        if (s[0] == ':') s++;
        while (*s == ' ') s++;
        snprintf(why, cap, "%s", s);
        return -1;
    }
    if (read_flat(file, "/optim/m", out[1], n, why, cap) != 0 ||
        read_flat(file, "/optim/v", out[2], n, why, cap) != 0)
        return -1;
    char have[40];
    snprintf(have, sizeof have, "fnv1a64:%016" PRIx64,
             checksum(meta, n, meta->config_text, out[0], out[1], out[2]));
    if (strcmp(have, sum) != 0) {
        snprintf(why, cap, "checksum mismatch (stored %.40s, computed %s): the file is damaged",
                 sum, have);
        return -1;
    }
    return 0;
}

/* Reads and verifies a whole checkpoint. want: the shape and table it must fit (NULL:
 * the file's own shape, its table made here). On success fills meta and out[0..2]
 * (params, m, v: malloc'd, the table's total floats each). Prints nothing but an
 * out-of-memory error: -1 with why (not naming the file). */
static int read_ckpt(const char *path, const ckpt_state *want, ckpt_meta *meta,
                     float *out[3], char *why, size_t cap)
{
    char w[256], *sum = NULL;
    float *bufs[3] = {NULL, NULL, NULL};
    gt_tensor_table own = {0};
    int64_t np = 0;
    int rc = -1;
    memset(meta, 0, sizeof *meta);
    gt_strlcpy(meta->path, path, sizeof meta->path);
    hid_t file = h5io_open_read(path, w, sizeof w);
    if (file < 0) {
        snprintf(why, cap, "%s", w);
        return -1;
    }
    if (read_attrs(file, meta, &np, &sum, why, cap) != 0) goto done;
    const gt_tensor_table *tab = want ? want->table : &own;
    if (want) {
        if (same_shape(&meta->shape, &want->shape, why, cap) != 0) goto done;
    } else if (gpt_shape_check(meta->shape, why, cap) != 0) {
        goto done;
    } else if (gpt_shape_tensor_table(meta->shape, &own) != 0) {
        snprintf(why, cap, "cannot make the tensor table of its shape");
        goto done;
    }
    if (read_tensors(file, path, meta, np, sum, tab, bufs, why, cap) != 0) goto done;
    for (int k = 0; k < 3; k++) {
        out[k] = bufs[k];
        bufs[k] = NULL;
    }
    rc = 0;
done:
    if (rc != 0) ckpt_meta_free(meta);
    gt_tensor_table_free(&own);
    for (int k = 0; k < 3; k++) free(bufs[k]);
    free(sum);
    H5Fclose(file);
    return rc;
}

int ckpt_load(const char *path, ckpt_state *st, ckpt_meta *meta)
{
    char why[WHY_CAP];
    float *bufs[3] = {NULL, NULL, NULL};
    if (!st->table || !st->params || !st->m || !st->v) {
        gt_error("cannot load checkpoint %s: parameters or optimizer state missing", path);
        return -1;
    }
    h5lock_acquire();
    int rc = read_ckpt(path, st, meta, bufs, why, sizeof why);
    h5lock_release();
    if (rc != 0) {
        gt_error("cannot load checkpoint %s: %s", path, why);
        return -1;
    }
    const size_t n = st->table->total;
    memcpy(st->params, bufs[0], n * sizeof(float));
    memcpy(st->m, bufs[1], n * sizeof(float));
    memcpy(st->v, bufs[2], n * sizeof(float));
    st->adam_t = meta->adam_t;
    for (int k = 0; k < 3; k++) free(bufs[k]);
    return 0;
}

int ckpt_find_latest(const char *dir, char *out, size_t cap)
{
    entry *e;
    size_t n;
    int r = list_dir(dir, 0, &e, &n);
    if (r != 0) return r < 0 ? -1 : 0;
    int rc = 0;
    char why[WHY_CAP];
    for (size_t i = 0; i < n && rc == 0; i++) {
        char *p = join(dir, e[i].name);
        if (!p) {
            gt_error("out of memory scanning %s", dir);
            rc = -1;
            break;
        }
        ckpt_meta meta;
        float *bufs[3] = {NULL, NULL, NULL};
        h5lock_acquire();
        int ok = read_ckpt(p, NULL, &meta, bufs, why, sizeof why) == 0;
        h5lock_release();
        if (ok) {
            ckpt_meta_free(&meta);
            for (int k = 0; k < 3; k++) free(bufs[k]);
            if (meta.step != e[i].step) {
                gt_warn("skipping checkpoint %s: it holds step %" PRId64
                        ", not the step of its name",
                        p, meta.step);
            } else if (gt_strlcpy(out, p, cap) != 0) {
                gt_error("checkpoint path too long: %s", p);
                rc = -1;
            } else {
                rc = 1;
            }
        } else {
            gt_warn("skipping checkpoint %s: %s", p, why);
        }
        free(p);
    }
    free_entries(e, n);
    /* checkpoint files, and not one of them usable: not the same as none at all */
    if (rc == 0 && n > 0) rc = 2;
    return rc;
}

/* ---- compatibility ---------------------------------------------------------------- */

typedef struct kv {
    char key[64];
    const char *val; /* into the copy of the text */
} kv;

/* Splits a config text (a copy, modified) into up to cap key/value pairs. */
static int parse_config(char *text, kv *out, int cap)
{
    int n = 0;
    for (char *line = text; line && *line;) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = '\0';
        char *hash = strchr(line, '#');
        if (hash) *hash = '\0';
        char *eq = strchr(line, '=');
        if (eq && n < cap) {
            char *k = line, *ke = eq, *vs = eq + 1;
            while (*k == ' ' || *k == '\t') k++;
            while (ke > k && (ke[-1] == ' ' || ke[-1] == '\t')) ke--;
            while (*vs == ' ' || *vs == '\t') vs++;
            char *ve = vs + strlen(vs);
            while (ve > vs && (ve[-1] == ' ' || ve[-1] == '\t' || ve[-1] == '\r')) *--ve = '\0';
            size_t kl = (size_t)(ke - k);
            if (kl > 0 && kl < sizeof out[n].key) {
                memcpy(out[n].key, k, kl);
                out[n].key[kl] = '\0';
                out[n].val = vs;
                n++;
            }
        }
        line = nl ? nl + 1 : NULL;
    }
    return n;
}

static const char *lookup(const kv *v, int n, const char *key)
{
    for (int i = 0; i < n; i++)
        if (strcmp(v[i].key, key) == 0) return v[i].val;
    return NULL;
}

static int in_list(const char *const *list, const char *key)
{
    for (; *list; list++)
        if (strcmp(*list, key) == 0) return 1;
    return 0;
}

static void add_change(char *buf, size_t cap, const char *text)
{
    if (!buf || !cap) return;
    size_t used = strlen(buf);
    if (used + 1 < cap) snprintf(buf + used, cap - used, "%s%s", used ? ", " : "", text);
}

int ckpt_check_compatible(const ckpt_meta *meta, const char *config_text, int world_size,
                          char *changes, size_t cap)
{
    /* Keys that change the arithmetic of the steps still to come. */
    static const char *const math[] = {
        "n_layer", "n_head", "n_embd", "block_size", "vocab_size", "batch_size",
        "global_batch_size", "lr", "min_lr", "warmup_steps", "beta1", "beta2",
        "weight_decay", "grad_clip", "seed", "data", "train_dataset", "sampling", NULL};
    /* Keys that do not (steps is checked on its own below). */
    static const char *const harmless[] = {
        "steps", "eval_every", "eval_batches", "val_dataset", "log", "out", "threads",
        "peak_gflops", "ckpt_every", "ckpt_minutes", "keep_ckpts", "resume", "bucket_mb",
        "data_io", "data_max_open", "tp", "pp", "micro_batches", "offload", "init_from",
        NULL};
    enum { MAXK = 256 };
    if (changes && cap) changes[0] = '\0';
    if (meta->world_size != world_size) {
        gt_error("cannot resume from %s: it was saved by a run of %d rank%s, this run has "
                 "%d (counting data-parallel replicas, which tp does not change: the global "
                 "batch and each replica's data would)",
                 meta->path, meta->world_size, meta->world_size == 1 ? "" : "s", world_size);
        return -1;
    }
    char *a = strdup(meta->config_text ? meta->config_text : "");
    char *b = strdup(config_text ? config_text : "");
    kv *ka = malloc(MAXK * sizeof *ka), *kb = malloc(MAXK * sizeof *kb);
    int rc = -1;
    if (!a || !b || !ka || !kb) {
        gt_error("out of memory comparing configs");
        goto done;
    }
    int na = parse_config(a, ka, MAXK), nb = parse_config(b, kb, MAXK);
    /* Every key of either text, the checkpoint's first. */
    for (int pass = 0; pass < 2; pass++) {
        const kv *list = pass ? kb : ka;
        int nl = pass ? nb : na;
        for (int i = 0; i < nl; i++) {
            const char *key = list[i].key;
            if (pass == 1 && lookup(ka, na, key)) continue; /* seen in pass 0 */
            const char *old = lookup(ka, na, key), *now = lookup(kb, nb, key);
            if (old && now && strcmp(old, now) == 0) continue;
            char item[600];
            if (strcmp(key, "steps") == 0 && now) {
                char *end = NULL;
                long long s = strtoll(now, &end, 10);
                if (end != now && *end == '\0' && s < meta->step) {
                    gt_error("cannot resume from %s: it is at step %" PRId64
                             ", after steps = %lld: nothing left to train (raise steps)",
                             meta->path, meta->step, s);
                    goto done;
                }
            }
            int known_harmless = in_list(harmless, key);
            if (in_list(math, key) || (!known_harmless && old && now)) {
                gt_error("cannot resume from %s: %s = %.200s in the checkpoint, %.200s now "
                         "(%s; start a new run or set it back)",
                         meta->path, key, old ? old : "(unset)", now ? now : "(unset)",
                         in_list(math, key) ? "it changes the training math"
                                            : "a key this check does not know");
                goto done;
            }
            if (old && now)
                snprintf(item, sizeof item, "%s %.200s -> %.200s", key, old, now);
            else if (now)
                snprintf(item, sizeof item, "%s = %.200s (not in the checkpoint)", key, now);
            else
                snprintf(item, sizeof item, "%s = %.200s (no longer set)", key, old);
            add_change(changes, cap, item);
        }
    }
    rc = 0;
done:
    free(a);
    free(b);
    free(ka);
    free(kb);
    return rc;
}
