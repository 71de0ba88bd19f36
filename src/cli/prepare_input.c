/* prepare_input — see prepare_input.h. */
#include "prepare_input.h"

#include "prepare.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"
#include "h5util.h"

/* Whether a and b name one file: the same inode where both exist; where neither does
 * yet (two outputs still to be written), the same name in the same folder. */
static int same_file(const char *a, const char *b)
{
    struct stat sa, sb;
    const int ha = stat(a, &sa) == 0, hb = stat(b, &sb) == 0;
    if (ha || hb) return ha && hb && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
    const char *const name[2] = {a, b};
    char *dir[2] = {NULL, NULL};
    const char *base[2];
    for (int k = 0; k < 2; k++) {
        const char *slash = strrchr(name[k], '/');
        base[k] = slash ? slash + 1 : name[k];
        char folder[4096];
        dir[k] = gt_folder_of(name[k], folder, sizeof folder) == 0 ? realpath(folder, NULL)
                                                                   : NULL;
    }
    /* a folder that cannot be resolved: compare the names as given */
    const int same = dir[0] && dir[1]
                         ? strcmp(dir[0], dir[1]) == 0 && strcmp(base[0], base[1]) == 0
                         : strcmp(a, b) == 0;
    free(dir[0]);
    free(dir[1]);
    return same;
}

int prep_check_apart(const char *keep, const char *keep_what, const char *path,
                     const char *what)
{
    /* <path>.tmp is written first and removed on failure: it must not be `keep` either
     * (prepare x.h5.tmp -o x.h5 deleted its own input) */
    const size_t cap = strlen(path) + 5;
    char *tmp = malloc(cap);
    if (!tmp) {
        gt_error("out of memory checking %s", path);
        return -1;
    }
    snprintf(tmp, cap, "%s.tmp", path);
    int rc = 0;
    if (same_file(keep, path)) {
        gt_error("%s %s is the %s %s (or a link to it): it would be overwritten; write to "
                 "another file", what, path, keep_what, keep);
        rc = -1;
    } else if (same_file(keep, tmp)) {
        gt_error("the %s %s is %s, the temporary file of %s %s: it would be overwritten and "
                 "deleted; rename the %s or write to another file", keep_what, keep, tmp,
                 what, path, keep_what);
        rc = -1;
    }
    free(tmp);
    return rc;
}

int prep_check_folder(const char *path, const char *what)
{
    char dir[4096];
    if (gt_folder_of(path, dir, sizeof dir) != 0) {
        gt_error("cannot write %s %s: path too long", what, path);
        return -1;
    }
    struct stat st;
    int rc = 0;
    if (stat(dir, &st) != 0) {
        gt_error("cannot write %s %s: %s", what, path,
                 errno == ENOENT ? "no such folder" : h5io_errno_reason(errno));
        rc = -1;
    } else if (!S_ISDIR(st.st_mode)) {
        gt_error("cannot write %s %s: %s is not a folder", what, path, dir);
        rc = -1;
    }
    return rc;
}

int prep_check_writable(const char *const *inputs, int n_inputs, const char *path,
                        const char *what)
{
    for (int i = 0; i < n_inputs; i++)
        if (prep_check_apart(inputs[i], "input", path, what) != 0) return -1;
    return 0;
}

/* The inputs' checks of prep_check_paths: sizes[i], *total; seen[i] their stat. */
static int prep_check_inputs(const char *const *inputs, int n_inputs, int64_t *sizes,
                             int64_t *total, struct stat *seen)
{
    for (int i = 0; i < n_inputs; i++) {
        /* non-blocking: a named pipe is found out by fstat instead of waited on */
        int fd = open(inputs[i], O_RDONLY | O_NONBLOCK);
        struct stat st;
        if (fd < 0) {
            gt_error("cannot read %s: %s", inputs[i], h5io_errno_reason(errno));
            return -1;
        }
        int ok = fstat(fd, &st) == 0;
        int err = errno;
        /* An HDF5 file (the signature at its start) is a data set or a model given by
         * mistake: prepared as text it made a data set of its bytes, without a word. */
        unsigned char head[8];
        const int hdf5 = ok && S_ISREG(st.st_mode) && pread(fd, head, 8, 0) == 8 &&
                         memcmp(head, "\211HDF\r\n\032\n", 8) == 0;
        close(fd);
        if (hdf5) {
            gt_error("cannot read %s: it is an HDF5 file (a data set or a model?), not text; "
                     "prepare makes a data set from text files", inputs[i]);
            return -1;
        }
        if (!ok) {
            gt_error("cannot read %s: %s", inputs[i], h5io_errno_reason(err));
            return -1;
        }
        if (S_ISDIR(st.st_mode)) {
            gt_error("cannot read %s: it is a folder", inputs[i]);
            return -1;
        }
        if (!S_ISREG(st.st_mode)) {
            gt_error("cannot read %s: it is %s, not a regular file (save the text to a "
                     "file first)", inputs[i],
                     S_ISFIFO(st.st_mode) ? "a named pipe (FIFO)" : "a device or socket");
            return -1;
        }
        for (int j = 0; j < i; j++)
            if (seen[j].st_dev == st.st_dev && seen[j].st_ino == st.st_ino) {
                char a[72], b[72];
                gt_error("inputs %d (%s) and %d (%s) are the same file; give each file once",
                         j + 1, gt_printable(inputs[j], a), i + 1, gt_printable(inputs[i], b));
                return -1;
            }
        seen[i] = st;
        sizes[i] = (int64_t)st.st_size;
        *total += sizes[i];
    }
    return 0;
}

