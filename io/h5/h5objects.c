/* h5objects — see h5util.h: what a file holds and what its datasets refer to: the kind
 * of the object at a path, a bounded walk over its links and a listing of its datasets,
 * the files a virtual or external dataset reads, and how much of a dataset's storage
 * was ever written. */
#include "h5util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "util.h"

H5I_type_t h5io_object_kind(hid_t file, const char *name)
{
    char buf[1024];
    if (snprintf(buf, sizeof buf, "%s", name) >= (int)sizeof buf) return H5I_BADID;
    /* H5Oopen on a path whose middle is missing fails noisily in some versions:
     * check each link on the way first. */
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        htri_t e = H5Lexists(file, buf, H5P_DEFAULT);
        *p = '/';
        if (e <= 0) return H5I_BADID;
    }
    if (strcmp(buf, "/") != 0 && strcmp(buf, ".") != 0) {
        htri_t e = H5Lexists(file, buf, H5P_DEFAULT);
        if (e <= 0) return H5I_BADID;
    }
    hid_t o = H5Oopen(file, buf, H5P_DEFAULT);
    if (o < 0) {
        H5Eclear2(H5E_DEFAULT);
        return H5I_BADID;
    }
    H5I_type_t t = H5Iget_type(o);
    H5Oclose(o);
    return t;
}

/* ---- a bounded walk over the links --------------------------------------------- */

enum { WALK_SEEN_MAX = 4096 };

typedef struct {
    hid_t root;
    H5L_iterate_t fn;
    void *data;
    char path[1024]; /* the group being listed, relative to the root ("" = root) */
    int depth;
    long links;
    long cut; /* links not shown and groups not entered because of the bounds */
    haddr_t seen[WALK_SEEN_MAX]; /* groups entered so far */
    int nseen;
} link_walk;

/* 1 when the group at addr was entered before (else records it); a walk that has
 * seen WALK_SEEN_MAX groups enters no more (2) */
static int seen_before(link_walk *w, haddr_t addr)
{
    for (int i = 0; i < w->nseen; i++)
        if (w->seen[i] == addr) return 1;
    if (w->nseen == WALK_SEEN_MAX) return 2;
    w->seen[w->nseen++] = addr;
    return 0;
}

static herr_t walk_cb(hid_t g, const char *name, const H5L_info_t *info, void *data)
{
    link_walk *w = data;
    if (++w->links > H5IO_WALK_LINKS) { /* the end of a walk this long */
        w->cut++;
        return 1;
    }
    const size_t base = strlen(w->path);
    char full[sizeof w->path];
    int n = snprintf(full, sizeof full, "%s%s%s", w->path, base ? "/" : "", name);
    if (n < 0 || (size_t)n >= sizeof full) { /* a name too long to show */
        w->cut++;
        return 0;
    }
    herr_t r = w->fn(w->root, full, info, w->data);
    if (r != 0 || info->type != H5L_TYPE_HARD) return r;
    H5O_info_t oi;
    if (H5Oget_info_by_name2(g, name, &oi, H5O_INFO_BASIC, H5P_DEFAULT) < 0) {
        H5Eclear2(H5E_DEFAULT);
        return 0; /* not an object we can enter; its link was shown */
    }
    if (oi.type != H5O_TYPE_GROUP) return 0;
    if (w->depth >= H5IO_WALK_DEPTH) { /* a group too deep to enter: counted */
        w->cut++;
        return 0;
    }
    const int seen = seen_before(w, oi.addr);
    if (seen == 2) w->cut++; /* one more group than the walk records: not entered */
    if (seen) return 0;
    hid_t sub = H5Gopen2(g, name, H5P_DEFAULT);
    if (sub < 0) {
        H5Eclear2(H5E_DEFAULT);
        return 0;
    }
    memcpy(w->path, full, (size_t)n + 1);
    w->depth++;
    r = H5Literate(sub, H5_INDEX_NAME, H5_ITER_INC, NULL, walk_cb, w);
    w->depth--;
    w->path[base] = '\0';
    H5Gclose(sub);
    return r;
}

herr_t h5io_walk_links(hid_t file, H5L_iterate_t fn, void *data, long *cut)
{
    link_walk *w = calloc(1, sizeof *w); /* 33 KB of seen groups: not on the stack */
    if (!w) return -1;
    w->root = file;
    w->fn = fn;
    w->data = data;
    H5O_info_t oi;
    if (H5Oget_info2(file, &oi, H5O_INFO_BASIC) >= 0) (void)seen_before(w, oi.addr);
    herr_t r = H5Literate(file, H5_INDEX_NAME, H5_ITER_INC, NULL, walk_cb, w);
    const int long_walk = w->links > H5IO_WALK_LINKS; /* ended by the bound, not by fn */
    if (cut) *cut = w->cut;
    free(w);
    return long_walk ? 0 : r;
}

