/* bench_tiles — what the AMX tile unit delivers when its operands come from each level
 * of the memory hierarchy: the ceilings under which the BF16 products of a step run.
 *
 * The tile peak that bench.sh and the trainer's MFU divide by (cpu_features.h) runs
 * TDPBF16PS on tiles that never leave the registers. A product cannot: every 16 x 16 x
 * 32 step of the AMX kernel (src/kernels/bf16/gemm_bf16_amx_kernel.h) loads its A and
 * B tiles, 1 KB each, and every 32 x 32 block of C loads and stores its four FP32
 * tiles once a depth block of 256. This bench runs exactly that block, two A tiles and
 * two B tiles a depth chunk into four accumulators, 8 chunks a block, with A and B
 * taken from buffers of growing size, so the tile loads hit L1, L2 or memory:
 *
 *   registers          no loads: the tile peak, as the trainer measures it
 *                      (cpu_bf16_peak_gflops), the row the shares are of
 *   L1                 A, B and C the same 16 + 16 + 4 KB every block
 *   A L2, B L1         A walks 1 MB (a new 16 KB a block), B stays (16 KB)
 *   A L1, B L2         A stays (32 KB, two blocks' worth), B walks 1 MB
 *   A, B L2            both walk 512 KB
 *   A L3, B L1         A walks 16 MB, past L2 (where the L3 holds it), B stays
 *   A, B L3            both walk 8 MB
 *   A, B memory        both walk 64 MB
 *   L1, C rows 2 KB apart   as L1 with C's rows 2 KB apart, not 128 bytes: a piece of
 *                      C 512 floats wide without the kernel's padding (piece_ld)
 *
 * Each feed runs twice: with C's tiles loaded and stored every block, as the kernel
 * does, and held over 3 blocks (a 768-deep product's whole depth, the GPT-2 124M
 * forward's): the difference is what C's tile traffic costs at that feed.
 *
 * Packed tiles (64-byte rows one after the other), as the kernel's packed operands.
 * Every thread runs the same case on its own buffers at once; a case's figure is all
 * their flops over one window from the first start to the last end, the best of 3
 * rounds (as the tile peak is measured). The share of the tile peak says how much of it
 * a product can reach at best when its tiles come from there: a product whose operands
 * outgrow L2 is bounded by the rows below it, however it is blocked.
 *
 * usage: bench_tiles [--threads N]   (default: the current OpenMP thread count)
 * Needs a CPU with AMX-BF16 that Linux lets use it; elsewhere it says so and exits 1. */
#define _XOPEN_SOURCE 700
#include "amx_tiles.h"    /* amx_tilecfg */
#include "cpu_features.h" /* cpu_has_amx_bf16, cpu_amx_declined, cpu_bf16_peak_gflops */
#include "util.h"         /* gt_malloc */
#include <errno.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) &&                                                                    \
    ((defined(__clang__) && __clang_major__ >= 12) || (!defined(__clang__) && __GNUC__ >= 11))
#define BENCH_TILES_AMX 1
#include <immintrin.h>
#endif

enum {
    CHUNKS = 8,          /* depth chunks of 32 a block: the kernel's 256-deep block */
    HELD = 3,            /* blocks C's tiles are held over in the second column */
    TILE_BYTES = 1024,   /* 16 rows x 64 bytes */
    OPERAND_BLOCK = 2 * CHUNKS * TILE_BYTES, /* one operand's tiles for a block: 16 KB */
    ROUNDS = 3
};
#define FLOPS_PER_DP (16.0 * 16.0 * 32.0 * 2.0)

typedef struct {
    const char *name;
    size_t a_bytes, b_bytes; /* regions the blocks walk through */
    size_t c_stride;         /* bytes between C's rows (0: 32 floats, one block's row) */
} feed;

enum { C_STRIDE_MAX = 2048 };
static const feed feeds[] = {
    {"L1", OPERAND_BLOCK, OPERAND_BLOCK, 0},
    {"A L2, B L1", (size_t)1 << 20, OPERAND_BLOCK, 0},
    {"A L1, B L2", 2 * OPERAND_BLOCK, (size_t)1 << 20, 0},
    {"A, B L2", (size_t)512 << 10, (size_t)512 << 10, 0},
    {"A L3, B L1", (size_t)16 << 20, OPERAND_BLOCK, 0},
    {"A, B L3", (size_t)8 << 20, (size_t)8 << 20, 0},
    {"A, B memory", (size_t)64 << 20, (size_t)64 << 20, 0},
    {"L1, C rows 2 KB apart", OPERAND_BLOCK, OPERAND_BLOCK, C_STRIDE_MAX},
};
#define NFEEDS (sizeof feeds / sizeof feeds[0])
#define REGION_MAX ((size_t)64 << 20)

