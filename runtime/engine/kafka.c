/* kafka.c - client configuration, metadata and topic creation. */
#include "engine/kafka.h"

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/log.h"
#include "devbroker/devctl.h"
#include "engine/brokerwatch.h"

/* librdkafka 2.0.2 stops fetching past queued.min.messages / queued.max.messages.kbytes
 * and looks again only on I/O or after a second: the count cap is out of the way, and
 * the byte cap is small because every consumer loop wakes the fetcher when its queue runs
 * dry early (fetchkick.h). 16 MB of payload (~75 MB of RSS for 115-byte records, each
 * costing ~300 bytes of librdkafka's more) ran the pipe bench's identity and count at
 * the rate of 256 MB on both brokers, at 111-137 MB of peak RSS instead of 242-302 MB
 * (docs/performance.md, Memory); at 2 GB a standby tailing a 1 GB changelog prefetched
 * it whole (4.4 GB RSS, a third of its CPU zeroing fresh pages). An empty fetch waits
 * fetch.wait.max.ms, so it is short. */
static const char *consumer_defaults[] = {
    "enable.auto.commit",
    "false",
    "enable.auto.offset.store",
    "false",
    "auto.offset.reset",
    "earliest",
    "enable.partition.eof",
    "false",
    "fetch.max.bytes",
    "4194304",
    "fetch.wait.max.ms",
    "10",
    "queued.min.messages",
    "10000000",
    "queued.max.messages.kbytes",
    "16384",
    NULL,
};

/* Idempotence keeps per-partition order across retries; murmur2_random is
 * the Java client's partitioner, so keys land where other clients put them.
 * A capped queue ran ~35% faster than an unbounded one (MEASURED.md). */
static const char *producer_defaults[] = {
    "enable.idempotence",
    "true",
    "partitioner",
    "murmur2_random",
    "linger.ms",
    "5",
    "batch.size",
    "1000000",
    "queue.buffering.max.messages",
    "40000",
    NULL,
};

/* When the process made its first Kafka client (mono ms), 0: none yet. */
static _Atomic int64_t first_client_ms;

/* A partition a consumer was given is missing from one broker's metadata: a topic beck has
 * just created (the control topic at a cluster's first start) is not known to every broker
 * yet, and the client asks again. A topic really missing at start is the preflight's
 * error, and later the topic watch's. Two minutes of a process's life: under the
 * sanitizers, with four test runs on two cores, a node's member met it 60-odd s in. */
#define NEW_TOPIC_MS 120000

static int new_topic_unknown(const char *buf)
{
    int64_t first = atomic_load(&first_client_ms);
    return (strstr(buf, "desired partition is no longer available") ||
            strstr(buf, "topic does not exist")) &&
           first > 0 && bk_clock_mono_ms() - first < NEW_TOPIC_MS;
}

static void log_cb(const rd_kafka_t *rk, int level, const char *fac, const char *buf)
{
    (void)rk;
    int fail = strcmp(fac, "FAIL") == 0;
    if (strcmp(fac, "CONFWARN") == 0 && strstr(buf, " property and will be ignored by this ")) {
        /* -X and -F settings go to every client beck makes, as docs/settings.md says: a
         * consumer's setting that the producer ignores is as meant */
        bk_log_debug("kafka %s: %s", fac, buf);
    } else if (level <= 3 && new_topic_unknown(buf)) {
        bk_log_info("kafka %s: %s (a topic just created, not yet known to every broker)", fac, buf);
    } else if (strstr(buf, "Coordinator load in progress: retrying")) {
        /* a cluster just started loads its coordinators: librdkafka asks again */
        bk_log_info("kafka %s: %s", fac, buf);
    } else if (level <= 4 && fail && bk_brokerwatch_quiet()) {
        bk_log_debug("kafka %s: %s", fac, buf); /* a reconnect failing while no broker answers */
    } else if (level <= 3 && !fail) {
        bk_log_error("kafka %s: %s", fac, buf);
    } else if (level <= 4) {
        /* a broker's connection failing (FAIL) is a warning: the client reconnects, and
         * while every broker is down the broker watch says so once */
        bk_log_warn("kafka %s: %s", fac, buf);
    } else {
        bk_log_debug("kafka %s: %s", fac, buf);
    }
}

