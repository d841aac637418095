/* thread_internal.h - a stream thread's insides, shared by the files that make it up:
 * thread.c (life cycle, the record path, the loop), thread_setup.c (what is set up once:
 * tables, clients, Lua), thread_tasks.c (tasks coming and going: the node's asks, leaving,
 * starting again, parking, input growth), thread_jobs.c (the background opening and
 * restore, going live), thread_commit.c (commit, commit markers, snapshots), thread_txn.c
 * (exactly-once), thread_moves.c, thread_build.c and thread_seal.c (a move's part of it)
 * and thread_ffi.c (what Lua calls). A task's state is its life (tasklife.h), moved only
 * by bk_thread_life. Nothing else includes it. Every
 * field belongs to the stream thread itself, except where a comment says another thread
 * reads or writes it (flags, the box under box.lock, the snapshot mailbox under snap.lock,
 * an opening job's slots, done). */
#ifndef BK_THREAD_INTERNAL_H
#define BK_THREAD_INTERNAL_H

#include <pthread.h>
#include <stdint.h>

#include <librdkafka/rdkafka.h>
#include <lua.h>
#include <stdatomic.h>

#include "base/ffi.h"
#include "base/task.h"
#include "engine/fetchkick.h"
#include "engine/livestats.h"
#include "engine/order.h"
#include "engine/restore.h"
#include "engine/store.h"
#include "engine/taskdb.h"
#include "engine/tasklife.h"
#include "engine/thread.h"

typedef enum { POLICY_FAIL, POLICY_SKIP, POLICY_DLQ } policy_t;

/* A task parked on a record (bk_thread_s.parked): the record's topic (plan index),
 * partition and offset. */
typedef struct bk_thread_parked_s {
    int on, slot, topic;
    int32_t partition;
    int64_t offset;
} bk_thread_parked_t;

/* A background open-and-restore of tasks added while the thread runs (thread_tasks.c): on
 * a pthread and a consumer of its own, so that the thread's other tasks keep processing.
 * It writes only its slots' DBs, stores and next offsets, which the stream thread leaves
 * alone until it has joined the job. */
typedef struct bk_thread_job_s {
    struct bk_thread_s *thr;
    int32_t *slots;
    int n;
    /* the slots' input partitions when the job started (copied: the thread's tables may
     * grow meanwhile), and their committed offsets, which the job reads */
    int ntp;
    int *tp;               /* [ntp] toppar ids */
    const char **tp_topic; /* [ntp] (the plan's names) */
    int32_t *tp_part;      /* [ntp] */
    int64_t *tp_off;       /* [ntp] */
    char **tp_meta;        /* [ntp] their commits' metadata, or NULL */
    pthread_t tid;
    atomic_int stop, done;
    int rc;
    int retriable; /* it failed for an error that passes (bk_kafka_retriable) */
    int attempt;   /* openings of these tasks that failed so before it */
    char err[1024];
    int64_t t0, t_open, t_restore; /* clock at its start, when opened, when restored */
    atomic_int phase;              /* the phases it reached, a bit each (1 << BK_LIFE_BUILDING,
                                    * _RESTORING): the stream thread moves its tasks' life along
                                    * (bk_thread_apply_changes) */
    /* on_restore's progress, fired by the stream thread (Lua lives there) */
    pthread_mutex_t lock;
    bk_restore_progress_t progress;
    int progress_seq, fired_seq;
    struct bk_thread_job_s *next;
} bk_thread_job_t;

struct bk_thread_s {
    int index;
    char name[32];
    const bk_plan_t *plan;
    const bk_conf_t *conf;
    bk_node_flags_t *flags;
    struct { /* its settings */
        policy_t policy;
        int batch_size;
        int64_t commit_interval_ms;
        int64_t stall_ms; /* BECK_STALL_MS: a loop turn this long or longer is logged */
    } opt;
    struct { /* its pthread: started, done (read by the node), its result */
        pthread_t tid;
        int started;
        atomic_int done;
        int rc;
    } run;

