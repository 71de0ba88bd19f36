/* h5model — see h5model.h.
 *
 * Tensors are contiguous float32 datasets (no chunking, no compression): they are
 * written and read whole, and h5py maps them straight to numpy arrays. Loading checks
 * every tensor before it reads any, and reads into scratch memory, so a file that does
 * not fit leaves the caller's buffer untouched. */
#define GT_MODEL_FILE_MODULE /* may include h5model_io.h */
#include "h5model.h"
#include "h5model_io.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"
#include "h5lock.h"
#include "h5tok.h"
#include "h5util.h"

#define FORMAT_VERSION 1

static const char *const shape_keys[5] = {"vocab_size", "block_size", "n_layer", "n_head",
                                          "n_embd"};

static int *shape_field(gpt_shape *s, int i)
{
    int *f[5] = {&s->vocab_size, &s->block_size, &s->n_layer, &s->n_head, &s->n_embd};
    return f[i];
}

/* ---- save ----------------------------------------------------------------------- */

static int write_tensor(hid_t group, const gt_tensor *t, const float *params)
{
    hsize_t dims[GT_TENSOR_MAX_DIMS];
    for (int k = 0; k < t->ndim; k++) dims[k] = (hsize_t)t->dims[k];
    hid_t space = -1, dset = -1;
    int rc = -1;
    if ((space = H5Screate_simple(t->ndim, dims, NULL)) < 0) goto done;
    if ((dset = H5Dcreate2(group, t->name, H5T_IEEE_F32LE, space, H5P_DEFAULT, H5P_DEFAULT,
                           H5P_DEFAULT)) < 0)
        goto done;
    if (H5Dwrite(dset, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, params + t->offset) <
        0)
        goto done;
    rc = 0;
done:
    if (dset >= 0 && H5Dclose(dset) < 0) rc = -1;
    if (space >= 0) H5Sclose(space);
    return rc;
}

int h5model_write_layout(hid_t file, const char *format, int64_t format_version,
                         gpt_shape shape, const gt_tensor_table *tab, const float *params,
                         const char *config_text, int64_t step, const char *where)
{
    hid_t group = -1;
    int bad = h5io_write_attr_str(file, "format", format) != 0 ||
              h5io_write_attr_int(file, "format_version", format_version) != 0 ||
              h5io_write_attr_int(file, "step", step) != 0 ||
              h5io_write_attr_str(file, "config", config_text ? config_text : "") != 0;
    for (int i = 0; i < 5 && !bad; i++)
        bad = h5io_write_attr_int(file, shape_keys[i], *shape_field(&shape, i)) != 0;
    if (bad || (group = H5Gcreate2(file, "model", H5P_DEFAULT, H5P_DEFAULT,
                                   H5P_DEFAULT)) < 0) {
        gt_error("cannot write the attributes of %s (disk full?)", where);
        return -1;
    }
    for (int i = 0; i < tab->count; i++) {
        if (write_tensor(group, &tab->tensors[i], params) != 0) {
            gt_error("cannot write tensor %s to %s (disk full?)", tab->tensors[i].name, where);
            H5Gclose(group);
            return -1;
        }
    }
    if (H5Gclose(group) < 0) {
        gt_error("cannot save the model to %s: writing failed", where);
        return -1;
    }
    return 0;
}

/* The model file's checksum: its step, shape and config text, then the n floats of the
 * parameter buffer (every tensor in table order), as "fnv1a64:<16 hex digits>". */
static void model_checksum(gpt_shape s, int64_t step, const char *config_text,
                           const float *params, size_t n, char out[32])
{
    char head[160];
    int len = snprintf(head, sizeof head, "%s %d step=%lld shape=%d,%d,%d,%d,%d\n",
                       H5MODEL_FORMAT_NAME, FORMAT_VERSION, (long long)step, s.vocab_size,
                       s.block_size, s.n_layer, s.n_head, s.n_embd);
    uint64_t h = gt_fnv1a(GT_FNV_OFFSET, head, (size_t)len);
    const char *cfg = config_text ? config_text : "";
    h = gt_fnv1a(h, cfg, strlen(cfg) + 1);
    h = gt_fnv1a_floats(h, params, n);
    snprintf(out, 32, "fnv1a64:%016" PRIx64, h);
}

