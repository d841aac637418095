/* thread_tasks.c - tasks that come and go while a stream thread runs (thread.h).
 *
 * The node asks (bk_thread_add_tasks, bk_thread_remove_tasks, from its own thread); the
 * stream thread takes the asks at the top of its loop, between batches:
 * - An added task opens in the background, in a job (thread_jobs.c), and goes live when
 *   the job is done.
 * - A removed task's processors close, the thread commits, its partitions leave the
 *   consumer (incremental unassign) and its DB goes back to the node's pool, open. Only
 *   then is the node told, so that it may publish the task's release.
 * Nothing else of the thread stops: the other tasks' processors, stores, clients and VM
 * stay as they are. */
#define _GNU_SOURCE /* pthread_tryjoin_np */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <lauxlib.h>
#include <librdkafka/rdkafka.h>

#include "base/clock.h"
#include "base/events.h"
#include "base/ffi.h"
#include "base/log.h"
#include "base/task.h"
#include "engine/changelog.h"
#include "engine/db.h"
#include "engine/dedup.h"
#include "engine/kafka.h"
#include "engine/restore.h"
#include "engine/skips.h"
#include "engine/store.h"
#include "engine/taskdb.h"
#include "engine/thread_internal.h"
#include "engine/vm.h"

/* -- Asks, from the node's thread --------------------------------------------------------- */

void bk_thread_wake_loop(bk_thread_t *thr)
{
    if (thr->kafka.queue_ready) {
        rd_kafka_queue_yield(thr->kafka.queue); /* out of its blocking consume at once */
    }
}

void bk_thread_add_tasks(bk_thread_t *thr, const int32_t *ids, int n, uint64_t epoch)
{
    pthread_mutex_lock(&thr->box.lock);
    for (int i = 0; i < n; i++) {
        if (ids[i] >= 0 && ids[i] < thr->cap && thr->box.nadd < thr->cap) {
            thr->box.add_epoch[thr->box.nadd] = epoch;
            thr->box.add[thr->box.nadd++] = ids[i];
        }
    }
    thr->box.pending = 1;
    pthread_mutex_unlock(&thr->box.lock);
    bk_thread_wake_loop(thr);
}

uint64_t bk_thread_remove_tasks(bk_thread_t *thr, const int32_t *ids, int n)
{
    uint64_t ticket;

    pthread_mutex_lock(&thr->box.lock);
    for (int i = 0; i < n; i++) {
        /* an addition not taken yet is taken back: the thread takes removals before
         * additions, so it would open the task after this removal found nothing to remove
         * (a task given and taken back by two views in a row, or held and started just
         * before the view that gave it up) */
        for (int j = 0; j < thr->box.nadd; j++) {
            if (thr->box.add[j] == ids[i]) {
                thr->box.nadd--;
                memmove(&thr->box.add[j], &thr->box.add[j + 1],
                        (size_t)(thr->box.nadd - j) * sizeof(thr->box.add[0]));
                memmove(&thr->box.add_epoch[j], &thr->box.add_epoch[j + 1],
                        (size_t)(thr->box.nadd - j) * sizeof(thr->box.add_epoch[0]));
                j--;
            }
        }
        if (ids[i] >= 0 && ids[i] < thr->cap && thr->box.nrm < thr->cap) {
            thr->box.rm[thr->box.nrm++] = ids[i];
        }
    }
    ticket = ++thr->box.asked;
    thr->box.pending = 1;
    pthread_mutex_unlock(&thr->box.lock);
    bk_thread_wake_loop(thr);
    return ticket;
}

int bk_thread_wait_removed(bk_thread_t *thr, uint64_t ticket)
{
    int rc;
    pthread_mutex_lock(&thr->box.lock);
    while (thr->box.done < ticket && !thr->run.done) {
        pthread_cond_wait(&thr->box.cond, &thr->box.lock);
    }
    rc = thr->box.done >= ticket ? 0 : -1; /* the thread ended first: it failed or was stopped */
    pthread_mutex_unlock(&thr->box.lock);
    return rc;
}

/* -- Offsets -------------------------------------------------------------------------------- */

