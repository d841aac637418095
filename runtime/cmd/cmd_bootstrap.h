/* cmd_bootstrap.h - `beck bootstrap`: asks a running app to rebuild a task's standby replica by
 * cold bootstrap (bootstrap.h), through a note on the app's control topic. */
#ifndef BK_CMD_BOOTSTRAP_H
#define BK_CMD_BOOTSTRAP_H

int bk_cmd_bootstrap_main(int argc, char **argv);

#endif
