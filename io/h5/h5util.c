/* h5util — see h5util.h. */
#include "h5util.h"

#include "file_commit.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h" /* defines: gt_special_kind */

/* ---- reasons ---------------------------------------------------------------------- */

static void set_why(char *why, size_t cap, const char *s)
{
    if (why && cap) snprintf(why, cap, "%s", s);
}

const char *h5io_errno_reason(int err) { return file_errno_reason(err); }

/* ---- files ------------------------------------------------------------------------ */

/* File access properties: HDF5's default driver, with file locks that are skipped
 * (instead of failing the open) on file systems that do not support them, as some
 * parallel file systems are mounted. Returns H5P_DEFAULT where HDF5 is too old. */
static hid_t make_fapl(void)
{
#if H5_VERSION_GE(1, 12, 1) || (H5_VERS_MAJOR == 1 && H5_VERS_MINOR == 10 && H5_VERS_RELEASE >= 7)
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    if (fapl >= 0 && H5Pset_file_locking(fapl, 1, 1) < 0) {
        H5Pclose(fapl);
        fapl = H5P_DEFAULT;
    }
    return fapl < 0 ? H5P_DEFAULT : fapl;
#else
    return H5P_DEFAULT;
#endif
}

static void free_fapl(hid_t fapl)
{
    if (fapl != H5P_DEFAULT) H5Pclose(fapl);
}

int h5io_have_mpi_io(void)
{
#ifdef H5_HAVE_PARALLEL
    return 1;
#else
    return 0;
#endif
}

void h5io_library(char *buf, size_t cap)
{
    unsigned major = 0, minor = 0, release = 0;
    if (H5get_libversion(&major, &minor, &release) < 0) {
        snprintf(buf, cap, "version unknown");
        return;
    }
    const int same = major == H5_VERS_MAJOR && minor == H5_VERS_MINOR &&
                     release == H5_VERS_RELEASE;
    char built[64] = "";
    if (!same)
        snprintf(built, sizeof built, " (built against %d.%d.%d)", H5_VERS_MAJOR,
                 H5_VERS_MINOR, H5_VERS_RELEASE);
    snprintf(buf, cap, "%u.%u.%u%s, parallel (MPI-IO driver): %s", major, minor,
             release, built, h5io_have_mpi_io() ? "yes" : "no");
}

/* The MPI-IO driver over this process alone, or -1 (why set). */
static hid_t make_mpi_fapl(char *why, size_t cap)
{
#ifdef H5_HAVE_PARALLEL
    int initialised = 0;
    if (MPI_Initialized(&initialised) != MPI_SUCCESS || !initialised) {
        set_why(why, cap, "MPI-IO reads need MPI (start the run with mpirun or srun)");
        return -1;
    }
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    if (fapl < 0 || H5Pset_fapl_mpio(fapl, MPI_COMM_SELF, MPI_INFO_NULL) < 0) {
        if (fapl >= 0) H5Pclose(fapl);
        set_why(why, cap, "cannot set up HDF5's MPI-IO driver");
        return -1;
    }
    return fapl;
#else
    set_why(why, cap, "this HDF5 is not parallel: it has no MPI-IO driver");
    return -1;
#endif
}

struct stack_scan {
    int lock;      /* some message mentions file locking */
    int truncated; /* some message mentions truncation */
};

static herr_t scan_error(unsigned n, const H5E_error2_t *e, void *data)
{
    (void)n;
    struct stack_scan *s = data;
    if (e->desc) {
        if (strstr(e->desc, "unable to lock")) s->lock = 1;
        if (strstr(e->desc, "truncated")) s->truncated = 1;
    }
    return 0;
}

/* Whether the HDF5 signature is at 0, 512, 1024, 2048, ... (a user block may precede
 * the superblock). */
