// ops — see ops.cuh. One thread per element for the elementwise kernels; one warp per
// row for LayerNorm and the attention softmax; one block per row for the cross-entropy;
// cuBLAS for the matrix products, attention's included.
#include "ops.cuh"

#include <math.h>

namespace {

constexpr int kThreads = 256;

int blocks_for(size_t n) { return (int)((n + kThreads - 1) / kThreads); }

__device__ float warp_sum(float v)
{
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ float warp_max(float v)
{
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

__global__ void encoder_fwd(__half *out, const int32_t *inp, const __half *wte,
                            const __half *wpe, int B, int T, int C)
{
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)B * T * C) return;
    const size_t r = i / C;
    const int c = (int)(i % C), t = (int)(r % T);
    out[i] = __float2half(__half2float(wte[(size_t)inp[r] * C + c]) +
                          __half2float(wpe[(size_t)t * C + c]));
}

__global__ void encoder_bwd(float *dwte, float *dwpe, const __half *dout,
                            const int32_t *inp, int B, int T, int C)
{
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)B * T * C) return;
    const size_t r = i / C;
    const int c = (int)(i % C), t = (int)(r % T);
    const float d = __half2float(dout[i]);
    atomicAdd(&dwte[(size_t)inp[r] * C + c], d);
    atomicAdd(&dwpe[(size_t)t * C + c], d);
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

__global__ void gelu_fwd(__half *out, const __half *inp, size_t n)
{
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = __float2half(gelu(__half2float(inp[i])));
}

__global__ void gelu_bwd(__half *dinp, const __half *inp, const __half *dout, size_t n)
{
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        dinp[i] = __float2half(__half2float(dinp[i]) +
                               gelu_grad(__half2float(inp[i])) * __half2float(dout[i]));
}

__global__ void residual_fwd(__half *out, const __half *a, const __half *b, size_t n)
{
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = __float2half(__half2float(a[i]) + __half2float(b[i]));
}

// One block per row: the row max, the sum of exponentials, then loss and gradient.
__global__ void crossentropy_rows(float *losses, __half *dlogits, const __half *logits,
                                  const int32_t *targets, int V, float scale)
{
    __shared__ float part[kThreads / 32];
    __shared__ float bcast;
    const int row = blockIdx.x, tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
    const __half *x = logits + (size_t)row * V;
    float m = -INFINITY;
    for (int j = tid; j < V; j += blockDim.x) m = fmaxf(m, __half2float(x[j]));
    m = warp_max(m);
    if (lane == 0) part[warp] = m;
    __syncthreads();
    if (tid == 0) {
        float mm = part[0];
        for (int w = 1; w < (int)blockDim.x / 32; w++) mm = fmaxf(mm, part[w]);
        bcast = mm;
    }
    __syncthreads();
    m = bcast;
    float s = 0.0f;
    for (int j = tid; j < V; j += blockDim.x) s += expf(__half2float(x[j]) - m);
    s = warp_sum(s);
    __syncthreads(); // part[] is reused
    if (lane == 0) part[warp] = s;
    __syncthreads();
    if (tid == 0) {
        float ss = 0.0f;
        for (int w = 0; w < (int)blockDim.x / 32; w++) ss += part[w];
        bcast = ss;
    }
    __syncthreads();
    s = bcast;
    const int t = targets[row];
    // Read the target's logit before any thread overwrites logits (dlogits may alias).
    const float xt = __half2float(x[t]);
    __syncthreads();
    if (tid == 0) losses[row] = logf(s) - (xt - m);
    if (dlogits) {
        __half *g = dlogits + (size_t)row * V;
        for (int j = tid; j < V; j += blockDim.x) {
            const float p = expf(__half2float(x[j]) - m) / s;
            g[j] = __float2half(scale * (p - (j == t ? 1.0f : 0.0f)));
        }
    }
}

