/* h5data — see h5data.h.
 *
 * Tokens are read with H5Dread in the stored type's native twin (no HDF5 conversion
 * work, byte order aside), then range-checked and widened to int32 in one pass. Reads
 * go through a scratch buffer of at most BLOCK elements, so memory never depends on
 * the dataset size. Uncompressed datasets are opened with HDF5's chunk cache off: the
 * loader reads short windows at random offsets, and HDF5 then reads just those bytes
 * instead of whole chunks. What the chunk index records of each chunk is checked at open
 * or, for large compressed datasets, by read_block before a read first touches the chunk
 * (h5chunk.h). */
#include "h5data.h"

#include <math.h>

/* The largest chunk a token dataset may be stored in (HDF5 reads chunks whole). */
#define H5DATA_MAX_CHUNK_BYTES (256 << 20)

#include <errno.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"
#include "h5chunk.h"
#include "h5lock.h"
#include "h5util.h"

#define BLOCK ((int64_t)1 << 20) /* elements per read when streaming */
#define MAX_CACHE ((size_t)64 << 20)

struct h5data {
    hid_t file, dset, fspace, memtype;
    char *path, *name;
    int rank;
    int64_t rows, row_len;
    int64_t vocab; /* attribute, 0 when none */
    size_t esize;  /* bytes per stored element (1..8) */
    int is_signed;
    char type_name[48];
    void *buf; /* scratch, buf_cap elements of esize bytes */
    int64_t buf_cap;
    /* The chunk index's records (chunked datasets): what is left to check as reads
     * first touch each chunk (read_block) */
    h5chunk chunks;
    int have_chunks;
    /* The file as it was opened, to find it changed under the run (h5data_read) */
    int have_stat;
    struct stat st0;
    double last_check; /* gt_now() of the last comparison */
};

/* Whether the file still is the one opened: same inode, size and modification time.
 * A file truncated under a run reads back zeros past its new end (HDF5 fills short
 * reads), one replaced or rewritten gives another file's tokens: either is an error,
 * never silently trained on. Checked at most once a second, so a parallel file
 * system's metadata server sees one stat a second per rank. */
static int file_unchanged(h5data *d)
{
    if (!d->have_stat) return 0;
    const double now = gt_now();
    if (now - d->last_check < 1.0) return 0;
    d->last_check = now;
    struct stat st;
    if (stat(d->path, &st) != 0) {
        gt_error("%s: the data file disappeared while training (%s); stop and restart on "
                 "the file as it is", d->path, strerror(errno));
        return -1;
    }
    if (st.st_ino != d->st0.st_ino || st.st_dev != d->st0.st_dev) {
        gt_error("%s: the data file was replaced while training; stop and restart on the "
                 "file as it is", d->path);
        return -1;
    }
    if (st.st_size != d->st0.st_size || st.st_mtim.tv_sec != d->st0.st_mtim.tv_sec ||
        st.st_mtim.tv_nsec != d->st0.st_mtim.tv_nsec) {
        gt_error("%s: the data file changed while training (%lld bytes when opened, %lld "
                 "now); tokens read from it now could be zeros or other data: stop and "
                 "restart on the file as it is", d->path, (long long)d->st0.st_size,
                 (long long)st.st_size);
        return -1;
    }
    return 0;
}

static hid_t native_int(size_t size, int is_signed)
{
    switch (size) {
    case 1: return is_signed ? H5T_NATIVE_INT8 : H5T_NATIVE_UINT8;
    case 2: return is_signed ? H5T_NATIVE_INT16 : H5T_NATIVE_UINT16;
    case 4: return is_signed ? H5T_NATIVE_INT32 : H5T_NATIVE_UINT32;
    default: return is_signed ? H5T_NATIVE_INT64 : H5T_NATIVE_UINT64;
    }
}