int bk_thread_task_inputs(const bk_thread_t *thr, int s, int64_t *offs)
{
    int n = thr->tp.nslot[s] < BK_STORE_MAX_INPUTS ? thr->tp.nslot[s] : BK_STORE_MAX_INPUTS;
    for (int j = 0; j < n; j++) {
        offs[j] = thr->tp.next[thr->tp.slot[s][j]];
    }
    return n;
}

/* The error of an offset fetch: the request's, else the first partition's. A partition's
 * own error (its coordinator loading, an open transaction holding its offsets) is no answer:
 * taken for "nothing committed", the task would start from auto.offset.reset. */
static rd_kafka_resp_err_t committed_err(rd_kafka_resp_err_t err,
                                         const rd_kafka_topic_partition_list_t *list)
{
    for (int i = 0; !err && i < list->cnt; i++) {
        err = list->elems[i].err;
    }
    return err;
}

int bk_thread_read_committed(bk_thread_t *thr, rd_kafka_t *consumer, const char *const *topics,
                             const int32_t *partitions, int n, int64_t *offs, char **meta,
                             atomic_int *stop, char *err, size_t errsize)
{
    rd_kafka_topic_partition_list_t *list = rd_kafka_topic_partition_list_new(n + 1);
    rd_kafka_resp_err_t kerr;
    int64_t give_up = bk_clock_mono_ms() + BK_RESTORE_OFFSETS_MS, backoff = 50;

    for (int i = 0; i < n; i++) {
        offs[i] = -1;
        rd_kafka_topic_partition_list_add(list, topics[i], partitions[i])->opaque =
            (void *)(intptr_t)i;
    }
    for (;;) {
        kerr = list->cnt > 0 ? committed_err(rd_kafka_committed(consumer, list, 10000), list) : 0;
        if (!kerr || !bk_kafka_retriable(kerr) || bk_clock_mono_ms() + backoff > give_up ||
            (stop && *stop)) {
            break;
        }
        bk_log_debug("%s: reading committed offsets: %s: again in %lld ms", thr->name,
                     rd_kafka_err2str(kerr), (long long)backoff);
        bk_clock_sleep_ms(backoff);
        backoff = backoff < 1000 ? backoff * 2 : 1000;
    }
    for (int i = 0; !kerr && i < list->cnt; i++) {
        const rd_kafka_topic_partition_t *e = &list->elems[i];
        int at = (int)(intptr_t)e->opaque;
        offs[at] = e->offset >= 0 ? e->offset : -1;
        if (meta && e->metadata && e->metadata_size > 0 &&
            (meta[at] = malloc(e->metadata_size + 1)) != NULL) {
            memcpy(meta[at], e->metadata, e->metadata_size);
            meta[at][e->metadata_size] = '\0';
        }
    }
    rd_kafka_topic_partition_list_destroy(list);
    if (kerr) {
        snprintf(err, errsize, "cannot read the committed input offsets: %s",
                 rd_kafka_err2str(kerr));
        return bk_kafka_retriable(kerr) && !(stop && *stop) ? -2 : -1;
    }
    return 0;
}

/* -- Leaving, on the stream thread ---------------------------------------------------------- */

static int owned_index(const bk_thread_t *thr, int slot)
{
    for (int k = 0; k < thr->ntasks; k++) {
        if (thr->owned[k] == slot) {
            return k;
        }
    }
    return -1;
}

