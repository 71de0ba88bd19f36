/* safetensors — see safetensors.h. */
#include "safetensors.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "half.h"
#include "util.h"
#include "file_commit.h"
#include "json.h"

typedef struct st_entry {
    const char *name;     /* in the parsed header */
    const char *dtype;
    int elsize;
    int ndim;
    int64_t dims[ST_MAX_DIMS];
    uint64_t numel, begin, end;
} st_entry;

struct st_file {
    char path[4096];
    int fd;
    uint64_t data_start, data_size;
    json_doc doc;
    st_entry *entries;
    int n;
};

static int dtype_size(const char *dtype)
{
    if (strcmp(dtype, "F32") == 0) return 4;
    if (strcmp(dtype, "F16") == 0 || strcmp(dtype, "BF16") == 0) return 2;
    return 0;
}

/* An array of at most ST_MAX_DIMS non-negative integers, their product into *numel
 * (bounded by 2^48, so numel x element size cannot wrap). */
static int parse_shape(const json_value *v, st_entry *e)
{
    if (!v || v->type != JSON_ARRAY || v->n > ST_MAX_DIMS) return -1;
    e->ndim = (int)v->n;
    e->numel = 1;
    for (uint32_t k = 0; k < v->n; k++) {
        int64_t d;
        if (!json_int(&v->u.items[k], 0, (int64_t)1 << 48, &d)) return -1;
        e->dims[k] = d;
        if (d != 0 && e->numel > ((uint64_t)1 << 48) / (uint64_t)d) return -1;
        e->numel *= (uint64_t)d;
    }
    return 0;
}

/* One header member: checks it and fills e. 0, or -1 (reported). */
static int parse_entry(st_file *f, const char *name, const json_value *v, st_entry *e)
{
    char shown[72];
    const char *who = gt_printable(name, shown);
    const json_value *dt = json_get(v, "dtype"), *off = json_get(v, "data_offsets");
    if (!dt || dt->type != JSON_STRING) {
        gt_error("%s: tensor '%s' has no dtype", f->path, who);
        return -1;
    }
    e->name = name;
    e->dtype = dt->u.str;
    e->elsize = dtype_size(e->dtype);
    if (!e->elsize) {
        char dtype_shown[72]; /* its own buffer: `who` lives in `shown` */
        gt_error("%s: tensor '%s' is %s; gentrain reads F32, F16 and BF16", f->path, who,
                 gt_printable(e->dtype, dtype_shown));
        return -1;
    }
    int64_t b, en;
    if (parse_shape(json_get(v, "shape"), e) != 0 || !off || off->type != JSON_ARRAY ||
        off->n != 2 || !json_int(&off->u.items[0], 0, INT64_MAX, &b) ||
        !json_int(&off->u.items[1], 0, INT64_MAX, &en)) {
        gt_error("%s: tensor '%s': its shape or data_offsets are not valid", f->path, who);
        return -1;
    }
    e->begin = (uint64_t)b;
    e->end = (uint64_t)en;
    if (e->begin > e->end || e->end > f->data_size ||
        e->end - e->begin != e->numel * (uint64_t)e->elsize) {
        gt_error("%s: tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64 ") do not hold its "
                 "%" PRIu64 " elements within the file's %" PRIu64 " bytes of data",
                 f->path, who, e->begin, e->end, e->numel, f->data_size);
        return -1;
    }
    return 0;
}

/* Reads and parses the header. 0, or -1 (reported). */
static int read_header(st_file *f, uint64_t file_size)
{
    unsigned char len8[8];
    if (file_size < 8 || pread(f->fd, len8, 8, 0) != 8) {
        gt_error("%s is not a safetensors file (shorter than its header)", f->path);
        return -1;
    }
    uint64_t n = 0;
    for (int k = 7; k >= 0; k--) n = n << 8 | len8[k];
    if (n > ST_MAX_HEADER || n > file_size - 8) {
        gt_error("%s: header of %" PRIu64 " bytes %s", f->path, n,
                 n > ST_MAX_HEADER ? "is too large for a safetensors file"
                                   : "runs past the end of the file");
        return -1;
    }
    char *text = gt_malloc(n + 1, "safetensors header");
    if (!text) return -1;
    int rc = -1;
    char err[160];
    if (pread(f->fd, text, n, 8) != (ssize_t)n)
        gt_error("%s: cannot read its header: %s", f->path, file_errno_reason(errno));
    else if (json_parse(text, n, &f->doc, err, sizeof err) != 0)
        gt_error("%s: header: %s", f->path, err);
    else if (f->doc.root.type != JSON_OBJECT)
        gt_error("%s: header is not a JSON object", f->path);
    else
        rc = 0;
    free(text);
    f->data_start = 8 + n;
    f->data_size = file_size - f->data_start;
    return rc;
}

