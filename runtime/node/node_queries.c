/* node_queries.c - starting and stopping a node's query server (node_queries.h). */
#include "node/node_queries.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/events.h"
#include "base/log.h"

/* "host:port" into host (size bytes) and *port; 0, or -1. */
static int split(const char *s, char *host, size_t size, int *port)
{
    const char *colon = strrchr(s, ':');
    char *end;
    long p;
    if (!colon || (size_t)(colon - s) >= size) {
        return -1;
    }
    p = strtol(colon + 1, &end, 10);
    if (!colon[1] || *end || p < 0 || p > 65535) {
        return -1;
    }
    memcpy(host, s, (size_t)(colon - s));
    host[colon - s] = '\0';
    *port = (int)p;
    return 0;
}

int bk_node_queries_check(const bk_conf_t *conf, char *errstr, size_t errstr_size)
{
    const char *listen = bk_conf_str(conf, BK_CONF_HTTP_LISTEN);
    const char *endpoint = bk_conf_str(conf, BK_CONF_ENDPOINT);
    char host[256];
    int port;
    if (endpoint && endpoint[0] && split(endpoint, host, sizeof(host), &port) != 0) {
        snprintf(errstr, errstr_size, "endpoint '%s': expected host:port", endpoint);
        return -1;
    }
    if (listen && listen[0] && split(listen, host, sizeof(host), &port) != 0) {
        snprintf(errstr, errstr_size, "http_listen '%s': expected address:port", listen);
        return -1;
    }
    return 0;
}

int bk_node_queries_start(bk_node_queries_t *q, const bk_plan_t *plan, const bk_conf_t *conf,
                          bk_taskdb_pool_t *pool, char *errstr, size_t errstr_size)
{
    const char *listen = bk_conf_str(conf, BK_CONF_HTTP_LISTEN);
    const char *endpoint = bk_conf_str(conf, BK_CONF_ENDPOINT);
    const char *node_id = bk_conf_str(conf, BK_CONF_NODE_ID);
    char lhost[256] = "127.0.0.1", ehost[256] = "";
    int lport = 0, eport = 0;
    bk_query_env_t env;

    memset(q, 0, sizeof(*q));
    if (endpoint && endpoint[0] && split(endpoint, ehost, sizeof(ehost), &eport) != 0) {
        snprintf(errstr, errstr_size, "endpoint '%s': expected host:port", endpoint);
        return -1;
    }
    if (listen && listen[0] && split(listen, lhost, sizeof(lhost), &lport) != 0) {
        snprintf(errstr, errstr_size, "http_listen '%s': expected address:port", listen);
        return -1;
    }
    if (!(listen && listen[0])) {
        if (!ehost[0]) {
            return 0; /* asked for nowhere */
        }
        lport = eport;
    }
    {
        /* a counter for every task the table has room for: it grows with the moves */
        int ntasks = 0, cap = 0;
        bk_plan_task_table(plan, &ntasks, &cap);
        q->live = bk_livestats_new(cap > ntasks ? cap : ntasks,
                                   (int)bk_conf_int(conf, BK_CONF_THREADS), plan->cap_stores);
    }
    if (!q->live || !(q->route = bk_route_new(plan, node_id))) {
        snprintf(errstr, errstr_size, "out of memory");
        bk_livestats_destroy(q->live);
        q->live = NULL;
        return -1;
    }
    env = (bk_query_env_t){plan, conf, pool, q->route, node_id ? node_id : "local", q->live};
    if (!(q->server = bk_query_start(&env, lhost, lport, errstr, errstr_size))) {
        bk_route_destroy(q->route);
        bk_livestats_destroy(q->live);
        q->route = NULL;
        q->live = NULL;
        return -1;
    }
    /* what the others reach: the endpoint's host (else the listening address) with the
     * port the server has */
    snprintf(q->endpoint, sizeof(q->endpoint), "%.200s:%d",
             ehost[0]                        ? ehost
             : strcmp(lhost, "0.0.0.0") == 0 ? "127.0.0.1"
                                             : lhost,
             eport && ehost[0] ? eport : bk_query_port(q->server));
    bk_log_info("serving queries on http://%s:%d (endpoint %s)%s", lhost, bk_query_port(q->server),
                q->endpoint, bk_conf_str(conf, BK_CONF_HTTP_TOKEN) ? ", token required" : "");
    bk_events_emit("serving", "\"url\":\"http://%s:%d\",\"endpoint\":\"%s\",\"token\":%s", lhost,
                   bk_query_port(q->server), q->endpoint,
                   bk_conf_str(conf, BK_CONF_HTTP_TOKEN) ? "true" : "false");
    return 0;
}

void bk_node_queries_stop(bk_node_queries_t *q)
{
    bk_query_stop(q->server);
    bk_route_destroy(q->route);
    q->server = NULL;
    q->route = NULL;
}

void bk_node_queries_free(bk_node_queries_t *q)
{
    bk_node_queries_stop(q);
    bk_livestats_destroy(q->live); /* after the stream threads, which write it */
    memset(q, 0, sizeof(*q));
}
