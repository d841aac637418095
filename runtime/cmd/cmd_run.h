/* cmd_run.h - `beck run`: one node of an app. Loads the topology, connects to the
 * cluster (or hosts an embedded dev broker), creates the topics the app needs,
 * splits its tasks over the stream threads and runs them until SIGINT/SIGTERM
 * (a second signal aborts) or a failure. Membership across nodes is the
 * cluster issue's; today a node takes every task of its app. */
#ifndef BK_CMD_RUN_H
#define BK_CMD_RUN_H

/* Returns the process exit status: 0 clean stop, 1 runtime failure, 2 usage. */
int bk_cmd_run_main(int argc, char **argv);

#endif
