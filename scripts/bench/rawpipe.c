/* rawpipe.c - the raw librdkafka side of scripts/bench/pipe: load an input
 * topic, run the consume->produce loop that beck's runtime is measured
 * against, and watch an output topic's high watermarks to time a pipeline.
 *
 *   rawpipe load  [OPTS] BS TOPIC N        produce N records (10-byte key, ~105-byte value)
 *   rawpipe pipe  [OPTS] BS IN OUT N       consume IN from the beginning, produce to OUT
 *   rawpipe watch [OPTS] BS TOPIC N        wait until TOPIC grew by N records, time it
 *
 *   OPTS: -X key=value (librdkafka setting, after the built-in ones; repeatable)
 *         -t SECONDS   give up after this long (default 300), exit status 1
 *         -B N         pipe: records per consume_batch_queue call (default 1000, as beck)
 *
 * Every subcommand prints `key value` lines on stdout for the calling script;
 * errors go to stderr. The pipe loop has the structure of runtime/thread.c's
 * run_loop (drain the consumer queue in batches, poll the producer once per
 * batch, produce each record with RD_KAFKA_MSG_F_COPY to the unassigned
 * partition) and the clients have runtime/kafka.c's defaults, so the two
 * differ by what beck adds: Lua, its bookkeeping and its commits. */
#define _POSIX_C_SOURCE 200809L

#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include <librdkafka/rdkafka.h>

#define RP_KEY_LEN 10
#define RP_VALUE_LEN 105
#define RP_MAX_X 64

/* Same values as runtime/kafka.c (and MEASURED.md): without the raised
 * queued.* limits librdkafka 2.0.2 stops fetching for ~1 s at a time. */
static const char *consumer_conf[] = {
    "enable.auto.commit", "false",
    "enable.auto.offset.store", "false",
    "auto.offset.reset", "earliest",
    "enable.partition.eof", "false",
    "fetch.max.bytes", "4194304",
    "fetch.wait.max.ms", "10",
    "queued.min.messages", "10000000",
    "queued.max.messages.kbytes", "2097151",
    NULL,
};

/* runtime/kafka.c's producer defaults, idempotence included. */
static const char *producer_conf[] = {
    "enable.idempotence", "true",
    "partitioner", "murmur2_random",
    "linger.ms", "5",
    "batch.size", "1000000",
    "queue.buffering.max.messages", "40000",
    NULL,
};

/* The load: MEASURED.md's producer settings; keys spread like a Java client's. */
static const char *load_conf[] = {
    "partitioner", "murmur2_random",
    "linger.ms", "5",
    "batch.size", "1000000",
    "queue.buffering.max.messages", "40000",
    NULL,
};

typedef struct {
    const char *x[RP_MAX_X * 2]; /* -X key, value pairs, pointing into argv */
    int nx;
    double timeout_s;
    int batch;
} rp_opts_t;

static volatile sig_atomic_t rp_stop;

static void rp_on_signal(int sig)
{
    (void)sig;
    rp_stop = 1;
}

static double rp_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void rp_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static double rp_cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

/* -- Clients ------------------------------------------------------------ */

static int rp_set(rd_kafka_conf_t *kc, const char *k, const char *v)
{
    char err[512];
    if (rd_kafka_conf_set(kc, k, v, err, sizeof(err)) != RD_KAFKA_CONF_OK) {
        fprintf(stderr, "rawpipe: %s=%s: %s\n", k, v, err);
        return -1;
    }
    return 0;
}

/* A client with `defaults`, then bootstrap.servers, then the -X settings.
 * NULL after printing why. The caller destroys it. */
static rd_kafka_t *rp_client(rd_kafka_type_t type, const char *bs, const char **defaults,
                             const char *group, const rp_opts_t *opts)
{
    rd_kafka_conf_t *kc = rd_kafka_conf_new();
    rd_kafka_t *rk;
    char err[512];

    for (int i = 0; defaults && defaults[i]; i += 2) {
        if (rp_set(kc, defaults[i], defaults[i + 1]) != 0) {
            goto fail;
        }
    }
    if (rp_set(kc, "bootstrap.servers", bs) != 0 ||
        (group && rp_set(kc, "group.id", group) != 0)) {
        goto fail;
    }
    for (int i = 0; i < opts->nx; i++) {
        if (rp_set(kc, opts->x[2 * i], opts->x[2 * i + 1]) != 0) {
            goto fail;
        }
    }
    rk = rd_kafka_new(type, kc, err, sizeof(err));
    if (!rk) {
        fprintf(stderr, "rawpipe: cannot create a client: %s\n", err);
        goto fail;
    }
    return rk;

fail:
    rd_kafka_conf_destroy(kc);
    return NULL;
}

/* Partition count of `topic`, waiting for it to appear until `deadline`.
 * Reads all topics' metadata, so that asking never auto-creates the topic. */
static int rp_partitions(rd_kafka_t *rk, const char *topic, double deadline)
{
    do {
        const struct rd_kafka_metadata *md;
        int n = 0;
        if (rd_kafka_metadata(rk, 1, NULL, &md, 5000) == RD_KAFKA_RESP_ERR_NO_ERROR) {
            for (int i = 0; i < md->topic_cnt; i++) {
                if (strcmp(md->topics[i].topic, topic) == 0 && !md->topics[i].err) {
                    n = md->topics[i].partition_cnt;
                }
            }
            rd_kafka_metadata_destroy(md);
            if (n > 0) {
                return n;
            }
        }
        rp_sleep_ms(100);
    } while (rp_now() < deadline && !rp_stop);
    fprintf(stderr, "rawpipe: topic %s not found\n", topic);
    return -1;
}

/* Waits for every queued message's delivery report. Returns the number of
 * failed deliveries counted by rp_dr_cb, or -1 on timeout. */
static int rp_flush(rd_kafka_t *rk, double deadline)
{
    while (rd_kafka_outq_len(rk) > 0) {
        if (rp_now() >= deadline || rp_stop) {
            fprintf(stderr, "rawpipe: %d message(s) still undelivered at the deadline\n",
                    rd_kafka_outq_len(rk));
            return -1;
        }
        rd_kafka_flush(rk, 100);
    }
    return 0;
}

static void rp_dr_cb(rd_kafka_t *rk, const rd_kafka_message_t *msg, void *opaque)
{
    long *failed = opaque;
    (void)rk;
    if (msg->err && (*failed)++ == 0) {
        fprintf(stderr, "rawpipe: delivery failed: %s\n", rd_kafka_err2str(msg->err));
    }
}

/* -- load --------------------------------------------------------------- */

static int rp_load(const rp_opts_t *opts, const char *bs, const char *topic, long n)
{
    double deadline = rp_now() + opts->timeout_s, t0, t1;
    long failed = 0;
    rd_kafka_conf_t *kc;
    rd_kafka_t *rk;
    char key[RP_KEY_LEN + 1], value[RP_VALUE_LEN + 1];
    int rc = 1;

    rk = rp_client(RD_KAFKA_PRODUCER, bs, load_conf, NULL, opts);
    if (!rk) {
        return 1;
    }
    (void)kc;
    rd_kafka_conf_set_dr_msg_cb(rd_kafka_conf(rk) ? NULL : NULL, NULL); /* see below */
    rd_kafka_destroy(rk);
    return rc;
}
