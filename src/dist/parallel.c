/* parallel — see parallel.h. */
#include "parallel.h"

#include <limits.h>
#include <mpi.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util.h"

static int mpi_on = 0; /* MPI mode: MPI_Init_thread done, MPI_Finalize not yet */
static int thread_multiple = 0; /* MPI gave MPI_THREAD_MULTIPLE */
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

void par_library_version(char *buf, size_t cap)
{
    char text[MPI_MAX_LIBRARY_VERSION_STRING] = "";
    int len = 0, major = 0, minor = 0;
    if (MPI_Get_library_version(text, &len) != MPI_SUCCESS) strcpy(text, "unknown MPI");
    text[strcspn(text, "\r\n")] = '\0'; /* some libraries describe themselves in lines */
    if (MPI_Get_version(&major, &minor) == MPI_SUCCESS)
        snprintf(buf, cap, "%s (MPI %d.%d)", text, major, minor);
    else
        snprintf(buf, cap, "%s", text);
}

int par_launcher_rank(void)
{
    static const char *const vars[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK",
                                       "SLURM_PROCID"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        char *end = NULL;
        long r = v ? strtol(v, &end, 10) : -1;
        if (v && end != v && r >= 0 && r <= 1L << 30) return (int)r;
    }
    return -1;
}

void par_launcher_defer_report(void)
{
    if (par_launcher_rank() <= 0) return;
    fflush(NULL);
    for (unsigned left = 3; left > 0;) left = sleep(left);
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

void par_check_mpi(int rc, const char *call)
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
    int rc = MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided);
    if (rc != MPI_SUCCESS) {
        gt_error("MPI_Init_thread failed (error %d)", rc);
        exit(1);
    }
    mpi_on = 1;
    thread_multiple = provided >= MPI_THREAD_MULTIPLE;
    par_check_mpi(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN),
              "MPI_Comm_set_errhandler");
    par_check_mpi(MPI_Comm_rank(MPI_COMM_WORLD, &g_rank), "MPI_Comm_rank");
    par_check_mpi(MPI_Comm_size(MPI_COMM_WORLD, &g_world), "MPI_Comm_size");
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

int par_thread_multiple(void) { return mpi_on && thread_multiple; }

/* This rank's place on its node and the node's ranks (-1: not asked yet). */
static int local_rank = -1, local_size = -1;

static void find_local(void)
{
    if (local_rank >= 0) return;
    if (!mpi_on) {
        local_rank = 0;
        local_size = 1;
        return;
    }
    MPI_Comm node;
    par_check_mpi(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, g_rank,
                                  MPI_INFO_NULL, &node),
              "MPI_Comm_split_type (ranks of a node)");
    par_check_mpi(MPI_Comm_rank(node, &local_rank), "MPI_Comm_rank");
    par_check_mpi(MPI_Comm_size(node, &local_size), "MPI_Comm_size");
    par_check_mpi(MPI_Comm_free(&node), "MPI_Comm_free");
}

int par_local_rank(void)
{
    find_local();
    return local_rank;
}

int par_local_size(void)
{
    find_local();
    return local_size;
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

double par_sum_double(double x)
{
    if (g_world == 1) return x;
    double s = 0.0;
    par_check_mpi(MPI_Allreduce(&x, &s, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD),
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
    par_check_mpi(MPI_Bcast(&x, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD), "MPI_Bcast");
    return x;
}

void par_sum_int64(int64_t *buf, size_t n)
{
    if (g_world == 1) return;
    for (size_t at = 0; at < n;) {
        const int m = n - at > (size_t)INT_MAX ? INT_MAX : (int)(n - at);
        par_check_mpi(MPI_Allreduce(MPI_IN_PLACE, buf + at, m, MPI_INT64_T, MPI_SUM,
                                    MPI_COMM_WORLD),
                      "MPI_Allreduce of the data files' shapes");
        at += (size_t)m;
    }
}

int par_all_ok(int ok)
{
    if (g_world == 1) return ok != 0;
    int mine = ok != 0, all = 0;
    par_check_mpi(MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD),
              "MPI_Allreduce (agreeing on success)");
    return all;
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
    par_check_mpi(MPI_Bcast(head, 3, MPI_UINT64_T, 0, MPI_COMM_WORLD), "MPI_Bcast");
    *root_n = (size_t)head[0];
    *root_h = head[2];
    if (!head[1]) return NULL;
    char *buf = malloc(*root_n + 1);
    int have = buf != NULL, all = 0;
    par_check_mpi(MPI_Allreduce(&have, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD),
              "MPI_Allreduce");
    if (!all) {
        free(buf);
        return NULL;
    }
    if (g_rank == 0) memcpy(buf, bytes, n);
    for (size_t off = 0; off < *root_n; off += PAR_CHUNK) {
        size_t len = *root_n - off < (size_t)PAR_CHUNK ? *root_n - off : (size_t)PAR_CHUNK;
        par_check_mpi(MPI_Bcast(buf + off, (int)len, MPI_CHAR, 0, MPI_COMM_WORLD), "MPI_Bcast");
    }
    buf[*root_n] = '\0';
    return buf;
}

int par_id_shared(const char *id)
{
    if (g_world == 1) return 0;
    char mine[PAR_ID_MAX] = {0};
    snprintf(mine, sizeof mine, "%s", id);
    char *all = malloc((size_t)g_world * PAR_ID_MAX);
    if (!all) par_abort("out of memory gathering the %d ranks' device ids", g_world);
    par_check_mpi(MPI_Allgather(mine, PAR_ID_MAX, MPI_CHAR, all, PAR_ID_MAX, MPI_CHAR,
                                MPI_COMM_WORLD),
                  "MPI_Allgather of the device ids");
    int shared = 0;
    for (int r = 0; r < g_world && !shared; r++)
        shared = r != g_rank && memcmp(all + (size_t)r * PAR_ID_MAX, mine, PAR_ID_MAX) == 0;
    free(all);
    return shared;
}

int par_check_same(const char *what, const void *bytes, size_t n)
{
    if (g_world == 1) return 0;
    uint64_t h = gt_hash64(bytes, n);
    /* min of h and of ~h (= ~max h) in one call. */
    uint64_t mine[2] = {h, ~h}, lo[2] = {0, 0};
    par_check_mpi(MPI_Allreduce(mine, lo, 2, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD),
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
