/* offload_none — offload.h and gpu_model.h for a gentrain built without CUDA: there is
 * never a GPU (nor NCCL: tp_comm_none.c). */
#include "gpu_model.h"
#include "offload.h"

#include <stdio.h>

#define NO_CUDA "this gentrain was built without CUDA: configure --with-cuda"

int offload_built(void) { return 0; }

void offload_build(char *buf, size_t cap)
{
    snprintf(buf, cap, "not built (configure --with-cuda)");
}

int offload_device_count(char *why, size_t cap)
{
    snprintf(why, cap, NO_CUDA);
    return 0;
}

int offload_use_device(int index, char *name, size_t name_cap, char *why, size_t cap)
{
    (void)index;
    if (name_cap) name[0] = '\0';
    snprintf(why, cap, NO_CUDA);
    return -1;
}

int offload_device_id(char *id, size_t cap, char *why, size_t why_cap)
{
    if (cap) id[0] = '\0';
    snprintf(why, why_cap, NO_CUDA);
    return -1;
}

/* The GPU model (gpu_model.h): never made without CUDA; the trainer asks for it only
 * after offload_use_device succeeded, so these answers are for safety. */
size_t gpu_model_param_count(const gpu_model_shape *s)
{
    (void)s;
    return 0;
}

size_t gpu_model_device_bytes(const gpu_model_shape *s, int B, int T)
{
    (void)s, (void)B, (void)T;
    return 0;
}

gpu_model *gpu_model_create(const gpu_model_shape *s, int B, int T, char *why, size_t cap)
{
    (void)s, (void)B, (void)T;
    snprintf(why, cap, NO_CUDA);
    return NULL;
}

void gpu_model_free(gpu_model *g) { (void)g; }

int gpu_model_check_layout(gpu_model *g, const gpu_model_tensor *t, int n, char *why,
                           size_t cap)
{
    (void)g, (void)t, (void)n;
    snprintf(why, cap, NO_CUDA);
    return -1;
}

uint16_t *gpu_model_param_staging(gpu_model *g)
{
    (void)g;
    return NULL;
}

int gpu_model_upload_params(gpu_model *g, char *why, size_t cap)
{
    (void)g;
    snprintf(why, cap, NO_CUDA);
    return -1;
}

int gpu_model_step(gpu_model *g, const int32_t *inputs, const int32_t *targets, int B,
                   int T, float loss_scale, float *loss, char *why, size_t cap)
{
    (void)g, (void)inputs, (void)targets, (void)B, (void)T, (void)loss_scale, (void)loss;
    snprintf(why, cap, NO_CUDA);
    return -1;
}

int gpu_model_step_micro(gpu_model *g, const int32_t *inputs, const int32_t *targets, int B,
                         int T, float loss_scale, int first, int last, float sum_scale,
                         float *loss, char *why, size_t cap)
{
    (void)g, (void)inputs, (void)targets, (void)B, (void)T, (void)loss_scale, (void)first;
    (void)last, (void)sum_scale, (void)loss;
    snprintf(why, cap, NO_CUDA);
    return -1;
}

int gpu_model_loss(gpu_model *g, const int32_t *inputs, const int32_t *targets, int B,
                   int T, float *loss, char *why, size_t cap)
{
    (void)g, (void)inputs, (void)targets, (void)B, (void)T, (void)loss;
    snprintf(why, cap, NO_CUDA);
    return -1;
}

const uint16_t *gpu_model_grads(gpu_model *g, char *why, size_t cap)
{
    (void)g;
    snprintf(why, cap, NO_CUDA);
    return NULL;
}

int gpu_model_set_attention_row_blocks(gpu_model *g, int nb, char *why, size_t cap)
{
    (void)g, (void)nb;
    snprintf(why, cap, NO_CUDA);
    return -1;
}

const char *gpu_model_phase_name(int phase)
{
    (void)phase;
    return "?";
}

