/* thread.c - the stream thread: its life cycle and its loop (tasks coming and going,
 * batches, punctuations, commits). The record path is in thread_records.c, start-up in
 * thread_setup.c, commit in thread_commit.c, the FFI in thread_ffi.c. */
#include "engine/thread.h"

#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>
#include <librdkafka/rdkafka.h>

#include "base/clock.h"
#include "base/events.h"
#include "base/ffi.h"
#include "base/hash.h"
#include "base/log.h"
#include "base/task.h"
#include "engine/brokerwatch.h"
#include "engine/dedup.h"
#include "engine/kafka.h"
#include "engine/restore.h"
#include "engine/skips.h"
#include "engine/snapshot.h"
#include "engine/store.h"
#include "engine/taskdb.h"
#include "engine/thread_internal.h"
#include "engine/vm.h"

/* A fenced thread (thread_txn.c) waits this long for its node to rejoin before it stops. */
#define FENCED_WAIT_MS 60000
/* The least time between two commits that a move asks for (thread_moves.c) */
#define MOVE_COMMIT_GAP_MS 20
/* while a seal is under way, its slices come after commits this far apart (thread_seal.c) */
#define SEAL_COMMIT_MS 250

/* spec/01-unit/03-ffi_spec.lua checks the same layout from Lua's side. */
_Static_assert(sizeof(bk_rec_t) == 56, "bk_rec_t layout changed: update the FFI spec");

/* -- Set-up ------------------------------------------------------------- */

bk_thread_t *bk_thread_new(int index, const bk_plan_t *plan, const bk_conf_t *conf,
                           bk_node_flags_t *flags)
{
    bk_thread_t *thr = calloc(1, sizeof(*thr));
    const char *pol = bk_conf_str(conf, BK_CONF_ON_ERROR);

    bk_fetchkick_init(&thr->batch.kick);

    thr->index = index;
    snprintf(thr->name, sizeof(thr->name), "stream-%d", index);
    thr->plan = plan;
    thr->conf = conf;
    thr->flags = flags;
    {
        int n;
        thr->tasks = bk_plan_task_table(plan, &n, &thr->cap); /* made by the node */
    }
    thr->park.task = calloc((size_t)thr->cap + 1, sizeof(*thr->park.task));
    thr->slot.epoch = calloc((size_t)thr->cap + 1, sizeof(uint64_t));
    thr->owned = calloc((size_t)thr->cap + 1, sizeof(int32_t));
    thr->dbs = calloc((size_t)thr->cap + 1, sizeof(*thr->dbs));
    thr->slot.dedup = calloc((size_t)thr->cap + 1, sizeof(*thr->slot.dedup));
    thr->slot.deduped = calloc((size_t)thr->cap + 1, sizeof(*thr->slot.deduped));
    thr->slot.time = malloc(((size_t)thr->cap + 1) * sizeof(*thr->slot.time));
    for (int s = 0; thr->slot.time && s <= thr->cap; s++) {
        thr->slot.time[s] = -1;
    }
    thr->store_of = calloc((size_t)thr->cap + 1, sizeof(*thr->store_of));
    thr->box.add = calloc((size_t)thr->cap + 1, sizeof(int32_t));
    thr->box.rm = calloc((size_t)thr->cap + 1, sizeof(int32_t));
    thr->box.add_epoch = calloc((size_t)thr->cap + 1, sizeof(uint64_t));
    thr->opt.policy = strcmp(pol, "skip") == 0  ? POLICY_SKIP
                      : strcmp(pol, "dlq") == 0 ? POLICY_DLQ
                                                : POLICY_FAIL;
    thr->opt.batch_size = (int)bk_conf_int(conf, BK_CONF_BATCH_SIZE);
    /* (a later generation reads what its subtopology read: the plan's growth keeps this) */
    for (int s = 0; s < plan->nsubs; s++) {
        thr->batch.merges |= !plan->subs[s].passthrough && plan->subs[s].ntopics > 1;
    }
    thr->opt.commit_interval_ms = bk_conf_commit_interval_ms(conf);
    thr->opt.stall_ms = getenv("BECK_STALL_MS") ? atoll(getenv("BECK_STALL_MS")) : 0;
    thr->eos = bk_conf_exactly_once(conf);
    thr->io.next_wall_ms = -1;
    thr->tp.last_topic = -1;
    thr->ref.run = thr->ref.punctuate = thr->ref.close = LUA_NOREF;
    thr->ref.flush = thr->ref.hook = thr->ref.init = LUA_NOREF;
    thr->ref.add_task = thr->ref.init_task = thr->ref.close_task = thr->ref.drop_task = LUA_NOREF;
    thr->ref.regrow = LUA_NOREF;
    pthread_mutex_init(&thr->snap.lock, NULL);
    pthread_mutex_init(&thr->box.lock, NULL);
    pthread_cond_init(&thr->box.cond, NULL);
    bk_thread_build_tables(thr);
    if (bk_tasklife_init(&thr->life, thr->cap, NULL, thr->name) != 0 ||
        bk_thread_moves_init(thr) != 0) {
        bk_log_error("%s: out of memory", thr->name);
    }
    return thr;
}

