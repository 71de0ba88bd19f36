/* inspect_run — see inspect_run.h. Everything is read, nothing opened for writing: the
 * lock is tested (F_GETLK), never taken, so a run writing the folder goes on as if
 * nobody looked. */
#include "inspect_run.h"

#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ckpt.h"   /* ckpt_list_steps, ckpt_find_latest, ckpt_read_meta */
#include "config.h" /* config_text_value, config_is_none, GT_PATH_MAX */
#include "h5model.h"
#include "json.h"
#include "run_folder.h"
#include "util.h"

/* A log line longer than this is not a record gentrain wrote (those are under 4 kB; the
 * emulated-AMX counts make them longer, far below this). */
enum { MAX_RECORD = 1 << 20 };
/* The time left is measured over this many of the last records (a single step's time
 * leaves out evaluations and checkpoints). */
enum { PACE_RECORDS = 50 };
/* Checkpoint steps listed by name before "...". */
enum { STEPS_SHOWN = 8 };
/* The room for a path shown whole (escaped) on either stream: error lines name the
 * folder's files in full, as the listing does, not cut to gt_printable's 64. */
enum { PATH_SHOWN = 1024 };

typedef struct log_summary {
    int64_t records;     /* step records read */
    int64_t bad;         /* lines that are not a record */
    int64_t first_bad;   /* the line number of the first of them */
    int cut_tail;        /* the file ends inside a line (being written, or cut short) */
    /* the last record: NAN where it lacks the member */
    double step, loss, lr, tokens_per_s, tokens;
    double val_step, val_loss;   /* the last validation; NAN: none */
    double best_step, best_val;  /* the lowest val_loss */
    /* (step, elapsed_s) of the last records of this process's stretch of the log: a
     * resume appends a new stretch, its elapsed_s from 0 again */
    double pace_step[PACE_RECORDS], pace_s[PACE_RECORDS];
    int pace_n, pace_next;
} log_summary;

/* The next line of f into buf (cap bytes), without its newline: its length, or -1 at
 * the end of the file. *cut = 1 when the line did not fit (the rest is skipped; a NUL
 * byte inside a line counts so too); *ended = 0 when the file ended before its
 * newline. */
static long next_line(FILE *f, char *buf, size_t cap, int *cut, int *ended)
{
    *cut = 0;
    *ended = 1;
    if (!fgets(buf, (int)cap, f)) return -1;
    size_t n = strlen(buf);
    if (n && buf[n - 1] == '\n') {
        buf[--n] = '\0';
        return (long)n;
    }
    if (feof(f)) {
        *ended = 0;
        return (long)n;
    }
    *cut = 1;
    int ch;
    while ((ch = getc(f)) != EOF && ch != '\n') {
    }
    if (ch == EOF) *ended = 0;
    return (long)n;
}

static void take_record(const json_value *rec, log_summary *s)
{
    s->records++;
    const double step = json_number(rec, "step"), elapsed = json_number(rec, "elapsed_s");
    /* a stretch ends where steps or the clock go back: a resume */
    if (s->pace_n > 0) {
        const int last = (s->pace_next + PACE_RECORDS - 1) % PACE_RECORDS;
        if (!(step > s->pace_step[last] && elapsed >= s->pace_s[last])) s->pace_n = 0;
    }
    if (isfinite(elapsed)) {
        s->pace_step[s->pace_next] = step;
        s->pace_s[s->pace_next] = elapsed;
        s->pace_next = (s->pace_next + 1) % PACE_RECORDS;
        if (s->pace_n < PACE_RECORDS) s->pace_n++;
    } else {
        s->pace_n = 0;
    }
    s->step = step;
    s->loss = json_number(rec, "loss");
    s->lr = json_number(rec, "lr");
    s->tokens_per_s = json_number(rec, "tokens_per_s");
    s->tokens = json_number(rec, "tokens");
    const double val = json_number(rec, "val_loss");
    if (isfinite(val)) {
        s->val_step = step;
        s->val_loss = val;
        if (!(val >= s->best_val)) { /* also the first: best_val starts as NAN */
            s->best_val = val;
            s->best_step = step;
        }
    }
}

/* Reads the log at path into s. 0, or -1 when it cannot be read (reported). Lines that
 * are not records are counted in s->bad, not reported here. */