st_file *st_open(const char *path)
{
    st_file *f = gt_calloc(sizeof *f, "safetensors file");
    if (!f) return NULL;
    snprintf(f->path, sizeof f->path, "%s", path);
    f->fd = gt_open_regular(path, "safetensors file", 0, NULL);
    struct stat st;
    if (f->fd < 0 || fstat(f->fd, &st) != 0 || read_header(f, (uint64_t)st.st_size) != 0)
        goto fail;
    const json_value *root = &f->doc.root;
    f->entries = gt_calloc((size_t)root->n * sizeof *f->entries + 1, "safetensors index");
    if (!f->entries) goto fail;
    for (uint32_t i = 0; i < root->n; i++) {
        const json_value *key = &root->u.items[2 * i], *val = &root->u.items[2 * i + 1];
        if (strcmp(key->u.str, "__metadata__") == 0) continue;
        if (val->type != JSON_OBJECT ||
            parse_entry(f, key->u.str, val, &f->entries[f->n]) != 0) {
            if (val->type != JSON_OBJECT)
                gt_error("%s: header member '%.64s' is not a tensor", path, key->u.str);
            goto fail;
        }
        f->n++;
    }
    return f;
fail:
    st_close(f);
    return NULL;
}

void st_close(st_file *f)
{
    if (!f) return;
    if (f->fd >= 0) close(f->fd);
    json_free(&f->doc);
    free(f->entries);
    free(f);
}

int st_index(const st_file *f, const char *name)
{
    for (int i = 0; i < f->n; i++)
        if (strcmp(f->entries[i].name, name) == 0) return i;
    return -1;
}

static const st_entry *find(const st_file *f, const char *name)
{
    const int i = st_index(f, name);
    return i < 0 ? NULL : &f->entries[i];
}

int st_find(const st_file *f, const char *name, int *ndim, int64_t *dims, const char **dtype)
{
    const st_entry *e = find(f, name);
    if (!e) return 0;
    if (ndim) *ndim = e->ndim;
    if (dims) memcpy(dims, e->dims, sizeof e->dims);
    if (dtype) *dtype = e->dtype;
    return 1;
}

int st_count(const st_file *f) { return f->n; }
const char *st_name(const st_file *f, int i) { return f->entries[i].name; }

/* Little-endian bytes to floats (this code runs on little-endian x86). */
static void convert(float *out, const unsigned char *raw, size_t n, const char *dtype)
{
    if (dtype[0] == 'F' && dtype[1] == '3') {
        memcpy(out, raw, n * sizeof(float));
    } else if (dtype[0] == 'F') {
        for (size_t i = 0; i < n; i++)
            out[i] = half_to_float_scalar((uint16_t)(raw[2 * i] | raw[2 * i + 1] << 8));
    } else { /* BF16: the top half of a float */
        for (size_t i = 0; i < n; i++) {
            uint32_t bits = (uint32_t)(raw[2 * i] | raw[2 * i + 1] << 8) << 16;
            memcpy(&out[i], &bits, sizeof bits);
        }
    }
}

