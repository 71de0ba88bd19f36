/* simd_tile_x86.h — the vector twins of simd_portable.c's gemm_tile (small matrix
 * products without packing) and transpose, for attention (attention_cpu.c), whose
 * operands are a few KB per head and in cache. Compiled twice, like simd_x86.h (which
 * includes this file):
 * the including file defines, besides simd_x86.h's macros,
 *
 *   TILE_MR            rows of C per call (6: the micro-kernel's broadcasts)
 *   TILE_NV            vectors of C per row and chunk (AVX-512 4, AVX2 2), so that
 *                      TILE_MR x TILE_NV accumulators + TILE_NV of B + 1 broadcast fit
 *                      the register file (32 zmm / 16 ymm)
 *   vlanes             a mask of the first lanes of a vector
 *   vlanes_first(n)    the first n of VL lanes (0 < n <= VL)
 *   vload_lanes(p, m)  those lanes from p, zeros elsewhere; the others are not read
 *   vstore_lanes(p, m, v)  those lanes to p; the others are not written
 *
 * The micro-kernel holds a TILE_MR x (nv VL) block of C in registers and walks k: one
 * row of B loaded (nv vectors), each of the TILE_MR values of A broadcast, nv fused
 * multiply-adds each. The element sums run in order p = 0, 1, ..., so the result does
 * not depend on the tile a row falls in. Rows past m repeat row m - 1 (nothing is read
 * outside A) and are not stored; columns past n are masked. */

/* nv (1 .. TILE_NV) is a constant at each call site below, so every loop unrolls and
 * the accumulators stay in registers (a variable bound would put them in memory). */
static inline __attribute__((always_inline)) void
SIMD_FN(tile_nv)(const int nv, int m, int n, int k, float alpha, const float *a,
                 ptrdiff_t a_rs, ptrdiff_t a_cs, const float *b, size_t ldb, float *c,
                 size_t ldc, int accumulate)
{
    vf s[TILE_MR][TILE_NV];
    const float *ar[TILE_MR];
#pragma GCC unroll 8
    for (int i = 0; i < TILE_MR; i++) {
        ar[i] = a + (i < m ? i : m - 1) * a_rs;
#pragma GCC unroll 4
        for (int v = 0; v < TILE_NV; v++) s[i][v] = vzero();
    }
    const vlanes last = vlanes_first(n - (nv - 1) * VL);
    for (int p = 0; p < k; p++) {
        const float *bp = b + (size_t)p * ldb;
        const ptrdiff_t ap = p * a_cs;
        vf bv[TILE_NV];
#pragma GCC unroll 4
        for (int v = 0; v < TILE_NV; v++)
            if (v < nv - 1) bv[v] = vload(bp + v * VL);
            else if (v == nv - 1) bv[v] = vload_lanes(bp + v * VL, last);
#pragma GCC unroll 8
        for (int i = 0; i < TILE_MR; i++) {
            const vf av = vset1(ar[i][ap]);
#pragma GCC unroll 4
            for (int v = 0; v < TILE_NV; v++)
                if (v < nv) s[i][v] = vfmadd(av, bv[v], s[i][v]);
        }
    }
    const vf al = vset1(alpha);
#pragma GCC unroll 8
    for (int i = 0; i < TILE_MR; i++) {
        if (i >= m) break;
        float *cr = c + (size_t)i * ldc;
#pragma GCC unroll 4
        for (int v = 0; v < TILE_NV; v++) {
            if (v >= nv) break;
            vf r = vmul(al, s[i][v]);
            if (v < nv - 1) {
                if (accumulate) r = vadd(r, vload(cr + v * VL));
                vstore(cr + v * VL, r);
            } else {
                if (accumulate) r = vadd(r, vload_lanes(cr + v * VL, last));
                vstore_lanes(cr + v * VL, last, r);
            }
        }
    }
}

_Static_assert(TILE_NV >= 1 && TILE_NV <= 4, "gemm_tile's switch covers 1 to 4 vectors");

static void SIMD_FN(gemm_tile)(int m, int n, int k, float alpha, const float *a,
                               ptrdiff_t a_rs, ptrdiff_t a_cs, const float *b, size_t ldb,
                               float *c, size_t ldc, int accumulate)
{
    for (int i = 0; i < m; i += TILE_MR)
    for (int j = 0; j < n; j += TILE_NV * VL) {
        const int mm = m - i < TILE_MR ? m - i : TILE_MR;
        const int nn = n - j < TILE_NV * VL ? n - j : TILE_NV * VL, nv = (nn + VL - 1) / VL;
#define TILE_CALL(NV)                                                                   \
    SIMD_FN(tile_nv)(NV, mm, nn, k, alpha, a + i * a_rs, a_rs, a_cs, b + j, ldb,           \
                     c + (size_t)i * ldc + j, ldc, accumulate)
        switch (nv) {
        case 1: TILE_CALL(1); break;
#if TILE_NV >= 2
        case 2: TILE_CALL(2); break;
#endif
#if TILE_NV >= 3
        case 3: TILE_CALL(3); break;
#endif
#if TILE_NV >= 4
        case 4: TILE_CALL(4); break;
#endif
        default: break; /* nv <= TILE_NV (checked below) */
        }
#undef TILE_CALL
    }
}

/* 8 x 8 blocks turned in AVX registers (both vector paths have AVX): 8 rows loaded,
 * unpacked by pairs, by quads, then the 128-bit halves swapped; edges in scalar code */
static inline void SIMD_FN(transpose8)(float *dst, size_t ldd, const float *src, size_t lds)
{
    __m256 r[8], t[8];
    for (int i = 0; i < 8; i++) r[i] = _mm256_loadu_ps(src + (size_t)i * lds);
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 8; i += 4) {
        r[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
        r[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xee);
        r[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
        r[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xee);
    }
    for (int i = 0; i < 4; i++) {
        _mm256_storeu_ps(dst + (size_t)i * ldd, _mm256_permute2f128_ps(r[i], r[i + 4], 0x20));
        _mm256_storeu_ps(dst + (size_t)(i + 4) * ldd,
                         _mm256_permute2f128_ps(r[i], r[i + 4], 0x31));
    }
}

static void SIMD_FN(transpose)(float *dst, size_t ldd, const float *src, size_t lds, int rows,
                               int cols)
{
    const int r8 = rows - rows % 8, c8 = cols - cols % 8;
    for (int r = 0; r < r8; r += 8)
        for (int c = 0; c < c8; c += 8)
            SIMD_FN(transpose8)(dst + (size_t)c * ldd + r, ldd, src + (size_t)r * lds + c, lds);
    for (int r = 0; r < rows; r++) /* the edges: columns past c8, then rows past r8 */
        for (int c = r < r8 ? c8 : 0; c < cols; c++)
            dst[(size_t)c * ldd + r] = src[(size_t)r * lds + c];
}