/* Reads the vocab_size attribute of the dataset, else of the root group. */
static int read_vocab(h5data *d)
{
    char why[160];
    int64_t v = 0;
    int rc = h5io_attr_int(d->dset, "vocab_size", &v, why, sizeof why);
    if (rc < 0) {
        gt_error("%s:%s: attribute vocab_size %s", d->path, d->name, why);
        return -1;
    }
    const char *where = "dataset";
    if (rc == 0) {
        where = "root";
        hid_t root = H5Gopen2(d->file, "/", H5P_DEFAULT);
        if (root < 0) {
            gt_error("%s: cannot open the root group", d->path);
            return -1;
        }
        rc = h5io_attr_int(root, "vocab_size", &v, why, sizeof why);
        H5Gclose(root);
        if (rc < 0) {
            gt_error("%s: root attribute vocab_size %s", d->path, why);
            return -1;
        }
    }
    if (rc == 1 && v <= 0) {
        gt_error("%s:%s: %s attribute vocab_size = %lld; it must be positive", d->path,
                 d->name, where, (long long)v);
        return -1;
    }
    d->vocab = rc == 1 ? v : 0;
    return 0;
}

/* What the reader says a read looks like (h5data_set_read_hint). */
static int64_t hint_tokens = 1025, hint_reads = 64;

void h5data_set_read_hint(int64_t window_tokens, int64_t reads_in_flight)
{
    if (window_tokens > 0) hint_tokens = window_tokens;
    if (reads_in_flight > 0) hint_reads = reads_in_flight;
}

/* A prime near 13 x the chunks the cache holds, for its hash table (HDF5 advises
 * about 10 to 100 times, prime). */
static size_t cache_slots(size_t chunks)
{
    size_t n = 13 * chunks + 1;
    if (n < 521) return 521;
    if (n > 1000003) n = 1000003;
    for (;; n++) {
        int prime = n % 2 != 0;
        for (size_t k = 3; prime && k * k <= n; k += 2) prime = n % k != 0;
        if (prime) return n;
    }
}

/* Chunk cache for reading: off for unfiltered data (direct partial reads), else room
 * for the chunks the reads in flight touch: each window spans
 * ceil(window / chunk length) + 1 chunks at most, times the reads of a few batches
 * (h5data_set_read_hint), at least 2 chunks and 1 MiB, at most MAX_CACHE (but 2
 * chunks). A filtered chunk is then inflated once while it stays in the cache,
 * instead of once per window that reads from it. Returns a dataset access property
 * list, or H5P_DEFAULT. */
static hid_t make_dapl(hid_t dset, size_t esize)
{
    hid_t dcpl = H5Dget_create_plist(dset);
    if (dcpl < 0) return H5P_DEFAULT;
    hid_t dapl = H5P_DEFAULT;
    if (H5Pget_layout(dcpl) == H5D_CHUNKED) {
        int nf = H5Pget_nfilters(dcpl);
        hsize_t cd[H5S_MAX_RANK];
        int cr = H5Pget_chunk(dcpl, H5S_MAX_RANK, cd);
        size_t chunk_bytes = esize;
        for (int i = 0; i < cr; i++) chunk_bytes *= (size_t)cd[i];
        size_t nbytes = 0, slots = H5D_CHUNK_CACHE_NSLOTS_DEFAULT;
        if (nf > 0 && cr > 0 && cd[cr - 1] > 0) {
            const double per = ceil((double)hint_tokens / (double)cd[cr - 1]) + 1;
            double want = per * (double)hint_reads * (double)chunk_bytes;
            if (want > (double)MAX_CACHE) want = (double)MAX_CACHE;
            if (want < 2.0 * (double)chunk_bytes) want = 2.0 * (double)chunk_bytes;
            if (want < (double)(1 << 20)) want = (double)(1 << 20);
            nbytes = (size_t)want;
            slots = cache_slots(nbytes / (chunk_bytes ? chunk_bytes : 1));
        }
        if (nf >= 0 && cr > 0) {
            dapl = H5Pcreate(H5P_DATASET_ACCESS);
            if (dapl < 0 || H5Pset_chunk_cache(dapl, slots, nbytes,
                                               H5D_CHUNK_CACHE_W0_DEFAULT) < 0) {
                if (dapl >= 0) H5Pclose(dapl);
                dapl = H5P_DEFAULT;
            }
        }
    }
    H5Pclose(dcpl);
    return dapl;
}