int h5model_save(const char *path, gpt_shape shape, const gt_tensor_table *tab,
                 const float *params, const char *config_text, int64_t step)
{
    return h5model_save_tok(path, shape, tab, params, config_text, step, NULL, 0);
}

int h5model_save_tok(const char *path, gpt_shape shape, const gt_tensor_table *tab,
                     const float *params, const char *config_text, int64_t step,
                     const char *tokenizer, size_t tok_len)
{
    size_t plen = strlen(path);
    char *tmp = malloc(plen + 5);
    if (!tmp) {
        gt_error("out of memory saving %s", path);
        return -1;
    }
    snprintf(tmp, plen + 5, "%s.tmp", path);
    char why[160];
    hid_t file = -1;
    int rc = -1, made_tmp = 0;
    h5lock_acquire();
    if ((file = h5io_create(tmp, why, sizeof why)) < 0) {
        gt_error("cannot save the model: cannot create %s: %s", tmp, why);
        goto fail;
    }
    made_tmp = 1;
    if (h5model_write_layout(file, H5MODEL_FORMAT_NAME, FORMAT_VERSION, shape, tab, params,
                             config_text, step, tmp) != 0)
        goto fail;
    char sum[32];
    model_checksum(shape, step, config_text, params, tab->total, sum);
    if (h5io_write_attr_str(file, "checksum", sum) != 0) {
        gt_error("cannot write the checksum of %s (disk full?)", tmp);
        goto fail;
    }
    if (tokenizer && h5tok_write(file, tokenizer, tok_len) != 0) {
        gt_error("cannot write the tokenizer into %s (disk full?)", tmp);
        goto fail;
    }
    hid_t written = file;
    file = -1;
    if (h5io_finish(written, 0, tmp, path, why, sizeof why) != 0) {
        gt_error("cannot save the model to %s: %s", path, why);
        goto fail;
    }
    made_tmp = 0;
    rc = 0;
fail:
    h5io_close_write(file);
    if (made_tmp) unlink(tmp);
    h5lock_release();
    free(tmp);
    return rc;
}

/* ---- reading ---------------------------------------------------------------------- */

/* Checks the format attributes. Returns 0; 1 if the file is not a gentrain model (no
 * format attribute or another format: reported only when `report`); -1 on a model of
 * another version or an unreadable attribute (reported as an error, or as a warning
 * when !report, for the folder scan). */
static int check_format(hid_t file, const char *path, int report)
{
    char why[160];
    char *fmt = NULL;
    int64_t ver = 0;
    int rc = h5io_attr_str(file, "format", &fmt, why, sizeof why);
    if (rc <= 0 || strcmp(fmt, H5MODEL_FORMAT_NAME) != 0) {
        if (report) {
            if (rc < 0)
                gt_error("%s is not a gentrain model file (attribute format %s)", path, why);
            else if (rc == 0)
                gt_error("%s is not a gentrain model file (no format attribute)", path);
            else
                gt_error("%s is not a gentrain model file (format = \"%s\")", path, fmt);
        }
        free(fmt);
        return 1;
    }
    free(fmt);
    rc = h5io_attr_int(file, "format_version", &ver, why, sizeof why);
    if (rc != 1 || ver != FORMAT_VERSION) {
        char msg[256];
        if (rc < 0)
            snprintf(msg, sizeof msg, "%s: attribute format_version %s", path, why);
        else if (rc == 0)
            snprintf(msg, sizeof msg, "%s: no format_version attribute", path);
        else
            snprintf(msg, sizeof msg,
                     "%s has format_version %lld; this gentrain reads version %d", path,
                     (long long)ver, FORMAT_VERSION);
        if (report)
            gt_error("%s", msg);
        else
            gt_warn("skipping %s", msg);
        return -1;
    }
    return 0;
}

