/* broker.c - the dev broker: librdkafka's mock cluster (its control channel is in
 * broker_ctl.c). */
#define _GNU_SOURCE /* accept4, pipe2, MSG_NOSIGNAL */

#include "devbroker/broker.h"
#include "devbroker/broker_internal.h"

#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

/* Waiting for metadata from our own in-process cluster: only slow when every
 * broker is DOWN, and shorter than devctl's 5 s timeout so that the ERR reply
 * still reaches the client. */
#define BK_BROKER_METADATA_MS 3000
/* How long a call into the mock may go unanswered before the kicker wakes the
 * mock thread (see "Mock calls"): an idle mock answers in ~20-50 us, so a
 * lost wake-up costs about this (plus timer slack) instead of 1 s. Each
 * further kick for the same call waits twice as long, up to the cap, so that
 * a mock thread that is only busy is not flooded with connections. */
#define BK_BROKER_KICK_US 50
#define BK_BROKER_KICK_MAX_US 100000

/* -- Logging ------------------------------------------------------------------------------- */

void bk_broker_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

void bk_broker_log(const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    int n;

    n = snprintf(line, sizeof(line), "beck broker: ");
    va_start(ap, fmt);
    vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
    va_end(ap);
    /* One fputs per line so lines from librdkafka's threads do not interleave. */
    strcat(line, "\n");
    fputs(line, stderr);
}

/* The mock cluster's own warnings and errors (syslog levels), which come
 * through its host handle. Not the host's as a client of the cluster (see
 * bk_broker_host_new): a broker taken DOWN on purpose is no news.
 * @locality librdkafka internal threads */
static void bk_broker_rdkafka_log(const rd_kafka_t *rk, int level, const char *fac, const char *buf)
{
    (void)rk;
    if (level <= 4 && !strcmp(fac, "MOCK")) {
        bk_broker_log("librdkafka %s: %s", fac, buf);
    }
}

/* The metadata client's connection failures, mostly to brokers taken DOWN on
 * purpose, would be noise: its errors reach us as rd_kafka_metadata()'s result.
 * @locality librdkafka internal threads */
static void bk_broker_rdkafka_log_none(const rd_kafka_t *rk, int level, const char *fac,
                                       const char *buf)
{
    (void)rk, (void)level, (void)fac, (void)buf;
}

/* -- Validation ---------------------------------------------------------------------------- */

/* Kafka's rule: 1..249 characters of [A-Za-z0-9._-], and not "." or "..". */
int bk_broker_topic_valid(const char *topic)
{
    size_t len = strlen(topic);

    if (len == 0 || len > BK_BROKER_TOPIC_MAX || !strcmp(topic, ".") || !strcmp(topic, "..")) {
        return 0;
    }
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)topic[i];
        if (!isalnum(c) && c != '.' && c != '_' && c != '-') {
            return 0;
        }
    }
    return 1;
}

/* Parses a whole decimal string into [min, max]; 0 on success. */
int bk_broker_parse_int(const char *s, int min, int max, int *out)
{
    char *end;
    long v;

    if (!isdigit((unsigned char)*s) && *s != '-') {
        return -1;
    }
    errno = 0;
    v = strtol(s, &end, 10);
    if (errno || *end != '\0' || v < min || v > max) {
        return -1;
    }
    *out = (int)v;
    return 0;
}

/* Checks a comma-separated rack list ("a,b,c"): no empty or over-long names. */
int bk_broker_racks_valid(const char *csv, char *errstr, size_t errstr_size)
{
    const char *p = csv;

    for (;;) {
        size_t len = strcspn(p, ",");
        if (len == 0 || len > BK_BROKER_RACK_MAX) {
            snprintf(errstr, errstr_size,
                     "invalid rack list '%s': rack names must be 1..%d "
                     "characters, separated by commas",
                     csv, BK_BROKER_RACK_MAX);
            return 0;
        }
        if (p[len] == '\0') {
            return 1;
        }
        p += len + 1;
    }
}