static int read_log(const char *path, log_summary *s)
{
    memset(s, 0, sizeof *s);
    s->step = s->val_step = s->val_loss = s->best_val = s->best_step = NAN;
    const int fd = gt_open_regular(path, "inspect: the log", 0, NULL);
    if (fd < 0) return -1;
    FILE *f = fdopen(fd, "r");
    char *buf = f ? gt_malloc(MAX_RECORD + 2, "log line") : NULL;
    if (!f || !buf) {
        char shown[PATH_SHOWN];
        if (!f)
            gt_error("inspect: cannot read %s", gt_printable_cap(path, shown, sizeof shown));
        free(buf);
        if (f) fclose(f);
        else close(fd);
        return -1;
    }
    int64_t lineno = 0;
    long len;
    int cut, ended;
    while ((len = next_line(f, buf, MAX_RECORD + 2, &cut, &ended)) >= 0) {
        lineno++;
        if (!ended) { /* no newline yet: a record being written, or a write cut short */
            s->cut_tail = 1;
            break;
        }
        if (len == 0) continue;
        json_doc doc;
        char err[160];
        int ok = !cut && json_parse(buf, (size_t)len, &doc, err, sizeof err) == 0;
        if (ok) {
            ok = doc.root.type == JSON_OBJECT && isfinite(json_number(&doc.root, "step"));
            if (ok) take_record(&doc.root, s);
            json_free(&doc);
        }
        if (!ok && s->bad++ == 0) s->first_bad = lineno;
    }
    const int failed = ferror(f);
    char shown[PATH_SHOWN];
    if (failed)
        gt_error("inspect: reading %s failed", gt_printable_cap(path, shown, sizeof shown));
    free(buf);
    fclose(f);
    return failed ? -1 : 0;
}

/* "2026-12-07 06:20:14 UTC, 3 min ago" for a file's modification time. */
static void when_text(time_t t, char *buf, size_t cap)
{
    struct tm tm;
    char date[40] = "?";
    if (gmtime_r(&t, &tm)) strftime(date, sizeof date, "%Y-%m-%d %H:%M:%S UTC", &tm);
    const double ago = difftime(time(NULL), t);
    char age[40];
    if (ago < 0)
        snprintf(age, sizeof age, "in the future by this host's clock");
    else if (ago < 120)
        snprintf(age, sizeof age, "%.0f s ago", ago);
    else if (ago < 7200)
        snprintf(age, sizeof age, "%.0f min ago", ago / 60);
    else if (ago < 172800)
        snprintf(age, sizeof age, "%.1f h ago", ago / 3600);
    else
        snprintf(age, sizeof age, "%.0f days ago", ago / 86400);
    snprintf(buf, cap, "%s, %s", date, age);
}

/* "1:02:03"; a time past any run's (a log's numbers are the file's, whatever they
 * are) in seconds instead. */
static void hms_text(double s, char *buf, size_t cap)
{
    if (!(s >= 0 && s < 1e9)) {
        snprintf(buf, cap, "%.3g s", s);
        return;
    }
    const long long t = (long long)(s + 0.5);
    snprintf(buf, cap, "%lld:%02lld:%02lld", t / 3600, t / 60 % 60, t % 60);
}

/* A count from the log, its thousands grouped, into buf: "?" when absent, and one past
 * what an int64 holds (a log's numbers are the file's) in %g. */
static void count_text(double v, char *buf, size_t cap)
{
    if (!isfinite(v))
        snprintf(buf, cap, "?");
    else if (fabs(v) < 9e15)
        gt_group_digits((int64_t)llround(v), buf, cap);
    else
        snprintf(buf, cap, "%.3g", v);
}

/* The config key `key` of text as an integer, or -1 when absent or not one. */
static int64_t config_int(const char *text, const char *key)
{
    char v[64], *end = NULL;
    if (!text || config_text_value(text, key, v, sizeof v) != 1) return -1;
    const long long n = strtoll(v, &end, 10);
    return end != v && *end == '\0' && n >= 0 ? (int64_t)n : -1;
}

