/* loader — a background thread that reads training batches ahead of the step.
 *
 * The thread owns the training data (an h5set: one file or several) while it runs and
 * fills a ring of `depth` batch buffers. Data parallel: rank r of R ranks takes, for its
 * n-th batch (n = 0, 1, ...), samples
 *     g = first_sample + n*B*R + r*B + b   (b < B)
 * of the window order (windows.h), so the R ranks together read as their n-th batch
 * exactly the batch of B*R samples a single process with batch size B*R would (R = 1,
 * r = 0: samples first_sample + n*B .. + B-1). Each rank reads only its own samples,
 * through its own `data`. first_sample is the global data cursor (a resumed run's
 * checkpoint records it: ckpt.h), so a run continues the sample order where another
 * stopped whatever either's B and R.
 * loader_next hands the step its batch; the buffer stays valid until the next call.
 * Memory: about depth * 2 * B * T int32 (inputs and targets), whatever the dataset
 * size. A read error in the thread is reported there and returned by the next
 * loader_next, after the batches read before it. */
#ifndef GT_LOADER_H
#define GT_LOADER_H

#include <stdint.h>

#include "h5set.h"
#include "windows.h"

typedef struct loader loader;

/* Starts the thread at global sample first_sample (>= 0), for rank `rank` of `world`
 * (0 <= rank < world).
 * `data` (settled, h5set.h) and w's file records must stay until loader_stop; each
 * window is read from the file windows_locate names, so a rank opens only the files
 * its samples are in. Fails (reported) when the dataset has fewer
 * windows than B x world: one step would read a window twice. */
loader *loader_start(h5set *data, const token_windows *w, uint64_t seed, int B, int T,
                     int64_t vocab_size, int64_t first_sample, int depth, int rank,
                     int world);
/* Waits for the next batch. inputs/targets point at [B,T] int32 each; wait_s gets the
 * seconds spent waiting. Returns 0, or -1 if the thread failed (already reported). */
int loader_next(loader *l, const int32_t **inputs, const int32_t **targets,
                double *wait_s);
/* Stops and joins the thread, frees the ring. */
void loader_stop(loader *l);

#endif
