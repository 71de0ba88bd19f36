// ops — see ops.cuh. One thread per 8 elements (16-byte accesses; one per element where
// sizes or alignment do not allow) for the elementwise kernels; one warp per row for
// LayerNorm; one block per row for the cross-entropy; cuBLAS for the matrix products.
// Attention is ops_attention.cu's; what the two share, ops_internal.cuh.
#include "ops_internal.cuh"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

namespace {

// out[B,T,C] = wte[inp[b,t] - v0] + wpe[t]: one thread per V consecutive channels (C %
// V == 0; V = 8 needs 16-byte aligned tables and output). A vocabulary shard (rows
// [v0, v0 + Vl) of the table) adds 0 for a token it does not hold, and nothing for the
// positions when wpe is NULL.
template <int V, typename I>
__global__ void encoder_fwd(__half *out, const int32_t *inp, const __half *wte,
                            const __half *wpe, int B, int T, int C, int v0, int Vl)
{
    const I per_row = (I)(C / V), chunks = (I)B * (I)T * per_row;
    const I k = (I)blockIdx.x * (I)blockDim.x + (I)threadIdx.x;
    if (k >= chunks) return;
    const I r = k / per_row, c = (k - r * per_row) * (I)V, t = r % (I)T;
    const int tok = inp[r] - v0;
    float x[V], y[V];
    if (tok >= 0 && tok < Vl) {
        load_halves<V>(x, wte + (size_t)tok * C + c);
    } else {
        for (int i = 0; i < V; i++) x[i] = 0.0f;
    }
    if (wpe) {
        load_halves<V>(y, wpe + (size_t)t * C + c);
        for (int i = 0; i < V; i++) x[i] += y[i];
    }
    store_halves<V>(out + (size_t)r * C + c, x);
}

// dwte[tok - v0] += dout[b,t] (the tokens of rows [v0, v0 + Vl)); dwpe[t] += dout[b,t]:
// float atomics, one row (token) per blockIdx.x and consecutive channels across a
// block's threads, so a warp's atomics fall on consecutive floats (one cache line
// each) and no thread divides by C.
__global__ void encoder_bwd(float *dwte, float *dwpe, const __half *dout,
                            const int32_t *inp, int T, int C, int v0, int Vl)
{
    const unsigned r = blockIdx.x, c = blockIdx.y * blockDim.x + threadIdx.x;
    if (c >= (unsigned)C) return;
    const float d = __half2float(dout[(size_t)r * C + c]);
    const int tok = inp[r] - v0;
    if (tok >= 0 && tok < Vl) atomicAdd(&dwte[(size_t)tok * C + c], d);
    atomicAdd(&dwpe[(size_t)(r % (unsigned)T) * C + c], d);
}

// One warp per row.
__global__ void layernorm_fwd(__half *out, float *mean, float *rstd, const __half *inp,
                              const __half *w, const __half *b, int N, int C)
{
    const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= N) return;
    const __half *x = inp + (size_t)row * C;
    float s = 0.0f;
    for (int c = lane; c < C; c += 32) s += __half2float(x[c]);
    const float m = warp_sum(s) / C;
    float v = 0.0f;
    for (int c = lane; c < C; c += 32) {
        const float d = __half2float(x[c]) - m;
        v += d * d;
    }
    const float r = rsqrtf(warp_sum(v) / C + 1e-5f);
    for (int c = lane; c < C; c += 32)
        out[(size_t)row * C + c] = __float2half((__half2float(x[c]) - m) * r *
                                                    __half2float(w[c]) +
                                                __half2float(b[c]));
    if (lane == 0) {
        mean[row] = m;
        rstd[row] = r;
    }
}

