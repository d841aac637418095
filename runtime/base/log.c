/* log.c - thread-safe line logging to stderr. */
#include "base/log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

/* Set at start-up, read by every thread: relaxed is enough (a late reader logs one line
 * at the old level). */
static atomic_int log_level = BK_LOG_INFO;
static __thread char thread_name[24] = "main";
static const char *level_names[] = {"ERROR", "WARN", "INFO", "DEBUG"};

void bk_log_set_level(bk_log_level_t level)
{
    atomic_store_explicit(&log_level, (int)level, memory_order_relaxed);
}

bk_log_level_t bk_log_get_level(void)
{
    return (bk_log_level_t)atomic_load_explicit(&log_level, memory_order_relaxed);
}

int bk_log_parse_level(const char *name)
{
    static const char *names[] = {"error", "warn", "info", "debug"};
    for (int i = 0; i < 4; i++) {
        if (strcmp(name, names[i]) == 0) {
            return i;
        }
    }
    return -1;
}

void bk_log_set_thread_name(const char *name)
{
    snprintf(thread_name, sizeof(thread_name), "%s", name);
}

void bk_log(bk_log_level_t level, const char *fmt, ...)
{
    char line[4096];
    struct timeval tv;
    struct tm tm;
    va_list ap;
    int n;

    if ((int)level > atomic_load_explicit(&log_level, memory_order_relaxed)) {
        return;
    }
    gettimeofday(&tv, NULL);
    gmtime_r(&tv.tv_sec, &tm);
    n = snprintf(line, sizeof(line), "%02d:%02d:%02d.%03d %-5s [%s] ", tm.tm_hour, tm.tm_min,
                 tm.tm_sec, (int)(tv.tv_usec / 1000), level_names[level], thread_name);
    va_start(ap, fmt);
    n += vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
    va_end(ap);
    if (n > (int)sizeof(line) - 2) {
        n = (int)sizeof(line) - 2;
    }
    line[n++] = '\n';
    /* One write per line so that lines of several threads never interleave. */
    if (write(STDERR_FILENO, line, (size_t)n) < 0) {
        /* nowhere left to report it */
    }
}

/* A name from outside, fit to quote in an error: at most 64 bytes, controls as '?'. */
const char *bk_log_shown(const char *s, char *buf, size_t size)
{
    size_t i = 0;
    for (; s[i] && i + 4 < size && i < 64; i++) {
        unsigned char c = (unsigned char)s[i];
        buf[i] = c < 0x20 || c >= 0x7f ? '?' : (char)c;
    }
    if (s[i]) {
        buf[i++] = '.';
        buf[i++] = '.';
        buf[i++] = '.';
    }
    buf[i] = '\0';
    return buf;
}
