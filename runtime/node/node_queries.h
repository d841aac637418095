/* node_queries.h - a node's query server (query/query.h) as the node starts it: where it listens
 * (http_listen, else 127.0.0.1 at the endpoint's port, else nowhere), and the endpoint the
 * node publishes, with the port the server got when it asked for any (port 0). */
#ifndef BK_NODE_QUERIES_H
#define BK_NODE_QUERIES_H

#include <stddef.h>

#include "base/conf.h"
#include "engine/livestats.h"
#include "engine/plan.h"
#include "engine/taskdb.h"
#include "query/query.h"
#include "query/route.h"

typedef struct bk_node_queries_s {
    bk_route_t *route;
    bk_query_t *server;
    bk_livestats_t *live; /* the stream threads' live counters /metrics shows (NULL: none) */
    char endpoint[256]; /* to publish: "" when there is none */
} bk_node_queries_t;

/* The endpoint and http_listen settings parse (host:port): checked before the node makes
 * anything. 0, or -1 with errstr. */
int bk_node_queries_check(const bk_conf_t *conf, char *errstr, size_t errstr_size);
/* 0 (q->server NULL when neither setting asks for one), or -1 with errstr: a node that was
 * asked to serve and cannot does not start. */
int bk_node_queries_start(bk_node_queries_t *q, const bk_plan_t *plan, const bk_conf_t *conf,
                          bk_taskdb_pool_t *pool, char *errstr, size_t errstr_size);
/* Stops the server (before the DBs close: no reader waits on a closing one); free, once the
 * stream threads have stopped, frees the live counters too. */
void bk_node_queries_stop(bk_node_queries_t *q);
void bk_node_queries_free(bk_node_queries_t *q);

#endif
