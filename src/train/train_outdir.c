/* train_outdir — the run folder (rank 0): the lock that keeps a second run out of it,
 * the check that a fresh run replaces no earlier result, and the JSON Lines log (appended
 * to on resume, emptied for a fresh run only once it is set up). What goes into the
 * folder is train_files.c's. */
#define GT_TRAIN_MODULE /* may include train_run.h */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "run_folder.h"
#include "train_run.h"
#include "util.h"

/* STDOUT_FILENO or STDERR_FILENO when that stream is the file st describes, else -1. */
static int own_stream_fd(const struct stat *st)
{
    const int fds[2] = {STDOUT_FILENO, STDERR_FILENO};
    for (int i = 0; i < 2; i++) {
        struct stat own;
        if (fstat(fds[i], &own) == 0 && own.st_dev == st->st_dev && own.st_ino == st->st_ino)
            return fds[i];
    }
    return -1;
}

/* The JSON Lines log: a regular file is created or appended to, or (fresh) kept as it
 * is with *to_empty = 1 for train_start_log to empty once the run starts; a terminal,
 * /dev/stdout or another character device is written as it is; a named pipe only when
 * a reader is there already (a plain open would wait for one forever); a folder or a
 * socket is refused. Reports and returns NULL on failure. */
static FILE *open_log(const char *path, int append, int *to_empty)
{
    *to_empty = 0;
    struct stat st;
    const int exists = stat(path, &st) == 0;
    if (exists && (S_ISDIR(st.st_mode) || S_ISSOCK(st.st_mode) || S_ISBLK(st.st_mode))) {
        gt_error("log file %s is %s, not a file to write JSON lines to", path,
                 S_ISDIR(st.st_mode) ? "a folder" : S_ISSOCK(st.st_mode) ? "a socket"
                                                                      : "a block device");
        return NULL;
    }
    /* A regular file that is not a JSON Lines log (the data file, the config, a model,
     * given as log by mistake) would be truncated or appended to: refused, intact. Our
     * own standard output or error (--log /dev/stdout into a job's file) is fine. */
    const int own_fd = exists ? own_stream_fd(&st) : -1;
    const int is_own = own_fd >= 0;
    if (exists && S_ISREG(st.st_mode) && st.st_size > 0 && !is_own) {
        unsigned char first = 0;
        const int rfd = open(path, O_RDONLY | O_CLOEXEC);
        const ssize_t got = rfd >= 0 ? read(rfd, &first, 1) : -1;
        if (rfd >= 0) close(rfd);
        if (got == 1 && first != '{') {
            gt_error("log file %s exists and is not a JSON Lines log (it does not start "
                     "with '{'): it would be overwritten; give another log path or remove it",
                     path);
            return NULL;
        }
    }
    const int special = exists && !S_ISREG(st.st_mode);
    int flags = O_WRONLY | O_CLOEXEC |
                (special ? O_APPEND | O_NONBLOCK : O_CREAT | (append ? O_APPEND : 0));
    /* The job's own output file (--log /dev/stdout into a file): written through the
     * same open file, so the lines of both land one after the other, none over another
     * and nothing emptied. */
    int fd = is_own && !special ? fcntl(own_fd, F_DUPFD_CLOEXEC, 0) : open(path, flags, 0666);
    if (is_own && !special) append = 1;
    if (fd < 0) {
        if (errno == ENXIO && special && S_ISFIFO(st.st_mode))
            gt_error("log file %s is a named pipe (FIFO) with no reader; start the reader "
                     "first", path);
        else
            gt_error("cannot open log file %s for writing: %s", path, strerror(errno));
        return NULL;
    }
    if (special) { /* writes block again, as to any pipe */
        int fl = fcntl(fd, F_GETFL);
        if (fl >= 0) (void)fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    }
    FILE *f = fdopen(fd, append || special ? "a" : "w"); /* "w" does not truncate an fd */
    if (!f) {
        gt_error("cannot open log file %s for writing: %s", path, strerror(errno));
        close(fd);
        return NULL;
    }
    *to_empty = !append && !special;
    return f;
}

/* A fresh run's log is emptied only now that the run is set up, so that one refused for
 * its data, its config or its checkpoint leaves the earlier run's log whole. */
int train_start_log(run *r)
{
    if (!r->log || !r->log_to_empty) return 0;
    r->log_to_empty = 0;
    if (fflush(r->log) != 0 || ftruncate(fileno(r->log), 0) != 0 ||
        fseek(r->log, 0, SEEK_SET) != 0) {
        gt_error("cannot empty the log file %s for this run: %s", r->c->log, strerror(errno));
        return -1;
    }
    return 0;
}

/* Whether the run folder holds a model.h5 (said) that a fresh run would replace at its
 * end: an earlier run's result, which the checkpoint check does not cover where that
 * run kept no checkpoints (or they were moved away). */
