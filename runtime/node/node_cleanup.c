/* node_cleanup.c - removing retired generations' directories, topics and drained
 * checkpoints (node_cleanup.h). */
#define _GNU_SOURCE /* memmem */
#include "node/node_cleanup.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/clock.h"
#include "base/events.h"
#include "base/fs.h"
#include "base/log.h"
#include "engine/drained.h"
#include "engine/kafka.h"

#define AGAIN_MS 2000  /* a directory in use is tried again this often */
#define PURGE_TRIES 10 /* DeleteRecords of a changelog made compact,delete, 300 ms apart */

enum { RETIRED = 1, DIRS_DONE = 2, TOPICS_DONE = 4, DRAINED_DONE = 8, LOGS_DONE = 16, SEALED = 32 };

#define SEALED_META "beck.sealed" /* engine/thread_internal.h: a sealed task's commits */

struct bk_node_cleanup_s {
    bk_plan_t *plan;
    const bk_conf_t *conf;
    bk_taskdb_pool_t *pool;
    uint8_t *state; /* [plan->cap_subs] a mask of the above, by subtopology */
    int pending;    /* something was left to do: poll tries again at again_at (mono) */
    int64_t again_at;
    rd_kafka_t *admin;    /* made when first needed */
    rd_kafka_t *consumer; /* of the app's group: its committed offsets' metadata */
    /* the leader alone empties topics and changelogs: two nodes altering one changelog's
     * cleanup.policy for their DeleteRecords undid each other's (a policy violation) */
    int leader;
};

bk_node_cleanup_t *bk_node_cleanup_new(bk_plan_t *plan, const bk_conf_t *conf,
                                       bk_taskdb_pool_t *pool)
{
    bk_node_cleanup_t *c = calloc(1, sizeof(*c));
    if (!c || !(c->state = calloc((size_t)plan->cap_subs + 1, 1))) {
        free(c);
        return NULL;
    }
    c->plan = plan;
    c->conf = conf;
    c->pool = pool;
    return c;
}

void bk_node_cleanup_destroy(bk_node_cleanup_t *c)
{
    if (c) {
        if (c->consumer) {
            rd_kafka_consumer_close(c->consumer);
            rd_kafka_destroy(c->consumer);
        }
        if (c->admin) {
            rd_kafka_destroy(c->admin);
        }
        free(c->state);
        free(c);
    }
}

static int exists(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0;
}

/* The task directories of generation subtopology s: 1 when all are gone, 0 when one is in
 * use here now. */
static int remove_dirs(bk_node_cleanup_t *c, int s)
{
    const bk_plan_sub_t *sub = &c->plan->subs[s];
    int left = 0, removed = 0;
    for (int p = 0; p < sub->partitions; p++) {
        bk_task_id_t task = {s, p};
        char dir[4096], err[512];
        int had, rc;
        bk_plan_task_dir(c->plan, c->conf, task, dir, sizeof(dir));
        had = exists(dir);
        rc = bk_taskdb_pool_remove(c->pool, c->plan, c->conf, task, err, sizeof(err));
        if (rc == 0) {
            left++;
        } else if (rc < 0) {
            bk_log_warn("cleanup: task %s of a retired generation: %s: its directory stays",
                        BK_TASK_NAME(task), err);
        } else {
            removed += had;
        }
    }
    if (removed > 0) {
        bk_log_info("cleanup: generation %d of subtopology %d retired: removed %d task "
                    "director%s%s",
                    sub->generation, sub->of, removed, removed == 1 ? "y" : "ies",
                    left ? " (more once their owners here close them)" : "");
        bk_events_emit("retired", "\"subtopology\":%d,\"generation\":%d,\"removed\":%d", sub->of,
                       sub->generation, removed);
    }
    return left == 0;
}

/* The drained checkpoints of generation subtopology s's tasks. */
static void remove_drained(bk_node_cleanup_t *c, int s)
{
    const bk_plan_sub_t *sub = &c->plan->subs[s];
    int removed = 0;
    for (int p = 0; p < sub->partitions; p++) {
        bk_task_id_t task = {s, p};
        char root[4096];
        bk_drained_root(c->plan, c->conf, task, root, sizeof(root));
        if (!exists(root)) {
            continue;
        }
        if (bk_fs_rm_tree(root) != 0 && errno != ENOENT) {
            bk_log_warn("cleanup: %s: %s: it stays", root, strerror(errno));
        } else {
            removed++;
        }
    }
    if (removed > 0) {
        bk_log_info("cleanup: generation %d of subtopology %d: removed %d drained "
                    "checkpoint(s): the generation after it has drained too",
                    sub->generation, sub->of, removed);
    }
}

