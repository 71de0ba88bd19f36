/* gemm_bf16 — see gemm_bf16.h: the buffers, the choice of path, and the dispatch to
 * the paths (the portable one in gemm_bf16_portable.c). */
#define GT_BF16_MODULE /* gemm_bf16_weights.h's lookup */
#include "gemm_bf16.h"

#include <stdlib.h>
#include <string.h>

#include "amx_emul.h"        /* defines: amx_emul_timing_only */
#include "amx_emul_counts.h" /* defines: amx_emul_product_begin, amx_emul_product_end */
#include "cpu_features.h"
#include "dot_counts.h" /* defines: dot_counts_timing_only */
#include "gemm_bf16_amx.h" /* defines: gemm_bf16_amx, gemm_bf16_amx_emulated */
#include "gemm_bf16_packer.h" /* defines: gemm_bf16_block_offset, gemm_bf16_amx_packer */
#include "gemm_bf16_portable.h" /* defines: gemm_bf16_portable */
#include "gemm_bf16_weights.h" /* defines: gemm_bf16_weights_find */
#include "simd.h"          /* defines: GT_SIMD_X86_BF16, GT_SIMD_X86_AMX */
#include "util.h"          /* defines: gt_malloc, gt_error, gt_warn */

#ifdef _OPENMP
#include <omp.h>
#else
static int omp_get_max_threads(void) { return 1; }
static int omp_get_thread_num(void) { return 0; }
static int omp_in_parallel(void) { return 0; }
#endif

/* The portable path's A panel: PM rows for the products the whole team runs (slot 0:
 * one sgemm per depth block at a step's shapes), PM_NESTED for those a thread runs
 * alone inside a parallel region; row sums fused into products of up to SUMS rows
 * (more: summed after the product, the same bits) */
enum { PM = 2048, PM_NESTED = 256, SUMS = 16384 };

/* One slot per OpenMP thread: a thread that calls from inside a parallel region packs
 * into its own slot; a call from outside uses slot 0's B panel for the whole team. */
typedef struct {
    void *apack, *bpack; /* AVX512_BF16 path; bpack also the AMX paths' B panel */
    void *amx;           /* AMX paths: GEMM_BF16_AMX_WORK bytes */
    float *pa, *pb;      /* portable path: pa holds pm rows */
    int pm;
    float *sums;         /* the epilogue's row sums, from zero (SUMS floats) */
} slot;

static slot *slots;
static int nslots;
/* Room for all of a product's B packed, where the AMX paths want it
 * (gemm_bf16_amx_wants_whole_b: the GPT-2 124M logits' weight gradient, 6.3 MB):
 * grown by the first product that wants more, from outside a parallel region only, and
 * kept until gemm_bf16_free */
static void *whole_b;
static size_t whole_b_words;
/* The path the products take: chosen by gemm_bf16_init (GENTRAIN_BF16, read there
 * once, before any product runs on several threads) or gemm_bf16_force_path, both
 * called outside parallel regions; GEMM_BF16_AUTO until then. */
static enum gemm_bf16_path env_path, active;

void gemm_bf16_free(void)
{
    for (int i = 0; i < nslots; i++) {
        free(slots[i].apack);
        free(slots[i].bpack);
        free(slots[i].amx);
        free(slots[i].pa);
        free(slots[i].pb);
        free(slots[i].sums);
    }
    free(slots);
    slots = NULL;
    nslots = 0;
    free(whole_b);
    whole_b = NULL;
    whole_b_words = 0;
}

/* whole_b with room for `words` (0: NULL), or NULL where that memory is not to be had:
 * the product then packs B a panel at a time, as it always could (said once) */
static void *whole_b_room(size_t words)
{
    static int said;
    if (words == 0) return NULL;
    if (words <= whole_b_words) return whole_b;
    void *p = NULL;
    if (posix_memalign(&p, 64, words * sizeof(uint32_t)) != 0 || !p) {
        if (!said)
            gt_warn("BF16 products: no memory for a whole packed operand (%zu MB); the "
                    "large weight gradient packs it a block at a time instead",
                    words * sizeof(uint32_t) >> 20);
        said = 1;
        return NULL;
    }
    free(whole_b);
    whole_b = p;
    whole_b_words = words;
    return whole_b;
}

const char *gemm_bf16_name_of(enum gemm_bf16_path p)
{
    switch (p) {
    case GEMM_BF16_AMX: return "amx-bf16";
    case GEMM_BF16_AVX512: return "avx512-bf16";
    case GEMM_BF16_AMX_EMULATED: return "amx-emulated";
    case GEMM_BF16_PORTABLE:
    case GEMM_BF16_AUTO: break;
    }
    return "portable";
}

