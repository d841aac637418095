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

/* rk: an admin client; on a dev broker (bk_kafka_set_dev_broker) sources are created too.
 * Fills the plan's partition counts. 0, or -1 with err. */
int bk_topics_ensure(bk_plan_t *plan, const bk_conf_t *conf, rd_kafka_t *rk, char *err,
                     size_t errsz);

/* After bk_plan_grow added later generations: their topics (from index from_topic on)
 * created with their task counts as partitions, and the changelogs of the stores from
 * from_store on; what exists is checked instead (another node may have made it). The plan
 * is only read. 0, or -1 with err. */
int bk_topics_ensure_grown(const bk_plan_t *plan, const bk_conf_t *conf, rd_kafka_t *rk,
                           int from_topic, int from_store, char *err, size_t errsz);

#endif
