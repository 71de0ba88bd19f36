/* train_setup — the decisions a run makes before it opens anything: the grid, the
 * device, how data is read, the split of the global batch; and the lines that say so.
 * Every rank decides the same (the configs were compared first); a refusal is one
 * error line from rank 0 and -1 on every rank. */
#define GT_TRAIN_MODULE /* may include train_run.h */
#include <cblas.h>
#include <stdlib.h>
#include <string.h>

#include "h5data.h"
#include "offload.h"
#include "tp_comm.h"
#include "blas_core.h"
#include "cpu_features.h"
#include "gemm_bf16.h"
#include "gemm_bf16_weights.h"
#include "grid.h"
#include "kernels_cpu.h"
#include "simd.h"
#include "train_run.h"
#include "util.h"

int train_settle_grid(run *r)
{
    const gt_config *c = r->c;
    if (grid_init(c->tp, c->pp) != 0) return -1;
    r->world = par_world();
    r->dp = grid_dp_size();
    r->tp = grid_tp_size();
    r->pp = grid_pp_size();
    r->micro = c->micro_batches > 0 ? c->micro_batches : r->pp;
    if (r->pp > 1 && c->sync == SYNC_ASYNC) {
        if (par_is_root())
            gt_error("pp = %d with sync = async is not supported (a pipeline step applies "
                     "its own gradient)", r->pp);
        return -1;
    }
    if (r->pp > 1 && c->batch_size % r->micro != 0) {
        if (par_is_root())
            gt_error("pp = %d: micro_batches = %d must divide batch_size = %d", r->pp,
                     r->micro, c->batch_size);
        return -1;
    }
    return 0;
}

/* Why the CPU trains although offload asks for the GPU, or NULL. */
static const char *cpu_because(int n_gpus, int everyone, const char *why)
{
    if (!everyone) return n_gpus == 0 ? why : "not every rank has a GPU";
    return NULL;
}

/* tp > 1 on GPUs: whether the blocks' tp all-reduces go over NCCL (r->tp_nccl), else
 * why they go through host memory (*because). NCCL takes one GPU a rank: ranks share
 * one when their devices' identities (offload_device_id: UUID, else PCI address) are
 * the same, which counting cannot tell (under srun --gpus-per-task=1 every rank counts
 * one device, each a different GPU). Every rank decides the same (collectives of all
 * ranks). */
static void settle_tp_comm(run *r, const char **because)
{
    char id[PAR_ID_MAX], why[160];
    const int known = offload_device_id(id, sizeof id, why, sizeof why) == 0;
    static char unknown[224];
    if (!known) {
        snprintf(id, sizeof id, "unknown device of rank %d", par_rank());
        snprintf(unknown, sizeof unknown, "cannot tell whether ranks share a GPU (%s)", why);
    }
    const int shared = par_id_shared(id); /* a collective: before any branch */
    const char *env = getenv("GENTRAIN_NCCL");
    *because = shared                         ? "ranks share a GPU; NCCL needs one a rank"
               : !known                       ? unknown
               : !tp_comm_built()             ? "this gentrain was built without NCCL"
               : env && strcmp(env, "0") == 0 ? "GENTRAIN_NCCL=0"
                                              : NULL;
    if (!par_all_ok(*because == NULL) && !*because) *because = "another rank cannot use NCCL";
    r->tp_nccl = *because == NULL;
}

/* The offload line of a part on GPUs (pp > 1 or tp > 1): every layer of a stage on the
 * GPU (with tp > 1 each rank's shard of its blocks and of its vocabulary), and how the
 * shards' all-reduces go. */
