/* blas_core — see blas_core.h. */
#include "blas_core.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/sysmacros.h> /* major, minor */
#include <unistd.h>

#include <cblas.h> /* defines: openblas_get_corename (OpenBLAS only) */

#include "cpu_features.h" /* cpu_unbind_before_exec */
#include "util.h" /* defines: gt_warn */

/* Set by gentrain when it re-executes itself: the core it asked for, and the one the
 * library had chosen. A user's own OPENBLAS_CORETYPE comes without the first. */
#define ENV_SET "GENTRAIN_BLAS_CORE_SET"
#define ENV_WAS "GENTRAIN_BLAS_CORE_WAS"

static const struct {
    const char *name;
    enum cpu_isa level;
} core_levels[] = {
    {"Sandybridge", CPU_ISA_AVX},      {"Bulldozer", CPU_ISA_AVX},
    {"Piledriver", CPU_ISA_AVX},       {"Steamroller", CPU_ISA_AVX},
    {"Excavator", CPU_ISA_AVX2},       {"Haswell", CPU_ISA_AVX2},
    {"Zen", CPU_ISA_AVX2},             {"SkylakeX", CPU_ISA_AVX512},
    {"Cooperlake", CPU_ISA_AVX512_BF16}, {"SapphireRapids", CPU_ISA_AVX512_BF16},
};
/* Every other x86 core OpenBLAS names (Prescott, Core2, Nehalem, Atom, Barcelona, ...)
 * is SSE-only. */
static const char *const sse_cores[] = {"Katmai",   "Coppermine", "Northwood", "Prescott",
                                        "Banias",   "Atom",       "Core2",     "Penryn",
                                        "Dunnington", "Nehalem",  "Athlon",    "Opteron",
                                        "Opteron_SSE3", "Barcelona", "Nano",   "Bobcat"};

int blas_core_level(const char *corename)
{
    if (!corename) return -1;
    for (size_t i = 0; i < sizeof core_levels / sizeof core_levels[0]; i++)
        if (strcasecmp(corename, core_levels[i].name) == 0) return (int)core_levels[i].level;
    for (size_t i = 0; i < sizeof sse_cores / sizeof sse_cores[0]; i++)
        if (strcasecmp(corename, sse_cores[i]) == 0) return (int)CPU_ISA_GENERIC;
    return -1;
}

const char *blas_core_for_level(enum cpu_isa level)
{
    switch (level) {
    case CPU_ISA_AVX: return "Sandybridge";
    case CPU_ISA_AVX2: return "Haswell";
    case CPU_ISA_AVX512: return "SkylakeX";
    case CPU_ISA_AVX512_BF16: return "Cooperlake";
    case CPU_ISA_GENERIC: break;
    }
    return NULL;
}

#ifdef OPENBLAS_VERSION
const char *blas_core_name(void)
{
    const char *n = openblas_get_corename();
    return n && *n ? n : "unknown";
}
const char *blas_build_config(void)
{
    const char *c = openblas_get_config();
    return c && *c ? c : "unknown";
}
#else
const char *blas_core_name(void) { return "unknown"; }
const char *blas_build_config(void) { return "unknown"; }
#endif

static char summary[320];

#ifdef OPENBLAS_VERSION
/* 1 when /proc/self/exe is the file this code was loaded from, so executing it starts
 * gentrain again: not so when a loader (ld.so run by hand) or a tool (valgrind) runs
 * the program, where /proc/self/exe is that loader or tool (0). Compares the device and
 * inode /proc/self/maps gives the mapping that holds this function with those of
 * /proc/self/exe (which still answers for a file deleted since). -1 with errno set
 * when /proc cannot tell. */
static int exe_is_this_program(void)
{
    struct stat exe;
    if (stat("/proc/self/exe", &exe) != 0) return -1;
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f) return -1;
    const uintptr_t here = (uintptr_t)&exe_is_this_program;
    char line[4096];
    int same = 0;
    while (fgets(line, sizeof line, f)) {
        unsigned long long lo, hi, inode;
        unsigned dev_major, dev_minor;
        if (sscanf(line, "%llx-%llx %*s %*s %x:%x %llu", &lo, &hi, &dev_major, &dev_minor,
                   &inode) != 5)
            continue;
        if (here < lo || here >= hi) continue;
        same = inode == (unsigned long long)exe.st_ino &&
               dev_major == major(exe.st_dev) && dev_minor == minor(exe.st_dev);
        break;
    }
    fclose(f);
    return same;
}
#endif

