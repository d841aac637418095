/* cmd_broker.c - `beck broker` (cmd_broker.h): hosts a dev broker (devbroker/broker.h) in
 * this process until a signal. */
#include "cmd/cmd_broker.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "devbroker/broker.h"
#include "cmd/cmd_opts.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: beck broker [--brokers N] [--racks a,b,c] [--topic NAME:PARTITIONS]...\n"
            "\n"
            "Runs a Kafka dev cluster (librdkafka's mock cluster) until SIGINT or SIGTERM.\n"
            "Prints the bootstrap address as the first line of stdout, then\n"
            "'control 127.0.0.1:PORT', the control channel (see docs/dev-broker.md).\n"
            "\n"
            "  --brokers N             number of brokers, ids 1..N (default 1, at most %d)\n"
            "  --racks a,b,c           racks assigned to the brokers round-robin\n"
            "  --topic NAME:PARTITIONS create a topic before printing the address;\n"
            "                          may be repeated\n"
            "  --help                  this text\n"
            "\n"
            "Not for production: limited retention (5 MiB or 100,000 batches per\n"
            "partition), no compaction, no CreateTopics, transactions not enforced.\n",
            BK_BROKER_MAX_BROKERS);
}

/* A --topic NAME:PARTITIONS option, checked before the cluster starts. */
typedef struct {
    char *name; /* malloc'd */
    int partitions;
} topic_spec_t;

/* Splits "NAME:PARTITIONS" at its last colon; 0, or -1 when malformed. */
static int parse_topic_spec(const char *arg, topic_spec_t *spec)
{
    const char *colon = strrchr(arg, ':');

    if (!colon ||
        bk_broker_parse_int(colon + 1, 1, BK_BROKER_MAX_PARTITIONS, &spec->partitions) != 0) {
        return -1;
    }
    spec->name = strndup(arg, (size_t)(colon - arg));
    if (!spec->name || !bk_broker_topic_valid(spec->name)) {
        free(spec->name);
        spec->name = NULL;
        return -1;
    }
    return 0;
}

/* argv[0] is the subcommand's name ("broker"); options start at argv[1]. */
int bk_cmd_broker_main(int argc, char **argv)
{
    char errstr[512];
    topic_spec_t *specs;
    int nspecs = 0;
    int brokers = 1;
    const char *racks = NULL;
    bk_broker_t *broker = NULL;
    sigset_t sigs, old_sigs;
    int sig = 0;
    int started = 0;
    int status = 2;

    specs = calloc((size_t)argc + 1, sizeof(*specs)); /* at most one --topic per argument */
    if (!specs) {
        bk_broker_log("out of memory");
        return 1;
    }

    {
        long nbrokers = 1;
        bk_cmd_list_t topics = {.n = 0};
        const bk_cmd_opt_t opts[] = {
            {"--brokers", BK_OPT_INT, &nbrokers, 1, BK_BROKER_MAX_BROKERS},
            {"--racks", BK_OPT_STR, &racks, 0, 0},
            {"--topic", BK_OPT_LIST, &topics, 0, 0},
        };
        bk_cmd_args_t args = {"broker", opts, 3, NULL, NULL, 0, 0};
        int parsed = bk_cmd_opts_parse(&args, argc, argv);
        if (parsed == 1) {
            usage(stdout);
            status = 0;
            goto done;
        }
        if (parsed != 0) {
            goto done;
        }
        brokers = (int)nbrokers;
        if (racks && !bk_broker_racks_valid(racks, errstr, sizeof(errstr))) {
            bk_broker_log("invalid --racks: %s", errstr);
            goto done;
        }
        /* Checked now, before anything starts, so that a typo is a usage error. */
        for (int i = 0; i < topics.n; i++) {
            if (parse_topic_spec(topics.v[i], &specs[nspecs]) != 0) {
                bk_broker_log("invalid --topic '%s': want NAME:PARTITIONS, NAME 1..%d characters "
                              "of [A-Za-z0-9._-], PARTITIONS 1..%d",
                              topics.v[i], BK_BROKER_TOPIC_MAX, BK_BROKER_MAX_PARTITIONS);
                goto done;
            }
            nspecs++;
        }
    }

    /* Block the signals before any thread starts so that every thread inherits
     * the mask and only sigwait() below receives them. */
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, &old_sigs);

    /* A signal during start-up is looked for between its steps, each of
     * which is short (ms), so that a stop never waits for the whole start. */
    status = 1;
    broker = bk_broker_new(brokers, racks, errstr, sizeof(errstr));
    if (!broker) {
        bk_broker_log("%s", errstr);
        goto restore;
    }
    for (int i = 0; i < nspecs; i++) {
        if ((sig = bk_broker_signalled(&sigs)) != 0) {
            goto stop;
        }
        if (bk_broker_create_topic_until(broker, specs[i].name, specs[i].partitions, &sigs, &sig,
                                         errstr, sizeof(errstr)) != 0) {
            if (sig) {
                goto stop;
            }
            bk_broker_log("--topic %s:%d: %s", specs[i].name, specs[i].partitions, errstr);
            goto restore;
        }
    }
    if ((sig = bk_broker_signalled(&sigs)) != 0) {
        goto stop; /* not printing an address that is about to go */
    }

    /* The first line is the whole contract for scripts: `read -r bootstrap`. */
    printf("%s\ncontrol 127.0.0.1:%d\n", bk_broker_bootstrap(broker),
           bk_broker_control_port(broker));
    if (fflush(stdout) != 0) {
        bk_broker_log("cannot write to stdout: %s", strerror(errno));
        goto restore;
    }
    bk_broker_log("%d broker(s) at %s, control port %d", brokers, bk_broker_bootstrap(broker),
                  bk_broker_control_port(broker));
    started = 1;

    while (sigwait(&sigs, &sig) != 0) {
    }
stop:
    bk_broker_log("stopping on %s%s", sig == SIGINT ? "SIGINT" : "SIGTERM",
                  started ? "" : " while starting");
    status = 0;

restore:
    bk_broker_destroy(broker);
    pthread_sigmask(SIG_SETMASK, &old_sigs, NULL);
done:
    for (int i = 0; i < nspecs; i++) {
        free(specs[i].name);
    }
    free(specs);
    return status;
}
