/* team — see team.h. The measurement is Linux's: each thread's schedstat gives the
 * nanoseconds it spent runnable but waiting for a CPU; another process on its core makes
 * that grow at up to half the wall-clock rate, a quiet core hardly at all. */
#define _GNU_SOURCE
#include "team.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cpu_features.h" /* cpu_thread_binding */
#include "util.h" /* defines: gt_now, gt_set_team_threads, gt_warn, gt_note, gt_calloc */

#ifdef _OPENMP
#include <omp.h>
#else
static int omp_get_thread_num(void) { return 0; }
#endif

enum { TEAM_MAX_NOTES = 8 }; /* team changes said on stderr; the log has them all */

struct team {
    int max;              /* threads given */
    int n;                /* threads now */
    team_policy policy;
    int changes;
    /* the window being measured: its start and each thread's run delay then */
    double window_t0;
    long long *tid;       /* [max] the OS thread of each team member */
    double *delay0;       /* [max] seconds waited for a CPU at the window's start */
    double backoff, next_probe;
    /* GENTRAIN_TEAM_SCHEDULE: sizes per step, repeated (0 entries: none) */
    int *schedule, n_schedule;
};

/* Seconds thread `tid` of this process has waited, runnable, for a CPU; -1 when the
 * kernel does not say (no schedstat). */
static double run_delay(long long tid)
{
    char path[64], buf[128];
    snprintf(path, sizeof path, "/proc/self/task/%lld/schedstat", tid);
    const int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1.0;
    const ssize_t got = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (got <= 0) return -1.0;
    buf[got] = '\0';
    unsigned long long on_cpu = 0, waited = 0;
    if (sscanf(buf, "%llu %llu", &on_cpu, &waited) != 2) return -1.0;
    return (double)waited * 1e-9;
}

/* The OS thread of each of the n members of the next team (n set by gt_set_team_threads):
 * libgomp keeps a team's threads across regions while its size stays. */
static void collect_tids(team *t, int n)
{
    long long *tid = t->tid;
#pragma omp parallel num_threads(n)
    tid[omp_get_thread_num()] = (long long)syscall(SYS_gettid);
}

/* The largest fraction of `seconds` any of the n members waited, from delay0; -1 when
 * a delay cannot be read. Refreshes delay0 to now. */
static double worst_wait(team *t, int n, double seconds)
{
    double worst = 0.0;
    for (int i = 0; i < n; i++) {
        const double d = run_delay(t->tid[i]);
        if (d < 0) return -1.0;
        const double f = (d - t->delay0[i]) / seconds;
        if (f > worst) worst = f;
        t->delay0[i] = d;
    }
    return worst;
}

static void start_window(team *t)
{
    collect_tids(t, t->n);
    for (int i = 0; i < t->n; i++) t->delay0[i] = run_delay(t->tid[i]);
    t->window_t0 = gt_now();
}

/* With OpenMP binding on, the threads of a smaller team run on any CPU of the places,
 * so the one bound to the shared CPU can leave it as an unbound thread would (bound, a
 * step on 2 cores with a busy process on the first took 4x as long as quiet, not 1.9x);
 * the whole team goes back to its places. */
static void set_binding(int n, int whole)
{
#pragma omp parallel num_threads(n)
    cpu_thread_binding(whole);
}

static void set_size(team *t, int n, long long step, const char *why)
{
    t->n = gt_set_team_threads(n);
    set_binding(t->n, t->n == t->max);
    t->changes++;
    if (t->changes <= TEAM_MAX_NOTES)
        gt_note("threads: %d of %d from step %lld (%s)%s", t->n, t->max, step + 1, why,
                t->changes == TEAM_MAX_NOTES ? "; further changes are in the log only" : "");
}

