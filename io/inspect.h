/* inspect — prints what an HDF5 file holds: every group and dataset with its shape and
 * type, every attribute with its value (strings and scalars in full, arrays shortened),
 * and for a gentrain model its config, step and parameter count. */
#ifndef GT_INSPECT_H
#define GT_INSPECT_H

#include <stdio.h>

int inspect_file(const char *path, FILE *out);

#endif
