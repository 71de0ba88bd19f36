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

#include "util.h"
#include "h5lock.h"
#include "h5util.h"
#include "prepare_input.h"

#define CHUNK ((int64_t)1 << 20) /* bytes per chunk and per copy */

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
    unsigned char *buf = malloc((size_t)CHUNK);
    prep_output o = {NULL, -1, 0};
    hid_t lcpl = -1;
    prep_set sets[2] = {{-1, -1, "/train/tokens"}, {-1, -1, "/val/tokens"}};
    prep_stream s = {inputs, sizes, n_inputs, 0, NULL, 0};
    int locked = 0;
    if (!sizes || !buf) {
        gt_error("out of memory preparing %s", out);
        goto fail;
    }

    int64_t total = 0;
    if (prep_check_paths(inputs, n_inputs, out, sizes, &total) != 0) goto fail;
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

    h5lock_acquire();
    locked = 1;
    if (prep_output_create(&o, out) != 0) goto fail;
    if ((lcpl = H5Pcreate(H5P_LINK_CREATE)) < 0 ||
        H5Pset_create_intermediate_group(lcpl, 1) < 0 ||
        prep_create_set(o.file, lcpl, sets[0].name, n_train, H5T_STD_U8LE, CHUNK, &sets[0]) != 0 ||
        prep_create_set(o.file, lcpl, sets[1].name, n_val, H5T_STD_U8LE, CHUNK, &sets[1]) != 0 ||
        h5io_write_attr_int(o.file, "vocab_size", 256) != 0 ||
        h5io_write_attr_str(o.file, "tokenizer", "bytes") != 0) {
        gt_error("cannot create the datasets in %s", o.tmp);
        goto fail;
    }

    /* Copy: whole chunks at a time, train first, then val. */
    int64_t pos = 0, next_report = total / 10;
    while (pos < total) {
        int which = pos < n_train ? 0 : 1;
        int64_t base = which == 0 ? 0 : n_train;
        int64_t end = which == 0 ? n_train : total;
        int64_t n = end - pos < CHUNK ? end - pos : CHUNK;
        if (prep_fill(&s, buf, n) != 0) goto fail;
        if (prep_write_at(&sets[which], pos - base, n, H5T_NATIVE_UINT8, buf) != 0) {
            gt_error("cannot write %s in %s (disk full?)", sets[which].name, o.tmp);
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
    int bad = prep_close_set(&sets[0]) | prep_close_set(&sets[1]);
    bad |= H5Pclose(lcpl) < 0;
    lcpl = -1;
    if (prep_output_commit(&o, bad, out) != 0) goto fail;
    h5lock_release();
    locked = 0;
    printf("prepared %lld tokens: train %lld, val %lld -> %s\n", (long long)total,
           (long long)n_train, (long long)n_val, out);
    fflush(stdout);
    rc = 0;

fail:
    prep_stream_close(&s);
    prep_close_set(&sets[0]);
    prep_close_set(&sets[1]);
    if (lcpl >= 0) H5Pclose(lcpl);
    prep_output_abandon(&o);
    if (locked) h5lock_release();
    free(sizes);
    free(buf);
    return rc;
}
