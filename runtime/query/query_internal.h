/* query_internal.h - the insides of the query server, shared by its files only: query.c
 * (the HTTP glue: threads, dispatch, token, replies), query_stores.c (a store's keys, local or
 * routed), query_scan.c (its ranges, gathered and merged), query_status.c (health, readiness,
 * assignment, metrics), query_page.c (the status page). */
#ifndef BK_QUERY_INTERNAL_H
#define BK_QUERY_INTERNAL_H

#include <stdatomic.h>
#include <stddef.h>

#include <microhttpd.h>

#include "query/jbuf.h"
#include "query/query.h"

#define BK_QUERY_KEY_MAX 4096   /* bytes of a key, a bound or a prefix */
#define BK_QUERY_LIMIT_MAX 1000 /* entries of a page */
#define BK_QUERY_LIMIT_DEFAULT 100
#define BK_QUERY_FORWARD_MS 5000 /* a routed request's time to answer */

struct bk_query_s {
    bk_query_env_t env;
    char *token; /* http_token, NULL: none */
    struct MHD_Daemon *d;
    int port;
    atomic_ullong requests, forwarded, errors; /* for /metrics */
    atomic_int connections;                    /* open now */
};

/* One request being answered. */
typedef struct bk_qreq_s {
    bk_query_t *q;
    struct MHD_Connection *c;
    int forwarded; /* another node sent it: answer from here or say 503, never route */
} bk_qreq_t;

/* Replies with b's JSON (taken) and status; Retry-After when retry_after >= 0. */
enum MHD_Result bk_query_reply(bk_qreq_t *r, unsigned status, bk_jbuf_t *b, long retry_after);
/* Replies with the bytes (copied) and content type as they are. */
enum MHD_Result bk_query_reply_raw(bk_qreq_t *r, unsigned status, const char *type,
                                   const char *body, size_t len, long retry_after);
/* {"error": "...", "node": "..."} */
enum MHD_Result bk_query_error(bk_qreq_t *r, unsigned status, long retry_after, const char *fmt,
                               ...) __attribute__((format(printf, 4, 5)));
/* A query argument (unescaped), NULL when absent. */
const char *bk_query_arg(bk_qreq_t *r, const char *name);
/* limit=, within [1, BK_QUERY_LIMIT_MAX], default BK_QUERY_LIMIT_DEFAULT; -1 when bad. */
int bk_query_limit(bk_qreq_t *r);
/* replica=any: standbys may answer; max_lag= bounds their lag (default: any). */
int bk_query_roles(bk_qreq_t *r, long long *max_lag);

/* query_stores.c */
enum MHD_Result bk_query_stores(bk_qreq_t *r);
enum MHD_Result bk_query_key(bk_qreq_t *r, const char *store, const char *key, size_t klen);
/* ... and what query_scan.c shares of it: a store of the topology by name (NULL: none); the
 * local replica of tid that may answer (roles; a standby only within max_lag): 0 and *rd,
 * or -1; "replica=any&max_lag=N" as asked, for a routed request; a role's name; a big-endian
 * int64 at p. */
const bk_plan_store_t *bk_query_find_store(const bk_plan_t *plan, const char *name);
int bk_query_take_local(bk_qreq_t *r, bk_task_id_t tid, int roles, long long max_lag,
                        bk_taskdb_read_t *rd);
void bk_query_pass_args(bk_qreq_t *r, char *buf, size_t size);
const char *bk_query_role_name(int role);
int64_t bk_query_get64(const unsigned char *p);

/* query_scan.c */
/* prefix NULL: a range (from=, to=); else the keys starting with prefix. */
enum MHD_Result bk_query_scan(bk_qreq_t *r, const char *store, const char *prefix, size_t plen);
enum MHD_Result bk_query_internal_scan(bk_qreq_t *r);

/* query_status.c */
enum MHD_Result bk_query_healthz(bk_qreq_t *r);
enum MHD_Result bk_query_readyz(bk_qreq_t *r);
enum MHD_Result bk_query_assignment(bk_qreq_t *r);
enum MHD_Result bk_query_status(bk_qreq_t *r);
enum MHD_Result bk_query_events(bk_qreq_t *r);
enum MHD_Result bk_query_metrics(bk_qreq_t *r);

/* query_page.c: GET /, the status page */
enum MHD_Result bk_query_page(bk_qreq_t *r);

#endif
