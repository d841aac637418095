/* fetchkick.c - a ListOffsets request to wake a stalled fetcher (fetchkick.h). */
#include "engine/fetchkick.h"

#include <stdlib.h>

#include "base/clock.h"

#define KICK_GAP_MS 5

void bk_fetchkick_init(bk_fetchkick_t *k)
{
    k->run_bytes = 0;
    k->run_msgs = 0;
    k->cap_bytes = 0;
    k->cap_msgs = 0;
    k->due = 0;
    k->last_ms = 0;
}

void bk_fetchkick_took(bk_fetchkick_t *k, rd_kafka_message_t *const *msgs, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        k->run_bytes += msgs[i]->len + msgs[i]->key_len;
    }
    k->run_msgs += n;
}

/* A setting of the consumer's as a number, or `dflt`. */
static int64_t setting(rd_kafka_t *consumer, const char *name, int64_t dflt)
{
    char buf[64];
    size_t size = sizeof(buf);
    if (rd_kafka_conf_get(rd_kafka_conf(consumer), name, buf, &size) != RD_KAFKA_CONF_OK) {
        return dflt;
    }
    return strtoll(buf, NULL, 10);
}

/* The partitions of the assignment with records past their position, with offset
 * RD_KAFKA_OFFSET_END (what rd_kafka_offsets_for_times asks for); NULL when none. */
static rd_kafka_topic_partition_list_t *lagging(rd_kafka_t *consumer)
{
    rd_kafka_topic_partition_list_t *a = NULL, *lag = NULL;

    if (rd_kafka_assignment(consumer, &a) != RD_KAFKA_RESP_ERR_NO_ERROR || !a) {
        return NULL;
    }
    if (a->cnt > 0 && rd_kafka_position(consumer, a) == RD_KAFKA_RESP_ERR_NO_ERROR) {
        for (int i = 0; i < a->cnt; i++) {
            const rd_kafka_topic_partition_t *p = &a->elems[i];
            int64_t lo, hi;
            /* no position yet: nothing taken from it, so its fetch has not stopped on it */
            if (p->offset < 0 ||
                rd_kafka_get_watermark_offsets(consumer, p->topic, p->partition, &lo, &hi) !=
                    RD_KAFKA_RESP_ERR_NO_ERROR ||
                hi <= p->offset) {
                continue;
            }
            if (!lag) {
                lag = rd_kafka_topic_partition_list_new(a->cnt);
            }
            rd_kafka_topic_partition_list_add(lag, p->topic, p->partition)->offset =
                RD_KAFKA_OFFSET_END;
        }
    }
    rd_kafka_topic_partition_list_destroy(a);
    return lag;
}

int bk_fetchkick_idle(bk_fetchkick_t *k, rd_kafka_t *consumer, int wait_ms)
{
    rd_kafka_topic_partition_list_t *lag;
    int64_t now_ms, due_ms;

    if (wait_ms <= 0) {
        return wait_ms;
    }
    if (k->cap_bytes == 0) {
        k->cap_bytes = setting(consumer, "queued.max.messages.kbytes", 65536) * 1024;
        k->cap_msgs = setting(consumer, "queued.min.messages", 100000);
    }
    /* the queue is empty: the run since it was last empty ends here. Half a cap, as the
     * cap counts librdkafka's own idea of a message's size */
    if ((int64_t)k->run_bytes * 2 >= k->cap_bytes || (int64_t)k->run_msgs * 2 >= k->cap_msgs) {
        k->due = 1;
    }
    k->run_bytes = 0;
    k->run_msgs = 0;
    if (!k->due) {
        return wait_ms;
    }
    now_ms = bk_clock_mono_ms();
    due_ms = k->last_ms + KICK_GAP_MS;
    if (now_ms < due_ms) {
        return due_ms - now_ms < wait_ms ? (int)(due_ms - now_ms) : wait_ms;
    }
    k->due = 0;
    if (!(lag = lagging(consumer))) {
        return wait_ms;
    }
    k->last_ms = now_ms;
    /* the answer is not used: the request and its reply are what wake the fetchers */
    (void)rd_kafka_offsets_for_times(consumer, lag, wait_ms);
    rd_kafka_topic_partition_list_destroy(lag);
    return wait_ms;
}