int gpu_model_profile(gpu_model *g, int on, char *why, size_t cap)
{
    (void)g, (void)on;
    snprintf(why, cap, NO_CUDA);
    return -1;
}

int gpu_model_profile_read(gpu_model *g, double *ms, char *why, size_t cap)
{
    (void)g, (void)ms;
    snprintf(why, cap, NO_CUDA);
    return -1;
}

int gpu_model_grad_parts(const gpu_model *g)
{
    (void)g;
    return 0;
}

const uint16_t *gpu_model_grads_part(gpu_model *g, int k, size_t *lo, size_t *hi, char *why,
                                     size_t cap)
{
    (void)g, (void)k;
    if (lo && hi) *lo = *hi = 0;
    snprintf(why, cap, NO_CUDA);
    return NULL;
}

int gpu_model_sync(gpu_model *g, char *why, size_t cap)
{
    (void)g;
    snprintf(why, cap, NO_CUDA);
    return -1;
}

size_t gpu_model_blocks_device_bytes(const gpu_model_shape *s, int B, int T)
{
    (void)s, (void)B, (void)T;
    return 0;
}

gpu_model *gpu_model_create_blocks(const gpu_model_shape *s, int B, int T, char *why,
                                   size_t cap)
{
    (void)s, (void)B, (void)T;
    snprintf(why, cap, NO_CUDA);
    return NULL;
}

int gpu_model_blocks_forward(gpu_model *g, const float *x0, float *xL, int B, int T,
                             char *why, size_t cap)
{
    (void)g, (void)x0, (void)xL, (void)B, (void)T;
    snprintf(why, cap, NO_CUDA);
    return -1;
}

int gpu_model_blocks_backward(gpu_model *g, const float *dxL, float *dx0, int B, int T,
                              char *why, size_t cap)
{
    (void)g, (void)dxL, (void)dx0, (void)B, (void)T;
    snprintf(why, cap, NO_CUDA);
    return -1;
}

size_t gpu_model_shard_param_count(const gpu_model_shape *s, int tp_size)
{
    (void)s, (void)tp_size;
    return 0;
}

size_t gpu_model_shard_blocks_device_bytes(const gpu_model_shape *s, int B, int T,
                                           const gpu_model_tp *tp)
{
    (void)s, (void)B, (void)T, (void)tp;
    return 0;
}

gpu_model *gpu_model_create_shard_blocks(const gpu_model_shape *s, int B, int T,
                                         const gpu_model_tp *tp, char *why, size_t cap)
{
    (void)s, (void)B, (void)T, (void)tp;
    snprintf(why, cap, NO_CUDA);
    return NULL;
}

size_t gpu_model_stage_device_bytes(const gpu_model_shape *s, int B, int T,
                                    const struct gpu_model_tp *tp, int embed, int head)
{
    (void)s, (void)B, (void)T, (void)tp, (void)embed, (void)head;
    return 0;
}

gpu_model *gpu_model_create_stage(const gpu_model_shape *s, int B, int T,
                                  const struct gpu_model_tp *tp, int embed, int head,
                                  char *why, size_t cap)
{
    (void)s, (void)B, (void)T, (void)tp, (void)embed, (void)head;
    snprintf(why, cap, NO_CUDA);
    return NULL;
}

int gpu_model_stage_forward(gpu_model *g, const int32_t *inputs, const float *x0,
                            const int32_t *targets, float loss_scale, float *xL, float *loss,
                            int B, int T, char *why, size_t cap)
{
    (void)g, (void)inputs, (void)x0, (void)targets, (void)loss_scale, (void)xL, (void)loss;
    (void)B, (void)T;
    snprintf(why, cap, NO_CUDA);
    return -1;
}

int gpu_model_stage_backward(gpu_model *g, const float *dxL, float *dx0, int B, int T,
                             char *why, size_t cap)
{
    (void)g, (void)dxL, (void)dx0, (void)B, (void)T;
    snprintf(why, cap, NO_CUDA);
    return -1;
}
