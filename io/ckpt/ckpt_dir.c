/* ckpt_dir — see ckpt.h: a run's folder of checkpoints, by the files' names: the name
 * of a step's file, which steps are there, pruning to the newest, and the newest file
 * that verifies (the reading is ckpt.c's). A name is final only once its file is
 * complete (ckpt_save writes ckpt_<N>.h5.tmp and renames it), so a listing never needs
 * to open a file. */
#include "ckpt.h"
#include "ckpt_internal.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util.h"
#include "h5util.h" /* h5io_errno_reason */

/* Step of a name "ckpt_<digits>.h5" (suffix ".h5.tmp" when tmp): 0 with *step, or -1. */
static int parse_name(const char *name, int tmp, int64_t *step)
{
    if (strncmp(name, "ckpt_", 5) != 0) return -1;
    const char *p = name + 5, *q = p;
    int64_t v = 0;
    for (; *q >= '0' && *q <= '9'; q++) {
        if (v > (INT64_MAX - 9) / 10) return -1;
        v = v * 10 + (*q - '0');
    }
    if (q == p || strcmp(q, tmp ? ".h5.tmp" : ".h5") != 0) return -1;
    *step = v;
    return 0;
}

typedef struct entry {
    int64_t step;
    char *name;
} entry;

static int by_step_desc(const void *a, const void *b)
{
    const entry *x = a, *y = b;
    if (x->step != y->step) return x->step < y->step ? 1 : -1;
    return strcmp(y->name, x->name);
}

static void free_entries(entry *e, size_t n)
{
    for (size_t i = 0; i < n; i++) free(e[i].name);
    free(e);
}

/* The checkpoint files (tmp = 0) or stale temporaries (tmp = 1) of dir, highest step
 * first. Returns 0 (*out may be NULL when none), 1 when dir does not exist, -1
 * (reported). */
static int list_dir(const char *dir, int tmp, entry **out, size_t *count)
{
    *out = NULL;
    *count = 0;
    DIR *d = opendir(dir);
    if (!d) {
        if (errno == ENOENT) return 1;
        gt_error("cannot read checkpoint folder %s: %s", dir, h5io_errno_reason(errno));
        return -1;
    }
    entry *v = NULL;
    size_t n = 0, cap = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        int64_t step;
        if (parse_name(e->d_name, tmp, &step) != 0) continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 16;
            entry *nv = realloc(v, cap * sizeof *v);
            if (!nv) goto oom;
            v = nv;
        }
        if (!(v[n].name = strdup(e->d_name))) goto oom;
        v[n++].step = step;
    }
    closedir(d);
    if (n) qsort(v, n, sizeof *v, by_step_desc);
    *out = v;
    *count = n;
    return 0;
oom:
    closedir(d);
    free_entries(v, n);
    gt_error("out of memory listing %s", dir);
    return -1;
}

static char *join(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *s = malloc(n);
    if (s) snprintf(s, n, "%s%s%s", dir, dir[0] && dir[strlen(dir) - 1] == '/' ? "" : "/",
                    name);
    return s;
}

int ckpt_remove_stale_tmp(const char *dir)
{
    entry *e;
    size_t n;
    int r = list_dir(dir, 1, &e, &n);
    if (r != 0) return r < 0 ? -1 : 0;
    int removed = 0, rc = 0;
    for (size_t i = 0; i < n; i++) {
        char *p = join(dir, e[i].name);
        if (p && unlink(p) == 0) {
            removed++;
        } else if (p && errno != ENOENT) {
            gt_error("cannot delete the unfinished checkpoint %s: %s", p,
                     h5io_errno_reason(errno));
            rc = -1;
        }
        free(p);
    }
    free_entries(e, n);
    return rc ? -1 : removed;
}

int ckpt_path(const char *dir, int64_t step, char *buf, size_t cap)
{
    const char *sep = dir[0] && dir[strlen(dir) - 1] == '/' ? "" : "/";
    int n = snprintf(buf, cap, "%s%sckpt_%08" PRId64 ".h5", dir, sep, step);
    if (n < 0 || (size_t)n >= cap) {
        gt_error("checkpoint path too long in %s", dir);
        return -1;
    }
    return 0;
}

int ckpt_prune(const char *dir, int keep, int64_t upto)
{
    if (keep < 1) keep = 1;
    int removed = ckpt_remove_stale_tmp(dir);
    if (removed < 0) return -1;
    entry *e;
    size_t n;
    int r = list_dir(dir, 0, &e, &n);
    if (r != 0) return r < 0 ? -1 : removed;
    int rc = 0;
    /* names above upto (a damaged checkpoint resume = auto skipped, a folder) are
     * neither counted nor deleted: they would push out the files just written */
    size_t first = 0;
    while (first < n && e[first].step > upto) first++;
    for (size_t i = first + (size_t)keep; i < n; i++) {
        char *p = join(dir, e[i].name);
        if (!p || unlink(p) != 0) {
            gt_error("cannot delete old checkpoint %s/%s: %s", dir, e[i].name,
                     p ? h5io_errno_reason(errno) : "out of memory");
            rc = -1;
        } else {
            removed++;
        }
        free(p);
    }
    free_entries(e, n);
    return rc ? -1 : removed;
}

int64_t ckpt_newest_step(const char *dir)
{
    entry *e;
    size_t n;
    const int r = list_dir(dir, 0, &e, &n);
    if (r != 0) return r < 0 ? -2 : -1;
    const int64_t step = n ? e[0].step : -1; /* highest first */
    free_entries(e, n);
    return step;
}

int ckpt_list_steps(const char *dir, int64_t **steps, size_t *n)
{
    *steps = NULL;
    *n = 0;
    entry *e;
    size_t count;
    const int r = list_dir(dir, 0, &e, &count);
    if (r != 0) return r;
    if (count && !(*steps = malloc(count * sizeof **steps))) {
        free_entries(e, count);
        gt_error("out of memory listing %s", dir);
        return -1;
    }
    for (size_t i = 0; i < count; i++) (*steps)[i] = e[i].step;
    *n = count;
    free_entries(e, count);
    return 0;
}

int ckpt_find_latest(const char *dir, int whole, char *out, size_t cap)
{
    entry *e;
    size_t n;
    int r = list_dir(dir, 0, &e, &n);
    if (r != 0) return r < 0 ? -1 : 0;
    int rc = 0;
    char why[WHY_CAP];
    for (size_t i = 0; i < n && rc == 0; i++) {
        char *p = join(dir, e[i].name);
        if (!p) {
            gt_error("out of memory scanning %s", dir);
            rc = -1;
            break;
        }
        ckpt_meta meta;
        if (ckpt_verify(p, whole, &meta, why, sizeof why) == 0) {
            ckpt_meta_free(&meta);
            if (meta.step != e[i].step) {
                gt_warn("skipping checkpoint %s: it holds step %" PRId64
                        ", not the step of its name",
                        p, meta.step);
            } else if (gt_strlcpy(out, p, cap) != 0) {
                gt_error("checkpoint path too long: %s", p);
                rc = -1;
            } else {
                rc = 1;
            }
        } else {
            gt_warn("skipping checkpoint %s: %s", p, why);
        }
        free(p);
    }
    free_entries(e, n);
    /* checkpoint files, and not one of them usable: not the same as none at all */
    if (rc == 0 && n > 0) rc = 2;
    return rc;
}