static int earlier_model(const gt_config *c)
{
    char path[TRAIN_MODEL_PATH_CAP];
    train_model_path(c->out, path);
    struct stat st;
    if (lstat(path, &st) != 0) return 0;
    gt_error("output folder %s holds model.h5 from an earlier run, which this fresh run%s "
             "would replace: give another out, move model.h5 away, or set overwrite = yes",
             c->out, strcmp(c->resume, "auto") ? "" : " (resume = auto found no checkpoint)");
    return 1;
}

/* Rank 0 only: the output folder, the checkpoint folder (when the run can checkpoint)
 * and the log file; a resumed run appends to the log, a fresh one replaces it once it
 * starts (train_start_log). */
int train_check_output_paths(run *r)
{
    const gt_config *c = r->c;
    if (!par_is_root()) return 0;
    if (!config_is_none(c->out)) {
        if (gt_mkdirs(c->out) != 0) return -1;
        if (access(c->out, W_OK) != 0) {
            gt_error("output folder %s is not writable", c->out);
            return -1;
        }
        if (!r->from && c->overwrite == OVERWRITE_NO && earlier_model(c)) return -1;
    }
    if (r->can_ckpt) {
        char longest[CKPT_PATH_CAP]; /* a step of 8 digits or the run's last */
        if (gt_mkdirs(r->ckpt_dir) != 0 ||
            ckpt_path(r->ckpt_dir, c->steps > 99999999 ? c->steps : 99999999, longest,
                      sizeof longest) != 0)
            return -1;
    }
    if (c->log[0]) {
        char dir[GT_PATH_MAX];
        memcpy(dir, c->log, sizeof dir);
        char *slash = strrchr(dir, '/');
        if (slash && slash != dir) {
            *slash = '\0';
            if (gt_mkdirs(dir) != 0) return -1;
        }
        if (!(r->log = open_log(c->log, r->from != NULL, &r->log_to_empty))) return -1;
    }
    return 0;
}

/* Two runs writing one run folder at once (a job array given one out, a job submitted
 * twice) would interleave their checkpoints, prune each other's and truncate each
 * other's log. So rank 0 holds a POSIX write lock on <out>/.gentrain.lock (run_folder.h)
 * for the whole run: the system drops it when the process ends, so a killed run leaves
 * no stale lock, and fcntl locks reach across nodes on NFS (lockd) and Lustre (mounted
 * with flock). Where the file system has no locks, one warning and the run goes on.
 * Before anything reads or writes the folder: 0, or -1 (reported). */
int train_lock_out(run *r)
{
    const gt_config *c = r->c;
    r->out_lock = -1;
    if (!par_is_root() || config_is_none(c->out)) return 0;
    char path[GT_PATH_MAX + 32];
    if (snprintf(path, sizeof path, "%s/" RUN_FOLDER_LOCK, c->out) >= (int)sizeof path) {
        gt_error("output folder path too long: %.64s...", c->out);
        return -1;
    }
    if (gt_mkdirs(c->out) != 0) return -1;
    const int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (fd < 0) {
        gt_error("cannot open the run folder's lock file %s: %s", path, strerror(errno));
        return -1;
    }
    struct flock lk;
    memset(&lk, 0, sizeof lk);
    lk.l_type = F_WRLCK;
    lk.l_whence = SEEK_SET; /* the whole file */
    if (fcntl(fd, F_SETLK, &lk) != 0) {
        const int e = errno;
        if (e == EACCES || e == EAGAIN) {
            char who[80];
            run_folder_lock_text(fd, who, sizeof who);
            gt_error("another gentrain run is writing to %s (%s): two runs in one folder "
                     "would mix their checkpoints and log; wait for it to end, or give "
                     "another out", c->out, who[0] ? who : "its pid unknown");
            close(fd);
            return -1;
        }
        gt_warn("cannot lock %s (%s): a second run started into %s meanwhile would not be "
                "refused", path, strerror(e), c->out);
        close(fd);
        return 0;
    }
    /* who holds it, for the error line of a run that finds it taken */
    char host[64] = "?", who[160];
    if (gethostname(host, sizeof host) != 0) strcpy(host, "?");
    host[sizeof host - 1] = '\0';
    const int len = snprintf(who, sizeof who, "pid %ld on %s\n", (long)getpid(), host);
    if (ftruncate(fd, 0) != 0 || pwrite(fd, who, (size_t)len, 0) != len)
        gt_warn("cannot write to %s (%s); the lock holds all the same", path, strerror(errno));
    r->out_lock = fd;
    return 0;
}

void train_unlock_out(run *r)
{
    if (r->out_lock >= 0) close(r->out_lock); /* releases the lock */
    r->out_lock = -1;
}