// One warp per row, blocks striding over the rows. The weight and bias gradients of a
// block's rows gather in shared memory (2*C floats, dynamic) and reach global memory
// with one atomic per column per block, not one per row: at N = B*T ~ 1e5 rows, per-row
// atomics on the same C addresses would serialise.
__global__ void layernorm_bwd(__half *dinp, float *dw, float *db, const __half *dout,
                              const __half *inp, const __half *w, const float *mean,
                              const float *rstd, int N, int C)
{
    extern __shared__ float acc[]; // [2*C]: dw, db partials of this block
    float *sdw = acc, *sdb = acc + C;
    for (int c = threadIdx.x; c < 2 * C; c += blockDim.x) acc[c] = 0.0f;
    __syncthreads();
    const int warps = blockDim.x / 32, lane = threadIdx.x % 32;
    for (int row = blockIdx.x * warps + threadIdx.x / 32; row < N; row += gridDim.x * warps) {
        const __half *x = inp + (size_t)row * C, *dy = dout + (size_t)row * C;
        const float m = mean[row], r = rstd[row];
        // dnorm = dy * w; dx = r * (dnorm - mean(dnorm) - xhat * mean(dnorm * xhat)).
        float s1 = 0.0f, s2 = 0.0f;
        for (int c = lane; c < C; c += 32) {
            const float xhat = (__half2float(x[c]) - m) * r;
            const float dn = __half2float(dy[c]) * __half2float(w[c]);
            s1 += dn;
            s2 += dn * xhat;
        }
        s1 = warp_sum(s1) / C;
        s2 = warp_sum(s2) / C;
        for (int c = lane; c < C; c += 32) {
            const float xhat = (__half2float(x[c]) - m) * r;
            const float g = __half2float(dy[c]);
            const float dn = g * __half2float(w[c]);
            const size_t i = (size_t)row * C + c;
            dinp[i] = __float2half(__half2float(dinp[i]) + r * (dn - s1 - xhat * s2));
            atomicAdd(&sdw[c], g * xhat); // shared memory: only this block's warps meet
            atomicAdd(&sdb[c], g);
        }
    }
    __syncthreads();
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        atomicAdd(&dw[c], sdw[c]);
        atomicAdd(&db[c], sdb[c]);
    }
}

__device__ float gelu(float x)
{
    const float k = 0.7978845608028654f; // sqrt(2 / pi)
    return 0.5f * x * (1.0f + tanhf(k * (x + 0.044715f * x * x * x)));
}

__device__ float gelu_grad(float x)
{
    const float k = 0.7978845608028654f;
    const float u = k * (x + 0.044715f * x * x * x), th = tanhf(u);
    const float du = k * (1.0f + 3.0f * 0.044715f * x * x);
    return 0.5f * (1.0f + th) + 0.5f * x * (1.0f - th * th) * du;
}

// The elementwise kernels below take V consecutive elements per thread (V = 8: 16-byte
// accesses, for aligned buffers; ew_vec8 decides), the last thread of a ragged end
// element by element.
template <int V> __global__ void gelu_fwd(__half *out, const __half *inp, size_t n)
{
    const size_t i = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * V;
    if (i >= n) return;
    if (i + V <= n) {
        float x[V];
        load_halves<V>(x, inp + i);
        for (int k = 0; k < V; k++) x[k] = gelu(x[k]);
        store_halves<V>(out + i, x);
    } else {
        for (size_t k = i; k < n; k++) out[k] = __float2half(gelu(__half2float(inp[k])));
    }
}

template <int V>
__global__ void gelu_bwd(__half *dinp, const __half *inp, const __half *dout, size_t n,
                         int accumulate)
{
    const size_t i = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * V;
    if (i >= n) return;
    if (i + V <= n) {
        float x[V], d[V], acc[V];
        load_halves<V>(x, inp + i);
        load_halves<V>(d, dout + i);
        if (accumulate) load_halves<V>(acc, dinp + i);
        for (int k = 0; k < V; k++) x[k] = gelu_grad(x[k]) * d[k] + (accumulate ? acc[k] : 0.0f);
        store_halves<V>(dinp + i, x);
    } else {
        for (size_t k = i; k < n; k++) {
            const float g = gelu_grad(__half2float(inp[k])) * __half2float(dout[k]);
            dinp[k] = __float2half(accumulate ? __half2float(dinp[k]) + g : g);
        }
    }
}

template <int V>
__global__ void residual_fwd(__half *out, const __half *a, const __half *b, size_t n)
{
    const size_t i = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * V;
    if (i >= n) return;
    if (i + V <= n) {
        float x[V], y[V];
        load_halves<V>(x, a + i);
        load_halves<V>(y, b + i);
        for (int k = 0; k < V; k++) x[k] += y[k];
        store_halves<V>(out + i, x);
    } else {
        for (size_t k = i; k < n; k++)
            out[k] = __float2half(__half2float(a[k]) + __half2float(b[k]));
    }
}

