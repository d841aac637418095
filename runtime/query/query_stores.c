/* query_stores.c - a store's keys over HTTP (docs/queries.md): read here when this node
 * serves the key's task, else routed to the node that does; the stores' list. Ranges are in
 * query_scan.c. */
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

/* A store of the topology by name (a later generation's copy has its name: the topology's own
 * is the one; its keys are routed to the serving generation's tasks: route.h). */
const bk_plan_store_t *bk_query_find_store(const bk_plan_t *plan, const char *name)
{
    for (int i = 0; i < plan->nstores; i++) {
        if (plan->stores[i].of_store < 0 && strcmp(plan->stores[i].name, name) == 0) {
            return &plan->stores[i];
        }
    }
    return NULL;
}

const char *bk_query_role_name(int role)
{
    return role == BK_TASKDB_ACTIVE ? "active" : "standby";
}

/* Takes the local replica of tid that may answer (roles; a standby only within max_lag):
 * 0 and *rd, or -1. */
int bk_query_take_local(bk_qreq_t *r, bk_task_id_t tid, int roles, long long max_lag,
                        bk_taskdb_read_t *rd)
{
    if (bk_taskdb_read_begin(r->q->env.pool, tid, roles, rd) != 0) {
        return -1;
    }
    if (rd->role == BK_TASKDB_STANDBY && max_lag >= 0 && rd->lag > max_lag) {
        bk_taskdb_read_end(r->q->env.pool, rd);
        return -1;
    }
    return 0;
}

static void meta(bk_qreq_t *r, bk_jbuf_t *b, bk_task_id_t tid, int role, long long lag)
{
    char num[24];
    const char *name = BK_TASK_NAME(tid);
    bk_jbuf_lit(b, "\"task\":\"");
    bk_jbuf_raw(b, name, strlen(name));
    bk_jbuf_lit(b, "\",\"node\":");
    bk_jbuf_str(b, r->q->env.node_id, strlen(r->q->env.node_id));
    if (role == BK_TASKDB_ACTIVE) {
        bk_jbuf_lit(b, ",\"role\":\"active\",\"lag\":");
    } else {
        bk_jbuf_lit(b, ",\"role\":\"standby\",\"lag\":");
    }
    bk_jbuf_raw(b, num, (size_t)snprintf(num, sizeof(num), "%lld", lag));
}

enum MHD_Result bk_query_stores(bk_qreq_t *r)
{
    const bk_plan_t *plan = r->q->env.plan;
    bk_jbuf_t b = {0};
    int w = 0;
    bk_jbuf_lit(&b, "{\"stores\":[");
    for (int i = 0; i < plan->nstores; i++) {
        const bk_plan_store_t *s = &plan->stores[i];
        int sub;
        if (s->of_store >= 0) {
            continue; /* a later generation's copy: listed as the store it copies */
        }
        sub = bk_route_serving_sub(r->q->env.route, s->sub);
        bk_jbuf_printf(&b, "%s{\"store\":", w++ ? "," : "");
        bk_jbuf_str(&b, s->name, strlen(s->name));
        bk_jbuf_printf(&b, ",\"kind\":\"%s\",\"logged\":%s,\"changelog\":",
                       s->versioned ? "versioned"
                       : s->window  ? "window"
                                    : "key-value",
                       s->logged ? "true" : "false");
        if (s->logged) {
            /* the changelog written now: the serving generation's copy's, after a move */
            const char *cl = s->changelog;
            for (int j = 0; j < plan->nstores; j++) {
                if (plan->stores[j].of_store == i && plan->stores[j].sub == sub &&
                    plan->stores[j].changelog) {
                    cl = plan->stores[j].changelog;
                }
            }
            bk_jbuf_str(&b, cl, strlen(cl));
        } else {
            bk_jbuf_lit(&b, "null");
        }
        /* the tasks serving it now: its latest generation's */
        bk_jbuf_printf(&b, ",\"subtopology\":%d,\"tasks\":%d,\"serving_subtopology\":%d", s->sub,
                       plan->subs[sub].partitions, sub);
        bk_jbuf_lit(&b, ",\"key_serde\":");
        if (s->key_serde) {
            bk_jbuf_str(&b, s->key_serde, strlen(s->key_serde));
        } else {
            bk_jbuf_lit(&b, "null");
        }
        bk_jbuf_lit(&b, ",\"value_serde\":");
        if (s->value_serde) {
            bk_jbuf_str(&b, s->value_serde, strlen(s->value_serde));
        } else {
            bk_jbuf_lit(&b, "null");
        }
        bk_jbuf_lit(&b, "}");
    }
    {
        /* the global tables: every node holds all of each */
        bk_global_t *g = bk_global_current();
        for (int i = 0; i < bk_global_count(g); i++) {
            const char *name = bk_global_name(g, i), *topic = bk_global_topic(g, i);
            bk_jbuf_printf(&b, "%s{\"store\":", w++ ? "," : "");
            bk_jbuf_str(&b, name, strlen(name));
            bk_jbuf_lit(&b, ",\"kind\":\"global\",\"logged\":false,\"changelog\":null,"
                            "\"topic\":");
            bk_jbuf_str(&b, topic, strlen(topic));
            bk_jbuf_printf(&b, ",\"applied\":%llu,\"lag\":%lld}",
                           (unsigned long long)bk_global_applied(g, i),
                           (long long)bk_global_lag(g, i));
        }
    }
    bk_jbuf_lit(&b, "]}");
    return bk_query_reply(r, 200, &b, -1);
}

