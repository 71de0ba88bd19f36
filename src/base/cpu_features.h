/* cpu_features — what this x86 CPU (and the OS) lets gentrain run: the vector ISA
 * levels its kernel paths are chosen by, AMX tiles, and measured peaks for MFU.
 *
 * Contract:
 *  - cpu_isa_level() is the widest level whose instructions both the CPU has and the
 *    OS saves the registers of (XCR0), so a path of that level can run. It is computed
 *    once; every call returns the same answer. On a non-x86 build it is CPU_ISA_GENERIC.
 *  - Levels are ordered: a CPU at a level can run every path of a lower one.
 *  - cpu_has_amx_bf16() checks CPUID (AMX-TILE, AMX-BF16), XCR0 (the OS enabled
 *    the tile state, bits 17 and 18) and the tile shapes (CPUID 0x1D, 0x1E), then
 *    asks Linux for the tile data (arch_prctl), which a process must do before its
 *    first tile instruction; it returns 1 only when that permission was granted (for
 *    the whole process). Computed once.
 *  - cpu_fma_peak_gflops() measures, never guesses: `threads` threads (no more than
 *    cpu_available_count()) run independent multiply-adds of the widest vector unit,
 *    and all their flops over one shared window are returned as a rate (FP32 GFLOP/s,
 *    a multiply-add counted as 2): the best of at least 3 rounds, repeated (up to 20
 *    rounds of 30 ms) while it stays below 3/4 of one lone thread's rate times the
 *    threads, since a shared machine may run two threads on one core for a while. It
 *    reflects the clock the cores hold under vector load and a double-pumped unit (AMD
 *    Zen 4) alike. */
#ifndef GT_CPU_FEATURES_H
#define GT_CPU_FEATURES_H

enum cpu_isa {
    CPU_ISA_GENERIC = 0,   /* SSE2 only (every x86-64) */
    CPU_ISA_AVX = 1,       /* AVX, no FMA3 / AVX2 */
    CPU_ISA_AVX2 = 2,      /* AVX2 + FMA3 + F16C */
    CPU_ISA_AVX512 = 3,    /* AVX-512 F, BW, DQ, VL */
    CPU_ISA_AVX512_BF16 = 4 /* the above + AVX512_BF16 dot products */
};

enum cpu_isa cpu_isa_level(void);
/* "generic SSE2", "AVX", "AVX2+FMA", "AVX-512", "AVX-512+BF16". */
const char *cpu_isa_name(enum cpu_isa level);
/* 1 when the CPU has AMX-BF16 tiles of the shape the kernel uses and Linux granted
 * this process their state. */
int cpu_has_amx_bf16(void);
/* Why a CPU that lists AMX-BF16 in CPUID does not get it (one line, no newline): the OS
 * does not enable tile state, the tiles are of another shape, or Linux refused the
 * permission (with its errno). NULL when AMX is granted or the CPU has none. The text
 * lives in a static buffer: call it from one thread at a time. */
const char *cpu_amx_declined(void);
/* The CPUs this process may run on: its affinity mask (taskset, mpirun's or srun's
 * binding), else the online CPUs; at least 1. With OpenMP binding on (OMP_PROC_BIND,
 * OMP_PLACES), the CPUs of all the places: the runtime has bound the initial thread to
 * the first place alone before main. */
int cpu_available_count(void);
/* Before this process executes itself again (blas_core.c): gives the calling thread back
 * the CPUs of all the OpenMP places where binding had narrowed it to the first, so the
 * new process starts with the mask this one was given (else it inherits one place and
 * every thread of its team shares that CPU). No change where binding is off. */
void cpu_unbind_before_exec(void);
/* On the calling thread, with OpenMP binding on: own_place 1 binds it to the CPUs of its
 * place, as the runtime did; 0 lets it run on any CPU of all the places. The thread
 * team (team.c) lets a smaller team's threads leave a CPU another process shares: a
 * thread bound to that CPU would stay on it; the data loader's thread (no member of the
 * team) takes any CPU of the places rather than the first thread's. No change where
 * binding is off. */
void cpu_thread_binding(int own_place);
/* The CPUs online in the machine (>= 1). */
int cpu_online_count(void);
/* The CPU's model name from /proc/cpuinfo into buf (or "unknown CPU"); returns buf. */
const char *cpu_model_name(char *buf, int cap);
/* Measured FP32 multiply-add peak of `threads` threads, GFLOP/s (0 if it failed). */
double cpu_fma_peak_gflops(int threads);
/* The same with vectors no wider than `widest` (a run whose kernels and BLAS core are
 * held to AVX2 on an AVX-512 CPU peaks at AVX2's rate), and the level that measures:
 * CPU_ISA_AVX512, CPU_ISA_AVX2 or CPU_ISA_GENERIC. */
double cpu_fma_peak_gflops_upto(int threads, enum cpu_isa widest);
enum cpu_isa cpu_fma_level_upto(enum cpu_isa widest);
/* Measured peak of BF16 matrix products: with amx_tiles (the AMX path runs) and a CPU
 * that has them, TDPBF16PS tile products; else VDPBF16PS dot products where the CPU
 * has AVX512_BF16, else the FP32 multiply-add peak (what the portable path runs on). */
double cpu_bf16_peak_gflops(int threads, int amx_tiles);
/* One thread's BF16 dot-product rate (VDPBF16PS) over its FP32 multiply-add rate, flop
 * for flop, each the best of fifteen 1 ms windows taken in turn (about 40 ms in all);
 * 0 where the CPU or the build has no AVX512_BF16. Measured at the first call, then
 * remembered; the first call belongs outside parallel regions. About 2 on AMD Zen 4
 * and 5, about 0.5 on Intel Xeons whose AVX512_BF16 runs beside AMX tiles. */
double cpu_bf16_dot_over_fma(void);
/* Makes later calls of cpu_bf16_dot_over_fma return `ratio` (negative: 0) in place of
 * this process's measurement: a job's ranks take one rank's figure, so that a rank
 * slowed while it measured cannot pick another path than the others. */
void cpu_bf16_dot_over_fma_use(double ratio);

#endif