__global__ void add_bias(__half *out, const __half *bias, int N, int OC)
{
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < (size_t)N * OC)
        out[i] = __float2half(__half2float(out[i]) + __half2float(bias[i % OC]));
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

// Attention. Heads split: src [B,T,P*NH*hs] -> dst [P,B,NH,T,hs] (P = 3 for qkv, 1 for
// dout); one thread per element, in source order.
// Where element i of [B,T,P*NH*hs] lives in [P,B,NH,T,hs].
__device__ size_t head_major_index(size_t i, int B, int T, int P, int NH, int hs)
{
    const size_t C = (size_t)NH * hs;
    const size_t c = i % (P * C), bt = i / (P * C);
    const int part = (int)(c / C), h = (int)(c % C / hs), d = (int)(c % hs);
    const int t = (int)(bt % T), b = (int)(bt / T);
    return ((((size_t)part * B + b) * NH + h) * T + t) * hs + d;
}

__global__ void heads_split(__half *dst, const __half *src, int B, int T, int P, int NH,
                            int hs)
{
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)B * T * P * NH * hs) return;
    dst[head_major_index(i, B, T, P, NH, hs)] = src[i];
}

// Heads merged: src [P,B,NH,T,hs] -> dst [B,T,P*NH*hs], written (accumulate = 0) or
// added to (accumulate = 1); one thread per element, in destination order.
__global__ void heads_merge(__half *dst, const __half *src, int B, int T, int P, int NH,
                            int hs, int accumulate)
{
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)B * T * P * NH * hs) return;
    const float v = __half2float(src[head_major_index(i, B, T, P, NH, hs)]);
    dst[i] = __float2half(accumulate ? __half2float(dst[i]) + v : v);
}

// V consecutive halves of a row as floats (V = 8: one 16-byte access, p aligned).
template <int V> __device__ void load_halves(float (&f)[V], const __half *p)
{
    if (V == 8) {
        const uint4 u = *reinterpret_cast<const uint4 *>(p);
        const __half2 *h2 = reinterpret_cast<const __half2 *>(&u);
        for (int i = 0; i < V / 2; i++) {
            const float2 x = __half22float2(h2[i]);
            f[2 * i] = x.x;
            f[2 * i + 1] = x.y;
        }
    } else {
        for (int i = 0; i < V; i++) f[i] = __half2float(p[i]);
    }
}

template <int V> __device__ void store_halves(__half *p, const float (&f)[V])
{
    if (V == 8) {
        uint4 u;
        __half2 *h2 = reinterpret_cast<__half2 *>(&u);
        for (int i = 0; i < V / 2; i++) h2[i] = __floats2half2_rn(f[2 * i], f[2 * i + 1]);
        *reinterpret_cast<uint4 *>(p) = u;
    } else {
        for (int i = 0; i < V; i++) p[i] = __float2half(f[i]);
    }
}

// Causal softmax in place, one warp per row of att [B*NH*T, T] (the scaled scores in,
// the probabilities out; row r is query t = r % T). A lane takes chunks of V elements
// (T % V == 0). Running max and sum in one pass (rescaling the sum when the max grows),
// then a pass that writes; the scores above the diagonal are never read.
template <int V> __global__ void att_softmax_fwd(__half *att, int rows, int T)
{
    const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= rows) return;
    const int t = row % T, chunks = T / V, live = t / V + 1; // chunks with some t2 <= t
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
    for (int o = 16; o > 0; o >>= 1) { // combine (max, sum) pairs; a lane may have none
        const float m2 = __shfl_xor_sync(0xffffffffu, m, o);
        const float s2 = __shfl_xor_sync(0xffffffffu, s, o);
        const float mm = fmaxf(m, m2);
        s = (m > -INFINITY ? s * expf(m - mm) : 0.0f) +
            (m2 > -INFINITY ? s2 * expf(m2 - mm) : 0.0f);
        m = mm;
    }
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
// (the scale is applied by the GEMMs that use it).
template <int V> __global__ void att_softmax_bwd(__half *d, const __half *att, int rows, int T)
{
    const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= rows) return;
    const int t = row % T, chunks = T / V, live = t / V + 1;
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

} // namespace

