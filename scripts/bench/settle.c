/* settle.c - scripts/bench/settle's driver, and the one-member program of the membership spec.
 * Both run the real membership code (runtime/cluster/member.c: its own consumer and producer of the
 * control topic per member) against a broker; what they simulate is only the node around
 * it: a "node" starts a task as soon as its view lists it in `running` and stops and releases
 * a task at once when the view lists it in `release` (no records, no commit).
 *
 *   settle member -b BS --app APP --node ID [--rack R] [--threads N] [--tasks T]
 *                 [--standbys K] [--heartbeat-ms MS] [--session-ms MS] [--log-level L]
 *                 [--checkpoint-ms MS]
 *       ONE member. Prints JSON lines on stdout: {"ev":"view",...} whenever its view
 *       changes, {"ev":"start"|"stop","task":T,"epoch":E,...} when its node starts or stops a
 *       task (a stop is printed before the release is published), {"ev":"left"} after a
 *       leave. SIGTERM or SIGINT: stops every task, leaves, exits 0.
 *
 *   settle bench -b BS [--members 100] [--threads 2] [--tasks 400] [--standbys 1]
 *                [--racks 3] [--heartbeat-ms MS] [--session-ms MS] [--repeat 3]
 *       N members in this process. Once they have settled, REPEAT times: a member joins,
 *       and the time from its first heartbeat (that record's timestamp) to the moment every
 *       member runs exactly its tasks of one epoch that covers all members is measured; then
 *       REPEAT times a member dies (its clients closed, no leave notice) and the same is
 *       measured from the end of its session (its last heartbeat's timestamp + the session
 *       timeout); then the leader dies once. Ends with the figures cluster.settle_ms_N,
 *       cluster.settle_dead_ms_N (medians), cluster.settle_dead_leader_ms_N and
 *       cluster.start_records_N (the most records a joiner read before it joined).
 *
 * Both take -X key=value (librdkafka settings, as beck run does). Times are wall-clock ms,
 * as the record timestamps are. */
#define _GNU_SOURCE

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/conf.h"
#include "base/log.h"
#include "cluster/member.h"

typedef struct opts {
    const char *mode, *app, *node, *rack;
    int threads, tasks, standbys, hb_ms, session_ms, members, racks, repeat;
    int ckpt_ms; /* 0: the member's default */
    int fresh;   /* 1: each measured death on a fresh app (the dev broker); 0: one app */
} opts_t;

/* A member and the node it stands for. */
typedef struct sim {
    bk_member_t *m;
    bk_member_view_t v;
    char id[64], rack[32];
    int ntasks;
    uint8_t *run;  /* [ntasks] the node runs it */
    uint8_t *prog; /* [ntasks] 0: nothing reported, 1: as an active, 2: as a standby */
    uint8_t *mark; /* scratch */
    FILE *out;     /* JSON events, or NULL */
    int dead;
} sim_t;

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The bench's main thread sleeps until some member's view changed (on_change, called on that
 * member's thread) instead of polling 100 members every millisecond. */
static pthread_mutex_t wake_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake_cond = PTHREAD_COND_INITIALIZER;
static int wake_flag;

static void on_change(void *opaque)
{
    (void)opaque;
    pthread_mutex_lock(&wake_lock);
    wake_flag = 1;
    pthread_cond_signal(&wake_cond);
    pthread_mutex_unlock(&wake_lock);
}

static void wait_change(int ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += (long)ms * 1000000;
    ts.tv_sec += ts.tv_nsec / 1000000000;
    ts.tv_nsec %= 1000000000;
    pthread_mutex_lock(&wake_lock);
    while (!wake_flag && pthread_cond_timedwait(&wake_cond, &wake_lock, &ts) == 0) {
    }
    wake_flag = 0;
    pthread_mutex_unlock(&wake_lock);
}

static void die(const char *what, const char *why)
{
    fprintf(stderr, "settle: %s: %s\n", what, why);
    exit(1);
}

/* -- JSON lines ---------------------------------------------------------------------------- */

static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') {
            fprintf(f, "\\%c", *s);
        } else if ((unsigned char)*s < 0x20) {
            fprintf(f, "\\u%04x", *s);
        } else {
            fputc(*s, f);
        }
    }
    fputc('"', f);
}

