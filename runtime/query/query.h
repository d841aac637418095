/* query.h - a node's HTTP server for queries (docs/queries.md): its state read as a
 * key-value database, routed to the node that holds a key, and the node's health and
 * metrics. libmicrohttpd, a pool of its threads; nothing it serves writes anything.
 * @locality started and stopped by the node's main thread; requests on its own threads */
#ifndef BK_QUERY_H
#define BK_QUERY_H

#include "base/conf.h"
#include "engine/livestats.h"
#include "engine/plan.h"
#include "engine/taskdb.h"
#include "query/route.h"

typedef struct bk_query_s bk_query_t;

typedef struct bk_query_env_s {
    const bk_plan_t *plan;
    const bk_conf_t *conf;
    bk_taskdb_pool_t *pool; /* the DBs served here (taskdb.h) */
    bk_route_t *route;      /* where the others are */
    const char *node_id;
    bk_livestats_t *live; /* the stream threads' live counters, or NULL */
} bk_query_env_t;

/* Listens on host:port (port 0: any free one, see bk_query_port). env's pointers must
 * outlive the server. NULL with errstr. */
bk_query_t *bk_query_start(const bk_query_env_t *env, const char *host, int port, char *errstr,
                           size_t errstr_size);
int bk_query_port(const bk_query_t *q);
void bk_query_stop(bk_query_t *q);

#endif