/* Removes live tasks: close, commit, unassign, last-record lines, DBs back to the pool. */
static int remove_live(bk_thread_t *thr, const int32_t *slots, int n)
{
    rd_kafka_topic_partition_list_t *list;
    rd_kafka_error_t *kerr;
    int64_t t0 = bk_clock_wall_ms();
    char names[512];

    if (!bk_node_leased(thr->flags, t0)) {
        /* The node's lease ran out (a node lost, frozen past its session): another node may
         * run these tasks already, from their last commit. Committing now would write what
         * this one did since over that one's work. They leave as in a crash, and so does
         * every task of the thread: its producer's queue, shared by them all, is dropped
         * (the others start again from their last commit, and wait for the lease). */
        int rc;
        snprintf(thr->fail.dr_err, sizeof(thr->fail.dr_err),
                 "the node's lease ran out: task(s) %s released without committing (another "
                 "node may run them already)",
                 bk_thread_slot_names(thr, slots, n, names, sizeof(names)));
        thr->fail.redo_unleased = 1;
        rc = bk_thread_redo(thr, slots, n);
        thr->fail.redo_unleased = 0;
        return rc;
    }
    for (int k = 0; k < n; k++) {
        if (bk_thread_lua_slot(thr, thr->ref.close_task, slots[k]) != 0) {
            bk_log_error("%s: closing task %s: %s", thr->name, BK_TASK_NAME(thr->tasks[slots[k]]),
                         thr->err);
        }
    }
    /* what they did so far, flushed and committed: the task's next owner starts from here
     * (the others' part waits for the thread's next commit) */
    int crc = bk_thread_commit_tasks(thr, slots, n);
    if (crc < 0) {
        snprintf(thr->err, sizeof(thr->err), "the commit before releasing task(s) %s failed",
                 bk_thread_slot_names(thr, slots, n, names, sizeof(names)));
        return -1;
    }
    /* The commit's last step wrote markers into the changelogs, whose delivery reports name
     * their store (dr_msg_cb): they are served here, before the DBs go to the pool, where
     * the node may close them (make test SAN=1 caught a report landing in a closed store).
     * Undelivered, the thread fails and keeps the DBs until its producer is gone. */
    while (rd_kafka_outq_len(thr->kafka.producer) > 0 && !thr->fail.delivery &&
           bk_node_leased(thr->flags, bk_clock_wall_ms()) &&
           !bk_node_stop_overdue(thr->flags, bk_clock_mono_ms())) {
        rd_kafka_flush(thr->kafka.producer, 500);
    }
    if (thr->fail.delivery) {
        snprintf(thr->err, sizeof(thr->err), "releasing task(s) %s: %s",
                 bk_thread_slot_names(thr, slots, n, names, sizeof(names)), thr->fail.dr_err);
        return -1;
    }
    if (crc == 0) {
        bk_thread_log_last(thr, slots, n); /* "last record ..., committed" */
    }
    list = rd_kafka_topic_partition_list_new(n + 1);
    for (int k = 0; k < n; k++) {
        int slot = slots[k], at = owned_index(thr, slot);
        for (int j = 0; j < thr->tp.nslot[slot]; j++) {
            int tp = thr->tp.slot[slot][j], t = thr->tp.topic[tp], p = thr->tp.partition[tp];
            rd_kafka_topic_partition_list_add(list, thr->plan->topics[t].name, p);
            thr->tp.task_of[t][p] = thr->tp.of[t][p] = -1; /* what is still queued is dropped */
        }
        if (bk_thread_lua_slot(thr, thr->ref.drop_task, slot) != 0) {
            bk_log_error("%s: dropping task %s: %s", thr->name, BK_TASK_NAME(thr->tasks[slot]),
                         thr->err);
        }
        bk_thread_free_slot(thr, slot,
                            crc == 0); /* open for the next owner if its writes are synced */
        if (at >= 0) {
            thr->owned[at] = thr->owned[--thr->ntasks];
        }
    }
    kerr = rd_kafka_incremental_unassign(thr->kafka.consumer, list);
    rd_kafka_topic_partition_list_destroy(list);
    if (kerr) {
        snprintf(thr->err, sizeof(thr->err), "cannot unassign the partitions of task(s) %s: %s",
                 bk_thread_slot_names(thr, slots, n, names, sizeof(names)),
                 rd_kafka_error_string(kerr));
        rd_kafka_error_destroy(kerr);
        return -1;
    }
    if (crc > 0) {
        /* the offsets were not committed (the commit failed, or the lease ran out during
         * it): the DBs closed without the interval, whose input the next owner processes */
        bk_log_warn("%s: released task(s) %s in %lld ms: closed, not committed (their input "
                    "since the last commit is processed again); running %d task(s)",
                    thr->name, bk_thread_slot_names(thr, slots, n, names, sizeof(names)),
                    (long long)(bk_clock_wall_ms() - t0), thr->ntasks);
        {
            char tasks[6500];
            bk_events_emit(
                "released", "\"thread\":\"%s\",\"tasks\":%s,\"committed\":false,\"running\":%d",
                thr->name, bk_thread_slot_json(thr, slots, n, tasks, sizeof(tasks)), thr->ntasks);
        }
        return 0;
    }
    bk_log_info("%s: released task(s) %s in %lld ms: closed, committed (outputs flushed in %lld "
                "ms, stores synced and marked in %lld, offsets in %lld); running %d task(s)",
                thr->name, bk_thread_slot_names(thr, slots, n, names, sizeof(names)),
                (long long)(bk_clock_wall_ms() - t0), (long long)thr->commit.took[0],
                (long long)thr->commit.took[1], (long long)thr->commit.took[2], thr->ntasks);
    {
        char tasks[6500];
        bk_events_emit(
            "released", "\"thread\":\"%s\",\"tasks\":%s,\"committed\":true,\"running\":%d",
            thr->name, bk_thread_slot_json(thr, slots, n, tasks, sizeof(tasks)), thr->ntasks);
    }
    return 0;
}

