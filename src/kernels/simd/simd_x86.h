/* simd_x86.h — the vector twins of simd_portable.c, written once against the vector
 * macros below and compiled twice: by simd_avx2.c for 8 lanes and by simd_avx512.c for
 * 16. The including file first switches the compiler's target on, then defines:
 *
 *   vf, VL           the float vector type and its lane count
 *   SIMD_FN(name)    the name of this path's copy of a function
 *   SIMD_TABLE       the name of this path's table (simd.h)
 *   vload vstore vset1 vzero vadd vsub vmul vdiv vmin vmax vsqrt
 *   vfmadd(a,b,c) = a*b + c      vfnmadd(a,b,c) = c - a*b   (one rounding)
 *   vround(x)                    to the nearest integer, ties to even
 *   vpow2i(n)                    2^n for integral n in [-126, 127]
 *   vkeep_ge(x, lo, y)           y where !(x < lo) (NaN keeps), else 0
 *   vkeep_le(x, hi, y)           y where !(x > hi), else 0
 *   vhsum(v), vhmax(v)           horizontal sum / max
 *   vnonfinite(v)                1 when a lane is inf or NaN
 *   vsumsq_acc(a0, a1, v)        a0, a1 (double vectors vd) += the squares of v
 *   vd, vdzero, vdhsum           double vector type, zero, horizontal sum
 *   vcvt_half_load(p)/vcvt_half_store(p, v)      VL halves <-> floats (round to even)
 *   vbf16_store(p, u)            the low 16 bits of VL 32-bit lanes of u to p
 *   vbf16_load(p)                VL bfloat16 at p as floats
 *   vi, vcast_i(v), vcast_f(i), vi_set1, vi_add, vi_and, vi_srli, vi_slli, vi_or,
 *   vmask, vi_gt(a, b) (signed a > b, as a vmask), vi_blend(m, a, b) (b where m, else a)
 *
 * Tails (n not a multiple of VL) go through one vector padded with a neutral value
 * (vload_part / vstore_part), so every element takes the vector arithmetic and the
 * results do not depend on where an element sits. */

static const float LN_EPS_V = 1e-5f;
static const float GELU_K0_V = 0.7978845608028654f; /* sqrt(2/pi) */
static const float GELU_K1_V = 0.044715f;
#ifndef GT_SIMD_MODULE
#error "simd_x86.h is internal to src/kernels/simd/ (elsewhere: simd.h)"
#endif

#define GELU_CUT_V 40.0f

/* vload_part(p, n, fill): n < VL floats from p, `fill` in the other lanes;
 * vstore_part(p, n, v): the first n < VL lanes of v to p. The including file defines
 * them with masked loads and stores, which touch nothing past p + n. */

/* e^x within about 2 ulp of expf: x = n ln2 + r with |r| <= ln2/2, e^r by its degree-7
 * Taylor polynomial (truncation < 1e-8 relative), 2^n through the exponent bits.
 * Below -87 gives 0 (expf gives at most 1.6e-38 there), above 88 is clamped
 * (e^88 = 1.65e38), NaN stays NaN. vexp_in_range is the same for xc already in
 * [-87, 88] (or NaN), with none of the clamps: GELU's sigmoid, whose argument is. */
static inline vf SIMD_FN(vexp_in_range)(vf xc)
{
    vf n = vround(vmul(xc, vset1(1.4426950408889634f)));
    /* r = x - n ln2, with ln2 split into a part exact in float and the rest */
    vf r = vfnmadd(n, vset1(0.693145751953125f), xc);
    r = vfnmadd(n, vset1(1.428606765330187e-06f), r);
    vf p = vset1(1.0f / 5040.0f);
    p = vfmadd(p, r, vset1(1.0f / 720.0f));
    p = vfmadd(p, r, vset1(1.0f / 120.0f));
    p = vfmadd(p, r, vset1(1.0f / 24.0f));
    p = vfmadd(p, r, vset1(1.0f / 6.0f));
    p = vfmadd(p, r, vset1(0.5f));
    p = vfmadd(p, r, vset1(1.0f));
    p = vfmadd(p, r, vset1(1.0f));
    return vmul(p, vpow2i(n));
}

