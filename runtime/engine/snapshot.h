/* snapshot.h - a task's snapshot: a RocksDB checkpoint of its open DB and the manifest
 * (manifest.h) that describes it, in <state-dir>/<app>/snapshots/<id>/. This is what cold
 * bootstrap copies between nodes (replica/). Made between two commits: hard links of the
 * SST files, memtables flushed first, so no WAL.
 * @locality bk_snapshot_make: the task's owning stream thread (it reads the open DB);
 * the rest: any thread. */
#ifndef BK_SNAPSHOT_H
#define BK_SNAPSHOT_H

#include <stddef.h>
#include <stdint.h>

#include "engine/manifest.h"
#include "engine/store.h"

/* Makes a snapshot of the open db of task `task` in root/<id>/ (root is created if
 * missing): RocksDB checkpoint, then the manifest with the stores' changelog next offsets
 * and input offsets as the db has them now. Call between commits (no uncommitted batch).
 * Fills m (free with bk_manifest_free) and dir (the snapshot's directory). */
int bk_snapshot_make(bk_db_t *db, const char *task, const char *root, bk_manifest_t *m, char *dir,
                     size_t dir_size, char *errstr, size_t errstr_size);

/* Removes the snapshots under root created more than ttl_ms before now_ms (and any
 * directory there without a readable manifest, older than ttl_ms by its mtime).
 * Returns how many were removed. */
int bk_snapshot_sweep(const char *root, int64_t ttl_ms, int64_t now_ms);
/* Removes one snapshot directory (its files, then itself). */
int bk_snapshot_remove(const char *dir);

/* A snapshot asked for through a stream thread's mailbox (thread.h,
 * bk_thread_request_snapshot), made in <state_dir>/<app>/snapshots/<id>/ right after the
 * thread's next commit, or failed. Cold bootstrap (replica/bootstrap.h) asks and takes. */
#define BK_SNAPSHOT_REQUESTS 32 /* waiting per thread, at most */
typedef struct bk_snapshot_made_s {
    int32_t id;    /* the task: its index in the app's task table (bk_plan_tasks) */
    char req[128]; /* the request's tag, returned as given */
    int ok;
    char dir[4096]; /* ok: the snapshot's directory, absolute */
    char err[512];  /* !ok: why */
} bk_snapshot_made_t;

#endif
