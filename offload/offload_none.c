/* offload_none — offload.h for a gentrain built without CUDA: there is never a GPU. */
#include "offload.h"

#include <stdio.h>

int offload_built(void) { return 0; }

int offload_device_count(char *why, size_t cap)
{
    snprintf(why, cap, "this gentrain was built without CUDA: configure --with-cuda");
    return 0;
}

int offload_use_device(int index, char *name, size_t name_cap, char *why, size_t cap)
{
    (void)index;
    if (name_cap) name[0] = '\0';
    snprintf(why, cap, "this gentrain was built without CUDA: configure --with-cuda");
    return -1;
}
