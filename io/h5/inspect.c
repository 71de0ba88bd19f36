/* inspect — see inspect.h.
 *
 * Output, for people (objects in name order, so it is stable):
 *
 *   data.h5: HDF5 file, 1.2 MiB
 *   /               group
 *       @tokenizer = "bytes"  (string)
 *       @vocab_size = 256  (int64)
 *   /train          group
 *   /train/tokens   dataset  uint8 [1003854]  chunked [1048576]  1003854 bytes stored
 *
 * A gentrain model file gets a header first: step, parameter count, its shape and the
 * config text. */
#include "inspect.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "util.h"
#include "h5chunk.h"
#include "h5lock.h"
#include "h5model.h" /* H5MODEL_FORMAT_NAME */
#include "h5util.h"

#define ARRAY_SHOWN 8 /* values shown of an attribute array */

typedef struct {
    char *name;   /* "/a/b" */
    int type;     /* H5L_type_t */
    char *target; /* soft / external link target, else NULL */
} entry;

typedef struct {
    entry *v;
    size_t n, cap;
    int oom;
} entries;

static int add_entry(entries *es, const char *name, int type, const char *target)
{
    if (es->n == es->cap) {
        size_t nc = es->cap ? 2 * es->cap : 32;
        entry *v = realloc(es->v, nc * sizeof *v);
        if (!v) return -1;
        es->v = v;
        es->cap = nc;
    }
    entry *e = &es->v[es->n];
    size_t n = strlen(name) + 2;
    e->name = malloc(n);
    e->target = target ? strdup(target) : NULL;
    e->type = type;
    if (!e->name || (target && !e->target)) {
        free(e->name);
        free(e->target);
        return -1;
    }
    snprintf(e->name, n, "%s%s", name[0] == '/' ? "" : "/", name);
    es->n++;
    return 0;
}

static herr_t collect_cb(hid_t g, const char *name, const H5L_info_t *info, void *data)
{
    entries *es = data;
    char target[1024] = "";
    const char *tp = NULL;
    if (info->type == H5L_TYPE_SOFT || info->type == H5L_TYPE_EXTERNAL) {
        char raw[1024];
        size_t n = info->u.val_size;
        if (n <= sizeof raw && H5Lget_val(g, name, raw, sizeof raw, H5P_DEFAULT) >= 0) {
            if (info->type == H5L_TYPE_SOFT) {
                snprintf(target, sizeof target, "%.*s", (int)n, raw);
            } else {
                const char *file = NULL, *obj = NULL;
                unsigned flags = 0;
                if (H5Lunpack_elink_val(raw, n, &flags, &file, &obj) >= 0)
                    snprintf(target, sizeof target, "%s:%s", file, obj);
            }
        }
        tp = target;
    }
    if (add_entry(es, name, info->type, tp) != 0) {
        es->oom = 1;
        return -1;
    }
    return 0;
}

static void free_entries(entries *es)
{
    for (size_t i = 0; i < es->n; i++) {
        free(es->v[i].name);
        free(es->v[i].target);
    }
    free(es->v);
}

/* Writes n bytes of text from a file as it is, except what could steer a terminal
 * (control characters, escape sequences, broken UTF-8): those as \xNN (tab as \t), the
 * escaping of gentrain's error lines (gt_escape_unit). Returns the number of columns
 * written; with out == NULL only counts them. */
static int put_safe(FILE *out, const char *text, size_t n)
{
    const unsigned char *s = (const unsigned char *)text;
    int cols = 0;
    for (size_t i = 0; i < n;) {
        char unit[8];
        size_t used = 0, w = gt_escape_unit(s + i, n - i, unit, &used);
        if (out) fwrite(unit, 1, w, out);
        /* a UTF-8 character takes one column, an escape one per byte written */
        cols += w == used && used > 1 ? 1 : (int)w;
        i += used;
    }
    return cols;
}

static int put_safe_str(FILE *out, const char *s) { return put_safe(out, s, strlen(s)); }

/* Prints a multi-line string as an indented block. */
static void print_block(FILE *out, const char *s, const char *indent)
{
    while (*s) {
        const char *nl = strchr(s, '\n');
        size_t n = nl ? (size_t)(nl - s) : strlen(s);
        fputs(indent, out);
        put_safe(out, s, n);
        fputc('\n', out);
        s += n + (nl ? 1 : 0);
    }
}