static int set(rd_kafka_conf_t *kc, const char *k, const char *v, const char *origin, char *errstr,
               size_t errstr_size)
{
    char err[512];
    if (rd_kafka_conf_set(kc, k, v, err, sizeof(err)) != RD_KAFKA_CONF_OK) {
        snprintf(errstr, errstr_size, "%s %s=%s: %s", origin, k, v, err);
        return -1;
    }
    return 0;
}

static int dev_port = -1; /* bk_kafka_set_dev_broker; -1: not known in this process */

void bk_kafka_set_dev_broker(int port)
{
    dev_port = port;
}

int bk_kafka_dev_port(void)
{
    return dev_port;
}

int bk_kafka_dev_broker(void)
{
    return dev_port > 0;
}

rd_kafka_t *bk_kafka_new(const bk_conf_t *conf, bk_kafka_role_t role, const char *client_id,
                         void *opaque,
                         void (*dr_msg_cb)(rd_kafka_t *, const rd_kafka_message_t *, void *),
                         char *errstr, size_t errstr_size)
{
    return bk_kafka_new_with(conf, role, client_id, NULL, opaque, dr_msg_cb, errstr, errstr_size);
}

rd_kafka_t *bk_kafka_new_with(const bk_conf_t *conf, bk_kafka_role_t role, const char *client_id,
                              const char *const *extra, void *opaque,
                              void (*dr_msg_cb)(rd_kafka_t *, const rd_kafka_message_t *, void *),
                              char *errstr, size_t errstr_size)
{
    rd_kafka_conf_t *kc = rd_kafka_conf_new();
    const char **defs = role == BK_KAFKA_CONSUMER   ? consumer_defaults
                        : role == BK_KAFKA_PRODUCER ? producer_defaults
                                                    : NULL;
    rd_kafka_t *rk;
    char err[512];

    {
        int64_t none = 0;
        atomic_compare_exchange_strong(&first_client_ms, &none, bk_clock_mono_ms());
    }
    rd_kafka_conf_set_log_cb(kc, log_cb);
    rd_kafka_conf_set_error_cb(kc, bk_brokerwatch_error_cb);
    /* Every client: reconnects back off to 1 s at most, as the Java client's do (librdkafka's
     * own limit, 10 s, left a node's producer offline up to 8 s after the brokers came back
     * from an outage: its tasks' release waited, and the member's session ran out, spec 30) */
    if (set(kc, "reconnect.backoff.max.ms", "1000", "default", errstr, errstr_size) != 0) {
        goto fail;
    }
    for (int i = 0; defs && defs[i]; i += 2) {
        if (set(kc, defs[i], defs[i + 1], "default", errstr, errstr_size) != 0) {
            goto fail;
        }
    }
    if (set(kc, "bootstrap.servers", bk_conf_str(conf, BK_CONF_BROKERS), "-b", errstr,
            errstr_size) != 0 ||
        set(kc, "client.id", client_id, "client.id", errstr, errstr_size) != 0) {
        goto fail;
    }
    if (role == BK_KAFKA_CONSUMER &&
        set(kc, "group.id", bk_conf_str(conf, BK_CONF_APP_ID), "app id", errstr, errstr_size)) {
        goto fail;
    }
    for (int i = 0; extra && extra[i]; i += 2) {
        if (set(kc, extra[i], extra[i + 1], "beck", errstr, errstr_size) != 0) {
            goto fail;
        }
    }
    for (size_t i = 0; i < bk_conf_kafka_count(conf); i++) {
        const char *k, *v;
        bk_conf_kafka_get(conf, i, &k, &v);
        if (set(kc, k, v, "-X", errstr, errstr_size) != 0) {
            goto fail;
        }
    }
    if (opaque) {
        rd_kafka_conf_set_opaque(kc, opaque);
    }
    if (dr_msg_cb) {
        rd_kafka_conf_set_dr_msg_cb(kc, dr_msg_cb);
    }
    rk = rd_kafka_new(role == BK_KAFKA_CONSUMER ? RD_KAFKA_CONSUMER : RD_KAFKA_PRODUCER, kc, err,
                      sizeof(err));
    if (!rk) {
        snprintf(errstr, errstr_size, "cannot create a Kafka client: %s", err);
        goto fail;
    }
    return rk;

fail:
    rd_kafka_conf_destroy(kc);
    return NULL;
}

