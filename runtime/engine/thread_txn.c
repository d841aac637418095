/* thread_txn.c - a stream thread's Kafka transactions under processing_guarantee =
 * exactly_once (docs/state.md, Exactly once): one transactional producer per thread, whose
 * id names the app, the node, its incarnation and the thread (engine/fence.h), so that a
 * node that takes the tasks of a gone incarnation over fences it and aborts whatever it
 * left open. A transaction is always open on the thread between commits: every output,
 * changelog write and dead letter is in one, and each commit ends it with the input offsets
 * and begins the next. */
#include <stdio.h>

#include <librdkafka/rdkafka.h>

#include "base/clock.h"
#include "base/log.h"
#include "engine/fence.h"
#include "engine/taskdb.h"
#include "engine/thread_internal.h"

/* Tries of one transactional call that fails with a retriable error (a coordinator moving,
 * a request timing out) before the thread treats it as a failed commit. */
#define TXN_TRIES 10
#define TXN_TIMEOUT_MS 30000

void bk_thread_txn_id(const bk_thread_t *thr, char *out, size_t size)
{
    const char *node = bk_conf_str(thr->conf, BK_CONF_NODE_ID);
    bk_fence_txn_id(thr->plan->id, node ? node : "node", thr->txn.inc_used, thr->index, out, size);
}

/* Records what a failed call means for the thread: fenced (another producer took this
 * transactional id: the thread must not write again), or a failure after which the work
 * since the last commit is dropped and done again (bk_thread_redo: the new producer's
 * init aborts what this one left open). */
static int failed(bk_thread_t *thr, const char *what, rd_kafka_error_t *e)
{
    if (bk_thread_fenced_err(rd_kafka_error_code(e))) {
        thr->txn.fenced = 1;
    }
    if (!thr->fail.delivery) {
        thr->fail.delivery = 1;
        snprintf(thr->fail.dr_err, sizeof(thr->fail.dr_err), "%s failed: %s", what,
                 rd_kafka_error_string(e));
    }
    rd_kafka_error_destroy(e);
    return -1;
}

/* A call's timeout: TXN_TIMEOUT_MS, but no later than a stop's wait (bk_node_flags_t). */
static int txn_timeout(bk_thread_t *thr)
{
    int64_t by = atomic_load(&thr->flags->stop_by), left;
    if (by <= 0) {
        return TXN_TIMEOUT_MS;
    }
    left = by - bk_clock_mono_ms();
    return left < 1000 ? 1000 : left < TXN_TIMEOUT_MS ? (int)left : TXN_TIMEOUT_MS;
}

/* One call, tried again while its error is retriable (and no stop's wait is over). */
#define TRY(what, call)                                                                            \
    do {                                                                                           \
        rd_kafka_error_t *e_;                                                                      \
        for (int try_ = 1;; try_++) {                                                              \
            e_ = (call);                                                                           \
            if (!e_) {                                                                             \
                break;                                                                             \
            }                                                                                      \
            if (!rd_kafka_error_is_retriable(e_) || try_ >= TXN_TRIES ||                           \
                bk_node_stop_overdue(thr->flags, bk_clock_mono_ms())) {                            \
                return failed(thr, what, e_);                                                      \
            }                                                                                      \
            bk_log_warn("%s: %s failed (%s); trying again", thr->name, what,                       \
                        rd_kafka_error_string(e_));                                                \
            rd_kafka_error_destroy(e_);                                                            \
        }                                                                                          \
    } while (0)

int bk_thread_txn_start(bk_thread_t *thr)
{
    int64_t t0 = bk_clock_mono_ms();
    TRY("initializing the transactions",
        rd_kafka_init_transactions(thr->kafka.producer, txn_timeout(thr)));
    TRY("beginning a transaction", rd_kafka_begin_transaction(thr->kafka.producer));
    bk_log_debug("%s: transactional producer ready in %lld ms", thr->name,
                 (long long)(bk_clock_mono_ms() - t0));
    return 0;
}

/* The input offsets into the open transaction (TxnOffsetCommit), as the consumer's group. */
static int send_offsets(bk_thread_t *thr, rd_kafka_topic_partition_list_t *offsets,
                        rd_kafka_consumer_group_metadata_t *md)
{
    TRY("sending the input offsets to the transaction",
        rd_kafka_send_offsets_to_transaction(thr->kafka.producer, offsets, md, txn_timeout(thr)));
    return 0;
}

int bk_thread_txn_commit(bk_thread_t *thr, rd_kafka_topic_partition_list_t *offsets)
{
    if (thr->fail.delivery) {
        return -1;
    }
    if (offsets && offsets->cnt > 0) {
        rd_kafka_consumer_group_metadata_t *md =
            rd_kafka_consumer_group_metadata(thr->kafka.consumer);
        int rc;
        if (!md) {
            snprintf(thr->fail.dr_err, sizeof(thr->fail.dr_err),
                     "the consumer has no group metadata");
            thr->fail.delivery = 1;
            return -1;
        }
        rc = send_offsets(thr, offsets, md);
        rd_kafka_consumer_group_metadata_destroy(md);
        if (rc != 0) {
            return -1;
        }
    }
    TRY("committing the transaction",
        rd_kafka_commit_transaction(thr->kafka.producer, txn_timeout(thr)));
    TRY("beginning a transaction", rd_kafka_begin_transaction(thr->kafka.producer));
    return 0;
}