/* Prints n numbers of buf (read as int64, uint64 or double). */
static void print_numbers(FILE *out, const void *buf, hssize_t n, int kind)
{
    hssize_t shown = n > ARRAY_SHOWN ? ARRAY_SHOWN : n;
    if (n != 1) fputc('[', out);
    for (hssize_t i = 0; i < shown; i++) {
        if (i) fputs(", ", out);
        if (kind == 0)
            fprintf(out, "%lld", (long long)((const int64_t *)buf)[i]);
        else if (kind == 1)
            fprintf(out, "%llu", (unsigned long long)((const uint64_t *)buf)[i]);
        else
            fprintf(out, "%.9g", ((const double *)buf)[i]);
    }
    if (n > shown) fprintf(out, ", ...] (%lld values)", (long long)n);
    else if (n != 1) fputc(']', out);
}

static void print_string_attr(FILE *out, hid_t attr, hid_t type, hssize_t n)
{
    hid_t mem = H5Tcopy(H5T_C_S1);
    int var = H5Tis_variable_str(type) > 0;
    size_t sz = H5Tget_size(type);
    hssize_t shown = n > ARRAY_SHOWN ? ARRAY_SHOWN : n;
    char **vs = NULL;
    char *fs = NULL;
    if (mem < 0 || H5Tset_cset(mem, H5Tget_cset(type)) < 0) goto fail;
    if (var) {
        vs = calloc((size_t)n, sizeof *vs);
        if (!vs || H5Tset_size(mem, H5T_VARIABLE) < 0 || H5Aread(attr, mem, vs) < 0) goto fail;
    } else {
        fs = malloc((size_t)n * (sz + 1));
        if (!fs || H5Tset_size(mem, sz + 1) < 0 || H5Tset_strpad(mem, H5T_STR_NULLTERM) < 0 ||
            H5Aread(attr, mem, fs) < 0)
            goto fail;
    }
    if (n == 1) {
        const char *s = var ? (vs[0] ? vs[0] : "") : fs;
        if (strchr(s, '\n')) {
            int lines = 0;
            for (const char *p = s; *p; p++) lines += *p == '\n';
            if (s[0] && s[strlen(s) - 1] != '\n') lines++;
            fprintf(out, "(text, %d lines):\n", lines);
            print_block(out, s, "            ");
            goto done;
        }
        fputc('"', out);
        put_safe_str(out, s);
        fputc('"', out);
    } else {
        fputc('[', out);
        for (hssize_t i = 0; i < shown; i++) {
            const char *s = var ? (vs[i] ? vs[i] : "") : fs + (size_t)i * (sz + 1);
            fputs(i ? ", \"" : "\"", out);
            put_safe_str(out, s);
            fputc('"', out);
        }
        if (n > shown) fprintf(out, ", ...] (%lld values)", (long long)n);
        else fputc(']', out);
    }
    char tn[48];
    h5io_type_name(type, tn, sizeof tn);
    if (n == 1)
        fprintf(out, "  (%s)\n", tn);
    else
        fprintf(out, "  (%s, %lld values)\n", tn, (long long)n);
    goto done;
fail:
    fprintf(out, "(unreadable string)\n");
done:
    if (vs) {
        for (hssize_t i = 0; i < n; i++)
            if (vs[i]) H5free_memory(vs[i]);
        free(vs);
    }
    free(fs);
    if (mem >= 0) H5Tclose(mem);
}

struct attr_ctx {
    FILE *out;
    int skip_config; /* the model's config was printed in the header */
};