/* -- One key ------------------------------------------------------------------------------ */

/* The answer for key from this node's replica of tid: its HTTP status into *status and the
 * JSON into b; 0, or -1 when no replica here may answer. */
static int key_local(bk_qreq_t *r, const bk_plan_store_t *ps, bk_task_id_t tid, const char *key,
                     size_t klen, int roles, long long max_lag, bk_jbuf_t *b, unsigned *status)
{
    bk_taskdb_read_t rd;
    bk_dbread_pin_t *pin = NULL;
    const char *val = NULL;
    char err[512];
    size_t vlen = 0;
    int si, rc;

    if (bk_query_take_local(r, tid, roles, max_lag, &rd) != 0) {
        return -1;
    }
    si = bk_dbread_store(rd.db, ps->name);
    rc = si < 0 ? -1
                : bk_dbread_get_pinned(rd.db, si, key, klen, &val, &vlen, &pin, err, sizeof(err));
    if (si < 0) {
        snprintf(err, sizeof(err), "task %s has no store %s", BK_TASK_NAME(tid), ps->name);
    }
    bk_jbuf_lit(b, "{\"store\":");
    bk_jbuf_str(b, ps->name, strlen(ps->name));
    bk_jbuf_lit(b, ",");
    bk_jbuf_bytes(b, "key", key, klen);
    if (rc == 1) {
        bk_jbuf_lit(b, ",");
        bk_jbuf_bytes(b, "value", val, vlen);
    } else {
        bk_jbuf_lit(b, ",\"error\":");
        if (rc == 0) {
            bk_jbuf_lit(b, "\"no such key\"");
        } else {
            bk_jbuf_str(b, err, strlen(err));
        }
    }
    bk_jbuf_lit(b, ",");
    meta(r, b, tid, rd.role, rd.lag);
    bk_jbuf_lit(b, "}");
    bk_dbread_unpin(pin);
    bk_taskdb_read_end(r->q->env.pool, &rd);
    *status = rc == 1 ? 200 : rc == 0 ? 404 : 500;
    return 0;
}

/* "replica=any&max_lag=N" as asked, for a routed request. */
void bk_query_pass_args(bk_qreq_t *r, char *buf, size_t size)
{
    const char *rep = bk_query_arg(r, "replica"), *ml = bk_query_arg(r, "max_lag");
    int n = 0;
    buf[0] = '\0';
    if (rep && strcmp(rep, "any") == 0) {
        n = snprintf(buf, size, "replica=any");
    }
    if (ml && strspn(ml, "0123456789") == strlen(ml) && *ml) {
        snprintf(buf + n, size - (size_t)n, "%smax_lag=%s", n ? "&" : "", ml);
    }
}

/* What a replica here answers for a key: key_local, windows_local. */
typedef int (*local_fn)(bk_qreq_t *r, const bk_plan_store_t *ps, bk_task_id_t tid, const char *key,
                        size_t klen, int roles, long long max_lag, bk_jbuf_t *b, unsigned *status,
                        const void *extra);

/* The answer for a key: from a replica here when one may answer, else from the node
 * serving its task (its active, the holder, then with replica=any its standbys), asked
 * for `path_tail` ("" or "/windows") with `args` (escaped, without '?') and the replica
 * arguments of this request. */
