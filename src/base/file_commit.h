/* file_commit — writing a file so that a crash or a full disk never leaves a file that
 * looks complete: write <path>.tmp, flush and fsync it, rename it over path (only a
 * regular file is ever replaced), sync the folder. The HDF5 writers (h5util.h) and the
 * plain-file writers (safetensors, config.json) share it. */
#ifndef GT_FILE_COMMIT_H
#define GT_FILE_COMMIT_H

#include <stddef.h>
#include <stdio.h>

/* errno as a short reason ("no space left on the device", "permission denied", ...). */
const char *file_errno_reason(int err);

/* Puts the written tmp in place of path (fsync, rename, folder sync). 0, or -1 with
 * the reason in why (tmp is left for the caller to remove). */
int file_commit(const char *tmp, const char *path, char *why, size_t cap);

/* A plain file written through stdio: file_begin opens <path>.tmp (its name into tmp,
 * cap >= strlen(path) + 5) for writing; file_end checks every write, closes, commits,
 * and on any failure removes the .tmp and reports one line naming `what` and path.
 * NULL / -1 on failure (reported). */
FILE *file_begin(const char *path, const char *what, char *tmp, size_t cap);
int file_end(FILE *f, const char *tmp, const char *path, const char *what);

/* file_end without the commit, for files that are put in place together (file_commit
 * each once all are written): checks every write and closes; the whole tmp stays. On
 * failure removes the .tmp and reports one line. 0 or -1. */
int file_close_tmp(FILE *f, const char *tmp, const char *path, const char *what);

#endif
