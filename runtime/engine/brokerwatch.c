/* brokerwatch.c - one voice for "no broker answers" (brokerwatch.h). */
#include "engine/brokerwatch.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "base/clock.h"
#include "base/log.h"
#include "engine/kafka.h"

/* suspect: a client said every broker is down; down: the probe confirmed it (wall ms, 0 no) */
static atomic_llong suspect_since, down_since;

static struct {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    pthread_t thread;
    int started, stop;
    const bk_conf_t *conf;
    rd_kafka_t *probe;
} w = {.lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};

int64_t bk_brokerwatch_down_since(void)
{
    return (int64_t)atomic_load(&down_since);
}

int bk_brokerwatch_quiet(void)
{
    return atomic_load(&suspect_since) != 0 || atomic_load(&down_since) != 0;
}

void bk_brokerwatch_error_cb(rd_kafka_t *rk, int err, const char *reason, void *opaque)
{
    (void)opaque;
    if (err == RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN) {
        long long zero = 0;
        bk_log_debug("kafka %s: %s", rd_kafka_name(rk), reason);
        if (atomic_compare_exchange_strong(&suspect_since, &zero, bk_clock_wall_ms())) {
            pthread_mutex_lock(&w.lock);
            pthread_cond_signal(&w.cond); /* the probe looks at once */
            pthread_mutex_unlock(&w.lock);
        }
    } else if (err == RD_KAFKA_RESP_ERR__TRANSPORT || err == RD_KAFKA_RESP_ERR__RESOLVE) {
        /* the client's log says it already ("kafka FAIL: ...", quieted while no broker
         * answers) */
        bk_log_debug("kafka %s: %s", rd_kafka_name(rk), reason);
    } else if (err == RD_KAFKA_RESP_ERR__FATAL) {
        char why[512];
        rd_kafka_fatal_error(rk, why, sizeof(why));
        bk_log_error("kafka %s: fatal: %s", rd_kafka_name(rk), why);
    } else {
        bk_log_error("kafka %s: %s: %s", rd_kafka_name(rk), rd_kafka_err2name(err), reason);
    }
}

/* One metadata request: 1 if a broker answered, 0 if none. */
static int probe(void)
{
    const struct rd_kafka_metadata *md = NULL;
    int ok;
    if (!w.probe) {
        char err[512];
        w.probe = bk_kafka_new(w.conf, BK_KAFKA_PRODUCER, "beck-brokerwatch", NULL, NULL, err,
                               sizeof(err));
        if (!w.probe) {
            bk_log_warn("broker watch: %s", err);
            return 0;
        }
    }
    ok = rd_kafka_metadata(w.probe, 0, NULL, &md, BK_BROKERWATCH_PROBE_MS) ==
             RD_KAFKA_RESP_ERR_NO_ERROR &&
         md->broker_cnt > 0;
    if (md) {
        rd_kafka_metadata_destroy(md);
    }
    return ok;
}

static void *watch_main(void *arg)
{
    int64_t said = 0;
    (void)arg;
    bk_log_set_thread_name("brokerwatch");
    pthread_mutex_lock(&w.lock);
    while (!w.stop) {
        struct timespec until;
        int64_t suspect = atomic_load(&suspect_since), down = atomic_load(&down_since);
        if (suspect || down) {
            int up;
            pthread_mutex_unlock(&w.lock);
            up = probe();
            pthread_mutex_lock(&w.lock);
            int64_t now = bk_clock_wall_ms();
            if (up) {
                if (down) {
                    bk_log_info("the Kafka cluster answers again, after %.1f s without a broker",
                                (double)(now - down) / 1000.0);
                }
                atomic_store(&down_since, 0);
                atomic_store(&suspect_since, 0);
            } else if (!down) {
                atomic_store(&down_since, suspect);
                said = now;
                bk_log_warn("waiting for the Kafka cluster (%s): no broker answers; the node "
                            "keeps its state and committed offsets and resumes when one does",
                            bk_conf_str(w.conf, BK_CONF_BROKERS));
            } else if (now - said >= BK_BROKERWATCH_SAY_MS) {
                said = now;
                bk_log_warn("still waiting for the Kafka cluster: no broker has answered for "
                            "%.0f s",
                            (double)(now - down) / 1000.0);
            }
        }
        if (w.stop) {
            break;
        }
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += BK_BROKERWATCH_PROBE_MS / 1000;
        /* wakes at once when a client reports the brokers down */
        pthread_cond_timedwait(&w.cond, &w.lock, &until);
    }
    pthread_mutex_unlock(&w.lock);
    return NULL;
}

int bk_brokerwatch_start(const bk_conf_t *conf)
{
    int rc = 0;
    pthread_mutex_lock(&w.lock);
    if (!w.started) {
        w.conf = conf;
        w.stop = 0;
        rc = pthread_create(&w.thread, NULL, watch_main, NULL) == 0 ? 0 : -1;
        w.started = rc == 0;
    }
    pthread_mutex_unlock(&w.lock);
    return rc;
}

void bk_brokerwatch_stop(void)
{
    pthread_mutex_lock(&w.lock);
    if (!w.started) {
        pthread_mutex_unlock(&w.lock);
        return;
    }
    w.stop = 1;
    pthread_cond_signal(&w.cond);
    pthread_mutex_unlock(&w.lock);
    pthread_join(w.thread, NULL);
    pthread_mutex_lock(&w.lock);
    w.started = 0;
    if (w.probe) {
        rd_kafka_destroy(w.probe);
        w.probe = NULL;
    }
    pthread_mutex_unlock(&w.lock);
}