    lua_State *L;
    struct { /* the Lua functions the thread calls, as registry refs */
        int run, punctuate, close, flush, hook, init;
        int add_task, init_task, close_task, drop_task, regrow;
    } ref;
    /* How much of the plan the thread's tables and VM follow (bk_thread_follow_plan);
     * ready: the plan's nready at the last moves_after_commit. */
    struct {
        int topics, stores, tasks, ready;
        const char *gens;
    } seen;
    /* What the producer's topic handles were last made for: the plan's nready and how
     * many of its topics and stores the thread followed then. All three count: a producer
     * renewed (a rejoin under exactly-once) before the thread followed a grown plan made
     * handles for the old topics only, at the new nready (issue 38: the newest
     * generation's topic had no handle, and its passthrough fell back to a retired one). */
    struct {
        int ready, topics, stores;
    } handles;
    int64_t unleased_at; /* when the thread found the node's lease run out, 0: it holds */
    /* By slot, [cap]: */
    struct {
        /* a later generation's task's dedup table under at-least-once (engine/dedup.h,
         * owned by its first logged store), NULL: none; and the records it skipped */
        struct bk_dedup_s **dedup;
        int64_t *deduped;
        /* a task's stream time: the newest timestamp of a record given to it, -1 none. It
         * goes with its input offsets' commits ("beck.st=<ms>"), so that the task opened
         * again (a restart, another node) goes on from it, as Kafka Streams' partition time
         * does: windows closed before stay closed, and a late record stays late. */
        int64_t *time;
        uint64_t *epoch; /* the epoch a task went live in (its log lines) */
    } slot;

    /* Tasks. A slot is the task's index in the app's task table (bk_plan_task_at), so any
     * task can come and go; cap of them. owned lists the live ones. */
    int cap;
    const bk_task_id_t *tasks; /* [cap] the plan's task table (it grows into its room) */
    bk_tasklife_t life;        /* each slot's state in its life (tasklife.h) */
    int32_t *owned;            /* [cap] the live slots */
    int ntasks;                /* how many are live */

    /* State: one DB per task; store_of[slot][plan store] or NULL. */
    bk_db_t **dbs;
    bk_store_t ***store_of;

    struct { /* its clients and their topic handles */
        rd_kafka_t *consumer, *producer;
        rd_kafka_queue_t *queue;
        atomic_int queue_ready;      /* queue may be woken (bk_thread_wake) */
        rd_kafka_topic_t **out_rkts; /* by topic index, sinks only */
        rd_kafka_topic_t *dlq_rkt;
        rd_kafka_topic_t **changelog_rkts; /* by plan store */
    } kafka;

    /* The batch in hand, shared with Lua. */
    bk_io_t io;
    struct {
        rd_kafka_message_t **msgs;
        int *rec_tp; /* toppar of each record */
        /* each record's headers (NULL: none), read while fill_batch has the message in
         * hand: read later by each send, the first touch of that part of the message was a
         * cache miss a record (4% of an identity's thread) */
        rd_kafka_headers_t **rec_hdrs;
        bk_fetchkick_t kick; /* wakes the fetcher when the queue ran dry early (fetchkick.h) */
        bk_order_t order;    /* records of tasks with several input partitions, held until
                              * their turn by timestamp (order.h) */
        int merges;          /* the plan has such tasks (else the record path skips order.h) */
    } batch;

    /* Input topic-partitions (toppars): every partition of every source topic, numbered once
     * (tp.id[topic][partition]); the next offset to commit of each. A slot reads the toppars
     * of tp.slot: partition p of each topic of its subtopology, or for a passthrough task q
     * of N every partition p with p mod N = q. An input topic that grows (input growth,
     * thread_tasks.c) adds toppars, so these arrays move: the stream thread alone touches
     * them (an opening task's job reads committed offsets into its own). */
    struct {
        int n, cap;
        int *topic, *partition; /* [n] */
        int64_t *next;
        int64_t *first; /* first offset processed, -1: none yet */
        char *dirty;
        int *parts;          /* [topic] partitions of each source topic as this thread knows */
        int **id;            /* [topic][partition] */
        int **slot;          /* [cap] a slot's toppars, in its subtopology's topic order */
        int *nslot;          /* [cap] */
        int64_t checked;     /* when the source topics' partitions were last looked at (mono) */
        int **task_of, **of; /* [topic][partition] -> live slot / toppar, -1 */
        const rd_kafka_topic_t *last_rkt; /* the topic of the last record, and its index */
        int last_topic;
    } tp;

    /* Changes asked for by the node (bk_thread_add_tasks, bk_thread_remove_tasks), taken
     * at the top of the loop. Guarded by box.lock; box.cond wakes a remover. */
    struct {
        pthread_mutex_t lock;
        pthread_cond_t cond;
        int32_t *add, *rm;   /* [cap] */
        uint64_t *add_epoch; /* [cap] */
        int nadd, nrm;
        uint64_t asked, done; /* removals asked for, done */
        atomic_int pending;   /* something is in the box (read without the lock) */
    } box;
    struct {                   /* tasks opening (thread_jobs.c) */
        bk_thread_job_t *jobs; /* the stream thread's */
        pthread_t *reap;       /* finished jobs' threads still closing their consumers */
        int nreap;
    } open;