int bk_kafka_retriable(rd_kafka_resp_err_t err)
{
    switch (err) {
    case RD_KAFKA_RESP_ERR__TRANSPORT:
    case RD_KAFKA_RESP_ERR__TIMED_OUT:
    case RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN:
    case RD_KAFKA_RESP_ERR__WAIT_COORD:
    case RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION:
    case RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC:
    case RD_KAFKA_RESP_ERR__NODE_UPDATE:
    case RD_KAFKA_RESP_ERR__WAIT_CACHE:
    case RD_KAFKA_RESP_ERR__NOENT: /* no leader known yet for the partition */
    case RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART:
    case RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE:
    case RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION:
    case RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT:
    case RD_KAFKA_RESP_ERR_BROKER_NOT_AVAILABLE:
    case RD_KAFKA_RESP_ERR_REPLICA_NOT_AVAILABLE:
    case RD_KAFKA_RESP_ERR_NETWORK_EXCEPTION:
    case RD_KAFKA_RESP_ERR_COORDINATOR_LOAD_IN_PROGRESS:
    case RD_KAFKA_RESP_ERR_COORDINATOR_NOT_AVAILABLE:
    case RD_KAFKA_RESP_ERR_NOT_COORDINATOR:
    case RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS:
    case RD_KAFKA_RESP_ERR_KAFKA_STORAGE_ERROR:
    case RD_KAFKA_RESP_ERR_FENCED_LEADER_EPOCH:
    case RD_KAFKA_RESP_ERR_UNKNOWN_LEADER_EPOCH:
    case RD_KAFKA_RESP_ERR_OFFSET_NOT_AVAILABLE:
    /* exactly-once: a transaction with offsets of these partitions is still open (until it
     * commits, or is aborted by a fence or its timeout) */
    case RD_KAFKA_RESP_ERR_UNSTABLE_OFFSET_COMMIT:
        return 1;
    default:
        return 0;
    }
}

/* The pause before the next try of a read that failed with an error that passes: 100 ms,
 * doubling to 2 s, never past `deadline` (monotonic ms). 0 once the time is up or *stop. */
static int retry_pause(int64_t *backoff, int64_t deadline, const atomic_int *stop)
{
    int64_t now = bk_clock_mono_ms(), wait = *backoff;
    if (now >= deadline || (stop && atomic_load(stop))) {
        return 0;
    }
    if (now + wait > deadline) {
        wait = deadline - now;
    }
    for (int64_t slept = 0; slept < wait && !(stop && atomic_load(stop)); slept += 50) {
        bk_clock_sleep_ms(wait - slept < 50 ? wait - slept : 50);
    }
    *backoff = *backoff < 1000 ? *backoff * 2 : 2000;
    return !(stop && atomic_load(stop));
}

/* One metadata request's partition counts; a topic with an error that passes is err. */
static rd_kafka_resp_err_t partitions_once(rd_kafka_t *rk, const char **topics, int n, int *counts,
                                           int timeout_ms)
{
    const struct rd_kafka_metadata *md;
    rd_kafka_resp_err_t err = rd_kafka_metadata(rk, 1, NULL, &md, timeout_ms);
    if (err) {
        return err;
    }
    for (int i = 0; i < n; i++) {
        counts[i] = 0;
        for (int j = 0; j < md->topic_cnt; j++) {
            const struct rd_kafka_metadata_topic *t = &md->topics[j];
            if (strcmp(t->topic, topics[i]) != 0) {
                continue;
            }
            if (!t->err) {
                counts[i] = t->partition_cnt;
            } else if (t->err != RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART &&
                       bk_kafka_retriable(t->err) && !err) {
                err = t->err; /* leaderless while a broker is down: not "missing" */
            }
        }
    }
    rd_kafka_metadata_destroy(md);
    return err;
}

int bk_kafka_partitions(rd_kafka_t *rk, const char **topics, int n, int *counts, int timeout_ms,
                        char *errstr, size_t errstr_size)
{
    int64_t deadline = bk_clock_mono_ms() + timeout_ms, backoff = 100;
    rd_kafka_resp_err_t err;
    for (;;) {
        int64_t left = deadline - bk_clock_mono_ms();
        err = partitions_once(rk, topics, n, counts, left > 1000 ? (int)left : 1000);
        if (!err || !bk_kafka_retriable(err) || !retry_pause(&backoff, deadline, NULL)) {
            break;
        }
    }
    if (err) {
        snprintf(errstr, errstr_size, "cannot read cluster metadata: %s", rd_kafka_err2str(err));
        return -1;
    }
    return 0;
}