static rd_kafka_t *admin_of(bk_node_cleanup_t *c)
{
    char err[1024];
    if (!c->admin && !(c->admin = bk_kafka_new(c->conf, BK_KAFKA_ADMIN, "beck-cleanup", NULL, NULL,
                                               err, sizeof(err)))) {
        bk_log_warn("cleanup: no admin client: %s", err);
    }
    return c->admin;
}

/* Empties a topic of `partitions` partitions (kafka.h); `why` ends the log line. A compacted
 * one (a changelog) refuses DeleteRecords ("policy violation"): it is made compact,delete
 * for the call, then compact again. */
static void purge(bk_node_cleanup_t *c, const char *topic, int partitions, int compacted,
                  const char *why)
{
    static const char *const both[] = {"cleanup.policy", "compact,delete", NULL};
    static const char *const compact[] = {"cleanup.policy", "compact", NULL};
    char err[1024];
    rd_kafka_t *admin = admin_of(c);
    int rc = -1;
    if (admin && compacted &&
        bk_kafka_alter_topic_configs(admin, topic, both, 30000, err, sizeof(err)) != 0) {
        bk_log_warn("cleanup: %s: its records stay", err);
        return;
    }
    /* (a config just altered reaches the partitions' leaders a moment later: until then
     * DeleteRecords still sees a compacted topic) */
    for (int tries = 0; admin && tries < PURGE_TRIES; tries++) {
        rc = bk_kafka_purge_topic(admin, topic, partitions, err, sizeof(err));
        if (rc >= 0 || !compacted || !strstr(err, "Policy violation")) {
            break;
        }
        bk_clock_sleep_ms(300);
    }
    if (admin && compacted) {
        char err2[1024];
        if (bk_kafka_alter_topic_configs(admin, topic, compact, 30000, err2, sizeof(err2)) != 0) {
            bk_log_warn("cleanup: %s: it stays compact,delete", err2);
        }
    }
    if (rc < 0 && admin) {
        bk_log_warn("cleanup: %s: its records stay", err);
    } else if (rc > 0) {
        bk_log_info("cleanup: deleted the records of topic %s: %s", topic, why);
    }
}

/* The input topics of generation subtopology s (its `-repartition-g<N>`), emptied on real
 * Kafka: their records are deleted, the topics stay (kafka.h says why). */
static void purge_topics(bk_node_cleanup_t *c, int s)
{
    const bk_plan_t *plan = c->plan;
    const bk_plan_sub_t *sub = &plan->subs[s];
    char why[128];
    snprintf(why, sizeof(why), "generation %d of subtopology %d is retired", sub->generation,
             sub->of);
    for (int i = 0; i < sub->ntopics; i++) {
        const bk_plan_topic_t *t = &plan->topics[sub->topics[i]];
        if (!t->internal || t->generation != sub->generation || t->generation < 1) {
            continue;
        }
        if (bk_kafka_dev_broker()) {
            bk_log_info("cleanup: topic %s of a retired generation keeps its records: the dev "
                        "broker cannot delete them",
                        t->name);
            continue;
        }
        purge(c, t->name, t->partitions, 0, why);
    }
}

/* Every task of generation subtopology m (one built by a move) sealed, as the metadata of its
 * input offsets' commits says (engine/thread_seal.c). */
static int all_sealed(bk_node_cleanup_t *c, int m)
{
    const bk_plan_t *plan = c->plan;
    const bk_plan_sub_t *sub = &plan->subs[m];
    rd_kafka_topic_partition_list_t *list;
    char err[1024];
    int sealed = 1;

    if (c->state[m] & SEALED) {
        return 1;
    }
    if (bk_plan_prev_generation(plan, m) < 0 || sub->ntopics < 1) {
        return 0;
    }
    if (!c->consumer && !(c->consumer = bk_kafka_new(c->conf, BK_KAFKA_CONSUMER, "beck-cleanup",
                                                     NULL, NULL, err, sizeof(err)))) {
        bk_log_warn("cleanup: no consumer to read the app's commits: %s", err);
        return 0;
    }
    list = rd_kafka_topic_partition_list_new(sub->partitions + 1);
    for (int p = 0; p < sub->partitions; p++) {
        rd_kafka_topic_partition_list_add(list, plan->topics[sub->topics[0]].name, p);
    }
    if (rd_kafka_committed(c->consumer, list, 5000) != RD_KAFKA_RESP_ERR_NO_ERROR) {
        sealed = 0;
    }
    for (int i = 0; sealed && i < list->cnt; i++) {
        const rd_kafka_topic_partition_t *e = &list->elems[i];
        sealed = !e->err && e->metadata && e->metadata_size > 0 &&
                 memmem(e->metadata, e->metadata_size, SEALED_META, strlen(SEALED_META));
    }
    rd_kafka_topic_partition_list_destroy(list);
    if (sealed) {
        c->state[m] |= SEALED;
        bk_plan_set_sealed(c->plan, m); /* its tasks need no build any more */
    }
    return sealed;
}

