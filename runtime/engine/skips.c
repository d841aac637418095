/* skips.c - the records `beck skip` listed, read from <app>-skips (skips.h). */
#include "engine/skips.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <librdkafka/rdkafka.h>

#include "base/clock.h"
#include "base/log.h"
#include "engine/kafka.h"

#define READ_MS 5000 /* a read's bound: the list is small, a broker that does not answer is not */

typedef struct {
    char *key, *note;
} entry_t;

struct bk_skips_s {
    pthread_mutex_t lock;
    const bk_conf_t *conf;
    char topic[300];
    rd_kafka_t *consumer; /* made at the first read */
    int exists;           /* the topic was seen: no more metadata of every topic */
    int64_t next;         /* the next offset to read */
    int64_t read_at;      /* mono ms of the last read; 0: none */
    entry_t *list;
    int n, cap;
};

void bk_skips_topic(const char *app, char *out, size_t size)
{
    snprintf(out, size, "%s-skips", app);
}

void bk_skips_key(const char *topic, int32_t partition, int64_t offset, char *out, size_t size)
{
    snprintf(out, size, "%s/%d/%" PRId64, topic, (int)partition, offset);
}

bk_skips_t *bk_skips_new(const bk_conf_t *conf, const char *app)
{
    bk_skips_t *s = calloc(1, sizeof(*s));
    if (!s) {
        return NULL;
    }
    pthread_mutex_init(&s->lock, NULL);
    s->conf = conf;
    bk_skips_topic(app, s->topic, sizeof(s->topic));
    return s;
}

void bk_skips_destroy(bk_skips_t *s)
{
    if (!s) {
        return;
    }
    if (s->consumer) {
        rd_kafka_consumer_close(s->consumer);
        rd_kafka_destroy(s->consumer);
    }
    for (int i = 0; i < s->n; i++) {
        free(s->list[i].key);
        free(s->list[i].note);
    }
    free(s->list);
    pthread_mutex_destroy(&s->lock);
    free(s);
}

static void add(bk_skips_t *s, const rd_kafka_message_t *m)
{
    if (!m->key || m->key_len == 0 || m->key_len > 600) {
        return;
    }
    if (s->n == s->cap) {
        int cap = s->cap ? 2 * s->cap : 8;
        entry_t *l = realloc(s->list, (size_t)cap * sizeof(*l));
        if (!l) {
            return;
        }
        s->list = l;
        s->cap = cap;
    }
    s->list[s->n].key = strndup(m->key, m->key_len);
    s->list[s->n].note = strndup(m->payload ? (const char *)m->payload : "", m->len > 400 ? 400 : m->len);
    if (s->list[s->n].key && s->list[s->n].note) {
        s->n++;
    } else {
        free(s->list[s->n].key);
        free(s->list[s->n].note);
    }
}

/* What was added since the last read. Under the lock. */
static void read_new(bk_skips_t *s)
{
    const char *topics[1] = {s->topic};
    int32_t parts[1] = {0};
    int64_t lo = 0, hi = 0, deadline = bk_clock_mono_ms() + READ_MS;
    rd_kafka_topic_partition_list_t *list;
    char err[512];

    if (!s->consumer) {
        static const char *const extra[] = {"enable.auto.commit", "false", NULL};
        s->consumer = bk_kafka_new_with(s->conf, BK_KAFKA_CONSUMER, "beck-skips", extra, NULL,
                                        NULL, err, sizeof(err));
        if (!s->consumer) {
            bk_log_warn("cannot read %s: %s", s->topic, err);
            return;
        }
    }
    if (!s->exists && !(s->exists = bk_kafka_topic_exists(s->consumer, s->topic, READ_MS) > 0)) {
        return; /* nobody ran `beck skip` for this app */
    }
    if (bk_kafka_watermarks(s->consumer, topics, parts, 1, &lo, &hi, READ_MS, NULL) != 0) {
        bk_log_warn("cannot read the end of %s: the records it lists are as last read",
                    s->topic);
        return;
    }
    if (s->next < lo) {
        s->next = lo;
    }
    if (s->next >= hi) {
        return;
    }
    list = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(list, s->topic, 0)->offset = s->next;
    rd_kafka_assign(s->consumer, list);
    rd_kafka_topic_partition_list_destroy(list);
    while (s->next < hi && bk_clock_mono_ms() < deadline) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(s->consumer, 100);
        if (!m) {
            continue;
        }
        if (!m->err) {
            add(s, m);
            s->next = m->offset + 1;
        } else if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
            s->next = hi;
        }
        rd_kafka_message_destroy(m);
    }
    rd_kafka_assign(s->consumer, NULL);
    if (s->next < hi) {
        bk_log_warn("%s: read to offset %" PRId64 " of %" PRId64 " in %d s; the rest next time",
                    s->topic, s->next, hi, READ_MS / 1000);
    }
}

int bk_skips_listed(bk_skips_t *s, const char *topic, int32_t partition, int64_t offset,
                    int max_age_ms, char *note, size_t note_size)
{
    char key[600];
    int found = 0;
    if (!s) {
        return 0;
    }
    bk_skips_key(topic, partition, offset, key, sizeof(key));
    pthread_mutex_lock(&s->lock);
    if (s->read_at == 0 || bk_clock_mono_ms() - s->read_at >= max_age_ms) {
        read_new(s);
        s->read_at = bk_clock_mono_ms();
    }
    for (int i = s->n - 1; i >= 0 && !found; i--) {
        if (strcmp(s->list[i].key, key) == 0) {
            snprintf(note, note_size, "%s", s->list[i].note);
            found = 1;
        }
    }
    pthread_mutex_unlock(&s->lock);
    return found;
}
