/* query_scan.c - a store's ranges over HTTP (docs/queries.md): a range gathered from every
 * task of the store (this node's read here, the others' asked of the nodes serving them,
 * /v1/internal/scan) and merged in key order, a page at a time; a global table's read
 * here whole. query_stores.c has the single keys. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/keys.h"
#include "base/task.h"
#include "engine/dbread.h"
#include "engine/global.h"
#include "query/forward.h"
#include "query/query_internal.h"
#include "query/scanpage.h"

/* -- Ranges ------------------------------------------------------------------------------- */

/* One task's page, and where the merge is in it. */
typedef struct {
    bk_scanpage_t pg;
    bk_task_id_t tid;
    int next;
    char node[BK_MEMBER_MAX_ID + 1];
} part_t;

typedef struct {
    const char *prefix, *from, *to, *after;
    size_t plen, fromlen, tolen, afterlen;
    int limit;
} scan_t;

static void free_part(part_t *p)
{
    bk_scanpage_free(&p->pg);
}

static int key_cmp(const char *a, size_t al, const char *b, size_t bl)
{
    int c = memcmp(a, b, al < bl ? al : bl);
    return c ? c : (al > bl) - (al < bl);
}

/* A page of task tid's keys from this node's replica: 0 (p filled), -1 not served here,
 * -2 out of memory. After `after` (exclusive), else from `from`; up to `to` (inclusive) or
 * while keys start with `prefix`. */
static int add_to_page(void *opaque, const char *k, size_t kl, const char *v, size_t vl)
{
    return bk_scanpage_add(opaque, k, kl, v, vl);
}

static int scan_local(bk_qreq_t *r, const char *store, bk_task_id_t tid, const scan_t *s, int roles,
                      long long max_lag, part_t *p)
{
    bk_taskdb_read_t rd;
    int si, more;

    if (bk_query_take_local(r, tid, roles, max_lag, &rd) != 0) {
        return -1;
    }
    p->tid = tid;
    p->pg.role = rd.role;
    p->pg.lag = rd.lag;
    snprintf(p->node, sizeof(p->node), "%s", r->q->env.node_id);
    si = bk_dbread_store(rd.db, store);
    more = si < 0 ? 0
                  : bk_dbread_page(rd.db, si, s->from, s->fromlen, s->to, s->tolen, s->prefix,
                                   s->plen, s->after, s->afterlen, s->limit, add_to_page, &p->pg);
    bk_taskdb_read_end(r->q->env.pool, &rd);
    if (more < 0) {
        return -2;
    }
    p->pg.more = more;
    return 0;
}

/* The scan's bounds from hex arguments (the internal form: any bytes). 0, or -1. */
static int hex_arg(bk_qreq_t *r, const char *name, char *buf, const char **out, size_t *len)
{
    const char *h = bk_query_arg(r, name);
    long n;
    *out = NULL;
    *len = 0;
    if (!h) {
        return 0;
    }
    if (strlen(h) > 2 * BK_QUERY_KEY_MAX || (n = bk_jbuf_unhex(h, buf)) < 0) {
        return -1;
    }
    *out = buf;
    *len = (size_t)n;
    return 0;
}

/* GET /v1/internal/scan?store=&task=S_P&from=&to=&prefix=&after= (hex) &limit=: one task's
 * page from this node only, for the node gathering a range. The body is a line
 * "beck-scan <more> <role> <lag>\n", then [u32 key length][key][u32 value length][value]
 * per entry, lengths big-endian. */
enum MHD_Result bk_query_internal_scan(bk_qreq_t *r)
{
    const char *store = bk_query_arg(r, "store"), *task = bk_query_arg(r, "task");
    char *buf[4];
    scan_t s = {0};
    part_t p = {0};
    bk_task_id_t tid;
    long long max_lag;
    int roles = bk_query_roles(r, &max_lag), rc;
    bk_jbuf_t b = {0};
    enum MHD_Result ret;

