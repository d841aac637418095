/* thread_moves.c - a stream thread's part in moving a subtopology to its next generation
 * (docs/repartitioning.md, Moving a generation): its passthrough tasks switch to the newest
 * generation's topic at a commit, after a barrier to every partition of the one before;
 * its tasks of a replaced generation count the barriers they read, and once each has read
 * every passthrough task's and committed, the node hears that it drained. Stream thread
 * only. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <librdkafka/rdkafka.h>

#include "base/events.h"
#include "base/log.h"
#include "base/task.h"
#include "engine/drained.h"
#include "engine/kafka.h"
#include "engine/thread_internal.h"

#define BARRIER_HEADER "beck.barrier"

static int all_read(const bk_thread_t *thr, int slot);

/* A task's part of a move is in its life (tasklife.h): draining once every barrier is read
 * (drained at the next commit), checkpointing once that commit went through (its
 * checkpoint is made and the node told at a later turn of the loop,
 * bk_thread_moves_drain_one), drained then; held: generation 0 stopped at a record of its
 * grown input that is another task's (bk_thread_moves_foreign), until the move. */

int bk_thread_moves_init(bk_thread_t *thr)
{
    thr->moves.pass_target = malloc((size_t)thr->plan->cap_topics * sizeof(int));
    thr->moves.barriers = calloc((size_t)thr->cap + 1, sizeof(*thr->moves.barriers));
    thr->moves.keycheck = calloc((size_t)thr->cap + 1, 1);
    if (!thr->moves.pass_target || !thr->moves.barriers || !thr->moves.keycheck ||
        bk_thread_seal_init(thr) != 0) {
        return -1;
    }
    for (int t = 0; t < thr->plan->cap_topics; t++) {
        thr->moves.pass_target[t] = -1; /* the plan's pass_to */
    }
    return 0;
}

void bk_thread_moves_free(bk_thread_t *thr)
{
    for (int s = 0; thr->moves.barriers && s < thr->cap; s++) {
        free(thr->moves.barriers[s]);
    }
    free(thr->moves.barriers);
    free(thr->moves.keycheck);
    free(thr->moves.pass_target);
    bk_thread_seal_free(thr);
}

void bk_thread_moves_forget(bk_thread_t *thr, int slot)
{
    free(thr->moves.barriers[slot]);
    thr->moves.barriers[slot] = NULL;
    /* (a task leaving while checkpointing: whoever opens it next drains it again, its
     * barriers are in its commits' metadata) */
    thr->moves.keycheck[slot] = 0;
    bk_thread_seal_forget(thr, slot);
}

/* Where input topic t of a passthrough (k-th of its subtopology's) goes in generation g of
 * the subtopology it feeds: that generation's k-th topic, or -1. */
static int gen_topic(const bk_plan_t *plan, int t, int g)
{
    const bk_plan_sub_t *pass = &plan->subs[plan->topics[t].sub];
    int s = bk_plan_generation_sub(plan, pass->of, g);
    for (int k = 0; s >= 0 && k < pass->ntopics; k++) {
        if (pass->topics[k] == t && k < plan->subs[s].ntopics) {
            return plan->subs[s].topics[k];
        }
    }
    return -1;
}

/* Passthrough task `slot`'s barrier for its input topic t to every partition of `topic` (a
 * generation's, which it forwards to no more): "<generation> <k> <q>", with no key or
 * value. Queued like any output: the next commit flushes it. 0, or -1 with thr->err. */
static int write_barriers(bk_thread_t *thr, int slot, int t, int topic)
{
    const bk_plan_t *plan = thr->plan;
    char v[64];
    int n = snprintf(v, sizeof(v), "%d %d %d", plan->topics[topic].generation,
                     bk_plan_passthrough_input(plan, t), thr->tasks[slot].partition);

    for (int p = 0; p < plan->topics[topic].partitions; p++) {
        rd_kafka_headers_t *h = rd_kafka_headers_new(1);
        rd_kafka_resp_err_t err;
        rd_kafka_header_add(h, BARRIER_HEADER, -1, v, n);
        for (;;) {
            err = rd_kafka_producev(thr->kafka.producer, RD_KAFKA_V_RKT(thr->kafka.out_rkts[topic]),
                                    RD_KAFKA_V_PARTITION(p), RD_KAFKA_V_HEADERS(h), RD_KAFKA_V_END);
            if (err != RD_KAFKA_RESP_ERR__QUEUE_FULL) {
                break;
            }
            rd_kafka_poll(thr->kafka.producer, 5);
        }
        if (err) {
            rd_kafka_headers_destroy(h); /* not taken over on failure */
            bk_thread_producer_broken(thr);
            snprintf(thr->err, sizeof(thr->err), "task %s: cannot write its barrier to %s [%d]: %s",
                     BK_TASK_NAME(thr->tasks[slot]), plan->topics[topic].name, p,
                     rd_kafka_err2str(err));
            return -1;
        }
    }
    bk_log_info("task %s: forwards %s to %s now, after a barrier to the %d partition(s) of %s",
                BK_TASK_NAME(thr->tasks[slot]), plan->topics[t].name,
                plan->topics[bk_thread_pass_target(thr, t)].name, plan->topics[topic].partitions,
                plan->topics[topic].name);
    return 0;
}

