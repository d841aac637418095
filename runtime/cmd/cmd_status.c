/* cmd_status.c - `beck status -b BROKERS --app ID [TOPOLOGY.lua] [--json]`: one look at an app's
 * cluster through its control topic, read by an observer member (member.h) to where the log
 * ended when it started. Times are relative to log time (the largest record timestamp),
 * which is what the members' rules use, not to this host's clock. */
#define _GNU_SOURCE

#include "cmd/cmd_status.h"
#include "base/clock.h"
#include "base/task.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/conf.h"
#include "base/log.h"
#include "cluster/member.h"
#include "cmd/cmd_opts.h"
#include "cmd/cmd_status_life.h"
#include "engine/kafka.h"
#include "engine/plan.h"
#include "engine/vm.h"
#include "replica/standby.h"

#define BK_STATUS_TIMEOUT_MS 10000

static const char *const bk_status_states[] = {"alive", "dead", "left", "replaced"};

typedef struct bk_status_opts {
    const char *app, *topology, *token;
    int json;
    long timeout_ms, session_ms;
} bk_status_opts_t;

static void bk_status_usage(FILE *out)
{
    fprintf(out,
            "usage: beck status -b BROKERS --app ID [TOPOLOGY.lua] [--json]\n"
            "                   [--timeout-ms N] [--session-timeout-ms N] [-X key=value]...\n"
            "                   [-F file.properties]\n\n"
            "Prints an app's cluster as its control topic <ID>-control shows it: the nodes\n"
            "(rack, endpoint, threads, state, incarnation, last heartbeat, the epoch each\n"
            "applied, active and standby tasks), the current epoch, the leader, whether the\n"
            "assignment is stable, and every task's active node, its holder while a handoff\n"
            "is pending, its standbys and the progress its replicas report; with a topology,\n"
            "each task's state in its life on its active node (its /v1/status, asked at\n"
            "the endpoint it announces). It only reads.\n\n"
            "  -b BROKERS               bootstrap brokers (host:port,...)\n"
            "  --app ID                 the app (default: the topology's id)\n"
            "  TOPOLOGY.lua             name tasks <subtopology>_<partition> as nodes do;\n"
            "                           without it tasks are numbered 0..N-1\n"
            "  --json                   one JSON object instead of tables\n"
            "  --token T                the nodes' bearer token for their /v1/status\n"
            "                           (default: $BECK_HTTP_TOKEN)\n"
            "  --timeout-ms N           give up when the topic is not read to its end in\n"
            "                           this time [%d]\n"
            "  --session-timeout-ms N   the members' session timeout (default: the one their\n"
            "                           heartbeats announce)\n"
            "  -X key=value, -F FILE    librdkafka settings, as for beck run\n\n"
            "Exits 1 when the control topic does not exist or cannot be read in time.\n",
            BK_STATUS_TIMEOUT_MS);
}

/* -1: error (message printed), 0: ok, 1: help printed. */
static int bk_status_parse(int argc, char **argv, bk_conf_t *conf, bk_status_opts_t *o)
{
    const bk_cmd_opt_t opts[] = {
        {NULL, BK_OPT_KAFKA, NULL, 0, 0},
        {"--app", BK_OPT_STR, &o->app, 0, 0},
        {"--json", BK_OPT_FLAG, &o->json, 0, 0},
        {"--token", BK_OPT_STR, &o->token, 0, 0},
        {"--timeout-ms", BK_OPT_INT, &o->timeout_ms, 1, 3600 * 1000},
        {"--session-timeout-ms", BK_OPT_INT, &o->session_ms, 1, 3600 * 1000},
    };
    bk_cmd_args_t args = {"status", opts, 6, conf, &o->topology, 1, 0};
    int rc = bk_cmd_opts_parse(&args, argc, argv);
    if (rc == 1) {
        bk_status_usage(stdout);
    }
    return rc;
}

/* -- Task names ---------------------------------------------------------------------------- */

/* Names "<sub>_<partition>" in the order bk_plan_tasks (engine/plan.h) numbers the tasks
 * (subtopology by subtopology, partitions ascending), with the partition counts the cluster's
 * metadata has now. NULL (with a warning on stderr) when they cannot be found or do not add
 * up to the assignment's task count: the caller prints indices then. */