int gemm_bf16_path_built(enum gemm_bf16_path p)
{
    switch (p) {
    case GEMM_BF16_PORTABLE:
    case GEMM_BF16_AMX_EMULATED: return 1;
    case GEMM_BF16_AVX512: return GT_SIMD_X86_BF16;
    case GEMM_BF16_AMX: return GT_SIMD_X86_AMX;
    case GEMM_BF16_AUTO: break;
    }
    return 0;
}

int gemm_bf16_cpu_runs(enum gemm_bf16_path p)
{
    const int bf16 = cpu_isa_level() >= CPU_ISA_AVX512_BF16;
    switch (p) {
    case GEMM_BF16_PORTABLE:
    case GEMM_BF16_AMX_EMULATED: return 1;
    case GEMM_BF16_AVX512: return gemm_bf16_path_built(p) && bf16;
    case GEMM_BF16_AMX: return gemm_bf16_path_built(p) && bf16 && cpu_has_amx_bf16();
    case GEMM_BF16_AUTO: break;
    }
    return 0;
}

/* Where the dot products run at DOT_PAYS of the FP32 multiply-add rate or more (flop
 * for flop), the avx512-bf16 path is the faster: its products reach about 0.8 of the
 * dot-product peak in a step, the portable path's sgemm about 0.6 of the FMA peak, so
 * the two meet near 0.75. Measured: on AMD Zen 4 (ratio 2.0) avx512-bf16 trains 1.45x
 * faster than fp32; on an Intel Xeon whose VDPBF16PS runs at 0.47x its FMAs, the
 * portable path trains 1.5-1.7x faster than avx512-bf16. The line sits at 1, the
 * geometric middle of the two kinds, not at 0.75: a Xeon measured while another
 * process took its core read up to 0.72, and two runs of one job, or one run and its
 * test's reference, then took different paths. No CPU we know lies between. */
#define DOT_PAYS 1.0

int gemm_bf16_dot_products_pay(void)
{
    return gemm_bf16_cpu_runs(GEMM_BF16_AVX512) && cpu_bf16_dot_over_fma() >= DOT_PAYS;
}

static enum gemm_bf16_path best_path(void)
{
    return gemm_bf16_cpu_runs(GEMM_BF16_AMX)        ? GEMM_BF16_AMX
           : gemm_bf16_dot_products_pay() ? GEMM_BF16_AVX512
                                          : GEMM_BF16_PORTABLE;
}

/* The path to run for `want`: a path the CPU lacks gives the best it has (warned) */
static enum gemm_bf16_path resolve(enum gemm_bf16_path want, int warn)
{
    if (want == GEMM_BF16_AUTO) return best_path();
    if (gemm_bf16_cpu_runs(want)) return want;
    const enum gemm_bf16_path best = best_path();
    if (warn) {
        const char *declined = want == GEMM_BF16_AMX ? cpu_amx_declined() : NULL;
        if (declined)
            gt_warn("the %s BF16 products cannot run: %s; using %s", gemm_bf16_name_of(want),
                    declined, gemm_bf16_name_of(best));
        else
            gt_warn("the %s BF16 products need a CPU this one is not (%s%s); using %s",
                    gemm_bf16_name_of(want), cpu_isa_name(cpu_isa_level()),
                    cpu_has_amx_bf16() ? ", AMX-BF16" : ", no AMX-BF16 tiles",
                    gemm_bf16_name_of(best));
    }
    return best;
}

/* GENTRAIN_BF16 as a path (one warning when it cannot be had) */
static enum gemm_bf16_path env_choice(void)
{
    static const struct {
        const char *key;
        enum gemm_bf16_path path;
    } keys[] = {{"portable", GEMM_BF16_PORTABLE}, {"avx512", GEMM_BF16_AVX512},
                {"avx512-bf16", GEMM_BF16_AVX512}, {"amx", GEMM_BF16_AMX},
                {"amx-bf16", GEMM_BF16_AMX}, {"amx-emulated", GEMM_BF16_AMX_EMULATED}};
    const char *e = getenv("GENTRAIN_BF16");
    if (!e || !*e || strcmp(e, "auto") == 0) return resolve(GEMM_BF16_AUTO, 0);
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        if (strcmp(e, keys[i].key) == 0) return resolve(keys[i].path, 1);
    gt_warn("GENTRAIN_BF16=%.40s not understood (portable|avx512|amx|amx-emulated|auto); "
            "choosing automatically", e);
    return resolve(GEMM_BF16_AUTO, 0);
}