static void say_part_placement(const run *r, int local, int n, const char *name,
                               const char *because)
{
    const gt_config *c = r->c;
    if (r->tp == 1) {
        par_printf("offload: pp = %d: each stage on its rank's GPU (rank %d: GPU %d of %d on "
                   "its node, %s) in FP16, the first stage's embeddings and the last stage's "
                   "final LayerNorm, head and loss included; activations between stages "
                   "through host memory over MPI; FP32 master weights and AdamW on the host, "
                   "dynamic loss scaling from %.0f\n", r->pp, par_rank(), local % n, n, name,
                   (double)LOSS_SCALE_INIT);
        return;
    }
    char grid[64], blocks[64], path[320], lib[64]; /* path holds a reason of up to 223 */
    snprintf(grid, sizeof grid, r->pp > 1 ? "tp = %d x pp = %d" : "tp = %d", r->tp, r->pp);
    if (r->pp > 1) snprintf(blocks, sizeof blocks, "its stage's blocks");
    else snprintf(blocks, sizeof blocks, "the %d transformer blocks", c->n_layer);
    tp_comm_describe(lib, sizeof lib);
    if (r->tp_nccl) snprintf(path, sizeof path, "over %s on the GPUs", lib);
    else snprintf(path, sizeof path, "through host memory over MPI (%s)", because);
    par_printf("offload: %s: each rank's shard of %s (1/%d of each block's heads and MLP "
               "units) and of %s (1/%d of the vocabulary) on its GPU (rank %d: GPU %d of %d "
               "on its node, %s) in FP16, their tp all-reduces %s; the loss's row "
               "statistics through host memory;%s FP32 master weights and AdamW on the host, "
               "dynamic loss scaling from %.0f\n", grid, blocks, r->tp,
               r->pp > 1 ? "the first stage's embeddings and the last stage's final "
                           "LayerNorm, head and loss"
                         : "the embeddings, final LayerNorm, head and loss",
               r->tp, par_rank(), local % n, n, name, path,
               r->pp > 1 ? " activations between stages through host memory over MPI;" : "",
               (double)LOSS_SCALE_INIT);
}

/* Which device trains (offload): each rank takes the GPU of its index on its node
 * (modulo the GPUs there). The GPU trains only when every rank has one (a step is a
 * collective; mixed devices would only wait for the slowest); otherwise one line says
 * why the CPU trains, or, with offload = required, that is an error. A whole model
 * (tp = pp = 1) trains every layer on the GPU, with offload = blocks through the stage
 * engine; a pipeline stage every layer it has there too, and a tensor-parallel shard
 * (any dp x tp x pp) its share of them (vocabulary-parallel ends), the shards
 * all-reducing over NCCL where they can, else through host memory. One line says which
 * layers run where. */
int train_settle_device(run *r)
{
    const gt_config *c = r->c;
    r->device = DEVICE_CPU;
    r->tp_nccl = 0;
    if (c->offload == OFFLOAD_NONE) return 0;
    const int local = par_local_rank(); /* a collective: before any branch */
    char why[256] = "", name[256] = "";
    /* n < 0: a driver or device is there but CUDA cannot start; the CPU trains (as
     * without a GPU) and the offload line gives the runtime's reason, not "no GPU". */
    const int counted = offload_device_count(why, sizeof why);
    const int broken = counted < 0;
    const int n = broken ? 0 : counted;
    int bound = n > 0 && offload_use_device(local % n, name, sizeof name, why,
                                            sizeof why) == 0;
    if (n > 0 && !bound) {
        gt_error("offload: %s", why);
        return par_all_ok(0) ? 0 : -1;
    }
    if (!par_all_ok(1)) return -1;
    const char *because = cpu_because(n, par_all_ok(bound), why);
    if (because) {
        if (c->offload == OFFLOAD_REQUIRED) {
            if (par_is_root()) gt_error("offload = required, but %s", because);
            return -1;
        }
        if (broken && because == why)
            par_printf("offload: the GPU cannot be used (%s); every layer runs on the CPU\n",
                       because);
        else if (n == 0)
            par_printf("offload: no GPU (%s); every layer runs on the CPU\n", because);
        else
            par_printf("offload: %s; every layer runs on the CPU\n", because);
        return 0;
    }
    if (r->pp > 1 || r->tp > 1) {
        const char *host_path = NULL;
        if (r->tp > 1) settle_tp_comm(r, &host_path);
        say_part_placement(r, local, n, name, host_path);
        r->device = DEVICE_GPU_STAGE;
        return 0;
    }
    if (c->offload == OFFLOAD_BLOCKS) {
        par_printf("offload: every layer on the GPU as one pipeline stage (rank %d: GPU %d of "
                   "%d on its node, %s): FP16 weights and activations, each micro-batch's "
                   "gradients down after its backward; FP32 master weights and AdamW on the "
                   "host, dynamic loss scaling from %.0f\n", par_rank(), local % n, n, name,
                   (double)LOSS_SCALE_INIT);
        r->device = DEVICE_GPU_STAGE;
        return 0;
    }
    par_printf("offload: every layer on the GPU (rank %d: GPU %d of %d on its node, %s): "
               "FP16 weights and activations, FP32 master weights and AdamW on the host, "
               "dynamic loss scaling from %.0f\n", par_rank(), local % n, n, name,
               (double)LOSS_SCALE_INIT);
    r->device = DEVICE_GPU_ALL;
    return 0;
}