static enum MHD_Result answer_key(bk_qreq_t *r, const bk_plan_store_t *ps, const char *key,
                                  size_t klen, local_fn local, const void *extra,
                                  const char *path_tail, const char *args)
{
    bk_route_target_t to[8];
    bk_task_id_t tid;
    bk_jbuf_t b = {0}, path = {0};
    long long max_lag;
    int roles = bk_query_roles(r, &max_lag), n;
    unsigned status;
    int32_t t;
    char *ekey, *estore, rargs[64], why[512], restoring[400];

    if (klen > BK_QUERY_KEY_MAX) {
        return bk_query_error(r, 400, -1, "a key of %zu bytes: at most %d", klen, BK_QUERY_KEY_MAX);
    }
    if ((t = bk_route_task_of(r->q->env.route, ps->sub, key, klen, &tid)) < 0) {
        return bk_query_error(r, 503, 1, "the partitions of store %s are not known yet", ps->name);
    }
    if (local(r, ps, tid, key, klen, roles, max_lag, &b, &status, extra) == 0) {
        return bk_query_reply(r, status, &b, -1);
    }
    n = bk_route_targets(r->q->env.route, t, roles & BK_TASKDB_STANDBY, to, 8);
    /* this node should run it and is restoring it: say how far */
    restoring[0] = '\0';
    if (n > 0 && to[0].self && to[0].role == BK_TASKDB_ACTIVE && r->q->env.live &&
        t < r->q->env.live->ntasks) {
        const bk_livestats_task_t *ts = &r->q->env.live->task[t];
        long long total = atomic_load_explicit(&ts->restore_total, memory_order_relaxed);
        long long done = atomic_load_explicit(&ts->restore_done, memory_order_relaxed);
        if (total >= 0) {
            snprintf(restoring, sizeof(restoring),
                     "node %s is restoring it: %lld of %lld changelog records", to[0].node, done,
                     total);
        }
    }
    if (r->forwarded) {
        return bk_query_error(r, 503, 1, "task %s is not served by node %s now (%s)",
                              BK_TASK_NAME(tid), r->q->env.node_id,
                              restoring[0] ? restoring
                                           : "restoring, moving, or a standby too far behind");
    }
    ekey = bk_forward_escape(key, klen);
    estore = bk_forward_escape(ps->name, strlen(ps->name));
    bk_query_pass_args(r, rargs, sizeof(rargs));
    bk_jbuf_printf(&path, "/v1/stores/%s/keys/%s%s?%s%s%s", estore ? estore : "", ekey ? ekey : "",
                   path_tail, args, args[0] && rargs[0] ? "&" : "", rargs);
    free(ekey);
    free(estore);
    snprintf(why, sizeof(why), "no live node holds it");
    for (int i = 0; i < n && !path.oom; i++) {
        bk_forward_resp_t resp;
        enum MHD_Result rc;
        if (to[i].self || !to[i].endpoint[0]) {
            snprintf(why, sizeof(why), "%s",
                     !to[i].self    ? "its node publishes no endpoint"
                     : restoring[0] ? restoring
                                    : "this node is restoring it");
            continue;
        }
        atomic_fetch_add(&r->q->forwarded, 1);
        if (bk_forward_get(to[i].endpoint, path.p, r->q->token, 1, BK_QUERY_FORWARD_MS, &resp, why,
                           sizeof(why)) != 0) {
            continue;
        }
        if (resp.status == 503 && i + 1 < n) {
            snprintf(why, sizeof(why), "node %s: not serving it now", to[i].node);
            free(resp.body);
            continue;
        }
        rc = bk_query_reply_raw(r, (unsigned)resp.status,
                                resp.content_type[0] ? resp.content_type : "application/json",
                                resp.body ? resp.body : "", resp.len, resp.retry_after);
        free(resp.body);
        bk_jbuf_free(&path);
        return rc;
    }
    bk_jbuf_free(&path);
    return bk_query_error(r, 503, 1, "no node can answer for task %s now: %s", BK_TASK_NAME(tid),
                          why);
}

static int key_local_fn(bk_qreq_t *r, const bk_plan_store_t *ps, bk_task_id_t tid, const char *key,
                        size_t klen, int roles, long long max_lag, bk_jbuf_t *b, unsigned *status,
                        const void *extra)
{
    (void)extra;
    return key_local(r, ps, tid, key, klen, roles, max_lag, b, status);
}

