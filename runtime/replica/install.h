/* install.h - makes a fetched snapshot (engine/manifest.h) a task's DB on this node: the
 * last step of cold bootstrap (bootstrap.h), after sftp.h fetched the files. Any thread
 * but the task's DB must not be open. */
#ifndef BK_INSTALL_H
#define BK_INSTALL_H

#include <stddef.h>

#include "engine/manifest.h"

/* Checks every file of m in fetched_dir (size and XXH3 against the manifest; a file not
 * in the manifest is refused), then replaces task_dir with fetched_dir (rename) and
 * writes task_dir's checkpoint file (engine/db.c's format) from the manifest's store lines,
 * so that bk_db_open(task_dir, ...) resumes the changelogs at the manifest's offsets. 0,
 * or -1 with errstr naming the file and what was wrong ("000012.sst: checksum 0123...
 * expected 4567...: refused"); task_dir is untouched on failure. */
int bk_install_snapshot(const bk_manifest_t *m, const char *fetched_dir, const char *task_dir,
                        char *errstr, size_t errstr_size);

/* What a crash in the middle of an install (or of a fetch before it) leaves in an app's state
 * directory, put right before any task opens: "S_P.trash-*" (the swap's old state) is
 * removed when S_P is in place, and renamed back to S_P when the crash came between the
 * two renames (the old state returns, whole: the new snapshot is fetched again);
 * ".bootstrap-S_P" and "S_P.archive" (fetches that did not finish) are removed. Call it
 * before any thread of the node runs. Returns how many entries it put right, or -1 when
 * app_dir cannot be read (a missing app_dir is 0). */
int bk_install_recover(const char *app_dir);

#endif