/* The widest vector level the run's FP32 work uses: gentrain's kernels or the BLAS
 * core, whichever is wider (a core OpenBLAS names but this table does not know counts
 * as the CPU's own level). */
static enum cpu_isa run_vector_level(void)
{
    const enum cpu_isa own = (enum cpu_isa)simd_path_level(SIMD_AUTO);
    const int blas = blas_core_level(blas_core_name());
    const enum cpu_isa core = blas < 0 ? cpu_isa_level() : (enum cpu_isa)blas;
    return own > core ? own : core;
}

/* Threads, kernels, BLAS, the MFU peak and the precision, in a few lines; reserves the
 * BF16 products' buffers when the CPU computes in BF16. */
int train_report_compute(run *r)
{
    const gt_config *c = r->c;
    const int gpu = r->device != DEVICE_CPU;
    const int bf16 = !gpu && c->precision == PRECISION_BF16;
    r->threads = gt_resolve_threads(c->threads);
    if (!par_all_ok(r->threads > 0)) return -1;
    /* reserve the BF16 products' buffers and pick their path (on every rank: a
     * collective answer), before the peak, which depends on the path */
    if (bf16 && par_world() > 1)
        /* one measurement for the job, rank 0's, so that every rank of one CPU kind
         * takes the same path (a rank slowed while it measured could pick another) */
        cpu_bf16_dot_over_fma_use(par_bcast_double(cpu_bf16_dot_over_fma()));
    if (bf16 && !par_all_ok(gemm_bf16_init(r->threads) == 0)) return -1;
    const int amx = bf16 && gemm_bf16_path() == GEMM_BF16_AMX;
    /* BF16 instructions multiply (the portable path's products are FP32 sgemm) */
    const int bf16_units = bf16 && gemm_bf16_path() != GEMM_BF16_PORTABLE;
    /* MFU: against the CPU's measured peak, or, on a GPU, only when peak_gflops says
     * what the GPU's is. In FP32, the widest vector unit the run uses: its own kernels'
     * or the BLAS core's, whichever is wider (both held to AVX2 on an AVX-512 CPU, as
     * GENTRAIN_SIMD=avx2 with OPENBLAS_CORETYPE=Haswell does, peak at AVX2's rate). */
    const enum cpu_isa fma_level = cpu_fma_level_upto(run_vector_level());
    r->peak_gflops = c->peak_gflops > 0 ? c->peak_gflops
                     : gpu              ? 0.0
                     : bf16_units       ? cpu_bf16_peak_gflops(r->threads, amx)
                                        : cpu_fma_peak_gflops_upto(r->threads, fma_level);
    /* a launcher's binding that leaves few CPUs is visible here (mpirun binds few ranks
     * to one core each unless told --bind-to none) */
    const int cpus = cpu_available_count(), online = cpu_online_count();
    par_printf("threads: %d OpenMP", r->threads);
    if (cpus < online)
        par_printf(" on the %d of %d CPUs this process may run on", cpus, online);
    par_printf(", kernels %s, OpenBLAS %s; ", kernels_simd_name(),
               openblas_get_parallel() == 2   ? "openmp"
               : openblas_get_parallel() == 1 ? "pthreads"
                                              : "sequential");
    if (r->peak_gflops > 0)
        par_printf("peak %.1f GFLOP/s%s\n", r->peak_gflops,
                   c->peak_gflops > 0 ? ""
                   : amx  ? " (measured AMX BF16 tile peak; set peak_gflops to override)"
                   : bf16_units
                       ? " (measured BF16 dot-product peak; set peak_gflops to override)"
                   : fma_level == CPU_ISA_AVX2
                       ? " (measured AVX2 FMA peak; set peak_gflops to override)"
                       : " (measured FMA peak; set peak_gflops to override)");
    else
        par_printf("no MFU (set peak_gflops to the GPU's peak for it)\n");
    par_printf("BLAS: %s\n", blas_core_summary());
    if (bf16) {
        par_printf("precision: bf16 matrix products (%s path), FP32 accumulation, weights "
                   "and optimizer\n", gemm_bf16_path_name());
        /* a CPU that lists AMX but runs without it is said, not hidden */
        const char *no_amx = cpu_amx_declined();
        if (no_amx) par_printf("precision: AMX tiles not used: %s\n", no_amx);
        /* and so is a CPU whose dot products the automatic choice passed over */
        const double dot = cpu_bf16_dot_over_fma();
        if (gemm_bf16_path() == GEMM_BF16_PORTABLE && dot > 0.0 && !gemm_bf16_dot_products_pay())
            par_printf("precision: BF16 dot products measure %.2fx this CPU's FP32 "
                       "multiply-adds, so FP32 multiply-adds over BF16-rounded operands "
                       "run the products (GENTRAIN_BF16=avx512 asks for the dot products)\n",
                       dot);
        else if (gemm_bf16_path() == GEMM_BF16_PORTABLE && dot <= 0.0)
            /* no AVX512_BF16 (and so no AMX): nothing multiplies BF16 faster than FP32 */
            par_printf("precision: this CPU has no BF16 instructions, so the products "
                       "multiply BF16-rounded operands in FP32: slower than fp32 by the "
                       "rounding (precision = fp32 trains faster here)\n");
        else if (gemm_bf16_path() == GEMM_BF16_AVX512) /* what they run at (the bench's
                                                           prediction reads it) */
            par_printf("precision: BF16 dot products measure %.2fx this CPU's FP32 "
                       "multiply-adds\n", dot);
    } else if (gpu && c->precision == PRECISION_BF16) {
        par_printf("precision: bf16 applies to the CPU; the GPU trains in FP16 with loss "
                   "scaling\n");
    }
    return 0;
}

