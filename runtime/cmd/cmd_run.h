/* cmd_run.h - `beck run TOPOLOGY.lua`: one node of an app. Reads the settings, loads the
 * topology and the node's hooks, connects to Kafka (or hosts an embedded dev broker),
 * creates the topics the app needs (engine/topics.h), then runs the node (node/node.h):
 * alone it takes every task; with --cluster it takes what the app's membership gives it. */
#ifndef BK_CMD_RUN_H
#define BK_CMD_RUN_H

/* Returns the process exit status: 0 clean stop, 1 runtime failure, 2 usage. */
int bk_cmd_run_main(int argc, char **argv);

#endif