/* The newest generation's topic for passthrough input t that exists on the cluster (a move
 * just made may not have its topic yet: the switch waits for it, bk_plan_set_ready). */
static int newest(const bk_thread_t *thr, int t)
{
    const bk_plan_t *plan = thr->plan;
    const bk_plan_sub_t *pass = &plan->subs[plan->topics[t].sub];
    for (int g = bk_plan_latest_generation(plan, pass->of); g > 1; g--) {
        int to = gen_topic(plan, t, g);
        /* (and its handle made: the mark may be newer than the thread's last look) */
        if (to >= 0 && bk_plan_topic_ready(plan, to) && thr->kafka.out_rkts[to]) {
            return to;
        }
    }
    return plan->topics[t].pass_to;
}

/* backward(): a passthrough's target only moves forward. newest() falls back to an older
 * generation while the newest one's handle is missing (a producer renewed after a broker
 * fault remakes its handles at its next commit): switching back then would forward records
 * to a generation whose tasks read every passthrough's barrier and drained, where nobody
 * reads them, and the cleanup empties the topic (a suspect for a loss of the last rounds
 * under every fault at once, exactly-once, spec/04-long/02-chaos). pass_on() sends to the
 * target's handle; while that is missing its produce fails and the batch is redone. */

/* Task `slot` of generation 0 of a subtopology that moved (bk_plan_gen0_moved) stops: its
 * input is the passthrough's from the offsets it committed, it processes nothing more and
 * drains at the next commit (it has no barriers to wait for: it reads the input itself). */
static void gen0_stop(bk_thread_t *thr, int slot)
{
    bk_life_t st = bk_tasklife_state(&thr->life, slot);
    if ((st != BK_LIFE_LIVE && st != BK_LIFE_SEALING && st != BK_LIFE_HELD) ||
        !bk_plan_gen0_moved(thr->plan, thr->tasks[slot].sub)) {
        return;
    }
    bk_log_info("task %s: subtopology %d moved to generation 1: it stops at the offsets it "
                "committed, from which the passthrough reads on, and drains",
                BK_TASK_NAME(thr->tasks[slot]), thr->tasks[slot].sub);
    bk_thread_life(thr, slot, BK_LIFE_DRAINING);
    thr->moves.soon = 1;
}

int bk_thread_moves_after_commit(bk_thread_t *thr)
{
    const bk_plan_t *plan = thr->plan;

    int ready = atomic_load(&plan->nready); /* before newest() reads the marks */
    if (bk_thread_follow_plan(thr) != 0) {
        return -1;
    }
    if (ready != thr->seen.ready && thr->kafka.producer) {
        /* a move's topics were made: the producer learns them now, in one request, rather
         * than at its next metadata refresh, which its records to them (and this thread's
         * next commit, which flushes them) would wait for: 0.7 s on Kafka */
        const struct rd_kafka_metadata *md;
        if (rd_kafka_metadata(thr->kafka.producer, 1, NULL, &md, 2000) ==
            RD_KAFKA_RESP_ERR_NO_ERROR) {
            rd_kafka_metadata_destroy(md);
        }
    }
    thr->seen.ready = ready;
    /* passthroughs: what came before the commit is in the old generation; a barrier there
     * from each task, then everything to the new one */
    for (int t = 0; t < thr->seen.topics; t++) {
        int from, to;
        if (plan->topics[t].pass_to < 0 || (to = newest(thr, t)) == bk_thread_pass_target(thr, t)) {
            continue;
        }
        from = bk_thread_pass_target(thr, t);
        if (plan->topics[to].generation < plan->topics[from].generation) {
            continue; /* never back (backward()) */
        }
        thr->moves.pass_target[t] = to;
        if (bk_plan_retired(plan, plan->topics[from].sub)) {
            continue; /* a thread that starts after the move: nothing reads there any more */
        }
        for (int i = 0; i < thr->ntasks; i++) {
            int s = thr->owned[i];
            if (thr->tasks[s].sub == plan->topics[t].sub && write_barriers(thr, s, t, from) != 0) {
                return -1;
            }
        }
    }
    /* replaced generations' tasks whose barriers were all read before this commit: drained,
     * each told at a turn of the loop of its own (bk_thread_moves_drain_one) */
    for (int i = 0; i < thr->ntasks; i++) {
        int s = thr->owned[i];
        if (bk_tasklife_state(&thr->life, s) == BK_LIFE_DRAINING) {
            bk_thread_life(thr, s, BK_LIFE_CHECKPOINTING);
        }
    }
    /* generation 0 of a subtopology that moved: what it processed is committed, nothing
     * more is (thread.c drops its records); it drains at the next commit */
    for (int i = 0; i < thr->ntasks; i++) {
        gen0_stop(thr, thr->owned[i]);
    }
    return bk_thread_seal_after_commit(thr);
}

