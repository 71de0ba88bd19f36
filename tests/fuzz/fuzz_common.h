/* fuzz_common — what the libFuzzer targets share: HDF5's own error printing off (the
 * one-line errors gentrain prints for every rejected input are silenced by running
 * the targets with -close_fd_mask=2, which keeps libFuzzer's own report), the input
 * handed to the readers as an in-memory HDF5 file, and after each input the check
 * that the readers closed every HDF5 object they opened (an identifier left open is
 * no leak to LeakSanitizer, since HDF5 still holds it, but a long run would run out of
 * memory or file handles). */
#ifndef GT_FUZZ_COMMON_H
#define GT_FUZZ_COMMON_H

#include <dirent.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/types.h>
#include <unistd.h>

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

/* The folder of fuzz_folder, and its removal at exit with the files the target wrote
 * into it (libFuzzer ends a run through exit, so runs do not pile folders up under
 * TMPDIR; a crash leaves it, beside the crash's input). */
static char fuzz_folder_path[4096];

static inline void fuzz_folder_remove(void)
{
    DIR *d = opendir(fuzz_folder_path);
    if (d) {
        const struct dirent *e;
        while ((e = readdir(d)))
            if (e->d_name[0] != '.') unlinkat(dirfd(d), e->d_name, 0);
        closedir(d);
    }
    rmdir(fuzz_folder_path);
}

/* A folder of this process under TMPDIR (else /tmp), made at the first call, named
 * NAME.XXXXXX (the smoke test finds what a target leaves by its fuzz_ prefix). */
static inline const char *fuzz_folder(const char *name)
{
    if (fuzz_folder_path[0]) return fuzz_folder_path;
    const char *tmp = getenv("TMPDIR");
    if (!tmp || !*tmp) tmp = "/tmp";
    if ((size_t)snprintf(fuzz_folder_path, sizeof fuzz_folder_path, "%s/%s.XXXXXX", tmp,
                         name) >= sizeof fuzz_folder_path)
        abort();
    if (!mkdtemp(fuzz_folder_path) || atexit(fuzz_folder_remove) != 0) abort();
    return fuzz_folder_path;
}

#endif