int st_read_float(st_file *f, const char *name, float *out, size_t n)
{
    const st_entry *e = find(f, name);
    if (!e || e->numel != n) {
        gt_error("%s: internal: tensor '%s' read as %zu elements", f->path, name, n);
        return -1;
    }
    const size_t bytes = (size_t)(e->end - e->begin);
    unsigned char *raw = e->elsize == 4 ? (unsigned char *)out
                                        : gt_malloc(bytes ? bytes : 1, "tensor data");
    if (!raw) return -1;
    size_t done = 0;
    while (done < bytes) {
        ssize_t got = pread(f->fd, raw + done, bytes - done,
                            (off_t)(f->data_start + e->begin + done));
        if (got <= 0) {
            gt_error("%s: reading tensor '%s' failed: %s", f->path, name,
                     got == 0 ? "the file is shorter than its header says"
                              : file_errno_reason(errno));
            if (raw != (unsigned char *)out) free(raw);
            return -1;
        }
        done += (size_t)got;
    }
    convert(out, raw, n, e->dtype);
    if (raw != (unsigned char *)out) free(raw);
    return 0;
}

/* Header bytes one tensor can take: its name (at most 200, checked by st_write), 8
 * dimensions and 2 offsets of up to 20 digits, and the keys. */
enum { ENTRY_ROOM = 512 };

/* The JSON header of the tensors, padded with spaces to a multiple of 8 bytes (as the
 * reference writer does, so the data is aligned). malloc'd; NULL (reported). */
static char *make_header(const st_tensor *t, int n, size_t *len)
{
    size_t cap = 64 + (size_t)n * ENTRY_ROOM, used = 0;
    char *h = gt_malloc(cap, "safetensors header");
    if (!h) return NULL;
    used += (size_t)snprintf(h, cap, "{\"__metadata__\":{\"format\":\"pt\"}");
    uint64_t at = 0;
    for (int i = 0; i < n; i++) {
        uint64_t numel = 1;
        used += (size_t)snprintf(h + used, cap - used, ",\"%s\":{\"dtype\":\"F32\",\"shape\":[",
                                 t[i].name);
        for (int k = 0; k < t[i].ndim; k++) {
            numel *= (uint64_t)t[i].dims[k];
            used += (size_t)snprintf(h + used, cap - used, "%s%" PRId64, k ? "," : "",
                                     t[i].dims[k]);
        }
        used += (size_t)snprintf(h + used, cap - used,
                                 "],\"data_offsets\":[%" PRIu64 ",%" PRIu64 "]}", at,
                                 at + 4 * numel);
        at += 4 * numel;
    }
    used += (size_t)snprintf(h + used, cap - used, "}");
    while (used % 8 != 0) h[used++] = ' ';
    *len = used;
    return h;
}

/* Writes the whole file through f (opened by file_begin); a failed write leaves
 * ferror(f) set, which file_close_tmp reports. */
static void write_all(FILE *f, const st_tensor *tensors, int n, const char *header, size_t len)
{
    unsigned char len8[8];
    for (int k = 0; k < 8; k++) len8[k] = (unsigned char)((uint64_t)len >> (8 * k));
    fwrite(len8, 1, 8, f);
    fwrite(header, 1, len, f);
    for (int i = 0; i < n; i++) {
        size_t numel = 1;
        for (int k = 0; k < tensors[i].ndim; k++) numel *= (size_t)tensors[i].dims[k];
        fwrite(tensors[i].data, sizeof(float), numel, f);
    }
}

int st_write_tmp(const char *path, const st_tensor *tensors, int n, char *tmp, size_t cap)
{
    for (int i = 0; i < n; i++)
        if (strlen(tensors[i].name) > 200 || strpbrk(tensors[i].name, "\"\\") ||
            tensors[i].ndim < 0 || tensors[i].ndim > ST_MAX_DIMS) {
            gt_error("internal: tensor %d cannot be written to a safetensors file", i);
            return -1;
        }
    size_t len = 0;
    char *header = make_header(tensors, n, &len);
    if (!header) return -1;
    FILE *f = file_begin(path, "safetensors file", tmp, cap);
    if (!f) {
        free(header);
        return -1;
    }
    write_all(f, tensors, n, header, len);
    free(header);
    return file_close_tmp(f, tmp, path, "safetensors file");
}

int st_write(const char *path, const st_tensor *tensors, int n)
{
    char tmp[4200], why[200];
    if (st_write_tmp(path, tensors, n, tmp, sizeof tmp) != 0) return -1;
    if (file_commit(tmp, path, why, sizeof why) == 0) return 0;
    gt_error("writing safetensors file %s failed: %s", path, why);
    (void)unlink(tmp);
    return -1;
}