static int has_signature(int fd, off_t size)
{
    static const unsigned char sig[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
    for (off_t off = 0; off + 8 <= size; off = off ? off * 2 : 512) {
        unsigned char buf[8];
        if (pread(fd, buf, 8, off) != 8) return 0;
        if (memcmp(buf, sig, 8) == 0) return 1;
    }
    return 0;
}

/* The fuzz targets' way in (h5io_set_memory_image): reads open this image. */
static const void *mem_image;
static size_t mem_image_len;

void h5io_set_memory_image(const void *image, size_t len)
{
    mem_image = image;
    mem_image_len = len;
}

/* An open of the memory image through the core driver (no file is touched). */
static hid_t open_image(const char *path, char *why, size_t cap)
{
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS), f = -1;
    H5Eclear2(H5E_DEFAULT);
    if (fapl >= 0 && H5Pset_fapl_core(fapl, 65536, 0) >= 0 &&
        H5Pset_file_image(fapl, (void *)mem_image, mem_image_len) >= 0)
        f = H5Fopen(path, H5F_ACC_RDONLY, fapl);
    if (fapl >= 0) H5Pclose(fapl);
    if (f < 0) {
        H5Eclear2(H5E_DEFAULT);
        set_why(why, cap, "damaged or truncated HDF5 file");
    }
    return f;
}

static hid_t open_read(const char *path, int mpi_io, char *why, size_t cap)
{
    if (mem_image) return open_image(path, why, cap);
    /* non-blocking, so a named pipe is found out instead of waited on */
    int fd = open(path, O_RDONLY | O_NONBLOCK);
    if (fd < 0) {
        set_why(why, cap, h5io_errno_reason(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        set_why(why, cap, h5io_errno_reason(errno));
        close(fd);
        return -1;
    }
    if (S_ISDIR(st.st_mode)) {
        set_why(why, cap, "it is a folder");
        close(fd);
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        set_why(why, cap, S_ISFIFO(st.st_mode) ? "it is a named pipe (FIFO), not a regular file"
                          : "it is a device or socket, not a regular file");
        close(fd);
        return -1;
    }
    H5Eclear2(H5E_DEFAULT);
    hid_t fapl = mpi_io ? make_mpi_fapl(why, cap) : make_fapl();
    if (mpi_io && fapl < 0) {
        close(fd);
        return -1;
    }
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, fapl);
    free_fapl(fapl);
    if (f < 0) {
        struct stack_scan s = {0, 0};
        H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, scan_error, &s);
        H5Eclear2(H5E_DEFAULT);
        if (st.st_size == 0)
            set_why(why, cap, "empty file, not HDF5");
        else if (!has_signature(fd, st.st_size))
            set_why(why, cap, "not an HDF5 file");
        else if (s.truncated)
            set_why(why, cap, "truncated HDF5 file");
        else if (s.lock)
            set_why(why, cap, "locked by a process writing it (HDF5_USE_FILE_LOCKING=FALSE "
                              "reads it anyway)");
        else
            set_why(why, cap, "damaged or truncated HDF5 file");
    }
    close(fd);
    return f;
}

hid_t h5io_open_read(const char *path, char *why, size_t cap)
{
    return open_read(path, 0, why, cap);
}

hid_t h5io_open_read_mpi(const char *path, char *why, size_t cap)
{
    return open_read(path, 1, why, cap);
}

hid_t h5io_create(const char *path, char *why, size_t cap)
{
    /* Create it ourselves first: errno gives a reason HDF5 does not. */
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0666);
    if (fd < 0) {
        set_why(why, cap, errno == ENOENT ? "no such folder" : h5io_errno_reason(errno));
        return -1;
    }
    close(fd);
    hid_t fapl = make_fapl();
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    free_fapl(fapl);
    if (f < 0) set_why(why, cap, "HDF5 could not create it");
    return f;
}

static int unusable;

int h5io_unusable(void) { return unusable; }

void h5io_close_write(hid_t file)
{
    if (file >= 0 && H5Fclose(file) < 0) unusable = 1;
}

int h5io_finish(hid_t file, int failed, const char *tmp, const char *path, char *why,
                size_t cap)
{
    int bad = failed || H5Fflush(file, H5F_SCOPE_GLOBAL) < 0;
    if (H5Fclose(file) < 0) {
        unusable = 1;
        bad = 1;
    }
    if (bad) {
        set_why(why, cap, "writing it failed (disk full?)");
        return -1;
    }
    return file_commit(tmp, path, why, cap);
}

/* ---- types and shapes ------------------------------------------------------------ */