/* How the data is read: MPI-IO needs parallel HDF5, an MPI run, and MPI calls from the
 * loader thread (MPI_THREAD_MULTIPLE). */
int train_settle_data_io(run *r)
{
    const gt_config *c = r->c;
    const int mpi_io_ok = h5data_mpi_io_available() && par_thread_multiple();
    if (c->data_io == DATA_IO_MPI_IO && !mpi_io_ok) {
        if (par_is_root())
            gt_error("data_io = mpi-io: %s; use data_io = posix (or auto)",
                     !h5data_mpi_io_available()
                         ? "this gentrain was built with serial HDF5, which has no MPI-IO "
                           "driver"
                     : !par_launched() ? "MPI-IO needs an MPI run (mpirun or srun)"
                                       : "MPI does not give MPI_THREAD_MULTIPLE, which "
                                         "reading from the loader thread needs");
        return -1;
    }
    r->mpi_io = c->data_io != DATA_IO_POSIX && mpi_io_ok;
    return 0;
}

/* The divisors of n nearest x from below and from above, other than x (0: none). */
static void nearest_divisors(int64_t n, int64_t x, int64_t *below, int64_t *above)
{
    *below = *above = 0;
    for (int64_t d = 1; d * d <= n; d++) {
        if (n % d != 0) continue;
        const int64_t pair[2] = {d, n / d};
        for (int k = 0; k < 2; k++) {
            const int64_t v = pair[k];
            if (v < x && v > *below) *below = v;
            if (v > x && (*above == 0 || v < *above)) *above = v;
        }
    }
}

