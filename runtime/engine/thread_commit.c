/* thread_commit.c - a stream thread's commit (thread.h gives the order; exactly-once's
 * transactions are thread_txn.c's),
 * the commit markers written into its changelogs, the progress it reports, and the
 * snapshot mailbox through which cold bootstrap asks it for snapshots. Runs on the stream
 * thread, except bk_thread_request_snapshot and bk_thread_take_snapshot (any thread, under
 * snap.lock). */
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>
#include <librdkafka/rdkafka.h>

#include "base/clock.h"
#include "base/ffi.h"
#include "base/log.h"
#include "base/task.h"
#include "engine/changelog.h"
#include "engine/db.h"
#include "engine/kafka.h"
#include "engine/restore.h"
#include "engine/snapshot.h"
#include "engine/store.h"
#include "engine/taskdb.h"
#include "engine/thread_internal.h"
#include "engine/vm.h"

/* Exactly-once: how often the DBs are synced and checkpointed (commit_exactly_once). */
#define EOS_CHECKPOINT_MS 5000

/* Each committed task's input lag for /metrics: the records past its next offsets, by the
 * partitions' ends as the consumer last heard them (no request to the broker). */
static void report_lag(bk_thread_t *thr, const int32_t *slots, int nslots)
{
    for (int k = 0; thr->live && k < nslots; k++) {
        int t = slots[k];
        int64_t lag = 0, lo, hi;
        for (int j = 0; j < thr->tp.nslot[t]; j++) {
            int tp = thr->tp.slot[t][j];
            if (thr->tp.next[tp] < 0 ||
                rd_kafka_get_watermark_offsets(thr->kafka.consumer,
                                               thr->plan->topics[thr->tp.topic[tp]].name,
                                               thr->tp.partition[tp], &lo, &hi) != 0 ||
                hi < 0) {
                lag = -1;
                break;
            }
            lag += hi > thr->tp.next[tp] ? hi - thr->tp.next[tp] : 0;
        }
        bk_livestats_set(&thr->live->task[t].lag, lag);
    }
}

static void report_progress(bk_thread_t *thr, const int32_t *slots, int nslots)
{
    report_lag(thr, slots, nslots);
    if (!thr->cb.progress) {
        return;
    }
    for (int k = 0; k < nslots; k++) {
        int t = slots[k];
        thr->cb.progress(thr->cb.progress_opaque, t,
                         thr->tp.nslot[t] > 0 ? thr->tp.next[thr->tp.slot[t][0]] : -1);
    }
}

/* After an offset commit: a commit marker in each changelog of each task whose input moved
 * or whose stores wrote since their last marker (a punctuation, with no input), so that
 * standbys and restores apply the writes before it (store.h, Markers). A restore dropped
 * a punctuation's writes as uncommitted before: nothing ever marked them. */
static int write_markers(bk_thread_t *thr, const int32_t *slots, int nslots)
{
    for (int k = 0; k < nslots; k++) {
        int t = slots[k];
        int64_t offs[BK_STORE_MAX_INPUTS];
        int dirty = 0, n;
        if (!thr->dbs[t]) {
            continue;
        }
        for (int j = 0; j < thr->tp.nslot[t]; j++) {
            dirty |= thr->tp.dirty[thr->tp.slot[t][j]];
        }
        for (int s = 0; !dirty && s < thr->plan->nstores; s++) {
            dirty = thr->store_of[t][s] && bk_store_unmarked(thr->store_of[t][s]);
        }
        if (!dirty) {
            continue;
        }
        n = bk_thread_task_inputs(thr, t, offs);
        for (int s = 0; s < thr->plan->nstores; s++) {
            bk_store_t *st = thr->store_of[t][s];
            /* (a later generation's dedup table first: the marker settles it too) */
            if (st && bk_store_logged(st) &&
                (bk_changelog_write_dedup(st) != 0 ||
                 bk_changelog_write_marker(st, 1, offs, n) != 0)) {
                bk_log_error("%s: %s", thr->name, bk_ffi_store_error(st));
                return -1;
            }
        }
    }
    return 0;
}

