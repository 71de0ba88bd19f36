/* fuzz_common — what the libFuzzer targets share: HDF5's own error printing off (the
 * one-line errors gentrain prints for every rejected input are silenced by running
 * the targets with -close_fd_mask=2, which keeps libFuzzer's own report), and the
 * input handed to the readers as an in-memory HDF5 file. */
#ifndef GT_FUZZ_COMMON_H
#define GT_FUZZ_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include <hdf5.h>

#include "../../io/h5util.h"

/* Once per process: HDF5 quiet. */
static void fuzz_setup(void)
{
    static int done;
    if (done) return;
    done = 1;
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
}

#endif
