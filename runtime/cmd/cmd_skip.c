/* cmd_skip.c - `beck skip` (cmd_skip.h). */
#include "cmd/cmd_skip.h"

#include <inttypes.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <librdkafka/rdkafka.h>

#include "base/clock.h"
#include "base/conf.h"
#include "base/log.h"
#include "cmd/cmd_opts.h"
#include "engine/kafka.h"
#include "engine/skips.h"

#define WAIT_MS 15000 /* each step's bound: reading the record, writing */

static void usage(FILE *out)
{
    fprintf(out,
            "usage: beck skip -b BROKERS --app ID --topic T --partition P --offset O\n"
            "                 [--to-dlq] [--reason TEXT] [-X key=value]...\n\n"
            "Moves app ID past one input record that its processor cannot process (a poison\n"
            "record): it is listed in the topic <ID>-skips, and a task that meets it skips it\n"
            "when it raises, under any on_error. A task parked on it (on_error=fail) goes on\n"
            "within seconds, from its last commit, with nothing else skipped; a stopped app\n"
            "skips it when it starts. With --to-dlq the record is first copied to <ID>-dlq,\n"
            "with headers beck.topic, beck.partition, beck.offset and beck.error (the reason).\n"
            "The listing says who skipped it, when and why (docs/reliability.md, Poison\n"
            "records). Exits 1 when the record cannot be read or the listing not written.\n");
}

typedef struct {
    rd_kafka_resp_err_t err;
    int done;
} delivery_t;

static void on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
    delivery_t *d = m->_private;
    (void)rk;
    (void)opaque;
    if (d) {
        d->err = m->err;
        d->done = 1;
    }
}

/* Waits for one delivery report: 0, or -1 with errstr. */
static int delivered(rd_kafka_t *rk, delivery_t *d, const char *topic, char *errstr,
                     size_t errstr_size)
{
    int64_t deadline = bk_clock_mono_ms() + WAIT_MS;
    while (!d->done && bk_clock_mono_ms() < deadline) {
        rd_kafka_poll(rk, 100);
    }
    if (!d->done || d->err) {
        snprintf(errstr, errstr_size, "could not write to %s: %s", topic,
                 d->done ? rd_kafka_err2str(d->err) : "no answer in 15 s");
        return -1;
    }
    return 0;
}

/* A record read, copied out of its client (a message held keeps its client from ending). */
typedef struct {
    char *key, *value;
    size_t key_len, value_len;
    rd_kafka_headers_t *headers; /* or NULL */
} record_t;

static void record_free(record_t *r)
{
    free(r->key);
    free(r->value);
    if (r->headers) {
        rd_kafka_headers_destroy(r->headers);
    }
    memset(r, 0, sizeof(*r));
}

static int record_copy(record_t *r, rd_kafka_message_t *m)
{
    rd_kafka_headers_t *h = NULL;
    r->key_len = m->key ? m->key_len : 0;
    r->value_len = m->payload ? m->len : 0;
    r->key = m->key ? malloc(m->key_len + 1) : NULL;
    r->value = m->payload ? malloc(m->len + 1) : NULL;
    if ((m->key && !r->key) || (m->payload && !r->value)) {
        return -1;
    }
    if (r->key) {
        memcpy(r->key, m->key, m->key_len);
    }
    if (r->value) {
        memcpy(r->value, m->payload, m->len);
    }
    r->headers = rd_kafka_message_headers(m, &h) == 0 ? rd_kafka_headers_copy(h) : NULL;
    return 0;
}

