/* prepare — see prepare.h.
 *
 * Storage choice: 1 MiB chunks (smaller for small splits), no compression. Byte text
 * would shrink 2-3x with deflate, but the loader reads short windows at random
 * offsets, and an uncompressed chunk lets HDF5 read exactly those bytes instead of
 * inflating a whole chunk per window.
 *
 * The sizes of the inputs are taken first (they must be regular files), so the split
 * point is known before the first byte is written; the bytes are then copied through
 * one 1 MiB buffer, each write filling whole chunks. */
#include "prepare.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../src/util.h"
#include "h5lock.h"
#include "h5util.h"

#define CHUNK ((int64_t)1 << 20) /* bytes per chunk and per copy */

/* One output dataset being filled. */
typedef struct {
    hid_t dset, fspace;
    const char *name;
} outset;

/* The inputs seen as one byte stream. */
typedef struct {
    const char *const *paths;
    const int64_t *sizes;
    int n, cur;
    FILE *f;
    int64_t done_in_cur; /* bytes read from inputs[cur] */
} stream;

static int create_set(hid_t file, hid_t lcpl, const char *name, int64_t n, outset *o)
{
    o->name = name;
    o->dset = o->fspace = -1;
    hsize_t dims = (hsize_t)n, maxdims = H5S_UNLIMITED;
    hsize_t chunk = (hsize_t)(n < 1 ? 1 : n < CHUNK ? n : CHUNK);
    int rc = -1;
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    if (dcpl < 0 || H5Pset_chunk(dcpl, 1, &chunk) < 0) goto done;
    if ((o->fspace = H5Screate_simple(1, &dims, &maxdims)) < 0) goto done;
    o->dset = H5Dcreate2(file, name, H5T_STD_U8LE, o->fspace, lcpl, dcpl, H5P_DEFAULT);
    if (o->dset < 0) goto done;
    rc = 0;
done:
    if (dcpl >= 0) H5Pclose(dcpl);
    return rc;
}

static int close_set(outset *o)
{
    int rc = 0;
    if (o->fspace >= 0 && H5Sclose(o->fspace) < 0) rc = -1;
    if (o->dset >= 0 && H5Dclose(o->dset) < 0) rc = -1;
    o->fspace = o->dset = -1;
    return rc;
}

static int write_at(outset *o, int64_t off, int64_t n, const unsigned char *buf)
{
    hsize_t start = (hsize_t)off, count = (hsize_t)n;
    hid_t mspace = H5Screate_simple(1, &count, NULL);
    int rc = -1;
    if (mspace >= 0 &&
        H5Sselect_hyperslab(o->fspace, H5S_SELECT_SET, &start, NULL, &count, NULL) >= 0 &&
        H5Dwrite(o->dset, H5T_NATIVE_UINT8, mspace, o->fspace, H5P_DEFAULT, buf) >= 0)
        rc = 0;
    if (mspace >= 0) H5Sclose(mspace);
    return rc;
}

/* Reads exactly want bytes from the stream into buf (moving to the next input as each
 * one ends). Reports and returns -1 on a read error or an input that changed size. */
static int fill(stream *s, unsigned char *buf, int64_t want)
{
    while (want > 0) {
        if (!s->f) {
            if (s->cur >= s->n) {
                gt_error("inputs ended early (did a file shrink while being read?)");
                return -1;
            }
            s->f = fopen(s->paths[s->cur], "rb");
            if (!s->f) {
                gt_error("cannot read %s: %s", s->paths[s->cur], h5io_errno_reason(errno));
                return -1;
            }
            s->done_in_cur = 0;
            printf("  reading %s (%lld bytes)\n", s->paths[s->cur],
                   (long long)s->sizes[s->cur]);
            fflush(stdout);
        }
        int64_t left = s->sizes[s->cur] - s->done_in_cur;
        int64_t take = want < left ? want : left;
        size_t got = take > 0 ? fread(buf, 1, (size_t)take, s->f) : 0;
        if ((int64_t)got < take) {
            if (ferror(s->f))
                gt_error("cannot read %s: %s", s->paths[s->cur], h5io_errno_reason(errno));
            else
                gt_error("%s changed size while being read (expected %lld bytes, got %lld)",
                         s->paths[s->cur], (long long)s->sizes[s->cur],
                         (long long)(s->done_in_cur + (int64_t)got));
            return -1;
        }
        buf += got;
        want -= (int64_t)got;
        s->done_in_cur += (int64_t)got;
        if (s->done_in_cur == s->sizes[s->cur]) {
            fclose(s->f);
            s->f = NULL;
            s->cur++;
        }
    }
    return 0;
}