/* Reads a required integer root attribute. */
static int need_int(hid_t file, const char *path, const char *key, int64_t *v)
{
    char why[160];
    int rc = h5io_attr_int(file, key, v, why, sizeof why);
    if (rc == 1) return 0;
    if (rc == 0)
        gt_error("%s: model file has no %s attribute", path, key);
    else
        gt_error("%s: attribute %s %s", path, key, why);
    return -1;
}

static int read_shape(hid_t file, const char *path, gpt_shape *s)
{
    for (int i = 0; i < 5; i++) {
        int64_t v;
        if (need_int(file, path, shape_keys[i], &v) != 0) return -1;
        if (v < 1 || v > INT_MAX) {
            gt_error("%s: attribute %s = %lld is out of range", path, shape_keys[i],
                     (long long)v);
            return -1;
        }
        *shape_field(s, i) = (int)v;
    }
    return 0;
}

static hid_t open_model(const char *path)
{
    char why[160];
    hid_t file = h5io_open_read(path, why, sizeof why);
    if (file < 0) {
        gt_error("cannot open %s: %s", path, why);
        return -1;
    }
    if (check_format(file, path, 1) != 0) {
        H5Fclose(file);
        return -1;
    }
    return file;
}

int h5model_format_of(const char *path, char *fmt, size_t cap)
{
    char why[160];
    char *text = NULL;
    int rc = -1;
    h5lock_acquire();
    const hid_t file = h5io_open_read(path, why, sizeof why);
    if (file < 0) {
        gt_error("cannot open %s: %s", path, why);
    } else {
        rc = h5io_attr_str(file, "format", &text, why, sizeof why);
        if (rc < 0) gt_error("%s: attribute format %s", path, why);
        if (rc == 1) snprintf(fmt, cap, "%s", text);
        free(text);
        H5Fclose(file);
    }
    h5lock_release();
    return rc;
}

int h5model_read_meta(const char *path, gpt_shape *shape, int64_t *step,
                      char **config_text)
{
    int rc = -1;
    char why[160];
    if (config_text) *config_text = NULL;
    h5lock_acquire();
    hid_t file = open_model(path);
    if (file < 0) goto done;
    gpt_shape s;
    int64_t st;
    if (read_shape(file, path, &s) != 0 || need_int(file, path, "step", &st) != 0) goto done;
    if (st < 0) { /* shown by sample, written into an export's config.json */
        gt_error("%s: attribute step = %lld is out of range", path, (long long)st);
        goto done;
    }
    if (config_text) {
        int r = h5io_attr_str(file, "config", config_text, why, sizeof why);
        if (r < 0) {
            gt_error("%s: attribute config %s", path, why);
            goto done;
        }
        if (r == 0 && !(*config_text = strdup(""))) {
            gt_error("out of memory reading %s", path);
            goto done;
        }
    }
    if (shape) *shape = s;
    if (step) *step = st;
    rc = 0;
done:
    if (file >= 0) H5Fclose(file);
    h5lock_release();
    return rc;
}

/* Checks that /model/<p->name> is a float dataset of p's shape; on failure `why` gets
 * the whole message, naming path and tensor. */
