/* bench_allreduce — what MPI_Allreduce alone delivers between the ranks of this job,
 * on one buffer the size of a model's gradients (default 40 MB of floats).
 *
 *   mpirun -np 2 scripts/bench_allreduce [--mb 40] [--reps 10] [--pingpong]
 *                                         [--thread-multiple]
 *
 * Each rank fills its buffer, runs one untimed in-place MPI_SUM MPI_Allreduce, then
 * --reps timed ones, each after an MPI_Barrier so that every call starts together. Rank
 * 0 prints the median and best time, the algorithm bandwidth (bytes / time) and the
 * bus bandwidth (algorithm bandwidth x 2 (p-1)/p: what each rank's link carries in a
 * ring), as a table and as one JSON line.
 *
 * --pingpong: the link between ranks 0 and 1 instead: a 1 kB message sent back and
 * forth 50 times (after one untimed), then the --mb buffer --reps times; rank 0 prints
 * the median one-way time of each (half the round trip; and the fastest small one) and
 * the bandwidth the difference gives (scripts/netns-plan.sh sets them beside what tc
 * set).
 * --thread-multiple: MPI initialised at MPI_THREAD_MULTIPLE, as gentrain does. */
#include <mpi.h>    /* defines: MPI_Allreduce, MPI_Wtime */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Median one-way seconds of n floats between ranks 0 and 1 (rank 0's round trip / 2;
 * the other ranks wait), over reps after one untimed round trip; the fastest in *best. */
static double pingpong(float *buf, size_t n, int reps, int rank, double *t, double *best)
{
    for (int r = -1; r < reps; r++) {
        MPI_Barrier(MPI_COMM_WORLD);
        const double t0 = MPI_Wtime();
        if (rank == 0) {
            MPI_Send(buf, (int)n, MPI_FLOAT, 1, 5, MPI_COMM_WORLD);
            MPI_Recv(buf, (int)n, MPI_FLOAT, 1, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else if (rank == 1) {
            MPI_Recv(buf, (int)n, MPI_FLOAT, 0, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(buf, (int)n, MPI_FLOAT, 0, 5, MPI_COMM_WORLD);
        }
        if (r >= 0) t[r] = (MPI_Wtime() - t0) / 2.0;
    }
    qsort(t, (size_t)reps, sizeof *t, cmp_double);
    *best = t[0];
    return t[reps / 2];
}

/* The --pingpong report (rank 0). */
static void report_pingpong(float *buf, size_t n, int reps, int rank, int multiple)
{
    double *t = malloc(sizeof(double) * (size_t)(reps > 50 ? reps : 50));
    if (!t) MPI_Abort(MPI_COMM_WORLD, 1);
    double small_best, large_best;
    const double small = pingpong(buf, 256, 50, rank, t, &small_best);
    const double large = pingpong(buf, n, reps, rank, t, &large_best);
    const double bytes = (double)n * sizeof(float);
    const double bw = bytes / (large - small > 1e-9 ? large - small : large);
    if (rank == 0) {
        printf("ping-pong between ranks 0 and 1 (MPI_THREAD_%s): 1 kB one way %.3f ms "
               "(fastest %.3f); %.1f MB one way %.2f ms: %.2f MB/s\n",
               multiple ? "MULTIPLE" : "SINGLE", small * 1e3, small_best * 1e3, bytes / 1e6,
               large * 1e3, bw / 1e6);
        printf("{\"bench\":\"pingpong\",\"thread_multiple\":%d,\"small_bytes\":1024,"
               "\"small_oneway_ms\":%.4f,\"small_best_ms\":%.4f,\"bytes\":%.0f,"
               "\"oneway_ms\":%.3f,\"bw_gbs\":%.5f}\n",
               multiple, small * 1e3, small_best * 1e3, bytes, large * 1e3, bw / 1e9);
    }
    free(t);
}

int main(int argc, char **argv)
{
    int multiple = 0, ping = 0, provided = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--thread-multiple") == 0) multiple = 1;
        if (strcmp(argv[i], "--pingpong") == 0) ping = 1;
    }
    if (multiple)
        MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    else
        MPI_Init(&argc, &argv);
    int rank = 0, world = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    double mb = 40.0;
    int reps = 10;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--mb") == 0 && i + 1 < argc) {
            mb = atof(argv[++i]);
        } else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc) {
            reps = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--thread-multiple") != 0 &&
                   strcmp(argv[i], "--pingpong") != 0) {
            if (rank == 0)
                fprintf(stderr, "usage: bench_allreduce [--mb MB] [--reps N] [--pingpong] "
                                "[--thread-multiple]\n");
            MPI_Finalize();
            return 2;
        }
    }
    if (mb <= 0 || reps < 1 || (ping && world < 2)) {
        if (rank == 0)
            fprintf(stderr, "bench_allreduce: --mb and --reps must be positive%s\n",
                    ping && world < 2 ? "; --pingpong needs 2 ranks" : "");
        MPI_Finalize();
        return 2;
    }
    const size_t n = (size_t)(mb * 1e6 / sizeof(float));
    float *buf = malloc(n * sizeof(float));
    double *t = malloc((size_t)reps * sizeof(double));
    if (!buf || !t || n > (size_t)2147483647) {
        fprintf(stderr, "bench_allreduce: rank %d: cannot allocate %.1f MB\n", rank, mb);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (size_t i = 0; i < n; i++) buf[i] = (float)((i + (size_t)rank) % 97) * 1e-3f;
    if (ping) {
        report_pingpong(buf, n < 256 ? 256 : n, reps, rank, multiple);
        free(buf);
        free(t);
        MPI_Finalize();
        return 0;
    }
    MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    for (int r = 0; r < reps; r++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        double dt = MPI_Wtime() - t0, slowest = 0.0;
        MPI_Allreduce(&dt, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        t[r] = slowest;
    }
    if (rank == 0) {
        qsort(t, (size_t)reps, sizeof *t, cmp_double);
        const double med = t[reps / 2], best = t[0], bytes = (double)n * sizeof(float);
        const double algbw = bytes / med / 1e9, busbw = algbw * 2.0 * (world - 1) / world;
        printf("%-6s %10s %10s %10s %12s %12s\n", "ranks", "MB", "median ms", "best ms",
               "algbw GB/s", "busbw GB/s");
        printf("%-6d %10.1f %10.2f %10.2f %12.3f %12.3f\n", world, bytes / 1e6, med * 1e3,
               best * 1e3, algbw, busbw);
        printf("{\"bench\":\"allreduce\",\"ranks\":%d,\"bytes\":%.0f,\"reps\":%d,"
               "\"median_ms\":%.3f,\"best_ms\":%.3f,\"algbw_gbs\":%.4f,\"busbw_gbs\":%.4f}\n",
               world, bytes, reps, med * 1e3, best * 1e3, algbw, busbw);
    }
    free(buf);
    free(t);
    MPI_Finalize();
    return 0;
}