static const char *level_name(int level)
{
    return level < 0 ? "ISA unknown" : cpu_isa_name((enum cpu_isa)level);
}

/* Builds the summary line for a run that goes on with the current core. */
static void describe(const char *why)
{
    const char *core = blas_core_name();
    snprintf(summary, sizeof summary, "OpenBLAS core %s (%s), %s; CPU: %s", core,
             level_name(blas_core_level(core)), why, cpu_isa_name(cpu_isa_level()));
}

const char *blas_core_summary(void)
{
    if (!summary[0]) describe("chosen by OpenBLAS");
    return summary;
}

void blas_core_fixup(char **argv)
{
#ifndef OPENBLAS_VERSION
    (void)argv;
    snprintf(summary, sizeof summary, "BLAS core unknown (not OpenBLAS); CPU: %s",
             cpu_isa_name(cpu_isa_level()));
#else
    const enum cpu_isa cpu = cpu_isa_level();
    const char *core = blas_core_name();
    const int have = blas_core_level(core);
    const char *best = blas_core_for_level(cpu);
    const char *user = getenv("OPENBLAS_CORETYPE");
    const char *mine = getenv(ENV_SET);
    const int ours = mine && user && strcasecmp(user, mine) == 0;
    const int user_set = user && *user && !ours;
    char why[200] = "chosen by OpenBLAS";

    if (ours) {
        const char *was = getenv(ENV_WAS);
        snprintf(why, sizeof why, "set by gentrain (OpenBLAS had chosen %s, %s)",
                 was ? was : "another core", level_name(blas_core_level(was)));
        if (have < (int)cpu && strcasecmp(mine, best ? best : "") == 0) {
            /* this library does not know the core we asked for: go on as it is */
            snprintf(why, sizeof why, "this OpenBLAS has no %s core, so its own choice "
                     "stays", best);
            describe(why);
            return;
        }
    }
    /* OpenBLAS ignores a name it does not know and chooses by itself */
    const int user_not_taken = user_set && strcasecmp(user, core) != 0;
    if (user_not_taken)
        snprintf(why, sizeof why, "chosen by OpenBLAS, which did not take "
                 "OPENBLAS_CORETYPE=%.40s", user);
    else if (user_set)
        snprintf(why, sizeof why, "set by OPENBLAS_CORETYPE");
    /* a core name this table does not know is newer than it: leave it be */
    if (have < 0 || have >= (int)cpu || !best || strcasecmp(core, best) == 0) {
        describe(why);
        return;
    }
    if (user_set) {
        if (user_not_taken)
            snprintf(why + strlen(why), sizeof why - strlen(why), " (this CPU could run %s)",
                     best);
        else
            snprintf(why, sizeof why, "set by OPENBLAS_CORETYPE although this CPU could run "
                     "%s (unset it to let gentrain choose)", best);
        describe(why);
        return;
    }
    /* The library runs below what the CPU offers: start again with the best core. */
    int self;
    if (setenv("OPENBLAS_CORETYPE", best, 1) != 0 || setenv(ENV_SET, best, 1) != 0 ||
        setenv(ENV_WAS, core, 1) != 0) {
        gt_warn("cannot set OPENBLAS_CORETYPE=%s (%s); OpenBLAS stays on its %s core",
                best, strerror(errno), core);
    } else if ((self = exe_is_this_program()) != 1) {
        gt_warn("cannot restart with OPENBLAS_CORETYPE=%s: %s%s; OpenBLAS stays on its %s "
                "core (set OPENBLAS_CORETYPE=%s yourself)", best,
                self == 0 ? "this process was started through another program (a loader "
                            "or a tool)" : "/proc/self: ",
                self == 0 ? "" : strerror(errno), core, best);
    } else {
        fflush(NULL);
        cpu_unbind_before_exec();
        execv("/proc/self/exe", argv);
        gt_warn("cannot restart with OPENBLAS_CORETYPE=%s (%s); OpenBLAS stays on its %s "
                "core", best, strerror(errno), core);
    }
    /* the run goes on as it is: no trace of the attempt is left for child processes */
    unsetenv("OPENBLAS_CORETYPE");
    unsetenv(ENV_SET);
    unsetenv(ENV_WAS);
    snprintf(why, sizeof why, "chosen by OpenBLAS below this CPU's level (restart with "
             "OPENBLAS_CORETYPE=%s failed)", best);
    describe(why);
#endif
}