void bk_thread_moves_drain_one(bk_thread_t *thr)
{
    const bk_plan_t *plan = thr->plan;
    for (int i = 0; i < thr->ntasks; i++) {
        int s = thr->owned[i];
        char dir[4096], err[1024];
        if (bk_tasklife_state(&thr->life, s) != BK_LIFE_CHECKPOINTING) {
            continue;
        }
        bk_thread_life(thr, s, BK_LIFE_DRAINED);
        if (plan->subs[thr->tasks[s].sub].generation == 0) {
            bk_log_info("task %s: drained: what it processed of its input before the move is "
                        "committed",
                        BK_TASK_NAME(thr->tasks[s]));
        } else {
            bk_log_info("task %s: drained: every passthrough task's barrier read and what came "
                        "before committed",
                        BK_TASK_NAME(thr->tasks[s]));
        }
        bk_events_emit("drained", "\"task\":\"%s\"", BK_TASK_NAME(thr->tasks[s]));
        /* its state as handed over, for the next generation's tasks built on this node;
         * without it they replay changelogs instead. Its stores have written nothing since
         * the commit that drained it: it reads no more records. */
        if (thr->dbs[s] && bk_drained_make(thr->dbs[s], plan, thr->conf, thr->tasks[s], dir,
                                           sizeof(dir), err, sizeof(err)) != 0) {
            bk_log_warn("task %s: no checkpoint of its drained state (%s): the tasks built "
                        "from it replay its changelogs",
                        BK_TASK_NAME(thr->tasks[s]), err);
        }
        if (thr->cb.drained) {
            thr->cb.drained(thr->cb.drained_opaque, s);
        }
        return;
    }
}

int bk_thread_moves_live(bk_thread_t *thr, int slot)
{
    const bk_plan_t *plan = thr->plan;
    const bk_plan_sub_t *sub = &plan->subs[thr->tasks[slot].sub];
    if (!sub->passthrough) {
        /* by input partition, with state: a grown input puts its keys elsewhere (the
         * leader moves it: node/node_growth.c) */
        thr->moves.keycheck[slot] =
            sub->generation == 0 && bk_plan_sub_logged(plan, thr->tasks[slot].sub);
        gen0_stop(thr, slot); /* opened after the move: before it processes anything */
        if (all_read(thr, slot) && bk_tasklife_processing(&thr->life, slot)) {
            bk_log_info("task %s: every passthrough task's barrier was read before it was "
                        "opened here (its committed offsets say so): it drains at the next "
                        "commit",
                        BK_TASK_NAME(thr->tasks[slot]));
            bk_thread_life(thr, slot, BK_LIFE_DRAINING);
            thr->moves.soon = 1;
        }
        return 0;
    }
    if (bk_thread_follow_plan(thr) != 0) {
        return -1;
    }
    for (int k = 0; k < sub->ntopics; k++) {
        int t = sub->topics[k], to = newest(thr, t), from = bk_thread_pass_target(thr, t), g;
        if (plan->topics[to].generation < plan->topics[from].generation) {
            to = from; /* never back (backward()) */
        }
        /* a passthrough task starts on the newest generation (a thread that started before
         * the plan grew has not switched yet: its other live tasks of the subtopology, if
         * any, switch now, after their barriers) */
        if (to != from) {
            int retired = bk_plan_retired(plan, plan->topics[from].sub);
            thr->moves.pass_target[t] = to;
            for (int i = 0; !retired && i < thr->ntasks; i++) {
                int s = thr->owned[i];
                if (s != slot && thr->tasks[s].sub == thr->tasks[slot].sub &&
                    write_barriers(thr, s, t, from) != 0) {
                    return -1;
                }
            }
        }
        /* then its own barriers to the generation before (again, if it wrote them
         * elsewhere before: a drained task ignores them), before anything it forwards;
         * not to a retired one: all its tasks drained, and its topic may be deleted */
        g = plan->topics[to].generation;
        if (g > 1 && (from = gen_topic(plan, t, g - 1)) >= 0 &&
            !bk_plan_retired(plan, plan->topics[from].sub) &&
            write_barriers(thr, slot, t, from) != 0) {
            return -1;
        }
    }
    return 0;
}

