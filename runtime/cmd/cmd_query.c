/* cmd_query.c - `beck get -b BROKERS --app ID STORE KEY` and `beck scan -b BROKERS --app ID
 * STORE [--from A] [--to B | --prefix P]`: a read through a node's query server. The nodes'
 * endpoints come from the control topic, read by an observer (member.h) as `beck status`
 * does; --endpoint names one instead. A node that does not answer is skipped for the next. */
#define _GNU_SOURCE

#include "cmd/cmd_query.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "base/conf.h"
#include "base/log.h"
#include "cluster/member.h"
#include "query/forward.h"
#include "query/jbuf.h"
#include "cmd/cmd_opts.h"

#define TIMEOUT_MS 10000
#define MAX_NODES 64

typedef struct {
    const char *cmd, *app, *endpoint, *token, *store, *key, *from, *to, *prefix, *node;
    const char *limit, *max_lag;
    int replica_any, pages, timeout_ms, window;
} opts_t;

static void usage(const char *cmd, FILE *out)
{
    if (strcmp(cmd, "get") == 0) {
        fprintf(out, "usage: beck get (-b BROKERS --app ID | --endpoint HOST:PORT) STORE KEY\n"
                     "                [--window [--from T] [--to T] [--limit N]]\n"
                     "                [--replica-any [--max-lag N]] [--token T] [--node ID]\n"
                     "\n  --window  a window store's windows of KEY whose time (ms) is in\n"
                     "            [--from, --to]: each window's start and value\n");
    } else {
        fprintf(out, "usage: beck scan (-b BROKERS --app ID | --endpoint HOST:PORT) STORE\n"
                     "                 [--from A] [--to B | --prefix P] [--limit N] [--pages N]\n"
                     "                 [--replica-any [--max-lag N]] [--token T] [--node ID]\n");
    }
    fprintf(out,
            "\nReads an app's state through the query server of one of its nodes\n"
            "(docs/queries.md); any node answers for any key. Prints the JSON answer%s.\n\n"
            "  -b BROKERS, --app ID   find the nodes' endpoints on <ID>-control\n"
            "  --endpoint HOST:PORT   ask this node instead\n"
            "  --node ID              ask the node with this id\n"
            "  --replica-any          a standby may answer (within --max-lag records)\n"
            "  --token T              the bearer token (default: $BECK_HTTP_TOKEN)\n"
            "  --timeout-ms N         how long to wait for the control topic and answers [%d]\n"
            "  -X key=value, -F FILE  librdkafka settings, as for beck run\n",
            strcmp(cmd, "get") == 0 ? "; exits 1 when the key is not there"
                                    : ", a page per line, following the cursor (at most"
                                      " --pages N, 0: all) [1]",
            TIMEOUT_MS);
}

