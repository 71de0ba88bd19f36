// ops_attention — the attention of ops.cuh on the FP16 kernels: the heads split into
// head-major order and merged back, cuBLAS's batched products of the attention plan
// (attention_plan.h: T x T in row blocks, the masked blocks skipped), and the causal
// softmax and its backward, one warp per row.
#include "ops_internal.cuh"

#include "attention_plan.h"

#include <math.h>
#include <stdint.h>

namespace {

// Heads split: src [B,T,P*NH*hs] (token-major: per token, P parts of NH heads of hs) ->
// dst [P,B,NH,T,hs] (head-major), and merged back. One thread per V consecutive
// elements of one head's row (hs % V == 0), whose source-order chunk index k =
// (((b*T + t)*P + part)*NH + h)*(hs/V) + j is decomposed once.
template <typename I>
__device__ size_t head_major_offset(I k, int B, int T, int P, int NH, int hs, int V)
{
    const I per_head = (I)(hs / V);
    I r = k / per_head;
    const I j = k - r * per_head;
    const I h = r % (I)NH;
    r /= (I)NH;
    const I part = r % (I)P;
    r /= (I)P;
    const I t = r % (I)T, b = r / (I)T;
    return ((((size_t)part * B + b) * NH + h) * T + t) * hs + (size_t)j * V;
}

template <int V, typename I>
__global__ void heads_split(__half *dst, const __half *src, int B, int T, int P, int NH,
                            int hs)
{
    const I chunks = (I)B * (I)T * (I)P * (I)NH * (I)(hs / V);
    const I k = (I)blockIdx.x * (I)blockDim.x + (I)threadIdx.x;
    if (k >= chunks) return;
    float x[V];
    load_halves<V>(x, src + (size_t)k * V);
    store_halves<V>(dst + head_major_offset<I>(k, B, T, P, NH, hs, V), x);
}

// Heads merged: src [P,B,NH,T,hs] -> dst [B,T,P*NH*hs], written (accumulate = 0) or
// added (1).
template <int V, typename I>
__global__ void heads_merge(__half *dst, const __half *src, int B, int T, int P, int NH,
                            int hs, int accumulate)
{
    const I chunks = (I)B * (I)T * (I)P * (I)NH * (I)(hs / V);
    const I k = (I)blockIdx.x * (I)blockDim.x + (I)threadIdx.x;
    if (k >= chunks) return;
    float x[V], y[V];
    load_halves<V>(x, src + head_major_offset<I>(k, B, T, P, NH, hs, V));
    if (accumulate) {
        load_halves<V>(y, dst + (size_t)k * V);
        for (int i = 0; i < V; i++) x[i] += y[i];
    }
    store_halves<V>(dst + (size_t)k * V, x);
}

// Causal softmax in place, one warp per row of att [B*NH*T, T] (the scaled scores in,
// the probabilities out; row r is query t = r % T), up to the end of t's row block of
// R rows (attention_plan.h): columns from there on are neither read nor written. A lane
// takes chunks of V elements (R % V == 0). Running max and sum in one pass (rescaling
// the sum when the max grows), then a pass that writes; the scores above the diagonal
// are never read.
template <int V> __global__ void att_softmax_fwd(__half *att, int rows, int T, int R)
{
    const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= rows) return;
    const int t = row % T, chunks = (t / R + 1) * R / V; // to the row block's end
    const int live = t / V + 1;                          // chunks with some t2 <= t
    __half *a = att + (size_t)row * T;
    float m = -INFINITY, s = 0.0f;
    for (int c = lane; c < live; c += 32) {
        float x[V];
        load_halves<V>(x, a + (size_t)c * V);
        float cm = -INFINITY;
        for (int i = 0; i < V; i++)
            if (c * V + i <= t) cm = fmaxf(cm, x[i]);
        if (cm > m) {
            s *= expf(m - cm); // m = -inf: s is 0, expf gives 0
            m = cm;
        }
        for (int i = 0; i < V; i++)
            if (c * V + i <= t) s += expf(x[i] - m);
    }
    warp_max_sum(m, s); // a lane may have had no elements
    const float inv = 1.0f / s;
    for (int c = lane; c < chunks; c += 32) {
        float x[V];
        if (c < live) {
            load_halves<V>(x, a + (size_t)c * V);
            for (int i = 0; i < V; i++) x[i] = c * V + i <= t ? expf(x[i] - m) * inv : 0.0f;
        } else {
            for (int i = 0; i < V; i++) x[i] = 0.0f;
        }
        store_halves<V>(a + (size_t)c * V, x);
    }
}

