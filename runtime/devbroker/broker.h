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

#include <stddef.h>

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

void bk_broker_destroy(bk_broker_t *broker);

/* `beck broker [--brokers N] [--racks a,b,c] [--topic NAME:PARTITIONS]...`:
 * prints the bootstrap address as its first line and runs until SIGINT or
 * SIGTERM, which also stop it while it is starting (within milliseconds).
 * argv[0] is the subcommand ("broker"), options follow. Blocks SIGINT and
 * SIGTERM in the calling thread before starting any thread, so call it before
 * the process has other threads. Returns the process exit status: 0 (after a
 * signal), 1 (cluster failed to start) or 2 (usage error). */
int bk_broker_main(int argc, char **argv);

#endif