void bk_thread_set_instance(bk_thread_t *thr, uint64_t instance)
{
    atomic_store(&thr->txn.inc, instance);
}

/* Exactly-once: the node rejoined as a new incarnation (bk_thread_set_instance), or this
 * thread was fenced and waits for that. 0, or -1 with thr->err (the thread stops). */
static int check_instance(bk_thread_t *thr)
{
    uint64_t inc = atomic_load(&thr->txn.inc);
    if (inc == thr->txn.inc_used) {
        if (thr->txn.fenced && thr->txn.fenced_at > 0 &&
            bk_clock_mono_ms() - thr->txn.fenced_at > FENCED_WAIT_MS) {
            snprintf(thr->err, sizeof(thr->err),
                     "fenced %d s ago and the node did not rejoin its app since: stopping",
                     FENCED_WAIT_MS / 1000);
            return -1;
        }
        return 0;
    }
    if (thr->ntasks > 0 || thr->open.jobs) {
        /* what runs here started under the old id: it starts again from its last commit */
        thr->fail.delivery = 1;
        snprintf(thr->fail.dr_err, sizeof(thr->fail.dr_err),
                 "the node rejoined as incarnation %llu", (unsigned long long)inc);
        return bk_thread_redo(thr, NULL, 0);
    }
    bk_thread_purge_producer(thr);
    thr->txn.fenced = 0;
    thr->txn.fenced_at = 0;
    thr->fail.delivery = 0;
    if (bk_thread_renew_producer(thr) != 0) {
        return -1;
    }
    bk_log_info("%s: transactional producer of incarnation %llu ready", thr->name,
                (unsigned long long)inc);
    return 0;
}

/* BECK_STALL_MS: a turn of the loop that took that long or longer, by part (what held the
 * thread: its tasks' changes, the wait for records, processing, the commit and what follows
 * it). A diagnosis of pauses, off unless asked for. */
static void log_stall(const bk_thread_t *thr, int64_t start, int64_t changes, int64_t poll,
                      int64_t process, int n, int committed)
{
    int64_t end = bk_clock_wall_ms();
    if (end - start < thr->opt.stall_ms) {
        return;
    }
    bk_log_info("%s: a turn of %lld ms: task changes %lld, poll %lld (%d record(s)), "
                "processing %lld, %s %lld",
                thr->name, (long long)(end - start), (long long)(changes - start),
                (long long)(poll - changes), n, (long long)(process - poll),
                committed ? "commit" : "after", (long long)(end - process));
}