/* 1. the record cache: dirty entries to the stores and their changelogs. 0, or -1. */
static int flush_cache(bk_thread_t *thr)
{
    char err[1024];
    if (thr->ref.flush == LUA_NOREF) {
        return 0;
    }
    lua_rawgeti(thr->L, LUA_REGISTRYINDEX, thr->ref.flush);
    if (bk_vm_pcall(thr->L, 0, 2, 1, err, sizeof(err)) != 0) {
        bk_log_error("%s: flushing the record cache failed: %s; not committing", thr->name, err);
        return -1;
    }
    /* the cache's gets since the last commit: answered, and sent to the stores */
    if (thr->live && thr->index < thr->live->nthreads) {
        bk_livestats_thread_t *ls = &thr->live->thread[thr->index];
        bk_livestats_add(&ls->cache_hits, (uint64_t)lua_tointeger(thr->L, -2));
        bk_livestats_add(&ls->cache_misses, (uint64_t)lua_tointeger(thr->L, -1));
    }
    lua_pop(thr->L, 2);
    return 0;
}

/* The input offsets to commit of the tasks in slots: those that moved (all: every one known,
 * moved or not). */
static rd_kafka_topic_partition_list_t *offsets_of(bk_thread_t *thr, const int32_t *slots,
                                                   int nslots, int all)
{
    rd_kafka_topic_partition_list_t *list = rd_kafka_topic_partition_list_new(nslots + 1);
    for (int k = 0; k < nslots; k++) {
        int t = slots[k];
        for (int j = 0; j < thr->tp.nslot[t]; j++) {
            int i = thr->tp.slot[t][j];
            if (thr->tp.dirty[i] || (all && thr->tp.next[i] >= 0)) {
                rd_kafka_topic_partition_t *e = rd_kafka_topic_partition_list_add(
                    list, thr->plan->topics[thr->tp.topic[i]].name, thr->tp.partition[i]);
                char *meta = bk_thread_moves_meta(thr, t);
                e->offset = thr->tp.next[i];
                if (meta) { /* the list frees it */
                    e->metadata = meta;
                    e->metadata_size = strlen(meta);
                }
            }
        }
    }
    return list;
}

/* 4. the stores' writes durable, 5. checkpoints of the changelog offsets and of the input
 * offsets that state corresponds to (the ones just committed). durable 0 (exactly-once
 * between its checkpoints): the writes go to the DBs without a synced WAL and without a
 * checkpoint. 0, or -1 (logged). */
static int sync_stores(bk_thread_t *thr, const int32_t *slots, int nslots, int durable)
{
    char err[1024];
    for (int k = 0; k < nslots; k++) {
        int t = slots[k];
        int64_t offs[BK_STORE_MAX_INPUTS];
        int n = thr->dbs[t] ? bk_thread_task_inputs(thr, t, offs) : 0;
        for (int s = 0; thr->dbs[t] && s < thr->plan->nstores; s++) {
            if (thr->store_of[t][s]) {
                bk_store_set_input(thr->store_of[t][s], offs, n);
            }
        }
        if (thr->dbs[t] && (bk_db_commit_sync(thr->dbs[t], durable, err, sizeof(err)) != 0 ||
                            (durable && bk_db_checkpoint(thr->dbs[t], err, sizeof(err)) != 0))) {
            bk_log_error("%s: task %s: %s; stopping (its changelog holds what its DB lacks)",
                         thr->name, BK_TASK_NAME(thr->tasks[t]), err);
            return -1;
        }
    }
    return 0;
}

/* Commits input offsets and waits for the group coordinator's answer, but not past the
 * node's lease nor a stop's wait: rd_kafka_commit() waits as long as no coordinator answers
 * (a stop while every broker was down hung for 34 minutes). A commit given up on may still
 * land later: as if the node died between the offset commit and its stores' sync, which
 * the markers settle (docs/state.md). */
static rd_kafka_resp_err_t commit_offsets(bk_thread_t *thr, rd_kafka_topic_partition_list_t *list)
{
    rd_kafka_queue_t *q = rd_kafka_queue_new(thr->kafka.consumer);
    rd_kafka_resp_err_t err = rd_kafka_commit_queue(thr->kafka.consumer, list, q, NULL, NULL);
    while (!err) {
        rd_kafka_event_t *ev = rd_kafka_queue_poll(q, 100);
        if (ev) {
            const rd_kafka_topic_partition_list_t *done = rd_kafka_event_topic_partition_list(ev);
            err = rd_kafka_event_error(ev);
            for (int i = 0; !err && done && i < done->cnt; i++) {
                err = done->elems[i].err;
            }
            rd_kafka_event_destroy(ev);
            break;
        }
        if (!bk_node_leased(thr->flags, bk_clock_wall_ms()) ||
            bk_node_stop_overdue(thr->flags, bk_clock_mono_ms())) {
            err = RD_KAFKA_RESP_ERR__TIMED_OUT;
        }
    }
    rd_kafka_queue_destroy(q);
    return err;
}

