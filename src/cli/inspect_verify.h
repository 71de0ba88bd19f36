/* inspect_verify — `gentrain inspect --verify FILE.h5`: reads a gentrain model or
 * checkpoint whole and checks it against its checksum, as `sample` and a resume would
 * before they use it: a file copied between clusters, or kept on a scratch file system
 * that may have been purged or damaged, is known good or named bad before a job waits
 * for it in a queue. */
#ifndef GT_INSPECT_VERIFY_H
#define GT_INSPECT_VERIFY_H

#include <stdio.h>

/* Prints one "verify:" line on out when the file verifies: 0. -1 after one error line
 * when it does not, or when it is neither a gentrain model nor a checkpoint. */
int inspect_verify_file(const char *path, FILE *out);

#endif
