/* fetchkick.h - wakes librdkafka's fetcher when a consumer has drained its queue while its
 * partitions have more to read.
 *
 * librdkafka 2.0.2 (Debian's) stops fetching while a consumer's queue holds
 * queued.max.messages.kbytes of records, and looks again only when an operation or I/O
 * reaches that broker's thread, or after a second (rd_kafka_max_block_ms in
 * rd_kafka_broker_consumer_serve). A consumer that drains its queue in less than a second
 * then waits for the rest of it, every time: that is why the cap was 256 MB, most of a
 * node's memory (docs/performance.md, Memory). librdkafka 2.1 made the wait a setting
 * (fetch.queue.backoff.ms). Here a consumer found idle asks its lagging partitions' leaders
 * for their end offsets (ListOffsets, one request per leader): the request and its reply
 * are I/O on those brokers' threads, which then see the queue below the cap and fetch. */
#ifndef BK_FETCHKICK_H
#define BK_FETCHKICK_H

#include <librdkafka/rdkafka.h>
#include <stdint.h>

typedef struct bk_fetchkick {
    int64_t last_ms;   /* when the last kick went, monotonic (0: never) */
    int64_t gap_ms;    /* least time between kicks: doubles while kicks bring nothing */
    uint64_t received; /* the consumer's count of received messages then */
} bk_fetchkick_t;

void bk_fetchkick_init(bk_fetchkick_t *k);

/* Called when `consumer`'s queue is empty, before waiting on it for up to wait_ms:
 * `received` counts the messages the caller has taken from it so far. Kicks when a
 * partition of its assignment has records past its position (the high watermark of the
 * last fetch), at most once per gap (5 ms, doubling up to 1 s while the records received
 * did not grow: a paused partition, or one held below its end by an open transaction),
 * blocking for the reply at most wait_ms. Returns how long the caller should wait before
 * it calls again: wait_ms, or less when a kick is due sooner (the gap since the last one
 * has not passed yet). */
int bk_fetchkick_idle(bk_fetchkick_t *k, rd_kafka_t *consumer, uint64_t received, int wait_ms);

#endif