void bk_thread_moves_foreign(bk_thread_t *thr, int slot, int t, const rd_kafka_message_t *m)
{
    const bk_plan_t *plan = thr->plan;
    const char *name = plan->topics[t].name;
    int was = plan->subs[thr->tasks[slot].sub].partitions, now = thr->tp.parts[t];
    char err[256];
    thr->moves.keycheck[slot] = 0;
    if (now <= was &&
        bk_kafka_partitions(thr->kafka.consumer, &name, 1, &now, 2000, err, sizeof(err)) != 0) {
        now = was; /* not known: as if it had not grown */
    }
    if (now <= was) {
        bk_log_warn("task %s: %s [%d] offset %lld has a key that murmur2 puts in another "
                    "partition: the topic's producer partitions otherwise, so a growth of it "
                    "could not be followed exactly (keys are checked no more)",
                    BK_TASK_NAME(thr->tasks[slot]), name, (int)m->partition, (long long)m->offset);
        return;
    }
    /* written after the growth, by a producer that partitions by murmur2 over the new
     * count: its key's state is another task's. Nothing from here on is processed; the
     * passthrough reads it after the move to generation 1 (node/node_growth.c). */
    bk_log_info("task %s: stops at %s [%d] offset %lld, a key of another task's: the topic "
                "grew from %d to %d partitions; the passthrough reads on from here once "
                "subtopology %d moves to generation 1",
                BK_TASK_NAME(thr->tasks[slot]), name, (int)m->partition, (long long)m->offset, was,
                now, thr->tasks[slot].sub);
    if (bk_tasklife_processing(&thr->life, slot)) {
        bk_thread_life(thr, slot, BK_LIFE_HELD);
    }
}

int bk_thread_moves_barrier(bk_thread_t *thr, const rd_kafka_message_t *m, int t)
{
    const bk_plan_t *plan = thr->plan;
    rd_kafka_headers_t *h = NULL;
    const void *v = NULL;
    size_t vlen = 0;
    char text[64];
    int g, k, q, slot, pass, nq, nk, bit, all = 1;

    if (rd_kafka_message_headers(m, &h) != RD_KAFKA_RESP_ERR_NO_ERROR ||
        rd_kafka_header_get_last(h, BARRIER_HEADER, &v, &vlen) != RD_KAFKA_RESP_ERR_NO_ERROR ||
        !v || vlen >= sizeof(text)) {
        return 0; /* a record without key or value of the user's */
    }
    memcpy(text, v, vlen);
    text[vlen] = '\0';
    slot = thr->tp.task_of[t][m->partition];
    pass = bk_plan_passthrough_of(plan, plan->subs[plan->topics[t].sub].of);
    if (sscanf(text, "%d %d %d", &g, &k, &q) != 3 || pass < 0 || slot < 0 ||
        g != plan->topics[t].generation) {
        bk_log_warn("%s [%d] offset %lld: a barrier '%s' this task cannot use: skipped",
                    plan->topics[t].name, (int)m->partition, (long long)m->offset, text);
        return 1;
    }
    nq = plan->subs[pass].partitions;
    nk = plan->subs[pass].ntopics;
    if (k < 0 || k >= nk || q < 0 || q >= nq) {
        return 1;
    }
    if (!thr->moves.barriers[slot] &&
        !(thr->moves.barriers[slot] = calloc((size_t)(nq * nk + 7) / 8, 1))) {
        snprintf(thr->err, sizeof(thr->err), "out of memory");
        return -1;
    }
    bit = k * nq + q;
    thr->moves.barriers[slot][bit / 8] |= (uint8_t)(1u << (bit % 8));
    for (int b = 0; b < nq * nk && all; b++) {
        all = (thr->moves.barriers[slot][b / 8] >> (b % 8)) & 1;
    }
    if (all && bk_tasklife_processing(&thr->life, slot)) {
        bk_thread_life(thr, slot, BK_LIFE_DRAINING); /* told after the commit that covers it */
        thr->moves.soon = 1;
    }
    return 1;
}