/* -1 error (printed), 0 ok, 1 help. */
static int parse(int argc, char **argv, bk_conf_t *conf, opts_t *o)
{
    const char *pos[2] = {NULL, NULL};
    int want = strcmp(o->cmd, "get") == 0 ? 2 : 1, npos, rc;
    long pages = o->pages, timeout_ms = o->timeout_ms;
    bk_cmd_opt_t opts[] = {
        {NULL, BK_OPT_KAFKA, NULL, 0, 0},
        {"--app", BK_OPT_STR, &o->app, 0, 0},
        {"--endpoint", BK_OPT_STR, &o->endpoint, 0, 0},
        {"--token", BK_OPT_STR, &o->token, 0, 0},
        {"--node", BK_OPT_STR, &o->node, 0, 0},
        {"--max-lag", BK_OPT_STR, &o->max_lag, 0, 0},
        {"--from", BK_OPT_STR, &o->from, 0, 0},
        {"--to", BK_OPT_STR, &o->to, 0, 0},
        {"--prefix", BK_OPT_STR, &o->prefix, 0, 0},
        {"--limit", BK_OPT_STR, &o->limit, 0, 0},
        {"--pages", BK_OPT_INT, &pages, 0, 1000000000},
        {"--timeout-ms", BK_OPT_INT, &timeout_ms, 1, 24L * 3600 * 1000},
        {"--replica-any", BK_OPT_FLAG, &o->replica_any, 0, 0},
        {"--window", BK_OPT_FLAG, &o->window, 0, 0}, /* get only: the last entry */
    };
    bk_cmd_args_t args = {o->cmd, opts, want == 2 ? 14 : 13, conf, pos, want, 0};
    rc = bk_cmd_opts_parse(&args, argc, argv);
    if (rc == 1) {
        usage(o->cmd, stdout);
    }
    if (rc != 0) {
        return rc;
    }
    npos = args.npos;
    o->pages = (int)pages;
    o->timeout_ms = (int)timeout_ms;
    if (npos != want) {
        usage(o->cmd, stderr);
        return -1;
    }
    o->store = pos[0];
    o->key = pos[1];
    if (!o->endpoint && (!o->app || !bk_conf_str(conf, BK_CONF_BROKERS))) {
        fprintf(stderr, "beck %s: -b BROKERS and --app ID are needed (or --endpoint)\n", o->cmd);
        return -1;
    }
    if (want == 2 && !o->window && (o->from || o->to || o->prefix || o->limit)) {
        fprintf(stderr, "beck get: --from, --to and --limit read a window store's windows: "
                        "give --window\n");
        return -1;
    }
    if (o->prefix && (o->from || o->to)) {
        fprintf(stderr, "beck %s: --prefix or --from/--to, not both\n", o->cmd);
        return -1;
    }
    if (o->timeout_ms <= 0) {
        o->timeout_ms = TIMEOUT_MS;
    }
    if (!o->token) {
        o->token = getenv("BECK_HTTP_TOKEN");
    }
    return 0;
}

/* The live nodes' endpoints (with --node, that node's) from the control topic; their count,
 * -1 with a message printed. */
static int find_nodes(bk_conf_t *conf, const opts_t *o, char eps[][BK_MEMBER_MAX_ID + 1])
{
    bk_member_conf_t mc;
    bk_member_view_t view;
    bk_member_t *m;
    char err[1024];
    int64_t deadline = bk_clock_mono_ms() + o->timeout_ms;
    int n = 0;

    memset(&mc, 0, sizeof(mc));
    memset(&view, 0, sizeof(view));
    mc.conf = conf;
    mc.app_id = o->app;
    mc.node_id = o->cmd;
    mc.observe = 1;
    if (!(m = bk_member_new(&mc, err, sizeof(err))) || bk_member_start(m, err, sizeof(err)) != 0) {
        fprintf(stderr, "beck %s: app %s: %s\n", o->cmd, o->app, err);
        bk_member_destroy(m);
        return -1;
    }
    for (;;) {
        struct timespec pause = {0, 20 * 1000 * 1000};
        bk_member_poll(m, &view);
        if (view.error || view.caught_up || bk_clock_mono_ms() > deadline) {
            break;
        }
        nanosleep(&pause, NULL);
    }
    if (view.caught_up) {
        for (int32_t i = 0; i < view.npeers && n < MAX_NODES; i++) {
            const bk_member_peer_t *p = &view.peers[i];
            if (p->state == BK_MEMBER_ALIVE && p->endpoint && p->endpoint[0] &&
                (!o->node || strcmp(o->node, p->id) == 0)) {
                snprintf(eps[n++], BK_MEMBER_MAX_ID + 1, "%s", p->endpoint);
            }
        }
        if (n == 0) {
            fprintf(stderr,
                    "beck %s: no live node of app %s%s%s publishes an endpoint "
                    "(--endpoint on beck run)\n",
                    o->cmd, o->app, o->node ? " named " : "", o->node ? o->node : "");
        }
    } else {
        fprintf(stderr, "beck %s: cannot read %s-control: %s\n", o->cmd, o->app,
                view.error ? view.error : "not read to its end in time");
    }
    if (!view.caught_up) {
        n = -1;
    }
    bk_member_stop(m, 0);
    bk_member_destroy(m);
    bk_member_view_clear(&view);
    return n > 0 ? n : -1;
}

static void arg(bk_jbuf_t *b, const char *name, const char *v)
{
    char *e;
    if (!v) {
        return;
    }
    e = bk_forward_escape(v, strlen(v));
    bk_jbuf_printf(b, "%s%s=%s", strchr(b->p ? b->p : "", '?') ? "&" : "?", name, e ? e : "");
    free(e);
}