static herr_t attr_cb(hid_t obj, const char *name, const H5A_info_t *ainfo, void *data)
{
    (void)ainfo;
    struct attr_ctx *c = data;
    FILE *out = c->out;
    hid_t attr = -1, type = -1, space = -1;
    char tn[48], shape[96];
    fputs("    @", out);
    put_safe_str(out, name);
    fputs(" = ", out);
    if ((attr = H5Aopen(obj, name, H5P_DEFAULT)) < 0 || (type = H5Aget_type(attr)) < 0 ||
        (space = H5Aget_space(attr)) < 0) {
        fprintf(out, "(unreadable)\n");
        goto done;
    }
    h5io_type_name(type, tn, sizeof tn);
    hssize_t n = H5Sget_simple_extent_npoints(space);
    H5T_class_t cls = H5Tget_class(type);
    if (H5Sget_simple_extent_type(space) == H5S_NULL || n <= 0) {
        fprintf(out, "(empty)  (%s)\n", tn);
    } else if (c->skip_config && strcmp(name, "config") == 0 && cls == H5T_STRING) {
        fprintf(out, "(the config text shown above)\n");
    } else if (cls == H5T_STRING) {
        print_string_attr(out, attr, type, n);
    } else if (cls == H5T_INTEGER || cls == H5T_FLOAT) {
        int kind = cls == H5T_FLOAT ? 2
                   : (H5Tget_sign(type) == H5T_SGN_NONE && H5Tget_size(type) >= 8) ? 1
                                                                                   : 0;
        hid_t mem = kind == 2 ? H5T_NATIVE_DOUBLE
                    : kind == 1 ? H5T_NATIVE_UINT64
                                : H5T_NATIVE_INT64;
        void *buf = malloc((size_t)n * 8);
        if (buf && H5Aread(attr, mem, buf) >= 0) {
            print_numbers(out, buf, n, kind);
            int rank = H5Sget_simple_extent_ndims(space);
            if (rank > 0) {
                hsize_t dims[H5S_MAX_RANK];
                H5Sget_simple_extent_dims(space, dims, NULL);
                h5io_shape_str(rank, dims, shape, sizeof shape);
                fprintf(out, "  (%s %s)\n", tn, shape);
            } else {
                fprintf(out, "  (%s)\n", tn);
            }
        } else {
            fprintf(out, "(unreadable)  (%s)\n", tn);
        }
        free(buf);
    } else {
        fprintf(out, "(not shown)  (%s, %lld values)\n", tn, (long long)n);
    }
done:
    if (space >= 0) H5Sclose(space);
    if (type >= 0) H5Tclose(type);
    if (attr >= 0) H5Aclose(attr);
    H5Eclear2(H5E_DEFAULT);
    return 0;
}

static void print_attrs(FILE *out, hid_t obj, int skip_config)
{
    struct attr_ctx c = {out, skip_config};
    if (H5Aiterate2(obj, H5_INDEX_NAME, H5_ITER_INC, NULL, attr_cb, &c) < 0) {
        fprintf(out, "    (attributes unreadable)\n");
        H5Eclear2(H5E_DEFAULT);
    }
}

static void print_filters(FILE *out, hid_t dcpl)
{
    int nf = H5Pget_nfilters(dcpl);
    for (int i = 0; i < nf; i++) {
        unsigned flags = 0, cd[8];
        size_t ncd = 8;
        char fname[64] = "";
        H5Z_filter_t f = H5Pget_filter2(dcpl, (unsigned)i, &flags, &ncd, cd, sizeof fname,
                                        fname, NULL);
        fputs(", ", out);
        switch (f) {
        case H5Z_FILTER_DEFLATE:
            if (ncd >= 1)
                fprintf(out, "gzip %u", cd[0]);
            else
                fputs("gzip", out);
            break;
        case H5Z_FILTER_SHUFFLE: fputs("shuffle", out); break;
        case H5Z_FILTER_FLETCHER32: fputs("fletcher32", out); break;
        case H5Z_FILTER_SZIP: fputs("szip", out); break;
        case H5Z_FILTER_NBIT: fputs("nbit", out); break;
        case H5Z_FILTER_SCALEOFFSET: fputs("scaleoffset", out); break;
        default:
            if (fname[0])
                fprintf(out, "filter %d (%s)", (int)f, fname);
            else
                fprintf(out, "filter %d", (int)f);
        }
    }
}

/* The text as put_safe shows it, in a malloc'd string (NULL when out of memory). */
static char *safe_dup(const char *s)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    if (!m) return NULL;
    put_safe_str(m, s);
    if (fclose(m) != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}

/* What the chunk index of a chunked dataset records, as far as that can be checked
 * without reading its data (h5chunk_check_open). Returns 0, or -1 when it is damaged
 * (reported, the names as put_safe shows them). */
static int check_chunks(hid_t file, hid_t dset, const char *path, const char *name)
{
    char *p = safe_dup(path), *n = safe_dup(name);
    int rc = 0;
    h5chunk c;
    if (!p || !n) {
        gt_error("out of memory inspecting %s", path);
        rc = -1;
    } else if (h5chunk_init(&c, file, dset, p, n) == 1) {
        rc = h5chunk_check_open(&c, dset, h5chunk_open_limit(), 0);
        h5chunk_free(&c);
    }
    free(p);
    free(n);
    return rc;
}

