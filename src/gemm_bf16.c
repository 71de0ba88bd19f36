/* gemm_bf16 — see gemm_bf16.h: the buffers, the choice of path, and the portable
 * path (operands rounded to bfloat16 values in FP32 panels, then OpenBLAS sgemm). */
#include "gemm_bf16.h"

#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "cpu_features.h"
#include "simd.h" /* defines: GT_SIMD_X86_BF16 */
#include "util.h" /* defines: gt_malloc, gt_error */

#ifdef _OPENMP
#include <omp.h>
#else
static int omp_get_max_threads(void) { return 1; }
static int omp_get_thread_num(void) { return 0; }
static int omp_in_parallel(void) { return 0; }
#endif

/* Portable panels: PM x PK of A and PK x PN of B, FP32 */
enum { PM = 256, PK = 256, PN = 2048 };

/* One slot per OpenMP thread: a thread that calls from inside a parallel region packs
 * into its own slot; a call from outside uses slot 0's B panel for the whole team. */
typedef struct {
    void *apack, *bpack; /* AVX512_BF16 path */
    float *pa, *pb;      /* portable path */
} slot;

static slot *slots;
static int nslots;
static int force_portable;
/* GENTRAIN_BF16=portable forces the portable path from the start (to compare runs);
 * read once in gemm_bf16_init, before any product runs on several threads. */
static int env_portable;

void gemm_bf16_free(void)
{
    for (int i = 0; i < nslots; i++) {
        free(slots[i].apack);
        free(slots[i].bpack);
        free(slots[i].pa);
        free(slots[i].pb);
    }
    free(slots);
    slots = NULL;
    nslots = 0;
}

int gemm_bf16_init(int threads)
{
    const char *e = getenv("GENTRAIN_BF16");
    env_portable = e && strcmp(e, "portable") == 0;
    int want = omp_get_max_threads();
    if (threads > want) want = threads;
    if (want <= nslots) return 0;
    gemm_bf16_free();
    slots = gt_calloc((size_t)want * sizeof *slots, "BF16 matrix product buffers");
    if (!slots) return -1;
    nslots = want;
    for (int i = 0; i < want; i++) {
        slot *s = &slots[i];
        s->apack = gt_malloc(GEMM_BF16_APACK, "BF16 packed A panel");
        s->bpack = gt_malloc(GEMM_BF16_BPACK, "BF16 packed B panel");
        s->pa = gt_malloc((size_t)PM * PK * sizeof(float), "BF16 rounded A panel");
        s->pb = gt_malloc((size_t)PK * PN * sizeof(float), "BF16 rounded B panel");
        if (!s->apack || !s->bpack || !s->pa || !s->pb) {
            gemm_bf16_free();
            return -1;
        }
    }
    return 0;
}

void gemm_bf16_force_portable(int on) { force_portable = on != 0; }

static int use_avx512(void)
{
#if GT_SIMD_X86_BF16
    return !force_portable && !env_portable && cpu_isa_level() >= CPU_ISA_AVX512_BF16;
#else
    return 0;
#endif
}

const char *gemm_bf16_path_name(void) { return use_avx512() ? "avx512-bf16" : "portable"; }

/* x rounded to the nearest bfloat16 (ties to even), as a float; NaN stays NaN */
static inline float bf16_round(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    if ((u & 0x7fffffffu) <= 0x7f800000u) u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    memcpy(&x, &u, sizeof u);
    return x;
}

/* op(X)[r0 + i, c0 + j] for i < rows, j < cols into out (row-major, cols wide), rounded */
static void round_panel(float *out, int trans, const float *X, int ld, int r0, int rows,
                        int c0, int cols)
{
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < cols; j++) {
            const float v = trans ? X[(size_t)(c0 + j) * ld + r0 + i]
                                  : X[(size_t)(r0 + i) * ld + c0 + j];
            out[(size_t)i * cols + j] = bf16_round(v);
        }
}

static void gemm_portable(slot *s, int transa, int transb, int M, int N, int K, float alpha,
                          const float *A, int lda, const float *B, int ldb, float beta,
                          float *C, int ldc)
{
    for (int pc = 0; pc < K; pc += PK) {
        const int kc = K - pc < PK ? K - pc : PK;
        const float bet = pc == 0 ? beta : 1.0f;
        for (int jc = 0; jc < N; jc += PN) {
            const int nc = N - jc < PN ? N - jc : PN;
            round_panel(s->pb, transb, B, ldb, pc, kc, jc, nc);
            for (int ic = 0; ic < M; ic += PM) {
                const int mc = M - ic < PM ? M - ic : PM;
                round_panel(s->pa, transa, A, lda, ic, mc, pc, kc);
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, mc, nc, kc, alpha,
                            s->pa, kc, s->pb, nc, bet, C + (size_t)ic * ldc + jc, ldc);
            }
        }
    }
}

void gemm_bf16(int transa, int transb, int M, int N, int K, float alpha, const float *A,
               int lda, const float *B, int ldb, float beta, float *C, int ldc)
{
    if (M <= 0 || N <= 0) return;
    const int nested = omp_in_parallel();
    const int t = nested ? omp_get_thread_num() : 0;
    if (t >= nslots) {
        /* a programming error (gemm_bf16_init not called, or for fewer threads) */
        gt_error("internal: BF16 matrix product on thread %d with buffers for %d; "
                 "gemm_bf16_init was not called for this thread count", t, nslots);
        abort();
    }
    if (K <= 0) { /* C = beta C, as sgemm */
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++)
                C[(size_t)i * ldc + j] = beta == 0.0f ? 0.0f : beta * C[(size_t)i * ldc + j];
        return;
    }
    if (!use_avx512()) {
        gemm_portable(&slots[t], transa, transb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        return;
    }
#if GT_SIMD_X86_BF16
    /* From outside a parallel region the whole team works on it, each thread with its
     * own A panel (when there are slots for all of them); from inside, this thread. */
    enum { MAXT = 256 };
    void *apacks[MAXT];
    const int team = !nested && omp_get_max_threads() <= nslots && nslots <= MAXT;
    const int n = team ? nslots : 1;
    for (int i = 0; i < n; i++) apacks[i] = slots[team ? i : t].apack;
    gemm_bf16_avx512(transa, transb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc,
                     slots[t].bpack, apacks, team);
#endif
}