    for (int i = 0; i < 4; i++) {
        buf[i] = malloc(BK_QUERY_KEY_MAX + 1);
    }
    if (!buf[0] || !buf[1] || !buf[2] || !buf[3]) {
        ret = bk_query_error(r, 500, -1, "out of memory");
        goto out;
    }
    s.limit = bk_query_limit(r);
    if (!store || !bk_query_find_store(r->q->env.plan, store) || !task ||
        bk_task_parse(task, &tid) != 0 || s.limit < 0 ||
        hex_arg(r, "from", buf[0], &s.from, &s.fromlen) != 0 ||
        hex_arg(r, "to", buf[1], &s.to, &s.tolen) != 0 ||
        hex_arg(r, "prefix", buf[2], &s.prefix, &s.plen) != 0 ||
        hex_arg(r, "after", buf[3], &s.after, &s.afterlen) != 0) {
        ret = bk_query_error(r, 400, -1, "a bad internal scan");
        goto out;
    }
    rc = scan_local(r, store, tid, &s, roles, max_lag, &p);
    if (rc == -1) {
        ret = bk_query_error(r, 503, 1, "task %s is not served by node %s now", task,
                             r->q->env.node_id);
        goto out;
    }
    bk_scanpage_encode(&p.pg, &b);
    if (rc == -2 || b.oom) {
        ret = bk_query_error(r, 500, -1, "out of memory");
    } else {
        ret = bk_query_reply_raw(r, 200, "application/octet-stream", b.p, b.len, -1);
    }
    bk_jbuf_free(&b);
out:
    free_part(&p);
    for (int i = 0; i < 4; i++) {
        free(buf[i]);
    }
    return ret;
}

static void hex_param(bk_jbuf_t *b, const char *name, const char *s, size_t n)
{
    if (s) {
        bk_jbuf_printf(b, "&%s=", name);
        bk_jbuf_hex(b, s, n);
    }
}

/* Task t's page from the node that serves it. 0, or -1 with why. */
static int scan_remote(bk_qreq_t *r, const char *store, int32_t t, bk_task_id_t tid,
                       const scan_t *s, int roles, part_t *p, char *why, size_t why_size)
{
    bk_route_target_t to[8];
    int n = bk_route_targets(r->q->env.route, t, roles & BK_TASKDB_STANDBY, to, 8);
    bk_jbuf_t path = {0};
    char args[64], *estore = bk_forward_escape(store, strlen(store));

    bk_query_pass_args(r, args, sizeof(args));
    bk_jbuf_printf(&path, "/v1/internal/scan?store=%s&task=%s&limit=%d%s%s", estore ? estore : "",
                   BK_TASK_NAME(tid), s->limit, args[0] ? "&" : "", args);
    free(estore);
    hex_param(&path, "from", s->from, s->fromlen);
    hex_param(&path, "to", s->to, s->tolen);
    hex_param(&path, "prefix", s->prefix, s->plen);
    hex_param(&path, "after", s->after, s->afterlen);
    snprintf(why, why_size, "no live node holds it");
    for (int i = 0; i < n && !path.oom; i++) {
        bk_forward_resp_t resp;
        if (to[i].self || !to[i].endpoint[0]) {
            snprintf(why, why_size, "%s",
                     to[i].self ? "this node is restoring it" : "its node has no endpoint");
            continue;
        }
        atomic_fetch_add(&r->q->forwarded, 1);
        if (bk_forward_get(to[i].endpoint, path.p, r->q->token, 1, BK_QUERY_FORWARD_MS, &resp, why,
                           why_size) != 0) {
            continue;
        }
        if (resp.status == 200 && bk_scanpage_parse(resp.body, resp.len, &p->pg) == 0) {
            p->tid = tid;
            snprintf(p->node, sizeof(p->node), "%s", to[i].node);
            free(resp.body);
            bk_jbuf_free(&path);
            return 0;
        }
        snprintf(why, why_size, "node %s answered %ld", to[i].node, resp.status);
        free(resp.body);
        free_part(p);
        memset(p, 0, sizeof(*p));
    }
    bk_jbuf_free(&path);
    return -1;
}

/* A window store's key as a reader wants it (base/keys.h's layout): its record key, and
 * its time (a window's start, a session's end, a join record's time) with what follows it
 * (a session's start, a join's sequence number), as the per-key /windows answer has them;
 * the raw key too, hex, for a range's bounds. 0 when the key has no window shape. */
static int window_item(bk_jbuf_t *b, const bk_plan_store_t *ps, const char *k, size_t kl)
{
    size_t rl;
    const char *rec = ps->window ? bk_keys_window_record(k, kl, &rl) : NULL;
    const unsigned char *t;
    if (!rec || kl < 4 + rl + 8) {
        return 0;
    }
    t = (const unsigned char *)rec + rl;
    bk_jbuf_bytes(b, "key", rec, rl);
    bk_jbuf_printf(b, ",\"time\":%lld", (long long)bk_query_get64(t));
    if (kl >= 4 + rl + 16) {
        bk_jbuf_printf(b, ",\"time2\":%lld", (long long)bk_query_get64(t + 8));
    }
    bk_jbuf_lit(b, ",\"raw_key\":\"");
    bk_jbuf_hex(b, k, kl);
    bk_jbuf_lit(b, "\"");
    return 1;
}

