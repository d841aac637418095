/* rawpipe.c - the raw librdkafka side of scripts/bench/pipe: load an input
 * topic, run the consume->produce loop that beck's runtime is measured
 * against, and watch an output topic's high watermarks to time a pipeline.
 *
 *   rawpipe load  [OPTS] BS TOPIC N      produce N records (10-byte key, ~105-byte value)
 *   rawpipe pipe  [OPTS] BS IN OUT N     consume all of IN from the beginning, produce
 *                                        each record to OUT; stop after N records
 *   rawpipe watch [OPTS] BS TOPIC N      wait until TOPIC has grown by N records; time
 *                                        from its first new record to the N-th
 *
 *   OPTS: -X key=value  librdkafka setting, applied after the built-in ones (repeatable)
 *         -K N         load: N distinct keys (record i gets key i mod N)
 *         -t SECONDS    give up after this long (default 300): exit status 1
 *         -B N          pipe: records per rd_kafka_consume_batch_queue (default 1000)
 *         -v            watch: also print `seconds records` at every poll on stderr,
 *                       to see stalls
 *
 * Each subcommand prints `key value` lines on stdout for the calling script
 * and its errors on stderr. The pipe loop has the structure of
 * runtime/engine/thread.c's run_loop (drain the consumer queue in batches, poll the
 * producer once per batch, produce each record with RD_KAFKA_MSG_F_COPY, its
 * timestamp and headers, to the partitioner's choice) and its clients have
 * runtime/engine/kafka.c's defaults, so beck and this loop differ by what beck adds:
 * Lua, its bookkeeping and its commits. */
#define _POSIX_C_SOURCE 200809L

#include <signal.h>
#include <stdint.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include <librdkafka/rdkafka.h>

#define RP_KEY_LEN 10
#define RP_VALUE_LEN 105
#define RP_MAX_X 64
#define RP_WATCH_PERIOD_MS 5

/* The tables below read as key, value pairs. */
/* clang-format off */
/* Same as runtime/engine/kafka.c (MEASURED.md): without the raised queued.* limits
 * librdkafka 2.0.2 stops fetching for ~1 s at a time. */