static int run_loop(bk_thread_t *thr)
{
    int64_t last_commit = bk_clock_wall_ms();
    int rc = 0;

    while (!thr->flags->stop) {
        int64_t now = bk_clock_wall_ms();
        int64_t t_changes = 0, t_poll = 0, t_process = 0;
        int wait = 100, n, committed = 0;
        if (thr->eos && check_instance(thr) != 0) {
            bk_log_error("%s: %s", thr->name, thr->err);
            rc = -1;
            break;
        }
        if (thr->fail.delivery) { /* a delivery, or the producer, failed: nothing was committed */
            if (bk_thread_redo(thr, NULL, 0) != 0) {
                bk_log_error("%s: %s", thr->name, thr->err);
                rc = -1;
                break;
            }
            last_commit = bk_clock_wall_ms();
        }
        if (thr->park.n > 0 && bk_clock_mono_ms() >= thr->park.check_at) {
            thr->park.check_at = bk_clock_mono_ms() + PARKED_CHECK_MS;
            if (bk_thread_unpark_listed(thr) != 0) {
                bk_log_error("%s: %s", thr->name, thr->err);
                rc = -1;
                break;
            }
        }
        if (bk_thread_apply_changes(thr) != 0 || bk_thread_check_inputs(thr) != 0) {
            bk_log_error("%s: %s", thr->name, thr->err);
            rc = -1;
            break;
        }
        if (!bk_node_leased(thr->flags, now)) {
            /* Another node may run this one's tasks already (bk_node_flags_t): nothing is
             * processed, punctuated or committed until the membership renews the lease, or
             * finds the node lost and takes its tasks back (released without a commit). */
            if (!thr->unleased_at) {
                thr->unleased_at = now;
                if (thr->ntasks > 0) {
                    bk_log_warn("%s: the node's lease ran out (its own heartbeats are not seen "
                                "back in the control topic in time): %d task(s) wait, "
                                "processing and committing nothing",
                                thr->name, thr->ntasks);
                    bk_events_emit("unleased", "\"thread\":\"%s\",\"tasks\":%d", thr->name,
                                   thr->ntasks);
                }
            }
            rd_kafka_poll(thr->kafka.producer, 20); /* delivery reports, and a pause */
            continue;
        }
        if (thr->unleased_at) {
            if (thr->ntasks > 0) {
                bk_log_info("%s: the node's lease holds again after %lld ms: processing", thr->name,
                            (long long)(now - thr->unleased_at));
            }
            thr->unleased_at = 0;
        }
        if (thr->opt.stall_ms > 0) {
            t_changes = bk_clock_wall_ms();
        }
        if (thr->io.next_wall_ms >= 0) {
            if (now >= thr->io.next_wall_ms && bk_thread_punctuate(thr, now) != 0) {
                rc = -1;
                break;
            }
            if (thr->io.next_wall_ms >= 0 && thr->io.next_wall_ms - now < wait) {
                wait = (int)(thr->io.next_wall_ms > now ? thr->io.next_wall_ms - now : 0);
            }
        }
        /* Drain what is there; block for one message only when idle. */
        n = (int)rd_kafka_consume_batch_queue(thr->kafka.queue, 0, thr->batch.msgs,
                                              (size_t)thr->opt.batch_size);
        if (n == 0) {
            n = (int)rd_kafka_consume_batch_queue(
                thr->kafka.queue, bk_fetchkick_idle(&thr->batch.kick, thr->kafka.consumer, wait),
                thr->batch.msgs, 1);
        }
        bk_fetchkick_took(&thr->batch.kick, thr->batch.msgs, n > 0 ? (size_t)n : 0);
        rd_kafka_poll(thr->kafka.producer, 0);
        if (thr->opt.stall_ms > 0) {
            t_poll = bk_clock_wall_ms();
        }
        if (n > 0 || thr->batch.order.held > 0) {
            int kept = bk_thread_fill_batch(thr, n);
            if (kept < 0 && thr->fail.delivery) {
                continue; /* redone at the top */
            }
            if (kept < 0) {
                bk_log_error("%s: %s", thr->name, thr->err);
                rc = -1;
                break;
            }
            thr->io.now_ms = now;
            rc = bk_thread_process_batch(thr, kept);
            kept = thr->io.count; /* less when a parked task's records left the batch */
            for (int i = 0; i < kept; i++) {
                rd_kafka_message_destroy(thr->batch.msgs[i]);
            }
            thr->io.count = 0;
            if (rc == -2 || (rc == 0 && thr->park.pending)) {
                /* a poison record: its task stops, the others go on */
                rc = bk_thread_park(thr);
                last_commit = bk_clock_wall_ms();
                if (rc != 0) {
                    bk_log_error("%s: %s", thr->name, thr->err);
                    break;
                }
                continue;
            }
            if (rc == 0 && thr->fail.punct) {
                rc = -1;
            }
            if (rc != 0) {
                break;
            }
        }
        if (thr->opt.stall_ms > 0) {
            t_process = bk_clock_wall_ms();
        }
        /* a move goes at the next commit (a passthrough's switch, a task drained to its
         * barriers): that commit comes now, not at the interval, as a snapshot's does */
        if (!thr->txn.fenced &&
            (now - last_commit >= thr->opt.commit_interval_ms || thr->snap.wanted ||
             ((thr->moves.soon || atomic_load(&thr->plan->generations) != thr->seen.gens ||
               atomic_load(&thr->plan->nready) != thr->seen.ready) &&
              now - last_commit >= MOVE_COMMIT_GAP_MS) ||
             (thr->seal.soon && now - last_commit >= SEAL_COMMIT_MS))) {
            int crc = bk_thread_commit(thr);
            committed = 1;
            if (crc < 0 && !thr->fail.commit && bk_thread_producer_broken(thr)) {
                continue; /* nothing committed: redone at the top */
            }
            if (crc < 0) {
                rc = -1;
                break;
            }
            if (crc == 0 && thr->ntasks > 0) {
                thr->fail.redos = 0;
            }
            if (crc == 0) {
                thr->moves.soon = 0;
            }
            if (crc == 0 && bk_thread_moves_after_commit(thr) != 0) {
                rc = -1;
                break;
            }
            /* The interval runs from the commit's end, as Kafka Streams' does: a commit that
             * waits on the broker (a transaction's takes tens of ms) cannot leave the thread
             * less than the interval to process in between. */
            last_commit = bk_clock_wall_ms();
            if (thr->snap.wanted && crc == 0) { /* a snapshot is of a commit that went through */
                bk_thread_make_snapshots(thr);
            }
        }
        if (bk_tasklife_count(&thr->life, BK_LIFE_CHECKPOINTING) > 0) {
            bk_thread_moves_drain_one(thr);
        }
        if (thr->opt.stall_ms > 0) {
            log_stall(thr, now, t_changes, t_poll, t_process, n, committed);
        }
    }
    return rc;
}

