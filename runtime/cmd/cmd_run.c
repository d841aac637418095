/* cmd_run.c - `beck run`: argument parsing, topics, tasks, threads, signals. */
#include "cmd/cmd_run.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "replica/bootstrap.h"
#include "devbroker/broker.h"
#include "base/conf.h"
#include "devbroker/devctl.h"
#include "engine/kafka.h"
#include "base/log.h"
#include "engine/hooks.h"
#include "cluster/member.h"
#include "engine/vm.h"
#include "engine/plan.h"
#include "replica/standby.h"
#include "engine/taskdb.h"
#include "engine/thread.h"

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

/* A changelog made by someone else may delete what a replica needs: say so. A key-value
 * store's changelog without compaction loses keys not updated within its retention; a
 * changelog deleting by time or size loses state unless a snapshot covers it. */
static void warn_changelog_configs(rd_kafka_t *rk, const bk_plan_store_t *st)
{
    const char *names[] = {"cleanup.policy", "retention.ms", "retention.bytes"};
    char values[3][BK_KAFKA_CONFIG_MAX], err[256];
    if (bk_kafka_topic_configs(rk, st->changelog, names, 3, values, 10000, err, sizeof(err)) !=
        0) {
        bk_log_warn("cannot check the configs of changelog %s: %s", st->changelog, err);
        return;
    }
    if (!strstr(values[0], "compact")) {
        bk_log_warn("changelog %s of store %s has cleanup.policy=%s: a replica restoring it "
                    "misses every key not written within retention.ms=%s (beck creates "
                    "changelogs compact, docs/kafka.md)",
                    st->changelog, st->name, values[0], values[1]);
    } else if (strstr(values[0], "delete") && !st->window) {
        bk_log_warn("changelog %s of store %s has cleanup.policy=%s (retention.ms=%s, "
                    "retention.bytes=%s): a replica restoring it misses every key not written "
                    "within the retention (docs/kafka.md)",
                    st->changelog, st->name, values[0], values[1], values[2]);
    }
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
            /* A key-value store needs every key's newest record forever: compact. A window
             * store's records are worth its retention only: compact,delete with that
             * retention and a day more, as Kafka Streams gives its window changelogs. */
            char retention[32];
            const char *kv[] = {"cleanup.policy", "compact", NULL};
            const char *win[] = {"cleanup.policy", "compact,delete", "retention.ms", retention,
                                 NULL};
            snprintf(retention, sizeof(retention), "%lld",
                     (long long)st->retention_ms + 24LL * 3600 * 1000);
            if (bk_kafka_create_topic(rk, dev_port, st->changelog, want, rf,
                                      st->window && st->retention_ms > 0 ? win : kv, err,
                                      errsz) != 0) {
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
        if (dev_port <= 0) {
            warn_changelog_configs(rk, st);
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
        if (bk_kafka_create_topic(rk, dev_port, names[i], defp, rf, NULL, err, errsz) != 0) {
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
        if (bk_kafka_create_topic(rk, dev_port, names[i], want, rf, NULL, err, errsz) != 0) {
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

/* The stream threads running one set of tasks; a new set means a new crew
 * (the old one commits and closes first). */
typedef struct crew_s {
    bk_node_flags_t flags;
    bk_thread_t **threads;
    int nthreads, ntasks;
    bk_thread_stats_t total;
} crew_t;

/* In a cluster: what the threads need to know of the membership. */
typedef struct cluster_s {
    uint64_t epoch;
    const int32_t *ids; /* the member's id of each task handed to crew_start */
    bk_member_t *member;
} cluster_t;

static void active_progress(void *opaque, int32_t task, int64_t offset)
{
    bk_member_set_progress(opaque, task, offset, 0);
}

static void standby_progress(void *opaque, int32_t task, int64_t offset, int64_t lag)
{
    bk_member_set_progress(opaque, task, offset, lag);
}

/* Deals `tasks` round-robin (each thread gets tasks of every subtopology) to
 * up to `threads` threads and starts them. */
static void crew_start(crew_t *crew, const bk_plan_t *plan, const bk_conf_t *conf,
                       const bk_task_id_t *tasks, int ntasks, const cluster_t *cl,
                       bk_taskdb_pool_t *pool)
{
    int nthreads = (int)bk_conf_int(conf, BK_CONF_THREADS);
    bk_task_id_t *mine = calloc((size_t)ntasks + 1, sizeof(*mine));
    int32_t *ids = calloc((size_t)ntasks + 1, sizeof(*ids));

    memset(crew, 0, sizeof(*crew));
    if (nthreads > ntasks) {
        if (ntasks > 0 && !cl) {
            bk_log_warn("%d threads for %d tasks: running %d threads", nthreads, ntasks, ntasks);
        }
        nthreads = ntasks;
    }
    crew->ntasks = ntasks;
    crew->threads = calloc((size_t)nthreads + 1, sizeof(*crew->threads));
    for (int t = 0; t < nthreads; t++) {
        int n = 0;
        for (int i = t; i < ntasks; i += nthreads) {
            ids[n] = cl ? cl->ids[i] : i;
            mine[n++] = tasks[i];
        }
        crew->threads[t] = bk_thread_new(t, plan, conf, &crew->flags, mine, n);
        bk_thread_set_pool(crew->threads[t], pool);
        if (cl) {
            bk_thread_set_cluster(crew->threads[t], cl->epoch, ids, active_progress,
                                  cl->member);
        }
        if (bk_thread_start(crew->threads[t]) != 0) {
            bk_log_error("cannot start thread %d", t);
            crew->flags.stop = crew->flags.failed = 1;
            bk_thread_destroy(crew->threads[t]);
            break;
        }
        crew->nthreads = t + 1;
    }
    free(mine);
    free(ids);
    if (!cl || ntasks > 0) {
        bk_log_info("app %s: %d task(s) on %d thread(s)", plan->id, ntasks, crew->nthreads);
    }
}

/* Threads that have ended (by themselves or asked to). */
static int crew_done(const crew_t *crew)
{
    int done = 0;
    for (int t = 0; t < crew->nthreads; t++) {
        done += bk_thread_done(crew->threads[t]);
    }
    return done;
}

static void add_stats(bk_thread_stats_t *total, const bk_thread_stats_t *st)
{
    total->in += st->in;
    total->out += st->out;
    total->skipped += st->skipped;
    total->dlq += st->dlq;
}

/* Asks every thread to finish its batch, commit and close, and waits.
 * Returns 1 if any failed. */
static int crew_stop(crew_t *crew)
{
    crew->flags.stop = 1;
    for (int t = 0; t < crew->nthreads; t++) {
        bk_thread_stats_t st;
        bk_thread_join(crew->threads[t], &st);
        add_stats(&crew->total, &st);
        bk_thread_destroy(crew->threads[t]);
    }
    free(crew->threads);
    crew->threads = NULL;
    crew->nthreads = 0;
    return crew->flags.failed;
}

/* Every task of the app, numbered subtopology by subtopology. */
static bk_task_id_t *all_tasks(const bk_plan_t *plan, int *ntasks)
{
    bk_task_id_t *tasks;
    int n = 0;
    for (int s = 0; s < plan->nsubs; s++) {
        n += plan->subs[s].partitions;
    }
    tasks = calloc((size_t)n + 1, sizeof(*tasks));
    n = 0;
    for (int s = 0; s < plan->nsubs; s++) {
        for (int p = 0; p < plan->subs[s].partitions; p++) {
            tasks[n++] = (bk_task_id_t){s, p};
        }
    }
    *ntasks = n;
    return tasks;
}

/* One signal stops the node cleanly, a second aborts it. Returns 1 on a
 * stop request. */
static int wait_signal(const sigset_t *set, int *signals)
{
    struct timespec tick = {0, 100 * 1000 * 1000};
    int sig = sigtimedwait(set, NULL, &tick);
    if (sig <= 0 || sig == SIGUSR2) {
        return 0;
    }
    if (++*signals > 1) {
        bk_log_error("second signal: aborting without commit");
        _exit(130);
    }
    bk_log_info("signal %d: finishing records in hand, committing, closing", sig);
    return 1;
}

/* The task ids ("0_3") of the tasks at `which` (indices into names). */
static const char **pick_names(char **names, const int32_t *which, int n)
{
    const char **out = calloc((size_t)n + 1, sizeof(*out));
    for (int i = 0; i < n; i++) {
        out[i] = names[which[i]];
    }
    return out;
}

static void call_hook(bk_hooks_t *hooks, const char *name, char **names, const int32_t *which,
                      int n)
{
    const char **list = pick_names(names, which, n);
    bk_hooks_tasks(hooks, name, list, n);
    free(list);
}

/* Alone: this node takes every task of its app. */
static int run_alone(bk_plan_t *plan, const bk_conf_t *conf, bk_hooks_t *hooks,
                     const sigset_t *set)
{
    int ntasks, signals = 0, failed;
    bk_task_id_t *tasks = all_tasks(plan, &ntasks);
    char **names = calloc((size_t)ntasks + 1, sizeof(char *));
    int32_t *every = calloc((size_t)ntasks + 1, sizeof(int32_t));
    crew_t crew;

    for (int i = 0; i < ntasks; i++) {
        names[i] = malloc(32);
        snprintf(names[i], 32, "%d_%d", tasks[i].sub, tasks[i].partition);
        every[i] = i;
    }
    call_hook(hooks, "on_assign", names, every, ntasks);
    crew_start(&crew, plan, conf, tasks, ntasks, NULL, NULL);
    for (;;) {
        int done;
        if (wait_signal(set, &signals)) {
            crew.flags.stop = 1;
        }
        done = crew_done(&crew);
        if (done == crew.nthreads) {
            break;
        }
        if (done > 0 && !crew.flags.stop) {
            crew.flags.stop = 1; /* a thread ended by itself: stop the node */
        }
    }
    failed = crew_stop(&crew);
    call_hook(hooks, "on_revoke", names, every, ntasks);
    bk_log_info("app %s stopped%s: %llu in, %llu out, %llu skipped, %llu dead-lettered", plan->id,
                failed ? " after a failure" : "", (unsigned long long)crew.total.in,
                (unsigned long long)crew.total.out, (unsigned long long)crew.total.skipped,
                (unsigned long long)crew.total.dlq);
    for (int i = 0; i < ntasks; i++) {
        free(names[i]);
    }
    free(names);
    free(every);
    free(tasks);
    return failed ? 1 : 0;
}

static int same_set(const int32_t *a, int na, const int32_t *b, int nb)
{
    return na == nb && (na == 0 || memcmp(a, b, (size_t)na * sizeof(*a)) == 0);
}

static int in_set(const int32_t *a, int n, int32_t x)
{
    for (int i = 0; i < n; i++) {
        if (a[i] == x) {
            return 1;
        }
    }
    return 0;
}

/* a \ b into out; returns its size. */
static int set_minus(const int32_t *a, int na, const int32_t *b, int nb, int32_t *out)
{
    int n = 0;
    for (int i = 0; i < na; i++) {
        if (!in_set(b, nb, a[i])) {
            out[n++] = a[i];
        }
    }
    return n;
}

/* "0_1 0_4 ..." into buf, cut with "..." when it does not fit. */
static const char *list_names(char **names, const int32_t *which, int n, char *buf, size_t size)
{
    size_t len = 0;
    buf[0] = '\0';
    for (int i = 0; i < n; i++) {
        size_t need = strlen(names[which[i]]) + 1;
        if (len + need + 4 >= size) {
            snprintf(buf + len, size - len, "...");
            break;
        }
        len += (size_t)snprintf(buf + len, size - len, "%s%s", i ? " " : "", names[which[i]]);
    }
    return buf;
}

/* What a cluster node runs: its active crew and its standby runner. */
typedef struct member_node_s {
    bk_plan_t *plan;
    const bk_conf_t *conf;
    bk_hooks_t *hooks;
    bk_member_t *member;
    bk_task_id_t *tasks;
    char **names;
    int ntasks;
    crew_t crew;
    int32_t *running, *standing, *scratch, *scratch2;
    int nrun, nstand;
    uint64_t logged_epoch; /* the last epoch a line was logged for */
    bk_taskdb_pool_t *pool; /* DBs kept open from one crew to the next */
    bk_bootstrap_t *boot;   /* cold bootstrap, both sides */
    uint8_t *was_sb;        /* [ntasks] a standby here, not started as active since */
    bk_standby_t *standby;
    bk_thread_stats_t total;
} member_node_t;

static void standby_boot(void *opaque, int32_t task, const char *why)
{
    bk_bootstrap_want(opaque, task, why);
}

/* The active's side of cold bootstrap: the thread of the crew that runs `task`. */
static int crew_ask(void *opaque, int32_t task, const char *req)
{
    crew_t *crew = opaque;
    for (int t = 0; t < crew->nthreads; t++) {
        if (bk_thread_request_snapshot(crew->threads[t], task, req) == 0) {
            return 0;
        }
    }
    return -1;
}

static int crew_take(void *opaque, bk_thread_snapshot_t *out)
{
    crew_t *crew = opaque;
    for (int t = 0; t < crew->nthreads; t++) {
        if (bk_thread_take_snapshot(crew->threads[t], out)) {
            return 1;
        }
    }
    return 0;
}

static void start_standby(member_node_t *mn, const int32_t *which, int n)
{
    bk_task_id_t *tt = calloc((size_t)n + 1, sizeof(*tt));
    for (int i = 0; i < n; i++) {
        tt[i] = mn->tasks[which[i]];
        mn->standing[i] = which[i];
    }
    mn->nstand = n;
    if (n == 0) {
        free(tt);
        return;
    }
    mn->standby = bk_standby_new(mn->plan, mn->conf, tt, which, n, standby_progress, mn->member);
    free(tt);
    bk_standby_set_pool(mn->standby, mn->pool);
    if (mn->boot) {
        int *modes = calloc((size_t)n + 1, sizeof(*modes));
        for (int i = 0; modes && i < n; i++) {
            modes[i] = bk_bootstrap_mode(mn->boot, which[i]);
        }
        bk_standby_set_bootstrap(mn->standby, modes, standby_boot, mn->boot);
        free(modes);
    }
    if (bk_standby_start(mn->standby) != 0) {
        bk_log_error("cannot start the standby thread");
        bk_standby_destroy(mn->standby);
        mn->standby = NULL;
    }
}

static void stop_standby(member_node_t *mn)
{
    if (mn->standby) {
        bk_standby_stop(mn->standby);
        bk_standby_destroy(mn->standby);
        mn->standby = NULL;
    }
}

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Applies a new view: stops what must stop (actives commit and close first, standbys
 * checkpoint), releases what the view asks for, then starts the new standbys and actives.
 * Returns 1 if an active failed while stopping. */
static int apply_view(member_node_t *mn, const bk_member_view_t *view)
{
    const int32_t *want = view->lost ? NULL : view->running;
    const int32_t *want_sb = view->lost ? NULL : view->standby;
    int nwant = view->lost ? 0 : view->nrunning, nwant_sb = view->lost ? 0 : view->nstandby;
    int run_changed = !same_set(mn->running, mn->nrun, want, nwant) || view->nrelease > 0;
    int sb_changed = !same_set(mn->standing, mn->nstand, want_sb, nwant_sb);
    int failed = 0, n;

    if (!run_changed && !sb_changed) {
        if (!view->lost && view->epoch != mn->logged_epoch && view->epoch > 0) {
            /* the same line as for a change, so that a reader of any node's log sees
             * every epoch it applied (scripts/bench/failover waits for one epoch on all) */
            char run_list[1024], sb_list[1024];
            mn->logged_epoch = view->epoch;
            bk_log_info("epoch %llu: running %d task(s), %d waiting for their release, %d "
                        "standby (running [%s], standby [%s]), unchanged",
                        (unsigned long long)view->epoch, mn->nrun, view->nwaiting, mn->nstand,
                        list_names(mn->names, mn->running, mn->nrun, run_list, sizeof(run_list)),
                        list_names(mn->names, mn->standing, mn->nstand, sb_list,
                                   sizeof(sb_list)));
        }
        return 0;
    }
    mn->logged_epoch = view->epoch;
    int64_t t0 = mono_ms(), t1, t2;
    if (run_changed) {
        failed = crew_stop(&mn->crew);
        add_stats(&mn->total, &mn->crew.total);
        if (failed) {
            return 1;
        }
    }
    t1 = mono_ms();
    if (sb_changed) {
        stop_standby(mn);
    }
    t2 = mono_ms();
    if (t2 - t0 >= 50) {
        bk_log_info("epoch %llu: stopping took %lld ms (stream threads %lld, standbys %lld)",
                    (unsigned long long)view->epoch, (long long)(t2 - t0), (long long)(t1 - t0),
                    (long long)(t2 - t1));
    }
    /* the DBs of tasks this node keeps (or is about to run: waiting for their release)
     * stay open for the new crew and standbys */
    {
        int nw = view->lost ? 0 : view->nwaiting, nk = nwant + nwant_sb + nw;
        bk_task_id_t *keep = calloc((size_t)nk + 1, sizeof(*keep));
        for (int i = 0; keep && i < nk; i++) {
            keep[i] = mn->tasks[i < nwant              ? want[i]
                                : i < nwant + nwant_sb ? want_sb[i - nwant]
                                                       : view->waiting[i - nwant - nwant_sb]];
        }
        bk_taskdb_pool_keep(mn->pool, keep, keep ? nk : 0);
        free(keep);
    }
    if (view->nrelease > 0 &&
        bk_member_released(mn->member, view->epoch, view->release, view->nrelease) != 0) {
        bk_log_warn("could not publish the release of %d task(s)", view->nrelease);
    }
    /* progress of tasks this node no longer keeps is forgotten */
    n = set_minus(mn->running, mn->nrun, want, nwant, mn->scratch);
    call_hook(mn->hooks, "on_revoke", mn->names, mn->scratch, n);
    for (int i = 0; i < n; i++) {
        if (!in_set(want_sb, nwant_sb, mn->scratch[i])) {
            bk_member_set_progress(mn->member, mn->scratch[i], 0, -1);
        }
    }
    n = set_minus(mn->standing, mn->nstand, want_sb, nwant_sb, mn->scratch);
    for (int i = 0; i < n; i++) {
        if (!in_set(want, nwant, mn->scratch[i])) {
            bk_member_set_progress(mn->member, mn->scratch[i], 0, -1);
        }
    }
    /* promotions: standbys of this node that are now its actives */
    n = set_minus(want, nwant, mn->running, mn->nrun, mn->scratch);
    if (sb_changed) {
        bk_bootstrap_keep(mn->boot, want_sb, nwant_sb);
        start_standby(mn, want_sb, nwant_sb);
    }
    /* A task this node kept a standby of starts here: a promotion, whether in the same
     * view (a death) or after its previous owner released it (a warm-up move, where the
     * view that drops the standby comes before the one that starts the task). */
    for (int i = 0; i < n; i++) {
        if (mn->was_sb[mn->scratch[i]]) {
            bk_log_info("task %s: promoted from standby to active in epoch %llu",
                        mn->names[mn->scratch[i]], (unsigned long long)view->epoch);
            bk_hooks_task(mn->hooks, "on_promote", mn->names[mn->scratch[i]]);
        }
    }
    for (int32_t t = 0; t < mn->ntasks; t++) {
        int kept = in_set(want_sb, nwant_sb, t);
        mn->was_sb[t] = kept || (mn->was_sb[t] && !in_set(want, nwant, t) &&
                                 !view->lost && in_set(view->waiting, view->nwaiting, t));
    }
    if (run_changed) {
        bk_task_id_t *mine = calloc((size_t)nwant + 1, sizeof(*mine));
        cluster_t cl = {view->epoch, want, mn->member};
        bk_bootstrap_settle(mn->boot, want, nwant);
        call_hook(mn->hooks, "on_assign", mn->names, mn->scratch, n);
        mn->nrun = nwant;
        for (int i = 0; i < nwant; i++) {
            mn->running[i] = want[i];
            mine[i] = mn->tasks[want[i]];
            bk_member_set_progress(mn->member, want[i], -1, 0);
        }
        char run_list[1024], sb_list[1024];
        bk_log_info("epoch %llu: running %d task(s), %d waiting for their release, %d standby "
                    "(running [%s], standby [%s])",
                    (unsigned long long)view->epoch, mn->nrun, view->nwaiting, mn->nstand,
                    list_names(mn->names, want, nwant, run_list, sizeof(run_list)),
                    list_names(mn->names, mn->standing, mn->nstand, sb_list, sizeof(sb_list)));
        crew_start(&mn->crew, mn->plan, mn->conf, mine, nwant, &cl, mn->pool);
        free(mine);
    } else {
        char sb_list[1024];
        bk_log_info("epoch %llu: %d standby task(s) [%s]", (unsigned long long)view->epoch,
                    mn->nstand,
                    list_names(mn->names, mn->standing, mn->nstand, sb_list, sizeof(sb_list)));
    }
    return 0;
}

static pthread_t main_thread;

static void wake_main(void *opaque)
{
    (void)opaque;
    pthread_kill(main_thread, SIGUSR2);
}

/* In a cluster (--cluster): the tasks come from the app's membership
 * (member.h). A change of this node's active tasks restarts its crew: the old
 * one commits and closes, the tasks given up are released for their new
 * owners, and the new crew starts the tasks the view says are ours to run. A
 * change of its standby tasks restarts the standby runner (standby.h). */
static int run_member(bk_plan_t *plan, const bk_conf_t *conf, bk_hooks_t *hooks, int dev_port,
                      const sigset_t *set)
{
    int signals = 0, failed = 0;
    member_node_t mn;
    bk_member_conf_t mc;
    bk_member_view_t view;
    char err[1024];

    memset(&mn, 0, sizeof(mn));
    mn.plan = plan;
    mn.conf = conf;
    mn.hooks = hooks;
    mn.tasks = all_tasks(plan, &mn.ntasks);
    mn.names = calloc((size_t)mn.ntasks + 1, sizeof(char *));
    mn.running = calloc((size_t)mn.ntasks + 1, sizeof(int32_t));
    mn.standing = calloc((size_t)mn.ntasks + 1, sizeof(int32_t));
    mn.scratch = calloc((size_t)mn.ntasks + 1, sizeof(int32_t));
    mn.scratch2 = calloc((size_t)mn.ntasks + 1, sizeof(int32_t));
    mn.was_sb = calloc((size_t)mn.ntasks + 1, 1);
    for (int i = 0; i < mn.ntasks; i++) {
        mn.names[i] = malloc(32);
        snprintf(mn.names[i], 32, "%d_%d", mn.tasks[i].sub, mn.tasks[i].partition);
    }
    memset(&mc, 0, sizeof(mc));
    mc.conf = conf;
    mc.app_id = plan->id;
    mc.node_id = bk_conf_str(conf, BK_CONF_NODE_ID);
    mc.rack = bk_conf_str(conf, BK_CONF_RACK);
    mc.endpoint = bk_conf_str(conf, BK_CONF_ENDPOINT);
    mc.threads = (int32_t)bk_conf_int(conf, BK_CONF_THREADS);
    mc.ntasks = mn.ntasks;
    mc.task_names = (const char *const *)mn.names;
    mc.standbys = (int32_t)bk_conf_int(conf, BK_CONF_STANDBYS);
    /* Warm-up (KIP-441): with standbys, a task stays where its state is warm while the
     * node balance chose catches up; the leader's probes move it once it has. */
    mc.warmup = mc.standbys > 0;
    mc.acceptable_lag = bk_conf_int(conf, BK_CONF_RECOVERY_LAG);
    mc.probe_interval_ms = (int)bk_conf_int(conf, BK_CONF_PROBE_MS);
    mc.heartbeat_interval_ms = (int)bk_conf_int(conf, BK_CONF_HEARTBEAT_MS);
    mc.session_timeout_ms = (int)bk_conf_int(conf, BK_CONF_SESSION_MS);
    mc.dev_port = dev_port > 0 ? dev_port : -1;
    /* a new view wakes the main thread at once instead of at its next 100 ms tick */
    main_thread = pthread_self();
    mc.on_change = wake_main;
    memset(&view, 0, sizeof(view));
    crew_start(&mn.crew, plan, conf, NULL, 0, NULL, NULL);
    mn.pool = bk_taskdb_pool_new();
    mn.member = bk_member_new(&mc, err, sizeof(err));
    if (!mn.member || bk_member_start(mn.member, err, sizeof(err)) != 0) {
        bk_log_error("cannot join app %s: %s", plan->id, err);
        failed = 1;
        goto done;
    }
    {
        bk_bootstrap_env_t env = {plan,      conf,     mn.member, mc.node_id, mn.ntasks,
                                  mn.tasks,  mn.names, crew_ask,  crew_take,  &mn.crew,
                                  hooks,     mn.pool};
        mn.boot = bk_bootstrap_new(&env);
    }
    bk_log_info("app %s: node %s (rack %s) joining, %d standby replica(s) per task%s", plan->id,
                mc.node_id, mc.rack ? mc.rack : "-", (int)mc.standbys,
                bk_conf_str(conf, BK_CONF_SSH_KEY) ? ", cold bootstrap on" : "");
    for (;;) {
        if (wait_signal(set, &signals)) {
            break;
        }
        if (mn.crew.nthreads > 0 && crew_done(&mn.crew) > 0) {
            bk_log_error("a stream thread stopped: leaving the app");
            failed = 1;
            break;
        }
        if (mn.standby && bk_standby_done(mn.standby)) {
            /* it logged why; the replicas are dropped until the next change */
            stop_standby(&mn);
            mn.nstand = 0;
        }
        if (bk_bootstrap_poll(mn.boot, &view) && mn.standby && !view.lost) {
            /* a bootstrap ended (or was asked for): the runner picks up the new state */
            memcpy(mn.scratch2, mn.standing, (size_t)mn.nstand * sizeof(int32_t));
            stop_standby(&mn);
            start_standby(&mn, mn.scratch2, mn.nstand);
        }
        if (bk_member_poll(mn.member, &view) == 0) {
            continue;
        }
        if (view.error) {
            bk_log_error("membership failed: %s", view.error);
            failed = 1;
            break;
        }
        if (view.lost && (mn.crew.nthreads > 0 || mn.standby)) {
            bk_log_error("lost the control plane: stopping every task");
        }
        if (apply_view(&mn, &view) != 0) {
            failed = 1;
            break;
        }
    }
    failed |= crew_stop(&mn.crew);
    add_stats(&mn.total, &mn.crew.total);
    stop_standby(&mn);
    call_hook(hooks, "on_revoke", mn.names, mn.running, mn.nrun);
    if (bk_member_stop(mn.member, 1) != 0) {
        bk_log_warn("the leave notice was not delivered: the others wait for the session "
                    "timeout");
    }

done:
    if (mn.crew.threads) {
        crew_stop(&mn.crew);
    }
    stop_standby(&mn);
    bk_bootstrap_destroy(mn.boot);
    bk_taskdb_pool_destroy(mn.pool);
    bk_log_info("app %s: node %s stopped%s: %llu in, %llu out, %llu skipped, %llu dead-lettered",
                plan->id, mc.node_id, failed ? " after a failure" : "",
                (unsigned long long)mn.total.in, (unsigned long long)mn.total.out,
                (unsigned long long)mn.total.skipped, (unsigned long long)mn.total.dlq);
    bk_member_view_clear(&view);
    bk_member_destroy(mn.member);
    for (int i = 0; i < mn.ntasks; i++) {
        free(mn.names[i]);
    }
    free(mn.names);
    free(mn.running);
    free(mn.standing);
    free(mn.scratch);
    free(mn.scratch2);
    free(mn.was_sb);
    free(mn.tasks);
    return failed ? 1 : 0;
}

static int run_threads(bk_plan_t *plan, const bk_conf_t *conf, bk_hooks_t *hooks, int dev_port)
{
    sigset_t set;
    /* Signals go to this thread only (sigtimedwait); threads started later
     * inherit the mask. */
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGUSR2); /* wake-up: the membership's view changed */
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    if (bk_conf_int(conf, BK_CONF_CLUSTER)) {
        return run_member(plan, conf, hooks, dev_port, &set);
    }
    return run_alone(plan, conf, hooks, &set);
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
    rc = run_threads(plan, conf, hooks, dev_port);

done:
    if (admin) {
        rd_kafka_destroy(admin);
    }
    bk_hooks_destroy(hooks);
    bk_plan_destroy(plan);
    bk_vm_destroy(L);
    bk_broker_destroy(broker);
    bk_conf_destroy(conf);
    return rc;
}