static int in_list(const int32_t *list, int n, int32_t v)
{
    for (int i = 0; i < n; i++) {
        if (list[i] == v) {
            return 1;
        }
    }
    return 0;
}

int bk_thread_redo(bk_thread_t *thr, const int32_t *gone, int ngone)
{
    rd_kafka_topic_partition_list_t *list;
    rd_kafka_error_t *kerr;
    int32_t *again = calloc((size_t)thr->cap + 1, sizeof(int32_t)), *live;
    int nagain = 0, nlive = thr->ntasks;
    char why[sizeof(thr->fail.dr_err)], names[512];

    snprintf(why, sizeof(why), "%s", thr->fail.dr_err);
    bk_thread_producer_broken(thr); /* fenced? */
    if (!again || !(live = calloc((size_t)nlive + 1, sizeof(int32_t)))) {
        free(again);
        snprintf(thr->err, sizeof(thr->err), "%s; out of memory to start again", why);
        return -1;
    }
    /* (a lost lease is the membership's doing, not a producer failing again and again: it
     * does not count) */
    if (!thr->txn.fenced && !thr->fail.redo_unleased && !thr->park.parking &&
        ++thr->fail.redos > BK_THREAD_MAX_REDOS) {
        snprintf(thr->err, sizeof(thr->err),
                 "%s; the tasks started again from their last commit %d times in a row "
                 "without committing since: stopping",
                 why, BK_THREAD_MAX_REDOS);
        free(again);
        free(live);
        return -1;
    }
    memcpy(live, thr->owned, (size_t)nlive * sizeof(int32_t));
    for (int s = 0; s < thr->cap; s++) {
        if (bk_tasklife_state(&thr->life, s) > BK_LIFE_PARKED && !in_list(gone, ngone, s)) {
            again[nagain++] = s;
        }
    }
    /* 1. what processors forward from close() goes the way of the rest: dropped */
    for (int k = 0; k < nlive; k++) {
        if (bk_thread_lua_slot(thr, thr->ref.close_task, live[k]) != 0) {
            bk_log_error("%s: closing task %s: %s", thr->name, BK_TASK_NAME(thr->tasks[live[k]]),
                         thr->err);
        }
    }
    /* 2. the opening ones stop (their DBs close; nothing of them was written) and what the
     * producer holds is dropped, its reports served while the stores they name are open */
    bk_thread_stop_jobs(thr);
    bk_thread_purge_producer(thr);
    /* 3. the live ones leave as in a crash: no commit, the DB closed without the interval's
     * write batch, so it is the last commit's; their partitions leave the consumer, and
     * what it still had queued of them is dropped with their old assignment */
    list = rd_kafka_topic_partition_list_new(nlive * 2 + 1);
    for (int k = 0; k < nlive; k++) {
        int slot = live[k];
        for (int j = 0; j < thr->tp.nslot[slot]; j++) {
            int tp = thr->tp.slot[slot][j], t = thr->tp.topic[tp], p = thr->tp.partition[tp];
            rd_kafka_topic_partition_list_add(list, thr->plan->topics[t].name, p);
            thr->tp.task_of[t][p] = thr->tp.of[t][p] = -1;
        }
        if (bk_thread_lua_slot(thr, thr->ref.drop_task, slot) != 0) {
            bk_log_error("%s: dropping task %s: %s", thr->name, BK_TASK_NAME(thr->tasks[slot]),
                         thr->err);
        }
        bk_thread_free_slot(thr, slot, 0);
    }
    thr->ntasks = 0;
    kerr = list->cnt > 0 ? rd_kafka_incremental_unassign(thr->kafka.consumer, list) : NULL;
    rd_kafka_topic_partition_list_destroy(list);
    free(live);
    if (kerr) {
        snprintf(thr->err, sizeof(thr->err), "%s; cannot unassign the input partitions: %s", why,
                 rd_kafka_error_string(kerr));
        rd_kafka_error_destroy(kerr);
        free(again);
        return -1;
    }
    if (thr->txn.fenced) {
        /* Another producer holds this thread's transactional id now: a node took this
         * one's tasks over after deciding it was gone (paused or cut off past its session).
         * Writing on would fence that one in turn. The tasks stay dropped; the node finds
         * itself lost, rejoins as a new incarnation, and the thread then takes a producer of
         * the new id (bk_thread_set_instance). */
        char id[256];
        bk_thread_txn_id(thr, id, sizeof(id));
        bk_log_error("%s: fenced: %s; another producer took transactional id %s (this node was "
                     "taken for dead and its tasks moved, or another process runs with its "
                     "node_id): nothing since the last commit was committed, task(s) %s "
                     "dropped; waiting for the node to rejoin",
                     thr->name, why, id,
                     bk_thread_slot_names(thr, again, nagain, names, sizeof(names)));
        {
            char tasks[6500];
            bk_events_emit("producer_fenced", "\"thread\":\"%s\",\"tasks\":%s", thr->name,
                           bk_thread_slot_json(thr, again, nagain, tasks, sizeof(tasks)));
        }
        for (int k = 0; k < nagain; k++) {
            bk_thread_life(thr, again[k], BK_LIFE_FREE);
            bk_thread_moves_forget(thr, again[k]);
        }
        thr->txn.fenced_at = bk_clock_mono_ms();
        thr->fail.delivery = 0;
        thr->fail.dr_err[0] = '\0';
        free(again);
        return 0;
    }
    /* 4. a new producer: one that failed for good (a fatal idempotence error) never sends
     * again, and a fresh one starts its sequence numbers clean */
    if (bk_thread_renew_producer(thr) != 0) {
        char err[400];
        snprintf(err, sizeof(err), "%.399s", thr->err);
        snprintf(thr->err, sizeof(thr->err), "%.500s; no new producer: %s", why, err);
        free(again);
        return -1;
    }
    thr->fail.delivery = 0;
    thr->fail.dr_err[0] = '\0';
    /* 5. all of them open again: restored from their checkpoints, what the dropped work
     * left in their changelogs after the last marker settled away (not committed), and
     * read from the committed offsets */
    for (int k = 0; k < nagain; k++) {
        bk_thread_life(thr, again[k], BK_LIFE_OPENING);
        bk_thread_moves_forget(thr, again[k]); /* barriers read since the commit: again */
    }
    {
        char tasks[6500], e[1100];
        bk_events_emit("redo", "\"thread\":\"%s\",\"tasks\":%s,\"times\":%d,\"error\":%s",
                       thr->name, bk_thread_slot_json(thr, again, nagain, tasks, sizeof(tasks)),
                       thr->fail.redos, bk_events_str(e, sizeof(e), why));
    }
    if (nagain > 0) {
        bk_log_warn("%s: %s: the work since the last commit is dropped; task(s) %s start again "
                    "from it with a new producer (%d of %d times in a row)",
                    thr->name, why, bk_thread_slot_names(thr, again, nagain, names, sizeof(names)),
                    thr->fail.redos, BK_THREAD_MAX_REDOS);
    } else {
        bk_log_warn("%s: %s: the work since the last commit is dropped", thr->name, why);
    }
    int rc = nagain > 0 ? bk_thread_job_start(thr, again, nagain) : 0;
    free(again);
    return rc;
}

