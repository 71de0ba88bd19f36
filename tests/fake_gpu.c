/* fake_gpu — a test double of the GPU side (offload/offload.h and offload/gpu_model.h)
 * that runs on the CPU, so `make check` can drive the trainer's offload = all and
 * offload = blocks paths (src/train/train.c, src/engine/device_step.c and gpu_stage.c,
 * src/engine/lossscale.c) on a machine without a GPU.
 *
 * It is linked only into tests/gentrain_fakegpu (src/cli/main.c + this file, before
 * libgentrain.a, so the archive's real offload objects are never pulled in), never into
 * gentrain.
 *
 * What it does: one "device" (offload_device_count = 1). gpu_model_* keep a CPU model
 * of src/model/model.h (whole, tp = 1), laid out by src/layout/ as the host's is;
 * gpu_model_check_layout compares the host's table with it tensor by tensor (name,
 * shape, offset), and an upload before that check passed is refused, so a trainer path
 * that skips the check fails here as it would go unseen on a GPU. The parameters
 * it computes with are what the caller put in the FP16 staging buffer, widened back to
 * float, so the forward and backward see FP16-rounded weights as the GPU would. A
 * training step computes d(mean loss)/d(params) in FP32, multiplies by the loss scale
 * and rounds to FP16 (half.h), so a scaled gradient beyond the FP16 range comes back as
 * inf, exactly as the GPU's would. Activations stay FP32: losses differ from the GPU's
 * by that, not by the placement logic this double is for.
 *
 * A blocks model (gpu_model_create_blocks) is the same whole-layout CPU model with its
 * embedding and head switched off (has_embed = has_head = 0), so gpt_stage_forward and
 * gpt_stage_backward run exactly its blocks, model.c's middle-stage path; a stage model
 * (gpu_model_create_stage) switches on the ends it has, model.c's first- and
 * last-stage paths (tokens in, the loss out, d(logits) x the loss scale), and "holds"
 * the whole layout as the GPU's does. As the GPU
 * does, the residual stream is rounded through FP16 on the way in and out (x0, xL, dxL,
 * dx0), only the blocks' range of the staging buffer is read, and the gradients hand
 * back the blocks' range scaled (dxL carries the scale) through FP16, zeros elsewhere.
 *
 * A shard blocks model (gpu_model_create_shard_blocks, tp > 1) is the same with a CPU
 * model of that shard (gpt_create_tp: model.c's shard layout, which gpu_model.h
 * promises), whose tensor-parallel hook is the caller's host_sum: model.c's passes
 * call it where the GPU's would (after the row-parallel products, for the input
 * gradients of the column-parallel ones); a shard's stage model also runs model.c's
 * vocabulary-parallel embedding and head, with host_max for the loss's row maxima. There is no device here, so no device hook:
 * tp_comm_built() is 0 and the trainer takes the host path.
 *
 * Fault injection, read from the environment once per process:
 *   GENTRAIN_FAKE_GPU_OVERFLOW=3,7    on the 3rd and 7th training call of this process
 *                                     (a micro-batch of gpu_model_step_micro, or
 *                                     gpu_model_blocks_backward or _stage_backward;
 *                                     1-based), one gradient comes back as +inf
 *                                     (with accumulation: in the sum that comes
 *                                     back after the last micro-batch)
 *   GENTRAIN_FAKE_GPU_OVERFLOW_AT=dx0 blocks: instead one value of dx0 comes back as
 *                                     +inf, so the host's embedding gradients overflow;
 *                                     a stage with the embedding has no dx0: one of
 *                                     wpe's gradients comes back as +inf instead
 *                                     (default: grads, a block's gradient)
 *   GENTRAIN_FAKE_GPU_OVERFLOW_RANK=r only on the rank whose par_rank() is r (default:
 *                                     every rank) */
#include "../offload/gpu_model.h"
#include "../offload/offload.h"
#include "../offload/tp_comm.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "backend.h"
#include "half.h"
#include "layout.h"
#include "model.h"
#include "parallel.h"

#define FAKE_NAME "fake GPU (the CPU with FP16-rounded weights and gradients: a test double)"
#define HALF_INF 0x7C00u