/* At-least-once: offsets are committed only once everything the records before them
 * caused has been acknowledged by the brokers, and a DB never holds the writes of input
 * whose offsets are not committed. Steps 3-6 cover the tasks in slots (all the live ones,
 * or only those leaving the thread). Under exactly-once on a dev broker the same, with the
 * transaction's commit for the producer's flush (it stores no offsets of a transaction). */
static int commit_at_least_once(bk_thread_t *thr, const int32_t *slots, int nslots, int64_t *t1,
                                int64_t *t2)
{
    rd_kafka_topic_partition_list_t *list;
    rd_kafka_resp_err_t kerr = RD_KAFKA_RESP_ERR_NO_ERROR;

    /* 2. the producer: outputs and changelog records acknowledged */
    if (thr->eos) {
        if (bk_thread_txn_commit(thr, NULL) != 0) {
            bk_log_error("%s: %s; not committing input offsets", thr->name, thr->fail.dr_err);
            return -1;
        }
    }
    while (rd_kafka_outq_len(thr->kafka.producer) > 0 && !thr->fail.delivery) {
        /* while no broker answers this waits (librdkafka retries until message.timeout.ms):
         * not past the lease, nor past a stop's wait */
        if (!bk_node_leased(thr->flags, bk_clock_wall_ms()) ||
            bk_node_stop_overdue(thr->flags, bk_clock_mono_ms())) {
            return 1; /* nothing committed; the writes stay in their batches */
        }
        rd_kafka_flush(thr->kafka.producer, 500);
    }
    if (thr->fail.delivery) {
        bk_log_error("%s: %s; not committing input offsets", thr->name, thr->fail.dr_err);
        return -1;
    }
    *t1 = bk_clock_mono_ms();
    /* 3. input offsets. Before the stores are synced: a node that dies between the two has
     * its changelog records of that input after its last marker and its committed offsets
     * past it, so whoever restores keeps them (docs/state.md, Markers). The other order
     * left a window where a DB was ahead of the committed input, which then counted twice
     * (spec/02-integration/04-state_spec.lua caught it: 82,960 of 1,000,000 updates). */
    if (!bk_node_leased(thr->flags, bk_clock_wall_ms())) {
        return 1; /* it ran out during the flush (a node frozen in mid-commit) */
    }
    list = offsets_of(thr, slots, nslots, 0);
    if (list->cnt > 0) {
        kerr = commit_offsets(thr, list);
    }
    rd_kafka_topic_partition_list_destroy(list);
    if (kerr) {
        /* Not fatal: the next commit carries the same offsets. Until then the writes stay
         * in the stores' batches, not in the DBs. */
        bk_log_warn("%s: offset commit failed: %s", thr->name, rd_kafka_err2str(kerr));
        return 1;
    }
    *t2 = bk_clock_mono_ms();
    /* 4, 5 */
    if (sync_stores(thr, slots, nslots, 1) != 0) {
        return -1;
    }
    /* 6. commit markers of the tasks whose input moved */
    return write_markers(thr, slots, nslots) != 0 ? -1 : 0;
}

/* Exactly-once on a real cluster: the markers, then the input offsets, in the open
 * transaction, which the commit ends: the outputs, changelog writes, markers and offsets
 * of the interval become visible to read_committed readers together, or not at all. Only
 * then the DBs: a node that dies between the two restores its DBs from their checkpoints
 * through the committed changelog, up to the marker, to the state of the committed
 * offsets; one that dies before the commit leaves an open transaction that the next
 * producer of its id, or its timeout, aborts, and DBs at the last commit. */
