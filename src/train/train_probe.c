/* train_probe — see train_probe.h. */
#include "train_probe.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt.h"    /* ckpt_read_meta */
#include "h5set.h"   /* h5set_create, h5set_probe */
#include "inspect.h" /* inspect_file */
#include "config.h"
#include "parallel.h" /* par_launcher_rank */
#include "probe.h"
#include "run_folder.h" /* RUN_FOLDER_CKPTS */
#include "util.h" /* GT_PATH_MAX */

enum { FILE_SECONDS = 300 };

/* What the child is reading now, in memory shared with the parent: after a crash the
 * parent names that file. */
typedef struct {
    char what[32];
    char path[GT_PATH_MAX];
} probe_where;

typedef struct {
    int argc;
    char **argv;
    probe_where *where;
    pid_t parent;
} probe_job;

/* Only regular files: a FIFO would block the child (the run refuses it by name). */
static int starting(probe_where *w, const char *what, const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) return 0;
    snprintf(w->what, sizeof w->what, "%s", what);
    snprintf(w->path, sizeof w->path, "%s", path);
    alarm((unsigned)probe_seconds(FILE_SECONDS)); /* the limit is per file */
    return 1;
}

static void walk(FILE *devnull, const char *path)
{
    if (devnull) (void)inspect_file(path, devnull);
}

/* Every file of the data spec, for the training and the validation dataset. */
static void probe_data(const gt_config *c, probe_where *w, FILE *devnull)
{
    h5set *train = h5set_create(c->data, c->train_dataset, 0, 1);
    if (!train) return;
    h5set *val =
        config_is_none(c->val_dataset) ? NULL : h5set_create(c->data, c->val_dataset, 0, 1);
    for (int i = 0; i < h5set_files(train); i++) {
        if (!starting(w, "data file", h5set_file(train, i))) continue;
        walk(devnull, h5set_file(train, i));
        (void)h5set_probe(train, i);
        if (val && i < h5set_files(val)) (void)h5set_probe(val, i);
    }
    if (val) h5set_close(val);
    h5set_close(train);
}

static void probe_checkpoint(const char *path, probe_where *w, FILE *devnull)
{
    if (!starting(w, "checkpoint", path)) return;
    ckpt_meta meta;
    if (ckpt_read_meta(path, &meta) == 0) ckpt_meta_free(&meta);
    walk(devnull, path);
}

/* resume = auto: every checkpoint the run may try, in <out>/checkpoints */
static void probe_checkpoints(const gt_config *c, probe_where *w, FILE *devnull)
{
    if (config_is_none(c->resume)) return;
    if (strcmp(c->resume, "auto") != 0) {
        probe_checkpoint(c->resume, w, devnull);
        return;
    }
    if (c->out[0] == '\0') return;
    char dir[GT_PATH_MAX + 16], path[2 * GT_PATH_MAX];
    snprintf(dir, sizeof dir, "%s/" RUN_FOLDER_CKPTS, c->out);
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t n = strlen(e->d_name);
        if (strncmp(e->d_name, "ckpt_", 5) != 0 || n < 8 ||
            strcmp(e->d_name + n - 3, ".h5") != 0)
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        probe_checkpoint(path, w, devnull);
    }
    closedir(d);
}

/* The child: quiet, it only has to survive the reading. */
static int probe_inputs(void *arg)
{
    probe_job *j = arg;
    /* In this process (GENTRAIN_PROBE=off, or no fork): nothing to gain, the run reads
     * the files itself, and the redirection below would silence it. */
    if (getpid() == j->parent) return 0;
    int fd = open("/dev/null", O_WRONLY);
    if (fd >= 0) {
        (void)dup2(fd, STDOUT_FILENO);
        (void)dup2(fd, STDERR_FILENO);
        close(fd);
    }
    FILE *devnull = fopen("/dev/null", "w");
    gt_config c;
    config_defaults(&c);
    if (config_parse_args(&c, j->argc, j->argv, 2) == 0 && config_validate(&c) == 0) {
        probe_data(&c, j->where, devnull);
        probe_checkpoints(&c, j->where, devnull);
    }
    if (devnull) fclose(devnull);
    return 0;
}

int train_probe_inputs(int argc, char **argv)
{
    probe_where fallback = {"input file", "(unknown)"};
    probe_where *where = mmap(NULL, sizeof *where, PROT_READ | PROT_WRITE,
                              MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (where == MAP_FAILED) where = &fallback; /* the line then names no file */
    else *where = fallback;
    probe_job job = {argc, argv, where, getpid()};
    const int rc = probe_child(probe_inputs, &job, FILE_SECONDS);
    if (rc < 0) {
        par_launcher_defer_report(); /* rank 0 says it for the job where it fails too */
        probe_report(where->what, where->path, rc, FILE_SECONDS);
    }
    if (where != &fallback) munmap(where, sizeof *where);
    return rc < 0 ? 1 : 0;
}
