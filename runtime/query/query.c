/* query.c - the query server's HTTP glue (query.h): libmicrohttpd's thread pool, the
 * paths, the bearer token, replies. What each path answers is in query_stores.c and query_status.c.
 */
#include "query/query.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/ffi.h"
#include "base/log.h"
#include "query/forward.h"
#include "query/query_internal.h"

#define THREADS 4 /* MHD's pool: a routed read blocks its thread for a round trip */

/* The server of this process, for Lua's beck.query (bk_ffi_query_get): its port and token,
 * set while it runs. A process serves one app, so one server. */
static pthread_mutex_t self_lock = PTHREAD_MUTEX_INITIALIZER;
static int self_port;
static char *self_token;
/* A connection idle this long is closed. libmicrohttpd 0.9.75 does not close one whose
 * client shut its side down (in the middle of a request, or kept alive after an answer)
 * before then, so each such client holds a connection this long (found by fuzz/http.c). */
#define IDLE_S 10
#define CONNECTIONS 512 /* answered; past it, a 429 (MHD itself refuses past twice it) */

/* Queues resp (destroyed here) with its headers. */
static enum MHD_Result queue(bk_qreq_t *r, struct MHD_Response *resp, unsigned status,
                             const char *type, long retry_after)
{
    enum MHD_Result rc;
    char ra[32];
    MHD_add_response_header(resp, "Content-Type", type);
    MHD_add_response_header(resp, "X-Beck-Node", r->q->env.node_id);
    MHD_add_response_header(resp, "Cache-Control", "no-store");
    if (retry_after >= 0) {
        snprintf(ra, sizeof(ra), "%ld", retry_after);
        MHD_add_response_header(resp, "Retry-After", ra);
    }
    if (status >= 400) {
        atomic_fetch_add(&r->q->errors, 1);
    }
    rc = MHD_queue_response(r->c, status, resp);
    MHD_destroy_response(resp);
    return rc;
}

enum MHD_Result bk_query_reply_raw(bk_qreq_t *r, unsigned status, const char *type,
                                   const char *body, size_t len, long retry_after)
{
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
    return resp ? queue(r, resp, status, type, retry_after) : MHD_NO;
}

enum MHD_Result bk_query_reply(bk_qreq_t *r, unsigned status, bk_jbuf_t *b, long retry_after)
{
    struct MHD_Response *resp;
    bk_jbuf_lit(b, "\n");
    if (b->oom || !b->p) {
        bk_jbuf_free(b);
        return bk_query_reply_raw(r, 500, "application/json", "{\"error\":\"out of memory\"}\n", 26,
                                  -1);
    }
    /* the buffer goes to MHD, which frees it: no copy */
    resp = MHD_create_response_from_buffer(b->len, b->p, MHD_RESPMEM_MUST_FREE);
    if (!resp) {
        bk_jbuf_free(b);
        return MHD_NO;
    }
    memset(b, 0, sizeof(*b));
    return queue(r, resp, status, "application/json", retry_after);
}

enum MHD_Result bk_query_error(bk_qreq_t *r, unsigned status, long retry_after, const char *fmt,
                               ...)
{
    bk_jbuf_t b = {0};
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    bk_jbuf_lit(&b, "{\"error\":");
    bk_jbuf_str(&b, msg, strlen(msg));
    bk_jbuf_lit(&b, ",\"node\":");
    bk_jbuf_str(&b, r->q->env.node_id, strlen(r->q->env.node_id));
    bk_jbuf_lit(&b, "}");
    return bk_query_reply(r, status, &b, retry_after);
}

const char *bk_query_arg(bk_qreq_t *r, const char *name)
{
    return MHD_lookup_connection_value(r->c, MHD_GET_ARGUMENT_KIND, name);
}

int bk_query_limit(bk_qreq_t *r)
{
    const char *s = bk_query_arg(r, "limit");
    char *end;
    long v;
    if (!s) {
        return BK_QUERY_LIMIT_DEFAULT;
    }
    v = strtol(s, &end, 10);
    return *s && !*end && v >= 1 && v <= BK_QUERY_LIMIT_MAX ? (int)v : -1;
}

