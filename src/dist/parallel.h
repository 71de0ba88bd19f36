/* parallel — MPI for `gentrain train`: start-up and shut-down, rank-0-only output,
 * cross-rank sums and consistency checks, and ending the whole job on an error.
 *
 * Two modes, chosen once by par_init: MPI, when a launcher started the process; single
 * (a plain `gentrain train`, or par_init never called), where no MPI call is made and
 * every function behaves as in a world of one rank. Collectives must be called by
 * every rank in the same order; with one rank they make no MPI call, so `mpirun -np 1`
 * computes bit for bit what a single process does. Only the thread that called
 * par_init calls these; OpenMP workers never call MPI. main.c calls par_init only for
 * the `train` verb. */
#ifndef GT_PARALLEL_H
#define GT_PARALLEL_H

#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__)
#define PAR_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define PAR_PRINTF(a, b)
#endif

/* 1 when a launcher (mpirun, srun, ...) started this process. Makes no MPI call. */
int par_launched(void);
/* The first line of the MPI library's own description of itself (its name and
 * version: MPI_Get_library_version, which MPI allows before it starts), and the MPI
 * standard it implements, into buf. Starts nothing. */
void par_library_version(char *buf, size_t cap);
/* This process's rank as the launcher announced it (OMPI_COMM_WORLD_RANK, PMIX_RANK,
 * PMI_RANK, SLURM_PROCID), before MPI starts; -1 when none says. */
int par_launcher_rank(void);
/* Before a launched rank other than 0 that fails before MPI starts says why: waits a
 * few seconds. Where rank 0 fails the same way (the same environment, the same files),
 * its line is the job's and the launcher ends this rank meanwhile; where rank 0 did not
 * fail, this rank's line is the only one. Returns at once on rank 0 or unlaunched. */
void par_launcher_defer_report(void);

/* MPI mode: par_launched() (OMPI_COMM_WORLD_SIZE, PMIX_RANK, PMI_RANK or
 * SLURM_STEP_NUM_TASKS in the environment). The loader thread calls MPI too,
 * indirectly, when it reads through parallel HDF5's MPI-IO driver (MPI_File_read_at):
 * so MPI_THREAD_MULTIPLE is asked for, and where MPI gives only MPI_THREAD_FUNNELED
 * the data is read without MPI-IO. MPI errors return codes (MPI_ERRORS_RETURN); every
 * code is checked, and a failed call ends the job through par_abort naming the call.
 *
 * Initialises MPI (MPI mode) when par_launched(), else does nothing. Ends the job
 * (par_abort) when MPI gives less than MPI_THREAD_FUNNELED, or when the launcher
 * started N > 1 processes but MPI sees a world of one (each would train its own model:
 * srun without --mpi=pmix, say). Call once, before any other thread exists. */
void par_init(int *argc, char ***argv);
/* MPI_Finalize in MPI mode (after every HDF5 handle is closed); else nothing. */
void par_finalize(void);

/* This rank's index among the ranks on its node (MPI_Comm_split_type, shared memory):
 * which GPU it takes. 0 in single mode. A collective the first time. */
int par_local_rank(void);
/* The number of ranks on this rank's node (1 in single mode). A collective the first
 * time (it shares par_local_rank's). */
int par_local_size(void);

/* 1 in MPI mode with MPI_THREAD_MULTIPLE: other threads may call MPI (MPI-IO reads). */
int par_thread_multiple(void);

int par_rank(void);   /* this rank, 0 in single mode */
int par_world(void);  /* number of ranks, 1 in single mode */
int par_is_root(void); /* rank 0: the one rank that prints, logs and saves */

/* printf on rank 0 only; the other ranks print nothing but errors. */
void par_printf(const char *fmt, ...) PAR_PRINTF(1, 2);

/* Ends the job (par_abort) naming `call` and MPI's message when rc, the return code of
 * an MPI call, is not MPI_SUCCESS. */
void par_check_mpi(int rc, const char *call);

/* Errors. With more than one rank, every "gentrain: error:"/"warning:" line names the
 * rank ("gentrain: error: rank 2: ..."). No rank may leave the others waiting in a
 * collective:
 *  - a failure every rank reaches at the same point (setup, a check) is agreed with
 *    par_all_ok, and then every rank leaves normally with a non-zero status;
 *  - a failure only this rank sees while the others may be inside a collective ends
 *    the job with par_abort / par_abort_reported (MPI_Abort: every rank stops).
 *
 * Ends the whole job: prints "gentrain: error: [rank R: ]<fmt...>" and calls MPI_Abort
 * (status 1) in MPI mode, exit(1) in single mode. */
_Noreturn void par_abort(const char *fmt, ...) PAR_PRINTF(1, 2);
/* The same for an error this rank has already reported: no further line. */
_Noreturn void par_abort_reported(void);

/* Mean and sum over ranks of one double each; rank 0's value of x. */
double par_mean_double(double x);
double par_sum_double(double x);
double par_bcast_double(double x);
/* In place: buf[i] = sum over ranks of buf[i] (n int64; wraps on overflow, so a rank
 * may contribute its numbers where the others hold 0, hashes included). */
void par_sum_int64(int64_t *buf, size_t n);

/* Collective agreement: 1 when ok != 0 on every rank, else 0 on every rank. Prints
 * nothing: the failing rank reported its own error. */
int par_all_ok(int ok);

/* Checks that `n` bytes (the config text, a dataset's identity, the parameters) are
 * the same on every rank, by the min and max over ranks of their 64-bit hash. Returns 0
 * when they are; otherwise EVERY rank prints one error line naming `what` (for text,
 * the first line that differs from rank 0's) and every rank gets -1. */
int par_check_same(const char *what, const void *bytes, size_t n);

/* Whether another rank gave the same `id` (text; the first PAR_ID_MAX - 1 bytes count):
 * the ranks that took the same GPU (offload_device_id). 0 in single mode. A
 * collective. */
#define PAR_ID_MAX 80
int par_id_shared(const char *id);

#endif