// out[N,OC] += bias per row; with V = 8 a chunk never crosses a row (OC % 8 == 0). I as
// for the encoder (the column is a division per V elements).
template <int V, typename I>
__global__ void add_bias(__half *out, const __half *bias, int N, int OC)
{
    const I n = (I)N * (I)OC, i = ((I)blockIdx.x * (I)blockDim.x + (I)threadIdx.x) * (I)V;
    if (i >= n) return;
    if (i + V <= n) {
        float x[V], y[V];
        load_halves<V>(x, out + i);
        load_halves<V>(y, bias + i % (I)OC);
        for (int k = 0; k < V; k++) x[k] += y[k];
        store_halves<V>(out + i, x);
    } else {
        for (I k = i; k < n; k++)
            out[k] = __float2half(__half2float(out[k]) + __half2float(bias[k % (I)OC]));
    }
}

// Column sums of dout [N,OC] into dbias: blocks of 32 columns x 8 row lanes (the 32
// threads of a row lane read 32 neighbouring columns: coalesced), each block over a
// chunk of kBiasRows rows; the 8 lanes meet in shared memory, then one atomic per
// column per block.
constexpr int kBiasRows = 1024;
__global__ void bias_grad(float *dbias, const __half *dout, int N, int OC)
{
    __shared__ float part[8][33];
    const int j = blockIdx.x * 32 + threadIdx.x;
    const int r0 = blockIdx.y * kBiasRows, r1 = min(N, r0 + kBiasRows);
    float s = 0.0f;
    if (j < OC)
        for (int r = r0 + threadIdx.y; r < r1; r += 8) s += __half2float(dout[(size_t)r * OC + j]);
    part[threadIdx.y][threadIdx.x] = s;
    __syncthreads();
    if (threadIdx.y == 0 && j < OC) {
        for (int k = 1; k < 8; k++) s += part[k][threadIdx.x];
        atomicAdd(&dbias[j], s);
    }
}
// The running (max, sum of exp(x - max)) of one row of `chunks` x V halves over the
// block: each thread keeps its own pair (rescaling the sum when its max grows), the
// pairs are combined per warp, then across warps by thread 0, which gets the row's pair
// (the other threads their warp's). part_m, part_s: shared, one float per warp.
template <int V>
__device__ void block_row_max_sum(const __half *x, int chunks, float *part_m, float *part_s,
                                  float &m, float &s)
{
    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
    m = -INFINITY, s = 0.0f;
    for (int c = tid; c < chunks; c += blockDim.x) {
        float v[V];
        load_halves<V>(v, x + (size_t)c * V);
        float cm = v[0];
        for (int i = 1; i < V; i++) cm = fmaxf(cm, v[i]);
        if (cm > m) {
            s *= expf(m - cm); // m = -inf: s is 0, expf gives 0
            m = cm;
        }
        for (int i = 0; i < V; i++) s += expf(v[i] - m);
    }
    warp_max_sum(m, s);
    if (lane == 0) part_m[warp] = m, part_s[warp] = s;
    __syncthreads();
    if (tid != 0) return;
    float mm = part_m[0], ss = part_s[0];
    for (int w = 1; w < (int)blockDim.x / 32; w++) {
        const float m2 = fmaxf(mm, part_m[w]);
        ss = (mm > -INFINITY ? ss * expf(mm - m2) : 0.0f) +
             (part_m[w] > -INFINITY ? part_s[w] * expf(part_m[w] - m2) : 0.0f);
        mm = m2;
    }
    m = mm, s = ss;
}

// Softmax cross-entropy, one block per row of logits [N,Vocab]: the row is read once
// for its max and sum together (each thread keeps a running max and rescales its sum
// when the max grows; the pairs are combined per warp, then across warps), and once
// more to write dlogits when asked. V halves per access (V = 8: 16 bytes; Vocab % V ==
// 0 and aligned rows).
template <int V>
__global__ void crossentropy_rows(float *losses, __half *dlogits, const __half *logits,
                                  const int32_t *targets, int Vocab, float scale)
{
    __shared__ float part_m[kThreads / 32], part_s[kThreads / 32];
    __shared__ float row_m, row_s;
    const int row = blockIdx.x, tid = threadIdx.x;
    const int chunks = Vocab / V;
    const __half *x = logits + (size_t)row * Vocab;
    float m, s;
    block_row_max_sum<V>(x, chunks, part_m, part_s, m, s);
    if (tid == 0) row_m = m, row_s = s;
    __syncthreads();
    m = row_m, s = row_s;
    const int t = targets[row];
    // Read the target's logit before any thread overwrites logits (dlogits may alias).
    const float xt = __half2float(x[t]);
    __syncthreads();
    if (tid == 0) losses[row] = logf(s) - (xt - m);
    if (!dlogits) return;
    __half *g = dlogits + (size_t)row * Vocab;
    const float inv = 1.0f / s;
    for (int c = tid; c < chunks; c += blockDim.x) {
        float v[V];
        load_halves<V>(v, x + (size_t)c * V);
        for (int i = 0; i < V; i++)
            v[i] = scale * (expf(v[i] - m) * inv - (c * V + i == t ? 1.0f : 0.0f));
        store_halves<V>(g + (size_t)c * V, v);
    }
}