/* -- Mock calls ---------------------------------------------------------------------------- */

/* Every rd_kafka_mock_*() call queues a command for the mock thread and waits
 * for its reply. In librdkafka 2.0.2 the mock thread can lose the wake-up of
 * a command queued just after it answered the previous one (it drains its
 * wake-up pipe after serving its queue), and then only notices the command at
 * its next idle poll, up to 1 s later; on an idle machine most calls do.
 * Creating a 64-partition topic took 65 calls, so `beck broker` with five
 * such topics took 2..50 s to start. The mock thread also serves its queue
 * whenever one of its sockets is readable, so the kicker thread below opens
 * (and at once resets) a TCP connection to a broker's port whenever a call
 * has gone BK_BROKER_KICK_US without progress.
 * Every call into the mock must be bracketed by bk_broker_call_begin/_end. */

/* @locality any thread */
static void bk_broker_call_begin(bk_broker_t *broker)
{
    pthread_mutex_lock(&broker->call_lock);
    if (broker->calls++ == 0) {
        pthread_cond_signal(&broker->call_cond); /* the kicker may be idle */
    }
    broker->call_seq++;
    pthread_mutex_unlock(&broker->call_lock);
}

/* @locality any thread */
static void bk_broker_call_end(bk_broker_t *broker)
{
    pthread_mutex_lock(&broker->call_lock);
    assert(broker->calls > 0);
    broker->calls--;
    broker->call_seq++;
    pthread_mutex_unlock(&broker->call_lock);
}

/* Wakes the mock thread with a connection to the first broker that takes one.
 * When every broker is DOWN nothing can wake it, and a lost wake-up costs its
 * 1 s again. @locality kicker thread */
static void bk_broker_kick(const bk_broker_t *broker)
{
    /* Reset rather than closed: a start with thousands of partitions kicks
     * thousands of times, and a FIN would leave each in TIME_WAIT for a
     * minute. Linux keeps a reset connection in the accept queue, so the
     * mock's blocking accept() still finds it (its read then fails, which
     * the mock logs at debug level only). */
    static const struct linger reset = {.l_onoff = 1, .l_linger = 0};

    for (int i = 0; i < broker->brokers; i++) {
        struct sockaddr_in sin = {.sin_family = AF_INET,
                                  .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
                                  .sin_port = htons((uint16_t)broker->ports[i])};
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        int r;

        if (fd < 0) {
            return;
        }
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &reset, sizeof(reset));
        /* On loopback the handshake is done by the time connect() returns,
         * even when it says EINPROGRESS; a DOWN broker refuses at once. */
        r = connect(fd, (struct sockaddr *)&sin, sizeof(sin));
        r = r == 0 || errno == EINPROGRESS;
        close(fd);
        if (r) {
            return;
        }
    }
}

/* @locality kicker thread */
static void *bk_broker_kick_main(void *arg)
{
    bk_broker_t *broker = arg;
    long delay_us = BK_BROKER_KICK_US;
    unsigned seq;

    /* The default slack of 50 us would double every wait. */
    prctl(PR_SET_TIMERSLACK, 1UL);
    pthread_mutex_lock(&broker->call_lock);
    seq = broker->call_seq;
    while (!broker->kick_stop) {
        struct timespec until;

        if (broker->calls == 0) {
            pthread_cond_wait(&broker->call_cond, &broker->call_lock);
            continue;
        }
        if (broker->call_seq != seq) { /* progress: a new call to watch */
            seq = broker->call_seq;
            delay_us = BK_BROKER_KICK_US;
        }
        clock_gettime(CLOCK_MONOTONIC, &until);
        until.tv_nsec += delay_us * 1000L;
        until.tv_sec += until.tv_nsec / 1000000000L;
        until.tv_nsec %= 1000000000L;
        while (!broker->kick_stop && broker->call_seq == seq &&
               pthread_cond_timedwait(&broker->call_cond, &broker->call_lock, &until) == 0) {
        }
        if (!broker->kick_stop && broker->calls > 0 && broker->call_seq == seq) {
            pthread_mutex_unlock(&broker->call_lock);
            bk_broker_kick(broker);
            pthread_mutex_lock(&broker->call_lock);
            delay_us = delay_us * 2 < BK_BROKER_KICK_MAX_US ? delay_us * 2 : BK_BROKER_KICK_MAX_US;
        }
    }
    pthread_mutex_unlock(&broker->call_lock);
    return NULL;
}

