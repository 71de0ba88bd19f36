/* h5chunk — see h5chunk.h. */
#include "h5chunk.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

#define EXPLAIN_MAX_READS 65536 /* chunks h5chunk_explain_failure tries at most */
/* The most chunks looked up to name the one whose size is wrong when the sum of the
 * sizes is (a few seconds, on a file already found damaged) */
#define NAME_SCAN_MAX ((uint64_t)1 << 23)

typedef unsigned long long ull;

/* a * b, saturating at UINT64_MAX */
static uint64_t mul_sat(uint64_t a, uint64_t b)
{
    return a && b > UINT64_MAX / a ? UINT64_MAX : a * b;
}

static void damaged(const h5chunk *c, const char *what)
{
    gt_error("%s:%s: cannot read %s (damaged file?)", c->path, c->name, what);
}

/* "chunk 3 of 49 ([12288..16384))": its number in row-major order and the elements it
 * holds, for the chunk whose first element is at `off`. */
static void chunk_label(const h5chunk *c, const hsize_t *off, char *buf, size_t cap)
{
    uint64_t idx = 0;
    for (int i = 0; i < c->rank; i++) idx = idx * c->grid[i] + off[i] / c->cdims[i];
    int n = snprintf(buf, cap, "chunk %llu of %llu ([", (ull)idx, (ull)c->nchunks);
    for (int i = 0; i < c->rank && n > 0 && (size_t)n < cap; i++) {
        const hsize_t end = c->dims[i] - off[i] > c->cdims[i] ? off[i] + c->cdims[i]
                                                              : c->dims[i];
        n += snprintf(buf + n, cap - (size_t)n, "%s%llu..%llu", i ? ", " : "", (ull)off[i],
                      (ull)end);
    }
    if (n > 0 && (size_t)n < cap) snprintf(buf + n, cap - (size_t)n, "))");
}

/* What a chunk's size must be, as words for a message. */
static void expected_size(const h5chunk *c, char *buf, size_t cap)
{
    if (c->filtered)
        snprintf(buf, cap, "1 to %llu (a compressed chunk of %llu bytes takes no more)",
                 (ull)c->max_stored, (ull)c->raw);
    else
        snprintf(buf, cap, "exactly %llu (unfiltered chunks are stored whole)", (ull)c->raw);
}

/* The chunk at `off` recorded as `size` bytes. */
static int check_size(const h5chunk *c, const hsize_t *off, uint64_t size)
{
    const int ok = c->filtered ? size >= 1 && size <= c->max_stored : size == c->raw;
    if (ok) return 0;
    char label[1024], want[128];
    chunk_label(c, off, label, sizeof label);
    expected_size(c, want, sizeof want);
    gt_error("%s:%s: the chunk index records %llu bytes for %s; expected %s: the file is "
             "damaged", c->path, c->name, (ull)size, label, want);
    return -1;
}

/* The chunk at `off` stored at address `addr` in `size` bytes lies inside the file. */
static int check_place(const h5chunk *c, const hsize_t *off, haddr_t addr, uint64_t size)
{
    if (!c->file_size || addr == HADDR_UNDEF ||
        (addr <= c->file_size && size <= c->file_size - addr))
        return 0;
    char label[1024];
    chunk_label(c, off, label, sizeof label);
    gt_error("%s:%s: the chunk index places %s at bytes [%llu..%llu) of a file of %llu "
             "bytes: the file is damaged or truncated", c->path, c->name, label, (ull)addr,
             (ull)addr + (ull)size, (ull)c->file_size);
    return -1;
}

/* Steps the chunk coordinates co through the box [lo, hi] (inclusive) in row-major
 * order. Returns 0 once past the end. */
static int next_coord(int rank, hsize_t *co, const hsize_t *lo, const hsize_t *hi)
{
    for (int i = rank - 1; i >= 0; i--) {
        if (co[i] < hi[i]) {
            co[i]++;
            return 1;
        }
        co[i] = lo[i];
    }
    return 0;
}