/* "a or b", "a", or "" for two candidates (0: none); each scaled by `unit`. */
static void or_list(int64_t a, int64_t b, int64_t unit, char *buf, size_t cap)
{
    if (a && b)
        snprintf(buf, cap, "%lld or %lld", (long long)(a * unit), (long long)(b * unit));
    else if (a || b)
        snprintf(buf, cap, "%lld", (long long)((a ? a : b) * unit));
    else
        buf[0] = '\0';
}

/* Rank 0: the one line refusing to resume a global batch of G sequences that batch_size
 * B x R replicas do not divide, with the nearest batch sizes and rank counts that keep
 * it, and the nearest global batches this split can run when set explicitly. */
static void refuse_global_batch(const run *r, int64_t G, int B)
{
    const int64_t R = r->dp, per_rank = (int64_t)r->tp * r->pp;
    int64_t lo, hi;
    char bs[64] = "", ranks[64] = "", keep[200] = "";
    if (G % R == 0) {
        nearest_divisors(G / R, B, &lo, &hi);
        or_list(lo, hi, 1, bs, sizeof bs);
    }
    if (G % B == 0) {
        nearest_divisors(G / B, R, &lo, &hi);
        or_list(lo, hi, per_rank, ranks, sizeof ranks);
    }
    if (bs[0] || ranks[0])
        snprintf(keep, sizeof keep, "; to keep it use %s%s%s%s%s", bs[0] ? "batch_size " : "",
                 bs, bs[0] && ranks[0] ? ", or " : "", ranks,
                 !ranks[0] ? "" : strcmp(ranks, "1") == 0 ? " rank"
                 : per_rank > 1 ? " ranks (replicas x tp x pp)" : " ranks");
    const int64_t per_micro = (int64_t)B * R, down = G / per_micro * per_micro;
    const int64_t x = down ? down : per_micro;
    gt_error("resume: the checkpoint's global batch of %lld sequences per step is not a "
             "whole number of micro-steps of batch_size %d x %lld %s = %lld%s; or set "
             "global_batch_size to change it (e.g. %lld or %lld)", (long long)G, B,
             (long long)R, r->tp * r->pp > 1 ? "replicas" : "ranks", (long long)per_micro,
             keep, (long long)x, (long long)(x + per_micro));
}

/* The global batch a run trains (r->global_batch): global_batch_size, or batch_size x
 * replicas; a resumed run keeps its checkpoint's unless global_batch_size sets another
 * number (changed = 1). 0, or -1 (rank 0 said why). */
static int settle_global_batch(run *r, int *changed)
{
    const gt_config *c = r->c;
    const int B = c->batch_size;
    const int64_t per_micro = (int64_t)B * r->dp;
    *changed = r->from && c->global_batch_size > 0 && c->global_batch_size != r->resume_batch;
    r->global_batch = r->from && !*changed ? r->resume_batch
                      : c->global_batch_size > 0 ? c->global_batch_size : per_micro;
    if (r->global_batch % per_micro == 0) return 0;
    if (par_is_root()) {
        if (r->from && !*changed)
            refuse_global_batch(r, r->global_batch, B);
        else
            gt_error("global_batch_size %lld is not a multiple of batch_size x %s = "
                     "%d x %d = %lld (it must be a whole number of micro-steps)",
                     (long long)r->global_batch, r->tp > 1 ? "replicas" : "ranks", B, r->dp,
                     (long long)per_micro);
    }
    return -1;
}

/* global_batch_size: whole micro-steps of batch_size x replicas sequences; a resumed
 * run keeps its checkpoint's global batch on any grid (ckpt.h), and says how. */