enum { MAX_FAULTS = 64 };

struct gpu_model {
    gpt_model m;
    int maxB, maxT;
    int blocks;          /* made by gpu_model_create_blocks (or _stage, _shard_blocks) */
    size_t lo, hi;       /* the layout range "on the device": all (any end), or the
                            blocks' */
    int fwd_grad;        /* the last stage forward left what a backward needs */
    int fwd_B, fwd_T;    /* blocks: the last forward's batch (0: none) */
    uint16_t *staging;   /* [n_params] FP16 parameters, filled by the caller */
    uint16_t *grads;     /* [n_params] FP16 scaled gradients of the last step */
    float *sum;          /* [n_params] FP32 scaled gradients of the micro-batches so far */
    int accumulating;    /* a micro-batch with last = 0 ran: the sum is not "down" */
    float *stream;       /* blocks: [maxB*maxT*C] the residual stream rounded to FP16 */
    int layout_checked;  /* gpu_model_check_layout accepted the caller's layout */
};

static void say(char *why, size_t cap, const char *fmt, ...)
{
    if (!why || cap == 0) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, cap, fmt, ap);
    va_end(ap);
}

/* ------------------------------------------------------------- fault injection */

static struct {
    int read;
    int n;
    long steps[MAX_FAULTS]; /* 1-based training calls that overflow */
    int rank;               /* -1: every rank */
    int at_dx0;             /* blocks: the overflow goes into dx0, not a gradient */
    long calls;             /* training calls so far in this process */
} faults;

static void read_faults(void)
{
    if (faults.read) return;
    faults.read = 1;
    faults.rank = -1;
    const char *list = getenv("GENTRAIN_FAKE_GPU_OVERFLOW");
    for (const char *p = list; p && *p;) {
        char *end;
        errno = 0;
        long k = strtol(p, &end, 10);
        if (end == p || errno != 0 || k < 1) {
            fprintf(stderr, "fake_gpu: GENTRAIN_FAKE_GPU_OVERFLOW=%s: expected step "
                    "numbers >= 1 separated by commas\n", list);
            exit(2);
        }
        if (faults.n < MAX_FAULTS) faults.steps[faults.n++] = k;
        p = *end == ',' ? end + 1 : end;
        if (*end != ',' && *end != '\0') {
            fprintf(stderr, "fake_gpu: GENTRAIN_FAKE_GPU_OVERFLOW=%s: unexpected '%c'\n",
                    list, *end);
            exit(2);
        }
    }
    const char *rank = getenv("GENTRAIN_FAKE_GPU_OVERFLOW_RANK");
    if (rank && *rank) faults.rank = atoi(rank);
    const char *at = getenv("GENTRAIN_FAKE_GPU_OVERFLOW_AT");
    if (at && *at && strcmp(at, "grads") != 0 && strcmp(at, "dx0") != 0) {
        fprintf(stderr, "fake_gpu: GENTRAIN_FAKE_GPU_OVERFLOW_AT=%s: expected grads or dx0\n",
                at);
        exit(2);
    }
    faults.at_dx0 = at && strcmp(at, "dx0") == 0;
}

/* Whether call number `call` (1-based) of this process is to overflow. */
static int overflow_here(long call)
{
    read_faults();
    if (faults.rank >= 0 && faults.rank != par_rank()) return 0;
    for (int i = 0; i < faults.n; i++)
        if (faults.steps[i] == call) return 1;
    return 0;
}

/* ------------------------------------------------------------- offload.h */

int offload_built(void) { return 1; }

void offload_build(char *buf, size_t cap) { snprintf(buf, cap, "the tests' fake GPU"); }

int offload_device_count(char *why, size_t cap)
{
    if (cap) why[0] = '\0';
    return 1;
}

int offload_use_device(int index, char *name, size_t name_cap, char *why, size_t cap)
{
    if (index != 0) {
        if (name_cap) name[0] = '\0';
        say(why, cap, "fake GPU: no device %d (there is one)", index);
        return -1;
    }
    snprintf(name, name_cap, "%s", FAKE_NAME);
    return 0;
}

