/* order.c - a task's input partitions merged by timestamp (order.h). */
#include <stdlib.h>
#include <string.h>

#include "engine/order.h"

void bk_order_init(bk_order_t *o, rd_kafka_t *consumer, int64_t idle_ms)
{
    memset(o, 0, sizeof(*o));
    o->consumer = consumer;
    o->idle_ms = idle_ms;
}

void bk_order_free(bk_order_t *o)
{
    for (int tp = 0; tp < o->nparts; tp++) {
        bk_order_drop(o, tp);
        free(o->parts[tp].m);
    }
    free(o->parts);
    o->parts = NULL;
    o->nparts = 0;
}

/* parts grown to hold toppar tp. 0, or -1 out of memory. */
static int room(bk_order_t *o, int tp)
{
    int n = o->nparts;
    bk_order_part_t *more;
    if (tp < n) {
        return 0;
    }
    while (n <= tp) {
        n = n * 2 + 8;
    }
    if (!(more = realloc(o->parts, (size_t)n * sizeof(*more)))) {
        return -1;
    }
    memset(more + o->nparts, 0, (size_t)(n - o->nparts) * sizeof(*more));
    o->parts = more;
    o->nparts = n;
    return 0;
}

/* Pauses or resumes the partition of m at the consumer. */
static void pause_resume(bk_order_t *o, bk_order_part_t *p, const rd_kafka_message_t *m, int pause)
{
    rd_kafka_topic_partition_list_t *list;
    if (!o->consumer || !m->rkt || p->paused == pause) {
        return;
    }
    list = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(list, rd_kafka_topic_name(m->rkt), m->partition);
    if (pause) {
        rd_kafka_pause_partitions(o->consumer, list);
    } else {
        rd_kafka_resume_partitions(o->consumer, list);
    }
    rd_kafka_topic_partition_list_destroy(list);
    p->paused = pause;
}

int bk_order_push(bk_order_t *o, int tp, rd_kafka_message_t *m)
{
    bk_order_part_t *p;
    if (tp < 0 || room(o, tp) != 0) {
        return -1;
    }
    p = &o->parts[tp];
    if (p->n == p->cap) {
        int cap = p->cap * 2 + 64;
        rd_kafka_message_t **more = malloc((size_t)cap * sizeof(*more));
        if (!more) {
            return -1;
        }
        for (int i = 0; i < p->n; i++) {
            more[i] = p->m[(p->head + i) % p->cap];
        }
        free(p->m);
        p->m = more;
        p->cap = cap;
        p->head = 0;
    }
    p->m[(p->head + p->n) % p->cap] = m;
    p->n++;
    p->eof = 0;
    p->idle_at = 0;
    o->held++;
    if (p->n >= BK_ORDER_PAUSE_AT) {
        pause_resume(o, p, m, 1); /* the others' records wait for this one's to be taken */
    }
    return 0;
}

void bk_order_eof(bk_order_t *o, int tp)
{
    if (tp >= 0 && room(o, tp) == 0) {
        o->parts[tp].eof = 1;
    }
}

void bk_order_drop(bk_order_t *o, int tp)
{
    bk_order_part_t *p;
    if (tp < 0 || tp >= o->nparts) {
        return;
    }
    p = &o->parts[tp];
    if (p->paused && p->n > 0) {
        pause_resume(o, p, p->m[p->head], 0); /* assigned again later, it must fetch */
    }
    for (int i = 0; i < p->n; i++) {
        rd_kafka_message_destroy(p->m[(p->head + i) % p->cap]);
    }
    o->held -= p->n;
    p->head = p->n = 0;
    p->eof = p->paused = 0;
    p->idle_at = 0;
}

/* May the task go on without a record of empty partition p? Kafka Streams' rule: not while
 * the partition may have records on the broker; at its end, after max_task_idle_ms. */
static int passable(bk_order_t *o, bk_order_part_t *p, int64_t now_ms)
{
    if (o->idle_ms < 0) {
        return 1;
    }
    if (!p->eof) {
        return 0;
    }
    if (o->idle_ms == 0) {
        return 1;
    }
    if (p->idle_at == 0) {
        p->idle_at = now_ms + o->idle_ms;
    }
    return now_ms >= p->idle_at;
}

rd_kafka_message_t *bk_order_next(bk_order_t *o, const int *tps, int n, int64_t now_ms, int *tp)
{
    int best = -1;
    int64_t best_ts = 0;
    bk_order_part_t *p;
    rd_kafka_message_t *m;

    for (int i = 0; i < n; i++) {
        bk_order_part_t *q = tps[i] >= 0 && tps[i] < o->nparts ? &o->parts[tps[i]] : NULL;
        int64_t ts;
        if (!q || q->n == 0) {
            /* (a partition never heard of is not known to be at its end) */
            if (o->idle_ms >= 0 && !(q && passable(o, q, now_ms))) {
                return NULL;
            }
            continue;
        }
        ts = rd_kafka_message_timestamp(q->m[q->head], NULL);
        if (best < 0 || ts < best_ts) { /* a tie goes to the earlier input */
            best = i;
            best_ts = ts;
        }
    }
    if (best < 0) {
        return NULL;
    }
    p = &o->parts[tps[best]];
    m = p->m[p->head];
    p->head = (p->head + 1) % p->cap;
    p->n--;
    o->held--;
    if (p->paused && p->n <= BK_ORDER_PAUSE_AT / 2) {
        pause_resume(o, p, m, 0);
    }
    *tp = tps[best];
    return m;
}
