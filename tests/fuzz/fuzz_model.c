/* fuzz_model — the model-file reader (io/h5/h5model.c) on an arbitrary HDF5 file image:
 * read the metadata, build a model of the shape it claims (within the fuzzer's memory:
 * shapes of more than 4M parameters are only created, not loaded) and load the
 * parameters, with their checksum and finiteness checks. */
#include <stdlib.h>

#include "h5model.h"
#include "backend.h"
#include "model.h"
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_setup();
    h5io_set_memory_image(data, size);
    gpt_shape s;
    int64_t step = 0;
    char *config = NULL;
    if (h5model_read_meta("fuzz.h5", &s, &step, &config) == 0) {
        /* the parameter count in double: the shape is the untrusted part */
        const double C = s.n_embd, params = (double)s.vocab_size * C + (double)s.block_size * C +
                                             12.0 * C * C * s.n_layer;
        gpt_model m;
        gt_tensor_table tab;
        if (params < 4e6 && gpt_create(&m, s, &backend_cpu, 1) == 0) {
            if (gpt_tensor_table(&m, &tab) == 0)
                (void)h5model_load_params("fuzz.h5", m.shape, &tab, m.params);
            gt_tensor_table_free(&tab);
            gpt_free(&m);
        }
    }
    free(config);
    h5io_set_memory_image(NULL, 0);
    fuzz_done();
    return 0;
}
