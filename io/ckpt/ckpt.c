/* ckpt — see ckpt.h: one checkpoint file, saved, read and verified (the folder of them,
 * by name, is ckpt_dir.c's).
 *
 * The /model group is written and read by the model file's own code (h5model_io.h), so
 * a checkpoint's parameters are exactly a model file's. Loading reads the whole file
 * into scratch buffers and verifies the checksum before it copies anything into the
 * caller's buffers: a damaged file changes nothing. */
#define GT_MODEL_FILE_MODULE /* may include h5model_io.h */
#include "ckpt.h"
#include "ckpt_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hdf5.h>

#include "util.h"
#include "config.h" /* config_text_value */
#include "h5lock.h"
#include "h5model_io.h"
#include "h5util.h"

/* ---- checksum ------------------------------------------------------------------- */

/* The fields of the checksum line a version 3 file adds (ckpt.h): the global batch,
 * the data cursor and the gradients in flight (as: their flags and sums; may be NULL
 * when there are none). */
static void run_fields(const ckpt_meta *mt, const ckpt_async *as, char *buf, size_t cap)
{
    size_t used = (size_t)snprintf(buf, cap,
                                   " global_batch=%" PRId64 " samples=%" PRId64
                                   " in_flight=%d predict=%d",
                                   mt->global_batch, mt->samples, mt->in_flight, mt->predict);
    if (mt->in_flight >= 1 && as && used < cap) {
        used += (size_t)snprintf(buf + used, cap - used, " overflow=");
        for (int i = 0; i < mt->in_flight && used < cap; i++)
            used += (size_t)snprintf(buf + used, cap - used, "%d", as->overflow[i] ? 1 : 0);
        for (int i = 0; i < mt->in_flight && used < cap; i++)
            used += (size_t)snprintf(buf + used, cap - used, "%s%a", i ? "," : " sumsq=",
                                     as->sumsq[i]);
    }
    /* version 4: the schedule state */
    for (int i = 0; mt->version >= 4 && i < CKPT_SCHED_N && used < cap; i++)
        used += (size_t)snprintf(buf + used, cap - used, "%s%a", i ? "," : " schedule=",
                                 mt->schedule[i]);
}

/* The checksum of a file of mt->version (1: no loss_scale_clean in the line; 1 and 2:
 * no run fields, no gradients in flight). as: the gradients in flight (mt->in_flight of
 * them), may be NULL when there are none. */