/* A page of a global table's scan: from this node's own copy, in key order. */
static enum MHD_Result global_scan(bk_qreq_t *r, bk_global_t *g, int table, const scan_t *s)
{
    const char *name = bk_global_name(g, table);
    bk_scanpage_t pg = {0};
    bk_jbuf_t b = {0};
    enum MHD_Result ret;
    int more =
        bk_dbread_page(bk_global_db(g), table, s->from, s->fromlen, s->to, s->tolen, s->prefix,
                       s->plen, s->after, s->afterlen, s->limit, add_to_page, &pg);
    if (more < 0) {
        bk_scanpage_free(&pg);
        return bk_query_error(r, 500, -1, "global table %s: the scan failed", name);
    }
    bk_jbuf_lit(&b, "{\"store\":");
    bk_jbuf_str(&b, name, strlen(name));
    bk_jbuf_lit(&b, ",\"items\":[");
    for (int i = 0; i < pg.n; i++) {
        bk_jbuf_raw(&b, i ? ",{" : "{", i ? 2 : 1);
        bk_jbuf_bytes(&b, "key", pg.e[i].k, pg.e[i].kl);
        bk_jbuf_lit(&b, ",");
        bk_jbuf_bytes(&b, "value", pg.e[i].v, pg.e[i].vl);
        bk_jbuf_lit(&b, "}");
    }
    bk_jbuf_lit(&b, "],\"cursor\":");
    if (more && pg.n > 0) {
        bk_jbuf_lit(&b, "\"");
        bk_jbuf_hex(&b, pg.e[pg.n - 1].k, pg.e[pg.n - 1].kl);
        bk_jbuf_lit(&b, "\"");
    } else {
        bk_jbuf_lit(&b, "null");
    }
    bk_jbuf_lit(&b, ",\"global\":true,\"node\":");
    bk_jbuf_str(&b, r->q->env.node_id, strlen(r->q->env.node_id));
    bk_jbuf_lit(&b, "}");
    ret = bk_query_reply(r, 200, &b, -1);
    bk_scanpage_free(&pg);
    return ret;
}

enum MHD_Result bk_query_scan(bk_qreq_t *r, const char *store, const char *prefix, size_t plen)
{
    const bk_plan_store_t *ps = bk_query_find_store(r->q->env.plan, store);
    bk_global_t *g = ps ? NULL : bk_global_current();
    int gi = g ? bk_global_index(g, store) : -1;
    const char *cursor = bk_query_arg(r, "cursor");
    char *after = NULL, why[512];
    scan_t s = {0};
    part_t *parts = NULL;
    int32_t first;
    int nt, emitted = 0, more = 0, failed = -1;
    long long max_lag;
    int roles = bk_query_roles(r, &max_lag);
    bk_jbuf_t b = {0};
    bk_scanpage_ent_t *last = NULL;
    enum MHD_Result ret;