// The softmax's backward in place, one warp per row: d [B*NH*T, T] holds datt and
// becomes dscores = att * (datt - sum over the row of att * datt), 0 above the diagonal
// up to the row block's end, as att_softmax_fwd (the scale is applied by the GEMMs that
// use it).
template <int V>
__global__ void att_softmax_bwd(__half *d, const __half *att, int rows, int T, int R)
{
    const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= rows) return;
    const int t = row % T, chunks = (t / R + 1) * R / V, live = t / V + 1;
    const __half *p = att + (size_t)row * T;
    __half *g = d + (size_t)row * T;
    float dot = 0.0f;
    for (int c = lane; c < live; c += 32) {
        float x[V], y[V];
        load_halves<V>(x, p + (size_t)c * V);
        load_halves<V>(y, g + (size_t)c * V);
        for (int i = 0; i < V; i++)
            if (c * V + i <= t) dot += x[i] * y[i];
    }
    dot = warp_sum(dot);
    for (int c = lane; c < chunks; c += 32) {
        float x[V], y[V];
        if (c < live) {
            load_halves<V>(x, p + (size_t)c * V);
            load_halves<V>(y, g + (size_t)c * V);
            for (int i = 0; i < V; i++) y[i] = c * V + i <= t ? x[i] * (y[i] - dot) : 0.0f;
        } else {
            for (int i = 0; i < V; i++) y[i] = 0.0f;
        }
        store_halves<V>(g + (size_t)c * V, y);
    }
}

// The head split / merge launches: V = 8 when hs % 8 == 0 and both buffers are 16-byte
// aligned, 32-bit indices when the count fits.
void launch_heads_split(__half *dst, const __half *src, int B, int T, int P, int NH, int hs,
                        cudaStream_t st)
{
    const bool v8 = hs % 8 == 0 && ew_vec8({dst, src});
    const size_t chunks = (size_t)B * T * P * NH * (hs / (v8 ? 8 : 1));
    launch_form(v8, chunks, [&](auto v, auto ix) {
        heads_split<decltype(v)::value, decltype(ix)>
            <<<blocks_for(chunks), kThreads, 0, st>>>(dst, src, B, T, P, NH, hs);
    });
    ol_launched("heads_split", st);
}

void launch_heads_merge(__half *dst, const __half *src, int B, int T, int P, int NH, int hs,
                        int accumulate, cudaStream_t st)
{
    const bool v8 = hs % 8 == 0 && ew_vec8({dst, src});
    const size_t chunks = (size_t)B * T * P * NH * (hs / (v8 ? 8 : 1));
    launch_form(v8, chunks, [&](auto v, auto ix) {
        heads_merge<decltype(v)::value, decltype(ix)>
            <<<blocks_for(chunks), kThreads, 0, st>>>(dst, src, B, T, P, NH, hs, accumulate);
    });
    ol_launched("heads_merge", st);
}

// One product of an attention plan on the B*NH heads, FP16 in and out, FP32
// accumulation (see attention_plan.h for what the fields mean).
cublasStatus_t gemm_batched(cublasHandle_t h, const att_gemm &g, __half *const *role,
                            int batch)
{
    const float beta = 0.0f;
    return cublasGemmStridedBatchedEx(
        h, g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, g.m,
        g.n, g.k, &g.alpha, role[g.a.role] + g.a.off, CUDA_R_16F, g.a.ld, g.a.stride,
        role[g.b.role] + g.b.off, CUDA_R_16F, g.b.ld, g.b.stride, &beta,
        role[g.c.role] + g.c.off, CUDA_R_16F, g.c.ld, g.c.stride, batch, CUBLAS_COMPUTE_32F,
        CUBLAS_GEMM_DEFAULT);
}

// Every call of one product of the plan for nb row blocks; 0 or the cuBLAS status.
int run_plan(cublasHandle_t h, att_product what, __half *const *role, int T, int hs, int nb,
             int batch)
{
    att_gemm g[ATT_MAX_ROW_BLOCKS];
    const int n = att_plan(g, what, T, hs, nb);
    if (n == 0) return (int)CUBLAS_STATUS_INVALID_VALUE;
    for (int i = 0; i < n; i++) {
        const cublasStatus_t s = gemm_batched(h, g[i], role, batch);
        if (s != CUBLAS_STATUS_SUCCESS) return (int)s;
    }
    return 0;
}

// The row blocks a call uses: `requested`, or att_row_blocks(T) for 0; -1 when the
// request does not divide T or is out of range.
int row_blocks_for(int T, int requested)
{
    if (requested == 0) return att_row_blocks(T);
    return requested >= 1 && requested <= ATT_MAX_ROW_BLOCKS && T % requested == 0
               ? requested
               : -1;
}

// 16-byte chunks for the softmax kernels when every row block ends on a multiple of 8
// and the buffers are aligned.
bool rows_vec8(int T, int R, const void *a, const void *b)
{
    return T % 8 == 0 && R % 8 == 0 && ew_vec8({a, b});
}

} // namespace

size_t ol_attention_fwd_scratch_halves(int B, int T, int C, int NH)
{
    (void)NH;
    return (size_t)B * T * C; // y [B,NH,T,hs] before the heads are merged
}