/* -- A window store's windows of one key ---------------------------------------------------- */

#define TIME_MAX INT64_C(9007199254740991) /* 2^53 - 1: the DSL's times are Lua numbers */

typedef struct {
    int64_t from, to;
    int limit;
} wq_t;

static void be32(char *o, uint32_t v)
{
    o[0] = (char)(v >> 24), o[1] = (char)(v >> 16), o[2] = (char)(v >> 8), o[3] = (char)v;
}

static void be64(char *o, int64_t v)
{
    be32(o, (uint32_t)((uint64_t)v >> 32));
    be32(o + 4, (uint32_t)v);
}

int64_t bk_query_get64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) {
        v = v << 8 | p[i];
    }
    return (int64_t)v;
}

/* The windows of `key` (base/keys.h's window layout: [length][key][time][rest]) whose time
 * is in [from, to]: a time window's start, a session's end (then its start), a join
 * record's time (then its sequence number). */
static int windows_local(bk_qreq_t *r, const bk_plan_store_t *ps, bk_task_id_t tid, const char *key,
                         size_t klen, int roles, long long max_lag, bk_jbuf_t *b, unsigned *status,
                         const void *extra)
{
    const wq_t *w = extra;
    bk_taskdb_read_t rd;
    bk_store_iter_t *it;
    size_t plen = 4 + klen, kl, vl;
    char *lo = malloc(plen + 8), *hi = malloc(plen + 24);
    const char *k, *v;
    int si, n = 0, more = 0;

    if (!lo || !hi) {
        free(lo);
        free(hi);
        return -1;
    }
    be32(lo, (uint32_t)klen);
    memcpy(lo + 4, key, klen);
    be64(lo + plen, w->from);
    memcpy(hi, lo, plen);
    be64(hi + plen, w->to);
    memset(hi + plen + 8, 0xff, 16); /* any rest after the last time */
    if (bk_query_take_local(r, tid, roles, max_lag, &rd) != 0) {
        free(lo);
        free(hi);
        return -1;
    }
    si = bk_dbread_store(rd.db, ps->name);
    it = si < 0 ? NULL : bk_dbread_iter(rd.db, si, BK_FFI_ITER_RANGE, lo, plen + 8, hi, plen + 24);
    bk_jbuf_lit(b, "{\"store\":");
    bk_jbuf_str(b, ps->name, strlen(ps->name));
    bk_jbuf_lit(b, ",");
    bk_jbuf_bytes(b, "key", key, klen);
    bk_jbuf_lit(b, ",\"windows\":[");
    while (it && bk_ffi_store_iter_next(it, &k, &kl, &v, &vl)) {
        const unsigned char *u = (const unsigned char *)k;
        if (kl < plen + 8) {
            continue;
        }
        if (n == w->limit) {
            more = 1;
            break;
        }
        bk_jbuf_printf(b, "%s{\"time\":%lld", n++ ? "," : "", (long long)bk_query_get64(u + plen));
        if (kl >= plen + 16) {
            bk_jbuf_printf(b, ",\"time2\":%lld", (long long)bk_query_get64(u + plen + 8));
        }
        bk_jbuf_lit(b, ",");
        bk_jbuf_bytes(b, "value", v, vl);
        bk_jbuf_lit(b, "}");
    }
    bk_jbuf_printf(b, "],\"more\":%s,", more ? "true" : "false");
    meta(r, b, tid, rd.role, rd.lag);
    bk_jbuf_lit(b, "}");
    bk_ffi_store_iter_free(it);
    bk_taskdb_read_end(r->q->env.pool, &rd);
    free(lo);
    free(hi);
    *status = si < 0 ? 500 : 200;
    return 0;
}

/* A time argument: [0, 2^53), default def; -1 when bad. */
static int64_t time_arg(bk_qreq_t *r, const char *name, int64_t def)
{
    const char *s = bk_query_arg(r, name);
    char *end;
    long long v;
    if (!s) {
        return def;
    }
    v = strtoll(s, &end, 10);
    return *s && !*end && v >= 0 && v <= TIME_MAX ? v : -1;
}

/* A key of a global table (engine/global.h): every node holds all of it, so this one
 * answers, from what the global thread last committed. */
