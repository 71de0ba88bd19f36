/* h5util — helpers the io/ files share (not an API for the rest of gentrain):
 *   h5util.c     opening, creating and finishing files; reasons; names of types and
 *                shapes
 *   h5attr.c     attributes, read checked and written
 *   h5objects.c  what a file holds and what its datasets refer to: object kinds, a
 *                bounded walk over the links, linked files, unwritten storage
 *
 * Callers hold h5lock. None of these print: failures fill `why` (a short reason such
 * as "no such file" or "permission denied") so the caller can name the file, dataset
 * or tensor in its own one-line error. */
#ifndef GT_H5UTIL_H
#define GT_H5UTIL_H

#include <stddef.h>
#include <stdint.h>

#include <hdf5.h>

/* Opens an existing file read-only. Returns the file id, or < 0 with why set to
 * "no such file", "permission denied", "it is a folder", "not an HDF5 file",
 * "damaged or truncated HDF5 file", ... */
hid_t h5io_open_read(const char *path, char *why, size_t cap);
/* The same through HDF5's MPI-IO driver on MPI_COMM_SELF (this process alone; reads
 * are independent). Only where HDF5 is parallel (h5io_have_mpi_io) and MPI is
 * initialised; elsewhere it fails with why set. */
hid_t h5io_open_read_mpi(const char *path, char *why, size_t cap);
int h5io_have_mpi_io(void);

/* Creates (truncating) a file for writing. Returns the file id or < 0 with why set. */
hid_t h5io_create(const char *path, char *why, size_t cap);

/* Finishes a file written under a temporary name: flushes and closes `file` (always
 * closed, even on failure), makes tmp durable (fsync), renames it over path and syncs
 * the folder. `failed` != 0 says an earlier write of the caller failed: the file is
 * only closed and the call fails like a failed flush. Returns 0, or -1 with why set
 * (tmp is left for the caller to remove). */
int h5io_finish(hid_t file, int failed, const char *tmp, const char *path, char *why,
                size_t cap);

/* For the fuzz targets (tests/fuzz): from now on every read-only open takes this HDF5
 * file image from memory (HDF5's core driver) whatever the path says; NULL ends it.
 * Nothing else calls it. */
void h5io_set_memory_image(const void *image, size_t len);

/* Closes a file being written, on an error path (the write already failed). */
void h5io_close_write(hid_t file);
/* 1 once closing a written file has failed (a full disk, a file size limit): HDF5 1.10
 * then holds a half-closed file that crashes its own clean-up at exit and at
 * MPI_Finalize, so the process must end without them (main: _exit after the error). */
int h5io_unusable(void);

/* The version of the HDF5 library this process runs ("1.10.10, ..."), the headers' where
 * it differs, and whether it was built parallel (the MPI-IO driver): one line, into
 * buf. */
void h5io_library(char *buf, size_t cap);

/* A short reason for an errno value: "no such file", "permission denied", ... */
const char *h5io_errno_reason(int err);

/* Writes a human name of a datatype into buf: "uint8", "int64", "float32",
 * "string", "compound", ... with " big-endian" appended to numbers that are. */
void h5io_type_name(hid_t type, char *buf, size_t cap);

/* "[2, 3, 4]" (or "[]" for a scalar). */
void h5io_shape_str(int rank, const hsize_t *dims, char *buf, size_t cap);

/* Reads the integer attribute `name` of obj (scalar or one element, any integer
 * type). Returns 1 when read, 0 when the attribute does not exist, -1 (why set) when it
 * exists but is not a single integer. */
int h5io_attr_int(hid_t obj, const char *name, int64_t *out, char *why, size_t cap);

/* Reads the string attribute `name` (fixed or variable length) into a malloc'd
 * string. Returns 1, 0 (absent) or -1 (why set). */
int h5io_attr_str(hid_t obj, const char *name, char **out, char *why, size_t cap);

/* Write a scalar int64 / variable-length UTF-8 string attribute. 0 or -1. */
int h5io_write_attr_int(hid_t obj, const char *name, int64_t v);
int h5io_write_attr_str(hid_t obj, const char *name, const char *s);

/* Visits every link below the root of file, depth first in name order, as
 * H5Lvisit does (fn gets the root group, the link's path relative to it and its
 * info; a non-zero return stops the walk and is returned), but bounded where
 * H5Lvisit is not on a damaged file: a group already visited (a cycle) is not entered
 * again, nesting stops at H5IO_WALK_DEPTH levels and the walk at H5IO_WALK_LINKS
 * links (HDF5 1.10 recursed until the stack overflowed on a group that contained
 * itself). Returns what fn returned to stop, 0 at the end, or -1 when a group cannot
 * be read. *cut (when cut is not NULL) gets how many links and groups the bounds left
 * out (groups deeper than the limit, names too long, the rest of a walk too long), so
 * a listing can say it is incomplete. */
enum { H5IO_WALK_DEPTH = 32, H5IO_WALK_LINKS = 1 << 20 };
herr_t h5io_walk_links(hid_t file, H5L_iterate_t fn, void *data, long *cut);

/* Joins the paths of up to `max_list` datasets of the file into buf as
 * "/a/b, /c" (with ", ... N more" when longer); "" when the file has none. */
void h5io_list_datasets(hid_t file, char *buf, size_t cap, int max_list);

/* Kind of the object at `name` in file: H5I_DATASET, H5I_GROUP, H5I_DATATYPE, or
 * H5I_BADID when nothing (or a dangling link) is there. */
H5I_type_t h5io_object_kind(hid_t file, const char *name);

/* A virtual dataset's source files and an external dataset's files must be there, and
 * an external file as long as the part of it the dataset declares: HDF5 reads a
 * missing source as fill values, and a short external file as zeros past its end.
 * Names resolve as HDF5 resolves them by default: as given (from the working folder),
 * and for virtual sources also from the folder of the file that maps them. `what`
 * names the values ("tokens", "weights"). 0, or -1 with the whole message, naming
 * path:name, in why. */
int h5io_check_linked_files(hid_t dcpl, const char *path, const char *name, const char *what,
                            char *why, size_t cap);

/* How much of a dataset's storage (dset, its creation properties dcpl, its dataspace
 * space of rank dims) was ever written, where HDF5 reads the rest back as the fill
 * value: NULL for all of it (or a layout that keeps it elsewhere: compact, virtual),
 * "none" or "only part". Chunked: every chunk the shape needs must exist (counted, not
 * bytes: compressed chunks are smaller than their data); contiguous: allocated. */
const char *h5io_unwritten_storage(hid_t dset, hid_t dcpl, hid_t space, int rank,
                                   const hsize_t *dims);

#endif