static void free_handles(h5data *d)
{
    if (d->fspace >= 0) H5Sclose(d->fspace);
    if (d->dset >= 0) H5Dclose(d->dset);
    if (d->file >= 0) H5Fclose(d->file);
    d->fspace = d->dset = d->file = -1;
}

static void free_data(h5data *d)
{
    if (d->have_chunks) h5chunk_free(&d->chunks);
    free(d->path);
    free(d->name);
    free(d->buf);
    free(d);
}


/* What the chunk index records of each chunk, its stored size and place (h5chunk.h):
 * at open where that is cheap, else as reads first touch each chunk (read_block). */
static int check_chunk_index(h5data *d)
{
    const int rc = h5chunk_init(&d->chunks, d->file, d->dset, d->path, d->name);
    if (rc < 0)
        gt_error("%s:%s: cannot read the dataset's chunk layout (damaged file?)", d->path,
                 d->name);
    if (rc <= 0) return rc;
    d->have_chunks = 1;
    return h5chunk_check_open(&d->chunks, d->dset, h5chunk_open_limit(), 1);
}

/* What the dataset's storage says about the tokens it declares, checked before any
 * read (the numbers come from the file):
 *  - HDF5 reads a chunk whole, so chunks over H5DATA_MAX_CHUNK_BYTES are refused (a
 *    file claiming gigabyte chunks would make every window read allocate that much);
 *  - storage never written reads back as the fill value: a file declaring tokens it
 *    does not hold would train on zeros, and the range check of 2^40 declared tokens
 *    would read fill values for hours. Chunked: every chunk must exist (compressed
 *    chunks are smaller than their data, so chunks are counted, not bytes);
 *    contiguous: its storage must be allocated. Virtual datasets are left to their
 *    sources. Returns 0, or -1 (reported). */
static int check_storage(h5data *d, const char *path, int rank, const hsize_t *dims,
                         const char *shape)
{
    hid_t dcpl = H5Dget_create_plist(d->dset);
    if (dcpl < 0) return 0;
    char why[8400];
    if (h5io_check_linked_files(dcpl, path, d->name, "tokens", why, sizeof why) != 0) {
        gt_error("%s", why);
        H5Pclose(dcpl);
        return -1;
    }
    const H5D_layout_t layout = H5Pget_layout(dcpl);
    hsize_t cdims[H5S_MAX_RANK];
    const int cr = layout == H5D_CHUNKED ? H5Pget_chunk(dcpl, H5S_MAX_RANK, cdims) : 0;
    if (layout == H5D_CHUNKED) {
        double bytes = (double)d->esize;
        for (int i = 0; i < cr; i++) bytes *= (double)cdims[i];
        if (cr != rank || !(bytes <= (double)H5DATA_MAX_CHUNK_BYTES)) {
            gt_error("%s:%s is stored in chunks of %.0f bytes; gentrain reads chunks of at "
                     "most %d MiB (rewrite it with smaller chunks, e.g. h5repack -l "
                     "CHUNK=1048576)", path, d->name, bytes, H5DATA_MAX_CHUNK_BYTES >> 20);
            H5Pclose(dcpl);
            return -1;
        }
    }
    const char *unwritten = h5io_unwritten_storage(d->dset, dcpl, d->fspace, rank, dims);
    H5Pclose(dcpl);
    if (unwritten) {
        gt_error("%s:%s declares %s tokens but %s of its storage was ever written (it "
                 "would read back as fill values, not tokens)", path, d->name, shape,
                 unwritten);
        return -1;
    }
    return check_chunk_index(d);
}

