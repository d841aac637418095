/* fetchkick.h - wakes librdkafka's fetcher when a consumer has drained its queue while its
 * partitions have more to read.
 *
 * librdkafka 2.0.2 (Debian's) stops fetching while a consumer's queue holds
 * queued.max.messages.kbytes of records (or queued.min.messages of them), and looks again
 * only when an operation or I/O reaches that broker's thread, or after a second
 * (rd_kafka_max_block_ms in rd_kafka_broker_consumer_serve). A consumer that drains its
 * queue in less than a second then waits for the rest of it, every time: that is why the
 * cap was 256 MB, most of a node's memory (docs/performance.md, Memory). librdkafka 2.1
 * made the wait a setting (fetch.queue.backoff.ms). Here a consumer that found its queue
 * empty after taking at least half a cap's worth since it was last empty (else the queue
 * never reached the cap and the fetcher never stopped on it) asks the leaders of the
 * partitions that run came from for their end offsets (ListOffsets, one request per
 * leader): the request and its reply are I/O on those brokers' threads, which then see
 * the queue below the cap and fetch. The partitions are those of the messages taken, not
 * the consumer's assignment: rd_kafka_assignment() waits, without a timeout, on
 * librdkafka's main thread. */
#ifndef BK_FETCHKICK_H
#define BK_FETCHKICK_H

#include <librdkafka/rdkafka.h>
#include <stddef.h>
#include <stdint.h>

/* partitions of a run remembered for its kick: one per leader is enough to wake it */
#define BK_FETCHKICK_PARTS 256

typedef struct bk_fetchkick {
    uint64_t run_bytes; /* key and value bytes taken since the queue was last empty */
    uint64_t run_msgs;  /* and messages */
    int64_t cap_bytes;  /* the consumer's caps (0: not read yet) */
    int64_t cap_msgs;
    int due;            /* a run reached half a cap: kick at the next idle moment */
    int64_t last_ms;    /* when the last kick went, monotonic (0: never) */
    const void *last_rkt; /* the partition of the last message taken (compared, not used) */
    int32_t last_part;
    int nparts; /* the run's partitions (topic names owned) */
    char *topic[BK_FETCHKICK_PARTS];
    int32_t part[BK_FETCHKICK_PARTS];
} bk_fetchkick_t;

void bk_fetchkick_init(bk_fetchkick_t *k);
void bk_fetchkick_free(bk_fetchkick_t *k);

/* Counts what the caller took from the queue (n messages). */
void bk_fetchkick_took(bk_fetchkick_t *k, rd_kafka_message_t *const *msgs, size_t n);

/* Called when `consumer`'s queue is empty, before waiting on it for up to wait_ms. Kicks
 * when the run since the queue was last empty could have filled it to a cap, at most once
 * every 5 ms, blocking for the reply at most wait_ms. Returns how long the caller should
 * wait before it calls again: wait_ms, or less when a kick is due within it. */
int bk_fetchkick_idle(bk_fetchkick_t *k, rd_kafka_t *consumer, int wait_ms);

#endif