static int check_tensor(hid_t file, const char *path, const gt_tensor *p, char *why,
                        size_t cap)
{
    char name[96], tn[48], have[96], want[96];
    snprintf(name, sizeof name, "/model/%s", p->name);
    if (h5io_object_kind(file, name) != H5I_DATASET) {
        snprintf(why, cap, "%s: tensor %s is missing", path, p->name);
        return -1;
    }
    hid_t dset = -1, type = -1, space = -1;
    int rc = -1;
    if ((dset = H5Dopen2(file, name, H5P_DEFAULT)) < 0 || (type = H5Dget_type(dset)) < 0 ||
        (space = H5Dget_space(dset)) < 0) {
        snprintf(why, cap, "%s: cannot open tensor %s (damaged file?)", path, p->name);
        goto done;
    }
    if (H5Tget_class(type) != H5T_FLOAT) {
        h5io_type_name(type, tn, sizeof tn);
        snprintf(why, cap, "%s: tensor %s has type %s; expected float32", path, p->name, tn);
        goto done;
    }
    hsize_t dims[H5S_MAX_RANK];
    int rank = H5Sget_simple_extent_ndims(space);
    if (rank < 0 || rank > H5S_MAX_RANK || H5Sget_simple_extent_dims(space, dims, NULL) < 0) {
        snprintf(why, cap, "%s: cannot read the shape of tensor %s", path, p->name);
        goto done;
    }
    hsize_t wd[GT_TENSOR_MAX_DIMS];
    for (int k = 0; k < p->ndim; k++) wd[k] = (hsize_t)p->dims[k];
    int same = rank == p->ndim;
    for (int i = 0; same && i < rank; i++) same = dims[i] == wd[i];
    if (!same) {
        h5io_shape_str(rank, dims, have, sizeof have);
        h5io_shape_str(p->ndim, wd, want, sizeof want);
        snprintf(why, cap, "%s: tensor %s has shape %s; the model expects %s", path, p->name,
                 have, want);
        goto done;
    }
    /* Storage never written (h5py's create_dataset(shape=...) alone, or a chunk left
     * out), a short external file or a missing virtual source read back as fill values
     * or zeros: a tensor that nothing but the checksum, which an older file lacks,
     * would notice. */
    hid_t dcpl = H5Dget_create_plist(dset);
    if (dcpl >= 0 && h5io_check_linked_files(dcpl, path, name, "weights", why, cap) != 0) {
        H5Pclose(dcpl);
        goto done;
    }
    const char *unwritten =
        dcpl >= 0 ? h5io_unwritten_storage(dset, dcpl, space, rank, dims) : NULL;
    if (dcpl >= 0) H5Pclose(dcpl);
    if (unwritten) {
        snprintf(why, cap, "%s: tensor %s: %s of its storage was ever written (it would "
                 "read back as fill values, not weights)", path, p->name, unwritten);
        goto done;
    }
    rc = 0;
done:
    if (space >= 0) H5Sclose(space);
    if (type >= 0) H5Tclose(type);
    if (dset >= 0) H5Dclose(dset);
    return rc;
}

struct extra_ctx {
    const gt_tensor_table *tab;
    char first[64];
    int count;
};

static herr_t extra_cb(hid_t g, const char *name, const H5L_info_t *info, void *data)
{
    (void)g;
    (void)info;
    struct extra_ctx *c = data;
    if (gt_tensor_table_find(c->tab, name) < 0) {
        if (c->count++ == 0) snprintf(c->first, sizeof c->first, "%s", name);
    }
    return 0;
}

/* Checks, reading no tensor, that /model holds exactly the tensors of tab (names, float
 * type, shapes) and that the shape attributes equal `shape`. 0, or -1 with why. */
static int check_layout(hid_t file, const char *path, gpt_shape shape,
                        const gt_tensor_table *tab, char *why, size_t cap)
{
    for (int i = 0; i < tab->count; i++)
        if (check_tensor(file, path, &tab->tensors[i], why, cap) != 0) return -1;
    struct extra_ctx ex = {tab, "", 0};
    hid_t group = H5Gopen2(file, "/model", H5P_DEFAULT);
    herr_t listed =
        group < 0 ? -1 : H5Literate(group, H5_INDEX_NAME, H5_ITER_INC, NULL, extra_cb, &ex);
    if (group >= 0) H5Gclose(group);
    if (listed < 0) {
        snprintf(why, cap, "%s: cannot list the tensors in /model", path);
        return -1;
    }
    if (ex.count) {
        snprintf(why, cap, "%s: tensor %s (and %d more) is not part of this model's shape",
                 path, ex.first, ex.count - 1);
        return -1;
    }
    for (int i = 0; i < 5; i++) {
        char w[160];
        int64_t v = 0;
        int r = h5io_attr_int(file, shape_keys[i], &v, w, sizeof w);
        if (r != 1) {
            if (r == 0)
                snprintf(why, cap, "%s: model file has no %s attribute", path, shape_keys[i]);
            else
                snprintf(why, cap, "%s: attribute %s %s", path, shape_keys[i], w);
            return -1;
        }
        if (v != *shape_field(&shape, i)) {
            snprintf(why, cap, "%s was saved with %s = %lld; the model has %s = %d", path,
                     shape_keys[i], (long long)v, shape_keys[i], *shape_field(&shape, i));
            return -1;
        }
    }
    return 0;
}