/* Where the run logged, into path, and the name to show for it into name: the config's
 * `log` under the folder given here when it was under the run's out (the default
 * <out>/log.jsonl among them), shown relative to the folder; else as the config says
 * (relative to the folder the run started in), shown whole; <dir>/log.jsonl when there
 * is no config. 0, or 1 when the run kept no log. */
static int log_path(const char *dir, const char *config, char *path, size_t cap,
                    char *name, size_t name_cap)
{
    char logv[GT_PATH_MAX], outv[GT_PATH_MAX];
    if (!config || config_text_value(config, "log", logv, sizeof logv) != 1 || !logv[0]) {
        snprintf(path, cap, "%s/" RUN_FOLDER_LOG, dir);
        snprintf(name, name_cap, RUN_FOLDER_LOG);
        return 0;
    }
    if (config_is_none(logv)) return 1;
    const size_t n = config_text_value(config, "out", outv, sizeof outv) == 1
                         ? strlen(outv) : 0;
    if (n && strncmp(logv, outv, n) == 0 && logv[n] == '/') {
        snprintf(path, cap, "%s%s", dir, logv + n);
        gt_printable_cap(logv + n + 1, name, name_cap);
    } else {
        snprintf(path, cap, "%s", logv);
        gt_printable_cap(logv, name, name_cap);
    }
    return 0;
}

static run_lock_state print_state(FILE *out, const char *dir)
{
    char who[80], why[GT_PATH_MAX + 96], path[GT_PATH_MAX + 32], when[80] = "?";
    struct stat st;
    snprintf(path, sizeof path, "%s/" RUN_FOLDER_LOCK, dir);
    if (stat(path, &st) == 0) when_text(st.st_mtime, when, sizeof when);
    const run_lock_state state = run_folder_lock_state(dir, who, sizeof who, why, sizeof why);
    switch (state) {
    case RUN_LOCK_NO_FILE:
        fprintf(out, "state: not running (no run has locked this folder)\n");
        break;
    case RUN_LOCK_FREE:
        fprintf(out, "state: not running (no process holds the folder's lock; the last run "
                     "here: %s, started %s)\n", who[0] ? who : "unknown", when);
        break;
    case RUN_LOCK_HELD:
        fprintf(out, "state: running: %s holds the folder's lock (started %s)\n",
                who[0] ? who : "a process", when);
        break;
    case RUN_LOCK_UNKNOWN: {
        char shown[PATH_SHOWN];
        fprintf(out, "state: unknown (%s)\n", gt_printable_cap(why, shown, sizeof shown));
        break;
    }
    }
    return state;
}

/* The time left of a run in progress at the pace of the log's last records. */
static void print_time_left(FILE *out, const log_summary *s, int64_t steps)
{
    if (s->pace_n < 2 || !(s->step < (double)steps)) return;
    const int last = (s->pace_next + PACE_RECORDS - 1) % PACE_RECORDS,
              first = (s->pace_next + PACE_RECORDS - s->pace_n) % PACE_RECORDS;
    const double per_step = (s->pace_s[last] - s->pace_s[first]) /
                            (s->pace_step[last] - s->pace_step[first]);
    if (!(per_step > 0)) return;
    char left[32];
    hms_text(per_step * ((double)steps - s->step), left, sizeof left);
    fprintf(out, "time left: about %s to step %" PRId64 " at the pace of the last %d steps "
                 "(%.3g s a step)\n", left, steps, s->pace_n, per_step);
}

/* The log's lines (path, shown as name); steps: the run's, or -1. 0, or -1 when it
 * cannot be read or holds lines that are not records (reported). */