/* The fake device's identity. By default every process of the machine has the same
 * one fake GPU (a node whose ranks all see one device, as under mpirun); with
 * GENTRAIN_FAKE_GPU_PER_TASK=1 each rank has its own, shown to it as device 0 (as under
 * srun --gpus-per-task=1), so ids differ although every rank counts one device. */
int offload_device_id(char *id, size_t cap, char *why, size_t why_cap)
{
    (void)why, (void)why_cap;
    const char *per_task = getenv("GENTRAIN_FAKE_GPU_PER_TASK");
    if (per_task && strcmp(per_task, "1") == 0)
        snprintf(id, cap, "fake-GPU-of-rank-%d", par_rank());
    else
        snprintf(id, cap, "fake-GPU-0");
    return 0;
}

/* ------------------------------------------------------------- gpu_model.h */

static gpt_shape to_gpt(const gpu_model_shape *s)
{
    const gpt_shape g = {s->vocab_size, s->block_size, s->n_layer, s->n_head, s->n_embd};
    return g;
}

size_t gpu_model_shard_param_count(const gpu_model_shape *s, int tp)
{
    /* The layout of gpu_model.h is the one of src/layout/ (the double's CPU model is
     * made from it too): counted there, not again here. */
    if (tp < 1 || s->n_head % tp != 0 || s->vocab_size % tp != 0) return 0;
    const gpt_part whole = {.tp_size = tp, .layer0 = 0, .n_layers = s->n_layer,
                            .has_embed = 1, .has_head = 1};
    gpt_layout lay;
    if (gpt_layout_make(to_gpt(s), whole, &lay) != 0) return 0;
    free(lay.info);
    return lay.n_params;
}

size_t gpu_model_param_count(const gpu_model_shape *s)
{
    return gpu_model_shard_param_count(s, 1);
}

/* What this double allocates: FP32 parameters and gradients, the two FP16 buffers, and
 * the activations of model.c (per layer about 20 x C floats a token plus the attention
 * matrices; with the head the logits and their gradient, without it the residual
 * stream). An estimate. */
static size_t fake_bytes(const gpu_model_shape *s, int B, int T, int blocks)
{
    const size_t P = gpu_model_param_count(s), N = (size_t)B * T, C = (size_t)s->n_embd;
    /* (a shard's: the whole model's estimate, more than it takes) */
    const size_t acts = (size_t)s->n_layer * (20 * N * C + (size_t)B * s->n_head * T * T) +
                        (blocks ? N * C : 2 * N * (size_t)s->vocab_size) + 4 * N * C;
    return P * (4 + 4 + 2 + 2) + acts * sizeof(float);
}

size_t gpu_model_device_bytes(const gpu_model_shape *s, int B, int T)
{
    return fake_bytes(s, B, T, 0);
}

size_t gpu_model_blocks_device_bytes(const gpu_model_shape *s, int B, int T)
{
    return fake_bytes(s, B, T, 1);
}

size_t gpu_model_stage_device_bytes(const gpu_model_shape *s, int B, int T,
                                    const struct gpu_model_tp *tp, int embed, int head)
{
    (void)tp;
    return fake_bytes(s, B, T, !head) + (embed ? 0 : (size_t)B * T * s->n_embd * 4);
}

size_t gpu_model_shard_blocks_device_bytes(const gpu_model_shape *s, int B, int T,
                                           const gpu_model_tp *tp)
{
    (void)tp;
    return fake_bytes(s, B, T, 1);
}

/* The whole model's "shard". */
static const gpu_model_tp whole = {1, 0, NULL, NULL, NULL, NULL, NULL};

/* blocks: the residual stream's entry points; embed, head: the ends "on the device"
 * (a stage model; offload = all has both, without blocks). */
