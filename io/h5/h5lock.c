/* h5lock — see h5lock.h. */
#include "h5lock.h"

#include <hdf5.h>
#include <pthread.h>

/* Recursive, so an io function may call another public io function while holding it. */
static pthread_mutex_t g_lock;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void lock_init(void)
{
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&g_lock, &a);
    pthread_mutexattr_destroy(&a);
}

void h5lock_acquire(void)
{
    pthread_once(&g_once, lock_init);
    pthread_mutex_lock(&g_lock);
    /* We report HDF5 failures ourselves, in one line naming the file. HDF5's own stack
     * dump is off. The setting is per thread in thread-safe HDF5 builds, so it is
     * (cheaply) renewed on every acquire rather than once. */
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
}

void h5lock_release(void)
{
    pthread_mutex_unlock(&g_lock);
}