static int print_log(FILE *out, const char *path, const char *name, int64_t steps,
                     int running)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        fprintf(out, "log: none (%s does not exist)\n", name);
        return 0;
    }
    log_summary s;
    if (read_log(path, &s) != 0) return -1;
    char when[80], n[32];
    when_text(st.st_mtime, when, sizeof when);
    gt_group_digits(s.records, n, sizeof n);
    fprintf(out, "log: %s: %s step record%s, written %s\n", name, n, s.records == 1 ? "" : "s",
            when);
    int rc = 0;
    if (s.bad) {
        char shown[PATH_SHOWN];
        gt_error("inspect: %s: %lld line%s not a step record (the first: line %lld)",
                 gt_printable_cap(path, shown, sizeof shown), (long long)s.bad,
                 s.bad == 1 ? " is" : "s are", (long long)s.first_bad);
        rc = -1;
    }
    if (s.cut_tail && !running)
        fprintf(out, "log: its last line ends without a newline: a record cut short (the "
                     "run ended while writing it)\n");
    if (!isfinite(s.step)) return rc;
    char of[40] = "", tok[32], speed[32];
    if (steps > 0) snprintf(of, sizeof of, " of %" PRId64, steps);
    count_text(s.tokens, tok, sizeof tok);
    count_text(s.tokens_per_s, speed, sizeof speed);
    /* %.15g: a step as the integer it is, one past 15 digits (a damaged log) short */
    fprintf(out, "last step: %.15g%s: loss %.4f, lr %.2e, %s tokens/s, %s tokens trained on\n",
            s.step, of, s.loss, s.lr, speed, tok);
    if (isfinite(s.val_loss))
        fprintf(out, "validation: val_loss %.4f at step %.15g (the lowest: %.4f at step %.15g)\n",
                s.val_loss, s.val_step, s.best_val, s.best_step);
    if (running && steps > 0) print_time_left(out, &s, steps);
    return rc;
}

/* The checkpoints' line and resume's. *meta gets the checkpoint resume = auto would
 * take (meta->step -1: none), found as a resume finds it (verify: every byte against
 * its checksum) or by its metadata alone. 0, or -1 when no checkpoint verifies (reads),
 * a newer one than that does not, or the folder cannot be read (reported). */
static int print_checkpoints(FILE *out, const char *dir, int verify, ckpt_meta *meta)
{
    memset(meta, 0, sizeof *meta);
    meta->step = -1;
    char cdir[GT_PATH_MAX + 32], path[GT_PATH_MAX + 64], shown[PATH_SHOWN];
    snprintf(cdir, sizeof cdir, "%s/" RUN_FOLDER_CKPTS, dir);
    int64_t *steps = NULL;
    size_t n = 0;
    if (ckpt_list_steps(cdir, &steps, &n) < 0) return -1;
    if (n == 0) {
        fprintf(out, "checkpoints: none\n");
        fprintf(out, "resume: nothing to resume from\n");
        free(steps);
        return 0;
    }
    const int64_t highest = steps[0]; /* listed highest first */
    fprintf(out, "checkpoints: %zu in " RUN_FOLDER_CKPTS "/ (step%s", n, n == 1 ? "" : "s");
    /* shown lowest first: the newest STEPS_SHOWN */
    const size_t shown_n = n < STEPS_SHOWN ? n : STEPS_SHOWN;
    if (n > shown_n) fprintf(out, " ...,");
    for (size_t i = shown_n; i-- > 0;)
        fprintf(out, " %" PRId64 "%s", steps[i], i ? "," : "");
    fputc(')', out);
    free(steps);
    struct stat st;
    if (ckpt_path(cdir, highest, path, sizeof path) == 0 && stat(path, &st) == 0) {
        char size[32], when[80];
        gt_human_bytes((double)st.st_size, size, sizeof size);
        when_text(st.st_mtime, when, sizeof when);
        fprintf(out, "; the newest %s, written %s", size, when);
    }
    fputc('\n', out);
    fflush(out); /* before the warnings of checkpoints that do not verify, on stderr */
    /* as resume = auto chooses: the highest step that verifies (the others skipped with
     * a warning each) */
    const int found = ckpt_find_latest(cdir, verify, path, sizeof path);
    const char *verifies = verify ? "verifies" : "reads";
    if (found < 0) return -1;
    if (found != 1) {
        fprintf(out, "resume: none of them %s: resume = auto would refuse to start\n",
                verifies);
        fflush(out);
        gt_error("inspect: no checkpoint in %s %s (see the warnings above): resume = auto "
                 "would refuse to start", gt_printable_cap(cdir, shown, sizeof shown),
                 verifies);
        return -1;
    }
    if (ckpt_read_meta(path, meta) != 0) {
        meta->step = -1;
        return -1;
    }
    const char *base = strrchr(path, '/'); /* ckpt_<digits>.h5: printable */
    if (verify)
        fprintf(out, "resume: resume = auto continues at step %" PRId64 " from "
                     RUN_FOLDER_CKPTS "/%s (it verifies)\n", meta->step, base ? base + 1 : path);
    else
        fprintf(out, "resume: resume = auto would continue at step %" PRId64 " from "
                     RUN_FOLDER_CKPTS "/%s (its metadata reads; --verify checks every byte "
                     "as a resume does)\n", meta->step, base ? base + 1 : path);
    const int64_t run_steps = config_int(meta->config_text, "steps");
    if (run_steps > 0 && meta->step >= run_steps)
        fprintf(out, "resume: that checkpoint has all %" PRId64 " steps of its run: a resume "
                     "needs a larger steps\n", run_steps);
    if (meta->step < highest) {
        gt_error("inspect: the checkpoints of %s past step %" PRId64 " do not %s (see the "
                 "warnings above)", gt_printable_cap(cdir, shown, sizeof shown), meta->step,
                 verify ? "verify" : "read");
        return -1;
    }
    return 0;
}