    int eos; /* processing_guarantee = exactly_once: the producer is transactional */
    struct {
        int fenced; /* another producer took this thread's transactional id: no more writes */
        int64_t fenced_at;     /* when (mono ms) */
        _Atomic uint64_t inc;  /* the node's incarnation (bk_thread_set_instance) */
        uint64_t inc_used;     /* the one the producer's transactional id names */
        int64_t checkpoint_ms; /* when the DBs were last synced and checkpointed (mono) */
    } txn;
    /* Tasks parked on a record that raised under on_error=fail (docs/reliability.md, Poison
     * records): closed at their last commit, still this thread's, and not opened again
     * until `beck skip` lists the record (looked at every PARKED_CHECK_MS). */
    struct {
        bk_thread_parked_t *task; /* [cap] */
        int n;
        int64_t check_at; /* mono ms */
        int pending;      /* a task was marked parked and is still open: bk_thread_park */
        int parking;      /* the redo under way parks a task: not a failure to count */
    } park;
    struct {          /* what failed since the last commit that went through */
        int delivery; /* a delivery failed, or the producer for good (dr_err says) */
        char dr_err[512];
        int punct;         /* a stream-time punctuation raised under on_error=fail */
        int commit;        /* a commit failed: no later commit may succeed it */
        int redos;         /* bk_thread_redo()s since */
        int redo_unleased; /* the redo under way is a release without the lease */
    } fail;
    char err[1024];
    bk_thread_stats_t stats;

    bk_taskdb_pool_t *pool; /* where DBs come from and go back to (NULL: open, close) */
    bk_livestats_t *live;   /* the node's live counters (livestats.h), or NULL */
    /* Cold bootstrap, the active's side: snapshots asked for (made after the next commit)
     * and made (taken by the node). Guarded by snap.lock. */
    struct {
        pthread_mutex_t lock;
        bk_snapshot_made_t req[BK_SNAPSHOT_REQUESTS], done[BK_SNAPSHOT_REQUESTS];
        int nreq, ndone;
        atomic_int wanted;
    } snap;
    struct {
        int clean; /* the final commit went through */
                   /* the last commit's time (ms): cache and producer flushed, stores synced and
                    * checkpointed and markers written, offsets committed */
        int64_t took[3];
    } commit;

    /* The node's callbacks: who hears each task's progress after a commit
     * (bk_thread_set_progress), the archive's recovery (bk_thread_set_recover), a task
     * drained (bk_thread_set_drained). Each runs on this thread. */
    struct {
        bk_thread_progress_cb progress;
        void *progress_opaque;
        bk_thread_recover_cb recover;
        void *recover_opaque;
        bk_thread_drained_cb drained;
        void *drained_opaque;
    } cb;

    /* Moves (thread_moves.c). */
    struct {
        int *pass_target;   /* [cap_topics] the topic a passthrough input's records go to,
                             * -1: its pass_to (generation 1) */
        uint8_t **barriers; /* [cap] a replaced generation's task: the barriers it read, a
                             * bit per (passthrough input, passthrough task); NULL: none */
        uint8_t *keycheck;  /* [cap] a stateful task of generation 0: each record's key is
                             * checked against its partition (an input that grew) */
        /* a move's step waits for a commit (a barrier read made a task drained): the
         * thread commits at once instead of at its interval */
        int soon;
    } moves;
    /* Sealing (thread_seal.c), by slot: the plan store being written (-1: no seal under
     * way; the plan's store count or more: every one written, sealed at the next commit),
     * the last disk key written of it, the records written. A task sealed shows as
     * life.sealed. */
    struct {
        int soon; /* a seal is under way: the thread commits every SEAL_COMMIT_MS */
        int *store;
        char **cursor;
        size_t *curlen;
        int64_t *written;
    } seal;
};

/* Start-up (thread_setup.c); each 0, or -1 with thr->err. */
void bk_thread_build_tables(bk_thread_t *thr);
/* Moves (thread_moves.c): their tables (init 0 or -1; free), a slot that leaves, what
 * follows a commit of every live task (passthroughs switch, drained tasks are told; 0 or
 * -1 with thr->err), a passthrough task going live (its barriers, if the thread switched;
 * 0 or -1), and a record without key and value read from a generation's topic t: 1 if it
 * was a barrier (counted, not processed), 0 if not, -1 out of memory. */
