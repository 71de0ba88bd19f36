/* h5util — see h5util.h. */
#include "h5util.h"

#include "file_commit.h"

#include <errno.h>
#include <fcntl.h>
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