static inline vf SIMD_FN(vexp)(vf x)
{
    const vf lo = vset1(-87.0f), hi = vset1(88.0f);
    vf xc = vmin(hi, vmax(lo, x)); /* NaN passes through max/min in this operand order */
    return vkeep_ge(x, lo, SIMD_FN(vexp_in_range)(xc));
}
#define vexp SIMD_FN(vexp)

/* ------------------------------------------------------------------------------------ */
/* adds */

static void SIMD_FN(add)(float *restrict out, const float *a, const float *b, size_t n)
{
    size_t i = 0;
    for (; i + VL <= n; i += VL) vstore(out + i, vadd(vload(a + i), vload(b + i)));
    for (; i < n; i++) out[i] = a[i] + b[i]; /* exact either way */
}

static void SIMD_FN(acc)(float *restrict acc, const float *restrict x, size_t n)
{
    size_t i = 0;
    for (; i + VL <= n; i += VL) vstore(acc + i, vadd(vload(acc + i), vload(x + i)));
    for (; i < n; i++) acc[i] += x[i];
}

/* ------------------------------------------------------------------------------------ */
/* LayerNorm */

static void SIMD_FN(ln_fwd_row)(float *restrict out, float *mean, float *rstd,
                                const float *restrict x, const float *restrict w,
                                const float *restrict b, int C)
{
    const size_t n = (size_t)C, full = n - n % VL, tail = n - full;
    vf s = vzero();
    for (size_t i = 0; i < full; i += VL) s = vadd(s, vload(x + i));
    if (tail) s = vadd(s, vload_part(x + full, tail, 0.0f));
    const float m = vhsum(s) / (float)C;
    const vf mv = vset1(m);
    vf v = vzero();
    for (size_t i = 0; i < full; i += VL) {
        vf d = vsub(vload(x + i), mv);
        v = vfmadd(d, d, v);
    }
    if (tail) {
        vf d = vsub(vload_part(x + full, tail, m), mv); /* padding with m adds 0 */
        v = vfmadd(d, d, v);
    }
    const float rs = 1.0f / sqrtf(vhsum(v) / (float)C + LN_EPS_V);
    const vf rsv = vset1(rs);
    for (size_t i = 0; i < full; i += VL) {
        vf xh = vmul(vsub(vload(x + i), mv), rsv);
        vstore(out + i, vfmadd(xh, vload(w + i), vload(b + i)));
    }
    if (tail) {
        vf xh = vmul(vsub(vload_part(x + full, tail, 0.0f), mv), rsv);
        vstore_part(out + full, tail, vfmadd(xh, vload_part(w + full, tail, 0.0f),
                                             vload_part(b + full, tail, 0.0f)));
    }
    *mean = m;
    *rstd = rs;
}

static void SIMD_FN(ln_bwd_row)(float *restrict dinp, const float *restrict dout,
                                const float *restrict x, const float *restrict w, float m,
                                float rs, int C)
{
    const size_t n = (size_t)C, full = n - n % VL, tail = n - full;
    const vf mv = vset1(m), rsv = vset1(rs);
    vf a = vzero(), bb = vzero();
    for (size_t i = 0; i < full; i += VL) {
        vf dn = vmul(vload(dout + i), vload(w + i));
        vf xh = vmul(vsub(vload(x + i), mv), rsv);
        a = vadd(a, dn);
        bb = vfmadd(dn, xh, bb);
    }
    if (tail) { /* dout padded with 0: the padded lanes add nothing */
        vf dn = vmul(vload_part(dout + full, tail, 0.0f), vload_part(w + full, tail, 0.0f));
        vf xh = vmul(vsub(vload_part(x + full, tail, m), mv), rsv);
        a = vadd(a, dn);
        bb = vfmadd(dn, xh, bb);
    }
    const float am = vhsum(a) / (float)C, bm = vhsum(bb) / (float)C;
    const vf nav = vset1(-am), bmv = vset1(bm);
    for (size_t i = 0; i < full; i += VL) {
        vf dn = vmul(vload(dout + i), vload(w + i));
        vf xh = vmul(vsub(vload(x + i), mv), rsv);
        vf g = vfnmadd(xh, bmv, vadd(dn, nav));
        vstore(dinp + i, vfmadd(g, rsv, vload(dinp + i)));
    }
    if (tail) {
        vf dn = vmul(vload_part(dout + full, tail, 0.0f), vload_part(w + full, tail, 0.0f));
        vf xh = vmul(vsub(vload_part(x + full, tail, m), mv), rsv);
        vf g = vfnmadd(xh, bmv, vadd(dn, nav));
        vstore_part(dinp + full, tail, vfmadd(g, rsv, vload_part(dinp + full, tail, 0.0f)));
    }
}

