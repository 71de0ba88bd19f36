/* fuzz_tokens — the token-dataset reader (io/h5/h5data.c) on an arbitrary HDF5 file image:
 * open /train/tokens, read its vocab_size, check every token's range and read windows
 * at the start, the middle and the end, as training does. */
#include "h5data.h"
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_setup();
    h5io_set_memory_image(data, size);
    h5data *d = h5data_open("fuzz.h5", "/train/tokens");
    if (d) {
        int64_t vocab = h5data_vocab_attr(d);
        if (vocab <= 0 || vocab > 65536) vocab = 65536;
        if (h5data_check_range(d, vocab) == 0) {
            const int64_t rows = h5data_rows(d), len = h5data_row_len(d);
            int32_t buf[65];
            const int64_t n = len < 65 ? len : 65;
            for (int k = 0; k < 3 && rows > 0 && n > 0; k++) {
                const int64_t row = k * (rows - 1) / 2, col = k * (len - n) / 2;
                (void)h5data_read(d, row, col, n, buf, vocab);
            }
        }
        h5data_close(d);
    }
    h5io_set_memory_image(NULL, 0);
    fuzz_done();
    return 0;
}