// A vocabulary shard's part of softmax cross-entropy, one block per row of its logits
// [N,Vl] (the columns [v0, v0 + Vl) of the whole row): the row's maximum m, its sum of
// exp(x - m) and its target's logit (0 when another shard holds the target) into
// stats[n], stats[N + n], stats[2N + n]. V as for crossentropy_rows.
template <int V>
__global__ void xent_shard_stats(float *stats, const __half *logits, const int32_t *targets,
                                 int Vl, int v0)
{
    __shared__ float part_m[kThreads / 32], part_s[kThreads / 32];
    const int row = blockIdx.x, N = gridDim.x;
    const __half *x = logits + (size_t)row * Vl;
    float m, s;
    block_row_max_sum<V>(x, Vl / V, part_m, part_s, m, s);
    if (threadIdx.x != 0) return;
    const int t = targets[row] - v0;
    stats[row] = m;
    stats[N + row] = s;
    stats[2 * N + row] = t >= 0 && t < Vl ? __half2float(x[t]) : 0.0f;
}

// The shards' loss from the combined stats (the whole row's maximum, sum of exp(x - m)
// and target logit, as xent_shard_stats lays them out): losses[n], and with dlogits
// the shard's columns of scale * (softmax - onehot) (may alias logits). One block per
// row.
template <int V>
__global__ void xent_shard_finish(float *losses, __half *dlogits, const __half *logits,
                                  const int32_t *targets, const float *stats, int Vl, int v0,
                                  float scale)
{
    const int row = blockIdx.x, N = gridDim.x, tid = threadIdx.x;
    const float m = stats[row], s = stats[N + row], xt = stats[2 * N + row];
    if (tid == 0) losses[row] = logf(s) - (xt - m);
    if (!dlogits) return;
    const int t = targets[row] - v0;
    const __half *x = logits + (size_t)row * Vl;
    __half *g = dlogits + (size_t)row * Vl;
    const float inv = 1.0f / s;
    for (int c = tid; c < Vl / V; c += blockDim.x) {
        float v[V];
        load_halves<V>(v, x + (size_t)c * V);
        for (int i = 0; i < V; i++)
            v[i] = scale * (expf(v[i] - m) * inv - (c * V + i == t ? 1.0f : 0.0f));
        store_halves<V>(g + (size_t)c * V, v);
    }
}
} // namespace

// -1: not decided yet; then GENTRAIN_CUDA_CHECK=1 or ol_check_launches decides.
static int g_check_launches = -1;

void ol_check_launches(int on) { g_check_launches = on != 0; }

void ol_launched(const char *kernel, cudaStream_t stream)
{
    if (g_check_launches < 0) {
        const char *env = getenv("GENTRAIN_CUDA_CHECK");
        g_check_launches = env && strcmp(env, "1") == 0;
    }
    cudaError_t e = cudaPeekAtLastError(); // left for the caller's launch_status / CU
    const char *when = "launching";
    if (e == cudaSuccess && g_check_launches) {
        e = cudaStreamSynchronize(stream);
        when = "running";
    }
    if (e == cudaSuccess) return;
    fprintf(stderr, "offload: CUDA kernel %s failed %s: %s (%s)\n", kernel, when,
            cudaGetErrorString(e), cudaGetErrorName(e));
    if (g_check_launches) exit(1);
}