/* The chunk box [lo, hi] the elements [start, start + count) touch; 0 when empty. */
static int chunk_box(const h5chunk *c, const hsize_t *start, const hsize_t *count,
                     hsize_t *lo, hsize_t *hi)
{
    for (int i = 0; i < c->rank; i++) {
        if (count[i] == 0) return 0;
        lo[i] = start[i] / c->cdims[i];
        hi[i] = (start[i] + count[i] - 1) / c->cdims[i];
    }
    return 1;
}

int h5chunk_init(h5chunk *c, hid_t file, hid_t dset, const char *path, const char *name)
{
    memset(c, 0, sizeof *c);
    c->path = path;
    c->name = name;
    hid_t dcpl = H5Dget_create_plist(dset), type = H5Dget_type(dset);
    hid_t space = H5Dget_space(dset);
    int rc = -1;
    if (dcpl < 0 || type < 0 || space < 0) goto done;
    const int vstr = H5Tget_class(type) == H5T_STRING ? H5Tis_variable_str(type) : 0;
    if (H5Pget_layout(dcpl) != H5D_CHUNKED || vstr != 0 ||
        H5Tdetect_class(type, H5T_VLEN) != 0) {
        rc = 0;
        goto done;
    }
    const int nf = H5Pget_nfilters(dcpl);
    c->rank = H5Pget_chunk(dcpl, H5S_MAX_RANK, c->cdims);
    const size_t tsize = H5Tget_size(type);
    if (nf < 0 || c->rank < 1 || tsize == 0 ||
        H5Sget_simple_extent_dims(space, c->dims, NULL) != c->rank)
        goto done;
    c->filtered = nf > 0;
    c->raw = tsize;
    c->nchunks = 1;
    for (int i = 0; i < c->rank; i++) {
        if (c->cdims[i] == 0) goto done;
        c->raw = mul_sat(c->raw, c->cdims[i]);
        c->grid[i] = c->dims[i] / c->cdims[i] + (c->dims[i] % c->cdims[i] != 0);
        c->nchunks = mul_sat(c->nchunks, c->grid[i]);
    }
    c->max_stored = c->raw;
    if (c->filtered && c->raw <= UINT64_MAX / 2)
        c->max_stored = c->raw + c->raw / 64 + 4096;
    hsize_t fs = 0;
    c->file_size = H5Fget_filesize(file, &fs) >= 0 ? fs : 0;
    rc = 1;
done:
    if (rc < 0) H5Eclear2(H5E_DEFAULT);
    if (space >= 0) H5Sclose(space);
    if (type >= 0) H5Tclose(type);
    if (dcpl >= 0) H5Pclose(dcpl);
    return rc;
}

/* Every one of the n chunk records: size and place. O(n^2) in HDF5 1.10 (see the
 * header). */
static int check_records(const h5chunk *c, hid_t dset, hsize_t n)
{
    hid_t space = H5Dget_space(dset);
    if (space < 0) {
        damaged(c, "the dataset's shape");
        return -1;
    }
    int rc = 0;
    for (hsize_t i = 0; i < n && rc == 0; i++) {
        hsize_t off[H5S_MAX_RANK], size = 0;
        unsigned mask = 0;
        haddr_t addr = HADDR_UNDEF;
        if (H5Dget_chunk_info(dset, space, i, off, &mask, &addr, &size) < 0) {
            char what[64];
            snprintf(what, sizeof what, "record %llu of its chunk index", (ull)i);
            damaged(c, what);
            rc = -1;
        } else if (check_size(c, off, size) != 0 ||
                   check_place(c, off, addr, size) != 0) {
            rc = -1;
        }
    }
    H5Sclose(space);
    H5Eclear2(H5E_DEFAULT);
    return rc;
}