/* Whether dset is an HDF5 virtual dataset (0 when that cannot be told). */
static int is_virtual(hid_t dset)
{
    hid_t dcpl = H5Dget_create_plist(dset);
    if (dcpl < 0) return 0;
    const int yes = H5Pget_layout(dcpl) == H5D_VIRTUAL;
    H5Pclose(dcpl);
    return yes;
}

/* The error line for a name in the file that is not a dataset (kind: what it is,
 * H5I_BADID for nothing), listing the datasets the file has. */
static void report_not_dataset(const h5data *d, const char *path, H5I_type_t kind)
{
    char list[1024], what[160];
    h5io_list_datasets(d->file, list, sizeof list, 12);
    if (kind == H5I_BADID)
        snprintf(what, sizeof what, "no dataset %s", d->name);
    else
        snprintf(what, sizeof what, "%s is a %s, not a dataset", d->name,
                 kind == H5I_GROUP ? "group" : "named datatype");
    if (list[0])
        gt_error("%s: %s (datasets in the file: %s)", path, what, list);
    else
        gt_error("%s: %s (the file has no datasets)", path, what);
}

/* The dataset's shape into dims (and as text into shape): its rank, 1 or 2, with no
 * dimension 0 and at most 2^62 tokens; -1 (reported) for any other. */
static int read_shape(const h5data *d, const char *path, hsize_t dims[H5S_MAX_RANK],
                      char *shape, size_t cap)
{
    if (H5Sget_simple_extent_type(d->fspace) == H5S_NULL) {
        gt_error("%s:%s holds no data (null dataspace)", path, d->name);
        return -1;
    }
    const int rank = H5Sget_simple_extent_dims(d->fspace, dims, NULL);
    if (rank < 0) {
        gt_error("%s:%s: cannot read the dataset's shape", path, d->name);
        return -1;
    }
    h5io_shape_str(rank, dims, shape, cap);
    if (rank == 0) {
        gt_error("%s:%s is a single value (rank 0); token datasets must be 1-D [tokens] "
                 "or 2-D [sequences, length]", path, d->name);
        return -1;
    }
    if (rank != 1 && rank != 2) {
        gt_error("%s:%s has rank %d (shape %s); token datasets must be 1-D [tokens] or "
                 "2-D [sequences, length]", path, d->name, rank, shape);
        return -1;
    }
    if (dims[0] == 0 || (rank == 2 && dims[1] == 0)) {
        gt_error("%s:%s is empty (shape %s)", path, d->name, shape);
        return -1;
    }
    /* Every count below is an int64 product of the two: a shape past 2^62 tokens is
     * no real file (a damaged or crafted header) and would overflow them. */
    const hsize_t most = (hsize_t)1 << 62;
    if (dims[0] > most || (rank == 2 && (dims[1] > most || dims[0] > most / dims[1]))) {
        gt_error("%s:%s declares shape %s, over 2^62 tokens: the file is damaged", path,
                 d->name, shape);
        return -1;
    }
    return rank;
}

