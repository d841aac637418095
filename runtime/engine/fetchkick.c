/* fetchkick.c - a ListOffsets request to wake a stalled fetcher (fetchkick.h). */
#include "engine/fetchkick.h"

#include <stdlib.h>
#include <string.h>

#include "base/clock.h"

#define KICK_GAP_MS 5

void bk_fetchkick_init(bk_fetchkick_t *k)
{
    memset(k, 0, sizeof(*k));
}

static void forget_parts(bk_fetchkick_t *k)
{
    for (int i = 0; i < k->nparts; i++) {
        free(k->topic[i]);
    }
    k->nparts = 0;
    k->last_rkt = NULL;
}

void bk_fetchkick_free(bk_fetchkick_t *k)
{
    forget_parts(k);
}

/* Adds a partition to the run's, once (messages come in runs of one partition: only a
 * change of partition gets here). */
static void remember(bk_fetchkick_t *k, const char *topic, int32_t part)
{
    for (int i = 0; i < k->nparts; i++) {
        if (k->part[i] == part && strcmp(k->topic[i], topic) == 0) {
            return;
        }
    }
    if (k->nparts < BK_FETCHKICK_PARTS && (k->topic[k->nparts] = strdup(topic))) {
        k->part[k->nparts++] = part;
    }
}

void bk_fetchkick_took(bk_fetchkick_t *k, rd_kafka_message_t *const *msgs, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const rd_kafka_message_t *m = msgs[i];
        k->run_bytes += m->len + m->key_len;
        if (m->rkt && ((const void *)m->rkt != k->last_rkt || m->partition != k->last_part)) {
            k->last_rkt = m->rkt;
            k->last_part = m->partition;
            remember(k, rd_kafka_topic_name(m->rkt), m->partition);
        }
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

int bk_fetchkick_idle(bk_fetchkick_t *k, rd_kafka_t *consumer, int wait_ms)
{
    rd_kafka_topic_partition_list_t *list;
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
        forget_parts(k);
        return wait_ms;
    }
    now_ms = bk_clock_mono_ms();
    due_ms = k->last_ms + KICK_GAP_MS;
    if (now_ms < due_ms) {
        return due_ms - now_ms < wait_ms ? (int)(due_ms - now_ms) : wait_ms;
    }
    k->due = 0;
    if (k->nparts == 0) {
        return wait_ms;
    }
    list = rd_kafka_topic_partition_list_new(k->nparts);
    for (int i = 0; i < k->nparts; i++) {
        rd_kafka_topic_partition_list_add(list, k->topic[i], k->part[i])->offset =
            RD_KAFKA_OFFSET_END;
    }
    forget_parts(k);
    k->last_ms = now_ms;
    /* the answer is not used: the request and its reply are what wake the fetchers */
    (void)rd_kafka_offsets_for_times(consumer, list, wait_ms);
    rd_kafka_topic_partition_list_destroy(list);
    return wait_ms;
}