/* Reads the brokers' ports from the bootstrap list ("127.0.0.1:p1,...", in id
 * order) and starts the kicker. */
static int bk_broker_kick_start(bk_broker_t *broker, char *errstr, size_t errstr_size)
{
    const char *p = bk_broker_bootstrap(broker);
    int err;

    for (int i = 0; i < broker->brokers; i++) {
        const char *colon = strchr(p, ':');
        assert(colon);
        broker->ports[i] = atoi(colon + 1);
        p = strchr(colon, ',');
        assert(p || i == broker->brokers - 1);
        p = p ? p + 1 : colon;
    }
    err = pthread_create(&broker->kick_thread, NULL, bk_broker_kick_main, broker);
    if (err) {
        snprintf(errstr, errstr_size, "cannot start kicker thread: %s", strerror(err));
        return -1;
    }
    broker->kick_started = 1;
    return 0;
}

static void bk_broker_kick_stop(bk_broker_t *broker)
{
    pthread_mutex_lock(&broker->call_lock);
    broker->kick_stop = 1;
    pthread_cond_signal(&broker->call_cond);
    pthread_mutex_unlock(&broker->call_lock);
    pthread_join(broker->kick_thread, NULL);
    broker->kick_started = 0;
}

/* -- Cluster ------------------------------------------------------------------------------- */

/* The handle that owns the mock cluster: librdkafka creates the cluster with
 * the handle (test.mock.num.brokers) and destroys it inside rd_kafka_destroy()
 * once the handle is terminating. Not rd_kafka_mock_cluster_new() and _destroy():
 * that destroy hands its internal broker thread a TERMINATE that the thread
 * can serve before its last reference is gone, and then, the handle not being
 * terminating, it sleeps a full second before it looks again (one stop in
 * four took 1 s). The handle is also a client of its cluster (librdkafka
 * points its bootstrap.servers there), which we never use: no periodic
 * metadata refresh, and only the mock's own messages are logged. */
static rd_kafka_t *bk_broker_host_new(int brokers, char *errstr, size_t errstr_size)
{
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    char count[16];
    rd_kafka_t *rk;

    snprintf(count, sizeof(count), "%d", brokers);
    rd_kafka_conf_set_log_cb(conf, bk_broker_rdkafka_log);
    if (rd_kafka_conf_set(conf, "test.mock.num.brokers", count, errstr, errstr_size) !=
            RD_KAFKA_CONF_OK ||
        rd_kafka_conf_set(conf, "topic.metadata.refresh.interval.ms", "-1", errstr, errstr_size) !=
            RD_KAFKA_CONF_OK) {
        goto fail;
    }
    rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, errstr_size);
    if (!rk) {
        goto fail;
    }
    return rk;

fail:
    rd_kafka_conf_destroy(conf); /* rd_kafka_new() takes conf only on success */
    return NULL;
}

/* A silent client of the cluster, for metadata. */
static rd_kafka_t *bk_broker_client_new(const char *bootstrap, char *errstr, size_t errstr_size)
{
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    rd_kafka_t *rk;

    rd_kafka_conf_set_log_cb(conf, bk_broker_rdkafka_log_none);
    if (rd_kafka_conf_set(conf, "bootstrap.servers", bootstrap, errstr, errstr_size) !=
        RD_KAFKA_CONF_OK) {
        goto fail;
    }
    rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, errstr_size);
    if (!rk) {
        goto fail;
    }
    return rk;

fail:
    rd_kafka_conf_destroy(conf); /* rd_kafka_new() takes conf only on success */
    return NULL;
}

