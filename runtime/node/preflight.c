/* preflight.c - what `beck run` checks before it makes anything (preflight.h). */
#include "node/preflight.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/fs.h"
#include "base/log.h"
#include "cluster/member.h"
#include "devbroker/devctl.h"
#include "engine/kafka.h"
#include "node/node_queries.h"

#define READ_TIMEOUT_MS 30000 /* to read the control topic to its end */

int bk_preflight_local(const bk_conf_t *conf, char *errstr, size_t errstr_size)
{
    const char *dir = bk_conf_str(conf, BK_CONF_STATE_DIR);
    struct stat st;

    if (!bk_conf_int(conf, BK_CONF_CLUSTER)) {
        for (int k = 0; k < BK_CONF__COUNT; k++) {
            if (bk_conf_cluster_only(k) && bk_conf_source(conf, k) != BK_CONF_FROM_DEFAULT) {
                snprintf(errstr, errstr_size,
                         "%s=%s means something to a cluster node only, and this node runs on "
                         "its own: add --cluster 1 to make it a member of the app's cluster "
                         "(docs/cluster.md), or leave the setting out",
                         bk_conf_name(k), bk_conf_str(conf, k));
                return -1;
            }
        }
    }
    if (bk_node_queries_check(conf, errstr, errstr_size) != 0) {
        return -1;
    }
    if (bk_fs_mkdirs(dir) != 0) {
        snprintf(errstr, errstr_size, "cannot create state directory %s: %s", dir, strerror(errno));
        return -1;
    }
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        snprintf(errstr, errstr_size, "state_dir %s: not a directory", dir);
        return -1;
    }
    if (access(dir, W_OK | X_OK) != 0) {
        snprintf(errstr, errstr_size, "state_dir %s: this user cannot write it: %s", dir,
                 strerror(errno));
        return -1;
    }
    return 0;
}

int bk_preflight_brokers(rd_kafka_t *admin, const bk_conf_t *conf, int timeout_ms, char *errstr,
                         size_t errstr_size)
{
    char err[512];
    int port = bk_devctl_discover(admin, timeout_ms, err, sizeof(err));
    if (port < 0) {
        snprintf(errstr, errstr_size,
                 "no broker answered at %s (-b) within %d s: %s; check the address, that a "
                 "broker listens there, and the security settings (-X)",
                 bk_conf_str(conf, BK_CONF_BROKERS), timeout_ms / 1000, err);
        return -1;
    }
    return port;
}

/* The view read to the end of the log as it was when the observer started. */
static int read_to_end(bk_member_t *obs, bk_member_view_t *view, const char *topic, char *errstr,
                       size_t errstr_size)
{
    int64_t deadline = bk_clock_mono_ms() + READ_TIMEOUT_MS;
    for (;;) {
        struct timespec pause = {0, 20 * 1000 * 1000};
        bk_member_poll(obs, view);
        if (view->error) {
            snprintf(errstr, errstr_size, "%s: %s", topic, view->error);
            return -1;
        }
        if (view->caught_up) {
            return bk_member_poll_force(obs, view) < 0 ? -1 : 0;
        }
        if (bk_clock_mono_ms() > deadline) {
            snprintf(errstr, errstr_size,
                     "cannot read the app's control topic %s to its end within %d s, to see "
                     "which members are live",
                     topic, READ_TIMEOUT_MS / 1000);
            return -1;
        }
        nanosleep(&pause, NULL);
    }
}

/* "n1 (last heartbeat 0.4 s ago), n2 (...)" of the live peers, at most 8. */
static void live_list(const bk_member_view_t *v, char *out, size_t size)
{
    size_t len = 0;
    int n = 0;
    out[0] = '\0';
    for (int32_t i = 0; i < v->npeers; i++) {
        const bk_member_peer_t *p = &v->peers[i];
        if (p->state != BK_MEMBER_ALIVE) {
            continue;
        }
        if (++n > 8) {
            snprintf(out + len, size - len, ", ...");
            return;
        }
        len +=
            (size_t)snprintf(out + len, size - len, "%s%s (last heartbeat %.1f s ago)",
                             n > 1 ? ", " : "", p->id, (double)(v->log_time - p->last_ts) / 1000.0);
        if (len >= size) {
            return;
        }
    }
}

/* A live member holding node_id: whether its heartbeats go on. It is watched for a little
 * more than three of this app's heartbeat intervals: one that sends two more meanwhile is
 * live. (One is not enough: a process killed a moment ago may have had a heartbeat on its
 * way, which a busy broker appends after this started reading.) */
