/* node.c - `beck run`: argument parsing, topics, tasks, threads, signals. */
#include "node.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "broker.h"
#include "conf.h"
#include "devctl.h"
#include "kafka.h"
#include "log.h"
#include "vm.h"
#include "plan.h"
#include "thread.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: beck run TOPOLOGY.lua [-b BROKERS] [-X key=value]... [-F file.properties]\n"
            "                [--state-dir DIR] [--threads N] [--node-id ID] [--rack RACK]\n"
            "                [--SETTING VALUE]...\n\n"
            "Runs the topology TOPOLOGY.lua as one node of its app. Without -b, hosts an\n"
            "embedded dev broker and prints its bootstrap address.\n\n"
            "  -b BROKERS          bootstrap brokers (host:port,...)\n"
            "  -X key=value        librdkafka setting, passed through (repeatable)\n"
            "  -F FILE             librdkafka settings from a properties file\n"
            "  -h, --help          this help\n\n");
    bk_conf_print_help(out);
}

/* -1: error (message printed), 0: ok, 1: help printed. */
static int parse_args(int argc, char **argv, bk_conf_t *conf, const char **path)
{
    char err[512];
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            return 1;
        }
        if (strcmp(a, "-b") == 0 || strcmp(a, "-X") == 0 || strcmp(a, "-F") == 0) {
            int rc = 0;
            if (i + 1 >= argc) {
                fprintf(stderr, "beck run: %s needs a value\n", a);
                return -1;
            }
            if (a[1] == 'b') {
                rc = bk_conf_set(conf, BK_CONF_BROKERS, argv[++i], BK_CONF_FROM_CLI, err,
                                 sizeof(err));
            } else if (a[1] == 'X') {
                rc = bk_conf_add_kafka_kv(conf, argv[++i], err, sizeof(err));
            } else {
                rc = bk_conf_add_kafka_file(conf, argv[++i], err, sizeof(err));
            }
            if (rc != 0) {
                fprintf(stderr, "beck run: %s\n", err);
                return -1;
            }
        } else if (strncmp(a, "--", 2) == 0) {
            char name[64];
            const char *eq = strchr(a, '='), *value;
            int key;
            snprintf(name, sizeof(name), "%.*s", eq ? (int)(eq - a - 2) : (int)strlen(a + 2),
                     a + 2);
            key = bk_conf_lookup(name);
            if (key < 0) {
                fprintf(stderr, "beck run: unknown option %s (see beck run --help)\n", a);
                return -1;
            }
            if (eq) {
                value = eq + 1;
            } else if (i + 1 < argc) {
                value = argv[++i];
            } else {
                fprintf(stderr, "beck run: %s needs a value\n", a);
                return -1;
            }
            if (bk_conf_set(conf, key, value, BK_CONF_FROM_CLI, err, sizeof(err)) != 0) {
                fprintf(stderr, "beck run: %s\n", err);
                return -1;
            }
        } else if (a[0] == '-') {
            fprintf(stderr, "beck run: unknown option %s (see beck run --help)\n", a);
            return -1;
        } else if (*path) {
            fprintf(stderr, "beck run: one topology only (got %s and %s)\n", *path, a);
            return -1;
        } else {
            *path = a;
        }
    }
    if (!*path) {
        usage(stderr);
        return -1;
    }
    return 0;
}

/* -- Topics ------------------------------------------------------------- */

static int read_counts(rd_kafka_t *rk, const char **names, int n, int *counts, char *err,
                       size_t errsz)
{
    return bk_kafka_partitions(rk, names, n, counts, 10000, err, errsz);
}

/* A changelog has one partition per task of its store's subtopology; an
 * existing one with fewer could not hold every task's records. */
static int ensure_changelogs(const bk_plan_t *plan, rd_kafka_t *rk, int dev_port, int rf,
                             char *err, size_t errsz)
{
    for (int s = 0; s < plan->nstores; s++) {
        const bk_plan_store_t *st = &plan->stores[s];
        int want = plan->subs[st->sub].partitions, have = 0;
        if (!st->logged) {
            continue;
        }
        if (read_counts(rk, (const char **)&st->changelog, 1, &have, err, errsz) != 0) {
            return -1;
        }
        if (have == 0) {
            if (bk_kafka_create_topic(rk, dev_port, st->changelog, want, rf, 1, err, errsz) != 0) {
                snprintf(err + strlen(err), errsz - strlen(err),
                         " (the changelog of store %s)", st->name);
                return -1;
            }
            for (int tries = 0; tries < 100 && have == 0; tries++) {
                if (read_counts(rk, (const char **)&st->changelog, 1, &have, err, errsz) != 0) {
                    return -1;
                }
                if (have == 0) {
                    usleep(100 * 1000);
                }
            }
        }
        if (have < want) {
            snprintf(err, errsz, "changelog %s of store %s has %d partitions, the store's tasks "
                     "need %d", st->changelog, st->name, have, want);
            return -1;
        }
    }
    return 0;
}