int h5model_read_layout(hid_t file, const char *path, gpt_shape shape,
                        const gt_tensor_table *tab, float *dst, char *why, size_t cap)
{
    /* Everything is checked before anything is read. */
    if (check_layout(file, path, shape, tab, why, cap) != 0) return -1;
    hid_t group = H5Gopen2(file, "/model", H5P_DEFAULT);
    if (group < 0) {
        snprintf(why, cap, "%s: cannot open /model (damaged file?)", path);
        return -1;
    }
    int rc = 0;
    for (int i = 0; i < tab->count && rc == 0; i++) {
        const gt_tensor *p = &tab->tensors[i];
        hid_t dset = H5Dopen2(group, p->name, H5P_DEFAULT);
        herr_t r = dset < 0 ? -1
                            : H5Dread(dset, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT,
                                      dst + p->offset);
        if (dset >= 0) H5Dclose(dset);
        if (r < 0) {
            snprintf(why, cap, "%s: cannot read tensor %s (damaged or truncated file?)", path,
                     p->name);
            rc = -1;
        }
    }
    H5Gclose(group);
    return rc;
}

/* The checksum check of a loaded model of shape `shape` (params: n floats): 0 when it
 * matches, or when the file has none (an older gentrain wrote it: a warning says its
 * tensors are not verified); -1 with why set on a mismatch or an unreadable attribute. */
static int verify_checksum(hid_t file, const char *path, gpt_shape shape,
                           const float *params, size_t n, char *why, size_t cap)
{
    char *stored = NULL, *config = NULL, w[160];
    int64_t step = 0;
    int rc = -1;
    int r = h5io_attr_str(file, "checksum", &stored, w, sizeof w);
    if (r == 0) {
        gt_warn("%s has no checksum (saved by an older gentrain): its tensors are not "
                "verified", path);
        return 0;
    }
    if (r < 0) {
        snprintf(why, cap, "%s: attribute checksum %s", path, w);
        goto done;
    }
    if (h5io_attr_int(file, "step", &step, w, sizeof w) != 1 ||
        h5io_attr_str(file, "config", &config, w, sizeof w) < 0) {
        snprintf(why, cap, "%s: attributes step and config unreadable (damaged file?)", path);
        goto done;
    }
    char have[32];
    model_checksum(shape, step, config, params, n, have);
    if (strcmp(have, stored) != 0) {
        snprintf(why, cap, "%s: checksum mismatch (stored %.40s, computed %s): the file is "
                 "damaged", path, stored, have);
        goto done;
    }
    rc = 0;
done:
    free(stored);
    free(config);
    return rc;
}

/* Every weight finite: one NaN or infinity makes every generated token garbage. */
static int check_finite(const char *path, const gt_tensor_table *tab, const float *params,
                        char *why, size_t cap)
{
    for (int i = 0; i < tab->count; i++) {
        const gt_tensor *p = &tab->tensors[i];
        const float *v = params + p->offset;
        for (size_t j = 0; j < p->numel; j++)
            if (!isfinite(v[j])) {
                snprintf(why, cap, "%s: tensor %s holds %s at element %zu: the model is "
                         "unusable (it diverged, or the file was altered)", path, p->name,
                         isnan(v[j]) ? "NaN" : "an infinity", j);
                return -1;
            }
    }
    return 0;
}

int h5model_load_params(const char *path, gpt_shape shape, const gt_tensor_table *tab,
                        float *params)
{
    int rc = -1;
    char why[6000]; /* a path of GT_PATH_MAX and the reason */
    const size_t n = tab->total;
    /* read into scratch: params change only once everything has been verified */
    float *scratch = gt_malloc((n ? n : 1) * sizeof *scratch, "the model file's parameters");
    if (!scratch) return -1;
    h5lock_acquire();
    hid_t file = open_model(path);
    if (file < 0) goto done;
    if (h5model_read_layout(file, path, shape, tab, scratch, why, sizeof why) != 0 ||
        verify_checksum(file, path, shape, scratch, n, why, sizeof why) != 0 ||
        check_finite(path, tab, scratch, why, sizeof why) != 0) {
        gt_error("%s", why);
    } else {
        memcpy(params, scratch, n * sizeof *scratch);
        rc = 0;
    }
done:
    if (file >= 0) H5Fclose(file);
    h5lock_release();
    free(scratch);
    return rc;
}