/* The path of the first request (scan: without its cursor). */
static void build_path(const opts_t *o, bk_jbuf_t *b)
{
    char *store = bk_forward_escape(o->store, strlen(o->store));
    if (o->key) {
        char *key = bk_forward_escape(o->key, strlen(o->key));
        bk_jbuf_printf(b, "/v1/stores/%s/keys/%s%s", store ? store : "", key ? key : "",
                       o->window ? "/windows" : "");
        free(key);
        if (o->window) {
            arg(b, "from", o->from);
            arg(b, "to", o->to);
        }
    } else if (o->prefix) {
        char *p = bk_forward_escape(o->prefix, strlen(o->prefix));
        bk_jbuf_printf(b, "/v1/stores/%s/prefix/%s", store ? store : "", p ? p : "");
        free(p);
    } else {
        bk_jbuf_printf(b, "/v1/stores/%s/range", store ? store : "");
        arg(b, "from", o->from);
        arg(b, "to", o->to);
    }
    free(store);
    arg(b, "limit", o->limit);
    if (o->replica_any) {
        arg(b, "replica", "any");
        arg(b, "max_lag", o->max_lag);
    }
}

/* The page's "cursor":"<hex>" into out; 0 when it has none. */
static int next_cursor(const char *body, char *out, size_t size)
{
    const char *c = body ? strstr(body, "\"cursor\":\"") : NULL;
    size_t n;
    if (!c) {
        return 0;
    }
    c += 10;
    n = strspn(c, "0123456789abcdef");
    if (c[n] != '"' || n + 1 > size) {
        return 0;
    }
    memcpy(out, c, n);
    out[n] = '\0';
    return 1;
}

static int run(int argc, char **argv, const char *cmd)
{
    opts_t o = {.cmd = cmd, .pages = 1};
    bk_conf_t *conf = bk_conf_new();
    static char eps[MAX_NODES][BK_MEMBER_MAX_ID + 1];
    bk_jbuf_t path = {0};
    char err[1024], *cursor = NULL;
    int n, rc = 1, page = 0;

    if (!conf) {
        return 1;
    }
    switch (parse(argc, argv, conf, &o)) {
    case 1:
        bk_conf_destroy(conf);
        return 0;
    case -1:
        bk_conf_destroy(conf);
        return 2;
    }
    bk_log_set_level(BK_LOG_WARN);
    if (o.endpoint) {
        snprintf(eps[0], sizeof(eps[0]), "%s", o.endpoint);
        n = 1;
    } else if ((n = find_nodes(conf, &o, eps)) < 0) {
        bk_conf_destroy(conf);
        return 1;
    }
    build_path(&o, &path);
    for (int i = 0; i < n && !path.oom;) {
        bk_forward_resp_t resp;
        bk_jbuf_t full = {0};
        bk_jbuf_raw(&full, path.p, path.len);
        if (cursor) {
            arg(&full, "cursor", cursor);
        }
        if (bk_forward_get(eps[i], full.p, o.token, 0, o.timeout_ms, &resp, err, sizeof(err)) !=
            0) {
            fprintf(stderr, "beck %s: %s\n", cmd, err);
            bk_jbuf_free(&full);
            i++; /* the next node */
            continue;
        }
        bk_jbuf_free(&full);
        fwrite(resp.body ? resp.body : "", 1, resp.len, stdout);
        rc = resp.status == 200 ? 0 : 1;
        if (resp.status >= 400 && resp.status != 404) {
            fprintf(stderr, "beck %s: %s answered %ld\n", cmd, eps[i], resp.status);
        }
        if (o.key || resp.status != 200 || ++page == o.pages) {
            free(resp.body);
            break;
        }
        free(cursor);
        cursor = malloc(resp.len + 1);
        if (!cursor || !next_cursor(resp.body, cursor, resp.len + 1)) {
            free(resp.body);
            break;
        }
        free(resp.body);
    }
    fflush(stdout);
    free(cursor);
    bk_jbuf_free(&path);
    bk_conf_destroy(conf);
    return rc;
}

int bk_cmd_get_main(int argc, char **argv)
{
    return run(argc, argv, "get");
}

int bk_cmd_scan_main(int argc, char **argv)
{
    return run(argc, argv, "scan");
}
