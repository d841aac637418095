/* broker.h - the dev broker: hosts librdkafka's mock cluster in this process.
 *
 * Used by `beck broker` (a dev cluster for several nodes and for tests) and by
 * `beck run` without -b (an embedded one). The mock cluster cannot create
 * topics through the Kafka protocol, so the broker also serves a small
 * line-based control channel on 127.0.0.1 (see docs/dev-broker.md) through
 * which a runtime or a test creates topics and takes brokers down and up.
 * The channel is advertised as a topic named BK_BROKER_CTL_PREFIX<port> so
 * that any client that knows only the bootstrap address can find it.
 * Not for production: nothing in the runtime may depend on the mock's quirks. */
#ifndef BK_BROKER_H
#define BK_BROKER_H

#include <signal.h>

#include <stddef.h>

#define BK_BROKER_MAX_BROKERS 64
#define BK_BROKER_MAX_PARTITIONS 10000
#define BK_BROKER_TOPIC_MAX 249 /* Kafka's limit on topic name length */
#define BK_BROKER_RACK_MAX 64
#define BK_BROKER_CTL_PREFIX "__beck_devbroker-ctl-"

typedef struct bk_broker_s bk_broker_t;

/* Starts a mock cluster of `brokers` brokers (1..64), racks given as a
 * comma-separated list assigned round-robin (NULL: no racks), and its control
 * channel. Returns NULL with errstr filled on failure. Free with
 * bk_broker_destroy(). */
bk_broker_t *bk_broker_new(int brokers, const char *racks_csv, char *errstr, size_t errstr_size);

/* "127.0.0.1:port,..." owned by the broker. */
const char *bk_broker_bootstrap(const bk_broker_t *broker);

/* TCP port of the control channel on 127.0.0.1. */
int bk_broker_control_port(const bk_broker_t *broker);

/* Creates a topic; creating an existing topic with the same partition count
 * succeeds, with another count fails. Returns 0 or -1 with errstr. @locality any thread */
int bk_broker_create_topic(bk_broker_t *broker, const char *topic, int partitions, char *errstr,
                           size_t errstr_size);

/* Takes broker `broker_id` (1-based, as the mock numbers them) down or up. */
int bk_broker_set_down(bk_broker_t *broker, int broker_id, int down, char *errstr,
                       size_t errstr_size);

/* Broker `broker_id`'s next `count` requests of API `api_key` (0: Produce) fail with Kafka
 * error `code`, each answered `rtt_ms` late, for fault tests (docs/dev-broker.md, ERRORS).
 * 0, or -1 with errstr. */
int bk_broker_push_errors(bk_broker_t *broker, int broker_id, int api_key, int count, int code,
                          int rtt_ms, char *errstr, size_t errstr_size);

void bk_broker_destroy(bk_broker_t *broker);

/* bk_broker_create_topic(), stopping between partitions when one of the blocked signals in
 * `stop` (NULL: none) is pending: then -1 with *sig set to it, so that `beck broker` stops
 * within a second even while it creates a topic of thousands of partitions. */
int bk_broker_create_topic_until(bk_broker_t *broker, const char *topic, int partitions,
                                 const sigset_t *stop, int *sig, char *errstr, size_t errstr_size);
/* A SIGINT or SIGTERM that is pending (blocked), taken off: its number, or 0 for none. */
int bk_broker_signalled(const sigset_t *sigs);

/* Checks for `beck broker`'s arguments (cmd/cmd_broker.c). */
/* Kafka's rule: 1..249 characters of [A-Za-z0-9._-], and not "." or "..". */
int bk_broker_topic_valid(const char *topic);
/* Parses a whole decimal string into [min, max]; 0 on success. */
int bk_broker_parse_int(const char *s, int min, int max, int *out);
/* A comma-separated rack list ("a,b,c"): no empty or over-long names. 1 when valid. */
int bk_broker_racks_valid(const char *csv, char *errstr, size_t errstr_size);
/* A line "beck broker: ..." on stderr, written at once. */
void bk_broker_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