#define META_PREFIX "beck.barriers="

/* The bitmap's size in bits for slot's task: a bit per (input k, passthrough task q). */
static int barrier_bits(const bk_thread_t *thr, int slot)
{
    const bk_plan_t *plan = thr->plan;
    const bk_plan_sub_t *sub = &plan->subs[thr->tasks[slot].sub];
    int pass = sub->passthrough || sub->generation < 1 ? -1 : bk_plan_passthrough_of(plan, sub->of);
    return pass < 0 ? 0 : plan->subs[pass].partitions * plan->subs[pass].ntopics;
}

#define TIME_META "beck.st="

char *bk_thread_moves_meta(const bk_thread_t *thr, int slot)
{
    int bits = barrier_bits(thr, slot), bytes = (bits + 7) / 8;
    int barriers = thr->moves.barriers[slot] && bits > 0, sealed = bk_thread_seal_done(thr, slot);
    int64_t st = thr->slot.time ? thr->slot.time[slot] : -1;
    size_t cap = sizeof(META_PREFIX) + 2 * (size_t)bytes + sizeof(BK_THREAD_SEALED_META) +
                 sizeof(TIME_META) + 24,
           len = 0;
    char *meta;
    /* "beck.barriers=<hex>;beck.sealed;beck.st=<ms>", each part when there is one */
    if ((!barriers && !sealed && st < 0) || !(meta = malloc(cap))) {
        return NULL;
    }
    meta[0] = '\0';
    if (barriers) {
        len = (size_t)snprintf(meta, cap, "%s", META_PREFIX);
        for (int b = 0; b < bytes; b++) {
            len += (size_t)snprintf(meta + len, cap - len, "%02x", thr->moves.barriers[slot][b]);
        }
    }
    if (sealed) {
        len +=
            (size_t)snprintf(meta + len, cap - len, "%s%s", len ? ";" : "", BK_THREAD_SEALED_META);
    }
    if (st >= 0) {
        snprintf(meta + len, cap - len, "%s%s%lld", len ? ";" : "", TIME_META, (long long)st);
    }
    return meta;
}

void bk_thread_moves_restore(bk_thread_t *thr, int slot, const char *meta)
{
    int bits = barrier_bits(thr, slot), bytes = (bits + 7) / 8;
    const char *hex, *st = strstr(meta, TIME_META);
    bk_thread_seal_restore(thr, slot, meta);
    if (st && thr->slot.time) { /* the newest of the task's partitions' */
        long long t = strtoll(st + strlen(TIME_META), NULL, 10);
        if (t > thr->slot.time[slot]) {
            thr->slot.time[slot] = t;
        }
    }
    if (bits == 0 || strncmp(meta, META_PREFIX, strlen(META_PREFIX)) != 0 ||
        strcspn(hex = meta + strlen(META_PREFIX), ";") != 2 * (size_t)bytes) {
        return; /* not ours, or of another passthrough count */
    }
    if (!thr->moves.barriers[slot] && !(thr->moves.barriers[slot] = calloc((size_t)bytes, 1))) {
        return; /* counted again from the records, as far as they are read again */
    }
    for (int b = 0; b < bytes; b++) {
        unsigned v;
        if (sscanf(hex + 2 * b, "%2x", &v) == 1) {
            thr->moves.barriers[slot][b] |= (uint8_t)v;
        }
    }
    /* every one read: it drains once live (bk_thread_moves_live) */
}

/* Every passthrough task's barrier read by slot's task (a replaced generation's). */
static int all_read(const bk_thread_t *thr, int slot)
{
    int bits = barrier_bits(thr, slot), all = thr->moves.barriers[slot] && bits > 0;
    for (int b = 0; b < bits && all; b++) {
        all = (thr->moves.barriers[slot][b / 8] >> (b % 8)) & 1;
    }
    return all;
}