/* Finds every topic's partition count, creating what the app may create:
 * sinks and the dead-letter topic always, sources only on a dev broker (on a
 * real cluster the input is someone else's to create). */
static int ensure_topics(bk_plan_t *plan, const bk_conf_t *conf, rd_kafka_t *rk, int dev_port,
                         char *err, size_t errsz)
{
    int n = plan->ntopics + 1, rc = -1, maxp = 0, created = 0;
    const char **names = calloc((size_t)n, sizeof(char *));
    int *counts = calloc((size_t)n, sizeof(int));
    const char *dlq = strcmp(bk_conf_str(conf, BK_CONF_ON_ERROR), "dlq") == 0
                          ? bk_conf_str(conf, BK_CONF_DLQ_TOPIC)
                          : NULL;
    int defp = (int)bk_conf_int(conf, BK_CONF_PARTITIONS);
    int rf = (int)bk_conf_int(conf, BK_CONF_REPLICATION_FACTOR);

    for (int i = 0; i < plan->ntopics; i++) {
        names[i] = plan->topics[i].name;
    }
    names[plan->ntopics] = dlq;
    if (!dlq) {
        n--;
    }
    if (read_counts(rk, names, n, counts, err, errsz) != 0) {
        goto done;
    }
    for (int i = 0; i < plan->ntopics; i++) {
        if (!plan->topics[i].source || plan->topics[i].internal || counts[i] > 0) {
            continue;
        }
        if (dev_port <= 0) {
            snprintf(err, errsz, "source topic %s does not exist", names[i]);
            goto done;
        }
        if (bk_kafka_create_topic(rk, dev_port, names[i], defp, rf, 0, err, errsz) != 0) {
            goto done;
        }
        counts[i] = defp;
        created = 1;
    }
    for (int i = 0; i < plan->ntopics; i++) {
        if (plan->topics[i].source && !plan->topics[i].internal && counts[i] > maxp) {
            maxp = counts[i];
        }
    }
    /* Outputs get the input's width unless the user set `partitions`. */
    if (bk_conf_source(conf, BK_CONF_PARTITIONS) == BK_CONF_FROM_DEFAULT && maxp > 0) {
        defp = maxp;
    }
    for (int i = 0; i < n; i++) {
        int want = i < plan->ntopics && plan->topics[i].want > 0 ? plan->topics[i].want : defp;
        /* An internal topic read beside external ones (a join after a
         * repartition) must be as wide as they are: tasks pair partitions. */
        if (i < plan->ntopics && plan->topics[i].internal && plan->topics[i].want <= 0) {
            const bk_plan_sub_t *sub = &plan->subs[plan->topics[i].sub];
            for (int j = 0; j < sub->ntopics; j++) {
                const bk_plan_topic_t *o = &plan->topics[sub->topics[j]];
                if (!o->internal && counts[sub->topics[j]] > 0) {
                    want = counts[sub->topics[j]];
                }
            }
        }
        if (counts[i] > 0) {
            continue;
        }
        if (bk_kafka_create_topic(rk, dev_port, names[i], want, rf, 0, err, errsz) != 0) {
            goto done;
        }
        created = 1;
    }
    /* Wait until metadata shows what was created. */
    for (int tries = 0; created && tries < 100; tries++) {
        int missing = 0;
        if (read_counts(rk, names, n, counts, err, errsz) != 0) {
            goto done;
        }
        for (int i = 0; i < n; i++) {
            missing += counts[i] == 0;
        }
        if (!missing) {
            break;
        }
        usleep(100 * 1000);
    }
    for (int i = 0; i < plan->ntopics; i++) {
        if (counts[i] == 0) {
            snprintf(err, errsz, "topic %s did not appear in the cluster's metadata", names[i]);
            goto done;
        }
        plan->topics[i].partitions = counts[i];
    }
    for (int s = 0; s < plan->nsubs; s++) {
        bk_plan_sub_t *sub = &plan->subs[s];
        sub->partitions = plan->topics[sub->topics[0]].partitions;
        for (int j = 1; j < sub->ntopics; j++) {
            const bk_plan_topic_t *a = &plan->topics[sub->topics[0]];
            const bk_plan_topic_t *b = &plan->topics[sub->topics[j]];
            if (a->partitions != b->partitions) {
                snprintf(err, errsz,
                         "topics %s (%d partitions) and %s (%d) feed one subtopology, so they "
                         "must have as many partitions",
                         a->name, a->partitions, b->name, b->partitions);
                goto done;
            }
        }
    }
    if (ensure_changelogs(plan, rk, dev_port, rf, err, errsz) != 0) {
        goto done;
    }
    rc = 0;
done:
    free(names);
    free(counts);
    return rc;
}

/* -- Running ------------------------------------------------------------ */