static void json_list(FILE *f, const char *name, const int32_t *l, int32_t n)
{
    fprintf(f, ",\"%s\":[", name);
    for (int32_t i = 0; i < n; i++) {
        fprintf(f, i ? ",%d" : "%d", l[i]);
    }
    fputc(']', f);
}

static void emit_task(sim_t *s, const char *ev, int32_t t, const char *why)
{
    if (!s->out) {
        return;
    }
    fprintf(s->out, "{\"ev\":\"%s\",\"t\":%lld,\"node\":", ev, (long long)now_ms());
    json_str(s->out, s->id);
    fprintf(s->out, ",\"task\":%d,\"epoch\":%llu", t, (unsigned long long)s->v.epoch);
    if (why) {
        fprintf(s->out, ",\"why\":\"%s\"", why);
    }
    fprintf(s->out, "}\n");
}

static void emit_view(sim_t *s)
{
    const bk_member_view_t *v = &s->v;
    FILE *f = s->out;
    if (!f) {
        return;
    }
    fprintf(f, "{\"ev\":\"view\",\"t\":%lld,\"node\":", (long long)now_ms());
    json_str(f, s->id);
    fprintf(f,
            ",\"inc\":%llu,\"epoch\":%llu,\"joined\":%s,\"lost\":%s,\"stable\":%s,"
            "\"is_leader\":%s,\"log_time\":%lld,\"join_ts\":%lld,\"leader\":",
            (unsigned long long)v->incarnation, (unsigned long long)v->epoch,
            v->joined ? "true" : "false", v->lost ? "true" : "false", v->stable ? "true" : "false",
            v->is_leader ? "true" : "false", (long long)v->log_time, (long long)v->join_ts);
    if (v->leader >= 0) {
        json_str(f, v->peers[v->leader].id);
    } else {
        fputs("null", f);
    }
    fputs(",\"members\":[", f);
    for (int32_t i = 0; i < v->npeers; i++) {
        static const char *states[] = {"alive", "dead", "left", "replaced"};
        fputs(i ? ",{\"id\":" : "{\"id\":", f);
        json_str(f, v->peers[i].id);
        fputs(",\"rack\":", f);
        json_str(f, v->peers[i].rack);
        fprintf(f, ",\"state\":\"%s\",\"epoch\":%llu,\"last_ts\":%lld}", states[v->peers[i].state],
                (unsigned long long)v->peers[i].epoch, (long long)v->peers[i].last_ts);
    }
    fputc(']', f);
    json_list(f, "running", v->running, v->nrunning);
    json_list(f, "waiting", v->waiting, v->nwaiting);
    json_list(f, "release", v->release, v->nrelease);
    json_list(f, "standby", v->standby, v->nstandby);
    fputs(",\"error\":", f);
    if (v->error) {
        json_str(f, v->error);
    } else {
        fputs("null", f);
    }
    fputs("}\n", f);
}

/* -- The simulated node -------------------------------------------------------------------- */

static void sim_init(sim_t *s, const bk_conf_t *conf, const opts_t *o, const char *app,
                     const char *id, const char *rack, int notify)
{
    bk_member_conf_t mc = {0};
    char err[512];

    memset(s, 0, sizeof(*s));
    snprintf(s->id, sizeof(s->id), "%s", id);
    snprintf(s->rack, sizeof(s->rack), "%s", rack ? rack : "");
    s->ntasks = o->tasks;
    s->run = calloc((size_t)o->tasks + 1, 1);
    s->prog = calloc((size_t)o->tasks + 1, 1);
    s->mark = calloc((size_t)o->tasks + 1, 1);
    if (!s->run || !s->prog || !s->mark) {
        die(id, "out of memory");
    }
    mc.conf = conf;
    mc.app_id = app;
    mc.node_id = s->id;
    mc.rack = s->rack;
    mc.endpoint = "127.0.0.1:0";
    mc.threads = o->threads;
    mc.ntasks = o->tasks;
    mc.standbys = o->standbys;
    mc.heartbeat_interval_ms = o->hb_ms;
    mc.session_timeout_ms = o->session_ms;
    mc.checkpoint_interval_ms = o->ckpt_ms;
    mc.on_change = notify ? on_change : NULL;
    s->m = bk_member_new(&mc, err, sizeof(err));
    if (!s->m) {
        die(id, err);
    }
    if (bk_member_start(s->m, err, sizeof(err)) != 0) {
        die(id, err);
    }
}

