/* fuzz_common — what the libFuzzer targets share: HDF5's own error printing off (the
 * one-line errors gentrain prints for every rejected input are silenced by running
 * the targets with -close_fd_mask=2, which keeps libFuzzer's own report), the input
 * handed to the readers as an in-memory HDF5 file, and after each input the check
 * that the readers closed every HDF5 object they opened (an identifier left open is
 * no leak to LeakSanitizer, since HDF5 still holds it, but a long run would run out of
 * memory or file handles). */
#ifndef GT_FUZZ_COMMON_H
#define GT_FUZZ_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/types.h>

#include <hdf5.h>

#include "h5util.h"

/* Once per process: HDF5 quiet. */
static inline void fuzz_setup(void)
{
    static int done;
    if (done) return;
    done = 1;
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
}

/* After each input: no HDF5 file, group, dataset, datatype or attribute open. */
static inline void fuzz_done(void)
{
    const ssize_t open_ids = H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL);
    if (open_ids != 0) {
        fprintf(stderr, "fuzz: %zd HDF5 objects left open after the input\n", open_ids);
        abort();
    }
}

#endif
