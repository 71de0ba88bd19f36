/* build_info — see build_info.h. */
#include "build_info.h"

#include <stdio.h>
#include <string.h>

#include "blas_core.h"    /* blas_build_config, blas_core_name */
#include "cpu_features.h" /* cpu_isa_level, cpu_has_amx_bf16, cpu_model_name */
#include "h5util.h"       /* h5io_library */
#include "kernels_cpu.h"  /* kernels_simd_name */
#include "offload.h"      /* offload_build, offload_device_count, offload_use_device */
#include "parallel.h"     /* par_library_version */
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
    fprintf(f, omp ? ", OpenMP %s" : ", no OpenMP", omp);
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

/* The CPU, the kernels it gets, and the BF16 product paths it can run (of those built:
 * every path is built everywhere; `train` picks among the ones the CPU can run by their
 * measured rates, docs/cpu-speed.md). */
static void print_cpu(FILE *f)
{
    char model[160];
    const enum cpu_isa level = cpu_isa_level();
    fprintf(f, "CPU: %s, %s; %d of %d CPUs available to this process\n",
            cpu_model_name(model, sizeof model), cpu_isa_name(level), cpu_available_count(),
            cpu_online_count());
    fprintf(f, "kernels: %s (built: portable, avx2, avx512)\n", kernels_simd_name());
    fprintf(f, "bf16 products: this CPU can run %s%sportable (built: amx-bf16 and its "
            "emulated twin, avx512-bf16, portable)\n",
            cpu_has_amx_bf16() ? "amx-bf16, " : "",
            level >= CPU_ISA_AVX512_BF16 ? "avx512-bf16, " : "");
}

int build_info_print(FILE *f, const char *version)
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
    return 0;
}
