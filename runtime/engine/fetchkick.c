/* fetchkick.c - a ListOffsets request to wake a stalled fetcher (fetchkick.h). */
#include "engine/fetchkick.h"

#include "base/clock.h"

#define KICK_MIN_MS 5
#define KICK_MAX_MS 1000

void bk_fetchkick_init(bk_fetchkick_t *k)
{
    k->last_ms = 0;
    k->gap_ms = KICK_MIN_MS;
    k->received = 0;
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

int bk_fetchkick_idle(bk_fetchkick_t *k, rd_kafka_t *consumer, uint64_t received, int wait_ms)
{
    rd_kafka_topic_partition_list_t *lag;
    int64_t now_ms = bk_clock_mono_ms(), due = k->last_ms + k->gap_ms;

    if (wait_ms <= 0) {
        return wait_ms;
    }
    if (now_ms < due) {
        /* too soon for another: wake up when it is due, if records did not come by then */
        return due - now_ms < wait_ms ? (int)(due - now_ms) : wait_ms;
    }
    if (!(lag = lagging(consumer))) {
        k->gap_ms = KICK_MIN_MS;
        return wait_ms;
    }
    /* a kick that brought records may be needed again at the next drain; one that brought
     * nothing waits twice as long before the next */
    if (k->last_ms > 0) {
        k->gap_ms = received > k->received ? KICK_MIN_MS
                    : k->gap_ms * 2 > KICK_MAX_MS ? KICK_MAX_MS
                                                  : k->gap_ms * 2;
    }
    k->last_ms = now_ms;
    k->received = received;
    /* the answer is not used: the request and its reply are what wake the fetchers */
    (void)rd_kafka_offsets_for_times(consumer, lag, wait_ms);
    rd_kafka_topic_partition_list_destroy(lag);
    return wait_ms;
}
