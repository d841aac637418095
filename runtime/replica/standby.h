/* standby.h - the standby replicas of one node: warm copies of other nodes' task state.
 *
 * One thread ("standby") with one consumer tails the changelog partitions of every logged
 * store of its tasks into the tasks' own RocksDB (the same directory an active of the task
 * uses on this node, <state_dir>/<app>/<sub>_<partition>), and checkpoints what it applied
 * every commit interval, so that the replica survives a restart of its node and an active
 * started here later (a promotion) replays only what the standby had not applied yet.
 * About once a second it reports each task's changelog position and lag (records behind
 * the changelogs' end) to a callback, which the node feeds to the membership's heartbeats:
 * the leader then promotes the most caught-up replica when an active's node dies.
 *
 * A node never holds one task both active and standby (assign.h's node rule), and starts
 * an active of a task only after its standby runner has stopped (and closed the DB).
 * @locality bk_standby_* from one thread (the node's); the callback runs on the standby
 * thread. */
#ifndef BK_STANDBY_H
#define BK_STANDBY_H

#include <stdint.h>

#include "base/conf.h"
#include "engine/plan.h"
#include "engine/thread.h"
#include "replica/bootstrap_mode.h"

/* The lag a replica reports while it holds no state to tail from (being built by cold
 * bootstrap elsewhere, or a later generation's replica waiting for the generation before it
 * to drain): far behind any acceptable lag, so that no task moves to it; `beck status`
 * shows it as "not built". */
#define BK_STANDBY_UNBUILT_LAG (INT64_C(1) << 40)

typedef struct bk_standby_s bk_standby_t;

/* A task's progress: `task` is the caller's id of it (as given to bk_standby_new),
 * `offset` the next changelog offset of its first logged store (-1: nothing applied yet),
 * `lag` the records all its changelogs hold beyond what was applied. */
typedef void (*bk_standby_progress_cb)(void *opaque, int32_t task, int64_t offset, int64_t lag);

/* Creates (does not start) the runner of `tasks` (copied), whose caller ids are `ids`
 * (copied). Tasks without a logged store are reported with lag 0 and otherwise ignored.
 * plan and conf must outlive it. */
bk_standby_t *bk_standby_new(const bk_plan_t *plan, const bk_conf_t *conf,
                             const bk_task_id_t *tasks, const int32_t *ids, int ntasks,
                             bk_standby_progress_cb cb, void *opaque);
/* DBs come from this pool (taskdb.h) and go back to it; call before bk_standby_start. */
struct bk_taskdb_pool_s;
void bk_standby_set_pool(bk_standby_t *sb, struct bk_taskdb_pool_s *pool);
/* Where each replica's state in its life is published (engine/livestats.h); before start. */
struct bk_livestats_s;
void bk_standby_set_live(bk_standby_t *sb, struct bk_livestats_s *live);
/* Cold bootstrap (docs/bootstrap.md; on when ssh_key is set). At start the runner reads its
 * changelogs' offsets and hands to cb (on the standby thread) each task that cold
 * bootstrap should build instead: its changelog lost what the task's state needs, or it
 * has more than bootstrap_min_records to replay, or its mode is FORCE. Such a task's DB is
 * closed and it is reported with the changelog's length as lag until the node restarts the
 * runner (after the bootstrap installed the snapshot, or failed). modes[ntasks] (copied;
 * NULL: all AUTO) as replica/bootstrap_mode.h says. Call before bk_standby_start. */
typedef void (*bk_standby_boot_cb)(void *opaque, int32_t task, const char *why);
void bk_standby_set_bootstrap(bk_standby_t *sb, const int *modes, bk_standby_boot_cb cb,
                              void *opaque);

/* A later generation's replica (one of a move's new tasks) holds no state until it is built
 * as its active was (engine/build.h), from the changelogs of the generations before it,
 * which is right only once the tasks of the generation before whose key groups overlap its
 * own have drained. ready[ntasks] (copied) says which may be built now: the others wait
 * (reported with BK_STANDBY_UNBUILT_LAG) until the node starts the runner again. Without it,
 * none is ready; a sealed generation's replica always is (its own changelogs hold its
 * state). Cold bootstrap, when on, takes them instead. Before the start. */
void bk_standby_set_ready(bk_standby_t *sb, const uint8_t *ready);

/* The archive (docs/state.md, Recovery order): a task whose changelog lost what its state
 * needs, and that cold bootstrap did not take, is restored by cb from the newest archived
 * snapshot its changelog still covers (engine/thread.h's contract). Before the start. */
void bk_standby_set_recover(bk_standby_t *sb, bk_thread_recover_cb cb, void *opaque);

int bk_standby_start(bk_standby_t *sb);
/* Asks the thread to stop, waits: it applies what it has, checkpoints and closes the DBs.
 * Returns 0, or -1 if the runner failed at some point (it logged why). */
int bk_standby_stop(bk_standby_t *sb);
/* True once the thread ended by itself (a failure) or after a stop. */
int bk_standby_done(const bk_standby_t *sb);
/* The replicas whose stores were found damaged (docs/reliability.md, A corrupted store): on
 * opening, in a write, or by the scrub, which reads every replica back from its files in the
 * background (engine/dbverify.h); any of them ends the runner. Fills ids (room for every
 * task given) with their caller ids; returns how many. The node removes them and starts the
 * runner again, which builds them anew. After the thread ended. */
int bk_standby_corrupt(const bk_standby_t *sb, int32_t *ids);
/* Whether the runner ended for an error that passes (the brokers did not answer its reads
 * in time): the node starts it again on the same tasks. After the thread ended. */
int bk_standby_retriable(const bk_standby_t *sb);
void bk_standby_destroy(bk_standby_t *sb);

#endif