static enum MHD_Result global_key(bk_qreq_t *r, bk_global_t *g, int table, const char *key,
                                  size_t klen)
{
    bk_jbuf_t b = {0};
    bk_dbread_pin_t *pin = NULL;
    const char *val = NULL, *name = bk_global_name(g, table);
    size_t vlen = 0;
    char err[512], num[24];
    int rc;

    if (klen > BK_QUERY_KEY_MAX) {
        return bk_query_error(r, 400, -1, "a key of %zu bytes: at most %d", klen, BK_QUERY_KEY_MAX);
    }
    rc = bk_dbread_get_pinned(bk_global_db(g), table, key, klen, &val, &vlen, &pin, err,
                              sizeof(err));
    bk_jbuf_lit(&b, "{\"store\":");
    bk_jbuf_str(&b, name, strlen(name));
    bk_jbuf_lit(&b, ",");
    bk_jbuf_bytes(&b, "key", key, klen);
    if (rc == 1) {
        bk_jbuf_lit(&b, ",");
        bk_jbuf_bytes(&b, "value", val, vlen);
    } else {
        bk_jbuf_lit(&b, ",\"error\":");
        if (rc == 0) {
            bk_jbuf_lit(&b, "\"no such key\"");
        } else {
            bk_jbuf_str(&b, err, strlen(err));
        }
    }
    bk_jbuf_lit(&b, ",\"global\":true,\"node\":");
    bk_jbuf_str(&b, r->q->env.node_id, strlen(r->q->env.node_id));
    bk_jbuf_lit(&b, ",\"lag\":");
    bk_jbuf_raw(&b, num,
                (size_t)snprintf(num, sizeof(num), "%lld", (long long)bk_global_lag(g, table)));
    bk_jbuf_lit(&b, "}");
    bk_dbread_unpin(pin);
    return bk_query_reply(r, rc == 1 ? 200 : rc == 0 ? 404 : 500, &b, -1);
}

/* A versioned store's key (lua/beck/internal/versioned.lua's layout, p = [length][key]):
 * its latest version at p + ff*8 ([time][1 | 0][value]), older ones at p + [valid to] +
 * [time] ([1 | 0][value]). extra: the as-of time, or NULL for the latest. */
static int versioned_local(bk_qreq_t *r, const bk_plan_store_t *ps, bk_task_id_t tid,
                           const char *key, size_t klen, int roles, long long max_lag, bk_jbuf_t *b,
                           unsigned *status, const void *extra)
{
    const int64_t *as_of = extra;
    bk_taskdb_read_t rd;
    bk_dbread_pin_t *pin = NULL;
    size_t plen = 4 + klen, vl = 0;
    char *k = malloc(plen + 24), err[512];
    const char *v = NULL, *found = NULL;
    size_t foundlen = 0;
    int64_t ts = -1, lt = -1;
    int si, rc = 0, deleted = 0;
    char *copy = NULL;

    if (!k) {
        return -1;
    }
    be32(k, (uint32_t)klen);
    memcpy(k + 4, key, klen);
    memset(k + plen, 0xff, 8);
    if (bk_query_take_local(r, tid, roles, max_lag, &rd) != 0) {
        free(k);
        return -1;
    }
    si = bk_dbread_store(rd.db, ps->name);
    rc =
        si < 0 ? -1 : bk_dbread_get_pinned(rd.db, si, k, plen + 8, &v, &vl, &pin, err, sizeof(err));
    if (rc == 1 && vl >= 9) {
        lt = bk_query_get64((const unsigned char *)v);
        if (!as_of || lt <= *as_of) {
            ts = lt;
            deleted = v[8] == 0;
            copy = malloc(vl - 9 + 1);
            if (copy) {
                memcpy(copy, v + 9, vl - 9);
            }
            found = copy;
            foundlen = vl - 9;
        }
    }
    bk_dbread_unpin(pin);
    if (rc == 1 && lt >= 0 && as_of && ts < 0) {
        /* the first older version still valid after as_of */
        char *hi = malloc(plen + 24);
        bk_store_iter_t *it = NULL;
        const char *ik, *iv;
        size_t ikl, ivl;
        if (hi) {
            memcpy(hi, k, plen);
            be64(k + plen, *as_of + 1);
            be64(hi + plen, lt);
            memset(hi + plen + 8, 0xff, 16);
            it = bk_dbread_iter(rd.db, si, BK_FFI_ITER_RANGE, k, plen + 8, hi, plen + 24);
        }
        if (it && bk_ffi_store_iter_next(it, &ik, &ikl, &iv, &ivl) && ikl >= plen + 16 &&
            ivl >= 1) {
            int64_t t0 = bk_query_get64((const unsigned char *)ik + plen + 8);
            if (t0 <= *as_of) {
                ts = t0;
                deleted = iv[0] == 0;
                copy = malloc(ivl);
                if (copy) {
                    memcpy(copy, iv + 1, ivl - 1);
                }
                found = copy;
                foundlen = ivl - 1;
            }
        }
        bk_ffi_store_iter_free(it);
        free(hi);
    }
    bk_jbuf_lit(b, "{\"store\":");
    bk_jbuf_str(b, ps->name, strlen(ps->name));
    bk_jbuf_lit(b, ",");
    bk_jbuf_bytes(b, "key", key, klen);
    if (rc < 0) {
        bk_jbuf_lit(b, ",\"error\":");
        if (si < 0) {
            snprintf(err, sizeof(err), "task %s has no store %s", BK_TASK_NAME(tid), ps->name);
        }
        bk_jbuf_str(b, err, strlen(err));
        *status = 500;
    } else if (ts >= 0 && !deleted && found) {
        bk_jbuf_lit(b, ",");
        bk_jbuf_bytes(b, "value", found, foundlen);
        bk_jbuf_printf(b, ",\"timestamp\":%lld", (long long)ts);
        *status = 200;
    } else {
        bk_jbuf_lit(b, ",\"error\":\"no such key\"");
        if (ts >= 0) {
            bk_jbuf_printf(b, ",\"deleted_at\":%lld", (long long)ts);
        }
        *status = 404;
    }
    if (as_of) {
        bk_jbuf_printf(b, ",\"as_of\":%lld", (long long)*as_of);
    }
    bk_jbuf_lit(b, ",");
    meta(r, b, tid, rd.role, rd.lag);
    bk_jbuf_lit(b, "}");
    bk_taskdb_read_end(r->q->env.pool, &rd);
    free(copy);
    free(k);
    return 0;
}