int bk_query_roles(bk_qreq_t *r, long long *max_lag)
{
    const char *rep = bk_query_arg(r, "replica"), *ml = bk_query_arg(r, "max_lag");
    *max_lag = ml ? strtoll(ml, NULL, 10) : -1;
    return BK_TASKDB_ACTIVE | (rep && strcmp(rep, "any") == 0 ? BK_TASKDB_STANDBY : 0);
}

/* The bearer token, compared in time that does not depend on where it differs. */
static int authorized(bk_qreq_t *r)
{
    const char *h = MHD_lookup_connection_value(r->c, MHD_HEADER_KIND, "Authorization");
    const char *want = r->q->token;
    size_t n, m;
    unsigned diff = 0;
    if (!want) {
        return 1;
    }
    if (!h || strncmp(h, "Bearer ", 7) != 0) {
        return 0;
    }
    h += 7;
    n = strlen(h);
    m = strlen(want);
    diff = n != m;
    for (size_t i = 0; i < m; i++) {
        diff |= (unsigned)(want[i] ^ (i < n ? h[i] : 0));
    }
    return diff == 0;
}

static enum MHD_Result dispatch(bk_qreq_t *r, const char *url)
{
    static const char stores[] = "/v1/stores/";
    if (strcmp(url, "/healthz") == 0) {
        return bk_query_healthz(r);
    }
    if (strcmp(url, "/") == 0 || strcmp(url, "/index.html") == 0) {
        return bk_query_page(r); /* data only: its requests carry the token */
    }
    if (!authorized(r)) {
        return bk_query_error(r, 401, -1, "a bearer token is needed (http_token)");
    }
    if (strcmp(url, "/readyz") == 0) {
        return bk_query_readyz(r);
    }
    if (strcmp(url, "/metrics") == 0) {
        return bk_query_metrics(r);
    }
    if (strcmp(url, "/v1/assignment") == 0) {
        return bk_query_assignment(r);
    }
    if (strcmp(url, "/v1/status") == 0) {
        return bk_query_status(r);
    }
    if (strcmp(url, "/v1/events") == 0) {
        return bk_query_events(r);
    }
    if (strcmp(url, "/v1/stores") == 0 || strcmp(url, "/v1/stores/") == 0) {
        return bk_query_stores(r);
    }
    if (strcmp(url, "/v1/internal/scan") == 0) {
        return bk_query_internal_scan(r);
    }
    if (strncmp(url, stores, sizeof(stores) - 1) == 0) {
        /* /v1/stores/{store}/keys/{key}, .../range, .../prefix/{p}: a key is everything after
         * its "/keys/" (it may hold '/'), escaped by the client, unescaped by MHD */
        const char *name = url + sizeof(stores) - 1, *slash = strchr(name, '/');
        char store[256];
        if (slash && (size_t)(slash - name) < sizeof(store)) {
            memcpy(store, name, (size_t)(slash - name));
            store[slash - name] = '\0';
            if (strncmp(slash, "/keys/", 6) == 0 && slash[6]) {
                return bk_query_key(r, store, slash + 6, strlen(slash + 6));
            }
            if (strcmp(slash, "/range") == 0) {
                return bk_query_scan(r, store, NULL, 0);
            }
            if (strncmp(slash, "/prefix/", 8) == 0) {
                return bk_query_scan(r, store, slash + 8, strlen(slash + 8));
            }
        }
    }
    return bk_query_error(r, 404, -1, "no such path: %s (docs/queries.md)", url);
}