int bk_thread_park(bk_thread_t *thr)
{
    int32_t *slots = calloc((size_t)thr->park.n + 1, sizeof(int32_t));
    int n = 0, rc = 0;
    char names[512];
    if (!slots) {
        snprintf(thr->err, sizeof(thr->err), "out of memory to park a task");
        return -1;
    }
    thr->park.pending = 0;
    for (int s = 0; s < thr->cap && n < thr->park.n; s++) {
        if (thr->park.task[s].on && bk_tasklife_running(&thr->life, s)) {
            slots[n++] = s;
        }
    }
    if (n > 0 && !thr->eos) {
        rc = remove_live(thr, slots, n);
        if (rc != 0 && !thr->fail.commit && bk_thread_producer_broken(thr)) {
            thr->park.parking = 1;
            rc = bk_thread_redo(thr, slots, n);
            thr->park.parking = 0;
        }
    } else if (n > 0) {
        snprintf(thr->fail.dr_err, sizeof(thr->fail.dr_err),
                 "task(s) %s parked on a record that failed: the open transaction is aborted",
                 bk_thread_slot_names(thr, slots, n, names, sizeof(names)));
        thr->park.parking = 1;
        rc = bk_thread_redo(thr, slots, n);
        thr->park.parking = 0;
    }
    free(slots);
    return rc;
}

