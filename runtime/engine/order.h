/* order.h - a task's input partitions merged by timestamp, as Kafka Streams picks a task's
 * next record (docs/dsl.md, Stream time).
 *
 * A task that reads more than one input partition (a join's two sides, a merge) processes
 * its records in timestamp order: the next is the head of the partition whose head has the
 * smallest timestamp; within a partition, offset order. So that order does not depend on
 * which partition the consumer fetched first, a task waits while one of its partitions has
 * nothing held and may have records on the broker: it goes on once that partition reached
 * its end (the consumer's partition EOF), and, with max_task_idle_ms > 0, once it stayed
 * there that long. max_task_idle_ms -1 never waits (what is held is merged, nothing more).
 *
 * The stream thread pushes each fetched message of such a task here, and takes them back in
 * order; a partition holding BK_ORDER_PAUSE_AT messages is paused at the consumer until it
 * is down to half. Messages held are the thread's: nothing of them is processed or
 * committed until taken back, so dropping a partition's (its task left, or starts again
 * from its last commit) loses nothing. Stream thread only. */
#ifndef BK_ORDER_H
#define BK_ORDER_H

#include <librdkafka/rdkafka.h>
#include <stdint.h>

#define BK_ORDER_PAUSE_AT 20000

typedef struct bk_order_part {
    rd_kafka_message_t **m; /* a ring of held messages, in offset order */
    int head, n, cap;
    int eof;         /* at its end: a partition EOF came after its last message */
    int paused;      /* paused at the consumer (BK_ORDER_PAUSE_AT) */
    int64_t idle_at; /* mono ms from which an empty partition at its end is passed over */
} bk_order_part_t;

typedef struct bk_order {
    bk_order_part_t *parts; /* by the thread's toppar number */
    int nparts;
    int64_t held;    /* messages held, all partitions */
    int64_t idle_ms; /* max_task_idle_ms */
    rd_kafka_t *consumer;
} bk_order_t;

void bk_order_init(bk_order_t *o, rd_kafka_t *consumer, int64_t idle_ms);

/* Destroys every message held. */
void bk_order_free(bk_order_t *o);

/* Holds m, fetched from toppar tp. 0, or -1 out of memory (m not taken). */
int bk_order_push(bk_order_t *o, int tp, rd_kafka_message_t *m);

/* Toppar tp reached its end (a partition EOF fetched after its last message). */
void bk_order_eof(bk_order_t *o, int tp);

/* Destroys what tp holds and forgets its state (its task left the thread, or starts again
 * from its last commit). */
void bk_order_drop(bk_order_t *o, int tp);

/* The next message of the task reading toppars tps[0..n), by timestamp, taken out (the
 * caller's now); NULL when it holds none, or must wait for one of its partitions. *tp: its
 * toppar. now_ms: the monotonic clock. */
rd_kafka_message_t *bk_order_next(bk_order_t *o, const int *tps, int n, int64_t now_ms, int *tp);

#endif
