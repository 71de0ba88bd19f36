/* inspect_run — `gentrain inspect RUN_FOLDER`: where a training run stands, from what it
 * keeps in its folder (run_folder.h), read without disturbing a run that is writing it:
 *   state        whether a run holds the folder's lock now, and which (pid and host)
 *   log          its records, when it was last written, the last step's loss, lr and
 *                speed, the last and the best validation loss, and for a run in
 *                progress the time left at the pace of its last steps
 *   checkpoints  their steps, the newest one's size and time, and the one resume = auto
 *                would take: the newest whose metadata reads, or (verify) whose every
 *                byte verifies against its checksum, as a resume checks
 *   model        model.h5's step and shape
 * A folder holding none of the four is refused: it is not a run folder. */
#ifndef GT_INSPECT_RUN_H
#define GT_INSPECT_RUN_H

#include <stdio.h>

/* Prints the folder's status on out (verify: the checkpoints read whole, as above). 0;
 * -1 when dir is not a run folder or something in it is damaged (a log line that is
 * not a record, no checkpoint that verifies, a newer one that does not, a model file
 * that does not read), each reported by one line on stderr; the rest is printed all
 * the same. */
int inspect_run_folder(const char *dir, int verify, FILE *out);

#endif
