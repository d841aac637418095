/* bootcmd.h - `beck bootstrap`: asks a running app to rebuild a task's standby replica by
 * cold bootstrap (bootstrap.h), through a note on the app's control topic. */
#ifndef BK_BOOTCMD_H
#define BK_BOOTCMD_H

int bk_bootcmd_main(int argc, char **argv);

#endif