void h5io_type_name(hid_t type, char *buf, size_t cap)
{
    H5T_class_t c = H5Tget_class(type);
    size_t sz = H5Tget_size(type);
    const char *end = (H5Tget_order(type) == H5T_ORDER_BE) ? " big-endian" : "";
    switch (c) {
    case H5T_INTEGER:
        snprintf(buf, cap, "%sint%zu%s", H5Tget_sign(type) == H5T_SGN_NONE ? "u" : "",
                 8 * sz, end);
        break;
    case H5T_FLOAT:
        snprintf(buf, cap, "float%zu%s", 8 * sz, end);
        break;
    case H5T_STRING:
        if (H5Tis_variable_str(type) > 0)
            snprintf(buf, cap, "string");
        else
            snprintf(buf, cap, "string[%zu]", sz);
        break;
    case H5T_COMPOUND:
        snprintf(buf, cap, "compound (%d fields)", H5Tget_nmembers(type));
        break;
    case H5T_ENUM: {
        hid_t super = H5Tget_super(type);
        char sb[48] = "?";
        if (super >= 0) {
            h5io_type_name(super, sb, sizeof sb);
            H5Tclose(super);
        }
        snprintf(buf, cap, "enum of %s", sb);
        break;
    }
    case H5T_ARRAY: snprintf(buf, cap, "array"); break;
    case H5T_VLEN: snprintf(buf, cap, "variable-length sequence"); break;
    case H5T_BITFIELD: snprintf(buf, cap, "bitfield%zu", 8 * sz); break;
    case H5T_OPAQUE: snprintf(buf, cap, "opaque (%zu bytes)", sz); break;
    case H5T_REFERENCE: snprintf(buf, cap, "reference"); break;
    case H5T_TIME: snprintf(buf, cap, "time"); break;
    default: snprintf(buf, cap, "unknown type"); break;
    }
}

void h5io_shape_str(int rank, const hsize_t *dims, char *buf, size_t cap)
{
    size_t n = 0;
    n += (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < rank && n < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, "%s%llu", i ? ", " : "",
                              (unsigned long long)dims[i]);
    if (n < cap) snprintf(buf + n, cap - n, "]");
}

/* ---- attributes ------------------------------------------------------------------ */

/* Opens attribute name of obj with its type and element count. 1, 0 (absent), -1. */
static int attr_open(hid_t obj, const char *name, hid_t *attr, hid_t *type,
                     hssize_t *npoints, char *why, size_t cap)
{
    *attr = *type = -1;
    htri_t e = H5Aexists(obj, name);
    if (e < 0) {
        set_why(why, cap, "cannot read the attributes");
        return -1;
    }
    if (e == 0) return 0;
    hid_t space = -1;
    if ((*attr = H5Aopen(obj, name, H5P_DEFAULT)) < 0 ||
        (*type = H5Aget_type(*attr)) < 0 || (space = H5Aget_space(*attr)) < 0) {
        set_why(why, cap, "cannot read the attribute");
        goto fail;
    }
    *npoints = H5Sget_simple_extent_npoints(space);
    H5Sclose(space);
    return 1;
fail:
    if (space >= 0) H5Sclose(space);
    if (*type >= 0) H5Tclose(*type);
    if (*attr >= 0) H5Aclose(*attr);
    *attr = *type = -1;
    return -1;
}

int h5io_attr_int(hid_t obj, const char *name, int64_t *out, char *why, size_t cap)
{
    hid_t attr, type;
    hssize_t np = 0;
    int rc = attr_open(obj, name, &attr, &type, &np, why, cap);
    if (rc <= 0) return rc;
    rc = -1;
    char tn[64];
    if (H5Tget_class(type) != H5T_INTEGER) {
        h5io_type_name(type, tn, sizeof tn);
        snprintf(why, cap, "has type %s; it must be an integer", tn);
        goto done;
    }
    if (np != 1) {
        snprintf(why, cap, "holds %lld values; it must hold one integer", (long long)np);
        goto done;
    }
    if (H5Tget_sign(type) == H5T_SGN_NONE && H5Tget_size(type) >= 8) {
        uint64_t u = 0;
        if (H5Aread(attr, H5T_NATIVE_UINT64, &u) < 0) {
            set_why(why, cap, "cannot read the attribute");
            goto done;
        }
        if (u > (uint64_t)INT64_MAX) {
            snprintf(why, cap, "is %llu, too large", (unsigned long long)u);
            goto done;
        }
        *out = (int64_t)u;
    } else {
        int64_t v = 0;
        if (H5Aread(attr, H5T_NATIVE_INT64, &v) < 0) {
            set_why(why, cap, "cannot read the attribute");
            goto done;
        }
        *out = v;
    }
    rc = 1;
done:
    H5Tclose(type);
    H5Aclose(attr);
    return rc;
}

