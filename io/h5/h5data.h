/* h5data — token datasets in HDF5: open, validate, read windows as int32.
 *
 * Accepted: an integer dataset (unsigned or signed, 1 to 8 bytes: uint8, uint16,
 * int32, int64, ...) of rank 1 (a token stream) or rank 2 ([sequences, length]).
 * Anything else (float, string, compound, rank 0 or >2, empty) is refused with one line
 * naming the file and dataset. The vocabulary size is read from an integer attribute
 * `vocab_size` on the dataset, else on the file's root group (0 when neither has one).
 *
 * Rank 1 is seen as one row of n tokens: rows = 1, row_len = n.
 *
 * The storage must hold what the dataset declares: refused at open are chunks over
 * 256 MiB, storage never written, missing virtual-dataset sources, short external files,
 * and a chunk index that lies about a chunk's stored size or place (h5chunk.h: every
 * record up to 2048 chunks, every size of a compressed dataset up to
 * h5chunk_open_limit() chunks, else the sum of the sizes). A larger compressed dataset
 * has each chunk's size checked the first time a read touches it (a mark per chunk, kept
 * under h5lock, so any thread may read), and a chunk that fails to read or decode is
 * named in the error.
 *
 * All functions report their own errors (file, dataset and, for bad tokens, the index;
 * for a bad chunk, the chunk and its recorded and expected size) and hold h5lock while
 * they call HDF5. Memory use does not depend on the dataset size (but for the lazy
 * checks' marks: a bit per chunk). */
#ifndef GT_H5DATA_H
#define GT_H5DATA_H

#include <stddef.h>
#include <stdint.h>

typedef struct h5data h5data;

/* How reads will look, for the chunk cache of compressed datasets opened from now on:
 * windows of window_tokens tokens, reads_in_flight of them at once (the batches the
 * loader has in flight x their windows). The cache then holds the chunks those reads
 * touch (up to 64 MiB per open dataset), so a chunk is inflated once while it is
 * reused, not once per window. Defaults: 1025 tokens, 64 reads. Call before opening,
 * from one thread. */
void h5data_set_read_hint(int64_t window_tokens, int64_t reads_in_flight);

/* Opens path read-only and the dataset at `dataset` (e.g. "/train/tokens"). */
h5data *h5data_open(const char *path, const char *dataset);
/* The same through parallel HDF5's MPI-IO driver, this process alone (MPI_COMM_SELF:
 * no collective, each rank opens when it likes; reads are independent). Needs
 * h5data_mpi_io_available() and MPI initialised at MPI_THREAD_MULTIPLE when another
 * thread reads (HDF5 calls MPI from the reading thread); fails with a clear error
 * otherwise. A virtual dataset is opened through the default driver instead (parallel
 * HDF5 1.10 cannot read one through MPI-IO); h5data_uses_mpi_io says which. */
h5data *h5data_open_mpi(const char *path, const char *dataset);
int h5data_mpi_io_available(void); /* the HDF5 gentrain was built with is parallel */
int h5data_uses_mpi_io(const h5data *d); /* the open file's driver is MPI-IO */
void h5data_close(h5data *d);

int64_t h5data_rows(const h5data *d);     /* 1 for a 1-D dataset */
int64_t h5data_row_len(const h5data *d);  /* tokens per row */
int h5data_rank(const h5data *d);         /* 1 or 2 */
/* The vocab_size attribute, or 0 when there is none. */
int64_t h5data_vocab_attr(const h5data *d);
/* Name of the stored type, e.g. "uint16", "int64". */
const char *h5data_type_name(const h5data *d);
const char *h5data_path(const h5data *d);
const char *h5data_name(const h5data *d);

/* Streams the whole dataset in bounded blocks and fails, naming file, dataset and the
 * first offending index ([i] or [row, col]), if any token is < 0 or >= vocab_size, or
 * naming the chunk, if a chunk it reads is recorded with a size it cannot have or cannot
 * be read or decoded. */
int h5data_check_range(h5data *d, int64_t vocab_size);
/* The same for part `part` of `parts` near-equal contiguous pieces, so that ranks can
 * share the scan (each reads 1/parts of the dataset); the parts together check it all. */
int h5data_check_range_part(h5data *d, int64_t vocab_size, int part, int parts);
/* The blocks the checks above cut a dataset of that shape into (storage order, at most
 * 2^20 tokens each), and the check of blocks [lo, hi) alone: a set of files shares its
 * check over ranks by these numbers (h5set.h). */
int64_t h5data_check_blocks(int64_t rows, int64_t row_len);
int h5data_check_block_range(h5data *d, int64_t vocab_size, int64_t lo, int64_t hi);

/* Reads `count` consecutive tokens of row `row` starting at column `col` into dst as
 * int32. Tokens are range-checked against vocab_size (if > 0) as they are read, and the
 * chunks read, where their checks were left to the reads, as h5data_check_range does.
 * Any thread may call it (h5lock). */
int h5data_read(h5data *d, int64_t row, int64_t col, int64_t count, int32_t *dst,
                int64_t vocab_size);

/* What this data is, for checkpoints to record and a resume to compare: the file's
 * size, the dataset's shape and type, and a hash of up to 3 x 4096 of its tokens (at
 * the start, the middle and the end), as "bytes=N shape=[R x L] type=T
 * sample=fnv1a64:H". Returns 0, or -1 (reported) when the tokens cannot be read. */
int h5data_fingerprint(h5data *d, char *buf, size_t cap);
/* The sample hash of h5data_fingerprint, and the file's size in bytes when opened (-1
 * when unknown). */
int h5data_sample_hash(h5data *d, uint64_t *hash);
int64_t h5data_file_bytes(const h5data *d);

#endif