int bk_thread_moves_init(bk_thread_t *thr);
void bk_thread_moves_free(bk_thread_t *thr);
void bk_thread_moves_forget(bk_thread_t *thr, int slot);
int bk_thread_moves_after_commit(bk_thread_t *thr);
/* One drained task's checkpoint made and the node told (the others at the next turns: a
 * checkpoint takes ~10-15 ms of the thread, and its other tasks, an upstream's among them,
 * get a turn in between). While a task is checkpointing (tasklife.h). */
void bk_thread_moves_drain_one(bk_thread_t *thr);
int bk_thread_moves_live(bk_thread_t *thr, int slot);
int bk_thread_moves_barrier(bk_thread_t *thr, const rd_kafka_message_t *m, int t);
/* Record m of task `slot` (generation 0, keycheck) has a key that murmur2 puts in another
 * of the subtopology's partitions: when its input topic t grew, the task stops before it
 * (its key's state is another task's) until the move to generation 1; else the input is
 * not partitioned by murmur2 and its keys are checked no more. */
void bk_thread_moves_foreign(bk_thread_t *thr, int slot, int t, const rd_kafka_message_t *m);
/* The barriers slot's task has read, its seal and its stream time, as the metadata of its
 * input offsets' commits ("beck.barriers=<hex>;beck.sealed;beck.st=<ms>", each part only
 * when there is one, malloc'd), so that whoever opens the task next knows them: NULL when
 * there is nothing to say. And back: a committed metadata read when the task opens (a task
 * that had read them all drains again at its next commit, and the node says so again, as
 * a node killed between the commit and its drained record did not; its stream time is the
 * newest of its partitions'). */
char *bk_thread_moves_meta(const bk_thread_t *thr, int slot);
void bk_thread_moves_restore(bk_thread_t *thr, int slot, const char *meta);
/* Sealing (thread_seal.c): tables (init 0 or -1; free), a slot that leaves, a committed
 * metadata read when the task opens ("beck.sealed": sealed where it ran before), a task
 * going live (a built one not sealed starts writing its state to its changelogs), what
 * follows a commit (a slice of each task writing, the seal of each whose last slice it
 * covered; 0 or -1 with thr->err), and whether a slot's task is sealed (its commits say
 * so). */
#define BK_THREAD_SEALED_META "beck.sealed"
int bk_thread_seal_init(bk_thread_t *thr);
void bk_thread_seal_free(bk_thread_t *thr);
void bk_thread_seal_forget(bk_thread_t *thr, int slot);
void bk_thread_seal_restore(bk_thread_t *thr, int slot, const char *meta);
void bk_thread_seal_live(bk_thread_t *thr, int slot);
int bk_thread_seal_after_commit(bk_thread_t *thr);
int bk_thread_seal_done(const bk_thread_t *thr, int slot);
/* A later generation's task of an opening job, built once (thread_build.c): before its DB
 * opens, from the drained checkpoints on this node of the generation before; then, its DB
 * open, the rest from their changelogs. 0, or -1 with job->err. */
int bk_thread_build_prepare(bk_thread_job_t *job, int k, const char *name);
int bk_thread_build_slot(bk_thread_job_t *job, rd_kafka_t *consumer, int k, const char *name);
/* Task `slot` moves to state `to` of its life (tasklife.h): every move goes through here. */
static inline void bk_thread_life(bk_thread_t *thr, int slot, bk_life_t to)
{
    bk_tasklife_to(&thr->life, slot, BK_TASK_NAME(thr->tasks[slot]), to);
}

/* The topic a passthrough's record of input topic t goes to. */
static inline int bk_thread_pass_target(const bk_thread_t *thr, int t)
{
    return thr->moves.pass_target[t] >= 0 ? thr->moves.pass_target[t]
                                          : thr->plan->topics[t].pass_to;
}

/* Follows a plan grown by later generations (bk_plan_grow): tables of the new topics, their
 * producer handles, the new tasks' partitions, and the VM's description. Cheap when nothing
 * changed; call it before tasks are opened. 0, or -1 with thr->err. */
int bk_thread_follow_plan(bk_thread_t *thr);
/* Topic t has `partitions` now (more than thr->tp.parts[t]): its tables grow, the new toppars
 * are numbered and the slots that read them know it (not assigned: the caller does that for
 * live ones). 0, or -1 without memory. */
