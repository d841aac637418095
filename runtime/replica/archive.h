/* archive.h - the snapshot archive (snapshot_archive, docs/state.md, Bounded changelogs):
 * each active task's state is archived now and then from the same RocksDB checkpoint and
 * manifest as cold bootstrap makes (engine/snapshot.h), incrementally, and a replica whose
 * changelog no longer holds what it needs comes back from it.
 *
 * Layout, for a directory (local, or a mount):
 *   <archive>/<app>/<task>/files/<xxh3>-<name>          each file of the kept snapshots, once:
 *                                                       named by content, so a file already
 *                                                       there is not copied again
 *   <archive>/<app>/<task>/<created_ms>-<id>.manifest   one snapshot (engine/manifest.h)
 * A snapshot is written files first, its manifest last (tmp, fsync, rename): a manifest names
 * only files that are there. The newest snapshot_archive_keep per task are kept; older
 * manifests go, then the files no kept manifest names.
 * @locality bk_archive_due and bk_archive_put: the node's main thread; the copies run on the
 * archive's worker thread; bk_archive_recover: any thread. */
#ifndef BK_ARCHIVE_H
#define BK_ARCHIVE_H

#include <stddef.h>
#include <stdint.h>

#include "base/conf.h"
#include "engine/plan.h"
#include "engine/snapshot.h"

/* The request tag of the snapshots the archive asks stream threads for. */
#define BK_ARCHIVE_REQ "archive"

typedef struct bk_archive_s bk_archive_t;

/* The node's archiver, or NULL when snapshot_archive is not set (or without memory: logged).
 * Its worker thread starts here. */
bk_archive_t *bk_archive_new(const bk_plan_t *plan, const bk_conf_t *conf);
/* Finishes the copy in hand, drops the queued ones (their snapshots removed), stops. */
void bk_archive_destroy(bk_archive_t *a);

/* Of the tasks running here (indices into the app's task table), those whose state is due
 * for the archive: a logged store, and no snapshot of it archived or asked for within
 * snapshot_archive_interval_ms. Into due (room for n); their count. They count as asked. */
int bk_archive_due(bk_archive_t *a, const int32_t *running, int n, int32_t *due);

/* A snapshot of `task` could not be asked for (the thread's requests are full): tried again
 * in a second. */
void bk_archive_retry(bk_archive_t *a, int32_t task);

/* A snapshot made for the archive (req BK_ARCHIVE_REQ): copied by the worker, then removed
 * from the state directory. A failed one only makes its task due again. */
void bk_archive_put(bk_archive_t *a, const bk_snapshot_made_t *made);

/* The way back (recovery order, docs/state.md): for task `task` (its stores' changelogs
 * changelogs[i], whose first offsets are now lo[i]), the newest archived snapshot that every
 * changelog still covers (its next offset >= lo) is copied into a directory beside task_dir,
 * checked, and installed as task_dir (replica/install.h): the task then replays the
 * changelogs' tails from the manifest's offsets. 1 installed (what names it), 0 none usable
 * (what says why), -1 error (err). */
int bk_archive_recover(const bk_conf_t *conf, const char *app, const char *task,
                       const char *task_dir, char *const *changelogs, const int64_t *lo, int n,
                       char *what, size_t what_size, char *err, size_t err_size);

#endif