/* Reads a topic's partition count from the cluster: > 0, 0 when the topic does
 * not exist, -1 with errstr when metadata could not be read.
 * @locality any thread */
static int bk_broker_partition_count(bk_broker_t *broker, const char *topic, char *errstr,
                                     size_t errstr_size)
{
    const struct rd_kafka_metadata *md = NULL;
    rd_kafka_resp_err_t err;
    rd_kafka_t *meta;
    int count = 0;

    pthread_mutex_lock(&broker->meta_lock);
    if (!broker->meta) {
        broker->meta = bk_broker_client_new(bk_broker_bootstrap(broker), errstr, errstr_size);
    }
    meta = broker->meta;
    pthread_mutex_unlock(&broker->meta_lock);
    if (!meta) {
        return -1;
    }

    /* All topics rather than just this one: a Metadata request naming a topic
     * would make the mock auto-create it. */
    err = rd_kafka_metadata(meta, 1, NULL, &md, BK_BROKER_METADATA_MS);
    if (err) {
        snprintf(errstr, errstr_size, "cannot read metadata: %s", rd_kafka_err2str(err));
        return -1;
    }
    for (int i = 0; i < md->topic_cnt; i++) {
        if (!strcmp(md->topics[i].topic, topic)) {
            count = md->topics[i].partition_cnt;
            break;
        }
    }
    rd_kafka_metadata_destroy(md);
    return count;
}

const char *bk_broker_bootstrap(const bk_broker_t *broker)
{
    return rd_kafka_mock_cluster_bootstraps(broker->mcluster);
}

int bk_broker_control_port(const bk_broker_t *broker)
{
    return broker->port;
}

/* A SIGINT or SIGTERM that is pending (blocked, as bk_broker_main keeps them),
 * taken off: its number, or 0 when there is none. */
int bk_broker_signalled(const sigset_t *sigs)
{
    static const struct timespec no_wait = {0, 0};
    int sig = sigtimedwait(sigs, NULL, &no_wait);

    return sig > 0 ? sig : 0;
}

/* bk_broker_create_topic(), stopping between partitions when one of the
 * blocked signals in `stop` (NULL: none) is pending: then -1 with *sig set to
 * it, so that `beck broker` stops within a second even while it creates a
 * topic of thousands of partitions. The topic is then left half-led, which
 * does not matter to a broker that is about to go. */
int bk_broker_create_topic_until(bk_broker_t *broker, const char *topic, int partitions,
                                 const sigset_t *stop, int *sig, char *errstr, size_t errstr_size)
{
    rd_kafka_resp_err_t err;
    int existing;

    if (!bk_broker_topic_valid(topic)) {
        snprintf(errstr, errstr_size,
                 "invalid topic name '%.60s': 1..%d characters of [A-Za-z0-9._-]", topic,
                 BK_BROKER_TOPIC_MAX);
        return -1;
    }
    if (partitions < 1 || partitions > BK_BROKER_MAX_PARTITIONS) {
        snprintf(errstr, errstr_size, "invalid partition count %d for topic '%s': 1..%d",
                 partitions, topic, BK_BROKER_MAX_PARTITIONS);
        return -1;
    }

    /* The mock caps replicas at min(3, brokers) whatever we pass. */
    bk_broker_call_begin(broker);
    err = rd_kafka_mock_topic_create(broker->mcluster, topic, partitions,
                                     broker->brokers < 3 ? broker->brokers : 3);
    bk_broker_call_end(broker);
    if (err == RD_KAFKA_RESP_ERR_NO_ERROR) {
        /* The mock picks leaders at random (and never past broker 3): spread
         * them round-robin so that every broker leads, as on a real cluster
         * after a preferred-leader election, and fault tests are repeatable.
         * A single broker already leads everything: spare the calls. */
        for (int p = 0; broker->brokers > 1 && p < partitions; p++) {
            if (stop && p % 64 == 63 && (*sig = bk_broker_signalled(stop)) != 0) {
                snprintf(errstr, errstr_size, "interrupted by a signal");
                return -1;
            }
            bk_broker_call_begin(broker);
            err = rd_kafka_mock_partition_set_leader(broker->mcluster, topic, p,
                                                     p % broker->brokers + 1);
            bk_broker_call_end(broker);
            if (err) {
                snprintf(errstr, errstr_size, "cannot set the leader of '%s' [%d]: %s", topic, p,
                         rd_kafka_err2str(err));
                return -1;
            }
        }
        return 0;
    }
    if (err != RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS) {
        snprintf(errstr, errstr_size, "cannot create topic '%s': %s", topic, rd_kafka_err2str(err));
        return -1;
    }

    /* Creating is idempotent as long as the partition counts agree. */
    existing = bk_broker_partition_count(broker, topic, errstr, errstr_size);
    if (existing < 0) {
        return -1;
    }
    if (existing != partitions) {
        snprintf(errstr, errstr_size, "topic '%s' exists with %d partitions, not %d", topic,
                 existing, partitions);
        return -1;
    }
    return 0;
}