int prep_check_paths(const char *const *inputs, int n_inputs, const char *out, int64_t *sizes,
                     int64_t *total)
{
    *total = 0;
    /* An output that can never be written fails before any work is done; only a
     * regular file is ever replaced, and never one of the inputs (nor a link to one). */
    const char *kind = gt_special_kind(out);
    if (kind) {
        gt_error("cannot write %s: it is %s; gentrain replaces only regular files", out, kind);
        return -1;
    }

    /* Every input must be a readable regular file; their sizes fix the split. Each once:
     * one given twice (a.txt a.txt, or a glob and a name) would make a data set of
     * repeated text, its copies split between training and validation. */
    struct stat *seen = calloc((size_t)(n_inputs > 0 ? n_inputs : 1), sizeof *seen);
    if (!seen) {
        gt_error("out of memory checking %d input files", n_inputs);
        return -1;
    }
    int rc = prep_check_inputs(inputs, n_inputs, sizes, total, seen);
    free(seen);
    return rc != 0 ? -1 : prep_check_writable(inputs, n_inputs, out, "output");
}

int prep_fill(prep_stream *s, unsigned char *buf, int64_t want)
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


void prep_stream_close(prep_stream *s)
{
    if (s->f) fclose(s->f);
    s->f = NULL;
}

static int compress_level; /* 0: none (prepare_set_compress) */

void prepare_set_compress(int level) { compress_level = level < 0 ? 0 : level > 9 ? 9 : level; }

int prep_create_set(hid_t file, hid_t lcpl, const char *name, int64_t n, hid_t file_type,
                    int64_t chunk, prep_set *o)
{
    o->name = name;
    o->dset = o->fspace = -1;
    hsize_t dims = (hsize_t)n, maxdims = H5S_UNLIMITED;
    if (compress_level > 0 && chunk > PREP_COMPRESS_CHUNK) chunk = PREP_COMPRESS_CHUNK;
    if (chunk < 1) chunk = 1;
    hsize_t ch = (hsize_t)(n < 1 || n > chunk ? chunk : n);
    int rc = -1;
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    if (dcpl < 0 || H5Pset_chunk(dcpl, 1, &ch) < 0) goto done;
    if (compress_level > 0 &&
        (H5Pset_shuffle(dcpl) < 0 || H5Pset_deflate(dcpl, (unsigned)compress_level) < 0))
        goto done;
    if ((o->fspace = H5Screate_simple(1, &dims, &maxdims)) < 0) goto done;
    o->dset = H5Dcreate2(file, name, file_type, o->fspace, lcpl, dcpl, H5P_DEFAULT);
    if (o->dset < 0) goto done;
    rc = 0;
done:
    if (dcpl >= 0) H5Pclose(dcpl);
    return rc;
}

int prep_close_set(prep_set *o)
{
    int rc = 0;
    if (o->fspace >= 0 && H5Sclose(o->fspace) < 0) rc = -1;
    if (o->dset >= 0 && H5Dclose(o->dset) < 0) rc = -1;
    o->fspace = o->dset = -1;
    return rc;
}

int prep_write_at(prep_set *o, int64_t off, int64_t n, hid_t mem_type, const void *buf)
{
    hsize_t start = (hsize_t)off, count = (hsize_t)n;
    hid_t mspace = H5Screate_simple(1, &count, NULL);
    int rc = -1;
    if (mspace >= 0 &&
        H5Sselect_hyperslab(o->fspace, H5S_SELECT_SET, &start, NULL, &count, NULL) >= 0 &&
        H5Dwrite(o->dset, mem_type, mspace, o->fspace, H5P_DEFAULT, buf) >= 0)
        rc = 0;
    if (mspace >= 0) H5Sclose(mspace);
    return rc;
}

int prep_append(prep_set *o, int64_t *len, int64_t n, hid_t mem_type, const void *buf)
{
    if (n == 0) return 0;
    hsize_t dims = (hsize_t)(*len + n);
    if (H5Dset_extent(o->dset, &dims) < 0) return -1;
    if (o->fspace >= 0) H5Sclose(o->fspace);
    if ((o->fspace = H5Dget_space(o->dset)) < 0) return -1;
    if (prep_write_at(o, *len, n, mem_type, buf) != 0) return -1;
    *len += n;
    return 0;
}

int prep_output_create(prep_output *o, const char *out)
{
    const size_t cap = strlen(out) + 5;
    char why[160];
    o->file = -1;
    o->made = 0;
    if (!(o->tmp = malloc(cap))) {
        gt_error("out of memory preparing %s", out);
        return -1;
    }
    snprintf(o->tmp, cap, "%s.tmp", out);
    if ((o->file = h5io_create(o->tmp, why, sizeof why)) < 0) {
        gt_error("cannot create %s (for %s): %s", o->tmp, out, why);
        return -1;
    }
    o->made = 1;
    return 0;
}

int prep_output_commit(prep_output *o, int bad, const char *out)
{
    char why[160];
    const hid_t written = o->file;
    o->file = -1; /* closed by h5io_finish whatever happens */
    if (h5io_finish(written, bad, o->tmp, out, why, sizeof why) != 0) {
        gt_error("cannot write %s: %s", out, why);
        return -1; /* the tmp file stays ours: prep_output_abandon deletes it */
    }
    o->made = 0; /* renamed into place */
    return 0;
}

void prep_output_abandon(prep_output *o)
{
    h5io_close_write(o->file);
    if (o->made) unlink(o->tmp);
    free(o->tmp);
    o->tmp = NULL;
    o->file = -1;
    o->made = 0;
}
