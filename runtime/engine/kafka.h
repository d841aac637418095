/* kafka.h - librdkafka set-up shared by the runtime: client configurations
 * with beck's defaults under the user's -X/-F settings, partition counts from
 * metadata, and topic creation (Admin API on a real cluster, the control
 * channel on a dev broker). Not on the record path. */
#ifndef BK_KAFKA_H
#define BK_KAFKA_H

#include <librdkafka/rdkafka.h>
#include <stdatomic.h>
#include <stddef.h>

#include "base/conf.h"

typedef enum { BK_KAFKA_CONSUMER, BK_KAFKA_PRODUCER, BK_KAFKA_ADMIN } bk_kafka_role_t;

/* A client for `role`: beck's defaults (documented in docs/settings.md), then
 * bootstrap.servers from conf, then the user's librdkafka settings in order.
 * Returns NULL with errstr naming the bad setting. The caller owns it. */
rd_kafka_t *bk_kafka_new(const bk_conf_t *conf, bk_kafka_role_t role, const char *client_id,
                         void *opaque,
                         void (*dr_msg_cb)(rd_kafka_t *, const rd_kafka_message_t *, void *),
                         char *errstr, size_t errstr_size);

/* The same with `extra` (name, value, ..., NULL) after beck's defaults and before the user's
 * settings: a transactional producer's id, a restore consumer's end-of-partition events. */
rd_kafka_t *bk_kafka_new_with(const bk_conf_t *conf, bk_kafka_role_t role, const char *client_id,
                              const char *const *extra, void *opaque,
                              void (*dr_msg_cb)(rd_kafka_t *, const rd_kafka_message_t *, void *),
                              char *errstr, size_t errstr_size);

/* Whether the process talks to a dev broker (librdkafka's mock cluster), which accepts
 * transactions but neither stores their offsets nor hides what they aborted, creates
 * topics through its control channel and deletes no records: set once by `beck run`, as
 * soon as it knows, to the dev broker's control port (> 0) or 0 (real Kafka). It is the
 * one place the dev broker is selected: nothing passes its port around. dev_port: that
 * port, 0, or -1 when it was not set (a process that talks to several clusters, as the
 * specs' does, or a tool); dev_broker: 1 when a dev broker was set. */
void bk_kafka_set_dev_broker(int port);
int bk_kafka_dev_port(void);
int bk_kafka_dev_broker(void);

/* Errors of a read of metadata, offsets or watermarks that pass by themselves: a broker
 * down or restarting, a partition's leadership moving, a coordinator loading, a topic a
 * move just made that a broker does not know yet, a request that timed out. Such a read is
 * tried again (with a bound), never taken for an answer nor for a reason to stop. */
int bk_kafka_retriable(rd_kafka_resp_err_t err);

/* Partition counts of `n` topics; counts[i] = 0 when the topic does not exist. Tries again
 * on errors that pass (bk_kafka_retriable, a topic's own included) for up to timeout_ms.
 * Returns 0, or -1 with errstr when metadata could not be read. */
int bk_kafka_partitions(rd_kafka_t *rk, const char **topics, int n, int *counts, int timeout_ms,
                        char *errstr, size_t errstr_size);

/* Whether the brokers know `topic`: 1, 0, or -1 when no metadata came within timeout_ms.
 * Asks for every topic: asking a mock cluster (the dev broker) about one named topic would
 * create it. */
int bk_kafka_topic_exists(rd_kafka_t *rk, const char *topic, int timeout_ms);

/* Waits until every partition of `topic` has a leader in the cluster's metadata (a topic
 * just made has none for a while: a producer's records to it wait that long). The ms it
 * took, or -1 after timeout_ms. */
int bk_kafka_wait_leaders(rd_kafka_t *rk, const char *topic, int timeout_ms);

/* The start (lo) and end (hi) offsets of n partitions (topics[i], partitions[i]), in two
 * batched requests (ListOffsets, earliest and latest) instead of two per partition: a task
 * restore asks for every changelog partition of its tasks at once. Errors that pass
 * (bk_kafka_retriable) are tried again, for up to timeout_ms in all or until *stop (stop
 * may be NULL). 0, or an error code (a retriable one once the time is up). */
rd_kafka_resp_err_t bk_kafka_watermarks(rd_kafka_t *rk, const char *const *topics,
                                        const int32_t *partitions, int n, int64_t *lo, int64_t *hi,
                                        int timeout_ms, const atomic_int *stop);

/* Creates a topic with `configs` (name, value, ..., NULL; or NULL). On a dev broker
 * (bk_kafka_set_dev_broker; not set: rk's cluster metadata says) through its control
 * channel (which has no topic configs: the mock cluster neither compacts nor deletes by
 * config); else the Admin API (an existing topic is fine). */
#define BK_KAFKA_CONFIG_MAX 64

/* A real cluster's configs of `topic` (DescribeConfigs): the value of names[i] into
 * values[i], "" when the broker names no such config. 0, or -1 with errstr. Not for the dev
 * broker, which has no configs. */
int bk_kafka_topic_configs(rd_kafka_t *rk, const char *topic, const char *const *names, int n,
                           char (*values)[BK_KAFKA_CONFIG_MAX], int timeout_ms, char *errstr,
                           size_t errstr_size);

/* Sets `configs` (name, value, ..., NULL) on a real cluster's topic and keeps its other
 * dynamic configs: librdkafka 2.0 has no IncrementalAlterConfigs, so the topic's dynamic
 * configs are read (DescribeConfigs) and written back whole with these (AlterConfigs).
 * 0, or -1 with errstr. */
int bk_kafka_alter_topic_configs(rd_kafka_t *rk, const char *topic, const char *const *configs,
                                 int timeout_ms, char *errstr, size_t errstr_size);

/* Deletes every record of a topic's partitions 0..partitions-1 (DeleteRecords to their
 * ends: the broker drops their segments), through the Admin API (real Kafka: the dev broker
 * has none). The topic stays: librdkafka 2.0's consumers may hang in their destroy after a
 * topic they read was deleted (its issue #4674). 1: emptied, 0: there is no such topic,
 * -1 with errstr. */
int bk_kafka_purge_topic(rd_kafka_t *rk, const char *topic, int partitions, char *errstr,
                         size_t errstr_size);

int bk_kafka_create_topic(rd_kafka_t *rk, const char *topic, int partitions, int replication_factor,
                          const char *const *configs, char *errstr, size_t errstr_size);

#endif