/* The record at topic/partition/offset into *out. 0, or -1 with errstr. */
static int read_record(const bk_conf_t *conf, const char *topic, int32_t partition, int64_t offset,
                       record_t *rec, char *errstr, size_t errstr_size)
{
    rd_kafka_message_t *got = NULL, **out = &got;
    static const char *const extra[] = {"enable.auto.commit", "false", NULL};
    const char *topics[1] = {topic};
    int64_t lo = 0, hi = 0, deadline;
    rd_kafka_topic_partition_list_t *list;
    rd_kafka_t *rk = bk_kafka_new_with(conf, BK_KAFKA_CONSUMER, "beck-skip", extra, NULL, NULL,
                                       errstr, errstr_size);
    int rc = -1;
    if (!rk) {
        return -1;
    }
    if (bk_kafka_watermarks(rk, topics, &partition, 1, &lo, &hi, WAIT_MS, NULL) != 0) {
        snprintf(errstr, errstr_size,
                 "cannot read the offsets of %s [%d] in %d s: is it a topic "
                 "of the app, and partition %d one of its partitions?",
                 topic, (int)partition, WAIT_MS / 1000, (int)partition);
        goto done;
    }
    if (hi <= lo) {
        snprintf(errstr, errstr_size, "%s [%d] holds no record (is it an input of the app?)", topic,
                 (int)partition);
        goto done;
    }
    if (offset < lo || offset >= hi) {
        snprintf(errstr, errstr_size,
                 "%s [%d] holds offsets %" PRId64 " to %" PRId64 ": none at %" PRId64, topic,
                 (int)partition, lo, hi - 1, offset);
        goto done;
    }
    list = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(list, topic, partition)->offset = offset;
    rd_kafka_assign(rk, list);
    rd_kafka_topic_partition_list_destroy(list);
    deadline = bk_clock_mono_ms() + WAIT_MS;
    while (!*out && bk_clock_mono_ms() < deadline) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 200);
        if (m && !m->err && m->offset >= offset) {
            *out = m;
        } else if (m) {
            rd_kafka_message_destroy(m);
        }
    }
    if (!*out) {
        snprintf(errstr, errstr_size, "could not read %s [%d] at offset %" PRId64 " in %d s", topic,
                 (int)partition, offset, WAIT_MS / 1000);
    } else if ((*out)->offset != offset) {
        snprintf(errstr, errstr_size,
                 "%s [%d] has no record at offset %" PRId64
                 " (compacted, or a transaction marker): the next one is at %" PRId64,
                 topic, (int)partition, offset, (*out)->offset);
        rd_kafka_message_destroy(*out);
        *out = NULL;
    } else if (record_copy(rec, *out) != 0) {
        snprintf(errstr, errstr_size, "out of memory");
    } else {
        rc = 0;
    }
    if (*out) {
        rd_kafka_message_destroy(*out);
    }
    rd_kafka_assign(rk, NULL);

done:
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
    return rc;
}

/* The topic exists, or is made (one partition; compacted for the list). */
static int ensure_topic(rd_kafka_t *rk, const char *topic, int compact, char *errstr,
                        size_t errstr_size)
{
    static const char *const compacted[] = {"cleanup.policy", "compact", NULL};
    int found = bk_kafka_topic_exists(rk, topic, WAIT_MS);
    if (found < 0) {
        snprintf(errstr, errstr_size, "no broker answered with the cluster's topics in %d s",
                 WAIT_MS / 1000);
        return -1;
    }
    if (found) {
        return 0;
    }
    bk_log_set_level(BK_LOG_WARN); /* the "creating topic" line is for nodes */
    /* (on a dev broker through its control channel: the cluster's metadata says) */
    if (bk_kafka_create_topic(rk, topic, 1, -1, compact ? compacted : NULL, errstr, errstr_size) !=
        0) {
        return -1;
    }
    return bk_kafka_wait_leaders(rk, topic, WAIT_MS) < 0
               ? (snprintf(errstr, errstr_size, "%s has no leader yet", topic), -1)
               : 0;
}