static void close_lua(bk_thread_t *thr)
{
    char err[1024];
    if (thr->ref.close == LUA_NOREF) {
        return;
    }
    lua_rawgeti(thr->L, LUA_REGISTRYINDEX, thr->ref.close);
    if (bk_vm_pcall(thr->L, 0, 0, 1, err, sizeof(err)) != 0) {
        bk_log_error("%s: close: %s", thr->name, err);
    }
    thr->ref.close = LUA_NOREF;
}

/* The "last record" lines of the live tasks' input partitions (first_record's pair), after
 * a commit that covered them. */
void bk_thread_log_last(bk_thread_t *thr, const int32_t *slots, int n)
{
    for (int k = 0; k < n; k++) {
        int slot = slots[k];
        for (int j = 0; j < thr->tp.nslot[slot]; j++) {
            int tp = thr->tp.slot[slot][j];
            if (thr->tp.first[tp] >= 0) {
                bk_log_info("task %s epoch %llu: last record %s [%d] offset %lld, committed",
                            BK_TASK_NAME(thr->tasks[slot]),
                            (unsigned long long)thr->slot.epoch[slot],
                            thr->plan->topics[thr->tp.topic[tp]].name, thr->tp.partition[tp],
                            (long long)thr->tp.next[tp] - 1);
                bk_events_emit("last_record",
                               "\"task\":\"%s\",\"epoch\":%llu,\"topic\":\"%s\","
                               "\"partition\":%d,\"offset\":%lld",
                               BK_TASK_NAME(thr->tasks[slot]),
                               (unsigned long long)thr->slot.epoch[slot],
                               thr->plan->topics[thr->tp.topic[tp]].name, thr->tp.partition[tp],
                               (long long)thr->tp.next[tp] - 1);
            }
        }
    }
}

