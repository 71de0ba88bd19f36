/* h5lock — one process-wide mutex around HDF5. The HDF5 library as packaged is not
 * thread-safe, and gentrain calls it from the loader thread (batches) and the main
 * thread (setup, model saves). Every public function in io/ that touches HDF5 holds
 * this lock for the duration of its HDF5 calls, so callers need no care. */
#ifndef GT_H5LOCK_H
#define GT_H5LOCK_H

void h5lock_acquire(void);
void h5lock_release(void);

#endif