static void print_dataset(FILE *out, hid_t dset)
{
    hid_t type = H5Dget_type(dset), space = H5Dget_space(dset), dcpl = H5Dget_create_plist(dset);
    char tn[48] = "?", shape[128] = "?", sz[32];
    if (type >= 0) h5io_type_name(type, tn, sizeof tn);
    if (space >= 0) {
        hsize_t dims[H5S_MAX_RANK];
        H5S_class_t sc = H5Sget_simple_extent_type(space);
        int rank = H5Sget_simple_extent_dims(space, dims, NULL);
        if (sc == H5S_NULL)
            snprintf(shape, sizeof shape, "(null)");
        else if (sc == H5S_SCALAR)
            snprintf(shape, sizeof shape, "scalar");
        else if (rank >= 0)
            h5io_shape_str(rank, dims, shape, sizeof shape);
    }
    fprintf(out, "dataset  %s %s", tn, shape);
    if (dcpl >= 0) {
        H5D_layout_t lay = H5Pget_layout(dcpl);
        if (lay == H5D_CHUNKED) {
            hsize_t cd[H5S_MAX_RANK];
            int cr = H5Pget_chunk(dcpl, H5S_MAX_RANK, cd);
            char cs[128] = "?";
            if (cr >= 0) h5io_shape_str(cr, cd, cs, sizeof cs);
            fprintf(out, "  chunked %s", cs);
            print_filters(out, dcpl);
        } else if (lay == H5D_COMPACT) {
            fputs("  compact", out);
        } else if (lay == H5D_VIRTUAL) {
            fputs("  virtual", out);
        }
    }
    gt_human_bytes((double)H5Dget_storage_size(dset), sz, sizeof sz);
    fprintf(out, "  %s stored\n", sz);
    if (dcpl >= 0) H5Pclose(dcpl);
    if (space >= 0) H5Sclose(space);
    if (type >= 0) H5Tclose(type);
}

/* Sum of the element counts of the datasets directly in /model. */
static herr_t count_cb(hid_t g, const char *name, const H5L_info_t *info, void *data)
{
    (void)info;
    int64_t *total = data;
    hid_t d = H5Dopen2(g, name, H5P_DEFAULT);
    if (d < 0) {
        H5Eclear2(H5E_DEFAULT);
        return 0;
    }
    hid_t s = H5Dget_space(d);
    if (s >= 0) {
        hssize_t n = H5Sget_simple_extent_npoints(s);
        if (n > 0) *total += n;
        H5Sclose(s);
    }
    H5Dclose(d);
    return 0;
}

/* An integer root attribute as text: a value the file lacks or that cannot be read as
 * one integer is said so, never shown as a number it does not hold. */
static void attr_text(hid_t file, const char *key, char *buf, size_t cap)
{
    char why[128];
    int64_t v = 0;
    const int r = h5io_attr_int(file, key, &v, why, sizeof why);
    if (r == 1)
        snprintf(buf, cap, "%lld", (long long)v);
    else
        snprintf(buf, cap, "%s", r == 0 ? "(missing)" : "(unreadable)");
}

/* Returns 1 when the file is a gentrain model (header printed). */
static int print_model_header(FILE *out, hid_t file)
{
    char why[128];
    char *fmt = NULL, *config = NULL;
    int r = h5io_attr_str(file, "format", &fmt, why, sizeof why);
    int is_model = r == 1 && strcmp(fmt, H5MODEL_FORMAT_NAME) == 0;
    free(fmt);
    if (!is_model) return 0;
    char step[24], ver[24], v[5][24];
    static const char *keys[5] = {"vocab_size", "block_size", "n_layer", "n_head",
                                  "n_embd"};
    attr_text(file, "step", step, sizeof step);
    attr_text(file, "format_version", ver, sizeof ver);
    for (int i = 0; i < 5; i++) attr_text(file, keys[i], v[i], sizeof v[i]);
    int64_t params = 0;
    if (h5io_object_kind(file, "/model") == H5I_GROUP) {
        hid_t g = H5Gopen2(file, "/model", H5P_DEFAULT);
        if (g >= 0) {
            H5Literate(g, H5_INDEX_NAME, H5_ITER_INC, NULL, count_cb, &params);
            H5Gclose(g);
        }
    }
    char pc[40];
    gt_group_digits(params, pc, sizeof pc);
    fprintf(out, "gentrain model (format_version %s): step %s, %s parameters\n", ver, step,
            pc);
    fprintf(out, "shape: vocab_size %s, block_size %s, n_layer %s, n_head %s, n_embd %s\n",
            v[0], v[1], v[2], v[3], v[4]);
    if (h5io_attr_str(file, "config", &config, why, sizeof why) == 1 && config[0]) {
        fprintf(out, "config:\n");
        print_block(out, config, "    ");
    }
    free(config);
    fputc('\n', out);
    H5Eclear2(H5E_DEFAULT);
    return 1;
}