int h5io_attr_str(hid_t obj, const char *name, char **out, char *why, size_t cap)
{
    hid_t attr, type, mem = -1;
    hssize_t np = 0;
    *out = NULL;
    int rc = attr_open(obj, name, &attr, &type, &np, why, cap);
    if (rc <= 0) return rc;
    rc = -1;
    char tn[64];
    if (H5Tget_class(type) != H5T_STRING) {
        h5io_type_name(type, tn, sizeof tn);
        snprintf(why, cap, "has type %s; it must be a string", tn);
        goto done;
    }
    if (np != 1) {
        snprintf(why, cap, "holds %lld values; it must hold one string", (long long)np);
        goto done;
    }
    if ((mem = H5Tcopy(H5T_C_S1)) < 0) goto read_fail;
    if (H5Tis_variable_str(type) > 0) {
        char *s = NULL;
        if (H5Tset_size(mem, H5T_VARIABLE) < 0 || H5Tset_cset(mem, H5Tget_cset(type)) < 0 ||
            H5Aread(attr, mem, &s) < 0)
            goto read_fail;
        *out = strdup(s ? s : "");
        if (s) H5free_memory(s);
    } else {
        size_t n = H5Tget_size(type);
        char *s = malloc(n + 1);
        if (!s) goto read_fail;
        if (H5Tset_size(mem, n + 1) < 0 || H5Tset_strpad(mem, H5T_STR_NULLTERM) < 0 ||
            H5Tset_cset(mem, H5Tget_cset(type)) < 0 || H5Aread(attr, mem, s) < 0) {
            free(s);
            goto read_fail;
        }
        s[n] = '\0';
        *out = s;
    }
    if (!*out) goto read_fail;
    rc = 1;
    goto done;
read_fail:
    set_why(why, cap, "cannot read the attribute");
done:
    if (mem >= 0) H5Tclose(mem);
    H5Tclose(type);
    H5Aclose(attr);
    return rc;
}

/* Creates attribute name (replacing one of that name) and writes one value. */
static int write_attr(hid_t obj, const char *name, hid_t file_type, hid_t mem_type,
                      const void *value)
{
    int rc = -1;
    hid_t space = -1, attr = -1;
    htri_t e = H5Aexists(obj, name);
    if (e < 0 || (e > 0 && H5Adelete(obj, name) < 0)) return -1;
    if ((space = H5Screate(H5S_SCALAR)) < 0) goto done;
    if ((attr = H5Acreate2(obj, name, file_type, space, H5P_DEFAULT, H5P_DEFAULT)) < 0)
        goto done;
    if (H5Awrite(attr, mem_type, value) < 0) goto done;
    rc = 0;
done:
    if (attr >= 0 && H5Aclose(attr) < 0) rc = -1;
    if (space >= 0) H5Sclose(space);
    return rc;
}

int h5io_write_attr_int(hid_t obj, const char *name, int64_t v)
{
    return write_attr(obj, name, H5T_STD_I64LE, H5T_NATIVE_INT64, &v);
}

int h5io_write_attr_str(hid_t obj, const char *name, const char *s)
{
    hid_t t = H5Tcopy(H5T_C_S1);
    if (t < 0) return -1;
    int rc = -1;
    if (H5Tset_size(t, H5T_VARIABLE) >= 0 && H5Tset_cset(t, H5T_CSET_UTF8) >= 0)
        rc = write_attr(obj, name, t, t, &s);
    H5Tclose(t);
    return rc;
}

/* ---- objects ---------------------------------------------------------------------- */

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
