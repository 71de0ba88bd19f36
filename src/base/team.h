/* team — how many OpenMP threads this rank's steps use: all it was given while its
 * cores are its own, fewer while another process shares one of them, all again once
 * that core is free.
 *
 * Why: a step is hundreds of parallel regions, each ending in a barrier. When another
 * process shares a core with one thread of the team, the scheduler runs that thread in
 * slices of milliseconds and every barrier waits for its next slice: on 2 cores, one busy
 * process made a step 10-20x slower. A team that leaves the shared core runs at the
 * speed of the cores it still has.
 *
 * How: at step boundaries the team reads how long each of its threads waited, runnable,
 * for a CPU (run_delay in the thread's schedstat). A thread that waited TEAM_SHARED or
 * more of a window of at least TEAM_WINDOW_S shrinks the team by one. A smaller team
 * probes, every backoff seconds, a short spin of one thread more; when no thread of the
 * probe waited it grows by one, else the backoff doubles (TEAM_BACKOFF_MIN_S to _MAX_S).
 * The kernels give the same bits on a team of any size (the matrix products are cut for
 * the thread count the run was given, sgemm_parts.h), so a change of team size never
 * changes a result, only the time. Where schedstat cannot be read the team stays fixed,
 * said once. */
#ifndef GT_TEAM_H
#define GT_TEAM_H

#define TEAM_WINDOW_S 0.05      /* shortest window a shrink is judged on */
#define TEAM_SHARED 0.2         /* waited fraction that says a core is shared */
#define TEAM_PROBE_S 0.02       /* length of a growth probe */
#define TEAM_BACKOFF_MIN_S 0.5  /* first wait before a probe */
#define TEAM_BACKOFF_MAX_S 4.0  /* longest wait between failed probes */

typedef struct team team;

typedef enum { TEAM_FIXED, TEAM_ADAPTIVE } team_policy;

/* A team of `threads` (already applied with gt_set_threads). TEAM_FIXED never changes
 * it. The environment variable GENTRAIN_TEAM_SCHEDULE="a,b,c" (tests) replaces the
 * policy with those sizes, one per step, repeated. NULL when out of memory (reported). */
team *team_create(int threads, team_policy policy);
void team_free(team *t);

/* Call between steps, outside any parallel region: measures, and may change the thread
 * count (gt_set_team_threads). Returns the size of the team for the next step. */
int team_after_step(team *t, long long next_step);

/* The team's size now */
int team_size(const team *t);

#endif
