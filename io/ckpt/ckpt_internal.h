/* ckpt_internal — what ckpt.c (one checkpoint file: save, read, verify) and ckpt_dir.c
 * (the folder of them, by name) give each other; the rest of gentrain sees ckpt.h. */
#ifndef GT_CKPT_INTERNAL_H
#define GT_CKPT_INTERNAL_H

#include <stddef.h>

#include "ckpt.h"

#define WHY_CAP 6000 /* room for a path of GT_PATH_MAX and the reason */

/* Deletes dir's stale ckpt_*.h5.tmp files (a save that did not finish): how many, 0
 * when dir does not exist, or -1 (reported). */
int ckpt_remove_stale_tmp(const char *dir);

/* Reads and verifies the checkpoint at path, whole (whole = 1: each tensor by the table
 * of its own shape, against the checksum) or its metadata alone (whole = 0), as
 * ckpt_find_latest needs: 0 with meta filled (ckpt_meta_free it), or -1 with why (not
 * naming the file; meta then needs no freeing). Takes the HDF5 lock. */
int ckpt_verify(const char *path, int whole, ckpt_meta *meta, char *why, size_t cap);

#endif
