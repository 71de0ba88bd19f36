/* inspect — prints what an HDF5 file holds: every group and dataset with its shape and
 * type, every attribute with its value (strings and scalars in full, arrays shortened),
 * and for a gentrain model its config, step and parameter count. */
#ifndef GT_INSPECT_H
#define GT_INSPECT_H

#include <stdio.h>

/* Lists the file on out. A chunked dataset whose chunk index lies about a chunk (its
 * stored size or place, as far as h5chunk_check_open sees without reading data) gets
 * an error line naming it; the listing goes on. Returns 0, or -1 when the file cannot be
 * listed or a dataset was found damaged (reported). */
int inspect_file(const char *path, FILE *out);

#endif