static h5data *open_data(const char *path, const char *dataset, int mpi_io)
{
    h5data *d = calloc(1, sizeof *d);
    if (!d) {
        gt_error("out of memory opening %s", path);
        return NULL;
    }
    d->file = d->dset = d->fspace = -1;
    hid_t type = -1, dapl = H5P_DEFAULT;
    char why[160], tn[48], shape[128];
    size_t nl = strlen(dataset);
    d->path = strdup(path);
    d->name = malloc(nl + 2);
    if (!d->path || !d->name) {
        gt_error("out of memory opening %s", path);
        free_data(d);
        return NULL;
    }
    snprintf(d->name, nl + 2, "%s%s", dataset[0] == '/' ? "" : "/", dataset);

    h5lock_acquire();
    d->file = mpi_io ? h5io_open_read_mpi(path, why, sizeof why)
                     : h5io_open_read(path, why, sizeof why);
    if (d->file < 0) {
        gt_error("cannot open %s: %s", path, why);
        goto fail;
    }
    d->have_stat = stat(path, &d->st0) == 0;
    d->last_check = gt_now();
    H5I_type_t kind = h5io_object_kind(d->file, d->name);
    if (kind != H5I_DATASET) {
        report_not_dataset(d, path, kind);
        goto fail;
    }
    if ((d->dset = H5Dopen2(d->file, d->name, H5P_DEFAULT)) < 0 ||
        (type = H5Dget_type(d->dset)) < 0 || (d->fspace = H5Dget_space(d->dset)) < 0) {
        gt_error("%s:%s: cannot open the dataset (damaged file?)", path, d->name);
        goto fail;
    }
    /* Parallel HDF5 1.10 cannot read a virtual dataset through MPI-IO (every read
     * fails): such a dataset is read through the default driver instead, which
     * h5data_uses_mpi_io then reports. */
    if (mpi_io && is_virtual(d->dset)) {
        H5Tclose(type);
        free_handles(d);
        h5lock_release();
        free_data(d);
        return open_data(path, dataset, 0);
    }
    h5io_type_name(type, tn, sizeof tn);
    size_t esize = H5Tget_size(type);
    if (H5Tget_class(type) != H5T_INTEGER || esize < 1 || esize > 8) {
        gt_error("%s:%s has type %s; token datasets must be integers (uint8, uint16, "
                 "int32, int64)", path, d->name, tn);
        goto fail;
    }
    d->esize = esize <= 1 ? 1 : esize <= 2 ? 2 : esize <= 4 ? 4 : 8;
    d->is_signed = H5Tget_sign(type) != H5T_SGN_NONE;
    d->memtype = native_int(d->esize, d->is_signed);
    snprintf(d->type_name, sizeof d->type_name, "%s", tn);

    hsize_t dims[H5S_MAX_RANK];
    const int rank = read_shape(d, path, dims, shape, sizeof shape);
    if (rank < 0 || check_storage(d, path, rank, dims, shape) != 0) goto fail;
    d->rank = rank;
    d->rows = rank == 1 ? 1 : (int64_t)dims[0];
    d->row_len = rank == 1 ? (int64_t)dims[0] : (int64_t)dims[1];
    if (read_vocab(d) != 0) goto fail;

    /* Reopen with a chunk cache suited to window reads (see the top of the file). The
     * first handle must be closed first: a second open of a dataset that is still open
     * shares its cache and ignores the new settings. */
    dapl = make_dapl(d->dset, d->esize);
    if (dapl != H5P_DEFAULT) {
        H5Dclose(d->dset);
        d->dset = H5Dopen2(d->file, d->name, dapl);
        H5Pclose(dapl);
        if (d->dset < 0) {
            gt_error("%s:%s: cannot open the dataset (damaged file?)", path, d->name);
            goto fail;
        }
    }
    H5Tclose(type);
    h5lock_release();
    return d;

fail:
    if (type >= 0) H5Tclose(type);
    free_handles(d);
    h5lock_release();
    free_data(d);
    return NULL;
}

void h5data_close(h5data *d)
{
    if (!d) return;
    h5lock_acquire();
    free_handles(d);
    h5lock_release();
    free_data(d);
}

int64_t h5data_rows(const h5data *d) { return d ? d->rows : 0; }
int64_t h5data_row_len(const h5data *d) { return d ? d->row_len : 0; }
int h5data_rank(const h5data *d) { return d ? d->rank : 0; }
int64_t h5data_vocab_attr(const h5data *d) { return d ? d->vocab : 0; }
const char *h5data_type_name(const h5data *d) { return d ? d->type_name : ""; }
const char *h5data_path(const h5data *d) { return d ? d->path : ""; }
const char *h5data_name(const h5data *d) { return d ? d->name : ""; }

/* Scratch for n elements. */
static void *scratch(h5data *d, int64_t n)
{
    if (n > d->buf_cap) {
        free(d->buf);
        d->buf = gt_malloc((size_t)n * d->esize, "token read buffer");
        d->buf_cap = d->buf ? n : 0;
    }
    return d->buf;
}