/* Counts the open connections, for the 429 past CONNECTIONS. */
static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode code)
{
    bk_query_t *q = cls;
    (void)c;
    (void)socket_context;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        atomic_fetch_add(&q->connections, 1);
    } else if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
        atomic_fetch_sub(&q->connections, 1);
    }
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload,
                                  size_t *upload_size, void **state)
{
    static int started;
    bk_qreq_t r = {cls, c, 0};
    const char *fw;
    (void)version;
    (void)upload;
    if (!*state) {
        *state = &started; /* the headers; answer on the next call */
        return MHD_YES;
    }
    if (*upload_size) {
        *upload_size = 0; /* a body is never read */
        return MHD_YES;
    }
    atomic_fetch_add(&r.q->requests, 1);
    if (atomic_load(&r.q->connections) > CONNECTIONS) {
        return bk_query_error(&r, 429, 1, "more than %d connections: try again", CONNECTIONS);
    }
    if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0) {
        return bk_query_error(
            &r, 405, -1, "%s: queries only read (GET); writes go through Kafka topics", method);
    }
    fw = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "X-Beck-Forwarded");
    r.forwarded = fw && strcmp(fw, "1") == 0;
    return dispatch(&r, url);
}

bk_query_t *bk_query_start(const bk_query_env_t *env, const char *host, int port, char *errstr,
                           size_t errstr_size)
{
    bk_query_t *q = calloc(1, sizeof(*q));
    struct sockaddr_in addr;
    const char *token = bk_conf_str(env->conf, BK_CONF_HTTP_TOKEN);
    const union MHD_DaemonInfo *info;

    if (!q || bk_forward_init() != 0) {
        snprintf(errstr, errstr_size, "out of memory");
        free(q);
        return NULL;
    }
    q->env = *env;
    q->token = token && token[0] ? strdup(token) : NULL;
    memset(&addr, 0, sizeof(addr));
    addr.sin_family = AF_INET;
    addr.sin_port = htons((uint16_t)port);
    if (inet_pton(AF_INET, host, &addr.sin_addr) != 1) {
        snprintf(errstr, errstr_size, "http_listen: '%s' is not an IPv4 address", host);
        free(q->token);
        free(q);
        return NULL;
    }
    q->d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL, 0, NULL, NULL,
                            on_request, q, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr,
                            MHD_OPTION_THREAD_POOL_SIZE, (unsigned)THREADS,
                            MHD_OPTION_CONNECTION_LIMIT, (unsigned)(2 * CONNECTIONS),
                            MHD_OPTION_NOTIFY_CONNECTION, on_connection, q,
                            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)IDLE_S, MHD_OPTION_END);
    if (!q->d) {
        snprintf(errstr, errstr_size, "cannot listen on %s:%d (in use, or not this host's)", host,
                 port);
        free(q->token);
        free(q);
        return NULL;
    }
    info = MHD_get_daemon_info(q->d, MHD_DAEMON_INFO_BIND_PORT);
    q->port = info ? info->port : port;
    pthread_mutex_lock(&self_lock);
    self_port = q->port;
    free(self_token);
    self_token = q->token ? strdup(q->token) : NULL;
    pthread_mutex_unlock(&self_lock);
    return q;
}

int bk_query_port(const bk_query_t *q)
{
    return q->port;
}

void bk_query_stop(bk_query_t *q)
{
    if (!q) {
        return;
    }
    pthread_mutex_lock(&self_lock);
    self_port = 0;
    free(self_token);
    self_token = NULL;
    pthread_mutex_unlock(&self_lock);
    MHD_stop_daemon(q->d);
    free(q->token);
    free(q);
}

char *bk_ffi_query_get(const char *path, int32_t *status, size_t *body_len)
{
    bk_forward_resp_t resp;
    char ep[64], err[512], *token;
    int port;

    pthread_mutex_lock(&self_lock);
    port = self_port;
    token = self_token ? strdup(self_token) : NULL;
    pthread_mutex_unlock(&self_lock);
    *body_len = 0;
    *status = -1;
    if (!port) {
        free(token);
        return NULL;
    }
    snprintf(ep, sizeof(ep), "127.0.0.1:%d", port);
    if (bk_forward_get(ep, path, token, 0, BK_QUERY_FORWARD_MS, &resp, err, sizeof(err)) != 0) {
        free(token);
        *status = 0;
        *body_len = strlen(err);
        return strdup(err);
    }
    free(token);
    *status = (int32_t)resp.status;
    *body_len = resp.len;
    return resp.body ? resp.body : strdup("");
}

void bk_ffi_query_free(char *body)
{
    free(body);
}