#define COLV (SIMD_COL_BLOCK / VL)

static void SIMD_FN(ln_wb_cols)(float *restrict dw, float *restrict db,
                                const float *restrict dout, const float *restrict inp,
                                const float *mean, const float *rstd, size_t N, int C,
                                int c0, int w)
{
    if (w != SIMD_COL_BLOCK) { /* the last, narrow block */
        simd_kernels_portable.ln_wb_cols(dw, db, dout, inp, mean, rstd, N, C, c0, w);
        return;
    }
    vf aw[COLV], ab[COLV];
    for (int k = 0; k < COLV; k++) aw[k] = ab[k] = vzero();
    for (size_t n = 0; n < N; n++) {
        const float *d = dout + n * C + c0, *x = inp + n * C + c0;
        const vf mv = vset1(mean[n]), rsv = vset1(rstd[n]);
        for (int k = 0; k < COLV; k++) {
            vf dv = vload(d + VL * k);
            vf xh = vmul(vsub(vload(x + VL * k), mv), rsv);
            aw[k] = vfmadd(dv, xh, aw[k]);
            ab[k] = vadd(ab[k], dv);
        }
    }
    for (int k = 0; k < COLV; k++) {
        vstore(dw + c0 + VL * k, vadd(vload(dw + c0 + VL * k), aw[k]));
        vstore(db + c0 + VL * k, vadd(vload(db + c0 + VL * k), ab[k]));
    }
}

static void SIMD_FN(colsum)(float *restrict acc, const float *restrict x, size_t N,
                            size_t ld, int c0, int w)
{
    if (w != SIMD_COL_BLOCK) {
        simd_kernels_portable.colsum(acc, x, N, ld, c0, w);
        return;
    }
    vf a[COLV];
    for (int k = 0; k < COLV; k++) a[k] = vzero();
    for (size_t n = 0; n < N; n++) {
        const float *r = x + n * ld + c0;
        for (int k = 0; k < COLV; k++) a[k] = vadd(a[k], vload(r + VL * k));
    }
    for (int k = 0; k < COLV; k++)
        vstore(acc + c0 + VL * k, vadd(vload(acc + c0 + VL * k), a[k]));
}

/* ------------------------------------------------------------------------------------ */
/* attention softmax */

static float SIMD_FN(softmax_row)(float *s, int len, int T)
{
    const size_t n = (size_t)len, full = n - n % VL, tail = n - full;
    vf mx = vset1(s[0]);
    for (size_t j = 0; j < full; j += VL) mx = vmax(mx, vload(s + j));
    if (tail) mx = vmax(mx, vload_part(s + full, tail, s[0]));
    const float row_max = vhmax(mx);
    const vf mv = vset1(row_max);
    vf sum = vzero();
    for (size_t j = 0; j < full; j += VL) {
        vf e = vexp(vsub(vload(s + j), mv));
        vstore(s + j, e);
        sum = vadd(sum, e);
    }
    if (tail) { /* padded with -inf - max: exp gives 0 */
        vf e = vexp(vsub(vload_part(s + full, tail, -INFINITY), mv));
        vstore_part(s + full, tail, e);
        sum = vadd(sum, e);
    }
    const float total = vhsum(sum);
    const vf inv = vset1(1.0f / total);
    for (size_t j = 0; j < full; j += VL) vstore(s + j, vmul(vload(s + j), inv));
    if (tail) vstore_part(s + full, tail, vmul(vload_part(s + full, tail, 0.0f), inv));
    for (int j = len; j < T; j++) s[j] = 0.0f;
    return row_max + logf(total);
}