int bk_kafka_wait_leaders(rd_kafka_t *rk, const char *topic, int timeout_ms)
{
    int64_t t0 = bk_clock_mono_ms();
    for (;;) {
        const struct rd_kafka_metadata *md;
        int ready = 0;
        if (rd_kafka_metadata(rk, 1, NULL, &md, 2000) == RD_KAFKA_RESP_ERR_NO_ERROR) {
            for (int j = 0; j < md->topic_cnt; j++) {
                const struct rd_kafka_metadata_topic *t = &md->topics[j];
                if (strcmp(t->topic, topic) != 0 || t->err || t->partition_cnt == 0) {
                    continue;
                }
                ready = 1;
                for (int p = 0; p < t->partition_cnt; p++) {
                    ready &= !t->partitions[p].err && t->partitions[p].leader >= 0;
                }
            }
            rd_kafka_metadata_destroy(md);
        }
        if (ready) {
            return (int)(bk_clock_mono_ms() - t0);
        }
        if (bk_clock_mono_ms() - t0 >= timeout_ms) {
            return -1;
        }
        usleep(50 * 1000);
    }
}

static int admin_create(rd_kafka_t *rk, const char *topic, int partitions, int rf,
                        const char *const *configs, char *errstr, size_t errstr_size)
{
    char err[512];
    rd_kafka_NewTopic_t *nt = rd_kafka_NewTopic_new(topic, partitions, rf, err, sizeof(err));
    rd_kafka_queue_t *q;
    rd_kafka_event_t *ev;
    int rc = -1;

    if (!nt) {
        snprintf(errstr, errstr_size, "topic %s: %s", topic, err);
        return -1;
    }
    for (int i = 0; configs && configs[i]; i += 2) {
        if (rd_kafka_NewTopic_set_config(nt, configs[i], configs[i + 1])) {
            snprintf(errstr, errstr_size, "topic %s: bad config %s=%s", topic, configs[i],
                     configs[i + 1]);
            rd_kafka_NewTopic_destroy(nt);
            return -1;
        }
    }
    q = rd_kafka_queue_new(rk);
    rd_kafka_CreateTopics(rk, &nt, 1, NULL, q);
    ev = rd_kafka_queue_poll(q, 30000);
    if (!ev) {
        snprintf(errstr, errstr_size, "topic %s: CreateTopics timed out", topic);
    } else if (rd_kafka_event_error(ev)) {
        snprintf(errstr, errstr_size, "topic %s: CreateTopics failed: %s", topic,
                 rd_kafka_event_error_string(ev));
    } else {
        size_t cnt;
        const rd_kafka_topic_result_t **res =
            rd_kafka_CreateTopics_result_topics(rd_kafka_event_CreateTopics_result(ev), &cnt);
        rd_kafka_resp_err_t e = cnt ? rd_kafka_topic_result_error(res[0]) : 0;
        if (e && e != RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS) {
            snprintf(errstr, errstr_size, "topic %s: cannot create: %s", topic,
                     rd_kafka_topic_result_error_string(res[0]));
        } else {
            rc = 0;
        }
    }
    if (ev) {
        rd_kafka_event_destroy(ev);
    }
    rd_kafka_queue_destroy(q);
    rd_kafka_NewTopic_destroy(nt);
    return rc;
}

int bk_kafka_create_topic(rd_kafka_t *rk, const char *topic, int partitions, int replication_factor,
                          const char *const *configs, char *errstr, size_t errstr_size)
{
    char list[512] = "";
    size_t len = 0;
    int port = dev_port;
    if (port < 0 && (port = bk_devctl_discover(rk, 10000, errstr, errstr_size)) < 0) {
        return -1; /* not set in this process (a spec's, a tool's client): its cluster says */
    }
    for (int i = 0; configs && configs[i] && len < sizeof(list); i += 2) {
        len += (size_t)snprintf(list + len, sizeof(list) - len, "%s%s=%s", i ? " " : "", configs[i],
                                configs[i + 1]);
    }
    bk_log_info("creating topic %s with %d partitions%s%s%s", topic, partitions,
                port > 0 ? " on the dev broker" : "", *list ? ", " : "", list);
    if (port > 0) {
        return bk_devctl_create_topic(port, topic, partitions, errstr, errstr_size);
    }
    return admin_create(rk, topic, partitions, replication_factor, configs, errstr, errstr_size);
}

