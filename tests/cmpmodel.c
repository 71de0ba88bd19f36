/* cmpmodel — compares the parameters of two gentrain model files, for the shell tests.
 *
 *   cmpmodel A.h5 B.h5 [TOL]
 *
 * Loads both files (same shape required) and prints the largest relative difference
 * of a tensor, norm-wise,
 *     ||a - b|| / max(||a||, ||b||)        (0 when both are zero)
 * naming that tensor, and the largest absolute difference of one parameter. Norm-wise,
 * because element-wise ratios are meaningless for parameters that are near zero and
 * move by rounding-sized amounts. Exit status: 0 when the largest relative difference
 * is <= TOL (default 1e-5), 1 when it is larger, 2 when a file cannot be read or the
 * shapes differ. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../io/h5model.h"
#include "../src/kernels_cpu.h"
#include "../src/model.h"

static int load(const char *path, gpt_model *m, gpt_shape *shape)
{
    int64_t step = 0;
    if (h5model_read_meta(path, shape, &step, NULL) != 0) return -1;
    if (gpt_create(m, *shape, &backend_cpu, 1) != 0) return -1;
    if (h5model_load_params(path, m) != 0) {
        gpt_free(m);
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 3 || argc > 4) {
        fprintf(stderr, "usage: cmpmodel A.h5 B.h5 [TOL]\n");
        return 2;
    }
    double tol = argc == 4 ? atof(argv[3]) : 1e-5;
    gpt_model a, b;
    gpt_shape sa, sb;
    if (load(argv[1], &a, &sa) != 0) return 2;
    if (load(argv[2], &b, &sb) != 0) {
        gpt_free(&a);
        return 2;
    }
    if (memcmp(&sa, &sb, sizeof sa) != 0 || a.n_params != b.n_params) {
        fprintf(stderr, "cmpmodel: %s and %s have different shapes\n", argv[1], argv[2]);
        gpt_free(&a);
        gpt_free(&b);
        return 2;
    }
    double worst_rel = 0.0, worst_abs = 0.0;
    int worst_t = 0;
    for (int t = 0; t < a.n_info; t++) {
        const gpt_param_info *p = &a.info[t];
        const float *x = a.params + p->offset, *y = b.params + p->offset;
        double dd = 0.0, xx = 0.0, yy = 0.0, abs_ = 0.0;
        for (size_t i = 0; i < p->numel; i++) {
            double d = fabs((double)x[i] - (double)y[i]);
            if (isnan(d)) d = INFINITY; /* a NaN on either side is the worst difference */
            dd += d * d;
            xx += (double)x[i] * x[i];
            yy += (double)y[i] * y[i];
            if (d > abs_) abs_ = d;
        }
        double scale = sqrt(fmax(xx, yy));
        double rel = dd == 0.0 ? 0.0 : scale > 0.0 ? sqrt(dd) / scale : INFINITY;
        if (t == 0 || rel > worst_rel) {
            worst_rel = rel;
            worst_t = t;
        }
        if (abs_ > worst_abs) worst_abs = abs_;
    }
    printf("cmpmodel: %zu parameters in %d tensors: max relative difference %.3e (in %s), "
           "max absolute difference %.3e; tolerance %.1e\n",
           a.n_params, a.n_info, worst_rel, a.info[worst_t].name, worst_abs, tol);
    gpt_free(&a);
    gpt_free(&b);
    return worst_rel <= tol ? 0 : 1;
}