/* GENTRAIN_TEAM_SCHEDULE as sizes in 1..max; 0 = unset, -1 = malformed (reported) */
static int read_schedule(team *t)
{
    const char *e = getenv("GENTRAIN_TEAM_SCHEDULE");
    if (!e || !*e) return 0;
    int count = 1;
    for (const char *p = e; *p; p++) count += *p == ',';
    t->schedule = gt_calloc((size_t)count * sizeof *t->schedule, "thread schedule");
    if (!t->schedule) return -1;
    const char *p = e;
    for (int i = 0; i < count; i++) {
        char *end;
        const long v = strtol(p, &end, 10);
        if (end == p || v < 1 || v > t->max || (*end != ',' && *end != '\0')) {
            gt_error("GENTRAIN_TEAM_SCHEDULE=%.60s: want thread counts from 1 to %d, "
                     "separated by commas", e, t->max);
            return -1;
        }
        t->schedule[i] = (int)v;
        p = end + 1;
    }
    t->n_schedule = count;
    return 1;
}

team *team_create(int threads, team_policy policy)
{
    team *t = gt_calloc(sizeof *t, "thread team");
    if (!t) return NULL;
    t->max = t->n = threads > 0 ? threads : 1;
    t->policy = policy;
    t->backoff = TEAM_BACKOFF_MIN_S;
    t->tid = gt_calloc((size_t)t->max * sizeof *t->tid, "thread team");
    t->delay0 = gt_calloc((size_t)t->max * sizeof *t->delay0, "thread team");
    if (!t->tid || !t->delay0 || read_schedule(t) < 0) {
        team_free(t);
        return NULL;
    }
    if (t->n_schedule > 0) {
        t->n = gt_set_team_threads(t->schedule[0]);
        return t;
    }
    if (t->policy == TEAM_ADAPTIVE && t->max > 1) {
        start_window(t);
        if (run_delay(t->tid[0]) < 0) {
            gt_warn("threads: this system does not report how long threads wait for a CPU "
                    "(no schedstat); the team stays at %d threads", t->max);
            t->policy = TEAM_FIXED;
        }
    }
    return t;
}

void team_free(team *t)
{
    if (!t) return;
    free(t->tid);
    free(t->delay0);
    free(t->schedule);
    free(t);
}

/* A spin of TEAM_PROBE_S on n threads: 1 when none of them waited for a CPU. */
static int probe(team *t, int n)
{
    gt_set_team_threads(n);
    collect_tids(t, n);
    for (int i = 0; i < n; i++) t->delay0[i] = run_delay(t->tid[i]);
    const double t0 = gt_now();
#pragma omp parallel num_threads(n)
    {
        volatile double sink = 0.0;
        while (gt_now() - t0 < TEAM_PROBE_S) sink += 1.0;
        (void)sink;
    }
    const double w = worst_wait(t, n, gt_now() - t0);
    return w >= 0.0 && w < TEAM_SHARED / 2;
}

int team_after_step(team *t, long long next_step)
{
    if (t->n_schedule > 0) {
        const int want = t->schedule[next_step % t->n_schedule];
        if (want != t->n) t->n = gt_set_team_threads(want);
        return t->n;
    }
    if (t->policy != TEAM_ADAPTIVE || t->max <= 1) return t->n;
    const double now = gt_now();
    if (now - t->window_t0 < TEAM_WINDOW_S) return t->n;
    const double w = worst_wait(t, t->n, now - t->window_t0);
    if (w >= TEAM_SHARED && t->n > 1) {
        set_size(t, t->n - 1, next_step, "another process shares a core");
        t->next_probe = now + t->backoff;
    } else if (t->n < t->max && now >= t->next_probe) {
        if (probe(t, t->n + 1)) {
            set_size(t, t->n + 1, next_step, "a core is free again");
            t->backoff = TEAM_BACKOFF_MIN_S;
        } else {
            gt_set_team_threads(t->n);
            t->backoff = t->backoff * 2 > TEAM_BACKOFF_MAX_S ? TEAM_BACKOFF_MAX_S
                                                             : t->backoff * 2;
        }
        t->next_probe = gt_now() + t->backoff;
    }
    start_window(t);
    return t->n;
}

int team_size(const team *t) { return t->n; }