/* The recorded size of the chunk at coordinates co (in chunks) by lookup, checked. A
 * chunk the index has no record of (HDF5 1.10.8 fails the lookup, or says 0 bytes) is
 * an error when the dataset is to be read whole, else it was never written. */
static int lookup_size(const h5chunk *c, hid_t dset, const hsize_t *co)
{
    hsize_t off[H5S_MAX_RANK], size = 0;
    for (int i = 0; i < c->rank; i++) off[i] = co[i] * c->cdims[i];
    const int found = H5Dget_chunk_storage_size(dset, off, &size) >= 0 && size > 0;
    H5Eclear2(H5E_DEFAULT);
    if (found) return check_size(c, off, size);
    if (!c->for_reads) return 0;
    char label[1024];
    chunk_label(c, off, label, sizeof label);
    gt_error("%s:%s: the chunk index has no usable record of %s (it would read as fill "
             "values, or not at all): the file is damaged", c->path, c->name, label);
    return -1;
}

/* Every chunk of the shape, by lookup. */
static int scan_sizes(const h5chunk *c, hid_t dset)
{
    hsize_t lo[H5S_MAX_RANK] = {0}, hi[H5S_MAX_RANK], co[H5S_MAX_RANK] = {0};
    for (int i = 0; i < c->rank; i++) {
        if (c->grid[i] == 0) return 0;
        hi[i] = c->grid[i] - 1;
    }
    do {
        if (lookup_size(c, dset, co) != 0) return -1;
    } while (next_coord(c->rank, co, lo, hi));
    return 0;
}

/* The sum of the n recorded sizes (one pass of the index). */
static int check_total(const h5chunk *c, hid_t dset, hsize_t n)
{
    const uint64_t total = H5Dget_storage_size(dset);
    char want[160];
    if (!c->filtered) {
        const uint64_t need = mul_sat(n, c->raw);
        if (total == need) return 0;
        snprintf(want, sizeof want, "%llu (%llu chunks of %llu bytes, stored whole)",
                 (ull)need, (ull)n, (ull)c->raw);
    } else {
        if (!c->file_size || total <= c->file_size) return 0;
        if (c->nchunks <= NAME_SCAN_MAX && scan_sizes(c, dset) != 0) return -1;
        snprintf(want, sizeof want, "at most the file's %llu", (ull)c->file_size);
    }
    gt_error("%s:%s: the chunk index records %llu bytes for its %llu chunks; expected %s: "
             "a chunk's recorded size is damaged", c->path, c->name, (ull)total, (ull)n,
             want);
    return -1;
}

int h5chunk_check_open(h5chunk *c, hid_t dset, uint64_t limit, int for_reads)
{
    c->for_reads = for_reads;
    hid_t space = H5Dget_space(dset);
    hsize_t n = 0;
    herr_t got = space < 0 ? -1 : H5Dget_num_chunks(dset, space, &n);
    if (space >= 0) H5Sclose(space);
    if (got < 0) {
        damaged(c, "its chunk index");
        H5Eclear2(H5E_DEFAULT);
        return -1;
    }
    if (n == 0) return 0;
    if (n <= H5CHUNK_INFO_MAX && n <= limit) return check_records(c, dset, n);
    if (c->filtered && c->nchunks <= limit) return scan_sizes(c, dset);
    if (check_total(c, dset, n) != 0) return -1;
    if (!c->filtered || !for_reads) return 0;
    const uint64_t bytes = c->nchunks / 8 + 1;
    if (bytes > SIZE_MAX) {
        gt_error("%s:%s: too many chunks (%llu) to keep track of", c->path, c->name,
                 (ull)c->nchunks);
        return -1;
    }
    if (!(c->seen = gt_malloc((size_t)bytes, "the chunks' check marks"))) return -1;
    memset(c->seen, 0, (size_t)bytes);
    return 0;
}

