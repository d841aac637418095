/* cmd_query.h - `beck get` and `beck scan`: read an app's state through the query server of
 * any of its nodes (docs/queries.md), found through the app's control topic (or named with
 * --endpoint). They only read. */
#ifndef BK_CMD_QUERY_H
#define BK_CMD_QUERY_H

/* argv[0] is "get": prints the key's JSON answer. 0 found, 1 not found or no answer, 2 bad
 * arguments. */
int bk_cmd_get_main(int argc, char **argv);
/* argv[0] is "scan": prints each page of a range or prefix as a JSON line, following the
 * cursor. 0, 1 no answer, 2 bad arguments. */
int bk_cmd_scan_main(int argc, char **argv);

#endif
