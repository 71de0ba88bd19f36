/* train_files — what a run reads and writes besides its data: the output folder and
 * the JSON Lines log (rank 0), checkpoints (which to resume from, loading one into
 * this rank's part, saving one whole model whatever the grid) and the final model
 * file. Formats: io/ckpt/ckpt.h, io/h5/h5model.h. */
#define GT_TRAIN_MODULE /* may include train_run.h */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "h5model.h"
#include "hf_gpt2.h"
#include "grid.h"
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

/* <out>/model.h5, where a run saves its model (out fits GT_PATH_MAX, so path does) */
enum { MODEL_PATH_CAP = GT_PATH_MAX + 16 };
static void model_path(const char *out, char path[MODEL_PATH_CAP])
{
    snprintf(path, MODEL_PATH_CAP, "%s/model.h5", out);
}

/* Whether the run folder holds a model.h5 (said) that a fresh run would replace at its
 * end: an earlier run's result, which the checkpoint check does not cover where that
 * run kept no checkpoints (or they were moved away). */
static int earlier_model(const gt_config *c)
{
    char path[MODEL_PATH_CAP];
    model_path(c->out, path);
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
 * other's log. So rank 0 holds a POSIX write lock on <out>/.gentrain.lock for the whole
 * run: the system drops it when the process ends, so a killed run leaves no stale lock,
 * and fcntl locks reach across nodes on NFS (lockd) and Lustre (mounted with flock).
 * Where the file system has no locks, one warning and the run goes on. Before anything
 * reads or writes the folder: 0, or -1 (reported). */
int train_lock_out(run *r)
{
    const gt_config *c = r->c;
    r->out_lock = -1;
    if (!par_is_root() || config_is_none(c->out)) return 0;
    char path[GT_PATH_MAX + 32];
    if (snprintf(path, sizeof path, "%s/.gentrain.lock", c->out) >= (int)sizeof path) {
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
            char who[160] = "";
            const ssize_t n = pread(fd, who, sizeof who - 1, 0);
            who[n > 0 ? n : 0] = '\0';
            who[strcspn(who, "\n")] = '\0';
            char shown[72];
            gt_error("another gentrain run is writing to %s (%s): two runs in one folder "
                     "would mix their checkpoints and log; wait for it to end, or give "
                     "another out", c->out, who[0] ? gt_printable(who, shown) : "its pid unknown");
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

/* resume = auto: the step of the newest checkpoint of dir that verifies, found by rank
 * 0 and broadcast: >= 0, -1 when there is none (a fresh run), -2 on an error
 * (reported by rank 0), and so when every checkpoint there is damaged: starting fresh
 * would overwrite them. A collective. */
static int64_t find_resume_step(const char *dir)
{
    double found = -2.0;
    if (par_is_root()) {
        char path[GT_PATH_MAX + 64];
        int k = ckpt_find_latest(dir, path, sizeof path);
        if (k == 0) found = -1.0;
        if (k == 2)
            gt_error("resume = auto: no checkpoint in %s verifies (see the warnings above); "
                     "none was changed. Move them away to start fresh, or resume one by "
                     "its path", dir);
        if (k == 1) {
            const char *base = strrchr(path, '/');
            long long step = -1;
            if (sscanf(base ? base + 1 : path, "ckpt_%lld.h5", &step) == 1 && step >= 0)
                found = (double)step;
            else
                gt_error("checkpoint %s: cannot read the step from its name", path);
        }
    }
    return (int64_t)par_bcast_double(found);
}

/* 1 when the folder of file is dir (the same folder by device and inode, however
 * either is spelled), else 0. */
static int same_folder_as(const char *file, const char *dir)
{
    char parent[GT_PATH_MAX];
    if (gt_strlcpy(parent, file, sizeof parent) != 0) return 0;
    char *slash = strrchr(parent, '/');
    if (!slash) strcpy(parent, ".");
    else if (slash == parent) parent[1] = '\0';
    else *slash = '\0';
    struct stat a, b;
    return stat(parent, &a) == 0 && stat(dir, &b) == 0 && a.st_dev == b.st_dev &&
           a.st_ino == b.st_ino;
}

/* A run writes its checkpoints into r->ckpt_dir and prunes the lowest steps there, so
 * checkpoints of another run, or of this one past the step it starts from (-1: a fresh
 * run), would be overwritten or pruned, and the next resume = auto would continue from
 * them: that run is refused before it starts. 0, or -1 (reported; rank 0 looks, the
 * others return 0). */
static int ckpt_dir_ok_from(const run *r, int64_t start_step)
{
    if (!r->can_ckpt || !par_is_root()) return 0;
    const int64_t newest = ckpt_newest_step(r->ckpt_dir);
    if (newest == -2) return -1;
    char path[GT_PATH_MAX + 64];
    if (newest >= 0 && start_step >= 0 && r->from && !same_folder_as(r->from, r->ckpt_dir)) {
        /* another run's checkpoints (this one's came from elsewhere): its pruning would
         * delete them, and leave a folder of two runs */
        if (ckpt_path(r->ckpt_dir, newest, path, sizeof path) != 0) return -1;
        gt_error("%s holds checkpoints up to step %" PRId64 " (%s), not of the folder of "
                 "%s (the one resumed): this run would prune them; give another out, or "
                 "move them away", r->ckpt_dir, newest, path, r->from);
        return -1;
    }
    if (newest <= start_step) return 0;
    if (ckpt_path(r->ckpt_dir, newest, path, sizeof path) != 0) return -1;
    char from[64] = "(a fresh one: resume = none)";
    if (start_step >= 0) snprintf(from, sizeof from, "(from step %" PRId64 ")", start_step);
    gt_error("%s holds checkpoints up to step %" PRId64 " (%s), which this run %s would "
             "overwrite or prune: %s, give another out, or move them away",
             r->ckpt_dir, newest, path, from,
             start_step < 0 ? "set resume = auto to continue that run"
                            : "resume from the newest (resume = auto)");
    return -1;
}

/* What a run must know of its checkpoint before it settles its batch and starts its
 * loader: the global batch, the data cursor and the replicas (rank 0 reads the
 * attributes, every rank learns them). A collective. */
static int read_resume_batch(run *r)
{
    double v[3] = {-1.0, 0.0, 0.0};
    if (par_is_root()) {
        ckpt_meta meta;
        if (ckpt_read_meta(r->from, &meta) == 0) {
            /* resume = auto took the newest that verifies: newer ones are damaged */
            if (strcmp(r->c->resume, "auto") == 0 || ckpt_dir_ok_from(r, meta.step) == 0) {
                v[0] = (double)meta.global_batch;
                v[1] = (double)meta.samples;
                v[2] = meta.world_size;
            }
            ckpt_meta_free(&meta);
        }
    }
    for (int i = 0; i < 3; i++) v[i] = par_bcast_double(v[i]);
    if (v[0] < 1.0) return -1;
    r->resume_batch = (int64_t)v[0];
    r->first_sample = (int64_t)v[1];
    r->resume_replicas = (int)v[2];
    return 0;
}

/* Which checkpoint to continue from, if any (r->from; NULL: a fresh run): every rank
 * loads the same file; its global batch and data cursor are read now. A collective. */
int train_find_resume(run *r)
{
    const gt_config *c = r->c;
    r->from = NULL;
    if (strcmp(c->resume, "auto") == 0) {
        const int64_t step = find_resume_step(r->ckpt_dir);
        if (step == -2) return -1;
        if (step == -1) {
            par_printf("resume: no checkpoint in %s; starting fresh\n", r->ckpt_dir);
        } else {
            if (ckpt_path(r->ckpt_dir, step, r->resume_path, sizeof r->resume_path) != 0)
                return -1;
            r->from = r->resume_path;
        }
    } else if (!config_is_none(c->resume)) {
        r->from = c->resume;
    }
    if (!r->from && !par_all_ok(ckpt_dir_ok_from(r, -1) == 0)) return -1;
    return r->from ? read_resume_batch(r) : 0;
}

enum { MAX_BUFS = 3 + CKPT_MAX_IN_FLIGHT + 1 };

/* dst: src's count, flags and sums, and buffers of n floats (a whole model's, or this
 * rank's part) for its gradients in flight and, when src has one, before_update; not
 * filled. 0, or -1 (reported; ckpt_async_free(dst) frees what was made). */
static int alloc_async_like(ckpt_async *dst, const ckpt_async *src, size_t n)
{
    *dst = *src;
    memset(dst->grads, 0, sizeof dst->grads);
    dst->before_update = NULL;
    for (int i = 0; i < src->n; i++)
        if (!(dst->grads[i] = gt_malloc(n * sizeof(float), "gradients in flight"))) return -1;
    if (src->before_update &&
        !(dst->before_update = gt_malloc(n * sizeof(float), "parameters before the update")))
        return -1;
    return 0;
}

/* The buffers of one model part to gather or scatter, in order: parameters, moments (opt
 * not NULL), the gradients in flight and before_update (as not NULL). Returns how many. */
static int part_buffers(float *params, const adamw_state *opt, const ckpt_async *as,
                        float **out)
{
    int n = 0;
    out[n++] = params;
    if (opt) {
        out[n++] = opt->m;
        out[n++] = opt->v;
    }
    for (int i = 0; as && i < as->n; i++) out[n++] = as->grads[i];
    if (as && as->before_update) out[n++] = as->before_update;
    return n;
}

/* With tp or pp > 1: puts the parts of this replica (pp x tp ranks) together, on its
 * first rank, into `whole` (created here, the layout of one process; the caller frees
 * it) and, when whole_opt is not NULL, AdamW's moments into whole_opt the same way,
 * and when whole_as is not NULL, the gradients in flight `mine` (this rank's layout)
 * into whole_as (ckpt_async_free it). A collective over the replica; the other ranks get
 * nothing. With one part it does nothing (the model is whole). Returns 0, or -1 on every
 * rank of the replica (reported). */
static int gather_whole(const run *r, gpt_model *whole, adamw_state *whole_opt,
                        const ckpt_async *mine, ckpt_async *whole_as)
{
    const int parts = grid_mp_size(), tp = grid_tp_size(), pp = grid_pp_size();
    if (parts == 1) return 0;
    const int root = grid_mp_rank() == 0;
    int ok = 1;
    if (root) {
        ok = gpt_create(whole, r->model.shape, r->model.be, r->threads) == 0;
        if (ok && whole_opt) ok = adamw_init(whole_opt, whole->n_params) == 0;
        if (ok && whole_as) ok = alloc_async_like(whole_as, mine, whole->n_params) == 0;
    }
    /* The others must not start sending to a root that could not take it. */
    if (!grid_mp_all_ok(ok)) return -1;
    float *src[MAX_BUFS], *dest[MAX_BUFS];
    const int n_bufs = part_buffers(r->model.params, whole_opt ? &r->opt : NULL,
                                    whole_as ? mine : NULL, src);
    if (!root) {
        for (int k = 0; k < n_bufs; k++) grid_mp_send_root(src[k], r->model.n_params);
        return 0;
    }
    part_buffers(whole->params, whole_opt, whole_as, dest);
    if (whole_opt) whole_opt->t = r->opt.t;
    for (int k = 0; k < n_bufs; k++) gpt_shard_copy(&r->model, grid_tp_rank(), dest[k], src[k], 1);
    /* Each other part: its layout (a model of that stage and shard, whose parameter
     * buffer receives), then its buffers in order. */
    for (int q = 1; q < parts; q++) {
        gpt_model part;
        if (gpt_create_stage(&part, r->model.shape, r->model.be, 1, tp, q % tp, q / tp, pp) !=
            0)
            par_abort_reported(); /* the peers are already sending */
        for (int k = 0; k < n_bufs; k++) {
            grid_mp_recv(part.params, part.n_params, q);
            gpt_shard_copy(&part, q % tp, dest[k], part.params, 1);
        }
        gpt_free(&part);
    }
    return 0;
}

/* Loads checkpoint `from` into model m, its optimizer state opt and its gradients in
 * flight as (buffers allocated here). */
static int ckpt_load_model(const char *from, gpt_model *m, adamw_state *opt, ckpt_async *as,
                           ckpt_meta *meta)
{
    gt_tensor_table tab;
    if (gpt_tensor_table(m, &tab) != 0) return -1;
    ckpt_state st = {.shape = m->shape, .table = &tab, .params = m->params, .m = opt->m,
                     .v = opt->v, .adam_t = opt->t, .async = as};
    int rc = -1;
    if (opt->n != tab.total)
        gt_error("cannot load checkpoint %s: optimizer state does not match the model", from);
    else
        rc = ckpt_load(from, &st, meta);
    opt->t = st.adam_t;
    gt_tensor_table_free(&tab);
    return rc;
}

/* Loads checkpoint `from` into the run's model, optimizer and gradients in flight:
 * directly with one part per replica; with tp or pp > 1 every rank reads the whole
 * model and keeps its part (memory: one whole model, its moments and gradients in
 * flight, briefly). 0, or -1 (reported). */
static int load_checkpoint(run *r, const char *from)
{
    if (grid_mp_size() == 1)
        return ckpt_load_model(from, &r->model, &r->opt, &r->inflight, &r->meta);
    gpt_model whole;
    adamw_state whole_opt;
    ckpt_async whole_as;
    memset(&whole_opt, 0, sizeof whole_opt);
    memset(&whole_as, 0, sizeof whole_as);
    int rc = -1;
    if (gpt_create(&whole, r->model.shape, r->model.be, r->threads) != 0) return -1;
    if (adamw_init(&whole_opt, whole.n_params) == 0 &&
        ckpt_load_model(from, &whole, &whole_opt, &whole_as, &r->meta) == 0 &&
        alloc_async_like(&r->inflight, &whole_as, r->model.n_params) == 0) {
        float *src[MAX_BUFS], *dest[MAX_BUFS];
        const int n_bufs = part_buffers(whole.params, &whole_opt, &whole_as, src);
        part_buffers(r->model.params, &r->opt, &r->inflight, dest);
        for (int k = 0; k < n_bufs; k++)
            gpt_shard_copy(&r->model, grid_tp_rank(), src[k], dest[k], 0);
        r->opt.t = whole_opt.t;
        rc = 0;
    }
    gpt_free(&whole);
    adamw_free(&whole_opt);
    ckpt_async_free(&whole_as);
    return rc;
}

/* Whether the checkpoint was trained on the data this run has (rank 0): a file replaced
 * between a checkpoint and its resume would continue the run on other tokens. Names
 * the first field that differs. A checkpoint from before fingerprints gets a note. */
static int same_data(const ckpt_meta *meta, const char *now, const char *path)
{
    if (!meta->data) {
        printf("resume: %s does not record its training data (an older gentrain wrote "
               "it): not compared\n", meta->path);
        return 1;
    }
    if (strcmp(meta->data, now) == 0) return 1;
    char what[768];
    h5set_fingerprint_diff(meta->data, now, what, sizeof what);
    gt_error("resume: the training data %s is not what checkpoint %s was trained on "
             "(%s); resume on that data, or start fresh with resume = none",
             path, meta->path, what);
    return 0;
}

/* The gradients in flight at the boundary before step `step` (async: the last
 * min(staleness, step) steps' gradients, oldest first; none for sync), in this rank's
 * layout (as points into the ring). Their reductions are completed first, on every
 * rank, so the file holds averaged gradients and the steps that apply them later take
 * them as reduced (parallel.h): the run goes on bit for bit as without the checkpoint.
 * The local squared norms are averaged over the ranks. A collective. */
static void inflight_of(run *r, int64_t step, ckpt_async *as)
{
    memset(as, 0, sizeof *as);
    as->n = (int)(step < r->ring.lag ? step : r->ring.lag);
    for (int i = 0; i < as->n; i++) {
        const int slot = grad_ring_slot_of(&r->ring, step - as->n + i);
        as->sumsq[i] = par_mean_double(r->red ? par_reducer_complete(r->red, slot) : 0.0);
        as->overflow[i] = r->ring.overflow[slot];
        as->grads[i] = r->ring.slot[slot];
    }
    as->before_update = as->n > 0 ? r->ring.before_update : NULL;
}

/* Rank 0: the checkpoint file of `step` steps done, from the whole model sm, its
 * optimizer so and gradients in flight as; then the folder pruned. 0 or -1. */
static int write_checkpoint(run *r, int64_t step, const gpt_model *sm, const adamw_state *so,
                            ckpt_async *as, double t0)
{
    const gt_config *c = r->c;
    const loss_scaler *scaler = r->engine->scaler;
    gt_tensor_table tab;
    int ok = gpt_tensor_table(sm, &tab) == 0;
    /* The schedule state (ckpt.h /schedule): the noise scale's EMAs, the step costs'. */
    const double sched[CKPT_SCHED_N] = {r->gns.ema_g2, r->gns.ema_s, r->gns.weight,
                                        r->cost_fixed, r->cost_micro, r->cost_w};
    /* The data cursor: the samples read before the next step; the global batch of the
     * next step. */
    const ckpt_state st = {.shape = sm->shape, .table = &tab, .params = sm->params,
                           .m = so->m, .v = so->v, .adam_t = so->t,
                           .global_batch = r->global_batch,
                           .samples = r->samples,
                           .schedule = sched,
                           .async = as};
    /* The world size recorded is the number of replicas: what split each step's data. */
    ok = ok &&
         ckpt_save(r->ckpt_dir, step, &st, r->saved_text, grid_dp_size(), c->seed,
                   scaler ? (double)scaler->scale : 1.0,
                   scaler ? (int64_t)scaler->clean_steps : 0,
                   r->data_id[0] ? r->data_id : NULL, r->ckpt_file, sizeof r->ckpt_file) == 0 &&
         ckpt_prune(r->ckpt_dir, c->keep_ckpts, step) >= 0;
    gt_tensor_table_free(&tab);
    if (ok)
        printf("checkpoint: step %lld saved to %s in %.2f s%s\n", (long long)step,
               r->ckpt_file, gt_now() - t0, as->n ? " (with the gradients in flight)" : "");
    fflush(stdout);
    return ok ? 0 : -1;
}

/* Rank 0 writes the checkpoint of `step` steps done into dir and prunes the folder to
 * keep_ckpts files; every rank learns whether it worked. r->ckpt_file gets the file
 * (rank 0). One whole model whatever the grid (tp or pp > 1: replica 0's parts put
 * together on rank 0), so any tp and pp can resume it. A collective. */
int train_save_checkpoint(run *r, int64_t step)
{
    const int split = grid_mp_size() > 1;
    const double t0 = gt_now();
    ckpt_async mine, whole_as;
    gpt_model whole;
    adamw_state whole_opt;
    memset(&whole, 0, sizeof whole);
    memset(&whole_opt, 0, sizeof whole_opt);
    memset(&whole_as, 0, sizeof whole_as);
    inflight_of(r, step, &mine);
    int ok = 1;
    if (split && grid_dp_rank() == 0)
        ok = gather_whole(r, &whole, &whole_opt, &mine, &whole_as) == 0;
    if (par_is_root() && ok)
        ok = write_checkpoint(r, step, split ? &whole : &r->model, split ? &whole_opt : &r->opt,
                              split ? &whole_as : &mine, t0) == 0;
    gpt_free(&whole);
    adamw_free(&whole_opt);
    ckpt_async_free(&whole_as);
    if (!par_all_ok(ok)) return -1;
    r->last_save = gt_now();
    return 0;
}

/* Loads the checkpoint r->from into this rank's part and the optimizer; training then
 * continues at its step. 0, or -1 (reported). */
int train_load_checkpoint(run *r)
{
    if (!r->from) return 0;
    /* Parameters, moments and AdamW's t; the step is the data cursor (ckpt.h). */
    if (load_checkpoint(r, r->from) != 0) return -1;
    r->resumed = 1;
    r->first_step = r->meta.step;
    /* the smoothed statistics go on where they were (zeros from a version 3 file) */
    const double *sched = r->meta.schedule;
    r->gns = (gns_state){sched[0], sched[1], sched[2]};
    r->cost_fixed = sched[3];
    r->cost_micro = sched[4];
    r->cost_w = sched[5];
    return 0;
}

/* The checkpoint loaded is the one whose global batch and data cursor the run settled
 * on (not replaced in between), and holds the gradients in flight this run's ring
 * expects (staleness, prediction: the configs agree, so only a damaged pair differs). */
static int same_run_state(const run *r)
{
    const ckpt_meta *m = &r->meta;
    const int64_t lag = r->c->sync == SYNC_ASYNC ? r->c->staleness : 0;
    const int64_t want = m->step < lag ? m->step : lag;
    const int predict = r->c->sync == SYNC_ASYNC && r->c->async_predict == PREDICT_ON;
    if (m->global_batch != r->resume_batch || m->samples != r->first_sample) {
        gt_error("resume: checkpoint %s changed while this run started; start it again",
                 m->path);
        return 0;
    }
    if (m->in_flight != want || (want > 0 && m->predict != predict)) {
        gt_error("resume: checkpoint %s holds %d gradient%s in flight%s; this run (sync = %s, "
                 "staleness %d) needs %lld%s", m->path, m->in_flight,
                 m->in_flight == 1 ? "" : "s", m->predict ? " with weight prediction" : "",
                 r->c->sync == SYNC_ASYNC ? "async" : "sync", r->c->staleness,
                 (long long)want, predict ? " with weight prediction" : "");
        return 0;
    }
    return 1;
}

/* A resumed run: may it continue from that checkpoint with this config and data
 * (rank 0 decides; every rank learns)? Says what changed. A collective. */
int train_check_resume(run *r)
{
    if (!r->resumed) return 0;
    int ok = 1;
    if (par_is_root()) {
        char changes[4096];
        ok = ckpt_check_compatible(&r->meta, r->saved_text, r->dp, changes,
                                   sizeof changes) == 0 &&
             same_data(&r->meta, r->data_id, r->c->data) && same_run_state(r);
        if (ok) {
            printf("resuming from %s at step %lld\n", r->from, (long long)r->first_step);
            if (changes[0]) printf("resume: changed since the checkpoint: %s\n", changes);
        }
    }
    return par_all_ok(ok) ? 0 : -1;
}

/* <out>/model.h5: the whole model whatever the grid (replica 0's parts put together on
 * rank 0). A collective; 0 or -1 on every rank. */
int train_save_model(run *r)
{
    const gt_config *c = r->c;
    if (config_is_none(c->out)) return 0;
    gpt_model whole;
    memset(&whole, 0, sizeof whole);
    const int split = grid_mp_size() > 1;
    int saved = 1;
    if (grid_dp_rank() == 0) saved = gather_whole(r, &whole, NULL, NULL, NULL) == 0;
    if (par_is_root() && saved) {
        char path[MODEL_PATH_CAP];
        model_path(c->out, path);
        const gpt_model *sm = split ? &whole : &r->model;
        gt_tensor_table tab;
        saved = gpt_tensor_table(sm, &tab) == 0 &&
                h5model_save_tok(path, sm->shape, &tab, sm->params, r->saved_text, r->end_step,
                                 r->tokenizer, r->tok_len) == 0;
        gt_tensor_table_free(&tab);
        if (saved) printf("saved %s\n", path);
    }
    if (split) gpt_free(&whole);
    return par_all_ok(saved) ? 0 : -1;
}

/* init_from: a fresh run starts from a Hugging Face GPT-2 folder's weights, laid over
 * the run's own initialisation (rows the folder lacks keep theirs). A whole model is
 * initialised and loaded in place; with tp or pp > 1 every rank reads the folder into
 * a whole model and keeps its part. 0, or -1 (reported). */
int train_init_from(run *r)
{
    const gt_config *c = r->c;
    const int split = grid_mp_size() > 1;
    gpt_model whole;
    memset(&whole, 0, sizeof whole);
    gpt_model *m = split ? &whole : &r->model;
    gt_tensor_table tab = {0};
    hf_gpt2_config found;
    int rc = -1;
    if ((!split || gpt_create(&whole, r->model.shape, r->model.be, r->threads) == 0) &&
        gpt_init_weights(m, c->seed) == 0 && gpt_tensor_table(m, &tab) == 0 &&
        hf_gpt2_load(c->init_from, m->shape, &tab, m->params, &found) == 0)
        rc = 0;
    if (rc == 0) {
        if (split) gpt_shard_copy(&r->model, grid_tp_rank(), whole.params, r->model.params, 0);
        par_printf("init_from: %s: GPT-2 n_layer %d n_head %d n_embd %d, %d positions (the "
                   "first %d used), a vocabulary of %d (%s)\n", c->init_from, found.n_layer,
                   found.n_head, found.n_embd, found.n_positions, m->shape.block_size,
                   found.vocab_size,
                   found.vocab_size == m->shape.vocab_size ? "the run's"
                   : found.vocab_size > m->shape.vocab_size
                       ? "the run uses its first rows"
                       : "the run's other rows start from its own initialisation");
    }
    gt_tensor_table_free(&tab);
    if (split) gpt_free(&whole);
    return rc;
}
