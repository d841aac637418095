/* forward.c - queries sent on to other nodes with libcurl (forward.h). */
#include "query/forward.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <curl/curl.h>

static pthread_key_t handle_key;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static int init_rc = -1;

static void free_handle(void *h)
{
    curl_easy_cleanup(h);
}

static void init_once(void)
{
    if (curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK &&
        pthread_key_create(&handle_key, free_handle) == 0) {
        init_rc = 0;
    }
}

int bk_forward_init(void)
{
    pthread_once(&once, init_once);
    return init_rc;
}

/* The calling thread's handle, made on first use; its connections stay open between calls
 * and close when the thread ends (the key's destructor). */
static CURL *handle(void)
{
    CURL *h = pthread_getspecific(handle_key);
    if (!h && (h = curl_easy_init())) {
        curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
        curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http");
        pthread_setspecific(handle_key, h);
    }
    return h;
}

static size_t on_body(char *p, size_t size, size_t n, void *opaque)
{
    bk_forward_resp_t *r = opaque;
    size_t more = size * n;
    char *b = realloc(r->body, r->len + more + 1);
    if (!b) {
        return 0; /* curl fails the transfer */
    }
    memcpy(b + r->len, p, more);
    r->body = b;
    r->len += more;
    b[r->len] = '\0';
    return more;
}

/* Header value into dst when the line is "name: value". */
static void header_value(const char *line, size_t len, const char *name, char *dst, size_t size)
{
    size_t nl = strlen(name);
    if (len > nl + 1 && strncasecmp(line, name, nl) == 0 && line[nl] == ':') {
        size_t i = nl + 1, j = 0;
        while (i < len && (line[i] == ' ' || line[i] == '\t')) {
            i++;
        }
        while (i < len && line[i] != '\r' && line[i] != '\n' && j + 1 < size) {
            dst[j++] = line[i++];
        }
        dst[j] = '\0';
    }
}

static size_t on_header(char *p, size_t size, size_t n, void *opaque)
{
    bk_forward_resp_t *r = opaque;
    char retry[32] = "";
    header_value(p, size * n, "Retry-After", retry, sizeof(retry));
    if (retry[0]) {
        r->retry_after = strtol(retry, NULL, 10);
    }
    header_value(p, size * n, "Content-Type", r->content_type, sizeof(r->content_type));
    header_value(p, size * n, "X-Beck-Node", r->node, sizeof(r->node));
    return size * n;
}

int bk_forward_get(const char *endpoint, const char *path, const char *token, int routed,
                   long timeout_ms, bk_forward_resp_t *out, char *errstr, size_t errstr_size)
{
    CURL *h;
    struct curl_slist *hdrs = NULL;
    char *url = NULL, auth[1024];
    size_t ulen = strlen(endpoint) + strlen(path) + 16;
    CURLcode rc;

    memset(out, 0, sizeof(*out));
    out->retry_after = -1;
    if (bk_forward_init() != 0 || !(h = handle()) || !(url = malloc(ulen))) {
        snprintf(errstr, errstr_size, "cannot make an HTTP client");
        free(url);
        return -1;
    }
    snprintf(url, ulen, "http://%s%s", endpoint, path);
    if (routed) {
        hdrs = curl_slist_append(hdrs, "X-Beck-Forwarded: 1");
    }
    if (token && token[0]) {
        snprintf(auth, sizeof(auth), "Authorization: Bearer %s", token);
        hdrs = curl_slist_append(hdrs, auth);
    }
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, timeout_ms < 2000 ? timeout_ms : 2000L);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, out);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, out);
    rc = curl_easy_perform(h);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, NULL);
    curl_slist_free_all(hdrs);
    free(url);
    if (rc != CURLE_OK) {
        snprintf(errstr, errstr_size, "%s: %s", endpoint, curl_easy_strerror(rc));
        free(out->body);
        out->body = NULL;
        out->len = 0;
        return -1;
    }
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &out->status);
    return 0;
}

char *bk_forward_escape(const char *s, size_t n)
{
    char *e, *copy;
    if (bk_forward_init() != 0) {
        return NULL;
    }
    e = curl_easy_escape(NULL, s, (int)n);
    if (!e) {
        return NULL;
    }
    copy = strdup(e);
    curl_free(e);
    return copy;
}