enum MHD_Result bk_query_key(bk_qreq_t *r, const char *store, const char *key, size_t klen)
{
    static const char tail[] = "/windows";
    const bk_plan_store_t *ps = bk_query_find_store(r->q->env.plan, store);
    size_t tl = sizeof(tail) - 1;
    char args[128];
    wq_t w;
    bk_global_t *g = ps ? NULL : bk_global_current();
    int gi = g ? bk_global_index(g, store) : -1;

    if (gi >= 0) {
        return global_key(r, g, gi, key, klen);
    }
    if (!ps) {
        return bk_query_error(r, 404, -1, "no store named '%s' (GET /v1/stores lists them)", store);
    }
    if (!ps->window) {
        return answer_key(r, ps, key, klen, key_local_fn, NULL, "", "");
    }
    if (ps->versioned) {
        /* the latest version, or ?as_of=T: the one valid at T */
        const char *a = bk_query_arg(r, "as_of");
        int64_t at = a ? time_arg(r, "as_of", 0) : -1;
        char args[64];
        if (a && at < 0) {
            return bk_query_error(r, 400, -1, "as_of: a time in ms from 0 to 2^53 - 1");
        }
        args[0] = '\0';
        if (a) {
            snprintf(args, sizeof(args), "as_of=%lld", (long long)at);
        }
        return answer_key(r, ps, key, klen, versioned_local, a ? &at : NULL, "", args);
    }
    /* a window store: GET .../keys/{key}/windows?from=&to=&limit= */
    if (klen <= tl || memcmp(key + klen - tl, tail, tl) != 0) {
        return bk_query_error(r, 400, -1,
                              "%s is a window store: GET /v1/stores/%s/keys/{key}/windows"
                              "?from=&to= (docs/queries.md)",
                              store, store);
    }
    w.from = time_arg(r, "from", 0);
    w.to = time_arg(r, "to", TIME_MAX);
    w.limit = bk_query_limit(r);
    if (w.from < 0 || w.to < 0 || w.limit < 0) {
        return bk_query_error(r, 400, -1,
                              "from and to: times in ms from 0 to 2^53 - 1; limit: 1 to %d",
                              BK_QUERY_LIMIT_MAX);
    }
    snprintf(args, sizeof(args), "from=%lld&to=%lld&limit=%d", (long long)w.from, (long long)w.to,
             w.limit);
    return answer_key(r, ps, key, klen - tl, windows_local, &w, tail, args);
}