static int commit_exactly_once(bk_thread_t *thr, const int32_t *slots, int nslots, int release,
                               int64_t *t1, int64_t *t2)
{
    rd_kafka_topic_partition_list_t *list;
    int rc;

    /* 2. commit markers of the tasks whose input moved (their offsets are those below) */
    if (write_markers(thr, slots, nslots) != 0) {
        return -1;
    }
    *t1 = bk_clock_mono_ms();
    /* 3. the input offsets, and the transaction's commit. A release sends every offset,
     * moved or not: a transaction without records or offsets ends in the client alone, and
     * a release is where a node that was taken for dead must learn that it was fenced */
    if (!bk_node_leased(thr->flags, bk_clock_wall_ms())) {
        return 1; /* the transaction stays open: committed by the next commit, if any */
    }
    list = offsets_of(thr, slots, nslots, release);
    rc = bk_thread_txn_commit(thr, list);
    rd_kafka_topic_partition_list_destroy(list);
    if (rc != 0) {
        bk_log_error("%s: %s; nothing since the last commit is committed", thr->name,
                     thr->fail.dr_err);
        return -1;
    }
    *t2 = bk_clock_mono_ms();
    /* 4, 5. The committed changelog holds every write of the transaction, so a DB need not
     * be synced and checkpointed at each commit (at 100 ms, three fsyncs a task a commit
     * were most of the time: 64 tasks ran at 0.16 of at-least-once's rate). It is every
     * EOS_CHECKPOINT_MS, at a release and at the last commit, and a snapshot's. Between,
     * a crash leaves a DB somewhere between its checkpoint and the committed changelog;
     * the restore replays the changelog from the checkpoint, and writing a key's committed
     * records again in order ends at the same value (docs/state.md, Exactly once). */
    int64_t now = bk_clock_mono_ms();
    int durable = release || thr->snap.wanted || thr->flags->stop ||
                  now - thr->txn.checkpoint_ms >= EOS_CHECKPOINT_MS;
    if (sync_stores(thr, slots, nslots, durable) != 0) {
        return -1;
    }
    if (durable) {
        thr->txn.checkpoint_ms = now;
    }
    return 0;
}

#define SLOW_COMMIT_MS 250 /* a commit this long is logged */

static int commit_steps(bk_thread_t *thr, const int32_t *slots, int nslots, int release)
{
    int64_t t0 = bk_clock_mono_ms(), t1 = t0, t2 = t0;
    int rc;

    /* Without the node's lease another node may run these tasks already: nothing is
     * committed, the writes stay in their batches (thread.h, bk_node_flags_t) */
    if (!bk_node_leased(thr->flags, bk_clock_wall_ms())) {
        return 1;
    }
    /* 1. the record cache: dirty entries to the stores and their changelogs */
    if (flush_cache(thr) != 0) {
        return -1;
    }
    rc = thr->eos && !bk_kafka_dev_broker()
             ? commit_exactly_once(thr, slots, nslots, release, &t1, &t2)
             : commit_at_least_once(thr, slots, nslots, &t1, &t2);
    if (rc != 0) {
        return rc;
    }
    for (int k = 0; k < nslots; k++) {
        int t = slots[k];
        for (int j = 0; j < thr->tp.nslot[t]; j++) {
            thr->tp.dirty[thr->tp.slot[t][j]] = 0;
        }
    }
    thr->stats.commits++;
    report_progress(thr, slots, nslots);
    thr->commit.took[0] = t1 - t0;
    thr->commit.took[1] = bk_clock_mono_ms() - t2;
    thr->commit.took[2] = t2 - t1;
    if (bk_clock_mono_ms() - t0 >= SLOW_COMMIT_MS) {
        /* everything this thread runs waited for it: said, with where the time went */
        bk_log_info("%s: a commit took %lld ms (outputs flushed in %lld, offsets in %lld, "
                    "stores in %lld)",
                    thr->name, (long long)(bk_clock_mono_ms() - t0), (long long)(t1 - t0),
                    (long long)(t2 - t1), (long long)(bk_clock_mono_ms() - t2));
    }
    if (thr->live && thr->index < thr->live->nthreads) {
        bk_livestats_thread_t *ls = &thr->live->thread[thr->index];
        int64_t took = bk_clock_mono_ms() - t0;
        bk_livestats_add(&ls->commits, 1);
        bk_livestats_add(&ls->commit_ms, (uint64_t)took);
        bk_livestats_set(&ls->last_commit_ms, took);
    }
    return 0;
}

/* A commit that failed on the producer leaves nothing half-done that a later commit could
 * build on: the thread drops the interval and starts its tasks again (bk_thread_redo). Any
 * other failure (a store's write or checkpoint) ends the thread's commits. */
int bk_thread_commit(bk_thread_t *thr)
{
    int rc = commit_steps(thr, thr->owned, thr->ntasks, 0);
    if (rc < 0 && !bk_thread_producer_broken(thr)) {
        thr->fail.commit = 1;
    }
    return rc;
}