static void SIMD_FN(softmax_row_lse)(float *s, int len, int width, float lse)
{
    const size_t n = (size_t)len, full = n - n % VL, tail = n - full;
    const vf l = vset1(lse);
    for (size_t j = 0; j < full; j += VL) vstore(s + j, vexp(vsub(vload(s + j), l)));
    if (tail) vstore_part(s + full, tail, vexp(vsub(vload_part(s + full, tail, 0.0f), l)));
    for (int j = len; j < width; j++) s[j] = 0.0f;
}

static void SIMD_FN(softmax_bwd_row)(float *d, const float *a, int len, int width)
{
    const size_t n = (size_t)len, full = n - n % VL, tail = n - full;
    vf s = vzero();
    for (size_t j = 0; j < full; j += VL) s = vfmadd(vload(a + j), vload(d + j), s);
    if (tail) s = vfmadd(vload_part(a + full, tail, 0.0f), vload_part(d + full, tail, 0.0f), s);
    const vf sv = vset1(vhsum(s));
    for (size_t j = 0; j < full; j += VL)
        vstore(d + j, vmul(vload(a + j), vsub(vload(d + j), sv)));
    if (tail)
        vstore_part(d + full, tail, vmul(vload_part(a + full, tail, 0.0f),
                                         vsub(vload_part(d + full, tail, 0.0f), sv)));
    for (int j = len; j < width; j++) d[j] = 0.0f;
}

/* ------------------------------------------------------------------------------------ */
/* GELU: gelu(x) = x s, s = sigmoid(2u) = 1 / (1 + e^t), t = -2u = -2 K0 x (1 + K1 x^2).
 * Where t > GELU_CUT (x < -7.35) s is exactly 0 (it is below 4e-18 there): otherwise s
 * and the products with it sink into denormals, which cost a microcode assist each.
 * t is clamped before the division so not even a masked lane makes a denormal. The
 * exponential skips vexp's clamps: t <= GELU_CUT already, and below -87, where vexp
 * gives 0, e^-87 leaves 1 + e^t at exactly 1 too (and a NaN x has t clamped to the cut,
 * then s masked to 0: x s is NaN either way): the same bits (4M values compared, NaN
 * and infinities among them), 5-10% faster measured on the GELU passes. */

static inline vf SIMD_FN(gelu_s)(vf x, vf *x2)
{
    const vf one = vset1(1.0f);
    vf xx = vmul(x, x);
    vf t = vmul(vmul(vset1(-2.0f * GELU_K0_V), x), vfmadd(vset1(GELU_K1_V), xx, one));
    *x2 = xx;
    vf tc = vmax(vset1(-87.0f), vmin(t, vset1(GELU_CUT_V)));
    return vkeep_le(t, GELU_CUT_V, vdiv(one, vadd(one, SIMD_FN(vexp_in_range)(tc))));
}

/* gelu'(x) from gelu_s's s and x^2 */
static inline vf SIMD_FN(gelu_grad_s)(vf x, vf s, vf x2)
{
    const vf one = vset1(1.0f);
    vf du = vfmadd(vset1(3.0f * GELU_K0_V * GELU_K1_V), x2, vset1(GELU_K0_V));
    vf t = vmul(vmul(vadd(x, x), s), vmul(vsub(one, s), du));
    return vadd(s, t);
}

static void SIMD_FN(gelu_fwd)(float *restrict out, const float *restrict x, size_t n)
{
    const size_t full = n - n % VL, tail = n - full;
    vf x2;
    for (size_t i = 0; i < full; i += VL) {
        vf xv = vload(x + i);
        vstore(out + i, vmul(xv, SIMD_FN(gelu_s)(xv, &x2)));
    }
    if (tail) {
        vf xv = vload_part(x + full, tail, 0.0f);
        vstore_part(out + full, tail, vmul(xv, SIMD_FN(gelu_s)(xv, &x2)));
    }
}