static gpu_model *create(const gpu_model_shape *s, int B, int T, int blocks, int embed,
                         int head, const gpu_model_tp *tp, char *why, size_t cap)
{
    if (!s || s->n_layer < 0 || s->n_head < 1 || s->n_embd < 1 || s->vocab_size < 1 ||
        s->block_size < 1 || s->n_embd % s->n_head != 0 || B < 1 || T < 1 ||
        T > s->block_size) {
        say(why, cap, "fake GPU: bad model shape or batch (n_embd %% n_head, T <= block_size)");
        return NULL;
    }
    if (tp->size < 1 || tp->rank < 0 || tp->rank >= tp->size ||
        s->n_head % tp->size != 0 || s->vocab_size % tp->size != 0 ||
        (tp->size > 1 && (!tp->host_sum || tp->device_sum))) {
        say(why, cap, "fake GPU: shard %d of tp = %d: tp must divide n_head and vocab_size, "
            "and the sum is the host's (no device here)", tp->rank, tp->size);
        return NULL;
    }
    if ((embed || head) && tp->size > 1 && !tp->host_max) {
        say(why, cap, "fake GPU: a shard of tp = %d with an end needs host_max", tp->size);
        return NULL;
    }
    gpu_model *g = calloc(1, sizeof *g);
    if (!g) {
        say(why, cap, "fake GPU: out of host memory");
        return NULL;
    }
    int threads = 1;
#ifdef _OPENMP
    threads = omp_get_max_threads(); /* the kernels' scratch is per OpenMP thread */
#endif
    if (gpt_create_tp(&g->m, to_gpt(s), &backend_cpu, threads, tp->size, tp->rank) != 0) {
        say(why, cap, "fake GPU: cannot make the CPU model");
        free(g);
        return NULL;
    }
    g->maxB = B;
    g->maxT = T;
    g->blocks = blocks;
    gpt_model *m = &g->m;
    const int alone = blocks && !embed && !head; /* the blocks alone */
    g->lo = alone ? m->info[m->i_wpe].offset + m->info[m->i_wpe].numel : 0;
    g->hi = alone ? m->info[m->i_lnf].offset : m->n_params;
    /* The ends it lacks switched off: model.c's middle stage (no embedding, no head,
     * no logits), or its first or last. */
    if (blocks) m->has_embed = embed, m->has_head = head;
    m->tp_allreduce = tp->host_sum;
    m->tp_allreduce_max = tp->host_max; /* a shard's vocabulary-parallel loss */
    m->tp_ctx = tp->host_ctx;
    if (m->n_params != gpu_model_shard_param_count(s, tp->size) || gpt_alloc_grads(m) != 0 ||
        gpt_alloc_acts(m, B, T) != 0 ||
        !(g->staging = calloc(m->n_params, sizeof(uint16_t))) ||
        !(g->grads = calloc(m->n_params, sizeof(uint16_t))) ||
        !(g->sum = calloc(m->n_params, sizeof(float))) ||
        (blocks && !(g->stream = malloc((size_t)B * T * s->n_embd * sizeof(float))))) {
        say(why, cap, "fake GPU: out of host memory (or a layout mismatch)");
        gpu_model_free(g);
        return NULL;
    }
    return g;
}

gpu_model *gpu_model_create(const gpu_model_shape *s, int B, int T, char *why, size_t cap)
{
    return create(s, B, T, 0, 1, 1, &whole, why, cap);
}

gpu_model *gpu_model_create_blocks(const gpu_model_shape *s, int B, int T, char *why,
                                   size_t cap)
{
    return create(s, B, T, 1, 0, 0, &whole, why, cap);
}

gpu_model *gpu_model_create_stage(const gpu_model_shape *s, int B, int T,
                                  const struct gpu_model_tp *tp, int embed, int head,
                                  char *why, size_t cap)
{
    return create(s, B, T, 1, embed != 0, head != 0, tp ? tp : &whole, why, cap);
}

gpu_model *gpu_model_create_shard_blocks(const gpu_model_shape *s, int B, int T,
                                         const gpu_model_tp *tp, char *why, size_t cap)
{
    return create(s, B, T, 1, 0, 0, tp, why, cap);
}

void gpu_model_free(gpu_model *g)
{
    if (!g) return;
    gpt_free(&g->m);
    free(g->staging);
    free(g->grads);
    free(g->sum);
    free(g->stream);
    free(g);
}