static void sim_report(sim_t *s, int32_t t, int what)
{
    if (s->prog[t] != what) {
        s->prog[t] = (uint8_t)what;
        /* an active is caught up; a standby some records behind */
        bk_member_set_progress(s->m, t, 0, what == 0 ? -1 : what == 1 ? 0 : 10 + t % 7);
    }
}

/* Polls the member and does what the view says: stop and release, then start. Returns 1 if
 * the view changed. */
static int sim_step(sim_t *s)
{
    bk_member_view_t *v = &s->v;
    int r;

    if (s->dead || (r = bk_member_poll(s->m, v)) <= 0) {
        return 0;
    }
    memset(s->mark, 0, (size_t)s->ntasks);
    for (int32_t i = 0; i < v->nrunning; i++) {
        s->mark[v->running[i]] = 1;
    }
    for (int32_t t = 0; t < s->ntasks; t++) {
        if (s->run[t] && !s->mark[t]) {
            s->run[t] = 0;
            emit_task(s, "stop", t, v->lost ? "lost" : "release");
        }
    }
    if (v->nrelease > 0) {
        bk_member_released(s->m, v->epoch, v->release, v->nrelease);
    }
    for (int32_t i = 0; i < v->nrunning; i++) {
        int32_t t = v->running[i];
        if (t < s->ntasks && !s->run[t]) {
            s->run[t] = 1;
            emit_task(s, "start", t, NULL);
        }
    }
    for (int32_t i = 0; i < v->nstandby; i++) {
        s->mark[v->standby[i]] |= 2;
    }
    for (int32_t t = 0; t < s->ntasks; t++) {
        sim_report(s, t, s->run[t] ? 1 : (s->mark[t] & 2) ? 2 : 0);
    }
    emit_view(s);
    return 1;
}

static void sim_free(sim_t *s)
{
    bk_member_destroy(s->m);
    bk_member_view_clear(&s->v);
    free(s->run);
    free(s->prog);
    free(s->mark);
}

/* -- member: one member, JSON on stdout ----------------------------------------------------- */

static int run_member(const bk_conf_t *conf, const opts_t *o)
{
    sigset_t set;
    sim_t s;
    int rc;

    if (!o->node) {
        die("member", "--node is needed");
    }
    /* Before any thread exists, so that only sigtimedwait() below takes them. */
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    setvbuf(stdout, NULL, _IOLBF, 0);
    sim_init(&s, conf, o, o->app, o->node, o->rack, 0);
    s.out = stdout;
    for (;;) {
        struct timespec ts = {0, 2000000};
        if (sigtimedwait(&set, NULL, &ts) > 0) {
            break;
        }
        sim_step(&s);
    }
    /* SIGTERM: stop everything, then leave. */
    for (int32_t t = 0; t < s.ntasks; t++) {
        if (s.run[t]) {
            s.run[t] = 0;
            emit_task(&s, "stop", t, "leave");
        }
    }
    rc = bk_member_stop(s.m, 1);
    printf("{\"ev\":\"left\",\"t\":%lld,\"ok\":%s}\n", (long long)now_ms(),
           rc == 0 ? "true" : "false");
    sim_free(&s);
    return 0;
}

/* -- bench: N members in this process ------------------------------------------------------ */

typedef struct bench {
    const opts_t *o;
    const bk_conf_t *conf;
    char app[128]; /* of the current cluster */
    sim_t *sims;
    int n, cap;
    int *count; /* [tasks] scratch */
} bench_t;

static int alive_sims(const bench_t *b)
{
    int k = 0;
    for (int i = 0; i < b->n; i++) {
        k += !b->sims[i].dead;
    }
    return k;
}

/* Every live member is in one epoch that covers exactly the live members, has nothing to
 * release or wait for, and each task runs on exactly one node. */
