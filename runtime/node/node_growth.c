/* node_growth.c - a grown input moves its subtopology to generation 1 (node_growth.h). */
#include "node/node_growth.h"

#include <stdio.h>
#include <stdlib.h>

#include "base/clock.h"
#include "base/log.h"
#include "engine/kafka.h"

#define CHECK_MS 5000 /* as often as the stream threads look (thread_tasks.c) */

struct bk_node_growth_s {
    const bk_plan_t *plan;
    const bk_conf_t *conf;
    rd_kafka_t *rk;  /* for metadata, made when first needed */
    int64_t next_at; /* mono ms */
    int32_t *asked;  /* [cap_subs] the view's move count when this node asked, -1: never */
};

bk_node_growth_t *bk_node_growth_new(const bk_plan_t *plan, const bk_conf_t *conf)
{
    bk_node_growth_t *g = calloc(1, sizeof(*g));
    if (!g || !(g->asked = malloc((size_t)plan->cap_subs * sizeof(*g->asked)))) {
        free(g);
        return NULL;
    }
    for (int s = 0; s < plan->cap_subs; s++) {
        g->asked[s] = -1;
    }
    g->plan = plan;
    g->conf = conf;
    return g;
}

void bk_node_growth_destroy(bk_node_growth_t *g)
{
    if (!g) {
        return;
    }
    if (g->rk) {
        rd_kafka_destroy(g->rk);
    }
    free(g->asked);
    free(g);
}

/* The widest of subtopology s's inputs (the topology's own topics) now, 0 when unknown. */
static int widest(bk_node_growth_t *g, int s, const char **name)
{
    const bk_plan_t *plan = g->plan;
    const bk_plan_sub_t *sub = &plan->subs[s];
    int most = 0;
    char err[512];
    for (int i = 0; i < sub->ntopics; i++) {
        const bk_plan_topic_t *t = &plan->topics[sub->topics[i]];
        int n = 0;
        if (t->internal || !t->source) {
            continue; /* the app's own topics keep their width */
        }
        if (bk_kafka_partitions(g->rk, (const char **)&t->name, 1, &n, 2000, err,
                                sizeof(err)) != 0) {
            bk_log_debug("cannot look at %s's partitions now: %s", t->name, err);
            return 0;
        }
        if (n > most) {
            most = n;
            *name = t->name;
        }
    }
    return most;
}

void bk_node_growth_poll(bk_node_growth_t *g, bk_member_t *member, const bk_member_view_t *view)
{
    const bk_plan_t *plan;
    int nsubs;
    char err[512];
    if (!g || !view->is_leader || bk_clock_mono_ms() < g->next_at) {
        return;
    }
    g->next_at = bk_clock_mono_ms() + CHECK_MS;
    plan = g->plan;
    nsubs = plan->nsubs;
    for (int s = 0; s < nsubs; s++) {
        const bk_plan_sub_t *sub = &plan->subs[s];
        const char *name = NULL;
        int now;
        /* (one without a changelog takes its input's width at its next start: its task
         * count would not be the same on every node) */
        if (sub->passthrough || sub->generation != 0 || sub->of != s ||
            !bk_plan_sub_logged(plan, s) || bk_plan_latest_generation(plan, s) > 0 ||
            g->asked[s] == view->ngenerations) {
            continue;
        }
        if (!g->rk && !(g->rk = bk_kafka_new(g->conf, BK_KAFKA_ADMIN, "beck-growth", NULL, NULL,
                                             err, sizeof(err)))) {
            bk_log_warn("cannot look at the inputs' partitions: %s", err);
            return;
        }
        if ((now = widest(g, s, &name)) <= sub->partitions) {
            continue;
        }
        g->asked[s] = view->ngenerations;
        if (bk_member_add_generation(member, s, sub->partitions,
                                     view->ngenerations) != 0) {
            bk_log_warn("input topic %s grew from %d to %d partitions: the move of subtopology "
                        "%d to generation 1 could not be written to the control topic; tried "
                        "again in %d s",
                        name, sub->partitions, now, s, CHECK_MS / 1000);
            g->asked[s] = -1;
            continue;
        }
        bk_log_info("input topic %s grew from %d to %d partitions: subtopology %d, which reads "
                    "it by input partition, moves to generation 1 with its %d tasks (its state "
                    "by key group; the passthrough reads the new partitions)",
                    name, sub->partitions, now, s, sub->partitions);
    }
}