int bk_thread_grow_topic(bk_thread_t *thr, int t, int partitions);
/* Every INPUT_CHECK_MS, the source topics' partition counts (thread_tasks.c): a topic that
 * grew is followed by the passthrough tasks that read it (task q of N takes the new
 * partitions p with p mod N = q, from their start); a subtopology that reads it by input
 * partition cannot follow, which is logged. 0, or -1 with thr->err. */
int bk_thread_check_inputs(bk_thread_t *thr);
/* Recomputes tp.slot of slot from tp.parts. 0, or -1 without memory. */
int bk_thread_slot_tps(bk_thread_t *thr, int slot);
int bk_thread_start_kafka(bk_thread_t *thr);
/* 1 when a delivery failed or the producer failed for good (a fatal error: every produce
 * call fails from then on, a store's changelog write too), which sets thr->fail.delivery; 0
 * else. Asked when something raised: such an error is the thread's, not the record's
 * (run_loop drops the interval and does it again). */
int bk_thread_producer_broken(bk_thread_t *thr);
/* The producer's queued and in-flight records dropped, their (failed) delivery reports
 * served: before the DBs their changelog records name close. */
void bk_thread_purge_producer(bk_thread_t *thr);
/* The producer and its topic handles gone (what is queued is flushed for up to 5 s). */
void bk_thread_stop_producer(bk_thread_t *thr);
/* A new producer in place of the old (after bk_thread_purge_producer): a producer that
 * failed for good (a fatal idempotence error) is of no more use. 0, or -1 with thr->err. */
int bk_thread_renew_producer(bk_thread_t *thr);
int bk_thread_start_lua(bk_thread_t *thr);

/* Exactly-once (thread_txn.c). The producer's transactional id (engine/fence.h). */
void bk_thread_txn_id(const bk_thread_t *thr, char *out, size_t size);
/* A new transactional producer's transactions initialized (which fences an earlier producer
 * of the id and aborts what it left open) and the first begun. 0, or -1 with thr->fail.dr_err
 * (thr->txn.fenced when another producer took the id meanwhile). */
int bk_thread_txn_start(bk_thread_t *thr);
/* The errors that say another producer took this thread's transactional id. */
static inline int bk_thread_fenced_err(rd_kafka_resp_err_t code)
{
    return code == RD_KAFKA_RESP_ERR__FENCED || code == RD_KAFKA_RESP_ERR_PRODUCER_FENCED ||
           code == RD_KAFKA_RESP_ERR_INVALID_PRODUCER_EPOCH;
}
/* Ends the open transaction with `offsets` (NULL or empty: none; a dev broker's are
 * committed by the caller after it, since it does not store a transaction's) in it, and
 * begins the next.
 * 0; or -1 with thr->fail.delivery and dr_err set (thr->txn.fenced when fenced): the work since the
 * last commit is to be done again (bk_thread_redo), or never (fenced). */
int bk_thread_txn_commit(bk_thread_t *thr, rd_kafka_topic_partition_list_t *offsets);

/* The record path (thread_records.c). fill_batch: the n messages consumed (thr->batch.msgs)
 * turned into the batch (thr->io), a passthrough's forwarded; the batch's size, or -1
 * (thr->err). process_batch: Lua over the batch; 0, -1 when the thread must stop, -2 when
 * (exactly-once) a record's task is to be parked now. punctuate: the wall-clock
 * punctuations due at `now`; 0, or -1. */
int bk_thread_fill_batch(bk_thread_t *thr, int n);
int bk_thread_process_batch(bk_thread_t *thr, int n);
int bk_thread_punctuate(bk_thread_t *thr, int64_t now);

/* Opening jobs (thread_jobs.c), on the stream thread. Starts a job opening `n` slots (their
 * life at opening); 0, or -1 with thr->err. Polls the jobs: their tasks' life moved along,
 * on_restore fired, the done ones finished (bk_thread_job_finish: live, or opened again, or
 * the thread fails); 0, or -1 with thr->err. Joins the threads of finished jobs that were
 * still closing their consumers. */
int bk_thread_job_start(bk_thread_t *thr, const int32_t *slots, int n);
int bk_thread_jobs_poll(bk_thread_t *thr);
int bk_thread_job_finish(bk_thread_t *thr, bk_thread_job_t *job);
void bk_thread_jobs_reap(bk_thread_t *thr);
/* Slot s's DB back to the pool (kept open for its next owner only if `synced`), the slot
 * free (or parked, if marked so). */