int bk_broker_create_topic(bk_broker_t *broker, const char *topic, int partitions, char *errstr,
                           size_t errstr_size)
{
    return bk_broker_create_topic_until(broker, topic, partitions, NULL, NULL, errstr, errstr_size);
}

int bk_broker_set_down(bk_broker_t *broker, int broker_id, int down, char *errstr,
                       size_t errstr_size)
{
    rd_kafka_resp_err_t err;

    if (broker_id < 1 || broker_id > broker->brokers) {
        snprintf(errstr, errstr_size, "no broker %d: ids are 1..%d", broker_id, broker->brokers);
        return -1;
    }
    bk_broker_call_begin(broker);
    err = down ? rd_kafka_mock_broker_set_down(broker->mcluster, broker_id)
               : rd_kafka_mock_broker_set_up(broker->mcluster, broker_id);
    bk_broker_call_end(broker);
    if (err) {
        snprintf(errstr, errstr_size, "cannot set broker %d %s: %s", broker_id,
                 down ? "down" : "up", rd_kafka_err2str(err));
        return -1;
    }
    return 0;
}

int bk_broker_push_errors(bk_broker_t *broker, int broker_id, int api_key, int count, int code,
                          int rtt_ms, char *errstr, size_t errstr_size)
{
    rd_kafka_resp_err_t err = RD_KAFKA_RESP_ERR_NO_ERROR;

    if (broker_id < 1 || broker_id > broker->brokers) {
        snprintf(errstr, errstr_size, "no broker %d: ids are 1..%d", broker_id, broker->brokers);
        return -1;
    }
    bk_broker_call_begin(broker);
    for (int i = 0; i < count && !err; i++) {
        err = rd_kafka_mock_broker_push_request_error_rtts(
            broker->mcluster, broker_id, (int16_t)api_key, 1, (rd_kafka_resp_err_t)code, rtt_ms);
    }
    bk_broker_call_end(broker);
    if (err) {
        snprintf(errstr, errstr_size, "cannot queue errors on broker %d: %s", broker_id,
                 rd_kafka_err2str(err));
        return -1;
    }
    return 0;
}

/* -- Life cycle ---------------------------------------------------------------------------- */

