/* bootstrap.h - cold bootstrap: a replica is built from a snapshot of the active's RocksDB,
 * fetched over SSH, instead of by replaying its changelog (docs/bootstrap.md).
 *
 * Both sides live here, driven by the node's main loop through notes on the control topic
 * (member.h):
 *   replica  the standby runner hands over a task (bk_bootstrap_want); this node sends
 *            "snapshot-request" to the task's active, waits for "snapshot-ready", then a
 *            worker thread reads the manifest and fetches the files over SFTP (sftp.h),
 *            installs them as the task's DB (bk_install_snapshot) and sends
 *            "snapshot-fetched". Any failure (no answer in bootstrap_timeout_ms, sshd down,
 *            host key, auth, checksum, a manifest that names a path outside its directory)
 *            ends the job with a logged reason; the node then restarts its standby runner
 *            with the task in mode NEVER: it restores from the changelog as before.
 *   active   on "snapshot-request" the stream thread running the task makes a snapshot
 *            after its next commit (bk_thread_request_snapshot); this node answers
 *            "snapshot-ready" (its ssh_host, ssh_port and the snapshot's directory) or
 *            "snapshot-failed", removes the snapshot when told it was fetched, and sweeps
 *            those older than snapshot_ttl_ms. At most bootstrap_max_concurrent snapshots
 *            are out at once; more requests are answered "busy" (the replica falls back).
 *   operator `beck bootstrap` writes a "bootstrap" note naming a task: the node holding
 *            its standby rebuilds it by cold bootstrap (mode FORCE).
 * Note texts are "key=value" words: task=S_P req=ID host=H port=P dir=D why=...(rest).
 * @locality the node's main thread, but bk_bootstrap_want (any thread). */
#ifndef BK_BOOTSTRAP_H
#define BK_BOOTSTRAP_H

#include <stdint.h>

#include "base/conf.h"
#include "cluster/member.h"
#include "engine/hooks.h"
#include "engine/plan.h"
#include "engine/thread.h"
#include "replica/bootstrap_mode.h"

typedef struct bk_bootstrap_s bk_bootstrap_t;

typedef struct bk_bootstrap_env_s {
    const bk_plan_t *plan;
    const bk_conf_t *conf;
    bk_member_t *member;
    const char *node_id;
    int32_t ntasks;
    int32_t cap;               /* room for tasks bk_bootstrap_grow adds (< ntasks: ntasks) */
    const bk_task_id_t *tasks; /* [cap], the member's task numbering */
    char *const *names;        /* [cap] "S_P" */
    /* The active's side: asks the stream thread running task for a snapshot (0, or -1 if no
     * thread here runs it), and takes a finished one (1, or 0). */
    int (*ask)(void *opaque, int32_t task, const char *req);
    int (*take)(void *opaque, bk_snapshot_made_t *out);
    void *opaque;
    bk_hooks_t *hooks; /* on_restore gets the fetches' progress (hooks.h); may be NULL */
    /* An installed snapshot is opened here, beside the other fetches, and left in this pool
     * (taskdb.h) for the standby runner: opening dozens of fresh DBs one after another when
     * it restarts took most of a bootstrap of many small tasks. May be NULL. */
    struct bk_taskdb_pool_s *pool;
} bk_bootstrap_env_t;

/* A node serves snapshots whatever its settings (it needs only its sshd); it fetches, and
 * its standby runner hands tasks over, only with ssh_key set. env is copied; its arrays
 * must outlive the result. NULL: out of memory. */
bk_bootstrap_t *bk_bootstrap_new(const bk_bootstrap_env_t *env);
/* Waits for running fetches (bounded by their timeouts), removes this node's snapshots. */
void bk_bootstrap_destroy(bk_bootstrap_t *b);

/* The standby runner handed `task` over (standby.h's boot callback). @locality any thread */
void bk_bootstrap_want(bk_bootstrap_t *b, int32_t task, const char *why);
/* The mode the next standby runner should give task (BK_BOOTSTRAP_MODE_*). */
int bk_bootstrap_mode(bk_bootstrap_t *b, int32_t task);
/* The node's task table grew to ntasks (up to env->cap): a later generation's tasks
 * (engine/plan.h, bk_plan_grow), whose entries of env's arrays are filled. Main thread. */
void bk_bootstrap_grow(bk_bootstrap_t *b, int32_t ntasks);

/* The node's standby set changed: jobs and modes of tasks not in it are dropped. */
void bk_bootstrap_keep(bk_bootstrap_t *b, const int32_t *standby, int32_t n);

/* The node is about to run these tasks as actives: a bootstrap of any of them is given up,
 * and one fetching is waited for (bounded by its timeouts) so that its directory is not
 * replaced under the stream thread. */
void bk_bootstrap_settle(bk_bootstrap_t *b, const int32_t *tasks, int32_t n);

/* A note of cold bootstrap's (snapshot-request, -ready, -failed, -fetched; bootstrap from
 * `beck bootstrap`) that the node took (bk_member_take_note); others are ignored. Returns 1
 * when the standby runner must restart. */
int bk_bootstrap_note(bk_bootstrap_t *b, const bk_member_note_t *n);

/* Moves everything on: timeouts, finished fetches and snapshots. Returns 1 when the
 * standby runner must restart (a job ended, or an operator asked for a task here). */
int bk_bootstrap_poll(bk_bootstrap_t *b, const bk_member_view_t *view);

#endif
