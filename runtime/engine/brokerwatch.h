/* brokerwatch.h - what a process says while no Kafka broker answers (docs/reliability.md,
 * Broker faults).
 *
 * librdkafka reports "all brokers are down" to every client's error callback
 * (bk_kafka_new sets it), and then each client logs every refused reconnect. The watch turns
 * that into one line when the outage starts, one every BK_BROKERWATCH_SAY_MS while it lasts,
 * and one when a broker answers again (a metadata request of a probe client of its own, in
 * its own thread), and quiets the clients' reconnect failures in between. The node waits
 * meanwhile: its member is lost and its tasks stopped, their state and offsets kept. */
#ifndef BK_BROKERWATCH_H
#define BK_BROKERWATCH_H

#include <librdkafka/rdkafka.h>
#include <stdint.h>

#include "base/conf.h"

#define BK_BROKERWATCH_SAY_MS 10000  /* "still waiting" this often */
#define BK_BROKERWATCH_PROBE_MS 1000 /* a metadata request this often while it lasts */

/* Starts the probe thread of a node (once per process; later calls do nothing). 0, or -1. */
int bk_brokerwatch_start(const bk_conf_t *conf);
/* Stops and joins it. */
void bk_brokerwatch_stop(void);

/* A client's error callback (set by bk_kafka_new). @locality librdkafka's threads */
void bk_brokerwatch_error_cb(rd_kafka_t *rk, int err, const char *reason, void *opaque);
/* Since when (wall ms) no broker answers, 0 when they do. @locality any thread */
int64_t bk_brokerwatch_down_since(void);
/* True while a client reports every broker down: the clients' reconnect failures are then
 * logged at debug level. @locality any thread */
int bk_brokerwatch_quiet(void);

#endif
