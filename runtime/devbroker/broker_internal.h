/* broker_internal.h - the dev broker's insides, shared by broker.c (the mock cluster, its
 * calls, topics, brokers down, life cycle) and broker_ctl.c (the line-based control
 * channel). Nothing else includes it. */
#ifndef BK_BROKER_INTERNAL_H
#define BK_BROKER_INTERNAL_H

#include <pthread.h>

#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#include "devbroker/broker.h"

struct bk_broker_s {
    rd_kafka_t *host; /* owns the mock cluster (see bk_broker_host_new) */
    rd_kafka_mock_cluster_t *mcluster;
    int brokers;
    int ports[BK_BROKER_MAX_BROKERS]; /* the brokers' ports on 127.0.0.1, by id - 1 */

    /* Calls into the mock in progress, watched by the kicker thread. */
    pthread_mutex_t call_lock;
    pthread_cond_t call_cond; /* CLOCK_MONOTONIC; signalled when a call begins or at stop */
    int calls;                /* calls in progress */
    unsigned call_seq;        /* bumped when a call begins or ends: progress */
    int kick_stop;
    pthread_t kick_thread;
    int kick_started;

    /* A client of the cluster, made on first need, to read a topic's partition
     * count: the mock's own API cannot, and topics may also have been
     * auto-created by clients' Metadata or Produce requests (4 partitions). */
    pthread_mutex_t meta_lock;
    rd_kafka_t *meta;

    int listen_fd;
    int port;
    int stop_pipe[2]; /* a byte on [1] ends the control thread */
    pthread_t thread;
    int thread_started;
};

/* The control channel (broker_ctl.c): listening on 127.0.0.1 (broker->listen_fd, ->port;
 * 0, or -1 with errstr), and its thread's main, serving one connection after another until
 * a byte on broker->stop_pipe[1]. */
int bk_broker_ctl_listen(bk_broker_t *broker, char *errstr, size_t errstr_size);
void *bk_broker_ctl_main(void *arg);

#endif
