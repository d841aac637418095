/* cmd_repartition.c - `beck repartition` (cmd_repartition.h). */
#include "cmd/cmd_repartition.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <librdkafka/rdkafka.h>

#include "base/clock.h"
#include "base/conf.h"
#include "cluster/member.h"
#include "engine/kafka.h"
#include "node/node_moves.h"
#include "cmd/cmd_opts.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: beck repartition -b BROKERS --app ID --subtopology S --partitions N\n"
            "                        [--timeout-ms MS] [-X k=v]...\n\n"
            "Asks the running app ID to move subtopology S to N tasks while it runs\n"
            "(docs/repartitioning.md); N is 1 to 4096, more or fewer than now. A subtopology\n"
            "that reads its input by input partition moves to key groups (N may equal its\n"
            "partition count). The request is a note on\n"
            "<ID>-control; the app's leader checks it and writes the move there, which this\n"
            "command waits for (--timeout-ms, default 30000). Exits 0 once the move is on the\n"
            "control topic, 1 when the leader did not take it in time (its log says why).\n");
}

/* Reads the control topic to its end with an observer; 0, or -1 (message printed). */
static int catch_up(bk_member_t *m, bk_member_view_t *view, int64_t deadline, const char *topic)
{
    for (;;) {
        struct timespec pause = {0, 20 * 1000 * 1000};
        bk_member_poll(m, view);
        if (view->error) {
            fprintf(stderr, "beck repartition: %s: %s\n", topic, view->error);
            return -1;
        }
        if (view->caught_up) {
            return 0;
        }
        if (bk_clock_mono_ms() > deadline) {
            fprintf(stderr, "beck repartition: cannot read %s to its end in time\n", topic);
            return -1;
        }
        nanosleep(&pause, NULL);
    }
}

/* 1 if the list of moves `gens` ends with "S=N" after `before` entries. */
static int has_move(const bk_member_view_t *v, int32_t before, long sub, long tasks)
{
    char want[64];
    size_t n, len = strlen(v->generations);
    if (v->ngenerations <= before) {
        return 0;
    }
    n = (size_t)snprintf(want, sizeof(want), "%ld=%ld", sub, tasks);
    return len >= n && strcmp(v->generations + len - n, want) == 0 &&
           (len == n || v->generations[len - n - 1] == ',');
}

int bk_cmd_repartition_main(int argc, char **argv)
{
    bk_conf_t *conf = bk_conf_new();
    const char *app = NULL;
    long sub = -1, tasks = -1, timeout_ms = 30000;
    char err[512], topic[300], text[128], from[64];
    uint8_t *buf = NULL;
    size_t len = 0;
    rd_kafka_t *rk = NULL;
    bk_member_t *member = NULL;
    bk_member_view_t view;
    bk_member_conf_t mc;
    int64_t deadline;
    int32_t before;
    int rc = 1;

    memset(&view, 0, sizeof(view));
    {
        const bk_cmd_opt_t opts[] = {
            {NULL, BK_OPT_KAFKA, NULL, 0, 0},
            {"--app", BK_OPT_STR, &app, 0, 0},
            {"--subtopology", BK_OPT_INT, &sub, 0, 1 << 20},
            {"--partitions", BK_OPT_INT, &tasks, 0, 1 << 20},
            {"--timeout-ms", BK_OPT_INT, &timeout_ms, 0, 24L * 3600 * 1000},
        };
        bk_cmd_args_t args = {"repartition", opts, 5, conf, NULL, 0, 0};
        int parsed = bk_cmd_opts_parse(&args, argc, argv);
        if (parsed == 1) {
            usage(stdout);
            rc = 0;
        }
        if (parsed != 0) {
            goto done;
        }
    }
    if (!bk_conf_str(conf, BK_CONF_BROKERS) || !app || sub < 0 || tasks < 0) {
        fprintf(stderr, "beck repartition: -b, --app, --subtopology and --partitions are needed "
                        "(see --help)\n");
        goto done;
    }
    if (tasks < 1 || tasks > 4096) {
        fprintf(stderr, "beck repartition: --partitions %ld: 1 to 4096 tasks can be run (one "
                        "key group each at most)\n",
                tasks);
        goto done;
    }
    snprintf(topic, sizeof(topic), "%s-control", app);
    deadline = bk_clock_mono_ms() + timeout_ms;

    /* the moves made so far, so that this one is recognised once the leader writes it */
    memset(&mc, 0, sizeof(mc));
    mc.conf = conf;
    mc.app_id = app;
    snprintf(from, sizeof(from), "beck-repartition-%d", (int)getpid());
    mc.node_id = from; /* the leader answers a refusal to it */
    mc.observe = 1;
    member = bk_member_new(&mc, err, sizeof(err));
    if (!member || bk_member_start(member, err, sizeof(err)) != 0) {
        fprintf(stderr, "beck repartition: app %s: %s\n", app, err);
        goto done;
    }
    if (catch_up(member, &view, deadline, topic) != 0) {
        goto done;
    }
    if (view.leader < 0) {
        fprintf(stderr, "beck repartition: app %s has no live leader (is it running with "
                        "--cluster?)\n",
                app);
        goto done;
    }
    before = view.ngenerations;

    snprintf(text, sizeof(text), "sub=%ld tasks=%ld", sub, tasks);
    if (bk_member_note_encode(from, NULL, BK_NODE_MOVES_NOTE, text, &buf, &len) != 0) {
        fprintf(stderr, "beck repartition: out of memory\n");
        goto done;
    }
    rk = bk_kafka_new(conf, BK_KAFKA_PRODUCER, "beck-repartition", NULL, NULL, err, sizeof(err));
    if (!rk) {
        fprintf(stderr, "beck repartition: %s\n", err);
        goto done;
    }
    if (rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_PARTITION(0),
                          RD_KAFKA_V_KEY("n/beck-repartition", 18), RD_KAFKA_V_VALUE(buf, len),
                          RD_KAFKA_V_END) != 0 ||
        rd_kafka_flush(rk, 10000) != 0 || rd_kafka_outq_len(rk) > 0) {
        fprintf(stderr, "beck repartition: could not write to %s in 10 s\n", topic);
        goto done;
    }
    for (;;) {
        struct timespec pause = {0, 50 * 1000 * 1000};
        bk_member_note_t note;
        if (bk_member_take_note(member, &note) && strcmp(note.kind, BK_NODE_MOVES_REFUSED) == 0) {
            fprintf(stderr, "beck repartition: the leader of app %s (%s) refused the move: %s\n",
                    app, note.from, note.text);
            break;
        }
        bk_member_poll(member, &view);
        if (has_move(&view, before, sub, tasks)) {
            printf("app %s: subtopology %ld moves to %ld tasks (move %d; moves so far: %s)\n",
                   app, sub, tasks, (int)view.ngenerations, view.generations);
            rc = 0;
            break;
        }
        if (view.error || bk_clock_mono_ms() > deadline) {
            fprintf(stderr,
                    "beck repartition: the leader of app %s did not take the move in %ld ms "
                    "(its log says why: \"repartition from %s\")\n",
                    app, timeout_ms, from);
            break;
        }
        nanosleep(&pause, NULL);
    }

done:
    if (member) {
        bk_member_stop(member, 0);
        bk_member_destroy(member);
    }
    bk_member_view_clear(&view);
    if (rk) {
        rd_kafka_destroy(rk);
    }
    free(buf);
    bk_conf_destroy(conf);
    return rc;
}
