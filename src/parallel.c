/* parallel — see parallel.h. */
#include "parallel.h"

#include <limits.h>
#include <mpi.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

static int mpi_on = 0; /* MPI mode: MPI_Init_thread done, MPI_Finalize not yet */
static int g_rank = 0, g_world = 1;

/* Largest count handed to one MPI call: well inside an int, and a multiple of 64. */
enum { PAR_CHUNK = 1 << 28 };

int par_launched(void)
{
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK",
                                       "SLURM_STEP_NUM_TASKS"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        if (getenv(vars[i])) return 1;
    return 0;
}

_Noreturn static void abort_now(void)
{
    fflush(stdout);
    fflush(stderr);
    if (mpi_on) MPI_Abort(MPI_COMM_WORLD, 1);
    exit(1);
}

_Noreturn void par_abort_reported(void) { abort_now(); }

_Noreturn void par_abort(const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    gt_error("%s", msg);
    abort_now();
}

/* Ends the job when an MPI call failed. */
static void check_mpi(int rc, const char *call)
{
    if (rc == MPI_SUCCESS) return;
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) snprintf(text, sizeof text, "?");
    par_abort("%s failed: %s (error %d)", call, text, rc);
}

/* World size the launcher announced, or 0 when it says nothing. mpirun's own variable
 * wins over the scheduler's (mpirun inside a Slurm job may start fewer ranks than the
 * step has tasks). */
static long launcher_world(const char **var, const char **value)
{
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE",
                                       "SLURM_STEP_NUM_TASKS"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        if (!v) continue;
        char *end = NULL;
        long n = strtol(v, &end, 10);
        if (end == v) continue;
        *var = vars[i];
        *value = v;
        return n;
    }
    return 0;
}

void par_init(int *argc, char ***argv)
{
    if (mpi_on || !par_launched()) return;
    int provided = 0;
    int rc = MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
    if (rc != MPI_SUCCESS) {
        gt_error("MPI_Init_thread failed (error %d)", rc);
        exit(1);
    }
    mpi_on = 1;
    check_mpi(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN),
              "MPI_Comm_set_errhandler");
    check_mpi(MPI_Comm_rank(MPI_COMM_WORLD, &g_rank), "MPI_Comm_rank");
    check_mpi(MPI_Comm_size(MPI_COMM_WORLD, &g_world), "MPI_Comm_size");
    if (g_world > 1) gt_set_report_rank(g_rank);
    if (provided < MPI_THREAD_FUNNELED)
        par_abort("MPI gives thread level %d, below MPI_THREAD_FUNNELED (%d), which the "
                  "data loader thread needs", provided, MPI_THREAD_FUNNELED);
    const char *var = NULL, *value = NULL;
    long announced = launcher_world(&var, &value);
    if (g_world == 1 && announced > 1)
        par_abort("launched as %ld processes (%s=%s), but MPI sees a world of 1 rank: "
                  "each would train its own model; start with mpirun, or srun --mpi=pmix",
                  announced, var, value);
}

void par_finalize(void)
{
    if (!mpi_on) return;
    fflush(stdout);
    MPI_Finalize();
    mpi_on = 0;
}

int par_rank(void) { return g_rank; }
int par_world(void) { return g_world; }
int par_is_root(void) { return g_rank == 0; }

void par_printf(const char *fmt, ...)
{
    if (g_rank != 0) return;
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
}

void par_allreduce_mean(float *buf, size_t n)
{
    if (g_world == 1) return;
    for (size_t off = 0; off < n; off += PAR_CHUNK) {
        size_t len = n - off < (size_t)PAR_CHUNK ? n - off : (size_t)PAR_CHUNK;
        check_mpi(MPI_Allreduce(MPI_IN_PLACE, buf + off, (int)len, MPI_FLOAT, MPI_SUM,
                                MPI_COMM_WORLD),
                  "MPI_Allreduce of the gradients");
    }
    const float scale = 1.0f / (float)g_world;
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) buf[i] *= scale;
}

double par_sum_double(double x)
{
    if (g_world == 1) return x;
    double s = 0.0;
    check_mpi(MPI_Allreduce(&x, &s, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD),
              "MPI_Allreduce of a metric");
    return s;
}

double par_mean_double(double x)
{
    if (g_world == 1) return x;
    return par_sum_double(x) / g_world;
}

