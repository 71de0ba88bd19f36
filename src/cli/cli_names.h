/* cli_names — the one vocabulary of the verbs' options. The same thing has the same
 * option in every verb:
 *   --model PATH   the trained model a verb reads: a model file, or a run folder (its
 *                  newest model.h5); sample and export (was sample --checkpoint)
 *   -o, --out PATH where a verb writes: prepare's dataset file, train's run folder,
 *                  export's folder (was prepare --output, export's positional OUT_DIR)
 * and in every verb '-' and '_' are alike inside an option's name (--top-k ==
 * --top_k, as the config keys) and --name=VALUE is --name VALUE. An old spelling
 * still works, with one note on stderr saying the new one. */
#ifndef GT_CLI_NAMES_H
#define GT_CLI_NAMES_H

#include <stddef.h>

/* The canonical name of the option arg (the text before any '='), written to buf
 * (cap bytes, cut to fit): '_' read as '-' after the leading "--", and an old
 * spelling that `verb` still accepts turned into its new name after one
 * "gentrain: note:" line. An argument that is not an option is copied as it is.
 * Returns buf. */
const char *cli_canonical(const char *verb, const char *arg, char *buf, size_t cap);

/* Says, in one note, that `verb` took what it was given the old way (old) and how it
 * is spelt now (now). For spellings that are not a renamed option, such as a
 * positional argument. */
void cli_note_old(const char *verb, const char *old, const char *now);

#endif