static char **bk_status_names(bk_plan_t *plan, const bk_conf_t *conf, int32_t ntasks)
{
    const char **topics = calloc((size_t)plan->ntopics + 1, sizeof(*topics));
    int *counts = calloc((size_t)plan->ntopics + 1, sizeof(*counts));
    char **names = NULL, err[512];
    rd_kafka_t *rk = NULL;
    int32_t n = 0;

    if (!topics || !counts) {
        snprintf(err, sizeof(err), "out of memory");
        goto fail;
    }
    for (int i = 0; i < plan->ntopics; i++) {
        topics[i] = plan->topics[i].name;
    }
    rk = bk_kafka_new(conf, BK_KAFKA_ADMIN, "beck-status", NULL, NULL, err, sizeof(err));
    if (!rk || bk_kafka_partitions(rk, topics, plan->ntopics, counts, 10000, err, sizeof(err))) {
        goto fail;
    }
    for (int s = 0; s < plan->nsubs; s++) {
        int c = counts[plan->subs[s].topics[0]];
        if (c == 0) {
            snprintf(err, sizeof(err), "topic %s does not exist",
                     plan->topics[plan->subs[s].topics[0]].name);
            goto fail;
        }
        if (plan->subs[s].want > 0) {
            c = plan->subs[s].want; /* a passthrough: as many tasks as its generation's, not
                                       its input's width (topics.c) */
        }
        plan->subs[s].partitions = c;
        n += c;
    }
    if (n != ntasks) {
        snprintf(err, sizeof(err),
                 "the topology has %d tasks on this cluster, the app's"
                 " assignment %d",
                 n, ntasks);
        goto fail;
    }
    names = calloc((size_t)n + 1, sizeof(*names)); /* NULL-terminated, for the frees */
    n = 0;
    for (int s = 0; names && s < plan->nsubs; s++) {
        for (int p = 0; p < plan->subs[s].partitions; p++) {
            char name[BK_TASK_NAME_MAX];
            if (!(names[n] = strdup(bk_task_name((bk_task_id_t){s, p}, name)))) {
                names[n] = NULL;
                snprintf(err, sizeof(err), "out of memory");
                goto fail;
            }
            n++;
        }
    }
    if (!names) {
        snprintf(err, sizeof(err), "out of memory");
        goto fail;
    }
    goto done;

fail:
    fprintf(stderr, "beck status: tasks are numbered, not named: %s\n", err);
    for (int32_t t = 0; names && names[t]; t++) {
        free(names[t]);
    }
    free(names);
    names = NULL;
done:
    if (rk) {
        rd_kafka_destroy(rk);
    }
    free(topics);
    free(counts);
    return names;
}

/* -- Text output --------------------------------------------------------------------------- */

/* A table of text cells printed with aligned columns (the last one unpadded). */
typedef struct bk_status_table {
    int ncols, ncells, cap, oom;
    char **cells;
} bk_status_table_t;