    if (!ps && gi < 0) {
        return bk_query_error(r, 404, -1, "no store named '%s' (GET /v1/stores lists them)", store);
    }
    if ((s.limit = bk_query_limit(r)) < 0) {
        return bk_query_error(r, 400, -1, "limit: a number from 1 to %d", BK_QUERY_LIMIT_MAX);
    }
    s.prefix = prefix;
    s.plen = plen;
    s.from = prefix ? NULL : bk_query_arg(r, "from");
    s.to = prefix ? NULL : bk_query_arg(r, "to");
    s.fromlen = s.from ? strlen(s.from) : 0;
    s.tolen = s.to ? strlen(s.to) : 0;
    if (plen > BK_QUERY_KEY_MAX || s.fromlen > BK_QUERY_KEY_MAX || s.tolen > BK_QUERY_KEY_MAX ||
        (cursor && strlen(cursor) > 2 * BK_QUERY_KEY_MAX)) {
        return bk_query_error(r, 400, -1, "a bound or cursor longer than %d bytes",
                              BK_QUERY_KEY_MAX);
    }
    if (cursor) {
        long n;
        if (!(after = malloc(strlen(cursor) / 2 + 1)) || (n = bk_jbuf_unhex(cursor, after)) < 0) {
            free(after);
            return bk_query_error(r, 400, -1, "cursor: not one this server gave");
        }
        s.after = after;
        s.afterlen = (size_t)n;
    }
    if (gi >= 0) {
        ret = global_scan(r, g, gi, &s);
        free(after);
        return ret;
    }
    nt = bk_route_sub_tasks(r->q->env.route, ps->sub, &first);
    if (nt <= 0 || !(parts = calloc((size_t)nt, sizeof(*parts)))) {
        free(after);
        return bk_query_error(r, 503, 1, "the tasks of store %s are not known yet", store);
    }
    /* every task's page: a range is complete or not answered */
    for (int i = 0; i < nt && failed < 0; i++) {
        bk_task_id_t tid = bk_route_task_id(r->q->env.route, first + i);
        int rc = scan_local(r, store, tid, &s, roles, max_lag, &parts[i]);
        if (rc == -1 && !r->forwarded) {
            rc = scan_remote(r, store, first + i, tid, &s, roles, &parts[i], why, sizeof(why));
        } else if (rc == -1) {
            snprintf(why, sizeof(why), "not served here");
        } else if (rc == -2) {
            snprintf(why, sizeof(why), "out of memory");
        }
        if (rc != 0) {
            failed = i;
        }
    }
    if (failed >= 0) {
        ret = bk_query_error(r, 503, 1, "task %s cannot be read now: %s",
                             BK_TASK_NAME(bk_route_task_id(r->q->env.route, first + failed)), why);
        goto out;
    }
    /* merge: the smallest head, limit times (a few dozen tasks: a scan of heads is enough) */
    bk_jbuf_lit(&b, "{\"store\":");
    bk_jbuf_str(&b, store, strlen(store));
    bk_jbuf_lit(&b, ",\"items\":[");
    while (emitted < s.limit) {
        int best = -1;
        for (int i = 0; i < nt; i++) {
            part_t *p = &parts[i];
            if (p->next < p->pg.n &&
                (best < 0 || key_cmp(p->pg.e[p->next].k, p->pg.e[p->next].kl,
                                     parts[best].pg.e[parts[best].next].k,
                                     parts[best].pg.e[parts[best].next].kl) < 0)) {
                best = i;
            }
        }
        if (best < 0) {
            break;
        }
        last = &parts[best].pg.e[parts[best].next++];
        if (ps->window && last->kl >= 4 && memcmp(last->k, "\xff\xff\xff\xff", 4) == 0) {
            continue; /* a window store's time index: its own entries, not the user's */
        }
        if (emitted++) {
            bk_jbuf_lit(&b, ",");
        }
        bk_jbuf_lit(&b, "{");
        if (!window_item(&b, ps, last->k, last->kl)) {
            bk_jbuf_bytes(&b, "key", last->k, last->kl);
        }
        bk_jbuf_lit(&b, ",");
        bk_jbuf_bytes(&b, "value", last->v, last->vl);
        bk_jbuf_printf(&b, ",\"task\":\"%s\"}", BK_TASK_NAME(parts[best].tid));
    }
    for (int i = 0; i < nt; i++) {
        more |= parts[i].pg.more || parts[i].next < parts[i].pg.n;
    }
    bk_jbuf_lit(&b, "],\"cursor\":");
    if (more && last) {
        bk_jbuf_lit(&b, "\"");
        bk_jbuf_hex(&b, last->k, last->kl);
        bk_jbuf_lit(&b, "\"");
    } else {
        bk_jbuf_lit(&b, "null");
    }
    bk_jbuf_lit(&b, ",\"sources\":[");
    for (int i = 0; i < nt; i++) {
        bk_jbuf_printf(&b, "%s{\"task\":\"%s\",\"node\":", i ? "," : "",
                       BK_TASK_NAME(parts[i].tid));
        bk_jbuf_str(&b, parts[i].node, strlen(parts[i].node));
        bk_jbuf_printf(&b, ",\"role\":\"%s\",\"lag\":%lld}", bk_query_role_name(parts[i].pg.role),
                       parts[i].pg.lag);
    }
    bk_jbuf_lit(&b, "],\"node\":");
    bk_jbuf_str(&b, r->q->env.node_id, strlen(r->q->env.node_id));
    bk_jbuf_lit(&b, "}");
    ret = bk_query_reply(r, 200, &b, -1);
out:
    for (int i = 0; i < nt; i++) {
        free_part(&parts[i]);
    }
    free(parts);
    free(after);
    return ret;
}