#ifdef BENCH_TILES_AMX
/* `blocks` blocks of the kernel's 2 x 2 tile step over feed f, C's tiles loaded and
 * stored every `hold` blocks (1: every block, as the kernel); the flops done. */
__attribute__((target("amx-tile,amx-bf16"))) static double run_blocks(const feed *f,
                                                                     const uint8_t *A,
                                                                     const uint8_t *B, float *C,
                                                                     long blocks, int hold)
{
    _Alignas(64) amx_tilecfg cfg;
    amx_tilecfg_uniform(&cfg, AMX_TILES, AMX_MAX_ROWS, AMX_MAX_COLSB);
    __asm__ volatile("" : : "r"(&cfg) : "memory"); /* every store to cfg before the load */
    _tile_loadconfig(&cfg);
    _tile_zero(0); _tile_zero(1); _tile_zero(2); _tile_zero(3);
    _tile_loadd(4, A, 64); _tile_loadd(5, A + TILE_BYTES, 64);
    _tile_loadd(6, B, 64); _tile_loadd(7, B + TILE_BYTES, 64);
    const size_t na = f->a_bytes / OPERAND_BLOCK, nb = f->b_bytes / OPERAND_BLOCK;
    /* C: one 32 x 32 block, 32 floats a row unless the feed spreads its rows */
    const size_t cstride = f->c_stride ? f->c_stride : 32 * sizeof(float);
    const size_t chalf = 16 * cstride / sizeof(float); /* C's rows 16-31, in floats */
    size_t ia = 0, ib = 0;
    for (long blk = 0; blk < blocks; blk++) {
        const uint8_t *a = A + ia * OPERAND_BLOCK, *b = B + ib * OPERAND_BLOCK;
        ia = ia + 1 == na ? 0 : ia + 1;
        ib = ib + 1 == nb ? 0 : ib + 1;
        if (blk % hold == 0) {
            _tile_loadd(0, C, cstride); _tile_loadd(1, C + 16, cstride);
            _tile_loadd(2, C + chalf, cstride); _tile_loadd(3, C + chalf + 16, cstride);
        }
        /* the kernel's order (block32): each operand tile loaded right after the
         * products that read the tile it replaces */
        _tile_loadd(4, a, 64); _tile_loadd(5, a + CHUNKS * TILE_BYTES, 64);
        _tile_loadd(6, b, 64); _tile_loadd(7, b + CHUNKS * TILE_BYTES, 64);
        for (int q = 1; q < CHUNKS; q++) {
            _tile_dpbf16ps(0, 4, 6); _tile_dpbf16ps(1, 4, 7);
            _tile_loadd(4, a + q * TILE_BYTES, 64);
            _tile_dpbf16ps(2, 5, 6);
            _tile_loadd(6, b + q * TILE_BYTES, 64);
            _tile_dpbf16ps(3, 5, 7);
            _tile_loadd(5, a + (CHUNKS + q) * TILE_BYTES, 64);
            _tile_loadd(7, b + (CHUNKS + q) * TILE_BYTES, 64);
        }
        _tile_dpbf16ps(0, 4, 6); _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6); _tile_dpbf16ps(3, 5, 7);
        if (blk % hold == hold - 1) {
            _tile_stored(0, C, cstride); _tile_stored(1, C + 16, cstride);
            _tile_stored(2, C + chalf, cstride); _tile_stored(3, C + chalf + 16, cstride);
        }
    }
    _tile_stored(0, C, cstride);
    _tile_release();
    return (double)blocks * CHUNKS * 4 * FLOPS_PER_DP;
}
#endif

static int parse_threads(int argc, char **argv, int *threads)
{
    *threads = omp_get_max_threads();
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: bench_tiles [--threads N]\n");
            exit(0);
        }
        if (strcmp(argv[i], "--threads")) {
            fprintf(stderr, "bench_tiles: unknown argument '%s' (usage: bench_tiles "
                            "[--threads N])\n", argv[i]);
            return -1;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "bench_tiles: --threads needs a number of threads\n");
            return -1;
        }
        char *end;
        errno = 0;
        const long v = strtol(argv[++i], &end, 10);
        if (errno || end == argv[i] || *end || v < 1 || v > 4096) {
            fprintf(stderr, "bench_tiles: --threads needs an integer from 1 to 4096, got "
                            "'%s'\n", argv[i]);
            return -1;
        }
        *threads = (int)v;
    }
    return 0;
}

