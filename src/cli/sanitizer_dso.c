/* sanitizer_dso — in a build with AddressSanitizer only: the gentrain programs never
 * unload a shared object, so a leak report can still name the library that made the
 * allocation.
 *
 * Why: Open MPI loads its components (mca_*.so) with dlopen and closes them in
 * MPI_Finalize, before LeakSanitizer reports at exit. A frame inside a closed component
 * prints as "<unknown module>", so no suppression can tell Open MPI's own start-up
 * leaks from gentrain's. Defining dlclose in the program takes precedence over the C
 * library's for every library the program loads (the program comes first in symbol
 * lookup), and a no-op keeps each object mapped until the process ends. With the
 * component's name in frame 1, tests/lsan.supp matches those leaks under ASan's fast
 * unwinder; without this the tests needed the slow, full unwinder for every rank
 * (about 1.7 s of CPU per rank and run).
 *
 * Contract: in a build without AddressSanitizer this file defines nothing and the C
 * library's dlclose is used. In a build with it, dlclose(handle) returns 0 and does
 * nothing; no gentrain code depends on an object being unloaded (the one caller, the
 * CUDA driver probe of offload/cuda_presence.h, only releases its handle). Linked into
 * each gentrain program (Makefile.am), not put in the library: the linker takes an
 * archive's member only for a symbol an object already asks for, and a program need
 * not ask for dlclose. */
#include <dlfcn.h>

/* gcc says -fsanitize=address with __SANITIZE_ADDRESS__, clang with __has_feature. */
#if defined(__SANITIZE_ADDRESS__)
#define SANITIZER_DSO_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SANITIZER_DSO_ASAN 1
#endif
#endif

#ifdef SANITIZER_DSO_ASAN
int dlclose(void *handle)
{
    (void)handle;
    return 0;
}
#else
/* ISO C wants at least one declaration in a translation unit. */
typedef int sanitizer_dso_unused;
#endif