static void bk_status_cell(bk_status_table_t *tb, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void bk_status_cell(bk_status_table_t *tb, const char *fmt, ...)
{
    va_list ap;
    char *s;
    if (tb->ncells == tb->cap) {
        int cap = tb->cap ? tb->cap * 2 : 64;
        char **cells = realloc(tb->cells, (size_t)cap * sizeof(*cells));
        if (!cells) {
            tb->oom = 1;
            return;
        }
        tb->cells = cells;
        tb->cap = cap;
    }
    va_start(ap, fmt);
    if (vasprintf(&s, fmt, ap) < 0) {
        s = NULL;
        tb->oom = 1;
    }
    va_end(ap);
    tb->cells[tb->ncells++] = s;
}

static void bk_status_table_print(bk_status_table_t *tb, FILE *out)
{
    int width[16] = {0};
    for (int i = 0; i < tb->ncells; i++) {
        int len = tb->cells[i] ? (int)strlen(tb->cells[i]) : 0;
        if (len > width[i % tb->ncols]) {
            width[i % tb->ncols] = len;
        }
    }
    for (int i = 0; i < tb->ncells; i++) {
        int col = i % tb->ncols;
        const char *cell = tb->cells[i] ? tb->cells[i] : "";
        if (col == tb->ncols - 1) {
            fprintf(out, "%s\n", cell);
        } else {
            fprintf(out, "%-*s  ", width[col], cell);
        }
    }
    for (int i = 0; i < tb->ncells; i++) {
        free(tb->cells[i]);
    }
    free(tb->cells);
    memset(tb, 0, sizeof(*tb));
}

/* "1.2 s", "850 ms": how long ago, from a duration in ms. */
static void bk_status_ago(char *buf, size_t size, int64_t ms)
{
    if (ms < 10000) {
        snprintf(buf, size, "%" PRId64 " ms", ms);
    } else {
        snprintf(buf, size, "%.1f s", (double)ms / 1000.0);
    }
}

static const char *bk_status_peer_name(const bk_member_view_t *v, int32_t p, char *buf, size_t size)
{
    if (p < 0) {
        return "-";
    }
    if (v->peers[p].state == BK_MEMBER_ALIVE) {
        return v->peers[p].id;
    }
    snprintf(buf, size, "%s (%s)", v->peers[p].id, bk_status_states[v->peers[p].state]);
    return buf;
}

/* The progress entry of task t after entry `prev` (-1: the first), the active's first and
 * then the others in the view's order; -1 when there is none left. The list is by peer,
 * then task: each call scans it all, which is fine for a command that prints once. */
static int32_t bk_status_next_progress(const bk_member_view_t *v, int32_t t, int32_t prev)
{
    int32_t owner = v->owner[t], i = 0;
    int past_owner = prev >= 0 && v->progress[prev].peer == owner;
    if (prev < 0 || past_owner) {
        /* the active's entry first, then everything else from the start */
        for (i = 0; prev < 0 && i < v->nprogress; i++) {
            if (v->progress[i].task == t && v->progress[i].peer == owner) {
                return i;
            }
        }
        i = 0;
    } else {
        i = prev + 1;
    }
    for (; i < v->nprogress; i++) {
        if (v->progress[i].task == t && v->progress[i].peer != owner) {
            return i;
        }
    }
    return -1;
}

/* A task of a generation a move replaced, drained and given to no one: it has nothing more
 * to do (docs/repartitioning.md). */
static int bk_status_retired(const bk_member_view_t *v, int32_t t)
{
    if (v->owner[t] >= 0) {
        return 0;
    }
    for (int32_t i = 0; i < v->ndrained; i++) {
        if (v->drained[i] == t) {
            return 1;
        }
    }
    return 0;
}

static void bk_status_print_text(const bk_member_view_t *v, const char *app, const char *topic,
                                 char **names, const int32_t *nactive, const int32_t *nstandby,
                                 const bk_status_life_t *life)
{
    bk_status_table_t tb = {.ncols = 10};
    int32_t alive = 0, pr = 0;
    char when[64] = "-", ago[32];
    time_t secs = (time_t)(v->log_time / 1000);
    struct tm tm;

    for (int32_t i = 0; i < v->npeers; i++) {
        alive += v->peers[i].state == BK_MEMBER_ALIVE;
    }
    if (v->log_time > 0 && gmtime_r(&secs, &tm)) {
        size_t n = strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", &tm);
        snprintf(when + n, sizeof(when) - n, ".%03d UTC", (int)(v->log_time % 1000));
    }
    printf("app %s: ", app);
    if (v->epoch > 0) {
        printf("epoch %" PRIu64, v->epoch);
    } else {
        printf("no assignment yet");
    }
    printf(", leader %s, %s\n", v->leader >= 0 ? v->peers[v->leader].id : "none",
           v->stable ? "stable" : "not stable (the assignment does not cover the live nodes)");
    printf("control topic %s: %" PRId64 " records, log time %s, session timeout %d ms\n\n", topic,
           v->next_offset, when, v->session_timeout_ms);

    printf("nodes: %d alive, %d ended\n", alive, v->npeers - alive);
    bk_status_cell(&tb, "NODE");
    bk_status_cell(&tb, "RACK");
    bk_status_cell(&tb, "ENDPOINT");
    bk_status_cell(&tb, "THREADS");
    bk_status_cell(&tb, "STATE");
    bk_status_cell(&tb, "INCARNATION");
    bk_status_cell(&tb, "HEARTBEAT");
    bk_status_cell(&tb, "EPOCH");
    bk_status_cell(&tb, "ACTIVE");
    bk_status_cell(&tb, "STANDBY");
    for (int32_t i = 0; i < v->npeers; i++) {
        const bk_member_peer_t *p = &v->peers[i];
        bk_status_ago(ago, sizeof(ago), v->log_time - p->last_ts);
        bk_status_cell(&tb, "%s%s", p->id, i == v->leader ? " *" : "");
        bk_status_cell(&tb, "%s", p->rack[0] ? p->rack : "-");
        bk_status_cell(&tb, "%s", p->endpoint[0] ? p->endpoint : "-");
        bk_status_cell(&tb, "%d", p->threads);
        bk_status_cell(&tb, "%s", bk_status_states[p->state]);
        bk_status_cell(&tb, "%" PRIu64, p->incarnation);
        bk_status_cell(&tb, "%s ago", ago);
        bk_status_cell(&tb, "%" PRIu64, p->epoch);
        bk_status_cell(&tb, "%d", nactive[i]);
        bk_status_cell(&tb, "%d", nstandby[i]);
    }
    bk_status_table_print(&tb, stdout);
    if (v->leader >= 0) {
        printf("(* leader)\n");
    }

    /* repartitioning (docs/repartitioning.md): the moves made, and how many tasks of the
     * generations they replace have drained to their barriers */
    if (v->generations[0]) {
        printf("\nmoves: %s (subtopology=tasks, oldest first); %d task(s) of replaced "
               "generations drained\n",
               v->generations, v->ndrained);
    }
    printf("\ntasks: %d, standby replicas per task: %d\n", v->ntasks, v->k);
    tb.ncols = 6;
    bk_status_cell(&tb, "TASK");
    bk_status_cell(&tb, "ACTIVE");
    bk_status_cell(&tb, "STATE");
    bk_status_cell(&tb, "HOLDER");
    bk_status_cell(&tb, "STANDBY");
    bk_status_cell(&tb, "PROGRESS");
    for (int32_t t = 0; t < v->ntasks; t++) {
        char a[300], h[300], sb[1024] = "", prog[2048] = "";
        size_t used = 0;
        int32_t owner = v->owner[t], holder = v->holder[t];

        if (names) {
            bk_status_cell(&tb, "%s", names[t]);
        } else {
            bk_status_cell(&tb, "%d", t);
        }
        bk_status_cell(&tb, "%s",
                       bk_status_retired(v, t) ? "retired"
                                               : bk_status_peer_name(v, owner, a, sizeof(a)));
        if (life && life[t].state[0]) {
            bk_status_cell(&tb, "%s %.1f s", life[t].state, (double)life[t].for_ms / 1000.0);
        } else {
            bk_status_cell(&tb, "-");
        }
        /* the holder only when a handoff is pending */
        bk_status_cell(&tb, "%s",
                       holder == owner ? "-"
                       : holder < 0    ? "none"
                                       : bk_status_peer_name(v, holder, h, sizeof(h)));
        for (int32_t j = 0; j < v->k; j++) {
            int32_t s = v->standby_of[(size_t)t * (size_t)v->k + (size_t)j];
            if (s >= 0 && used < sizeof(sb)) {
                used += (size_t)snprintf(sb + used, sizeof(sb) - used, "%s%s", used ? "," : "",
                                         bk_status_peer_name(v, s, a, sizeof(a)));
            }
        }
        bk_status_cell(&tb, "%s", used ? sb : "-");
        used = 0;
        for (pr = bk_status_next_progress(v, t, -1); pr >= 0 && used < sizeof(prog);
             pr = bk_status_next_progress(v, t, pr)) {
            const bk_member_progress_t *x = &v->progress[pr];
            bk_status_ago(ago, sizeof(ago), v->log_time - x->changed_ts);
            if (x->lag >= BK_STANDBY_UNBUILT_LAG) {
                used += (size_t)snprintf(prog + used, sizeof(prog) - used, "%s%s: not built",
                                         used ? "; " : "", v->peers[x->peer].id);
                continue;
            }
            used +=
                (size_t)snprintf(prog + used, sizeof(prog) - used,
                                 "%s%s: offset %" PRId64 ", lag %" PRId64 ", applied %s ago",
                                 used ? "; " : "", v->peers[x->peer].id, x->offset, x->lag, ago);
        }
        bk_status_cell(&tb, "%s", used ? prog : "-");
    }
    if (tb.oom) {
        fprintf(stderr, "beck status: out of memory\n");
    }
    bk_status_table_print(&tb, stdout);
}

/* -- JSON output --------------------------------------------------------------------------- */

/* Length of the valid UTF-8 sequence at s (2..4), 0 if there is none. */
static int bk_status_utf8(const unsigned char *s)
{
    unsigned char c = s[0];
    int n = 0;
    if (c >= 0xc2 && c <= 0xdf) {
        n = 2;
    } else if (c >= 0xe0 && c <= 0xef) {
        n = 3;
    } else if (c >= 0xf0 && c <= 0xf4) {
        n = 4;
    }
    for (int i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80) {
            return 0;
        }
    }
    /* overlong forms, surrogates, past U+10FFFF */
    if ((c == 0xe0 && s[1] < 0xa0) || (c == 0xed && s[1] > 0x9f) || (c == 0xf0 && s[1] < 0x90) ||
        (c == 0xf4 && s[1] > 0x8f)) {
        return 0;
    }
    return n;
}

