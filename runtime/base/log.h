/* log.h - beck's log: one line per event on stderr, with time, level and the
 * name of the thread that wrote it. Thread-safe (one write(2) per line).
 * The level is set once at start (--log-level / BECK_LOG_LEVEL). */
#ifndef BK_LOG_H
#define BK_LOG_H

#include <stddef.h>

typedef enum { BK_LOG_ERROR = 0, BK_LOG_WARN, BK_LOG_INFO, BK_LOG_DEBUG } bk_log_level_t;

void bk_log_set_level(bk_log_level_t level);
bk_log_level_t bk_log_get_level(void);
/* Parses "error", "warn", "info" or "debug"; -1 if unknown. */
int bk_log_parse_level(const char *name);
/* Names the calling thread in its log lines ("main", "stream-0", ...). */
void bk_log_set_thread_name(const char *name);

void bk_log(bk_log_level_t level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define bk_log_error(...) bk_log(BK_LOG_ERROR, __VA_ARGS__)
#define bk_log_warn(...) bk_log(BK_LOG_WARN, __VA_ARGS__)
#define bk_log_info(...) bk_log(BK_LOG_INFO, __VA_ARGS__)
#define bk_log_debug(...) bk_log(BK_LOG_DEBUG, __VA_ARGS__)

/* Text from outside (a file name, a key), fit to quote in a message: at most 64 bytes,
 * control bytes as '?', "..." when cut. Returns buf. */
const char *bk_log_shown(const char *s, char *buf, size_t size);

#endif