static const char *rp_consumer_conf[] = {
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

/* runtime/engine/kafka.c's producer defaults, idempotence included. */
static const char *rp_producer_conf[] = {
    "enable.idempotence", "true",
    "partitioner", "murmur2_random",
    "linger.ms", "5",
    "batch.size", "1000000",
    "queue.buffering.max.messages", "40000",
    NULL,
};

/* The load: MEASURED.md's producer settings, keys spread as a Java client would. */
static const char *rp_load_conf[] = {
    "partitioner", "murmur2_random",
    "linger.ms", "5",
    "batch.size", "1000000",
    "queue.buffering.max.messages", "40000",
    NULL,
};
/* clang-format on */

typedef struct {
    const char *x[RP_MAX_X * 2]; /* -X key, value pairs, pointing into argv */
    int nx;
    double timeout_s;
    int batch;
    int verbose;
    long keys; /* load: distinct keys, record i gets key i mod keys */
} rp_opts_t;

static volatile sig_atomic_t rp_stop;

static void rp_on_signal(int sig)
{
    (void)sig;
    rp_stop = 1;
}

/* -- Helpers ------------------------------------------------------------ */

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

static int rp_set(rd_kafka_conf_t *kc, const char *k, const char *v)
{
    char err[512];
    if (rd_kafka_conf_set(kc, k, v, err, sizeof(err)) != RD_KAFKA_CONF_OK) {
        fprintf(stderr, "rawpipe: %s=%s: %s\n", k, v, err);
        return -1;
    }
    return 0;
}

/* Counts failed deliveries into the long that is the client's opaque. */
static void rp_dr_cb(rd_kafka_t *rk, const rd_kafka_message_t *msg, void *opaque)
{
    long *failed = opaque;
    (void)rk;
    if (msg->err && (*failed)++ == 0) {
        fprintf(stderr, "rawpipe: delivery failed: %s\n", rd_kafka_err2str(msg->err));
    }
}

/* A client with `defaults`, then bootstrap.servers (and group.id), then the
 * -X settings. `failed`, if given, counts failed deliveries. NULL after
 * printing why; the caller destroys the client. */
static rd_kafka_t *rp_client(rd_kafka_type_t type, const char *bs, const char **defaults,
                             const char *group, long *failed, const rp_opts_t *opts)
{
    rd_kafka_conf_t *kc = rd_kafka_conf_new();
    rd_kafka_t *rk;
    char err[512];

    for (int i = 0; defaults && defaults[i]; i += 2) {
        if (rp_set(kc, defaults[i], defaults[i + 1]) != 0) {
            goto fail;
        }
    }
    if (rp_set(kc, "bootstrap.servers", bs) != 0 || (group && rp_set(kc, "group.id", group) != 0)) {
        goto fail;
    }
    for (int i = 0; i < opts->nx; i++) {
        if (rp_set(kc, opts->x[2 * i], opts->x[2 * i + 1]) != 0) {
            goto fail;
        }
    }
    if (failed) {
        rd_kafka_conf_set_opaque(kc, failed);
        rd_kafka_conf_set_dr_msg_cb(kc, rp_dr_cb);
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

/* Partition count of `topic`, waiting until `deadline` for it to appear.
 * Asks for all topics' metadata, which never auto-creates the topic. */
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

/* Waits for every queued message's delivery report; -1 at the deadline. */
static int rp_flush(rd_kafka_t *rk, double deadline)
{
    while (rd_kafka_outq_len(rk) > 0) {
        if (rp_now() >= deadline || rp_stop) {
            fprintf(stderr, "rawpipe: %d message(s) undelivered at the deadline\n",
                    rd_kafka_outq_len(rk));
            return -1;
        }
        rd_kafka_flush(rk, 100);
    }
    return 0;
}

/* -- load --------------------------------------------------------------- */

/* Printable bytes that differ from record to record all along the value.
 * LuaJIT hashes a long string from a few 4-byte samples (start, end, middle,
 * quarter); values that agree there all collide in its string table, which
 * made ffi.string ~4x slower in a test and would measure that instead of beck. */
static void rp_fill_value(char *value, uint64_t i)
{
    uint64_t x = i * 0x9E3779B97F4A7C15ULL + 1;
    for (int j = 0; j < RP_VALUE_LEN; j++) {
        x ^= x << 13; /* xorshift64 */
        x ^= x >> 7;
        x ^= x << 17;
        value[j] = (char)('a' + x % 26);
    }
}

static int rp_load(const rp_opts_t *opts, const char *bs, const char *topic, long n)
{
    double t0 = rp_now(), deadline = t0 + opts->timeout_s, t1;
    long failed = 0, i;
    rd_kafka_t *rk;
    rd_kafka_topic_t *rkt;
    char key[RP_KEY_LEN + 1], value[RP_VALUE_LEN + 1];
    int rc = 1;

    rk = rp_client(RD_KAFKA_PRODUCER, bs, rp_load_conf, NULL, &failed, opts);
    if (!rk) {
        return 1;
    }
    rkt = rd_kafka_topic_new(rk, topic, NULL);
    for (i = 0; i < n && !rp_stop; i++) {
        rd_kafka_resp_err_t err;
        snprintf(key, sizeof(key), "k%09lu", (unsigned long)(i % opts->keys) % 1000000000UL);
        rp_fill_value(value, (uint64_t)i);
        for (;;) {
            err =
                rd_kafka_producev(rk, RD_KAFKA_V_RKT(rkt), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                                  RD_KAFKA_V_KEY(key, RP_KEY_LEN),
                                  RD_KAFKA_V_VALUE(value, RP_VALUE_LEN), RD_KAFKA_V_END);
            if (err != RD_KAFKA_RESP_ERR__QUEUE_FULL) {
                break;
            }
            rd_kafka_poll(rk, 1);
            if (rp_now() >= deadline) {
                fprintf(stderr, "rawpipe load: timed out after %ld records\n", i);
                goto done;
            }
        }
        if (err) {
            fprintf(stderr, "rawpipe load: produce: %s\n", rd_kafka_err2str(err));
            goto done;
        }
        if ((i & 1023) == 0) {
            rd_kafka_poll(rk, 0);
        }
    }
    if (rp_flush(rk, deadline) != 0 || failed > 0 || i < n) {
        fprintf(stderr, "rawpipe load: %ld failed deliveries\n", failed);
        goto done;
    }
    t1 = rp_now();
    printf("records %ld\nelapsed_s %.3f\nrate %.0f\n", n, t1 - t0, (double)n / (t1 - t0));
    rc = 0;
done:
    rd_kafka_topic_destroy(rkt);
    rd_kafka_destroy(rk);
    return rc;
}

/* -- pipe --------------------------------------------------------------- */

static int rp_pipe(const rp_opts_t *opts, const char *bs, const char *in, const char *out, long n)
{
    double t0 = rp_now(), deadline = t0 + opts->timeout_s, t_first = 0, t_last;
    long failed = 0, done = 0;
    rd_kafka_t *consumer = NULL, *producer = NULL;
    rd_kafka_topic_t *rkt = NULL;
    rd_kafka_queue_t *queue = NULL;
    rd_kafka_topic_partition_list_t *list;
    rd_kafka_message_t **msgs = calloc((size_t)opts->batch, sizeof(*msgs));
    rd_kafka_resp_err_t err;
    char group[64];
    int partitions, rc = 1;

    /* assign() still needs a group.id (MEASURED.md); nothing is committed. */
    snprintf(group, sizeof(group), "rawpipe-%ld", (long)time(NULL));
    consumer = rp_client(RD_KAFKA_CONSUMER, bs, rp_consumer_conf, group, NULL, opts);
    producer = rp_client(RD_KAFKA_PRODUCER, bs, rp_producer_conf, NULL, &failed, opts);
    if (!consumer || !producer || (partitions = rp_partitions(consumer, in, deadline)) < 0) {
        goto done;
    }
    rkt = rd_kafka_topic_new(producer, out, NULL);
    queue = rd_kafka_queue_get_consumer(consumer);
    list = rd_kafka_topic_partition_list_new(partitions);
    for (int p = 0; p < partitions; p++) {
        rd_kafka_topic_partition_list_add(list, in, p)->offset = RD_KAFKA_OFFSET_BEGINNING;
    }
    err = rd_kafka_assign(consumer, list);
    rd_kafka_topic_partition_list_destroy(list);
    if (err) {
        fprintf(stderr, "rawpipe pipe: assign: %s\n", rd_kafka_err2str(err));
        goto done;
    }

    while (done < n && !rp_stop) {
        /* As runtime/engine/thread.c: drain what is there, block for one when idle. */
        int got = (int)rd_kafka_consume_batch_queue(queue, 0, msgs, (size_t)opts->batch);
        if (got == 0) {
            got = (int)rd_kafka_consume_batch_queue(queue, 100, msgs, 1);
        }
        rd_kafka_poll(producer, 0);
        if (got < 0) {
            fprintf(stderr, "rawpipe pipe: consume: %s\n", rd_kafka_err2str(rd_kafka_last_error()));
            goto done;
        }
        if (got > 0 && t_first == 0) {
            t_first = rp_now();
        }
        for (int i = 0; i < got; i++) {
            rd_kafka_message_t *m = msgs[i];
            if (m->err) {
                fprintf(stderr, "rawpipe pipe: %s [%d]: %s\n",
                        m->rkt ? rd_kafka_topic_name(m->rkt) : "-", (int)m->partition,
                        rd_kafka_message_errstr(m));
            } else {
                int64_t ts = rd_kafka_message_timestamp(m, NULL);
                rd_kafka_headers_t *hdrs = NULL;
                /* Headers carried over, as beck does (the load writes none). */
                if (rd_kafka_message_headers(m, &hdrs) != RD_KAFKA_RESP_ERR_NO_ERROR) {
                    hdrs = NULL;
                }
                for (;;) {
                    rd_kafka_headers_t *copy = hdrs ? rd_kafka_headers_copy(hdrs) : NULL;
                    err = rd_kafka_producev(
                        producer, RD_KAFKA_V_RKT(rkt), RD_KAFKA_V_PARTITION(RD_KAFKA_PARTITION_UA),
                        RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                        RD_KAFKA_V_KEY(m->key, m->key_len), RD_KAFKA_V_VALUE(m->payload, m->len),
                        RD_KAFKA_V_TIMESTAMP(ts > 0 ? ts : 0), RD_KAFKA_V_HEADERS(copy),
                        RD_KAFKA_V_END);
                    if (!err) {
                        break;
                    }
                    if (copy) {
                        rd_kafka_headers_destroy(copy); /* not taken over on failure */
                    }
                    if (err != RD_KAFKA_RESP_ERR__QUEUE_FULL) {
                        break;
                    }
                    rd_kafka_poll(producer, 5); /* as bk_ffi_thread_send */
                }
                if (err) {
                    fprintf(stderr, "rawpipe pipe: produce: %s\n", rd_kafka_err2str(err));
                    for (; i < got; i++) {
                        rd_kafka_message_destroy(msgs[i]);
                    }
                    goto done;
                }
                done++;
            }
            rd_kafka_message_destroy(m);
        }
        if (failed > 0) {
            goto done;
        }
        if (rp_now() >= deadline) {
            fprintf(stderr, "rawpipe pipe: timed out after %ld of %ld records\n", done, n);
            goto done;
        }
    }
    if (rp_flush(producer, deadline) != 0 || failed > 0 || done < n) {
        goto done;
    }
    t_last = rp_now();
    printf("records %ld\nfirst_s %.3f\nelapsed_s %.3f\nrate %.0f\ncpu_s %.3f\n", done, t_first - t0,
           t_last - t0, (double)done / (t_last - t_first), rp_cpu_s());
    rc = 0;
done:
    if (queue) {
        rd_kafka_queue_destroy(queue);
    }
    if (rkt) {
        rd_kafka_topic_destroy(rkt);
    }
    if (consumer) {
        rd_kafka_consumer_close(consumer);
        rd_kafka_destroy(consumer);
    }
    if (producer) {
        rd_kafka_destroy(producer);
    }
    free(msgs);
    return rc;
}

/* -- watch -------------------------------------------------------------- */

/* Sum of the high watermarks of `list` (offset fields are overwritten);
 * -1 when the brokers could not tell. One ListOffsets request per leader. */
static long long rp_sum_ends(rd_kafka_t *rk, rd_kafka_topic_partition_list_t *list)
{
    long long sum = 0;
    for (int i = 0; i < list->cnt; i++) {
        list->elems[i].offset = RD_KAFKA_OFFSET_END; /* as a timestamp: "latest" */
    }
    if (rd_kafka_offsets_for_times(rk, list, 5000) != RD_KAFKA_RESP_ERR_NO_ERROR) {
        return -1;
    }
    for (int i = 0; i < list->cnt; i++) {
        if (list->elems[i].err || list->elems[i].offset < 0) {
            return -1;
        }
        sum += list->elems[i].offset;
    }
    return sum;
}

static int rp_watch(const rp_opts_t *opts, const char *bs, const char *topic, long n)
{
    double t0 = rp_now(), deadline = t0 + opts->timeout_s, t_first = 0, t;
    long long base, sum = -1, first = 0;
    rd_kafka_t *rk;
    rd_kafka_topic_partition_list_t *list = NULL;
    int partitions, rc = 1;

    rk = rp_client(RD_KAFKA_PRODUCER, bs, NULL, NULL, NULL, opts);
    if (!rk || (partitions = rp_partitions(rk, topic, deadline)) < 0) {
        goto done;
    }
    list = rd_kafka_topic_partition_list_new(partitions);
    for (int p = 0; p < partitions; p++) {
        rd_kafka_topic_partition_list_add(list, topic, p);
    }
    while ((base = rp_sum_ends(rk, list)) < 0) {
        if (rp_now() >= deadline || rp_stop) {
            fprintf(stderr, "rawpipe watch: cannot read the watermarks of %s\n", topic);
            goto done;
        }
        rp_sleep_ms(100);
    }
    /* The caller starts the pipeline once it reads this line, so times are
     * counted from here. */
    printf("ready %d\nbase %lld\n", partitions, base);
    fflush(stdout);
    t0 = rp_now();
    for (;;) {
        double next = rp_now() + RP_WATCH_PERIOD_MS / 1e3;
        sum = rp_sum_ends(rk, list);
        t = rp_now();
        if (opts->verbose) {
            fprintf(stderr, "%.3f %lld\n", t - t0, sum - base);
        }
        if (sum > base && t_first == 0) {
            t_first = t;
            first = sum - base;
        }
        if (sum - base >= n) {
            break;
        }
        if (t >= deadline || rp_stop) {
            fprintf(stderr, "rawpipe watch: %s grew by %lld of %ld records before the %s\n", topic,
                    sum < 0 ? 0 : sum - base, n, rp_stop ? "signal" : "timeout");
            printf("timeout 1\ncount %lld\n", sum < 0 ? 0 : sum - base);
            goto done;
        }
        if (next > t) {
            rp_sleep_ms((int)((next - t) * 1e3) + 1);
        }
    }
    /* The records counted in the first poll arrived before t_first, so the
     * rate is over the ones that arrived between the two polls. */
    printf("first_s %.3f\nfirst_count %lld\nlast_s %.3f\ncount %lld\nrate %.0f\n", t_first - t0,
           first, t - t0, sum - base,
           t > t_first ? (double)(sum - base - first) / (t - t_first) : 0.0);
    rc = 0;
done:
    if (list) {
        rd_kafka_topic_partition_list_destroy(list);
    }
    if (rk) {
        rd_kafka_destroy(rk);
    }
    return rc;
}

/* -- main --------------------------------------------------------------- */

static void rp_usage(void)
{
    fprintf(stderr, "usage: rawpipe load  [-X k=v]... [-t SECONDS] BS TOPIC N\n"
                    "       rawpipe pipe  [-X k=v]... [-t SECONDS] [-B BATCH] BS IN OUT N\n"
                    "       rawpipe watch [-X k=v]... [-t SECONDS] [-v] BS TOPIC N\n");
}

static long rp_count(const char *s)
{
    char *end;
    long v = strtol(s, &end, 10);
    return end != s && *end == '\0' && v > 0 ? v : -1;
}

int main(int argc, char **argv)
{
    rp_opts_t opts = {.nx = 0, .timeout_s = 300, .batch = 1000, .keys = 1000000000L};

    /* The same malloc settings as beck's main.c, so that the comparison
     * measures the runtime and not glibc's arena trimming. */
    mallopt(M_TRIM_THRESHOLD, 256 << 20);
    mallopt(M_TOP_PAD, 64 << 20);
    const char *cmd = argc > 1 ? argv[1] : "";
    const char *args[4];
    int nargs = 0, want;
    long n;

    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        if ((strcmp(a, "-X") == 0 || strcmp(a, "-t") == 0 || strcmp(a, "-B") == 0 ||
             strcmp(a, "-K") == 0) &&
            i + 1 < argc) {
            char *v = argv[++i];
            if (a[1] == 'X') {
                char *eq = strchr(v, '=');
                if (!eq || eq == v || opts.nx == RP_MAX_X) {
                    fprintf(stderr, "rawpipe: -X wants key=value, got %s\n", v);
                    return 2;
                }
                *eq = '\0'; /* argv's strings are ours to split */
                opts.x[2 * opts.nx] = v;
                opts.x[2 * opts.nx + 1] = eq + 1;
                opts.nx++;
            } else if (a[1] == 't') {
                opts.timeout_s = atof(v);
            } else if (a[1] == 'K') {
                if ((opts.keys = rp_count(v)) <= 0) {
                    fprintf(stderr, "rawpipe: -K wants a positive count, got %s\n", v);
                    return 2;
                }
            } else if ((opts.batch = (int)rp_count(v)) <= 0) {
                fprintf(stderr, "rawpipe: -B wants a positive count, got %s\n", v);
                return 2;
            }
        } else if (strcmp(a, "-v") == 0) {
            opts.verbose = 1;
        } else if (nargs < 4) {
            args[nargs++] = a;
        } else {
            rp_usage();
            return 2;
        }
    }
    want = strcmp(cmd, "pipe") == 0 ? 4 : 3;
    if ((strcmp(cmd, "load") != 0 && strcmp(cmd, "pipe") != 0 && strcmp(cmd, "watch") != 0) ||
        nargs != want || (n = rp_count(args[want - 1])) < 0 || opts.timeout_s <= 0) {
        rp_usage();
        return 2;
    }
    signal(SIGINT, rp_on_signal);
    signal(SIGTERM, rp_on_signal);
    if (strcmp(cmd, "load") == 0) {
        return rp_load(&opts, args[0], args[1], n);
    }
    if (strcmp(cmd, "pipe") == 0) {
        return rp_pipe(&opts, args[0], args[1], args[2], n);
    }
    return rp_watch(&opts, args[0], args[1], n);
}
