/* env_check — the GENTRAIN_* environment variables a user may set, checked once when
 * the command starts. Each is read where it takes effect (the kernels, the loader, the
 * probe...), often deep in code that cannot stop a run; a value that code does not
 * understand used to be ignored there, or only warned about, and the run went on doing
 * something else than asked. Checked here first, a bad value is one error line before
 * any work. */
#ifndef GT_ENV_CHECK_H
#define GT_ENV_CHECK_H

/* 0 when every GENTRAIN_* variable in the environment is unset, empty or a value its
 * reader understands; else -1 after one "gentrain: error:" line naming the variable and
 * the values it takes. Under mpirun or srun, rank 0 says it at once and another rank
 * after a few seconds, prefixed with its rank (par_launcher_defer_report): a job whose
 * ranks all have it says it once, a job where only rank 1 has it still says it. Other
 * GENTRAIN_* names (the module's GENTRAIN_DATA, gentrain's own re-exec markers, the
 * test hooks) are not looked at. */
int env_check(void);

#endif