int h5chunk_check_region(h5chunk *c, hid_t dset, const hsize_t *start,
                         const hsize_t *count)
{
    hsize_t lo[H5S_MAX_RANK], hi[H5S_MAX_RANK], co[H5S_MAX_RANK];
    if (!c->seen || !chunk_box(c, start, count, lo, hi)) return 0;
    memcpy(co, lo, sizeof co);
    do {
        uint64_t idx = 0;
        for (int i = 0; i < c->rank; i++) idx = idx * c->grid[i] + co[i];
        if (idx >= c->nchunks) continue; /* outside the shape: HDF5 refuses the read */
        const unsigned char bit = (unsigned char)(1u << (idx % 8));
        if (c->seen[idx / 8] & bit) continue;
        if (lookup_size(c, dset, co) != 0) return -1;
        c->seen[idx / 8] |= bit;
    } while (next_coord(c->rank, co, lo, hi));
    return 0;
}

/* Reads the first element of the chunk at `off`. 0 when it reads. */
static int read_one(hid_t dset, hid_t memtype, int rank, const hsize_t *off)
{
    hsize_t one[H5S_MAX_RANK], n1 = 1;
    for (int i = 0; i < rank; i++) one[i] = 1;
    unsigned char buf[16];
    hid_t fs = H5Dget_space(dset), ms = H5Screate_simple(1, &n1, NULL);
    int rc = -1;
    if (fs >= 0 && ms >= 0 &&
        H5Sselect_hyperslab(fs, H5S_SELECT_SET, off, NULL, one, NULL) >= 0 &&
        H5Dread(dset, memtype, ms, fs, H5P_DEFAULT, buf) >= 0)
        rc = 0;
    if (ms >= 0) H5Sclose(ms);
    if (fs >= 0) H5Sclose(fs);
    H5Eclear2(H5E_DEFAULT);
    return rc;
}

int h5chunk_explain_failure(const h5chunk *c, hid_t dset, hid_t memtype,
                            const hsize_t *start, const hsize_t *count)
{
    hsize_t lo[H5S_MAX_RANK], hi[H5S_MAX_RANK], co[H5S_MAX_RANK], off[H5S_MAX_RANK];
    if (H5Tget_size(memtype) > 16 || !chunk_box(c, start, count, lo, hi)) return 0;
    memcpy(co, lo, sizeof co);
    int reads = 0;
    do {
        for (int i = 0; i < c->rank; i++) off[i] = co[i] * c->cdims[i];
        if (read_one(dset, memtype, c->rank, off) == 0) continue;
        hsize_t size = 0;
        haddr_t addr = HADDR_UNDEF;
        unsigned mask = 0;
        char label[1024], where[112] = "";
        chunk_label(c, off, label, sizeof label);
        if (H5Dget_chunk_info_by_coord(dset, off, &mask, &addr, &size) >= 0 &&
            addr != HADDR_UNDEF)
            snprintf(where, sizeof where, " (the chunk index records %llu bytes at byte %llu "
                     "of the file)", (ull)size, (ull)addr);
        H5Eclear2(H5E_DEFAULT);
        gt_error("%s:%s: %s cannot be read%s%s: the chunk or the chunk index is damaged",
                 c->path, c->name, label, c->filtered ? " or decoded" : "", where);
        return 1;
    } while (++reads < EXPLAIN_MAX_READS && next_coord(c->rank, co, lo, hi));
    return 0;
}

void h5chunk_free(h5chunk *c)
{
    free(c->seen);
    c->seen = NULL;
}

uint64_t h5chunk_open_limit(void)
{
    const char *s = getenv("GENTRAIN_CHUNK_CHECK_AT_OPEN");
    char *end = NULL;
    if (!s || !*s) return H5CHUNK_OPEN_MAX;
    unsigned long long v = strtoull(s, &end, 10);
    return *end || s[0] == '-' ? H5CHUNK_OPEN_MAX : (uint64_t)v;
}