cublasStatus_t ol_blas_numerics(cublasHandle_t h)
{
    return cublasSetMathMode(h, (cublasMath_t)(CUBLAS_DEFAULT_MATH |
                                               CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION));
}
// Row-major products through column-major cuBLAS: a row-major [R,K] matrix is the
// column-major [K,R] one, its transpose.
int ol_matmul_forward(cublasHandle_t h, __half *out, const __half *inp, const __half *w,
                      const __half *bias, int N, int C, int OC)
{
    const float one = 1.0f, zero = 0.0f;
    // out^T [OC,N] = w [OC,C] (= (w^T)^T) x inp^T [C,N]
    cublasStatus_t s = cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, OC, N, C, &one, w, CUDA_R_16F,
                                    C, inp, CUDA_R_16F, C, &zero, out, CUDA_R_16F, OC,
                                    CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    if (s != CUBLAS_STATUS_SUCCESS || !bias) return (int)s;
    cudaStream_t stream;
    s = cublasGetStream(h, &stream);
    if (s != CUBLAS_STATUS_SUCCESS) return (int)s;
    const size_t n = (size_t)N * OC;
    const bool v8 = OC % 8 == 0 && ew_vec8({out, bias});
    launch_form(v8, n, [&](auto v, auto ix) {
        add_bias<decltype(v)::value, decltype(ix)>
            <<<blocks_for(v8 ? (n + 7) / 8 : n), kThreads, 0, stream>>>(out, bias, N, OC);
    });
    ol_launched("add_bias", stream);
    return launch_status();
}

int ol_matmul_backward(cublasHandle_t h, __half *dinp, float *dw, float *dbias,
                       const __half *dout, const __half *inp, const __half *w, int N,
                       int C, int OC, int accumulate)
{
    // With beta = 0 cuBLAS does not read dinp, so a fresh buffer needs no zeroing.
    const float one = 1.0f, beta = accumulate ? 1.0f : 0.0f;
    // dinp^T [C,N] (+)= w^T [C,OC] x dout^T [OC,N]
    cublasStatus_t s = cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, C, N, OC, &one, w, CUDA_R_16F,
                                    C, dout, CUDA_R_16F, OC, &beta, dinp, CUDA_R_16F, C,
                                    CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    if (s != CUBLAS_STATUS_SUCCESS) return (int)s;
    // dw^T [C,OC] += inp^T [C,N] x dout [N,OC]
    s = cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_T, C, OC, N, &one, inp, CUDA_R_16F, C, dout,
                     CUDA_R_16F, OC, &one, dw, CUDA_R_32F, C, CUBLAS_COMPUTE_32F,
                     CUBLAS_GEMM_DEFAULT);
    if (s != CUBLAS_STATUS_SUCCESS || !dbias) return (int)s;
    cudaStream_t stream;
    s = cublasGetStream(h, &stream);
    if (s != CUBLAS_STATUS_SUCCESS) return (int)s;
    const dim3 grid((OC + 31) / 32, (N + kBiasRows - 1) / kBiasRows), block(32, 8);
    bias_grad<<<grid, block, 0, stream>>>(dbias, dout, N, OC);
    ol_launched("bias_grad", stream);
    return launch_status();
}

void ol_encoder_forward_shard(__half *out, const int32_t *inp, const __half *wte,
                              const __half *wpe, int B, int T, int C, int v0, int Vl,
                              cudaStream_t stream)
{
    const size_t n = (size_t)B * T * C;
    const bool v8 = C % 8 == 0 && ew_vec8({out, wte, wpe}); // NULL is aligned
    const size_t chunks = n / (v8 ? 8 : 1);
    launch_form(v8, chunks, [&](auto v, auto ix) {
        encoder_fwd<decltype(v)::value, decltype(ix)>
            <<<blocks_for(chunks), kThreads, 0, stream>>>(out, inp, wte, wpe, B, T, C, v0, Vl);
    });
    ol_launched("encoder_fwd", stream);
}

void ol_encoder_forward(__half *out, const int32_t *inp, const __half *wte,
                        const __half *wpe, int B, int T, int C, cudaStream_t stream)
{
    ol_encoder_forward_shard(out, inp, wte, wpe, B, T, C, 0, INT_MAX, stream);
}

void ol_encoder_backward_shard(float *dwte, float *dwpe, const __half *dout,
                               const int32_t *inp, int B, int T, int C, int v0, int Vl,
                               cudaStream_t stream)
{
    const dim3 grid((unsigned)B * (unsigned)T, (unsigned)((C + kThreads - 1) / kThreads));
    encoder_bwd<<<grid, kThreads, 0, stream>>>(dwte, dwpe, dout, inp, T, C, v0, Vl);
    ol_launched("encoder_bwd", stream);
}

void ol_encoder_backward(float *dwte, float *dwpe, const __half *dout, const int32_t *inp,
                         int B, int T, int C, cudaStream_t stream)
{
    ol_encoder_backward_shard(dwte, dwpe, dout, inp, B, T, C, 0, INT_MAX, stream);
}