int main(int argc, char **argv)
{
    int threads;
    if (parse_threads(argc, argv, &threads) != 0) return 2;
#ifndef BENCH_TILES_AMX
    (void)feeds;
    fprintf(stderr, "bench_tiles: built without AMX instructions (an x86-64 compiler that "
                    "has them: GCC 11 or clang 12 and later)\n");
    return 1;
#else
    if (!cpu_has_amx_bf16()) {
        const char *why = cpu_amx_declined();
        fprintf(stderr, "bench_tiles: this CPU's AMX tiles are not available%s%s\n",
                why ? ": " : "", why ? why : " (no AMX-BF16)");
        return 1;
    }
    /* per thread: A and B regions, one C block */
    uint8_t **a = calloc((size_t)threads, sizeof *a), **b = calloc((size_t)threads, sizeof *b);
    float **c = calloc((size_t)threads, sizeof *c);
    if (!a || !b || !c) {
        fprintf(stderr, "bench_tiles: out of memory\n");
        return 1;
    }
    int failed = 0;
    for (int t = 0; t < threads && !failed; t++) {
        a[t] = gt_malloc(REGION_MAX, "bench_tiles A");
        b[t] = gt_malloc(REGION_MAX, "bench_tiles B");
        c[t] = gt_malloc(32 * C_STRIDE_MAX, "bench_tiles C");
        failed = !a[t] || !b[t] || !c[t];
    }
    if (failed) {
        fprintf(stderr, "bench_tiles: out of memory for %d threads' 2 x 64 MB\n", threads);
        return 1;
    }
    printf("bench_tiles: the AMX kernel's 2 x 2 tile step (TDPBF16PS), %d threads; C's four "
           "tiles loaded and stored every %d depth chunks, as the products do, or held over "
           "%d x %d\n\n",
           threads, CHUNKS, HELD, CHUNKS);
    printf("%-22s %10s %10s %12s %10s\n", "operands from", "GFLOP/s", "of peak", "C held",
           "of peak");
    static const char peak_name[] = "registers (tile peak)";
    const double peak = cpu_bf16_peak_gflops(threads, 1);
    printf("%-22s %10.0f %9.0f%%\n", peak_name, peak, 100.0);
#pragma omp parallel num_threads(threads)
    { /* every page touched once, before any timing */
        const int t = omp_get_thread_num();
        memset(a[t], 0x3a, REGION_MAX);
        memset(b[t], 0x3a, REGION_MAX);
        memset(c[t], 0, 32 * C_STRIDE_MAX);
    }
    double rate[NFEEDS][2];
    for (size_t fi = 0; fi < NFEEDS; fi++) {
        const feed *f = &feeds[fi];
        for (int held = 0; held < 2; held++) {
            /* about 0.1 s a thread at 3 TFLOP/s, whole groups of HELD blocks */
            const long blocks = (long)(3e11 / (CHUNKS * 4 * FLOPS_PER_DP)) / HELD * HELD;
            double best = 0.0;
            for (int round = 0; round <= ROUNDS; round++) { /* round 0 warms up */
                double flops = 0.0, first = 1e300, last = -1e300;
#pragma omp parallel num_threads(threads) reduction(+ : flops) reduction(min : first)      \
    reduction(max : last)
                {
                    const int t = omp_get_thread_num();
                    first = omp_get_wtime();
                    flops += run_blocks(f, a[t], b[t], c[t],
                                        round ? blocks : blocks / 10 / HELD * HELD,
                                        held ? HELD : 1);
                    last = omp_get_wtime();
                }
                const double r = last > first ? flops / (last - first) * 1e-9 : 0.0;
                if (round > 0 && r > best) best = r;
            }
            rate[fi][held] = best;
        }
        printf("%-22s %10.0f %9.0f%% %12.0f %9.0f%%\n", f->name, rate[fi][0],
               100.0 * rate[fi][0] / peak, rate[fi][1], 100.0 * rate[fi][1] / peak);
    }
    printf("{\"threads\":%d,\"chunks_per_block\":%d,\"held_blocks\":%d,\"feeds\":[{\"name\":"
           "\"%s\",\"gflops\":%.1f}", threads, CHUNKS, HELD, peak_name, peak);
    for (size_t fi = 0; fi < NFEEDS; fi++)
        printf(",{\"name\":\"%s\",\"gflops\":%.1f,\"held_gflops\":%.1f}", feeds[fi].name,
               rate[fi][0], rate[fi][1]);
    printf("]}\n");
    for (int t = 0; t < threads; t++) free(a[t]), free(b[t]), free(c[t]);
    free(a), free(b), free(c);
    return 0;
#endif
}
