/* devctl.h - client of the dev broker's control channel (see broker.h).
 *
 * The runtime uses it to create the topics it needs when its cluster turns out
 * to be a dev broker; on a real cluster it uses the Admin API instead
 * (kafka.h). Plain blocking TCP on 127.0.0.1 with short timeouts. */
#ifndef BK_DEVCTL_H
#define BK_DEVCTL_H

#include <librdkafka/rdkafka.h>
#include <stddef.h>

/* Looks in rk's cluster metadata for the topic that advertises a dev broker's
 * control channel. Returns its port (> 0), 0 when the cluster is not a dev
 * broker, -1 with errstr when metadata could not be read. */
int bk_devctl_discover(rd_kafka_t *rk, int timeout_ms, char *errstr, size_t errstr_size);

/* Sends one command line (without newline) to 127.0.0.1:port and reads the
 * one-line reply. Returns 0 when the reply starts with "OK" (rest copied to
 * reply, may be NULL), -1 otherwise with the reply or the I/O error in errstr. */
int bk_devctl_request(int port, const char *line, char *reply, size_t reply_size, char *errstr,
                      size_t errstr_size);

/* CREATE <topic> <partitions>: see bk_broker_create_topic(). */
int bk_devctl_create_topic(int port, const char *topic, int partitions, char *errstr,
                           size_t errstr_size);

#endif