static inline vf SIMD_FN(gelu_grad)(vf x)
{
    vf x2;
    vf s = SIMD_FN(gelu_s)(x, &x2);
    return SIMD_FN(gelu_grad_s)(x, s, x2);
}

static void SIMD_FN(gelu_bwd)(float *restrict dinp, const float *restrict x,
                              const float *restrict dout, size_t n)
{
    const size_t full = n - n % VL, tail = n - full;
    for (size_t i = 0; i < full; i += VL)
        vstore(dinp + i, vfmadd(SIMD_FN(gelu_grad)(vload(x + i)), vload(dout + i),
                                vload(dinp + i)));
    if (tail)
        vstore_part(dinp + full, tail,
                    vfmadd(SIMD_FN(gelu_grad)(vload_part(x + full, tail, 0.0f)),
                           vload_part(dout + full, tail, 0.0f),
                           vload_part(dinp + full, tail, 0.0f)));
}

/* gelu_bwd and gelu_fwd with one sigmoid a vector: the same expressions, so their bits */
static inline void SIMD_FN(gelu_both)(vf x, vf dout, vf *dinp, vf *out)
{
    vf x2;
    const vf s = SIMD_FN(gelu_s)(x, &x2);
    *dinp = vfmadd(SIMD_FN(gelu_grad_s)(x, s, x2), dout, *dinp);
    *out = vmul(x, s);
}

static void SIMD_FN(gelu_bwd_fwd)(float *restrict dinp, float *restrict out,
                                  const float *restrict x, const float *restrict dout, size_t n)
{
    const size_t full = n - n % VL, tail = n - full;
    vf d, o;
    for (size_t i = 0; i < full; i += VL) {
        d = vload(dinp + i);
        SIMD_FN(gelu_both)(vload(x + i), vload(dout + i), &d, &o);
        vstore(dinp + i, d);
        vstore(out + i, o);
    }
    if (tail) {
        d = vload_part(dinp + full, tail, 0.0f);
        SIMD_FN(gelu_both)(vload_part(x + full, tail, 0.0f),
                           vload_part(dout + full, tail, 0.0f), &d, &o);
        vstore_part(dinp + full, tail, d);
        vstore_part(out + full, tail, o);
    }
}

/* ------------------------------------------------------------------------------------ */
/* cross-entropy of one row */

static float SIMD_FN(xent_row)(float *g, const float *x, int target, int V, float scale)
{
    const size_t n = (size_t)V, full = n - n % VL, tail = n - full;
    vf mx = vset1(x[0]);
    for (size_t j = 0; j < full; j += VL) mx = vmax(mx, vload(x + j));
    if (tail) mx = vmax(mx, vload_part(x + full, tail, x[0]));
    const float m = vhmax(mx);
    const float xt = x[target];
    const vf mv = vset1(m);
    vf s = vzero();
    if (g) {
        for (size_t j = 0; j < full; j += VL) {
            vf e = vexp(vsub(vload(x + j), mv));
            vstore(g + j, e);
            s = vadd(s, e);
        }
        if (tail) {
            vf e = vexp(vsub(vload_part(x + full, tail, -INFINITY), mv));
            vstore_part(g + full, tail, e);
            s = vadd(s, e);
        }
        const float sum = vhsum(s);
        const vf kv = vset1(scale / sum);
        for (size_t j = 0; j < full; j += VL) vstore(g + j, vmul(vload(g + j), kv));
        if (tail) vstore_part(g + full, tail, vmul(vload_part(g + full, tail, 0.0f), kv));
        g[target] -= scale;
        return logf(sum) - (xt - m);
    }
    for (size_t j = 0; j < full; j += VL) s = vadd(s, vexp(vsub(vload(x + j), mv)));
    if (tail) s = vadd(s, vexp(vsub(vload_part(x + full, tail, -INFINITY), mv)));
    return logf(vhsum(s)) - (xt - m);
}