size_t ol_attention_bwd_scratch_halves(int B, int T, int C, int NH)
{
    // datt / dscores [B,NH,T,T], dy [B,NH,T,hs], dq dk dv [3,B,NH,T,hs]
    return (size_t)B * NH * T * T + 4 * (size_t)B * T * C;
}

int ol_attention_forward(cublasHandle_t h, __half *out, __half *qkvr, __half *att,
                         __half *scratch, const __half *qkv, int B, int T, int C, int NH,
                         int row_blocks)
{
    const int hs = C / NH, BH = B * NH, rows = BH * T, per_block = kThreads / 32;
    const int nb = row_blocks_for(T, row_blocks);
    if (nb < 0) return (int)CUBLAS_STATUS_INVALID_VALUE;
    const size_t n = (size_t)B * T * C;
    __half *role[ATT_DV + 1] = {};
    role[ATT_Q] = qkvr, role[ATT_K] = qkvr + n, role[ATT_V] = qkvr + 2 * n;
    role[ATT_P] = att, role[ATT_Y] = scratch;
    cudaStream_t stream;
    cublasStatus_t s = cublasGetStream(h, &stream);
    if (s != CUBLAS_STATUS_SUCCESS) return (int)s;
    launch_heads_split(qkvr, qkv, B, T, 3, NH, hs, stream);
    if (int e = launch_status()) return e;
    if (int e = run_plan(h, ATT_SCORES, role, T, hs, nb, BH)) return e;
    const int grid = (rows + per_block - 1) / per_block, R = T / nb;
    if (rows_vec8(T, R, att, att))
        att_softmax_fwd<8><<<grid, kThreads, 0, stream>>>(att, rows, T, R);
    else
        att_softmax_fwd<1><<<grid, kThreads, 0, stream>>>(att, rows, T, R);
    ol_launched("att_softmax_fwd", stream);
    if (int e = launch_status()) return e;
    if (int e = run_plan(h, ATT_CONTEXT, role, T, hs, nb, BH)) return e;
    launch_heads_merge(out, scratch, B, T, 1, NH, hs, 0, stream);
    return launch_status();
}

int ol_attention_backward(cublasHandle_t h, __half *dqkv, __half *scratch,
                          const __half *dout, const __half *qkvr, const __half *att,
                          int B, int T, int C, int NH, int row_blocks, int accumulate)
{
    const int hs = C / NH, BH = B * NH, rows = BH * T, per_block = kThreads / 32;
    const int nb = row_blocks_for(T, row_blocks);
    if (nb < 0) return (int)CUBLAS_STATUS_INVALID_VALUE;
    const size_t n = (size_t)B * T * C;
    __half *datt = scratch, *dy = scratch + (size_t)BH * T * T, *dq = dy + n;
    // The plan's operands; q, k, v and att are only read.
    __half *role[ATT_DV + 1] = {};
    __half *in = const_cast<__half *>(qkvr);
    role[ATT_Q] = in, role[ATT_K] = in + n, role[ATT_V] = in + 2 * n;
    role[ATT_P] = const_cast<__half *>(att), role[ATT_DP] = datt, role[ATT_DY] = dy;
    role[ATT_DQ] = dq, role[ATT_DK] = dq + n, role[ATT_DV] = dq + 2 * n;
    cudaStream_t stream;
    cublasStatus_t s = cublasGetStream(h, &stream);
    if (s != CUBLAS_STATUS_SUCCESS) return (int)s;
    launch_heads_split(dy, dout, B, T, 1, NH, hs, stream);
    if (int e = launch_status()) return e;
    if (int e = run_plan(h, ATT_DPROBS, role, T, hs, nb, BH)) return e;
    if (int e = run_plan(h, ATT_DVALUES, role, T, hs, nb, BH)) return e;
    const int grid = (rows + per_block - 1) / per_block, R = T / nb;
    if (rows_vec8(T, R, datt, att))
        att_softmax_bwd<8><<<grid, kThreads, 0, stream>>>(datt, att, rows, T, R);
    else
        att_softmax_bwd<1><<<grid, kThreads, 0, stream>>>(datt, att, rows, T, R);
    ol_launched("att_softmax_bwd", stream);
    if (int e = launch_status()) return e;
    // dscores is now in datt (unscaled: the scale is these two products' alpha).
    if (int e = run_plan(h, ATT_DQUERIES, role, T, hs, nb, BH)) return e;
    if (int e = run_plan(h, ATT_DKEYS, role, T, hs, nb, BH)) return e;
    // dq, dk, dv [3,B,NH,T,hs] are contiguous: one merge puts them into dqkv [B,T,3C].
    launch_heads_merge(dqkv, dq, B, T, 3, NH, hs, accumulate, stream);
    return launch_status();
}