int bk_cmd_skip_main(int argc, char **argv)
{
    bk_conf_t *conf = bk_conf_new();
    const char *app = NULL, *topic = NULL, *reason = NULL;
    int32_t partition = -1;
    int64_t offset = -1;
    int to_dlq = 0, rc = 1;
    char err[1024], skips[300], dlq[300], key[600], note[1024], host[128], stamp[64];
    record_t rec = {0};
    rd_kafka_t *rk = NULL;
    delivery_t d1 = {0}, d2 = {0};

    {
        long part = -1, off = -1;
        const bk_cmd_opt_t opts[] = {
            {NULL, BK_OPT_KAFKA, NULL, 0, 0},
            {"--app", BK_OPT_STR, &app, 0, 0},
            {"--topic", BK_OPT_STR, &topic, 0, 0},
            {"--partition", BK_OPT_INT, &part, 0, INT32_MAX},
            {"--offset", BK_OPT_INT, &off, 0, INT64_MAX},
            {"--reason", BK_OPT_STR, &reason, 0, 0},
            {"--to-dlq", BK_OPT_FLAG, &to_dlq, 0, 0},
        };
        bk_cmd_args_t args = {"skip", opts, 7, conf, NULL, 0, 0};
        int parsed = bk_cmd_opts_parse(&args, argc, argv);
        if (parsed == 1) {
            usage(stdout);
            rc = 0;
            goto done;
        }
        if (parsed != 0) {
            rc = 2;
            goto done;
        }
        partition = (int32_t)part;
        offset = off;
    }
    if (!bk_conf_str(conf, BK_CONF_BROKERS) || !app || !topic || partition == -1 || offset == -1) {
        fprintf(stderr, "beck skip: -b, --app, --topic, --partition and --offset are needed "
                        "(see --help)\n");
        rc = 2;
        goto done;
    }
    bk_conf_set(conf, BK_CONF_APP_ID, app, BK_CONF_FROM_CLI, err, sizeof(err));
    bk_log_set_level(BK_LOG_WARN);
    if (read_record(conf, topic, partition, offset, &rec, err, sizeof(err)) != 0) {
        fprintf(stderr, "beck skip: %s\n", err);
        goto done;
    }
    rk = bk_kafka_new(conf, BK_KAFKA_PRODUCER, "beck-skip", NULL, on_delivery, err, sizeof(err));
    if (!rk) {
        fprintf(stderr, "beck skip: %s\n", err);
        goto done;
    }
    snprintf(dlq, sizeof(dlq), "%s-dlq", app);
    if (to_dlq) {
        rd_kafka_headers_t *hdrs;
        char num[32];
        if (ensure_topic(rk, dlq, 0, err, sizeof(err)) != 0) {
            fprintf(stderr, "beck skip: %s: %s\n", dlq, err);
            goto done;
        }
        hdrs = rec.headers ? rd_kafka_headers_copy(rec.headers) : rd_kafka_headers_new(4);
        rd_kafka_header_add(hdrs, "beck.error", -1, reason ? reason : "skipped by beck skip", -1);
        rd_kafka_header_add(hdrs, "beck.topic", -1, topic, -1);
        snprintf(num, sizeof(num), "%d", (int)partition);
        rd_kafka_header_add(hdrs, "beck.partition", -1, num, -1);
        snprintf(num, sizeof(num), "%" PRId64, offset);
        rd_kafka_header_add(hdrs, "beck.offset", -1, num, -1);
        if (rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(dlq), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                              RD_KAFKA_V_KEY(rec.key, rec.key_len),
                              RD_KAFKA_V_VALUE(rec.value, rec.value_len), RD_KAFKA_V_HEADERS(hdrs),
                              RD_KAFKA_V_OPAQUE(&d1), RD_KAFKA_V_END) != 0) {
            rd_kafka_headers_destroy(hdrs);
            fprintf(stderr, "beck skip: cannot write to %s\n", dlq);
            goto done;
        }
        if (delivered(rk, &d1, dlq, err, sizeof(err)) != 0) {
            fprintf(stderr, "beck skip: %s\n", err);
            goto done;
        }
    }
    bk_skips_topic(app, skips, sizeof(skips));
    if (ensure_topic(rk, skips, 1, err, sizeof(err)) != 0) {
        fprintf(stderr, "beck skip: %s: %s\n", skips, err);
        goto done;
    }
    {
        time_t now = time(NULL);
        struct tm tm;
        const struct passwd *pw = getpwuid(getuid());
        gmtime_r(&now, &tm);
        strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%SZ", &tm);
        if (gethostname(host, sizeof(host)) != 0) {
            snprintf(host, sizeof(host), "?");
        }
        host[sizeof(host) - 1] = '\0';
        snprintf(note, sizeof(note), "by %s@%s at %s%s%s", pw ? pw->pw_name : "?", host, stamp,
                 to_dlq ? ", copied to " : "", to_dlq ? dlq : "");
        if (reason) {
            size_t len = strlen(note);
            snprintf(note + len, sizeof(note) - len, ": %s", reason);
        }
    }
    bk_skips_key(topic, partition, offset, key, sizeof(key));
    if (rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(skips), RD_KAFKA_V_PARTITION(0),
                          RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                          RD_KAFKA_V_KEY(key, strlen(key)), RD_KAFKA_V_VALUE(note, strlen(note)),
                          RD_KAFKA_V_OPAQUE(&d2), RD_KAFKA_V_END) != 0 ||
        delivered(rk, &d2, skips, err, sizeof(err)) != 0) {
        fprintf(stderr, "beck skip: %s\n", d2.done ? err : "cannot write the listing");
        goto done;
    }
    printf("listed %s in %s (%s): app %s skips it when it raises; a task parked on it goes on "
           "within seconds%s%s\n",
           key, skips, note, app, to_dlq ? "; the record is in " : "", to_dlq ? dlq : "");
    rc = 0;

done:
    record_free(&rec);
    if (rk) {
        rd_kafka_flush(rk, 1000);
        rd_kafka_destroy(rk);
    }
    bk_conf_destroy(conf);
    return rc;
}
