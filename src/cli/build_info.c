/* build_info — see build_info.h. */
#include "build_info.h"

#include <stdio.h>
#include <string.h>

#include "blas_core.h"    /* blas_build_config, blas_core_name */
#include "cpu_features.h" /* cpu_isa_level, cpu_model_name */
#include "gemm_bf16.h"    /* gemm_bf16_path_built, gemm_bf16_cpu_runs, gemm_bf16_name_of */
#include "h5util.h"       /* h5io_library */
#include "kernels_cpu.h"  /* kernels_simd_name */
#include "offload.h"      /* offload_build, offload_device_count, offload_use_device */
#include "parallel.h"     /* par_library_version */
#include "simd.h"         /* simd_kernels_of */
#include "tp_comm.h"      /* tp_comm_built, tp_comm_describe */

/* The OpenMP version this was compiled for, from its _OPENMP date. */
static const char *openmp_version(void)
{
#ifdef _OPENMP
    static const struct {
        long date;
        const char *version;
    } known[] = {{201107, "3.1"}, {201307, "4.0"}, {201511, "4.5"}, {201811, "5.0"},
                 {202011, "5.1"}, {202111, "5.2"}, {202411, "6.0"}};
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (known[i].date == (long)_OPENMP) return known[i].version;
    return "of an unlisted date";
#else
    return NULL;
#endif
}

static void print_compiler(FILE *f)
{
#if defined(__clang__)
    fprintf(f, "compiler: clang %s", __clang_version__);
#elif defined(__GNUC__)
    fprintf(f, "compiler: gcc %s", __VERSION__);
#else
    fprintf(f, "compiler: unknown");
#endif
    fprintf(f, ", C%ld", (long)(__STDC_VERSION__ / 100 % 100));
    const char *omp = openmp_version();
    if (omp)
        fprintf(f, ", OpenMP %s", omp);
    else
        fputs(", no OpenMP", f);
#if defined(__SANITIZE_ADDRESS__)
    fprintf(f, ", AddressSanitizer");
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
    fprintf(f, ", AddressSanitizer");
#endif
#endif
    fputc('\n', f);
}

/* The GPUs CUDA sees, each by name (binding to each in turn, as a rank would), or why
 * there are none. */
static void print_gpus(FILE *f)
{
    char why[256] = "", name[256];
    const int n = offload_device_count(why, sizeof why);
    if (n < 0) {
        fprintf(f, "GPUs: unusable: %s\n", why);
        return;
    }
    if (n == 0) {
        fprintf(f, "GPUs: none (%s)\n", why);
        return;
    }
    fprintf(f, "GPUs: %d", n);
    for (int i = 0; i < n; i++) {
        if (offload_use_device(i, name, sizeof name, why, sizeof why) == 0)
            fprintf(f, "%s %d: %s", i ? ";" : ":", i, name);
        else
            fprintf(f, "%s %d: %s", i ? ";" : ":", i, why);
    }
    fputc('\n', f);
}

/* The CPU, the kernels it gets, and the BF16 product paths it can run, each beside the
 * paths this build has (the compiler's; `train` picks among the BF16 paths the CPU can
 * run by their measured rates, docs/cpu-speed.md). */
static void print_cpu(FILE *f)
{
    char model[160];
    fprintf(f, "CPU: %s, %s; %d of %d CPUs available to this process\n",
            cpu_model_name(model, sizeof model), cpu_isa_name(cpu_isa_level()),
            cpu_available_count(), cpu_online_count());
    /* a vector path this build lacks has the portable table (simd.h) */
    fprintf(f, "kernels: %s (built: portable", kernels_simd_name());
    for (enum simd_path p = SIMD_AVX2; p <= SIMD_AVX512; p++)
        if (simd_kernels_of(p) != simd_kernels_of(SIMD_PORTABLE))
            fprintf(f, ", %s", simd_kernels_of(p)->name);
    fputs(")\n", f);
    /* widest first; the emulated twin of the tiles runs anywhere */
    const enum gemm_bf16_path paths[] = {GEMM_BF16_AMX, GEMM_BF16_AVX512, GEMM_BF16_PORTABLE};
    fputs("bf16 products: this CPU can run", f);
    const char *sep = " ";
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++)
        if (gemm_bf16_cpu_runs(paths[i])) {
            fprintf(f, "%s%s", sep, gemm_bf16_name_of(paths[i]));
            sep = ", ";
        }
    fputs(" (built: ", f);
    fputs(gemm_bf16_path_built(GEMM_BF16_AMX) ? "amx-bf16 and its emulated twin"
                                               : gemm_bf16_name_of(GEMM_BF16_AMX_EMULATED),
          f);
    for (size_t i = 1; i < sizeof paths / sizeof paths[0]; i++)
        if (gemm_bf16_path_built(paths[i])) fprintf(f, ", %s", gemm_bf16_name_of(paths[i]));
    fputs(")\n", f);
}

void build_info_print(FILE *f, const char *version)
{
    char line[512];
    fprintf(f, "gentrain %s\n", version);
    print_compiler(f);
    par_library_version(line, sizeof line);
    fprintf(f, "MPI: %s\n", line);
    h5io_library(line, sizeof line);
    fprintf(f, "HDF5: %s\n", line);
    fprintf(f, "BLAS: %s; core %s\n", blas_build_config(), blas_core_name());
    offload_build(line, sizeof line);
    fprintf(f, "CUDA: %s\n", line);
    if (tp_comm_built())
        tp_comm_describe(line, sizeof line);
    else
        snprintf(line, sizeof line, "not built");
    /* tp_comm_describe names the library: "NCCL 2.28.9" */
    fprintf(f, "NCCL: %s\n", strncmp(line, "NCCL ", 5) == 0 ? line + 5 : line);
    print_gpus(f);
    print_cpu(f);
}