int train_settle_batch(run *r)
{
    const int B = r->c->batch_size;
    int changed = 0;
    r->auto_batch = r->c->global_batch_size == GT_BATCH_AUTO;
    if (r->auto_batch) return train_settle_auto_batch(r);
    if (settle_global_batch(r, &changed) != 0) return -1;
    /* With pp > 1 each micro-step is a whole pipeline schedule of micro_batches. */
    r->accum = r->eval_accum = (int)(r->global_batch / ((int64_t)B * r->dp));
    const char *unit = r->tp * r->pp > 1 ? "replica" : "rank";
    if (changed)
        par_printf("resume: global batch changed from %lld to %lld sequences per step "
                   "(global_batch_size): the lr schedule continues by step, the data at "
                   "sample %lld, validation on eval_batches x %lld windows\n",
                   (long long)r->resume_batch, (long long)r->global_batch,
                   (long long)r->first_sample, (long long)r->global_batch);
    else if (r->from)
        par_printf("resume: global batch of %lld sequences per step kept (the checkpoint's "
                   "run had %d %s%s): batch_size %d x %d %s%s x %d micro-step%s\n",
                   (long long)r->global_batch, r->resume_replicas, unit,
                   r->resume_replicas == 1 ? "" : "s", B, r->dp, unit, r->dp == 1 ? "" : "s",
                   r->accum, r->accum == 1 ? "" : "s");
    if (r->tp > 1 || r->pp > 1)
        par_printf("grid: %d replica%s (data parallel) x pp %d (stages of contiguous "
                   "layers, %d micro-batches of %d, 1F1B) x tp %d (heads and MLP units "
                   "split): ranks 0..%d hold replica 0\n", r->dp, r->dp == 1 ? "" : "s",
                   r->pp, r->micro, B / r->micro, r->tp, r->tp * r->pp - 1);
    if (r->dp > 1 || r->accum > 1)
        par_printf("global batch: %lld sequences = batch_size %d x %d %s%s x %d "
                   "micro-step%s%s\n", (long long)r->global_batch, B, r->dp, unit,
                   r->dp == 1 ? "" : "s", r->accum, r->accum == 1 ? "" : "s",
                   r->accum > 1 ? " (gradients accumulated)" : "");
    return 0;
}

/* BF16 on the CPU: the products' weight matrices packed once per update
 * (gemm_bf16_weights.h), here for the weights as loaded or initialised, then after
 * every update (phase_update). GENTRAIN_BF16_PREPACK=0 (tests) packs them in every
 * product instead, as before: the same bits, which tests/test_bf16.sh compares. */
int train_pack_weights(run *r)
{
    if (r->device == DEVICE_CPU && r->model.acts16 && par_is_root())
        printf("bf16 activations: ln_1, ln_2, q|k|v, attention output and GELU output stored "
               "in BF16 (the products read the same bits)%s\n",
               r->model.gelu_slope_kept ? "; the MLP pre-activation too, as GELU's slope there "
                                          "(its backward multiplies by the BF16 slope)"
                                        : "");
    const char *e = getenv("GENTRAIN_BF16_PREPACK");
    if (r->device != DEVICE_CPU || r->c->precision != PRECISION_BF16 || (e && strcmp(e, "0") == 0))
        return 0;
    enum { MAX_MATRICES = 4 * GPT_MAX_LAYERS + 1 };
    int idx[MAX_MATRICES];
    const int n = gpt_product_matrices(&r->model, idx, MAX_MATRICES);
    int ok = n <= MAX_MATRICES;
    for (int i = 0; ok && i < n; i++) {
        const gpt_param_info *p = &r->model.info[idx[i]];
        ok = gemm_bf16_weights_add(r->model.params + p->offset, (int)p->shape[0],
                                   (int)p->shape[1]) == 0;
    }
    ok = ok && gemm_bf16_weights_refresh() == 0;
    if (!par_all_ok(ok)) return -1;
    r->packed_weights = 1;
    if (par_is_root())
        printf("bf16 weights: packed once per update, %.1f MB\n",
               (double)gemm_bf16_weights_bytes() / 1048576.0);
    return 0;
}
