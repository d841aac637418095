/* broker_ctl.c - the dev broker's control channel: one command a line on a loopback TCP
 * port (devctl.h is its client), served one connection after another by a thread of its
 * own (broker_internal.h). */
#define _GNU_SOURCE /* accept4, pipe2, MSG_NOSIGNAL */

#include "devbroker/broker_internal.h"

#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

/* Longest command line accepted; CREATE with a 249-character name needs ~270. */
#define BK_BROKER_LINE_MAX 1024
/* A connection that sends nothing for this long is closed, because connections
 * are served one after another and an idle one would block everybody else.
 * Shorter than devctl's 5 s reply timeout, so a request queued behind an idle
 * connection is still answered in time. */
#define BK_BROKER_IDLE_MS 3000
#define BK_BROKER_SEND_TIMEOUT_S 5

/* Writes all of buf; the peer may be gone, hence MSG_NOSIGNAL (no SIGPIPE). */
static int bk_broker_send_all(int fd, const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t n = send(fd, buf, len, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            return -1;
        }
        buf += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Runs one command line (no newline) and formats its one-line reply. */
static void bk_broker_ctl_exec(bk_broker_t *broker, char *line, char *reply, size_t reply_size)
{
    char err[512];
    char *argv[6];
    int argc = 0;
    int n;
    char *save = NULL;

    for (char *tok = strtok_r(line, " \t", &save); tok; tok = strtok_r(NULL, " \t", &save)) {
        if (argc == 6) {
            break; /* more than any command takes; reported as wrong usage below */
        }
        argv[argc++] = tok;
    }

    if (argc == 0) {
        snprintf(reply, reply_size, "ERR empty command");
    } else if (!strcasecmp(argv[0], "PING")) {
        snprintf(reply, reply_size, argc == 1 ? "OK pong" : "ERR usage: PING");
    } else if (!strcasecmp(argv[0], "BOOTSTRAP")) {
        if (argc == 1) {
            snprintf(reply, reply_size, "OK %s", bk_broker_bootstrap(broker));
        } else {
            snprintf(reply, reply_size, "ERR usage: BOOTSTRAP");
        }
    } else if (!strcasecmp(argv[0], "CREATE")) {
        if (argc != 3) {
            snprintf(reply, reply_size, "ERR usage: CREATE <topic> <partitions>");
        } else if (bk_broker_parse_int(argv[2], 1, BK_BROKER_MAX_PARTITIONS, &n) != 0) {
            snprintf(reply, reply_size, "ERR invalid partition count '%.20s': 1..%d", argv[2],
                     BK_BROKER_MAX_PARTITIONS);
        } else if (bk_broker_create_topic(broker, argv[1], n, err, sizeof(err)) != 0) {
            snprintf(reply, reply_size, "ERR %s", err);
        } else {
            snprintf(reply, reply_size, "OK");
        }
    } else if (!strcasecmp(argv[0], "DOWN") || !strcasecmp(argv[0], "UP")) {
        int down = !strcasecmp(argv[0], "DOWN");
        if (argc != 2) {
            snprintf(reply, reply_size, "ERR usage: %s <broker-id>", down ? "DOWN" : "UP");
        } else if (bk_broker_parse_int(argv[1], 1, broker->brokers, &n) != 0) {
            snprintf(reply, reply_size, "ERR invalid broker id '%.20s': 1..%d", argv[1],
                     broker->brokers);
        } else if (bk_broker_set_down(broker, n, down, err, sizeof(err)) != 0) {
            snprintf(reply, reply_size, "ERR %s", err);
        } else {
            bk_broker_log("broker %d %s", n, down ? "down" : "up");
            snprintf(reply, reply_size, "OK");
        }
    } else if (!strcasecmp(argv[0], "ERRORS")) {
        /* ERRORS <broker-id> <api> <count> <code> [<rtt-ms>]: the broker's next <count>
         * requests of <api> (produce, fetch, or an API key) fail with Kafka error <code>,
         * each answered after <rtt-ms> */
        int api = -1, count = 0, code = 0, rtt = 0;
        if (argc == 5 || argc == 6) {
            api = !strcasecmp(argv[2], "produce") ? 0 : !strcasecmp(argv[2], "fetch") ? 1 : -1;
            if (api < 0 && bk_broker_parse_int(argv[2], 0, 100, &api) != 0) {
                api = -1;
            }
        }
        if (api < 0 || bk_broker_parse_int(argv[1], 1, broker->brokers, &n) != 0 ||
            bk_broker_parse_int(argv[3], 1, 1000, &count) != 0 ||
            bk_broker_parse_int(argv[4], 1, 1000, &code) != 0 ||
            (argc == 6 && bk_broker_parse_int(argv[5], 0, 60000, &rtt) != 0)) {
            snprintf(reply, reply_size,
                     "ERR usage: ERRORS <broker-id 1..%d> <produce|fetch|api-key> <count 1..1000> "
                     "<error-code 1..1000> [<rtt-ms 0..60000>]",
                     broker->brokers);
        } else if (bk_broker_push_errors(broker, n, api, count, code, rtt, err, sizeof(err)) != 0) {
            snprintf(reply, reply_size, "ERR %s", err);
        } else {
            bk_broker_log("broker %d: the next %d request(s) of API %d fail with %s", n, count, api,
                          rd_kafka_err2str((rd_kafka_resp_err_t)code));
            snprintf(reply, reply_size, "OK");
        }
    } else {
        snprintf(reply, reply_size,
                 "ERR unknown command '%.40s' (PING, CREATE, DOWN, UP, ERRORS, BOOTSTRAP)",
                 argv[0]);
    }
}

/* Serves one connection until EOF, an error, idle timeout, or stop. Returns 1
 * when asked to stop. */
static int bk_broker_ctl_serve(bk_broker_t *broker, int fd)
{
    char buf[BK_BROKER_LINE_MAX];
    char reply[4096];
    size_t len = 0;

    for (;;) {
        struct pollfd pfd[2] = {{.fd = fd, .events = POLLIN},
                                {.fd = broker->stop_pipe[0], .events = POLLIN}};
        char *nl;
        ssize_t n;
        int r = poll(pfd, 2, BK_BROKER_IDLE_MS);

        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r < 0) {
            return 0;
        }
        if (pfd[1].revents) {
            return 1;
        }
        if (r == 0) {
            return 0; /* idle: let the next client in */
        }

        n = recv(fd, buf + len, BK_BROKER_LINE_MAX - len, 0);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0) {
            return 0;
        }
        if (n == 0) {
            if (len == 0) {
                return 0;
            }
            /* EOF after a last line without its newline (`printf PING | nc`):
             * answer it, then the next round sees EOF with nothing left. */
            buf[len] = '\n';
            n = 1;
        }
        len += (size_t)n;

        /* Execute each complete line; keep the partial tail for the next read. */
        while ((nl = memchr(buf, '\n', len)) != NULL) {
            size_t line_len = (size_t)(nl - buf);
            *nl = '\0';
            if (line_len > 0 && buf[line_len - 1] == '\r') {
                buf[line_len - 1] = '\0'; /* tolerate CRLF from telnet-like clients */
            }
            bk_broker_ctl_exec(broker, buf, reply, sizeof(reply) - 1);
            strcat(reply, "\n");
            if (bk_broker_send_all(fd, reply, strlen(reply)) != 0) {
                return 0;
            }
            len -= line_len + 1;
            memmove(buf, nl + 1, len);
        }
        if (len == BK_BROKER_LINE_MAX) {
            static const char too_long[] = "ERR line too long\n";
            (void)bk_broker_send_all(fd, too_long, sizeof(too_long) - 1);
            return 0; /* the rest of that line cannot be told from a new one */
        }
    }
}

