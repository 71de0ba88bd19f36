/* gemm_bf16_weights — see gemm_bf16_weights.h. A short list, searched by pointer on
 * every product: a model has 4 matrices per layer and the embedding, so at most a few
 * hundred entries, and the search costs nothing beside a product. */
#define GT_BF16_MODULE /* gemm_bf16_packer.h, the lookup */
#include "gemm_bf16_weights.h"

#include <stdint.h>
#include <stdlib.h>

#include "gemm_bf16_packer.h"
#include "simd.h" /* GT_SIMD_X86_BF16 */
#include "util.h" /* gt_malloc */

typedef struct {
    const float *w;           /* the matrix as the products see it: op(B) = w or w^T */
    int transb, ldb, K, N;    /* op(B) is K x N */
    uint32_t *packed;         /* the copy for `path`, or NULL */
} entry;

static entry *entries;
static int n_entries, cap_entries;
/* The path every copy was packed for; GEMM_BF16_AUTO: none is packed */
static enum gemm_bf16_path packed_for = GEMM_BF16_AUTO;

static const gemm_bf16_packer *packer_of(enum gemm_bf16_path p)
{
    switch (p) {
    case GEMM_BF16_PORTABLE: return &gemm_bf16_portable_packer;
    case GEMM_BF16_AMX:
    case GEMM_BF16_AMX_EMULATED: return &gemm_bf16_amx_copy_packer;
    case GEMM_BF16_AVX512:
#if GT_SIMD_X86_BF16
        return &gemm_bf16_avx512_copy_packer;
#else
        break;
#endif
    case GEMM_BF16_AUTO: break;
    }
    return NULL;
}

static void free_copies(void)
{
    for (int i = 0; i < n_entries; i++) {
        free(entries[i].packed);
        entries[i].packed = NULL;
    }
    packed_for = GEMM_BF16_AUTO;
}

void gemm_bf16_weights_clear(void)
{
    free_copies();
    free(entries);
    entries = NULL;
    n_entries = cap_entries = 0;
}

static int add_one(const float *w, int transb, int ldb, int K, int N)
{
    if (n_entries == cap_entries) {
        const int cap = cap_entries ? 2 * cap_entries : 64;
        entry *e = realloc(entries, (size_t)cap * sizeof *e);
        if (!e) {
            gt_error("out of memory for the list of BF16 weight matrices");
            return -1;
        }
        entries = e;
        cap_entries = cap;
    }
    entries[n_entries++] = (entry){w, transb, ldb, K, N, NULL};
    packed_for = GEMM_BF16_AUTO; /* the new one is not packed yet */
    return 0;
}

int gemm_bf16_weights_add(const float *w, int rows, int cols)
{
    if (add_one(w, 1, cols, cols, rows) != 0) return -1; /* w^T: the forward's B */
    return add_one(w, 0, cols, rows, cols);               /* w: the backward's dinp */
}

static size_t copy_words(const gemm_bf16_packer *pk, const entry *e)
{
    return gemm_bf16_block_offset(pk, e->K, e->N, e->N, 0);
}

/* (Re)allocates every copy for packer pk; -1 when out of memory (all freed) */
static int allocate(const gemm_bf16_packer *pk)
{
    free_copies();
    for (int i = 0; i < n_entries; i++)
        if (!(entries[i].packed = gt_malloc(copy_words(pk, &entries[i]) * sizeof(uint32_t),
                                            "BF16 packed weights"))) {
            gemm_bf16_weights_clear();
            return -1;
        }
    return 0;
}

/* Every strip of every block of entry e, split over the team (no barrier: the strips
 * are written once each and read only after the region) */
static void pack_entry(const gemm_bf16_packer *pk, const entry *e)
{
    size_t off = 0;
    for (int jc = 0; jc < e->N; jc += pk->nc) {
        const int nc = e->N - jc < pk->nc ? e->N - jc : pk->nc;
        const int nstrips = (nc + pk->strip - 1) / pk->strip;
        for (int pc = 0; pc < e->K; pc += pk->kc) {
            const int kc = e->K - pc < pk->kc ? e->K - pc : pk->kc;
            uint32_t *panel = e->packed + off;
#pragma omp for schedule(static) nowait
            for (int s = 0; s < nstrips; s++)
                pk->pack_strip(panel, s, nc, e->transb, e->w, e->ldb, jc, pc, kc);
            off += pk->panel_words(nc, kc);
        }
    }
}

