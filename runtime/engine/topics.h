/* topics.h - the topics an app needs at start: every topic's partition count is found;
 * sinks, the dead-letter topic and changelogs (with their configs: docs/kafka.md) are
 * created when missing, sources too on a dev broker (on a real cluster the input is
 * someone else's to create); an existing changelog whose configs may lose state gets a
 * warning. Run once by `beck run` on its main thread, before any stream thread. */
#ifndef BK_TOPICS_H
#define BK_TOPICS_H

#include <stddef.h>

#include <librdkafka/rdkafka.h>

#include "base/conf.h"
#include "engine/plan.h"

/* rk: an admin client. dev_port: the dev broker's control port, or 0 on real Kafka. Fills
 * the plan's partition counts. 0, or -1 with err. */
int bk_topics_ensure(bk_plan_t *plan, const bk_conf_t *conf, rd_kafka_t *rk, int dev_port,
                     char *err, size_t errsz);

#endif