/* The control thread: accepts connections and serves them one at a time.
 * @locality control thread */
void *bk_broker_ctl_main(void *arg)
{
    bk_broker_t *broker = arg;

    for (;;) {
        struct pollfd pfd[2] = {{.fd = broker->listen_fd, .events = POLLIN},
                                {.fd = broker->stop_pipe[0], .events = POLLIN}};
        struct timeval tv = {.tv_sec = BK_BROKER_SEND_TIMEOUT_S};
        int fd;
        int stop;

        if (poll(pfd, 2, -1) < 0) {
            if (errno == EINTR) {
                continue;
            }
            bk_broker_log("control channel: poll: %s", strerror(errno));
            return NULL;
        }
        if (pfd[1].revents) {
            return NULL;
        }
        fd = accept4(broker->listen_fd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0) {
            /* The listener is non-blocking: a client that gave up between poll
             * and accept leaves EAGAIN or ECONNABORTED, neither fatal. */
            continue;
        }
        /* A client that stops reading must not hang the channel. */
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
        stop = bk_broker_ctl_serve(broker, fd);
        close(fd);
        if (stop) {
            return NULL;
        }
    }
}

/* Binds the control listener to 127.0.0.1 on an ephemeral port. */
int bk_broker_ctl_listen(bk_broker_t *broker, char *errstr, size_t errstr_size)
{
    struct sockaddr_in sin = {
        .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK), .sin_port = 0};
    socklen_t sin_len = sizeof(sin);

    broker->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (broker->listen_fd < 0 || bind(broker->listen_fd, (struct sockaddr *)&sin, sizeof(sin)) ||
        listen(broker->listen_fd, 16) ||
        getsockname(broker->listen_fd, (struct sockaddr *)&sin, &sin_len)) {
        snprintf(errstr, errstr_size, "control channel on 127.0.0.1: %s", strerror(errno));
        return -1;
    }
    broker->port = ntohs(sin.sin_port);
    return 0;
}
