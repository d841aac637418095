/* cmd_run.c - `beck run`: arguments, the topology and hooks, the embedded dev broker, the
 * app's topics; then the node runs (node/node.h). */
#include "cmd/cmd_run.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/conf.h"
#include "base/events.h"
#include "base/log.h"
#include "cmd/cmd_opts.h"
#include "devbroker/broker.h"
#include "engine/db.h"
#include "engine/hooks.h"
#include "engine/kafka.h"
#include "engine/plan.h"
#include "engine/topics.h"
#include "engine/vm.h"
#include "node/node.h"
#include "node/preflight.h"
#include "replica/archive_dest.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: beck run TOPOLOGY.lua [-b BROKERS] [-X key=value]... [-F file.properties]\n"
            "                [--state-dir DIR] [--threads N] [--node-id ID] [--rack RACK]\n"
            "                [--cluster 1 [--replace-node]] [--SETTING VALUE]...\n\n"
            "Runs the topology TOPOLOGY.lua as one node of its app. Without -b, hosts an\n"
            "embedded dev broker and prints its bootstrap address.\n\n"
            "  -b BROKERS          bootstrap brokers (host:port,...)\n"
            "  -X key=value        librdkafka setting, passed through (repeatable)\n"
            "  -F FILE             librdkafka settings from a properties file\n"
            "  --replace-node      take over this node id from a live member (it is ended)\n"
            "  -h, --help          this help\n\n");
    bk_conf_print_help(out);
}

/* -1: error (message printed), 0: ok, 1: help printed. */
static int parse_args(int argc, char **argv, bk_conf_t *conf, const char **path)
{
    char err[512];
    int replace = 0, rc;
    const bk_cmd_opt_t opts[] = {
        {NULL, BK_OPT_KAFKA, NULL, 0, 0},
        {NULL, BK_OPT_SETTINGS, NULL, 0, 0},
        {"--replace-node", BK_OPT_FLAG, &replace, 0, 0},
    };
    bk_cmd_args_t args = {"run", opts, 3, conf, path, 1, 0};
    rc = bk_cmd_opts_parse(&args, argc, argv);
    if (rc == 1) {
        usage(stdout);
    }
    if (rc != 0) {
        return rc;
    }
    if (replace) { /* a flag: its value is 1 */
        bk_conf_set(conf, BK_CONF_REPLACE_NODE, "1", BK_CONF_FROM_CLI, err, sizeof(err));
    }
    if (!*path) {
        usage(stderr);
        return -1;
    }
    return 0;
}

/* SIGINT and SIGTERM wait (blocked, in every thread started from here on) until the node
 * takes them (bk_node_run): one that comes while the node starts (its checks, its topics)
 * ends it cleanly before any task opens, not by the signal's default action mid-way (exit
 * 143, which a stop right after a restart saw in spec/04-long/04-exactly_once). */
static void stops_wait(void)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
}

static int stop_asked(void)
{
    sigset_t pending;
    return sigpending(&pending) == 0 &&
           (sigismember(&pending, SIGINT) == 1 || sigismember(&pending, SIGTERM) == 1);
}