/* A generation after s's of the same subtopology whose tasks are all sealed, or -1. */
static int sealed_after(bk_node_cleanup_t *c, int s)
{
    const bk_plan_sub_t *sub = &c->plan->subs[s];
    int latest = bk_plan_latest_generation(c->plan, sub->of);
    for (int g = latest; g > sub->generation; g--) {
        int m = bk_plan_generation_sub(c->plan, sub->of, g);
        if (m >= 0 && all_sealed(c, m)) {
            return m;
        }
    }
    return -1;
}

/* The changelogs of generation subtopology s's stores, emptied: generation m after it is
 * sealed, so no task restores or is built from them again. */
static void purge_changelogs(bk_node_cleanup_t *c, int s, int m)
{
    const bk_plan_t *plan = c->plan;
    char why[160];
    snprintf(why, sizeof(why),
             "generation %d of subtopology %d is sealed (its changelogs hold "
             "its whole state)",
             plan->subs[m].generation, plan->subs[m].of);
    for (int i = 0; i < plan->nstores; i++) {
        const bk_plan_store_t *st = &plan->stores[i];
        if (st->sub == s && st->logged && st->changelog) {
            purge(c, st->changelog, plan->subs[s].partitions, 1, why);
        }
    }
}

static void work(bk_node_cleanup_t *c)
{
    const bk_plan_t *plan = c->plan;
    int nsubs = plan->nsubs;
    c->pending = 0;
    for (int s = 0; s < nsubs; s++) {
        uint8_t *st = &c->state[s];
        const bk_plan_sub_t *sub = &plan->subs[s];
        int next;
        if (!(*st & RETIRED)) {
            continue;
        }
        if (!(*st & DIRS_DONE)) {
            if (remove_dirs(c, s)) {
                *st |= DIRS_DONE;
            } else {
                c->pending = 1;
            }
        }
        if (!(*st & TOPICS_DONE)) {
            if (bk_kafka_dev_broker() || c->leader) {
                purge_topics(c, s);
                *st |= TOPICS_DONE;
            } else {
                c->pending = 1; /* the leader's; this node's if it becomes the leader */
            }
        }
        next = bk_plan_generation_sub(plan, sub->of, sub->generation + 1);
        if (!(*st & DRAINED_DONE) && next >= 0 && (c->state[next] & RETIRED)) {
            remove_drained(c, s);
            *st |= DRAINED_DONE;
        }
        /* its changelogs (and drained checkpoints): once a later generation is sealed */
        if (!(*st & LOGS_DONE) && !bk_kafka_dev_broker()) {
            int m = sealed_after(c, s);
            if (m < 0) {
                c->pending = 1;
                continue;
            }
            if (!(*st & DRAINED_DONE)) {
                remove_drained(c, s);
                *st |= DRAINED_DONE;
            }
            if (!c->leader) {
                c->pending = 1; /* the leader's; this node's if it becomes the leader */
                continue;
            }
            purge_changelogs(c, s, m);
            *st |= LOGS_DONE;
        }
    }
    c->again_at = bk_clock_mono_ms() + AGAIN_MS;
}

void bk_node_cleanup_view(bk_node_cleanup_t *c, const bk_member_view_t *view)
{
    int nsubs, more = 0;
    if (!c || view->lost) {
        return;
    }
    c->leader = view->is_leader;
    nsubs = c->plan->nsubs;
    for (int s = 0; s < nsubs; s++) {
        /* retired by the node as it applied the view (node.c, retire_replaced) */
        if (!(c->state[s] & RETIRED) && bk_plan_retired(c->plan, s)) {
            c->state[s] |= RETIRED;
            more = 1;
        }
    }
    if (more) {
        work(c);
    }
}

void bk_node_cleanup_poll(bk_node_cleanup_t *c)
{
    if (c && c->pending && bk_clock_mono_ms() >= c->again_at) {
        work(c);
    }
}
