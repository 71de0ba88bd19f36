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

#include "h5model.h"
#include "model.h"
#include "tensors.h"
#include "util.h"

/* A model file read by the whole-model table of its shape: the table and its params
 * (malloc'd). */
typedef struct loaded {
    gpt_shape shape;
    gt_tensor_table tab;
    float *params;
} loaded;

static void unload(loaded *f)
{
    gt_tensor_table_free(&f->tab);
    free(f->params);
    f->params = NULL;
}

static int load(const char *path, loaded *f)
{
    int64_t step = 0;
    memset(f, 0, sizeof *f);
    if (h5model_read_meta(path, &f->shape, &step, NULL) != 0 ||
        gpt_shape_tensor_table(f->shape, &f->tab) != 0)
        return -1;
    if (!(f->params = gt_malloc(f->tab.total * sizeof(float), "parameters")) ||
        h5model_load_params(path, f->shape, &f->tab, f->params) != 0) {
        unload(f);
        return -1;
    }
    return 0;
}

/* ||x - y|| / max(||x||, ||y||) over n floats (0 when equal), and in *abs_max the
 * largest |x[i] - y[i]|; a NaN on either side is the worst difference. */
static double rel_diff(const float *x, const float *y, size_t n, double *abs_max)
{
    double dd = 0.0, xx = 0.0, yy = 0.0;
    *abs_max = 0.0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)x[i] - (double)y[i]);
        if (isnan(d)) d = INFINITY;
        dd += d * d;
        xx += (double)x[i] * x[i];
        yy += (double)y[i] * y[i];
        if (d > *abs_max) *abs_max = d;
    }
    double scale = sqrt(fmax(xx, yy));
    return dd == 0.0 ? 0.0 : scale > 0.0 ? sqrt(dd) / scale : INFINITY;
}

int main(int argc, char **argv)
{
    if (argc < 3 || argc > 4) {
        fprintf(stderr, "usage: cmpmodel A.h5 B.h5 [TOL]\n");
        return 2;
    }
    double tol = argc == 4 ? atof(argv[3]) : 1e-5;
    loaded a, b;
    if (load(argv[1], &a) != 0) return 2;
    if (load(argv[2], &b) != 0) {
        unload(&a);
        return 2;
    }
    if (memcmp(&a.shape, &b.shape, sizeof a.shape) != 0 || a.tab.total != b.tab.total) {
        fprintf(stderr, "cmpmodel: %s and %s have different shapes\n", argv[1], argv[2]);
        unload(&a);
        unload(&b);
        return 2;
    }
    double worst_rel = 0.0, worst_abs = 0.0;
    int worst_t = 0;
    for (int t = 0; t < a.tab.count; t++) {
        const gt_tensor *p = &a.tab.tensors[t];
        double abs_;
        double rel = rel_diff(a.params + p->offset, b.params + p->offset, p->numel, &abs_);
        if (t == 0 || rel > worst_rel) {
            worst_rel = rel;
            worst_t = t;
        }
        if (abs_ > worst_abs) worst_abs = abs_;
    }
    printf("cmpmodel: %zu parameters in %d tensors: max relative difference %.3e (in %s), "
           "max absolute difference %.3e; tolerance %.1e\n",
           a.tab.total, a.tab.count, worst_rel, a.tab.tensors[worst_t].name, worst_abs, tol);
    unload(&a);
    unload(&b);
    return worst_rel <= tol ? 0 : 1;
}