double par_bcast_double(double x)
{
    if (g_world == 1) return x;
    check_mpi(MPI_Bcast(&x, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD), "MPI_Bcast");
    return x;
}

int par_all_ok(int ok)
{
    if (g_world == 1) return ok != 0;
    int mine = ok != 0, all = 0;
    check_mpi(MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD),
              "MPI_Allreduce (agreeing on success)");
    return all;
}

/* 64-bit FNV-1a. */
static uint64_t hash_bytes(const void *bytes, size_t n)
{
    const unsigned char *p = bytes;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

/* Text that a line-by-line comparison can show: printable, tabs and newlines. */
static int is_text(const unsigned char *p, size_t n)
{
    if (n > ((size_t)1 << 20)) return 0;
    for (size_t i = 0; i < n; i++)
        if ((p[i] < 0x20 && p[i] != '\n' && p[i] != '\t') || p[i] == 0x7f) return 0;
    return 1;
}

/* Copies line `start` of text[n] (up to its newline) into out[cap], '' at the end. */
static void line_at(const char *text, size_t n, size_t start, char *out, size_t cap)
{
    size_t len = 0;
    while (start + len < n && text[start + len] != '\n') len++;
    if (len >= cap) len = cap - 1;
    memcpy(out, text + start, len);
    out[len] = '\0';
}

/* Broadcasts rank 0's hash and, when they are text, its bytes (chunked). Returns a
 * malloc'd copy of rank 0's text on every rank, or NULL (not text, or out of memory). */
static char *bcast_root_text(const void *bytes, size_t n, uint64_t h, size_t *root_n,
                             uint64_t *root_h)
{
    uint64_t head[3] = {n, is_text(bytes, n), h};
    check_mpi(MPI_Bcast(head, 3, MPI_UINT64_T, 0, MPI_COMM_WORLD), "MPI_Bcast");
    *root_n = (size_t)head[0];
    *root_h = head[2];
    if (!head[1]) return NULL;
    char *buf = malloc(*root_n + 1);
    int have = buf != NULL, all = 0;
    check_mpi(MPI_Allreduce(&have, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD),
              "MPI_Allreduce");
    if (!all) {
        free(buf);
        return NULL;
    }
    if (g_rank == 0) memcpy(buf, bytes, n);
    for (size_t off = 0; off < *root_n; off += PAR_CHUNK) {
        size_t len = *root_n - off < (size_t)PAR_CHUNK ? *root_n - off : (size_t)PAR_CHUNK;
        check_mpi(MPI_Bcast(buf + off, (int)len, MPI_CHAR, 0, MPI_COMM_WORLD), "MPI_Bcast");
    }
    buf[*root_n] = '\0';
    return buf;
}

int par_check_same(const char *what, const void *bytes, size_t n)
{
    if (g_world == 1) return 0;
    uint64_t h = hash_bytes(bytes, n);
    /* min of h and of ~h (= ~max h) in one call. */
    uint64_t mine[2] = {h, ~h}, lo[2] = {0, 0};
    check_mpi(MPI_Allreduce(mine, lo, 2, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD),
              "MPI_Allreduce of a hash");
    if (lo[0] == ~lo[1]) return 0;

    /* Every rank says something, so whichever lines reach the user name the cause. */
    size_t root_n = 0;
    uint64_t root_h = 0;
    char *root = bcast_root_text(bytes, n, h, &root_n, &root_h);
    const char *mine_text = bytes;
    if (g_rank == 0 || h == root_h) {
        gt_error("the %s differs between ranks (this rank's is the same as rank 0's; "
                 "the other ranks' lines show the difference)", what);
    } else if (root && is_text(bytes, n)) {
        size_t i = 0, start = 0; /* start of the first line that differs */
        while (i < n && i < root_n && mine_text[i] == root[i]) {
            if (mine_text[i] == '\n') start = i + 1;
            i++;
        }
        char here[160], there[160];
        line_at(mine_text, n, start, here, sizeof here);
        line_at(root, root_n, start, there, sizeof there);
        gt_error("the %s differs between ranks: '%s' here, '%s' on rank 0", what, here,
                 there);
    } else {
        gt_error("the %s differs between ranks: not the same as rank 0's (hash %016llx "
                 "here, %016llx on rank 0)", what, (unsigned long long)h,
                 (unsigned long long)root_h);
    }
    free(root);
    return -1;
}