int bk_thread_unpark_listed(bk_thread_t *thr)
{
    int32_t *go = calloc((size_t)thr->park.n + 1, sizeof(int32_t));
    int n = 0, rc = 0;
    if (!go) {
        return 0; /* looked at again next time */
    }
    for (int s = 0; s < thr->cap && n < thr->park.n; s++) {
        bk_thread_parked_t *p = &thr->park.task[s];
        const char *topic = p->on ? thr->plan->topics[p->topic].name : NULL;
        char note[512];
        if (!p->on || !bk_skips_listed(thr->flags->skips, topic, p->partition, p->offset,
                                       PARKED_CHECK_MS / 2, note, sizeof(note))) {
            continue;
        }
        bk_log_info("task %s: record %s/%d/%lld is listed by beck skip (%s): the task starts "
                    "again from its last commit and goes past it",
                    BK_TASK_NAME(thr->tasks[s]), topic, (int)p->partition, (long long)p->offset,
                    note);
        go[n++] = s;
    }
    for (int k = 0; k < n; k++) {
        thr->park.task[go[k]].on = 0;
        thr->park.n--;
        bk_thread_life(thr, go[k], BK_LIFE_OPENING);
    }
    if (n > 0) {
        rc = bk_thread_job_start(thr, go, n);
    }
    free(go);
    return rc;
}

/* A removal or an addition of a parked task ends its parking: it leaves, or opens anew. */
static void unpark(bk_thread_t *thr, int32_t slot)
{
    if (thr->park.task[slot].on) {
        thr->park.task[slot].on = 0;
        thr->park.n--;
    }
    if (bk_tasklife_state(&thr->life, slot) == BK_LIFE_PARKED) {
        bk_thread_life(thr, slot, BK_LIFE_FREE);
    }
}

/* Removes tasks still opening: their job stops, the job's other tasks open again. */
static int remove_opening(bk_thread_t *thr, int slot)
{
    for (bk_thread_job_t *job = thr->open.jobs; job; job = job->next) {
        for (int k = 0; k < job->n; k++) {
            if (job->slots[k] == slot) {
                job->stop = 1;
                while (!job->done) {
                    bk_clock_sleep_ms(1);
                }
                /* not opened again (job_finish frees it) */
                bk_thread_life(thr, slot, BK_LIFE_FREE);
                job->rc = -1;
                return bk_thread_job_finish(thr, job);
            }
        }
    }
    return 0;
}