int bk_kafka_purge_topic(rd_kafka_t *rk, const char *topic, int partitions, char *errstr,
                         size_t errstr_size)
{
    rd_kafka_topic_partition_list_t *list = rd_kafka_topic_partition_list_new(partitions + 1);
    rd_kafka_DeleteRecords_t *dr;
    rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
    rd_kafka_event_t *ev;
    int rc = -1;

    for (int p = 0; p < partitions; p++) {
        rd_kafka_topic_partition_list_add(list, topic, p)->offset = RD_KAFKA_OFFSET_END;
    }
    dr = rd_kafka_DeleteRecords_new(list);
    rd_kafka_DeleteRecords(rk, &dr, 1, NULL, q);
    ev = rd_kafka_queue_poll(q, 30000);
    if (!ev) {
        snprintf(errstr, errstr_size, "topic %s: DeleteRecords timed out", topic);
    } else if (rd_kafka_event_error(ev) == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART) {
        rc = 0;
    } else if (rd_kafka_event_error(ev)) {
        snprintf(errstr, errstr_size, "topic %s: DeleteRecords failed: %s", topic,
                 rd_kafka_event_error_string(ev));
    } else {
        const rd_kafka_topic_partition_list_t *res =
            rd_kafka_DeleteRecords_result_offsets(rd_kafka_event_DeleteRecords_result(ev));
        rc = 1;
        for (int i = 0; res && i < res->cnt; i++) {
            rd_kafka_resp_err_t e = res->elems[i].err;
            if (e == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART && rc == 1) {
                rc = 0;
            } else if (e) {
                snprintf(errstr, errstr_size, "topic %s [%d]: cannot delete its records: %s", topic,
                         (int)res->elems[i].partition, rd_kafka_err2str(e));
                rc = -1;
                break;
            }
        }
    }
    if (ev) {
        rd_kafka_event_destroy(ev);
    }
    rd_kafka_queue_destroy(q);
    rd_kafka_DeleteRecords_destroy(dr);
    rd_kafka_topic_partition_list_destroy(list);
    return rc;
}

/* The admin call's one result event, or NULL with errstr. */
static rd_kafka_event_t *admin_result(rd_kafka_queue_t *q, int timeout_ms, const char *what,
                                      const char *topic, char *errstr, size_t errstr_size)
{
    rd_kafka_event_t *ev = rd_kafka_queue_poll(q, timeout_ms);
    if (!ev) {
        snprintf(errstr, errstr_size, "topic %s: %s timed out", topic, what);
    } else if (rd_kafka_event_error(ev)) {
        snprintf(errstr, errstr_size, "topic %s: %s failed: %s", topic, what,
                 rd_kafka_event_error_string(ev));
        rd_kafka_event_destroy(ev);
        ev = NULL;
    }
    return ev;
}

/* DescribeConfigs of one topic: 0 and the topic's configs (*cfg, *ncfg of them), which
 * live in *evp (the result event: the caller destroys it), or -1 with errstr (and *evp
 * NULL). */
static int describe_topic(rd_kafka_t *rk, rd_kafka_queue_t *q, const char *topic, int timeout_ms,
                          rd_kafka_event_t **evp, const rd_kafka_ConfigEntry_t ***cfg, size_t *ncfg,
                          char *errstr, size_t errstr_size)
{
    const rd_kafka_ConfigResource_t **rs;
    size_t nres;
    int64_t deadline = bk_clock_mono_ms() + timeout_ms;

    for (;;) {
        rd_kafka_ConfigResource_t *res =
            rd_kafka_ConfigResource_new(RD_KAFKA_RESOURCE_TOPIC, topic);
        rd_kafka_DescribeConfigs(rk, &res, 1, NULL, q);
        rd_kafka_ConfigResource_destroy(res);
        *ncfg = 0;
        *cfg = NULL;
        if (!(*evp = admin_result(q, timeout_ms, "DescribeConfigs", topic, errstr, errstr_size))) {
            return -1;
        }
        rs = rd_kafka_DescribeConfigs_result_resources(rd_kafka_event_DescribeConfigs_result(*evp),
                                                       &nres);
        /* a topic just made: the broker asked may not know it for a moment */
        if (nres >= 1 &&
            rd_kafka_ConfigResource_error(rs[0]) == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART &&
            bk_clock_mono_ms() + 200 < deadline) {
            rd_kafka_event_destroy(*evp);
            *evp = NULL;
            bk_clock_sleep_ms(200);
            continue;
        }
        break;
    }
    if (nres < 1 || rd_kafka_ConfigResource_error(rs[0])) {
        snprintf(errstr, errstr_size, "topic %s: DescribeConfigs failed: %s", topic,
                 nres ? rd_kafka_ConfigResource_error_string(rs[0]) : "no result");
        rd_kafka_event_destroy(*evp);
        *evp = NULL;
        return -1;
    }
    *cfg = rd_kafka_ConfigResource_configs(rs[0], ncfg);
    return 0;
}

