/* forward.h - a query sent on to the node that can answer it, over HTTP/1.1 with libcurl.
 * Each HTTP thread keeps its own curl handle for its life, and with it a kept-alive
 * connection to every node it has asked: a routed read costs one round trip, not a TCP
 * handshake. @locality any thread (each has its own handle) */
#ifndef BK_FORWARD_H
#define BK_FORWARD_H

#include <stddef.h>

typedef struct bk_forward_resp_s {
    long status; /* HTTP status, 0: no answer */
    char *body;  /* free() it */
    size_t len;
    long retry_after; /* its Retry-After in seconds, -1: none */
    char content_type[64];
    char node[256]; /* its X-Beck-Node */
} bk_forward_resp_t;

/* Once per process, before any thread forwards. 0, or -1. */
int bk_forward_init(void);
/* GET http://<endpoint><path> (path starts with '/', escaped, with its query), with
 * "Authorization: Bearer <token>" when token is set and, when `routed` (a node sending on
 * a query), "X-Beck-Forwarded: 1": the node asked answers from its own state or says 503,
 * never routes again. Waits timeout_ms at most. 0 with *out (free out->body), or -1 with
 * errstr (no answer). */
int bk_forward_get(const char *endpoint, const char *path, const char *token, int routed,
                   long timeout_ms, bk_forward_resp_t *out, char *errstr, size_t errstr_size);
/* Escapes s[0..n) for a URL path segment or query value, into a malloc'd string. */
char *bk_forward_escape(const char *s, size_t n);

#endif
