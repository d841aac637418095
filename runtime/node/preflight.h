/* preflight.h - what `beck run` checks before it makes anything, on disk or on the brokers:
 * one mistaken command must be refused with a message, not corrupt a running app
 * (docs/cluster.md, Safety rails). */
#ifndef BK_PREFLIGHT_H
#define BK_PREFLIGHT_H

#include <stddef.h>

#include <librdkafka/rdkafka.h>

#include "base/conf.h"
#include "engine/plan.h"

/* The node's own settings: no setting that only a cluster node reads is given to a node on
 * its own, the endpoint and http_listen parse, and the state directory is a directory this
 * user can write (made when missing). 0, or -1 with errstr. */
int bk_preflight_local(const bk_conf_t *conf, char *errstr, size_t errstr_size);

/* The brokers answer: a metadata request through admin within timeout_ms, or an error that
 * names the bootstrap addresses. The dev broker's control port when they are one (> 0), 0
 * when not, -1 with errstr. */
int bk_preflight_brokers(rd_kafka_t *admin, const bk_conf_t *conf, int timeout_ms, char *errstr,
                         size_t errstr_size);

/* The app's control topic, when it exists, read to its end as `beck status` reads it:
 *   - a node on its own is refused while the app has live cluster members (they run its
 *     tasks; it would run them all beside them), or once the app's tasks were moved
 *     (repartitioned: only cluster nodes follow the generations);
 *   - a cluster node is refused while a live member holds its node id, unless replace_node:
 *     a member holds it when its heartbeats go on while this reads (a node killed a moment
 *     ago and started again is not refused: its old incarnation sends none).
 * 0, or -1 with errstr. */
int bk_preflight_members(const bk_plan_t *plan, const bk_conf_t *conf, rd_kafka_t *admin,
                         char *errstr, size_t errstr_size);

#endif
