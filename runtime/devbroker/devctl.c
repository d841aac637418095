/* devctl.c - client of the dev broker's control channel: discovery and one-line requests. */
#define _GNU_SOURCE /* MSG_NOSIGNAL */

#include "devbroker/devctl.h"

#include "devbroker/broker.h" /* BK_BROKER_CTL_PREFIX only */

#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <arpa/inet.h>

#define BK_DEVCTL_TIMEOUT_S 5
/* Replies are short; BOOTSTRAP for 64 brokers is the longest, ~1.1 KB. */
#define BK_DEVCTL_REPLY_MAX 4096

int bk_devctl_discover(rd_kafka_t *rk, int timeout_ms, char *errstr, size_t errstr_size)
{
    const struct rd_kafka_metadata *md = NULL;
    const size_t prefix_len = strlen(BK_BROKER_CTL_PREFIX);
    rd_kafka_resp_err_t err;
    int port = 0;

    /* All topics: asking a mock cluster about one named topic would create it. */
    err = rd_kafka_metadata(rk, 1, NULL, &md, timeout_ms);
    if (err) {
        snprintf(errstr, errstr_size, "cannot read cluster metadata: %s", rd_kafka_err2str(err));
        return -1;
    }
    for (int i = 0; i < md->topic_cnt && port == 0; i++) {
        const char *name = md->topics[i].topic;
        char *end;
        long v;

        if (strncmp(name, BK_BROKER_CTL_PREFIX, prefix_len) != 0) {
            continue;
        }
        v = strtol(name + prefix_len, &end, 10);
        if (end != name + prefix_len && *end == '\0' && v > 0 && v <= 65535) {
            port = (int)v;
        }
    }
    rd_kafka_metadata_destroy(md);
    return port;
}

int bk_devctl_request(int port, const char *line, char *reply, size_t reply_size, char *errstr,
                      size_t errstr_size)
{
    struct sockaddr_in sin = {.sin_family = AF_INET,
                              .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
                              .sin_port = htons((uint16_t)port)};
    struct timeval tv = {.tv_sec = BK_DEVCTL_TIMEOUT_S};
    char buf[BK_DEVCTL_REPLY_MAX];
    char *out = NULL;
    size_t len = 0, out_len;
    char *nl = NULL;
    int fd = -1;

    /* One request, one reply line: an embedded newline would smuggle in a second. */
    if (strpbrk(line, "\r\n")) {
        snprintf(errstr, errstr_size, "control request contains a line break");
        goto fail;
    }
    out_len = strlen(line) + 1;
    out = malloc(out_len + 1);
    if (!out) {
        snprintf(errstr, errstr_size, "out of memory");
        goto fail;
    }
    memcpy(out, line, out_len - 1);
    out[out_len - 1] = '\n';

    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        snprintf(errstr, errstr_size, "socket: %s", strerror(errno));
        goto fail;
    }
    /* On Linux SO_SNDTIMEO also bounds a blocking connect(). */
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    if (connect(fd, (struct sockaddr *)&sin, sizeof(sin)) != 0) {
        snprintf(errstr, errstr_size, "dev broker control channel 127.0.0.1:%d: connect: %s", port,
                 strerror(errno));
        goto fail;
    }

    for (size_t off = 0; off < out_len;) {
        ssize_t n = send(fd, out + off, out_len - off, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0) {
            snprintf(errstr, errstr_size, "dev broker control channel 127.0.0.1:%d: send: %s", port,
                     strerror(errno));
            goto fail;
        }
        off += (size_t)n;
    }

    while (!nl) {
        ssize_t n;

        if (len == sizeof(buf) - 1) {
            snprintf(errstr, errstr_size, "dev broker control channel: reply too long");
            goto fail;
        }
        n = recv(fd, buf + len, sizeof(buf) - 1 - len, 0);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            snprintf(errstr, errstr_size, "dev broker control channel 127.0.0.1:%d: %s", port,
                     n == 0                                      ? "closed without a reply"
                     : (errno == EAGAIN || errno == EWOULDBLOCK) ? "no reply in time"
                                                                 : strerror(errno));
            goto fail;
        }
        len += (size_t)n;
        buf[len] = '\0';
        nl = strchr(buf, '\n');
    }
    *nl = '\0';
    close(fd);
    fd = -1;
    free(out);
    out = NULL;

    if (strncmp(buf, "OK", 2) == 0 && (buf[2] == '\0' || buf[2] == ' ')) {
        if (reply) {
            snprintf(reply, reply_size, "%s", buf[2] ? buf + 3 : "");
        }
        return 0;
    }
    /* "ERR <message>": the message alone reads best in the caller's error. */
    snprintf(errstr, errstr_size, "%s", strncmp(buf, "ERR ", 4) == 0 ? buf + 4 : buf);
    return -1;

fail:
    if (fd >= 0) {
        close(fd);
    }
    free(out);
    return -1;
}

int bk_devctl_create_topic(int port, const char *topic, int partitions, char *errstr,
                           size_t errstr_size)
{
    char line[512];

    /* Names longer than Kafka's 249 are refused by the broker; do not truncate
     * one into a different, valid name here. */
    if ((size_t)snprintf(line, sizeof(line), "CREATE %s %d", topic, partitions) >= sizeof(line)) {
        snprintf(errstr, errstr_size, "invalid topic name '%.60s...': too long", topic);
        return -1;
    }
    return bk_devctl_request(port, line, NULL, 0, errstr, errstr_size);
}
