// ops — see ops.cuh. One thread per 8 elements (16-byte accesses; one per element where
// sizes or alignment do not allow) for the elementwise kernels and the permutes; one
// warp per row for LayerNorm and the attention softmax; one block per row for the
// cross-entropy; cuBLAS for the matrix products, attention's included.
#include "ops.cuh"

#include "attention_plan.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <initializer_list>
#include <type_traits>

namespace {

constexpr int kThreads = 256;

int blocks_for(size_t n) { return (int)((n + kThreads - 1) / kThreads); }

// Whether every buffer is 16-byte aligned, for the elementwise kernels' V = 8 form.
bool ew_vec8(std::initializer_list<const void *> buffers)
{
    for (const void *p : buffers)
        if ((uintptr_t)p % 16 != 0) return false;
    return true;
}

__device__ float warp_sum(float v)
{
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// Two halves in a 32-bit word, the first (at the lower address) in the low bits. The
// 16-byte accesses below go through these, not through a uint4 cast to __half2: that
// breaks C++'s aliasing rules, and a host compiler that relies on them (cuda_emu's g++
// at -O2) computes garbage. nvcc makes them register moves.
__device__ float2 unpack_halves(unsigned w)
{
    return __half22float2(__halves2half2(__ushort_as_half((unsigned short)(w & 0xffffu)),
                                         __ushort_as_half((unsigned short)(w >> 16))));
}

__device__ unsigned pack_halves(float lo, float hi)
{
    const __half2 h = __floats2half2_rn(lo, hi);
    return (unsigned)__half_as_ushort(__low2half(h)) |
           ((unsigned)__half_as_ushort(__high2half(h)) << 16);
}

// V consecutive halves of a row as floats (V = 8: one 16-byte access, p aligned).
template <int V> __device__ void load_halves(float (&f)[V], const __half *p)
{
    if (V == 8) {
        const uint4 u = *reinterpret_cast<const uint4 *>(p);
        const unsigned w[4] = {u.x, u.y, u.z, u.w};
        for (int i = 0; i < 4; i++) {
            const float2 x = unpack_halves(w[i]);
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
        const uint4 u = {pack_halves(f[0], f[1]), pack_halves(f[2], f[3]),
                         pack_halves(f[4], f[5]), pack_halves(f[6], f[7])};
        *reinterpret_cast<uint4 *>(p) = u;
    } else {
        for (int i = 0; i < V; i++) p[i] = __float2half(f[i]);
    }
}

// Index arithmetic: a 64-bit division costs the GPU tens of instructions, so the
// kernels that turn a flat index into coordinates do it once per V elements, in I =
// uint32_t whenever the count fits (fits_u32 decides), uint64_t otherwise.

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

// Combines the (running max, sum of exp(x - max)) pairs of a warp's lanes, a lane
// with no elements holding (-inf, 0); every lane gets the whole warp's pair.
__device__ void warp_max_sum(float &m, float &s)
{
    for (int o = 16; o > 0; o >>= 1) {
        const float m2 = __shfl_xor_sync(0xffffffffu, m, o);
        const float s2 = __shfl_xor_sync(0xffffffffu, s, o);
        const float mm = fmaxf(m, m2);
        s = (m > -INFINITY ? s * expf(m - mm) : 0.0f) +
            (m2 > -INFINITY ? s2 * expf(m2 - mm) : 0.0f);
        m = mm;
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

namespace {

// A failed launch as OL_CUDA_ERROR + its cudaError_t (ops.cuh), 0 when none.
int launch_status()
{
    const cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? 0 : OL_CUDA_ERROR + (int)e;
}

// Whether a flat count of work items (and a grid over them) fits 32-bit indices.
bool fits_u32(size_t items) { return items < ((size_t)1 << 32) - 1024; }

// Calls launch(V, I) with the kernel form to use: V = 8 elements per thread (v8) or 1
// as a std::integral_constant, and a value of I = uint32_t when `items` fits 32-bit
// indices (fits_u32), uint64_t otherwise; launch instantiates kernel<V, I> from them.
template <typename Launch> void launch_form(bool v8, size_t items, Launch launch)
{
    using V8 = std::integral_constant<int, 8>;
    using V1 = std::integral_constant<int, 1>;
    const bool small = fits_u32(items);
    if (v8 && small)
        launch(V8(), uint32_t());
    else if (v8)
        launch(V8(), uint64_t());
    else if (small)
        launch(V1(), uint32_t());
    else
        launch(V1(), uint64_t());
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
