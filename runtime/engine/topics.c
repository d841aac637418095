/* topics.c - the topics an app needs: found, created, their configs checked (topics.h). */
#include "engine/topics.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"
#include "engine/kafka.h"

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
    if (bk_kafka_topic_configs(rk, st->changelog, names, 3, values, 10000, err, sizeof(err)) != 0) {
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
/* changelog_retention_ms: a key-value store's changelog compact,delete with that retention,
 * and segments that roll as often, so that the broker can delete them (a segment is deleted
 * whole, once its newest record is older than the retention, and never while active). An
 * existing changelog is altered when it differs. */
static int bound_changelog(rd_kafka_t *rk, const bk_plan_store_t *st, int64_t keep, char *err,
                           size_t errsz)
{
    const char *names[] = {"cleanup.policy", "retention.ms", "segment.ms"};
    char values[3][BK_KAFKA_CONFIG_MAX], ms[32];
    const char *want[] = {
        "cleanup.policy", "compact,delete", "retention.ms", ms, "segment.ms", ms, NULL};
    snprintf(ms, sizeof(ms), "%lld", (long long)keep);
    if (bk_kafka_topic_configs(rk, st->changelog, names, 3, values, 10000, err, errsz) != 0) {
        return -1;
    }
    if (strcmp(values[0], "compact,delete") == 0 && strcmp(values[1], ms) == 0 &&
        strcmp(values[2], ms) == 0) {
        return 0;
    }
    if (bk_kafka_alter_topic_configs(rk, st->changelog, want, 10000, err, errsz) != 0) {
        return -1;
    }
    bk_log_info("changelog %s of store %s: cleanup.policy=compact,delete, retention.ms=%s, "
                "segment.ms=%s (changelog_retention_ms; it had %s, %s, %s)",
                st->changelog, st->name, ms, ms, values[0], values[1], values[2]);
    return 0;
}

/* The changelogs of stores [from, to). */
static int ensure_changelogs(const bk_plan_t *plan, const bk_conf_t *conf, rd_kafka_t *rk, int rf,
                             int from, int to, char *err, size_t errsz)
{
    int dev = bk_kafka_dev_broker();
    int64_t keep = bk_conf_int(conf, BK_CONF_CHANGELOG_RETENTION_MS);
    for (int s = from; s < to; s++) {
        const bk_plan_store_t *st = &plan->stores[s];
        int want = plan->subs[st->sub].partitions, have = 0, other = 0;
        if (!st->logged) {
            continue;
        }
        if (read_counts(rk, (const char **)&st->changelog, 1, &have, err, errsz) != 0) {
            return -1;
        }
        /* The store's state is in the other generation's changelog: starting here would
         * start it empty. A running app changes its task count by moving its state. */
        if (have == 0 && st->changelog_other &&
            read_counts(rk, (const char **)&st->changelog_other, 1, &other, err, errsz) != 0) {
            return -1;
        }
        if (other > 0) {
            snprintf(err, errsz,
                     "store %s keeps its state in changelog %s, which this start would not "
                     "read: subtopology %d ran %s the `tasks` setting before (change a "
                     "subtopology's task count with beck repartition, docs/repartitioning.md)",
                     st->name, st->changelog_other, st->sub,
                     plan->subs[st->sub].generation ? "without" : "with");
            return -1;
        }
        if (have == 0) {
            /* A key-value store needs every key's newest record forever: compact. A window
             * store's records are worth its retention only: compact,delete with that
             * retention and a day more, as Kafka Streams gives its window changelogs. */
            char retention[32], bounded[32];
            const char *kv[] = {"cleanup.policy", "compact", NULL};
            const char *kvb[] = {"cleanup.policy",
                                 "compact,delete",
                                 "retention.ms",
                                 bounded,
                                 "segment.ms",
                                 bounded,
                                 NULL};
            const char *win[] = {"cleanup.policy", "compact,delete", "retention.ms", retention,
                                 NULL};
            snprintf(retention, sizeof(retention), "%lld",
                     (long long)st->retention_ms + 24LL * 3600 * 1000);
            snprintf(bounded, sizeof(bounded), "%lld", (long long)keep);
            if (bk_kafka_create_topic(rk, st->changelog, want, rf,
                                      st->window && st->retention_ms > 0 ? win
                                      : keep > 0                         ? kvb
                                                                         : kv,
                                      err, errsz) != 0) {
                snprintf(err + strlen(err), errsz - strlen(err), " (the changelog of store %s)",
                         st->name);
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
            snprintf(err, errsz,
                     "changelog %s of store %s has %d partitions, the store's tasks "
                     "need %d",
                     st->changelog, st->name, have, want);
            return -1;
        }
        if (!dev && keep > 0 && !st->window) {
            if (bound_changelog(rk, st, keep, err, errsz) != 0) {
                return -1;
            }
        } else if (!dev) {
            warn_changelog_configs(rk, st);
        }
    }
    return 0;
}

/* A subtopology read by input partition (generation 0) whose input grew while the app was
 * down: its state has the width its changelogs have, and its tasks keep it (a key's state
 * is in the task of its partition under that count). The new partitions are read once it
 * moves to generation 1 (node/node_growth.c), as when it grows under a running app. */
/* Whether a topic of n partitions holds any record. */
static int holds_records(rd_kafka_t *rk, const char *topic, int n)
{
    const char **names = calloc((size_t)n, sizeof(*names));
    int32_t *parts = calloc((size_t)n, sizeof(*parts));
    int64_t *lo = calloc((size_t)n, sizeof(*lo)), *hi = calloc((size_t)n, sizeof(*hi));
    int any = 0;
    for (int p = 0; names && parts && p < n; p++) {
        names[p] = topic;
        parts[p] = p;
    }
    if (names && parts && lo && hi &&
        bk_kafka_watermarks(rk, names, parts, n, lo, hi, 30000, NULL) ==
            RD_KAFKA_RESP_ERR_NO_ERROR) {
        for (int p = 0; p < n; p++) {
            any |= hi[p] > 0;
        }
    }
    free(names);
    free(parts);
    free(lo);
    free(hi);
    return any;
}

static int pin_to_state(bk_plan_t *plan, rd_kafka_t *rk, int s, char *err, size_t errsz)
{
    bk_plan_sub_t *sub = &plan->subs[s];
    /* (an input of the app's own keeps its width; a changelog made narrower by hand and
     * never written is an error, ensure_changelogs') */
    if (sub->passthrough || sub->generation != 0 || plan->topics[sub->topics[0]].internal) {
        return 0;
    }
    for (int i = 0; i < plan->nstores; i++) {
        const bk_plan_store_t *st = &plan->stores[i];
        int have = 0;
        if (st->sub != s || !st->logged) {
            continue;
        }
        if (read_counts(rk, (const char **)&st->changelog, 1, &have, err, errsz) != 0) {
            return -1;
        }
        if (have > 0 && have < sub->partitions && holds_records(rk, st->changelog, have)) {
            bk_log_warn("subtopology %d reads %s, which has %d partitions now, by input "
                        "partition, and its state is in %d (changelog %s): it runs %d tasks, "
                        "and partitions %d to %d are read once it moves to generation 1",
                        s, plan->topics[sub->topics[0]].name, sub->partitions, have, st->changelog,
                        have, have, sub->partitions - 1);
            sub->partitions = have;
        }
        return 0;
    }
    return 0;
}

/* Finds every topic's partition count, creating what the app may create:
 * sinks and the dead-letter topic always, sources only on a dev broker (on a
 * real cluster the input is someone else's to create). */
int bk_topics_ensure(bk_plan_t *plan, const bk_conf_t *conf, rd_kafka_t *rk, char *err,
                     size_t errsz)
{
    int dev = bk_kafka_dev_broker();
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
        if (!dev) {
            snprintf(err, errsz, "source topic %s does not exist", names[i]);
            goto done;
        }
        if (bk_kafka_create_topic(rk, names[i], defp, rf, NULL, err, errsz) != 0) {
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
        if (bk_kafka_create_topic(rk, names[i], want, rf, NULL, err, errsz) != 0) {
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
    for (int i = 0; i < plan->ntopics; i++) {
        const bk_plan_topic_t *t = &plan->topics[i];
        if (t->keygroups && t->partitions != t->want) {
            snprintf(err, errsz,
                     "topic %s has %d partitions, and the `tasks` setting gives subtopology %d "
                     "%d tasks (change a subtopology's task count with beck repartition, "
                     "docs/repartitioning.md)",
                     t->name, t->partitions, t->sub, t->want);
            goto done;
        }
    }
    for (int s = 0; s < plan->nsubs; s++) {
        bk_plan_sub_t *sub = &plan->subs[s];
        sub->partitions = plan->topics[sub->topics[0]].partitions;
        if (sub->want > 0) {
            sub->partitions = sub->want; /* a passthrough: its inputs' widths do not matter */
            continue;
        }
        if (pin_to_state(plan, rk, s, err, errsz) != 0) {
            goto done;
        }
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
    if (ensure_changelogs(plan, conf, rk, rf, 0, plan->nstores, err, errsz) != 0) {
        goto done;
    }
    rc = 0;
done:
    free(names);
    free(counts);
    return rc;
}

int bk_topics_ensure_grown(const bk_plan_t *plan, const bk_conf_t *conf, rd_kafka_t *rk,
                           int from_topic, int from_store, char *err, size_t errsz)
{
    int rf = (int)bk_conf_int(conf, BK_CONF_REPLICATION_FACTOR);
    int ntopics = plan->ntopics, nstores = plan->nstores;
    for (int i = from_topic; i < ntopics; i++) {
        const bk_plan_topic_t *t = &plan->topics[i];
        int have = 0;
        if (read_counts(rk, (const char **)&t->name, 1, &have, err, errsz) != 0) {
            return -1;
        }
        if (have == 0) {
            if (bk_kafka_create_topic(rk, t->name, t->partitions, rf, NULL, err, errsz) != 0) {
                return -1;
            }
            for (int tries = 0; tries < 100 && have == 0; tries++) {
                if (read_counts(rk, (const char **)&t->name, 1, &have, err, errsz) != 0) {
                    return -1;
                }
                if (have == 0) {
                    usleep(100 * 1000);
                }
            }
        }
        /* the generation's partitioner sends key groups to its task count's partitions:
         * another width would send records to partitions no task reads */
        if (have != t->partitions) {
            snprintf(err, errsz,
                     "topic %s has %d partitions; generation %d of subtopology %d "
                     "has %d tasks",
                     t->name, have, t->generation, t->sub, t->partitions);
            return -1;
        }
    }
    if (ensure_changelogs(plan, conf, rk, rf, from_store, nstores, err, errsz) != 0) {
        return -1;
    }
    /* a topic just made has no leaders for a while (on Kafka, hundreds of ms): the
     * passthroughs switch to it once it has (bk_plan_set_ready), so that no stream thread's
     * commit waits for its records to it, and with it every task of the thread */
    for (int i = from_topic; i < ntopics + nstores - from_store; i++) {
        const char *name =
            i < ntopics ? plan->topics[i].name : plan->stores[from_store + i - ntopics].changelog;
        int ms;
        if (i >= ntopics && !plan->stores[from_store + i - ntopics].logged) {
            continue;
        }
        if ((ms = bk_kafka_wait_leaders(rk, name, 10000)) < 0) {
            bk_log_warn("topic %s: its partitions have no leader after 10 s; going on", name);
        } else if (ms >= 100) {
            bk_log_info("topic %s: its partitions' leaders known after %d ms", name, ms);
        }
    }
    return 0;
}
