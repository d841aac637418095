/* clock.h - the two clocks beck reads: the wall clock (record timestamps, snapshot and
 * heartbeat times: comparable across nodes) and the monotonic clock (timeouts, durations:
 * never goes back). Every module reads time through these, so a test build could fake it
 * in one place. (A condition variable's deadline is a struct timespec of its own clock:
 * the two waits that need one, in devbroker/broker.c and replica/sftp.c, read it there.)
 * Any thread. */
#ifndef BK_CLOCK_H
#define BK_CLOCK_H

#include <stdint.h>

/* Milliseconds since the Unix epoch (CLOCK_REALTIME). */
int64_t bk_clock_wall_ms(void);
/* Milliseconds on the monotonic clock (CLOCK_MONOTONIC); only differences mean anything. */
int64_t bk_clock_mono_ms(void);
/* The monotonic clock in seconds, for rates and progress lines. */
double bk_clock_mono_s(void);
/* Sleeps ms milliseconds (a retry's back-off). */
void bk_clock_sleep_ms(int64_t ms);

#endif
