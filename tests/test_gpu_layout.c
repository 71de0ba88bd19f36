/* test_gpu_layout — the GPU side refuses a parameter layout that differs from its own in
 * any tensor's name, shape or offset, not only in the total (gpu_model_check_layout).
 *
 * One source, two programs: test_gpu_layout_emu links the real GPU code
 * (offload/gpu_model.cu) on the CPU emulation, test_gpu_layout_fake the test double
 * tests/fake_gpu.c (TEST_FAKE_GPU). For a whole model, a blocks model and a shard of
 * tp = 2, the host's table of src/layout/ (gpt_layout_make) is accepted as it is, and
 * refused, naming the tensor, after each of: two tensors of one size exchanged in
 * table order (ln_1.weight and ln_1.bias; mlp.c_fc.weight and mlp.c_proj.weight, which
 * have the same size but not the same shape), the offsets of two same-size tensors of
 * different kinds exchanged (attn.c_proj.bias and ln_2.weight), a transposed shape, a
 * tensor missing. The double also refuses an upload before an accepted check, so a
 * trainer path that skips the check fails its tests. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_model.h" /* defines: gpu_model_check_layout, gpu_model_tensor */
#include "layout.h"    /* defines: gpt_layout_make, the GPT_LN1_W... block order */
#include "testutil.h"

enum { V = 64, MAXT = 16, L = 2, NH = 2, C = 16, B = 1, T = 8 };

/* Sums nothing: a shard's hook is needed to make one, never called here. */
static void no_sum(void *ctx, float *buf, size_t n) { (void)ctx, (void)buf, (void)n; }

/* lay's table as the trainer hands it over (src/engine/device_step.c, device_step_check_layout). */
static gpu_model_tensor *to_tensors(const gpt_layout *lay)
{
    gpu_model_tensor *t = calloc((size_t)lay->n_info, sizeof *t);
    if (!t) {
        fprintf(stderr, "test_gpu_layout: out of memory\n");
        exit(99);
    }
    for (int i = 0; i < lay->n_info; i++) {
        t[i].name = lay->info[i].name;
        t[i].ndim = lay->info[i].ndim;
        t[i].dims[0] = lay->info[i].shape[0];
        t[i].dims[1] = lay->info[i].shape[1];
        t[i].offset = lay->info[i].offset;
    }
    return t;
}

/* Whether g refuses t[n] with a reason that names `tensor`. */
static int refused_naming(gpu_model *g, const gpu_model_tensor *t, int n, const char *tensor)
{
    char why[512] = "";
    const int rc = gpu_model_check_layout(g, t, n, why, sizeof why);
    printf("    %s\n", why);
    return rc == -1 && strstr(why, tensor) != NULL;
}

static void swap_entries(gpu_model_tensor *t, int i, int j)
{
    const gpu_model_tensor a = t[i];
    t[i] = t[j];
    t[j] = a;
    const size_t o = t[i].offset; /* the places stay in order: only what is there moves */
    t[i].offset = t[j].offset;
    t[j].offset = o;
}