static void report_failed_read(const h5data *d, int64_t row, int64_t col, int64_t nrows,
                               int64_t ncols)
{
    if (d->rank == 1)
        gt_error("%s:%s: cannot read tokens [%lld..%lld) (damaged file?)", d->path, d->name,
                 (long long)col, (long long)(col + ncols));
    else
        gt_error("%s:%s: cannot read tokens [%lld..%lld, %lld..%lld) (damaged file?)",
                 d->path, d->name, (long long)row, (long long)(row + nrows), (long long)col,
                 (long long)(col + ncols));
}

/* Reads the block [row, row+nrows) x [col, col+ncols) (rank 1: row 0, nrows 1) into
 * buf in the native twin of the stored type. */
static int read_block(h5data *d, int64_t row, int64_t col, int64_t nrows, int64_t ncols,
                      void *buf)
{
    hsize_t start[2], count[2], n = (hsize_t)nrows * (hsize_t)ncols;
    if (d->rank == 1) {
        start[0] = (hsize_t)col;
        count[0] = (hsize_t)ncols;
    } else {
        start[0] = (hsize_t)row;
        start[1] = (hsize_t)col;
        count[0] = (hsize_t)nrows;
        count[1] = (hsize_t)ncols;
    }
    if (d->have_chunks && h5chunk_check_region(&d->chunks, d->dset, start, count) != 0)
        return -1;
    hid_t mspace = -1;
    int rc = -1;
    if (H5Sselect_hyperslab(d->fspace, H5S_SELECT_SET, start, NULL, count, NULL) < 0 ||
        (mspace = H5Screate_simple(1, &n, NULL)) < 0 ||
        H5Dread(d->dset, d->memtype, mspace, d->fspace, H5P_DEFAULT, buf) < 0) {
        /* a chunk that cannot be read or decoded is named, else the block */
        if (!d->have_chunks ||
            !h5chunk_explain_failure(&d->chunks, d->dset, d->memtype, start, count))
            report_failed_read(d, row, col, nrows, ncols);
    } else {
        rc = 0;
    }
    if (mspace >= 0) H5Sclose(mspace);
    return rc;
}

/* Checks n values of buf (native twin of the stored type) against [0, hi) and, when
 * dst is given, stores them as int32 (dst may alias buf for int32 data). Returns the
 * index of the first bad value (its text in val) or -1. */
#define SCAN(T, BAD)                                                                   \
    do {                                                                               \
        const T *s = (const T *)buf;                                                   \
        for (int64_t i = 0; i < n; i++) {                                              \
            T v = s[i];                                                                \
            if (BAD) {                                                                 \
                bad = i;                                                               \
                break;                                                                 \
            }                                                                          \
            if (dst) dst[i] = (int32_t)v;                                              \
        }                                                                              \
        if (bad >= 0) {                                                                \
            if (d->is_signed)                                                          \
                snprintf(val, valcap, "%lld", (long long)s[bad]);                      \
            else                                                                       \
                snprintf(val, valcap, "%llu", (unsigned long long)s[bad]);             \
        }                                                                              \
    } while (0)

static int64_t scan(const h5data *d, const void *buf, int64_t n, int64_t hi, int32_t *dst,
                    char *val, size_t valcap)
{
    int64_t bad = -1;
    const uint64_t uhi = (uint64_t)hi;
    if (d->is_signed) {
        switch (d->esize) {
        case 1: SCAN(int8_t, v < 0 || (int64_t)v >= hi); break;
        case 2: SCAN(int16_t, v < 0 || (int64_t)v >= hi); break;
        case 4: SCAN(int32_t, v < 0 || (int64_t)v >= hi); break;
        default: SCAN(int64_t, v < 0 || v >= hi); break;
        }
    } else {
        switch (d->esize) {
        case 1: SCAN(uint8_t, (uint64_t)v >= uhi); break;
        case 2: SCAN(uint16_t, (uint64_t)v >= uhi); break;
        case 4: SCAN(uint32_t, (uint64_t)v >= uhi); break;
        default: SCAN(uint64_t, v >= uhi); break;
        }
    }
    return bad;
}