/* As the GPU's: the caller's table against the one this double computes with, the
 * CPU model's (src/layout/ through gpt_create_tp), tensor by tensor. */
int gpu_model_check_layout(gpu_model *g, const gpu_model_tensor *t, int n, char *why,
                           size_t cap)
{
    const gpt_model *m = &g->m;
    g->layout_checked = 0;
    if (!t || n != m->n_info) {
        say(why, cap, "fake GPU: the host's layout has %d tensors, the fake GPU's %d",
            t ? n : 0, m->n_info);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        const gpt_param_info *p = &m->info[i];
        if (t[i].name && strcmp(t[i].name, p->name) == 0 && t[i].ndim == p->ndim &&
            t[i].dims[0] == p->shape[0] && (p->ndim == 1 || t[i].dims[1] == p->shape[1]) &&
            t[i].offset == p->offset)
            continue;
        say(why, cap, "fake GPU: the host's layout differs at tensor %d: %s [%lld, %lld] at "
            "%zu on the host, %s [%lld, %lld] at %zu here", i,
            t[i].name ? t[i].name : "(null)", (long long)t[i].dims[0],
            (long long)(t[i].ndim == 2 ? t[i].dims[1] : 0), t[i].offset, p->name,
            (long long)p->shape[0], (long long)p->shape[1], p->offset);
        return -1;
    }
    g->layout_checked = 1;
    return 0;
}

uint16_t *gpu_model_param_staging(gpu_model *g) { return g->staging; }

int gpu_model_upload_params(gpu_model *g, char *why, size_t cap)
{
    /* The trainer must have had its layout checked first (device_step.c, gpu_stage.c):
     * a path that skips the check fails here instead of passing unseen. */
    if (!g->layout_checked) {
        say(why, cap, "fake GPU: parameters uploaded before gpu_model_check_layout");
        return -1;
    }
    half_to_float(g->m.params + g->lo, g->staging + g->lo, g->hi - g->lo);
    return 0;
}

static int check_batch(const gpu_model *g, int B, int T, char *why, size_t cap)
{
    if (B < 1 || T < 1 || B > g->maxB || T > g->maxT) {
        say(why, cap, "fake GPU: batch %d x %d is outside the %d x %d the model was made for",
            B, T, g->maxB, g->maxT);
        return -1;
    }
    return 0;
}

static int check_kind(const gpu_model *g, int blocks, char *why, size_t cap)
{
    if (g->blocks == blocks) return 0;
    say(why, cap, blocks ? "fake GPU: the blocks entry points need gpu_model_create_blocks"
                         : "fake GPU: a blocks model has no embedding or head");
    return -1;
}

int gpu_model_step(gpu_model *g, const int32_t *inputs, const int32_t *targets, int B,
                   int T, float loss_scale, float *loss, char *why, size_t cap)
{
    return gpu_model_step_micro(g, inputs, targets, B, T, loss_scale, 1, 1, 1.0f, loss, why,
                                cap);
}

/* As the GPU: the scaled FP32 gradients of the micro-batches add up in `sum`, which is
 * multiplied by sum_scale and rounded to FP16 once, at the last; an injected overflow
 * puts +inf in the sum, so it reaches the host only then, as a real one would. */
int gpu_model_step_micro(gpu_model *g, const int32_t *inputs, const int32_t *targets, int B,
                         int T, float loss_scale, int first, int last, float sum_scale,
                         float *loss, char *why, size_t cap)
{
    if (check_kind(g, 0, why, cap) != 0 || check_batch(g, B, T, why, cap) != 0) return -1;
    if (!inputs || !targets || !(loss_scale > 0.0f)) {
        say(why, cap, "fake GPU: a training step needs targets and a loss scale > 0");
        return -1;
    }
    if (!first && !g->accumulating) {
        say(why, cap, "fake GPU: a micro-batch that continues a step needs one that began it");
        return -1;
    }
    const long call = ++faults.calls;
    gpt_model *m = &g->m;
    m->loss_grad_scale = 1.0f;
    gpt_zero_grad(m);
    *loss = gpt_forward(m, inputs, targets, B, T, 1);
    gpt_backward(m);
    if (first) memset(g->sum, 0, m->n_params * sizeof(float));
    for (size_t i = 0; i < m->n_params; i++) g->sum[i] += m->grads[i] * loss_scale;
    if (overflow_here(call)) g->sum[m->n_params / 2] = INFINITY;
    g->accumulating = !last;
    if (last) {
        for (size_t i = 0; i < m->n_params; i++) g->sum[i] *= sum_scale;
        half_from_float(g->grads, g->sum, m->n_params);
    }
    return 0;
}