int bk_thread_apply_changes(bk_thread_t *thr)
{
    int32_t *add = NULL, *rm = NULL, *live = NULL;
    uint64_t *epochs = NULL, asked;
    int nadd, nrm, nlive = 0, rc = 0, took = 1;

    if (thr->open.nreap > 0) {
        bk_thread_jobs_reap(thr);
    }
    /* the opening jobs that finished */
    if (bk_thread_jobs_poll(thr) != 0) {
        return -1;
    }
    /* a new incarnation's transactional id first (the loop's next turn takes it) */
    if (!thr->box.pending || (thr->eos && atomic_load(&thr->txn.inc) != thr->txn.inc_used)) {
        return 0;
    }
    pthread_mutex_lock(&thr->box.lock);
    nadd = thr->box.nadd;
    nrm = thr->box.nrm;
    add = calloc((size_t)nadd + 1, sizeof(int32_t));
    epochs = calloc((size_t)nadd + 1, sizeof(uint64_t));
    rm = calloc((size_t)nrm + 1, sizeof(int32_t));
    live = calloc((size_t)nrm + 1, sizeof(int32_t));
    if (add && epochs && rm && live) {
        memcpy(add, thr->box.add, (size_t)nadd * sizeof(int32_t));
        memcpy(epochs, thr->box.add_epoch, (size_t)nadd * sizeof(uint64_t));
        memcpy(rm, thr->box.rm, (size_t)nrm * sizeof(int32_t));
        thr->box.nadd = thr->box.nrm = 0;
        thr->box.pending = 0;
    } else {
        nadd = nrm = 0; /* out of memory: the mailbox stays pending, tried again next loop */
        took = 0;
    }
    asked = thr->box.asked;
    pthread_mutex_unlock(&thr->box.lock);

    /* removals first: a task moved between threads leaves one before it joins the other */
    for (int i = 0; rc == 0 && i < nrm; i++) {
        unpark(thr, rm[i]);
        if (bk_tasklife_running(&thr->life, rm[i])) {
            live[nlive++] = rm[i];
        } else if (bk_tasklife_opening(&thr->life, rm[i])) {
            rc = remove_opening(thr, rm[i]);
        }
    }
    if (rc == 0 && nlive > 0) {
        rc = remove_live(thr, live, nlive);
        if (rc != 0 && !thr->fail.commit && bk_thread_producer_broken(thr)) {
            /* they leave uncommitted (their next owner starts from their last commit), the
             * others start again from theirs */
            rc = bk_thread_redo(thr, live, nlive);
        }
    }
    pthread_mutex_lock(&thr->box.lock);
    if (rc == 0 && took) { /* never "removed" for a removal not taken */
        thr->box.done = asked;
    }
    pthread_cond_broadcast(&thr->box.cond);
    pthread_mutex_unlock(&thr->box.lock);

    /* additions: one job opens them all (none while fenced: they were given to the
     * incarnation that was fenced, and the node is about to find itself lost) */
    if (rc == 0 && nadd > 0 && thr->txn.fenced) {
        bk_log_warn("%s: fenced: not opening %d task(s) given to this node", thr->name, nadd);
    } else if (rc == 0 && nadd > 0 && (rc = bk_thread_follow_plan(thr)) == 0) {
        /* (the plan first: a task of a later generation needs its topics and description) */
        int n = 0;
        for (int i = 0; i < nadd; i++) {
            unpark(thr, add[i]);
            if (bk_tasklife_state(&thr->life, add[i]) == BK_LIFE_FREE) {
                bk_thread_life(thr, add[i], BK_LIFE_OPENING);
                thr->slot.epoch[add[i]] = epochs[i];
                add[n++] = add[i];
            }
        }
        if (n > 0) {
            rc = bk_thread_job_start(thr, add, n);
        }
    }
    free(add);
    free(epochs);
    free(rm);
    free(live);
    return rc;
}

/* -- Input growth --------------------------------------------------------------------------- */

/* How often a stream thread looks at its source topics' partition counts. */
#define INPUT_CHECK_MS 5000

