/* events.h - a node's structured events: what it did, as one JSON object each, for programs
 * (specs, operators' tools) beside the log lines people read (docs/events.md).
 *
 * An event is {"seq":N,"time":MS,"node":"ID","kind":"KIND",...its own members}: seq counts
 * from 1 in this process, time is the wall clock in ms. They go to the file the `events`
 * setting names (one object a line, appended, flushed at each), and the newest
 * BK_EVENTS_KEEP stay in memory for /v1/events (query/), read from any thread.
 * Emitted where a node changes what it runs, never per record. @locality any thread */
#ifndef BK_EVENTS_H
#define BK_EVENTS_H

#include <stddef.h>
#include <stdint.h>

#define BK_EVENTS_KEEP 4096

/* Starts the events of this process, written to `path` too (NULL: in memory only), each
 * naming `node`. 0, or -1 with err set (the file cannot be opened). */
int bk_events_open(const char *path, const char *node, char *err, size_t errsz);

/* Names the node in the events after this one (its id is known once its membership is). */
void bk_events_set_node(const char *node);

/* Ends them: the file closed, the memory freed. */
void bk_events_close(void);

/* One event of kind `kind`; fmt (printf) gives its own members, written after "kind", as
 * JSON text: "\"task\":\"0_3\",\"records\":12" (NULL or "": none). Strings from outside
 * (names, errors) go through bk_events_str. Nothing happens before bk_events_open. */
void bk_events_emit(const char *kind, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* `s` as a JSON string, quotes included, in buf (cut to fit); returns buf. */
const char *bk_events_str(char *buf, size_t size, const char *s);

/* Space-separated words ("0_1 0_2") as a JSON array of strings in buf; returns buf. */
const char *bk_events_words(char *buf, size_t size, const char *words);

/* The events after seq `after` still in memory, at most `max`, as a JSON array in *out
 * (malloc'd, *len bytes); *next is the seq to ask after next time, *first the oldest seq
 * still kept (a reader whose `after` is below first - 1 missed some). 0, or -1 (memory). */
int bk_events_since(int64_t after, int max, char **out, size_t *len, int64_t *next,
                    int64_t *first);

#endif