int bk_kafka_topic_configs(rd_kafka_t *rk, const char *topic, const char *const *names, int n,
                           char (*values)[BK_KAFKA_CONFIG_MAX], int timeout_ms, char *errstr,
                           size_t errstr_size)
{
    rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
    rd_kafka_event_t *ev;
    size_t ncfg;
    const rd_kafka_ConfigEntry_t **cfg;
    int rc;

    for (int i = 0; i < n; i++) {
        values[i][0] = '\0';
    }
    rc = describe_topic(rk, q, topic, timeout_ms, &ev, &cfg, &ncfg, errstr, errstr_size);
    for (size_t c = 0; c < ncfg; c++) {
        const char *v = rd_kafka_ConfigEntry_value(cfg[c]);
        for (int i = 0; v && i < n; i++) {
            if (strcmp(rd_kafka_ConfigEntry_name(cfg[c]), names[i]) == 0) {
                snprintf(values[i], BK_KAFKA_CONFIG_MAX, "%s", v);
            }
        }
    }
    if (ev) {
        rd_kafka_event_destroy(ev);
    }
    rd_kafka_queue_destroy(q);
    return rc;
}

static int is_set(const char *const *configs, const char *name)
{
    for (int i = 0; configs[i]; i += 2) {
        if (strcmp(configs[i], name) == 0) {
            return 1;
        }
    }
    return 0;
}

int bk_kafka_alter_topic_configs(rd_kafka_t *rk, const char *topic, const char *const *configs,
                                 int timeout_ms, char *errstr, size_t errstr_size)
{
    rd_kafka_ConfigResource_t *alter = rd_kafka_ConfigResource_new(RD_KAFKA_RESOURCE_TOPIC, topic);
    rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
    rd_kafka_event_t *ev;
    size_t ncfg;
    const rd_kafka_ConfigEntry_t **cfg;
    int rc = -1;

    if (describe_topic(rk, q, topic, timeout_ms, &ev, &cfg, &ncfg, errstr, errstr_size) != 0) {
        goto done;
    }
    /* the topic's own settings stay as they are: AlterConfigs replaces them all */
    for (size_t c = 0; c < ncfg; c++) {
        const char *name = rd_kafka_ConfigEntry_name(cfg[c]);
        const char *v = rd_kafka_ConfigEntry_value(cfg[c]);
        int own =
            rd_kafka_ConfigEntry_source(cfg[c]) == RD_KAFKA_CONFIG_SOURCE_DYNAMIC_TOPIC_CONFIG;
        if (v && own && !is_set(configs, name)) {
            rd_kafka_ConfigResource_set_config(alter, name, v);
        }
    }
    rd_kafka_event_destroy(ev);
    for (int i = 0; configs[i]; i += 2) {
        rd_kafka_ConfigResource_set_config(alter, configs[i], configs[i + 1]);
    }
    rd_kafka_AlterConfigs(rk, &alter, 1, NULL, q);
    if (!(ev = admin_result(q, timeout_ms, "AlterConfigs", topic, errstr, errstr_size))) {
        goto done;
    }
    {
        size_t nres;
        const rd_kafka_ConfigResource_t **rs =
            rd_kafka_AlterConfigs_result_resources(rd_kafka_event_AlterConfigs_result(ev), &nres);
        if (nres < 1 || rd_kafka_ConfigResource_error(rs[0])) {
            snprintf(errstr, errstr_size, "topic %s: AlterConfigs failed: %s", topic,
                     nres ? rd_kafka_ConfigResource_error_string(rs[0]) : "no result");
        } else {
            rc = 0;
        }
    }
    rd_kafka_event_destroy(ev);
done:
    rd_kafka_queue_destroy(q);
    rd_kafka_ConfigResource_destroy(alter);
    return rc;
}

/* One ListOffsets per side: offsets_for_times with the protocol's special timestamps,
 * -2 (earliest) and -1 (latest). */