int inspect_file(const char *path, FILE *out)
{
    char why[160], sz[32];
    long cut = 0;
    entries es = {NULL, 0, 0, 0};
    int rc = -1, damaged = 0;
    h5lock_acquire();
    hid_t file = h5io_open_read(path, why, sizeof why);
    if (file < 0) {
        gt_error("cannot open %s: %s", path, why);
        goto done;
    }
    struct stat st;
    gt_human_bytes(stat(path, &st) == 0 ? (double)st.st_size : 0.0, sz, sizeof sz);
    put_safe_str(out, path);
    fprintf(out, ": HDF5 file, %s\n", sz);
    int is_model = print_model_header(out, file);

    if (add_entry(&es, "/", H5L_TYPE_HARD, NULL) != 0 ||
        h5io_walk_links(file, collect_cb, &es, &cut) < 0) {
        if (es.oom)
            gt_error("out of memory listing %s", path);
        else
            gt_error("cannot list the objects in %s (damaged file?)", path);
        goto done;
    }
    int width = 0;
    for (size_t i = 0; i < es.n; i++) {
        int n = put_safe(NULL, es.v[i].name, strlen(es.v[i].name));
        if (n > width) width = n;
    }
    if (width > 48) width = 48;
    for (size_t i = 0; i < es.n; i++) {
        const entry *e = &es.v[i];
        for (int pad = width - put_safe_str(out, e->name); pad > 0; pad--) fputc(' ', out);
        fputs("  ", out);
        if (e->type == H5L_TYPE_SOFT || e->type == H5L_TYPE_EXTERNAL) {
            fputs("-> ", out);
            put_safe_str(out, e->target);
            fputs(e->type == H5L_TYPE_SOFT ? "  (soft link)\n" : "  (external link)\n", out);
            continue;
        }
        if (e->type != H5L_TYPE_HARD) {
            fprintf(out, "(user-defined link)\n");
            continue;
        }
        hid_t o = H5Oopen(file, e->name, H5P_DEFAULT);
        if (o < 0) {
            fprintf(out, "(unreadable)\n");
            H5Eclear2(H5E_DEFAULT);
            continue;
        }
        switch (H5Iget_type(o)) {
        case H5I_GROUP: fprintf(out, "group\n"); break;
        case H5I_DATASET:
            print_dataset(out, o);
            if (check_chunks(file, o, path, e->name) != 0) damaged = 1;
            break;
        case H5I_DATATYPE: fprintf(out, "named datatype\n"); break;
        default: fprintf(out, "(unknown object)\n"); break;
        }
        print_attrs(out, o, is_model && i == 0);
        H5Oclose(o);
    }
    /* the bounds of the walk (h5util.h) must not leave a listing silently short */
    if (cut > 0)
        fprintf(out, "(the listing is incomplete: %ld groups or links left out, nested deeper "
                "than %d levels, past the first %d links, or with names too long)\n", cut,
                H5IO_WALK_DEPTH, H5IO_WALK_LINKS);
    /* the listing is the command's whole product: one that did not reach its file (a
     * full disk, > /dev/full) is a failure, not exit 0 */
    const int flushed = fflush(out) == 0;
    if (!flushed || ferror(out)) {
        gt_error("writing the listing of %s failed: %s", path,
                 flushed ? "write error" : h5io_errno_reason(errno));
        goto done;
    }
    rc = damaged ? -1 : 0;
done:
    if (file >= 0) H5Fclose(file);
    H5Eclear2(H5E_DEFAULT);
    h5lock_release();
    free_entries(&es);
    return rc;
}