static int run_threads(bk_plan_t *plan, const bk_conf_t *conf)
{
    bk_node_flags_t flags = {0, 0};
    int nthreads = (int)bk_conf_int(conf, BK_CONF_THREADS), ntasks = 0, signals = 0;
    bk_thread_t **threads;
    bk_task_id_t *tasks, *mine;
    sigset_t set;
    struct timespec tick = {0, 100 * 1000 * 1000};
    bk_thread_stats_t total = {0, 0, 0, 0, 0};

    for (int s = 0; s < plan->nsubs; s++) {
        ntasks += plan->subs[s].partitions;
    }
    tasks = calloc((size_t)ntasks, sizeof(*tasks));
    mine = calloc((size_t)ntasks, sizeof(*mine));
    ntasks = 0;
    for (int s = 0; s < plan->nsubs; s++) {
        for (int p = 0; p < plan->subs[s].partitions; p++) {
            tasks[ntasks++] = (bk_task_id_t){s, p};
        }
    }
    if (nthreads > ntasks) {
        bk_log_warn("%d threads for %d tasks: running %d threads", nthreads, ntasks, ntasks);
        nthreads = ntasks;
    }
    /* Signals go to this thread only (sigtimedwait below). */
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL);

    threads = calloc((size_t)nthreads, sizeof(*threads));
    for (int t = 0; t < nthreads; t++) {
        int n = 0;
        /* Round-robin, so each thread gets tasks of every subtopology. */
        for (int i = t; i < ntasks; i += nthreads) {
            mine[n++] = tasks[i];
        }
        threads[t] = bk_thread_new(t, plan, conf, &flags, mine, n);
        if (bk_thread_start(threads[t]) != 0) {
            bk_log_error("cannot start thread %d", t);
            flags.stop = flags.failed = 1;
            nthreads = t;
            bk_thread_destroy(threads[t]);
            break;
        }
    }
    bk_log_info("app %s: %d task(s) on %d thread(s)", plan->id, ntasks, nthreads);
    for (;;) {
        int done = 0, sig = sigtimedwait(&set, NULL, &tick);
        if (sig > 0) {
            if (++signals > 1) {
                bk_log_error("second signal: aborting without commit");
                _exit(130);
            }
            bk_log_info("signal %d: finishing records in hand, committing, closing", sig);
            flags.stop = 1;
        }
        for (int t = 0; t < nthreads; t++) {
            done += bk_thread_done(threads[t]);
        }
        if (done == nthreads) {
            break;
        }
        if (done > 0 && !flags.stop) {
            flags.stop = 1; /* a thread ended by itself: stop the node */
        }
    }
    for (int t = 0; t < nthreads; t++) {
        bk_thread_stats_t st;
        bk_thread_join(threads[t], &st);
        total.in += st.in;
        total.out += st.out;
        total.skipped += st.skipped;
        total.dlq += st.dlq;
        bk_thread_destroy(threads[t]);
    }
    bk_log_info("app %s stopped%s: %llu in, %llu out, %llu skipped, %llu dead-lettered", plan->id,
                flags.failed ? " after a failure" : "", (unsigned long long)total.in,
                (unsigned long long)total.out, (unsigned long long)total.skipped,
                (unsigned long long)total.dlq);
    free(threads);
    free(tasks);
    free(mine);
    return flags.failed ? 1 : 0;
}

int bk_node_main(int argc, char **argv)
{
    bk_conf_t *conf = bk_conf_new();
    const char *path = NULL;
    lua_State *L = NULL;
    bk_plan_t *plan = NULL;
    bk_broker_t *broker = NULL;
    rd_kafka_t *admin = NULL;
    char err[2048], dlq[300];
    int rc = 2, dev_port = 0;

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
    if (bk_conf_str(conf, BK_CONF_HOOKS)) {
        /* the hooks file fails here, before any Kafka client, if it is bad */
        int rc2;
        lua_State *H = bk_vm_new();
        rc2 = bk_vm_dofile(H, path, 1, err, sizeof(err));
        if (rc2 == 0) {
            rc2 = bk_vm_load_hooks(H, lua_gettop(H), bk_conf_str(conf, BK_CONF_HOOKS), err,
                                   sizeof(err));
        }
        bk_vm_destroy(H);
        if (rc2 != 0) {
            fprintf(stderr, "beck run: cannot load hooks: %s\n", err);
            goto done;
        }
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
    if (!broker && (dev_port = bk_devctl_discover(admin, 10000, err, sizeof(err))) < 0) {
        fprintf(stderr, "beck run: %s\n", err);
        goto done;
    }
    if (ensure_topics(plan, conf, admin, dev_port, err, sizeof(err)) != 0) {
        fprintf(stderr, "beck run: %s\n", err);
        goto done;
    }
    rd_kafka_destroy(admin);
    admin = NULL;
    rc = run_threads(plan, conf);

done:
    if (admin) {
        rd_kafka_destroy(admin);
    }
    bk_plan_destroy(plan);
    bk_vm_destroy(L);
    bk_broker_destroy(broker);
    bk_conf_destroy(conf);
    return rc;
}