static int id_held(bk_member_t *obs, bk_member_view_t *view, const char *node_id, int hb_ms,
                   uint64_t *inc)
{
    int64_t seen = INT64_MIN, first = INT64_MIN, until = bk_clock_mono_ms() + 3 * hb_ms + 500;
    for (;;) {
        int32_t at = -1;
        struct timespec pause = {0, 50 * 1000 * 1000};
        for (int32_t i = 0; i < view->npeers && at < 0; i++) {
            if (view->peers[i].state == BK_MEMBER_ALIVE &&
                strcmp(view->peers[i].id, node_id) == 0) {
                at = i;
            }
        }
        if (at < 0) {
            return 0; /* ended meanwhile (left, or its session ran out) */
        }
        if (seen != INT64_MIN && view->peers[at].last_ts > seen) {
            if (first != INT64_MIN && view->peers[at].last_ts > first) {
                *inc = view->peers[at].incarnation;
                return 1;
            }
            first = view->peers[at].last_ts;
        }
        if (seen == INT64_MIN) {
            seen = view->peers[at].last_ts;
        }
        if (bk_clock_mono_ms() > until) {
            bk_log_info("node id %s: its incarnation %" PRIu64 " in the log has sent no "
                        "heartbeat for %d ms: taking its place",
                        node_id, view->peers[at].incarnation, 3 * hb_ms + 500);
            return 0;
        }
        nanosleep(&pause, NULL);
        if (bk_member_poll_force(obs, view) < 0) {
            return 0;
        }
    }
}

int bk_preflight_members(const bk_plan_t *plan, const bk_conf_t *conf, rd_kafka_t *admin,
                         char *errstr, size_t errstr_size)
{
    const char *node_id = bk_conf_str(conf, BK_CONF_NODE_ID);
    int cluster = (int)bk_conf_int(conf, BK_CONF_CLUSTER);
    bk_member_view_t view;
    bk_member_conf_t mc;
    bk_member_t *obs = NULL;
    char topic[300], list[1024];
    uint64_t inc = 0;
    int rc = -1, exists;

    if (cluster && bk_conf_int(conf, BK_CONF_REPLACE_NODE)) {
        return 0; /* it takes the id over, whoever holds it */
    }
    snprintf(topic, sizeof(topic), "%s-control", plan->id);
    exists = bk_kafka_topic_exists(admin, topic, 10000);
    if (exists < 0) {
        snprintf(errstr, errstr_size, "cannot read the brokers' topics in 10 s");
        return -1;
    }
    if (exists == 0) {
        return 0; /* no cluster ever ran: nothing to collide with */
    }
    memset(&view, 0, sizeof(view));
    memset(&mc, 0, sizeof(mc));
    mc.conf = conf;
    mc.app_id = plan->id;
    mc.node_id = "preflight";
    mc.observe = 1;
    obs = bk_member_new(&mc, errstr, errstr_size);
    if (!obs || bk_member_start(obs, errstr, errstr_size) != 0 ||
        read_to_end(obs, &view, topic, errstr, errstr_size) != 0) {
        goto done;
    }
    live_list(&view, list, sizeof(list));
    if (!cluster && list[0]) {
        /* refused: the refusal names every live member, so the log is read a heartbeat
         * interval longer (a checkpoint near the end may not show them all: a loaded run
         * of spec 45 named one of two) */
        int64_t until = bk_clock_mono_ms() + bk_conf_int(conf, BK_CONF_HEARTBEAT_MS) + 500;
        while (bk_clock_mono_ms() < until && bk_member_poll_force(obs, &view) >= 0) {
            struct timespec pause = {0, 50 * 1000 * 1000};
            nanosleep(&pause, NULL);
        }
        live_list(&view, list, sizeof(list));
    }
    if (!cluster && list[0]) {
        snprintf(errstr, errstr_size,
                 "app %s has live cluster members (%s), which share its tasks through %s: a "
                 "node on its own would run every task beside them and corrupt their state. "
                 "Start it with --cluster 1 to join them, or stop them first",
                 plan->id, list, topic);
        goto done;
    }
    if (!cluster && view.generations[0]) {
        snprintf(errstr, errstr_size,
                 "app %s was repartitioned (moves %s, in %s): only cluster nodes follow its "
                 "generations, and a node on its own would run the layout before them from "
                 "changelogs that moved on. Start it with --cluster 1",
                 plan->id, view.generations, topic);
        goto done;
    }
    if (cluster &&
        id_held(obs, &view, node_id, (int)bk_conf_int(conf, BK_CONF_HEARTBEAT_MS), &inc)) {
        snprintf(errstr, errstr_size,
                 "node id %s is held by a live member of app %s (incarnation %" PRIu64
                 ", heartbeating in %s): a second process with its id would end it. Give this "
                 "node another --node-id, stop the other first, or start with --replace-node "
                 "to take its place (it is ended, and fenced under exactly-once)",
                 node_id, plan->id, inc, topic);
        goto done;
    }
    rc = 0;

done:
    if (obs) {
        bk_member_stop(obs, 0);
        bk_member_destroy(obs);
    }
    bk_member_view_clear(&view);
    return rc;
}
