/* events.c - a node's structured events (events.h). One mutex: events are rare (a node's
 * changes, not its records), so every emitter may take it. */
#define _GNU_SOURCE /* asprintf */

#include "base/events.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int opened;
static FILE *file;
static char node_id[256];
static int64_t seq;
/* ring[(s - 1) % KEEP] holds event s for s in (seq - kept, seq] */
static char *ring[BK_EVENTS_KEEP];
static int64_t kept;

int bk_events_open(const char *path, const char *node, char *err, size_t errsz)
{
    FILE *f = NULL;
    if (path && *path && !(f = fopen(path, "a"))) {
        snprintf(err, errsz, "events %s: %s", path, strerror(errno));
        return -1;
    }
    pthread_mutex_lock(&lock);
    if (file) {
        fclose(file);
    }
    file = f;
    opened = 1;
    snprintf(node_id, sizeof(node_id), "%s", node ? node : "");
    pthread_mutex_unlock(&lock);
    return 0;
}

void bk_events_set_node(const char *node)
{
    pthread_mutex_lock(&lock);
    snprintf(node_id, sizeof(node_id), "%s", node ? node : "");
    pthread_mutex_unlock(&lock);
}

void bk_events_close(void)
{
    pthread_mutex_lock(&lock);
    if (file) {
        fclose(file);
        file = NULL;
    }
    for (int i = 0; i < BK_EVENTS_KEEP; i++) {
        free(ring[i]);
        ring[i] = NULL;
    }
    opened = 0;
    kept = 0;
    pthread_mutex_unlock(&lock);
}

const char *bk_events_str(char *buf, size_t size, const char *s)
{
    size_t n = 0;
    if (size < 3) {
        return size ? (buf[0] = '\0', buf) : buf;
    }
    buf[n++] = '"';
    for (; s && *s && n + 8 < size; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            buf[n++] = '\\';
            buf[n++] = (char)c;
        } else if (c < 0x20) {
            n += (size_t)snprintf(buf + n, size - n, "\\u%04x", c);
        } else {
            buf[n++] = (char)c;
        }
    }
    buf[n++] = '"';
    buf[n] = '\0';
    return buf;
}

const char *bk_events_words(char *buf, size_t size, const char *words)
{
    size_t n = 0;
    int first = 1;
    if (size < 3) {
        return size ? (buf[0] = '\0', buf) : buf;
    }
    buf[n++] = '[';
    while (words && *words) {
        size_t w = strcspn(words, " ");
        if (w > 0) {
            if (n + w + 4 >= size) {
                break;
            }
            n += (size_t)snprintf(buf + n, size - n, "%s\"%.*s\"", first ? "" : ",", (int)w,
                                  words);
            first = 0;
        }
        words += w;
        words += strspn(words, " ");
    }
    buf[n++] = ']';
    buf[n] = '\0';
    return buf;
}

void bk_events_emit(const char *kind, const char *fmt, ...)
{
    char body[8192], head[512], *line;
    va_list ap;
    int n = 0, h;
    body[0] = '\0';
    if (fmt && *fmt) {
        va_start(ap, fmt);
        n = vsnprintf(body, sizeof(body), fmt, ap);
        va_end(ap);
        if (n < 0) {
            return;
        }
    }
    pthread_mutex_lock(&lock);
    if (!opened) {
        pthread_mutex_unlock(&lock);
        return;
    }
    seq++;
    h = snprintf(head, sizeof(head), "{\"seq\":%lld,\"time\":%lld,\"node\":", (long long)seq,
                 (long long)bk_clock_wall_ms());
    bk_events_str(head + h, sizeof(head) - (size_t)h - 64, node_id);
    h = (int)strlen(head);
    snprintf(head + h, sizeof(head) - (size_t)h, ",\"kind\":\"%s\"", kind);
    if (asprintf(&line, "%s%s%s}", head, body[0] ? "," : "", body) >= 0) {
        if (file) {
            fputs(line, file);
            fputc('\n', file);
            fflush(file);
        }
        free(ring[(seq - 1) % BK_EVENTS_KEEP]);
        ring[(seq - 1) % BK_EVENTS_KEEP] = line;
        if (kept < BK_EVENTS_KEEP) {
            kept++;
        }
    }
    pthread_mutex_unlock(&lock);
}

int bk_events_since(int64_t after, int max, char **out, size_t *len, int64_t *next,
                    int64_t *first)
{
    size_t cap = 256, n = 0;
    char *buf = malloc(cap);
    int count = 0;
    if (!buf) {
        return -1;
    }
    buf[n++] = '[';
    pthread_mutex_lock(&lock);
    *first = seq - kept + 1;
    if (after < seq - kept || after > seq) {
        /* missed ones are gone; a cursor past the end is another process's (a restart):
         * from the oldest kept */
        after = seq - kept;
    }
    for (int64_t s = after + 1; s <= seq && count < max; s++, count++) {
        const char *e = ring[(s - 1) % BK_EVENTS_KEEP];
        size_t el = strlen(e);
        if (n + el + 4 > cap) {
            char *grown;
            while (n + el + 4 > cap) {
                cap *= 2;
            }
            if (!(grown = realloc(buf, cap))) {
                pthread_mutex_unlock(&lock);
                free(buf);
                return -1;
            }
            buf = grown;
        }
        if (count > 0) {
            buf[n++] = ',';
        }
        memcpy(buf + n, e, el);
        n += el;
        after = s;
    }
    *next = after;
    pthread_mutex_unlock(&lock);
    buf[n++] = ']';
    buf[n] = '\0';
    *out = buf;
    *len = n;
    return 0;
}