struct list_ctx {
    hid_t file;
    char *buf;
    size_t cap, len;
    int shown, total, max_list;
};

static herr_t list_cb(hid_t g, const char *name, const H5L_info_t *info, void *data)
{
    (void)g;
    struct list_ctx *c = data;
    if (info->type != H5L_TYPE_HARD) return 0;
    if (h5io_object_kind(c->file, name) != H5I_DATASET) return 0;
    c->total++;
    if (c->shown < c->max_list && c->len < c->cap) {
        int n = snprintf(c->buf + c->len, c->cap - c->len, "%s/%s", c->shown ? ", " : "",
                         name);
        if (n > 0) c->len += (size_t)n;
        if (c->len >= c->cap) c->len = c->cap - 1;
        c->shown++;
    }
    return 0;
}

void h5io_list_datasets(hid_t file, char *buf, size_t cap, int max_list)
{
    struct list_ctx c = {file, buf, cap, 0, 0, 0, max_list};
    if (!cap) return;
    buf[0] = '\0';
    if (h5io_walk_links(file, list_cb, &c, NULL) < 0) H5Eclear2(H5E_DEFAULT);
    if (c.total > c.shown && c.len < cap)
        snprintf(buf + c.len, cap - c.len, ", ... %d more", c.total - c.shown);
}

/* h5io_check_linked_files: see h5util.h. */
int h5io_check_linked_files(hid_t dcpl, const char *path, const char *name, const char *what,
                            char *why, size_t cap)
{
    char src[4096];
    size_t count = 0;
    if (H5Pget_layout(dcpl) == H5D_VIRTUAL && H5Pget_virtual_count(dcpl, &count) >= 0) {
        for (size_t i = 0; i < count; i++) {
            ssize_t n = H5Pget_virtual_filename(dcpl, i, src, sizeof src);
            if (n < 0 || (size_t)n >= sizeof src || strcmp(src, ".") == 0) continue;
            struct stat st;
            int found = stat(src, &st) == 0;
            const char *slash = strrchr(path, '/');
            if (!found && src[0] != '/' && slash) {
                char rel[8192];
                snprintf(rel, sizeof rel, "%.*s/%s", (int)(slash - path), path, src);
                found = stat(rel, &st) == 0;
            }
            if (!found) {
                snprintf(why, cap, "%s:%s is a virtual dataset whose source file %s is "
                         "missing (its %s would read as fill values)", path, name, src, what);
                return -1;
            }
        }
    }
    const int ext = H5Pget_external_count(dcpl);
    for (int i = 0; i < ext; i++) {
        off_t off = 0;
        hsize_t size = 0;
        if (H5Pget_external(dcpl, (unsigned)i, sizeof src, src, &off, &size) < 0) continue;
        src[sizeof src - 1] = '\0';
        struct stat st;
        if (stat(src, &st) != 0) {
            snprintf(why, cap, "%s:%s keeps its %s in the external file %s, which is missing",
                     path, name, what, src);
            return -1;
        }
        if (size != H5F_UNLIMITED && (double)st.st_size < (double)off + (double)size) {
            snprintf(why, cap, "%s:%s keeps %llu bytes of %s at offset %lld of the external "
                     "file %s, which holds only %lld bytes (the rest would read as zeros)",
                     path, name, (unsigned long long)size, what, (long long)off, src,
                     (long long)st.st_size);
            return -1;
        }
    }
    return 0;
}

const char *h5io_unwritten_storage(hid_t dset, hid_t dcpl, hid_t space, int rank,
                                   const hsize_t *dims)
{
    const H5D_layout_t layout = H5Pget_layout(dcpl);
    if (layout != H5D_CHUNKED && layout != H5D_CONTIGUOUS) return NULL;
    H5D_space_status_t status;
    if (H5Dget_space_status(dset, &status) >= 0 && status == H5D_SPACE_STATUS_NOT_ALLOCATED)
        return "none";
    if (layout != H5D_CHUNKED) return NULL;
    hsize_t cdims[H5S_MAX_RANK], have = 0;
    const int cr = H5Pget_chunk(dcpl, H5S_MAX_RANK, cdims);
    if (cr != rank) return NULL;
    double expected = 1.0; /* chunks the shape needs */
    for (int i = 0; i < cr; i++)
        expected *= cdims[i] ? ceil((double)dims[i] / (double)cdims[i]) : 0.0;
    if (H5Dget_num_chunks(dset, space, &have) < 0 || (double)have >= expected) return NULL;
    return have == 0 ? "none" : "only part";
}