bk_broker_t *bk_broker_new(int brokers, const char *racks_csv, char *errstr, size_t errstr_size)
{
    bk_broker_t *broker;
    char ctl_topic[sizeof(BK_BROKER_CTL_PREFIX) + 8];
    pthread_condattr_t cattr;
    int err;

    if (brokers < 1 || brokers > BK_BROKER_MAX_BROKERS) {
        snprintf(errstr, errstr_size, "invalid broker count %d: 1..%d", brokers,
                 BK_BROKER_MAX_BROKERS);
        return NULL;
    }
    if (racks_csv && !bk_broker_racks_valid(racks_csv, errstr, errstr_size)) {
        return NULL;
    }

    broker = calloc(1, sizeof(*broker));
    if (!broker) {
        snprintf(errstr, errstr_size, "out of memory");
        return NULL;
    }
    broker->brokers = brokers;
    broker->listen_fd = -1;
    broker->stop_pipe[0] = broker->stop_pipe[1] = -1;
    pthread_mutex_init(&broker->meta_lock, NULL);
    pthread_mutex_init(&broker->call_lock, NULL);
    pthread_condattr_init(&cattr);
    pthread_condattr_setclock(&cattr, CLOCK_MONOTONIC);
    pthread_cond_init(&broker->call_cond, &cattr);
    pthread_condattr_destroy(&cattr);

    broker->host = bk_broker_host_new(brokers, errstr, errstr_size);
    if (!broker->host) {
        goto fail;
    }
    broker->mcluster = rd_kafka_handle_mock_cluster(broker->host);
    assert(broker->mcluster);
    if (bk_broker_kick_start(broker, errstr, errstr_size) != 0) {
        goto fail;
    }

    if (racks_csv) {
        const char *p = racks_csv;
        for (int id = 1; id <= brokers; id++) {
            char rack[BK_BROKER_RACK_MAX + 1];
            size_t len = strcspn(p, ",");
            rd_kafka_resp_err_t rerr;

            snprintf(rack, sizeof(rack), "%.*s", (int)len, p);
            bk_broker_call_begin(broker);
            rerr = rd_kafka_mock_broker_set_rack(broker->mcluster, id, rack);
            bk_broker_call_end(broker);
            if (rerr) {
                snprintf(errstr, errstr_size, "cannot set rack of broker %d", id);
                goto fail;
            }
            p = p[len] ? p + len + 1 : racks_csv; /* round-robin: wrap to the first */
        }
    }

    if (bk_broker_ctl_listen(broker, errstr, errstr_size) != 0) {
        goto fail;
    }
    if (pipe2(broker->stop_pipe, O_CLOEXEC) != 0) {
        snprintf(errstr, errstr_size, "pipe: %s", strerror(errno));
        goto fail;
    }

    snprintf(ctl_topic, sizeof(ctl_topic), "%s%d", BK_BROKER_CTL_PREFIX, broker->port);
    if (bk_broker_create_topic(broker, ctl_topic, 1, errstr, errstr_size) != 0) {
        goto fail;
    }

    err = pthread_create(&broker->thread, NULL, bk_broker_ctl_main, broker);
    if (err) {
        snprintf(errstr, errstr_size, "cannot start control thread: %s", strerror(err));
        goto fail;
    }
    broker->thread_started = 1;
    return broker;

fail:
    bk_broker_destroy(broker);
    return NULL;
}

/* Also tears down a half-built broker from bk_broker_new's failure path. */
void bk_broker_destroy(bk_broker_t *broker)
{
    if (!broker) {
        return;
    }
    if (broker->thread_started) {
        static const char one = 1;
        ssize_t n;
        do {
            n = write(broker->stop_pipe[1], &one, 1);
        } while (n < 0 && errno == EINTR);
        assert(n == 1);
        pthread_join(broker->thread, NULL);
    }
    if (broker->stop_pipe[0] >= 0) {
        close(broker->stop_pipe[0]);
        close(broker->stop_pipe[1]);
    }
    if (broker->listen_fd >= 0) {
        close(broker->listen_fd);
    }
    /* The client first, then the cluster it talks to, with its host handle. */
    if (broker->meta) {
        rd_kafka_destroy(broker->meta);
    }
    if (broker->host) {
        /* Destroys the cluster too, with a TERMINATE command that can lose
         * its wake-up like any other: kicked. */
        bk_broker_call_begin(broker);
        rd_kafka_destroy(broker->host);
        bk_broker_call_end(broker);
    }
    if (broker->kick_started) {
        bk_broker_kick_stop(broker);
    }
    pthread_cond_destroy(&broker->call_cond);
    pthread_mutex_destroy(&broker->call_lock);
    pthread_mutex_destroy(&broker->meta_lock);
    free(broker);
}
