/* run_folder — what a training run keeps in its folder (the config key out), named in
 * one place for the trainer that writes it and for `gentrain inspect`, which reads it:
 *   <out>/model.h5          the model, written when the run ends (train_model_path)
 *   <out>/log.jsonl         the JSON Lines log, unless the config key log names another
 *                           (config.c, a layer below, derives that default)
 *   <out>/checkpoints/      ckpt_<step>.h5 files (io/ckpt/ckpt.h)
 *   <out>/.gentrain.lock    a POSIX write lock held by rank 0 for the whole run; the file
 *                           says "pid N on HOST" of the run that last took it
 * and whether a run holds the folder now. */
#ifndef GT_RUN_FOLDER_H
#define GT_RUN_FOLDER_H

#include <stddef.h>

#define RUN_FOLDER_LOCK ".gentrain.lock"
#define RUN_FOLDER_LOG "log.jsonl"
#define RUN_FOLDER_CKPTS "checkpoints"
#define RUN_FOLDER_MODEL "model.h5"

/* The lock file's text as one printable line ("pid 4242 on node07"), from an open
 * descriptor of it: "" when it is empty or unreadable. */
void run_folder_lock_text(int fd, char *who, size_t cap);

typedef enum {
    RUN_LOCK_NO_FILE, /* no lock file: no run has started in this folder */
    RUN_LOCK_FREE,    /* no process holds it: no run is writing the folder */
    RUN_LOCK_HELD,    /* a process holds it: a run is writing the folder */
    RUN_LOCK_UNKNOWN  /* the lock cannot be tested (why says so) */
} run_lock_state;

/* Tests the lock of the run folder dir without taking it. who gets the lock file's
 * text (the holder, or the last run that held it); why, for RUN_LOCK_UNKNOWN, the
 * reason. */
run_lock_state run_folder_lock_state(const char *dir, char *who, size_t who_cap,
                                     char *why, size_t why_cap);

#endif