int inspect_run_folder(const char *dir, int verify, FILE *out)
{
    char model[GT_PATH_MAX + 32], logp[GT_PATH_MAX + 32], part[GT_PATH_MAX + 32];
    char shown[PATH_SHOWN], log_name[PATH_SHOWN];
    static const char *const parts[] = {RUN_FOLDER_MODEL, RUN_FOLDER_LOG, RUN_FOLDER_CKPTS,
                                        RUN_FOLDER_LOCK};
    int any = 0;
    for (size_t i = 0; i < sizeof parts / sizeof *parts; i++) {
        struct stat st;
        if (snprintf(part, sizeof part, "%s/%s", dir, parts[i]) >= (int)sizeof part) {
            gt_error("inspect: the folder's path is too long");
            return -1;
        }
        any |= lstat(part, &st) == 0;
    }
    if (!any) {
        char name[PATH_SHOWN];
        gt_error("inspect: %s holds no gentrain run (no " RUN_FOLDER_MODEL ", " RUN_FOLDER_LOG
                 ", " RUN_FOLDER_CKPTS "/ or " RUN_FOLDER_LOCK "): give a run folder (the "
                 "config key out) or an HDF5 file", gt_printable_cap(dir, name, sizeof name));
        return -1;
    }
    fprintf(out, "run folder: %s\n", gt_printable_cap(dir, shown, sizeof shown));
    const int running = print_state(out, dir) == RUN_LOCK_HELD;

    int rc = 0;
    ckpt_meta meta;
    if (print_checkpoints(out, dir, verify, &meta) != 0) rc = -1;
    fflush(out);

    snprintf(model, sizeof model, "%s/" RUN_FOLDER_MODEL, dir);
    struct stat model_st;
    gpt_shape shape;
    int64_t model_step = -1;
    char *model_config = NULL;
    const int has_model = stat(model, &model_st) == 0;
    if (has_model && h5model_read_meta(model, &shape, &model_step, &model_config) != 0) {
        model_step = -1;
        rc = -1;
    }
    /* the newer of the two says how many steps the run trains and where it logs */
    const char *config = meta.step >= model_step ? meta.config_text : model_config;
    if (log_path(dir, config, logp, sizeof logp, log_name, sizeof log_name) == 0) {
        if (print_log(out, logp, log_name, config_int(config, "steps"), running) != 0)
            rc = -1;
    } else {
        fprintf(out, "log: none (the run was given log = none)\n");
    }
    if (model_step >= 0) {
        char when[80];
        when_text(model_st.st_mtime, when, sizeof when);
        fprintf(out, "model: " RUN_FOLDER_MODEL ": step %" PRId64 ", n_layer %d, n_head %d, "
                     "n_embd %d, block_size %d, vocab_size %d; written %s\n",
                model_step, shape.n_layer, shape.n_head, shape.n_embd, shape.block_size,
                shape.vocab_size, when);
    } else if (has_model) {
        fprintf(out, "model: " RUN_FOLDER_MODEL " does not read as a gentrain model (the "
                     "error says why)\n");
    } else {
        fprintf(out, "model: none yet (a run writes " RUN_FOLDER_MODEL " when it ends)\n");
    }
    ckpt_meta_free(&meta);
    free(model_config);
    return rc;
}
