/* fuzz_ckpt — the checkpoint reader (io/ckpt/ckpt.c) on an arbitrary HDF5 file image,
 * loaded into the model shape of the seed corpus (vocab 256, block 8, 1 layer, 1 head,
 * n_embd 8: tests/fuzz/seeds.sh): format, version, shape, every tensor, the optimizer
 * moments, the metadata and the checksum are checked before anything is taken. */
#include <stdlib.h>

#include "ckpt.h"
#include "backend.h"
#include "model.h"
#include "optim.h"
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_setup();
    static gpt_model m;
    static adamw_state opt;
    static gt_tensor_table tab;
    static int ready;
    if (!ready) {
        const gpt_shape s = {256, 8, 1, 1, 8};
        if (gpt_create(&m, s, &backend_cpu, 1) != 0 || adamw_init(&opt, m.n_params) != 0 ||
            gpt_tensor_table(&m, &tab) != 0)
            abort();
        ready = 1;
    }
    h5io_set_memory_image(data, size);
    ckpt_meta meta;
    ckpt_async as = {0};
    ckpt_state st = {.shape = m.shape, .table = &tab, .params = m.params, .m = opt.m,
                     .v = opt.v, .adam_t = opt.t, .async = &as};
    if (ckpt_load("fuzz.h5", &st, &meta) == 0) ckpt_meta_free(&meta);
    ckpt_async_free(&as);
    h5io_set_memory_image(NULL, 0);
    fuzz_done();
    return 0;
}