static int settled(bench_t *b, uint64_t *epoch)
{
    int alive = alive_sims(b), first = 1;
    uint64_t e = 0;

    memset(b->count, 0, (size_t)b->o->tasks * sizeof(*b->count));
    for (int i = 0; i < b->n; i++) {
        sim_t *s = &b->sims[i];
        const bk_member_view_t *v = &s->v;
        int live = 0;
        if (s->dead) {
            continue;
        }
        if (!v->joined || v->lost || !v->stable || v->nwaiting || v->nrelease ||
            (!first && v->epoch != e)) {
            return 0;
        }
        e = v->epoch;
        first = 0;
        for (int32_t j = 0; j < v->npeers; j++) {
            live += v->peers[j].state == BK_MEMBER_ALIVE;
        }
        if (live != alive) {
            return 0;
        }
        for (int t = 0; t < b->o->tasks; t++) {
            b->count[t] += s->run[t];
        }
    }
    for (int t = 0; t < b->o->tasks; t++) {
        if (b->count[t] != 1) {
            return 0;
        }
    }
    *epoch = e;
    return 1;
}

static void add_member(bench_t *b)
{
    char id[32], rack[32];
    int i = b->n;
    if (b->n == b->cap) {
        die("bench", "too many members");
    }
    snprintf(id, sizeof(id), "node-%03d", i);
    snprintf(rack, sizeof(rack), "rack-%c", 'a' + i % b->o->racks);
    sim_init(&b->sims[i], b->conf, b->o, b->app, id, rack, 1);
    b->n++;
}

/* Steps every member until settled; returns the wall time it was first seen so. */
static int64_t wait_settled(bench_t *b, int timeout_ms, uint64_t *epoch,
                            void (*watch)(bench_t *, void *), void *arg)
{
    int64_t limit = now_ms() + timeout_ms;
    int changed = 1;
    while (now_ms() < limit) {
        for (int i = 0; i < b->n; i++) {
            changed |= sim_step(&b->sims[i]);
        }
        if (watch) {
            watch(b, arg);
        }
        /* settled() is O(members x tasks): only when a view changed */
        if (changed && settled(b, epoch)) {
            return now_ms();
        }
        changed = 0;
        wait_change(50);
    }
    return -1;
}

/* Follows a dead member's last heartbeat timestamp in a survivor's view until its end. */
typedef struct victim {
    const char *id;
    int observer;
    int64_t last_ts;
    int ended;
    uint64_t epoch0;     /* the epoch before */
    int64_t seen, moved; /* when the observer saw it end; when all had a later epoch */
} victim_t;