int gpu_model_loss(gpu_model *g, const int32_t *inputs, const int32_t *targets, int B,
                   int T, float *loss, char *why, size_t cap)
{
    if (check_kind(g, 0, why, cap) != 0 || check_batch(g, B, T, why, cap) != 0) return -1;
    if (!inputs || !targets) {
        say(why, cap, "fake GPU: the loss needs targets");
        return -1;
    }
    *loss = gpt_forward(&g->m, inputs, targets, B, T, 0);
    return 0;
}

/* dst[n] = src[n] rounded through FP16 (dst may be src), in chunks. */
static void round_half(float *dst, const float *src, size_t n)
{
    uint16_t h[4096];
    for (size_t lo = 0; lo < n; lo += 4096) {
        const size_t len = n - lo < 4096 ? n - lo : 4096;
        half_from_float(h, src + lo, len);
        half_to_float(dst + lo, h, len);
    }
}

int gpu_model_blocks_forward(gpu_model *g, const float *x0, float *xL, int B, int T,
                             char *why, size_t cap)
{
    if (check_kind(g, 1, why, cap) != 0 || check_batch(g, B, T, why, cap) != 0) return -1;
    const size_t n = (size_t)B * T * g->m.shape.n_embd;
    round_half(g->stream, x0, n);
    const float *out = gpt_stage_forward(&g->m, NULL, g->stream, NULL, B, T, 1, NULL);
    round_half(xL, out, n);
    g->fwd_B = B, g->fwd_T = T;
    return 0;
}

int gpu_model_blocks_backward(gpu_model *g, const float *dxL, float *dx0, int B, int T,
                              char *why, size_t cap)
{
    if (check_kind(g, 1, why, cap) != 0) return -1;
    if (B != g->fwd_B || T != g->fwd_T) {
        say(why, cap, "fake GPU: a blocks backward of %d x %d needs a blocks forward of that "
            "batch first (the last one was %d x %d)", B, T, g->fwd_B, g->fwd_T);
        return -1;
    }
    const long call = ++faults.calls;
    gpt_model *m = &g->m;
    const size_t n = (size_t)B * T * m->shape.n_embd;
    round_half(g->stream, dxL, n);
    gpt_zero_grad(m);
    const float *din = gpt_stage_backward(m, g->stream); /* scaled as dxL is */
    round_half(dx0, din, n);
    half_from_float(g->grads + g->lo, m->grads + g->lo, g->hi - g->lo);
    if (overflow_here(call)) {
        if (faults.at_dx0)
            dx0[n / 2] = INFINITY;
        else
            g->grads[g->lo + (g->hi - g->lo) / 2] = HALF_INF;
    }
    return 0;
}

/* As the GPU's: model.c's stage passes on the ends this stage has; the residual stream
 * and the gradients through FP16, the loss's gradient x loss_scale. */