void ol_layernorm_forward(__half *out, float *mean, float *rstd, const __half *inp,
                          const __half *w, const __half *b, int N, int C,
                          cudaStream_t stream)
{
    const int rows_per_block = kThreads / 32;
    layernorm_fwd<<<(N + rows_per_block - 1) / rows_per_block, kThreads, 0, stream>>>(
        out, mean, rstd, inp, w, b, N, C);
    ol_launched("layernorm_fwd", stream);
}

void ol_layernorm_backward(__half *dinp, float *dw, float *db, const __half *dout,
                           const __half *inp, const __half *w, const float *mean,
                           const float *rstd, int N, int C, cudaStream_t stream)
{
    // Enough blocks to fill the GPU, few enough that the per-block atomics stay cheap.
    const int rows_per_block = kThreads / 32;
    const int blocks = min((N + rows_per_block - 1) / rows_per_block, 1024);
    layernorm_bwd<<<blocks, kThreads, 2 * (size_t)C * sizeof(float), stream>>>(
        dinp, dw, db, dout, inp, w, mean, rstd, N, C);
    ol_launched("layernorm_bwd", stream);
}

void ol_gelu_forward(__half *out, const __half *inp, size_t n, cudaStream_t stream)
{
    if (ew_vec8({out, inp}))
        gelu_fwd<8><<<blocks_for((n + 7) / 8), kThreads, 0, stream>>>(out, inp, n);
    else
        gelu_fwd<1><<<blocks_for(n), kThreads, 0, stream>>>(out, inp, n);
    ol_launched("gelu_fwd", stream);
}

void ol_gelu_backward(__half *dinp, const __half *inp, const __half *dout, size_t n,
                      int accumulate, cudaStream_t stream)
{
    if (ew_vec8({dinp, inp, dout}))
        gelu_bwd<8><<<blocks_for((n + 7) / 8), kThreads, 0, stream>>>(dinp, inp, dout, n,
                                                                      accumulate);
    else
        gelu_bwd<1><<<blocks_for(n), kThreads, 0, stream>>>(dinp, inp, dout, n, accumulate);
    ol_launched("gelu_bwd", stream);
}

void ol_residual_forward(__half *out, const __half *a, const __half *b, size_t n,
                         cudaStream_t stream)
{
    if (ew_vec8({out, a, b}))
        residual_fwd<8><<<blocks_for((n + 7) / 8), kThreads, 0, stream>>>(out, a, b, n);
    else
        residual_fwd<1><<<blocks_for(n), kThreads, 0, stream>>>(out, a, b, n);
    ol_launched("residual_fwd", stream);
}

void ol_crossentropy(float *losses, __half *dlogits, const __half *logits,
                     const int32_t *targets, int N, int V, float scale,
                     cudaStream_t stream)
{
    const bool vec8 = V % 8 == 0 && ew_vec8({logits, dlogits}); // NULL is aligned
    if (vec8)
        crossentropy_rows<8><<<N, kThreads, 0, stream>>>(losses, dlogits, logits, targets, V,
                                                         scale);
    else
        crossentropy_rows<1><<<N, kThreads, 0, stream>>>(losses, dlogits, logits, targets, V,
                                                         scale);
    ol_launched("crossentropy_rows", stream);
}

void ol_xent_shard_stats(float *stats, const __half *logits, const int32_t *targets, int N,
                         int Vl, int v0, cudaStream_t stream)
{
    if (Vl % 8 == 0 && ew_vec8({logits}))
        xent_shard_stats<8><<<N, kThreads, 0, stream>>>(stats, logits, targets, Vl, v0);
    else
        xent_shard_stats<1><<<N, kThreads, 0, stream>>>(stats, logits, targets, Vl, v0);
    ol_launched("xent_shard_stats", stream);
}

void ol_xent_shard_finish(float *losses, __half *dlogits, const __half *logits,
                          const int32_t *targets, const float *stats, int N, int Vl, int v0,
                          float scale, cudaStream_t stream)
{
    if (Vl % 8 == 0 && ew_vec8({logits, dlogits}))
        xent_shard_finish<8><<<N, kThreads, 0, stream>>>(losses, dlogits, logits, targets,
                                                        stats, Vl, v0, scale);
    else
        xent_shard_finish<1><<<N, kThreads, 0, stream>>>(losses, dlogits, logits, targets,
                                                        stats, Vl, v0, scale);
    ol_launched("xent_shard_finish", stream);
}
