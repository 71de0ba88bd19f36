/* omp_regions — counts a process's OpenMP parallel regions and barriers, for
 * scripts/count-regions.sh. Preload it (LD_PRELOAD=omp_regions.so) into a program built
 * with GCC's OpenMP: it stands in front of libgomp's GOMP_parallel (every
 * `#pragma omp parallel`, gentrain's and the OpenMP build of OpenBLAS's alike) and
 * GOMP_barrier (every `#pragma omp barrier`, and the implicit barrier closing an
 * `omp for` or `single` without nowait inside a region), and at exit writes
 *     omp_regions: parallel P barrier B
 * to the file named by OMP_REGIONS_OUT (or stderr). A barrier is counted once, by the
 * team's thread 0, not once per thread. The end of every region is a barrier too
 * (the join), so a step's barriers are P + B.
 *
 * Why a preload and not OMPT: GCC's libgomp has no OMPT; its entry points are stable
 * ABI (GOMP_1.0, GOMP_4.0). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#include <omp.h>

typedef void (*parallel_fn)(void (*)(void *), void *, unsigned, unsigned);
typedef void (*barrier_fn)(void);

static unsigned long long parallels, barriers;

void GOMP_parallel(void (*fn)(void *), void *data, unsigned num_threads, unsigned flags)
{
    static parallel_fn real;
    if (!real) real = (parallel_fn)dlsym(RTLD_NEXT, "GOMP_parallel");
    if (!real) {
        fprintf(stderr, "omp_regions: libgomp's GOMP_parallel not found\n");
        abort();
    }
    __atomic_add_fetch(&parallels, 1, __ATOMIC_RELAXED);
    real(fn, data, num_threads, flags);
}

void GOMP_barrier(void)
{
    static barrier_fn real;
    if (!real) real = (barrier_fn)dlsym(RTLD_NEXT, "GOMP_barrier");
    if (!real) {
        fprintf(stderr, "omp_regions: libgomp's GOMP_barrier not found\n");
        abort();
    }
    if (omp_get_thread_num() == 0) __atomic_add_fetch(&barriers, 1, __ATOMIC_RELAXED);
    real();
}

__attribute__((destructor)) static void report(void)
{
    const char *path = getenv("OMP_REGIONS_OUT");
    FILE *f = path && *path ? fopen(path, "w") : stderr;
    if (!f) {
        perror("omp_regions: OMP_REGIONS_OUT");
        return;
    }
    fprintf(f, "omp_regions: parallel %llu barrier %llu\n", parallels, barriers);
    if (f != stderr && fclose(f) != 0) perror("omp_regions: OMP_REGIONS_OUT");
}