void bk_thread_free_slot(bk_thread_t *thr, int s, int synced);
/* Calls the Lua function of registry ref `ref` with the slot's task; 0, or -1 with thr->err. */
int bk_thread_lua_slot(bk_thread_t *thr, int ref, int slot);
/* The tasks of `slots` as space-separated names, or as a JSON array (cut to fit); buf. */
const char *bk_thread_slot_names(bk_thread_t *thr, const int32_t *slots, int n, char *buf,
                                 size_t size);
const char *bk_thread_slot_json(bk_thread_t *thr, const int32_t *slots, int n, char *buf,
                                size_t size);
/* Wakes the stream thread out of its wait for input (thread_tasks.c). */
void bk_thread_wake_loop(bk_thread_t *thr);

/* Tasks coming and going (thread_tasks.c), on the stream thread: takes the changes asked
 * for and polls the opening jobs. 0, or -1 with thr->err (the thread then stops). */
int bk_thread_apply_changes(bk_thread_t *thr);
/* Stops and joins every opening job (at the thread's end); their DBs go back closed. */
void bk_thread_stop_jobs(bk_thread_t *thr);
/* After a delivery failed (thr->fail.delivery): the work since the last commit is dropped and
 * every task opens again from it with a new producer, as after a crash of this thread
 * alone (docs/reliability.md, A producer that fails for good). The `ngone` slots `gone` (leaving
 * the thread) close without opening again. 0, or -1 with thr->err when it cannot, or after
 * BK_THREAD_MAX_REDOS in a row without a commit between (the thread then stops). */
#define BK_THREAD_MAX_REDOS 5
int bk_thread_redo(bk_thread_t *thr, const int32_t *gone, int ngone);
/* How often a thread with a parked task reads <app>-skips for its record, and how old a
 * read a record that raises may be checked against. */
#define PARKED_CHECK_MS 3000
#define SKIPS_AGE_MS 1000
/* Closes the tasks marked parked that are still open: at-least-once, committed up to the
 * record before the one that failed (the others go on); exactly-once, the open transaction
 * is aborted (bk_thread_redo: the others start again from the last commit). 0, or -1 with
 * thr->err. */
int bk_thread_park(bk_thread_t *thr);
/* Opens again the parked tasks whose record `beck skip` listed since. 0, or -1 with
 * thr->err. */
int bk_thread_unpark_listed(bk_thread_t *thr);
/* Reads the committed offsets of n partitions (topics[i], partitions[i]) into offs[i] (-1
 * where none) through consumer, trying again for up to BK_RESTORE_OFFSETS_MS while the
 * errors pass (a coordinator loading or moving, a broker down) or until *stop; and when meta is not
 * NULL, their commits' metadata into meta[i] (malloc'd, NUL-terminated; NULL where none). 0, or -1
 * with err, or -2 with err when the error still passes (bk_kafka_retriable) after
 * BK_RESTORE_OFFSETS_MS. */
int bk_thread_read_committed(bk_thread_t *thr, rd_kafka_t *consumer, const char *const *topics,
                             const int32_t *partitions, int n, int64_t *offs, char **meta,
                             atomic_int *stop, char *err, size_t errsize);

/* The "last record" lines of slots' input partitions, after a commit that covered them. */
void bk_thread_log_last(bk_thread_t *thr, const int32_t *slots, int n);

/* The input offsets of slot s (next to read, -1: none), in the order of its input
 * partitions; their count. */
int bk_thread_task_inputs(const bk_thread_t *thr, int s, int64_t *offs);

/* Commit (thread_commit.c): flush, commit offsets, sync the stores, mark (thread.h has the
 * order). 0; 1 if the offset commit failed (not fatal: nothing was synced, the next commit
 * carries it all); -1 with the reason logged (the node then stops without committing). */
int bk_thread_commit(bk_thread_t *thr);
/* The same for some tasks only (those leaving the thread): the record cache and the
 * producer are flushed whole, but only their offsets are committed, their stores synced
 * and checkpointed and their markers written; the others' wait for the next commit. A
 * task leaves at the cost of its own fsyncs, not of every task's. */
int bk_thread_commit_tasks(bk_thread_t *thr, const int32_t *slots, int n);
/* Makes the snapshots asked for (bk_thread_request_snapshot), right after a commit. */
void bk_thread_make_snapshots(bk_thread_t *thr);

#endif