int bk_thread_commit_tasks(bk_thread_t *thr, const int32_t *slots, int n)
{
    /* under exactly-once the transaction holds every task's outputs: all commit, or none */
    int rc =
        thr->eos ? commit_steps(thr, thr->owned, thr->ntasks, 1) : commit_steps(thr, slots, n, 0);
    if (rc < 0 && !bk_thread_producer_broken(thr)) {
        thr->fail.commit = 1;
    }
    return rc;
}

/* Makes the snapshots asked for. Called right after a commit: no write is in a batch, and
 * the stores' changelog and input offsets are those of that commit. */
void bk_thread_make_snapshots(bk_thread_t *thr)
{
    bk_snapshot_made_t reqs[BK_SNAPSHOT_REQUESTS];
    int n;
    char root[4096];

    pthread_mutex_lock(&thr->snap.lock);
    n = thr->snap.nreq;
    memcpy(reqs, thr->snap.req, (size_t)n * sizeof(*reqs));
    thr->snap.nreq = 0;
    thr->snap.wanted = 0;
    pthread_mutex_unlock(&thr->snap.lock);
    bk_plan_snapshot_dir(thr->plan, thr->conf, root, sizeof(root));
    for (int i = 0; i < n; i++) {
        bk_snapshot_made_t *r = &reqs[i];
        int t =
            r->id >= 0 && r->id < thr->cap && bk_tasklife_running(&thr->life, r->id) ? r->id : -1;
        r->ok = 0;
        if (t < 0 || !thr->dbs[t]) {
            snprintf(r->err, sizeof(r->err), "task not active on this thread, or without state");
        } else {
            bk_manifest_t m;
            char name[32], dir[4096];
            int64_t t0 = bk_clock_wall_ms();
            snprintf(name, sizeof(name), "%s", BK_TASK_NAME(thr->tasks[t]));
            if (bk_snapshot_make(thr->dbs[t], name, root, &m, dir, sizeof(dir), r->err,
                                 sizeof(r->err)) == 0) {
                r->ok = 1;
                if (!realpath(dir, r->dir)) {
                    snprintf(r->dir, sizeof(r->dir), "%s", dir);
                }
                bk_log_info("task %s: snapshot %s for %s: %d file(s), %llu bytes, in %lld ms", name,
                            m.id, r->req, m.nfiles, (unsigned long long)m.total_bytes,
                            (long long)(bk_clock_wall_ms() - t0));
                bk_manifest_free(&m);
            }
        }
        if (!r->ok) {
            /* a task that left the thread since it was asked (a move, a handoff) is no fault:
             * the asker asks its active then */
            bk_log(t < 0 ? BK_LOG_INFO : BK_LOG_WARN, "%s: snapshot for %s failed: %s", thr->name,
                   r->req, r->err);
        }
        pthread_mutex_lock(&thr->snap.lock);
        if (thr->snap.ndone < BK_SNAPSHOT_REQUESTS) {
            thr->snap.done[thr->snap.ndone++] = *r;
        }
        pthread_mutex_unlock(&thr->snap.lock);
    }
}

int bk_thread_request_snapshot(bk_thread_t *thr, int32_t id, const char *req)
{
    int rc = -1;
    /* whether this thread runs the task is the thread's to say when it makes the snapshot:
     * the caller (the crew) asks the thread it gave the task to */
    pthread_mutex_lock(&thr->snap.lock);
    if (thr->snap.nreq < BK_SNAPSHOT_REQUESTS) {
        bk_snapshot_made_t *r = &thr->snap.req[thr->snap.nreq++];
        memset(r, 0, sizeof(*r));
        r->id = id;
        snprintf(r->req, sizeof(r->req), "%s", req);
        thr->snap.wanted = 1;
        rc = 0;
    }
    pthread_mutex_unlock(&thr->snap.lock);
    return rc;
}

int bk_thread_take_snapshot(bk_thread_t *thr, bk_snapshot_made_t *out)
{
    int got = 0;
    pthread_mutex_lock(&thr->snap.lock);
    if (thr->snap.ndone > 0) {
        *out = thr->snap.done[0];
        memmove(thr->snap.done, thr->snap.done + 1, (size_t)(thr->snap.ndone - 1) * sizeof(*out));
        thr->snap.ndone--;
        got = 1;
    }
    pthread_mutex_unlock(&thr->snap.lock);
    return got;
}
