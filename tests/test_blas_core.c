/* test_blas_core — the table behind the OpenBLAS core check (src/kernels/blas_core.c):
 *   (a) every core gentrain may ask for is known at the level it is asked for, so a
 *       correction can never ask for a core of a lower level than the CPU's;
 *   (b) the names OpenBLAS reports are read case-insensitively, SSE-only cores sit at
 *       the generic level and a name the table lacks is "unknown" (-1), which the check
 *       leaves alone;
 *   (c) this CPU's level is one of the defined ones and its name prints;
 *   (d) the measured multiply-add peak is positive and grows with a second thread,
 *       threads beyond the CPUs add nothing to it; held to AVX2 (or generic code) it
 *       measures that unit's loop.
 * The re-execution itself is tested end to end by tests/test_blas_fixup.sh. */
#include "blas_core.h"
#include "cpu_features.h"
#include "testutil.h"

int main(void)
{
    for (int l = CPU_ISA_AVX; l <= CPU_ISA_AVX512_BF16; l++) {
        const char *c = blas_core_for_level((enum cpu_isa)l);
        TU_CHECK(c && blas_core_level(c) == l, "level %s asks for core %s, of that level",
                 cpu_isa_name((enum cpu_isa)l), c ? c : "(none)");
    }
    TU_CHECK(blas_core_for_level(CPU_ISA_GENERIC) == NULL, "generic CPU: nothing to ask for");
    TU_CHECK(blas_core_level("Prescott") == CPU_ISA_GENERIC, "Prescott is generic");
    TU_CHECK(blas_core_level("NEHALEM") == CPU_ISA_GENERIC, "NEHALEM (any case) is generic");
    TU_CHECK(blas_core_level("haswell") == CPU_ISA_AVX2, "haswell is AVX2");
    TU_CHECK(blas_core_level("Zen") == CPU_ISA_AVX2, "Zen is AVX2");
    TU_CHECK(blas_core_level("SkylakeX") == CPU_ISA_AVX512, "SkylakeX is AVX-512");
    TU_CHECK(blas_core_level("SapphireRapids") == CPU_ISA_AVX512_BF16,
             "SapphireRapids is AVX-512+BF16");
    TU_CHECK(blas_core_level("NotACore") == -1, "an unknown name is -1");
    TU_CHECK(blas_core_level(NULL) == -1, "no name is -1");

    enum cpu_isa l = cpu_isa_level();
    char model[128];
    printf("     CPU: %s, level %s, OpenBLAS core %s\n", cpu_model_name(model, sizeof model),
           cpu_isa_name(l), blas_core_name());
    TU_CHECK(l >= CPU_ISA_GENERIC && l <= CPU_ISA_AVX512_BF16, "CPU level %d is defined",
             (int)l);
    TU_CHECK(cpu_isa_level() == l, "the level is the same on a second call");

    double p1 = cpu_fma_peak_gflops(1), p2 = cpu_fma_peak_gflops(2);
    printf("     measured FMA peak: %.1f GFLOP/s on 1 thread, %.1f on 2\n", p1, p2);
    TU_CHECK(p1 > 0.5, "1-thread peak %.1f GFLOP/s is positive", p1);
    /* two threads never measure less than most of one (time-sharing on 1 core halves
     * each thread's rate, so the sum stays near the 1-thread figure) */
    TU_CHECK(p2 > 0.6 * p1, "2-thread peak %.1f >= 0.6 x the 1-thread peak", p2);
    /* far more threads than CPUs add nothing: the CPUs' rate, not each thread's best
     * moment summed (that read 5-7x the CPUs' rate with 64 threads on 2 CPUs). The
     * bound leaves room for a 1-thread figure measured while other tests ran. */
    const int cpus = cpu_available_count();
    const double p64 = cpu_fma_peak_gflops(64);
    printf("     %d CPUs available; 64 threads measure %.1f GFLOP/s\n", cpus, p64);
    TU_CHECK(cpus >= 1, "at least one CPU is available (%d)", cpus);
    TU_CHECK(p64 > 0.5 && p64 <= 2.0 * cpus * p1,
             "64 threads on %d CPUs: %.1f GFLOP/s, within 2 x CPUs x the 1-thread peak", cpus,
             p64);

    /* a run held to narrower vectors peaks at their rate: the level follows the cap
     * (never above the CPU's), and the capped figure is positive */
    const enum cpu_isa fma_top = l >= CPU_ISA_AVX512 ? CPU_ISA_AVX512
                                 : l >= CPU_ISA_AVX2 ? CPU_ISA_AVX2
                                                     : CPU_ISA_GENERIC;
    TU_CHECK(cpu_fma_level_upto(CPU_ISA_AVX512_BF16) == fma_top,
             "uncapped, the FMA peak is the CPU's widest unit (level %d)", (int)fma_top);
    TU_CHECK(cpu_fma_level_upto(CPU_ISA_AVX2) == (l >= CPU_ISA_AVX2 ? CPU_ISA_AVX2
                                                                    : CPU_ISA_GENERIC),
             "held to AVX2, the FMA peak is AVX2's (or the CPU's, below it)");
    TU_CHECK(cpu_fma_level_upto(CPU_ISA_GENERIC) == CPU_ISA_GENERIC,
             "held to generic code, the FMA peak is the generic loop's");
    const double p_avx2 = cpu_fma_peak_gflops_upto(1, CPU_ISA_AVX2);
    printf("     FMA peak held to AVX2: %.1f GFLOP/s on 1 thread\n", p_avx2);
    TU_CHECK(p_avx2 > 0.5, "the AVX2-held peak %.1f GFLOP/s is positive", p_avx2);
    return tu_failures ? 1 : 0;
}