/* A JSON string: valid UTF-8 as is, control characters escaped, any other byte (ids are
 * bytes, not necessarily UTF-8) as the code point of the same number, so the output always
 * parses. NULL is null. */
static void bk_status_json_str(FILE *out, const char *str)
{
    const unsigned char *s = (const unsigned char *)str;
    if (!s) {
        fputs("null", out);
        return;
    }
    fputc('"', out);
    while (*s) {
        int n;
        if (*s == '"' || *s == '\\') {
            fprintf(out, "\\%c", *s++);
        } else if (*s == '\n') {
            fputs("\\n", out);
            s++;
        } else if (*s < 0x20 || *s == 0x7f) {
            fprintf(out, "\\u%04x", *s++);
        } else if (*s < 0x80) {
            fputc(*s++, out);
        } else if ((n = bk_status_utf8(s)) > 0) {
            fwrite(s, 1, (size_t)n, out);
            s += n;
        } else {
            fprintf(out, "\\u%04x", *s++);
        }
    }
    fputc('"', out);
}

static void bk_status_json_peer(FILE *out, const bk_member_view_t *v, int32_t p)
{
    bk_status_json_str(out, p >= 0 ? v->peers[p].id : NULL);
}

static void bk_status_print_json(const bk_member_view_t *v, const char *app, const char *topic,
                                 char **names, const int32_t *nactive, const int32_t *nstandby,
                                 const bk_status_life_t *life)
{
    FILE *out = stdout;

    fputs("{\"app\":", out);
    bk_status_json_str(out, app);
    fputs(",\"control_topic\":", out);
    bk_status_json_str(out, topic);
    fprintf(out,
            ",\"records\":%" PRId64 ",\"log_time\":%" PRId64 ",\"session_timeout_ms\":%d,"
            "\"epoch\":%" PRIu64 ",\"leader\":",
            v->next_offset, v->log_time, v->session_timeout_ms, v->epoch);
    bk_status_json_peer(out, v, v->leader);
    fprintf(out, ",\"stable\":%s,\"moves\":", v->stable ? "true" : "false");
    bk_status_json_str(out, v->generations);
    fputs(",\"drained\":[", out);
    for (int32_t i = 0; i < v->ndrained; i++) {
        fprintf(out, "%s%d", i ? "," : "", v->drained[i]);
    }
    fputs("],\"nodes\":[", out);
    for (int32_t i = 0; i < v->npeers; i++) {
        const bk_member_peer_t *p = &v->peers[i];
        fputs(i ? ",{\"id\":" : "{\"id\":", out);
        bk_status_json_str(out, p->id);
        fputs(",\"rack\":", out);
        bk_status_json_str(out, p->rack);
        fputs(",\"endpoint\":", out);
        bk_status_json_str(out, p->endpoint);
        fprintf(out,
                ",\"threads\":%d,\"state\":\"%s\",\"incarnation\":%" PRIu64
                ",\"join_offset\":%" PRId64 ",\"heartbeat_ms_ago\":%" PRId64 ",\"epoch\":%" PRIu64
                ",\"active\":%d,\"standby\":%d,\"leader\":%s}",
                p->threads, bk_status_states[p->state], p->incarnation, p->join_offset,
                v->log_time - p->last_ts, p->epoch, nactive[i], nstandby[i],
                i == v->leader ? "true" : "false");
    }
    fprintf(out, "],\"standbys\":%d,\"tasks\":[", v->k);
    for (int32_t t = 0; t < v->ntasks; t++) {
        int first = 1;
        fprintf(out, "%s{\"task\":%d", t ? "," : "", t);
        if (names) {
            fputs(",\"name\":", out);
            bk_status_json_str(out, names[t]);
        }
        fputs(",\"active\":", out);
        bk_status_json_peer(out, v, v->owner[t]);
        /* its state on its active node (engine/tasklife.h), null when that did not say */
        fputs(",\"state\":", out);
        bk_status_json_str(out, life && life[t].state[0] ? life[t].state : NULL);
        fprintf(out, ",\"state_for_ms\":%lld",
                life && life[t].state[0] ? (long long)life[t].for_ms : -1LL);
        fputs(",\"holder\":", out);
        bk_status_json_peer(out, v, v->holder[t]);
        fprintf(out, ",\"handoff\":%s,\"retired\":%s,\"standby\":[",
                v->holder[t] != v->owner[t] ? "true" : "false",
                bk_status_retired(v, t) ? "true" : "false");
        for (int32_t j = 0; j < v->k; j++) {
            int32_t s = v->standby_of[(size_t)t * (size_t)v->k + (size_t)j];
            if (s >= 0) {
                fputs(first ? "" : ",", out);
                bk_status_json_peer(out, v, s);
                first = 0;
            }
        }
        fputs("],\"progress\":[", out);
        first = 1;
        for (int32_t i = bk_status_next_progress(v, t, -1); i >= 0;
             i = bk_status_next_progress(v, t, i)) {
            const bk_member_progress_t *x = &v->progress[i];
            fputs(first ? "{\"node\":" : ",{\"node\":", out);
            bk_status_json_peer(out, v, x->peer);
            fprintf(out,
                    ",\"offset\":%" PRId64 ",\"lag\":%" PRId64 ",\"applied_ms_ago\":%" PRId64
                    ",\"built\":%s}",
                    x->offset, x->lag, v->log_time - x->changed_ts,
                    x->lag >= BK_STANDBY_UNBUILT_LAG ? "false" : "true");
            first = 0;
        }
        fputs("]}", out);
    }
    fputs("]}\n", out);
}

