// gpu_model_impl — internal to offload/: what gpu_model_make.cu (making and freeing a
// model), gpu_model.cu (the rest of the C API of gpu_model.h) and gpu_model_passes.cu
// (the forward and backward pieces) share. Nothing outside those files includes it;
// src/ sees only gpu_model.h.
//
// It holds the definition of struct gpu_model, the per-layer offsets (layer_offsets)
// and activations (layer_acts), the error helpers (say, blas_name and the CU / BL
// macros), and the declarations of the passes gpu_model.cu queues. Shared names live in
// namespace gpu_model_detail; each file keeps its own helpers in an anonymous namespace.
//
// Tensor parallelism (gpu_model_create_shard_blocks): a shard's layout has Cl = C/tp
// of each block's split dimensions (set_layout) and NHl = NH/tp heads; the activations
// inside the split layers (qkv, attention, atty, the MLP's hidden units) are the
// shard's, those between them (the residual stream, the LayerNorms, the projections'
// outputs after tp_sum) whole. tp_sum (gpu_model_passes.cu) is the one place the peers
// meet.
//
// Device coordinates: a blocks model holds only the blocks' range [dev_lo, dev_hi) of
// the flat layout on the device (params, grads, grads_half), so the tensor offsets of
// layer_offsets are relative to dev_lo (0 for offload = all); the host buffers
// (staging, grad_host) keep the whole layout.
//
// Streams: every kernel, memset and cuBLAS call runs on g->compute (g->blas is bound
// to it); every host <-> device copy runs on g->copy, but for the loss's one float,
// which comes down on the compute stream (loss_ready). The two meet only through
// events: the compute stream waits for what the copy stream brings up (uploaded,
// tokens_in, stream_up); a copy that overwrites a device buffer queued kernels may
// still read first waits for everything queued on the compute stream (compute_mark);
// the copy stream waits for each range of gradients (grads_ready[]; grads_down[] marks
// it down, for gpu_model_grads_part) and for the
// residual stream (stream_conv) before bringing them down; copies_done marks the last
// copy of a backward, and the next step's compute waits for it before zeroing the
// gradients. The passes only queue work: none of them waits on the host.
#ifndef GT_OFFLOAD_GPU_MODEL_IMPL_CUH
#define GT_OFFLOAD_GPU_MODEL_IMPL_CUH

#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "gpu_model.h"
#include "ops.cuh"

namespace gpu_model_detail {

// Offsets (in elements) of one block's tensors: device coordinates (from dev_lo).
struct layer_offsets {
    size_t ln1w, ln1b, qkvw, qkvb, attprojw, attprojb, ln2w, ln2b, fcw, fcb, fcprojw, fcprojb;
    size_t begin, end; // the block's range in the whole layout (host coordinates)
};

// Activations one block keeps for its backward.
struct layer_acts {
    __half *ln1, *qkvr, *att, *atty, *res2, *ln2, *fch, *fch_gelu, *res3;
    float *ln1_mean, *ln1_rstd, *ln2_mean, *ln2_rstd;
};

inline void say(char *why, size_t cap, const char *fmt, ...)
{
    if (!why || cap == 0) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, cap, fmt, ap);
    va_end(ap);
}

inline const char *blas_name(int status)
{
    switch (status) {
    case CUBLAS_STATUS_NOT_INITIALIZED: return "cuBLAS not initialised";
    case CUBLAS_STATUS_ALLOC_FAILED: return "cuBLAS could not allocate";
    case CUBLAS_STATUS_INVALID_VALUE: return "cuBLAS: invalid value";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "cuBLAS: not supported on this GPU";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "cuBLAS: execution failed";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "cuBLAS: not supported";
    default: return "cuBLAS error";
    }
}

} // namespace gpu_model_detail