int bk_cmd_run_main(int argc, char **argv)
{
    bk_conf_t *conf = bk_conf_new();
    const char *path = NULL;
    lua_State *L = NULL;
    bk_plan_t *plan = NULL;
    bk_broker_t *broker = NULL;
    bk_hooks_t *hooks = NULL;
    rd_kafka_t *admin = NULL;
    char err[2048], dlq[300];
    int rc = 2, dev_port = 0;

    stops_wait();

    switch (parse_args(argc, argv, conf, &path)) {
    case 1:
        rc = 0;
        goto done;
    case -1:
        goto done;
    }
    bk_log_set_level((bk_log_level_t)bk_log_parse_level(bk_conf_str(conf, BK_CONF_LOG_LEVEL)));
    rc = 1;
    L = bk_vm_new();
    plan = bk_plan_load(L, path, conf, err, sizeof(err));
    if (!plan) {
        fprintf(stderr, "beck run: cannot load topology: %s\n", err);
        goto done;
    }
    bk_log_set_level((bk_log_level_t)bk_log_parse_level(bk_conf_str(conf, BK_CONF_LOG_LEVEL)));
    /* the node's hooks (on_assign, ...) in a VM of their own; a bad hooks file fails here,
     * before any Kafka client */
    hooks = bk_hooks_new(path, bk_conf_str(conf, BK_CONF_HOOKS), err, sizeof(err));
    if (!hooks) {
        fprintf(stderr, "beck run: cannot load hooks: %s\n", err);
        goto done;
    }
    /* --id overrides the topology's id; otherwise the id is the app's. */
    if (bk_conf_source(conf, BK_CONF_APP_ID) == BK_CONF_FROM_CLI) {
        free(plan->id);
        plan->id = strdup(bk_conf_str(conf, BK_CONF_APP_ID));
    }
    bk_conf_set(conf, BK_CONF_APP_ID, plan->id, BK_CONF_FROM_TOPOLOGY, err, sizeof(err));
    if (!bk_conf_str(conf, BK_CONF_NODE_ID)) {
        char host[200], id[256];
        if (gethostname(host, sizeof(host)) != 0) {
            snprintf(host, sizeof(host), "node");
        }
        host[sizeof(host) - 1] = '\0';
        snprintf(id, sizeof(id), "%s-%d", host, (int)getpid());
        bk_conf_set(conf, BK_CONF_NODE_ID, id, BK_CONF_FROM_DEFAULT, err, sizeof(err));
    }
    /* the node's events (docs/events.md): in memory for /v1/events, and in a file when set */
    if (bk_events_open(bk_conf_str(conf, BK_CONF_EVENTS), bk_conf_str(conf, BK_CONF_NODE_ID), err,
                       sizeof(err)) != 0) {
        fprintf(stderr, "beck run: %s\n", err);
        goto done;
    }
    /* A bounded changelog forgets what no replica may hold: only an archive snapshot newer
     * than its head makes that safe, so one must be made at least twice per retention. */
    {
        int64_t keep = bk_conf_int(conf, BK_CONF_CHANGELOG_RETENTION_MS);
        int64_t every = bk_conf_int(conf, BK_CONF_SNAPSHOT_ARCHIVE_INTERVAL_MS);
        if (keep > 0 && !bk_conf_str(conf, BK_CONF_SNAPSHOT_ARCHIVE)) {
            fprintf(stderr,
                    "beck run: changelog_retention_ms=%lld needs snapshot_archive: a "
                    "changelog that deletes its head loses state once no replica "
                    "holds it, unless an archived snapshot covers it (docs/state.md)\n",
                    (long long)keep);
            goto done;
        }
        if (bk_conf_str(conf, BK_CONF_SNAPSHOT_ARCHIVE)) {
            /* a malformed sftp:// or one without ssh_key: said now, not at the first copy */
            bk_archive_dest_t *d = bk_archive_dest_open(bk_conf_str(conf, BK_CONF_SNAPSHOT_ARCHIVE),
                                                        conf, err, sizeof(err));
            if (!d) {
                fprintf(stderr, "beck run: %s\n", err);
                goto done;
            }
            bk_archive_dest_close(d);
        }
        if (keep > 0 && keep < 2 * every) {
            fprintf(stderr,
                    "beck run: changelog_retention_ms=%lld is shorter than twice "
                    "snapshot_archive_interval_ms=%lld: the changelog could delete "
                    "records that no archived snapshot covers yet (docs/state.md)\n",
                    (long long)keep, (long long)every);
            goto done;
        }
    }
    /* what can be checked is, before anything is made on disk or on the brokers */
    if (bk_preflight_local(conf, err, sizeof(err)) != 0) {
        fprintf(stderr, "beck run: %s\n", err);
        goto done;
    }
    snprintf(dlq, sizeof(dlq), "%s-dlq", plan->id);
    bk_conf_set(conf, BK_CONF_DLQ_TOPIC, dlq, BK_CONF_FROM_TOPOLOGY, err, sizeof(err));

    if (!bk_conf_str(conf, BK_CONF_BROKERS)) {
        broker = bk_broker_new(1, NULL, err, sizeof(err));
        if (!broker) {
            fprintf(stderr, "beck run: cannot start the embedded dev broker: %s\n", err);
            goto done;
        }
        bk_conf_set(conf, BK_CONF_BROKERS, bk_broker_bootstrap(broker), BK_CONF_FROM_CLI, err,
                    sizeof(err));
        dev_port = bk_broker_control_port(broker);
        printf("dev broker: %s\n", bk_broker_bootstrap(broker));
        fflush(stdout);
    }
    admin = bk_kafka_new(conf, BK_KAFKA_ADMIN, "beck-admin", NULL, NULL, err, sizeof(err));
    if (!admin) {
        fprintf(stderr, "beck run: %s\n", err);
        goto done;
    }
    if (!broker && (dev_port = bk_preflight_brokers(admin, conf, 10000, err, sizeof(err))) < 0) {
        fprintf(stderr, "beck run: %s\n", err);
        goto done;
    }
    /* the one place the dev broker is selected, for every part of the process after */
    bk_kafka_set_dev_broker(dev_port > 0 ? dev_port : 0);
    if ((!broker && bk_preflight_members(plan, conf, admin, err, sizeof(err)) != 0) ||
        bk_topics_ensure(plan, conf, admin, err, sizeof(err)) != 0) {
        fprintf(stderr, "beck run: %s\n", err);
        goto done;
    }
    if (dev_port > 0 && bk_conf_exactly_once(conf)) {
        bk_log_warn("processing_guarantee=exactly_once on a dev broker: it accepts transactions "
                    "but neither aborts nor fences them, nor commits offsets in them (they are "
                    "committed after each transaction), so exactly-once cannot be verified here");
    }
    rd_kafka_destroy(admin);
    admin = NULL;
    bk_db_set_cache_bytes((size_t)bk_conf_int(conf, BK_CONF_BLOCK_CACHE_BYTES));
    bk_db_set_write_buffer_bytes((size_t)bk_conf_int(conf, BK_CONF_WRITE_BUFFER_BYTES));
    if (stop_asked()) {
        bk_log_info("a stop was asked while the node started: no task opened, nothing to "
                    "commit");
        rc = 0;
        goto done;
    }
    rc = bk_node_run(plan, conf, hooks, L);

done:
    if (admin) {
        rd_kafka_destroy(admin);
    }
    bk_hooks_destroy(hooks);
    bk_plan_destroy(plan);
    bk_vm_destroy(L);
    bk_broker_destroy(broker);
    bk_conf_destroy(conf);
    bk_events_close();
    return rc;
}