/* -- Main ---------------------------------------------------------------------------------- */

int bk_cmd_status_main(int argc, char **argv)
{
    bk_status_opts_t o = {.timeout_ms = BK_STATUS_TIMEOUT_MS};
    bk_conf_t *conf = bk_conf_new();
    lua_State *L = NULL;
    bk_plan_t *plan = NULL;
    bk_member_t *member = NULL;
    bk_member_view_t view;
    bk_member_conf_t mc;
    int32_t *nactive = NULL, *nstandby = NULL;
    bk_status_life_t *life = NULL;
    char **names = NULL, err[2048], topic[300];
    const char *app;
    int64_t deadline;
    int rc = 2;

    memset(&view, 0, sizeof(view));
    if (!conf) {
        fprintf(stderr, "beck status: out of memory\n");
        return 1;
    }
    switch (bk_status_parse(argc, argv, conf, &o)) {
    case 1:
        rc = 0;
        goto done;
    case -1:
        goto done;
    }
    /* The member's own lines (joining, epochs) are for nodes; a status shows warnings only. */
    bk_log_set_level(BK_LOG_WARN);
    rc = 1;
    if (o.topology) {
        L = bk_vm_new();
        plan = L ? bk_plan_load(L, o.topology, conf, err, sizeof(err)) : NULL;
        if (!plan) {
            fprintf(stderr, "beck status: cannot load topology: %s\n", L ? err : "out of memory");
            goto done;
        }
    }
    app = o.app ? o.app : plan ? plan->id : NULL;
    if (!app || !app[0]) {
        fprintf(stderr, "beck status: --app ID is needed (or a topology)\n");
        rc = 2;
        goto done;
    }
    if (!bk_conf_str(conf, BK_CONF_BROKERS)) {
        fprintf(stderr, "beck status: -b BROKERS is needed\n");
        rc = 2;
        goto done;
    }
    snprintf(topic, sizeof(topic), "%s-control", app);

    memset(&mc, 0, sizeof(mc));
    mc.conf = conf;
    mc.app_id = app;
    mc.node_id = "status";
    mc.session_timeout_ms = (int)o.session_ms;
    mc.observe = 1;
    deadline = bk_clock_mono_ms() + o.timeout_ms;
    member = bk_member_new(&mc, err, sizeof(err));
    if (!member || bk_member_start(member, err, sizeof(err)) != 0) {
        fprintf(stderr, "beck status: app %s: %s\n", app, err);
        goto done;
    }
    /* Read up to where the log ended when the observer started: the present, not history. */
    for (;;) {
        struct timespec pause = {0, 20 * 1000 * 1000};
        bk_member_poll(member, &view);
        if (view.error) {
            fprintf(stderr, "beck status: %s: %s\n", topic, view.error);
            goto done;
        }
        if (view.caught_up) {
            break;
        }
        if (bk_clock_mono_ms() > deadline) {
            fprintf(stderr,
                    "beck status: cannot read %s to its end within %ld ms (read %" PRId64
                    " records)\n",
                    topic, o.timeout_ms, view.next_offset);
            goto done;
        }
        nanosleep(&pause, NULL);
    }
    /* Once more: heartbeats' times and progress change without a new version. */
    if (bk_member_poll_force(member, &view) < 0) {
        fprintf(stderr, "beck status: out of memory\n");
        goto done;
    }
    bk_member_stop(member, 0);

    nactive = calloc((size_t)view.npeers + 1, sizeof(*nactive));
    nstandby = calloc((size_t)view.npeers + 1, sizeof(*nstandby));
    if (!nactive || !nstandby) {
        fprintf(stderr, "beck status: out of memory\n");
        goto done;
    }
    for (int32_t t = 0; t < view.ntasks; t++) {
        if (view.owner[t] >= 0) {
            nactive[view.owner[t]]++;
        }
        for (int32_t j = 0; j < view.k; j++) {
            int32_t s = view.standby_of[(size_t)t * (size_t)view.k + (size_t)j];
            if (s >= 0) {
                nstandby[s]++;
            }
        }
    }
    /* a repartitioned app: the topology described again with its moves, as its nodes do */
    if (plan && view.generations[0] &&
        (!plan->generations || strcmp(plan->generations, view.generations) != 0) &&
        bk_plan_grow(plan, conf, L, view.generations, err, sizeof(err)) != 0) {
        fprintf(stderr, "beck status: tasks are numbered, not named: the moves %s: %s\n",
                view.generations, err);
    } else if (plan && view.ntasks > 0) {
        names = bk_status_names(plan, conf, view.ntasks);
    }
    if (names && (life = calloc((size_t)view.ntasks + 1, sizeof(*life)))) {
        bk_status_life_fetch(&view, names, o.token ? o.token : getenv("BECK_HTTP_TOKEN"), 2000,
                             life);
    }
    if (o.json) {
        bk_status_print_json(&view, app, topic, names, nactive, nstandby, life);
    } else {
        bk_status_print_text(&view, app, topic, names, nactive, nstandby, life);
    }
    rc = fflush(stdout) == 0 ? 0 : 1;

done:
    bk_member_destroy(member);
    bk_member_view_clear(&view);
    for (int32_t t = 0; names && names[t]; t++) {
        free(names[t]);
    }
    free(names);
    free(nactive);
    free(nstandby);
    free(life);
    bk_plan_destroy(plan);
    if (L) {
        bk_vm_destroy(L);
    }
    bk_conf_destroy(conf);
    return rc;
}