namespace gpu_model_detail {

// Profiling (gpu_model_profile): timing events on the compute stream, one per mark; the
// time from mark i to mark i + 1 is charged to mark i's phase, and a mark of kProfIdle
// (the end of an entry point's work) charges nothing.
constexpr int kProfEvents = 4096;
constexpr int kProfIdle = -1;
struct profiler {
    cudaEvent_t ev[kProfEvents]; // all created when profiling is turned on
    int phase[kProfEvents];
    int n;       // marks since the last read
    int dropped; // marks that found the pool full
};

} // namespace gpu_model_detail

struct gpu_model {
    gpu_model_shape s;
    int maxB, maxT;
    int blocks;                  // made by gpu_model_create_blocks (or _shard_blocks,
                                 // _stage): the residual stream's entry points
    int ends;                    // kEndEmbed | kEndHead on the device (offload = all:
                                 // both; a stage: its own; blocks alone: none)
    int fwd_grad;                // the last forward left what a backward needs
    gpu_model_tp tp;             // the shard (size 1: the whole blocks) and its sum hook
    int fwd_B, fwd_T;            // blocks: the last forward's batch (0: none yet)
    int att_row_blocks;          // attention's row blocks (ops.cuh; 0: the default)
    int fwd_row_blocks;          // those the last blocks_forward used (its backward's)
    int accumulating;            // a micro-batch with last = 0 ran: the sum is not down
    int send;                    // this backward sends its gradients down (send_grads)
    float sum_scale;             // ... multiplied by this on the way to FP16
    size_t n_params;
    size_t wte, wpe, lnfw, lnfb; // offsets (device = layout coordinates: offload = all)
    size_t dev_lo, dev_hi;       // the layout range on the device: all (any end on the
                                 // device), or the blocks'
    gpu_model_detail::layer_offsets *lo; // [L]

    cudaStream_t compute, copy;
    cublasHandle_t blas;
    cudaEvent_t uploaded, tokens_in, loss_ready, copies_done, compute_mark;
    cudaEvent_t stream_up, stream_conv, stream_down; // the residual stream (blocks)
    // The gradients' parts, in the order the backward finishes them: ln_f, blocks
    // L-1..0, embeddings (L + 2; a blocks model has only the blocks'). Per part k:
    // grads_ready[k] (compute stream: converted to FP16), grads_down[k] (copy stream:
    // in the pinned host buffer), and its layout range [part_lo[k], part_hi[k]) as the
    // last backward that sent it queued it (empty: never sent).
    cudaEvent_t *grads_ready, *grads_down;
    size_t *part_lo, *part_hi;

    // Device memory: one allocation each for the big families, so a failure names one.
    __half *params;      // [dev_hi - dev_lo]
    float *grads;        // [dev_hi - dev_lo], scaled, accumulated by the kernels
    __half *grads_half;  // [dev_hi - dev_lo], what goes down
    int32_t *tokens;     // [2][maxB*maxT]: inputs, targets (with an end)
    void *acts_mem;      // every activation and scratch buffer below
    void *blas_workspace; // cuBLAS's (cublasSetWorkspace)
    __half *x0, *lnf, *logits, *proj, *qkv; // qkv: one layer's, the backward uses qkvr
    float *lnf_mean, *lnf_rstd, *losses, *loss; // lnf .. loss: with the head only
    float *stream_f32;   // [maxB*maxT*C] the residual stream in FP32 (blocks kinds)
    float *tp_f32;       // [maxB*maxT*C] the host path's all-reduce in FP32 (else NULL)
    float *xent_stats;   // [3*maxB*maxT] a shard's head: its loss's row stats (else NULL)
    gpu_model_detail::layer_acts *la; // [L]
    __half *dres, *dln, *datty, *dqkv, *d4a, *d4b, *att_fwd_scratch, *att_bwd_scratch;

    gpu_model_detail::profiler *prof; // NULL: profiling off

    // Pinned host memory.
    uint16_t *param_staging, *grad_host; // [n_params] each: the whole layout
    int32_t *token_staging;              // with an end
    float *loss_host;                    // with an end
    float *stream_host;                  // [maxB*maxT*C] blocks kinds
    float *tp_host;                      // [maxB*maxT*C] the host path's all-reduce
    float *xent_host;                    // [4*maxB*maxT] a shard's head: the loss's
                                         // stats combined on the host
};