static int reserve_slot(slot *s, int pm)
{
    s->pm = pm;
    s->apack = gt_malloc(GEMM_BF16_APACK, "BF16 packed A panel");
    s->bpack = gt_malloc(GEMM_BF16_BPACKS, "BF16 packed B panels");
    s->amx = gt_malloc(GEMM_BF16_AMX_WORK, "BF16 AMX tiles and packed A block");
    s->pa = gt_malloc((size_t)pm * GEMM_BF16_PORTABLE_KC * sizeof(float),
                      "BF16 rounded A panel");
    s->pb = gt_malloc((size_t)GEMM_BF16_PORTABLE_KC * GEMM_BF16_PORTABLE_NC * sizeof(float),
                      "BF16 rounded B panel");
    s->sums = gt_malloc((size_t)SUMS * sizeof(float), "BF16 product row sums");
    return s->apack && s->bpack && s->amx && s->pa && s->pb && s->sums ? 0 : -1;
}

/* A timing switch of the bench, `name` = 1 (GENTRAIN_AMX_TIMING, GENTRAIN_DOT_TIMING):
 * set(1) where it is set and applies to the path in use (`applies`), else set(0). Said
 * once (*said), loudly, since the run's numbers mean nothing then: `on` says what the
 * run does instead, `only` the path it applies to where it is ignored. */
static void timing_switch(const char *name, int applies, int (*set)(int), int *said,
                          const char *on, const char *only)
{
    const char *e = getenv(name);
    const int is_on = e && strcmp(e, "1") == 0 && applies;
    (void)set(is_on);
    if (*said || !e || !*e || strcmp(e, "0") == 0) return;
    *said = 1;
    if (is_on)
        gt_warn("%s=1: %s: this run's losses and weights are meaningless (a timing run for "
                "the bench's prediction)", name, on);
    else if (strcmp(e, "1") == 0)
        gt_warn("%s=1 ignored: it applies to %s only", name, only);
    else
        gt_warn("%s=%.40s not understood (0 or 1); ignored", name, e);
}

/* GENTRAIN_AMX_TIMING=1 with GENTRAIN_BF16=amx-emulated: the emulated twin in its timing
 * mode (amx_emul.h); GENTRAIN_DOT_TIMING=1 on the avx512-bf16 path: its micro-kernels in
 * the timing mode of dot_counts.h (a multiply-add where each dot product was) */
static void env_timing(enum gemm_bf16_path path)
{
    static int said_amx, said_dot;
    timing_switch("GENTRAIN_AMX_TIMING", path == GEMM_BF16_AMX_EMULATED, amx_emul_timing_only,
                  &said_amx, "the emulated tile products are counted and timed, not computed",
                  "GENTRAIN_BF16=amx-emulated");
    timing_switch("GENTRAIN_DOT_TIMING", gemm_bf16_path() == GEMM_BF16_AVX512,
                  dot_counts_timing_only, &said_dot,
                  "each BF16 dot product runs as one FP32 multiply-add (at this CPU's FMA "
                  "rate), counted and timed",
                  "the avx512-bf16 path (GENTRAIN_BF16=avx512)");
}

int gemm_bf16_init(int threads)
{
    (void)gemm_bf16_amx_pack_select(1);
    env_path = env_choice();
    active = env_path;
    env_timing(env_path);
    int want = omp_get_max_threads();
    if (threads > want) want = threads;
    if (want <= nslots) return 0;
    gemm_bf16_free();
    slots = gt_calloc((size_t)want * sizeof *slots, "BF16 matrix product buffers");
    if (!slots) return -1;
    nslots = want;
    for (int i = 0; i < want; i++)
        if (reserve_slot(&slots[i], i == 0 ? PM : PM_NESTED) != 0) {
            gemm_bf16_free();
            return -1;
        }
    return 0;
}

enum gemm_bf16_path gemm_bf16_force_path(enum gemm_bf16_path want)
{
    active = want == GEMM_BF16_AUTO && env_path != GEMM_BF16_AUTO ? env_path : resolve(want, 1);
    return active;
}

enum gemm_bf16_path gemm_bf16_path(void) { return active != GEMM_BF16_AUTO ? active : best_path(); }

const char *gemm_bf16_path_name(void) { return gemm_bf16_name_of(gemm_bf16_path()); }

static void run_path(int transa, int transb, int M, int N, int K, float alpha,
                     const float *A, int lda, const float *B, int ldb, float beta, float *C,
                     int ldc, const gemm_bf16_epilogue *ep);

/* op(A) from its row m0 on (A transposed: column m0 of what is stored; in BF16
 * storage, counted in BF16 values) */
static const float *rows_from(int transa, const float *A, int lda, int m0)
{
    if (transa == GEMM_BF16_STORED_T)
        return (const float *)(const void *)((const uint16_t *)(const void *)A + m0);
    return transa ? A + m0 : A + (size_t)m0 * lda;
}

/* gemm_bf16 and gemm_bf16_fused: ep NULL or the epilogue. Row sums: the paths add into
 * this thread's zeroed sums, added to the caller's once the product is done (from zero
 * in depth order, then added: the bits of a column-sum pass); past SUMS rows they are
 * summed after the product, the same way. */