namespace {

int launch_status() { return (int)cudaGetLastError(); }

// T x T batched products on the B*NH heads, FP16 in and out, FP32 accumulation.
// Row-major [R,K] is column-major [K,R] (its transpose): each call below computes the
// transpose of the row-major product named in its comment.
cublasStatus_t gemm_batched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb,
                            int m, int n, int k, float alpha, const __half *A, int lda,
                            long long sA, const __half *Bm, int ldb, long long sB,
                            __half *Cm, int ldc, long long sC, int batch)
{
    const float beta = 0.0f;
    return cublasGemmStridedBatchedEx(h, ta, tb, m, n, k, &alpha, A, CUDA_R_16F, lda, sA, Bm,
                                      CUDA_R_16F, ldb, sB, &beta, Cm, CUDA_R_16F, ldc, sC,
                                      batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
}

// 16-byte rows for the softmax kernels when T % 8 == 0 and the buffers are aligned.
bool rows_vec8(int T, const void *a, const void *b)
{
    return T % 8 == 0 && (uintptr_t)a % 16 == 0 && (uintptr_t)b % 16 == 0;
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
                         __half *scratch, const __half *qkv, int B, int T, int C, int NH)
{
    const int hs = C / NH, BH = B * NH, rows = BH * T, per_block = kThreads / 32;
    const size_t n = (size_t)B * T * C;
    const long long sQ = (long long)T * hs, sA = (long long)T * T;
    const __half *q = qkvr, *k = qkvr + n, *v = qkvr + 2 * n;
    cudaStream_t stream;
    cublasStatus_t s = cublasGetStream(h, &stream);
    if (s != CUBLAS_STATUS_SUCCESS) return (int)s;
    heads_split<<<blocks_for(3 * n), kThreads, 0, stream>>>(qkvr, qkv, B, T, 3, NH, hs);
    if (int e = launch_status()) return e;
    // att [T,T] = scale * q [T,hs] @ k^T, per head: column-major att^T = k q^T, with
    // A = k (column-major [hs,T], transposed), B = q (column-major [hs,T]); m = n = T,
    // k = hs; lda = ldb = hs, ldc = T; strides T*hs, T*hs, T*T.
    s = gemm_batched(h, CUBLAS_OP_T, CUBLAS_OP_N, T, T, hs, 1.0f / sqrtf((float)hs), k, hs, sQ,
                     q, hs, sQ, att, T, sA, BH);
    if (s != CUBLAS_STATUS_SUCCESS) return (int)s;
    const int grid = (rows + per_block - 1) / per_block;
    if (rows_vec8(T, att, att))
        att_softmax_fwd<8><<<grid, kThreads, 0, stream>>>(att, rows, T);
    else
        att_softmax_fwd<1><<<grid, kThreads, 0, stream>>>(att, rows, T);
    if (int e = launch_status()) return e;
    // y [T,hs] = att [T,T] @ v [T,hs], per head: column-major y^T = v^T att^T, with
    // A = v (column-major [hs,T]), B = att (column-major [T,T] = att^T); m = hs, n = T,
    // k = T; lda = hs, ldb = T, ldc = hs; strides T*hs, T*T, T*hs. y goes to scratch.
    s = gemm_batched(h, CUBLAS_OP_N, CUBLAS_OP_N, hs, T, T, 1.0f, v, hs, sQ, att, T, sA,
                     scratch, hs, sQ, BH);
    if (s != CUBLAS_STATUS_SUCCESS) return (int)s;
    heads_merge<<<blocks_for(n), kThreads, 0, stream>>>(out, scratch, B, T, 1, NH, hs, 0);
    return launch_status();
}

int ol_attention_backward(cublasHandle_t h, __half *dqkv, __half *scratch,
                          const __half *dout, const __half *qkvr, const __half *att,
                          int B, int T, int C, int NH)
{
    const int hs = C / NH, BH = B * NH, rows = BH * T, per_block = kThreads / 32;
    const size_t n = (size_t)B * T * C;
    const long long sQ = (long long)T * hs, sA = (long long)T * T;
    const float scale = 1.0f / sqrtf((float)hs);
    const __half *q = qkvr, *k = qkvr + n, *v = qkvr + 2 * n;
    __half *datt = scratch, *dy = scratch + (size_t)BH * T * T, *dq = dy + n, *dk = dq + n,
           *dv = dk + n;
    cudaStream_t stream;
    cublasStatus_t s = cublasGetStream(h, &stream);
    if (s != CUBLAS_STATUS_SUCCESS) return (int)s;
    heads_split<<<blocks_for(n), kThreads, 0, stream>>>(dy, dout, B, T, 1, NH, hs);
    if (int e = launch_status()) return e;
    // datt [T,T] = dy [T,hs] @ v^T, per head: column-major datt^T = v dy^T, with
    // A = v (column-major [hs,T], transposed), B = dy (column-major [hs,T]); m = n = T,
    // k = hs; lda = ldb = hs, ldc = T; strides T*hs, T*hs, T*T.
    s = gemm_batched(h, CUBLAS_OP_T, CUBLAS_OP_N, T, T, hs, 1.0f, v, hs, sQ, dy, hs, sQ, datt,
                     T, sA, BH);
    if (s != CUBLAS_STATUS_SUCCESS) return (int)s;
    // dv [T,hs] = att^T [T,T] @ dy [T,hs], per head: column-major dv^T = dy^T att, with
    // A = dy (column-major [hs,T]), B = att (column-major att^T, transposed); m = hs,
    // n = T, k = T; lda = hs, ldb = T, ldc = hs; strides T*hs, T*T, T*hs.
    s = gemm_batched(h, CUBLAS_OP_N, CUBLAS_OP_T, hs, T, T, 1.0f, dy, hs, sQ, att, T, sA, dv,
                     hs, sQ, BH);
    if (s != CUBLAS_STATUS_SUCCESS) return (int)s;
    const int grid = (rows + per_block - 1) / per_block;
    if (rows_vec8(T, datt, att))
        att_softmax_bwd<8><<<grid, kThreads, 0, stream>>>(datt, att, rows, T);
    else
        att_softmax_bwd<1><<<grid, kThreads, 0, stream>>>(datt, att, rows, T);
    if (int e = launch_status()) return e;
    // dscores is now in datt (unscaled: the scale is these two GEMMs' alpha).
    // dq [T,hs] = scale * dscores [T,T] @ k [T,hs], per head: column-major dq^T =
    // k^T dscores^T, with A = k (column-major [hs,T]), B = dscores (column-major [T,T] =
    // dscores^T); m = hs, n = T, k = T; lda = hs, ldb = T, ldc = hs; strides T*hs, T*T, T*hs.
    s = gemm_batched(h, CUBLAS_OP_N, CUBLAS_OP_N, hs, T, T, scale, k, hs, sQ, datt, T, sA, dq,
                     hs, sQ, BH);
    if (s != CUBLAS_STATUS_SUCCESS) return (int)s;
    // dk [T,hs] = scale * dscores^T [T,T] @ q [T,hs], per head: column-major dk^T =
    // q^T dscores, with A = q (column-major [hs,T]), B = dscores (column-major dscores^T,
    // transposed); m = hs, n = T, k = T; lda = hs, ldb = T, ldc = hs; strides as dq's.
    s = gemm_batched(h, CUBLAS_OP_N, CUBLAS_OP_T, hs, T, T, scale, q, hs, sQ, datt, T, sA, dk,
                     hs, sQ, BH);
    if (s != CUBLAS_STATUS_SUCCESS) return (int)s;
    // dq, dk, dv [3,B,NH,T,hs] are contiguous: one merge adds them into dqkv [B,T,3C].
    heads_merge<<<blocks_for(3 * n), kThreads, 0, stream>>>(dqkv, dq, B, T, 3, NH, hs, 1);
    return launch_status();
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
    cublasGetStream(h, &stream);
    const size_t n = (size_t)N * OC;
    add_bias<<<blocks_for(n), kThreads, 0, stream>>>(out, bias, N, OC);
    return 0;
}

int ol_matmul_backward(cublasHandle_t h, __half *dinp, float *dw, float *dbias,
                       const __half *dout, const __half *inp, const __half *w, int N,
                       int C, int OC)
{
    const float one = 1.0f;
    // dinp^T [C,N] += w^T [C,OC] x dout^T [OC,N]
    cublasStatus_t s = cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, C, N, OC, &one, w, CUDA_R_16F,
                                    C, dout, CUDA_R_16F, OC, &one, dinp, CUDA_R_16F, C,
                                    CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    if (s != CUBLAS_STATUS_SUCCESS) return (int)s;
    // dw^T [C,OC] += inp^T [C,N] x dout [N,OC]
    s = cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_T, C, OC, N, &one, inp, CUDA_R_16F, C, dout,
                     CUDA_R_16F, OC, &one, dw, CUDA_R_32F, C, CUBLAS_COMPUTE_32F,
                     CUBLAS_GEMM_DEFAULT);
    if (s != CUBLAS_STATUS_SUCCESS || !dbias) return (int)s;
    cudaStream_t stream;
    cublasGetStream(h, &stream);
    const dim3 grid((OC + 31) / 32, (N + kBiasRows - 1) / kBiasRows), block(32, 8);
    bias_grad<<<grid, block, 0, stream>>>(dbias, dout, N, OC);
    return launch_status();
}

