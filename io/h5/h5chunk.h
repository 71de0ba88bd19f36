/* h5chunk — checks what a chunked dataset's chunk index records about each chunk (its
 * stored size and place in the file) against what the chunk can hold, so that a damaged
 * or hostile index is one error line instead of what HDF5 does with it: a compressed
 * chunk recorded as 4 GiB is read whole into a 4 GiB allocation, one recorded smaller
 * than it is fails to decode with a message that names no chunk.
 *
 * What is believable:
 *  - an unfiltered chunk is stored whole: exactly element size x chunk elements bytes
 *    (edge chunks too);
 *  - a filtered (compressed) chunk takes 1 to raw + raw/64 + 4096 bytes. Deflate's worst
 *    case is zlib's compressBound (raw + raw/4096 + raw/16384 + 13), shuffle keeps the
 *    size, fletcher32 adds 4, a chunk an optional filter failed on is stored raw, and the
 *    common third-party filters stay within it too (lz4 raw/255 + 16, bzip2 1% + 600,
 *    blosc 16-32 bytes of header). With chunks of at most 256 MiB (h5data) no recorded
 *    size can make HDF5 allocate much more than a chunk;
 *  - every chunk lies inside the file: address + size <= the file's size.
 *
 * What HDF5 1.10.8 offers, and at what cost (measured on its default index, a v1
 * B-tree):
 *  - H5Dget_chunk_info (by index) and H5Dget_chunk_info_by_coord give a chunk's address
 *    and recorded size, but each call walks the index from its start: O(n) a call,
 *    O(n^2) for all chunks (4096 chunks 0.1 s, 16384 1.4 s; at 100k chunks 2-3 ms a
 *    call);
 *  - H5Dget_chunk_storage_size is a true lookup (0.2-2 us a chunk) but gives no
 *    address, and for an unfiltered dataset it reports the nominal chunk size, not the
 *    recorded one. HDF5 never uses an unfiltered chunk's recorded size to read it
 *    either (it reads the nominal size at the recorded address), so there a wrong size
 *    is a sign of a damaged index rather than a danger;
 *  - H5Dget_storage_size sums the recorded sizes of all chunks in one pass (0.3 s per
 *    million chunks).
 * Hence h5chunk_check_open's tiers, and a per-read (lazy) check for filtered datasets
 * too large to check at open. A chunk whose address is wrong is not seen before it is
 * read (HDF5 then refuses to read past the end of the file, or decoding fails), and
 * h5chunk_explain_failure names it.
 *
 * Callers hold h5lock. Every failure is reported (gt_error: file, dataset, the chunk by
 * number and element range, the recorded and the expected size). */
#ifndef GT_H5CHUNK_H
#define GT_H5CHUNK_H

#include <stdint.h>

#include <hdf5.h>

/* The most chunks whose records are read whole (address and size) at open: with
 * H5Dget_chunk_info O(n) a call, that is O(n^2): 0.03 s at 2048 chunks. */
#define H5CHUNK_INFO_MAX 2048
/* Default of h5chunk_open_limit: the most chunks of a filtered dataset whose sizes are
 * all looked up at open (0.05 s at 65536; larger datasets are checked as they are
 * read, each rank only the chunks it reads). */
#define H5CHUNK_OPEN_MAX ((uint64_t)1 << 16)

typedef struct {
    const char *path, *name; /* for messages; the caller's strings, not copied */
    int rank;
    hsize_t dims[H5S_MAX_RANK], cdims[H5S_MAX_RANK];
    hsize_t grid[H5S_MAX_RANK]; /* chunks along each dimension */
    uint64_t nchunks;           /* chunks the shape holds: the product of grid */
    uint64_t raw;               /* bytes of a whole chunk, unfiltered */
    uint64_t max_stored;        /* the largest believable recorded size */
    int filtered;
    uint64_t file_size; /* H5Fget_filesize, 0 when unknown (no address checks) */
    int for_reads;      /* h5chunk_check_open's */
    unsigned char *seen; /* lazy checks: a bit per chunk checked; NULL when none due */
} h5chunk;

/* Describes dataset dset of file `file` in c. Returns 1 when it is chunked with elements
 * of a fixed size (c is then set and needs h5chunk_free), 0 when there is nothing to
 * check (another layout, variable-length elements), -1 when HDF5 cannot say (not
 * reported: the caller says what it was doing). */
int h5chunk_init(h5chunk *c, hid_t file, hid_t dset, const char *path, const char *name);

/* The checks made when a dataset is opened, by the number n of chunks it has stored:
 *  - n <= min(H5CHUNK_INFO_MAX, limit): every chunk's record, its size and address;
 *  - else, filtered, with a shape of <= limit chunks: every chunk's size, by lookup;
 *  - else the sum of the recorded sizes: n x raw exactly when unfiltered (an error
 *    there cannot name the chunk: only the O(n)-a-call functions see an unfiltered
 *    chunk's recorded size), at most the file's size when filtered (when larger, the
 *    chunks' sizes are looked up to name the first one wrong); then, filtered and
 *    `for_reads`, each chunk is checked the first time h5chunk_check_region covers it.
 * for_reads: the caller reads the dataset whole (h5data, which has made sure that every
 * chunk was written): a chunk a lookup finds no record of is an error, and the lazy
 * checks are set up. Else (inspect) chunks never written are fine and nothing is left
 * for later. Returns 0, or -1 (reported). */
int h5chunk_check_open(h5chunk *c, hid_t dset, uint64_t limit, int for_reads);

/* Before a read of the block [start, start + count): checks the chunks it touches that
 * are not checked yet (only in the lazy case of h5chunk_check_open; else it returns 0
 * at once). Returns 0, or -1 (reported). */
int h5chunk_check_region(h5chunk *c, hid_t dset, const hsize_t *start,
                         const hsize_t *count);

/* After a failed read of that block: reads one element (of memtype, at most 16 bytes)
 * of each chunk it touches, at most 65536 of them, to find the first chunk that cannot
 * be read or decoded, and reports it with its address and recorded size. Returns 1
 * when one was found (reported), 0 when not (the caller reports the failed read). */
int h5chunk_explain_failure(const h5chunk *c, hid_t dset, hid_t memtype,
                            const hsize_t *start, const hsize_t *count);

void h5chunk_free(h5chunk *c);

/* The `limit` for h5chunk_check_open: $GENTRAIN_CHUNK_CHECK_AT_OPEN when it is a whole
 * number (0 leaves every check to the reads), else H5CHUNK_OPEN_MAX. */
uint64_t h5chunk_open_limit(void);

#endif