int bk_thread_check_inputs(bk_thread_t *thr)
{
    const bk_plan_t *plan = thr->plan;
    int64_t now = bk_clock_mono_ms();
    const char **names;
    int *idx, *counts, n = 0, rc = 0;
    rd_kafka_topic_partition_list_t *assign;
    char err[512];

    if (now < thr->tp.checked + INPUT_CHECK_MS) {
        return 0;
    }
    thr->tp.checked = now;
    names = calloc((size_t)thr->seen.topics + 1, sizeof(*names));
    idx = calloc((size_t)thr->seen.topics + 1, sizeof(*idx));
    counts = calloc((size_t)thr->seen.topics + 1, sizeof(*counts));
    assign = rd_kafka_topic_partition_list_new(4);
    for (int t = 0; names && idx && counts && t < thr->seen.topics; t++) {
        if (plan->topics[t].source && !plan->topics[t].keygroups) {
            idx[n] = t;
            names[n++] = plan->topics[t].name;
        }
    }
    if (n > 0 &&
        bk_kafka_partitions(thr->kafka.consumer, names, n, counts, 2000, err, sizeof(err)) != 0) {
        bk_log_debug("%s: cannot look at the inputs' partitions now: %s", thr->name, err);
        n = 0;
    }
    for (int i = 0; rc == 0 && i < n; i++) {
        int t = idx[i], old = thr->tp.parts[t], grown = counts[i];
        const bk_plan_sub_t *sub = &plan->subs[plan->topics[t].sub];
        if (grown <= old) {
            continue;
        }
        if (bk_thread_grow_topic(thr, t, grown) != 0) {
            snprintf(thr->err, sizeof(thr->err), "out of memory");
            rc = -1;
            break;
        }
        if (!sub->passthrough) {
            /* by input partition: its tasks would not hold the state of the keys that
             * now land on the new partitions. Nothing is read there, nor lost, until a
             * cluster's leader moves it to generation 1 (node/node_growth.c): then the
             * passthrough reads them. */
            if (thr->index == 0 && bk_plan_sub_logged(plan, plan->topics[t].sub)) {
                bk_log_warn("input topic %s grew from %d to %d partitions: subtopology %d "
                            "reads it by input partition; partitions %d to %d are read once "
                            "it moves to generation 1, by key group (a cluster app's leader "
                            "moves it; their records wait in Kafka meanwhile: "
                            "docs/repartitioning.md)",
                            plan->topics[t].name, old, grown, plan->topics[t].sub, old, grown - 1);
            } else if (thr->index == 0) {
                bk_log_warn("input topic %s grew from %d to %d partitions: subtopology %d "
                            "reads it by input partition and keeps no changelog; partitions "
                            "%d to %d are read once the app starts again with as many tasks "
                            "(their records wait in Kafka meanwhile)",
                            plan->topics[t].name, old, grown, plan->topics[t].sub, old, grown - 1);
            }
            continue;
        }
        for (int p = old; p < grown; p++) {
            int q = p % sub->partitions, slot = -1, tp = thr->tp.id[t][p];
            for (int s = 0; s < thr->cap && slot < 0; s++) {
                if (thr->tasks[s].sub == plan->topics[t].sub && thr->tasks[s].partition == q) {
                    slot = s;
                }
            }
            if (slot < 0 || !bk_tasklife_running(&thr->life, slot)) {
                continue; /* elsewhere, or opening: it reads the partition once live */
            }
            thr->tp.task_of[t][p] = slot;
            thr->tp.of[t][p] = tp;
            thr->tp.first[tp] = -1;
            thr->tp.dirty[tp] = 0;
            /* the group's committed offset (the task may have read it on another node),
             * else from its start (beck's auto.offset.reset=earliest) */
            rd_kafka_topic_partition_list_add(assign, plan->topics[t].name, p)->offset =
                RD_KAFKA_OFFSET_INVALID;
            bk_log_info("task %s: reads %s [%d] too: the topic grew from %d to %d partitions",
                        BK_TASK_NAME(thr->tasks[slot]), plan->topics[t].name, p, old, grown);
            bk_events_emit("input_grown",
                           "\"task\":\"%s\",\"topic\":\"%s\",\"partition\":%d,\"from\":%d,"
                           "\"to\":%d",
                           BK_TASK_NAME(thr->tasks[slot]), plan->topics[t].name, p, old, grown);
        }
    }
    if (rc == 0 && assign->cnt > 0) {
        rd_kafka_error_t *kerr = rd_kafka_incremental_assign(thr->kafka.consumer, assign);
        if (kerr) {
            snprintf(thr->err, sizeof(thr->err), "cannot assign the grown input's partitions: %s",
                     rd_kafka_error_string(kerr));
            rd_kafka_error_destroy(kerr);
            rc = -1;
        }
    }
    rd_kafka_topic_partition_list_destroy(assign);
    free(names);
    free(idx);
    free(counts);
    return rc;
}