void ol_encoder_forward(__half *out, const int32_t *inp, const __half *wte,
                        const __half *wpe, int B, int T, int C, cudaStream_t stream)
{
    const size_t n = (size_t)B * T * C;
    encoder_fwd<<<blocks_for(n), kThreads, 0, stream>>>(out, inp, wte, wpe, B, T, C);
}

void ol_encoder_backward(float *dwte, float *dwpe, const __half *dout, const int32_t *inp,
                         int B, int T, int C, cudaStream_t stream)
{
    const size_t n = (size_t)B * T * C;
    encoder_bwd<<<blocks_for(n), kThreads, 0, stream>>>(dwte, dwpe, dout, inp, B, T, C);
}

void ol_layernorm_forward(__half *out, float *mean, float *rstd, const __half *inp,
                          const __half *w, const __half *b, int N, int C,
                          cudaStream_t stream)
{
    const int rows_per_block = kThreads / 32;
    layernorm_fwd<<<(N + rows_per_block - 1) / rows_per_block, kThreads, 0, stream>>>(
        out, mean, rstd, inp, w, b, N, C);
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
}

void ol_gelu_forward(__half *out, const __half *inp, size_t n, cudaStream_t stream)
{
    gelu_fwd<<<blocks_for(n), kThreads, 0, stream>>>(out, inp, n);
}

void ol_gelu_backward(__half *dinp, const __half *inp, const __half *dout, size_t n,
                      cudaStream_t stream)
{
    gelu_bwd<<<blocks_for(n), kThreads, 0, stream>>>(dinp, inp, dout, n);
}

void ol_residual_forward(__half *out, const __half *a, const __half *b, size_t n,
                         cudaStream_t stream)
{
    residual_fwd<<<blocks_for(n), kThreads, 0, stream>>>(out, a, b, n);
}

void ol_crossentropy(float *losses, __half *dlogits, const __half *logits,
                     const int32_t *targets, int N, int V, float scale,
                     cudaStream_t stream)
{
    crossentropy_rows<<<N, kThreads, 0, stream>>>(losses, dlogits, logits, targets, V, scale);
}
