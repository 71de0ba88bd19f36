/* bench_allreduce — what MPI_Allreduce alone delivers between the ranks of this job,
 * on one buffer the size of a model's gradients (default 40 MB of floats).
 *
 *   mpirun -np 2 scripts/bench_allreduce [--mb 40] [--reps 10]
 *
 * Each rank fills its buffer, runs one untimed in-place MPI_SUM MPI_Allreduce, then
 * --reps timed ones, each after an MPI_Barrier so that every call starts together. Rank
 * 0 prints the median and best time, the algorithm bandwidth (bytes / time) and the
 * bus bandwidth (algorithm bandwidth x 2 (p-1)/p: what each rank's link carries in a
 * ring), as a table and as one JSON line. */
#include <mpi.h>    /* defines: MPI_Allreduce, MPI_Wtime */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
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
        } else {
            if (rank == 0)
                fprintf(stderr, "usage: bench_allreduce [--mb MB] [--reps N]\n");
            MPI_Finalize();
            return 2;
        }
    }
    if (mb <= 0 || reps < 1) {
        if (rank == 0) fprintf(stderr, "bench_allreduce: --mb and --reps must be positive\n");
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