static void *thread_main(void *arg)
{
    bk_thread_t *thr = arg;
    int rc;
    int64_t t0 = bk_clock_wall_ms();

    bk_log_set_thread_name(thr->name);
    thr->io.recs = calloc((size_t)thr->opt.batch_size, sizeof(bk_rec_t));
    thr->batch.msgs = calloc((size_t)thr->opt.batch_size, sizeof(rd_kafka_message_t *));
    thr->batch.rec_tp = calloc((size_t)thr->opt.batch_size, sizeof(int));
    thr->batch.rec_hdrs = calloc((size_t)thr->opt.batch_size, sizeof(*thr->batch.rec_hdrs));

    /* The clients and the VM live as long as the thread; tasks come and go
     * (thread_tasks.c): each opens and restores in the background, then goes live. */
    if (bk_thread_start_kafka(thr) != 0 || bk_thread_start_lua(thr) != 0) {
        bk_log_error("%s: cannot start: %s", thr->name, thr->err);
        thr->run.rc = -1;
        goto done;
    }
    bk_log_debug("%s: clients and Lua ready in %lld ms", thr->name,
                 (long long)(bk_clock_wall_ms() - t0));
    rc = run_loop(thr);
    while (rc == 0 && bk_tasklife_count(&thr->life, BK_LIFE_CHECKPOINTING) >
                          0) { /* a stop right after a drain: told now */
        bk_thread_moves_drain_one(thr);
    }
    bk_thread_stop_jobs(thr);
    /* Processors may forward from close(); what they send is flushed and
     * committed with the rest, unless committing is what failed. */
    close_lua(thr);
    int failed_before = thr->fail.commit;
    int crc;
    if (thr->txn.fenced) {
        /* nothing this producer writes can commit: what runs is dropped as in a crash */
        bk_log_warn("%s: fenced: no final commit; %d task(s) stop at their last commit", thr->name,
                    thr->ntasks);
        failed_before = 1;
    } else if (thr->eos && rc != 0 && !failed_before) {
        /* exactly-once: a failure (a record that raised under on_error = fail) ends the open
         * transaction unfinished, so the broker aborts it: nothing of the interval is seen,
         * and the next start processes it again from the last commit */
        bk_log_warn("%s: exactly-once: the open transaction is not committed (aborted); %d "
                    "task(s) stop at their last commit",
                    thr->name, thr->ntasks);
        failed_before = 1;
    }
    crc = failed_before ? -1 : bk_thread_commit(thr);
    if (crc < 0 && !failed_before) {
        rc = -1;
    } else if (crc > 0 && !bk_node_leased(thr->flags, bk_clock_wall_ms())) {
        bk_log_warn("%s: no final commit: the node's lease ran out (another node may run its "
                    "tasks already); %d task(s) stop at their last commit",
                    thr->name, thr->ntasks);
    } else if (crc > 0 && bk_node_stop_overdue(thr->flags, bk_clock_mono_ms())) {
        /* the brokers did not take the last interval within the stop's wait: it is not
         * committed, and is processed again by whoever runs the tasks next */
        int64_t down = bk_brokerwatch_down_since();
        char why[128];
        if (down > 0) {
            snprintf(why, sizeof(why), "no broker answers (for %lld s)",
                     (long long)((bk_clock_wall_ms() - down) / 1000));
        } else {
            snprintf(why, sizeof(why),
                     "the brokers did not acknowledge its outputs within "
                     "%d s",
                     BK_NODE_STOP_WAIT_MS / 1000);
        }
        bk_log_warn("%s: no final commit: %s; %d task(s) stop at their last commit, their "
                    "input since is processed again when they run next",
                    thr->name, why, thr->ntasks);
        rc = -1;
    } else if (crc > 0) {
        /* nothing of the last interval is synced: the DBs close, and the next owner keeps
         * or drops the interval's changelog records by the committed offsets */
        bk_log_warn("%s: final commit: the offsets were not committed; the last interval's "
                    "input will be processed again",
                    thr->name);
    } else if (crc == 0) {
        bk_thread_log_last(thr, thr->owned, thr->ntasks);
        bk_log_info("%s: final commit: outputs flushed, stores synced, offsets of %d "
                    "task(s) committed",
                    thr->name, thr->ntasks);
        thr->commit.clean = rc == 0;
    }
    thr->run.rc = rc;

done:
    bk_thread_stop_jobs(thr);
    close_lua(thr);
    if (thr->run.rc != 0) {
        thr->flags->failed = 1;
        thr->flags->stop = 1;
    }
    bk_log_info("%s: stopped: %llu in, %llu out, %llu skipped, %llu dead-lettered", thr->name,
                (unsigned long long)thr->stats.in, (unsigned long long)thr->stats.out,
                (unsigned long long)thr->stats.skipped, (unsigned long long)thr->stats.dlq);
    pthread_mutex_lock(&thr->box.lock);
    thr->run.done = 1;
    pthread_cond_broadcast(&thr->box.cond);
    pthread_mutex_unlock(&thr->box.lock);
    return NULL;
}

