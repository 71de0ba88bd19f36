/* h5tok — see h5tok.h. */
#include "h5tok.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"
#include "h5lock.h"
#include "h5util.h"
#include "json.h"

static void checksum(const char *json, size_t len, char out[32])
{
    snprintf(out, 32, "fnv1a64:%016" PRIx64, gt_fnv1a(GT_FNV_OFFSET, json, len));
}

int h5tok_write(hid_t file, const char *json, size_t len)
{
    hsize_t dims = (hsize_t)len;
    hid_t space = H5Screate_simple(1, &dims, NULL), dset = -1;
    int rc = -1;
    char sum[32];
    checksum(json, len, sum);
    if (space >= 0 &&
        (dset = H5Dcreate2(file, H5TOK_DATASET, H5T_STD_U8LE, space, H5P_DEFAULT, H5P_DEFAULT,
                           H5P_DEFAULT)) >= 0 &&
        (len == 0 ||
         H5Dwrite(dset, H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, json) >= 0) &&
        h5io_write_attr_str(dset, "checksum", sum) == 0)
        rc = 0;
    if (dset >= 0 && H5Dclose(dset) < 0) rc = -1;
    if (space >= 0) H5Sclose(space);
    return rc;
}

/* The dataset's shape and type: a 1-D unsigned 8-bit integer of at most
 * JSON_MAX_BYTES elements. */
static int check_shape(hid_t dset, size_t *len, char *why, size_t cap)
{
    hid_t type = H5Dget_type(dset), space = H5Dget_space(dset);
    hsize_t dims = 0;
    int rc = -1;
    if (type < 0 || space < 0) {
        snprintf(why, cap, "/%s cannot be read", H5TOK_DATASET);
    } else if (H5Tget_class(type) != H5T_INTEGER || H5Tget_size(type) != 1 ||
               H5Sget_simple_extent_ndims(space) != 1 ||
               H5Sget_simple_extent_dims(space, &dims, NULL) != 1) {
        snprintf(why, cap, "/%s is not a 1-D array of bytes", H5TOK_DATASET);
    } else if (dims > JSON_MAX_BYTES) {
        snprintf(why, cap, "/%s holds %llu bytes; a tokenizer is read up to %zu", H5TOK_DATASET,
                 (unsigned long long)dims, (size_t)JSON_MAX_BYTES);
    } else {
        *len = (size_t)dims;
        rc = 0;
    }
    if (type >= 0) H5Tclose(type);
    if (space >= 0) H5Sclose(space);
    return rc;
}

int h5tok_read(hid_t file, char **json, size_t *len, char *why, size_t cap)
{
    *json = NULL;
    *len = 0;
    H5I_type_t kind = h5io_object_kind(file, "/" H5TOK_DATASET);
    if (kind == H5I_BADID) return 0;
    if (kind != H5I_DATASET) {
        snprintf(why, cap, "/%s is not a dataset", H5TOK_DATASET);
        return -1;
    }
    hid_t dset = H5Dopen2(file, H5TOK_DATASET, H5P_DEFAULT);
    size_t n = 0;
    char *buf = NULL, *stored = NULL, sum[32];
    int rc = -1;
    if (dset < 0) {
        snprintf(why, cap, "/%s cannot be opened", H5TOK_DATASET);
        return -1;
    }
    if (check_shape(dset, &n, why, cap) != 0) goto done;
    if (!(buf = malloc(n + 1))) {
        snprintf(why, cap, "out of memory (%zu bytes)", n);
        goto done;
    }
    if (n && H5Dread(dset, H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0) {
        snprintf(why, cap, "/%s cannot be read (damaged file?)", H5TOK_DATASET);
        goto done;
    }
    buf[n] = '\0';
    char w[160];
    int r = h5io_attr_str(dset, "checksum", &stored, w, sizeof w);
    checksum(buf, n, sum);
    if (r != 1 || strcmp(stored, sum) != 0) {
        snprintf(why, cap, "/%s: %s", H5TOK_DATASET,
                 r == 1 ? "checksum mismatch (the tokenizer is damaged)"
                        : r == 0 ? "no checksum attribute" : w);
        goto done;
    }
    *json = buf;
    *len = n;
    buf = NULL;
    rc = 1;
done:
    free(buf);
    free(stored);
    H5Dclose(dset);
    return rc;
}

int h5tok_read_path(const char *path, char **json, size_t *len)
{
    char why[200];
    h5lock_acquire();
    hid_t f = h5io_open_read(path, why, sizeof why);
    int rc = -1;
    if (f < 0) {
        gt_error("cannot read the tokenizer of %s: %s", path, why);
    } else {
        rc = h5tok_read(f, json, len, why, sizeof why);
        if (rc < 0) gt_error("%s: %s", path, why);
        H5Fclose(f);
    }
    h5lock_release();
    return rc;
}