static void check_kind(const char *kind, int tp)
{
    const gpu_model_shape s = {V, MAXT, L, NH, C};
    const gpt_shape gs = {V, MAXT, L, NH, C};
    const gpt_part part = {.tp_size = tp, .layer0 = 0, .n_layers = L, .has_embed = 1,
                           .has_head = 1};
    char why[512] = "";
    gpu_model *g;
    if (strcmp(kind, "whole") == 0) {
        g = gpu_model_create(&s, B, T, why, sizeof why);
    } else if (tp == 1) {
        g = gpu_model_create_blocks(&s, B, T, why, sizeof why);
    } else {
        const gpu_model_tp shard = {tp, 1, NULL, NULL, no_sum, NULL, NULL};
        g = gpu_model_create_shard_blocks(&s, B, T, &shard, why, sizeof why);
    }
    TU_CHECK(g != NULL, "%s: the model is made (%s)", kind, why);
    gpt_layout lay;
    TU_CHECK(gpt_layout_make(gs, part, &lay) == 0, "%s: the host's layout", kind);
    if (!g || !lay.info) {
        free(lay.info);
        gpu_model_free(g);
        return;
    }
    const int n = lay.n_info;
    gpu_model_tensor *t = to_tensors(&lay);
    const int b1 = lay.i_first + GPT_PER_LAYER, b0 = lay.i_first; /* blocks 1 and 0 */

#ifdef TEST_FAKE_GPU
    TU_CHECK(gpu_model_upload_params(g, why, sizeof why) == -1 &&
                 strstr(why, "gpu_model_check_layout"),
             "%s: an upload before the layout was checked is refused (%s)", kind, why);
#endif
    why[0] = '\0';
    TU_CHECK(gpu_model_check_layout(g, t, n, why, sizeof why) == 0,
             "%s: the host's layout (%d tensors, %zu parameters) is accepted%s%s", kind, n,
             lay.n_params, why[0] ? ": " : "", why);

    swap_entries(t, b1 + GPT_LN1_W, b1 + GPT_LN1_B);
    TU_CHECK(refused_naming(g, t, n, "transformer.h.1.ln_1.bias"),
             "%s: ln_1.weight and ln_1.bias of block 1 swapped: refused, naming the tensor",
             kind);
    swap_entries(t, b1 + GPT_LN1_W, b1 + GPT_LN1_B);

    swap_entries(t, b0 + GPT_FC_W, b0 + GPT_FCPROJ_W);
    TU_CHECK(refused_naming(g, t, n, "transformer.h.0.mlp.c_proj.weight"),
             "%s: mlp.c_fc.weight and mlp.c_proj.weight (same size) swapped: refused", kind);
    swap_entries(t, b0 + GPT_FC_W, b0 + GPT_FCPROJ_W);

    size_t o = t[b0 + GPT_ATTPROJ_B].offset;
    t[b0 + GPT_ATTPROJ_B].offset = t[b0 + GPT_LN2_W].offset;
    t[b0 + GPT_LN2_W].offset = o;
    TU_CHECK(refused_naming(g, t, n, b0 + GPT_ATTPROJ_B < b0 + GPT_LN2_W
                                         ? "transformer.h.0.attn.c_proj.bias"
                                         : "transformer.h.0.ln_2.weight"),
             "%s: the offsets of attn.c_proj.bias and ln_2.weight exchanged: refused", kind);
    t[b0 + GPT_LN2_W].offset = t[b0 + GPT_ATTPROJ_B].offset;
    t[b0 + GPT_ATTPROJ_B].offset = o;

    const int64_t d0 = t[b0 + GPT_FCPROJ_W].dims[0];
    t[b0 + GPT_FCPROJ_W].dims[0] = t[b0 + GPT_FCPROJ_W].dims[1];
    t[b0 + GPT_FCPROJ_W].dims[1] = d0;
    TU_CHECK(refused_naming(g, t, n, "transformer.h.0.mlp.c_proj.weight"),
             "%s: mlp.c_proj.weight transposed: refused", kind);
    t[b0 + GPT_FCPROJ_W].dims[1] = t[b0 + GPT_FCPROJ_W].dims[0];
    t[b0 + GPT_FCPROJ_W].dims[0] = d0;

    TU_CHECK(refused_naming(g, t, n - 1, "tensors"), "%s: a tensor missing: refused", kind);
#ifdef TEST_FAKE_GPU
    TU_CHECK(gpu_model_upload_params(g, why, sizeof why) == -1,
             "%s: an upload after a refused layout is refused", kind);
#endif
    /* After every refusal, the table restored is accepted again: each case above
     * changed one thing and put it back. */
    why[0] = '\0';
    TU_CHECK(gpu_model_check_layout(g, t, n, why, sizeof why) == 0,
             "%s: the restored layout is accepted again%s%s", kind, why[0] ? ": " : "", why);
#ifdef TEST_FAKE_GPU
    TU_CHECK(gpu_model_upload_params(g, why, sizeof why) == 0,
             "%s: the upload after an accepted check goes through", kind);
#endif
    free(t);
    free(lay.info);
    gpu_model_free(g);
}

int main(void)
{
    check_kind("whole", 1);
    check_kind("blocks", 1);
    check_kind("shard of tp 2", 2);
    return tu_finish();
}