static uint64_t checksum(const ckpt_meta *mt, size_t n_params, const char *config_text,
                         const float *params, const float *m, const float *v,
                         const ckpt_async *as)
{
    char head[1280], clean[48] = "", run[1024] = "";
    if (mt->version >= 2)
        snprintf(clean, sizeof clean, " loss_scale_clean=%" PRId64, mt->loss_scale_clean);
    if (mt->version >= 3) run_fields(mt, as, run, sizeof run);
    int len = snprintf(head, sizeof head,
                       "%s %d step=%" PRId64 " adam_t=%" PRId64 " world_size=%d seed=%" PRIu64
                       " loss_scale=%a%s%s vocab_size=%d block_size=%d n_layer=%d n_head=%d "
                       "n_embd=%d n_params=%zu\n",
                       CKPT_FORMAT_NAME, mt->version, mt->step, mt->adam_t, mt->world_size,
                       mt->seed, mt->loss_scale, clean, run, mt->shape.vocab_size,
                       mt->shape.block_size, mt->shape.n_layer, mt->shape.n_head,
                       mt->shape.n_embd, n_params);
    uint64_t h = gt_fnv1a(GT_FNV_OFFSET, head, (size_t)len);
    const char *cfg = config_text ? config_text : "";
    h = gt_fnv1a(h, cfg, strlen(cfg) + 1);
    h = gt_fnv1a_floats(h, params, n_params);
    h = gt_fnv1a_floats(h, m, n_params);
    h = gt_fnv1a_floats(h, v, n_params);
    if (mt->version < 3 || !as) return h;
    for (int i = 0; i < mt->in_flight; i++) h = gt_fnv1a_floats(h, as->grads[i], n_params);
    if (mt->predict) h = gt_fnv1a_floats(h, as->before_update, n_params);
    return h;
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

/* A 1-D dataset `name` of n elements, stored as ftype, from data (mtype). */
static int write_vec(hid_t group, const char *name, hid_t ftype, hid_t mtype,
                     const void *data, size_t n)
{
    hsize_t dims[1] = {(hsize_t)n};
    hid_t space = H5Screate_simple(1, dims, NULL), dset = -1;
    int rc = -1;
    if (space < 0) return -1;
    if ((dset = H5Dcreate2(group, name, ftype, space, H5P_DEFAULT, H5P_DEFAULT,
                           H5P_DEFAULT)) >= 0 &&
        H5Dwrite(dset, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) >= 0)
        rc = 0;
    if (dset >= 0 && H5Dclose(dset) < 0) rc = -1;
    H5Sclose(space);
    return rc;
}

static int write_flat(hid_t group, const char *name, const float *data, size_t n)
{
    return write_vec(group, name, H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, data, n);
}

/* Reads the 1-D dataset `name` of n elements of class want ("label" in messages, e.g.
 * "float32") into out, converted to mtype. 0, or -1 with why. */
static int read_vec(hid_t file, const char *name, hid_t mtype, H5T_class_t want,
                    const char *label, void *out, size_t n, char *why, size_t cap)
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
    if (H5Tget_class(type) != want || rank != 1 ||
        H5Sget_simple_extent_dims(space, dims, NULL) < 0 || dims[0] != (hsize_t)n) {
        snprintf(why, cap, "dataset %s is not %s [%zu]", name, label, n);
        goto done;
    }
    if (H5Dread(dset, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, out) < 0) {
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

/* Reads the float32 [n] dataset `name` into out. 0, or -1 with why. */
static int read_flat(hid_t file, const char *name, float *out, size_t n, char *why,
                     size_t cap)
{
    return read_vec(file, name, H5T_NATIVE_FLOAT, H5T_FLOAT, "float32", out, n, why, cap);
}


void ckpt_meta_free(ckpt_meta *meta)
{
    if (!meta) return;
    free(meta->config_text);
    meta->config_text = NULL;
    free(meta->data);
    meta->data = NULL;
}

void ckpt_async_free(ckpt_async *a)
{
    if (!a) return;
    for (int i = 0; i < CKPT_MAX_IN_FLIGHT; i++) {
        free(a->grads[i]);
        a->grads[i] = NULL;
    }
    free(a->before_update);
    a->before_update = NULL;
    a->n = 0;
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

/* The root attributes a checkpoint adds to the model file's. 0 or -1. */
static int write_attrs(hid_t file, const ckpt_meta *mt, size_t n, const char *sum,
                       const char *data)
{
    uint64_t seed = mt->seed;
    double loss_scale = mt->loss_scale;
    return h5io_write_attr_int(file, "adam_t", mt->adam_t) != 0 ||
                   h5io_write_attr_int(file, "world_size", mt->world_size) != 0 ||
                   write_scalar(file, "seed", H5T_STD_U64LE, H5T_NATIVE_UINT64, &seed) != 0 ||
                   write_scalar(file, "loss_scale", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE,
                                &loss_scale) != 0 ||
                   h5io_write_attr_int(file, "loss_scale_clean", mt->loss_scale_clean) != 0 ||
                   h5io_write_attr_int(file, "global_batch", mt->global_batch) != 0 ||
                   h5io_write_attr_int(file, "samples", mt->samples) != 0 ||
                   h5io_write_attr_int(file, "in_flight", mt->in_flight) != 0 ||
                   h5io_write_attr_int(file, "predict", mt->predict) != 0 ||
                   h5io_write_attr_int(file, "n_params", (int64_t)n) != 0 ||
                   h5io_write_attr_str(file, "checksum", sum) != 0 ||
                   (data && h5io_write_attr_str(file, "data", data) != 0)
               ? -1 : 0;
}

/* The optimizer group and, with gradients in flight, the /async group. 0 or -1. */
static int write_state(hid_t file, const ckpt_state *st, const ckpt_meta *mt, size_t n)
{
    hid_t group = H5Gcreate2(file, "optim", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (group < 0) return -1;
    int bad = write_flat(group, "m", st->m, n) != 0 || write_flat(group, "v", st->v, n) != 0;
    bad |= H5Gclose(group) < 0;
    bad = bad || write_vec(file, "schedule", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, mt->schedule,
                           CKPT_SCHED_N) != 0;
    if (bad || mt->in_flight == 0) return bad ? -1 : 0;
    const ckpt_async *as = st->async;
    if ((group = H5Gcreate2(file, "async", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)) < 0)
        return -1;
    signed char flags[CKPT_MAX_IN_FLIGHT];
    for (int i = 0; i < mt->in_flight && !bad; i++) {
        char name[32];
        snprintf(name, sizeof name, "grad_%d", i);
        flags[i] = (signed char)(as->overflow[i] ? 1 : 0);
        bad = write_flat(group, name, as->grads[i], n) != 0;
    }
    bad = bad ||
          write_vec(group, "overflow", H5T_STD_I8LE, H5T_NATIVE_SCHAR, flags,
                    (size_t)mt->in_flight) != 0 ||
          write_vec(group, "sumsq", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, as->sumsq,
                    (size_t)mt->in_flight) != 0 ||
          (mt->predict && write_flat(group, "before_update", as->before_update, n) != 0);
    bad |= H5Gclose(group) < 0;
    return bad ? -1 : 0;
}

/* What is wrong with st for a save, or NULL. */
static const char *unsavable(int64_t step, const ckpt_state *st)
{
    const ckpt_async *as = st->async;
    if (step < 0) return "negative step";
    if (!st->table || !st->params || !st->m || !st->v)
        return "parameters or optimizer state missing";
    if (st->global_batch < 1 || st->global_batch > INT_MAX || st->samples < 0)
        return "global batch or data cursor out of range";
    if (!as) return NULL;
    if (as->n < 0 || as->n > CKPT_MAX_IN_FLIGHT) return "too many gradients in flight";
    for (int i = 0; i < as->n; i++)
        if (!as->grads[i]) return "a gradient in flight is missing";
    return NULL;
}

int ckpt_save(const char *dir, int64_t step, const ckpt_state *st, const char *config_text,
              int world_size, uint64_t seed, double loss_scale, int64_t loss_scale_clean,
              const char *data, char *out_path, size_t cap)
{
    char path[CKPT_PATH_CAP], tmp[CKPT_PATH_CAP + 16], why[160], sum[40];
    if (ckpt_path(dir, step, path, sizeof path) != 0) return -1;
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    const char *bad_state = unsavable(step, st);
    if (bad_state) {
        gt_error("cannot save checkpoint %s: %s", path, bad_state);
        return -1;
    }
    if (ckpt_remove_stale_tmp(dir) < 0) return -1;

    const size_t n = st->table->total;
    const int in_flight = st->async ? st->async->n : 0;
    ckpt_meta mt = {.version = CKPT_FORMAT_VERSION, .step = step, .adam_t = st->adam_t,
                    .world_size = world_size, .seed = seed, .loss_scale = loss_scale,
                    .loss_scale_clean = loss_scale_clean, .global_batch = st->global_batch,
                    .samples = st->samples, .in_flight = in_flight,
                    .predict = in_flight > 0 && st->async->before_update, .shape = st->shape};
    for (int i = 0; st->schedule && i < CKPT_SCHED_N; i++) mt.schedule[i] = st->schedule[i];
    snprintf(sum, sizeof sum, "fnv1a64:%016" PRIx64,
             checksum(&mt, n, config_text, st->params, st->m, st->v, st->async));

    hid_t file = -1;
    int rc = -1, made_tmp = 0;
    h5lock_acquire();
    if ((file = h5io_create(tmp, why, sizeof why)) < 0) {
        gt_error("cannot save checkpoint %s: cannot create %s: %s", path, tmp, why);
        goto fail;
    }
    made_tmp = 1;
    if (h5model_write_layout(file, CKPT_FORMAT_NAME, CKPT_FORMAT_VERSION, st->shape,
                             st->table, st->params, config_text, step, tmp) != 0)
        goto fail;
    if (write_attrs(file, &mt, n, sum, data) != 0) {
        gt_error("cannot write the attributes of %s (disk full?)", tmp);
        goto fail;
    }
    if (write_state(file, st, &mt, n) != 0) {
        gt_error("cannot write the optimizer state%s to %s (disk full?)",
                 in_flight ? " and the gradients in flight" : "", tmp);
        goto fail;
    }
    crash_hook(file);
    hid_t written = file;
    file = -1;
    if (h5io_finish(written, 0, tmp, path, why, sizeof why) != 0) {
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
    h5io_close_write(file);
    if (made_tmp) unlink(tmp);
    h5lock_release();
    return rc;
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

/* The integer value of `key` in a config text (config.h's reading of it): 0, or -1
 * when it is absent or not an integer. */
static int config_int(const char *text, const char *key, int64_t *out)
{
    if (!text) text = "";
    char *val = malloc(strlen(text) + 1); /* no value is longer than its text */
    int rc = -1;
    if (val && config_text_value(text, key, val, strlen(text) + 1) == 1) {
        char *end = NULL;
        errno = 0;
        long long x = strtoll(val, &end, 10);
        if (end != val && *end == '\0' && errno == 0) {
            *out = x;
            rc = 0;
        }
    }
    free(val);
    return rc;
}


/* The run fields of a version 3 file (global_batch, samples, in_flight, predict), or
 * for an older file what they were: derived from its config and world size (ckpt.h).
 * 0, or -1 with why. */
static int read_run_fields(hid_t file, ckpt_meta *meta, char *why, size_t cap)
{
    char w[256];
    if (meta->version < 3) {
        int64_t gbs = 0, bs = 0;
        if (config_int(meta->config_text, "global_batch_size", &gbs) != 0) gbs = 0;
        if (gbs <= 0 && config_int(meta->config_text, "batch_size", &bs) == 0 && bs > 0)
            gbs = bs * meta->world_size;
        if (gbs < 1 || gbs > INT_MAX || meta->step > INT64_MAX / gbs) {
            snprintf(why, cap, "its config does not say its global batch (batch_size)");
            return -1;
        }
        meta->global_batch = gbs;
        meta->samples = meta->step * gbs;
        return 0;
    }
    const char *keys[4] = {"global_batch", "samples", "in_flight", "predict"};
    int64_t v[4];
    for (int i = 0; i < 4; i++) {
        int r = h5io_attr_int(file, keys[i], &v[i], w, sizeof w);
        if (r != 1) {
            snprintf(why, cap, "attribute %s: %s", keys[i], r == 0 ? "missing" : w);
            return -1;
        }
    }
    if (v[0] < 1 || v[0] > INT_MAX || v[1] < 0 || v[2] < 0 || v[2] > CKPT_MAX_IN_FLIGHT ||
        v[3] < 0 || v[3] > 1 || (v[3] && !v[2])) {
        snprintf(why, cap, "attributes out of range (global_batch, samples, in_flight or "
                           "predict)");
        return -1;
    }
    meta->global_batch = v[0];
    meta->samples = v[1];
    meta->in_flight = (int)v[2];
    meta->predict = (int)v[3];
    return 0;
}

/* The schedule state of a version 4 file (zeros before: ckpt.h). 0, or -1 with why. */
static int read_schedule(hid_t file, ckpt_meta *meta, char *why, size_t cap)
{
    for (int i = 0; i < CKPT_SCHED_N; i++) meta->schedule[i] = 0.0;
    if (meta->version < 4) return 0;
    if (read_vec(file, "schedule", H5T_NATIVE_DOUBLE, H5T_FLOAT, "float64", meta->schedule,
                 CKPT_SCHED_N, why, cap) != 0)
        return -1;
    for (int i = 0; i < CKPT_SCHED_N; i++)
        if (!isfinite(meta->schedule[i])) {
            snprintf(why, cap, "dataset schedule: element %d is not finite", i);
            return -1;
        }
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
    /* A resumed FP16 run multiplies its loss by it: a NaN, an infinity or a scale that
     * is not positive would train on garbage (1.0 is what a CPU run saves). */
    if (!(isfinite(meta->loss_scale) && meta->loss_scale > 0)) {
        snprintf(why, cap, "attribute loss_scale: %g is not a positive finite number",
                 meta->loss_scale);
        return -1;
    }
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
    if (read_run_fields(file, meta, why, cap) != 0 || read_schedule(file, meta, why, cap) != 0)
        return -1;
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

/* What read_ckpt reads: the parameters, the moments, the gradients in flight. */
typedef struct loaded {
    float *buf[3]; /* params, m, v */
    ckpt_async as;
} loaded;

static void loaded_free(loaded *l)
{
    for (int k = 0; k < 3; k++) free(l->buf[k]);
    ckpt_async_free(&l->as);
    memset(l, 0, sizeof *l);
}

/* The /async group of a file with meta->in_flight > 0, into as (malloc'd buffers of n
 * floats). 0, or -1 with why. */
static int read_async(hid_t file, const ckpt_meta *meta, size_t n, ckpt_async *as,
                      char *why, size_t cap)
{
    as->n = meta->in_flight;
    for (int i = 0; i < as->n; i++) {
        char name[48];
        snprintf(name, sizeof name, "/async/grad_%d", i);
        if (!(as->grads[i] = gt_malloc((n ? n : 1) * sizeof(float), "gradients in flight"))) {
            snprintf(why, cap, "out of memory");
            return -1;
        }
        if (read_flat(file, name, as->grads[i], n, why, cap) != 0) return -1;
    }
    signed char flags[CKPT_MAX_IN_FLIGHT];
    if (read_vec(file, "/async/overflow", H5T_NATIVE_SCHAR, H5T_INTEGER, "an integer",
                 flags, (size_t)as->n, why, cap) != 0 ||
        read_vec(file, "/async/sumsq", H5T_NATIVE_DOUBLE, H5T_FLOAT, "float64", as->sumsq,
                 (size_t)as->n, why, cap) != 0)
        return -1;
    for (int i = 0; i < as->n; i++) as->overflow[i] = flags[i] != 0;
    if (!meta->predict) return 0;
    if (!(as->before_update = gt_malloc((n ? n : 1) * sizeof(float), "parameters"))) {
        snprintf(why, cap, "out of memory");
        return -1;
    }
    return read_flat(file, "/async/before_update", as->before_update, n, why, cap);
}

/* The tensors of a file whose attributes are read (meta, the stored n_params np and
 * checksum sum), by table `tab`: into out (malloc'd buffers of tab->total floats),
 * verified against the checksum. 0, or -1 with why (not naming the file). */
static int read_tensors(hid_t file, const char *path, const ckpt_meta *meta, int64_t np,
                        const char *sum, const gt_tensor_table *tab, loaded *out,
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
        if (!(out->buf[k] = gt_malloc((n ? n : 1) * sizeof(float), what[k]))) {
            snprintf(why, cap, "out of memory");
            return -1;
        }
    if (h5model_read_layout(file, path, meta->shape, tab, out->buf[0], lw, sizeof lw) != 0) {
        /* The message names the file first: drop that, the caller names it. */
        size_t pl = strlen(path);
        const char *s = strncmp(lw, path, pl) == 0 ? lw + pl : lw;
        if (s[0] == ':') s++;
        while (*s == ' ') s++;
        snprintf(why, cap, "%s", s);
        return -1;
    }
    if (read_flat(file, "/optim/m", out->buf[1], n, why, cap) != 0 ||
        read_flat(file, "/optim/v", out->buf[2], n, why, cap) != 0 ||
        (meta->in_flight > 0 && read_async(file, meta, n, &out->as, why, cap) != 0))
        return -1;
    char have[40];
    snprintf(have, sizeof have, "fnv1a64:%016" PRIx64,
             checksum(meta, n, meta->config_text, out->buf[0], out->buf[1], out->buf[2],
                      &out->as));
    if (strcmp(have, sum) != 0) {
        snprintf(why, cap, "checksum mismatch (stored %.40s, computed %s): the file is damaged",
                 sum, have);
        return -1;
    }
    return 0;
}

/* Reads and verifies a whole checkpoint (tensors = 0: its attributes alone, not
 * verified). want: the shape and table it must fit (NULL: the file's own shape, its
 * table made here). On success fills meta and out (loaded_free it). Prints nothing but
 * an out-of-memory error: -1 with why (not naming the file). */
static int read_ckpt(const char *path, const ckpt_state *want, int tensors, ckpt_meta *meta,
                     loaded *out, char *why, size_t cap)
{
    char w[256], *sum = NULL;
    gt_tensor_table own = {0};
    int64_t np = 0;
    int rc = -1;
    memset(meta, 0, sizeof *meta);
    memset(out, 0, sizeof *out);
    gt_strlcpy(meta->path, path, sizeof meta->path);
    hid_t file = h5io_open_read(path, w, sizeof w);
    if (file < 0) {
        snprintf(why, cap, "%s", w);
        return -1;
    }
    if (read_attrs(file, meta, &np, &sum, why, cap) != 0) goto done;
    const gt_tensor_table *tab = want ? want->table : &own;
    if (!tensors) {
        rc = 0;
    } else if (want) {
        if (same_shape(&meta->shape, &want->shape, why, cap) != 0) goto done;
    } else if (gpt_shape_check(meta->shape, why, cap) != 0) {
        goto done;
    } else if (gpt_shape_tensor_table(meta->shape, &own) != 0) {
        snprintf(why, cap, "cannot make the tensor table of its shape");
        goto done;
    }
    if (tensors && read_tensors(file, path, meta, np, sum, tab, out, why, cap) == 0) rc = 0;
done:
    if (rc != 0) {
        ckpt_meta_free(meta);
        loaded_free(out);
    }
    gt_tensor_table_free(&own);
    free(sum);
    H5Fclose(file);
    return rc;
}

int ckpt_load(const char *path, ckpt_state *st, ckpt_meta *meta)
{
    char why[WHY_CAP];
    loaded got;
    if (!st->table || !st->params || !st->m || !st->v) {
        gt_error("cannot load checkpoint %s: parameters or optimizer state missing", path);
        return -1;
    }
    h5lock_acquire();
    int rc = read_ckpt(path, st, 1, meta, &got, why, sizeof why);
    h5lock_release();
    if (rc != 0) {
        gt_error("cannot load checkpoint %s: %s", path, why);
        return -1;
    }
    const size_t n = st->table->total;
    memcpy(st->params, got.buf[0], n * sizeof(float));
    memcpy(st->m, got.buf[1], n * sizeof(float));
    memcpy(st->v, got.buf[2], n * sizeof(float));
    st->adam_t = meta->adam_t;
    st->global_batch = meta->global_batch;
    st->samples = meta->samples;
    if (st->async) { /* handed over */
        ckpt_async_free(st->async);
        *st->async = got.as;
        memset(&got.as, 0, sizeof got.as);
    }
    loaded_free(&got);
    return 0;
}

int ckpt_read_meta(const char *path, ckpt_meta *meta)
{
    char why[WHY_CAP];
    loaded none;
    h5lock_acquire();
    int rc = read_ckpt(path, NULL, 0, meta, &none, why, sizeof why);
    h5lock_release();
    if (rc != 0) gt_error("cannot read checkpoint %s: %s", path, why);
    return rc;
}

int ckpt_verify_file(const char *path, ckpt_meta *meta)
{
    char why[WHY_CAP];
    if (ckpt_verify(path, 1, meta, why, sizeof why) == 0) return 0;
    gt_error("checkpoint %s does not verify: %s", path, why);
    return -1;
}

int ckpt_verify(const char *path, int whole, ckpt_meta *meta, char *why, size_t cap)
{
    loaded got;
    h5lock_acquire();
    const int rc = read_ckpt(path, NULL, whole, meta, &got, why, cap);
    h5lock_release();
    if (rc == 0) loaded_free(&got);
    return rc;
}