/* ------------------------------------------------------------------------------------ */
/* AdamW: the portable expression, operation for operation (no fused multiply-adds), so
 * every path updates to the same bits */

static void SIMD_FN(adamw)(float *restrict p, float *restrict m, float *restrict v,
                           const float *restrict g, size_t n, const simd_adamw_consts *k)
{
    const vf b1 = vset1(k->b1), b2 = vset1(k->b2), omb1 = vset1(k->omb1),
             omb2 = vset1(k->omb2), step = vset1(k->step_size), ic2 = vset1(k->inv_sqrt_c2),
             eps = vset1(k->eps), decay = vset1(k->decay), gs = vset1(k->grad_scale);
    size_t i = 0;
    for (; i + VL <= n; i += VL) {
        vf gi = vmul(vload(g + i), gs);
        vf mi = vadd(vmul(b1, vload(m + i)), vmul(omb1, gi));
        vf vi = vadd(vmul(b2, vload(v + i)), vmul(vmul(omb2, gi), gi));
        vstore(m + i, mi);
        vstore(v + i, vi);
        vf pi = vload(p + i);
        vf upd = vadd(vdiv(vmul(step, mi), vadd(vmul(vsqrt(vi), ic2), eps)), vmul(decay, pi));
        vstore(p + i, vsub(pi, upd));
    }
    if (i < n) simd_kernels_portable.adamw(p + i, m + i, v + i, g + i, n - i, k);
}

/* ------------------------------------------------------------------------------------ */
/* unscale and the squared norm */

static int SIMD_FN(unscale)(float *restrict dst, const float *restrict src, size_t n,
                            float inv_scale, int accumulate)
{
    const vf s = vset1(inv_scale);
    int bad = 0;
    size_t i = 0;
    if (accumulate)
        for (; i + VL <= n; i += VL) {
            vf x = vload(src + i);
            bad |= vnonfinite(x);
            vstore(dst + i, vadd(vload(dst + i), vmul(x, s)));
        }
    else
        for (; i + VL <= n; i += VL) {
            vf x = vload(src + i);
            bad |= vnonfinite(x);
            vstore(dst + i, vmul(x, s));
        }
    if (i < n) bad |= simd_kernels_portable.unscale(dst + i, src + i, n - i, inv_scale,
                                                    accumulate);
    return bad;
}

static double SIMD_FN(sumsq)(const float *d, size_t n)
{
    vd a0 = vdzero(), a1 = vdzero(), a2 = vdzero(), a3 = vdzero();
    size_t i = 0;
    for (; i + 2 * VL <= n; i += 2 * VL) {
        vsumsq_acc(&a0, &a1, vload(d + i));
        vsumsq_acc(&a2, &a3, vload(d + i + VL));
    }
    double s = vdhsum(a0) + vdhsum(a1) + vdhsum(a2) + vdhsum(a3);
    for (; i < n; i++) s += (double)d[i] * (double)d[i];
    return s;
}

/* ------------------------------------------------------------------------------------ */
/* FP16 and BF16 */

static void SIMD_FN(half_from_float)(uint16_t *restrict dst, const float *restrict src,
                                     size_t n)
{
    size_t i = 0;
    for (; i + VL <= n; i += VL) vcvt_half_store(dst + i, vload(src + i));
    if (i < n) simd_kernels_portable.half_from_float(dst + i, src + i, n - i);
}

static void SIMD_FN(half_to_float)(float *restrict dst, const uint16_t *restrict src,
                                   size_t n)
{
    size_t i = 0;
    for (; i + VL <= n; i += VL) vstore(dst + i, vcvt_half_load(src + i));
    if (i < n) simd_kernels_portable.half_to_float(dst + i, src + i, n - i);
}

