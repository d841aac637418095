/* cmd_bootstrap.c - `beck bootstrap` (cmd_bootstrap.h). */
#include "cmd/cmd_bootstrap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <librdkafka/rdkafka.h>

#include "base/conf.h"
#include "cmd/cmd_opts.h"
#include "base/task.h"
#include "cluster/member.h"
#include "engine/kafka.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: beck bootstrap -b BROKERS --app ID --task S_P [--node NODE] [-X k=v]...\n\n"
            "Asks the running app ID to rebuild the standby replica of task S_P (e.g. 0_3) by\n"
            "cold bootstrap: the node keeping it fetches a snapshot of the active's RocksDB\n"
            "over SSH instead of replaying the changelog (docs/bootstrap.md). With --node,\n"
            "only that node's replica; else every node keeping one. The request is a note on\n"
            "<ID>-control; the nodes log what they do with it (\"bootstrap S_P: asked by\").\n"
            "Nodes without ssh_key refuse it in their log. Exits 1 when the note cannot be\n"
            "written.\n");
}

static int valid_task(const char *t)
{
    bk_task_id_t id;
    return bk_task_parse(t, &id) == 0;
}

int bk_cmd_bootstrap_main(int argc, char **argv)
{
    bk_conf_t *conf = bk_conf_new();
    const char *app = NULL, *task = NULL, *node = NULL;
    char err[512], topic[300], text[128], from[64];
    uint8_t *buf = NULL;
    size_t len = 0;
    rd_kafka_t *rk = NULL;
    int rc = 1;

    {
        const bk_cmd_opt_t opts[] = {
            {NULL, BK_OPT_KAFKA, NULL, 0, 0},
            {"--app", BK_OPT_STR, &app, 0, 0},
            {"--task", BK_OPT_STR, &task, 0, 0},
            {"--node", BK_OPT_STR, &node, 0, 0},
        };
        bk_cmd_args_t args = {"bootstrap", opts, 4, conf, NULL, 0, 0};
        int parsed = bk_cmd_opts_parse(&args, argc, argv);
        if (parsed == 1) {
            usage(stdout);
            rc = 0;
        }
        if (parsed != 0) {
            goto done;
        }
    }
    if (!bk_conf_str(conf, BK_CONF_BROKERS) || !app || !task) {
        fprintf(stderr, "beck bootstrap: -b, --app and --task are needed (see --help)\n");
        goto done;
    }
    if (!valid_task(task)) {
        fprintf(stderr, "beck bootstrap: --task %s: a task is SUBTOPOLOGY_PARTITION, e.g. 0_3\n",
                task);
        goto done;
    }
    snprintf(topic, sizeof(topic), "%s-control", app);
    snprintf(text, sizeof(text), "task=%s", task);
    snprintf(from, sizeof(from), "beck-bootstrap-%d", (int)getpid());
    if (bk_member_note_encode(from, node, "bootstrap", text, &buf, &len) != 0) {
        fprintf(stderr, "beck bootstrap: --node or --task too long\n");
        goto done;
    }
    rk = bk_kafka_new(conf, BK_KAFKA_PRODUCER, "beck-bootstrap", NULL, NULL, err, sizeof(err));
    if (!rk) {
        fprintf(stderr, "beck bootstrap: %s\n", err);
        goto done;
    }
    if (rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_PARTITION(0),
                          RD_KAFKA_V_KEY("n/beck-bootstrap", 16), RD_KAFKA_V_VALUE(buf, len),
                          RD_KAFKA_V_END) != 0 ||
        rd_kafka_flush(rk, 10000) != 0 || rd_kafka_outq_len(rk) > 0) {
        fprintf(stderr, "beck bootstrap: could not write to %s in 10 s\n", topic);
        goto done;
    }
    printf("asked %s of app %s to rebuild task %s by cold bootstrap (see the nodes' logs)\n",
           node ? node : "every node", app, task);
    rc = 0;

done:
    if (rk) {
        rd_kafka_destroy(rk);
    }
    free(buf);
    bk_conf_destroy(conf);
    return rc;
}