/* ---- newest --------------------------------------------------------------------- */

/* Step of a model file: 0 with *step set; 1 not a model (silently skipped); -1 skipped
 * with a warning (unreadable). */
static int probe(const char *path, int64_t *step)
{
    char why[160];
    hid_t file = h5io_open_read(path, why, sizeof why);
    if (file < 0) {
        gt_warn("skipping %s: %s", path, why);
        return -1;
    }
    int rc = check_format(file, path, 0);
    if (rc == 0) {
        int r = h5io_attr_int(file, "step", step, why, sizeof why);
        if (r != 1) {
            gt_warn("skipping %s: %s", path, r == 0 ? "no step attribute" : why);
            rc = -1;
        }
    }
    H5Fclose(file);
    return rc;
}

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n > k && strcmp(s + n - k, suffix) == 0;
}

static int newer(const struct timespec *a, const struct timespec *b)
{
    return a->tv_sec != b->tv_sec ? a->tv_sec > b->tv_sec : a->tv_nsec > b->tv_nsec;
}

int h5model_find_newest(const char *path, char *out, size_t cap)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        gt_error("cannot open %s: %s", path,
                 errno == ENOENT ? "no such file or folder" : h5io_errno_reason(errno));
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) {
        if (gt_strlcpy(out, path, cap) != 0) {
            gt_error("model path too long: %s", path);
            return -1;
        }
        return 0;
    }
    DIR *dir = opendir(path);
    if (!dir) {
        gt_error("cannot open folder %s: %s", path, h5io_errno_reason(errno));
        return -1;
    }
    size_t plen = strlen(path);
    int found = 0, rc = -1;
    int64_t best_step = 0;
    struct timespec best_time = {0, 0};
    char *best = NULL, *full = NULL;
    h5lock_acquire();
    for (struct dirent *e; (e = readdir(dir)) != NULL;) {
        if (!ends_with(e->d_name, ".h5")) continue;
        size_t n = plen + 1 + strlen(e->d_name) + 1;
        free(full);
        if (!(full = malloc(n))) {
            gt_error("out of memory scanning %s", path);
            goto done;
        }
        snprintf(full, n, "%s%s%s", path, path[plen - 1] == '/' ? "" : "/", e->d_name);
        struct stat fst;
        if (stat(full, &fst) != 0 || !S_ISREG(fst.st_mode)) continue;
        int64_t step = 0;
        if (probe(full, &step) != 0) continue;
        /* Highest step; ties: newest file; still tied: the later name, so the choice
         * does not depend on the folder's listing order. */
        int better = !found || step > best_step ||
                     (step == best_step &&
                      (newer(&fst.st_mtim, &best_time) ||
                       (!newer(&best_time, &fst.st_mtim) && strcmp(full, best) > 0)));
        if (better) {
            free(best);
            best = full;
            full = NULL;
            best_step = step;
            best_time = fst.st_mtim;
            found = 1;
        }
    }
    if (!found) {
        /* a run stopped before its end (a signal, a time limit) has only checkpoints */
        struct stat ck;
        char sub[PATH_MAX + 16];
        snprintf(sub, sizeof sub, "%s/checkpoints", path);
        if (stat(sub, &ck) == 0 && S_ISDIR(ck.st_mode))
            gt_error("no gentrain model file in %s; its run has not saved model.h5 yet "
                     "(%s holds its checkpoints: resume it to the end with resume = auto)",
                     path, sub);
        else
            gt_error("no gentrain model file in %s", path);
        goto done;
    }
    if (gt_strlcpy(out, best, cap) != 0) {
        gt_error("model path too long: %s", best);
        goto done;
    }
    rc = 0;
done:
    h5lock_release();
    closedir(dir);
    free(full);
    free(best);
    return rc;
}