// Checks for the functions of both files (each has `why` and `cap` in scope).
#define CU(call)                                                                       \
    do {                                                                               \
        cudaError_t e_ = (call);                                                       \
        if (e_ != cudaSuccess) {                                                       \
            gpu_model_detail::say(why, cap, "GPU: %s (%s)", cudaGetErrorString(e_),   \
                                  #call);                                              \
            return -1;                                                                 \
        }                                                                              \
    } while (0)
#define BL(call)                                                                       \
    do {                                                                               \
        int s_ = (call);                                                               \
        if (s_ != 0) {                                                                 \
            gpu_model_detail::say(                                                     \
                why, cap, "GPU: %s failed: %s (%d)", #call,                                \
                s_ >= OL_CUDA_ERROR ? cudaGetErrorString((cudaError_t)(s_ - OL_CUDA_ERROR)) \
                                    : gpu_model_detail::blas_name(s_),                     \
                s_ >= OL_CUDA_ERROR ? s_ - OL_CUDA_ERROR : s_);                            \
            return -1;                                                                 \
        }                                                                              \
    } while (0)

// Marks the start of a phase's work on the compute stream when profiling is on (for
// the functions of both files; `g`, `why` and `cap` in scope).
#define PROF(phase)                                                                    \
    do {                                                                               \
        if (g->prof && gpu_model_detail::prof_mark(g, (phase), why, cap) != 0) return -1; \
    } while (0)

namespace gpu_model_detail {

// The ends of the model a gpu_model holds on the device (g->ends).
constexpr int kEndEmbed = 1, kEndHead = 2;

// gpu_model.cu: records a profiling mark (see struct profiler). Returns 0, or -1 with
// `why` set.
int prof_mark(gpu_model *g, int phase, char *why, size_t cap);
// gpu_model.cu: frees g's profiler (its events), if any; for profiling's end and for
// gpu_model_free (gpu_model_make.cu).
void free_profiler(gpu_model *g);

// gpu_model_passes.cu: the FP32 <-> FP16 conversions of n elements, queued on `stream`
// (the caller checks the launch with cudaGetLastError).
void launch_float_to_half(__half *dst, const float *src, size_t n, cudaStream_t stream);
void launch_half_to_float(float *dst, const __half *src, size_t n, cudaStream_t stream);

// The shard's share of a split dimension (n: C, or NH): n / tp.size.
inline int shard_of(const gpu_model *g, int n) { return n / g->tp.size; }

// gpu_model_passes.cu: the passes the API queues, all on the compute stream.
// The last block's output (x0 with no blocks).
const __half *blocks_out(const gpu_model *g);
// Every block, from x0 to blocks_out(g), keeping what the backward needs.
int blocks_forward(gpu_model *g, int B, int T, char *why, size_t cap);
// The forward of the ends g holds and its blocks: from the tokens (embedding) or x0, to
// the loss (head; dlogits_scale > 0 also leaves scale * d(mean loss) / d(logits) for
// the backward) or blocks_out(g). offload = all: the whole forward.
int forward(gpu_model *g, int B, int T, float dlogits_scale, char *why, size_t cap);
// Every block's backward, last first: dres holds d(scaled loss)/d(blocks_out) on entry
// and d(scaled loss)/d(x0) on return.
int blocks_backward(gpu_model *g, int B, int T, char *why, size_t cap);
// The backward of the last training forward, of the ends g holds and its blocks: from
// the loss (head) or from dres (the caller put d(scaled loss)/d(blocks_out) there), to
// the embedding's gradients (embed) or d(scaled loss)/d(x0) in dres; every part's
// gradients sent down as they are final. offload = all: the whole backward.
int backward(gpu_model *g, int B, int T, char *why, size_t cap);

} // namespace gpu_model_detail

#endif