static void watch_victim(bench_t *b, void *arg)
{
    victim_t *vt = arg;
    const bk_member_view_t *v = &b->sims[vt->observer].v;
    int later = 1;
    for (int32_t j = 0; j < v->npeers && !vt->ended; j++) {
        if (strcmp(v->peers[j].id, vt->id) == 0) {
            vt->last_ts = v->peers[j].last_ts;
            vt->ended = v->peers[j].state != BK_MEMBER_ALIVE;
            vt->seen = vt->ended ? now_ms() : 0;
        }
    }
    for (int i = 0; i < b->n && !vt->moved; i++) {
        later &= b->sims[i].dead || b->sims[i].v.epoch > vt->epoch0;
    }
    if (later && !vt->moved) {
        vt->moved = now_ms();
    }
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static int64_t median(int64_t *v, int n)
{
    qsort(v, (size_t)n, sizeof(*v), cmp_i64);
    return n ? v[n / 2] : -1;
}

static int leader_sim(const bench_t *b)
{
    for (int i = 0; i < b->n; i++) {
        if (!b->sims[i].dead && b->sims[i].v.is_leader) {
            return i;
        }
    }
    return -1;
}

/* Kills one member and measures; returns ms from the end of its session to settled. */
static int64_t kill_one(bench_t *b, int idx)
{
    victim_t vt = {b->sims[idx].id, -1, 0, 0, b->sims[idx].v.epoch, 0, 0};
    uint64_t epoch;
    int64_t t, end;

    for (int i = 0; i < b->n && vt.observer < 0; i++) {
        if (i != idx && !b->sims[i].dead) {
            vt.observer = i;
        }
    }
    watch_victim(b, &vt);
    bk_member_destroy(b->sims[idx].m); /* no leave notice: as if the process died */
    b->sims[idx].m = NULL;
    b->sims[idx].dead = 1;
    t = wait_settled(b, 6 * b->o->session_ms + 30000, &epoch, watch_victim, &vt);
    if (t < 0 || !vt.ended) {
        die("bench", "no settled epoch after a member died");
    }
    end = vt.last_ts + b->o->session_ms;
    printf("  %s died: settled at epoch %llu, %lld ms after its session ended (seen dead"
           " +%lld ms, next epoch everywhere +%lld ms)\n",
           vt.id, (unsigned long long)epoch, (long long)(t - end), (long long)(vt.seen - end),
           (long long)(vt.moved - end));
    return t - end;
}

/* N fresh members of a fresh app (its own control topic), settled. The dev broker looks up
 * every fetch's offset by walking the partition's batches from the first (librdkafka 2.0.2,
 * rdkafka_mock.c: "FIXME: Maintain an index"), and every heartbeat is a batch of its own:
 * with 100 members on one log, the broker's cost grew with the log until the members fell
 * behind. A fresh log per measured event keeps that out of the figures. */
static void cluster_up(bench_t *b, const char *suffix)
{
    int64_t t0 = now_ms(), t;
    uint64_t epoch;

    snprintf(b->app, sizeof(b->app), "%s-%s", b->o->app, suffix);
    for (int i = 0; i < b->o->members; i++) {
        add_member(b);
    }
    t = wait_settled(b, 120000, &epoch, NULL, NULL);
    if (t < 0) {
        die("bench", "the members did not settle within 120 s");
    }
    printf("  %s: %d members settled at epoch %llu, %.1f s after the first started\n", b->app,
           b->o->members, (unsigned long long)epoch, (double)(t - t0) / 1000);
    fflush(stdout);
}

static void cluster_down(bench_t *b)
{
    for (int i = 0; i < b->n; i++) {
        sim_free(&b->sims[i]);
    }
    b->n = 0;
}

static int run_bench(const bk_conf_t *conf, const opts_t *o)
{
    bench_t b = {o, conf, "", NULL, 0, o->members + o->repeat, NULL};
    int64_t *joins = calloc((size_t)o->repeat + 1, sizeof(*joins));
    int64_t *deaths = calloc((size_t)o->repeat + 1, sizeof(*deaths));
    int64_t t, leader_death = -1, start_records = 0;
    uint64_t epoch;
    char suffix[32];

    b.sims = calloc((size_t)b.cap, sizeof(*b.sims));
    b.count = calloc((size_t)o->tasks + 1, sizeof(*b.count));
    if (!b.sims || !b.count || !joins || !deaths) {
        die("bench", "out of memory");
    }
    printf("settle: %d members x %d threads, %d tasks, %d standby(s), %d racks;"
           " heartbeat %d ms, session %d ms\n",
           o->members, o->threads, o->tasks, o->standbys, o->racks, o->hb_ms, o->session_ms);

    cluster_up(&b, "join");
    for (int r = 0; r < o->repeat; r++) {
        sim_t *s;
        add_member(&b);
        s = &b.sims[b.n - 1];
        t = wait_settled(&b, 60000, &epoch, NULL, NULL);
        if (t < 0 || !s->v.join_ts) {
            die("bench", "no settled epoch after a member joined");
        }
        joins[r] = t - s->v.join_ts;
        if (s->v.start_records > start_records) {
            start_records = s->v.start_records;
        }
        printf("  %s joined: settled at epoch %llu, %lld ms after its first heartbeat; it read"
               " %lld records from offset %lld of a log of %lld\n",
               s->id, (unsigned long long)epoch, (long long)joins[r],
               (long long)s->v.start_records, (long long)s->v.start_from,
               (long long)s->v.next_offset);
        fflush(stdout);
    }
    if (o->fresh) {
        cluster_down(&b);
    }

    for (int r = 0; r <= o->repeat; r++) {
        int idx = -1, leader;
        snprintf(suffix, sizeof(suffix), r < o->repeat ? "death%d" : "leader", r);
        if (o->fresh) {
            cluster_up(&b, suffix);
        }
        leader = leader_sim(&b);
        /* a live member that is not the leader, spread over the cluster; the leader last */
        for (int k = 0; k < b.n && idx < 0 && r < o->repeat; k++) {
            int i = (17 + 31 * r + k) % b.n;
            if (i != leader && !b.sims[i].dead) {
                idx = i;
            }
        }
        t = kill_one(&b, r < o->repeat ? idx : leader);
        if (r < o->repeat) {
            deaths[r] = t;
        } else {
            leader_death = t;
            printf("  (that one was the leader)\n");
        }
        fflush(stdout);
        if (o->fresh) {
            cluster_down(&b);
        }
    }
    cluster_down(&b);

    printf("cluster.settle_ms_%d %lld\n", o->members, (long long)median(joins, o->repeat));
    printf("cluster.settle_dead_ms_%d %lld\n", o->members, (long long)median(deaths, o->repeat));
    printf("cluster.settle_dead_leader_ms_%d %lld\n", o->members, (long long)leader_death);
    /* what a joiner read before it could join: a checkpoint's tail, not the app's history */
    printf("cluster.start_records_%d %lld\n", o->members, (long long)start_records);
    fflush(stdout);
    free(b.sims);
    free(b.count);
    free(joins);
    free(deaths);
    return 0;
}

/* -- Main ---------------------------------------------------------------------------------- */

static void usage(void)
{
    fprintf(stderr,
            "usage: settle member -b BS --app APP --node ID [--rack R] [options]\n"
            "       settle bench -b BS [--members N] [--racks R] [--repeat N] [options]\n"
            "options: --threads N --tasks T --standbys K --heartbeat-ms MS --session-ms MS\n"
            "         --checkpoint-ms MS (how often the leader checkpoints the view at least)\n"
            "         --fresh 0|1 (bench: each death on a fresh app, 1, or all on one app)\n"
            "         --log-level error|warn|info|debug  -X key=value\n");
    exit(2);
}

int main(int argc, char **argv)
{
    opts_t o = {NULL, "settle", NULL, NULL, 2, 400, 1, 1000, 10000, 100, 3, 3, 0, 1};
    bk_conf_t *conf = bk_conf_new();
    const char *brokers = NULL, *level = NULL;
    char err[512];
    int rc;

    if (argc < 2 || !conf) {
        usage();
    }
    o.mode = argv[1];
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) {
            usage();
        }
        i++;
        if (strcmp(a, "-b") == 0) {
            brokers = v;
        } else if (strcmp(a, "-X") == 0) {
            if (bk_conf_add_kafka_kv(conf, v, err, sizeof(err)) != 0) {
                die("-X", err);
            }
        } else if (strcmp(a, "--app") == 0) {
            o.app = v;
        } else if (strcmp(a, "--node") == 0) {
            o.node = v;
        } else if (strcmp(a, "--rack") == 0) {
            o.rack = v;
        } else if (strcmp(a, "--log-level") == 0) {
            level = v;
        } else if (strcmp(a, "--threads") == 0) {
            o.threads = atoi(v);
        } else if (strcmp(a, "--tasks") == 0) {
            o.tasks = atoi(v);
        } else if (strcmp(a, "--standbys") == 0) {
            o.standbys = atoi(v);
        } else if (strcmp(a, "--heartbeat-ms") == 0) {
            o.hb_ms = atoi(v);
        } else if (strcmp(a, "--session-ms") == 0) {
            o.session_ms = atoi(v);
        } else if (strcmp(a, "--fresh") == 0) {
            o.fresh = atoi(v);
        } else if (strcmp(a, "--checkpoint-ms") == 0) {
            o.ckpt_ms = atoi(v);
        } else if (strcmp(a, "--members") == 0) {
            o.members = atoi(v);
        } else if (strcmp(a, "--racks") == 0) {
            o.racks = atoi(v);
        } else if (strcmp(a, "--repeat") == 0) {
            o.repeat = atoi(v);
        } else {
            usage();
        }
    }
    if (!brokers || o.members < 2 || o.racks < 1 || o.racks > 26 || o.repeat < 1) {
        usage();
    }
    bk_log_set_level(strcmp(o.mode, "bench") == 0 ? BK_LOG_WARN : BK_LOG_INFO);
    if (level && bk_log_parse_level(level) >= 0) {
        bk_log_set_level((bk_log_level_t)bk_log_parse_level(level));
    }
    if (bk_conf_set(conf, BK_CONF_BROKERS, brokers, BK_CONF_FROM_CLI, err, sizeof(err)) != 0 ||
        bk_conf_set(conf, BK_CONF_APP_ID, o.app, BK_CONF_FROM_CLI, err, sizeof(err)) != 0) {
        die("conf", err);
    }
    if (strcmp(o.mode, "member") == 0) {
        rc = run_member(conf, &o);
    } else if (strcmp(o.mode, "bench") == 0) {
        rc = run_bench(conf, &o);
    } else {
        usage();
        rc = 2;
    }
    bk_conf_destroy(conf);
    return rc;
}