int prepare_bytes(const char *const *inputs, int n_inputs, const char *out,
                  double val_fraction)
{
    if (n_inputs < 1) {
        gt_error("prepare needs at least one input file");
        return -1;
    }
    if (!(val_fraction >= 0.0 && val_fraction < 1.0)) {
        gt_error("val_fraction %g is out of range [0, 1)", val_fraction);
        return -1;
    }
    int rc = -1;
    int64_t *sizes = calloc((size_t)n_inputs, sizeof *sizes);
    size_t olen = strlen(out);
    char *tmp = malloc(olen + 5);
    unsigned char *buf = malloc((size_t)CHUNK);
    hid_t file = -1, lcpl = -1;
    outset sets[2] = {{-1, -1, "/train/tokens"}, {-1, -1, "/val/tokens"}};
    stream s = {inputs, sizes, n_inputs, 0, NULL, 0};
    int locked = 0, made_tmp = 0;
    if (!sizes || !tmp || !buf) {
        gt_error("out of memory preparing %s", out);
        goto fail;
    }
    snprintf(tmp, olen + 5, "%s.tmp", out);

    /* An output that can never be written fails before any work is done; only a
     * regular file is ever replaced, and never one of the inputs (nor a link to one). */
    struct stat ost;
    const int out_exists = stat(out, &ost) == 0;
    const char *kind = gt_special_kind(out);
    if (kind) {
        gt_error("cannot write %s: it is %s; gentrain replaces only regular files", out, kind);
        goto fail;
    }

    /* Every input must be a readable regular file; their sizes fix the split. */
    int64_t total = 0;
    for (int i = 0; i < n_inputs; i++) {
        /* non-blocking: a named pipe is found out by fstat instead of waited on */
        int fd = open(inputs[i], O_RDONLY | O_NONBLOCK);
        struct stat st;
        if (fd < 0) {
            gt_error("cannot read %s: %s", inputs[i], h5io_errno_reason(errno));
            goto fail;
        }
        int ok = fstat(fd, &st) == 0;
        int err = errno;
        close(fd);
        if (!ok) {
            gt_error("cannot read %s: %s", inputs[i], h5io_errno_reason(err));
            goto fail;
        }
        if (S_ISDIR(st.st_mode)) {
            gt_error("cannot read %s: it is a folder", inputs[i]);
            goto fail;
        }
        if (!S_ISREG(st.st_mode)) {
            gt_error("cannot read %s: it is %s, not a regular file (save the text to a "
                     "file first)", inputs[i],
                     S_ISFIFO(st.st_mode) ? "a named pipe (FIFO)" : "a device or socket");
            goto fail;
        }
        if (out_exists && st.st_dev == ost.st_dev && st.st_ino == ost.st_ino) {
            gt_error("output %s is the input %s (or a link to it): it would be "
                     "overwritten; write the tokens to another file", out, inputs[i]);
            goto fail;
        }
        sizes[i] = (int64_t)st.st_size;
        total += sizes[i];
    }
    /* Rounded to the nearest byte: 1 - 0.9 is 0.0999..., and a floor would then move
     * a byte the user did not ask to move. */
    int64_t n_val = (int64_t)llround((double)total * val_fraction);
    if (n_val > total) n_val = total;
    int64_t n_train = total - n_val;
    if (n_train < 1) {
        gt_error("the inputs hold %lld bytes: too few for a training set", (long long)total);
        goto fail;
    }
    if (val_fraction > 0 && n_val == 0)
        gt_warn("val_fraction %g of %lld bytes leaves no validation tokens", val_fraction,
                (long long)total);

    char why[160];
    h5lock_acquire();
    locked = 1;
    if ((file = h5io_create(tmp, why, sizeof why)) < 0) {
        gt_error("cannot create %s (for %s): %s", tmp, out, why);
        goto fail;
    }
    made_tmp = 1;
    if ((lcpl = H5Pcreate(H5P_LINK_CREATE)) < 0 ||
        H5Pset_create_intermediate_group(lcpl, 1) < 0 ||
        create_set(file, lcpl, sets[0].name, n_train, &sets[0]) != 0 ||
        create_set(file, lcpl, sets[1].name, n_val, &sets[1]) != 0 ||
        h5io_write_attr_int(file, "vocab_size", 256) != 0 ||
        h5io_write_attr_str(file, "tokenizer", "bytes") != 0) {
        gt_error("cannot create the datasets in %s", tmp);
        goto fail;
    }

    /* Copy: whole chunks at a time, train first, then val. */
    int64_t pos = 0, next_report = total / 10;
    while (pos < total) {
        int which = pos < n_train ? 0 : 1;
        int64_t base = which == 0 ? 0 : n_train;
        int64_t end = which == 0 ? n_train : total;
        int64_t n = end - pos < CHUNK ? end - pos : CHUNK;
        if (fill(&s, buf, n) != 0) goto fail;
        if (write_at(&sets[which], pos - base, n, buf) != 0) {
            gt_error("cannot write %s in %s (disk full?)", sets[which].name, tmp);
            goto fail;
        }
        pos += n;
        if (total >= ((int64_t)64 << 20) && pos >= next_report && pos < total) {
            printf("  %3.0f%% (%lld of %lld bytes)\n", 100.0 * (double)pos / (double)total,
                   (long long)pos, (long long)total);
            fflush(stdout);
            next_report += total / 10;
        }
    }
    int bad = close_set(&sets[0]) | close_set(&sets[1]);
    bad |= H5Pclose(lcpl) < 0;
    lcpl = -1;
    hid_t written = file;
    file = -1;
    if (h5io_finish(written, bad, tmp, out, why, sizeof why) != 0) {
        gt_error("cannot write %s: %s", out, why);
        goto fail;
    }
    made_tmp = 0;
    h5lock_release();
    locked = 0;
    printf("prepared %lld tokens: train %lld, val %lld -> %s\n", (long long)total,
           (long long)n_train, (long long)n_val, out);
    fflush(stdout);
    rc = 0;

fail:
    if (s.f) fclose(s.f);
    close_set(&sets[0]);
    close_set(&sets[1]);
    if (lcpl >= 0) H5Pclose(lcpl);
    h5io_close_write(file);
    if (made_tmp) unlink(tmp);
    if (locked) h5lock_release();
    free(sizes);
    free(tmp);
    free(buf);
    return rc;
}