int gemm_bf16_weights_refresh(void)
{
    const enum gemm_bf16_path path = gemm_bf16_path();
    const gemm_bf16_packer *pk = packer_of(path);
    if (!pk || n_entries == 0) return 0;
    if (path != packed_for) {
        if (allocate(pk) != 0) return -1;
        packed_for = path;
    }
#pragma omp parallel
    for (int i = 0; i < n_entries; i++) pack_entry(pk, &entries[i]);
    return 0;
}

int gemm_bf16_weights_current(void)
{
    return n_entries > 0 && packed_for == gemm_bf16_path() && packer_of(packed_for);
}

static const entry *entry_of(const float *w, int transb)
{
    for (int i = 0; i < n_entries; i++)
        if (entries[i].w == w && entries[i].transb == transb) return &entries[i];
    return NULL;
}

/* Rows r0 .. r1 of w (r0 a multiple of the strip, r1 - r0 = strip unless it ends w)
 * into both copies: wt's strip of them in every depth block of w^T, and wn's depth
 * slice of them in every column block of w */
static void pack_band(const gemm_bf16_packer *pk, const entry *wt, const entry *wn, int r0,
                      int r1)
{
    int jc = r0 / pk->nc * pk->nc;
    int nc = wt->N - jc < pk->nc ? wt->N - jc : pk->nc;
    size_t off = gemm_bf16_block_offset(pk, wt->K, wt->N, jc, 0);
    for (int pc = 0; pc < wt->K; pc += pk->kc) {
        const int kc = wt->K - pc < pk->kc ? wt->K - pc : pk->kc;
        pk->pack_strip(wt->packed + off, (r0 - jc) / pk->strip, nc, 1, wt->w, wt->ldb, jc, pc,
                       kc);
        off += pk->panel_words(nc, kc);
    }
    const int pc = r0 / pk->kc * pk->kc, kc = wn->K - pc < pk->kc ? wn->K - pc : pk->kc;
    for (jc = 0; jc < wn->N; jc += pk->nc) {
        nc = wn->N - jc < pk->nc ? wn->N - jc : pk->nc;
        pk->pack_depth(wn->packed + gemm_bf16_block_offset(pk, wn->K, wn->N, jc, pc), nc,
                       wn->w, wn->ldb, jc, pc, kc, r0 - pc, r1 - r0);
    }
}

int gemm_bf16_weights_update(const float *w,
                             void (*update)(const void *ctx, size_t first, size_t count),
                             const void *ctx)
{
    if (!gemm_bf16_weights_current()) return 0;
    const entry *wt = entry_of(w, 1), *wn = entry_of(w, 0);
    if (!wt || !wn) return 0;
    const gemm_bf16_packer *pk = packer_of(packed_for);
    /* A band of `strip` rows of w is a strip of w^T (K = cols deep, N = rows wide) and a
     * depth slice of w (K = rows deep), inside one block of each: nc and kc are
     * multiples of strip (gemm_bf16_packer.h) */
    const int rows = wt->N, cols = wt->K, nbands = (rows + pk->strip - 1) / pk->strip;
#pragma omp parallel for schedule(static)
    for (int b = 0; b < nbands; b++) {
        const int r0 = b * pk->strip, r1 = rows - r0 < pk->strip ? rows : r0 + pk->strip;
        update(ctx, (size_t)r0 * cols, (size_t)(r1 - r0) * cols);
        pack_band(pk, wt, wn, r0, r1);
    }
    return 1;
}

size_t gemm_bf16_weights_bytes(void)
{
    const gemm_bf16_packer *pk = packer_of(packed_for);
    size_t bytes = 0;
    if (pk)
        for (int i = 0; i < n_entries; i++) bytes += copy_words(pk, &entries[i]) * sizeof(uint32_t);
    return bytes;
}

const void *gemm_bf16_weights_find(const float *B, int transb, int ldb, int K, int N,
                                   enum gemm_bf16_path path)
{
    if (path != packed_for) return NULL;
    for (int i = 0; i < n_entries; i++) {
        const entry *e = &entries[i];
        if (e->w == B && e->transb == transb && e->ldb == ldb && e->K == K && e->N == N)
            return e->packed;
    }
    return NULL;
}
