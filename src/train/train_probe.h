/* train_probe — before MPI starts, `gentrain train` reads every HDF5 file the run will
 * open in a child process (probe.h): each data file (as `inspect` walks it: every
 * object, attribute and chunk index; then as the loader opens it, training and
 * validation dataset), and each checkpoint a resume may load (every ckpt_*.h5 of
 * <out>/checkpoints for resume = auto, or the file resume names: its attributes as a
 * resume reads them, and the inspect walk). HDF5 1.10.8 crashes or loops on some
 * damaged files; a run's own processes must not: under MPI a rank that crashes takes
 * the job down with a launcher's message, and one that loops hangs every rank.
 *
 * The child checks nothing itself: its error lines are discarded, and whatever it
 * finds wrong the run finds again and reports in its own words. It only tells a crash
 * or a hang, which then ends the command with one line naming the file, before MPI
 * starts (printed by the launcher's rank 0 alone; the other ranks exit quietly).
 * Raw tensor data (contiguous, read by plain reads) is not read twice: the start-up
 * checks read it once, in the run. Each file gets GENTRAIN_PROBE_SECONDS (default 300)
 * before it counts as a hang; GENTRAIN_PROBE=off skips the child.
 *
 * Returns 0 (go on; also when the config does not parse: the run reports that), or 1
 * after the line. */
#ifndef GT_TRAIN_PROBE_H
#define GT_TRAIN_PROBE_H

int train_probe_inputs(int argc, char **argv);

#endif