void bk_thread_set_recover(bk_thread_t *thr, bk_thread_recover_cb cb, void *opaque)
{
    thr->cb.recover = cb;
    thr->cb.recover_opaque = opaque;
}

void bk_thread_set_pool(bk_thread_t *thr, struct bk_taskdb_pool_s *pool)
{
    thr->pool = pool;
}

void bk_thread_set_live(bk_thread_t *thr, bk_livestats_t *live)
{
    thr->live = live;
    thr->life.live = live;
}

void bk_thread_set_drained(bk_thread_t *thr, bk_thread_drained_cb cb, void *opaque)
{
    thr->cb.drained = cb;
    thr->cb.drained_opaque = opaque;
}

void bk_thread_set_progress(bk_thread_t *thr, bk_thread_progress_cb cb, void *opaque)
{
    thr->cb.progress = cb;
    thr->cb.progress_opaque = opaque;
}

int bk_thread_start(bk_thread_t *thr)
{
    if (pthread_create(&thr->run.tid, NULL, thread_main, thr) != 0) {
        return -1;
    }
    thr->run.started = 1;
    return 0;
}

int bk_thread_done(const bk_thread_t *thr)
{
    return thr->run.done;
}

int bk_thread_join(bk_thread_t *thr, bk_thread_stats_t *stats)
{
    if (thr->run.started) {
        pthread_join(thr->run.tid, NULL);
        thr->run.started = 0;
    }
    if (stats) {
        *stats = thr->stats;
    }
    return thr->run.rc;
}

void bk_thread_destroy(bk_thread_t *thr)
{
    if (!thr) {
        return;
    }
    /* Lua first (its iterators point into the DBs), the DBs last (the
     * producer's delivery reports point into the stores). */
    bk_vm_destroy(thr->L);
    bk_order_free(&thr->batch.order); /* held messages go before their consumer */
    if (thr->kafka.queue) {
        rd_kafka_queue_destroy(thr->kafka.queue);
    }
    if (thr->kafka.consumer) {
        rd_kafka_consumer_close(thr->kafka.consumer);
        rd_kafka_destroy(thr->kafka.consumer);
    }
    bk_thread_stop_producer(thr);
    for (int t = 0; t < thr->cap; t++) {
        /* a live task's DB is kept open for its next owner here only after a clean final
         * commit; an opening one's (its job stopped) is closed */
        if (thr->dbs[t]) {
            bk_taskdb_release(thr->pool, thr->tasks[t], thr->dbs[t],
                              bk_tasklife_running(&thr->life, t) && thr->run.rc == 0 &&
                                  thr->commit.clean);
        }
        if (thr->life.state) {
            bk_thread_life(thr, t, BK_LIFE_FREE); /* its life here ends with the thread */
        }
        free(thr->store_of[t]);
    }
    free(thr->dbs);
    free(thr->slot.dedup);
    free(thr->slot.deduped);
    free(thr->slot.time);
    free(thr->store_of);
    if (thr->tp.task_of) {
        for (int t = 0; t < thr->plan->cap_topics; t++) {
            free(thr->tp.task_of[t]);
            free(thr->tp.of[t]);
            free(thr->tp.id[t]);
        }
    }
    for (int i = 0; thr->tp.slot && i < thr->cap; i++) {
        free(thr->tp.slot[i]);
    }
    free(thr->tp.slot);
    free(thr->tp.nslot);
    free(thr->tp.parts);
    free(thr->tp.id);
    free(thr->tp.task_of);
    free(thr->tp.of);
    free(thr->tp.topic);
    free(thr->tp.partition);
    free(thr->tp.next);
    free(thr->tp.first);
    bk_tasklife_free(&thr->life);
    free(thr->park.task);
    free(thr->slot.epoch);
    free(thr->owned);
    free(thr->box.add);
    free(thr->box.rm);
    free(thr->box.add_epoch);
    free(thr->open.reap);
    pthread_mutex_destroy(&thr->snap.lock);
    pthread_mutex_destroy(&thr->box.lock);
    pthread_cond_destroy(&thr->box.cond);
    free(thr->tp.dirty);
    free(thr->io.recs);
    free(thr->batch.msgs);
    free(thr->batch.rec_tp);
    free(thr->batch.rec_hdrs);
    bk_fetchkick_free(&thr->batch.kick);
    bk_thread_moves_free(thr);
    free(thr);
}