int gpu_model_stage_forward(gpu_model *g, const int32_t *inputs, const float *x0,
                            const int32_t *targets, float loss_scale, float *xL, float *loss,
                            int B, int T, char *why, size_t cap)
{
    if (check_kind(g, 1, why, cap) != 0 || check_batch(g, B, T, why, cap) != 0) return -1;
    gpt_model *m = &g->m;
    const int embed = m->has_embed, head = m->has_head;
    if ((embed ? !inputs : !x0) || (head ? !targets || !loss || !(loss_scale >= 0.0f) : !xL)) {
        say(why, cap, "fake GPU: a stage's forward needs %s and %s", embed ? "tokens" : "x0",
            head ? "targets, a loss and a loss scale >= 0" : "xL");
        return -1;
    }
    const size_t n = (size_t)B * T * m->shape.n_embd;
    if (!embed) round_half(g->stream, x0, n);
    const int train = !head || loss_scale > 0.0f;
    m->loss_grad_scale = head && train ? loss_scale : 1.0f;
    float l = 0.0f;
    const float *out = gpt_stage_forward(m, embed ? inputs : NULL, embed ? NULL : g->stream,
                                         head ? targets : NULL, B, T, train, &l);
    if (head) *loss = l;
    else round_half(xL, out, n);
    g->fwd_B = B, g->fwd_T = T;
    g->fwd_grad = train;
    return 0;
}

int gpu_model_stage_backward(gpu_model *g, const float *dxL, float *dx0, int B, int T,
                             char *why, size_t cap)
{
    if (check_kind(g, 1, why, cap) != 0) return -1;
    gpt_model *m = &g->m;
    const int embed = m->has_embed, head = m->has_head;
    if (B != g->fwd_B || T != g->fwd_T || !g->fwd_grad || (!head && !dxL) ||
        (!embed && !dx0)) {
        say(why, cap, "fake GPU: a stage backward of %d x %d needs a training forward of "
            "that batch first (the last one was %d x %d), and dxL and dx0 where the stage "
            "has no end", B, T, g->fwd_B, g->fwd_T);
        return -1;
    }
    const long call = ++faults.calls;
    const size_t n = (size_t)B * T * m->shape.n_embd;
    if (!head) round_half(g->stream, dxL, n);
    gpt_zero_grad(m);
    const float *din = gpt_stage_backward(m, head ? NULL : g->stream); /* scaled */
    if (!embed) round_half(dx0, din, n);
    half_from_float(g->grads + g->lo, m->grads + g->lo, g->hi - g->lo);
    if (overflow_here(call)) {
        if (faults.at_dx0 && embed)
            g->grads[m->info[m->i_wpe].offset] = HALF_INF;
        else if (faults.at_dx0)
            dx0[n / 2] = INFINITY;
        else
            g->grads[g->lo + (g->hi - g->lo) / 2] = HALF_INF;
    }
    return 0;
}

const uint16_t *gpu_model_grads(gpu_model *g, char *why, size_t cap)
{
    if (g->accumulating) {
        say(why, cap, "fake GPU: the gradients are still adding up (the last micro-batch "
            "has not run)");
        return NULL;
    }
    return g->grads;
}

/* The parts in the engine's order: ln_f, the blocks from the last to the first, the
 * embeddings (a blocks model: only its blocks, the other two empty). Nothing to wait
 * for here: the gradients are all there once the step returns. */
int gpu_model_grad_parts(const gpu_model *g) { return g->m.shape.n_layer + 2; }

const uint16_t *gpu_model_grads_part(gpu_model *g, int k, size_t *lo, size_t *hi, char *why,
                                     size_t cap)
{
    const gpt_model *m = &g->m;
    const int L = m->shape.n_layer;
    if (g->accumulating || k < 0 || k >= L + 2) {
        say(why, cap, "fake GPU: gradient part %d of %d refused%s", k, L + 2,
            g->accumulating ? " (the last micro-batch has not run)" : "");
        return NULL;
    }
    const size_t first = m->info[m->i_wpe].offset + m->info[m->i_wpe].numel,
                 lnf = m->info[m->i_lnf].offset;
    const size_t per_block = L > 0 ? (lnf - first) / (size_t)L : 0;
    if (k == 0) {
        *lo = g->blocks ? 0 : lnf;
        *hi = g->blocks ? 0 : m->n_params;
    } else if (k == L + 1) {
        *lo = 0;
        *hi = g->blocks ? 0 : first;
    } else {
        *lo = first + (size_t)(L - k) * per_block;
        *hi = *lo + per_block;
    }
    return g->grads;
}

int gpu_model_sync(gpu_model *g, char *why, size_t cap)
{
    (void)g, (void)why, (void)cap;
    return 0;
}