static void product(int transa, int transb, int M, int N, int K, float alpha, const float *A,
                    int lda, const float *B, int ldb, float beta, float *C, int ldc,
                    const gemm_bf16_epilogue *ep)
{
    if (!ep || !ep->row_sums || M <= 0 || N <= 0 || K <= 0) {
        run_path(transa, transb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, ep);
        return;
    }
    if (transa != 0 && transa != 1 && transa != GEMM_BF16_STORED_T) { /* a programming error */
        gt_error("internal: BF16 product row sums of A in BF16 storage, not transposed");
        abort();
    }
    const int t = omp_in_parallel() ? omp_get_thread_num() : 0;
    if (t >= nslots) { /* run_path says what is wrong */
        run_path(transa, transb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, ep);
        return;
    }
    float *sums = slots[t].sums;
    gemm_bf16_epilogue e = *ep;
    e.row_sums = M <= SUMS ? sums : NULL;
    if (e.row_sums) memset(sums, 0, (size_t)M * sizeof *sums);
    run_path(transa, transb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, &e);
    if (!e.row_sums) {
        for (int m0 = 0; m0 < M; m0 += SUMS) {
            const int mc = M - m0 < SUMS ? M - m0 : SUMS;
            memset(sums, 0, (size_t)mc * sizeof *sums);
            gemm_bf16_row_sums(sums, transa, rows_from(transa, A, lda, m0), lda, 0, mc, 0, K);
            for (int i = 0; i < mc; i++) ep->row_sums[m0 + i] += sums[i];
        }
        return;
    }
    for (int i = 0; i < M; i++) ep->row_sums[i] += sums[i];
}

/* the product on the path in use (ep's row sums, if any, as the paths add them) */
static void run_path(int transa, int transb, int M, int N, int K, float alpha, const float *A,
                    int lda, const float *B, int ldb, float beta, float *C, int ldc,
                    const gemm_bf16_epilogue *ep)
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
        if (ep) gemm_bf16_epilogue_block(ep, C, ldc, 0, 0, M, N, 1, 1);
        return;
    }
    const enum gemm_bf16_path path = gemm_bf16_path();
    /* a weight matrix packed once per update for this path, or NULL */
    const void *bpre = gemm_bf16_weights_find(B, transb, ldb, K, N, path);
    if (path == GEMM_BF16_PORTABLE) {
        gemm_bf16_portable(slots[t].pa, slots[t].pm, slots[t].pb, transa, transb, M, N, K,
                           alpha, A, lda, B, ldb, beta, C, ldc, bpre, ep);
        return;
    }
    /* From outside a parallel region the whole team works on it, each thread with its
     * own A panel / AMX work area (when there are slots for all of them); from inside,
     * this thread. */
    enum { MAXT = 256 };
    void *ws[MAXT];
    const int team = !nested && omp_get_max_threads() <= nslots && nslots <= MAXT;
    const int n = team ? nslots : 1;
    const int avx = path == GEMM_BF16_AVX512;
    for (int i = 0; i < n; i++) ws[i] = avx ? slots[team ? i : t].apack : slots[team ? i : t].amx;
    void *bp = slots[t].bpack;
    /* all of B packed first, where the AMX paths want it and the whole team runs the
     * product (one shared buffer) */
    void *const bwhole =
        (path == GEMM_BF16_AMX || path == GEMM_BF16_AMX_EMULATED) && team && !bpre &&
                gemm_bf16_amx_wants_whole_b(transb, M, N, K)
            ? whole_b_room(gemm_bf16_block_offset(&gemm_bf16_amx_packer, K, N, N, 0))
            : NULL;
    if (path == GEMM_BF16_AMX_EMULATED) { /* timed whole, for the bench's prediction */
        amx_emul_product_begin(team);
        gemm_bf16_amx_emulated(transa, transb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc,
                               bp, ws, team, bpre, ep, bwhole);
        amx_emul_product_end(team);
        return;
    }
#if GT_SIMD_X86_AMX
    if (path == GEMM_BF16_AMX) {
        gemm_bf16_amx(transa, transb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, bp, ws,
                      team, bpre, ep, bwhole);
        return;
    }
#endif
#if GT_SIMD_X86_BF16
    gemm_bf16_avx512(transa, transb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, bp, ws,
                     team, bpre, ep);
#endif
}

void gemm_bf16(int transa, int transb, int M, int N, int K, float alpha, const float *A,
               int lda, const float *B, int ldb, float beta, float *C, int ldc)
{
    product(transa, transb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, NULL);
}

void gemm_bf16_fused(int transa, int transb, int M, int N, int K, float alpha, const float *A,
                     int lda, const float *B, int ldb, float beta, float *C, int ldc,
                     const gemm_bf16_epilogue *ep)
{
    product(transa, transb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, ep);
}