/* Reports the bad token at flat position i of the block starting at (row, col) that is
 * ncols wide. */
static void report_bad(const h5data *d, int64_t row, int64_t col, int64_t ncols, int64_t i,
                       const char *val, int64_t vocab)
{
    char where[64];
    if (d->rank == 1)
        snprintf(where, sizeof where, "[%lld]", (long long)(col + i));
    else
        snprintf(where, sizeof where, "[%lld, %lld]", (long long)(row + i / ncols),
                 (long long)(col + i % ncols));
    if (val[0] == '-')
        gt_error("%s:%s%s = %s is negative; tokens must be >= 0", d->path, d->name, where,
                 val);
    else if (vocab > 0)
        gt_error("%s:%s%s = %s is >= vocab_size %lld", d->path, d->name, where, val,
                 (long long)vocab);
    else
        gt_error("%s:%s%s = %s is too large for a token id (at most 2147483647)", d->path,
                 d->name, where, val);
}

/* Reads, checks and (dst != NULL) converts the block; reports the first bad token. */
static int do_block(h5data *d, int64_t row, int64_t col, int64_t nrows, int64_t ncols,
                    int32_t *dst, int64_t vocab)
{
    int64_t n = nrows * ncols;
    void *buf = (dst && d->esize == 4 && d->is_signed) ? (void *)dst : scratch(d, n);
    if (!buf) return -1;
    if (read_block(d, row, col, nrows, ncols, buf) != 0) return -1;
    const int64_t hi = vocab > 0 ? vocab : (int64_t)INT32_MAX + 1;
    char val[32] = "";
    int64_t bad = scan(d, buf, n, hi, dst, val, sizeof val);
    if (bad >= 0) {
        report_bad(d, row, col, ncols, bad, val, vocab);
        return -1;
    }
    return 0;
}

h5data *h5data_open(const char *path, const char *dataset)
{
    return open_data(path, dataset, 0);
}

h5data *h5data_open_mpi(const char *path, const char *dataset)
{
    return open_data(path, dataset, 1);
}

int h5data_mpi_io_available(void) { return h5io_have_mpi_io(); }

int h5data_uses_mpi_io(const h5data *d)
{
    /* Asks HDF5 which driver the open file really has, rather than trusting the
     * request. */
    int yes = 0;
#ifdef H5_HAVE_PARALLEL
    h5lock_acquire();
    hid_t fapl = H5Fget_access_plist(d->file);
    if (fapl >= 0) {
        yes = H5Pget_driver(fapl) == H5FD_MPIO;
        H5Pclose(fapl);
    }
    h5lock_release();
#else
    (void)d;
#endif
    return yes;
}

/* The dataset is cut into blocks of at most BLOCK elements, numbered in storage order:
 * whole rows at a time when a row fits (rank 1 has one row; it takes the other branch
 * when longer than a block), else pieces of one row. */
int64_t h5data_check_blocks(int64_t rows, int64_t row_len)
{
    if (rows < 1 || row_len < 1) return 0;
    const int64_t per = row_len <= BLOCK ? BLOCK / row_len : 0;
    const int64_t pieces = per ? 0 : (row_len + BLOCK - 1) / BLOCK;
    return per ? (rows + per - 1) / per : rows * pieces;
}

int h5data_check_block_range(h5data *d, int64_t vocab_size, int64_t lo, int64_t hi)
{
    const int64_t per = d->row_len <= BLOCK ? BLOCK / d->row_len : 0;
    const int64_t pieces = per ? 0 : (d->row_len + BLOCK - 1) / BLOCK;
    int rc = 0;
    h5lock_acquire();
    for (int64_t b = lo; b < hi && rc == 0; b++) {
        if (per) {
            const int64_t r = b * per, nr = d->rows - r < per ? d->rows - r : per;
            rc = do_block(d, r, 0, nr, d->row_len, NULL, vocab_size);
        } else {
            const int64_t r = b / pieces, c = b % pieces * BLOCK;
            const int64_t nc = d->row_len - c < BLOCK ? d->row_len - c : BLOCK;
            rc = do_block(d, r, c, 1, nc, NULL, vocab_size);
        }
    }
    h5lock_release();
    return rc;
}