static rd_kafka_resp_err_t list_side(rd_kafka_t *rk, const char *const *topics,
                                     const int32_t *partitions, int n, int64_t which, int64_t *out,
                                     int timeout_ms)
{
    rd_kafka_topic_partition_list_t *list = rd_kafka_topic_partition_list_new(n);
    rd_kafka_resp_err_t err;
    for (int i = 0; i < n; i++) {
        rd_kafka_topic_partition_list_add(list, topics[i], partitions[i])->offset = which;
    }
    err = rd_kafka_offsets_for_times(rk, list, timeout_ms);
    for (int i = 0; !err && i < n; i++) {
        /* the list keeps its order */
        err = list->elems[i].err;
        out[i] = list->elems[i].offset;
    }
    rd_kafka_topic_partition_list_destroy(list);
    return err;
}

static rd_kafka_resp_err_t watermarks_once(rd_kafka_t *rk, const char *const *topics,
                                           const int32_t *partitions, int n, int64_t *lo,
                                           int64_t *hi, int timeout_ms)
{
    rd_kafka_resp_err_t err = 0;
    if (n > 1) {
        err = list_side(rk, topics, partitions, n, RD_KAFKA_OFFSET_BEGINNING, lo, timeout_ms);
        if (!err) {
            err = list_side(rk, topics, partitions, n, RD_KAFKA_OFFSET_END, hi, timeout_ms);
        }
        for (int i = 0; !err && i < n; i++) {
            if (lo[i] < 0 || hi[i] < lo[i]) {
                err = RD_KAFKA_RESP_ERR__BAD_MSG; /* not what a broker says: ask one by one */
            }
        }
        if (!err) {
            return 0;
        }
    }
    for (int i = 0; i < n; i++) {
        err = rd_kafka_query_watermark_offsets(rk, topics[i], partitions[i], &lo[i], &hi[i],
                                               timeout_ms);
        if (err) {
            return err;
        }
    }
    return 0;
}

rd_kafka_resp_err_t bk_kafka_watermarks(rd_kafka_t *rk, const char *const *topics,
                                        const int32_t *partitions, int n, int64_t *lo, int64_t *hi,
                                        int timeout_ms, const atomic_int *stop)
{
    int64_t t0 = bk_clock_mono_ms(), deadline = t0 + timeout_ms, backoff = 100;
    rd_kafka_resp_err_t err;
    int told = 0;
    if (n <= 0) {
        return 0;
    }
    for (;;) {
        int64_t left = deadline - bk_clock_mono_ms();
        err = watermarks_once(rk, topics, partitions, n, lo, hi,
                              left > 10000  ? 10000
                              : left > 1000 ? (int)left
                                            : 1000);
        if (!err || !bk_kafka_retriable(err)) {
            break;
        }
        if (!told && bk_clock_mono_ms() - t0 >= 5000) {
            /* once per read, and only when it lasts: a leader moving takes a second */
            told = 1;
            bk_log_warn("reading the offsets of %d partition(s) (%s [%d]%s): %s: trying again "
                        "for up to %lld s",
                        n, topics[0], (int)partitions[0], n > 1 ? ", ..." : "",
                        rd_kafka_err2str(err), (long long)((deadline - bk_clock_mono_ms()) / 1000));
        }
        if (!retry_pause(&backoff, deadline, stop)) {
            break;
        }
        /* librdkafka 2.0.2 keeps asking the leader its metadata names: after a leader moved
         * it answered "Not leader for partition" for minutes, until a new client asked
         * (issue 38). A metadata request refreshes what the client knows. */
        {
            const struct rd_kafka_metadata *md = NULL;
            if (rd_kafka_metadata(rk, 1, NULL, &md, 2000) == RD_KAFKA_RESP_ERR_NO_ERROR) {
                rd_kafka_metadata_destroy(md);
            }
        }
    }
    return err;
}

int bk_kafka_topic_exists(rd_kafka_t *rk, const char *topic, int timeout_ms)
{
    const struct rd_kafka_metadata *md = NULL;
    int found = 0;
    if (rd_kafka_metadata(rk, 1, NULL, &md, timeout_ms) != RD_KAFKA_RESP_ERR_NO_ERROR) {
        return -1;
    }
    for (int i = 0; i < md->topic_cnt && !found; i++) {
        found = strcmp(md->topics[i].topic, topic) == 0 && !md->topics[i].err;
    }
    rd_kafka_metadata_destroy(md);
    return found;
}