/* As the portable version: round to nearest even by integer addition, NaN made quiet */
static void SIMD_FN(bf16_from_float)(uint16_t *restrict dst, const float *restrict src,
                                     size_t n)
{
    const vi abs_mask = vi_set1(0x7fffffff), inf = vi_set1(0x7f800000),
             half_ulp = vi_set1(0x7fff), one = vi_set1(1), quiet = vi_set1(0x0040);
    size_t i = 0;
    for (; i + VL <= n; i += VL) {
        vi u = vcast_i(vload(src + i));
        vi rounded = vi_srli(vi_add(u, vi_add(half_ulp, vi_and(vi_srli(u, 16), one))), 16);
        vmask nan = vi_gt(vi_and(u, abs_mask), inf);
        vi qnan = vi_or(vi_srli(u, 16), quiet);
        vbf16_store(dst + i, vi_blend(nan, rounded, qnan));
    }
    if (i < n) simd_kernels_portable.bf16_from_float(dst + i, src + i, n - i);
}

/* bf16_from_float then bf16_to_float in one pass, src to dst (or in place): the rounding
 * kept in the float's top 16 bits */
static void SIMD_FN(bf16_round_to)(float *dst, const float *src, size_t n)
{
    const vi abs_mask = vi_set1(0x7fffffff), inf = vi_set1(0x7f800000),
             half_ulp = vi_set1(0x7fff), one = vi_set1(1), top = vi_set1((int)0xffff0000u),
             quiet = vi_set1(0x00400000);
    size_t i = 0;
    for (; i + VL <= n; i += VL) {
        vi u = vcast_i(vload(src + i));
        vi rounded = vi_and(vi_add(u, vi_add(half_ulp, vi_and(vi_srli(u, 16), one))), top);
        vmask nan = vi_gt(vi_and(u, abs_mask), inf);
        vi qnan = vi_and(vi_or(u, quiet), top);
        vstore(dst + i, vcast_f(vi_blend(nan, rounded, qnan)));
    }
    if (i < n) simd_kernels_portable.bf16_round_to(dst + i, src + i, n - i);
}

static void SIMD_FN(bf16_round)(float *x, size_t n) { SIMD_FN(bf16_round_to)(x, x, n); }

static void SIMD_FN(bf16_to_float)(float *restrict dst, const uint16_t *restrict src,
                                   size_t n)
{
    size_t i = 0;
    for (; i + VL <= n; i += VL) vstore(dst + i, vbf16_load(src + i));
    if (i < n) simd_kernels_portable.bf16_to_float(dst + i, src + i, n - i);
}

#include "simd_tile_x86.h" /* gemm_tile */

const simd_kernels SIMD_TABLE = {
    .name = SIMD_NAME,
    .add = SIMD_FN(add),
    .acc = SIMD_FN(acc),
    .ln_fwd_row = SIMD_FN(ln_fwd_row),
    .ln_bwd_row = SIMD_FN(ln_bwd_row),
    .ln_wb_cols = SIMD_FN(ln_wb_cols),
    .colsum = SIMD_FN(colsum),
    .softmax_row = SIMD_FN(softmax_row),
    .softmax_bwd_row = SIMD_FN(softmax_bwd_row),
    .softmax_row_lse = SIMD_FN(softmax_row_lse),
    .tile_rows = TILE_MR,
    .transpose = SIMD_FN(transpose),
    .gemm_tile = SIMD_FN(gemm_tile),
    .gelu_fwd = SIMD_FN(gelu_fwd),
    .gelu_bwd = SIMD_FN(gelu_bwd),
    .gelu_bwd_fwd = SIMD_FN(gelu_bwd_fwd),
    .xent_row = SIMD_FN(xent_row),
    .adamw = SIMD_FN(adamw),
    .unscale = SIMD_FN(unscale),
    .sumsq = SIMD_FN(sumsq),
    .half_from_float = SIMD_FN(half_from_float),
    .half_to_float = SIMD_FN(half_to_float),
    .bf16_from_float = SIMD_FN(bf16_from_float),
    .bf16_to_float = SIMD_FN(bf16_to_float),
    .bf16_round = SIMD_FN(bf16_round),
    .bf16_round_to = SIMD_FN(bf16_round_to),
};