int h5data_check_range_part(h5data *d, int64_t vocab_size, int part, int parts)
{
    if (parts < 1 || part < 0 || part >= parts) {
        gt_error("%s:%s: range check part %d of %d is invalid", d->path, d->name, part,
                 parts);
        return -1;
    }
    /* This part checks the blocks [lo, hi) of a contiguous, near-equal split. */
    const int64_t blocks = h5data_check_blocks(d->rows, d->row_len);
    const int64_t base = blocks / parts, extra = blocks % parts;
    const int64_t lo = base * part + (part < extra ? part : extra);
    const int64_t hi = lo + base + (part < extra ? 1 : 0);
    return h5data_check_block_range(d, vocab_size, lo, hi);
}

int h5data_check_range(h5data *d, int64_t vocab_size)
{
    return h5data_check_range_part(d, vocab_size, 0, 1);
}

int h5data_read(h5data *d, int64_t row, int64_t col, int64_t count, int32_t *dst,
                int64_t vocab_size)
{
    if (row < 0 || row >= d->rows || col < 0 || count < 0 || col > d->row_len ||
        count > d->row_len - col) {
        gt_error("%s:%s: read of row %lld, columns [%lld..%lld) is outside the dataset "
                 "(%lld rows of %lld tokens)", d->path, d->name, (long long)row,
                 (long long)col, (long long)(col + count), (long long)d->rows,
                 (long long)d->row_len);
        return -1;
    }
    if (file_unchanged(d) != 0) return -1;
    int rc = 0;
    h5lock_acquire();
    for (int64_t c = 0; c < count && rc == 0; c += BLOCK) {
        int64_t nc = count - c < BLOCK ? count - c : BLOCK;
        rc = do_block(d, row, col + c, 1, nc, dst + c, vocab_size);
    }
    h5lock_release();
    return rc;
}

int h5data_sample_hash(h5data *d, uint64_t *hash)
{
    enum { SAMPLE = 4096 };
    int32_t *tok = malloc(SAMPLE * sizeof *tok);
    if (!tok) {
        gt_error("out of memory hashing %s", d->path);
        return -1;
    }
    uint64_t h = GT_FNV_OFFSET;
    const int64_t total = d->rows * d->row_len;
    const int64_t n = total < SAMPLE ? total : SAMPLE;
    const int64_t starts[3] = {0, (total - n) / 2, total - n};
    for (int k = 0; k < 3; k++) {
        /* a flat range may cross rows of a 2-D dataset: read it row by row */
        for (int64_t at = starts[k], left = n; left > 0;) {
            const int64_t row = at / d->row_len, col = at % d->row_len;
            const int64_t m = left < d->row_len - col ? left : d->row_len - col;
            if (h5data_read(d, row, col, m, tok, 0) != 0) {
                free(tok);
                return -1;
            }
            h = gt_fnv1a(h, tok, (size_t)m * sizeof *tok);
            at += m;
            left -= m;
        }
    }
    free(tok);
    *hash = h;
    return 0;
}

int64_t h5data_file_bytes(const h5data *d) { return d->have_stat ? (int64_t)d->st0.st_size : -1; }

int h5data_fingerprint(h5data *d, char *buf, size_t cap)
{
    uint64_t h;
    if (h5data_sample_hash(d, &h) != 0) return -1;
    snprintf(buf, cap, "bytes=%lld shape=[%lld x %lld] type=%s sample=fnv1a64:%016llx",
             (long long)h5data_file_bytes(d), (long long)d->rows, (long long)d->row_len,
             d->type_name, (unsigned long long)h);
    return 0;
}
